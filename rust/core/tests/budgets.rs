//! Amount budgets (`budget AMOUNT on PARAM [per tenant]`): the monitor
//! against the ledger spec over random sessions (pauses, approvals,
//! rejections, failures, unknown outcomes, negative and missing amounts),
//! the accounting invariants (what is held = what running and paused calls
//! reserve + what finished calls kept, never more than the budget; a
//! denial or a refund leaves nothing reserved), tenant budgets across
//! interleaved sessions, and the decisions an embedder sees.

mod common;

use agenra_core::decision::{Reason, StepOutput, Verdict};
use agenra_core::ledger::hash_with_budgets;
use agenra_core::policy::{Budget, Grant, Policy, Quota};
use agenra_core::spec;
use agenra_core::{
    Call, CompiledPolicy, Decimal, Event, Monitor, SessionOptions, SharedCounts, TenantPool,
};
use common::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

/// Budgets on the grants `picks` names: (grant mask, param n (1) or
/// amount (3), budget, per tenant).
fn budgeted(mut policy: Policy, picks: &[(bool, bool, u8, bool)], tenant: bool) -> Policy {
    const AMOUNTS: [&str; 5] = ["0", "1.5", "5", "10", "20.25"];
    policy.budgets = picks
        .iter()
        .enumerate()
        .take(policy.grants.len())
        .filter(|(_, p)| p.0)
        .map(|(g, &(_, on_n, a, per_tenant))| Budget {
            grant: g,
            amount: d(AMOUNTS[a as usize % AMOUNTS.len()]),
            param: if on_n { 1 } else { 3 },
            per_tenant: tenant && per_tenant,
        })
        .collect();
    if tenant {
        // A tenant budget is counted by grant name: names must be unique.
        for (g, grant) in policy.grants.iter_mut().enumerate() {
            grant.name = format!("{}#{g}", grant.name);
        }
    }
    policy
}

/// `n` shifted down by 2, so that budgets on `n` see negative amounts too.
fn shift_n(events: Vec<Event>) -> Vec<Event> {
    events
        .into_iter()
        .map(|mut e| {
            if let Event::Call(c) = &mut e {
                if let Some(n) = c.args.get("n").and_then(serde_json::Value::as_i64) {
                    c.args.insert("n".into(), (n - 2).into());
                }
            }
            e
        })
        .collect()
}

fn picks() -> impl Strategy<Value = Vec<(bool, bool, u8, bool)>> {
    proptest::collection::vec(
        (
            prop::bool::weighted(0.6),
            any::<bool>(),
            0u8..5,
            any::<bool>(),
        ),
        10,
    )
}

/// A random policy with budgets and one session's trace.
fn scenario() -> impl Strategy<Value = (Policy, Vec<Event>)> {
    (ledger_policy(), picks())
        .prop_flat_map(|(p, picks)| {
            let p = budgeted(p, &picks, false);
            let agents = p.agents.len();
            (Just(p), steps(agents))
        })
        .prop_map(|(p, mut s)| {
            s.retain(|s| !matches!(s, Step::Task { .. }));
            let e = shift_n(events(&p, &s));
            (p, e)
        })
}

/// A random policy with tenant budgets, 1 to 3 sessions' traces and an
/// interleaving.
fn tenant_scenario() -> impl Strategy<Value = (Policy, Vec<Vec<Event>>, Vec<usize>)> {
    (ledger_policy(), picks())
        .prop_flat_map(|(p, picks)| {
            let p = budgeted(p, &picks, true);
            let agents = p.agents.len();
            (
                Just(p),
                proptest::collection::vec(steps(agents), 1..4),
                proptest::collection::vec(0usize..3, 0..120),
            )
        })
        .prop_map(|(p, traces, order)| {
            let traces = traces
                .into_iter()
                .map(|mut s| {
                    s.retain(|s| !matches!(s, Step::Task { .. }));
                    shift_n(events(&p, &s))
                })
                .collect();
            (p, traces, order)
        })
}

fn interleave(traces: &[Vec<Event>], order: &[usize]) -> Vec<(usize, Event)> {
    let mut next = vec![0; traces.len()];
    let mut out = Vec::new();
    let picks = order
        .iter()
        .map(|o| o % traces.len())
        .chain((0..traces.len()).flat_map(|k| std::iter::repeat_n(k, traces[k].len())));
    for k in picks {
        if let Some(e) = traces[k].get(next[k]) {
            out.push((k, e.clone()));
            next[k] += 1;
        }
    }
    out
}

