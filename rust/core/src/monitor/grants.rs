//! Step 5: the ledger. For the calling agent and each delegator up to
//! `main`, the first grant (in policy order) that matches the call and has
//! quota left serves it; one unit of each is taken, all or nothing.
//!
//! A shared grant (`quota N per tenant`) draws on the tenant's pool instead
//! of the session's ledger. With a [`TenantPool`](crate::TenantPool), the
//! pool is locked (and its counts copied into `pool_view`) for a whole
//! decision that may take from it, so that checking and taking are one
//! atomic step; policies without shared grants never lock anything.

use super::wellformed::Resolved;
use super::{CallArg, Session};
use crate::decimal::Decimal;
use crate::decision::Reason;
use crate::policy::{GrantId, Quota};
use crate::pool::TenantPool;
use crate::spec;

impl Session {
    /// The serving grant of every agent on the chain, or why there is none.
    pub(crate) fn select_chain(&self, r: &Resolved) -> Result<Vec<GrantId>, Reason> {
        let policy = &*self.shared.0.policy;
        let candidates = &self.shared.0.index.grants_for_tool[r.req.tool];
        // Allocated on the first grant found: a call no grant serves allocates nothing.
        let mut chosen = Vec::new();
        let any_shared = !policy.shared_grants.is_empty();
        let any_budget = !policy.budgets.is_empty();
        let any_renewal = !policy.renewals.is_empty();
        for agent in policy.chain_iter(r.req.agent) {
            let mut exhausted = None;
            let mut refused = None;
            let found = candidates.iter().copied().find(|&g| {
                if !spec::grant_matches(policy, &policy.grants[g], agent, &r.req, &self.state.sets)
                {
                    return false;
                }
                let left = if any_shared {
                    self.has_quota(g)
                } else {
                    self.state.ledger.has_quota(g)
                };
                if !left {
                    if exhausted.is_none() && refused.is_none() {
                        exhausted = Some(g);
                    }
                    return false;
                }
                if any_budget {
                    if let Err(why) = self.budget_check(g, &r.req) {
                        if exhausted.is_none() && refused.is_none() {
                            refused = Some((g, why));
                        }
                        return false;
                    }
                }
                if any_renewal {
                    if let Err(why) = self.window_check(g, &r.req) {
                        if exhausted.is_none() && refused.is_none() {
                            match why {
                                spec::WindowRefusal::Budget(b) => refused = Some((g, b)),
                                _ => exhausted = Some(g),
                            }
                        }
                        return false;
                    }
                }
                true
            });
            match (found, refused) {
                (Some(g), _) => chosen.push(g),
                (None, Some((grant, refusal))) => {
                    return Err(Reason::NoBudget {
                        agent,
                        grant,
                        refusal: Box::new(refusal),
                    })
                }
                (None, None) => return Err(Reason::NoGrant { agent, exhausted }),
            }
        }
        Ok(chosen)
    }

    /// Whether grant `g`'s budget (if any) pays for `req`: the amount, or
    /// why not. A tenant budget reads the pool (`pool_view`, locked for
    /// the decision); without a tenant pool, the session's own holdings.
    fn budget_check(
        &self,
        g: GrantId,
        req: &spec::Request,
    ) -> Result<Option<Decimal>, spec::BudgetRefusal> {
        let policy = &*self.shared.0.policy;
        let Some(amount) = spec::charge_of(policy, g, req)? else {
            return Ok(None);
        };
        let left = self.budget_left_in_view(g).unwrap_or_default();
        if amount > left {
            return Err(spec::BudgetRefusal::Exceeds { amount, left });
        }
        Ok(Some(amount))
    }

    /// What renewing limit `i` holds for this decision: the tenant's pool
    /// (`pool_view`, locked) for a tenant limit, else the session's own.
    fn window_slot(&self, i: usize) -> Option<(u64, Decimal)> {
        let policy = &*self.shared.0.policy;
        match (&self.options.pool, policy.renewals.get(i)) {
            (Some(_), Some(r)) if r.per_tenant => {
                self.pool_view.window(&crate::window::pool_key(policy, r))
            }
            _ => self.state.ledger.window(i),
        }
    }

    /// Whether grant `g`'s renewing limits (if any) serve `req` in its
    /// window: what the call would hold of each, or why not.
    fn window_check(
        &self,
        g: GrantId,
        req: &spec::Request,
    ) -> Result<crate::window::Lent, spec::WindowRefusal> {
        let policy = &*self.shared.0.policy;
        spec::window_check(policy, g, req, |i| self.window_slot(i))
    }

    /// What is left of each renewing limit of grant `g` in the window of
    /// time `time`: (index into `Policy::renewals`, units or amount left).
    /// Locks the pool for a tenant limit: for displays, not for deciding.
    pub fn window_left(&self, g: GrantId, time: u64) -> Vec<(usize, Decimal)> {
        let policy = &*self.shared.0.policy;
        let counts = match &self.options.pool {
            Some(pool) if policy.has_tenant_renewals() => Some(pool.snapshot()),
            _ => None,
        };
        crate::window::left(policy, g, time, |i| {
            match (&counts, policy.renewals.get(i)) {
                (Some(c), Some(r)) if r.per_tenant => c.window(&crate::window::pool_key(policy, r)),
                _ => self.state.ledger.window(i),
            }
        })
    }

