//! Step 4: call rules, path rules, counts and obligations, over the
//! session's admitted calls (ALLOWed, or PAUSEd and then approved).
//!
//! A call rule (`deny call TOOL when ...`) judges the call's own arguments.
//! Path rules run as automata: greedy leftmost matching is exact for "the
//! steps occur in this order, anything in between", so one counter per rule
//! suffices. A step's argument condition and `reads(P)` are judged when a
//! call is admitted (discovered sets as they were then).

use super::index::StepByTool;
use super::wellformed::Resolved;
use super::Session;
use crate::decision::{DecisionPath, Reason, Rule};
use crate::graph::{Node, NodeId};
use crate::policy::{PathKind, RuleEffect, StepPattern};

/// A rule the call would break.
#[derive(Clone, Debug)]
pub(crate) struct Violation {
    pub rule: Rule,
    pub reason: Reason,
    pub effect: RuleEffect,
    /// Earlier admitted calls that make up the violation, then the call
    /// (just the call for call rules, nothing for counts: the reason says
    /// why); for a flow, found when read.
    pub path: DecisionPath,
}

impl Session {
    /// Whether the call at `node` (resolved as `r`) matches a step.
    pub(crate) fn step_matches(
        &self,
        by_tool: &StepByTool,
        step: &StepPattern,
        node: &Node,
        r: &Resolved,
    ) -> bool {
        step_matches(by_tool, step, node, r, &self.state.sets, &self.state.tokens)
    }

    /// Every call rule, path rule, count and obligation the call would break.
    pub(crate) fn history_violations(&self, node: NodeId, r: &Resolved) -> Vec<Violation> {
        let policy = &*self.shared.0.policy;
        let mut out = Vec::new();
        let Some(n) = self.state.graph.node(node).copied() else {
            return out;
        };
        for &c in &self.shared.0.index.call_rules_for_tool[r.req.tool] {
            let rule = &policy.call_rules[c];
            if rule.when.eval_with(
                &r.req.args,
                r.req.agent,
                &self.state.sets,
                &self.state.tokens,
            ) {
                out.push(Violation {
                    rule: Rule::Call(c),
                    reason: Reason::CallForbidden,
                    effect: rule.effect,
                    path: vec![node].into(),
                });
            }
        }
        for (i, rule) in policy.path_rules.iter().enumerate() {
            let progress = self.state.path_progress.value(i);
            let steps = &self.shared.0.index.path_steps[i];
            match &rule.kind {
                PathKind::Sequence(pattern) => {
                    let last = pattern.len().saturating_sub(1);
                    if progress as usize >= last
                        && pattern
                            .get(last)
                            .is_some_and(|s| self.step_matches(&steps[last], s, &n, r))
                    {
                        let mut path = self.state.path_witness.at(i).cloned().unwrap_or_default();
                        path.push(node);
                        out.push(Violation {
                            rule: Rule::Path(i),
                            reason: Reason::PathCompleted,
                            effect: rule.effect,
                            path: path.into(),
                        });
                    }
                }
                PathKind::AtMost { max, step } => {
                    let full = match policy.count_window(i) {
                        None => progress >= *max,
                        Some(w) => {
                            window_full(self.state.count_times.at(i), *max, w, self.state.time)
                        }
                    };
                    if full && self.step_matches(&steps[0], step, &n, r) {
                        out.push(Violation {
                            rule: Rule::Path(i),
                            reason: Reason::CountExceeded { max: *max },
                            effect: rule.effect,
                            path: DecisionPath::default(),
                        });
                    }
                }
            }
        }
        for (o, ob) in policy.obligations.iter().enumerate() {
            if !self.shared.0.index.obligation_before[o][n.tool as usize] {
                continue;
            }
            let since = self.state.since_seen.value(o);
            let met = match (self.state.fact_seen.value(ob.fact), since) {
                (None, _) => false,
                (Some(_), None) => true,
                (Some(f), Some((s, _))) => f > s,
            };
            if !met {
                // The path: the call the fact should have followed, then this one.
                let path = since.map(|(_, n)| n).into_iter().chain([node]).collect();
                out.push(Violation {
                    rule: Rule::Obligation(o),
                    reason: Reason::ObligationUnmet {
                        fact: ob.fact,
                        since: ob.since.is_some(),
                    },
                    effect: ob.effect,
                    path: DecisionPath::from_nodes(path),
                });
            }
        }
        out
    }

