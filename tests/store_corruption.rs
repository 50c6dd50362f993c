//! `agenra serve` and `agenra audit verify --store` on a damaged store
//! file: an empty, truncated or bit-flipped store is an error with exit
//! code 1 and a message naming the file, never a panic (exit 101) and never
//! a server that starts without a recorded event (a spent quota coming back
//! unused).

use agenra_core::CompiledPolicy;
use agenra_gateway::client::Client;
use agenra_gateway::{Gateway, Server};
use agenra_store::Log;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_agenra");
const POLICY: &str = "tool wire.send(to: string) { resource to; }\n\
                      grant wire: wire.send quota 3;\n";

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agenra-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn gateway(store: &Path) -> Result<Gateway, String> {
    let compiled = agenra_policy::compile(POLICY, "policy").unwrap();
    let policy = CompiledPolicy::new(compiled.policy).unwrap();
    let log = Log::open_redb(store).map_err(|e| e.to_string())?;
    Gateway::open(log, policy, "policy.agr", false).map_err(|e| e.to_string())
}

/// A store where session `s0` spent its quota of 3 (3 ALLOWs, 1 DENY).
fn spent_store(store: &Path) {
    let server = Server::spawn(
        std::sync::Arc::new(gateway(store).unwrap()),
        std::sync::Arc::new(agenra_gateway::Perimeter::insecure(Vec::new())),
        "127.0.0.1:0",
    )
    .unwrap();
    let mut c = Client::connect(server.addr()).unwrap();
    let (status, _) = c.post("/v1/sessions", &json!({"session": "s0"})).unwrap();
    assert_eq!(status, 201);
    let mut allows = 0;
    for n in 0..4 {
        let call = json!({"session": "s0",
            "call": {"id": format!("c{n}"), "tool": "wire.send", "args": {"to": "x"}}});
        let (status, answer) = c.post("/v1/authorize", &call).unwrap();
        assert_eq!(status, 200, "{answer}");
        allows += u32::from(answer["decision"] == "ALLOW");
    }
    assert_eq!(allows, 3);
    drop(c);
    server.stop();
}

/// Runs `agenra` with `args`; a process still running after 30 s (a server
/// that started) is killed and reported as `None`.
fn run(args: &[&std::ffi::OsStr]) -> Option<Output> {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            return Some(child.wait_with_output().unwrap());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// `serve` and `audit verify --store` on `store` both exit 1 with a
/// message naming it and saying `expect`; returns `verify`'s message.
fn both_refuse(dir: &Path, store: &Path, expect: &str) -> String {
    let policy = dir.join("policy.agr");
    std::fs::write(&policy, POLICY).unwrap();
    let verify = run(&[
        "audit".as_ref(),
        "verify".as_ref(),
        "--store".as_ref(),
        store.as_os_str(),
    ])
    .expect("audit verify finishes");
    let serve = run(&[
        "serve".as_ref(),
        "--insecure-no-auth".as_ref(),
        "--policy".as_ref(),
        policy.as_os_str(),
        "--store".as_ref(),
        store.as_os_str(),
        "--listen".as_ref(),
        "127.0.0.1:0".as_ref(),
    ])
    .expect("agenra serve started on a damaged store");
    let name = store.display().to_string();
    let mut messages = Vec::new();
    for (what, out) in [("audit verify", &verify), ("serve", &serve)] {
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(1), "{what}: {err}");
        assert!(err.contains(&name) && err.contains(expect), "{what}: {err}");
        assert!(!err.contains("panicked"), "{what}: {err}");
        messages.push(err);
    }
    messages.swap_remove(0)
}

