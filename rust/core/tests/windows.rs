//! Renewing quotas and budgets (`quota N per 10m`, `budget B on PARAM per
//! day`, per session or per tenant): the monitor against the ledger spec
//! (`spec::step_books`) over random sessions with pauses, approvals,
//! rejections, failures, unknown outcomes, negative and missing amounts
//! and several windows; and the accounting per window: in every window of
//! every renewing limit, reserved + kept <= the limit, what a session holds
//! in its current window is exactly that, and a denial or a refund leaves
//! nothing reserved.

mod common;

use agenra_core::decision::{StepOutput, Verdict};
use agenra_core::ledger::{hash_with_budgets, hash_with_windows};
use agenra_core::policy::{Policy, Quota, RenewLimit, Renewal};
use agenra_core::spec;
use agenra_core::window::{limit_of, pool_key};
use agenra_core::TenantPool;
use agenra_core::{Call, CompiledPolicy, Decimal, Event, Monitor, SessionOptions, SharedCounts};
use common::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

/// (units renewal?, its limit, amount renewal?, on `n` or `amount`, its
/// limit, window choice, per tenant) per grant.
type Pick = (bool, u8, bool, bool, u8, u8, bool);

fn picks() -> impl Strategy<Value = Vec<Pick>> {
    proptest::collection::vec(
        (
            prop::bool::weighted(0.5),
            0u8..4,
            prop::bool::weighted(0.5),
            any::<bool>(),
            0u8..5,
            0u8..4,
            any::<bool>(),
        ),
        10,
    )
}

/// Renewing limits on the grants `picks` names.
fn windowed(mut policy: Policy, picks: &[Pick], tenant: bool) -> Policy {
    const AMOUNTS: [&str; 5] = ["0", "1.5", "5", "10", "20.25"];
    const SECS: [u64; 4] = [1, 3, 5, 10];
    policy.budgets.clear();
    for (g, &(units, n, amount, on_n, a, secs, per_tenant)) in
        picks.iter().enumerate().take(policy.grants.len())
    {
        let secs = SECS[secs as usize % SECS.len()];
        let per_tenant = tenant && per_tenant;
        if units {
            policy.grants[g].quota = Quota::Unlimited;
            policy.shared_grants.retain(|&s| s != g);
            policy.renewals.push(Renewal {
                grant: g,
                secs,
                limit: RenewLimit::Units(u64::from(n)),
                per_tenant,
            });
        }
        if amount {
            policy.renewals.push(Renewal {
                grant: g,
                // A different window from the units', sometimes.
                secs: if on_n { secs } else { secs * 2 },
                limit: RenewLimit::Amount {
                    amount: d(AMOUNTS[a as usize % AMOUNTS.len()]),
                    param: if on_n { 1 } else { 3 },
                },
                per_tenant,
            });
        }
    }
    if tenant {
        // A tenant window is counted by grant name: names must be unique.
        for (g, grant) in policy.grants.iter_mut().enumerate() {
            grant.name = format!("{}#{g}", grant.name);
        }
    }
    policy
}

/// `n` shifted down by 2, so that amounts on `n` are negative too.
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

fn scenario() -> impl Strategy<Value = (Policy, Vec<Event>)> {
    (ledger_policy(), picks())
        .prop_flat_map(|(p, picks)| {
            let p = windowed(p, &picks, false);
            let agents = p.agents.len();
            (Just(p), steps(agents))
        })
        .prop_map(|(p, mut s)| {
            s.retain(|s| !matches!(s, Step::Task { .. }));
            let e = shift_n(events(&p, &s));
            (p, e)
        })
}

