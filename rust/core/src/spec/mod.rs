//! The reference semantics of consumable authority: grants, matching, the
//! ledger and the life of a call (admit, pause, approve, reject, succeed,
//! fail, unknown). Written to read like DESIGN §1–2 and to be mirrored line
//! by line in Lean (`lean/Agenra/Ledger.lean`); the monitor is an optimized
//! implementation of the same functions and is tested against this one.
//!
//! Everything here is a pure function: states are values, never mutated in
//! place by a caller-visible operation.

pub mod reference;

use crate::decimal::Decimal;
use crate::ledger::Ledger;
use crate::policy::{AgentId, Grant, GrantId, Policy, Quota, ToolId};
use crate::pool::SharedCounts;
use crate::value::Value;
use std::collections::{BTreeMap, BTreeSet};

/// A well-formed call, as the ledger sees it: arguments complete and typed,
/// in the tool's parameter order.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Request {
    /// The calling agent.
    pub agent: AgentId,
    /// The tool called.
    pub tool: ToolId,
    /// One value per parameter of the tool; an absent optional argument is
    /// [`Value::Null`].
    pub args: Vec<Value>,
    /// The time of the call (seconds), compared with grants' expiry.
    pub time: u64,
}

/// The resource a request acts on: the value of its tool's resource parameter.
pub fn resource_of<'a>(policy: &Policy, tool: ToolId, args: &'a [Value]) -> Option<&'a str> {
    let index = policy.tools.get(tool)?.resource?;
    args.get(index)?.as_str()
}

/// A grant of `owner` (the caller or one of its delegators) matches a call
/// when it is `owner`'s grant for the call's tool, has not expired, its
/// resource pattern matches the call's resource, and every condition holds
/// on the call's arguments and calling agent (discovered-set tests read
/// `sets`).
pub fn grant_matches(
    policy: &Policy,
    grant: &Grant,
    owner: AgentId,
    req: &Request,
    sets: &[BTreeSet<String>],
) -> bool {
    grant.agent == owner
        && grant.tool == req.tool
        && grant.expires_at.is_none_or(|end| req.time < end)
        && grant
            .resource
            .as_ref()
            .is_none_or(|p| resource_of(policy, req.tool, &req.args).is_some_and(|r| p.matches(r)))
        && grant
            .args
            .iter()
            .all(|c| c.eval(&req.args, req.agent, sets))
}

/// Whether grant `g` has a unit left: a per-session grant in the session's
/// ledger; a shared grant (`quota N per tenant`) in the tenant's pool, where
/// `quota − taken` (saturating) is left.
pub fn has_quota(policy: &Policy, ledger: &Ledger, pool: &SharedCounts, g: GrantId) -> bool {
    if !policy.is_shared(g) {
        return ledger.has_quota(g);
    }
    match policy.grants.get(g).map(|gr| gr.quota) {
        Some(Quota::Limited(q)) => pool.remaining(&policy.grants[g].name, q) > 0,
        // A validated policy shares only limited grants.
        _ => false,
    }
}

/// Takes one unit of `g`: from the session's ledger, or, for a shared
/// grant, from the tenant's pool (the session then holds one more unit).
pub fn take(policy: &Policy, ledger: &mut Ledger, pool: &mut SharedCounts, g: GrantId) {
    if policy.is_shared(g) {
        pool.take(&policy.grants[g].name);
    }
    ledger.consume(g);
}

/// Gives one unit of `g` back: to the session's ledger (never above the
/// quota), or, for a shared grant the session holds a unit of, to the
/// tenant's pool (never below zero taken).
pub fn give_back(policy: &Policy, ledger: &mut Ledger, pool: &mut SharedCounts, g: GrantId) {
    if policy.is_shared(g) {
        if ledger.held(g) == 0 {
            return;
        }
        pool.give_back(&policy.grants[g].name);
    }
    ledger.refund(policy, g);
}

/// The pool of a session that has no tenant pool: a private one, in which
/// every shared grant's units taken are exactly those this session holds.
/// Shared grants then behave per session.
pub fn private_pool(policy: &Policy, ledger: &Ledger) -> SharedCounts {
    let mut pool = SharedCounts::default();
    for &g in &policy.shared_grants {
        if let Some(grant) = policy.grants.get(g) {
            pool.set_taken(&grant.name, ledger.held(g));
        }
    }
    pool
}

pub use crate::ledger::Spent;

/// What one call holds of budgets: per serving grant with a budget, the
/// amount it spends, in the order the grants serve (caller first).
pub type Charges = Vec<(GrantId, Decimal)>;

/// Why a grant with a budget does not serve a call (it is then passed
/// over, as a grant without quota is: the next matching grant may serve).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BudgetRefusal {
    /// The budget's parameter has no value (an absent optional argument),
    /// or one that is not a number.
    Missing {
        /// The parameter's name.
        param: String,
    },
    /// The amount is below zero: spending it would raise the budget.
    Negative {
        /// The parameter's name.
        param: String,
        /// The amount the call gives.
        amount: Decimal,
    },
    /// The amount is more than what is left of the budget.
    Exceeds {
        /// The amount the call gives.
        amount: Decimal,
        /// What is left of the budget.
        left: Decimal,
    },
}

impl std::fmt::Display for BudgetRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BudgetRefusal::Missing { param } => {
                write!(f, "the call gives no amount in `{param}`")
            }
            BudgetRefusal::Negative { param, amount } => {
                write!(f, "the amount in `{param}` is negative ({amount})")
            }
            BudgetRefusal::Exceeds { amount, left } => {
                write!(
                    f,
                    "the amount {amount} exceeds what is left of the budget ({left})"
                )
            }
        }
    }
}

// ---- renewing limits (`crate::window`) -------------------------------

/// Why a renewing limit does not serve a call (the grant is then passed
/// over, as an exhausted one is).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WindowRefusal {
    /// Every unit of the window is held.
    Exhausted {
        /// The window's length in seconds.
        secs: u64,
    },
    /// The amount cannot be spent in this window.
    Budget(BudgetRefusal),
    /// The call's time is in a window before the one the limit is at (the
    /// clock stepped back): no fresh window is opened.
    Past {
        /// The call's window.
        window: u64,
    },
}

