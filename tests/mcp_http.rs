//! `agenra mcp-proxy --listen`: MCP's streamable HTTP transport between the
//! client and the proxy (docs/mcp-proxy.md, "Streamable HTTP"). Every
//! `tools/call` POSTed goes through the stdio mode's decision path; what
//! the transport adds (Origin, Host, token, content type, size, session) is
//! refused before anything reaches the server. Against the fake server
//! (`python3`) and, when `AGENRA_MCP_FS_SERVER` is set (`.ci/run` sets
//! it), the published filesystem server from npm (else SKIPPED).

#[path = "mcp/harness.rs"]
mod harness;

use harness::{fake_server, mcp_dir, Credentials, BIN};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(30);

/// An answer: status, `Content-Type`, `Mcp-Session-Id`, body.
struct Answer {
    status: u16,
    content_type: String,
    session: Option<String>,
    /// The `Connection` header: `close` on a refusal sent before the body
    /// was read.
    connection: String,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }
}

/// `agenra mcp-proxy --listen 127.0.0.1:0 ...` and an HTTP client for it.
struct HttpProxy {
    child: Child,
    stderr: Receiver<String>,
    /// The lines of standard error read so far.
    seen: std::cell::RefCell<Vec<String>>,
    url: String,
    session: Option<String>,
    token: Option<String>,
    agent: ureq::Agent,
}

impl HttpProxy {
    fn start(policy: &Path, flags: &[&str], server: &[String], env: &[(&str, &Path)]) -> Self {
        let mut command = Command::new(BIN);
        command
            .arg("mcp-proxy")
            .arg("--policy")
            .arg(policy)
            .args(["--listen", "127.0.0.1:0"])
            .args(flags)
            .arg("--")
            .args(server)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command.spawn().expect("start agenra mcp-proxy");
        let (tx, stderr) = channel();
        let err = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut p = HttpProxy {
            child,
            stderr,
            seen: Default::default(),
            url: String::new(),
            session: None,
            token: None,
            agent: ureq::AgentBuilder::new().timeout(TIMEOUT).build(),
        };
        let line = p.stderr_line("MCP streamable HTTP on ");
        p.url = line
            .split("MCP streamable HTTP on ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .expect("the URL")
            .to_string();
        p
    }

    fn stderr_line(&self, needle: &str) -> String {
        if let Some(line) = self.seen.borrow().iter().find(|l| l.contains(needle)) {
            return line.clone();
        }
        let deadline = Instant::now() + TIMEOUT;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.stderr.recv_timeout(left) {
                Ok(line) => {
                    self.seen.borrow_mut().push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(_) => break,
            }
        }
        panic!("the proxy wrote no line containing {needle:?} in time");
    }

    fn addr(&self) -> String {
        self.url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_string()
    }

    /// A request with the usual headers (content type, accept, session,
    /// token), `extra` overriding them (an empty value drops one).
    fn request(&self, method: &str, body: &[u8], extra: &[(&str, &str)]) -> Answer {
        let mut headers: Vec<(String, String)> = vec![
            ("content-type".into(), "application/json".into()),
            (
                "accept".into(),
                "application/json, text/event-stream".into(),
            ),
        ];
        if let Some(s) = &self.session {
            headers.push(("mcp-session-id".into(), s.clone()));
        }
        if let Some(t) = &self.token {
            headers.push(("authorization".into(), format!("Bearer {t}")));
        }
        for (k, v) in extra {
            headers.retain(|(h, _)| !h.eq_ignore_ascii_case(k));
            if !v.is_empty() {
                headers.push((k.to_string(), v.to_string()));
            }
        }
        let mut req = self.agent.request(method, &self.url);
        for (k, v) in &headers {
            req = req.set(k, v);
        }
        let resp = match req.send_bytes(body) {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(e) => panic!("{method} {}: {e}", self.url),
        };
        let status = resp.status();
        let content_type = resp.header("content-type").unwrap_or("").to_string();
        let session = resp.header("mcp-session-id").map(str::to_string);
        let connection = resp.header("connection").unwrap_or("").to_string();
        let mut body = Vec::new();
        resp.into_reader()
            .take(16 << 20)
            .read_to_end(&mut body)
            .expect("the body");
        Answer {
            status,
            content_type,
            session,
            connection,
            body,
        }
    }

    fn post(&self, message: &Value) -> Answer {
        self.request("POST", message.to_string().as_bytes(), &[])
    }

    /// `initialize` and `notifications/initialized`; keeps the session id.
    fn initialize(&mut self) {
        let a = self.post(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "agenra-test", "version": "1"}}}));
        assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
        assert!(a.json()["result"]["serverInfo"]["name"].is_string());
        self.session = Some(a.session.expect("an Mcp-Session-Id"));
        let a = self.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        assert_eq!(a.status, 202);
        assert!(a.body.is_empty());
    }

    fn call(&self, id: i64, tool: &str, arguments: Value) -> Value {
        let a = self.post(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                                  "params": {"name": tool, "arguments": arguments}}));
        assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
        assert!(
            a.content_type.starts_with("application/json"),
            "{}",
            a.content_type
        );
        a.json()
    }

    fn exited_within(&mut self, within: Duration) -> Option<i32> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return Some(status.code().unwrap_or(-1));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for HttpProxy {
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

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("agenra-mcp-http-{}-{name}", std::process::id()))
}

