//! Counts over sliding time windows (`deny count big: at most 2 call pay
//! within 1h;`): the monitor against the reference semantics over random
//! sessions whose events (calls, approvals, rejections, results) move the
//! clock by random steps, with random windows on the count rules.

mod common;

use agenra_core::decision::StepOutput;
use agenra_core::policy::{CountWindow, PathKind, Policy};
use agenra_core::spec;
use agenra_core::{Event, Monitor};
use common::*;
use proptest::prelude::*;

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
    }
    Ok(())
}

/// A window of one of a few lengths on each count rule `pick` selects.
fn with_windows(mut policy: Policy, picks: &[(bool, u8)]) -> Policy {
    const SECS: [u64; 5] = [1, 2, 3, 5, 8];
    policy.count_windows = policy
        .path_rules
        .iter()
        .enumerate()
        .filter(|(_, r)| matches!(r.kind, PathKind::AtMost { .. }))
        .filter_map(|(i, _)| {
            let (on, secs) = picks.get(i).copied().unwrap_or((true, 0));
            on.then(|| CountWindow {
                rule: i,
                secs: SECS[secs as usize % SECS.len()],
            })
        })
        .collect();
    policy
}

/// Every event at a clock that moves by `dts` (approvals, rejections and
/// results too, so that an approval admits later than its call).
fn retime(mut events: Vec<Event>, dts: &[u64]) -> Vec<Event> {
    let mut clock = 0;
    for (i, e) in events.iter_mut().enumerate() {
        clock += dts.get(i % dts.len().max(1)).copied().unwrap_or(1);
        match e {
            Event::Call(c) => c.time = clock,
            Event::Approve(r) | Event::Reject(r) => r.time = Some(clock),
            Event::Result(r) => r.time = Some(clock),
            Event::Task(t) => t.time = Some(clock),
        }
    }
    events
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: common::cases(500),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Monitor = reference with windows on the count rules and a moving
    /// clock.
    #[test]
    fn monitor_agrees_with_the_reference_on_count_windows((policy, events) in (
        full_policy(),
        proptest::collection::vec((prop::bool::weighted(0.8), 0u8..5), 8),
        proptest::collection::vec(0u64..3, 1..16),
    ).prop_flat_map(|(p, picks, dts)| {
        let p = with_windows(p, &picks);
        let agents = p.agents.len();
        (Just(p), steps(agents), Just(dts))
    }).prop_map(|(p, s, dts)| {
        let e = retime(events(&p, &s), &dts);
        (p, e)
    })) {
        monitor_and_reference_agree(&policy, &events)?;
        // Snapshots keep each count window's admission times.
        snapshot_agrees(&policy, &events, events.len() / 2, Some(4))?;
    }
}

/// A policy's count windows are checked when a monitor is built: each on a
/// count rule that exists, at least 1 second, strictly ascending.
#[test]
fn malformed_count_windows_are_refused_naming_the_field() {
    use agenra_core::policy::{PathRule, RuleEffect, StepPattern};
    let mut p = Policy::empty("p");
    let step = StepPattern {
        tool: None,
        sink: None,
        reads: None,
        when: None,
    };
    p.path_rules = vec![
        PathRule {
            name: "seq".into(),
            effect: RuleEffect::Deny,
            kind: PathKind::Sequence(vec![step.clone()]),
            reset: None,
        },
        PathRule {
            name: "cnt".into(),
            effect: RuleEffect::Deny,
            kind: PathKind::AtMost { max: 1, step },
            reset: None,
        },
    ];
    let w = |rule, secs| CountWindow { rule, secs };
    for (windows, field) in [
        (vec![w(2, 5)], "count_windows[0].rule"),
        (vec![w(0, 5)], "count_windows[0].rule"),
        (vec![w(1, 0)], "count_windows[0].secs"),
        (vec![w(1, 5), w(1, 6)], "count_windows[1]"),
    ] {
        let mut bad = p.clone();
        bad.count_windows = windows;
        let e = Monitor::new(bad)
            .expect_err("a malformed window")
            .to_string();
        assert!(e.contains(field), "{e}");
    }
    let mut good = p;
    good.count_windows = vec![w(1, 5)];
    assert!(Monitor::new(good).is_ok());
}