    /// What is left of grant `g`'s budget for this decision (`None`
    /// without one).
    fn budget_left_in_view(&self, g: GrantId) -> Option<Decimal> {
        let policy = &*self.shared.0.policy;
        let b = policy.budget_of(g)?;
        let held = match &self.options.pool {
            Some(_) if b.per_tenant => self.pool_view.spent(&policy.grants.get(g)?.name),
            _ => self.state.ledger.spent(g),
        };
        Some(b.amount.saturating_sub(held))
    }

    /// What is left of grant `g`'s amount budget for this session's next
    /// call (`None` without one): the budget less what this session holds,
    /// or, for a tenant budget, less what the tenant's sessions hold.
    /// Locks the pool for a tenant budget: for displays, not for deciding.
    pub fn budget_left(&self, g: GrantId) -> Option<Decimal> {
        let policy = &*self.shared.0.policy;
        let b = policy.budget_of(g)?;
        let held = match &self.options.pool {
            Some(pool) if b.per_tenant => pool.lock().spent(&policy.grants.get(g)?.name),
            _ => self.state.ledger.spent(g),
        };
        Some(b.amount.saturating_sub(held))
    }

    /// Whether grant `g` has a unit left: in the session's ledger, or, for a
    /// shared grant, in the tenant's pool (`quota − taken`).
    fn has_quota(&self, g: GrantId) -> bool {
        if !self.shared.0.policy.is_shared(g) {
            return self.state.ledger.has_quota(g);
        }
        self.shared_left(g).is_some_and(|n| n > 0)
    }

    /// Units left of shared grant `g` (`None` for any other grant).
    pub(crate) fn shared_left(&self, g: GrantId) -> Option<u64> {
        let policy = &*self.shared.0.policy;
        if !policy.is_shared(g) {
            return None;
        }
        let grant = policy.grants.get(g)?;
        let Quota::Limited(quota) = grant.quota else {
            return None;
        };
        // A private pool: the tenant is this session alone.
        let taken = match self.options.pool {
            Some(_) => self.pool_view.taken(&grant.name),
            None => self.state.ledger.held(g),
        };
        Some(quota.saturating_sub(taken))
    }

    /// What is left of grant `g` for this session's next call: the count in
    /// its ledger, or, for a shared grant (`quota N per tenant`), what the
    /// tenant's pool has left (`quota − taken`; the session's own holdings
    /// without a tenant pool). `None` for an unknown grant. Locks the pool
    /// for a shared grant: for displays, not for deciding.
    pub fn grant_left(&self, g: GrantId) -> Option<Quota> {
        let policy = &*self.shared.0.policy;
        if !policy.is_shared(g) {
            return self.state.ledger.remaining(g);
        }
        let grant = policy.grants.get(g)?;
        let Quota::Limited(quota) = grant.quota else {
            return None;
        };
        let taken = match &self.options.pool {
            Some(pool) => pool.lock().taken(&grant.name),
            None => self.state.ledger.held(g),
        };
        Some(Quota::Limited(quota.saturating_sub(taken)))
    }

    /// Uses `pool` as the tenant's pool from now on, e.g. after restoring
    /// the session by replaying its events without one (so that the replay
    /// took nothing from the pool). The pool's counts must already include
    /// the units this session holds (`SessionState::ledger`'s `held`).
    pub fn attach_pool(&mut self, pool: TenantPool) {
        self.options.pool = Some(pool);
    }

    /// Whether a decision of this session may read or take units of the
    /// tenant's pool: it has one, and the policy shares some grant.
    pub(crate) fn uses_tenant_pool(&self) -> bool {
        let policy = &*self.shared.0.policy;
        self.options.pool.is_some()
            && (!policy.shared_grants.is_empty()
                || policy.has_tenant_budgets()
                || policy.has_tenant_renewals())
    }

    /// Whether deciding `call` may involve a shared grant: the session has
    /// a tenant pool and some grant of the call's tool is shared (a call of
    /// an unknown tool is denied before the ledger).
    pub(crate) fn call_uses_pool(&self, call: &CallArg<'_>) -> bool {
        self.uses_tenant_pool()
            && call.tool_hint(self).is_some_and(|t| {
                self.shared
                    .0
                    .index
                    .grants_for_tool
                    .get(t)
                    .is_some_and(|gs| gs.iter().any(|&g| self.draws_on_pool(g)))
            })
    }

    /// Whether grant `g` takes from the tenant's pool: its quota is shared,
    /// or its budget is.
    fn draws_on_pool(&self, g: GrantId) -> bool {
        let policy = &*self.shared.0.policy;
        policy.is_shared(g)
            || policy.budget_of(g).is_some_and(|b| b.per_tenant)
            || policy.renewals_of(g).any(|i| policy.renewals[i].per_tenant)
    }

