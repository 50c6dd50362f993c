//! `agenra mcp-proxy`, the rest of issue #25's finding 5, against
//! `tests/mcp/fake_server.py` (needs `python3`): many waiting calls without
//! a thread each, cancelled running calls reported `unknown`, long ids
//! refused, task-augmented calls followed to their result, `tools/list`
//! answers showing only what the policy grants, and the server process
//! ended with the proxy. Every wait is bounded, so a hang fails the test.

#[path = "mcp/harness.rs"]
mod harness;

use harness::{is_error, text, wait_for_approvals, Proxy};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How many threads a process runs (Linux; `None` elsewhere).
fn threads(pid: u32) -> Option<usize> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()
        .map(|d| d.count())
}

/// Whether a process runs (and is not a zombie).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // `pid (comm) STATE ...`
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits up to `within` for process `pid` to be gone.
fn gone_within(pid: u32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    !alive(pid)
}

#[test]
fn two_thousand_waiting_calls_take_no_thread_each_and_a_ping_is_answered() {
    const N: i64 = 2000;
    let (mut p, mut http) = Proxy::start_waiting("scale", "300");
    let mut calls = String::new();
    for id in 0..N {
        calls.push_str(
            &json!({"jsonrpc": "2.0", "id": 10 + id, "method": "tools/call",
                    "params": {"name": "announce", "arguments": {"to": "all@example.com"}}})
            .to_string(),
        );
        calls.push('\n');
    }
    p.send_bytes(calls.as_bytes());
    let listed = wait_for_approvals(&mut http, N as usize);
    assert_eq!(listed.len(), N as usize);
    // One timer thread serves every deadline (the old proxy ran one thread
    // per waiting call: 2,000 more here).
    if let Some(n) = threads(p.pid()) {
        assert!(n < 64, "{n} threads for {N} waiting calls");
    }
    let started = Instant::now();
    p.send_line(r#"{"jsonrpc":"2.0","id":"ping-1","method":"ping"}"#);
    let answer = p.recv();
    let took = started.elapsed();
    assert_eq!(answer["id"], json!("ping-1"), "{answer}");
    assert_eq!(answer["result"], json!({}), "{answer}");
    assert!(took < Duration::from_secs(5), "a ping took {took:?}");
    // A waiting call's id is still taken.
    let answer = p.call(10, "read_file", json!({"path": "docs/a"}));
    assert_eq!(answer["error"]["code"], json!(-32600), "{answer}");
    // Every one is cancelled, and none reaches the server.
    let mut cancels = String::new();
    for id in 0..N {
        cancels.push_str(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": 10 + id}})
            .to_string(),
        );
        cancels.push('\n');
    }
    p.send_bytes(cancels.as_bytes());
    wait_for_approvals(&mut http, 0);
    assert!(p.server_calls().is_empty());
    assert_eq!(p.finish(), 0);
}

/// A running call the client cancels may have run in part, and the client
/// ignores its answer: whatever the server answers, the call is `unknown`
/// (its unit stays spent), not `failed` (which would refund it).
#[test]
fn a_cancelled_running_call_is_unknown_whatever_the_server_answers() {
    let mut p = Proxy::start("cancel-answered");
    // `flaky` has one unit; "later" makes the server answer (isError) only
    // after its next message, here the cancellation.
    p.send_call(1, "flaky", json!({"text": "later"}));
    p.send_line(
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"user"}}"#,
    );
    // The server's answer is forwarded (the client ignores it).
    let answer = p.recv();
    assert_eq!(answer["id"], json!(1), "{answer}");
    p.stderr_line("cancelled by the client while running (whatever the server answers)");
    // Not refunded: the second call is denied, never reaches the server.
    let answer = p.call(2, "flaky", json!({"text": "x"}));
    assert!(is_error(&answer), "{answer}");
    assert!(text(&answer).contains("no quota left"), "{answer}");
    assert_eq!(p.server_calls(), ["flaky"]);
    // The id is free again once answered.
    let answer = p.call(1, "read_file", json!({"path": "docs/a.md"}));
    assert!(!is_error(&answer), "{answer}");
    assert_eq!(p.finish(), 0);
}

