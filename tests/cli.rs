//! End-to-end tests of the `agenra` binary: golden outputs for the
//! examples, exit codes, and errors on bad input.
//!
//! Regenerate the golden files with `UPDATE_GOLDEN=1 cargo test --test cli`
//! and review the diff.

use std::path::{Path, PathBuf};
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
fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Compares `actual` with the golden file, or rewrites it under UPDATE_GOLDEN.
fn golden(name: &str, actual: &str) {
    let path = root().join("tests/golden").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).expect("write golden file");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "missing golden file {} (run with UPDATE_GOLDEN=1)",
            path.display()
        )
    });
    assert_eq!(actual, expected, "output differs from {}", path.display());
}

const EXAMPLES: [&str; 4] = [
    "banking-agent",
    "coding-agent",
    "email-assistant",
    "research-agent",
];

#[test]
fn examples_check_and_are_formatted() {
    for e in EXAMPLES {
        let policy = format!("examples/{e}/policy.agr");
        let out = agenra(&["check", &policy]);
        assert!(out.status.success(), "{e}: {}", stderr(&out));
        assert!(
            stderr(&out).is_empty(),
            "{e} has warnings: {}",
            stderr(&out)
        );
        let out = agenra(&["fmt", "--check", &policy]);
        assert!(
            out.status.success(),
            "{e} is not formatted: {}",
            stderr(&out)
        );
    }
}

#[test]
fn example_replays_match_golden_output() {
    for e in EXAMPLES {
        for trace in ["benign", "attack"] {
            let policy = format!("examples/{e}/policy.agr");
            let file = format!("examples/{e}/{trace}.jsonl");
            let human = agenra(&["replay", "--policy", &policy, &file]);
            assert!(human.status.success(), "{e}/{trace}: {}", stderr(&human));
            golden(&format!("{e}-{trace}.txt"), &stdout(&human));
            let json = agenra(&["replay", "--policy", &policy, &file, "--json"]);
            assert!(json.status.success());
            golden(&format!("{e}-{trace}.jsonl"), &stdout(&json));
        }
    }
}

