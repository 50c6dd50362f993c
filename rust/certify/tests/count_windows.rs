//! A count over a sliding time window (`deny count c: at most 2 STEP
//! within 1h`) is not modeled by the certifier (its runs have no clock): it
//! answers `unknown` naming the count, never `certified`, and refuses a
//! certificate for such policies, unless they are identical. Without the
//! check, a window would be invisible to it: `within 1h` removed (a
//! stricter count) or added (a looser one) would look like no change.

use agenra_certify::{certify, check_certificate, Verdict};

fn policy(src: &str) -> agenra_core::Policy {
    agenra_policy::compile(src, "p").unwrap().policy
}

const BASE: &str = "tool pay(to: string, amount: decimal);\ngrant g: pay quota 10;\n";

#[test]
fn count_windows_are_unknown_to_the_certifier() {
    let plain = policy(&format!(
        "{BASE}deny count big: at most 2 call pay where amount > 1000;\n"
    ));
    let hour = policy(&format!(
        "{BASE}deny count big: at most 2 call pay where amount > 1000 within 1h;\n"
    ));
    let day = policy(&format!(
        "{BASE}deny count big: at most 2 call pay where amount > 1000 within day;\n"
    ));
    let raised = policy(&format!(
        "{BASE}deny count big: at most 3 call pay where amount > 1000 within 1h;\n"
    ));
    // Only a grant changes beside the same windowed count.
    let more_units = policy(&format!(
        "{}deny count big: at most 2 call pay where amount > 1000 within 1h;\n",
        BASE.replace("quota 10", "quota 12")
    ));
    for (old, new, which) in [
        (&hour, &more_units, "OLD"),
        (&plain, &hour, "NEW"),
        (&hour, &plain, "OLD"),
        (&hour, &day, "OLD"),
        (&hour, &raised, "OLD"),
    ] {
        let r = certify(old, new);
        assert_eq!(r.verdict, Verdict::Unknown, "{r:?}");
        assert!(r.certificate.is_none());
        assert!(
            r.reasons.iter().any(|w| w.contains("count `big` of ")
                && w.contains(which)
                && w.contains("sliding window")),
            "{:?}",
            r.reasons
        );
    }
    let same = certify(&hour, &hour.clone());
    assert_eq!(same.verdict, Verdict::Certified);
    assert!(check_certificate(&hour, &hour, same.certificate.as_ref().unwrap()).is_ok());
    // A certificate between plain counts does not carry over to windows.
    let looser = policy(&format!(
        "{BASE}deny count big: at most 3 call pay where amount > 1000;\n"
    ));
    let r = certify(&plain, &looser);
    if let Some(cert) = r.certificate {
        assert!(check_certificate(&plain, &hour, &cert).is_err());
    }
}