/// The tools the fake server received calls for (its `MCP_FAKE_LOG`).
fn server_calls(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("a logged call");
            v["name"].as_str().unwrap_or_default().to_string()
        })
        .collect()
}

/// A raw HTTP/1.0 request (to set a `Host` of our own); the status.
fn raw_status(addr: &str, request: &str) -> u16 {
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(TIMEOUT)).expect("timeout");
    s.write_all(request.as_bytes()).expect("write");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {out:?}"))
}

/// Every refusal of the transport, each before anything reaches the
/// server: the fake server logs no call at all.
#[test]
fn the_transport_refuses_what_it_must_before_the_server_sees_it() {
    let log = temp("refusals.log");
    let _ = std::fs::remove_file(&log);
    let token_file = temp("refusals.token");
    std::fs::write(&token_file, "s3cret-token-for-the-test\n").expect("the token");
    let mut p = HttpProxy::start(
        &mcp_dir().join("policy.agr"),
        &["--http-token", token_file.to_str().expect("a path")],
        &fake_server(),
        &[("MCP_FAKE_LOG", &log)],
    );
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}}});
    // No token, a wrong one: 401, whatever the body.
    let a = p.post(&init);
    assert_eq!(a.status, 401, "{}", String::from_utf8_lossy(&a.body));
    // Its body unread, the connection is not kept for another request.
    assert_eq!(a.connection, "close");
    p.token = Some("s3cret-token-for-the-tesX".into());
    assert_eq!(p.post(&init).status, 401);
    p.token = Some("s3cret-token-for-the-test".into());
    // Not initialized yet: a request without a session is a 400.
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    assert_eq!(p.post(&ping).status, 400);
    p.initialize();
    // A second `initialize` without the session: one session per proxy.
    let session = p.session.take();
    let a = p.post(&init);
    assert_eq!(a.status, 400, "{}", String::from_utf8_lossy(&a.body));
    assert!(a.session.is_none());
    p.session = session;
    let a = p.post(&ping);
    assert_eq!(a.status, 200);
    assert_eq!(a.json()["result"], json!({}));
    // A browser page of another site, a rebound DNS name.
    let a = p.request(
        "POST",
        ping.to_string().as_bytes(),
        &[("origin", "http://evil.example")],
    );
    assert_eq!(a.status, 403);
    let a = p.request("POST", b"{}", &[("sec-fetch-site", "cross-site")]);
    assert_eq!(a.status, 403);
    let body = ping.to_string();
    let request = format!(
        "POST /mcp HTTP/1.0\r\nHost: rebound.example:80\r\nContent-Type: application/json\r\n\
         Authorization: Bearer s3cret-token-for-the-test\r\nMcp-Session-Id: {}\r\n\
         Content-Length: {}\r\n\r\n{body}",
        p.session.clone().unwrap_or_default(),
        body.len()
    );
    assert_eq!(raw_status(&p.addr(), &request), 403);
    // Not JSON by its type, too big, a wrong session, a wrong method, an
    // unknown protocol version, a GET that does not take events.
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "read_file", "arguments": {"path": "docs/a"}}});
    let line = call.to_string();
    let a = p.request("POST", line.as_bytes(), &[("content-type", "text/plain")]);
    assert_eq!(a.status, 415);
    assert_eq!(a.connection, "close");
    // Over 4 MiB: refused on its Content-Length, before the body is read.
    let request = format!(
        "POST /mcp HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Authorization: Bearer s3cret-token-for-the-test\r\nMcp-Session-Id: {}\r\n\
         Content-Length: {}\r\n\r\n{{\"jsonrpc\":\"2.0\"",
        p.session.clone().unwrap_or_default(),
        5 << 20
    );
    assert_eq!(raw_status(&p.addr(), &request), 413);
    let a = p.request("POST", line.as_bytes(), &[("mcp-session-id", "0123")]);
    assert_eq!(a.status, 404);
    let a = p.request(
        "POST",
        line.as_bytes(),
        &[("mcp-protocol-version", "1999-01-01")],
    );
    assert_eq!(a.status, 400);
    assert_eq!(p.request("PUT", line.as_bytes(), &[]).status, 405);
    let a = p.request("GET", b"", &[("accept", "application/json")]);
    assert_eq!(a.status, 406);
    // Unparseable (as stdio mode refuses it): -32700, HTTP 400; a batch.
    for body in [
        &b"{\"jsonrpc\":\"2.0\",\"id\":4,"[..],
        br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"docs/\ud800"}}}"#,
        b"{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":\"read_file\",\"arguments\":{\"path\":\"docs/\xff\"}}}",
        br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"docs/a","n":1e400}}}"#,
    ] {
        let a = p.request("POST", body, &[]);
        assert_eq!(a.status, 400, "{}", String::from_utf8_lossy(body));
        assert_eq!(a.json()["error"]["code"], json!(-32700));
    }
    let a = p.request("POST", format!("[{line}]").as_bytes(), &[]);
    assert_eq!(a.status, 400);
    assert_eq!(a.json()["error"]["code"], json!(-32600));
    // None of it reached the server.
    assert_eq!(server_calls(&log), Vec::<String>::new());
    // A JSON-RPC message spread over lines reaches the stdio server as one.
    let pretty = serde_json::to_string_pretty(&call).expect("JSON");
    let a = p.request("POST", pretty.as_bytes(), &[]);
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    assert!(!is_error(&a.json()), "{}", a.json());
    assert_eq!(server_calls(&log), vec!["read_file"]);
    // DELETE ends the session and the proxy (its server with it).
    assert_eq!(p.request("DELETE", b"", &[]).status, 200);
    assert_eq!(p.post(&ping).status, 404);
    assert_eq!(p.exited_within(Duration::from_secs(20)), Some(0));
    let _ = std::fs::remove_file(&log);
    let _ = std::fs::remove_file(&token_file);
}

