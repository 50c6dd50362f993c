//! Quotas shared by all sessions of a tenant (`quota N per tenant`).
//!
//! A grant's quota is per session by default: each new session starts with
//! the full quota. A grant declared `quota N per tenant` draws instead on a
//! pool that every session of the tenant shares, so "5 payments a day" does
//! not reset with each new session (`docs/semantics.md`, "Quota scope").
//!
//! The pool counts, for every shared grant, the units *taken* by all the
//! tenant's sessions (held by PAUSE reservations, or spent), keyed by the
//! grant's **name**: a policy reload keeps the counts. What is left is
//! `quota − taken` (saturating), the quota coming from the current policy.

use crate::decimal::Decimal;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Units taken from each shared (per-tenant) grant, keyed by grant name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedCounts {
    taken: BTreeMap<String, u64>,
    /// Amounts held of each budget the tenant shares (`budget AMOUNT on
    /// PARAM per tenant`), by grant name; omitted when empty, so pools of
    /// policies without tenant budgets encode as before.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    spent: BTreeMap<String, Decimal>,
    /// What all the tenant's sessions hold of each renewing limit the
    /// tenant shares, in its current window: `crate::window::pool_key` →
    /// (window, held). Omitted when empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    windows: BTreeMap<String, (u64, Decimal)>,
}

impl SharedCounts {
    /// Units taken from the shared grant named `grant` (0 when none were).
    pub fn taken(&self, grant: &str) -> u64 {
        self.taken.get(grant).copied().unwrap_or(0)
    }

    /// Sets the units taken from `grant` (0 removes the entry, so equal
    /// counts compare equal however they were reached).
    pub fn set_taken(&mut self, grant: &str, n: u64) {
        if n == 0 {
            self.taken.remove(grant);
        } else if let Some(slot) = self.taken.get_mut(grant) {
            *slot = n;
        } else {
            self.taken.insert(grant.to_string(), n);
        }
    }

    /// Every grant with units taken, by name, and how many.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        self.taken.iter().map(|(k, v)| (k.as_str(), *v))
    }

    /// Units left of a shared grant of quota `quota`: `quota − taken`,
    /// never below zero (the pool may hold more than a lowered quota).
    pub fn remaining(&self, grant: &str, quota: u64) -> u64 {
        quota.saturating_sub(self.taken(grant))
    }

    /// Takes one unit of `grant`.
    pub fn take(&mut self, grant: &str) {
        let n = self.taken(grant).saturating_add(1);
        self.set_taken(grant, n);
    }

    /// Gives one unit of `grant` back, never below zero taken.
    pub fn give_back(&mut self, grant: &str) {
        let n = self.taken(grant).saturating_sub(1);
        self.set_taken(grant, n);
    }

    /// The amount all the tenant's sessions hold of the budget of the
    /// grant named `grant` (0 when none).
    pub fn spent(&self, grant: &str) -> Decimal {
        self.spent.get(grant).copied().unwrap_or_default()
    }

    /// Sets the amount held of `grant`'s budget (0, or a negative amount,
    /// removes the entry).
    pub fn set_spent(&mut self, grant: &str, amount: Decimal) {
        if amount <= Decimal::default() {
            self.spent.remove(grant);
        } else {
            self.spent.insert(grant.to_string(), amount);
        }
    }

    /// Every budget with an amount held, by grant name, and how much.
    pub fn iter_spent(&self) -> impl Iterator<Item = (&str, Decimal)> {
        self.spent.iter().map(|(k, v)| (k.as_str(), *v))
    }

    /// Adds `amount` to what is held of `grant`'s budget. The caller has
    /// checked it fits the budget (so the sum has at most 20 digits); a sum
    /// that does not fit leaves the count as it was.
    pub fn add_spent(&mut self, grant: &str, amount: Decimal) {
        let held = self.spent(grant);
        self.set_spent(grant, held.checked_add(amount).unwrap_or(held));
    }

    /// What the tenant holds of the renewing limit `key`
    /// (`crate::window::pool_key`): (window, held), `None` when nothing.
    pub fn window(&self, key: &str) -> Option<(u64, Decimal)> {
        self.windows.get(key).copied()
    }

    /// Every renewing limit with something held, by key.
    pub fn iter_windows(&self) -> impl Iterator<Item = (&str, (u64, Decimal))> {
        self.windows.iter().map(|(k, v)| (k.as_str(), *v))
    }

    /// Holds `x` more of `key` in window `w` (a later window starts from
    /// zero).
    pub fn window_hold(&mut self, key: &str, w: u64, x: Decimal) {
        let next = crate::window::added(self.window(key), w, x);
        self.set_window(key, next);
    }

    /// Gives back `x` that window `w` lent of `key` (nothing when the
    /// limit has moved on to a later window).
    pub fn window_give_back(&mut self, key: &str, w: u64, x: Decimal) {
        let (next, _) = crate::window::given_back(self.window(key), w, x);
        self.set_window(key, next);
    }

    /// Sets what is held of `key` (`None` removes it).
    pub fn set_window(&mut self, key: &str, slot: Option<(u64, Decimal)>) {
        match slot {
            Some(v) => {
                self.windows.insert(key.to_string(), v);
            }
            None => {
                self.windows.remove(key);
            }
        }
    }

    /// Takes `amount` off what is held of `grant`'s budget, never below
    /// zero.
    pub fn remove_spent(&mut self, grant: &str, amount: Decimal) {
        let held = self.spent(grant);
        self.set_spent(grant, held.saturating_sub(amount));
    }
}

