//! Gateway replicas on one PostgreSQL log partitioned by session
//! (`serve --partitioned-log`, `docs/store.md`): two replicas deciding on
//! distinct sessions interleave without forking any chain, a session both
//! use and a tenant-wide quota are still spent exactly once, a restarted
//! replica recovers every session, and a removed session partition is
//! caught against the last signed checkpoint.
//!
//! Needs `AGENRA_TEST_PG` (`scripts/with-postgres cargo test …`); without
//! it each test says SKIPPED (and fails under `CI=true`).

use agenra_core::CompiledPolicy;
use agenra_gateway::client::Client;
use agenra_gateway::{Gateway, Server};
use agenra_store::{
    session_partition, test_database, CheckpointSigner, Checkpoints, Every, PartLog, PgParts,
    PublicKey,
};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

const QUOTA: u64 = 12;
const TENANT_QUOTA: u64 = 9;

fn policy() -> CompiledPolicy {
    let text = format!(
        "tool pay.send(to: string, amount: int) {{ resource to; }}\n\
         grant pay: pay.send on glob \"*@example.com\" quota {QUOTA};\n"
    );
    let compiled = agenra_policy::compile(&text, "parts").unwrap();
    CompiledPolicy::new(compiled.policy).unwrap()
}

fn pooled_policy() -> CompiledPolicy {
    let text = format!(
        "tool wire.send(to: string) {{ resource to; }}\n\
         grant wire: wire.send quota {TENANT_QUOTA} per tenant;\n"
    );
    let compiled = agenra_policy::compile(&text, "pool").unwrap();
    CompiledPolicy::new(compiled.policy).unwrap()
}

fn replica(url: &str, policy: CompiledPolicy, signer: Option<CheckpointSigner>) -> Server {
    let mut log = PartLog::open(Box::new(PgParts::open(url).unwrap()));
    if let Some(signer) = signer {
        log = log.with_checkpoints(Checkpoints {
            signer,
            every: Every::Records(1),
            out: None,
        });
    }
    let gateway = Gateway::open_parts(log, policy, "parts.agr", false).unwrap();
    assert!(gateway.is_replicated());
    Server::spawn(
        Arc::new(gateway),
        Arc::new(agenra_gateway::Perimeter::insecure(Vec::new())),
        "127.0.0.1:0",
    )
    .unwrap()
}

fn open(c: &mut Client, session: &str) {
    let (status, view) = c
        .post(
            "/v1/sessions",
            &json!({"tenant": "acme", "session": session}),
        )
        .unwrap();
    assert!(status == 201 || status == 200, "{status} {view}");
}

fn call(c: &mut Client, session: &str, id: &str, tool: &str) -> serde_json::Value {
    let args = if tool == "pay.send" {
        json!({"to": "bob@example.com", "amount": 1})
    } else {
        json!({"to": "bob@example.com"})
    };
    let (status, answer) = c
        .post(
            "/v1/authorize",
            &json!({"tenant": "acme", "session": session,
                    "call": {"id": id, "tool": tool, "args": args}}),
        )
        .unwrap();
    assert_eq!(status, 200, "{answer}");
    answer
}

fn allowed(a: &serde_json::Value) -> u64 {
    u64::from(a["decision"] == "ALLOW")
}

