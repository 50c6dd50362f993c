//! What the SMT differential tests share: the case count, and one run of a
//! trace through both engines.
#![allow(dead_code)]

use agenra_core::decision::StepOutput;
use agenra_core::policy::Policy;
use agenra_core::{CompiledPolicy, Event, SessionOptions, TenantPool};
use agenra_smt::SmtSession;

/// Property-test cases: `default`, or `AGENRA_SMT_CASES` (the SMT engine is
/// slower than the monitor, so it has a knob of its own).
pub fn cases(default: u32) -> u32 {
    std::env::var("AGENRA_SMT_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs `events` through the native monitor and the SMT session, each on a
/// pool of its own, and asserts that they decide every call and approval
/// alike (verdict, rule, grants), reject the same events, and leave equal
/// pools after every event. Returns how many decisions were compared.
pub fn differential(policy: &Policy, events: &[Event]) -> usize {
    let (native_pool, smt_pool) = (TenantPool::new(), TenantPool::new());
    let mut native = CompiledPolicy::new(policy.clone())
        .expect("a valid policy")
        .session_with(SessionOptions::default().pool(native_pool.clone()));
    let mut smt = SmtSession::with_pool(policy, smt_pool.clone()).expect("a valid policy");
    let mut decided = 0;
    for e in events {
        let ours = match e {
            Event::Call(c) => Some(smt.decide(c)),
            Event::Approve(a) => Some(smt.decide_approval(a)),
            _ => None,
        };
        let theirs = native.step(e);
        match (ours, theirs) {
            (Some(Ok(d)), Ok(StepOutput::Decision(n))) => {
                decided += 1;
                assert_eq!(
                    (d.verdict, d.rule_name.clone(), d.grants.clone()),
                    (n.verdict, n.rule.name(policy), n.grants.clone()),
                    "SMT and native decide {e:?} alike"
                );
                smt.apply(e).expect("the event applies");
            }
            (Some(Err(_)), Err(_)) | (None, Err(_)) => {
                assert!(smt.apply(e).is_err(), "both reject {e:?}");
            }
            (None, Ok(_)) => smt.apply(e).expect("the event applies"),
            (ours, theirs) => panic!("engines differ on {e:?}: {ours:?} vs {theirs:?}"),
        }
        assert_eq!(
            native_pool.snapshot(),
            smt_pool.snapshot(),
            "both pools after {e:?}"
        );
    }
    decided
}

/// The checkers answer `unknown` for `policy`: `certify` against a revision
/// that adds a copy of its first grant (so the call classes are needed),
/// and `verify` for every property (bound 3). Returns verify's findings for
/// further checks of their details.
pub fn assert_checkers_answer_unknown(policy: &Policy) -> Vec<agenra_smt::verify::Finding> {
    let mut q = policy.clone();
    let mut extra = q.grants[0].clone();
    extra.name = format!("{}_copy", extra.name);
    q.grants.push(extra);
    let report = agenra_certify::certify_with(policy, &q, Some(&agenra_smt::rules::RuleChecker));
    assert_eq!(report.verdict.as_str(), "unknown", "{report:?}");
    let opts = agenra_smt::verify::Options {
        bound: 3,
        ..Default::default()
    };
    let findings = agenra_smt::verify::verify(policy, &agenra_smt::verify::Property::ALL, &opts);
    for f in &findings {
        assert_eq!(
            f.result.as_str(),
            "unknown",
            "{}: {:?}",
            f.property.name(),
            f.detail
        );
    }
    findings
}