/// The accounting of one session: per budget grant, what it holds is what
/// its paused and running calls reserve plus what finished calls `kept`,
/// and never more than the budget (for a session budget).
fn check_books(
    policy: &Policy,
    state: &spec::State,
    books: &spec::Books,
    kept: &BTreeMap<usize, Decimal>,
) -> Result<(), String> {
    for b in &policy.budgets {
        let g = b.grant;
        let held = books.spent.get(&g).copied().unwrap_or_default();
        let reserved = books
            .charges
            .values()
            .flatten()
            .filter(|(h, _)| *h == g)
            .try_fold(Decimal::default(), |acc, (_, a)| acc.checked_add(*a))
            .ok_or("overflow")?;
        let kept = kept.get(&g).copied().unwrap_or_default();
        let books = reserved.checked_add(kept).ok_or("overflow")?;
        if books != held {
            return Err(format!(
                "grant {g}: holds {held}, but reserved {reserved} + kept {kept}"
            ));
        }
        if !b.per_tenant && held > b.amount {
            return Err(format!(
                "grant {g}: holds {held} of a budget of {}",
                b.amount
            ));
        }
    }
    // Only paused or running calls hold charges.
    for id in books.charges.keys() {
        if !state.paused.contains_key(id) && !state.running.contains_key(id) {
            return Err(format!(
                "call {id} holds charges but is neither paused nor running"
            ));
        }
    }
    Ok(())
}

