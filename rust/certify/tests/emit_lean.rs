//! `--emit-lean`: the Lean file written for corpus pairs has the expected
//! shape (no Lean toolchain here, so it is not compiled): it imports the
//! checker's soundness proof, holds one context and one relation per
//! component, proves `Preserves` with `checkSimulationTree_sound` and
//! `native_decide`, and its relation is the one the Rust checker accepts
//! (sorted in the order of the Lean search tree).

use agenra_certify::emit_lean::{emit_lean, lean_ident, lean_order, relations, CHUNK};
use agenra_certify::{certify, check_certificate, Verdict};
use std::path::Path;

fn load(rel: &str) -> agenra_core::Policy {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/certify-corpus");
    let text = std::fs::read_to_string(dir.join(rel)).unwrap();
    agenra_policy::compile(&text, "p").unwrap().policy
}

fn emitted(old: &str, new: &str, name: &str) -> (String, usize, Vec<usize>) {
    let (o, n) = (load(old), load(new));
    let report = certify(&o, &n);
    assert_eq!(report.verdict, Verdict::Certified, "{:?}", report.reasons);
    let cert = report.certificate.unwrap();
    assert!(check_certificate(&o, &n, &cert).is_ok());
    let parts = relations(&o, &n, &cert).unwrap();
    let sizes = parts.iter().map(|p| p.relation.len()).collect();
    (emit_lean(&o, &n, &cert, name).unwrap(), parts.len(), sizes)
}

fn count(text: &str, pat: &str) -> usize {
    text.matches(pat).count()
}

#[test]
fn a_quota_increase_becomes_a_lean_theorem() {
    let (text, parts, sizes) = emitted(
        "report-delivery/base.agr",
        "report-delivery/rd01-generate-quota-up.agr",
        "rd01-generate-quota-up",
    );
    assert!(text.starts_with("/-\nCertificate written by `agenra certify --emit-lean`"));
    assert!(text.contains("\nimport AgenraProofs.Certify\n"));
    assert!(text.contains("namespace AgenraCertificate.Rd01_generate_quota_up\n"));
    assert!(text.contains("open Agenra\n"));
    assert!(text.contains("OLD: sha256:"));
    assert!(text.contains("NEW: sha256:"));
    assert!(parts >= 1);
    assert_eq!(count(&text, " : Ctx :="), parts);
    assert_eq!(count(&text, "theorem preserves"), parts + 1);
    assert_eq!(count(&text, "(by native_decide)"), parts);
    assert_eq!(count(&text, "checkSimulationTree_sound ctx"), parts);
    assert_eq!(count(&text, " : RelTree :=\n  RelTree.ofSorted rel"), parts);
    for (i, n) in sizes.iter().enumerate() {
        assert!(text.contains(&format!("theorem preserves{i} : Preserves ctx{i} :=")));
        assert!(text.contains(&format!("({n} pairs, sorted by `Agenra.stateCmp`)")));
        // One definition per chunk of the relation, joined with `++`.
        let chunks = n.div_ceil(CHUNK);
        for j in 0..chunks {
            assert!(text.contains(&format!("def rel{i}_{j} : List PState :=")));
        }
        assert!(!text.contains(&format!("def rel{i}_{chunks} :")));
        assert!(text.contains(&format!(
            "def rel{i} : List PState :=\n  concatAll [rel{i}_"
        )));
    }
    assert!(text.contains("theorem preserves : Preserves ctx0"));
    assert!(text.contains("\n#print axioms preserves\n"));
    // The initial pair: region 0, no call held, only type 0 reachable.
    assert!(text.contains("{ region := 0, old := ["));
    assert!(text.contains("calls := [], types := 1 }"));
    // Grants carry what the abstraction reads.
    assert!(text.contains("{ agent := 0, quota := Quota."));
    assert!(text.contains("rulePauses := "));
    assert!(text
        .trim_end()
        .ends_with("end AgenraCertificate.Rd01_generate_quota_up"));
    // Nothing that would leave a proof open or add an axiom of our own.
    let words: Vec<&str> = text
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .collect();
    for bad in ["sorry", "admit", "axiom"] {
        assert!(!words.contains(&bad), "{bad}");
    }
    // Brackets balance (a cheap syntax check).
    assert_eq!(count(&text, "["), count(&text, "]"));
    assert_eq!(count(&text, "{"), count(&text, "}"));
    if std::env::var_os("AGENRA_SHOW_LEAN").is_some() {
        println!("{text}");
    }
    assert_eq!(count(&text, "⟨"), count(&text, "⟩"));
}

#[test]
fn the_emitted_relation_is_the_certificates_own() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/certify-corpus");
    let truth: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("ground-truth.json")).unwrap())
            .unwrap();
    let mut simulations = 0;
    let mut emitted_files = 0;
    for e in truth.as_array().unwrap() {
        let (o, n) = (
            load(e["old"].as_str().unwrap()),
            load(e["new"].as_str().unwrap()),
        );
        let report = certify(&o, &n);
        let Some(cert) = report.certificate else {
            continue;
        };
        let parts = match relations(&o, &n, &cert) {
            Ok(p) => p,
            // A by-construction certificate whose relation does not close
            // is not emitted; the error says why.
            Err(_) => continue,
        };
        if let agenra_certify::certificate::Proof::Simulation { components, .. } = &cert.proof {
            simulations += 1;
            assert_eq!(parts.len(), components.len());
            for (p, c) in parts.iter().zip(components) {
                assert_eq!(p.relation, c.relation);
                assert_eq!(p.tools, c.tools);
            }
        }
        if !parts.is_empty() {
            let text = emit_lean(&o, &n, &cert, e["id"].as_str().unwrap()).unwrap();
            assert_eq!(count(&text, "(by native_decide)"), parts.len());
            for line in text.lines().filter(|l| l.contains("concatAll [")) {
                assert!(line.matches(", ").count() < CHUNK, "{line}");
            }
            let pairs: usize = parts.iter().map(|p| p.relation.len()).sum();
            println!(
                "{}: {} components, {pairs} pairs, {} bytes of Lean",
                e["id"].as_str().unwrap(),
                parts.len(),
                text.len()
            );
            emitted_files += 1;
        }
    }
    assert!(simulations >= 1);
    assert!(emitted_files >= 10, "{emitted_files}");
}

#[test]
fn the_lean_order_is_a_total_order_on_a_relation() {
    let (o, n) = (
        load("report-delivery/base.agr"),
        load("report-delivery/rd01-generate-quota-up.agr"),
    );
    let cert = certify(&o, &n).certificate.unwrap();
    for part in relations(&o, &n, &cert).unwrap() {
        let mut v: Vec<_> = part.relation.iter().collect();
        v.sort_by(|a, b| lean_order(a, b));
        for w in v.windows(2) {
            // Strictly increasing: distinct states never compare equal, so
            // the Lean search finds each of them.
            assert_eq!(lean_order(w[0], w[1]), std::cmp::Ordering::Less);
        }
    }
}

#[test]
fn file_stems_become_lean_identifiers() {
    assert_eq!(lean_ident("rd01-quota"), "Rd01_quota");
    assert_eq!(lean_ident("01x"), "C01x");
    assert_eq!(lean_ident(""), "Cert");
    assert_eq!(lean_ident("end"), "End");
}
