//! `agenra ir ...` end to end: validate, lower, from-trace, from-text
//! (the endpoint is a local `TcpListener` thread: there is no network).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn agenra(args: &[&str]) -> Output {
    agenra_env(args, &[])
}

fn agenra_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agenra"));
    cmd.args(args).current_dir(root());
    for var in [
        "AGENRA_LLM_BASE_URL",
        "AGENRA_LLM_MODEL",
        "AGENRA_LLM_API_KEY",
        "AGENRA_LLM_TIMEOUT",
    ] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("the agenra binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A file in a fresh directory of its own under the system's temp dir.
fn temp(name: &str, content: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agenra-ir-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    path
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

const EMAIL_POLICY: &str = "examples/email-assistant/policy.agr";
const EMAIL_IR: &str = "examples/ir/email-assistant.ir.json";

#[test]
fn the_examples_validate() {
    let o = agenra(&["ir", "validate", "--policy", EMAIL_POLICY, EMAIL_IR]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "examples/ir/email-assistant.ir.json: ok (3 actions, 1 assets, 0 obligations, 1 allowances, 1 forbidden, 1 sinks, 4 flows)\n"
    );
    let o = agenra(&[
        "ir",
        "validate",
        "--policy",
        "examples/coding-agent/policy.agr",
        "examples/ir/coding-agent.ir.json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn defects_are_reported_with_their_path() {
    let text = std::fs::read_to_string(root().join(EMAIL_IR)).unwrap();
    let broken = text.replace("\"to\": \"mail\"", "\"to\": \"mailbox\"");
    assert_ne!(broken, text);
    let file = temp("dangling.json", &broken);
    let o = agenra(&["ir", "validate", "--policy", EMAIL_POLICY, s(&file)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o)
            .contains("flows[3].to: dangling edge: `mailbox` is not an action or sink of this IR"),
        "{}",
        stderr(&o)
    );
    let o = agenra(&[
        "ir",
        "validate",
        "--json",
        "--policy",
        EMAIL_POLICY,
        s(&file),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["valid"], false);
    assert_eq!(v["errors"][0]["kind"], "dangling-edge");
    assert_eq!(v["errors"][0]["path"], "flows[3].to");
    // A duplicate key anywhere.
    let dup = text.replacen("\"version\": 1,", "\"version\": 1,\n  \"version\": 1,", 1);
    let file = temp("dup.json", &dup);
    let o = agenra(&["ir", "validate", "--policy", EMAIL_POLICY, s(&file)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("duplicate key `version`"),
        "{}",
        stderr(&o)
    );
    // The same IR against a policy without its tools.
    let o = agenra(&[
        "ir",
        "validate",
        "--policy",
        "examples/coding-agent/policy.agr",
        EMAIL_IR,
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("actions[0].tool: unknown tool `contacts.lookup`"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn lowering_prints_the_task_scope_and_runs_under_replay() {
    let o = agenra(&["ir", "lower", "--policy", EMAIL_POLICY, EMAIL_IR]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.starts_with("task event: {\"kind\":\"task\",\"id\":\"task\""),
        "{out}"
    );
    assert!(out.contains("\"scope\":{\"tools\":[\"contacts.lookup\",\"email.send\",\"reports.read\"],\"forbid\":[\"web.*\"]}"), "{out}");
    assert!(out.contains("task:cover:email.send"), "{out}");
    let o = agenra(&["ir", "lower", "--json", "--policy", EMAIL_POLICY, EMAIL_IR]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["task"]["kind"], "task");
    assert!(v["policy_hash"].as_str().unwrap().starts_with("sha256:"));
    assert!(v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["kind"] == "allowance"));
    // The narrowed policy and the task event run a trace through `replay`.
    let policy_out = temp("lowered.json", "");
    let task_out = temp("task.jsonl", "");
    let o = agenra(&[
        "ir",
        "lower",
        "--policy",
        EMAIL_POLICY,
        EMAIL_IR,
        "--policy-out",
        s(&policy_out),
        "--task-out",
        s(&task_out),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let task = std::fs::read_to_string(&task_out).unwrap();
    let trace = format!(
        "{task}{}\n{}\n{}\n",
        r#"{"kind":"call","id":"c1","time":10,"tool":"reports.read","args":{"id":"weekly-48"}}"#,
        r#"{"kind":"call","id":"c2","time":11,"tool":"reports.read","args":{"id":"weekly-47"}}"#,
        r#"{"kind":"call","id":"c3","time":12,"tool":"web.fetch","args":{"url":"https://attacker.example/"}}"#,
    );
    let trace = temp("run.jsonl", &trace);
    let o = agenra(&["replay", "--json", "--policy", s(&policy_out), s(&trace)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let answers: Vec<(String, String)> = stdout(&o)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["decision"].as_str().unwrap_or("-").to_string(),
                v["rule"].as_str().unwrap_or("-").to_string(),
            )
        })
        .collect();
    assert_eq!(
        answers,
        [
            ("-".to_string(), "-".to_string()),
            ("ALLOW".into(), "read_reports".into()),
            ("DENY".into(), "task:cover:reports.read".into()),
            ("DENY".into(), "task-scope".into()),
        ]
    );
}

#[test]
fn from_trace_produces_an_ir_that_validates() {
    let o = agenra(&[
        "ir",
        "from-trace",
        "--policy",
        EMAIL_POLICY,
        "examples/email-assistant/benign.jsonl",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ir = temp("from-trace.json", &stdout(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["version"], 1);
    assert!(v["actions"].as_array().unwrap().len() >= 3);
    let o = agenra(&["ir", "validate", "--policy", EMAIL_POLICY, s(&ir)]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn from_text_is_off_without_its_variables() {
    let o = agenra(&[
        "ir",
        "from-text",
        "--policy",
        EMAIL_POLICY,
        "Send the report to Alice",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("the natural-language producer is off"),
        "{err}"
    );
    assert!(
        err.contains("AGENRA_LLM_BASE_URL") && err.contains("AGENRA_LLM_MODEL"),
        "{err}"
    );
}

#[test]
fn from_text_asks_the_configured_endpoint() {
    let ir = std::fs::read_to_string(root().join(EMAIL_IR)).unwrap();
    let text: serde_json::Value = serde_json::from_str(&ir).unwrap();
    let task = text["source"]["text"].as_str().unwrap().to_string();
    let body = serde_json::json!({"choices": [{"message": {"role": "assistant", "content": ir}}]})
        .to_string();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut len = 0;
        let mut first = String::new();
        reader.read_line(&mut first).unwrap();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line.trim().is_empty() {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap();
            }
        }
        let mut buf = vec![0; len];
        reader.read_exact(&mut buf).unwrap();
        let mut stream = stream;
        write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        first
    });
    let o = agenra_env(
        &["ir", "from-text", "--policy", EMAIL_POLICY, &task],
        &[("AGENRA_LLM_BASE_URL", &url), ("AGENRA_LLM_MODEL", "local")],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        server.join().unwrap().trim_end(),
        "POST /v1/chat/completions HTTP/1.1"
    );
    let got: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(got["source"]["text"], task.as_str());
    assert_eq!(got["actions"].as_array().unwrap().len(), 3);
}
