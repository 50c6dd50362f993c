//! A `quota N per tenant` grant on the embedded store: sessions of one
//! tenant spend one pool concurrently, and a restart rebuilds the pool and
//! every decision by replaying the log (which holds the tenant's events in
//! the order they used the pool, or recovery would refuse it).

use agenra_core::CompiledPolicy;
use agenra_gateway::client::Client;
use agenra_gateway::{Gateway, Server};
use agenra_store::Log;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

const TENANT_QUOTA: u64 = 30;

fn serve(store: &Path) -> Server {
    let text = format!(
        "tool wire.send(to: string) {{ resource to; }}\n\
         grant wire: wire.send quota {TENANT_QUOTA} per tenant;\n"
    );
    let compiled = agenra_policy::compile(&text, "pool").unwrap();
    let policy = CompiledPolicy::new(compiled.policy).unwrap();
    let gateway = Gateway::open(Log::open_redb(store).unwrap(), policy, "pool.agr", false).unwrap();
    Server::spawn(
        Arc::new(gateway),
        Arc::new(agenra_gateway::Perimeter::insecure(Vec::new())),
        "127.0.0.1:0",
    )
    .unwrap()
}

#[test]
fn sessions_of_a_tenant_share_its_pool_and_recovery_rebuilds_it() {
    let dir = std::env::temp_dir().join(format!("agenra-tenant-pool-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let store = dir.join("store.redb");
    let server = serve(&store);
    let addr = server.addr();
    let threads: Vec<_> = (0..6)
        .map(|t| {
            std::thread::spawn(move || {
                let mut c = Client::connect(addr).unwrap();
                let session = format!("s{t}");
                let (status, _) = c
                    .post(
                        "/v1/sessions",
                        &json!({"tenant": "acme", "session": session}),
                    )
                    .unwrap();
                assert_eq!(status, 201);
                let mut allows = 0u64;
                for n in 0..10 {
                    let call = json!({"tenant": "acme", "session": session,
                        "call": {"id": format!("c{n}"), "tool": "wire.send", "args": {"to": "x"}}});
                    let (status, answer) = c.post("/v1/authorize", &call).unwrap();
                    assert_eq!(status, 200, "{answer}");
                    allows += u64::from(answer["decision"] == "ALLOW");
                }
                allows
            })
        })
        .collect();
    let allows: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(allows, TENANT_QUOTA, "ALLOWs across the tenant's sessions");
    let mut c = Client::connect(addr).unwrap();
    let (_, before) = c.get("/v1/sessions/s3?tenant=acme").unwrap();
    assert_eq!(before["ledger"]["wire"], 0, "{before}");
    drop(c);
    server.stop();

    // Recovery replays every decision against the rebuilt pool.
    let server = serve(&store);
    let mut c = Client::connect(server.addr()).unwrap();
    for t in 0..6 {
        let (status, view) = c.get(&format!("/v1/sessions/s{t}?tenant=acme")).unwrap();
        assert_eq!(status, 200, "{view}");
        assert_eq!(view["ledger"]["wire"], 0, "{view}");
        assert_eq!(view["events"], 10, "{view}");
    }
    c.post(
        "/v1/sessions",
        &json!({"tenant": "acme", "session": "late"}),
    )
    .unwrap();
    let (_, answer) = c
        .post(
            "/v1/authorize",
            &json!({"tenant": "acme", "session": "late",
                    "call": {"id": "c0", "tool": "wire.send", "args": {"to": "x"}}}),
        )
        .unwrap();
    assert_eq!(
        answer["decision"], "DENY",
        "a new session finds the pool spent: {answer}"
    );
    drop(c);
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
