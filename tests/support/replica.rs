//! `agenra serve` replicas on one PostgreSQL log, for the replica tests
//! (`tests/serve_replicas*.rs`): a free address, a replica killed when
//! dropped, and a start that waits for `/health`.
#![allow(dead_code)]

use agenra_gateway::client::Client;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_agenra");

/// A loopback address nobody listens on (yet).
pub fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// A replica, killed when dropped.
pub struct Replica(pub Child);

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `agenra serve --insecure-no-auth` on the store `url`, listening on
/// `addr`, once its `/health` answers (20 s at most).
pub fn start(policy: &Path, url: &str, addr: SocketAddr) -> Replica {
    let child = Command::new(BIN)
        .args(["serve", "--insecure-no-auth", "--policy"])
        .arg(policy)
        .args(["--store", url, "--listen", &addr.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start agenra serve");
    let replica = Replica(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(mut c) = Client::connect(addr) {
            if matches!(c.get("/health"), Ok((200, _))) {
                return replica;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("agenra serve --store {url} did not come up on {addr}");
}

/// Hundredths of a decimal string (`12.5` is 1250).
pub fn cents(text: &str) -> u64 {
    let (units, frac) = text.split_once('.').unwrap_or((text, "0"));
    let frac = format!("{frac:0<2}");
    units.parse::<u64>().unwrap() * 100 + frac[..2].parse::<u64>().unwrap()
}

/// Eight sessions `s0`..`s7` of tenant `acme`, alternately on `addrs[0]`
/// and `addrs[1]`, each sending ten `wire.send` calls `c0`..`c9` of 1.50
/// or 3.00 at once (180.00 asked in all; every amount a multiple of 1.50):
/// the ALLOWed calls as (session, call, amount).
pub fn spend_from_eight_sessions(addrs: [SocketAddr; 2]) -> Vec<(String, String, &'static str)> {
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let addr = addrs[t % 2];
            std::thread::spawn(move || {
                let mut c = Client::connect(addr).unwrap();
                let session = format!("s{t}");
                let (status, view) = c
                    .post(
                        "/v1/sessions",
                        &serde_json::json!({"tenant": "acme", "session": session}),
                    )
                    .unwrap();
                assert_eq!(status, 201, "{view}");
                let mut allowed = Vec::new();
                for n in 0..10 {
                    let amount = if (t + n) % 2 == 0 { "1.50" } else { "3.00" };
                    let call = serde_json::json!({"tenant": "acme", "session": session,
                        "call": {"id": format!("c{n}"), "tool": "wire.send",
                                 "args": {"to": "x", "amount": amount}}});
                    let (status, answer) = c.post("/v1/authorize", &call).unwrap();
                    assert_eq!(status, 200, "{answer}");
                    if answer["decision"] == "ALLOW" {
                        allowed.push((session.clone(), format!("c{n}"), amount));
                    }
                }
                allowed
            })
        })
        .collect();
    threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect()
}