impl std::fmt::Display for WindowRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WindowRefusal::Exhausted { secs } => {
                write!(
                    f,
                    "its quota for the current {secs}-second window is used up"
                )
            }
            WindowRefusal::Budget(b) => write!(f, "{b} in the current window"),
            WindowRefusal::Past { window } => write!(
                f,
                "the call's time is in window {window}, before the window the limit is at"
            ),
        }
    }
}

/// The amount of parameter `param` of `req` (for an amount limit).
pub fn amount_of(policy: &Policy, param: usize, req: &Request) -> Result<Decimal, BudgetRefusal> {
    let name = || {
        policy
            .tools
            .get(req.tool)
            .and_then(|t| t.params.get(param))
            .map_or_else(|| "?".to_string(), |p| p.name.clone())
    };
    let Some(amount) = req.args.get(param).and_then(Decimal::of_value) else {
        return Err(BudgetRefusal::Missing { param: name() });
    };
    if amount.is_negative() {
        return Err(BudgetRefusal::Negative {
            param: name(),
            amount,
        });
    }
    Ok(amount)
}

/// Whether every renewing limit of grant `g` can serve `req` in the
/// call's window, given what each holds now (`slot(renewal)`): what the
/// call would hold of each, or why not. Empty for a grant that does not
/// renew.
pub fn window_check(
    policy: &Policy,
    g: GrantId,
    req: &Request,
    slot: impl Fn(usize) -> Option<(u64, Decimal)>,
) -> Result<crate::window::Lent, WindowRefusal> {
    let mut lent = crate::window::Lent::new();
    for i in policy.renewals_of(g) {
        let r = &policy.renewals[i];
        let w = crate::window::window_of(r, req.time);
        let need = match &r.limit {
            crate::policy::RenewLimit::Units(_) => Decimal::from(1),
            crate::policy::RenewLimit::Amount { param, .. } => {
                amount_of(policy, *param, req).map_err(WindowRefusal::Budget)?
            }
        };
        let Some(held) = crate::window::held_in(slot(i), w) else {
            return Err(WindowRefusal::Past { window: w });
        };
        let left = crate::window::limit_of(r).saturating_sub(held);
        if need > left {
            return Err(match r.limit {
                crate::policy::RenewLimit::Units(_) => WindowRefusal::Exhausted { secs: r.secs },
                crate::policy::RenewLimit::Amount { .. } => {
                    WindowRefusal::Budget(BudgetRefusal::Exceeds { amount: need, left })
                }
            });
        }
        lent.push((i, w, need));
    }
    Ok(lent)
}

/// The amount grant `g` would spend of its budget for `req`: `Ok(None)`
/// for a grant without a budget, the argument's value for one with a
/// budget, or why the value cannot be spent (absent, not a number,
/// negative). What is left is not looked at ([`budget_check`] does).
pub fn charge_of(
    policy: &Policy,
    g: GrantId,
    req: &Request,
) -> Result<Option<Decimal>, BudgetRefusal> {
    let Some(b) = policy.budget_of(g) else {
        return Ok(None);
    };
    let param = || {
        policy
            .tools
            .get(req.tool)
            .and_then(|t| t.params.get(b.param))
            .map_or_else(|| "?".to_string(), |p| p.name.clone())
    };
    let Some(amount) = req.args.get(b.param).and_then(Decimal::of_value) else {
        return Err(BudgetRefusal::Missing { param: param() });
    };
    if amount.is_negative() {
        return Err(BudgetRefusal::Negative {
            param: param(),
            amount,
        });
    }
    Ok(Some(amount))
}

/// What is left of grant `g`'s budget (`None` without one): the budget
/// less what this session holds (`spent`), or, for a budget the tenant
/// shares (`per tenant`), less what all its sessions hold (`pool`).
/// Never below zero (a lowered budget may leave nothing).
pub fn budget_left(
    policy: &Policy,
    spent: &Spent,
    pool: &SharedCounts,
    g: GrantId,
) -> Option<Decimal> {
    let b = policy.budget_of(g)?;
    let held = if b.per_tenant {
        pool.spent(&policy.grants.get(g)?.name)
    } else {
        spent.get(&g).copied().unwrap_or_default()
    };
    Some(b.amount.saturating_sub(held))
}

/// Whether grant `g`'s budget can pay for `req`: `Ok(None)` without a
/// budget, `Ok(Some(amount))` when the amount is at most what is left.
pub fn budget_check(
    policy: &Policy,
    spent: &Spent,
    pool: &SharedCounts,
    g: GrantId,
    req: &Request,
) -> Result<Option<Decimal>, BudgetRefusal> {
    let Some(amount) = charge_of(policy, g, req)? else {
        return Ok(None);
    };
    let left = budget_left(policy, spent, pool, g).unwrap_or_default();
    if amount > left {
        return Err(BudgetRefusal::Exceeds { amount, left });
    }
    Ok(Some(amount))
}

/// Spends `amount` of grant `g`'s budget: this session holds it, and, for
/// a budget the tenant shares, so does the pool.
pub fn spend(
    policy: &Policy,
    spent: &mut Spent,
    pool: &mut SharedCounts,
    g: GrantId,
    amount: Decimal,
) {
    if policy.budget_of(g).is_some_and(|b| b.per_tenant) {
        pool.add_spent(&policy.grants[g].name, amount);
    }
    add_held(spent, g, amount);
}

/// Gives back what a call's `charges` hold (a failed call, a rejection,
/// an expiry, an approval the re-check denies): never more than this
/// session holds of a grant, and, for a tenant budget, the same amount to
/// the pool.
pub fn give_back_charges(
    policy: &Policy,
    spent: &mut Spent,
    pool: &mut SharedCounts,
    charges: &[(GrantId, Decimal)],
) {
    for &(g, amount) in charges {
        let held = spent.get(&g).copied().unwrap_or_default();
        let back = amount.min(held);
        if policy.budget_of(g).is_some_and(|b| b.per_tenant) {
            if let Some(grant) = policy.grants.get(g) {
                pool.remove_spent(&grant.name, back);
            }
        }
        let rest = held.saturating_sub(back);
        if rest == Decimal::default() {
            spent.remove(&g);
        } else {
            spent.insert(g, rest);
        }
    }
}

