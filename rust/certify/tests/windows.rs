//! A renewing quota or budget (`quota N per 10m`, `budget B on PARAM per
//! day`) is not modeled by the ledger certifier (it has no clock): it
//! answers `unknown` naming the grant, never `certified`, and refuses a
//! certificate for such policies, unless they are identical.

use agenra_certify::{certify, check_certificate, Verdict};

fn policy(src: &str) -> agenra_core::Policy {
    agenra_policy::compile(src, "p").unwrap().policy
}

const TOOLS: &str = "tool pay(to: string, amount: decimal);\n";

#[test]
fn windows_are_unknown_to_the_certifier() {
    let plain = policy(&format!("{TOOLS}grant daily: pay quota 2;\n"));
    let daily = policy(&format!("{TOOLS}grant daily: pay quota 2 per day;\n"));
    // With fixed windows, raising the limit or lengthening the window is
    // not certified by construction: a longer window renews less often.
    let raised = policy(&format!("{TOOLS}grant daily: pay quota 3 per day;\n"));
    let longer = policy(&format!("{TOOLS}grant daily: pay quota 2 per 2d;\n"));
    let budget = policy(&format!(
        "{TOOLS}grant daily: pay budget 100 on amount per day;\n"
    ));
    for (old, new, which, what) in [
        (&daily, &raised, "OLD", "quota"),
        (&daily, &longer, "OLD", "quota"),
        (&plain, &daily, "NEW", "quota"),
        (&plain, &budget, "NEW", "budget"),
    ] {
        let r = certify(old, new);
        assert_eq!(r.verdict, Verdict::Unknown, "{r:?}");
        assert!(r.certificate.is_none());
        assert!(
            r.reasons.iter().any(|w| w.contains("grant `daily` of ")
                && w.contains(which)
                && w.contains(what)
                && w.contains("renews every")),
            "{:?}",
            r.reasons
        );
    }
    let same = certify(&daily, &daily.clone());
    assert_eq!(same.verdict, Verdict::Certified);
    assert!(check_certificate(&daily, &daily, same.certificate.as_ref().unwrap()).is_ok());
    // A certificate for plain quotas does not carry over to windows.
    let more = policy(&format!("{TOOLS}grant daily: pay quota 3;\n"));
    let cert = certify(&plain, &more).certificate.unwrap();
    assert!(check_certificate(&plain, &raised, &cert).is_err());
}
