//! A gateway with credentials, served in this process, and a raw HTTP
//! helper that shows headers (cookies), for the approvals page's tests.
#![allow(dead_code)]

use agenra_core::CompiledPolicy;
use agenra_gateway::auth::{Credentials, Role};
use agenra_gateway::client::Client;
use agenra_gateway::{Gateway, Limits, Perimeter};
use agenra_store::Log;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Reads `internal` data and posting it to the net asks a human; `secret`
/// data never goes out (so an approval after a secret read is denied at
/// its re-check).
pub const POLICY: &str = r#"
levels public < internal < secret;
sinks net;
tool read(key: string) { resource key; output <internal, {}, trusted>; }
tool peek(key: string) { resource key; output <secret, {}, trusted>; }
tool post(body: string) { sink net; }
grant r: read quota unlimited;
grant k: peek quota unlimited;
grant p: post quota 3;
pause flow ask: sensitivity >= internal -> net;
deny flow secrets_out: sensitivity >= secret -> net;
"#;

pub struct Desk {
    pub server: Option<agenra_gateway::Server>,
    pub dir: PathBuf,
    pub agent: String,
    pub approver: String,
    pub other_approver: String,
    pub admin: String,
    pub tokens: PathBuf,
}

impl Drop for Desk {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.stop();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Desk {
    /// A gateway with an agent (`bot`, tenant acme), an approver (`alice`,
    /// acme), another (`bob`, tenant beta) and an admin; `split` puts the
    /// control routes on their own listener.
    pub fn start(name: &str, split: bool) -> Desk {
        let dir = std::env::temp_dir().join(format!("agenra-desk-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let tokens = dir.join("tokens.json");
        let mut c = Credentials::load_or_empty(&tokens).unwrap();
        let agent = c.add("bot", Role::Agent, vec!["acme".into()]).unwrap();
        let approver = c.add("alice", Role::Approver, vec!["acme".into()]).unwrap();
        let other_approver = c.add("bob", Role::Approver, vec!["beta".into()]).unwrap();
        let admin = c.add("ops", Role::Admin, vec![]).unwrap();
        c.save(&tokens).unwrap();
        let policy = agenra_policy::compile(POLICY, "desk").unwrap().policy;
        let gw = Gateway::open(
            Log::open_redb(&dir.join("store.redb")).unwrap(),
            CompiledPolicy::new(policy).unwrap(),
            "desk",
            false,
        )
        .unwrap();
        let perimeter = Perimeter::tokens(tokens.clone(), vec![]).unwrap();
        let server = agenra_gateway::Server::spawn_split(
            Arc::new(gw),
            Arc::new(perimeter),
            "127.0.0.1:0",
            split.then_some("127.0.0.1:0"),
            Limits::default(),
        )
        .unwrap();
        Desk {
            server: Some(server),
            dir,
            agent,
            approver,
            other_approver,
            admin,
            tokens,
        }
    }

    fn s(&self) -> &agenra_gateway::Server {
        self.server.as_ref().unwrap()
    }

    /// The agent's address.
    pub fn addr(&self) -> SocketAddr {
        self.s().addr()
    }

    /// The approver's address (the control listener when split).
    pub fn control(&self) -> SocketAddr {
        self.s().control_addr().unwrap_or_else(|| self.s().addr())
    }

    pub fn gateway(&self) -> &Arc<Gateway> {
        self.s().gateway()
    }

    pub fn agent(&self) -> Client {
        Client::connect(self.addr())
            .unwrap()
            .with_token(&self.agent)
    }

    /// Opens session `s` of acme.
    pub fn open_session(&self, s: &str) {
        let (st, out) = self
            .agent()
            .post("/v1/sessions", &json!({"session": s}))
            .unwrap();
        assert!(st == 201 || st == 200, "{st} {out}");
    }

    /// Sends a call; its answer.
    pub fn call(&self, s: &str, id: &str, tool: &str, args: Value) -> Value {
        let (st, out) = self
            .agent()
            .post(
                "/v1/authorize",
                &json!({"session": s, "call": {"id": id, "tool": tool, "args": args}}),
            )
            .unwrap();
        assert_eq!(st, 200, "{out}");
        out
    }

    /// Reports a call's result as succeeded.
    pub fn succeed(&self, s: &str, id: &str) -> Value {
        let (st, out) = self
            .agent()
            .post(
                "/v1/report",
                &json!({"session": s, "call": id, "status": "succeeded", "output": "x"}),
            )
            .unwrap();
        assert_eq!(st, 200, "{out}");
        out
    }

    /// The session as its agent sees it.
    pub fn session(&self, s: &str) -> Value {
        let (st, out) = self.agent().get(&format!("/v1/sessions/{s}")).unwrap();
        assert_eq!(st, 200, "{out}");
        out
    }
}

/// An answer: status, headers (lowercase names) and body.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::String(self.body.clone()))
    }
}

/// One request on its own connection (`Connection: close`), with the
/// given extra headers; `body` is sent as JSON unless a Content-Type is
/// given.
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
    {
        head.push_str("Content-Type: application/json\r\n");
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (top, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = top.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Answer {
        status,
        headers,
        body: rest.to_string(),
    }
}

/// Signs in at the desk with `token`; the cookie header to send.
pub fn sign_in(addr: SocketAddr, token: &str) -> String {
    let a = http(
        addr,
        "POST",
        "/desk/login",
        &[],
        &json!({"token": token}).to_string(),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    let c = a.header("set-cookie").expect("a cookie");
    assert!(
        c.contains("HttpOnly") && c.contains("SameSite=Strict"),
        "{c}"
    );
    c.split(';').next().unwrap().to_string()
}
