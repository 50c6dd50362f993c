//! The user's request (`task` events): a trusted node in the graph, the
//! text provenance by value compares arguments with, values seeded into
//! discovered sets the policy lets tasks seed, and a scope that narrows
//! (never widens) the policy's static scopes.

use super::{Session, CONTEXT};
use crate::decision::{Applied, Note, StepError};
use crate::event::Task;
use crate::graph::{EdgeKind, Evidence, Node, NodeKind, Status, Trust, NO_PARAM, NO_TOOL};
use crate::label::Label;
use crate::value::SetId;

impl Session {
    pub(crate) fn task(&mut self, t: &Task) -> Result<Applied, StepError> {
        let time = self.advance_time(t.time)?;
        if self.state.calls.contains_key(&t.id) {
            return Err(StepError::DuplicateCall(t.id.clone()));
        }
        if self.state.graph.len() >= u32::MAX as usize {
            return Err(StepError::GraphFull);
        }
        if t.id.len() >= u32::MAX as usize {
            return Err(StepError::IdTooLong(t.id.len()));
        }
        // Check every seeded set before changing anything.
        let mut seeds: Vec<(SetId, &Vec<String>)> = Vec::with_capacity(t.sets.len());
        for (name, values) in &t.sets {
            let set = self
                .shared
                .0
                .policy
                .sets
                .iter()
                .position(|s| s == name)
                .ok_or_else(|| StepError::UnknownSet {
                    task: t.id.clone(),
                    set: name.clone(),
                })?;
            if !self.shared.0.policy.task_seeds.contains(&set) {
                return Err(StepError::NotSeedable {
                    task: t.id.clone(),
                    set: name.clone(),
                });
            }
            seeds.push((set, values));
        }
        self.state.time = time;
        self.state.seq += 1;
        let node = self.state.graph.push_node(Node {
            kind: NodeKind::Task,
            status: Status::Task,
            evidence: Evidence::Policy,
            agent: 0,
            tool: NO_TOOL,
            label: Label::BOTTOM,
            time,
            first_edge: 0,
        });
        self.state.calls.insert(t.id.clone(), node);
        // The agents read the task: an edge into the context (its label,
        // trusted and lowest, changes nothing).
        self.state
            .graph
            .push_edge(node, CONTEXT, EdgeKind::Data, Trust::Observed, NO_PARAM);
        if self.shared.0.policy.provenance_by_value {
            self.state.values.add_task(node, &t.text);
        }
        if self.shared.0.index.has_token_tests {
            self.state.tokens.add_task(&t.text);
        }
        let mut notes = vec![Note::TaskRecorded(t.id.clone())];
        for (set, values) in seeds {
            let before = self.state.sets[set].len();
            for v in values {
                if self.state.sets[set].insert(v.clone()) {
                    self.state.seeded.push((set, v.clone(), node));
                }
            }
            notes.push(Note::Seeded {
                set,
                new: self.state.sets[set].len() - before,
            });
        }
        if let Some(scope) = &t.scope {
            self.state.task_scope = Some(scope.clone());
            notes.push(Note::ScopeOpened);
        }
        Ok(self.applied(node, None, notes, vec![]))
    }
}
