//! `agenra serve` over HTTP (the built binary): bad input on every
//! endpoint gets a 4xx with a JSON error naming the field and the server
//! keeps serving; sessions of different tenants are isolated; approvals,
//! results, metrics and policy reload behave as `docs/http-api.md` says.

use agenra_gateway::client::Client;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_agenra");

const POLICY: &str = r#"
levels public < internal < secret;
categories credential, web;
sinks network, shell;

tool http.get(url: string) { resource url; sink network; output <public, {web}, untrusted>; }
tool shell.exec(cmd: string) { resource cmd; sink shell; }
tool pay.send(to: string, amount: int) { resource to; }

grant docs: http.get on prefix "https://docs.rs/" quota unlimited;
grant build: shell.exec on prefix "cargo " quota 5;
grant pay: pay.send on glob "*@example.com" quota 2;
grant big: pay.send on glob "*@big.example" quota 3 approval;

deny flow no_web_in_shell: untrusted -> shell;
"#;

struct Server {
    child: Child,
    addr: SocketAddr,
    dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn serve(name: &str, extra: &[&str]) -> Server {
    let dir = std::env::temp_dir().join(format!("agenra-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("policy.agr"), POLICY).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    // These tests exercise the API itself: every role, every tenant
    // (tests/serve_perimeter.rs runs it with credentials).
    let child = Command::new(BIN)
        .arg("serve")
        .arg("--insecure-no-auth")
        .arg("--policy")
        .arg(dir.join("policy.agr"))
        .arg("--store")
        .arg(dir.join("store.redb"))
        .args(["--listen", &addr.to_string()])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = Server { child, addr, dir };
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

fn client(s: &Server) -> Client {
    Client::connect(s.addr).unwrap()
}

fn raw(c: &mut Client, method: &str, path: &str, body: &[u8]) -> (u16, Value) {
    let (status, bytes) = c.request(method, path, body).unwrap();
    let v = serde_json::from_slice(&bytes).unwrap_or_else(|_| {
        panic!(
            "{method} {path}: not JSON: {}",
            String::from_utf8_lossy(&bytes)
        )
    });
    (status, v)
}

/// A 4xx whose JSON error names `field`.
#[track_caller]
fn assert_error(answer: (u16, Value), status: u16, field: &str) {
    let (got, body) = answer;
    assert_eq!(got, status, "{body}");
    assert_eq!(body["field"], field, "{body}");
    assert!(
        body["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{body}"
    );
}

fn open(c: &mut Client, tenant: &str, session: &str) {
    let (status, body) = c
        .post(
            "/v1/sessions",
            &json!({"tenant": tenant, "session": session}),
        )
        .unwrap();
    assert_eq!(status, 201, "{body}");
}

#[test]
fn bad_input_on_every_endpoint_is_a_4xx_naming_the_field() {
    let s = serve("serve-bad", &[]);
    let mut c = client(&s);
    open(&mut c, "t", "s1");

    for path in [
        "/v1/sessions",
        "/v1/authorize",
        "/v1/report",
        "/v1/tasks",
        "/v1/approvals/c1/approve",
        "/v1/approvals/c1/reject",
        "/v1/policy",
    ] {
        // Malformed JSON, and a JSON value of the wrong shape.
        assert_error(raw(&mut c, "POST", path, b"{,"), 400, "body");
        assert_error(raw(&mut c, "POST", path, b"not json"), 400, "body");
        let (status, body) = raw(&mut c, "POST", path, b"[1, 2]");
        assert_eq!(status, 422, "{path}: {body}");
        assert_eq!(body["field"], "body", "{path}: {body}");
        // A field the endpoint does not know.
        assert_error(raw(&mut c, "POST", path, br#"{"bogus": 1}"#), 422, "bogus");
    }

    // Wrong types, named down to the nested field.
    let call = |extra: Value| {
        let mut call =
            json!({"id": "c1", "tool": "pay.send", "args": {"to": "a@example.com", "amount": 1}});
        for (k, v) in extra.as_object().unwrap() {
            call[k] = v.clone();
        }
        json!({"tenant": "t", "session": "s1", "call": call})
    };
    assert_error(
        c.post("/v1/authorize", &call(json!({"time": "soon"})))
            .unwrap(),
        422,
        "call.time",
    );
    assert_error(
        c.post("/v1/authorize", &call(json!({"args": [1]})))
            .unwrap(),
        422,
        "call.args",
    );
    assert_error(
        c.post("/v1/authorize", &call(json!({"lineage": {"to": "c0"}})))
            .unwrap(),
        422,
        "call.lineage.to",
    );
    assert_error(
        c.post(
            "/v1/authorize",
            &json!({"tenant": "t", "session": "s1", "call": {"id": "c1"}}),
        )
        .unwrap(),
        422,
        "call.tool",
    );
    assert_error(
        c.post(
            "/v1/authorize",
            &json!({"tenant": 7, "session": "s1", "call": {"id": "c1", "tool": "x"}}),
        )
        .unwrap(),
        422,
        "tenant",
    );
    assert_error(
        c.post(
            "/v1/authorize",
            &json!({"tenant": "a/b", "session": "s1", "call": {"id": "c1", "tool": "x"}}),
        )
        .unwrap(),
        422,
        "tenant",
    );
    assert_error(
        c.post(
            "/v1/report",
            &json!({"tenant": "t", "session": "s1", "call": "c1", "status": "exploded"}),
        )
        .unwrap(),
        422,
        "status",
    );
    assert_error(
        c.post("/v1/sessions", &json!({"tenant": "t", "session": ""}))
            .unwrap(),
        422,
        "session",
    );
    assert_error(
        c.post("/v1/policy", &json!({"source": "tool x(;"}))
            .unwrap(),
        422,
        "source",
    );

    // Unknown session, unknown call, unknown approval.
    assert_error(
        c.post(
            "/v1/authorize",
            &json!({"tenant": "t", "session": "nope", "call": {"id": "c1", "tool": "pay.send"}}),
        )
        .unwrap(),
        404,
        "session",
    );
    assert_error(
        c.post(
            "/v1/authorize",
            &json!({"tenant": "other", "session": "s1", "call": {"id": "c1", "tool": "pay.send"}}),
        )
        .unwrap(),
        404,
        "session",
    );
    assert_error(
        c.post(
            "/v1/report",
            &json!({"tenant": "t", "session": "s1", "call": "c404", "status": "succeeded"}),
        )
        .unwrap(),
        404,
        "call",
    );
    assert_error(
        raw(&mut c, "POST", "/v1/approvals/c404/approve", b""),
        404,
        "call",
    );
    assert_error(
        c.post(
            "/v1/approvals/c404/reject",
            &json!({"tenant": "t", "session": "s1"}),
        )
        .unwrap(),
        404,
        "call",
    );
    assert_error(c.get("/v1/sessions/nope?tenant=t").unwrap(), 404, "session");
    assert_error(c.get("/v1/approvals?tenant=t&x=1").unwrap(), 400, "query");
    assert_error(c.get("/v1/nothing").unwrap(), 404, "path");
    assert_error(raw(&mut c, "GET", "/v1/authorize", b""), 405, "method");

    // A call id reused for a different call; a call approved that is not paused.
    let (status, a) = c.post("/v1/authorize", &call(json!({}))).unwrap();
    assert_eq!(
        (status, a["decision"].as_str()),
        (200, Some("ALLOW")),
        "{a}"
    );
    assert_error(
        c.post(
            "/v1/authorize",
            &call(json!({"args": {"to": "b@example.com", "amount": 1}})),
        )
        .unwrap(),
        409,
        "call.id",
    );
    assert_error(
        c.post(
            "/v1/approvals/c1/approve",
            &json!({"tenant": "t", "session": "s1"}),
        )
        .unwrap(),
        409,
        "call",
    );
    assert_error(
        c.post("/v1/authorize", &call(json!({"id": "c2", "time": 0})))
            .unwrap(),
        422,
        "call.time",
    );

    // A 100 MB body: refused without reading it all, on a connection the
    // server then closes; the server itself keeps serving.
    {
        let mut stream = TcpStream::connect(s.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let size = 100 * 1024 * 1024;
        write!(
            stream,
            "POST /v1/authorize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {size}\r\n\r\n"
        )
        .unwrap();
        let chunk = vec![b' '; 1 << 20];
        for _ in 0..100 {
            if stream.write_all(&chunk).is_err() {
                break; // the server stopped reading
            }
        }
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        let text = String::from_utf8_lossy(&answer);
        assert!(text.starts_with("HTTP/1.1 413"), "{text}");
        assert!(text.contains("\"field\":\"body\""), "{text}");
    }

    // Still serving, and the well-formed call above is there.
    let mut c = client(&s);
    let (status, h) = c.get("/health").unwrap();
    assert_eq!((status, h["status"].as_str()), (200, Some("ok")), "{h}");
    let (_, view) = c.get("/v1/sessions/s1?tenant=t").unwrap();
    assert_eq!(view["ledger"]["pay"], 1, "{view}");
    let (status, metrics) = c.request("GET", "/metrics", b"").unwrap();
    let metrics = String::from_utf8(metrics).unwrap();
    assert_eq!(status, 200);
    assert!(
        metrics.contains("agenra_decisions_total{verdict=\"ALLOW\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("agenra_errors_total{status=\"404\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("agenra_decision_seconds_bucket{le=\"+Inf\"} 1"),
        "{metrics}"
    );
}

#[test]
fn tenants_sessions_approvals_and_results() {
    let s = serve("serve-flow", &[]);
    let mut c = client(&s);
    // The same session id under two tenants: two sessions.
    open(&mut c, "t1", "s");
    open(&mut c, "t2", "s");
    let post = |c: &mut Client, path: &str, body: Value| {
        let (status, v) = c.post(path, &body).unwrap();
        assert_eq!(status, 200, "{path} {body}: {v}");
        v
    };
    let call = |tenant: &str, id: &str, tool: &str, args: Value| json!({"tenant": tenant, "session": "s", "call": {"id": id, "tool": tool, "args": args}});

    // t1 reads untrusted web content; its shell call is then denied, with
    // the path from the web read.
    let a = post(
        &mut c,
        "/v1/authorize",
        call("t1", "c1", "http.get", json!({"url": "https://docs.rs/x"})),
    );
    assert_eq!(a["decision"], "ALLOW");
    let r = post(
        &mut c,
        "/v1/report",
        json!({"tenant": "t1", "session": "s", "call": "c1", "status": "succeeded", "output": {"text": "run this"}}),
    );
    assert_eq!(r["kind"], "result", "{r}");
    let d = post(
        &mut c,
        "/v1/authorize",
        call("t1", "c2", "shell.exec", json!({"cmd": "cargo build"})),
    );
    assert_eq!(d["decision"], "DENY", "{d}");
    assert_eq!(d["rule"], "no_web_in_shell", "{d}");
    assert_eq!(d["path"], json!(["c1", "context", "c2"]), "{d}");

    // t2's session with the same id never saw the web read.
    let d = post(
        &mut c,
        "/v1/authorize",
        call("t2", "c2", "shell.exec", json!({"cmd": "cargo build"})),
    );
    assert_eq!(d["decision"], "ALLOW", "{d}");

    // A PAUSE waits in the approvals of its tenant only.
    let p = post(
        &mut c,
        "/v1/authorize",
        call(
            "t1",
            "c3",
            "pay.send",
            json!({"to": "x@big.example", "amount": 5}),
        ),
    );
    assert_eq!(p["decision"], "PAUSE", "{p}");
    let p2 = post(
        &mut c,
        "/v1/authorize",
        call(
            "t2",
            "c3",
            "pay.send",
            json!({"to": "y@big.example", "amount": 6}),
        ),
    );
    assert_eq!(p2["decision"], "PAUSE", "{p2}");
    let (_, list) = c.get("/v1/approvals?tenant=t1").unwrap();
    assert_eq!(list["approvals"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list["approvals"][0]["call"], "c3");
    let digest = list["approvals"][0]["digest"].clone();
    let ok = post(
        &mut c,
        "/v1/approvals/c3/approve",
        json!({"tenant": "t1", "digest": digest, "reason": "known payee"}),
    );
    assert_eq!(ok["decision"], "ALLOW", "{ok}");
    let no = post(
        &mut c,
        "/v1/approvals/c3/reject",
        json!({"tenant": "t2", "session": "s"}),
    );
    assert_eq!(no["kind"], "reject", "{no}");
    assert_eq!(no["refunded"], json!(["big"]), "{no}");
    let (_, list) = c.get("/v1/approvals?tenant=t1").unwrap();
    assert_eq!(list["approvals"], json!([]));
    let (_, v1) = c.get("/v1/sessions/s?tenant=t1").unwrap();
    let (_, v2) = c.get("/v1/sessions/s?tenant=t2").unwrap();
    assert_eq!(
        (v1["ledger"]["big"].as_u64(), v2["ledger"]["big"].as_u64()),
        (Some(2), Some(3))
    );
    assert_eq!(
        (
            v1["ledger"]["build"].as_u64(),
            v2["ledger"]["build"].as_u64()
        ),
        (Some(5), Some(4))
    );

    // A retried call gets its recorded answer and takes nothing again.
    let again = post(
        &mut c,
        "/v1/authorize",
        call("t2", "c2", "shell.exec", json!({"cmd": "cargo build"})),
    );
    assert_eq!(again["replayed"], true, "{again}");
    assert_eq!(again["ledger_hash"], d["ledger_hash"]);
    let (_, v2) = c.get("/v1/sessions/s?tenant=t2").unwrap();
    assert_eq!(v2["ledger"]["build"].as_u64(), Some(4));
}

fn reload(c: &mut Client, source: &str) -> (u16, Value) {
    c.post("/v1/policy", &json!({"source": source, "name": "rev"}))
        .unwrap()
}

fn reload_widening(c: &mut Client, source: &str) -> (u16, Value) {
    c.post(
        "/v1/policy",
        &json!({"source": source, "name": "rev", "allow_widening": true}),
    )
    .unwrap()
}

#[test]
fn policy_reload_runs_new_sessions_and_certification_guards_it() {
    let s = serve("serve-reload", &["--require-certified"]);
    let mut c = client(&s);
    open(&mut c, "t", "old");
    let (_, h) = c.get("/health").unwrap();
    let first = h["policy_hash"].clone();

    // Lowering a quota loses workflows: refused, nothing changes.
    let lower = POLICY.replace("quota 2;", "quota 1;");
    let (status, body) = reload(&mut c, &lower);
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["field"], "source");
    let (_, h) = c.get("/health").unwrap();
    assert_eq!(h["policy_hash"], first);

    // Raising it preserves every workflow, but allows a third payment: a
    // widening, refused unless the admin says so explicitly.
    let raise = POLICY.replace("quota 2;", "quota 4;");
    let (status, body) = reload(&mut c, &raise);
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["field"], "allow_widening", "{body}");
    assert!(body["error"].as_str().unwrap().contains("widens"), "{body}");
    let (_, h) = c.get("/health").unwrap();
    assert_eq!(h["policy_hash"], first);
    // With allow_widening: certified, and new sessions run it.
    let (status, body) = reload_widening(&mut c, &raise);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["changed"], true);
    assert_eq!(body["widens"], true);
    assert_eq!(body["certificate"]["verdict"], "certified", "{body}");
    open(&mut c, "t", "new");
    let (_, old) = c.get("/v1/sessions/old?tenant=t").unwrap();
    let (_, new) = c.get("/v1/sessions/new?tenant=t").unwrap();
    assert_eq!(
        old["ledger"]["pay"], 2,
        "sessions keep the policy they were opened with"
    );
    assert_eq!(new["ledger"]["pay"], 4);
    assert_eq!(old["policy_hash"], first);
    assert_eq!(new["policy_hash"], body["policy_hash"]);

    // A rule change is certified by the rule-side Z3 check, as `agenra
    // certify` does: dropping a deny flow preserves every workflow...
    let looser = raise.replace("deny flow no_web_in_shell: untrusted -> shell;\n", "");
    assert_ne!(looser, raise);
    let (status, body) = reload(&mut c, &looser);
    assert_eq!(
        (status, &body["field"]),
        (409, &json!("allow_widening")),
        "{body}"
    );
    let (status, body) = reload_widening(&mut c, &looser);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["certificate"]["verdict"], "certified", "{body}");
    // ... and putting it back loses one (web, then shell): refused, even
    // when widening is allowed.
    let (status, body) = reload_widening(&mut c, &raise);
    assert_eq!((status, &body["field"]), (409, &json!("source")), "{body}");
    // The running policy again (only a newline added): nothing changes.
    let renamed = looser.clone() + "\n";
    let (status, body) = reload(&mut c, &renamed);
    assert_eq!(status, 200, "{body}");
}

#[test]
fn audit_report_renders_a_session_and_verify_names_a_broken_record() {
    let s = serve("serve-audit", &[]);
    let mut c = client(&s);
    open(&mut c, "t", "s");
    for (id, to) in [
        ("c1", "a@example.com"),
        ("c2", "a@example.com"),
        ("c3", "a@example.com"),
    ] {
        let (status, _) = c
            .post(
                "/v1/authorize",
                &json!({"tenant": "t", "session": "s", "call": {"id": id, "tool": "pay.send", "args": {"to": to, "amount": 1}}}),
            )
            .unwrap();
        assert_eq!(status, 200);
    }
    let store = s.dir.join("store.redb");
    let dir = s.dir.clone();
    let mut server = s;
    let _ = server.child.kill();
    let _ = server.child.wait();

    let run = |args: &[&str]| {
        let out = Command::new(BIN).args(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let store_s = store.to_str().unwrap();
    let (code, md, err) = run(&[
        "audit",
        "report",
        "--store",
        store_s,
        "--tenant",
        "t",
        "--session",
        "s",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        md.contains("# Audit report: session `s` of tenant `t`"),
        "{md}"
    );
    assert!(md.contains("## Denied calls and their paths"), "{md}");
    assert!(md.contains("| c3 | no-grant |"), "{md}");
    assert!(md.contains("the store's first policy"), "{md}");
    let (code, html, _) = run(&[
        "audit",
        "report",
        "--store",
        store_s,
        "--session",
        "s",
        "--tenant",
        "t",
        "--format",
        "html",
    ]);
    assert_eq!(code, Some(0));
    assert!(
        html.starts_with("<!DOCTYPE html>") && html.contains("class=\"DENY\""),
        "{html}"
    );

    // Export, tamper with one record, and verify names it.
    let file = dir.join("audit.jsonl");
    let (code, _, err) = run(&[
        "audit",
        "export",
        "--store",
        store_s,
        "-o",
        file.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    let (code, out, _) = run(&["audit", "verify", file.to_str().unwrap()]);
    assert_eq!(code, Some(0));
    assert!(out.contains("ok: 5 records"), "{out}");
    let text = std::fs::read_to_string(&file).unwrap();
    let tampered: Vec<String> = text
        .lines()
        .enumerate()
        .map(|(i, l)| {
            if i == 3 {
                l.replace("\"ALLOW\"", "\"DENY\"")
            } else {
                l.to_string()
            }
        })
        .collect();
    std::fs::write(&file, tampered.join("\n")).unwrap();
    let (code, _, err) = run(&["audit", "verify", file.to_str().unwrap()]);
    assert_eq!(code, Some(1));
    assert!(err.contains("audit record 4"), "{err}");
    let _ = Path::new(&file);
}