fn add_held(spent: &mut Spent, g: GrantId, amount: Decimal) {
    if amount == Decimal::default() {
        return;
    }
    let held = spent.get(&g).copied().unwrap_or_default();
    // A grant's holdings never exceed its budget (20 digits at most), nor
    // does the amount added: the sum fits.
    spent.insert(g, held.checked_add(amount).unwrap_or(held));
}

/// The private pool of a session with budgets: [`private_pool`], and,
/// for every budget the tenant shares, what this session holds of it.
pub fn private_pool_of(policy: &Policy, ledger: &Ledger, books: &Books) -> SharedCounts {
    let mut pool = private_pool(policy, ledger);
    for b in policy.budgets.iter().filter(|b| b.per_tenant) {
        if let (Some(grant), Some(&held)) = (policy.grants.get(b.grant), books.spent.get(&b.grant))
        {
            pool.add_spent(&grant.name, held);
        }
    }
    for (i, r) in policy.renewals.iter().enumerate() {
        if r.per_tenant {
            pool.set_window(
                &crate::window::pool_key(policy, r),
                books.windows.get(&i).copied(),
            );
        }
    }
    pool
}

/// What renewing limit `i` holds for a decision: the pool for a tenant
/// limit, the session's own `windows` otherwise.
pub fn window_slot(
    policy: &Policy,
    windows: &crate::window::Windows,
    pool: &SharedCounts,
    i: usize,
) -> Option<(u64, Decimal)> {
    match policy.renewals.get(i) {
        Some(r) if r.per_tenant => pool.window(&crate::window::pool_key(policy, r)),
        _ => windows.get(&i).copied(),
    }
}

/// Holds `lent` in the session's `windows`, and tenant limits in `pool`.
pub fn window_hold(
    policy: &Policy,
    windows: &mut crate::window::Windows,
    pool: &mut SharedCounts,
    lent: &[(usize, u64, Decimal)],
) {
    for &(i, w, x) in lent {
        if let Some(r) = policy.renewals.get(i).filter(|r| r.per_tenant) {
            pool.window_hold(&crate::window::pool_key(policy, r), w, x);
        }
    }
    crate::window::hold(windows, lent);
}

/// Gives `lent` back to the windows that lent it: the session's own
/// holdings, and, for tenant limits, the same amounts to the pool.
pub fn window_give_back(
    policy: &Policy,
    windows: &mut crate::window::Windows,
    pool: &mut SharedCounts,
    lent: &[(usize, u64, Decimal)],
) {
    let back = crate::window::release(windows, lent);
    for (&(i, w, _), &x) in lent.iter().zip(&back) {
        if let Some(r) = policy.renewals.get(i).filter(|r| r.per_tenant) {
            pool.window_give_back(&crate::window::pool_key(policy, r), w, x);
        }
    }
}

/// The grant of `agent` that serves the request with budgets and renewing
/// limits: the first, in policy order, that matches, has quota, whose
/// budget (if any) can pay and whose renewing limits (if any) serve it in
/// the call's window; with what it spends and is lent.
#[allow(clippy::too_many_arguments)]
pub fn select_windowed(
    policy: &Policy,
    ledger: &Ledger,
    spent: &Spent,
    windows: &crate::window::Windows,
    pool: &SharedCounts,
    agent: AgentId,
    req: &Request,
    sets: &[BTreeSet<String>],
) -> Option<(GrantId, Option<Decimal>, crate::window::Lent)> {
    (0..policy.grants.len()).find_map(|g| {
        if !(grant_matches(policy, &policy.grants[g], agent, req, sets)
            && has_quota(policy, ledger, pool, g))
        {
            return None;
        }
        let amount = budget_check(policy, spent, pool, g, req).ok()?;
        let lent = window_check(policy, g, req, |i| window_slot(policy, windows, pool, i)).ok()?;
        Some((g, amount, lent))
    })
}

/// The grant of `agent` that serves the request, budgets included: the
/// first, in policy order, that matches, has quota and whose budget (if
/// any) can pay for the call; with what it spends. Equal to [`select_in`]
/// for grants without budgets.
pub fn select_budgeted(
    policy: &Policy,
    ledger: &Ledger,
    spent: &Spent,
    pool: &SharedCounts,
    agent: AgentId,
    req: &Request,
    sets: &[BTreeSet<String>],
) -> Option<(GrantId, Option<Decimal>)> {
    (0..policy.grants.len()).find_map(|g| {
        if !(grant_matches(policy, &policy.grants[g], agent, req, sets)
            && has_quota(policy, ledger, pool, g))
        {
            return None;
        }
        budget_check(policy, spent, pool, g, req)
            .ok()
            .map(|amount| (g, amount))
    })
}

/// Admission with budgets: [`admit_in`], where each serving grant with a
/// budget also spends the call's amount from it, all or nothing.
#[allow(clippy::type_complexity)]
pub fn admit_budgeted(
    policy: &Policy,
    ledger: &Ledger,
    spent: &Spent,
    pool: &SharedCounts,
    req: &Request,
    sets: &[BTreeSet<String>],
) -> Result<(Vec<GrantId>, Charges, Ledger, Spent, SharedCounts), AgentId> {
    let mut next = ledger.clone();
    let mut next_spent = spent.clone();
    let mut next_pool = pool.clone();
    let mut used = Vec::new();
    let mut charges = Vec::new();
    for agent in policy.agent_chain(req.agent) {
        let (g, amount) = select_budgeted(policy, &next, &next_spent, &next_pool, agent, req, sets)
            .ok_or(agent)?;
        take(policy, &mut next, &mut next_pool, g);
        if let Some(amount) = amount {
            spend(policy, &mut next_spent, &mut next_pool, g, amount);
            charges.push((g, amount));
        }
        used.push(g);
    }
    Ok((used, charges, next, next_spent, next_pool))
}

/// The grant of `agent` that serves the request: the first, in policy
/// order, that matches and still has quota (shared grants: in `pool`).
/// Budgets are not looked at: this is the selection of a policy without
/// budgets (and of the Lean model); [`select_budgeted`] is the whole one.
pub fn select_in(
    policy: &Policy,
    ledger: &Ledger,
    pool: &SharedCounts,
    agent: AgentId,
    req: &Request,
    sets: &[BTreeSet<String>],
) -> Option<GrantId> {
    (0..policy.grants.len()).find(|&g| {
        grant_matches(policy, &policy.grants[g], agent, req, sets)
            && has_quota(policy, ledger, pool, g)
    })
}