/// A cancelled call the server never answers is not kept running for ever:
/// after `--cancel-timeout` it is `unknown`, its output label merged (a
/// later e-mail is denied by the flow rule) and its unit kept.
#[test]
fn a_cancelled_call_never_answered_is_unknown_after_the_timeout() {
    let mut p = Proxy::start_with("cancel-timeout", &["--cancel-timeout", "1"]);
    // The server never answers a value ending in `never`.
    p.send_call(1, "read_file", json!({"path": "docs/never"}));
    p.send_line(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#);
    let line = p.stderr_line("did not answer within 1 s");
    assert!(line.contains("reported `unknown`"), "{line}");
    // The read's untrusted label counts as read.
    let answer = p.call(2, "send_email", json!({"to": "a@example.com", "body": "x"}));
    assert!(is_error(&answer), "{answer}");
    assert!(
        text(&answer).contains("DENY by rule `no_untrusted_mail`"),
        "{answer}"
    );
    // The unit of a quota-1 grant stays spent.
    p.send_call(3, "publish", json!({"text": "never"}));
    p.send_line(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}"#);
    p.stderr_line("did not answer within 1 s");
    let answer = p.call(4, "publish", json!({"text": "b"}));
    assert!(text(&answer).contains("no quota left"), "{answer}");
    // The unanswered ids stay taken (a late answer must not pass for
    // another request's).
    let answer = p.call(1, "read_file", json!({"path": "docs/b.md"}));
    assert_eq!(answer["error"]["code"], json!(-32600), "{answer}");
    assert_eq!(p.server_calls(), ["read_file", "publish"]);
    assert_eq!(p.finish(), 0);
}

/// A call id `mcp-N:ID` must fit the monitor's 1,024 bytes: a longer id is
/// refused with a JSON-RPC error (with the id, so the client can match
/// it), never forwarded undecided.
#[test]
fn a_request_id_over_960_bytes_is_refused_with_a_json_rpc_error() {
    let mut p = Proxy::start("long-id");
    for len in [2_000, 100_000] {
        let id = "x".repeat(len);
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                         "params": {"name": "publish", "arguments": {"text": "a"}}});
        p.send_line(&msg.to_string());
        let answer = p.recv();
        assert_eq!(answer["id"], json!(id));
        assert_eq!(
            answer["error"]["code"],
            json!(-32600),
            "{}",
            &answer["error"]
        );
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains("at most 960 bytes"), "{message}");
    }
    // Up to the limit an id is decided as any other (958 characters and
    // two quotes: 960 bytes of JSON).
    let id = "y".repeat(958);
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                     "params": {"name": "publish", "arguments": {"text": "a"}}});
    p.send_line(&msg.to_string());
    let answer = p.recv();
    assert_eq!(answer["id"], json!(id));
    assert!(!is_error(&answer), "{answer}");
    assert_eq!(p.server_calls(), ["publish"]);
    assert_eq!(p.finish(), 0);
}

/// MCP 2025-11-25 tasks: the server answers a task-augmented call with a
/// task handle; the call's outcome is the task's result, reported when the
/// client fetches it (`tasks/result`), never the handle.
#[test]
fn a_task_augmented_call_is_followed_to_its_result() {
    let mut p = Proxy::start("tasks");
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "flaky", "arguments": {"text": "x"},
                                 "task": {"ttl": 60000}}});
    p.send_line(&call.to_string());
    let handle = p.recv();
    assert_eq!(
        handle["result"]["task"]["taskId"],
        json!("task-1"),
        "{handle}"
    );
    // While the task runs its unit is held.
    let answer = p.call(2, "flaky", json!({"text": "y"}));
    assert!(text(&answer).contains("no quota left"), "{answer}");
    p.send_line(r#"{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"task-1"}}"#);
    let result = p.recv();
    assert_eq!(result["id"], json!(3), "{result}");
    assert!(is_error(&result), "{result}");
    // The task's result failed (isError): the unit came back.
    let answer = p.call(4, "flaky", json!({"text": "z"}));
    assert_eq!(text(&answer), "flaky failed", "{answer}");
    assert_eq!(p.server_calls(), ["flaky", "flaky"]);

    // A task's successful result is the call's output: publish's unit is
    // spent once the result is in.
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                      "params": {"name": "publish", "arguments": {"text": "t"},
                                 "task": {"ttl": 60000}}});
    p.send_line(&call.to_string());
    let handle = p.recv();
    assert_eq!(
        handle["result"]["task"]["taskId"],
        json!("task-5"),
        "{handle}"
    );
    p.send_line(r#"{"jsonrpc":"2.0","id":6,"method":"tasks/result","params":{"taskId":"task-5"}}"#);
    let result = p.recv();
    assert!(!is_error(&result), "{result}");
    let answer = p.call(7, "publish", json!({"text": "u"}));
    assert!(text(&answer).contains("no quota left"), "{answer}");
    assert_eq!(p.finish(), 0);
}

