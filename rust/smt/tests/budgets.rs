//! Amount budgets (`budget AMOUNT on PARAM [per tenant]`): the SMT
//! authorizer judges them concretely (the amount is the call's argument,
//! what is left is known) and decides every call and approval as the
//! native monitor does, on random policies with budgets (some shared by
//! the tenant) and random traces; `verify` over-approximates a budget (it
//! may refuse any call at any step) and says so in its notes.

#[path = "../../core/tests/common.rs"]
#[allow(unused_imports)]
mod common;
#[path = "support/engines.rs"]
mod engines;

use agenra_core::policy::{Budget, Policy};
use agenra_core::Event;
use agenra_smt::verify::{verify, Options, Outcome, Property};
use agenra_smt::SmtSession;
use engines::{cases, differential};
use proptest::prelude::*;

/// A generated policy (every kind of rule) with budgets on the grants
/// `picks` names: on `n` (int) or `amount` (optional decimal), some per
/// tenant (grant names made unique: the pool counts by name).
fn policy() -> impl Strategy<Value = Policy> {
    (
        common::full_policy(),
        proptest::collection::vec(
            (
                prop::bool::weighted(0.5),
                any::<bool>(),
                0u8..4,
                any::<bool>(),
            ),
            10,
        ),
    )
        .prop_map(|(mut p, picks)| {
            const AMOUNTS: [&str; 4] = ["0", "1.5", "5", "12.25"];
            p.budgets = (0..p.grants.len())
                .filter(|&g| picks[g % picks.len()].0)
                .map(|g| {
                    let (_, on_n, a, tenant) = picks[g % picks.len()];
                    Budget {
                        grant: g,
                        amount: AMOUNTS[a as usize].parse().expect("a decimal"),
                        param: if on_n { 1 } else { 3 },
                        per_tenant: tenant,
                    }
                })
                .collect();
            for (g, grant) in p.grants.iter_mut().enumerate() {
                grant.name = format!("{}#{g}", grant.name);
            }
            p
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(300), ..ProptestConfig::default() })]

    #[test]
    fn smt_and_native_decide_budgets_alike(
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
fn a_budget_passes_a_grant_over_in_both_engines() {
    let src = "tool pay(to: string, amount: decimal);\n\
               grant pay: pay budget 100 on amount;\n\
               grant big: pay quota 1 approval;\n";
    let p = agenra_policy::compile(src, "p").unwrap().policy;
    let call = |id: &str, amount: &str| -> Event {
        serde_json::from_value(serde_json::json!({
            "kind": "call", "id": id, "time": 1, "tool": "pay",
            "args": {"to": "bob", "amount": amount}
        }))
        .unwrap()
    };
    let events = [
        call("a", "60"),
        call("b", "40.01"),
        call("c", "40"),
        call("d", "1"),
    ];
    assert_eq!(differential(&p, &events), 4);
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
        ["ALLOW pay", "PAUSE big", "ALLOW pay", "DENY no-grant"]
    );
}

#[test]
fn verify_over_approximates_a_budget_and_says_so() {
    // The banking example's payment grants with budgets: every bounded
    // property still holds, whatever the budgets refuse, and the notes say
    // what was assumed.
    let src = "sinks net;\ntool pay(to: string, amount: decimal) { sink net; }\n\
               tool read() { output <public, {}, untrusted>; }\n\
               grant read: read quota unlimited;\n\
               grant pay: pay budget 100 on amount;\n\
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
            .any(|d| d.contains("grant `pay`") && d.contains("amount budget")),
        "{quota:?}"
    );
}
