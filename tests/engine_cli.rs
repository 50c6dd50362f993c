//! `--engine native|smt|both` on `agenra replay` and `agenra monitor`, and
//! `agenra graph --ir` (docs/smt.md): on every example trace the engines
//! agree, `both` prints what a native replay prints, and the graph runs
//! under policy ∧ task. (A forced disagreement is tested on the library:
//! `engine_replay::tests`.)

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

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

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// (policy, trace) of every example the SMT engine supports (the banking
/// agent's policy uses provenance by value: see
/// `an_unsupported_policy_is_refused_not_guessed`).
fn examples() -> Vec<(String, String)> {
    let mut out = vec![];
    for ex in ["coding-agent", "email-assistant", "research-agent"] {
        for trace in ["benign", "attack"] {
            out.push((
                format!("examples/{ex}/policy.agr"),
                format!("examples/{ex}/{trace}.jsonl"),
            ));
        }
    }
    out
}

fn json_lines(o: &Output) -> Vec<serde_json::Value> {
    stdout(o)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

#[test]
fn both_engines_agree_on_every_example_and_print_the_native_table() {
    for (policy, trace) in examples() {
        let native = agenra(&["replay", "--policy", &policy, &trace]);
        let both = agenra(&["replay", "--policy", &policy, &trace, "--engine", "both"]);
        // Same exit status (an example trace may stop at a bad event).
        assert_eq!(
            native.status.code(),
            both.status.code(),
            "{trace}: {both:?}"
        );
        assert!(
            !stderr(&both).contains("disagree"),
            "{trace}: {}",
            stderr(&both)
        );
        let (n, b) = (stdout(&native), stdout(&both));
        let mut lines: Vec<&str> = b.lines().collect();
        let engines = lines.pop().expect("the engines' line");
        assert!(
            engines.starts_with("engine both: ") && engines.ends_with(", 0 disagreements"),
            "{trace}: {engines}"
        );
        assert_eq!(lines.join("\n") + "\n", n, "{trace}");
    }
}

#[test]
fn smt_and_both_decide_every_call_as_native_does_in_json() {
    let mut calls = 0;
    for (policy, trace) in examples() {
        let native = json_lines(&agenra(&["replay", "--policy", &policy, &trace, "--json"]));
        for engine in ["smt", "both"] {
            let o = agenra(&[
                "replay", "--policy", &policy, &trace, "--json", "--engine", engine,
            ]);
            let records = json_lines(&o);
            assert_eq!(records.len(), native.len(), "{trace} {engine}: {o:?}");
            for (r, n) in records.iter().zip(&native) {
                assert_eq!(r["engine"], engine);
                assert_eq!(r["seq"], n["seq"]);
                assert_eq!(r["kind"], n["kind"]);
                assert!(r.get("disagreement").is_none(), "{trace}: {r}");
                if n["kind"] == "call" || n["kind"] == "approve" {
                    calls += 1;
                    assert_eq!(
                        (&r["decision"], &r["rule"], &r["grants"]),
                        (&n["decision"], &n["rule"], &n["grants"]),
                        "{trace} {engine}: {r}"
                    );
                    assert_eq!(r["smt"]["verdict"], n["decision"], "{r}");
                }
                if engine == "both" {
                    // The native record's own fields.
                    assert_eq!(r["ledger_hash"], n["ledger_hash"]);
                    assert_eq!(r["path"], n["path"]);
                }
            }
        }
    }
    assert!(calls > 40, "{calls} calls compared");
}

#[test]
fn replay_smt_shows_the_counterexample_in_the_table() {
    let o = agenra(&[
        "replay",
        "--policy",
        "examples/email-assistant/policy.agr",
        "examples/email-assistant/attack.jsonl",
        "--engine",
        "smt",
    ]);
    let out = stdout(&o);
    assert!(
        out.contains("denied by web_needs_review at sink email"),
        "{out}"
    );
    assert!(out.contains("c3 -> context@3 -> c4"), "{out}");
    assert!(out.contains("engine smt: "), "{out}");
}

#[test]
fn an_unsupported_policy_is_refused_not_guessed() {
    for engine in ["smt", "both"] {
        let o = agenra(&[
            "replay",
            "--policy",
            "examples/banking-agent/policy.agr",
            "examples/banking-agent/benign.jsonl",
            "--engine",
            engine,
        ]);
        assert_eq!(o.status.code(), Some(1), "{o:?}");
        assert!(stdout(&o).is_empty(), "{o:?}");
        assert!(
            stderr(&o).contains("unsupported: provenance by value"),
            "{o:?}"
        );
    }
    // The native engine runs it as before.
    let o = agenra(&[
        "replay",
        "--policy",
        "examples/banking-agent/policy.agr",
        "examples/banking-agent/benign.jsonl",
    ]);
    assert!(o.status.success(), "{o:?}");
}

#[test]
fn the_engine_flag_is_checked() {
    let o = agenra(&[
        "replay",
        "--policy",
        "examples/email-assistant/policy.agr",
        "examples/email-assistant/attack.jsonl",
        "--engine",
        "z3",
    ]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(stderr(&o).contains("unknown engine"), "{o:?}");
}

#[test]
fn monitor_streams_both_engines_answers() {
    let trace = std::fs::read_to_string(root().join("examples/email-assistant/attack.jsonl"))
        .expect("trace");
    let mut input: String = trace.lines().take(7).collect::<Vec<_>>().join("\n");
    input.push_str("\nnot an event\n");
    let out = std::env::temp_dir().join(format!(
        "agenra-engine-cli-monitor-{}.jsonl",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&out);
    let mut child = Command::new(env!("CARGO_BIN_EXE_agenra"))
        .args([
            "monitor",
            "--policy",
            "examples/email-assistant/policy.agr",
            "--engine",
            "both",
            "--trace-out",
            out.to_str().unwrap(),
        ])
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the monitor starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write");
    let o = child.wait_with_output().expect("the monitor ends");
    assert!(o.status.success(), "{o:?}");
    let lines = json_lines(&o);
    assert_eq!(lines.len(), 8, "{lines:?}");
    for l in &lines[..7] {
        assert_eq!(l["engine"], "both", "{l}");
        assert!(l.get("disagreement").is_none(), "{l}");
    }
    assert_eq!(lines[6]["decision"], "DENY");
    assert_eq!(lines[6]["rule"], "web_needs_review");
    assert_eq!(lines[6]["smt"]["verdict"], "DENY");
    assert_eq!(lines[6]["native"]["verdict"], "DENY");
    // The bad line: an error object, and the stream went on to its end.
    assert_eq!(lines[7]["seq"], 8);
    assert!(lines[7]["error"].is_string(), "{}", lines[7]);
    // The applied events were written out and replay to the same answers.
    let written = std::fs::read_to_string(&out).expect("the trace out");
    assert_eq!(written.lines().count(), 7);
    let _ = std::fs::remove_file(&out);
}

#[test]
fn graph_under_a_permission_ir() {
    let dir = std::env::temp_dir().join(format!("agenra-engine-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let trace = dir.join("attack5.jsonl");
    let text = std::fs::read_to_string(root().join("examples/email-assistant/attack.jsonl"))
        .expect("trace");
    std::fs::write(
        &trace,
        text.lines().take(5).collect::<Vec<_>>().join("\n") + "\n",
    )
    .expect("write");
    let trace = trace.to_str().unwrap();
    let args = |ir: bool| {
        let mut a = vec![
            "graph",
            "--policy",
            "examples/email-assistant/policy.agr",
            trace,
            "--format",
            "json",
        ];
        if ir {
            a.extend(["--ir", "examples/ir/email-assistant.ir.json"]);
        }
        a
    };
    // The policy alone allows the fetch (event 5).
    let o = agenra(&args(false));
    assert!(o.status.success(), "{o:?}");
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).expect("JSON");
    assert_eq!(v["decision"]["verdict"], "ALLOW");
    // Under the task ("do not browse the web"), it is outside the task scope,
    // and the graph starts with the task's node.
    let o = agenra(&args(true));
    assert!(o.status.success(), "{o:?}");
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).expect("JSON");
    assert_eq!(v["decision"]["verdict"], "DENY", "{v}");
    assert_eq!(v["decision"]["rule_name"], "task-scope", "{v}");
    assert_eq!(v["nodes"][0]["kind"], "task", "{v}");
    // `--seq` counts the trace's events, not the task's.
    let mut a = args(true);
    a.extend(["--seq", "1"]);
    let o = agenra(&a);
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).expect("JSON");
    assert_eq!(v["decision"]["verdict"], "ALLOW", "{v}");
    // A bad IR is an error naming the file.
    let bad = dir.join("bad.ir.json");
    std::fs::write(&bad, "{}").expect("write");
    let mut a = args(false);
    a.extend(["--ir", bad.to_str().unwrap()]);
    let o = agenra(&a);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(stderr(&o).contains("bad.ir.json"), "{o:?}");
}

#[test]
fn a_deny_by_the_task_names_the_ir_parts_and_their_evidence() {
    let dir = std::env::temp_dir().join(format!("agenra-engine-cli-ev-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let trace = dir.join("web.jsonl");
    std::fs::write(
        &trace,
        r#"{"kind":"call","id":"c1","time":10,"tool":"web.fetch","args":{"url":"https://x.example/"}}"#,
    )
    .expect("write");
    let args = |json: bool| {
        let mut a = vec![
            "authorize",
            "--policy",
            "examples/email-assistant/policy.agr",
            "--ir",
            "examples/ir/email-assistant.ir.json",
            trace.to_str().unwrap(),
            "--engine",
            "both",
        ];
        if json {
            a.push("--json");
        }
        a
    };
    let o = agenra(&args(false));
    assert!(o.status.success(), "{o:?}");
    let out = stdout(&o);
    assert!(out.starts_with("DENY task-scope (engine both)"), "{out}");
    // "Do not browse the web." is the evidence of the forbidden action the
    // scope carries.
    assert!(out.contains("  task: "), "{out}");
    assert!(out.contains("\"Do not browse the web\""), "{out}");
    let o = agenra(&args(true));
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).expect("JSON");
    assert_eq!(v["task"][0]["kind"], "scope", "{v}");
    assert!(
        v["task"][0]["evidence"]
            .as_array()
            .is_some_and(|e| !e.is_empty()),
        "{v}"
    );
}

/// A paused post whose approval comes after a secret read: the SMT engine
/// decides the approval (DENY at the re-check) in `authorize` and `replay`.
#[test]
fn approvals_are_re_checked_by_the_smt_engine() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("engine_cli_approvals");
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let policy = dir.join("policy.agr");
    std::fs::write(
        &policy,
        r#"
        levels public < secret;
        sinks net;
        tool read(key: string) { resource key; output <secret, {}, trusted>; }
        tool post(body: string) { sink net; }
        grant r: read quota unlimited;
        grant p: post quota 2 approval;
        deny flow secrets_out: sensitivity >= secret -> net;
        "#,
    )
    .expect("written");
    let trace = dir.join("trace.jsonl");
    std::fs::write(
        &trace,
        [
            r#"{"kind":"call","id":"c1","time":1,"tool":"post","args":{"body":"hi"}}"#,
            r#"{"kind":"call","id":"c2","time":2,"tool":"read","args":{"key":"k"}}"#,
            r#"{"kind":"result","call":"c2","time":3,"status":"succeeded","output":"s"}"#,
            r#"{"kind":"approve","call":"c1","time":4}"#,
        ]
        .join("\n")
            + "\n",
    )
    .expect("written");
    let (policy, trace) = (
        policy.to_str().expect("utf-8"),
        trace.to_str().expect("utf-8"),
    );
    for engine in ["smt", "both"] {
        let o = agenra(&["authorize", "--policy", policy, trace, "--engine", engine]);
        let out = stdout(&o);
        assert!(
            out.starts_with(&format!("DENY secrets_out (engine {engine})")),
            "{engine}: {out} {}",
            stderr(&o)
        );
        assert!(out.contains("counterexample: call c1, sink net"), "{out}");
        assert!(
            out.contains("c2 ["),
            "the secret read is on the path: {out}"
        );
        let o = agenra(&["replay", "--policy", policy, trace, "--engine", engine]);
        let out = stdout(&o);
        assert!(
            out.contains(&format!(
                "engine {engine}: 2 calls and 1 approvals decided, 0 disagreements"
            )),
            "{out}"
        );
        let o = agenra(&[
            "replay", "--policy", policy, trace, "--json", "--engine", engine,
        ]);
        let records = json_lines(&o);
        let approve = records.last().expect("the approval's record");
        assert_eq!(approve["kind"], "approve", "{approve}");
        assert_eq!(approve["decision"], "DENY", "{approve}");
        assert_eq!(approve["rule"], "secrets_out", "{approve}");
        assert_eq!(approve["smt"]["verdict"], "DENY", "{approve}");
        assert_eq!(approve["smt"]["counterexample"]["node"], "c1", "{approve}");
    }
}
