//! Object types in `verify` and `certify` (`docs/policy-language.md`,
//! "Objects"): the call classes do not enumerate field tests, so a policy
//! that tests a field answers `unknown` (never `holds` or `certified`),
//! while one with object parameters and no field test is checked as usual.

use agenra_certify::Verdict;
use agenra_core::policy::Policy;
use agenra_smt::verify::{verify, Options, Outcome, Property};

fn compile(src: &str) -> Policy {
    match agenra_policy::compile(src, "objects") {
        Ok(c) => c.policy,
        Err(e) => panic!("{}", e.render("objects.agr", src)),
    }
}

const HEAD: &str = r#"levels public < secret;
categories credential;
sinks disk;
tool read(path: string) { resource path; output <secret, {credential}, untrusted>; }
tool edit_file(path: string, edits: {oldText: string, newText: string}[]) { resource path; sink disk on edits; }
deny flow no_secret_edit: category credential -> disk;
grant r: read quota 1;
"#;

#[test]
fn field_tests_make_verify_and_certify_answer_unknown() {
    let old = compile(&format!(
        "{HEAD}grant e: edit_file where all edits.newText ends_with \"\\n\" quota 2;\n"
    ));
    let new = compile(&format!(
        "{HEAD}grant e: edit_file where any edits.newText ends_with \"\\n\" quota 2;\n"
    ));
    let opts = Options {
        bound: 3,
        timeout_ms: 10_000,
    };
    for f in verify(&new, &Property::ALL, &opts) {
        assert_eq!(
            f.result,
            Outcome::Unknown,
            "{:?}: {:?}",
            f.property,
            f.detail
        );
        assert!(
            f.detail.iter().any(|d| d.contains("field")),
            "{:?}: {:?}",
            f.property,
            f.detail
        );
    }
    // NEW admits calls OLD does not (`any` is weaker than `all`): whatever
    // certify says, it must not certify the change.
    let report = agenra_certify::certify(&old, &new);
    assert_ne!(report.verdict, Verdict::Certified, "{:?}", report.reasons);
    let report = agenra_certify::certify(&new, &old);
    assert_eq!(report.verdict, Verdict::Unknown, "{:?}", report.reasons);
}

#[test]
fn object_parameters_without_field_tests_are_still_checked() {
    let p = compile(&format!("{HEAD}grant e: edit_file quota 2;\n"));
    let opts = Options {
        bound: 3,
        timeout_ms: 10_000,
    };
    let found = verify(&p, &[Property::NonLeakage], &opts);
    assert_eq!(found.len(), 1);
    assert_ne!(found[0].result, Outcome::Unknown, "{:?}", found[0].detail);
    let wider = compile(&format!("{HEAD}grant e: edit_file quota 3;\n"));
    let report = agenra_certify::certify(&wider, &p);
    assert_ne!(report.verdict, Verdict::Unknown, "{:?}", report.reasons);
}
