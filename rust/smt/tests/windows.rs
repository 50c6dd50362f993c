//! Renewing quotas and budgets (`quota N per 10m`, `budget B on PARAM per
//! day [per tenant]`): the SMT authorizer judges a window concretely (the
//! call's window and what it holds are known) and decides every call and
//! approval as the native monitor does, on random policies with windows
//! (some shared by the tenant) and random traces over several windows;
//! `verify` over-approximates a window (it may refuse any call at any
//! step) and says so in its notes.

#[path = "../../core/tests/common.rs"]
#[allow(unused_imports)]
mod common;
#[path = "support/engines.rs"]
mod engines;

use agenra_core::policy::{Policy, Quota, RenewLimit, Renewal};
use agenra_core::Event;
use agenra_smt::verify::{verify, Options, Outcome, Property};
use agenra_smt::SmtSession;
use engines::{cases, differential};
use proptest::prelude::*;

/// A generated policy (every kind of rule) with renewing limits on the
/// grants `picks` names (grant names made unique: the pool counts by name).
fn policy() -> impl Strategy<Value = Policy> {
    (
        common::full_policy(),
        proptest::collection::vec(
            (
                prop::bool::weighted(0.5),
                0u64..3,
                prop::bool::weighted(0.4),
                any::<bool>(),
                0u8..4,
                0usize..3,
                any::<bool>(),
            ),
            10,
        ),
    )
        .prop_map(|(mut p, picks)| {
            const AMOUNTS: [&str; 4] = ["0", "1.5", "5", "12.25"];
            const SECS: [u64; 3] = [1, 2, 5];
            p.renewals.clear();
            for g in 0..p.grants.len() {
                let (units, n, amount, on_n, a, secs, tenant) = picks[g % picks.len()];
                if units {
                    p.grants[g].quota = Quota::Unlimited;
                    p.shared_grants.retain(|&s| s != g);
                    p.renewals.push(Renewal {
                        grant: g,
                        secs: SECS[secs],
                        limit: RenewLimit::Units(n),
                        per_tenant: tenant,
                    });
                }
                if amount {
                    p.budgets.retain(|b| b.grant != g);
                    p.renewals.push(Renewal {
                        grant: g,
                        secs: SECS[(secs + 1) % SECS.len()],
                        limit: RenewLimit::Amount {
                            amount: AMOUNTS[a as usize].parse().expect("a decimal"),
                            param: if on_n { 1 } else { 3 },
                        },
                        per_tenant: tenant,
                    });
                }
            }
            for (g, grant) in p.grants.iter_mut().enumerate() {
                grant.name = format!("{}#{g}", grant.name);
            }
            p
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(200), ..ProptestConfig::default() })]

    #[test]
    fn smt_and_native_decide_windows_alike(
        (policy, steps) in policy().prop_flat_map(|p| {
            let agents = p.agents.len();
            (Just(p), common::steps(agents))
        })
    ) {
        let events = common::events(&policy, &steps);
        differential(&policy, &events);
    }
}

#[test]
fn a_window_passes_a_grant_over_and_renews_in_both_engines() {
    let src = "tool pay(to: string, amount: decimal);\n\
               grant pay: pay quota 2 per 10m budget 100 on amount per day;\n\
               grant big: pay quota 1 approval;\n";
    let p = agenra_policy::compile(src, "p").unwrap().policy;
    let call = |id: &str, time: u64, amount: &str| -> Event {
        serde_json::from_value(serde_json::json!({
            "kind": "call", "id": id, "time": time, "tool": "pay",
            "args": {"to": "bob", "amount": amount}
        }))
        .unwrap()
    };
    let events = [
        call("a", 1, "60"),
        call("b", 2, "40.01"),
        call("c", 3, "40"),
        call("d", 600, "1"),
        call("e", 86_400, "99"),
        call("f", 86_401, "1"),
        call("g", 86_402, "1"),
    ];
    assert_eq!(differential(&p, &events), 7);
    let mut smt = SmtSession::new(&p).unwrap();
    let mut verdicts = Vec::new();
    for e in &events {
        if let Event::Call(c) = e {
            let d = smt.decide(c).unwrap();
            verdicts.push(format!("{} {}", d.verdict.as_str(), d.rule_name));
        }
        smt.apply(e).unwrap();
    }
    assert_eq!(
        verdicts,
        [
            "ALLOW pay",
            // Over what is left of the day's budget: the approval grant.
            "PAUSE big",
            "ALLOW pay",
            // A new 10-minute window, but the day's budget is spent.
            "DENY no-grant",
            "ALLOW pay",
            "ALLOW pay",
            // Two calls in this 10-minute window already.
            "DENY no-grant",
        ]
    );
}

#[test]
fn verify_over_approximates_a_window_and_says_so() {
    let src = "sinks net;\ntool pay(to: string, amount: decimal) { sink net; }\n\
               tool read() { output <public, {}, untrusted>; }\n\
               grant read: read quota 5 per minute;\n\
               grant pay: pay budget 100 on amount per day per tenant;\n\
               grant big: pay quota 1 approval;\n\
               pause flow steer: untrusted -> net;\n";
    let p = agenra_policy::compile(src, "p").unwrap().policy;
    let findings = verify(&p, &Property::ALL, &Options::default());
    assert!(!findings.is_empty());
    for f in &findings {
        assert_ne!(f.result, Outcome::Violated, "{f:?}");
    }
    let quota = findings
        .iter()
        .find(|f| f.property == Property::QuotaSoundness)
        .expect("quota soundness is checked");
    assert_eq!(quota.result, Outcome::Holds, "{quota:?}");
    assert!(
        quota
            .detail
            .iter()
            .any(|d| d.contains("grant `pay`") && d.contains("renews every 86400 seconds")),
        "{quota:?}"
    );
}