fn tool_names(answer: &Value) -> Vec<String> {
    answer["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {answer}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// `tools/list` shows only the tools the policy grants: not `wipe`
/// (declared, granted by nothing) nor `shell` (not declared);
/// `--show-all-tools` forwards the answer unchanged.
#[test]
fn tools_list_hides_the_tools_the_session_can_never_call() {
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;
    let p = {
        let mut p = Proxy::start("list");
        p.send_line(list);
        let answer = p.recv();
        assert_eq!(answer["id"], json!(1));
        let names = tool_names(&answer);
        assert_eq!(
            names,
            [
                "read_file",
                "send_email",
                "publish",
                "flaky",
                "deploy",
                "crash",
                "release",
                "announce"
            ]
        );
        p
    };
    assert_eq!(p.finish(), 0);
    let mut p = Proxy::start_with("list-all", &["--show-all-tools"]);
    p.send_line(list);
    let names = tool_names(&p.recv());
    assert!(names.contains(&"wipe".to_string()), "{names:?}");
    assert!(names.contains(&"shell".to_string()), "{names:?}");
    assert_eq!(p.finish(), 0);
}

/// A server that ignores the end of its input and keeps running; it writes
/// its pid to `pidfile` first. With `close_stdout` it closes its output
/// right after its first message.
fn stubborn_server(pidfile: &Path, close_stdout: bool) -> Vec<String> {
    let script = format!(
        concat!(
            "import os, sys, time\n",
            "open({pidfile:?}, 'w').write(str(os.getpid()))\n",
            "sys.stdin.readline()\n",
            "if {close}:\n",
            "    sys.stdout.close(); os.close(1)\n",
            "for _ in sys.stdin: pass\n",
            "time.sleep(120)\n",
        ),
        pidfile = pidfile.display().to_string(),
        close = if close_stdout { "True" } else { "False" },
    );
    vec!["python3".into(), "-c".into(), script]
}

fn read_pid(pidfile: &Path) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(pid) = std::fs::read_to_string(pidfile)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return pid;
        }
        assert!(Instant::now() < deadline, "the server wrote no pid");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn pidfile(test: &str) -> PathBuf {
    let f = std::env::temp_dir().join(format!("agenra-mcp-pid-{}-{test}", std::process::id()));
    let _ = std::fs::remove_file(&f);
    f
}

/// MCP's stdio shutdown: the client closes the proxy's input, the proxy
/// closes the server's; a server that does not exit gets SIGTERM (then
/// SIGKILL), and the proxy exits.
#[test]
fn a_server_that_ignores_the_end_of_its_input_is_ended() {
    let file = pidfile("eof");
    let mut p = Proxy::spawn(&[], &stubborn_server(&file, false));
    p.send_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let server = read_pid(&file);
    drop(p.stdin_take());
    let code = p.exited_within(Duration::from_secs(15));
    assert!(
        code.is_some(),
        "the proxy did not exit after its input closed"
    );
    assert!(
        gone_within(server, Duration::from_secs(5)),
        "the server still runs"
    );
    p.stderr_line("sending it SIGTERM");
}

/// SIGTERM (or SIGINT) to the proxy ends its server too.
#[test]
fn sigterm_to_the_proxy_ends_the_server() {
    let file = pidfile("sigterm");
    let mut p = Proxy::spawn(&[], &stubborn_server(&file, false));
    p.send_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let server = read_pid(&file);
    // The proxy has installed its handler once the server runs.
    let status = Command::new("kill")
        .arg("-TERM")
        .arg(p.pid().to_string())
        .status()
        .expect("kill(1)");
    assert!(status.success());
    let code = p.exited_within(Duration::from_secs(15));
    assert_eq!(code, Some(128 + 15), "the proxy did not exit on SIGTERM");
    assert!(
        gone_within(server, Duration::from_secs(5)),
        "the server still runs"
    );
}

/// A server that closes its output (but keeps running): the client's
/// output ends at once, and the server is ended.
#[test]
fn the_clients_output_ends_when_the_servers_does() {
    let file = pidfile("stdout");
    let mut p = Proxy::spawn(&[], &stubborn_server(&file, true));
    p.send_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let server = read_pid(&file);
    // The server sleeps 120 s: an end within 10 s is the proxy's doing.
    assert!(
        p.output_ends_within(Duration::from_secs(10)),
        "the client's output is still open"
    );
    assert!(
        gone_within(server, Duration::from_secs(10)),
        "the server still runs"
    );
    assert!(p.exited_within(Duration::from_secs(10)).is_some());
}

/// `--cancel-timeout 0` would report every cancelled call at once: refused
/// before the server starts.
#[test]
fn a_cancel_timeout_of_zero_is_refused() {
    let out = Command::new(harness::BIN)
        .arg("mcp-proxy")
        .arg("--policy")
        .arg(harness::mcp_dir().join("policy.agr"))
        .args(["--cancel-timeout", "0", "--"])
        .args(harness::fake_server())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run agenra mcp-proxy");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--cancel-timeout must be at least 1 second"),
        "{err}"
    );
}
