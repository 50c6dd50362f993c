//! `DELETE /v1/sessions/{id}?tenant=T`: the agent of the tenant or an
//! admin closes a session; an audit record `closed`; its memory is freed,
//! its units stay spent (the tenant's pool is untouched), later requests
//! naming it are 409, its id cannot be reopened, and a restart keeps it
//! closed.

use agenra_core::CompiledPolicy;
use agenra_gateway::auth::{Credentials, Role};
use agenra_gateway::client::Client;
use agenra_gateway::{Gateway, Perimeter, Server};
use agenra_store::{Kind, Log, Record};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

const POLICY: &str = "tool pay.send(to: string) { resource to; }\n\
                      tool wire.send(to: string) { resource to; }\n\
                      grant pay: pay.send quota 3;\n\
                      grant wire: wire.send quota 5 per tenant;\n";

fn serve(dir: &Path) -> Server {
    let policy = agenra_policy::compile(POLICY, "close").unwrap().policy;
    let gw = Gateway::open(
        Log::open_redb(&dir.join("store.redb")).unwrap(),
        CompiledPolicy::new(policy).unwrap(),
        "close.agr",
        false,
    )
    .unwrap();
    let perimeter = Perimeter::tokens(dir.join("tokens.json"), vec![]).unwrap();
    Server::spawn(Arc::new(gw), Arc::new(perimeter), "127.0.0.1:0").unwrap()
}

fn client(addr: SocketAddr, token: &str) -> Client {
    Client::connect(addr).unwrap().with_token(token)
}

fn delete(c: &mut Client, path: &str) -> (u16, Value) {
    let (status, body) = c.request("DELETE", path, b"").unwrap();
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

fn call(c: &mut Client, session: &str, id: &str, tool: &str) -> (u16, Value) {
    c.post(
        "/v1/authorize",
        &json!({"tenant": "acme", "session": session,
                "call": {"id": id, "tool": tool, "args": {"to": "x"}}}),
    )
    .unwrap()
}

#[test]
fn a_closed_session_stays_closed_and_its_units_stay_spent() {
    let dir = std::env::temp_dir().join(format!("agenra-close-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let tokens = dir.join("tokens.json");
    let mut creds = Credentials::load_or_empty(&tokens).unwrap();
    let bot = creds.add("bot", Role::Agent, vec!["acme".into()]).unwrap();
    let eve = creds.add("eve", Role::Agent, vec!["beta".into()]).unwrap();
    let alice = creds
        .add("alice", Role::Approver, vec!["acme".into()])
        .unwrap();
    let ops = creds.add("ops", Role::Admin, vec![]).unwrap();
    creds.save(&tokens).unwrap();

    let server = serve(&dir);
    let addr = server.addr();
    let mut c = client(addr, &bot);
    for s in ["s1", "s2"] {
        let (status, body) = c
            .post("/v1/sessions", &json!({"tenant": "acme", "session": s}))
            .unwrap();
        assert_eq!(status, 201, "{body}");
    }
    assert_eq!(call(&mut c, "s1", "c1", "pay.send").1["decision"], "ALLOW");
    assert_eq!(call(&mut c, "s1", "c2", "wire.send").1["decision"], "ALLOW");

    // Another tenant's agent, and an approver, may not close it.
    let (status, body) = delete(&mut client(addr, &eve), "/v1/sessions/s1?tenant=acme");
    assert_eq!(status, 403, "{body}");
    let (status, body) = delete(&mut client(addr, &alice), "/v1/sessions/s1?tenant=acme");
    assert_eq!(status, 403, "{body}");
    let (status, body) = delete(&mut client(addr, &bot), "/v1/sessions/nope?tenant=acme");
    assert_eq!(status, 404, "{body}");

    let (status, body) = delete(&mut c, "/v1/sessions/s1?tenant=acme");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["closed"], true, "{body}");
    assert_eq!(body["newly"], true, "{body}");
    assert_eq!(body["events"], 2, "{body}");
    assert!(body["audit_seq"].as_u64().is_some(), "{body}");
    // A retry: answered, no second record.
    let (status, body) = delete(&mut c, "/v1/sessions/s1?tenant=acme");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["newly"], false, "{body}");

    let check_closed = |c: &mut Client| {
        let (status, body) = call(c, "s1", "c3", "pay.send");
        assert_eq!(status, 409, "{body}");
        assert!(body["error"].as_str().unwrap().contains("closed"), "{body}");
        let (status, body) = c.get("/v1/sessions/s1?tenant=acme").unwrap();
        assert_eq!(status, 409, "{body}");
        // Reopening would hand it a fresh per-session quota.
        let (status, body) = c
            .post("/v1/sessions", &json!({"tenant": "acme", "session": "s1"}))
            .unwrap();
        assert_eq!(status, 409, "{body}");
        // Its memory is freed: one session left.
        let (_, health) = c.get("/health").unwrap();
        assert_eq!(health["sessions"], 1, "{health}");
        // The tenant's pool keeps the unit s1 spent.
        let (status, view) = c.get("/v1/sessions/s2?tenant=acme").unwrap();
        assert_eq!(status, 200, "{view}");
        assert_eq!(view["ledger"]["wire"], 4, "{view}");
    };
    check_closed(&mut c);
    drop(c);
    server.stop();

    // Recovery replays the close.
    let server = serve(&dir);
    let addr = server.addr();
    let mut c = client(addr, &bot);
    check_closed(&mut c);
    // An admin may close any tenant's session.
    let (status, body) = delete(&mut client(addr, &ops), "/v1/sessions/s2?tenant=acme");
    assert_eq!(status, 200, "{body}");
    drop(c);
    server.stop();

    let log = Log::open_redb(&dir.join("store.redb")).unwrap();
    let mut closed = Vec::new();
    log.scan(1, &mut |_, line| {
        let r: Record = serde_json::from_slice(line).unwrap();
        if r.kind == Kind::Closed {
            closed.push((r.session.unwrap(), r.actor.unwrap()));
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(
        closed,
        vec![
            ("s1".to_string(), "agent:bot".to_string()),
            ("s2".to_string(), "admin:ops".to_string())
        ]
    );
    drop(log);
    let _ = std::fs::remove_dir_all(&dir);
}
