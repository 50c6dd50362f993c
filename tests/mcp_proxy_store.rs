//! `agenra mcp-proxy --store`: the proxy's session is the gateway's, on
//! the durable store. A proxy killed with SIGKILL and restarted on the same
//! store resumes its session: a `quota 1` unit spent before the kill stays
//! spent, a refund stays refunded, a call left running is reported
//! `unknown` (its unit stays spent), a call left waiting for approval is
//! rejected, and call ids go on past the ones the store holds. An approval
//! through the approval endpoints is an audit record, and `agenra audit
//! verify --store` accepts every log the proxy wrote. A bad `--store` is a
//! clear error. The PostgreSQL case needs `AGENRA_TEST_PG`
//! (`scripts/with-postgres`); without it it says SKIPPED.
//!
//! Real processes (the built binary, `tests/mcp/fake_server.py`, needs
//! `python3`); every read has a timeout.

#[path = "mcp/harness.rs"]
mod harness;

use harness::{
    approve, fake_server, is_error, mcp_dir, text, wait_for_approvals, Credentials, Proxy, BIN,
    TIMEOUT,
};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A fresh temporary directory for one test.
fn temp(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agenra-mcp-store-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A server that answers nothing and appends every line it reads to `log`:
/// a call forwarded to it stays running.
fn silent_server(log: &Path) -> Vec<String> {
    vec![
        "python3".into(),
        "-c".into(),
        "import sys\n\
         for line in sys.stdin:\n    \
             f = open(sys.argv[1], 'a'); f.write(line); f.close()\n"
            .into(),
        log.display().to_string(),
    ]
}

/// `agenra ARGS`: exit code, standard output and error.
fn agenra(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run agenra");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn audit_verify(store: &str) {
    let (code, out, err) = agenra(&["audit", "verify", "--store", store]);
    assert_eq!(code, 0, "audit verify: {out}{err}");
    assert!(out.contains("chain intact"), "{out}");
}

/// The event records of the store, in order.
fn events(dir: &Path, store: &str) -> Vec<Value> {
    let file = dir.join("audit.jsonl");
    let (code, out, err) = agenra(
        &["audit", "export", "--store", store, "-o"]
            .into_iter()
            .chain([file.to_str().unwrap()])
            .collect::<Vec<_>>(),
    );
    assert_eq!(code, 0, "audit export: {out}{err}");
    std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] == json!("event"))
        .collect()
}