/// Updates `kept` after `e`: the charges of a call that succeeded or ended
/// unknown stay spent.
fn keep(
    before: &spec::State,
    books: &spec::Books,
    e: &spec::Event,
    kept: &mut BTreeMap<usize, Decimal>,
) {
    let id = match e {
        spec::Event::Succeeded { id, .. } | spec::Event::Unknown { id } => id,
        _ => return,
    };
    if !before.running.contains_key(id) {
        return;
    }
    for &(g, a) in books.charges.get(id).into_iter().flatten() {
        let k = kept.entry(g).or_default();
        *k = k.checked_add(a).unwrap_or(*k);
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: common::cases(500),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// A session restored from a snapshot at a random point decides the
    /// rest as the original (`docs/store.md`, "Snapshots").
    #[test]
    fn a_restored_session_decides_as_the_original(((policy, events), cut) in (scenario(), any::<prop::sample::Index>())) {
        snapshot_agrees(&policy, &events, cut.index(events.len() + 1), None)?;
    }

    /// One session: the monitor agrees with `spec::step_books` on every
    /// decision, on the units and amounts held and on the ledger hash; the
    /// books balance after every event; a denied call reserves nothing and
    /// a refund returns exactly what the call held.
    #[test]
    fn a_session_with_budgets_agrees_with_the_spec_and_balances((policy, trace) in scenario()) {
        let mut monitor = Monitor::new(policy.clone()).expect("valid policy");
        let mut state = spec::State::initial(&policy);
        let mut books = spec::Books::default();
        let mut kept = BTreeMap::new();
        for e in &trace {
            let se = spec_event(&policy, e);
            let pool = spec::private_pool_of(&policy, &state.ledger, &books);
            let (want, next, next_books, _) =
                spec::step_books(&policy, &state, &books, &pool, &se, spec::Checks::Pass);
            let got = monitor.step(e);
            match (&want, &got) {
                (spec::Outcome::Allow(used), Ok(StepOutput::Decision(d))) => {
                    prop_assert_eq!(d.verdict, Verdict::Allow, "{:?} on {:?}", d, e);
                    prop_assert_eq!(&d.grants, used);
                }
                (spec::Outcome::Pause(used), Ok(StepOutput::Decision(d))) => {
                    prop_assert_eq!(d.verdict, Verdict::Pause, "{:?} on {:?}", d, e);
                    prop_assert_eq!(&d.grants, used);
                }
                (spec::Outcome::Deny, Ok(StepOutput::Decision(d))) => {
                    prop_assert_eq!(d.verdict, Verdict::Deny, "{:?} on {:?}", d, e);
                }
                (spec::Outcome::Applied, Ok(StepOutput::Applied(_))) => {}
                (spec::Outcome::Invalid, Err(_)) => {}
                (want, got) => prop_assert!(false, "spec {:?} but monitor {:?} on {:?}", want, got, e),
            }
            keep(&state, &books, &se, &mut kept);
            // A denial reserves nothing; a refund returns what the call held.
            match (&se, &want) {
                (spec::Event::Call { id, .. }, spec::Outcome::Deny) => {
                    prop_assert_eq!(&next_books.spent, &books.spent);
                    prop_assert!(!next_books.charges.contains_key(id) || books.charges.contains_key(id));
                }
                (spec::Event::Reject { id } | spec::Event::Failed { id }, spec::Outcome::Applied)
                | (spec::Event::Approve { id }, spec::Outcome::Deny) => {
                    prop_assert!(!next_books.charges.contains_key(id), "refunded call {} holds nothing", id);
                    for (g, a) in books.charges.get(id).into_iter().flatten() {
                        let before = books.spent.get(g).copied().unwrap_or_default();
                        let after = next_books.spent.get(g).copied().unwrap_or_default();
                        prop_assert_eq!(after.checked_add(*a), Some(before), "grant {} refunded exactly", g);
                    }
                }
                _ => {}
            }
            state = next;
            books = next_books;
            prop_assert_eq!(&monitor.state().ledger.to_ledger(), &state.ledger);
            prop_assert_eq!(monitor.state().ledger.spent_all(), &books.spent);
            prop_assert_eq!(
                monitor.state().ledger_hash(),
                hash_with_budgets(state.ledger.hash(), &books.spent)
            );
            if let Err(why) = check_books(&policy, &state, &books, &kept) {
                prop_assert!(false, "{}", why);
            }
        }
    }

    /// Several sessions on one tenant pool: the monitor agrees with
    /// `spec::step_books` and the pool; what the pool holds of a tenant budget
    /// is what the sessions hold, and never more than the budget.
    #[test]
    fn tenant_budgets_across_sessions_agree_and_never_overspend(
        (policy, traces, order) in tenant_scenario()
    ) {
        let compiled = CompiledPolicy::new(policy.clone()).expect("valid policy");
        let pool = TenantPool::new();
        let mut monitors: Vec<_> = traces
            .iter()
            .map(|_| compiled.session_with(SessionOptions::default().pool(pool.clone())))
            .collect();
        let mut states = vec![spec::State::initial(&policy); traces.len()];
        let mut books = vec![spec::Books::default(); traces.len()];
        let mut kept = vec![BTreeMap::new(); traces.len()];
        let mut counts = SharedCounts::default();
        for (k, e) in interleave(&traces, &order) {
            let se = spec_event(&policy, &e);
            let (want, next, next_books, after) =
                spec::step_books(&policy, &states[k], &books[k], &counts, &se, spec::Checks::Pass);
            let got = monitors[k].step(&e);
            match (&want, &got) {
                (spec::Outcome::Allow(used), Ok(StepOutput::Decision(d))) => {
                    prop_assert_eq!(d.verdict, Verdict::Allow, "{:?} on {:?}", d, e);
                    prop_assert_eq!(&d.grants, used);
                }
                (spec::Outcome::Pause(used), Ok(StepOutput::Decision(d))) => {
                    prop_assert_eq!(d.verdict, Verdict::Pause);
                    prop_assert_eq!(&d.grants, used);
                }
                (spec::Outcome::Deny, Ok(StepOutput::Decision(d))) => prop_assert_eq!(d.verdict, Verdict::Deny),
                (spec::Outcome::Applied, Ok(StepOutput::Applied(_))) => {}
                (spec::Outcome::Invalid, Err(_)) => {}
                (want, got) => prop_assert!(false, "spec {:?} but monitor {:?} on {:?}", want, got, e),
            }
            keep(&states[k], &books[k], &se, &mut kept[k]);
            states[k] = next;
            books[k] = next_books;
            counts = after;
            prop_assert_eq!(monitors[k].state().ledger.spent_all(), &books[k].spent);
            prop_assert_eq!(&pool.snapshot(), &counts);
            for ((s, b), kept) in states.iter().zip(&books).zip(&kept) {
                if let Err(why) = check_books(&policy, s, b, kept) {
                    prop_assert!(false, "{}", why);
                }
            }
            for b in policy.budgets.iter().filter(|b| b.per_tenant) {
                let name = &policy.grants[b.grant].name;
                let held = books
                    .iter()
                    .filter_map(|s| s.spent.get(&b.grant))
                    .try_fold(Decimal::default(), |acc, a| acc.checked_add(*a));
                prop_assert_eq!(held, Some(counts.spent(name)), "grant {}", name);
                prop_assert!(counts.spent(name) <= b.amount, "grant {} overspent", name);
            }
        }
    }
}

// ---- what an embedder sees ----------------------------------------------

/// `pay(to, amount: decimal, memo?: decimal)`; grant 0 `pay` spends
/// `amount` from a budget of 100.00 (unlimited quota); grant 1 `pay_big`,
/// with approval, quota 1, serves what grant 0 cannot.
fn pay_policy(second: bool, per_tenant: bool) -> Policy {
    let mut p = Policy::empty("pay");
    let param = |name: &str, ty, optional| agenra_core::policy::Param {
        name: name.into(),
        ty,
        list: false,
        optional,
        fields: Vec::new(),
    };
    p.tools.push(agenra_core::policy::Tool {
        name: "pay".into(),
        params: vec![
            param("to", agenra_core::ParamType::Str, false),
            param("amount", agenra_core::ParamType::Decimal, true),
        ],
        resource: None,
        sinks: vec![],
        output: agenra_core::Label::BOTTOM,
        sanitizer: None,
        facts: vec![],
    });
    let grant = |name: &str, quota, approval| Grant {
        name: name.into(),
        agent: 0,
        tool: 0,
        resource: None,
        args: vec![],
        quota,
        approval,
        expires_at: None,
        discovers: None,
    };
    p.grants = vec![grant("pay", Quota::Unlimited, false)];
    if second {
        p.grants.push(grant("pay_big", Quota::Limited(1), true));
    }
    p.budgets = vec![Budget {
        grant: 0,
        amount: d("100.00"),
        param: 1,
        per_tenant,
    }];
    p
}

fn pay(id: &str, amount: Option<serde_json::Value>) -> Event {
    let mut args = serde_json::Map::new();
    args.insert("to".into(), "bob".into());
    if let Some(a) = amount {
        args.insert("amount".into(), a);
    }
    Event::Call(Call {
        session: None,
        id: id.into(),
        time: 0,
        agent: None,
        tool: "pay".into(),
        args,
        lineage: BTreeMap::new(),
        inferred: BTreeMap::new(),
    })
}

fn result(id: &str, status: agenra_core::event::Outcome) -> Event {
    Event::Result(agenra_core::Report {
        session: None,
        call: id.into(),
        time: None,
        status,
        output: serde_json::Value::Null,
        discovered: vec![],
    })
}

fn decide(m: &mut Monitor, e: &Event) -> agenra_core::Decision {
    match m.step(e) {
        Ok(StepOutput::Decision(d)) => d,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_budget_is_reserved_kept_refunded_and_passed_over_exactly() {
    let policy = pay_policy(true, false);
    let text = |d: &agenra_core::Decision| d.reason_text(&policy);
    let mut m = Monitor::new(policy.clone()).unwrap();
    let a = decide(&mut m, &pay("a", Some("60.10".into())));
    assert_eq!((a.verdict, a.grants.clone()), (Verdict::Allow, vec![0]));
    assert_eq!(m.budget_left(0), Some(d("39.9")));
    // 39.91 is more than is left: grant 0 is passed over, grant 1 serves
    // (and asks a human).
    let b = decide(&mut m, &pay("b", Some("39.91".into())));
    assert_eq!((b.verdict, b.grants.clone()), (Verdict::Pause, vec![1]));
    // Exactly what is left: served by grant 0 (no float rounding).
    let c = decide(&mut m, &pay("c", Some("39.90".into())));
    assert_eq!((c.verdict, c.grants.clone()), (Verdict::Allow, vec![0]));
    assert_eq!(m.budget_left(0), Some(d("0")));
    let e = decide(&mut m, &pay("e", Some("0.01".into())));
    assert_eq!(e.verdict, Verdict::Deny, "grant 1's unit is reserved by b");
    assert!(matches!(
        &e.reason,
        Reason::NoBudget {
            agent: 0,
            grant: 0,
            refusal,
        } if matches!(**refusal, spec::BudgetRefusal::Exceeds { .. })
    ));
    assert_eq!(
        text(&e),
        "grant `pay` of `main` matches but its budget does not serve the call: the amount 0.01 exceeds what is left of the budget (0)"
    );
    // A failed call returns its amount; a succeeded one keeps it.
    m.step(&result("a", agenra_core::event::Outcome::Failed))
        .unwrap();
    assert_eq!(m.budget_left(0), Some(d("60.1")));
    m.step(&result("c", agenra_core::event::Outcome::Succeeded))
        .unwrap();
    assert_eq!(m.budget_left(0), Some(d("60.1")));
    // A negative amount and a missing one are not served by the budget.
    let neg = decide(&mut m, &pay("n", Some("-5".into())));
    assert_eq!(neg.verdict, Verdict::Deny);
    assert_eq!(
        text(&neg),
        "grant `pay` of `main` matches but its budget does not serve the call: the amount in `amount` is negative (-5)"
    );
    let none = decide(&mut m, &pay("m", None));
    assert_eq!(
        text(&none),
        "grant `pay` of `main` matches but its budget does not serve the call: the call gives no amount in `amount`"
    );
    assert_eq!(m.budget_left(0), Some(d("60.1")), "denials reserve nothing");
    // An unknown outcome keeps the amount too.
    let u = decide(&mut m, &pay("u", Some(60.into())));
    assert_eq!(u.verdict, Verdict::Allow);
    m.step(&result("u", agenra_core::event::Outcome::Unknown))
        .unwrap();
    assert_eq!(m.budget_left(0), Some(d("0.1")));
    assert_eq!(m.state().ledger.spent(0), d("99.9"));
}

#[test]
fn a_paused_budget_call_holds_its_amount_until_approved_or_rejected() {
    // The budget grant itself needs approval.
    let mut policy = pay_policy(false, false);
    policy.grants[0].approval = true;
    let mut m = Monitor::new(policy).unwrap();
    let p = decide(&mut m, &pay("p", Some(70.into())));
    assert_eq!(p.verdict, Verdict::Pause);
    assert_eq!(m.budget_left(0), Some(d("30")), "reserved while paused");
    assert_eq!(
        decide(&mut m, &pay("q", Some(31.into()))).verdict,
        Verdict::Deny
    );
    let reject = Event::Reject(agenra_core::Resolve {
        session: None,
        call: "p".into(),
        time: None,
    });
    m.step(&reject).unwrap();
    assert_eq!(m.budget_left(0), Some(d("100")), "a rejection returns it");
    assert_eq!(
        decide(&mut m, &pay("r", Some(100.into()))).verdict,
        Verdict::Pause
    );
    assert_eq!(m.state().ledger.spent(0), d("100"));
}

#[test]
fn a_tenant_budget_is_spent_by_every_session_of_the_tenant() {
    let compiled = CompiledPolicy::new(pay_policy(false, true)).unwrap();
    let pool = TenantPool::new();
    let opts = SessionOptions::default().pool(pool.clone());
    let mut first = compiled.session_with(opts.clone());
    let mut second = compiled.session_with(opts.clone());
    assert_eq!(
        decide(&mut first, &pay("a", Some(70.into()))).verdict,
        Verdict::Allow
    );
    assert_eq!(pool.snapshot().spent("pay"), d("70"));
    assert_eq!(second.budget_left(0), Some(d("30")));
    assert_eq!(
        decide(&mut second, &pay("b", Some("30.01".into()))).verdict,
        Verdict::Deny
    );
    assert_eq!(
        decide(&mut second, &pay("b2", Some(30.into()))).verdict,
        Verdict::Allow
    );
    assert_eq!(pool.snapshot().spent("pay"), d("100"));
    first
        .step(&result("a", agenra_core::event::Outcome::Failed))
        .unwrap();
    assert_eq!(
        pool.snapshot().spent("pay"),
        d("30"),
        "the refund reaches the pool"
    );
    assert_eq!(second.budget_left(0), Some(d("70")));
    // Without a pool, a tenant budget is the session's own.
    let mut alone = compiled.session();
    assert_eq!(
        decide(&mut alone, &pay("c", Some(100.into()))).verdict,
        Verdict::Allow
    );
    assert_eq!(pool.snapshot().spent("pay"), d("30"));
}