#[test]
fn two_replicas_on_distinct_sessions_interleave_without_forking_any_chain() {
    let Some(url) = test_database("gw_parts") else {
        return;
    };
    let a = replica(&url, policy(), None);
    let b = replica(&url, policy(), None);
    let addrs = [a.addr(), b.addr()];
    let allows_both = Arc::new(AtomicU64::new(0));
    // Four clients, each on its own session through one replica, and all
    // of them on the session `both` through either.
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let addr = addrs[t % 2];
            let allows_both = Arc::clone(&allows_both);
            std::thread::spawn(move || {
                let mut c = Client::connect(addr).unwrap();
                let own = format!("own{t}");
                open(&mut c, &own);
                open(&mut c, "both");
                let mut mine = 0;
                for n in 0..15 {
                    mine += allowed(&call(&mut c, &own, &format!("c{n}"), "pay.send"));
                    let id = format!("t{t}-{n}");
                    allows_both.fetch_add(
                        allowed(&call(&mut c, "both", &id, "pay.send")),
                        Ordering::Relaxed,
                    );
                }
                // Each session's own quota, exactly.
                assert_eq!(mine, QUOTA);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        allows_both.load(Ordering::Relaxed),
        QUOTA,
        "ALLOWs on `both`"
    );
    // The other replica decided on `both` too: it caught up on it.
    assert!(a.gateway().store_stats().caught_up > 0 || b.gateway().store_stats().caught_up > 0);
    let mut ca = Client::connect(addrs[0]).unwrap();
    let (_, va) = ca.get("/v1/sessions/both?tenant=acme").unwrap();
    assert_eq!(va["events"], 60, "{va}");
    drop(ca);
    a.stop();
    b.stop();

    // Every chain checks: `log`, five sessions and the tenant's pool
    // (empty: locked, as a new session's possible home, when each session
    // was opened), nothing forked.
    let mut log = PartLog::open(Box::new(PgParts::open(&url).unwrap()));
    let s = log.verify_checkpoints(None, None).unwrap();
    assert_eq!(s.partitions, 7, "{s:?}");
    // 1 policy; per own session 1 + 15; `both` 1 + 60.
    assert_eq!(s.records, 1 + 4 * 16 + 61, "{s:?}");
    let heads = log.read(&mut |_, _, _| Ok(())).unwrap();
    assert_eq!(heads[&session_partition("acme", "both")].seq, 61);

    // A restarted replica recovers every session from its partition.
    let c = replica(&url, policy(), None);
    let mut cc = Client::connect(c.addr()).unwrap();
    let (_, vc) = cc.get("/v1/sessions/both?tenant=acme").unwrap();
    assert_eq!(vc["ledger_hash"], va["ledger_hash"], "{vc}");
    assert_eq!(vc["ledger"]["pay"], 0, "{vc}");
    let again = call(&mut cc, "own3", "c99", "pay.send");
    assert_eq!(again["decision"], "DENY", "{again}");
    drop(cc);
    c.stop();
}

#[test]
fn a_tenant_pool_is_spent_exactly_once_across_replicas_and_sessions() {
    let Some(url) = test_database("gw_parts_pool") else {
        return;
    };
    let a = replica(&url, pooled_policy(), None);
    let b = replica(&url, pooled_policy(), None);
    let addrs = [a.addr(), b.addr()];
    let allows = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let addr = addrs[t % 2];
            let allows = Arc::clone(&allows);
            std::thread::spawn(move || {
                let mut c = Client::connect(addr).unwrap();
                let own = format!("w{t}");
                open(&mut c, &own);
                for n in 0..6 {
                    let a = call(&mut c, &own, &format!("c{n}"), "wire.send");
                    allows.fetch_add(allowed(&a), Ordering::Relaxed);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(allows.load(Ordering::Relaxed), TENANT_QUOTA);
    a.stop();
    b.stop();
    PartLog::open(Box::new(PgParts::open(&url).unwrap()))
        .verify_checkpoints(None, None)
        .unwrap();
    // Recovery rebuilds the same pool: nothing is left.
    let c = replica(&url, pooled_policy(), None);
    let mut cc = Client::connect(c.addr()).unwrap();
    open(&mut cc, "late");
    assert_eq!(call(&mut cc, "late", "x", "wire.send")["decision"], "DENY");
    drop(cc);
    c.stop();
}

#[test]
fn a_removed_session_partition_is_caught_by_the_checkpoint() {
    let Some(url) = test_database("gw_parts_cut") else {
        return;
    };
    let signer = CheckpointSigner::from_seed([5; 32]);
    let key = PublicKey::parse(&signer.public_key()).unwrap();
    let a = replica(&url, policy(), Some(signer));
    let mut c = Client::connect(a.addr()).unwrap();
    for s in ["s1", "s2"] {
        open(&mut c, s);
        call(&mut c, s, "c1", "pay.send");
    }
    drop(c);
    a.stop();
    PartLog::open(Box::new(PgParts::open(&url).unwrap()))
        .verify_checkpoints(Some(&key), None)
        .unwrap();
    // Whoever can write the database drops session s2's chain and head.
    let mut pg = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let part = session_partition("acme", "s2");
    pg.execute("DELETE FROM agenra_plog WHERE part = $1", &[&part])
        .unwrap();
    pg.execute("DELETE FROM agenra_phead WHERE part = $1", &[&part])
        .unwrap();
    // Every chain left is intact...
    let mut log = PartLog::open(Box::new(PgParts::open(&url).unwrap()));
    log.read(&mut |_, _, _| Ok(())).unwrap();
    // ...but the signed checkpoint names the one that is gone.
    let e = log
        .verify_checkpoints(Some(&key), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("s/acme/s2") && e.contains("dropped"), "{e}");
}
