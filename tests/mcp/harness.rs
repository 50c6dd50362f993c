//! The MCP client side of the `agenra mcp-proxy` tests: the built binary
//! runs between the test (over pipes) and an MCP server (by default
//! `tests/mcp/fake_server.py`, which needs `python3`). Every read has a
//! timeout, so a hang fails the test instead of blocking it. Included by
//! `tests/mcp_proxy.rs` and `tests/mcp_proxy_store.rs` with `#[path]`.
#![allow(dead_code)]

use agenra_gateway::client::Client;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_agenra");
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// `tests/mcp`: the policy and the fake server.
pub fn mcp_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp")
}

/// The command line of the fake server.
pub fn fake_server() -> Vec<String> {
    vec![
        "python3".into(),
        mcp_dir().join("fake_server.py").display().to_string(),
    ]
}

/// Each line `from` yields, sent on a channel by a thread of its own.
fn line_channel(from: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

pub struct Proxy {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Receiver<String>,
    /// Where the fake server logs the `tools/call`s it receives
    /// (`MCP_FAKE_LOG`), when the test asked for it.
    log: Option<PathBuf>,
}

impl Proxy {
    /// `agenra mcp-proxy --policy tests/mcp/policy.agr FLAGS -- SERVER`.
    pub fn spawn(flags: &[&str], server: &[String]) -> Proxy {
        Proxy::spawn_logged(flags, server, None)
    }

    fn spawn_logged(flags: &[&str], server: &[String], log: Option<PathBuf>) -> Proxy {
        let mut command = Command::new(BIN);
        command
            .arg("mcp-proxy")
            .arg("--policy")
            .arg(mcp_dir().join("policy.agr"))
            .args(flags)
            .arg("--")
            .args(server)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(log) = &log {
            command.env("MCP_FAKE_LOG", log);
        }
        let mut child = command.spawn().expect("start agenra mcp-proxy");
        let lines = line_channel(child.stdout.take().unwrap());
        let stderr = line_channel(child.stderr.take().unwrap());
        Proxy {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
            log,
        }
    }

    /// The proxy in front of the fake server, which logs the calls it
    /// receives to a file named after `test` (see `server_calls`).
    pub fn start(test: &str) -> Proxy {
        Proxy::start_with(test, &[])
    }

    /// `start` with extra flags (before `--`).
    pub fn start_with(test: &str, flags: &[&str]) -> Proxy {
        let log = std::env::temp_dir().join(format!(
            "agenra-mcp-proxy-{}-{test}.log",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&log);
        Proxy::spawn_logged(flags, &fake_server(), Some(log))
    }

    /// `start` in wait mode on a free port, with an approver's credential
    /// for tenant `default`, connected to its approval endpoints with it.
    pub fn start_waiting(test: &str, timeout: &str) -> (Proxy, Client) {
        let (p, client, _) = Proxy::start_waiting_with(test, timeout);
        (p, client)
    }

    /// `start_waiting`, and the credentials it made.
    pub fn start_waiting_with(test: &str, timeout: &str) -> (Proxy, Client, Credentials) {
        let creds = Credentials::for_test(test);
        let p = Proxy::start_with(
            test,
            &[
                "--on-pause",
                "wait",
                "--approvals-listen",
                "127.0.0.1:0",
                "--pause-timeout",
                timeout,
                "--tokens",
                creds.file.to_str().unwrap(),
            ],
        );
        let client = p.approvals_client().with_token(&creds.approver);
        (p, client, creds)
    }

    /// Waits for a line of standard error containing `needle`.
    pub fn stderr_line(&self, needle: &str) -> String {
        let deadline = Instant::now() + TIMEOUT;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.stderr.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(_) => break,
            }
        }
        panic!("the proxy wrote no line containing {needle:?} in time");
    }

    /// The address the proxy printed for its approval endpoints.
    pub fn approvals_addr(&self) -> std::net::SocketAddr {
        let line = self.stderr_line("approvals on http://");
        let addr = line
            .split("approvals on http://")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap();
        addr.parse().unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    pub fn approvals_client(&self) -> Client {
        Client::connect(self.approvals_addr()).expect("connect to the approval endpoints")
    }

    pub fn send_line(&mut self, line: &str) {
        self.send_bytes(line.as_bytes());
        self.send_bytes(b"\n");
    }

    /// Raw bytes to the proxy's input (not necessarily UTF-8 or a line).
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a `tools/call` without waiting for its answer.
    pub fn send_call(&mut self, id: i64, tool: &str, arguments: Value) {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                         "params": {"name": tool, "arguments": arguments}});
        self.send_line(&msg.to_string());
    }

    pub fn recv_line(&self) -> String {
        self.lines
            .recv_timeout(TIMEOUT)
            .expect("no line from the proxy in time")
    }

    pub fn recv(&self) -> Value {
        let line = self.recv_line();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// A `tools/call` and its answer (which must carry the same id).
    pub fn call(&mut self, id: i64, tool: &str, arguments: Value) -> Value {
        self.send_call(id, tool, arguments);
        let answer = self.recv();
        assert_eq!(answer["id"], json!(id), "{answer}");
        answer
    }

    /// The proxy's standard input, taken (dropping it closes it).
    pub fn stdin_take(&mut self) -> Option<ChildStdin> {
        self.stdin.take()
    }

    /// The proxy's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the proxy's standard output ends (EOF) within `within`,
    /// skipping any lines before the end.
    pub fn output_ends_within(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return false;
            };
            match self.lines.recv_timeout(left) {
                Ok(_) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return true,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => return false,
            }
        }
    }

    /// Waits up to `within` for the proxy to exit; its exit code (or -1
    /// when a signal ended it), `None` if it still runs.
    pub fn exited_within(&mut self, within: Duration) -> Option<i32> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status.code().unwrap_or(-1));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Asserts that the proxy sends nothing for a while.
    pub fn assert_silent(&self) {
        if let Ok(line) = self.lines.recv_timeout(Duration::from_millis(300)) {
            panic!("unexpected line from the proxy: {line}");
        }
    }

    /// The tool names the fake server received `tools/call`s for, in order
    /// (empty unless started with `start`).
    pub fn server_calls(&self) -> Vec<String> {
        let Some(log) = &self.log else {
            return Vec::new();
        };
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                v["name"].as_str().unwrap().to_string()
            })
            .collect()
    }

    /// SIGKILL: nothing is flushed or settled on the way out.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Closes the client's side and waits for the proxy to exit.
    pub fn finish(mut self) -> i32 {
        drop(self.stdin.take());
        let deadline = Instant::now() + TIMEOUT;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                if let Some(log) = &self.log {
                    let _ = std::fs::remove_file(log);
                }
                return status.code().unwrap_or(-1);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the proxy did not exit after its input closed");
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn is_error(answer: &Value) -> bool {
    answer["result"]["isError"] == json!(true)
}

/// The text of a tool result's first content item.
pub fn text(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// A credentials file with an approver (tenant `default`), an approver of
/// another tenant, an agent and an admin.
pub struct Credentials {
    pub file: PathBuf,
    pub approver: String,
    pub other_approver: String,
    pub agent: String,
    pub admin: String,
}

impl Credentials {
    pub fn for_test(test: &str) -> Credentials {
        use agenra_gateway::auth::{Credentials as File, Role};
        let file = std::env::temp_dir().join(format!(
            "agenra-mcp-tokens-{}-{test}.json",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&file);
        let mut c = File::load_or_empty(&file).unwrap();
        let approver = c
            .add("alice", Role::Approver, vec!["default".into()])
            .unwrap();
        let other_approver = c.add("bob", Role::Approver, vec!["acme".into()]).unwrap();
        let agent = c.add("bot", Role::Agent, vec!["default".into()]).unwrap();
        let admin = c.add("ops", Role::Admin, vec![]).unwrap();
        c.save(&file).unwrap();
        Credentials {
            file,
            approver,
            other_approver,
            agent,
            admin,
        }
    }
}

/// The body of an approval of `call`: the digest `GET /v1/approvals`
/// shows for it (a made-up one when it is not listed) and a reason.
pub fn approval(http: &mut Client, call: &str) -> Value {
    let (_, body) = http.get("/v1/approvals").unwrap();
    let digest = body["approvals"]
        .as_array()
        .and_then(|l| l.iter().find(|a| a["call"] == json!(call)))
        .map_or(json!("sha256:not-listed"), |a| a["digest"].clone());
    json!({"digest": digest, "reason": "reviewed by the test"})
}

/// Approves `call` with the digest listed for it.
pub fn approve(http: &mut Client, call: &str) -> (u16, Value) {
    let body = approval(http, call);
    http.post(&format!("/v1/approvals/{call}/approve"), &body)
        .unwrap()
}

/// `GET /v1/approvals`, polled until it lists `n` calls (the proxy decides
/// a call as it reads it, so right after sending it may not be there yet).
pub fn wait_for_approvals(http: &mut Client, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let (status, body) = http.get("/v1/approvals").unwrap();
        assert_eq!(status, 200, "{body}");
        let list = body["approvals"].as_array().unwrap().clone();
        if list.len() == n {
            return list;
        }
        assert!(
            Instant::now() < deadline,
            "expected {n} approvals, have {body}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