#[test]
fn json_records_have_the_documented_fields() {
    let out = agenra(&[
        "replay",
        "--policy",
        "examples/coding-agent/policy.agr",
        "examples/coding-agent/attack.jsonl",
        "--json",
    ]);
    let lines: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    assert_eq!(lines.len(), 14);
    for (i, r) in lines.iter().enumerate() {
        assert_eq!(r["seq"], i as u64 + 1);
        for field in [
            "kind",
            "decision",
            "rule",
            "reason",
            "path",
            "policy_hash",
            "ledger_hash",
        ] {
            assert!(r.get(field).is_some(), "record {i} lacks {field}");
        }
        assert!(r["policy_hash"].as_str().unwrap().starts_with("sha256:"));
    }
    // Results carry no decision; the credential exfiltration carries a path.
    assert!(lines[1]["decision"].is_null());
    assert_eq!(lines[5]["decision"], "DENY");
    assert_eq!(lines[5]["rule"], "no_secrets_out");
    let path: Vec<u64> = lines[5]["path"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(path.first(), Some(&3), "the path starts at the .env read");
    assert_eq!(path.last(), Some(&lines[5]["node"].as_u64().unwrap()));
}

#[test]
fn explain_matches_golden_output() {
    let out = agenra(&[
        "explain",
        "--policy",
        "examples/email-assistant/policy.agr",
        "examples/email-assistant/attack.jsonl",
        "--seq",
        "7",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    golden("email-assistant-attack-explain-7.txt", &stdout(&out));
}

#[test]
fn explain_rejects_out_of_range_seq() {
    let out = agenra(&[
        "explain",
        "--policy",
        "examples/coding-agent/policy.agr",
        "examples/coding-agent/benign.jsonl",
        "--seq",
        "99",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("--seq 99 is out of range"),
        "{}",
        stderr(&out)
    );
}

/// Each call gets a directory of its own: tests run in parallel and two of
/// them writing the same file name (`messy.agr`) once raced each other.
fn temp_file(name: &str, content: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("agenra-cli-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, content).expect("write temp file");
    path
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn check_reports_errors_with_line_column_and_caret() {
    let bad = temp_file(
        "bad.agr",
        "tool fs.read(path: string);\ngrant r: fs.raed quota 1;\n",
    );
    let out = agenra(&["check", s(&bad)]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("bad.agr:2:10: error: unknown tool `fs.raed`"),
        "{err}"
    );
    assert!(err.contains("did you mean `fs.read`"), "{err}");
    assert!(err.contains("^^^^^^^"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn check_reports_output_field_errors_with_line_column() {
    let bad = temp_file(
        "fields.agr",
        "tool bank() {\n  output tx.iban: <public, {}, trusted>;\n  output tx.iban: nosuch;\n}\n",
    );
    let out = agenra(&["check", s(&bad)]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("fields.agr:3:10: error: output field `tx.iban` of tool `bank` has its label declared twice"),
        "{err}"
    );
    assert!(err.contains("fields.agr:3:19: error: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn replay_stops_with_a_clear_error_on_bad_events() {
    let policy = "examples/coding-agent/policy.agr";
    let cases = [
        ("not-json.jsonl", "{\"kind\":\"call\",\n", "not-json.jsonl:1:"),
        ("no-kind.jsonl", "{\"id\":\"c1\"}\n", "event has no `kind`"),
        ("bad-kind.jsonl", "{\"kind\":\"cal\",\"id\":\"c1\"}\n", "unknown event kind `cal`"),
        (
            "typo.jsonl",
            "{\"kind\":\"call\",\"id\":\"c1\",\"time\":1,\"tool\":\"git.commit\",\"args\":{\"message\":\"m\"},\"linage\":{}}\n",
            "unknown field `linage`",
        ),
        ("unknown-approve.jsonl", "{\"kind\":\"approve\",\"call\":\"nope\"}\n", "unknown call `nope`"),
        (
            "dup.jsonl",
            "{\"kind\":\"call\",\"id\":\"c1\",\"time\":1,\"tool\":\"tests.run\",\"args\":{\"suite\":\"a\"}}\n{\"kind\":\"call\",\"id\":\"c1\",\"time\":2,\"tool\":\"tests.run\",\"args\":{\"suite\":\"a\"}}\n",
            "dup.jsonl:2: call id `c1` is already used",
        ),
        (
            "time.jsonl",
            "{\"kind\":\"call\",\"id\":\"c1\",\"time\":5,\"tool\":\"tests.run\",\"args\":{\"suite\":\"a\"}}\n{\"kind\":\"call\",\"id\":\"c2\",\"time\":4,\"tool\":\"tests.run\",\"args\":{\"suite\":\"a\"}}\n",
            "time 4 is before the previous event's time 5",
        ),
    ];
    for (name, content, expected) in cases {
        let trace = temp_file(name, content);
        let out = agenra(&["replay", "--policy", policy, s(&trace)]);
        assert_eq!(out.status.code(), Some(1), "{name}: {}", stderr(&out));
        assert!(stderr(&out).contains(expected), "{name}: {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"), "{name}");
    }
}

#[test]
fn malformed_calls_are_denied_naming_the_field() {
    let trace = temp_file(
        "malformed.jsonl",
        concat!(
            "{\"kind\":\"call\",\"id\":\"c1\",\"time\":1,\"tool\":\"fs.delete\",\"args\":{}}\n",
            "{\"kind\":\"call\",\"id\":\"c2\",\"time\":1,\"tool\":\"fs.read\",\"args\":{}}\n",
            "{\"kind\":\"call\",\"id\":\"c3\",\"time\":1,\"tool\":\"fs.read\",\"args\":{\"path\":7}}\n",
            "{\"kind\":\"call\",\"id\":\"c4\",\"time\":1,\"tool\":\"fs.read\",\"args\":{\"path\":\"/repo/a\",\"mode\":\"r\"}}\n",
            "{\"kind\":\"call\",\"id\":\"c5\",\"time\":1,\"agent\":\"ghost\",\"tool\":\"fs.read\",\"args\":{\"path\":\"/repo/a\"}}\n",
            "{\"kind\":\"call\",\"id\":\"c6\",\"time\":1,\"tool\":\"fs.read\",\"args\":{\"path\":\"/repo/a\"},\"lineage\":{\"path\":[\"c99\"]}}\n",
            "{\"kind\":\"result\",\"call\":\"c1\",\"status\":\"succeeded\"}\n",
        ),
    );
    let out = agenra(&[
        "replay",
        "--policy",
        "examples/coding-agent/policy.agr",
        s(&trace),
        "--json",
    ]);
    let records: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let reasons: Vec<&str> = records
        .iter()
        .map(|r| r["reason"].as_str().unwrap())
        .collect();
    assert_eq!(
        reasons,
        [
            "unknown tool `fs.delete`",
            "missing argument `path` of `fs.read`",
            "argument `path` of `fs.read` must be string, got int",
            "`fs.read` has no parameter `mode`",
            "unknown agent `ghost`",
            "lineage of `path` names unknown call `c99`",
        ]
    );
    assert!(records
        .iter()
        .all(|r| r["decision"] == "DENY" && r["rule"] == "well-formed"));
    // A result for a denied call is an error, after the six records.
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("call `c1` is denied, so it cannot take a result"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn fmt_rewrites_and_check_detects_unformatted_files() {
    let messy = temp_file(
        "messy.agr",
        "tool   a.b( x :string ) ;grant g : a.b quota   2;\n",
    );
    let out = agenra(&["fmt", "--check", s(&messy)]);
    assert_eq!(out.status.code(), Some(1));
    let out = agenra(&["fmt", s(&messy)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = agenra(&["fmt", "--check", s(&messy)]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn compile_prints_json_and_a_stable_hash() {
    let a = agenra(&["compile", "examples/research-agent/policy.agr"]);
    let b = agenra(&["compile", "examples/research-agent/policy.agr"]);
    assert!(a.status.success());
    assert_eq!(stdout(&a), stdout(&b));
    assert_eq!(stderr(&a), stderr(&b));
    assert!(stderr(&a).starts_with("sha256:"));
    let policy: serde_json::Value = serde_json::from_str(&stdout(&a)).expect("JSON");
    assert_eq!(policy["name"], "research-agent");
    // The replay's policy hash is the same content hash.
    let replay = agenra(&[
        "replay",
        "--policy",
        "examples/research-agent/policy.agr",
        "examples/research-agent/benign.jsonl",
        "--json",
    ]);
    let first: serde_json::Value =
        serde_json::from_str(stdout(&replay).lines().next().unwrap()).unwrap();
    assert_eq!(first["policy_hash"].as_str().unwrap(), stderr(&a).trim());
}

#[test]
fn missing_files_are_errors_not_panics() {
    for args in [
        vec!["check", "no/such.agr"],
        vec!["replay", "--policy", "no/such.agr", "x.jsonl"],
        vec![
            "replay",
            "--policy",
            "examples/coding-agent/policy.agr",
            "no/such.jsonl",
        ],
    ] {
        let out = agenra(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            stderr(&out).contains("cannot read"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn bench_monitor_json_has_the_figures() {
    let out = agenra(&["bench", "monitor", "--json", "--samples", "200"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r: serde_json::Value = serde_json::from_str(stdout(&out).trim()).expect("one JSON object");
    for field in ["p50_ns", "p95_ns", "p99_ns", "bytes_per_event"] {
        assert!(r[field].as_f64().is_some_and(|v| v > 0.0), "{field}: {r}");
    }
    assert!(r["p50_ns"].as_u64() <= r["p95_ns"].as_u64());
    assert!(r["p95_ns"].as_u64() <= r["p99_ns"].as_u64());
}

#[test]
fn the_readme_shows_the_current_output() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README");
    let golden = std::fs::read_to_string(root().join("tests/golden/email-assistant-attack.txt"))
        .expect("golden");
    assert!(
        readme.contains(&golden),
        "README's replay example is out of date"
    );
}

#[test]
fn sessions_have_their_own_ledgers_and_unknown_sessions_are_errors() {
    let trace = temp_file(
        "sessions.jsonl",
        concat!(
            "{\"kind\":\"call\",\"session\":\"s1\",\"id\":\"c1\",\"time\":1,\"tool\":\"git.commit\",\"args\":{\"message\":\"m\"}}\n",
            "{\"kind\":\"call\",\"session\":\"s2\",\"id\":\"c1\",\"time\":1,\"tool\":\"tests.run\",\"args\":{\"suite\":\"a\"}}\n",
            "{\"kind\":\"result\",\"session\":\"s2\",\"call\":\"c1\",\"status\":\"succeeded\",\"output\":{\"exit_code\":0}}\n",
            "{\"kind\":\"call\",\"session\":\"s2\",\"id\":\"c2\",\"time\":2,\"tool\":\"git.commit\",\"args\":{\"message\":\"m\"}}\n",
            "{\"kind\":\"call\",\"session\":\"s1\",\"id\":\"c2\",\"time\":2,\"tool\":\"git.commit\",\"args\":{\"message\":\"m\"}}\n",
            "{\"kind\":\"approve\",\"session\":\"s3\",\"call\":\"c1\"}\n",
        ),
    );
    let out = agenra(&[
        "replay",
        "--policy",
        "examples/coding-agent/policy.agr",
        s(&trace),
        "--json",
    ]);
    let records: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let decisions: Vec<(&str, &str)> = records
        .iter()
        .filter(|r| r["kind"] == "call")
        .map(|r| {
            (
                r["session"].as_str().unwrap(),
                r["decision"].as_str().unwrap(),
            )
        })
        .collect();
    // The tests passed in s2 only: s1 still may not commit.
    assert_eq!(
        decisions,
        [
            ("s1", "DENY"),
            ("s2", "ALLOW"),
            ("s2", "ALLOW"),
            ("s1", "DENY")
        ]
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("unknown session `s3`"),
        "{}",
        stderr(&out)
    );
}

/// `agenra monitor` as an agent drives it: one event written, its answer
/// read (with a timeout, so a missing flush fails instead of hanging), then
/// the next event.
struct Sidecar {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    answers: std::sync::mpsc::Receiver<String>,
}

impl Sidecar {
    fn start(args: &[&str]) -> Sidecar {
        use std::io::BufRead;
        use std::process::Stdio;
        let mut child = Command::new(env!("CARGO_BIN_EXE_agenra"))
            .arg("monitor")
            .args(args)
            .current_dir(root())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the agenra binary runs");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        let (tx, answers) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Sidecar {
            child,
            stdin,
            answers,
        }
    }

    fn send(&mut self, line: &str) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{line}").expect("write an event");
        stdin.flush().expect("flush");
    }

    /// The next answer line; panics if none comes within 30 seconds.
    fn answer(&self) -> serde_json::Value {
        let line = self
            .answers
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("an answer line while stdin is still open (is each answer flushed?)");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON: {line}: {e}"))
    }

    /// Writes one event and waits for its answer.
    fn ask(&mut self, line: &str) -> serde_json::Value {
        self.send(line);
        self.answer()
    }

    /// Closes stdin; returns the exit code, the remaining answer lines and stderr.
    fn finish(mut self) -> (Option<i32>, Vec<String>, String) {
        use std::io::Read;
        drop(self.stdin.take());
        let rest: Vec<String> = self.answers.iter().collect();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        let status = self.child.wait().expect("monitor exits");
        (status.code(), rest, err)
    }
}

#[test]
fn monitor_answers_each_event_before_the_next_is_written() {
    let mut agent = Sidecar::start(&["--policy", "examples/coding-agent/policy.agr"]);
    let write = agent.ask(r#"{"kind":"call","id":"w1","time":1,"tool":"fs.write","args":{"path":"/repo/src/a.rs","content":"x"}}"#);
    assert_eq!(write["seq"], 1);
    assert_eq!(write["decision"], "ALLOW", "{write}");
    let done = agent.ask(r#"{"kind":"result","call":"w1","status":"succeeded"}"#);
    assert_eq!(done["seq"], 2);
    assert!(done["decision"].is_null());
    // No tests since the write: the commit is denied.
    let commit = agent
        .ask(r#"{"kind":"call","id":"g1","time":2,"tool":"git.commit","args":{"message":"m"}}"#);
    assert_eq!(commit["decision"], "DENY", "{commit}");
    assert_eq!(commit["rule"], "tests_before_commit");
    // The agent runs the tests only because the answer said ALLOW, reports
    // them, and then the commit goes through.
    let tests = agent
        .ask(r#"{"kind":"call","id":"t1","time":3,"tool":"tests.run","args":{"suite":"all"}}"#);
    assert_eq!(tests["decision"], "ALLOW", "{tests}");
    let passed =
        agent.ask(r#"{"kind":"result","call":"t1","status":"succeeded","output":{"exit_code":0}}"#);
    assert_eq!(passed["seq"], 5);
    let commit = agent
        .ask(r#"{"kind":"call","id":"g2","time":4,"tool":"git.commit","args":{"message":"m"}}"#);
    assert_eq!(commit["seq"], 6);
    assert_eq!(commit["decision"], "ALLOW", "{commit}");
    assert_eq!(commit["ledger_hash"].as_str().map(|h| h.len()), Some(71));
    let (code, rest, err) = agent.finish();
    assert_eq!(code, Some(0), "{err}");
    assert!(rest.is_empty(), "{rest:?}");
}

#[test]
fn monitor_reports_bad_lines_and_goes_on() {
    let trace_out = std::env::temp_dir()
        .join(format!("agenra-cli-{}", std::process::id()))
        .join("monitor-trace-out.jsonl");
    std::fs::create_dir_all(trace_out.parent().unwrap()).unwrap();
    let _ = std::fs::remove_file(&trace_out);
    let mut agent = Sidecar::start(&[
        "--policy",
        "examples/coding-agent/policy.agr",
        "--trace-out",
        s(&trace_out),
    ]);
    let call = r#"{"kind":"call","id":"c1","time":5,"tool":"tests.run","args":{"suite":"a"}}"#;
    let mut accepted = vec![];
    let a = agent.ask(call); // line 1
    assert_eq!(
        (a["seq"].as_u64(), a["decision"].as_str()),
        (Some(1), Some("ALLOW"))
    );
    accepted.push(a);
    // Blank and comment lines get no answer but count as lines.
    agent.send(""); // line 2
    agent.send("// a comment"); // line 3
    let errors = [
        ("{\"kind\":\"call\",", "invalid event"), // line 4
        (r#"{"kind":"cal","id":"c2"}"#, "unknown event kind `cal`"), // line 5
        (call, "call id `c1` is already used"),   // line 6
        (r#"{"kind":"approve","call":"nope"}"#, "unknown call `nope`"), // line 7
        (r#"{"kind":"approve","call":"c1"}"#, "call `c1` is"), // line 8: wrong state
        (
            r#"{"kind":"result","session":"s9","call":"c1","status":"succeeded"}"#,
            "unknown session `s9`",
        ), // line 9
        (
            r#"{"kind":"call","id":"c3","time":4,"tool":"tests.run","args":{"suite":"a"}}"#,
            "time 4 is before the previous event's time 5",
        ), // line 10
    ];
    for (i, (line, message)) in errors.iter().enumerate() {
        let e = agent.ask(line);
        let keys: Vec<&str> = e.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys.len(), 3, "{e}");
        assert_eq!(e["seq"], 2, "an error takes no seq: {e}");
        assert_eq!(e["line"], i + 4, "{e}");
        assert!(
            e["error"].as_str().unwrap().contains(message),
            "{e} should say {message}"
        );
    }
    // The failed events changed nothing: c1 still takes its result, and the
    // next events get decisions numbered on from 2.
    let r =
        agent.ask(r#"{"kind":"result","call":"c1","status":"succeeded","output":{"exit_code":0}}"#); // line 11
    assert_eq!(
        (r["seq"].as_u64(), r["kind"].as_str()),
        (Some(2), Some("result")),
        "{r}"
    );
    accepted.push(r);
    let c = agent
        .ask(r#"{"kind":"call","id":"c3","time":6,"tool":"git.commit","args":{"message":"m"}}"#); // line 12
    assert_eq!(
        (c["seq"].as_u64(), c["decision"].as_str()),
        (Some(3), Some("ALLOW")),
        "{c}"
    );
    accepted.push(c);
    // Not UTF-8: an error too.
    {
        use std::io::Write;
        let stdin = agent.stdin.as_mut().unwrap();
        stdin.write_all(b"{\"kind\":\"\xff\"}\n").unwrap();
        stdin.flush().unwrap();
    }
    let e = agent.answer(); // line 13
    assert_eq!(
        (e["seq"].as_u64(), e["line"].as_u64()),
        (Some(4), Some(13)),
        "{e}"
    );
    assert!(e["error"].as_str().unwrap().contains("UTF-8"), "{e}");
    let (code, rest, err) = agent.finish();
    assert_eq!(code, Some(0), "{err}");
    assert!(rest.is_empty(), "{rest:?}");
    assert!(err.is_empty(), "{err}");
    // The trace file holds the accepted events and replays to the same records.
    let saved = std::fs::read_to_string(&trace_out).unwrap();
    assert_eq!(saved.lines().count(), 3, "{saved}");
    let out = agenra(&[
        "replay",
        "--policy",
        "examples/coding-agent/policy.agr",
        s(&trace_out),
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let replayed: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(replayed, accepted);
}

#[test]
fn monitor_output_equals_replay_json() {
    use std::io::Write;
    use std::process::Stdio;
    for e in EXAMPLES {
        for trace in ["benign", "attack"] {
            let policy = format!("examples/{e}/policy.agr");
            let file = format!("examples/{e}/{trace}.jsonl");
            let mut child = Command::new(env!("CARGO_BIN_EXE_agenra"))
                .args(["monitor", "--policy", &policy])
                .current_dir(root())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("the agenra binary runs");
            let text = std::fs::read(root().join(&file)).unwrap();
            let mut stdin = child.stdin.take().unwrap();
            let writer = std::thread::spawn(move || stdin.write_all(&text));
            let out = child.wait_with_output().unwrap();
            writer.join().unwrap().unwrap();
            assert_eq!(out.status.code(), Some(0), "{e}/{trace}: {}", stderr(&out));
            let replay = agenra(&["replay", "--policy", &policy, &file, "--json"]);
            assert!(replay.status.success());
            let (m, r) = (stdout(&out), stdout(&replay));
            assert_eq!(m.lines().count(), r.lines().count(), "{e}/{trace}");
            for (a, b) in m.lines().zip(r.lines()) {
                assert_eq!(a, b, "{e}/{trace}");
            }
        }
    }
}

/// Ids and names with control, bidirectional or invisible characters are
/// refused where events come in (`docs/events.md`), naming the field, the
/// character and its byte: `c4<U+202E>gnp.exe` would display as
/// `c4exe.png`, and `x\nfake ALLOW` would forge a table line.
#[test]
fn ids_with_control_or_bidi_characters_are_refused_at_input() {
    let ok = r#"{"kind":"call","id":"c1","time":1,"tool":"tests.run","args":{"suite":"a"}}"#;
    let cases = [
        (
            r#"{"kind":"call","id":"c4\u202egnp.exe","time":1,"tool":"tests.run","args":{"suite":"a"}}"#,
            "call.id contains U+202E (RIGHT-TO-LEFT OVERRIDE) at byte 2",
        ),
        (
            r#"{"kind":"call","id":"c\u0000","time":1,"tool":"tests.run","args":{"suite":"a"}}"#,
            "call.id contains U+0000 (NULL) at byte 1",
        ),
        (
            r#"{"kind":"call","id":"x\nfake ALLOW","time":1,"tool":"tests.run","args":{"suite":"a"}}"#,
            "call.id contains U+000A (LINE FEED) at byte 1",
        ),
        (
            r#"{"kind":"call","session":"s\r1","id":"c2","time":1,"tool":"tests.run","args":{}}"#,
            "call.session contains U+000D (CARRIAGE RETURN) at byte 1",
        ),
        (
            r#"{"kind":"call","id":"c2","time":1,"tool":"\u001b[2J","args":{}}"#,
            "call.tool contains U+001B (ESCAPE) at byte 0",
        ),
        (
            r#"{"kind":"call","id":"c2","time":1,"tool":"tests.run","agent":"ma\u200bin","args":{}}"#,
            "call.agent contains U+200B (ZERO WIDTH SPACE) at byte 2",
        ),
        (
            r#"{"kind":"call","id":"c2","time":1,"tool":"tests.run","args":{"suite":"a"},"lineage":{"suite":["c\u2066"]}}"#,
            "call.lineage.suite[0] contains U+2066 (LEFT-TO-RIGHT ISOLATE) at byte 1",
        ),
        (
            r#"{"kind":"approve","call":"a\nb\u001b"}"#,
            "approve.call contains U+000A (LINE FEED) at byte 1",
        ),
        (
            r#"{"kind":"result","call":"c1\u202e","status":"succeeded"}"#,
            "result.call contains U+202E (RIGHT-TO-LEFT OVERRIDE) at byte 2",
        ),
        (
            r#"{"kind":"task","id":"t\u0000","text":"x"}"#,
            "task.id contains U+0000 (NULL) at byte 1",
        ),
    ];
    for (i, (line, message)) in cases.iter().enumerate() {
        // `replay` stops at the line, with the message on one line of stderr.
        let trace = temp_file(&format!("ids-{i}.jsonl"), &format!("{ok}\n{line}\n"));
        let out = agenra(&[
            "replay",
            "--policy",
            "examples/coding-agent/policy.agr",
            s(&trace),
        ]);
        assert_eq!(out.status.code(), Some(1), "{line}");
        let err = stderr(&out);
        assert!(
            err.contains(&format!("ids-{i}.jsonl:2:")) && err.contains(message),
            "{line}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err:?}");
        let all = format!("{}{err}", stdout(&out));
        assert!(
            !all.chars()
                .any(|c| c != '\n' && agenra_core::ident::is_refused(c)),
            "{all:?}"
        );
    }
    // `monitor` answers each with an error and goes on.
    let mut agent = Sidecar::start(&["--policy", "examples/coding-agent/policy.agr"]);
    assert_eq!(agent.ask(ok)["decision"], "ALLOW");
    for (i, (line, message)) in cases.iter().enumerate() {
        let e = agent.ask(line);
        assert_eq!(
            (e["seq"].as_u64(), e["line"].as_u64()),
            (Some(2), Some(i as u64 + 2)),
            "{e}"
        );
        assert!(e["error"].as_str().unwrap().contains(message), "{e}");
    }
    let next = r#"{"kind":"call","id":"c2","time":2,"tool":"tests.run","args":{"suite":"a"}}"#;
    assert_eq!(agent.ask(next)["seq"], 2);
    // Argument values, outputs and task texts are data: they may hold anything.
    let data = temp_file(
        "ids-data.jsonl",
        concat!(
            "{\"kind\":\"task\",\"id\":\"t1\",\"text\":\"pay \\u202e\\n\\u0000\"}\n",
            "{\"kind\":\"call\",\"id\":\"c1\",\"time\":1,\"tool\":\"tests.run\",\"args\":{\"suite\":\"a\\n\\u202e\"}}\n",
            "{\"kind\":\"result\",\"call\":\"c1\",\"status\":\"succeeded\",\"output\":{\"log\":\"\\u001b[31m\\u0000\"}}\n",
        ),
    );
    let out = agenra(&[
        "replay",
        "--policy",
        "examples/coding-agent/policy.agr",
        s(&data),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn human_table_columns_fit_long_names() {
    let long = "a-call-id-much-longer-than-any-column-was";
    let trace = temp_file(
        "long.jsonl",
        &format!(
            concat!(
                "{{\"kind\":\"call\",\"session\":\"a-long-session\",\"id\":\"{long}\",\"time\":1,\"tool\":\"fs.read\",\"args\":{{\"path\":\"/repo/.env\"}}}}\n",
                "{{\"kind\":\"result\",\"session\":\"a-long-session\",\"call\":\"{long}\",\"status\":\"succeeded\"}}\n",
                "{{\"kind\":\"call\",\"session\":\"a-long-session\",\"id\":\"c2\",\"time\":2,\"tool\":\"http.get\",\"args\":{{\"url\":\"https://docs.rs/x\"}}}}\n",
                "{{\"kind\":\"call\",\"id\":\"c1\",\"time\":1,\"tool\":\"tests.run\",\"args\":{{\"suite\":\"a\"}}}}\n",
            ),
            long = long
        ),
    );
    let out = agenra(&[
        "replay",
        "--policy",
        "examples/coding-agent/policy.agr",
        s(&trace),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    let header = lines[1];
    let col = |title: &str| header.find(title).unwrap_or_else(|| panic!("{title}"));
    let rows: Vec<&str> = lines[2..lines.len() - 1]
        .iter()
        .copied()
        .filter(|l| !l.trim_start().starts_with("path:"))
        .collect();
    assert_eq!(rows.len(), 4, "{text}");
    let answers = ["ALLOW", "-", "DENY", "ALLOW"];
    for (row, answer) in rows.iter().zip(answers) {
        assert!(row[col("answer")..].starts_with(answer), "{text}");
        assert!(
            row[col("call")..].starts_with("a-long-session/")
                || row[col("call")..].starts_with("c1 "),
            "{text}"
        );
        assert_eq!(&row[col("tool") - 2..col("tool")], "  ", "{text}");
        assert_eq!(&row[col("rule") - 2..col("rule")], "  ", "{text}");
        assert_eq!(&row[col("reason") - 2..col("reason")], "  ", "{text}");
        assert_ne!(&row[col("reason")..col("reason") + 1], " ", "{text}");
    }
    // The flow denial's path line sits under the call column.
    let path = lines
        .iter()
        .find(|l| l.trim_start().starts_with("path:"))
        .expect("a path line");
    assert_eq!(path.find("path:"), Some(col("call")), "{text}");
    assert!(path.contains(long), "{text}");
}

#[test]
fn bench_monitor_wide_workload_prints_the_standard_keys() {
    let report = |args: &[&str]| -> serde_json::Map<String, serde_json::Value> {
        let out = agenra(args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        let text = stdout(&out);
        assert_eq!(text.lines().count(), 1, "{args:?}: {text}");
        let r: serde_json::Value = serde_json::from_str(text.trim()).expect("one JSON object");
        let r = r.as_object().expect("a JSON object").clone();
        assert!(r["p50_ns"].as_u64().is_some_and(|v| v > 0), "{r:?}");
        assert!(r["p50_ns"].as_u64() <= r["p95_ns"].as_u64(), "{r:?}");
        assert!(r["p95_ns"].as_u64() <= r["p99_ns"].as_u64(), "{r:?}");
        assert!(
            r["bytes_per_event"].as_f64().is_some_and(|v| v > 0.0),
            "{r:?}"
        );
        assert_eq!(r["samples"], 50, "{r:?}");
        r
    };
    let standard = report(&["bench", "monitor", "--json", "--samples", "50"]);
    let wide = report(&[
        "bench",
        "monitor",
        "--workload",
        "wide",
        "--json",
        "--samples",
        "50",
    ]);
    assert_eq!(
        standard.keys().collect::<Vec<_>>(),
        wide.keys().collect::<Vec<_>>()
    );
    assert_eq!(standard["workload"], "standard");
    assert_eq!(wide["workload"], "wide");
    for key in ["grants", "flow_rules", "path_rules", "preloaded_events"] {
        assert_eq!(standard[key], wide[key], "{key}");
    }
}

#[test]
fn check_and_replay_read_compiled_policies_and_reject_corrupt_ones() {
    let out = agenra(&["compile", "examples/email-assistant/policy.agr"]);
    assert!(out.status.success());
    let json = stdout(&out);
    let good = temp_file("compiled.json", &json);
    let out = agenra(&["check", good.to_str().expect("utf-8 path")]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains(": ok ("), "{}", stdout(&out));
    let out = agenra(&[
        "replay",
        "--policy",
        good.to_str().expect("utf-8 path"),
        "examples/email-assistant/attack.jsonl",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        std::fs::read_to_string(root().join("tests/golden/email-assistant-attack.txt"))
            .expect("golden")
    );
    let mut policy: serde_json::Value = serde_json::from_str(&json).expect("json");
    let mut unknown = policy.clone();
    unknown["tools"][0]["colour"] = "red".into();
    let tool = policy["tools"][0].clone();
    policy["tools"].as_array_mut().expect("tools").push(tool);
    for (name, bad, message) in [
        ("unknown.json", unknown, "unknown field `colour`"),
        ("dup.json", policy, "is declared twice"),
    ] {
        let file = temp_file(name, &bad.to_string());
        let out = agenra(&["check", file.to_str().expect("utf-8 path")]);
        assert!(!out.status.success());
        assert!(stderr(&out).contains(message), "{name}: {}", stderr(&out));
    }
}

#[test]
fn a_closed_output_ends_replay_quietly() {
    use std::io::{BufRead, BufReader};
    let trace: String = (0..20_000)
        .map(|i| {
            format!(
                "{{\"kind\":\"call\",\"id\":\"c{i}\",\"time\":{i},\"tool\":\"tests.run\",\"args\":{{\"suite\":\"a\"}}}}\n"
            )
        })
        .collect();
    let file = temp_file("long.jsonl", &trace);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_agenra"))
        .args([
            "replay",
            "--json",
            "--policy",
            "examples/coding-agent/policy.agr",
            file.to_str().expect("utf-8 path"),
        ])
        .current_dir(root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut first = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut first)
        .expect("one line");
    assert!(first.starts_with("{\"seq\":1,"), "{first}");
    // The reader is gone now (like `| head -1`).
    let out = child.wait_with_output().expect("exit");
    assert!(out.status.success(), "{:?}: {}", out.status, stderr(&out));
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
}

#[test]
fn check_counts_call_rules_among_the_rules() {
    let policy = temp_file(
        "call-rules.agr",
        "tool account.update(field: string);\n\
         grant edit: account.update quota unlimited;\n\
         deny call keep: account.update when field in [\"password\"];\n",
    );
    let out = agenra(&["check", s(&policy)]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("(1 tools, 1 grants, 1 rules)"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn fmt_reports_every_broken_file_and_still_checks_the_others() {
    let bad = temp_file("bad.agr", "grant g nope;\n");
    let messy = temp_file("messy.agr", "tool   t();\n");
    let out = agenra(&[
        "fmt",
        "--check",
        bad.to_str().expect("utf-8 path"),
        messy.to_str().expect("utf-8 path"),
        "examples/coding-agent/policy.agr",
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("bad.agr:1:9: error: expected `:`"), "{err}");
    assert!(err.contains("messy.agr: not formatted"), "{err}");
    assert!(!err.contains("coding-agent"), "{err}");
}

#[test]
fn bench_scale_measures_one_thing_per_process() {
    let out = agenra(&["bench", "scale", "--one", "deny", "--events", "140"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let m: serde_json::Value = serde_json::from_str(stdout(&out).trim()).expect("one JSON object");
    assert_eq!(m["name"], "deny");
    assert_eq!(m["events"], 140);
    assert!(m["peak_rss_mb"].as_f64().is_some_and(|v| v > 0.0), "{m}");
    let out = agenra(&["bench", "scale", "--one", "nope"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("unknown measurement `nope`"),
        "{}",
        stderr(&out)
    );
}

/// A long trace is printed block by block: one header, every event once,
/// a summary that counts them all, and columns that never get narrower.
#[test]
fn human_replay_of_a_long_trace_streams_in_blocks() {
    let mut text = String::new();
    let n = 9_000;
    for i in 1..=n {
        // Ids grow longer after the first block: later blocks widen columns.
        let id = if i > 5_000 {
            format!("call-with-a-longer-id-{i}")
        } else {
            format!("c{i}")
        };
        text.push_str(&format!(
            "{{\"kind\":\"call\",\"id\":\"{id}\",\"time\":{i},\"tool\":\"tests.run\",\"args\":{{\"suite\":\"a\"}}}}\n"
        ));
    }
    let trace = temp_file("long-trace.jsonl", &text);
    let out = agenra(&[
        "replay",
        "--policy",
        "examples/coding-agent/policy.agr",
        s(&trace),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("policy "), "{}", lines[0]);
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.trim_start().starts_with("seq "))
            .count(),
        1,
        "one header"
    );
    let rows = &lines[2..lines.len() - 1];
    assert_eq!(rows.len(), n, "every event once");
    for (i, row) in rows.iter().enumerate() {
        assert!(
            row.trim_start().starts_with(&format!("{} ", i + 1)),
            "row {i}: {row}"
        );
    }
    let summary = lines[lines.len() - 1];
    assert!(summary.starts_with(&format!("{n} events: ")), "{summary}");
    // The answer column of the last block sits right of the first's.
    let answer = |row: &str| row.find("ALLOW").or_else(|| row.find("DENY"));
    assert!(
        answer(rows[n - 1]) >= answer(rows[0]),
        "{}\n{}",
        rows[0],
        rows[n - 1]
    );
}

/// `replay` prints the first block of its table while the trace is still
/// being written: it streams instead of reading the whole trace first.
#[test]
fn human_replay_prints_before_the_trace_ends() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_agenra"))
        .args([
            "replay",
            "--policy",
            "examples/coding-agent/policy.agr",
            "/dev/stdin",
        ])
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the agenra binary runs");
    // Output is read from the start: a pipe holds only 64 KB.
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        for _ in 0..4_000 {
            if lines.next().is_none() {
                return;
            }
        }
        let _ = tx.send(());
        for _ in lines {}
    });
    let mut input = child.stdin.take().expect("stdin");
    for i in 1..=5_000 {
        writeln!(
            input,
            "{{\"kind\":\"call\",\"id\":\"c{i}\",\"time\":{i},\"tool\":\"tests.run\",\"args\":{{\"suite\":\"a\"}}}}"
        )
        .expect("write an event");
    }
    input.flush().expect("flush");
    // The trace is still open: only a streaming replay can have printed the
    // first block (4,096 rows) by now.
    let printed = rx.recv_timeout(std::time::Duration::from_secs(60));
    drop(input);
    let status = child.wait().expect("replay ends");
    assert!(printed.is_ok(), "no output before the trace ended");
    assert!(status.success());
}