/// Listening where others can reach it needs a token; a token without
/// `--listen`, or a bad token file, is refused too (exit 1, nothing started).
#[test]
fn a_reachable_endpoint_needs_a_token() {
    let weak = temp("weak.token");
    std::fs::write(&weak, "short\n").expect("a file");
    for (flags, says) in [
        (vec!["--listen", "0.0.0.0:0"], "needs --http-token"),
        (
            vec!["--http-token", weak.to_str().expect("a path")],
            "only used with --listen",
        ),
        (
            vec![
                "--listen",
                "127.0.0.1:0",
                "--http-token",
                weak.to_str().expect("a path"),
            ],
            "at least 16",
        ),
        (
            vec![
                "--listen",
                "127.0.0.1:0",
                "--http-token",
                "/nonexistent/token",
            ],
            "--http-token /nonexistent/token",
        ),
    ] {
        let out = Command::new(BIN)
            .arg("mcp-proxy")
            .arg("--policy")
            .arg(mcp_dir().join("policy.agr"))
            .args(&flags)
            .arg("--")
            .args(fake_server())
            .stdin(Stdio::null())
            .output()
            .expect("run agenra mcp-proxy");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{flags:?}: {stderr}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
    }
    let _ = std::fs::remove_file(&weak);
}

/// The decision path is stdio mode's: an allowed call is answered by the
/// server, a flow rule denies after an untrusted read, an undeclared tool
/// is `-32602`, a reused live id is refused, and the GET stream opens.
#[test]
fn calls_over_http_are_decided_as_over_stdio() {
    let log = temp("decided.log");
    let _ = std::fs::remove_file(&log);
    let mut p = HttpProxy::start(
        &mcp_dir().join("policy.agr"),
        &[],
        &fake_server(),
        &[("MCP_FAKE_LOG", &log)],
    );
    p.initialize();
    let a = p.call(
        1,
        "send_email",
        json!({"to": "a@example.com", "body": "hi"}),
    );
    assert!(!is_error(&a), "{a}");
    let a = p.call(2, "read_file", json!({"path": "docs/notes.md"}));
    assert!(!is_error(&a), "{a}");
    let a = p.call(
        3,
        "send_email",
        json!({"to": "a@example.com", "body": "the notes"}),
    );
    assert!(is_error(&a), "{a}");
    assert!(text(&a).contains("DENY by rule `no_untrusted_mail`"), "{a}");
    let a = p.call(4, "shell", json!({"cmd": "id"}));
    assert_eq!(a["error"]["code"], json!(-32602), "{a}");
    let a = p.call(5, "deploy", json!({"target": "prod"}));
    assert!(text(&a).contains("PAUSE by rule `deploy_reviewed`"), "{a}");
    assert_eq!(server_calls(&log), vec!["send_email", "read_file"]);
    // The GET stream (events for the client that answer no request) opens
    // in the session only.
    let head = |session: &str| {
        let mut s = std::net::TcpStream::connect(p.addr()).expect("connect");
        s.set_read_timeout(Some(TIMEOUT)).expect("timeout");
        write!(
            s,
            "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\
             Mcp-Session-Id: {session}\r\n\r\n"
        )
        .expect("write");
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).unwrap_or(0) == 1 {
            head.push(byte[0]);
        }
        String::from_utf8_lossy(&head).to_ascii_lowercase()
    };
    let got = head(p.session.as_deref().unwrap_or_default());
    assert!(got.starts_with("http/1.1 200"), "{got}");
    assert!(got.contains("content-type: text/event-stream"), "{got}");
    assert!(head("not-the-session").starts_with("http/1.1 404"));
    drop(p);
    let _ = std::fs::remove_file(&log);
}