#[test]
fn an_empty_store_file_is_refused_not_taken_for_a_new_store() {
    let dir = temp_dir("store-empty");
    let store = dir.join("store.redb");
    spent_store(&store);
    std::fs::write(&store, b"").unwrap();
    both_refuse(&dir, &store, "is empty");
    assert_eq!(
        std::fs::metadata(&store).unwrap().len(),
        0,
        "left untouched"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_truncated_store_file_exits_1_not_101() {
    let dir = temp_dir("store-truncated");
    let store = dir.join("store.redb");
    spent_store(&store);
    let bytes = std::fs::read(&store).unwrap();
    for n in [5, 100, 4096, bytes.len() / 2, bytes.len() - 1] {
        std::fs::write(&store, &bytes[..n]).unwrap();
        both_refuse(&dir, &store, "is corrupt");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The red team's case: one bit of the last record's storage key flipped.
/// The server must not start with the session's last ALLOW missing, and
/// `audit verify` must not call the chain intact.
#[test]
fn a_flipped_key_bit_is_refused_by_serve_and_verify_alike() {
    let dir = temp_dir("store-keyflip");
    let store = dir.join("store.redb");
    spent_store(&store);
    let head = Log::open_redb(&store).unwrap().head();
    let mut bytes = std::fs::read(&store).unwrap();
    // The leaf with the last keys stores them side by side (u64, LE).
    let keys: Vec<u8> = (head.seq - 2..=head.seq)
        .flat_map(u64::to_le_bytes)
        .collect();
    let found: Vec<usize> = bytes
        .windows(keys.len())
        .enumerate()
        .filter(|(_, w)| *w == keys.as_slice())
        .map(|(i, _)| i)
        .collect();
    assert_eq!(found.len(), 1, "the leaf holding the last keys");
    bytes[found[0] + 16 + 5] ^= 1;
    std::fs::write(&store, &bytes).unwrap();
    both_refuse(&dir, &store, "is corrupt");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A backend holding `lines` under `keys` (what a storage key that changed
/// under an intact chain looks like to the log), read in key order.
struct Keyed {
    rows: Vec<(u64, Vec<u8>)>,
    head: agenra_store::Head,
}

impl agenra_store::Backend for Keyed {
    fn append(
        &mut self,
        first: u64,
        lines: &[Vec<u8>],
        head: &agenra_store::Head,
    ) -> Result<(), agenra_store::StoreError> {
        for (i, line) in lines.iter().enumerate() {
            self.rows.push((first + i as u64, line.clone()));
        }
        self.head = head.clone();
        Ok(())
    }
    fn scan(&self, from: u64, f: agenra_store::Visit<'_>) -> Result<(), agenra_store::StoreError> {
        let mut rows: Vec<&(u64, Vec<u8>)> = self.rows.iter().filter(|r| r.0 >= from).collect();
        rows.sort_by_key(|r| r.0);
        for (k, line) in rows {
            f(*k, line)?;
        }
        Ok(())
    }
    fn head(&self) -> Result<agenra_store::Head, agenra_store::StoreError> {
        Ok(self.head.clone())
    }
}

/// The spent store's records, with the last one's key moved by `shift`.
fn keyed(store: &Path, shift: u64) -> Log {
    let log = Log::open_redb(store).unwrap();
    let mut rows = Vec::new();
    log.scan(1, &mut |seq, line| {
        rows.push((seq, line.to_vec()));
        Ok(())
    })
    .unwrap();
    if let Some(last) = rows.last_mut() {
        last.0 += shift;
    }
    Log::open(Box::new(Keyed {
        rows,
        head: log.head(),
    }))
    .unwrap()
}

fn open_on(log: Log) -> Result<Gateway, String> {
    let compiled = agenra_policy::compile(POLICY, "policy").unwrap();
    let policy = CompiledPolicy::new(compiled.policy).unwrap();
    Gateway::open(log, policy, "policy.agr", false).map_err(|e| e.to_string())
}

/// The red team's case below redb: the last record (the third ALLOW) under
/// key + 2^40, the chain in the records intact. The gateway used to start
/// with that ALLOW missing (a unit of quota back) while `verify` called the
/// chain intact; now recovery and `verify` stop at the same record.
#[test]
fn recovery_and_verify_stop_at_the_same_moved_key() {
    let dir = temp_dir("store-movedkey");
    let store = dir.join("store.redb");
    spent_store(&store);
    let head = Log::open_redb(&store).unwrap().head();
    // Intact: the session's quota is spent after recovery.
    let intact = open_on(keyed(&store, 0)).unwrap();
    let view = intact.session_view(None, "s0").unwrap();
    assert_eq!(view.ledger.get("wire"), Some(&Some(0)), "{:?}", view.ledger);
    drop(intact);
    let verified = keyed(&store, 1 << 40).verify().unwrap_err().to_string();
    let recovered = open_on(keyed(&store, 1 << 40))
        .err()
        .expect("must not start");
    let named = format!(
        "audit record {}: the next record is stored under key {}, expected key {}",
        head.seq,
        head.seq + (1 << 40),
        head.seq
    );
    assert!(verified.starts_with(&named), "{verified}");
    assert_eq!(recovered, verified, "one reader, one answer");
    let _ = std::fs::remove_dir_all(&dir);
}
