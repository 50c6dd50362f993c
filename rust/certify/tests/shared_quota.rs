//! A quota shared by a tenant's sessions (`quota N per tenant`) is not
//! modeled by the ledger certifier: it answers `unknown` naming the grant
//! (other sessions may drain the pool at any time), never `certified`, and
//! refuses a certificate for such policies, unless they are identical.

use agenra_certify::{certify, check_certificate, Verdict};

fn policy(src: &str) -> agenra_core::Policy {
    agenra_policy::compile(src, "p").unwrap().policy
}

const TOOLS: &str = "tool pay(to: string);\n";

#[test]
fn shared_quotas_are_unknown_to_the_certifier() {
    let per_session = policy(&format!("{TOOLS}grant daily: pay quota 2;\n"));
    let shared = policy(&format!("{TOOLS}grant daily: pay quota 2 per tenant;\n"));
    let raised = policy(&format!("{TOOLS}grant daily: pay quota 3 per tenant;\n"));
    // A quota increase would be certified by construction per session.
    let more = policy(&format!("{TOOLS}grant daily: pay quota 3;\n"));
    assert_eq!(certify(&per_session, &more).verdict, Verdict::Certified);
    for (old, new, which) in [
        (&shared, &raised, "OLD"),
        (&per_session, &shared, "NEW"),
        (&shared, &per_session, "OLD"),
    ] {
        let r = certify(old, new);
        assert_eq!(r.verdict, Verdict::Unknown, "{r:?}");
        assert!(r.certificate.is_none());
        assert!(
            r.reasons.iter().any(|w| w.contains("grant `daily` of ")
                && w.contains(which)
                && w.contains("per tenant")),
            "{:?}",
            r.reasons
        );
    }
    // Identical policies are still certified (the same pool, the same
    // decisions).
    let same = certify(&shared, &shared.clone());
    assert_eq!(same.verdict, Verdict::Certified);
    assert!(check_certificate(&shared, &shared, same.certificate.as_ref().unwrap()).is_ok());
    // A certificate for per-session quotas does not carry over.
    let cert = certify(&per_session, &more).certificate.unwrap();
    let mut shared_more = more.clone();
    shared_more.shared_grants = vec![0];
    let err = check_certificate(&per_session, &shared_more, &cert).unwrap_err();
    assert!(!err.to_string().is_empty());
}
