//! Approvals and rejections of paused calls.
//!
//! Approval is a just-in-time re-authorization, not a rubber stamp: flows
//! (step 3) and call rules, path rules, counts and obligations (step 4)
//! are checked again against the session *at approval time* (other calls
//! may have run since the pause). A `deny` that now fires answers DENY and
//! returns the reserved units; `pause` effects are what the human just
//! answered. The ledger is not re-checked: the units were reserved while
//! the grant was valid.

use super::Session;
use crate::decision::{Decision, DecisionPath, Reason, Rule, StepError, Verdict};
use crate::event::Resolve;
use crate::graph::Status;
use crate::policy::RuleEffect;

impl Session {
    pub(crate) fn approve_at(&mut self, a: &Resolve) -> Result<Decision, StepError> {
        let time = self.advance_time(a.time)?;
        let node = self.node_in(&a.call, Status::Paused, "an approval")?;
        // A paused call always holds its units and its resolved call.
        let Some(held) = self.state.held.get(&node).cloned() else {
            return Err(StepError::UnknownCall(a.call.clone()));
        };
        let Some(pending) = held.pending.as_deref() else {
            return Err(StepError::UnknownCall(a.call.clone()));
        };
        self.state.time = time;
        self.state.seq += 1;
        let seq = self.state.seq;
        let tool = Some(pending.req.tool);
        let labels = self.call_labels(pending);
        let flows = self.check_flows(pending, &labels, false);
        let denial = match flows.deny {
            Some(hit) => {
                let (rule, reason) = hit.rule_and_reason();
                let path = self.flow_path(node, &hit, &labels, pending);
                Some((rule, reason, path.into()))
            }
            None => self
                .history_violations(node, pending)
                .into_iter()
                .find(|v| v.effect == RuleEffect::Deny)
                .map(|v| (v.rule, v.reason, v.path)),
        };
        if let Some((rule, reason, path)) = denial {
            self.state.held.remove(&node);
            self.set_status(node, Status::Denied);
            self.refund(&held.grants, &held.charges);
            self.give_back_lent(&held.lent);
            let mut d = self.decide(
                Verdict::Deny,
                rule,
                Reason::RecheckFailed(Box::new(reason)),
                node,
                tool,
                path,
                vec![],
            );
            d.refunded = held.grants.to_vec();
            return Ok(d);
        }
        if let Some(h) = self.state.held.get_mut(&node) {
            h.admitted_at = seq;
            h.pending = None;
        }
        self.admit(node, pending, seq);
        let own = held.grants.first().copied().unwrap_or_default();
        Ok(self.decide(
            Verdict::Allow,
            Rule::Grant(own),
            Reason::Approved,
            node,
            tool,
            DecisionPath::default(),
            held.grants.to_vec(),
        ))
    }

    pub(crate) fn reject_at(&mut self, r: &Resolve) -> Result<crate::decision::Applied, StepError> {
        let time = self.advance_time(r.time)?;
        let node = self.node_in(&r.call, Status::Paused, "a rejection")?;
        self.state.time = time;
        self.state.seq += 1;
        let (held, charges, lent) = self
            .state
            .held
            .remove(&node)
            .map(|h| (h.grants.to_vec(), h.charges, h.lent))
            .unwrap_or_default();
        self.set_status(node, Status::Rejected);
        self.refund(&held, &charges);
        self.give_back_lent(&lent);
        let rule = held.first().map(|&g| Rule::Grant(g));
        Ok(self.applied(node, rule, vec![crate::decision::Note::Rejected], held))
    }
}
