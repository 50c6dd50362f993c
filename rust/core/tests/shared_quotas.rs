//! Quotas shared by a tenant's sessions (`quota N per tenant`): the monitor
//! against the ledger spec with one explicit pool across interleaved
//! sessions, the pool never spending beyond a quota, and the behaviour an
//! embedder sees (a second session finds the quota spent; without a pool,
//! shared grants behave per session).

mod common;

use agenra_core::decision::{StepOutput, Verdict};
use agenra_core::policy::{Grant, Policy, Quota};
use agenra_core::spec;
use agenra_core::{Call, CompiledPolicy, Event, Monitor, SessionOptions, SharedCounts, TenantPool};
use common::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

/// Makes the limited grants `mask` picks shared by the tenant.
fn share(mut policy: Policy, mask: &[bool]) -> Policy {
    policy.shared_grants = (0..policy.grants.len())
        .filter(|&g| {
            mask.get(g).copied().unwrap_or(false)
                && matches!(policy.grants[g].quota, Quota::Limited(_))
        })
        .collect();
    policy
}

/// A random policy with some shared grants, the traces of 1 to 3 sessions
/// and an interleaving (which session moves next).
fn scenario() -> impl Strategy<Value = (Policy, Vec<Vec<Event>>, Vec<usize>)> {
    (
        ledger_policy(),
        proptest::collection::vec(prop::bool::weighted(0.6), 10),
    )
        .prop_flat_map(|(p, mask)| {
            let p = share(p, &mask);
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
                    events(&p, &s)
                })
                .collect();
            (p, traces, order)
        })
}

/// The interleaving: `order` picks the session that moves next (modulo the
/// number of sessions); the sessions' remaining events follow in turn.
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

