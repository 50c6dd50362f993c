//! `agenra verify` and `agenra diff` on the command line: exit codes,
//! witness files that `agenra replay` reads, JSON output.

use std::path::{Path, PathBuf};
use std::process::Command;

fn agenra() -> Command {
    Command::new(env!("CARGO_BIN_EXE_agenra"))
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("agenra-verify-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn a_violation_exits_2_and_writes_a_witness_that_replay_reproduces() {
    let dir = tmp("witness");
    let policy = root().join("tests/verify-corpus/trust-preservation/bad-allow-untrusted.agr");
    let out = agenra()
        .args([
            "verify",
            "--property",
            "trust-preservation",
            "--json",
            "--witness-dir",
        ])
        .arg(&dir)
        .arg(&policy)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["bound"], 5);
    let p = &v["properties"][0];
    assert_eq!(p["name"], "trust-preservation");
    assert_eq!(p["result"], "violated");
    assert!(p["seconds"].as_f64().unwrap() >= 0.0);
    let file = dir.join("trust-preservation.jsonl");
    assert!(file.exists());
    let r = agenra()
        .args(["replay", "--json", "--policy"])
        .arg(&policy)
        .arg(&file)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let text = String::from_utf8(r.stdout).unwrap();
    let last_call = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .rfind(|x| x["kind"] == "call")
        .unwrap();
    assert_eq!(last_call["decision"], "ALLOW");
    assert_eq!(last_call["tool"], "shell.exec");
}

#[test]
fn holds_exits_0_and_bad_input_exits_1() {
    let out = agenra()
        .args(["verify", "--property", "quota-soundness,consistency"])
        .arg(root().join("examples/coding-agent/policy.agr"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("quota-soundness") && text.contains("consistency") && text.contains("holds")
    );
    assert!(!text.contains("non-leakage"));
    let out = agenra()
        .args(["verify", "--property", "no-such-thing"])
        .arg(root().join("examples/coding-agent/policy.agr"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown property `no-such-thing`"));
    let dir = tmp("bad");
    let broken = write(&dir, "broken.agr", "grant x: nope quota 1;\n");
    let out = agenra().arg("verify").arg(&broken).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn own_contexts_are_modeled() {
    let dir = tmp("own");
    let p = write(
        &dir,
        "own.agr",
        "levels public < internal;\ntool fs.read(path: string);\nagent helper from main own context;\n\
         grant read: fs.read quota 3;\ngrant helper_read: fs.read quota 3 agent helper;\n",
    );
    let out = agenra()
        .args(["verify", "--property", "non-leakage", "--json"])
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["properties"][0]["result"], "holds");
}

const BASE: &str = "levels public < internal;\ntool bank.pay(recipient: string, amount: int);\n";

#[test]
fn diff_says_how_two_policies_compare_with_witnesses() {
    let dir = tmp("diff");
    let old = write(
        &dir,
        "old.agr",
        &format!("{BASE}grant pay: bank.pay where amount <= 100 quota 2;\n"),
    );
    let more = write(
        &dir,
        "more.agr",
        &format!("{BASE}grant pay: bank.pay where amount <= 100 quota 3;\n"),
    );
    let same = write(
        &dir,
        "same.agr",
        &format!("{BASE}grant pay: bank.pay where amount <= 100 quota 2;\n"),
    );
    let run = |a: &Path, b: &Path| {
        let out = agenra()
            .args(["diff", "--json"])
            .arg(a)
            .arg(b)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code(), v)
    };
    let (code, v) = run(&old, &same);
    assert_eq!(
        (code, v["relation"].as_str()),
        (Some(0), Some("equivalent"))
    );
    let (code, v) = run(&old, &more);
    assert_eq!(
        (code, v["relation"].as_str()),
        (Some(2), Some("more-permissive"))
    );
    let w = v["new_only"].as_array().unwrap();
    assert_eq!(
        w.iter().filter(|e| e["kind"] == "call").count(),
        3,
        "the third payment"
    );
    assert!(v["old_only"].is_null());
    let (code, v) = run(&more, &old);
    assert_eq!(
        (code, v["relation"].as_str()),
        (Some(2), Some("less-permissive"))
    );
    assert!(v["old_only"].is_array() && v["new_only"].is_null());
}