    /// Effects of admission on the history: path automata, counts and
    /// `since` marks move on; the node becomes running.
    pub(crate) fn admit(&mut self, node: NodeId, r: &Resolved, seq: u64) {
        self.set_status(node, crate::graph::Status::Running);
        let Some(n) = self.state.graph.node(node).copied() else {
            return;
        };
        // The policy is borrowed beside the state (no reference count).
        let Session { shared, state, .. } = self;
        let policy = &*shared.0.policy;
        let index = &*shared.0.index;
        let rules = policy.path_rules.len();
        for (i, rule) in policy.path_rules.iter().enumerate() {
            if let (Some(reset), Some(by_tool)) = (&rule.reset, &index.path_reset[i]) {
                if step_matches(by_tool, reset, &n, r, &state.sets, &state.tokens) {
                    *state.path_progress.slot(i, rules) = 0;
                    if let Some(w) = state.path_witness.0.get_mut(i) {
                        w.clear();
                    }
                    if let Some(t) = state.count_times.0.get_mut(i) {
                        t.clear();
                    }
                }
            }
            let progress = state.path_progress.value(i);
            let steps = &index.path_steps[i];
            match &rule.kind {
                PathKind::Sequence(pattern) => {
                    let k = progress as usize;
                    if k + 1 < pattern.len()
                        && step_matches(&steps[k], &pattern[k], &n, r, &state.sets, &state.tokens)
                    {
                        *state.path_progress.slot(i, rules) += 1;
                        state.path_witness.slot(i, rules).push(node);
                    }
                }
                PathKind::AtMost { step, max } => {
                    if step_matches(&steps[0], step, &n, r, &state.sets, &state.tokens) {
                        *state.path_progress.slot(i, rules) += 1;
                        if let Some(w) = policy.count_window(i) {
                            let now = state.time;
                            let times = state.count_times.slot(i, rules);
                            times.push_back(now);
                            let keep = usize::try_from(*max).unwrap_or(usize::MAX);
                            while times.len() > keep
                                || times.front().is_some_and(|&a| now.saturating_sub(a) >= w)
                            {
                                times.pop_front();
                            }
                        }
                    }
                }
            }
        }
        for o in 0..policy.obligations.len() {
            if let Some(ok) = &index.obligation_since[o] {
                if ok.get(n.tool as usize).copied().unwrap_or(false) {
                    *state.since_seen.slot(o, policy.obligations.len()) = Some((seq, node));
                }
            }
        }
    }
}

/// Whether the call at `node` (resolved as `r`) matches a step, with the
/// discovered sets `sets` and token origins `tokens`.
fn step_matches(
    by_tool: &StepByTool,
    step: &StepPattern,
    node: &Node,
    r: &Resolved,
    sets: &[std::collections::BTreeSet<String>],
    tokens: &dyn crate::tokens::TokenJudge,
) -> bool {
    by_tool
        .get(node.tool as usize)
        .and_then(Option::as_ref)
        .is_some_and(|cond| {
            step.reads.is_none_or(|p| p.matches(&node.label))
                && cond.eval_with(&r.req.args, r.req.agent, sets, tokens)
        })
}

/// Whether a count `within` a window of `secs` seconds has `max` calls
/// inside the window at time `now`, from the latest admission times
/// `times` (oldest first, at most `max` of them): `max` of them are kept
/// and the oldest is less than `secs` old (times never decrease).
fn window_full(
    times: Option<&std::collections::VecDeque<u64>>,
    max: u64,
    secs: u64,
    now: u64,
) -> bool {
    if max == 0 {
        return true;
    }
    let Some(times) = times else {
        return false;
    };
    times.len() as u64 >= max && times.front().is_some_and(|&a| now.saturating_sub(a) < secs)
}