/// [`select_in`] with the session's private pool.
pub fn select(
    policy: &Policy,
    ledger: &Ledger,
    agent: AgentId,
    req: &Request,
    sets: &[BTreeSet<String>],
) -> Option<GrantId> {
    select_in(
        policy,
        ledger,
        &private_pool(policy, ledger),
        agent,
        req,
        sets,
    )
}

/// Admission takes one unit from the serving grant of every agent on the
/// delegation chain (the caller first, `main` last), all or nothing: shared
/// grants from the pool, the others from the session's ledger.
/// `Err(agent)` names the first agent with no serving grant.
pub fn admit_in(
    policy: &Policy,
    ledger: &Ledger,
    pool: &SharedCounts,
    req: &Request,
    sets: &[BTreeSet<String>],
) -> Result<(Vec<GrantId>, Ledger, SharedCounts), AgentId> {
    let mut next = ledger.clone();
    let mut next_pool = pool.clone();
    let mut used = Vec::new();
    for agent in policy.agent_chain(req.agent) {
        let g = select_in(policy, &next, &next_pool, agent, req, sets).ok_or(agent)?;
        take(policy, &mut next, &mut next_pool, g);
        used.push(g);
    }
    Ok((used, next, next_pool))
}

/// [`admit_in`] with the session's private pool.
pub fn admit(
    policy: &Policy,
    ledger: &Ledger,
    req: &Request,
    sets: &[BTreeSet<String>],
) -> Result<(Vec<GrantId>, Ledger), AgentId> {
    admit_in(policy, ledger, &private_pool(policy, ledger), req, sets)
        .map(|(used, next, _)| (used, next))
}

/// Gives back the units a call took (a failed call, a rejected approval):
/// shared grants to the pool.
pub fn refund_in(
    policy: &Policy,
    ledger: &Ledger,
    pool: &SharedCounts,
    used: &[GrantId],
) -> (Ledger, SharedCounts) {
    let mut next = ledger.clone();
    let mut next_pool = pool.clone();
    for &g in used {
        give_back(policy, &mut next, &mut next_pool, g);
    }
    (next, next_pool)
}

/// [`refund_in`] with the session's private pool.
pub fn refund(policy: &Policy, ledger: &Ledger, used: &[GrantId]) -> Ledger {
    refund_in(policy, ledger, &private_pool(policy, ledger), used).0
}

/// What happens to a call, as far as authority is concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A call is made: it is denied, paused (units reserved) or admitted.
    Call {
        /// The call's id, which later events name.
        id: String,
        /// What is called, by whom, with which arguments.
        req: Request,
    },
    /// A human approves a paused call: it is admitted, unless the re-check
    /// denies it.
    Approve {
        /// The paused call.
        id: String,
    },
    /// A human rejects a paused call: its reserved units return.
    Reject {
        /// The paused call.
        id: String,
    },
    /// An admitted call succeeded: its units stay spent, and the values it
    /// discovered join the set its caller's grant `discovers` into.
    Succeeded {
        /// The admitted call.
        id: String,
        /// Values the result reports as discovered.
        discovered: Vec<String>,
    },
    /// An admitted call failed: its units return.
    Failed {
        /// The admitted call.
        id: String,
    },
    /// An admitted call ended with an unknown outcome: its effect may have
    /// happened, so its units stay spent.
    Unknown {
        /// The admitted call.
        id: String,
    },
    /// A task seeds values into a discovered set.
    Seed {
        /// The set, an index into [`Policy::sets`].
        set: usize,
        /// The values added.
        values: Vec<String>,
    },
}

/// What [`step`] answers to an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The call (or approved call) is admitted; the grants whose units it
    /// took, the caller's first.
    Allow(Vec<GrantId>),
    /// The call waits for a human; the grants whose units are reserved.
    Pause(Vec<GrantId>),
    /// The call is denied (by the checks, for lack of a grant, or at
    /// approval time); it holds no units.
    Deny,
    /// Approve/reject/result events: accepted and applied.
    Applied,
    /// An event about a call that is not in the state it needs.
    Invalid,
}

/// The authority state of a session: what the ledger semantics carries from
/// one event to the next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    /// The grants' remaining units.
    pub ledger: Ledger,
    /// Calls waiting for an approval, with the units reserved for them.
    pub paused: BTreeMap<String, Vec<GrantId>>,
    /// Admitted calls whose result has not been reported.
    pub running: BTreeMap<String, Vec<GrantId>>,
    /// Discovered-resource sets, indexed like `Policy::sets`.
    pub sets: Vec<BTreeSet<String>>,
}

/// The amount bookkeeping of a session whose policy has budgets (`budget
/// AMOUNT on PARAM`), carried beside its [`State`] by [`step_books`]:
/// kept apart so that `State` stays the unit ledger the Lean model mirrors.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Books {
    /// The amount this session holds of each budget.
    pub spent: Spent,
    /// What each paused or running call holds of budgets (calls that
    /// spend from none are not listed).
    pub charges: BTreeMap<String, Charges>,
    /// What this session holds of each renewing limit in its current
    /// window (`quota N per 10m`, `budget B on PARAM per day`).
    pub windows: crate::window::Windows,
    /// What each paused or running call holds of renewing limits, with
    /// the windows that lent it (calls that hold none are not listed).
    pub lent: BTreeMap<String, crate::window::Lent>,
}

impl State {
    /// The state of a new session: every grant at its full quota, no calls,
    /// empty discovered sets.
    pub fn initial(policy: &Policy) -> State {
        State {
            ledger: Ledger::initial(policy),
            paused: BTreeMap::new(),
            running: BTreeMap::new(),
            sets: vec![BTreeSet::new(); policy.sets.len()],
        }
    }
}

/// What the checks before the ledger (well-formedness, flows, call rules,
/// path rules, counts, obligations: steps 1–4) decided about a call, or
/// about a paused call at approval time. The ledger semantics takes it as
/// an input; `spec::history` computes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checks {
    /// No rule objects: the ledger decides.
    Pass,
    /// A rule asks a human (the ledger still reserves the units).
    Pause,
    /// A rule denies the call: no units are taken (or, at approval time,
    /// the reserved ones return).
    Deny,
}

