//! `agenra mcp-proxy` (the built binary) between this test, acting as the
//! MCP client over pipes, and `tests/mcp/fake_server.py` (needs `python3`):
//! messages pass through unchanged, allowed `tools/call`s reach the server,
//! denied and paused ones never do, a failed call refunds its unit, and
//! garbage does not stop the proxy. Every read has a timeout, so a hang
//! fails the test instead of blocking it.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_agenra");
const TIMEOUT: Duration = Duration::from_secs(20);

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp")
}

struct Proxy {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    log: PathBuf,
}

impl Proxy {
    fn start(test: &str) -> Proxy {
        let log = std::env::temp_dir().join(format!(
            "agenra-mcp-proxy-{}-{test}.log",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&log);
        let mut child = Command::new(BIN)
            .arg("mcp-proxy")
            .arg("--policy")
            .arg(dir().join("policy.agr"))
            .arg("--")
            .arg("python3")
            .arg(dir().join("fake_server.py"))
            .env("MCP_FAKE_LOG", &log)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start agenra mcp-proxy");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Proxy {
            stdin: child.stdin.take(),
            child,
            lines,
            log,
        }
    }

    fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn recv_line(&self) -> String {
        self.lines
            .recv_timeout(TIMEOUT)
            .expect("no line from the proxy in time")
    }

    fn recv(&self) -> Value {
        let line = self.recv_line();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    fn call(&mut self, id: i64, tool: &str, arguments: Value) -> Value {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                         "params": {"name": tool, "arguments": arguments}});
        self.send_line(&msg.to_string());
        let answer = self.recv();
        assert_eq!(answer["id"], json!(id), "{answer}");
        answer
    }

    /// The tool names the server received `tools/call`s for, in order.
    fn server_calls(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                v["name"].as_str().unwrap().to_string()
            })
            .collect()
    }

    /// Closes the client side and waits for the proxy to exit.
    fn finish(mut self) -> i32 {
        drop(self.stdin.take());
        for _ in 0..200 {
            if let Some(status) = self.child.try_wait().unwrap() {
                let _ = std::fs::remove_file(&self.log);
                return status.code().unwrap_or(-1);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        panic!("the proxy did not exit after its input closed");
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn is_error(answer: &Value) -> bool {
    answer["result"]["isError"] == json!(true)
}

fn text(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// What the fake server itself answers, byte for byte, when asked directly.
fn direct(lines: &[&str]) -> Vec<String> {
    let mut child = Command::new("python3")
        .arg(dir().join("fake_server.py"))
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

    let mut p = Proxy::start("passthrough");
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

    // An unknown tool is denied as ill-formed, and not forwarded.
    let answer = p.call(5, "rm_rf", json!({}));
    assert!(text(&answer).contains("`well-formed`"), "{answer}");
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
    // Not JSON: forwarded unchanged; the fake server answers a parse error.
    p.send_line("{not json");
    let answer = p.recv();
    assert_eq!(answer["error"]["code"], json!(-32700), "{answer}");
    // The server prints a line that is not JSON: it reaches the client unchanged.
    p.send_line("raw-garbage");
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
    p.stdin.as_mut().unwrap().write_all(b"\xff\xfe\n").unwrap();
    // The fake server answers the last one with a parse error.
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