/// `--on-pause wait` over HTTP: the paused call's POST is answered on an
/// event stream once an approver approves it through the approval
/// endpoints; the server ran it then, not before.
#[test]
fn a_paused_call_is_answered_once_approved() {
    let log = temp("paused.log");
    let _ = std::fs::remove_file(&log);
    let creds = Credentials::for_test("http-paused");
    let mut p = HttpProxy::start(
        &mcp_dir().join("policy.agr"),
        &[
            "--on-pause",
            "wait",
            "--approvals-listen",
            "127.0.0.1:0",
            "--pause-timeout",
            "60",
            "--tokens",
            creds.file.to_str().expect("a path"),
        ],
        &fake_server(),
        &[("MCP_FAKE_LOG", &log)],
    );
    let line = p.stderr_line("approvals on http://");
    let approvals: std::net::SocketAddr = line
        .split("approvals on http://")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|a| a.parse().ok())
        .expect("the approvals address");
    p.initialize();
    let url = p.url.clone();
    let session = p.session.clone().expect("a session");
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let resp = ureq::AgentBuilder::new()
            .timeout(TIMEOUT)
            .build()
            .post(&url)
            .set("content-type", "application/json")
            .set("accept", "application/json, text/event-stream")
            .set("mcp-session-id", &session)
            .send_string(
                &json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                        "params": {"name": "deploy", "arguments": {"target": "prod"}}})
                .to_string(),
            );
        let resp = match resp {
            Ok(r) => r,
            Err(e) => {
                let _ = tx.send(Err(e.to_string()));
                return;
            }
        };
        let kind = resp.header("content-type").unwrap_or("").to_string();
        let mut data = None;
        for line in BufReader::new(resp.into_reader()).lines() {
            let Ok(line) = line else { break };
            if let Some(d) = line.strip_prefix("data: ") {
                data = Some(d.to_string());
            }
        }
        let _ = tx.send(Ok((kind, data)));
    });
    let mut http = agenra_gateway::client::Client::connect(approvals)
        .expect("connect")
        .with_token(&creds.approver);
    let listed = harness::wait_for_approvals(&mut http, 1);
    let call = listed[0]["call"].as_str().expect("a call id").to_string();
    assert_eq!(
        server_calls(&log),
        Vec::<String>::new(),
        "ran before approval"
    );
    assert!(rx.try_recv().is_err(), "answered before approval");
    let (status, out) = harness::approve(&mut http, &call);
    assert_eq!(status, 200, "{out}");
    let (kind, data) = rx
        .recv_timeout(TIMEOUT)
        .expect("an answer")
        .expect("the POST");
    assert_eq!(kind, "text/event-stream");
    let answer: Value = serde_json::from_str(&data.expect("one event")).expect("JSON");
    assert_eq!(answer["id"], json!(9), "{answer}");
    assert!(!is_error(&answer), "{answer}");
    assert!(text(&answer).contains("deploy ok"), "{answer}");
    assert_eq!(server_calls(&log), vec!["deploy"]);
    // A client taking JSON only waits for the JSON answer; its
    // `notifications/cancelled` rejects the waiting call, which never runs,
    // and ends its POST.
    let url = p.url.clone();
    let session = p.session.clone().expect("a session");
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let resp = ureq::AgentBuilder::new()
            .timeout(TIMEOUT)
            .build()
            .post(&url)
            .set("content-type", "application/json")
            .set("accept", "application/json")
            .set("mcp-session-id", &session)
            .send_string(
                &json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call",
                        "params": {"name": "deploy", "arguments": {"target": "staging"}}})
                .to_string(),
            )
            .map_err(|e| e.to_string())
            .and_then(|r| r.into_string().map_err(|e| e.to_string()));
        let _ = tx.send(resp);
    });
    harness::wait_for_approvals(&mut http, 1);
    let a = p.post(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                           "params": {"requestId": 10, "reason": "changed my mind"}}),
    );
    assert_eq!(a.status, 202);
    let body = rx
        .recv_timeout(TIMEOUT)
        .expect("an answer")
        .expect("the POST");
    let answer: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(answer["id"], json!(10), "{answer}");
    assert_eq!(answer["error"]["code"], json!(-32800), "{answer}");
    harness::wait_for_approvals(&mut http, 0);
    assert_eq!(server_calls(&log), vec!["deploy"]);
    let _ = std::fs::remove_file(&log);
    let _ = std::fs::remove_file(&creds.file);
}