/// One step of the ledger semantics of a session with no tenant pool: its
/// shared grants draw on a private pool ([`private_pool`]), so they behave
/// per session. See [`step_in`].
pub fn step(policy: &Policy, state: &State, event: &Event, checks: Checks) -> (Outcome, State) {
    let (outcome, next, _) = step_in(
        policy,
        state,
        &private_pool(policy, &state.ledger),
        event,
        checks,
    );
    (outcome, next)
}

/// One step of the ledger semantics. `checks` is what steps 1–4 decided
/// about the event's call (for calls and approvals; other events ignore it).
/// `pool` holds the units taken from each shared grant by all sessions of
/// the tenant; the step answers the pool after it (unchanged unless the
/// event takes or returns units of a shared grant).
///
/// Approval is a just-in-time re-authorization: when the re-check at
/// approval time denies, the reserved units return and the answer is DENY.
/// A call whose id is held (paused or running) is `Invalid` and changes
/// nothing, as the monitor rejects a duplicate call id.
pub fn step_in(
    policy: &Policy,
    state: &State,
    pool: &SharedCounts,
    event: &Event,
    checks: Checks,
) -> (Outcome, State, SharedCounts) {
    let (outcome, next, _, pool) = step_general(policy, state, None, pool, event, checks);
    (outcome, next, pool)
}

/// One step of the ledger semantics with amount budgets: [`step_in`],
/// where a grant with a budget serves a call only if the budget can pay
/// the call's amount ([`select_budgeted`]), the amount is spent with the
/// unit, kept on success or an unknown outcome, and given back (to `books`
/// and, for a tenant budget, to `pool`) on failure, rejection or an
/// approval the re-check denies. Equal to `step_in` (with `books`
/// unchanged) for a policy without budgets; `step_in` itself does not look
/// at budgets (it is the unit semantics the Lean model mirrors).
pub fn step_books(
    policy: &Policy,
    state: &State,
    books: &Books,
    pool: &SharedCounts,
    event: &Event,
    checks: Checks,
) -> (Outcome, State, Books, SharedCounts) {
    let (outcome, next, books, pool) =
        step_general(policy, state, Some(books), pool, event, checks);
    (outcome, next, books.unwrap_or_default(), pool)
}

/// `step_in` (`books` is `None`: budgets are not looked at) or
/// `step_books`.
fn step_general(
    policy: &Policy,
    state: &State,
    books: Option<&Books>,
    pool: &SharedCounts,
    event: &Event,
    checks: Checks,
) -> (Outcome, State, Option<Books>, SharedCounts) {
    let mut next_books = books.cloned();
    let mut next = state.clone();
    let mut next_pool = pool.clone();
    let outcome = match event {
        // A second call with a held id (paused or running) changes nothing:
        // the monitor rejects it as a duplicate call.
        Event::Call { id, .. }
            if state.paused.contains_key(id) || state.running.contains_key(id) =>
        {
            Outcome::Invalid
        }
        Event::Call { .. } if checks == Checks::Deny => Outcome::Deny,
        Event::Call { id, req } => match admit_either(policy, state, books, pool, req) {
            Err(_) => Outcome::Deny,
            Ok((used, charges, lent, ledger, after_books, after)) => {
                next.ledger = ledger;
                next_pool = after;
                if let Some(b) = next_books.as_mut() {
                    *b = after_books;
                    if !charges.is_empty() {
                        b.charges.insert(id.clone(), charges);
                    }
                    if !lent.is_empty() {
                        b.lent.insert(id.clone(), lent);
                    }
                }
                let approval = used.iter().any(|&g| policy.grants[g].approval);
                if approval || checks == Checks::Pause {
                    next.paused.insert(id.clone(), used.clone());
                    Outcome::Pause(used)
                } else {
                    next.running.insert(id.clone(), used.clone());
                    Outcome::Allow(used)
                }
            }
        },
        Event::Approve { id } => match next.paused.remove(id) {
            Some(used) if checks == Checks::Deny => {
                (next.ledger, next_pool) = refund_in(policy, &next.ledger, &next_pool, &used);
                if let Some(b) = next_books.as_mut() {
                    let charges = b.charges.remove(id).unwrap_or_default();
                    give_back_charges(policy, &mut b.spent, &mut next_pool, &charges);
                    let lent = b.lent.remove(id).unwrap_or_default();
                    window_give_back(policy, &mut b.windows, &mut next_pool, &lent);
                }
                Outcome::Deny
            }
            Some(used) => {
                next.running.insert(id.clone(), used.clone());
                Outcome::Allow(used)
            }
            None => Outcome::Invalid,
        },
        Event::Reject { id } => match next.paused.remove(id) {
            Some(used) => {
                (next.ledger, next_pool) = refund_in(policy, &next.ledger, &next_pool, &used);
                if let Some(b) = next_books.as_mut() {
                    let charges = b.charges.remove(id).unwrap_or_default();
                    give_back_charges(policy, &mut b.spent, &mut next_pool, &charges);
                    let lent = b.lent.remove(id).unwrap_or_default();
                    window_give_back(policy, &mut b.windows, &mut next_pool, &lent);
                }
                Outcome::Applied
            }
            None => Outcome::Invalid,
        },
        Event::Succeeded { id, discovered } => match next.running.remove(id) {
            Some(used) => {
                // The amounts stay spent: the call no longer holds them.
                if let Some(b) = next_books.as_mut() {
                    b.charges.remove(id);
                    b.lent.remove(id);
                }
                // The caller's own grant says where discovered values go.
                let target = used.first().and_then(|&g| policy.grants[g].discovers);
                if let Some(set) = target.and_then(|s| next.sets.get_mut(s)) {
                    set.extend(discovered.iter().cloned());
                }
                Outcome::Applied
            }
            None => Outcome::Invalid,
        },
        Event::Failed { id } => match next.running.remove(id) {
            Some(used) => {
                (next.ledger, next_pool) = refund_in(policy, &next.ledger, &next_pool, &used);
                if let Some(b) = next_books.as_mut() {
                    let charges = b.charges.remove(id).unwrap_or_default();
                    give_back_charges(policy, &mut b.spent, &mut next_pool, &charges);
                    let lent = b.lent.remove(id).unwrap_or_default();
                    window_give_back(policy, &mut b.windows, &mut next_pool, &lent);
                }
                Outcome::Applied
            }
            None => Outcome::Invalid,
        },
        Event::Seed { set, values } => match next.sets.get_mut(*set) {
            Some(s) => {
                s.extend(values.iter().cloned());
                Outcome::Applied
            }
            None => Outcome::Invalid,
        },
        // The effect may have happened: the units stay spent.
        Event::Unknown { id } => match next.running.remove(id) {
            Some(_) => {
                if let Some(b) = next_books.as_mut() {
                    b.charges.remove(id);
                    b.lent.remove(id);
                }
                Outcome::Applied
            }
            None => Outcome::Invalid,
        },
    };
    (outcome, next, next_books, next_pool)
}