    /// Runs `f` with the tenant pool locked and its counts in `pool_view`,
    /// then writes the counts back, when `needed`; otherwise just runs
    /// `f`. `f` works on a copy, so a panic inside leaves the pool as it
    /// was.
    pub(crate) fn with_pool<T>(&mut self, needed: bool, f: impl FnOnce(&mut Session) -> T) -> T {
        let Some(pool) = self.options.pool.clone().filter(|_| needed) else {
            return f(self);
        };
        let mut guard = pool.lock();
        self.pool_view.clone_from(&guard);
        let out = f(self);
        if *guard != self.pool_view {
            guard.clone_from(&self.pool_view);
        }
        out
    }

    /// Takes one unit of each grant (shared ones from the pool, which
    /// `with_pool` holds locked), and spends the call's amount from the
    /// budget of each grant that has one; answers what the call holds of
    /// budgets. `select_chain` chose the grants, so every amount is valid
    /// and fits.
    pub(crate) fn consume(
        &mut self,
        grants: &[GrantId],
        req: &spec::Request,
    ) -> (spec::Charges, crate::window::Lent) {
        let charges = self.consume_units(grants, req);
        let policy = std::sync::Arc::clone(&self.shared.0.policy);
        if policy.renewals.is_empty() {
            return (charges, crate::window::Lent::new());
        }
        let mut lent = crate::window::Lent::new();
        for &g in grants {
            // `select_chain` checked these in the same state: they fit.
            let Ok(part) = self.window_check(g, req) else {
                continue;
            };
            if self.options.pool.is_some() {
                for &(i, w, x) in &part {
                    if let Some(r) = policy.renewals.get(i).filter(|r| r.per_tenant) {
                        let key = crate::window::pool_key(&policy, r);
                        self.pool_view.window_hold(&key, w, x);
                    }
                }
            }
            self.state.ledger.window_hold(&part);
            lent.extend(part);
        }
        (charges, lent)
    }

    /// Gives back what a call was lent by renewing limits, to the windows
    /// that lent it (tenant ones to the pool, never more than this session
    /// holds there).
    pub(crate) fn give_back_lent(&mut self, lent: &[(usize, u64, Decimal)]) {
        if lent.is_empty() {
            return;
        }
        let policy = std::sync::Arc::clone(&self.shared.0.policy);
        let back = self.state.ledger.window_release(lent);
        let tenant = self.options.pool.clone().filter(|_| {
            lent.iter()
                .any(|&(i, _, _)| policy.renewals.get(i).is_some_and(|r| r.per_tenant))
        });
        if let Some(pool) = tenant {
            let mut counts = pool.lock();
            for (&(i, w, _), &x) in lent.iter().zip(&back) {
                if let Some(r) = policy.renewals.get(i).filter(|r| r.per_tenant) {
                    counts.window_give_back(&crate::window::pool_key(&policy, r), w, x);
                }
            }
        }
    }

    fn consume_units(&mut self, grants: &[GrantId], req: &spec::Request) -> spec::Charges {
        let mut charges = spec::Charges::new();
        let policy = std::sync::Arc::clone(&self.shared.0.policy);
        for &g in grants {
            if self.options.pool.is_some() && policy.is_shared(g) {
                self.pool_view.take(&policy.grants[g].name);
            }
            // Unlimited grants never change: nothing is recorded for them.
            self.state.ledger.consume(g);
            if policy.budgets.is_empty() {
                continue;
            }
            if let Ok(Some(amount)) = spec::charge_of(&policy, g, req) {
                if self.options.pool.is_some() && policy.budget_of(g).is_some_and(|b| b.per_tenant)
                {
                    self.pool_view.add_spent(&policy.grants[g].name, amount);
                }
                self.state.ledger.add_spent(g, amount);
                charges.push((g, amount));
            }
        }
        charges
    }

    /// Gives back the units a call took (a failed call, a rejection, an
    /// approval whose re-check denies): shared ones to the pool, never
    /// below zero taken; and the amounts it holds of budgets, tenant ones
    /// to the pool (never more than this session holds).
    pub(crate) fn refund(&mut self, grants: &[GrantId], charges: &[(GrantId, Decimal)]) {
        let policy = std::sync::Arc::clone(&self.shared.0.policy);
        let tenant = self.options.pool.clone().filter(|_| {
            grants
                .iter()
                .any(|&g| policy.is_shared(g) && self.state.ledger.held(g) > 0)
                || charges
                    .iter()
                    .any(|&(g, _)| policy.budget_of(g).is_some_and(|b| b.per_tenant))
        });
        let mut pool = tenant.as_ref().map(|p| p.lock());
        for &g in grants {
            if policy.is_shared(g) {
                if self.state.ledger.held(g) == 0 {
                    continue;
                }
                if let Some(pool) = pool.as_mut() {
                    pool.give_back(&policy.grants[g].name);
                }
            }
            self.state.ledger.refund(&policy, g);
        }
        for &(g, amount) in charges {
            let back = self.state.ledger.remove_spent(g, amount);
            if policy.budget_of(g).is_some_and(|b| b.per_tenant) {
                if let Some(pool) = pool.as_mut() {
                    pool.remove_spent(&policy.grants[g].name, back);
                }
            }
        }
    }
}