/// Every shared grant's units taken equal what the sessions hold, and
/// never exceed its quota.
fn check_pool(policy: &Policy, pool: &SharedCounts, states: &[spec::State]) -> Result<(), String> {
    for &g in &policy.shared_grants {
        let grant = &policy.grants[g];
        let held: u64 = states.iter().map(|s| s.ledger.held(g)).sum();
        let taken = pool.taken(&grant.name);
        if taken != held {
            return Err(format!(
                "grant {}: pool says {taken} taken, sessions hold {held}",
                grant.name
            ));
        }
        match grant.quota {
            Quota::Limited(q) if taken <= q => {}
            q => return Err(format!("grant {}: {taken} taken of {q:?}", grant.name)),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: common::cases(500),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Several sessions on one tenant pool, in any interleaving: the
    /// monitor agrees with `spec::step_in` on every decision, on each
    /// session's ledger and ledger hash, and on the pool; and the units
    /// taken of a shared grant never exceed its quota (pauses, approvals
    /// re-checked, rejections, failures and unknown outcomes included).
    #[test]
    fn sessions_on_one_pool_agree_with_the_spec((policy, traces, order) in scenario()) {
        let compiled = CompiledPolicy::new(policy.clone()).expect("valid policy");
        let pool = TenantPool::new();
        let mut monitors: Vec<_> = traces
            .iter()
            .map(|_| compiled.session_with(SessionOptions::default().pool(pool.clone())))
            .collect();
        let mut states = vec![spec::State::initial(&policy); traces.len()];
        let mut counts = SharedCounts::default();
        for (k, e) in interleave(&traces, &order) {
            let (want, next, after) =
                spec::step_in(&policy, &states[k], &counts, &spec_event(&policy, &e), spec::Checks::Pass);
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
            states[k] = next;
            counts = after;
            prop_assert_eq!(&monitors[k].state().ledger.to_ledger(), &states[k].ledger);
            prop_assert_eq!(monitors[k].state().ledger_hash(), states[k].ledger.hash());
            prop_assert_eq!(&pool.snapshot(), &counts);
            if let Err(why) = check_pool(&policy, &counts, &states) {
                prop_assert!(false, "{}", why);
            }
        }
    }

    /// Without a tenant pool a session's shared grants draw on a private
    /// pool: the monitor agrees with `spec::step`, whose pool is the
    /// session's own holdings, and the session never exceeds a quota.
    #[test]
    fn a_session_without_a_pool_agrees_with_the_private_spec((policy, traces, _) in scenario()) {
        let mut monitor = Monitor::new(policy.clone()).expect("valid policy");
        let mut state = spec::State::initial(&policy);
        for e in &traces[0] {
            let (want, next) = spec::step(&policy, &state, &spec_event(&policy, e), spec::Checks::Pass);
            let (want_in, next_in, pool) = spec::step_in(
                &policy, &state, &spec::private_pool(&policy, &state.ledger),
                &spec_event(&policy, e), spec::Checks::Pass,
            );
            prop_assert_eq!(&want, &want_in);
            prop_assert_eq!(&next, &next_in);
            prop_assert_eq!(&pool, &spec::private_pool(&policy, &next.ledger));
            let got = monitor.step(e);
            let verdict = match &got {
                Ok(StepOutput::Decision(d)) => Some((d.verdict, d.grants.clone())),
                _ => None,
            };
            let expected = match &want {
                spec::Outcome::Allow(u) => Some((Verdict::Allow, u.clone())),
                spec::Outcome::Pause(u) => Some((Verdict::Pause, u.clone())),
                spec::Outcome::Deny => Some((Verdict::Deny, vec![])),
                _ => None,
            };
            prop_assert_eq!(verdict, expected, "on {:?}", e);
            state = next;
            prop_assert_eq!(&monitor.state().ledger.to_ledger(), &state.ledger);
            prop_assert_eq!(monitor.state().ledger_hash(), state.ledger.hash());
            if let Err(why) = check_pool(&policy, &pool, std::slice::from_ref(&state)) {
                prop_assert!(false, "{}", why);
            }
        }
    }
}

fn pay_policy(shared: bool) -> Policy {
    let mut p = agenra_policy_free_policy();
    if shared {
        p.shared_grants = vec![0];
    }
    p
}

/// `pay(to)`; grant 0: `pay` quota 2 (shared when asked); grant 1: `pay`
/// with approval, quota 1, per session.
fn agenra_policy_free_policy() -> Policy {
    let mut p = Policy::empty("pay");
    p.tools.push(agenra_core::policy::Tool {
        name: "pay".into(),
        params: vec![agenra_core::policy::Param {
            name: "to".into(),
            ty: agenra_core::ParamType::Str,
            list: false,
            optional: false,
            fields: Vec::new(),
        }],
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
        quota: Quota::Limited(quota),
        approval,
        expires_at: None,
        discovers: None,
    };
    p.grants = vec![grant("pay", 2, false), grant("pay_approved", 1, true)];
    p
}

fn pay(id: &str) -> Event {
    let mut args = serde_json::Map::new();
    args.insert("to".into(), "bob".into());
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

fn decide(m: &mut Monitor, id: &str) -> agenra_core::Decision {
    match m.step(&pay(id)) {
        Ok(StepOutput::Decision(d)) => d,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_second_session_finds_the_shared_quota_spent() {
    let compiled = CompiledPolicy::new(pay_policy(true)).unwrap();
    let pool = TenantPool::new();
    let opts = SessionOptions::default().pool(pool.clone());
    let mut first = compiled.session_with(opts.clone());
    let d = decide(&mut first, "a1");
    assert_eq!((d.verdict, d.grants.clone()), (Verdict::Allow, vec![0]));
    assert_eq!(
        d.reason,
        agenra_core::decision::Reason::Granted {
            agent: 0,
            left: Some(1)
        }
    );
    assert_eq!(decide(&mut first, "a2").verdict, Verdict::Allow);
    assert_eq!(pool.snapshot().taken("pay"), 2);

    // A new session of the tenant: grant 0 is spent, grant 1 (per
    // session, with approval) serves and pauses.
    let mut second = compiled.session_with(opts.clone());
    let d = decide(&mut second, "b1");
    assert_eq!((d.verdict, d.grants.clone()), (Verdict::Pause, vec![1]));
    let d = decide(&mut second, "b2");
    assert_eq!(d.verdict, Verdict::Deny, "both grants are spent");
    assert_eq!(
        d.reason,
        agenra_core::decision::Reason::NoGrant {
            agent: 0,
            exhausted: Some(0)
        }
    );

    // The first session's failed call gives its unit back to the pool,
    // and the second session can now spend it.
    let failed = Event::Result(agenra_core::Report {
        session: None,
        call: "a1".into(),
        time: None,
        status: agenra_core::event::Outcome::Failed,
        output: serde_json::Value::Null,
        discovered: vec![],
    });
    first.step(&failed).unwrap();
    assert_eq!(pool.snapshot().taken("pay"), 1);
    let d = decide(&mut second, "b3");
    assert_eq!((d.verdict, d.grants.clone()), (Verdict::Allow, vec![0]));
    assert_eq!(pool.snapshot().taken("pay"), 2);

    // `check` reads the pool and takes nothing.
    let mut third = compiled.session_with(opts);
    let d = third.check(&pay_call("c1")).unwrap();
    assert_eq!(d.grants, vec![1]);
    assert_eq!(pool.snapshot().taken("pay"), 2);

    // Each session's ledger hash depends only on its own events: the
    // first session (holding one unit) hashes like a fresh session that
    // took one, whatever the others did.
    let mut alone = CompiledPolicy::new(pay_policy(true)).unwrap().session();
    decide(&mut alone, "x");
    assert_eq!(first.state().ledger_hash(), alone.state().ledger_hash());
    assert_ne!(
        first.state().ledger_hash(),
        second.state().ledger_hash(),
        "the second session holds other units"
    );
}

fn pay_call(id: &str) -> Call {
    match pay(id) {
        Event::Call(c) => c,
        _ => unreachable!(),
    }
}

#[test]
fn without_a_pool_shared_grants_behave_per_session() {
    let compiled = CompiledPolicy::new(pay_policy(true)).unwrap();
    for _ in 0..2 {
        let mut s = compiled.session();
        assert_eq!(decide(&mut s, "a").verdict, Verdict::Allow);
        assert_eq!(decide(&mut s, "b").verdict, Verdict::Allow);
        assert_eq!(decide(&mut s, "c").verdict, Verdict::Pause, "grant 0 spent");
    }
}

#[test]
fn the_ledger_hash_tags_shared_grants_and_keeps_per_session_hashes() {
    let per_session = CompiledPolicy::new(pay_policy(false)).unwrap();
    let shared = CompiledPolicy::new(pay_policy(true)).unwrap();
    // Different policies, different initial hashes (tag 2 and a count of
    // 0 held, against tag 0 and 2 left).
    assert_ne!(
        per_session.session().state().ledger_hash(),
        shared.session().state().ledger_hash()
    );
    // A policy without shared grants hashes as it always did: tag 0.
    let mut bytes = b"agenra-ledger-v2".to_vec();
    bytes.extend_from_slice(&2u64.to_be_bytes());
    for n in [2u64, 1] {
        bytes.push(0);
        bytes.extend_from_slice(&n.to_be_bytes());
    }
    assert_eq!(
        per_session.session().state().ledger_hash(),
        agenra_core::Hash::of_bytes(&bytes)
    );
    // A shared grant: tag 2 and the units the session holds.
    let mut s = shared.session();
    decide(&mut s, "a");
    let mut bytes = b"agenra-ledger-v2".to_vec();
    bytes.extend_from_slice(&2u64.to_be_bytes());
    for (tag, n) in [(2u8, 1u64), (0, 1)] {
        bytes.push(tag);
        bytes.extend_from_slice(&n.to_be_bytes());
    }
    assert_eq!(s.state().ledger_hash(), agenra_core::Hash::of_bytes(&bytes));
    // The content hash of a policy without shared grants is unchanged by
    // the new field (it is not encoded when empty).
    let json = serde_json::to_string(per_session.policy()).unwrap();
    assert!(!json.contains("shared_grants"));
    assert!(serde_json::to_string(shared.policy())
        .unwrap()
        .contains("\"shared_grants\":[0]"));
}

#[test]
fn a_compiled_policy_rejects_bad_shared_grants() {
    let mut p = pay_policy(true);
    p.grants[0].quota = Quota::Unlimited;
    let err = CompiledPolicy::new(p).unwrap_err().to_string();
    assert!(
        err.contains("shared_grants[0]") && err.contains("nothing to share"),
        "{err}"
    );
    let mut p = pay_policy(false);
    p.shared_grants = vec![5];
    assert!(CompiledPolicy::new(p).is_err());
}

/// Threads spending one shared quota through their own sessions: exactly
/// the quota is admitted, never more.
#[test]
fn concurrent_sessions_never_spend_beyond_the_quota() {
    let mut p = pay_policy(true);
    p.grants[0].quota = Quota::Limited(50);
    p.grants.truncate(1);
    let compiled = CompiledPolicy::new(p).unwrap();
    let pool = TenantPool::new();
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let mut s = compiled.session_with(SessionOptions::default().pool(pool.clone()));
            std::thread::spawn(move || {
                let mut allowed = 0;
                for i in 0..40 {
                    let d = decide(&mut s, &format!("t{t}c{i}"));
                    if d.verdict == Verdict::Allow {
                        allowed += 1;
                        // Every fifth call fails: its unit comes back.
                        if i % 5 == 0 {
                            let failed = Event::Result(agenra_core::Report {
                                session: None,
                                call: format!("t{t}c{i}"),
                                time: None,
                                status: agenra_core::event::Outcome::Failed,
                                output: serde_json::Value::Null,
                                discovered: vec![],
                            });
                            s.step(&failed).unwrap();
                            allowed -= 1;
                        }
                    }
                }
                (allowed, s.state().ledger.held(0))
            })
        })
        .collect();
    let results: Vec<(u64, u64)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let spent: u64 = results.iter().map(|r| r.0).sum();
    let held: u64 = results.iter().map(|r| r.1).sum();
    assert_eq!(spent, 50, "160 calls, 50 units: all spent, none twice");
    assert_eq!(held, 50);
    assert_eq!(pool.snapshot().taken("pay"), 50);
}

#[test]
fn grant_left_reads_the_pool_and_a_pool_can_be_attached_after_a_replay() {
    let compiled = CompiledPolicy::new(pay_policy(true)).unwrap();
    // Restore a session by replaying its events without a pool, then
    // attach the tenant's pool (whose counts already hold its unit).
    let mut restored = compiled.session();
    decide(&mut restored, "a1");
    assert_eq!(restored.grant_left(0), Some(Quota::Limited(1)));
    let pool = TenantPool::new();
    let mut counts = SharedCounts::default();
    counts.set_taken("pay", 2);
    pool.replace(counts);
    restored.attach_pool(pool.clone());
    assert_eq!(restored.grant_left(0), Some(Quota::Limited(0)));
    assert_eq!(restored.grant_left(1), Some(Quota::Limited(1)));
    assert_eq!(restored.grant_left(7), None);
    assert_eq!(
        decide(&mut restored, "a2").grants,
        vec![1],
        "the pool is spent"
    );
    assert!(restored
        .options()
        .tenant_pool()
        .is_some_and(|p| p.same_as(&pool)));
}

/// Only shared grants are counted in the tenant's pool: a per-session grant
/// that serves a call of a tool that also has a shared grant (so the pool
/// is locked for the decision) takes its unit from the session's ledger
/// alone, and the pool records nothing for it.
#[test]
fn a_per_session_grant_takes_nothing_from_the_pool() {
    let compiled = CompiledPolicy::new(pay_policy(true)).unwrap();
    let pool = TenantPool::new();
    let mut s = compiled.session_with(SessionOptions::default().pool(pool.clone()));
    assert_eq!(decide(&mut s, "a1").grants, vec![0]);
    assert_eq!(decide(&mut s, "a2").grants, vec![0]);
    let d = decide(&mut s, "a3");
    assert_eq!((d.verdict, d.grants.clone()), (Verdict::Pause, vec![1]));
    assert_eq!(
        s.grant_left(1),
        Some(Quota::Limited(0)),
        "held by the pause"
    );
    let counts = pool.snapshot();
    assert_eq!(counts.taken("pay_approved"), 0);
    assert_eq!(counts.iter().collect::<Vec<_>>(), vec![("pay", 2)]);
}
