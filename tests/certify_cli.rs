//! `agenra certify`, `agenra check-cert` and `agenra bench certify` from
//! the command line (docs/certify.md).

use std::path::PathBuf;
use std::process::{Command, Output};

fn agenra(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agenra"))
        .args(args)
        .output()
        .expect("agenra runs")
}

fn corpus(file: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/certify-corpus")
        .join(file)
        .display()
        .to_string()
}

fn temp(name: &str) -> String {
    std::env::temp_dir()
        .join(format!("agenra-certify-{}-{name}", std::process::id()))
        .display()
        .to_string()
}

#[test]
fn a_quota_increase_is_certified_and_its_certificate_checks() {
    let (old, new) = (
        corpus("coding-agent/base.agr"),
        corpus("coding-agent/cd01-write-quota-realistic.agr"),
    );
    for ext in ["json", "cbor"] {
        let cert = temp(&format!("cd01.{ext}"));
        let out = agenra(&["certify", &old, &new, "--json", "--out", &cert]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(v["verdict"], "certified");
        assert_eq!(v["method"], "by construction: quota increase");
        assert!(v["lost_workflow"].is_null());
        // Raising a quota permits more: the delta is a witness of that.
        assert!(v["safety_delta"].is_array(), "{v}");
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        for k in [
            "verdict",
            "method",
            "old_hash",
            "new_hash",
            "lost_workflow",
            "confirmed_by_replay",
            "safety_delta",
        ] {
            assert!(keys.contains(&k), "{k}");
        }
        let check = agenra(&["check-cert", &old, &new, &cert]);
        assert_eq!(check.status.code(), Some(0), "{check:?}");
        // The certificate is about these two policies only.
        let other = corpus("coding-agent/cd13-push-feature-quota-up.agr");
        assert_eq!(
            agenra(&["check-cert", &old, &other, &cert]).status.code(),
            Some(1)
        );
        let _ = std::fs::remove_file(&cert);
    }
}

#[test]
fn a_lost_workflow_is_reported_and_confirmed() {
    let out = agenra(&[
        "certify",
        &corpus("payments/base.agr"),
        &corpus("payments/pay09-known-before-small.agr"),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"], "not-preserved");
    assert_eq!(v["confirmed_by_replay"], true);
    assert!(!v["lost_workflow"].as_array().unwrap().is_empty());
}

#[test]
fn a_rule_change_not_certified_is_named_and_its_loss_replayed() {
    // rd21: the rule side cannot certify it (it names the rule), and the
    // rule probe finds the lost workflow (an approval OLD's re-check
    // denies and NEW's admits), replayed through both monitors.
    let out = agenra(&[
        "certify",
        &corpus("report-delivery/rules-base.agr"),
        &corpus("report-delivery/rd21-secret-mail-pauses.agr"),
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("not-preserved"), "{text}");
    assert!(text.contains("flow rule `reports_not_mailed`"), "{text}");
    assert!(text.contains("confirmed by replay: true"), "{text}");
}

#[test]
fn a_rule_change_on_set_membership_is_unknown_and_named() {
    // NEW denies calls on a discovered value, which OLD admits: a loss,
    // but the rule side does not evaluate set membership and no probe
    // builds the discovery, so the answer is `unknown`, naming the rule
    // (never `certified`).
    let (old, new) = (temp("sets-old.agr"), temp("sets-new.agr"));
    let base = "sinks out;\nsets s;\ntool l() {}\ntool t(r: string) { sink out; }\n\
                grant gl: l quota unlimited discovers s;\ngrant g: t where r in s quota 1;\n";
    std::fs::write(&old, base).unwrap();
    std::fs::write(&new, format!("{base}deny call c: t when r in s;\n")).unwrap();
    let out = agenra(&["certify", &old, &new]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(text.starts_with("unknown"), "{text}");
    assert!(text.contains("`c`"), "{text}");
}

#[test]
fn a_rule_change_is_certified_by_smt_and_its_certificate_rechecked() {
    let (old, new) = (
        corpus("coding-agent/base.agr"),
        corpus("coding-agent/cd10-secret-rule-dropped.agr"),
    );
    let cert = temp("cd10.json");
    let out = agenra(&["certify", &old, &new, "--out", &cert]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("rules: SMT"), "{text}");
    assert!(text.contains("no_push_after_secret"), "{text}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cert).unwrap()).unwrap();
    assert!(v["rules"]["queries"].as_u64().unwrap() > 0, "{v}");
    let out = agenra(&["check-cert", &old, &new, &cert]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // The certificate is about these two policies only: against OLD → OLD
    // (no rule change) it fails.
    let out = agenra(&["check-cert", &old, &old, &cert]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let _ = std::fs::remove_file(&cert);
}

#[test]
fn a_tampered_certificate_is_rejected_without_panicking() {
    let (old, new) = (
        corpus("support-desk/base.agr"),
        corpus("support-desk/tk06-close-first-down.agr"),
    );
    let cert = temp("tk06.json");
    assert_eq!(
        agenra(&["certify", &old, &new, "--out", &cert])
            .status
            .code(),
        Some(0)
    );
    let text = std::fs::read_to_string(&cert).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    // A held call naming a grant that does not exist.
    let relation = v["proof"]["simulation"]["components"][0]["relation"]
        .as_array_mut()
        .unwrap();
    let last = relation.last_mut().unwrap();
    last["calls"] = serde_json::json!([[
        {"old_paused": false, "new_paused": false,
         "old": {"len": 1, "ids": [999, 0, 0, 0]},
         "new": {"len": 1, "ids": [0, 0, 0, 0]}}, 1]]);
    std::fs::write(&cert, v.to_string()).unwrap();
    let out = agenra(&["check-cert", &old, &new, &cert]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let _ = std::fs::remove_file(&cert);
}

#[test]
fn the_corpus_bench_ends_with_its_summary() {
    let out = agenra(&["bench", "certify"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert!(last["total"].as_u64().unwrap() >= 51);
    assert_eq!(last["non_preserving_certified"], 0);
    assert!(last["seconds"].is_number());
}

/// A revision whose abstraction has no call class (no grant matches any
/// call, before or after): certified, and `--emit-lean` still writes its
/// (vacuous, but checked) Lean certificate, prints the verdict and writes
/// the `--out` certificate. It used to exit 1 with none of the three.
#[test]
fn emit_lean_without_a_call_class_still_certifies() {
    let dir = temp("no-class");
    std::fs::create_dir_all(&dir).unwrap();
    let old = format!("{dir}/old.agr");
    let new = format!("{dir}/new.agr");
    std::fs::write(
        &old,
        "policy \"p\";\ntool a.x(path: string) { resource path; }\ntool b.y(path: string) { resource path; }\n",
    )
    .unwrap();
    std::fs::write(
        &new,
        "// the same policy, commented\npolicy \"p\";\ntool a.x(path: string) { resource path; }\ntool b.y(path: string) { resource path; }\n",
    )
    .unwrap();
    let lean = format!("{dir}/NoClass.lean");
    let cert = format!("{dir}/cert.json");
    let out = agenra(&["certify", &old, &new, "--emit-lean", &lean, "--out", &cert]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("certified"), "{text}");
    let check = agenra(&["check-cert", &old, &new, &cert]);
    assert_eq!(check.status.code(), Some(0), "{check:?}");
    let file = std::fs::read_to_string(&lean).unwrap();
    assert!(
        file.contains("namespace AgenraCertificate.NoClass"),
        "{file}"
    );
    assert!(
        file.contains("theorem preserves0 : Preserves ctx0"),
        "{file}"
    );
    assert!(
        file.contains("theorem preserves : Preserves ctx0 := preserves0"),
        "{file}"
    );
    assert!(file.contains("classes := []"), "{file}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A Lean file that cannot be written costs the exit code (1), not the
/// verdict on stdout or the `--out` certificate (both used to be lost).
#[test]
fn an_unwritable_lean_file_keeps_the_verdict_and_the_certificate() {
    let (old, new) = (
        corpus("coding-agent/base.agr"),
        corpus("coding-agent/cd01-write-quota-realistic.agr"),
    );
    let cert = temp("unwritable-lean.json");
    let lean = temp("no-such-dir/Rev.lean");
    let out = agenra(&["certify", &old, &new, "--out", &cert, "--emit-lean", &lean]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("certified"), "{text}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("Rev.lean: cannot write"), "{err}");
    let check = agenra(&["check-cert", &old, &new, &cert]);
    assert_eq!(check.status.code(), Some(0), "{check:?}");
    let _ = std::fs::remove_file(&cert);
}
