//! The hand-written corpus (tests/certify-corpus): no non-preserving
//! revision is certified, every certificate passes the checker, every lost
//! workflow replays, and every preserving revision is certified except
//! those that change rules: without the rule-side SMT check (this crate
//! does not link Z3) they are never certified. With it, the corpus is
//! judged in `rust/smt/tests/certify_rules.rs`.

use agenra_certify::{certify, check_certificate, replay, structure, Verdict};
use std::path::Path;

#[test]
fn the_corpus_is_judged_as_labelled() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/certify-corpus");
    let truth: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("ground-truth.json")).unwrap())
            .unwrap();
    let load = |f: &str| {
        let text = std::fs::read_to_string(dir.join(f)).unwrap();
        agenra_policy::compile(&text, "p").unwrap().policy
    };
    let entries = truth.as_array().unwrap();
    assert!(entries.len() >= 51);
    let preserving = entries.iter().filter(|e| e["preserving"] == true).count();
    assert!(preserving >= 20 && entries.len() - preserving >= 20);
    for e in entries {
        let id = e["id"].as_str().unwrap();
        let (old, new) = (
            load(e["old"].as_str().unwrap()),
            load(e["new"].as_str().unwrap()),
        );
        let report = certify(&old, &new);
        if let Some(cert) = &report.certificate {
            assert!(check_certificate(&old, &new, cert).is_ok(), "{id}");
        }
        if let Some(w) = &report.lost_workflow {
            assert!(replay::confirm(&old, &new, w).is_ok(), "{id}");
        }
        if let Some(w) = &report.safety_delta {
            assert!(replay::confirm(&new, &old, w).is_ok(), "{id}: delta");
        }
        if e["preserving"] == true {
            if !structure::split_differences(&old, &new).0.is_empty() {
                assert_ne!(report.verdict, Verdict::Certified, "{id}");
            } else {
                assert_eq!(
                    report.verdict,
                    Verdict::Certified,
                    "{id}: {:?}",
                    report.reasons
                );
            }
        } else {
            assert_ne!(report.verdict, Verdict::Certified, "{id}");
        }
    }
}
