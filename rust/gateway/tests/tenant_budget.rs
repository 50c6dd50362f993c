//! A `budget B on amount per tenant` grant on the embedded store: sessions
//! of one tenant spend one amount budget concurrently, the sum of the
//! ALLOWed amounts is exactly the budget when demand exceeds it,
//! `GET /v1/sessions/{id}` shows what is left (and a per-session budget's
//! own), and a restart rebuilds the pool and every decision by replaying
//! the log.

use agenra_core::CompiledPolicy;
use agenra_gateway::client::Client;
use agenra_gateway::{Gateway, Server};
use agenra_store::Log;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

/// The tenant's budget, in cents as a decimal: 100.00.
const BUDGET: &str = "100.00";

fn serve(store: &Path) -> Server {
    let text = format!(
        "tool wire.send(to: string, amount: decimal) {{ resource to; }}\n\
         tool pay.send(to: string, amount: decimal) {{ resource to; }}\n\
         grant wire: wire.send budget {BUDGET} on amount per tenant;\n\
         grant pay: pay.send budget 10 on amount;\n"
    );
    let compiled = agenra_policy::compile(&text, "budget").unwrap();
    let policy = CompiledPolicy::new(compiled.policy).unwrap();
    let gateway =
        Gateway::open(Log::open_redb(store).unwrap(), policy, "budget.agr", false).unwrap();
    Server::spawn(
        Arc::new(gateway),
        Arc::new(agenra_gateway::Perimeter::insecure(Vec::new())),
        "127.0.0.1:0",
    )
    .unwrap()
}

/// Amounts in hundredths: 2.50, 3.75, 1.25, ... (exact decimals).
fn amount(t: usize, n: usize) -> String {
    let cents = 125 + 125 * ((t + n) % 3);
    format!("{}.{:02}", cents / 100, cents % 100)
}

fn cents(text: &str) -> u64 {
    let (units, frac) = text.split_once('.').unwrap_or((text, "0"));
    let frac = format!("{frac:0<2}");
    units.parse::<u64>().unwrap() * 100 + frac[..2].parse::<u64>().unwrap()
}

#[test]
fn sessions_of_a_tenant_spend_its_budget_exactly_and_recovery_rebuilds_it() {
    let dir = std::env::temp_dir().join(format!("agenra-tenant-budget-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let store = dir.join("store.redb");
    let server = serve(&store);
    let addr = server.addr();
    // 6 sessions × 12 calls of 1.25 to 3.75: about 180.00 asked of 100.00.
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
                let mut spent = 0u64;
                for n in 0..12 {
                    let a = amount(t, n);
                    let call = json!({"tenant": "acme", "session": session,
                        "call": {"id": format!("c{n}"), "tool": "wire.send",
                                 "args": {"to": "x", "amount": a}}});
                    let (status, answer) = c.post("/v1/authorize", &call).unwrap();
                    assert_eq!(status, 200, "{answer}");
                    if answer["decision"] == "ALLOW" {
                        spent += cents(&a);
                    }
                }
                spent
            })
        })
        .collect();
    let spent: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    // Every call is 1.25, 2.50 or 3.75: once less than 1.25 is left, no call
    // fits; demand exceeds the budget, so at most 1.24 is left unspent, and
    // the calls are multiples of 1.25, so exactly 100.00 is spent.
    assert_eq!(
        spent,
        cents(BUDGET),
        "ALLOWed amounts across the tenant's sessions"
    );
    let mut c = Client::connect(addr).unwrap();
    let (_, before) = c.get("/v1/sessions/s3?tenant=acme").unwrap();
    assert_eq!(before["budgets"]["wire"], "0", "{before}");
    assert_eq!(before["budgets"]["pay"], "10", "{before}");
    // A per-session budget: this session's own.
    let (_, answer) = c
        .post(
            "/v1/authorize",
            &json!({"tenant": "acme", "session": "s3",
                    "call": {"id": "p0", "tool": "pay.send", "args": {"to": "x", "amount": "9.99"}}}),
        )
        .unwrap();
    assert_eq!(answer["decision"], "ALLOW", "{answer}");
    let (_, view) = c.get("/v1/sessions/s3?tenant=acme").unwrap();
    assert_eq!(view["budgets"]["pay"], "0.01", "{view}");
    let (_, other) = c.get("/v1/sessions/s4?tenant=acme").unwrap();
    assert_eq!(other["budgets"]["pay"], "10", "{other}");
    // A failed call gives its amount back to the tenant.
    let (status, failed) = c
        .post(
            "/v1/report",
            &json!({"tenant": "acme", "session": "s3", "call": "p0", "status": "failed"}),
        )
        .unwrap();
    assert_eq!(status, 200, "{failed}");
    let (_, view) = c.get("/v1/sessions/s3?tenant=acme").unwrap();
    assert_eq!(view["budgets"]["pay"], "10", "{view}");
    let hashes: Vec<serde_json::Value> = (0..6)
        .map(|t| c.get(&format!("/v1/sessions/s{t}?tenant=acme")).unwrap().1["ledger_hash"].clone())
        .collect();
    drop(c);
    server.stop();

    // Recovery replays every decision against the rebuilt pool.
    let server = serve(&store);
    let mut c = Client::connect(server.addr()).unwrap();
    for (t, hash) in hashes.iter().enumerate() {
        let (status, view) = c.get(&format!("/v1/sessions/s{t}?tenant=acme")).unwrap();
        assert_eq!(status, 200, "{view}");
        assert_eq!(view["budgets"]["wire"], "0", "{view}");
        assert_eq!(&view["ledger_hash"], hash, "{view}");
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
                    "call": {"id": "c0", "tool": "wire.send", "args": {"to": "x", "amount": "0.01"}}}),
        )
        .unwrap();
    assert_eq!(
        answer["decision"], "DENY",
        "a new session finds the budget spent: {answer}"
    );
    assert!(
        answer["reason"]
            .as_str()
            .is_some_and(|r| r.contains("exceeds what is left")),
        "{answer}"
    );
    drop(c);
    server.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
