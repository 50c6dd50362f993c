//! Property tests of the monitor: differential against the reference ledger
//! semantics, and the invariants DESIGN §2 promises.

mod common;

use agenra_core::decision::{StepOutput, Verdict};
use agenra_core::policy::{Policy, Quota};
use agenra_core::spec;
use agenra_core::{Event, Monitor};
use common::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

proptest! {
    #![proptest_config(ProptestConfig {
        cases: common::cases(1000),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// The optimized monitor and the executable spec agree on every ledger
    /// decision and on the ledger after every event.
    #[test]
    fn monitor_agrees_with_the_ledger_spec((policy, steps) in ledger_policy().prop_flat_map(|p| {
        let agents = p.agents.len();
        (Just(p), steps(agents))
    })) {
        // Tasks seed sets and narrow scopes, which the ledger spec does not
        // model (the whole-step reference does).
        let mut steps = steps;
        steps.retain(|s| !matches!(s, Step::Task { .. }));
        let events = events(&policy, &steps);
        let mut monitor = Monitor::new(policy.clone()).expect("valid policy");
        let mut state = spec::State::initial(&policy);
        for e in &events {
            let (expected, next) = spec::step(&policy, &state, &spec_event(&policy, e), spec::Checks::Pass);
            let got = monitor.step(e);
            match (&expected, &got) {
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
            state = next;
            prop_assert_eq!(&monitor.state().ledger.to_ledger(), &state.ledger);
            prop_assert_eq!(&monitor.state().sets, &state.sets);
            prop_assert_eq!(monitor.state().ledger_hash(), state.ledger.hash());
        }
    }

    /// The monitor and the reference semantics of the whole step agree on
    /// every answer (verdict, deciding rule, units taken and returned) and
    /// on the ledger and discovered sets after every event: per-argument
    /// labels, own-resource labels at sinks, deny/pause/allow flows, call
    /// rules, path rules and counts with argument conditions, obligations,
    /// lists, decimals, optional arguments, and approvals re-checked.
    #[test]
    fn monitor_agrees_with_the_reference((policy, steps) in full_policy().prop_flat_map(|p| {
        let agents = p.agents.len();
        (Just(p), steps(agents))
    })) {
        let events = events(&policy, &steps);
        let mut monitor = Monitor::new(policy.clone()).expect("valid policy");
        let mut reference = spec::reference::Session::new(&policy);
        for e in &events {
            let want = reference.step(&policy, e);
            let got = monitor.step(e);
            match (&want, &got) {
                (Ok(w), Ok(StepOutput::Decision(d))) => {
                    prop_assert_eq!(w.verdict, Some(d.verdict), "verdict on {:?}: {:?}", e, d);
                    prop_assert_eq!(w.rule, Some(d.rule), "rule on {:?}: {:?}", e, d);
                    prop_assert_eq!(&w.grants, &d.grants, "grants on {:?}", e);
                    prop_assert_eq!(&w.refunded, &d.refunded, "refunds on {:?}", e);
                }
                (Ok(w), Ok(StepOutput::Applied(a))) => {
                    prop_assert_eq!(w.verdict, None);
                    prop_assert_eq!(w.rule, a.rule, "rule on {:?}", e);
                    prop_assert_eq!(&w.refunded, &a.refunded, "refunds on {:?}", e);
                }
                (Err(_), Err(_)) => {}
                (want, got) => prop_assert!(false, "reference {:?} but monitor {:?} on {:?}", want, got, e),
            }
            prop_assert_eq!(&monitor.state().ledger.to_ledger(), &reference.ledger.ledger);
            prop_assert_eq!(&monitor.state().sets, &reference.ledger.sets);
        }
    }

    /// A denied call consumes nothing, and no grant is ever spent beyond its
    /// quota: units held by admitted, unrefunded calls account exactly for
    /// what each limited grant has lost.
    #[test]
    fn denials_are_free_and_quotas_hold((policy, steps) in full_policy().prop_flat_map(|p| {
        let agents = p.agents.len();
        (Just(p), steps(agents))
    })) {
        let events = events(&policy, &steps);
        let mut monitor = Monitor::new(policy.clone()).expect("valid policy");
        // Units each call holds; removed when refunded.
        let mut held: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for e in &events {
            let before = monitor.state().ledger.clone();
            let out = monitor.step(e);
            match (&out, e) {
                (Ok(StepOutput::Decision(d)), Event::Call(c)) => {
                    if d.verdict == Verdict::Deny {
                        prop_assert_eq!(&monitor.state().ledger, &before);
                        prop_assert!(d.grants.is_empty());
                    } else {
                        held.insert(c.id.clone(), d.grants.clone());
                    }
                }
                (Ok(StepOutput::Decision(d)), Event::Approve(a)) if d.verdict == Verdict::Deny => {
                    prop_assert_eq!(held.remove(&a.call), Some(d.refunded.clone()));
                }
                (Ok(StepOutput::Applied(a)), Event::Result(_) | Event::Reject(_)) => {
                    let id = match e { Event::Result(r) => &r.call, Event::Reject(r) => &r.call, _ => unreachable!() };
                    if !a.refunded.is_empty() {
                        prop_assert_eq!(held.remove(id), Some(a.refunded.clone()));
                    }
                }
                (Err(_), _) => prop_assert_eq!(&monitor.state().ledger, &before),
                _ => {}
            }
            for (g, grant) in policy.grants.iter().enumerate() {
                if let (Quota::Limited(cap), Quota::Limited(left)) = (grant.quota, monitor.state().ledger.remaining(g).unwrap_or(Quota::Limited(0))) {
                    let in_use = held.values().flatten().filter(|&&h| h == g).count() as u64;
                    prop_assert!(left <= cap);
                    prop_assert_eq!(cap - left, in_use, "grant {} accounting", g);
                }
            }
        }
    }

    /// Adding labels to a call's inputs never turns a DENY into an ALLOW (or
    /// a PAUSE): the same call from the same state, with more lineage.
    #[test]
    fn more_input_labels_never_admit_more((policy, steps, extra) in full_policy().prop_flat_map(|p| {
        let agents = p.agents.len();
        (Just(p), steps(agents), proptest::collection::vec(0usize..32, 1..3))
    })) {
        let events = events(&policy, &steps);
        let mut monitor = Monitor::new(policy.clone()).expect("valid policy");
        for e in &events {
            if let Event::Call(c) = e {
                if !c.lineage.is_empty() {
                    let calls: Vec<String> = events.iter().filter_map(|x| match x {
                        Event::Call(y) if y.id != c.id && monitor.state().call_node(&y.id).is_some() => Some(y.id.clone()),
                        _ => None,
                    }).collect();
                    if !calls.is_empty() {
                        let mut wider = c.clone();
                        for ids in wider.lineage.values_mut() {
                            ids.extend(extra.iter().map(|i| calls[i % calls.len()].clone()));
                        }
                        let narrow = monitor.clone().authorize(c);
                        let wide = monitor.clone().authorize(&wider);
                        if let (Ok(n), Ok(w)) = (narrow, wide) {
                            if n.verdict == Verdict::Deny {
                                prop_assert_eq!(w.verdict, Verdict::Deny);
                            }
                        }
                    }
                }
            }
            let _ = monitor.step(e);
        }
    }

    /// A flow DENY's path runs over data edges from a node carrying the
    /// offending label to the denied call.
    #[test]
    fn flow_denials_carry_a_connected_path((policy, steps) in full_policy().prop_flat_map(|p| {
        let agents = p.agents.len();
        (Just(p), steps(agents))
    })) {
        let events = events(&policy, &steps);
        let mut m = Monitor::new(policy.clone()).expect("valid policy");
        let mut read = Vec::new();
        for e in &events {
            if let Ok(StepOutput::Decision(d)) = m.step(e) {
                if let agenra_core::decision::Rule::Flow(r) = d.rule {
                    // Built when read: here, right after the decision.
                    let path = m.path(&d).expect("a full session forgets nothing");
                    let graph = &m.state().graph;
                    prop_assert_eq!(path.last(), Some(&d.node));
                    for pair in path.windows(2) {
                        prop_assert!(graph.data_preds(pair[1]).contains(&pair[0]), "{:?} not an edge", pair);
                    }
                    if let agenra_core::policy::FlowEffect::Deny(p) = policy.flow_rules[r].effect {
                        if path.len() > 1 {
                            let first = graph.node(path[0]).expect("node");
                            // The context is judged as of its use; calls by their label.
                            if first.kind != agenra_core::graph::NodeKind::Context {
                                prop_assert!(p.matches(&first.label));
                            }
                        }
                    }
                    read.push((d, path));
                }
            }
        }
        // Read again after the whole trace: the graph grew, the paths did not change.
        for (d, path) in read {
            prop_assert_eq!(m.path(&d), Ok(path));
        }
    }

    /// Replay is deterministic: the same trace gives the same decisions and
    /// hashes.
    #[test]
    fn replay_is_deterministic((policy, steps) in full_policy().prop_flat_map(|p| {
        let agents = p.agents.len();
        (Just(p), steps(agents))
    })) {
        let events = events(&policy, &steps);
        let run = || {
            let mut m = Monitor::new(policy.clone()).expect("valid policy");
            events.iter().map(|e| (m.step(e), m.state().ledger_hash())).collect::<Vec<_>>()
        };
        prop_assert_eq!(run(), run());
    }

    /// The pure step leaves its input alone and equals the in-place step.
    #[test]
    fn pure_step_matches_in_place_step((policy, steps) in full_policy().prop_flat_map(|p| {
        let agents = p.agents.len();
        (Just(p), steps(agents))
    })) {
        let events = events(&policy, &steps);
        let mut m = Monitor::new(policy.clone()).expect("valid policy");
        for e in &events {
            let seq = m.state().seq;
            let (pure, next) = m.step_pure(e);
            prop_assert_eq!(m.state().seq, seq);
            let in_place = m.step(e);
            prop_assert_eq!(pure, in_place);
            prop_assert_eq!(next.state().ledger_hash(), m.state().ledger_hash());
        }
    }
}

/// The monitor and the reference decide alike on `events` (verdict, rule,
/// grants, refunds, ledger and sets after each event).
fn monitor_and_reference_agree(policy: &Policy, events: &[Event]) -> Result<(), TestCaseError> {
    let mut monitor = Monitor::new(policy.clone()).expect("valid policy");
    let mut reference = spec::reference::Session::new(policy);
    for e in events {
        let want = reference.step(policy, e);
        let got = monitor.step(e);
        match (&want, &got) {
            (Ok(w), Ok(StepOutput::Decision(d))) => {
                prop_assert_eq!(w.verdict, Some(d.verdict), "verdict on {:?}: {:?}", e, d);
                prop_assert_eq!(w.rule, Some(d.rule), "rule on {:?}: {:?}", e, d);
                prop_assert_eq!(&w.grants, &d.grants, "grants on {:?}", e);
                prop_assert_eq!(&w.refunded, &d.refunded, "refunds on {:?}", e);
            }
            (Ok(w), Ok(StepOutput::Applied(a))) => {
                prop_assert_eq!(w.verdict, None);
                prop_assert_eq!(w.rule, a.rule, "rule on {:?}", e);
                prop_assert_eq!(&w.refunded, &a.refunded, "refunds on {:?}", e);
            }
            (Err(_), Err(_)) => {}
            (want, got) => prop_assert!(
                false,
                "reference {:?} but monitor {:?} on {:?}",
                want,
                got,
                e
            ),
        }
        prop_assert_eq!(
            &monitor.state().ledger.to_ledger(),
            &reference.ledger.ledger
        );
        prop_assert_eq!(&monitor.state().sets, &reference.ledger.sets);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: common::cases(500),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// With an object parameter (`edits: list<{old, new, n?}>`) on every
    /// tool, field tests in grants, call rules and flow rules, and calls
    /// passing well-formed and ill-typed objects: the monitor and the
    /// reference still agree, and an ill-typed object is always denied as
    /// ill-formed.
    #[test]
    fn monitor_agrees_with_the_reference_on_objects((policy, steps, shapes) in object_policy().prop_flat_map(|p| {
        let agents = p.agents.len();
        (Just(p), steps(agents), proptest::collection::vec(0u8..8, 1..6))
    })) {
        let events = object_events(&policy, &steps, &shapes);
        monitor_and_reference_agree(&policy, &events)?;
        let mut monitor = Monitor::new(policy.clone()).expect("valid policy");
        for e in &events {
            let ill = match e {
                Event::Call(c) => match c.args.get("edits") {
                    Some(serde_json::Value::Array(items)) => items.iter().any(|m| {
                        m.get("extra").is_some() || m.get("old").is_none() || m.get("new").is_some_and(|n| !n.is_string())
                    }),
                    Some(serde_json::Value::Object(_)) => true,
                    _ => false,
                },
                _ => false,
            };
            let got = monitor.step(e);
            if ill {
                match got {
                    Ok(StepOutput::Decision(d)) => {
                        prop_assert_eq!(d.verdict, Verdict::Deny, "{:?}", e);
                        prop_assert_eq!(d.rule, agenra_core::decision::Rule::WellFormed, "{:?}", e);
                    }
                    other => prop_assert!(false, "{:?} on {:?}", other, e),
                }
            }
        }
    }
}
