//! `agenra audit keygen`, `agenra serve --checkpoint-key`, and `agenra
//! audit verify --public-key [--checkpoint]` end to end: the server signs
//! its log, recovery skips the checkpoints, verify accepts the log with the
//! right key and the kept checkpoint, and rejects another key and a log cut
//! before the kept checkpoint.

use agenra_gateway::client::Client;
use serde_json::json;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_agenra");

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

fn start(dir: &Path, addr: SocketAddr) -> Child {
    let mut child = Command::new(BIN)
        .args(["serve", "--insecure-no-auth", "--policy"])
        .arg(dir.join("policy.agr"))
        .arg("--store")
        .arg(dir.join("store.redb"))
        .args(["--listen", &addr.to_string()])
        .arg("--checkpoint-key")
        .arg(dir.join("key"))
        .args(["--checkpoint-every", "3"])
        .arg("--checkpoint-out")
        .arg(dir.join("last.checkpoint"))
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

/// SIGTERM, then wait: the server stops cleanly (and signs its tail).
fn stop(mut child: Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("agenra serve did not stop on SIGTERM");
}

fn agenra(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn calls(addr: SocketAddr, session: &str, n: u64) {
    let mut c = Client::connect(addr).unwrap();
    let (status, body) = c
        .post("/v1/sessions", &json!({"tenant": "t", "session": session}))
        .unwrap();
    assert!(status == 201 || status == 200, "{status} {body}");
    for i in 0..n {
        let (status, answer) = c
            .post(
                "/v1/authorize",
                &json!({"tenant": "t", "session": session,
                        "call": {"id": format!("c{i}"), "tool": "pay.send",
                                 "args": {"to": "bob@example.com", "amount": i}}}),
            )
            .unwrap();
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["decision"], "ALLOW", "{answer}");
    }
}

#[test]
fn serve_signs_its_log_and_verify_checks_it() {
    let dir = temp_dir("audit-checkpoint");
    std::fs::write(
        dir.join("policy.agr"),
        "tool pay.send(to: string, amount: int) { resource to; }\n\
         grant pay: pay.send on glob \"*@example.com\" quota 100;\n",
    )
    .unwrap();
    let key = dir.join("key").display().to_string();
    let out = agenra(&["audit", "keygen", "--out", &key]);
    assert!(out.status.success(), "{}", text(&out));
    let public = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(public.len(), 64, "{public}");
    let other = dir.join("other").display().to_string();
    let out = agenra(&["audit", "keygen", "--out", &other]);
    assert!(out.status.success(), "{}", text(&out));
    let other_public = String::from_utf8_lossy(&out.stdout).trim().to_string();

    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let server = start(&dir, addr);
    calls(addr, "s1", 5);
    stop(server);
    // Restarted: recovery skips the checkpoint records; the session goes on.
    let server = start(&dir, addr);
    let mut c = Client::connect(addr).unwrap();
    let (status, view) = c.get("/v1/sessions/s1?tenant=t").unwrap();
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["ledger"]["pay"], 95, "{view}");
    calls(addr, "s2", 2);
    stop(server);

    let store = dir.join("store.redb").display().to_string();
    let kept = dir.join("last.checkpoint").display().to_string();
    let ok = agenra(&[
        "audit",
        "verify",
        "--store",
        &store,
        "--public-key",
        &public,
        "--checkpoint",
        &kept,
    ]);
    assert!(ok.status.success(), "{}", text(&ok));
    assert!(text(&ok).contains("all check"), "{}", text(&ok));
    assert!(
        text(&ok).contains("reaches the kept checkpoint"),
        "{}",
        text(&ok)
    );
    // The server signed its tail when it stopped: nothing after the last.
    assert!(text(&ok).contains("(0 records after it"), "{}", text(&ok));

    let wrong = agenra(&[
        "audit",
        "verify",
        "--store",
        &store,
        "--public-key",
        &other_public,
    ]);
    assert_eq!(wrong.status.code(), Some(1), "{}", text(&wrong));
    assert!(text(&wrong).contains("another key"), "{}", text(&wrong));

    // An exported copy cut before the kept checkpoint: its chain checks,
    // the kept checkpoint catches it.
    let export = dir.join("log.jsonl");
    let out = agenra(&[
        "audit",
        "export",
        "--store",
        &store,
        "-o",
        &export.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let all = std::fs::read_to_string(&export).unwrap();
    let lines: Vec<&str> = all.lines().collect();
    let cut = dir.join("cut.jsonl");
    std::fs::write(&cut, lines[..lines.len() - 2].join("\n")).unwrap();
    let cut = cut.display().to_string();
    let plain = agenra(&["audit", "verify", &cut]);
    assert!(plain.status.success(), "{}", text(&plain));
    let caught = agenra(&[
        "audit",
        "verify",
        &cut,
        "--public-key",
        &public,
        "--checkpoint",
        &kept,
    ]);
    assert_eq!(caught.status.code(), Some(1), "{}", text(&caught));
    assert!(text(&caught).contains("truncated"), "{}", text(&caught));
    let _ = std::fs::remove_dir_all(&dir);
}
