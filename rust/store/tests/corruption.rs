//! A damaged store file is an error, never a panic and never a store that
//! opens with a recorded event missing.
//!
//! A small store (three sessions, each with calls ALLOWed against a quota,
//! one commit per record as the writer does under light load) is written
//! once, closed cleanly or left as after a crash (the process died with the
//! file open). Then, on copies of its bytes:
//!
//! * truncations: every length over the first page (redb's header), and
//!   around every page boundary of the file;
//! * a few hundred bit flips (fixed seed), in the header, in the pages that
//!   hold records, and anywhere the file is not zero;
//!
//! each copy must either fail to open or to verify (a typed error), or open
//! and verify to the original head: the chain's last hash is the original's,
//! so every record is there, unchanged.
//!
//! The header's god byte (byte 9: which commit slot is current, whether
//! a crash repair is due, how the last commit was made) is not covered by
//! any checksum: each of its bits is flipped on its own too.

use agenra_store::{Head, Kind, Log, Record, StoreError};
use std::path::{Path, PathBuf};

const PAGE: usize = 4096;

/// A directory for the copies: in memory when the machine has `/dev/shm`
/// (each open syncs the file, thousands of times here).
fn dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let d = base.join(format!("agenra-store-corruption-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn record(kind: Kind, session: usize, call: Option<usize>) -> Record {
    Record {
        kind,
        tenant: Some("acme".into()),
        session: Some(format!("s{session}")),
        verdict: call.map(|_| "ALLOW".into()),
        grants: call.map(|_| vec!["wire".to_string()]).unwrap_or_default(),
        event: call
            .map(|c| serde_json::json!({"call": {"id": format!("c{c}"), "tool": "wire.send"}})),
        ..Record::default()
    }
}

/// Writes the small store at `path`; returns its bytes and head.
fn build(path: &Path, crashed: bool) -> (Vec<u8>, Head) {
    let _ = std::fs::remove_file(path);
    let mut log = Log::open_redb(path).unwrap();
    for s in 0..3 {
        log.append(&mut [record(Kind::Session, s, None)]).unwrap();
        for c in 0..4 {
            log.append(&mut [record(Kind::Event, s, Some(c))]).unwrap();
        }
    }
    let head = log.head();
    assert_eq!(head.seq, 15);
    if crashed {
        // As if the process died: redb's clean-shutdown writes never run
        // (the file stays locked by this process; the copies are not).
        std::mem::forget(log);
    } else {
        drop(log);
    }
    (std::fs::read(path).unwrap(), head)
}

/// What opening `bytes` (written to `path`) and verifying gives.
fn open_bytes(path: &Path, bytes: &[u8]) -> Result<Head, StoreError> {
    std::fs::write(path, bytes).unwrap();
    let log = Log::open_redb(path)?;
    log.verify()
}

/// Either an error, or every record: the original head.
fn check(path: &Path, bytes: &[u8], head: &Head, what: &str) -> bool {
    match open_bytes(path, bytes) {
        Ok(got) => {
            assert_eq!(
                &got, head,
                "{what}: opened and verified, but records are lost"
            );
            false
        }
        Err(e) => {
            let text = e.to_string();
            assert!(!text.is_empty(), "{what}: an empty error");
            true
        }
    }
}

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn fixtures(test: &str) -> Vec<(&'static str, Vec<u8>, Head)> {
    let d = dir();
    [("closed", false), ("crashed", true)]
        .into_iter()
        .map(|(name, crashed)| {
            let path = d.join(format!("{test}-fixture-{name}.redb"));
            let (bytes, head) = build(&path, crashed);
            let _ = std::fs::remove_file(&path);
            (name, bytes, head)
        })
        .collect()
}

#[test]
fn every_truncation_is_an_error_or_loses_nothing() {
    let d = dir();
    for (name, bytes, head) in fixtures("truncated") {
        let path = d.join(format!("truncated-{name}.redb"));
        let mut lengths: Vec<usize> = (0..PAGE).collect();
        for page in 2..=bytes.len() / PAGE {
            let at = page * PAGE;
            lengths.extend([at - 1, at, at + 1]);
        }
        lengths.retain(|&n| n < bytes.len());
        lengths.sort_unstable();
        lengths.dedup();
        let mut errors = 0;
        for &n in &lengths {
            if check(
                &path,
                &bytes[..n],
                &head,
                &format!("{name} truncated to {n} bytes"),
            ) {
                errors += 1;
            }
        }
        // Cut anywhere, this store is unusable: nothing opens with less.
        assert_eq!(errors, lengths.len(), "{name}");
        let _ = std::fs::remove_file(&path);
    }
    let _ = std::fs::remove_dir(&d);
}

#[test]
fn every_bit_of_the_god_byte_is_an_error_or_loses_nothing() {
    let d = dir();
    for (name, bytes, head) in fixtures("god") {
        let path = d.join(format!("god-{name}.redb"));
        for bit in 0..8 {
            let mut copy = bytes.clone();
            copy[9] ^= 1 << bit;
            check(&path, &copy, &head, &format!("{name}: god byte bit {bit}"));
        }
        let _ = std::fs::remove_file(&path);
    }
    let _ = std::fs::remove_dir(&d);
}

#[test]
fn an_empty_file_is_an_error_not_a_new_store() {
    let path = dir().join("empty.redb");
    std::fs::write(&path, b"").unwrap();
    let e = Log::open_redb(&path)
        .err()
        .expect("an empty file must not open");
    assert!(matches!(e, StoreError::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains("empty"), "{e}");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "left as it was");
    std::fs::write(&path, b"not a store at all").unwrap();
    let e = Log::open_redb(&path).err().expect("garbage must not open");
    assert!(e.to_string().contains("not a redb store file"), "{e}");
    // No file: a new store.
    std::fs::remove_file(&path).unwrap();
    let log = Log::open_redb(&path).unwrap();
    assert_eq!(log.head(), Head::default());
    drop(log);
    assert_eq!(
        Log::open_redb(&path).unwrap().verify().unwrap(),
        Head::default()
    );
    let _ = std::fs::remove_file(&path);
}

#[test]
fn random_bit_flips_are_errors_or_lose_nothing() {
    let d = dir();
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    for (name, bytes, head) in fixtures("flipped") {
        let path = d.join(format!("flipped-{name}.redb"));
        // Offsets of the pages that hold records.
        let record_pages: Vec<usize> = bytes
            .chunks(PAGE)
            .enumerate()
            .filter(|(_, p)| p.windows(7).any(|w| w == b"{\"seq\":"))
            .map(|(i, _)| i * PAGE)
            .collect();
        assert!(!record_pages.is_empty());
        let nonzero: Vec<usize> = (0..bytes.len()).filter(|&i| bytes[i] != 0).collect();
        let (mut flips, mut errors) = (0, 0);
        for i in 0..150 {
            let at = match i % 3 {
                0 => rng.below(320),
                1 => record_pages[rng.below(record_pages.len())] + rng.below(PAGE),
                _ => nonzero[rng.below(nonzero.len())],
            };
            let bit = rng.below(8);
            let mut copy = bytes.clone();
            copy[at] ^= 1 << bit;
            flips += 1;
            if check(
                &path,
                &copy,
                &head,
                &format!("{name}: bit {bit} of byte {at} flipped"),
            ) {
                errors += 1;
            }
        }
        eprintln!("{name}: {flips} flips, {errors} refused, the rest lost nothing");
        let _ = std::fs::remove_file(&path);
    }
    let _ = std::fs::remove_dir(&d);
}

/// The red team's case: the last record's storage key has one bit flipped
/// (15 becomes 15 + 2^40). redb's page checksums catch it when the store
/// is opened (`check_integrity`), before any record is read.
#[test]
fn a_flipped_storage_key_in_the_file_is_refused_at_open() {
    let d = dir();
    let (mut bytes, head) = build(&d.join("key-fixture.redb"), false);
    let _ = std::fs::remove_file(d.join("key-fixture.redb"));
    // The leaf holding the last keys stores them side by side.
    let keys: Vec<u8> = (head.seq - 3..=head.seq)
        .flat_map(u64::to_le_bytes)
        .collect();
    let found: Vec<usize> = bytes
        .windows(keys.len())
        .enumerate()
        .filter(|(_, w)| *w == keys.as_slice())
        .map(|(i, _)| i)
        .collect();
    assert_eq!(found.len(), 1, "the leaf holding keys 12..=15");
    bytes[found[0] + 8 * 3 + 5] ^= 1;
    let path = d.join("key-flipped.redb");
    std::fs::write(&path, &bytes).unwrap();
    let e = Log::open_redb(&path)
        .err()
        .expect("a flipped key must not open");
    assert!(matches!(e, StoreError::Corrupt { .. }), "{e}");
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir(&d);
}

/// A backend whose record 3 is stored under the wrong key (what a flipped
/// key bit gives when nothing below the log notices): 1, 2, 3 + 2^40. The
/// chain in the records themselves is intact, and the head says 3.
struct MovedKey {
    lines: Vec<Vec<u8>>,
    head: Head,
    keys: Vec<u64>,
}

impl agenra_store::Backend for MovedKey {
    fn append(&mut self, _: u64, lines: &[Vec<u8>], head: &Head) -> Result<(), StoreError> {
        self.lines.extend(lines.iter().cloned());
        self.head = head.clone();
        Ok(())
    }
    fn scan(&self, from: u64, f: agenra_store::Visit<'_>) -> Result<(), StoreError> {
        let mut rows: Vec<(u64, &Vec<u8>)> = self.keys.iter().copied().zip(&self.lines).collect();
        rows.sort_by_key(|r| r.0);
        for (k, line) in rows {
            if k >= from {
                f(k, line)?;
            }
        }
        Ok(())
    }
    fn head(&self) -> Result<Head, StoreError> {
        Ok(self.head.clone())
    }
}

fn moved_key_log(keys: Vec<u64>) -> Log {
    let mut log = Log::open(Box::new(agenra_store::MemoryBackend::default())).unwrap();
    log.append(&mut [
        record(Kind::Session, 0, None),
        record(Kind::Event, 0, Some(0)),
        record(Kind::Event, 0, Some(1)),
    ])
    .unwrap();
    let mut lines = Vec::new();
    log.scan(1, &mut |_, line| {
        lines.push(line.to_vec());
        Ok(())
    })
    .unwrap();
    Log::open(Box::new(MovedKey {
        lines,
        head: log.head(),
        keys,
    }))
    .unwrap()
}

/// Recovery (`scan`, which the gateway replays from) and `verify` (which
/// `agenra audit verify --store` runs) are one reader: both stop at the
/// record whose key disagrees and name it; none after it is handed on.
#[test]
fn a_record_under_the_wrong_key_is_named_by_the_one_reader() {
    for (keys, named) in [
        (
            vec![1, 2, 3 + (1 << 40)],
            "audit record 3: the next record is stored under key 1099511627779, expected key 3",
        ),
        (
            vec![1, 2 + (1 << 40), 3],
            "audit record 2: the next record is stored under key 3, expected key 2",
        ),
        (
            vec![1, 2, 2],
            "audit record 3: the next record is stored under key 2, expected key 3",
        ),
    ] {
        let log = moved_key_log(keys.clone());
        let text = log.verify().unwrap_err().to_string();
        assert!(text.starts_with(named), "{keys:?}: {text}");
        let mut seen = Vec::new();
        let scanned = log.scan(1, &mut |seq, _| {
            seen.push(seq);
            Ok(())
        });
        assert_eq!(
            scanned.unwrap_err().to_string(),
            text,
            "one reader, one answer"
        );
        let stop = named
            .split(':')
            .next()
            .unwrap()
            .trim_start_matches("audit record ");
        let stop: u64 = stop.parse().unwrap();
        assert_eq!(
            seen,
            (1..stop).collect::<Vec<_>>(),
            "the records before it, none after"
        );
    }
    // Intact keys read through.
    assert_eq!(moved_key_log(vec![1, 2, 3]).verify().unwrap().seq, 3);
}

/// A record whose own `seq` is not its key (the chain and the keys agree
/// otherwise) is named too.
#[test]
fn a_record_whose_seq_is_not_its_key_is_named() {
    let mut log = Log::open(Box::new(agenra_store::MemoryBackend::default())).unwrap();
    log.append(&mut [record(Kind::Session, 0, None)]).unwrap();
    let mut line = Vec::new();
    log.scan(1, &mut |_, l| {
        line = l.to_vec();
        Ok(())
    })
    .unwrap();
    // The same record stored under key 1 and key 2: key 2's says seq 1.
    let log = Log::open(Box::new(MovedKey {
        lines: vec![line.clone(), line],
        head: Head {
            seq: 2,
            hash: log.head().hash,
        },
        keys: vec![1, 2],
    }))
    .unwrap();
    let text = log.verify().unwrap_err().to_string();
    assert!(
        text.starts_with("audit record 2: its seq is 1, expected 2"),
        "{text}"
    );
}
