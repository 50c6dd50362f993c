//! Step 5: the ledger. For the calling agent and each delegator up to
//! `main`, the first grant (in policy order) that matches the call and has
//! quota left serves it; one unit of each is taken, all or nothing.

use super::wellformed::Resolved;
use super::Session;
use crate::decision::Reason;
use crate::policy::GrantId;
use crate::spec;

impl Session {
    /// The serving grant of every agent on the chain, or why there is none.
    pub(crate) fn select_chain(&self, r: &Resolved) -> Result<Vec<GrantId>, Reason> {
        let policy = &*self.shared.policy;
        let candidates = &self.shared.index.grants_for_tool[r.req.tool];
        let mut chosen = Vec::with_capacity(1);
        for agent in policy.chain_iter(r.req.agent) {
            let mut exhausted = None;
            let found = candidates.iter().copied().find(|&g| {
                if !spec::grant_matches(policy, &policy.grants[g], agent, &r.req, &self.state.sets)
                {
                    return false;
                }
                if self.state.ledger.has_quota(g) {
                    true
                } else {
                    exhausted.get_or_insert(g);
                    false
                }
            });
            match found {
                Some(g) => chosen.push(g),
                None => return Err(Reason::NoGrant { agent, exhausted }),
            }
        }
        Ok(chosen)
    }

    /// Takes one unit of each grant.
    pub(crate) fn consume(&mut self, grants: &[GrantId]) {
        for &g in grants {
            // Unlimited grants never change: nothing is recorded for them.
            self.state.ledger.consume(g);
        }
    }

    /// Gives back the units a call took (a failed call, a rejection, an
    /// approval whose re-check denies).
    pub(crate) fn refund(&mut self, grants: &[GrantId]) {
        for &g in grants {
            self.state.ledger.refund(&self.shared.policy, g);
        }
    }
}
