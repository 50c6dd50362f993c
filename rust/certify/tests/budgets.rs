//! Amount budgets (`budget AMOUNT on PARAM`) are not modeled by the ledger
//! certifier (it counts units): it answers `unknown` naming the grant,
//! never `certified`, and refuses a certificate for such policies, unless
//! they are identical.

use agenra_certify::{certify, check_certificate, Verdict};

fn policy(src: &str) -> agenra_core::Policy {
    agenra_policy::compile(src, "p").unwrap().policy
}

const TOOLS: &str = "tool pay(to: string, amount: decimal);\n";

#[test]
fn budgets_are_unknown_to_the_certifier() {
    let plain = policy(&format!("{TOOLS}grant pay: pay quota 2;\n"));
    let budget = policy(&format!(
        "{TOOLS}grant pay: pay quota 2 budget 100 on amount;\n"
    ));
    let raised = policy(&format!(
        "{TOOLS}grant pay: pay quota 2 budget 200 on amount;\n"
    ));
    let lowered = policy(&format!(
        "{TOOLS}grant pay: pay quota 2 budget 50 on amount;\n"
    ));
    for (old, new, which) in [
        (&budget, &raised, "OLD"),
        (&budget, &lowered, "OLD"),
        (&plain, &budget, "NEW"),
        (&budget, &plain, "OLD"),
    ] {
        let r = certify(old, new);
        assert_eq!(r.verdict, Verdict::Unknown, "{r:?}");
        assert!(r.certificate.is_none());
        assert!(
            r.reasons.iter().any(|w| w.contains("grant `pay` of ")
                && w.contains(which)
                && w.contains("budget")),
            "{:?}",
            r.reasons
        );
    }
    let same = certify(&budget, &budget.clone());
    assert_eq!(same.verdict, Verdict::Certified);
    assert!(check_certificate(&budget, &budget, same.certificate.as_ref().unwrap()).is_ok());
    // A certificate for unit quotas does not carry over to a budget.
    let more = policy(&format!("{TOOLS}grant pay: pay quota 3;\n"));
    let cert = certify(&plain, &more)
        .certificate
        .expect("a raised quota certifies");
    let mut budget_more = more.clone();
    budget_more.budgets = budget.budgets.clone();
    // (The budget is part of the content hash, so the hash check refuses it.)
    let err = check_certificate(&plain, &budget_more, &cert).unwrap_err();
    assert!(!err.to_string().is_empty());
}
