//! Two `agenra serve --partitioned-log` processes on one PostgreSQL
//! database (`docs/store.md`, "A log partitioned by session"): clients on
//! distinct sessions through both, a session both serve, a replica killed
//! with SIGKILL and restarted; `agenra audit verify --store postgres://…
//! --public-key` reads every partition and every signed checkpoint, and
//! rejects another key. The single-chain store refuses the database.
//!
//! Needs `AGENRA_TEST_PG` (`scripts/with-postgres cargo test …`); without
//! it the test says SKIPPED (and fails under `CI=true`).

use agenra_gateway::client::Client;
use serde_json::json;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "support/replica.rs"]
mod replica;

use replica::{free_addr, Replica, BIN};

const QUOTA: u64 = 5;

fn start(policy: &Path, url: &str, key: &Path, addr: SocketAddr) -> Replica {
    start_with(policy, url, key, addr, &["--checkpoint-every", "3"])
}

/// `agenra serve --partitioned-log` signing with `key`, with `extra`
/// arguments, once it answers `/health`.
fn start_with(policy: &Path, url: &str, key: &Path, addr: SocketAddr, extra: &[&str]) -> Replica {
    let child = Command::new(BIN)
        .args([
            "serve",
            "--insecure-no-auth",
            "--partitioned-log",
            "--policy",
        ])
        .arg(policy)
        .args(["--store", url, "--listen", &addr.to_string()])
        .arg("--checkpoint-key")
        .arg(key)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start agenra serve");
    let mut replica = Replica(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(mut c) = Client::connect(addr) {
            if matches!(c.get("/health"), Ok((200, _))) {
                return replica;
            }
        }
        if let Ok(Some(status)) = replica.0.try_wait() {
            let mut err = String::new();
            if let Some(mut e) = replica.0.stderr.take() {
                use std::io::Read;
                let _ = e.read_to_string(&mut err);
            }
            panic!("agenra serve --partitioned-log on {addr} stopped ({status}): {err}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("agenra serve --partitioned-log did not come up on {addr}");
}

fn pay(c: &mut Client, session: &str, id: &str) -> String {
    let (status, a) = c
        .post(
            "/v1/authorize",
            &json!({"tenant": "acme", "session": session,
                    "call": {"id": id, "tool": "pay.send", "args": {"to": "b@example.com"}}}),
        )
        .unwrap();
    assert_eq!(status, 200, "{a}");
    a["decision"].as_str().unwrap_or_default().to_string()
}

fn verify(url: &str, key: &str) -> (bool, String) {
    let out = Command::new(BIN)
        .args(["audit", "verify", "--store", url, "--public-key", key])
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn partitioned_replicas_verify_and_recover() {
    let Some(url) = agenra_store::test_database("serve_partitioned") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("agenra-serve-parts-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("policy.agr");
    std::fs::write(
        &policy,
        format!(
            "tool pay.send(to: string) {{ resource to; }}\n\
             grant pay: pay.send on glob \"*@example.com\" quota {QUOTA};\n"
        ),
    )
    .unwrap();
    let key = dir.join("checkpoint.key");
    let public = agenra_store::generate_key_file(&key).unwrap();
    let addrs = [free_addr(), free_addr()];
    let a = start(&policy, &url, &key, addrs[0]);
    let mut b = start(&policy, &url, &key, addrs[1]);
    let mut ca = Client::connect(addrs[0]).unwrap();
    let mut cb = Client::connect(addrs[1]).unwrap();
    for (on_a, s) in [(true, "a1"), (false, "b1"), (true, "both")] {
        let c = if on_a { &mut ca } else { &mut cb };
        let (status, v) = c
            .post("/v1/sessions", &json!({"tenant": "acme", "session": s}))
            .unwrap();
        assert_eq!(status, 201, "{v}");
    }
    let mut both = 0;
    for n in 0..4 {
        assert_eq!(pay(&mut ca, "a1", &format!("a{n}")), "ALLOW");
        assert_eq!(pay(&mut cb, "b1", &format!("b{n}")), "ALLOW");
        both += u64::from(pay(&mut ca, "both", &format!("x{n}")) == "ALLOW");
        both += u64::from(pay(&mut cb, "both", &format!("y{n}")) == "ALLOW");
    }
    assert_eq!(both, QUOTA, "one session's quota through both replicas");
    // SIGKILL b, restart it: it recovers `b1` from its partition.
    drop(cb);
    b.0.kill().unwrap();
    b.0.wait().unwrap();
    drop(b);
    let b = start(&policy, &url, &key, addrs[1]);
    let mut cb = Client::connect(addrs[1]).unwrap();
    let (_, v) = cb.get("/v1/sessions/b1?tenant=acme").unwrap();
    assert_eq!(v["events"], 4, "{v}");
    assert_eq!(pay(&mut cb, "b1", "b9"), "ALLOW");
    assert_eq!(pay(&mut cb, "b1", "b10"), "DENY");
    drop((ca, cb));
    drop((a, b));

    let (ok, text) = verify(&url, &public);
    assert!(ok, "{text}");
    assert!(text.contains("partitions (by session)"), "{text}");
    assert!(text.contains("checkpoints signed by"), "{text}");
    let other = agenra_store::CheckpointSigner::from_seed([9; 32]).public_key();
    let (ok, text) = verify(&url, &other);
    assert!(!ok && text.contains("another key"), "{text}");
    // The single-chain reader refuses the database rather than reading it
    // as empty.
    let out = Command::new(BIN)
        .args(["audit", "export", "--store", &url, "-o"])
        .arg(dir.join("out.jsonl"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("partitioned by session"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn partitioned_log_refuses_the_embedded_store_and_snapshots() {
    let dir = std::env::temp_dir().join(format!("agenra-serve-parts-flags-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("policy.agr");
    std::fs::write(
        &policy,
        "tool pay.send(to: string) { resource to; }\ngrant pay: pay.send quota 1;\n",
    )
    .unwrap();
    let store = dir.join("store.redb");
    // `serve --partitioned-log` with `args` on `store`: its exit code and
    // standard error.
    let serve = |store: &std::ffi::OsStr, args: &[&std::ffi::OsStr]| {
        let out = Command::new(BIN)
            .args([
                "serve",
                "--insecure-no-auth",
                "--partitioned-log",
                "--policy",
            ])
            .arg(&policy)
            .arg("--store")
            .arg(store)
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        (out.status.code(), err)
    };
    let (code, err) = serve(store.as_os_str(), &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("--partitioned-log: it needs a PostgreSQL store"),
        "{err}"
    );
    assert!(!store.exists(), "nothing created");
    if let Some(url) = agenra_store::test_database("serve_partitioned_flags") {
        let url = std::ffi::OsStr::new(&url);
        // Session snapshots are records of the single chain only.
        let (code, err) = serve(url, &["--snapshot-every".as_ref(), "10".as_ref()]);
        assert_eq!(code, Some(1), "{err}");
        assert!(
            err.contains(
                "--snapshot-every: the log partitioned by session has no snapshot records"
            ),
            "{err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGTERM, then wait: the server stops cleanly (and signs its tail).
fn stop(mut replica: Replica) {
    let _ = Command::new("kill")
        .args(["-TERM", &replica.0.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = replica.0.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("agenra serve --partitioned-log did not stop on SIGTERM");
}

/// `--checkpoint-every Ns` and `--checkpoint-out` on a partitioned log: a
/// checkpoint by time while idle, one more on SIGTERM, each kept in the
/// file; `audit verify --checkpoint FILE` checks the log reaches it, and a
/// restart with the file kept serves on.
#[test]
fn partitioned_log_checkpoints_by_time_and_keeps_the_last_one_apart() {
    let Some(url) = agenra_store::test_database("serve_partitioned_kept") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("agenra-serve-parts-kept-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("policy.agr");
    std::fs::write(
        &policy,
        "tool pay.send(to: string) { resource to; }\ngrant pay: pay.send quota 10;\n",
    )
    .unwrap();
    let key = dir.join("checkpoint.key");
    let public = agenra_store::generate_key_file(&key).unwrap();
    let kept = dir.join("last.checkpoint");
    let addr = free_addr();
    let kept_arg = kept.display().to_string();
    let serve = |every: &str| {
        start_with(
            &policy,
            &url,
            &key,
            addr,
            &["--checkpoint-every", every, "--checkpoint-out", &kept_arg],
        )
    };
    let verify_kept = || {
        let out = Command::new(BIN)
            .args(["audit", "verify", "--store", &url, "--public-key", &public])
            .arg("--checkpoint")
            .arg(&kept)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };
    let replica = serve("1s");
    let mut c = Client::connect(addr).unwrap();
    let (status, v) = c
        .post("/v1/sessions", &json!({"tenant": "acme", "session": "s1"}))
        .unwrap();
    assert_eq!(status, 201, "{v}");
    assert_eq!(pay(&mut c, "s1", "c1"), "ALLOW");
    // Idle: the checkpoint by time is written, and kept in the file.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !kept.exists() {
        assert!(Instant::now() < deadline, "no checkpoint by time");
        std::thread::sleep(Duration::from_millis(50));
    }
    let first = std::fs::read(&kept).unwrap();
    let (ok, text) = verify_kept();
    assert!(ok, "{text}");
    assert!(text.contains("reaches the kept checkpoint"), "{text}");
    // One more decision, then SIGTERM: the last checkpoint covers it.
    assert_eq!(pay(&mut c, "s1", "c2"), "ALLOW");
    drop(c);
    stop(replica);
    let last = std::fs::read(&kept).unwrap();
    assert_ne!(first, last, "a checkpoint on SIGTERM");
    let (ok, text) = verify_kept();
    assert!(ok, "{text}");
    // A restart checks the kept checkpoint, then serves on.
    let replica = serve("100");
    let mut c = Client::connect(addr).unwrap();
    assert_eq!(pay(&mut c, "s1", "c3"), "ALLOW");
    drop(c);
    drop(replica);
    // Another file's checkpoint (of no record here) is refused.
    std::fs::write(&kept, &first[..first.len() / 2]).unwrap();
    let (ok, text) = verify_kept();
    assert!(!ok && text.contains("the kept checkpoint"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Sends `body` to `addr` until an answer arrives (across restarts).
fn until_answered(addr: SocketAddr, body: &serde_json::Value, path: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut conn: Option<Client> = None;
    loop {
        assert!(Instant::now() < deadline, "no answer to {body} in time");
        if conn.is_none() {
            conn = Client::connect(addr).ok();
        }
        if let Some(c) = conn.as_mut() {
            match c.post(path, body) {
                Ok((200 | 201, answer)) => return answer,
                // 503 (the store's writer stopped, or a restart): again.
                Ok(_) | Err(_) => conn = None,
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn kill_9_of_a_partitioned_replica_under_load_loses_nothing_and_spends_nothing_twice() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};
    let Some(url) = agenra_store::test_database("serve_partitioned_crash") else {
        return;
    };
    const CLIENTS: usize = 6;
    const CALLS: u64 = 30;
    const QUOTA: u64 = 20;
    let dir = std::env::temp_dir().join(format!("agenra-serve-parts-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let policy = dir.join("policy.agr");
    std::fs::write(
        &policy,
        format!(
            "tool pay.send(to: string) {{ resource to; }}\n\
             grant pay: pay.send on glob \"*@example.com\" quota {QUOTA};\n"
        ),
    )
    .unwrap();
    let key = dir.join("checkpoint.key");
    let public = agenra_store::generate_key_file(&key).unwrap();
    let addrs = [free_addr(), free_addr()];
    let _a = start(&policy, &url, &key, addrs[0]);
    let b = Arc::new(Mutex::new(Some(start(&policy, &url, &key, addrs[1]))));
    let answered = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    // Kills replica b with SIGKILL twice while the clients run, and
    // restarts it on the same address.
    let killer = {
        let (b, answered, stop) = (Arc::clone(&b), Arc::clone(&answered), Arc::clone(&stop));
        let (policy, url, key) = (policy.clone(), url.clone(), key.clone());
        std::thread::spawn(move || {
            for round in 1..=2u64 {
                while answered.load(Ordering::Relaxed) < round * 50 && !stop.load(Ordering::Relaxed)
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
                let mut slot = b.lock().unwrap();
                if let Some(mut r) = slot.take() {
                    let _ = r.0.kill();
                    let _ = r.0.wait();
                }
                *slot = Some(start(&policy, &url, &key, addrs[1]));
            }
        })
    };
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let answered = Arc::clone(&answered);
            std::thread::spawn(move || {
                let addr = addrs[i % 2];
                let session = format!("c{i}");
                until_answered(
                    addr,
                    &json!({"tenant": "acme", "session": session}),
                    "/v1/sessions",
                );
                let mut allows = 0;
                for n in 0..CALLS {
                    let a = until_answered(
                        addr,
                        &json!({"tenant": "acme", "session": session,
                                "call": {"id": format!("k{n}"), "tool": "pay.send",
                                         "args": {"to": "b@example.com"}}}),
                        "/v1/authorize",
                    );
                    allows += u64::from(a["decision"] == "ALLOW");
                    answered.fetch_add(1, Ordering::Relaxed);
                }
                (session, allows)
            })
        })
        .collect();
    let results: Vec<(String, u64)> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    stop.store(true, Ordering::Relaxed);
    killer.join().unwrap();
    // Every session's units spent equal the ALLOWs its client received,
    // read through replica a (which catches up on b's sessions).
    let mut c = Client::connect(addrs[0]).unwrap();
    for (session, allows) in &results {
        assert_eq!(*allows, QUOTA, "{session}: ALLOWs received");
        let (_, v) = c
            .post(
                "/v1/authorize",
                &json!({"tenant": "acme", "session": session,
                        "call": {"id": "last", "tool": "pay.send", "args": {"to": "b@example.com"}}}),
            )
            .unwrap();
        assert_eq!(v["decision"], "DENY", "{session}: {v}");
        let (_, view) = c
            .get(&format!("/v1/sessions/{session}?tenant=acme"))
            .unwrap();
        assert_eq!(view["ledger"]["pay"], 0, "{session}: {view}");
        assert_eq!(view["events"], CALLS + 1, "{session}: {view}");
    }
    drop(c);
    drop(b.lock().unwrap().take());
    let (ok, text) = verify(&url, &public);
    assert!(ok, "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}