/// Admission for [`step_general`]: with budgets when there are `books`.
#[allow(clippy::type_complexity)]
fn admit_either(
    policy: &Policy,
    state: &State,
    books: Option<&Books>,
    pool: &SharedCounts,
    req: &Request,
) -> Result<
    (
        Vec<GrantId>,
        Charges,
        crate::window::Lent,
        Ledger,
        Books,
        SharedCounts,
    ),
    AgentId,
> {
    match books {
        Some(b) if !policy.renewals.is_empty() => {
            let mut next = state.ledger.clone();
            let mut next_books = b.clone();
            let mut next_pool = pool.clone();
            let mut used = Vec::new();
            let mut charges = Vec::new();
            let mut lent = crate::window::Lent::new();
            for agent in policy.agent_chain(req.agent) {
                let (g, amount, part) = select_windowed(
                    policy,
                    &next,
                    &next_books.spent,
                    &next_books.windows,
                    &next_pool,
                    agent,
                    req,
                    &state.sets,
                )
                .ok_or(agent)?;
                take(policy, &mut next, &mut next_pool, g);
                if let Some(amount) = amount {
                    spend(policy, &mut next_books.spent, &mut next_pool, g, amount);
                    charges.push((g, amount));
                }
                window_hold(policy, &mut next_books.windows, &mut next_pool, &part);
                lent.extend(part);
                used.push(g);
            }
            Ok((used, charges, lent, next, next_books, next_pool))
        }
        Some(b) => admit_budgeted(policy, &state.ledger, &b.spent, pool, req, &state.sets).map(
            |(used, charges, ledger, spent, pool)| {
                let books = Books { spent, ..b.clone() };
                (
                    used,
                    charges,
                    crate::window::Lent::new(),
                    ledger,
                    books,
                    pool,
                )
            },
        ),
        None => {
            admit_in(policy, &state.ledger, pool, req, &state.sets).map(|(used, ledger, pool)| {
                (
                    used,
                    Charges::new(),
                    crate::window::Lent::new(),
                    ledger,
                    Books::default(),
                    pool,
                )
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::label::Label;
    use crate::pattern::Pattern;
    use crate::policy::{Agent, Param, Quota, Tool};
    use crate::value::{ArgOp, Cond, ParamType, Quant};

    fn grant(agent: AgentId, tool: ToolId, quota: Quota) -> Grant {
        Grant {
            name: format!("g{agent}{tool}"),
            agent,
            tool,
            resource: None,
            args: vec![],
            quota,
            approval: false,
            expires_at: None,
            discovers: None,
        }
    }

    fn tool(name: &str, param: &str, resource: bool) -> Tool {
        Tool {
            name: name.into(),
            params: vec![Param {
                name: param.into(),
                ty: ParamType::Str,
                list: false,
                optional: false,
                fields: Vec::new(),
            }],
            resource: resource.then_some(0),
            sinks: vec![],
            output: Label::BOTTOM,
            sanitizer: None,
            facts: vec![],
        }
    }

    /// `read(path)` (path is the resource) and `send(to)`; `main` and its
    /// delegate `helper`. Grants:
    /// 0: main read /a/... once, until time 100;
    /// 1: main read anything twice;
    /// 2: helper read, unlimited;
    /// 3: main send to "bob", with approval;
    /// 4: main send to anyone else, discovering into set 0.
    fn policy() -> Policy {
        let mut p = Policy::empty("p");
        p.sets = vec!["found".into()];
        p.tools = vec![tool("read", "path", true), tool("send", "to", false)];
        p.agents.push(Agent {
            name: "helper".into(),
            parent: Some(0),
            scope: None,
            own_context: false,
        });
        let bob = Cond::Test {
            param: 0,
            quant: Quant::All,
            op: ArgOp::Eq(Value::Str("bob".into())),
        };
        p.grants = vec![
            Grant {
                resource: Some(Pattern::Prefix("/a/".into())),
                expires_at: Some(100),
                ..grant(0, 0, Quota::Limited(1))
            },
            grant(0, 0, Quota::Limited(2)),
            grant(1, 0, Quota::Unlimited),
            Grant {
                args: vec![bob.clone()],
                approval: true,
                ..grant(0, 1, Quota::Limited(5))
            },
            Grant {
                args: vec![Cond::Not(Box::new(bob))],
                discovers: Some(0),
                ..grant(0, 1, Quota::Unlimited)
            },
        ];
        p
    }

    fn req(agent: AgentId, tool: ToolId, arg: &str, time: u64) -> Request {
        Request {
            agent,
            tool,
            args: vec![Value::Str(arg.into())],
            time,
        }
    }

    #[test]
    fn the_resource_is_the_resource_parameter_s_string() {
        let p = policy();
        assert_eq!(
            resource_of(&p, 0, &[Value::Str("/a/x".into())]),
            Some("/a/x")
        );
        assert_eq!(resource_of(&p, 1, &[Value::Str("bob".into())]), None);
        assert_eq!(resource_of(&p, 7, &[Value::Str("/a/x".into())]), None);
        assert_eq!(resource_of(&p, 0, &[Value::Int(3)]), None);
        assert_eq!(resource_of(&p, 0, &[]), None);
    }

    #[test]
    fn a_grant_matches_on_owner_tool_time_resource_and_arguments() {
        let p = policy();
        let m = |g: usize, owner, r: &Request| grant_matches(&p, &p.grants[g], owner, r, &[]);
        assert!(m(0, 0, &req(0, 0, "/a/x", 99)));
        assert!(!m(0, 0, &req(0, 0, "/a/x", 100)), "expired at 100");
        assert!(!m(0, 0, &req(0, 0, "/a/x", 101)));
        assert!(!m(0, 0, &req(0, 0, "/b/x", 1)), "resource");
        assert!(!m(0, 1, &req(1, 0, "/a/x", 1)), "owner");
        assert!(m(2, 1, &req(1, 0, "/b/x", 1)));
        assert!(!m(2, 0, &req(1, 0, "/b/x", 1)), "owner");
        assert!(!m(1, 0, &req(0, 1, "/a/x", 1)), "tool");
        assert!(m(3, 0, &req(0, 1, "bob", 1)));
        assert!(!m(3, 0, &req(0, 1, "eve", 1)), "arguments");
        assert!(!m(3, 1, &req(1, 1, "bob", 1)), "owner");
        assert!(m(4, 0, &req(0, 1, "eve", 1)));
    }

    #[test]
    fn the_first_matching_grant_with_quota_serves() {
        let p = policy();
        let mut ledger = Ledger::initial(&p);
        assert_eq!(select(&p, &ledger, 0, &req(0, 0, "/a/x", 1), &[]), Some(0));
        assert_eq!(select(&p, &ledger, 0, &req(0, 0, "/b/x", 1), &[]), Some(1));
        assert_eq!(select(&p, &ledger, 0, &req(0, 1, "eve", 1), &[]), Some(4));
        assert_eq!(select(&p, &ledger, 1, &req(1, 1, "eve", 1), &[]), None);
        ledger.consume(0);
        assert_eq!(select(&p, &ledger, 0, &req(0, 0, "/a/x", 1), &[]), Some(1));
        ledger.consume(1);
        ledger.consume(1);
        assert_eq!(select(&p, &ledger, 0, &req(0, 0, "/a/x", 1), &[]), None);
    }

    #[test]
    fn admission_takes_a_unit_along_the_whole_chain_or_nothing() {
        let p = policy();
        let ledger = Ledger::initial(&p);
        let (used, after) = admit(&p, &ledger, &req(1, 0, "/a/x", 1), &[]).unwrap();
        assert_eq!(used, vec![2, 0]);
        assert_eq!(after.remaining[0], Quota::Limited(0));
        assert_eq!(after.remaining[1], Quota::Limited(2));
        let (used, after) = admit(&p, &after, &req(1, 0, "/a/x", 1), &[]).unwrap();
        assert_eq!(used, vec![2, 1]);
        assert_eq!(after.remaining[1], Quota::Limited(1));
        // The helper has no send grant: refused at the helper, nothing taken.
        assert_eq!(admit(&p, &ledger, &req(1, 1, "bob", 1), &[]), Err(1));
        let back = refund(&p, &after, &[2, 1, 0]);
        assert_eq!(back, ledger);
        // Never beyond the quota.
        assert_eq!(refund(&p, &ledger, &[0, 1]), ledger);
    }

    #[test]
    fn the_life_of_a_call() {
        let p = policy();
        let s0 = State::initial(&p);
        assert_eq!(s0.ledger, Ledger::initial(&p));
        assert_eq!(s0.sets, vec![BTreeSet::new()]);
        assert!(s0.paused.is_empty() && s0.running.is_empty());
        let call = |id: &str, r: Request| Event::Call {
            id: id.into(),
            req: r,
        };
        let id = |s: &str| s.to_string();

        // Checks deny: no unit taken.
        let (o, s) = step(&p, &s0, &call("c1", req(0, 0, "/a/x", 1)), Checks::Deny);
        assert_eq!((o, &s), (Outcome::Deny, &s0));
        // No grant: deny.
        let (o, s) = step(&p, &s0, &call("c1", req(1, 1, "x", 1)), Checks::Pass);
        assert_eq!((o, &s), (Outcome::Deny, &s0));
        // Allowed: running, unit taken.
        let (o, s1) = step(&p, &s0, &call("c1", req(0, 0, "/a/x", 1)), Checks::Pass);
        assert_eq!(o, Outcome::Allow(vec![0]));
        assert_eq!(s1.running.get("c1"), Some(&vec![0]));
        assert!(s1.paused.is_empty());
        assert_eq!(s1.ledger.remaining[0], Quota::Limited(0));
        // A pause from the checks: reserved, paused.
        let (o, s2) = step(&p, &s1, &call("c2", req(0, 0, "/b", 1)), Checks::Pause);
        assert_eq!(o, Outcome::Pause(vec![1]));
        assert_eq!(s2.paused.get("c2"), Some(&vec![1]));
        assert!(!s2.running.contains_key("c2"));
        assert_eq!(s2.ledger.remaining[1], Quota::Limited(1));
        // A grant needing approval pauses too.
        let (o, s3) = step(&p, &s2, &call("c3", req(0, 1, "bob", 1)), Checks::Pass);
        assert_eq!(o, Outcome::Pause(vec![3]));
        assert_eq!(s3.ledger.remaining[3], Quota::Limited(4));
        // Approving with a deny at approval time gives the unit back.
        let (o, s4) = step(&p, &s3, &Event::Approve { id: id("c3") }, Checks::Deny);
        assert_eq!(o, Outcome::Deny);
        assert_eq!(s4.ledger.remaining[3], Quota::Limited(5));
        assert!(!s4.paused.contains_key("c3") && !s4.running.contains_key("c3"));
        // Approving c2: it runs.
        let (o, s5) = step(&p, &s4, &Event::Approve { id: id("c2") }, Checks::Pass);
        assert_eq!(o, Outcome::Allow(vec![1]));
        assert_eq!(s5.running.get("c2"), Some(&vec![1]));
        assert_eq!(s5.ledger.remaining[1], Quota::Limited(1));
        let (o, _) = step(&p, &s5, &Event::Approve { id: id("c2") }, Checks::Pass);
        assert_eq!(o, Outcome::Invalid);
        // A second call with a held id (c2 running, c3 paused) is
        // invalid and changes nothing, whatever the checks said.
        for (held, state) in [("c2", &s5), ("c3", &s3)] {
            for checks in [Checks::Pass, Checks::Pause, Checks::Deny] {
                let (o, same) = step(&p, state, &call(held, req(0, 1, "bob", 1)), checks);
                assert_eq!((o, &same), (Outcome::Invalid, state));
            }
        }
        // Rejecting gives the unit back.
        let (_, s6) = step(&p, &s5, &call("c4", req(0, 1, "bob", 1)), Checks::Pass);
        let (o, s7) = step(&p, &s6, &Event::Reject { id: id("c4") }, Checks::Pass);
        assert_eq!(o, Outcome::Applied);
        assert_eq!(s7.ledger, s5.ledger);
        assert!(s7.paused.is_empty());
        let (o, _) = step(&p, &s7, &Event::Reject { id: id("c4") }, Checks::Pass);
        assert_eq!(o, Outcome::Invalid);
        // Failed: refunded. Unknown: spent.
        let (o, s8) = step(&p, &s7, &Event::Failed { id: id("c2") }, Checks::Pass);
        assert_eq!(o, Outcome::Applied);
        assert_eq!(s8.ledger.remaining[1], Quota::Limited(2));
        assert!(!s8.running.contains_key("c2"));
        let (o, _) = step(&p, &s8, &Event::Failed { id: id("c2") }, Checks::Pass);
        assert_eq!(o, Outcome::Invalid);
        let (o, s9) = step(&p, &s8, &Event::Unknown { id: id("c1") }, Checks::Pass);
        assert_eq!(o, Outcome::Applied);
        assert_eq!(s9.ledger.remaining[0], Quota::Limited(0));
        assert!(s9.running.is_empty());
        let (o, _) = step(&p, &s9, &Event::Unknown { id: id("c1") }, Checks::Pass);
        assert_eq!(o, Outcome::Invalid);
    }

    #[test]
    fn shared_grants_draw_on_the_pool_and_refunds_give_back_to_it() {
        // Grant 1 (main read anything, quota 2) is shared by the tenant.
        let mut p = policy();
        p.shared_grants = vec![1];
        let s0 = State::initial(&p);
        assert_eq!(s0.ledger.remaining[1], Quota::Limited(0), "nothing held");
        let read = |id: &str| Event::Call {
            id: id.into(),
            req: req(0, 0, "/b", 1),
        };
        // Another session already took one unit: one is left.
        let mut pool = SharedCounts::default();
        pool.set_taken("g00", 1);
        let (o, s1, pool1) = step_in(&p, &s0, &pool, &read("a"), Checks::Pass);
        assert_eq!(o, Outcome::Allow(vec![1]));
        assert_eq!((pool1.taken("g00"), s1.ledger.held(1)), (2, 1));
        // Spent: the next read finds no grant (the pool is empty).
        let (o, s2, pool2) = step_in(&p, &s1, &pool1, &read("b"), Checks::Pass);
        assert_eq!((o, &s2, &pool2), (Outcome::Deny, &s1, &pool1));
        // A failure gives the unit back to the pool.
        let (o, s3, pool3) = step_in(
            &p,
            &s1,
            &pool1,
            &Event::Failed { id: "a".into() },
            Checks::Pass,
        );
        assert_eq!(o, Outcome::Applied);
        assert_eq!((pool3.taken("g00"), s3.ledger.held(1)), (1, 0));
        // A pause reserves from the pool; rejection returns it; an approval
        // keeps it.
        let (o, s4, pool4) = step_in(&p, &s3, &pool3, &read("c"), Checks::Pause);
        assert_eq!(o, Outcome::Pause(vec![1]));
        assert_eq!(pool4.taken("g00"), 2);
        let (_, _, pool5) = step_in(
            &p,
            &s4,
            &pool4,
            &Event::Reject { id: "c".into() },
            Checks::Pass,
        );
        assert_eq!(pool5.taken("g00"), 1);
        let (o, s6, pool6) = step_in(
            &p,
            &s4,
            &pool4,
            &Event::Approve { id: "c".into() },
            Checks::Pass,
        );
        assert_eq!((o, pool6.taken("g00")), (Outcome::Allow(vec![1]), 2));
        // Unknown outcome: the unit stays spent.
        let (_, _, pool7) = step_in(
            &p,
            &s6,
            &pool6,
            &Event::Unknown { id: "c".into() },
            Checks::Pass,
        );
        assert_eq!(pool7.taken("g00"), 2);
        // Refunds never take the pool below zero (someone reset it).
        let (_, s8, pool8) = step_in(
            &p,
            &s6,
            &SharedCounts::default(),
            &Event::Failed { id: "c".into() },
            Checks::Pass,
        );
        assert_eq!((pool8.taken("g00"), s8.ledger.held(1)), (0, 0));
        // A lowered quota leaves nothing, however much was taken.
        p.grants[1].quota = Quota::Limited(1);
        assert!(!has_quota(&p, &s0.ledger, &pool6, 1));
        // Without a pool, the session's own holdings are the pool.
        assert_eq!(private_pool(&p, &s6.ledger).taken("g00"), 1);
        let (o, _) = step(&p, &s0, &read("a"), Checks::Pass);
        assert_eq!(o, Outcome::Allow(vec![1]));
    }

    #[test]
    fn results_and_tasks_fill_discovered_sets() {
        let p = policy();
        let s0 = State::initial(&p);
        let send = Event::Call {
            id: "s".into(),
            req: req(0, 1, "eve", 1),
        };
        let (_, s1) = step(&p, &s0, &send, Checks::Pass);
        let done = Event::Succeeded {
            id: "s".into(),
            discovered: vec!["x".into()],
        };
        let (o, s2) = step(&p, &s1, &done, Checks::Pass);
        assert_eq!(o, Outcome::Applied);
        assert!(s2.sets[0].contains("x") && s2.running.is_empty());
        assert_eq!(step(&p, &s2, &done, Checks::Pass).0, Outcome::Invalid);
        // A read's grant discovers nothing.
        let read = Event::Call {
            id: "r".into(),
            req: req(0, 0, "/b", 1),
        };
        let (_, s3) = step(&p, &s0, &read, Checks::Pass);
        let done = Event::Succeeded {
            id: "r".into(),
            discovered: vec!["y".into()],
        };
        let (o, s4) = step(&p, &s3, &done, Checks::Pass);
        assert_eq!(o, Outcome::Applied);
        assert!(s4.sets[0].is_empty());
        let seed = |set| Event::Seed {
            set,
            values: vec!["z".into()],
        };
        let (o, s5) = step(&p, &s0, &seed(0), Checks::Pass);
        assert_eq!(o, Outcome::Applied);
        assert!(s5.sets[0].contains("z"));
        let (o, s6) = step(&p, &s0, &seed(1), Checks::Pass);
        assert_eq!((o, s6), (Outcome::Invalid, s0));
    }
}
