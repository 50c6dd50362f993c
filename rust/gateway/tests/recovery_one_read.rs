//! Recovery reads the log once, checking the chain, and reads again by
//! number only the records it applies (`docs/store.md`, "Recovery"). The
//! records a snapshot covers are not replayed, yet a change to one is
//! still refused at start, and a record that reads differently the second
//! time than when the chain was checked is refused too.

use agenra_core::CompiledPolicy;
use agenra_gateway::api::Authorize;
use agenra_gateway::Gateway;
use agenra_store::{Backend, Head, Log, MemoryBackend, Record, StoreError, Visit};
use serde_json::json;

const POLICY: &str = "tool pay.send(to: string) { resource to; }\n\
    grant pay: pay.send quota 100;\n";

fn open(log: Log) -> Result<Gateway, String> {
    let compiled = agenra_policy::compile(POLICY, "one-read").unwrap();
    let policy = CompiledPolicy::new(compiled.policy).unwrap();
    Gateway::open(log, policy, "one-read.agr", false).map_err(|e| e.to_string())
}

fn pay(gw: &Gateway, id: &str) {
    let req: Authorize = serde_json::from_value(json!({
        "session": "s", "call": {"id": id, "tool": "pay.send", "args": {"to": "bob"}}
    }))
    .unwrap();
    gw.authorize(req).unwrap().wait().unwrap();
}

/// The lines of a log with one session of 4 calls, a snapshot of it, then
/// one call more, and the log's head.
fn lines(name: &str) -> (Vec<Vec<u8>>, Head) {
    let path = std::env::temp_dir().join(format!("agenra-one-read-{name}-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    {
        let gw = open(Log::open_redb(&path).unwrap()).unwrap();
        gw.set_snapshot_every(4).unwrap();
        gw.create_session(None, Some("s".into()), None)
            .unwrap()
            .wait()
            .unwrap();
        for i in 0..5 {
            pay(&gw, &format!("c{i}"));
        }
    }
    let log = Log::open_redb(&path).unwrap();
    let mut lines = vec![];
    log.scan(1, &mut |_, line| {
        lines.push(line.to_vec());
        Ok(())
    })
    .unwrap();
    let head = log.head();
    drop(log);
    let _ = std::fs::remove_file(&path);
    (lines, head)
}

fn kinds(lines: &[Vec<u8>]) -> Vec<String> {
    lines
        .iter()
        .map(|l| {
            let r: Record = serde_json::from_slice(l).unwrap();
            serde_json::to_value(r.kind)
                .unwrap()
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

fn backend(lines: &[Vec<u8>], head: &Head) -> MemoryBackend {
    let mut b = MemoryBackend::default();
    b.append(1, lines, head).unwrap();
    b
}

#[test]
fn the_log_restores_from_its_snapshot_and_replays_the_tail() {
    let (lines, head) = lines("tail");
    let kinds = kinds(&lines);
    assert_eq!(
        kinds,
        ["policy", "session", "event", "event", "event", "event", "snapshot", "event"]
    );
    let gw = open(Log::open(Box::new(backend(&lines, &head))).unwrap()).unwrap();
    let r = gw.snapshot_recovery();
    assert_eq!((r.restored, r.skipped), (1, 4));
    // A covered call's id is still used; the tail's too.
    for id in ["c0", "c4"] {
        let req: Authorize = serde_json::from_value(json!({
            "session": "s", "call": {"id": id, "tool": "pay.send", "args": {"to": "eve"}}
        }))
        .unwrap();
        let e = gw.authorize(req).err().map(|e| e.status);
        assert_eq!(e, Some(409), "{id}");
    }
}

#[test]
fn a_changed_record_that_a_snapshot_covers_is_still_refused() {
    let (mut lines, head) = lines("changed");
    // Record 4 is the session's second call: covered by the snapshot
    // (record 7), so never replayed; its bytes are still hashed.
    let text = String::from_utf8(lines[3].clone()).unwrap();
    assert!(text.contains("\"c1\""), "{text}");
    lines[3] = text.replace("\"bob\"", "\"eve\"").into_bytes();
    let e = open(Log::open(Box::new(backend(&lines, &head))).unwrap())
        .err()
        .unwrap();
    assert!(
        e.contains("audit record 4") && e.contains("was changed"),
        "{e}"
    );
}

/// A backend whose keyed reads give other bytes for one record than its
/// scan (as if the file changed between the two reads).
struct Changing {
    inner: MemoryBackend,
    seq: u64,
    line: Vec<u8>,
}

impl Backend for Changing {
    fn append(&mut self, first: u64, lines: &[Vec<u8>], head: &Head) -> Result<(), StoreError> {
        self.inner.append(first, lines, head)
    }
    fn scan(&self, from: u64, f: Visit<'_>) -> Result<(), StoreError> {
        self.inner.scan(from, f)
    }
    fn head(&self) -> Result<Head, StoreError> {
        self.inner.head()
    }
    fn keyed_reads(&self) -> bool {
        true
    }
    fn get(&self, seqs: &[u64], f: Visit<'_>) -> Result<(), StoreError> {
        self.inner.get(seqs, &mut |seq, line| {
            if seq == self.seq {
                f(seq, &self.line)
            } else {
                f(seq, line)
            }
        })
    }
}

#[test]
fn a_record_read_again_must_be_the_one_checked() {
    let (lines, head) = lines("again");
    // Record 2 (the session record) is read again to be applied: given
    // the bytes of another valid record, it is refused, naming it.
    let changing = Changing {
        inner: backend(&lines, &head),
        seq: 2,
        line: lines[7].clone(),
    };
    let e = open(Log::open(Box::new(changing)).unwrap()).err().unwrap();
    assert!(
        e.contains("audit record 2") && e.contains("changed since the chain was checked"),
        "{e}"
    );
}
