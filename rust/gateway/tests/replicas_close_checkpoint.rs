//! Two gateway replicas on one PostgreSQL log, both signing checkpoints
//! with their own key: a session closed through one is closed on the other
//! (caught up from the log), both keys' checkpoints commit to the shared
//! chain, and a restarted replica keeps the session closed.
//!
//! Needs `AGENRA_TEST_PG` (`scripts/with-postgres cargo test …`); without
//! it the test says SKIPPED (and fails under `CI=true`).

use agenra_core::CompiledPolicy;
use agenra_gateway::client::Client;
use agenra_gateway::{Gateway, Perimeter, Server};
use agenra_store::{
    test_database, verify_lines, CheckpointSigner, CheckpointVerifier, Checkpoints, Every, Log,
    PublicKey,
};
use serde_json::json;
use std::sync::Arc;

fn replica(url: &str, key: u8) -> Server {
    let text = "tool pay.send(to: string) { resource to; }\ngrant pay: pay.send quota 10;\n";
    let policy = agenra_policy::compile(text, "close").unwrap().policy;
    let log = Log::open_pg(url).unwrap().with_checkpoints(Checkpoints {
        signer: CheckpointSigner::from_seed([key; 32]),
        every: Every::Records(2),
        out: None,
    });
    let gw = Gateway::open(
        log,
        CompiledPolicy::new(policy).unwrap(),
        "close.agr",
        false,
    )
    .unwrap();
    Server::spawn(
        Arc::new(gw),
        Arc::new(Perimeter::insecure(Vec::new())),
        "127.0.0.1:0",
    )
    .unwrap()
}

fn call(c: &mut Client, id: &str) -> (u16, serde_json::Value) {
    c.post(
        "/v1/authorize",
        &json!({"tenant": "acme", "session": "s1",
                "call": {"id": id, "tool": "pay.send", "args": {"to": "x"}}}),
    )
    .unwrap()
}

#[test]
fn a_session_closed_on_one_replica_is_closed_on_the_other_and_both_sign() {
    let Some(url) = test_database("gw_close_cp") else {
        return;
    };
    let a = replica(&url, 1);
    let b = replica(&url, 2);
    let mut ca = Client::connect(a.addr()).unwrap();
    let mut cb = Client::connect(b.addr()).unwrap();
    let (status, body) = ca
        .post("/v1/sessions", &json!({"tenant": "acme", "session": "s1"}))
        .unwrap();
    assert_eq!(status, 201, "{body}");
    for i in 0..3 {
        assert_eq!(call(&mut ca, &format!("a{i}")).1["decision"], "ALLOW");
        assert_eq!(call(&mut cb, &format!("b{i}")).1["decision"], "ALLOW");
    }
    let (status, body) = ca
        .request("DELETE", "/v1/sessions/s1?tenant=acme", b"")
        .unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    // The other replica catches up on the close before deciding.
    let (status, body) = call(&mut cb, "b9");
    assert_eq!(status, 409, "{body}");
    let (status, body) = cb
        .post("/v1/sessions", &json!({"tenant": "acme", "session": "s1"}))
        .unwrap();
    assert_eq!(status, 409, "{body}");
    drop((ca, cb));
    a.stop();
    b.stop();

    // Both replicas' checkpoints commit to the one shared chain.
    let log = Log::open_pg(&url).unwrap();
    let mut lines = Vec::new();
    log.scan(1, &mut |_, l| {
        lines.push(l.to_vec());
        Ok(())
    })
    .unwrap();
    verify_lines(lines.iter().map(Vec::as_slice)).unwrap();
    let mut signers = std::collections::BTreeSet::new();
    for (i, l) in lines.iter().enumerate() {
        let r: agenra_store::Record = serde_json::from_slice(l).unwrap();
        if let Some(cp) = r.checkpoint {
            // Each checkpoint checks with the key it names, at its place.
            let key = PublicKey::parse(&cp.public_key).unwrap();
            CheckpointVerifier::new(Some(key))
                .push(i as u64 + 1, l)
                .unwrap();
            signers.insert(cp.public_key);
        }
    }
    let keys: std::collections::BTreeSet<String> = [1u8, 2]
        .iter()
        .map(|k| CheckpointSigner::from_seed([*k; 32]).public_key())
        .collect();
    assert_eq!(signers, keys, "both replicas signed checkpoints");
    drop(log);

    // A restarted replica keeps it closed.
    let a = replica(&url, 1);
    let mut ca = Client::connect(a.addr()).unwrap();
    let (status, body) = call(&mut ca, "a9");
    assert_eq!(status, 409, "{body}");
    drop(ca);
    a.stop();
}
