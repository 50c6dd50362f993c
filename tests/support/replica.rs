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