/// What was read from `docs/` is untrusted and never written to `out/`.
const FLOW_POLICY: &str = concat!(
    "policy \"mcp-filesystem-flow\";\n",
    "levels public < internal;\ncategories web;\nsinks disk;\n",
    "tool read_text_file(path: string, head?: int, tail?: int) {\n",
    "  resource path;\n  output <public, {web}, untrusted>;\n}\n",
    "tool write_file(path: string, content: string) { resource path; sink disk; }\n",
    "grant docs: read_text_file on prefix \"{docs}/\" quota unlimited;\n",
    "grant out: write_file on prefix \"{out}/\" quota unlimited;\n",
    "deny flow no_untrusted_write: untrusted -> disk;\n",
);

/// Through the HTTP listener to the published filesystem server: an
/// allowed write and read run; a write without a grant is refused and the
/// file is unchanged; after the read, the flow rule denies a write; an
/// unparseable call never reaches the server.
#[test]
fn the_http_listener_guards_the_published_filesystem_server() {
    let Ok(server) = std::env::var("AGENRA_MCP_FS_SERVER") else {
        eprintln!("SKIPPED: AGENRA_MCP_FS_SERVER is not set (.ci/run sets it)");
        return;
    };
    let root = temp("fs");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("docs")).expect("a temp dir");
    std::fs::create_dir_all(root.join("out")).expect("a temp dir");
    std::fs::write(root.join("docs/note.txt"), "the secret\n").expect("a file");
    let root = root.canonicalize().expect("the temp dir");
    let (docs, out) = (root.join("docs"), root.join("out"));
    let policy = root.join("policy.agr");
    std::fs::write(
        &policy,
        FLOW_POLICY
            .replace("{docs}", &docs.display().to_string())
            .replace("{out}", &out.display().to_string()),
    )
    .expect("the policy");
    let mut p = HttpProxy::start(&policy, &[], &[server, root.display().to_string()], &[]);
    p.initialize();
    // Before anything was read, a write to out/ is allowed and runs.
    let first = out.join("first.txt");
    let a = p.call(1, "write_file", json!({"path": first, "content": "mine"}));
    assert!(!is_error(&a), "{a}");
    assert_eq!(
        std::fs::read_to_string(&first).ok().as_deref(),
        Some("mine")
    );
    // No grant to write docs/: refused, the file unchanged.
    let note = docs.join("note.txt");
    let a = p.call(
        2,
        "write_file",
        json!({"path": note, "content": "overwritten"}),
    );
    assert!(is_error(&a), "{a}");
    assert!(text(&a).contains("DENY"), "{a}");
    assert_eq!(
        std::fs::read_to_string(&note).ok().as_deref(),
        Some("the secret\n")
    );
    // The read runs; then the flow rule denies writing anything out.
    let a = p.call(3, "read_text_file", json!({"path": note}));
    assert!(!is_error(&a), "{a}");
    assert_eq!(text(&a), "the secret\n", "{a}");
    let leak = out.join("leak.txt");
    let a = p.call(
        4,
        "write_file",
        json!({"path": leak, "content": "the secret"}),
    );
    assert!(is_error(&a), "{a}");
    assert!(text(&a).contains("no_untrusted_write"), "{a}");
    assert!(!leak.exists(), "a denied write reached the server");
    // A lone surrogate the Node server would read: -32700, never run.
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"write_file","arguments":{{"path":{},"content":"\ud800 the secret"}}}}}}"#,
        json!(leak)
    );
    let a = p.request("POST", body.as_bytes(), &[]);
    assert_eq!(a.status, 400);
    assert_eq!(a.json()["error"]["code"], json!(-32700));
    assert!(!leak.exists(), "an unparseable write reached the server");
    drop(p);
    let _ = std::fs::remove_dir_all(&root);
}