/// A tenant's pool, shared by its sessions (cheap to clone: clones share
/// the same counts). Give it to each session of the tenant with
/// [`SessionOptions::pool`](crate::SessionOptions::pool); a session without
/// one has a private pool, and its shared grants then behave per session.
#[derive(Clone, Debug, Default)]
pub struct TenantPool(Arc<Mutex<SharedCounts>>);

impl TenantPool {
    /// An empty pool: nothing taken yet.
    pub fn new() -> Self {
        TenantPool::default()
    }

    /// A copy of the counts as they are now.
    pub fn snapshot(&self) -> SharedCounts {
        self.lock().clone()
    }

    /// Replaces the counts (e.g. with what a durable store holds, before
    /// deciding).
    pub fn replace(&self, counts: SharedCounts) {
        *self.lock() = counts;
    }

    /// Runs `f` on the counts with the pool locked, so that reading and
    /// changing them is one atomic step (an engine that keeps its own
    /// session state, such as the SMT authorizer, applies an event this
    /// way). If `f` panics the lock is released with the counts as `f`
    /// left them; callers change the counts only at the end.
    pub fn with_counts<T>(&self, f: impl FnOnce(&mut SharedCounts) -> T) -> T {
        f(&mut self.lock())
    }

    /// Whether `self` and `other` are the same pool (clones of one another).
    pub fn same_as(&self, other: &TenantPool) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Locks the counts. A session that panicked while holding the lock
    /// left the counts as they were before its step (a session works on a
    /// copy and writes it back only when the step is done), so a poisoned
    /// lock is still consistent.
    pub(crate) fn lock(&self) -> MutexGuard<'_, SharedCounts> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_counts_changes_the_shared_counts_and_returns_what_f_returns() {
        let pool = TenantPool::new();
        let other = pool.clone();
        let seen = pool.with_counts(|c| {
            c.take("pay");
            c.taken("pay") + 40
        });
        assert_eq!(seen, 41);
        assert_eq!(other.snapshot().taken("pay"), 1, "every clone sees it");
    }

    #[test]
    fn counts_take_give_back_and_saturate() {
        let mut c = SharedCounts::default();
        assert_eq!(c.taken("pay"), 0);
        c.take("pay");
        c.take("pay");
        assert_eq!(c.taken("pay"), 2);
        assert_eq!(c.remaining("pay", 5), 3);
        assert_eq!(c.remaining("pay", 1), 0, "a lowered quota leaves nothing");
        c.give_back("pay");
        c.give_back("pay");
        c.give_back("pay");
        assert_eq!(c.taken("pay"), 0, "never below zero");
        assert_eq!(c, SharedCounts::default(), "zero counts are not stored");
        c.set_taken("a", 3);
        c.set_taken("b", 1);
        assert_eq!(c.iter().collect::<Vec<_>>(), vec![("a", 3), ("b", 1)]);
        c.set_taken("a", u64::MAX);
        c.take("a");
        assert_eq!(c.taken("a"), u64::MAX);
    }

    #[test]
    fn budget_amounts_add_give_back_never_below_zero_and_encode_only_when_held() {
        let d = |s: &str| s.parse::<Decimal>().unwrap();
        let mut c = SharedCounts::default();
        assert_eq!(c.spent("pay"), d("0"));
        c.add_spent("pay", d("100.50"));
        c.add_spent("pay", d("0.5"));
        assert_eq!(c.spent("pay"), d("101"));
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            r#"{"taken":{},"spent":{"pay":"101"}}"#
        );
        c.remove_spent("pay", d("1"));
        assert_eq!(c.iter_spent().collect::<Vec<_>>(), vec![("pay", d("100"))]);
        c.remove_spent("pay", d("500"));
        assert_eq!(c.spent("pay"), d("0"), "never below zero");
        assert_eq!(c, SharedCounts::default(), "zero amounts are not stored");
        assert_eq!(serde_json::to_string(&c).unwrap(), r#"{"taken":{}}"#);
    }

    #[test]
    fn clones_of_a_pool_share_its_counts() {
        let pool = TenantPool::new();
        let other = pool.clone();
        let mut c = SharedCounts::default();
        c.set_taken("pay", 4);
        other.replace(c.clone());
        assert_eq!(pool.snapshot(), c);
        assert!(pool.same_as(&other) && !pool.same_as(&TenantPool::new()));
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(json, r#"{"taken":{"pay":4}}"#);
        assert_eq!(serde_json::from_str::<SharedCounts>(&json).unwrap(), c);
    }

    /// A call whose tool has no shared grant never waits for the pool's
    /// lock (another session may hold it for a long decision), nor does its
    /// refund. Found by mutation testing: `call_uses_pool` returning true
    /// (or `&&` as `||` in it) decides the same, but waits.
    #[test]
    fn calls_without_shared_grants_do_not_lock_the_pool() {
        use crate::policy::{Grant, Quota, Tool};
        use crate::{Call, CompiledPolicy, Label, Policy, SessionOptions, Verdict};
        let tool = |name: &str| Tool {
            name: name.into(),
            params: vec![],
            resource: None,
            sinks: vec![],
            output: Label::BOTTOM,
            sanitizer: None,
            facts: vec![],
        };
        let grant = |name: &str, tool, quota| Grant {
            name: name.into(),
            agent: 0,
            tool,
            resource: None,
            args: vec![],
            quota,
            approval: false,
            expires_at: None,
            discovers: None,
        };
        let mut p = Policy::empty("pooled");
        p.tools = vec![tool("ping"), tool("pay")];
        p.grants = vec![
            grant("pings", 0, Quota::Limited(5)),
            grant("pays", 1, Quota::Limited(5)),
        ];
        p.shared_grants = vec![1];
        let pool = TenantPool::new();
        let mut s = CompiledPolicy::new(p)
            .unwrap()
            .session_with(SessionOptions::default().pool(pool.clone()));
        let ping: Call =
            serde_json::from_value(serde_json::json!({"id": "p1", "time": 1, "tool": "ping"}))
                .unwrap();
        let held = pool.lock();
        let (tx, rx) = std::sync::mpsc::channel();
        let worker = std::thread::spawn(move || {
            let checked = s.check(&ping).map(|d| d.verdict);
            let decided = s.authorize(&ping).map(|d| d.verdict);
            // A failed call gives its (unshared) unit back without the pool.
            let failed: crate::Event = serde_json::from_value(
                serde_json::json!({"kind": "result", "call": "p1", "status": "failed"}),
            )
            .unwrap();
            let refunded = s.step(&failed).is_ok();
            tx.send((checked, decided, refunded)).unwrap();
        });
        let got = rx.recv_timeout(std::time::Duration::from_secs(20));
        drop(held);
        worker.join().unwrap();
        assert_eq!(
            got.expect("the decision waited for the pool"),
            (Ok(Verdict::Allow), Ok(Verdict::Allow), true)
        );
    }
}