/// Waits until the file `log` has `n` lines.
fn wait_lines(log: &Path, n: usize) {
    let deadline = Instant::now() + TIMEOUT;
    while Instant::now() < deadline {
        let have = std::fs::read_to_string(log).map_or(0, |s| s.lines().count());
        if have >= n {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{} did not get {n} lines in time", log.display());
}

/// Spends the `quota 1` grant, has a failed call refund the other one,
/// is killed, and on restart finds the spent unit still spent and the
/// refunded one still there.
fn quota_survives_a_kill(store: &str) {
    let flags = ["--store", store];
    let mut p = Proxy::spawn(&flags, &fake_server());
    p.stderr_line("new session `mcp-proxy` of tenant `default`");
    let answer = p.call(1, "publish", json!({"text": "a"}));
    assert!(!is_error(&answer), "{answer}");
    let answer = p.call(2, "flaky", json!({"text": "x"}));
    assert_eq!(text(&answer), "flaky failed", "{answer}");
    p.kill();

    let mut p = Proxy::spawn(&flags, &fake_server());
    let line = p.stderr_line("resumed session `mcp-proxy`");
    assert!(line.contains("0 call(s) left running"), "{line}");
    // The unit spent before the kill is still spent...
    let answer = p.call(1, "publish", json!({"text": "b"}));
    assert!(is_error(&answer), "{answer}");
    let t = text(&answer);
    assert!(
        t.contains("DENY by rule `no-grant`: grant `publish_once`"),
        "{t}"
    );
    assert!(t.contains("no quota left"), "{t}");
    // ...and the refunded one is still there.
    let answer = p.call(2, "flaky", json!({"text": "y"}));
    assert_eq!(text(&answer), "flaky failed", "{answer}");
    assert_eq!(p.finish(), 0);
    audit_verify(store);
}

#[test]
fn a_spent_quota_stays_spent_after_the_proxy_is_killed() {
    let dir = temp("quota");
    let store = dir.join("x.redb");
    let store = store.to_str().unwrap();
    quota_survives_a_kill(store);
    // Call ids go on past the ones of the first run: `mcp-N:ID` with the
    // JSON-RPC ids 1 and 2 reused.
    let calls: Vec<String> = events(&dir, store)
        .iter()
        .filter(|r| r["event"]["kind"] == json!("call"))
        .map(|r| r["event"]["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(calls, ["mcp-1:1", "mcp-2:2", "mcp-3:1", "mcp-4:2"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A call forwarded to the server whose answer never came (the proxy died
/// first) is reported `unknown` on restart: it may have run, so its unit
/// stays spent and its output counts as read.
#[test]
fn a_call_left_running_is_reported_unknown_after_a_restart() {
    let dir = temp("running");
    let store = dir.join("x.redb");
    let store = store.to_str().unwrap();
    let seen = dir.join("seen.jsonl");
    let mut p = Proxy::spawn(&["--store", store], &silent_server(&seen));
    p.send_call(1, "publish", json!({"text": "a"}));
    p.send_call(2, "read_file", json!({"path": "docs/a.md"}));
    // Forwarded: their ALLOWs were durable before the server saw them.
    wait_lines(&seen, 2);
    // A second proxy cannot open the store while the first holds it.
    let (code, _, err) = agenra(&[
        "mcp-proxy",
        "--policy",
        mcp_dir().join("policy.agr").to_str().unwrap(),
        "--store",
        store,
        "--",
        "true",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("--store"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    p.kill();

    let mut p = Proxy::spawn(&["--store", store], &fake_server());
    let line = p.stderr_line("resumed session `mcp-proxy`");
    assert!(
        line.contains("2 call(s) left running reported `unknown`"),
        "{line}"
    );
    let answer = p.call(1, "publish", json!({"text": "b"}));
    assert!(text(&answer).contains("no quota left"), "{answer}");
    // `unknown` merges the output label: the file may have been read, so
    // nothing goes out by e-mail any more.
    let answer = p.call(2, "send_email", json!({"to": "a@example.com", "body": "x"}));
    assert!(
        text(&answer).contains("DENY by rule `no_untrusted_mail`"),
        "{answer}"
    );
    assert_eq!(p.finish(), 0);
    audit_verify(store);
    let results: Vec<(String, String)> = events(&dir, store)
        .iter()
        .filter(|r| r["event"]["kind"] == json!("result"))
        .map(|r| {
            (
                r["event"]["call"].as_str().unwrap().to_string(),
                r["event"]["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        results,
        [
            ("mcp-1:1".to_string(), "unknown".to_string()),
            ("mcp-2:2".to_string(), "unknown".to_string())
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A PAUSE held in `--on-pause wait` mode and approved over HTTP is an
/// audit record (with its place in the answer); a call still waiting when
/// the proxy is killed is rejected on restart, its unit returned.
#[test]
fn an_approval_is_durable_and_a_waiting_call_is_rejected_on_restart() {
    let dir = temp("approve");
    let store = dir.join("x.redb");
    let store = store.to_str().unwrap();
    let creds = Credentials::for_test("store-approve");
    let flags = [
        "--store",
        store,
        "--session",
        "agent-7",
        "--on-pause",
        "wait",
        "--approvals-listen",
        "127.0.0.1:0",
        "--pause-timeout",
        "60",
        "--tokens",
        creds.file.to_str().unwrap(),
    ];
    let mut p = Proxy::spawn(&flags, &fake_server());
    let mut http = p.approvals_client().with_token(&creds.approver);
    p.send_call(1, "deploy", json!({"target": "prod"}));
    let list = wait_for_approvals(&mut http, 1);
    assert_eq!(list[0]["call"], json!("mcp-1:1"), "{list:?}");
    assert_eq!(list[0]["session"], json!("agent-7"), "{list:?}");
    let digest = list[0]["digest"].clone();
    let (status, out) = approve(&mut http, "mcp-1:1");
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["decision"], json!("ALLOW"), "{out}");
    let seq = out["audit_seq"].as_u64().expect("the approval's audit_seq");
    let answer = p.recv();
    assert_eq!(answer["id"], json!(1), "{answer}");
    assert!(!is_error(&answer), "{answer}");
    // `release` (quota 1, approval) waits, and the proxy is killed.
    p.send_call(2, "release", json!({"target": "v1"}));
    wait_for_approvals(&mut http, 1);
    p.kill();

    let records = events(&dir, store);
    let approve = records
        .iter()
        .find(|r| r["seq"] == json!(seq))
        .expect("the approval's record");
    assert_eq!(approve["event"]["kind"], json!("approve"), "{approve}");
    assert_eq!(approve["event"]["call"], json!("mcp-1:1"), "{approve}");
    assert_eq!(approve["verdict"], json!("ALLOW"), "{approve}");
    assert_eq!(approve["session"], json!("agent-7"), "{approve}");
    // Who approved, what they were shown, and why.
    assert_eq!(approve["actor"], json!("approver:alice"), "{approve}");
    assert_eq!(approve["digest"], digest, "{approve}");
    assert_eq!(approve["note"], json!("reviewed by the test"), "{approve}");
    audit_verify(store);

    let mut p = Proxy::spawn(&flags, &fake_server());
    let line = p.stderr_line("resumed session `agent-7`");
    assert!(
        line.contains("1 call(s) left waiting for approval rejected"),
        "{line}"
    );
    let mut http = p.approvals_client().with_token(&creds.approver);
    assert!(wait_for_approvals(&mut http, 0).is_empty());
    // The rejection gave the unit back: `release` pauses again.
    p.send_call(3, "release", json!({"target": "v2"}));
    let list = wait_for_approvals(&mut http, 1);
    assert_eq!(list[0]["call"], json!("mcp-3:3"), "{list:?}");
    let (status, out) = http
        .post("/v1/approvals/mcp-3:3/reject", &json!({}))
        .unwrap();
    assert_eq!(status, 200, "{out}");
    assert!(is_error(&p.recv()));
    assert_eq!(p.finish(), 0);
    audit_verify(store);
    let kinds: Vec<(String, String)> = events(&dir, store)
        .iter()
        .map(|r| {
            (
                r["event"]["kind"].as_str().unwrap().to_string(),
                r["verdict"].as_str().unwrap_or("-").to_string(),
            )
        })
        .collect();
    let expect = [
        ("call", "PAUSE"),
        ("approve", "ALLOW"),
        ("result", "-"),
        ("call", "PAUSE"),
        ("reject", "-"),
        ("call", "PAUSE"),
        ("reject", "-"),
    ];
    let expect: Vec<(String, String)> = expect
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(kinds, expect);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_proxy_resumes_its_session_on_postgres() {
    let Some(url) = agenra_store::test_database("mcp_proxy_store") else {
        return;
    };
    quota_survives_a_kill(&url);
}

#[test]
fn a_bad_store_is_a_clear_error() {
    let dir = temp("bad");
    let policy = mcp_dir().join("policy.agr");
    let policy = policy.to_str().unwrap();
    let not_a_store = dir.join("not-a-store.redb");
    std::fs::write(&not_a_store, "this is not a redb file\n".repeat(100)).unwrap();
    let missing = dir.join("no/such/dir/x.redb");
    let cases: [(&str, &str); 5] = [
        ("--store", missing.to_str().unwrap()),
        ("--store", not_a_store.to_str().unwrap()),
        // Nothing listens on port 1.
        ("--store", "postgres://agenra@127.0.0.1:1/agenra"),
        ("--session", "a/b"),
        ("--tenant", ""),
    ];
    for (flag, value) in cases {
        let start = Instant::now();
        let (code, out, err) = agenra(&[
            "mcp-proxy",
            "--policy",
            policy,
            flag,
            value,
            "--",
            "python3",
            "-c",
            "import sys; sys.exit(42)",
        ]);
        assert_eq!(code, 1, "{flag} {value}: {out}{err}");
        assert!(err.contains("agenra: error: mcp-proxy: "), "{err}");
        assert!(err.contains(flag), "{flag} {value}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(start.elapsed() < TIMEOUT, "{flag} {value} took too long");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