/// Several sessions of one tenant, interleaved, on one clock: each call's
/// time is the number of calls before it (results keep the session's
/// time).
fn tenant_scenario() -> impl Strategy<Value = (Policy, Vec<(usize, Event)>)> {
    (ledger_policy(), picks())
        .prop_flat_map(|(p, picks)| {
            let p = windowed(p, &picks, true);
            let agents = p.agents.len();
            (
                Just(p),
                proptest::collection::vec(steps(agents), 1..4),
                proptest::collection::vec(0usize..3, 0..120),
            )
        })
        .prop_map(|(p, traces, order)| {
            let traces: Vec<Vec<Event>> = traces
                .into_iter()
                .map(|mut s| {
                    s.retain(|s| !matches!(s, Step::Task { .. }));
                    shift_n(events(&p, &s))
                })
                .collect();
            let mut next = vec![0; traces.len()];
            let mut out = Vec::new();
            let picks = order
                .iter()
                .map(|o| o % traces.len())
                .chain((0..traces.len()).flat_map(|k| std::iter::repeat_n(k, traces[k].len())));
            let mut clock = 0;
            for k in picks {
                if let Some(e) = traces[k].get(next[k]) {
                    let mut e = e.clone();
                    match &mut e {
                        Event::Call(c) => {
                            clock += 1;
                            c.time = clock / 2;
                        }
                        Event::Result(r) => r.time = None,
                        Event::Approve(r) | Event::Reject(r) => r.time = None,
                        Event::Task(_) => {}
                    }
                    out.push((k, e));
                    next[k] += 1;
                }
            }
            (p, out)
        })
}

/// Per (renewal, window): what calls that finished kept.
type Kept = BTreeMap<(usize, u64), Decimal>;

fn add(m: &mut Kept, key: (usize, u64), x: Decimal) {
    let k = m.entry(key).or_default();
    *k = k.checked_add(x).expect("fits");
}

/// What the paused and running calls of a session reserve, per (renewal,
/// window).
fn reserved(books: &spec::Books) -> Kept {
    let mut m = Kept::new();
    for &(i, w, x) in books.lent.values().flatten() {
        add(&mut m, (i, w), x);
    }
    m
}

fn keep(before: &spec::State, books: &spec::Books, e: &spec::Event, kept: &mut Kept) {
    let id = match e {
        spec::Event::Succeeded { id, .. } | spec::Event::Unknown { id } => id,
        _ => return,
    };
    if !before.running.contains_key(id) {
        return;
    }
    for &(i, w, x) in books.lent.get(id).into_iter().flatten() {
        add(kept, (i, w), x);
    }
}

/// Every window of every renewing limit: reserved + kept (of each
/// session, or summed over the sessions for a tenant limit) <= the limit; a session's holdings in its current window are
/// its reserved + kept there; only paused and running calls are lent
/// anything.
fn check_windows(
    policy: &Policy,
    sessions: &[(&spec::State, &spec::Books, &Kept)],
) -> Result<(), String> {
    let mut total = Kept::new();
    for (state, books, kept) in sessions {
        let mut mine = reserved(books);
        for (&key, &x) in kept.iter() {
            add(&mut mine, key, x);
        }
        for (&i, &(w, held)) in &books.windows {
            let want = mine.get(&(i, w)).copied().unwrap_or_default();
            if want != held {
                return Err(format!(
                    "renewal {i} window {w}: holds {held}, but reserved + kept = {want}"
                ));
            }
        }
        for (&(i, w), &x) in &mine {
            let current = books.windows.get(&i).map(|&(at, _)| at);
            if x > Decimal::default() && current.is_some_and(|at| at < w) {
                return Err(format!(
                    "renewal {i}: window {w} used, holdings at {current:?}"
                ));
            }
            if policy.renewals[i].per_tenant {
                add(&mut total, (i, w), x);
            } else if x > limit_of(&policy.renewals[i]) {
                return Err(format!("renewal {i} window {w}: {x} held of its limit"));
            }
        }
        for id in books.lent.keys() {
            if !state.paused.contains_key(id) && !state.running.contains_key(id) {
                return Err(format!(
                    "call {id} is lent something but neither paused nor running"
                ));
            }
        }
    }
    for (&(i, w), &x) in &total {
        let limit = limit_of(&policy.renewals[i]);
        if x > limit {
            return Err(format!("renewal {i} window {w}: {x} held of {limit}"));
        }
    }
    Ok(())
}

fn agree(
    want: &spec::Outcome,
    got: &Result<StepOutput, agenra_core::StepError>,
) -> Result<(), String> {
    match (want, got) {
        (spec::Outcome::Allow(used), Ok(StepOutput::Decision(d)))
            if d.verdict == Verdict::Allow && &d.grants == used =>
        {
            Ok(())
        }
        (spec::Outcome::Pause(used), Ok(StepOutput::Decision(d)))
            if d.verdict == Verdict::Pause && &d.grants == used =>
        {
            Ok(())
        }
        (spec::Outcome::Deny, Ok(StepOutput::Decision(d))) if d.verdict == Verdict::Deny => Ok(()),
        (spec::Outcome::Applied, Ok(StepOutput::Applied(_))) => Ok(()),
        (spec::Outcome::Invalid, Err(_)) => Ok(()),
        (want, got) => Err(format!("spec {want:?} but monitor {got:?}")),
    }
}

