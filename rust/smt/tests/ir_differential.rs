//! Differential under a Permission IR (issue #9): on random policies and
//! traces (the generators of `rust/core/tests/common.rs`), the IR that the
//! deterministic producer derives from *another* trace, or from a prefix
//! of the same one, is validated and lowered into policy ∧ task; the SMT
//! authorizer and the native monitor then decide the trace under the
//! lowered policy, after the IR's task event, alike (verdict, rule, grants
//! taken, refunds). An IR from another run covers some calls and not
//! others, so the task's own rules (`task-scope`, `task:…` call rules and
//! obligations, narrowed flows) decide many of them: the test counts those
//! decisions and fails if none came from the task.
//!
//! 300 cases by default; `AGENRA_SMT_CASES=N` for a longer run.

#[path = "../../core/tests/common.rs"]
#[allow(unused_imports)]
mod common;

use agenra_core::decision::StepOutput;
use agenra_core::policy::Policy;
use agenra_core::{CompiledPolicy, Event};
use agenra_permission_ir as pir;
use agenra_smt::SmtSession;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, TestRunner};

fn cases() -> u32 {
    std::env::var("AGENRA_SMT_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

/// What a run decided.
#[derive(Default, Debug)]
struct Seen {
    /// Decisions compared.
    decisions: usize,
    /// Of which a rule the task added decided (`task-scope`, `task:…`).
    by_task: usize,
    /// IRs lowered (the rest did not lower against the policy).
    lowered: usize,
}

/// Runs `events` under the lowered IR through both engines, comparing
/// every decision.
fn differential(lowered: &pir::Lowered, events: &[Event], seen: &mut Seen) {
    let policy: &Policy = &lowered.policy;
    let mut native = CompiledPolicy::new(policy.clone())
        .expect("the lowered policy is valid")
        .session();
    let mut smt = SmtSession::new(policy).expect("the lowered policy is valid");
    let task = lowered.task_event();
    native.step(&task).expect("the IR's task event applies");
    smt.apply(&task).expect("the IR's task event applies");
    for e in events {
        let ours = match e {
            Event::Call(c) => Some(smt.decide(c)),
            Event::Approve(a) => Some(smt.decide_approval(a)),
            _ => None,
        };
        let theirs = native.step(e);
        match (ours, theirs) {
            (Some(Ok(d)), Ok(StepOutput::Decision(n))) => {
                let rule = n.rule.name(policy);
                assert_eq!(
                    (d.verdict, d.rule_name.clone(), d.grants.clone()),
                    (n.verdict, rule.clone(), n.grants.clone()),
                    "SMT and native decide {e:?} alike under the IR"
                );
                assert_eq!(d.refunded, n.refunded, "units given back by {e:?}");
                seen.decisions += 1;
                if rule == "task-scope" || rule.starts_with(pir::RULE_PREFIX) {
                    seen.by_task += 1;
                }
                smt.apply(e).expect("the event applies");
            }
            (Some(Err(_)), Err(_)) | (None, Err(_)) => {
                assert!(smt.apply(e).is_err(), "both reject {e:?}");
            }
            (None, Ok(_)) => smt.apply(e).expect("the event applies"),
            (ours, theirs) => panic!("engines differ on {e:?}: {ours:?} vs {theirs:?}"),
        }
    }
}

/// The IR of `source` (a trace of the same policy), validated and lowered;
/// `None` when it does not lower (counted, never silently passed over:
/// the test asks that most do).
fn lowered(policy: &Policy, source: &[Event]) -> Option<pir::Lowered> {
    let ir = pir::from_trace(source, policy);
    let valid = pir::validate(ir, policy).ok()?;
    pir::lower(&valid, policy).ok()
}

#[test]
fn smt_and_native_decide_alike_under_a_permission_ir() {
    let strategy = common::full_policy().prop_flat_map(|p| {
        let agents = p.agents.len();
        (
            proptest::strategy::Just(p),
            common::steps(agents),
            common::steps(agents),
            0usize..8,
        )
    });
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        ..Config::default()
    });
    let mut seen = Seen::default();
    let total = cases();
    for _ in 0..total {
        let tree = strategy
            .new_tree(&mut runner)
            .expect("the generators produce a case");
        let (policy, steps, other_steps, cut) = tree.current();
        let events = common::events(&policy, &steps);
        // Half the IRs come from another trace of the policy, half from a
        // prefix of this one (which covers its first calls only).
        let source = if cut % 2 == 0 {
            common::events(&policy, &other_steps)
        } else {
            events[..events.len() * cut / 8].to_vec()
        };
        let Some(l) = lowered(&policy, &source) else {
            continue;
        };
        seen.lowered += 1;
        differential(&l, &events, &mut seen);
    }
    // Not vacuous: most IRs lowered, and the task decided some calls.
    assert!(seen.lowered * 2 > total as usize, "{seen:?}");
    assert!(seen.by_task > 0, "{seen:?}");
    eprintln!("{seen:?}");
}
