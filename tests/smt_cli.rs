//! `agenra authorize` and `agenra graph` (docs/smt.md) on the
//! email-assistant example: the three engines, the counterexample, the
//! drawn graph, the errors, and a policy with provenance by value.

use std::path::PathBuf;
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn agenra(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agenra"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("the agenra binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

const POLICY: &str = "examples/email-assistant/policy.agr";

/// The first `n` events of the email-assistant attack trace, in a file.
fn prefix(n: usize, tag: &str) -> PathBuf {
    let text = std::fs::read_to_string(root().join("examples/email-assistant/attack.jsonl"))
        .expect("the example trace");
    let lines: Vec<&str> = text.lines().take(n).collect();
    let dir = std::env::temp_dir().join(format!("agenra-smt-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let path = dir.join(format!("{tag}-{n}.jsonl"));
    std::fs::write(&path, lines.join("\n") + "\n").expect("write the trace");
    path
}

#[test]
fn smt_denies_the_web_tainted_mail_with_its_path() {
    let trace = prefix(7, "smt");
    let o = agenra(&["authorize", "--policy", POLICY, trace.to_str().unwrap()]);
    assert!(o.status.success(), "{o:?}");
    let out = stdout(&o);
    assert!(
        out.starts_with("DENY web_needs_review (engine smt)\n"),
        "{out}"
    );
    // The web page read into the context, then the mail's arguments.
    assert!(out.contains("counterexample: call c4, sink email"), "{out}");
    assert!(
        out.contains("c3 [source rule of tool web.fetch adds"),
        "{out}"
    );
    assert!(
        out.contains("-> context@3 [its result was read into the context] -> c4 [argument"),
        "{out}"
    );
}

#[test]
fn both_engines_agree_and_native_alone_answers_the_same() {
    let trace = prefix(7, "both");
    for (engine, expect) in [
        ("both", "DENY web_needs_review (engine both)"),
        ("native", "DENY web_needs_review (engine native)"),
    ] {
        let o = agenra(&[
            "authorize",
            "--policy",
            POLICY,
            trace.to_str().unwrap(),
            "--engine",
            engine,
        ]);
        assert!(o.status.success(), "{o:?}");
        assert!(stdout(&o).starts_with(expect), "{}", stdout(&o));
        assert!(!stdout(&o).contains("disagree"), "{}", stdout(&o));
    }
}

#[test]
fn json_shows_the_granted_capabilities_of_a_pause() {
    let trace = prefix(12, "json");
    let o = agenra(&[
        "authorize",
        "--policy",
        POLICY,
        trace.to_str().unwrap(),
        "--engine",
        "both",
        "--json",
    ]);
    assert!(o.status.success(), "{o:?}");
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).expect("one JSON object");
    assert_eq!(v["verdict"], "PAUSE");
    assert_eq!(v["rule"], "send_reviewed");
    assert_eq!(v["granted"], serde_json::json!(["send_reviewed"]));
    assert_eq!(v["smt"]["verdict"], "PAUSE");
    assert_eq!(v["native"]["verdict"], "PAUSE");
    assert!(v["disagreement"].is_null());
}

#[test]
fn the_graph_highlights_the_violating_path() {
    let trace = prefix(7, "dot");
    let o = agenra(&[
        "graph",
        "--policy",
        POLICY,
        trace.to_str().unwrap(),
        "--format",
        "dot",
    ]);
    assert!(o.status.success(), "{o:?}");
    let dot = stdout(&o);
    assert!(dot.starts_with("digraph session {"), "{dot}");
    assert!(dot.contains("label=\"DENY web_needs_review\""), "{dot}");
    assert!(dot.contains("color=red"), "{dot}");

    let o = agenra(&[
        "graph",
        "--policy",
        POLICY,
        trace.to_str().unwrap(),
        "--format",
        "json",
        "--seq",
        "7",
    ]);
    assert!(o.status.success(), "{o:?}");
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).expect("one JSON object");
    let hot: Vec<&str> = v["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter(|n| n["violating"] == true)
        .map(|n| n["name"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(hot, ["c3", "context@3", "c4"]);
    let c3 = v["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .find(|n| n["name"] == "c3")
        .expect("c3");
    assert!(
        c3["label"].as_str().unwrap_or("").contains("untrusted"),
        "{c3}"
    );
}

#[test]
fn errors_name_the_problem() {
    // The last event must be a call.
    let trace = prefix(6, "err");
    let o = agenra(&["authorize", "--policy", POLICY, trace.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("the last event must be a call"));
}

#[test]
fn provenance_by_value_is_decided_by_both_engines() {
    // The same policy with provenance by value: the SMT engine decides it
    // (no longer `unsupported`), and both engines agree.
    let dir = std::env::temp_dir().join(format!("agenra-smt-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let policy = dir.join("by-value.agr");
    let source = std::fs::read_to_string(root().join(POLICY)).expect("the policy");
    std::fs::write(&policy, format!("provenance by value;\n{source}")).expect("write");
    let trace = prefix(7, "byvalue");
    let native = agenra(&[
        "authorize",
        "--policy",
        policy.to_str().unwrap(),
        trace.to_str().unwrap(),
        "--engine",
        "native",
    ]);
    let verdict = stdout(&native)
        .lines()
        .next()
        .and_then(|l| l.split(" (engine").next())
        .map(str::to_string)
        .expect("a verdict line");
    for engine in ["smt", "both"] {
        let o = agenra(&[
            "authorize",
            "--policy",
            policy.to_str().unwrap(),
            trace.to_str().unwrap(),
            "--engine",
            engine,
        ]);
        assert!(o.status.success(), "{o:?}");
        assert!(
            stdout(&o).starts_with(&format!("{verdict} (engine {engine})")),
            "{o:?}"
        );
    }
}

#[test]
fn a_permission_ir_narrows_the_session() {
    let dir = std::env::temp_dir().join(format!("agenra-smt-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let trace = dir.join("web.jsonl");
    std::fs::write(
        &trace,
        r#"{"kind":"call","id":"c1","time":10,"tool":"web.fetch","args":{"url":"https://attacker.example/prompt"}}"#,
    )
    .expect("write the trace");
    let trace = trace.to_str().unwrap();
    let o = agenra(&["authorize", "--policy", POLICY, trace, "--engine", "both"]);
    assert!(
        stdout(&o).starts_with("ALLOW browse (engine both)"),
        "{o:?}"
    );
    // "Do not browse the web": the IR's task scope forbids the fetch.
    let o = agenra(&[
        "authorize",
        "--policy",
        POLICY,
        "--ir",
        "examples/ir/email-assistant.ir.json",
        trace,
        "--engine",
        "both",
    ]);
    assert!(o.status.success(), "{o:?}");
    assert!(
        stdout(&o).starts_with("DENY task-scope (engine both)"),
        "{o:?}"
    );
}

/// With `--ir`, errors still name the trace's own line (the IR's task event
/// runs first but is not one of the trace's lines).
#[test]
fn errors_under_an_ir_name_the_traces_own_line() {
    let dir = std::env::temp_dir().join(format!("agenra-smt-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let trace = dir.join("duplicate.jsonl");
    let call =
        r#"{"kind":"call","id":"c1","time":10,"tool":"contacts.lookup","args":{"name":"Alice"}}"#;
    std::fs::write(&trace, format!("{call}\n\n{call}\n{call}\n")).expect("write the trace");
    let trace = trace.to_str().unwrap();
    for ir in [None, Some("examples/ir/email-assistant.ir.json")] {
        let mut args = vec!["authorize", "--policy", POLICY];
        if let Some(ir) = ir {
            args.extend(["--ir", ir]);
        }
        args.push(trace);
        let o = agenra(&args);
        assert!(!o.status.success(), "{o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("duplicate.jsonl:3: "), "{ir:?}: {err}");
    }
}
