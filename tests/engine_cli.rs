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

/// (policy, trace) of every example (the banking agent's policy uses
/// provenance by value).
fn examples() -> Vec<(String, String)> {
    let mut out = vec![];
    for ex in [
        "banking-agent",
        "coding-agent",
        "email-assistant",
        "research-agent",
    ] {
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
fn provenance_by_value_runs_under_every_engine() {
    // The banking agent's policy: `provenance by value;` (no longer
    // refused by the SMT engine).
    let policy = "examples/banking-agent/policy.agr";
    for trace in ["benign", "attack"] {
        let trace = format!("examples/banking-agent/{trace}.jsonl");
        for engine in ["smt", "both"] {
            let o = agenra(&["replay", "--policy", policy, &trace, "--engine", engine]);
            assert!(o.status.success(), "{trace} {engine}: {o:?}");
            assert!(!stderr(&o).contains("disagree"), "{o:?}");
            assert!(stdout(&o).contains(&format!("engine {engine}: ")), "{o:?}");
        }
    }
    // `monitor --engine both` streams both answers, in agreement.
    let trace =
        std::fs::read_to_string(root().join("examples/banking-agent/benign.jsonl")).expect("trace");
    let mut child = Command::new(env!("CARGO_BIN_EXE_agenra"))
        .args(["monitor", "--policy", policy, "--engine", "both"])
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
        .write_all(trace.as_bytes())
        .expect("write");
    let o = child.wait_with_output().expect("the monitor ends");
    assert!(o.status.success(), "{o:?}");
    let lines = json_lines(&o);
    assert_eq!(lines.len(), trace.lines().count(), "{lines:?}");
    let mut decided = 0;
    for l in &lines {
        assert_eq!(l["engine"], "both", "{l}");
        assert!(l.get("disagreement").is_none(), "{l}");
        if l.get("smt").is_some() {
            decided += 1;
            assert_eq!(l["smt"]["verdict"], l["native"]["verdict"], "{l}");
        }
    }
    assert!(decided >= 5, "{lines:?}");
    // `authorize --engine both` on the trace's first six events: the rent
    // payment, whose IBAN and amount the user typed in the task, is allowed
    // after untrusted mail was read.
    let dir = std::env::temp_dir().join(format!("agenra-engine-cli-bv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let prefix = dir.join("benign6.jsonl");
    std::fs::write(
        &prefix,
        trace.lines().take(6).collect::<Vec<_>>().join("\n") + "\n",
    )
    .expect("write");
    let o = agenra(&[
        "authorize",
        "--policy",
        policy,
        prefix.to_str().unwrap(),
        "--engine",
        "both",
    ]);
    assert!(o.status.success(), "{o:?}");
    assert!(
        stdout(&o).starts_with("ALLOW pay_known (engine both)"),
        "{o:?}"
    );
}

#[test]
fn shared_quotas_are_one_tenants_under_smt_and_both() {
    // Two sessions of one trace share `daily` (`quota 2 per tenant`).
    let dir = std::env::temp_dir().join(format!("agenra-engine-cli-pool-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let policy = dir.join("pay.agr");
    std::fs::write(
        &policy,
        "tool pay(to: string);\ngrant daily: pay quota 2 per tenant;\n\
         grant fallback: pay quota 1 approval;\n",
    )
    .expect("write");
    let call = |session: &str, id: &str| {
        format!(
            "{{\"kind\":\"call\",\"session\":\"{session}\",\"id\":\"{id}\",\"time\":1,\"tool\":\"pay\",\"args\":{{\"to\":\"x\"}}}}\n"
        )
    };
    let trace = dir.join("pay.jsonl");
    std::fs::write(
        &trace,
        [
            call("s1", "p1"),
            call("s2", "p1"),
            call("s2", "p2"),
            "{\"kind\":\"result\",\"session\":\"s1\",\"call\":\"p1\",\"status\":\"failed\"}\n"
                .into(),
            call("s1", "p2"),
            call("s1", "p3"),
        ]
        .concat(),
    )
    .expect("write");
    let (policy, trace) = (policy.to_str().unwrap(), trace.to_str().unwrap());
    let decisions = |engine: Option<&str>| -> Vec<String> {
        let mut args = vec!["replay", "--policy", policy, trace, "--json"];
        if let Some(e) = engine {
            args.extend(["--engine", e]);
        }
        let o = agenra(&args);
        assert!(o.status.success(), "{o:?}");
        json_lines(&o)
            .iter()
            .filter(|r| r["kind"] == "call")
            .map(|r| {
                assert!(r.get("disagreement").is_none(), "{r}");
                format!(
                    "{} {}",
                    r["decision"].as_str().unwrap_or("?"),
                    r["rule"].as_str().unwrap_or("?")
                )
            })
            .collect()
    };
    let native = decisions(None);
    // s2 finds one unit left; s1's failure gives one back.
    assert_eq!(
        native,
        [
            "ALLOW daily",
            "ALLOW daily",
            "PAUSE fallback",
            "ALLOW daily",
            "PAUSE fallback"
        ]
    );
    assert_eq!(decisions(Some("smt")), native);
    assert_eq!(decisions(Some("both")), native);
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
    // `graph` draws every node of the approval's counterexample, the
    // context version the re-check read included, and its last hop.
    let o = agenra(&["graph", "--policy", policy, trace, "--format", "json"]);
    assert!(o.status.success(), "{o:?}");
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).expect("one JSON object");
    let names: Vec<&str> = v["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| n["name"].as_str().unwrap_or(""))
        .collect();
    let path: Vec<&str> = v["decision"]["counterexample"]["paths"][0]["path"]
        .as_array()
        .expect("a path")
        .iter()
        .map(|s| s["node"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(path, ["c2", "context@1", "c1"], "{v}");
    for node in &path {
        assert!(names.contains(node), "{node} is drawn: {names:?}");
    }
    let hot: Vec<&str> = v["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter(|n| n["violating"] == true)
        .map(|n| n["name"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(hot, ["c1", "c2", "context@1"], "{v}");
    let approval: Vec<&serde_json::Value> = v["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .filter(|e| e["trust"] == "approval")
        .collect();
    assert_eq!(approval.len(), 1, "{v}");
    assert_eq!(
        names[approval[0]["to"].as_u64().unwrap_or(99) as usize],
        "c1"
    );
    let o = agenra(&["graph", "--policy", policy, trace, "--format", "dot"]);
    assert!(
        stdout(&o).contains("label=\"re-checked at approval\", color=red"),
        "{o:?}"
    );
}
