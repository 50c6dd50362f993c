//! Results of admitted calls: `succeeded` merges the output label into the
//! context, adds discovered resources and establishes facts; `failed`
//! returns the units; `unknown` keeps them spent and merges the output.

use super::{Held, Session};
use crate::decision::{Applied, Note, Rule, StepError};
use crate::event::{Outcome, Report};
use crate::graph::{Node, NodeId, Status, Trust};
use std::sync::Arc;

impl Session {
    /// Applies the result of an admitted call.
    pub fn report(&mut self, report: &Report) -> Result<Applied, StepError> {
        let time = self.advance_time(report.time)?;
        let node = self.node_in(&report.call, Status::Running, "a result")?;
        let Some(n) = self.state.graph.node(node).copied() else {
            return Err(StepError::UnknownCall(report.call.clone()));
        };
        self.state.time = time;
        self.state.seq += 1;
        let held = self.state.held.remove(&node).unwrap_or(Held {
            grants: Default::default(),
            charges: Default::default(),
            lent: Default::default(),
            admitted_at: self.state.seq,
            pending: None,
            // Fail closed: fields join the whole call's label.
            field_base: n.label,
        });
        let rule = held.grants.first().map(|&g| Rule::Grant(g));
        let policy = Arc::clone(&self.shared.0.policy);

        match report.status {
            Outcome::Failed => {
                self.set_status(node, Status::Failed);
                self.refund(&held.grants, &held.charges);
                self.give_back_lent(&held.lent);
                Ok(self.applied(node, rule, vec![Note::Failed], held.grants.to_vec()))
            }
            Outcome::Unknown => {
                self.set_status(node, Status::Unknown);
                self.read_output(node, &n, held.field_base, report, Trust::Policy);
                Ok(self.applied(node, rule, vec![Note::Unknown], vec![]))
            }
            Outcome::Succeeded => {
                self.set_status(node, Status::Succeeded);
                self.read_output(node, &n, held.field_base, report, Trust::Observed);
                let mut notes = vec![Note::Succeeded];
                let target = held
                    .grants
                    .first()
                    .and_then(|&g| policy.grants[g].discovers);
                if let Some(set) = target {
                    let before = self.state.sets[set].len();
                    self.state.sets[set].extend(report.discovered.iter().cloned());
                    notes.push(Note::Discovered {
                        set,
                        new: self.state.sets[set].len() - before,
                    });
                }
                if let Some(tool) = policy.tools.get(n.tool as usize) {
                    for rule in &tool.facts {
                        let holds = rule
                            .when
                            .as_ref()
                            .is_none_or(|t| t.holds(&report.output, &self.state.sets));
                        if holds {
                            let seen = self.state.fact_seen.slot(rule.fact, policy.facts.len());
                            *seen =
                                Some(seen.map_or(held.admitted_at, |s| s.max(held.admitted_at)));
                            notes.push(Note::FactSeen(rule.fact));
                        }
                    }
                }
                Ok(self.applied(node, rule, notes, vec![]))
            }
        }
    }

    /// The output may have been read: its label joins the contexts and,
    /// with provenance by value or token tests, its words are indexed, each
    /// with the label of its field (`field_base` joined with the field's
    /// declared label; the whole output's label for undeclared fields).
    fn read_output(
        &mut self,
        node: NodeId,
        n: &Node,
        field_base: crate::label::Label,
        report: &Report,
        trust: Trust,
    ) {
        self.merge_into_contexts(node, n.agent as usize, n.label, trust);
        let by_value = self.shared.0.policy.provenance_by_value;
        let tokens = self.shared.0.index.has_token_tests;
        if !by_value && !tokens {
            return;
        }
        let labels = self
            .shared
            .0
            .policy
            .output_labels(n.tool as usize, n.label, field_base);
        if by_value {
            self.state.values.add_output(node, &labels, &report.output);
        }
        if tokens {
            self.state.tokens.add_output(&labels, &report.output);
        }
    }
}
