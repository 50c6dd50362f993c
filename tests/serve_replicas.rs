//! Two `agenra serve` processes (replicas) on one PostgreSQL log: client
//! threads on both spend one session's quota concurrently, and a
//! tenant-wide quota (`quota N per tenant`) from several sessions; the
//! ALLOWs equal the quotas exactly, and `agenra audit verify --store
//! postgres://…` accepts the log. A replica killed with SIGKILL and
//! restarted recovers every session.
//!
//! Needs `AGENRA_TEST_PG` (`scripts/with-postgres cargo test …`, as
//! `.ci/run` does); without it the test says SKIPPED (and fails under
//! `CI=true`).

use agenra_gateway::client::Client;
use serde_json::json;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[path = "support/replica.rs"]
mod replica;

use replica::{free_addr, start, BIN};
const QUOTA: u64 = 60;
const TENANT_QUOTA: u64 = 24;

#[test]
fn two_serve_replicas_on_one_postgres_spend_each_unit_once() {
    let Some(url) = agenra_store::test_database("serve_replicas") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("agenra-serve-replicas-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("policy.agr");
    std::fs::write(
        &policy,
        format!(
            "tool pay.send(to: string, amount: int) {{ resource to; }}\n\
             tool wire.send(to: string) {{ resource to; }}\n\
             grant pay: pay.send on glob \"*@example.com\" quota {QUOTA};\n\
             grant wire: wire.send quota {TENANT_QUOTA} per tenant;\n"
        ),
    )
    .unwrap();
    let addrs = [free_addr(), free_addr()];
    let a = start(&policy, &url, addrs[0]);
    let mut b = start(&policy, &url, addrs[1]);
    let mut c = Client::connect(addrs[0]).unwrap();
    let (status, view) = c
        .post("/v1/sessions", &json!({"tenant": "acme", "session": "one"}))
        .unwrap();
    assert_eq!(status, 201, "{view}");

    // (a) One session's quota, from 8 clients on both replicas.
    let pay_allows = Arc::new(AtomicU64::new(0));
    // (b) A tenant-wide quota, from 6 sessions opened on both replicas.
    let wire_allows = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..14)
        .map(|t| {
            let addr = addrs[t % 2];
            let (pay_allows, wire_allows) = (Arc::clone(&pay_allows), Arc::clone(&wire_allows));
            std::thread::spawn(move || {
                let mut c = Client::connect(addr).unwrap();
                if t < 8 {
                    for n in 0..10 {
                        let call = json!({"tenant": "acme", "session": "one",
                            "call": {"id": format!("t{t}-{n}"), "tool": "pay.send",
                                     "args": {"to": "bob@example.com", "amount": n}}});
                        let (status, answer) = c.post("/v1/authorize", &call).unwrap();
                        assert_eq!(status, 200, "{answer}");
                        if answer["decision"] == "ALLOW" {
                            pay_allows.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                } else {
                    let session = format!("w{t}");
                    let (status, view) = c
                        .post("/v1/sessions", &json!({"tenant": "acme", "session": session}))
                        .unwrap();
                    assert_eq!(status, 201, "{view}");
                    for n in 0..8 {
                        let call = json!({"tenant": "acme", "session": session,
                            "call": {"id": format!("c{n}"), "tool": "wire.send", "args": {"to": "x"}}});
                        let (status, answer) = c.post("/v1/authorize", &call).unwrap();
                        assert_eq!(status, 200, "{answer}");
                        if answer["decision"] == "ALLOW" {
                            wire_allows.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        pay_allows.load(Ordering::Relaxed),
        QUOTA,
        "one session's quota"
    );
    assert_eq!(
        wire_allows.load(Ordering::Relaxed),
        TENANT_QUOTA,
        "the tenant's quota"
    );

    // (c) Kill a replica and restart it: it recovers every session.
    let (_, view_a) = c.get("/v1/sessions/one?tenant=acme").unwrap();
    b.0.kill().unwrap();
    b.0.wait().unwrap();
    b = start(&policy, &url, addrs[1]);
    let mut cb = Client::connect(addrs[1]).unwrap();
    let (_, health) = cb.get("/health").unwrap();
    assert_eq!(health["sessions"], 7, "{health}");
    let (status, view_b) = cb.get("/v1/sessions/one?tenant=acme").unwrap();
    assert_eq!(status, 200, "{view_b}");
    assert_eq!(view_b["ledger_hash"], view_a["ledger_hash"], "{view_b}");
    assert_eq!(view_b["events"], 80, "{view_b}");
    assert_eq!(view_b["ledger"]["pay"], 0, "{view_b}");
    let (_, w) = cb.get("/v1/sessions/w9?tenant=acme").unwrap();
    assert_eq!(w["ledger"]["wire"], 0, "{w}");
    drop((a, b));

    let verify = Command::new(BIN)
        .args(["audit", "verify", "--store", &url])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&verify.stdout);
    assert!(
        verify.status.success(),
        "audit verify: {out}{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    // 1 policy, 7 sessions, 80 + 48 events.
    assert!(out.contains("ok: 136 records"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `GET /v1/sessions/{id}` on one replica shows what the other spent: the
/// view is read after catching up with the shared log, never from a
/// replica's memory alone (which knew nothing of a session opened on the
/// other replica, and could show spent units as left).
#[test]
fn a_session_view_on_one_replica_shows_what_the_other_spent() {
    let Some(url) = agenra_store::test_database("serve_replicas_view") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("agenra-replica-view-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("policy.agr");
    std::fs::write(
        &policy,
        "tool pay.send(to: string) { resource to; }\n\
         grant pay: pay.send quota 3;\n",
    )
    .unwrap();
    let addrs = [free_addr(), free_addr()];
    let _a = start(&policy, &url, addrs[0]);
    let _b = start(&policy, &url, addrs[1]);
    let mut ca = Client::connect(addrs[0]).unwrap();
    let mut cb = Client::connect(addrs[1]).unwrap();
    // Replica A learns of the log once (a session of its own), then B opens
    // a session and spends a unit in it.
    let (status, _) = ca
        .post("/v1/sessions", &json!({"tenant": "acme", "session": "a0"}))
        .unwrap();
    assert_eq!(status, 201);
    let (status, _) = cb
        .post("/v1/sessions", &json!({"tenant": "acme", "session": "b1"}))
        .unwrap();
    assert_eq!(status, 201);
    let call = json!({"tenant": "acme", "session": "b1",
        "call": {"id": "c1", "tool": "pay.send", "args": {"to": "x"}}});
    let (status, answer) = cb.post("/v1/authorize", &call).unwrap();
    assert_eq!(
        (status, answer["decision"].clone()),
        (200, json!("ALLOW")),
        "{answer}"
    );
    let (_, on_b) = cb.get("/v1/sessions/b1?tenant=acme").unwrap();
    assert_eq!(on_b["ledger"]["pay"], 2, "{on_b}");
    // A has decided nothing since: its view must still be current.
    let (status, on_a) = ca.get("/v1/sessions/b1?tenant=acme").unwrap();
    assert_eq!(status, 200, "{on_a}");
    assert_eq!(on_a["ledger"]["pay"], 2, "{on_a}");
    assert_eq!(on_a["ledger_hash"], on_b["ledger_hash"], "{on_a}");
    assert_eq!(on_a["events"], on_b["events"], "{on_a}");
    let _ = std::fs::remove_dir_all(&dir);
}
