//! The perimeter of `agenra serve` (the built binary, with credentials):
//! each test is the regression test of one finding of the perimeter issue
//! (docs/http-api.md, "Who may call what"; docs/failure-modes.md).

use agenra_gateway::auth::{Credentials, Role};
use agenra_gateway::client::Client;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_agenra");

const POLICY: &str = r#"
tool pay.send(to: string, amount: int) { resource to; }

grant pay: pay.send on glob "*@example.com" quota 2;
grant big: pay.send on glob "*@big.example" quota 3 approval;
grant old: pay.send on glob "*@old.example" quota 5 expires 1000;
"#;

struct Server {
    child: Child,
    addr: SocketAddr,
    control: Option<SocketAddr>,
    dir: PathBuf,
    agent: String,
    other_agent: String,
    approver: String,
    admin: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_addr() -> SocketAddr {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("127.0.0.1:{port}").parse().unwrap()
}

fn serve(name: &str, extra: &[&str], control: bool) -> Server {
    let dir = std::env::temp_dir().join(format!("agenra-perim-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("policy.agr"), POLICY).unwrap();
    let tokens = dir.join("tokens.json");
    let mut c = Credentials::load_or_empty(&tokens).unwrap();
    let agent = c.add("bot", Role::Agent, vec!["acme".into()]).unwrap();
    let other_agent = c.add("rival", Role::Agent, vec!["beta".into()]).unwrap();
    let approver = c.add("alice", Role::Approver, vec!["acme".into()]).unwrap();
    let admin = c.add("ops", Role::Admin, vec![]).unwrap();
    c.save(&tokens).unwrap();
    let addr = free_addr();
    let control = control.then(free_addr);
    let mut cmd = Command::new(BIN);
    cmd.arg("serve")
        .arg("--policy")
        .arg(dir.join("policy.agr"))
        .arg("--store")
        .arg(dir.join("store.redb"))
        .arg("--tokens")
        .arg(&tokens)
        .args(["--listen", &addr.to_string()])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(c) = control {
        cmd.args(["--control-listen", &c.to_string()]);
    }
    let child = cmd.spawn().unwrap();
    let server = Server {
        child,
        addr,
        control,
        dir,
        agent,
        other_agent,
        approver,
        admin,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(mut c) = Client::connect(addr) {
            if matches!(c.get("/health"), Ok((200, _))) {
                return server;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("agenra serve did not come up");
}

fn as_(s: &Server, token: &str) -> Client {
    Client::connect(s.addr).unwrap().with_token(token)
}

fn call(id: &str, to: &str) -> Value {
    json!({"session": "s", "call": {"id": id, "tool": "pay.send", "args": {"to": to, "amount": 1}}})
}

/// The audit records of the (stopped) server's store.
fn records(s: &mut Server) -> Vec<Value> {
    let _ = s.child.kill();
    let _ = s.child.wait();
    let file = s.dir.join("audit.jsonl");
    let out = Command::new(BIN)
        .args(["audit", "export", "--store"])
        .arg(s.dir.join("store.redb"))
        .arg("-o")
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Finding 1: the policy route took any client. Now only an admin may
/// revise the policy; every refusal is a JSON 401/403 and an audit record.
#[test]
fn only_an_admin_revises_the_policy_and_refusals_are_recorded() {
    let mut s = serve("policy", &["--require-certified"], false);
    let wider = POLICY.replace("quota 2;", "quota 5;");
    let body = json!({"source": wider});
    let mut anon = Client::connect(s.addr).unwrap();
    let (status, out) = anon.post("/v1/policy", &body).unwrap();
    assert_eq!(
        (status, &out["field"]),
        (401, &json!("authorization")),
        "{out}"
    );
    for token in [&s.agent, &s.approver] {
        let (status, out) = as_(&s, token).post("/v1/policy", &body).unwrap();
        assert_eq!(
            (status, &out["field"]),
            (403, &json!("authorization")),
            "{out}"
        );
    }
    // The admin: a widening revision needs an explicit allow_widening.
    let mut admin = as_(&s, &s.admin);
    let (status, out) = admin.post("/v1/policy", &body).unwrap();
    assert_eq!(
        (status, &out["field"]),
        (409, &json!("allow_widening")),
        "{out}"
    );
    let (_, h) = anon.get("/health").unwrap();
    let first = h["policy_hash"].clone();
    // Metrics are the admin's too.
    let (status, _) = as_(&s, &s.agent).get("/metrics").unwrap();
    assert_eq!(status, 403);
    let (status, _) = admin.get("/metrics").unwrap();
    assert_eq!(status, 200);
    let (status, out) = admin
        .post(
            "/v1/policy",
            &json!({"source": wider, "allow_widening": true}),
        )
        .unwrap();
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["widens"], true, "{out}");
    let recs = records(&mut s);
    let refused: Vec<&Value> = recs.iter().filter(|r| r["kind"] == "refused").collect();
    assert_eq!(refused.len(), 4, "{refused:?}");
    assert!(refused[0]["reason"]
        .as_str()
        .unwrap()
        .starts_with("401 POST /v1/policy"));
    assert_eq!(refused[1]["actor"], "agent:bot", "{:?}", refused[1]);
    assert_eq!(refused[2]["actor"], "approver:alice");
    assert_eq!(refused[3]["actor"], "agent:bot");
    let revision = recs.iter().rfind(|r| r["kind"] == "policy").unwrap();
    assert_eq!(revision["actor"], "admin:ops", "{revision}");
    assert_eq!(revision["previous"], first, "{revision}");
    assert_ne!(revision["policy_hash"], first);
    // The chain holds the refusals too.
    let out = Command::new(BIN)
        .args(["audit", "verify", "--store"])
        .arg(s.dir.join("store.redb"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// The credential fixes the agent's tenant: a body naming another is a
/// 403, and an agent cannot read another tenant's session.
#[test]
fn an_agent_acts_for_its_own_tenant_only() {
    let s = serve("tenant", &[], false);
    let mut bot = as_(&s, &s.agent);
    let (status, out) = bot.post("/v1/sessions", &json!({"session": "s"})).unwrap();
    assert_eq!(status, 201, "{out}");
    assert_eq!(out["tenant"], "acme");
    let (status, out) = bot
        .post("/v1/sessions", &json!({"tenant": "beta", "session": "x"}))
        .unwrap();
    assert_eq!((status, &out["field"]), (403, &json!("tenant")), "{out}");
    let mut c = call("c1", "a@example.com");
    c["tenant"] = json!("beta");
    let (status, _) = bot.post("/v1/authorize", &c).unwrap();
    assert_eq!(status, 403);
    let (status, out) = bot
        .post("/v1/authorize", &call("c1", "a@example.com"))
        .unwrap();
    assert_eq!((status, &out["decision"]), (200, &json!("ALLOW")), "{out}");
    let mut rival = as_(&s, &s.other_agent);
    let (status, _) = rival.get("/v1/sessions/s?tenant=acme").unwrap();
    assert_eq!(status, 403);
    let (status, out) = rival.get("/v1/sessions/s").unwrap();
    assert_eq!((status, &out["field"]), (404, &json!("session")), "{out}");
    // Agents do not settle pauses or list them.
    let (status, _) = bot.get("/v1/approvals").unwrap();
    assert_eq!(status, 403);
}

/// Finding 2: a guarded agent approved its own PAUSE, with no approver
/// recorded, no expiry, and nothing tying the approval to the call shown.
#[test]
fn approvals_are_an_approvers_bound_to_the_call_shown_and_expire() {
    let mut s = serve("approve", &["--pause-timeout", "3"], false);
    let mut bot = as_(&s, &s.agent);
    bot.post("/v1/sessions", &json!({"session": "s"})).unwrap();
    let (_, p) = bot
        .post("/v1/authorize", &call("c1", "x@big.example"))
        .unwrap();
    assert_eq!(p["decision"], "PAUSE", "{p}");
    let mut alice = as_(&s, &s.approver);
    let (status, list) = alice.get("/v1/approvals").unwrap();
    assert_eq!(status, 200, "{list}");
    let shown = list["approvals"][0].clone();
    assert_eq!(shown["args"], json!({"to": "x@big.example", "amount": 1}));
    assert_eq!(
        shown["expires"].as_u64().unwrap(),
        shown["time"].as_u64().unwrap() + 3
    );
    let digest = shown["digest"].clone();
    let ok = json!({"digest": digest, "reason": "known payee"});
    // The agent cannot approve itself, even with the right digest.
    let (status, _) = bot.post("/v1/approvals/c1/approve", &ok).unwrap();
    assert_eq!(status, 403);
    // Not the call shown: refused.
    let (status, out) = alice
        .post(
            "/v1/approvals/c1/approve",
            &json!({"digest": "sha256:1234", "reason": "r"}),
        )
        .unwrap();
    assert_eq!((status, &out["field"]), (409, &json!("digest")), "{out}");
    let (status, out) = alice
        .post("/v1/approvals/c1/approve", &json!({"digest": digest}))
        .unwrap();
    assert_eq!((status, &out["field"]), (422, &json!("reason")), "{out}");
    let (status, out) = alice.post("/v1/approvals/c1/approve", &ok).unwrap();
    assert_eq!((status, &out["decision"]), (200, &json!("ALLOW")), "{out}");
    // Once: a second approval finds nothing waiting (404 when it names no
    // session, 409 when it names the call's).
    let (status, _) = alice.post("/v1/approvals/c1/approve", &ok).unwrap();
    assert_eq!(status, 404);
    let mut again = ok.clone();
    again["session"] = json!("s");
    let (status, out) = alice.post("/v1/approvals/c1/approve", &again).unwrap();
    assert_eq!((status, &out["field"]), (409, &json!("call")), "{out}");

    // A pause nobody answers expires: rejected, its unit returned.
    let (_, p) = bot
        .post("/v1/authorize", &call("c2", "y@big.example"))
        .unwrap();
    assert_eq!(p["decision"], "PAUSE", "{p}");
    let (_, list) = alice.get("/v1/approvals").unwrap();
    let late = json!({"digest": list["approvals"][0]["digest"], "reason": "late"});
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, v) = bot.get("/v1/sessions/s").unwrap();
        if v["pending"] == json!([]) {
            assert_eq!(v["ledger"]["big"], 2, "{v}");
            break;
        }
        assert!(Instant::now() < deadline, "the pause never expired: {v}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Too late: nothing waits any more.
    let (status, out) = alice.post("/v1/approvals/c2/approve", &late).unwrap();
    assert_eq!((status, &out["field"]), (404, &json!("call")), "{out}");
    let recs = records(&mut s);
    let approve = recs
        .iter()
        .find(|r| r["event"]["kind"] == "approve")
        .unwrap();
    assert_eq!(approve["actor"], "approver:alice", "{approve}");
    assert_eq!(approve["digest"], digest, "{approve}");
    assert_eq!(approve["note"], "known payee", "{approve}");
    let expired = recs
        .iter()
        .find(|r| r["event"]["kind"] == "reject")
        .unwrap();
    assert_eq!(expired["actor"], "server:pause-timeout", "{expired}");
    assert_eq!(expired["grants"], json!(["big"]), "{expired}");
    // The report says who settled each pause and why.
    let out = Command::new(BIN)
        .args([
            "audit",
            "report",
            "--tenant",
            "acme",
            "--session",
            "s",
            "--store",
        ])
        .arg(s.dir.join("store.redb"))
        .output()
        .unwrap();
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(md.contains("approved by approver:alice"), "{md}");
    assert!(md.contains("known payee"), "{md}");
    assert!(md.contains("rejected by server:pause-timeout"), "{md}");
}

/// Finding 3: a `text/plain` POST from a foreign page approved a paused
/// call. Now approver routes need JSON, the credential, and this server's
/// own Origin and Host.
#[test]
fn a_web_page_cannot_approve() {
    let s = serve("csrf", &[], false);
    let mut bot = as_(&s, &s.agent);
    bot.post("/v1/sessions", &json!({"session": "s"})).unwrap();
    bot.post("/v1/authorize", &call("c1", "x@big.example"))
        .unwrap();
    let mut alice = as_(&s, &s.approver);
    let (_, list) = alice.get("/v1/approvals").unwrap();
    let body = json!({"digest": list["approvals"][0]["digest"], "reason": "r"}).to_string();
    let send = |host: &str, headers: &str, ctype: &str| -> u16 {
        use std::io::{Read, Write};
        let mut t = std::net::TcpStream::connect(s.addr).unwrap();
        t.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(
            t,
            "POST /v1/approvals/c1/approve HTTP/1.1\r\nHost: {host}\r\n{headers}Content-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut out = String::new();
        let _ = t.read_to_string(&mut out);
        out.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    let host = s.addr.to_string();
    let auth = format!("Authorization: Bearer {}\r\n", s.approver);
    assert_eq!(
        send(&host, "Origin: http://evil.example\r\n", "text/plain"),
        403
    );
    assert_eq!(
        send(
            &host,
            &format!("{auth}Origin: http://evil.example\r\n"),
            "application/json"
        ),
        403
    );
    assert_eq!(send(&host, &auth, "text/plain"), 415);
    let rebound = format!("attacker.example:{}", s.addr.port());
    assert_eq!(send(&rebound, &auth, "application/json"), 403);
    let (_, v) = alice.get("/v1/sessions/s?tenant=acme").unwrap();
    assert_eq!(v["pending"], json!(["c1"]), "still waiting: {v}");
    assert_eq!(
        send(
            &host,
            &format!("{auth}Origin: http://{host}\r\n"),
            "application/json"
        ),
        200
    );
}

/// Finding 4: the client's `time` decided expiry and moved the session's
/// clock. Now the server's clock decides; a claimed time far from it is a
/// 422 and changes nothing.
#[test]
fn the_servers_clock_decides() {
    let s = serve("clock", &[], false);
    let mut bot = as_(&s, &s.agent);
    bot.post("/v1/sessions", &json!({"session": "s"})).unwrap();
    // `old` expired at 1000: a call claiming time 1 is refused...
    let mut c = call("c1", "a@old.example");
    c["call"]["time"] = json!(1);
    let (status, out) = bot.post("/v1/authorize", &c).unwrap();
    assert_eq!((status, &out["field"]), (422, &json!("call.time")), "{out}");
    // ... and without it the server's clock finds the grant expired.
    let (_, out) = bot
        .post("/v1/authorize", &call("c1", "a@old.example"))
        .unwrap();
    assert_eq!(out["decision"], "DENY", "{out}");
    // A far-future time cannot fix the session's clock there.
    let mut c = call("c2", "a@example.com");
    c["call"]["time"] = json!(u64::MAX / 2);
    let (status, _) = bot.post("/v1/authorize", &c).unwrap();
    assert_eq!(status, 422);
    // A time close to the server's clock is recorded, not used.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut c = call("c3", "a@example.com");
    c["call"]["time"] = json!(now - 60);
    let (_, out) = bot.post("/v1/authorize", &c).unwrap();
    assert_eq!(out["decision"], "ALLOW", "{out}");
    let (_, out) = bot
        .post("/v1/authorize", &call("c4", "a@example.com"))
        .unwrap();
    assert_eq!(out["decision"], "ALLOW", "{out}");
}

/// The server never starts open: no credentials is an error, exit 1.
#[test]
fn no_credentials_no_server() {
    let dir = std::env::temp_dir().join(format!("agenra-perim-none-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("p.agr"), POLICY).unwrap();
    let run = |extra: &[&str]| {
        Command::new(BIN)
            .arg("serve")
            .arg("--policy")
            .arg(dir.join("p.agr"))
            .arg("--store")
            .arg(dir.join("s.redb"))
            .args(["--listen", "127.0.0.1:0"])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no credentials: pass --tokens FILE"), "{err}");
    assert!(!dir.join("s.redb").exists(), "nothing was opened");
    std::fs::write(dir.join("empty.json"), "{\"version\":1,\"tokens\":[]}").unwrap();
    let tokens = dir.join("empty.json");
    let out = run(&["--tokens", tokens.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no credentials"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--control-listen`: approvals and policy are not on the agent's port.
#[test]
fn control_routes_listen_apart() {
    let s = serve("split", &[], true);
    let control = s.control.unwrap();
    let mut bot = as_(&s, &s.agent);
    let (status, out) = bot.get("/v1/approvals").unwrap();
    assert_eq!((status, &out["field"]), (404, &json!("path")), "{out}");
    let mut alice = as_(&s, &s.approver);
    assert_eq!(alice.get("/v1/approvals").unwrap().0, 404);
    let mut alice = Client::connect(control).unwrap().with_token(&s.approver);
    assert_eq!(alice.get("/v1/approvals").unwrap().0, 200);
    let (status, _) = alice
        .post("/v1/authorize", &call("c1", "a@example.com"))
        .unwrap();
    assert_eq!(status, 404);
}

/// Revoking a credential: `agenra token remove`, then SIGHUP, and its
/// token stops working; a credentials file that no longer reads keeps the
/// old credentials.
#[test]
fn a_removed_token_stops_working_after_sighup() {
    let s = serve("revoke", &[], false);
    let tokens = s.dir.join("tokens.json");
    let mut bot = as_(&s, &s.agent);
    assert_eq!(
        bot.post("/v1/sessions", &json!({"session": "s"}))
            .unwrap()
            .0,
        201
    );
    let hup = |pid: u32| {
        let ok = Command::new("kill")
            .args(["-HUP", &pid.to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok);
    };
    // A broken file: SIGHUP keeps the credentials it had.
    let good = std::fs::read_to_string(&tokens).unwrap();
    std::fs::write(&tokens, "not json").unwrap();
    hup(s.child.id());
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(bot.get("/v1/sessions/s").unwrap().0, 200);
    std::fs::write(&tokens, good).unwrap();
    let out = Command::new(BIN)
        .args(["token", "remove", "--file"])
        .arg(&tokens)
        .arg("bot")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    hup(s.child.id());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, _) = as_(&s, &s.agent).get("/v1/sessions/s").unwrap();
        if status == 401 {
            break;
        }
        assert!(Instant::now() < deadline, "the removed token still works");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The others still work.
    assert_eq!(as_(&s, &s.approver).get("/v1/approvals").unwrap().0, 200);
}