/// A denial lends nothing; a refund takes exactly what the call was lent
/// off the windows that lent it (when still current) and leaves it no loan.
fn check_refund(
    se: &spec::Event,
    want: &spec::Outcome,
    books: &spec::Books,
    next: &spec::Books,
) -> Result<(), String> {
    match (se, want) {
        (spec::Event::Call { id, .. }, spec::Outcome::Deny)
            if next.windows != books.windows || next.lent.get(id) != books.lent.get(id) =>
        {
            return Err(format!("denied call {id} changed the windows"));
        }
        (spec::Event::Reject { id } | spec::Event::Failed { id }, spec::Outcome::Applied)
        | (spec::Event::Approve { id }, spec::Outcome::Deny) => {
            if next.lent.contains_key(id) {
                return Err(format!("refunded call {id} still holds a loan"));
            }
            for &(i, w, x) in books.lent.get(id).into_iter().flatten() {
                let before = books.windows.get(&i).copied();
                let after = next.windows.get(&i).copied();
                let held = |s: Option<(u64, Decimal)>| match s {
                    Some((at, h)) if at == w => h,
                    _ => Decimal::default(),
                };
                if before.is_some_and(|(at, _)| at == w)
                    && held(after).checked_add(x) != Some(held(before))
                {
                    return Err(format!("call {id}: {x} not returned to window {w} of {i}"));
                }
                if before.is_some_and(|(at, _)| at != w) && after != before {
                    return Err(format!(
                        "call {id}: a refund to past window {w} changed {i}"
                    ));
                }
            }
        }
        _ => {}
    }
    Ok(())
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
    /// decision, the windows held and the ledger hash; the windows balance
    /// after every event.
    #[test]
    fn a_session_with_windows_agrees_with_the_spec_and_balances((policy, trace) in scenario()) {
        let mut monitor = Monitor::new(policy.clone()).expect("valid policy");
        let mut state = spec::State::initial(&policy);
        let mut books = spec::Books::default();
        let mut kept = Kept::new();
        for e in &trace {
            let se = spec_event(&policy, e);
            let pool = spec::private_pool_of(&policy, &state.ledger, &books);
            let (want, next, next_books, _) =
                spec::step_books(&policy, &state, &books, &pool, &se, spec::Checks::Pass);
            let got = monitor.step(e);
            if let Err(why) = agree(&want, &got) {
                prop_assert!(false, "{} on {:?}", why, e);
            }
            if let Err(why) = check_refund(&se, &want, &books, &next_books) {
                prop_assert!(false, "{}", why);
            }
            keep(&state, &books, &se, &mut kept);
            state = next;
            books = next_books;
            prop_assert_eq!(monitor.state().ledger.windows(), &books.windows);
            prop_assert_eq!(
                monitor.state().ledger_hash(),
                hash_with_windows(hash_with_budgets(state.ledger.hash(), &books.spent), &books.windows)
            );
            if let Err(why) = check_windows(&policy, &[(&state, &books, &kept)]) {
                prop_assert!(false, "{}", why);
            }
        }
    }

    /// Several sessions on one tenant pool and one clock: the monitor
    /// agrees with the spec and the pool; what the pool holds of a tenant
    /// window is what the sessions hold, never more than the limit.
    #[test]
    fn tenant_windows_across_sessions_agree_and_never_overspend((policy, trace) in tenant_scenario()) {
        let sessions = trace.iter().map(|(k, _)| k + 1).max().unwrap_or(0);
        let compiled = CompiledPolicy::new(policy.clone()).expect("valid policy");
        let pool = TenantPool::new();
        let mut monitors: Vec<_> = (0..sessions)
            .map(|_| compiled.session_with(SessionOptions::default().pool(pool.clone())))
            .collect();
        let mut states = vec![spec::State::initial(&policy); sessions];
        let mut books = vec![spec::Books::default(); sessions];
        let mut kept = vec![Kept::new(); sessions];
        let mut counts = SharedCounts::default();
        for (k, e) in &trace {
            let k = *k;
            let se = spec_event(&policy, e);
            let (want, next, next_books, after) =
                spec::step_books(&policy, &states[k], &books[k], &counts, &se, spec::Checks::Pass);
            let got = monitors[k].step(e);
            if let Err(why) = agree(&want, &got) {
                prop_assert!(false, "{} on {:?}", why, e);
            }
            if let Err(why) = check_refund(&se, &want, &books[k], &next_books) {
                prop_assert!(false, "{}", why);
            }
            keep(&states[k], &books[k], &se, &mut kept[k]);
            states[k] = next;
            books[k] = next_books;
            counts = after;
            prop_assert_eq!(monitors[k].state().ledger.windows(), &books[k].windows);
            prop_assert_eq!(&pool.snapshot(), &counts);
            let all: Vec<_> = (0..sessions).map(|s| (&states[s], &books[s], &kept[s])).collect();
            if let Err(why) = check_windows(&policy, &all) {
                prop_assert!(false, "{}", why);
            }
            for (i, r) in policy.renewals.iter().enumerate().filter(|(_, r)| r.per_tenant) {
                if let Some((w, held)) = counts.window(&pool_key(&policy, r)) {
                    let sum = books
                        .iter()
                        .filter_map(|b| b.windows.get(&i).filter(|(at, _)| *at == w))
                        .try_fold(Decimal::default(), |acc, (_, h)| acc.checked_add(*h));
                    prop_assert_eq!(sum, Some(held), "renewal {} window {}", i, w);
                    prop_assert!(held <= limit_of(r), "renewal {} overspent", i);
                }
            }
        }
    }
}