/// A proxy whose client speaks stdio and whose server is reached over
/// HTTP (`--upstream`): here a second proxy's `--listen` in front of the
/// fake server, in wait mode, so a call it holds is answered on an event
/// stream. The first proxy decides every call (a flow it denies never
/// reaches the second); the second's answers, JSON or events, come back.
#[test]
fn upstream_over_http_chains_to_a_listening_proxy() {
    let log = temp("upstream.log");
    let _ = std::fs::remove_file(&log);
    let creds = Credentials::for_test("http-upstream");
    let far = HttpProxy::start(
        &mcp_dir().join("policy.agr"),
        &[
            "--on-pause",
            "wait",
            "--approvals-listen",
            "127.0.0.1:0",
            "--tokens",
            creds.file.to_str().expect("a path"),
        ],
        &fake_server(),
        &[("MCP_FAKE_LOG", &log)],
    );
    let approvals: std::net::SocketAddr = far
        .stderr_line("approvals on http://")
        .split("approvals on http://")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|a| a.parse().ok())
        .expect("the approvals address");
    // The near proxy lets `deploy` run without approval: the far one holds it.
    let near_policy = temp("upstream-near.agr");
    let original = std::fs::read_to_string(mcp_dir().join("policy.agr")).expect("the policy");
    std::fs::write(
        &near_policy,
        original.replace(
            "grant deploy_reviewed: deploy quota 5 approval;",
            "grant deploy_free: deploy quota 5;",
        ),
    )
    .expect("a policy");
    let mut near = Command::new(BIN)
        .arg("mcp-proxy")
        .arg("--policy")
        .arg(&near_policy)
        .args(["--upstream", &far.url])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the near proxy");
    let mut stdin = near.stdin.take().expect("stdin");
    let (tx, lines) = channel();
    let out = near.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut send = |m: Value| writeln!(stdin, "{m}").and_then(|()| stdin.flush());
    let recv = || -> Value {
        let line = lines.recv_timeout(TIMEOUT).expect("an answer in time");
        serde_json::from_str(&line).expect("JSON")
    };
    let call = |id: i64, tool: &str, args: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": tool, "arguments": args}})
    };
    // Sent without waiting: the notification waits for the session id.
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}}}))
    .expect("write");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).expect("write");
    let init = recv();
    assert_eq!(
        init["result"]["serverInfo"]["name"],
        json!("fake"),
        "{init}"
    );
    send(call(2, "read_file", json!({"path": "docs/a"}))).expect("write");
    let a = recv();
    assert!(!is_error(&a), "{a}");
    // Denied by the near proxy's flow rule: never reaches the far one.
    send(call(
        3,
        "send_email",
        json!({"to": "a@example.com", "body": "x"}),
    ))
    .expect("write");
    let a = recv();
    assert!(text(&a).contains("DENY by rule `no_untrusted_mail`"), "{a}");
    // Allowed near, held far: answered (on the far proxy's event stream)
    // once approved there.
    send(call(4, "deploy", json!({"target": "prod"}))).expect("write");
    let mut http = agenra_gateway::client::Client::connect(approvals)
        .expect("connect")
        .with_token(&creds.approver);
    let listed = harness::wait_for_approvals(&mut http, 1);
    let held = listed[0]["call"].as_str().expect("a call id").to_string();
    assert!(lines.try_recv().is_err(), "answered before approval");
    let (status, out) = harness::approve(&mut http, &held);
    assert_eq!(status, 200, "{out}");
    let a = recv();
    assert_eq!(a["id"], json!(4), "{a}");
    assert!(text(&a).contains("deploy ok"), "{a}");
    assert_eq!(server_calls(&log), vec!["read_file", "deploy"]);
    // The client closes: the near proxy ends the far session (DELETE), and
    // both exit.
    drop(stdin);
    let deadline = Instant::now() + TIMEOUT;
    let code = loop {
        if let Some(s) = near.try_wait().expect("wait") {
            break s.code();
        }
        assert!(Instant::now() < deadline, "the near proxy did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(code, Some(0));
    let mut far = far;
    assert_eq!(far.exited_within(TIMEOUT), Some(0));
    let _ = std::fs::remove_file(&log);
    let _ = std::fs::remove_file(&near_policy);
    let _ = std::fs::remove_file(&creds.file);
}

/// An upstream that does not answer: each request gets a JSON-RPC error
/// from the proxy, and an allowed call is recorded `unknown` (it may have
/// run): its untrusted label then denies the e-mail.
#[test]
fn an_unreachable_upstream_leaves_calls_unknown() {
    // A port nothing listens on (bound, then closed).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a port")
        .port();
    let mut near = Command::new(BIN)
        .arg("mcp-proxy")
        .arg("--policy")
        .arg(mcp_dir().join("policy.agr"))
        .args(["--upstream", &format!("http://127.0.0.1:{port}/mcp")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the proxy");
    let mut stdin = near.stdin.take().expect("stdin");
    let mut out = BufReader::new(near.stdout.take().expect("stdout"));
    let mut ask = |m: Value| -> Value {
        writeln!(stdin, "{m}").expect("write");
        stdin.flush().expect("flush");
        let mut line = String::new();
        out.read_line(&mut line).expect("an answer");
        serde_json::from_str(&line).expect("JSON")
    };
    let a = ask(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "read_file", "arguments": {"path": "docs/a"}}}));
    assert_eq!(a["error"]["code"], json!(-32603), "{a}");
    assert!(
        a["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("unknown"),
        "{a}"
    );
    let a = ask(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "send_email", "arguments": {"to": "a@example.com", "body": "x"}}}));
    assert!(text(&a).contains("no_untrusted_mail"), "{a}");
    let _ = near.kill();
    let _ = near.wait();
    // A server command and --upstream together, or an https:// URL: exit 1
    // or a usage error, nothing started.
    for (args, code) in [
        (vec!["--upstream", "https://example.com/mcp"], 1),
        (
            vec!["--upstream", "http://127.0.0.1:9/mcp", "--", "python3"],
            2,
        ),
    ] {
        let out = Command::new(BIN)
            .arg("mcp-proxy")
            .arg("--policy")
            .arg(mcp_dir().join("policy.agr"))
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(code), "{args:?}");
    }
}

/// `agenra bench mcp --http`: the bench's JSON line, the client reaching
/// the proxy over MCP's streamable HTTP (`mcp-proxy --listen`). The
/// figures are not asserted (a loaded machine may make them anything).
#[test]
fn bench_mcp_over_http_prints_its_figures() {
    let out = Command::new(BIN)
        .args(["bench", "mcp", "--json", "--http", "--samples", "50"])
        .output()
        .expect("run agenra bench mcp --http");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).expect("UTF-8");
    let v: Value = serde_json::from_str(stdout.trim_end()).expect("one JSON line");
    assert_eq!(v["transport"], json!("http"), "{v}");
    assert_eq!(v["samples"], json!(50));
    let p50 = v["p50_ms"].as_f64().expect("p50_ms");
    let p99 = v["p99_ms"].as_f64().expect("p99_ms");
    assert!(p50 > 0.0 && p50 <= p99, "{v}");
}
