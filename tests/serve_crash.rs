//! Crash test of `agenra serve` on the embedded store: client threads send
//! consuming calls while the server is killed with SIGKILL several times
//! and restarted. Clients retry a call whose answer they did not get (same
//! id: the server answers a decided call with its recorded answer). In the
//! end, each session's spent units equal the ALLOWs its client received
//! (none lost, none spent twice), and `agenra audit verify` accepts the
//! store.

use agenra_gateway::client::Client;
use serde_json::json;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_agenra");
const QUOTA: u64 = 150;
const CALLS: u64 = 200;
const CLIENTS: usize = 4;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agenra-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start(policy: &Path, store: &Path, addr: SocketAddr) -> Child {
    let mut child = Command::new(BIN)
        .args(["serve", "--insecure-no-auth", "--policy"])
        .arg(policy)
        .arg("--store")
        .arg(store)
        .args(["--listen", &addr.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start agenra serve");
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(mut c) = Client::connect(addr) {
            if matches!(c.get("/health"), Ok((200, _))) {
                return child;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("agenra serve did not come up on {addr}");
}

/// Sends `body` until an answer arrives (reconnecting across restarts).
fn until_answered(
    conn: &mut Option<Client>,
    addr: SocketAddr,
    path: &str,
    body: &serde_json::Value,
    deadline: Instant,
) -> (u16, serde_json::Value) {
    loop {
        assert!(Instant::now() < deadline, "no answer to {body} in time");
        if conn.is_none() {
            *conn = Client::connect(addr).ok();
        }
        if let Some(c) = conn.as_mut() {
            match c.post(path, body) {
                Ok(answer) => return answer,
                Err(_) => *conn = None,
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Kills the server when dropped (also when an assertion fails).
struct Reaper(Arc<Mutex<Child>>, Arc<AtomicBool>);

impl Drop for Reaper {
    fn drop(&mut self) {
        self.1.store(true, Ordering::Relaxed);
        let mut child = match self.0.lock() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        };
        let _ = child.kill();
        let _ = child.wait();
    }
}

#[test]
fn kill_9_loses_no_unit_and_spends_none_twice() {
    let dir = temp_dir("serve-crash");
    let policy = dir.join("policy.agr");
    std::fs::write(
        &policy,
        format!(
            "tool pay.send(to: string, amount: int) {{ resource to; }}\n\
             grant pay: pay.send on glob \"*@example.com\" quota {QUOTA};\n"
        ),
    )
    .unwrap();
    let store = dir.join("store.redb");
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let server = Arc::new(Mutex::new(start(&policy, &store, addr)));
    let done = Arc::new(AtomicBool::new(false));
    // Whatever happens below, the server does not outlive the test.
    let _reaper = Reaper(Arc::clone(&server), Arc::clone(&done));
    let deadline = Instant::now() + Duration::from_secs(60);
    let answered = Arc::new(AtomicU64::new(0));

    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let answered = Arc::clone(&answered);
            std::thread::spawn(move || {
                let session = format!("s{i}");
                let mut conn = None;
                let (status, body) = until_answered(
                    &mut conn,
                    addr,
                    "/v1/sessions",
                    &json!({"tenant": "crash", "session": session}),
                    deadline,
                );
                assert!(status == 201 || status == 200, "{status} {body}");
                let mut allows = 0;
                for n in 0..CALLS {
                    let call = json!({
                        "tenant": "crash",
                        "session": session,
                        "call": {"id": format!("c{n}"), "tool": "pay.send",
                                 "args": {"to": "bob@example.com", "amount": n}}
                    });
                    let (status, answer) =
                        until_answered(&mut conn, addr, "/v1/authorize", &call, deadline);
                    assert_eq!(status, 200, "{answer}");
                    answered.fetch_add(1, Ordering::Relaxed);
                    match answer["decision"].as_str() {
                        Some("ALLOW") => allows += 1,
                        Some("DENY") => assert_eq!(answer["rule"], "no-grant", "{answer}"),
                        other => panic!("unexpected decision {other:?}: {answer}"),
                    }
                }
                (session, allows)
            })
        })
        .collect();

    // Kill the server mid-stream a few times (at a fifth, two fifths, …
    // of the calls answered), and bring it back.
    let killer = {
        let server = Arc::clone(&server);
        let done = Arc::clone(&done);
        let answered = Arc::clone(&answered);
        let (policy, store) = (policy.clone(), store.clone());
        std::thread::spawn(move || {
            let mut kills = 0;
            let total = CALLS * CLIENTS as u64;
            for k in 1..=4 {
                while answered.load(Ordering::Relaxed) < k * total / 5 {
                    if done.load(Ordering::Relaxed) {
                        return kills;
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                let mut s = server.lock().unwrap();
                if done.load(Ordering::Relaxed) {
                    break;
                }
                s.kill().unwrap(); // SIGKILL
                s.wait().unwrap();
                kills += 1;
                std::thread::sleep(Duration::from_millis(30));
                *s = start(&policy, &store, addr);
            }
            kills
        })
    };

    let results: Vec<(String, u64)> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    done.store(true, Ordering::Relaxed);
    let kills = killer.join().unwrap();
    assert_eq!(kills, 4, "the server was killed only {kills} times");

    // One more crash after the last answer, then recovery.
    {
        let mut s = server.lock().unwrap();
        s.kill().unwrap();
        s.wait().unwrap();
        *s = start(&policy, &store, addr);
    }
    let mut c = Client::connect(addr).unwrap();
    for (session, allows) in &results {
        let (status, view) = c
            .get(&format!("/v1/sessions/{session}?tenant=crash"))
            .unwrap();
        assert_eq!(status, 200, "{view}");
        let left = view["ledger"]["pay"].as_u64().unwrap();
        assert_eq!(
            QUOTA - left,
            *allows,
            "session {session}: units spent must equal the ALLOWs received"
        );
        assert_eq!(
            *allows, QUOTA,
            "every call was answered, so the quota is used up"
        );
        assert_eq!(view["events"].as_u64().unwrap(), CALLS, "{view}");
    }
    {
        let mut s = server.lock().unwrap();
        s.kill().unwrap();
        s.wait().unwrap();
    }
    let verify = Command::new(BIN)
        .args(["audit", "verify", "--store"])
        .arg(&store)
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "audit verify: {}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