/// `tool pay(amount: decimal)`, grant `pay`: `quota 5 per 10m per tenant`.
fn pooled_policy() -> Policy {
    let mut p = Policy::empty("pooled");
    p.tools.push(agenra_core::policy::Tool {
        name: "pay".into(),
        params: vec![agenra_core::policy::Param {
            name: "amount".into(),
            ty: agenra_core::ParamType::Decimal,
            list: false,
            optional: false,
            fields: vec![],
        }],
        resource: None,
        sinks: vec![],
        output: agenra_core::Label::BOTTOM,
        sanitizer: None,
        facts: vec![],
    });
    p.grants.push(agenra_core::policy::Grant {
        name: "pay".into(),
        agent: 0,
        tool: 0,
        resource: None,
        args: vec![],
        quota: Quota::Unlimited,
        approval: false,
        expires_at: None,
        discovers: None,
    });
    p.renewals.push(Renewal {
        grant: 0,
        secs: 600,
        limit: RenewLimit::Units(5),
        per_tenant: true,
    });
    p
}

/// A session whose clock is behind the tenant's window (another session
/// is ahead, or the server's clock stepped back across a boundary) is not
/// served by the tenant's window: a step back never opens a fresh window.
/// A call without a time is not an event at all.
#[test]
fn a_call_in_a_window_before_the_tenants_is_denied_and_a_call_needs_a_time() {
    let policy = pooled_policy();
    let compiled = CompiledPolicy::new(policy.clone()).expect("valid policy");
    let pool = TenantPool::new();
    let mut ahead = compiled.session_with(SessionOptions::default().pool(pool.clone()));
    let mut behind = compiled.session_with(SessionOptions::default().pool(pool.clone()));
    let pay = |id: &str, time: u64| Call::new(id, "pay", time).arg("amount", "1".into());
    assert_eq!(
        ahead.authorize(&pay("a1", 600)).unwrap().verdict,
        Verdict::Allow
    );
    let late = behind.authorize(&pay("b1", 599)).unwrap();
    assert_eq!(late.verdict, Verdict::Deny, "{late:?}");
    assert_eq!(
        pool.snapshot()
            .window(&pool_key(&policy, &policy.renewals[0])),
        Some((1, d("1"))),
        "window 1 holds one unit; window 0 was not reopened"
    );
    assert_eq!(
        behind.authorize(&pay("b2", 600)).unwrap().verdict,
        Verdict::Allow
    );
    let untimed = serde_json::from_value::<Event>(serde_json::json!(
        {"kind": "call", "id": "x", "tool": "pay", "args": {"amount": "1"}}
    ));
    assert!(untimed.is_err(), "a call without `time` does not parse");
}
