//! Counts over sliding time windows (`deny count c: at most 2 STEP within
//! 1h`): the SMT authorizer counts the calls admitted inside the window
//! (since the last reset among them) and decides every call and approval
//! as the native monitor does, on random policies with windows on their
//! counts and random traces whose clock moves on every event; `verify`
//! over-approximates a window (the count may stay silent at any step) and
//! says so in its notes.

#[path = "../../core/tests/common.rs"]
#[allow(unused_imports)]
mod common;
#[path = "support/engines.rs"]
mod engines;

use agenra_core::policy::{CountWindow, PathKind, Policy};
use agenra_core::Event;
use agenra_smt::verify::{verify, Options, Outcome, Property};
use engines::{cases, differential};
use proptest::prelude::*;

/// A generated policy (every kind of rule) with a window on most counts.
fn policy() -> impl Strategy<Value = Policy> {
    (
        common::full_policy(),
        proptest::collection::vec((prop::bool::weighted(0.8), 0usize..4), 8),
    )
        .prop_map(|(mut p, picks)| {
            const SECS: [u64; 4] = [1, 2, 3, 5];
            p.count_windows = p
                .path_rules
                .iter()
                .enumerate()
                .filter(|(_, r)| matches!(r.kind, PathKind::AtMost { .. }))
                .filter_map(|(i, _)| {
                    let (on, secs) = picks[i % picks.len()];
                    on.then(|| CountWindow {
                        rule: i,
                        secs: SECS[secs],
                    })
                })
                .collect();
            p
        })
}

/// Every event at a clock that moves by `dts`.
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
    #![proptest_config(ProptestConfig { cases: cases(150), ..ProptestConfig::default() })]

    #[test]
    fn smt_and_native_decide_count_windows_alike(
        (policy, steps, dts) in policy().prop_flat_map(|p| {
            let agents = p.agents.len();
            (Just(p), common::steps(agents), proptest::collection::vec(0u64..3, 1..12))
        })
    ) {
        let events = retime(common::events(&policy, &steps), &dts);
        differential(&policy, &events);
    }
}

#[test]
fn a_count_window_slides_in_both_engines() {
    let src = "tool pay(to: string, amount: decimal);\ntool reset();\n\
               grant pay: pay quota unlimited;\ngrant reset: reset quota unlimited;\n\
               deny count big: at most 2 call pay where amount > 1000 within 1h reset on call reset;\n";
    let p = agenra_policy::compile(src, "p").unwrap().policy;
    let pay = |id: &str, t: u64, amount: &str| {
        Event::Call(
            agenra_core::Call::new(id, "pay", t)
                .arg("to", serde_json::json!("x"))
                .arg("amount", serde_json::json!(amount)),
        )
    };
    differential(
        &p,
        &[
            pay("a", 0, "1500"),
            pay("b", 10, "2000"),
            pay("c", 20, "5000"),
            pay("d", 3_600, "5000"),
            pay("e", 3_609, "5000"),
            pay("f", 3_610, "5000"),
            Event::Call(agenra_core::Call::new("r", "reset", 3_611)),
            pay("g", 3_612, "5000"),
            pay("h", 3_613, "5000"),
        ],
    );
}

#[test]
fn verify_over_approximates_a_count_window_and_says_so() {
    let src = "sinks net;\ntool pay(to: string, amount: decimal) { sink net; }\n\
               tool read() { output <public, {}, untrusted>; }\n\
               grant read: read quota 5;\n\
               grant pay: pay quota 3;\n\
               deny count big: at most 1 call pay where amount > 1000 within 1h;\n\
               pause flow steer: untrusted -> net;\n";
    let p = agenra_policy::compile(src, "p").unwrap().policy;
    let findings = verify(&p, &Property::ALL, &Options::default());
    assert!(!findings.is_empty());
    for f in &findings {
        assert_ne!(f.result, Outcome::Violated, "{f:?}");
    }
    assert!(
        findings.iter().any(|f| f
            .detail
            .iter()
            .any(|d| d.contains("count `big`") && d.contains("sliding window of 3600 seconds"))),
        "{findings:?}"
    );
}

/// The step encoding `verify` uses (the pool not known): a count within a
/// window whose count since its reset has reached its limit may or may not
/// fire (the calls may have left the window), where a count without a
/// window must fire; the authorizer's (`pool_known`) fires on the count it
/// is given.
#[test]
fn verify_s_step_lets_a_full_window_stay_silent() {
    use agenra_core::label::Label;
    use agenra_smt::step::{encode_step, CallInputs, HistoryState, SymLabel};
    use z3::ast::Int;
    use z3::{SatResult, Solver};
    let src = "tool pay(to: string, amount: decimal);\ngrant pay: pay quota unlimited;\n\
               deny count big: at most 1 call pay within 1h;\n";
    let windowed = agenra_policy::compile(src, "p").unwrap().policy;
    let plain = agenra_policy::compile(&src.replace(" within 1h", ""), "p")
        .unwrap()
        .policy;
    let silent = |policy: &Policy, pool_known: bool| {
        let req = agenra_core::spec::Request {
            agent: 0,
            tool: 0,
            args: vec![
                agenra_core::Value::Str("x".into()),
                agenra_core::Value::Null,
            ],
            time: 0,
        };
        let l = || SymLabel::constant(policy, &Label::BOTTOM);
        let mut inputs = CallInputs::concrete(policy, &req, &[], vec![], l(), l(), 1);
        inputs.pool_known = pool_known;
        let mut state = HistoryState::initial(policy);
        state.path[0] = Int::from_u64(3);
        let enc = encode_step(policy, &state, &inputs);
        let solver = Solver::new();
        solver.check_assumptions(&[enc.history_deny.not()]) == SatResult::Sat
    };
    assert!(
        silent(&windowed, false),
        "verify may let a window pass the call"
    );
    assert!(
        !silent(&windowed, true),
        "the authorizer fires on the count given"
    );
    assert!(
        !silent(&plain, false),
        "a count without a window always fires"
    );
}
