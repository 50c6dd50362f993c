//! Session snapshots (`serve --snapshot-every N`, issue #28): every N
//! events of a session, a `snapshot` record of its monitor state; a
//! restart restores each session from its last good snapshot and replays
//! only the session's events after it (`docs/store.md`, "Snapshots").
//!
//! Recovery (`recover`) chooses, while it checks the chain, each
//! session's last snapshot that matches the records before it (its event
//! count, the last event's ledger hash, its bytes' SHA-256), restores the
//! session from it and replays only the session's events after it
//! (keeping what the gateway itself needs of the others: the call ids
//! used, the paused calls). A snapshot that does not match or does not
//! restore is reported on standard error, naming its record, and the
//! session is replayed in full: never a silent loss.
//!
//! Sessions whose policy draws on a tenant's pools are not snapshotted:
//! the pool is rebuilt by replaying every session of the tenant in order.

use super::{
    fingerprint, id_hash, now_ms, parts::pooled_policy, track_pending, Answer, Entry, Gateway, Key,
    Pending, Shared,
};
use crate::api::Outcome;
use agenra_core::decision::Verdict;
use agenra_core::event::Event;
use agenra_core::monitor::SNAPSHOT_FORMAT;
use agenra_core::{CompiledPolicy, Session, SessionOptions};
use agenra_store::{Kind, Record, Snapshot};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicU64, Ordering};

/// Events between two snapshots of a session by default
/// (`serve --snapshot-every`; 0: never).
pub const DEFAULT_SNAPSHOT_EVERY: u64 = 1000;

/// What recovery did with snapshots ([`Gateway::snapshot_recovery`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SnapshotRecovery {
    /// Sessions restored from a snapshot.
    pub restored: u64,
    /// Event records a snapshot covered (not replayed).
    pub skipped: u64,
}

/// Counters of [`SnapshotRecovery`].
#[derive(Default)]
pub(super) struct Counters {
    restored: AtomicU64,
    skipped: AtomicU64,
}

impl Counters {
    pub(super) fn add(&self, restored: u64, skipped: u64) {
        self.restored.fetch_add(restored, Ordering::Relaxed);
        self.skipped.fetch_add(skipped, Ordering::Relaxed);
    }
}

/// A session's last snapshot that matches the records before it.
pub(super) struct Chosen {
    /// The snapshot record's number.
    pub(super) seq: u64,
    pub(super) snapshot: Snapshot,
    pub(super) ledger_hash: String,
    pub(super) policy_hash: String,
}

/// The fields of a record that recovery's second read and skipping read
/// (the others are passed over).
#[derive(Deserialize)]
pub(super) struct Header {
    pub(super) kind: Kind,
    pub(super) tenant: Option<String>,
    pub(super) session: Option<String>,
    verdict: Option<String>,
    event: Option<SkippedEvent>,
}

/// What a skipped event record leaves behind, for most records.
#[derive(Deserialize)]
struct SkippedEvent {
    kind: String,
    id: Option<String>,
}

/// Whether `snapshot` (with the record's `ledger_hash`) is the state after
/// the session's event records before it (`seen`: how many, the last
/// one's ledger hash).
pub(super) fn matches(
    snapshot: &Snapshot,
    ledger_hash: Option<&str>,
    (events, last): (u64, Option<&str>),
) -> Result<(), String> {
    if snapshot.events != events || events == 0 {
        return Err(format!(
            "the snapshot covers {} events, {events} of the session precede it",
            snapshot.events
        ));
    }
    if ledger_hash.is_none() || ledger_hash != last {
        return Err(format!(
            "the snapshot's ledger hash {} is not the last event's {}",
            ledger_hash.unwrap_or("(none)"),
            last.unwrap_or("(none)")
        ));
    }
    if snapshot.format != SNAPSHOT_FORMAT {
        return Err(format!("snapshot format {}", snapshot.format));
    }
    if sha256(&state_bytes(snapshot)?) != snapshot.sha256 {
        return Err("the state's bytes do not hash to the snapshot's sha256".into());
    }
    Ok(())
}

fn sha256(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut s = String::with_capacity(7 + 64);
    s.push_str("sha256:");
    s.push_str(&hex(&digest));
    s
}

fn hex(bytes: &[u8]) -> String {
    // A table, not `write!`: a snapshot's state is thousands of bytes.
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(2 * bytes.len());
    for &b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    s
}

/// The snapshot's state bytes (its hex decoded; digits of either case).
fn state_bytes(snapshot: &Snapshot) -> Result<Vec<u8>, String> {
    let text = snapshot.state.as_bytes();
    if !text.len().is_multiple_of(2) {
        return Err("the state's hex has an odd length".into());
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    text.chunks_exact(2)
        .map(|pair| match (digit(pair[0]), digit(pair[1])) {
            (Some(high), Some(low)) => Ok(high << 4 | low),
            _ => Err("the state is not hex".to_string()),
        })
        .collect()
}

pub(super) fn warn(seq: u64, why: &str) {
    eprintln!(
        "agenra serve: warning: snapshot record {seq} is not used ({why}); its session is replayed from its start"
    );
}

/// A session rebuilt from a snapshot (`None`: a new session) under
/// `policy`, with `options` (its window, its tenant pool): the records
/// after the snapshot are then applied to it as they come. Recovery calls
/// it at a session's `session` record; reloading an evicted session can
/// call it with the session's last snapshot.
pub(super) fn rebuild(
    policy: &CompiledPolicy,
    options: SessionOptions,
    snapshot: Option<(&Snapshot, &str)>,
) -> Result<Session, String> {
    let Some((snapshot, ledger_hash)) = snapshot else {
        return Ok(policy.session_with(options));
    };
    let bytes = state_bytes(snapshot)?;
    let session = Session::from_snapshot(policy, options, &bytes).map_err(|e| e.to_string())?;
    let state = session.state();
    if state.seq != snapshot.events || state.ledger_hash().to_string() != ledger_hash {
        return Err(format!(
            "the state is of event {} with ledger {}, the record names event {} with ledger {ledger_hash}",
            state.seq,
            state.ledger_hash(),
            snapshot.events
        ));
    }
    Ok(session)
}

impl Shared {
    pub(super) fn entry_of(
        &self,
        key: &Key,
    ) -> Result<std::sync::Arc<std::sync::Mutex<Entry>>, String> {
        self.sessions
            .read()
            .map_err(|_| "poisoned")?
            .get(key)
            .cloned()
            .ok_or_else(|| format!("event of unknown session {}/{}", key.0, key.1))
    }

    /// An event record the snapshot covers: not replayed; what the gateway
    /// keeps besides the monitor's state is rebuilt from the record (the
    /// call id as used; a paused call's answer and approval entry).
    pub(super) fn skip(&self, key: &Key, h: Header, line: &[u8]) -> Result<(), String> {
        // Most skipped records are admitted or denied calls and results:
        // what they leave behind (the call id) is in the header already.
        let event = h.event.ok_or("event record without its event")?;
        match (event.kind.as_str(), h.verdict.as_deref()) {
            ("call", v) if v != Some(Verdict::Pause.as_str()) => {
                let id = event.id.ok_or("a call without its id")?;
                let entry = self.entry_of(key)?;
                let mut e = entry.lock().map_err(|_| "poisoned")?;
                e.used.insert(id_hash(&id));
                return Ok(());
            }
            ("result" | "task", _) => return Ok(()),
            _ => {}
        }
        let r: Record =
            serde_json::from_slice(line).map_err(|e| format!("not an audit record: {e}"))?;
        let ev = r.event.clone().ok_or("event record without its event")?;
        let event = Event::from_recorded(ev).map_err(|e| format!("unreadable event: {e}"))?;
        let entry = self.entry_of(key)?;
        let mut e = entry.lock().map_err(|_| "poisoned")?;
        let outcome = recorded_outcome(&r, &event, &e);
        if let Event::Call(c) = &event {
            e.used.insert(id_hash(&c.id));
            if outcome.decision == Some(Verdict::Pause.as_str()) {
                let answer = Answer::new(fingerprint(c), &outcome);
                e.answers.insert(c.id.as_str().into(), Box::new(answer));
            }
        }
        let mut pending = self.pending.lock().map_err(|_| "poisoned")?;
        let timeout = self.pause_timeout.load(Ordering::Relaxed);
        track_pending(&mut pending, &event, &outcome, timeout);
        Ok(())
    }
}

/// The answer an event record holds (what `left` a call had is not
/// recorded, so it is absent).
fn recorded_outcome(r: &Record, event: &Event, e: &Entry) -> Outcome {
    let (call, kind) = super::call_and_kind(event);
    let decision = [Verdict::Allow, Verdict::Deny, Verdict::Pause]
        .into_iter()
        .map(|v| v.as_str())
        .find(|v| r.verdict.as_deref() == Some(*v));
    Outcome {
        tenant: e.tenant.clone(),
        session: e.id.clone(),
        kind,
        call,
        decision,
        rule: r.rule.clone(),
        reason: r.reason.clone().unwrap_or_default(),
        path: r.path.clone(),
        grants: r.grants.clone(),
        refunded: vec![],
        left: None,
        policy_hash: r.policy_hash.clone(),
        ledger_hash: r.ledger_hash.clone().unwrap_or_default(),
        audit_seq: None,
        replayed: false,
    }
}

/// The snapshot record of `e`'s session now (`None`: not snapshotted:
/// no event yet, or a policy with tenant pools). `damage` changes the
/// state's bytes before they are hashed (tests of the fallback only).
fn snapshot_record(e: &Entry, damage: Option<fn(&mut Vec<u8>)>) -> Option<Record> {
    let state = e.session.state();
    if state.seq == 0 || pooled_policy(e.session.policy()) {
        return None;
    }
    let mut bytes = match e.session.snapshot() {
        Ok(b) => b,
        Err(err) => {
            eprintln!(
                "agenra serve: warning: no snapshot of session {}/{}: {err}",
                e.tenant, e.id
            );
            return None;
        }
    };
    if let Some(damage) = damage {
        damage(&mut bytes);
    }
    Some(Record {
        time_ms: now_ms(),
        kind: Kind::Snapshot,
        tenant: Some(e.tenant.clone()),
        session: Some(e.id.clone()),
        policy_hash: e.session.policy_hash().to_string(),
        ledger_hash: Some(state.ledger_hash().to_string()),
        snapshot: Some(Snapshot {
            events: state.seq,
            format: SNAPSHOT_FORMAT,
            sha256: sha256(&bytes),
            state: hex(&bytes),
        }),
        ..Record::default()
    })
}

impl Shared {
    /// After an event of `e`'s session: whether a snapshot is due.
    pub(super) fn note_snapshot_due(&self, e: &Entry) {
        let every = self.snapshot_every.load(Ordering::Relaxed);
        let seq = e.session.state().seq;
        if every > 0 && seq.is_multiple_of(every) && !pooled_policy(e.session.policy()) {
            if let Ok(mut due) = self.snapshots_due.lock() {
                due.push((e.tenant.clone(), e.id.clone()));
            }
        }
    }
}

impl Gateway {
    /// Snapshots every N events of a session (0: never). Refused on a log
    /// partitioned by session, whose chains have no snapshot records.
    pub fn set_snapshot_every(&self, n: u64) -> Result<(), String> {
        if n > 0 && self.is_partitioned() {
            return Err(
                "--snapshot-every: the log partitioned by session has no snapshot records (use --snapshot-every 0)"
                    .into(),
            );
        }
        self.shared.snapshot_every.store(n, Ordering::Relaxed);
        Ok(())
    }

    /// Writes the snapshots that events made due (each in the store's next
    /// batch; nobody waits for them).
    pub(super) fn write_due_snapshots(&self) {
        let due: Vec<Key> = match self.shared.snapshots_due.lock() {
            Ok(mut d) if !d.is_empty() => std::mem::take(&mut *d),
            _ => return,
        };
        for (tenant, session) in due {
            // Durable with the store's next batch; nobody waits for it.
            drop(self.write_snapshot(&tenant, &session, None));
        }
    }

    /// Writes a snapshot of `tenant`'s session `session` now, its state's
    /// bytes changed by `damage` first (a test hook: a well-chained
    /// snapshot whose state is bad). Nobody waits for the record.
    #[doc(hidden)]
    pub fn write_snapshot(
        &self,
        tenant: &str,
        session: &str,
        damage: Option<fn(&mut Vec<u8>)>,
    ) -> Result<Pending<()>, crate::api::ApiError> {
        let key = (tenant.to_string(), session.to_string());
        self.exec_on(Some(key.clone()), move |shared, sink| {
            let entry = shared.entry(&key.0, &key.1)?;
            let e = entry
                .lock()
                .map_err(|_| crate::api::ApiError::new(500, "session poisoned"))?;
            Ok(sink.emit(snapshot_record(&e, damage), ()))
        })
    }

    /// What the last recovery did with snapshots.
    pub fn snapshot_recovery(&self) -> SnapshotRecovery {
        SnapshotRecovery {
            restored: self.shared.snapshot_stats.restored.load(Ordering::Relaxed),
            skipped: self.shared.snapshot_stats.skipped.load(Ordering::Relaxed),
        }
    }
}

impl Gateway {
    fn is_partitioned(&self) -> bool {
        matches!(self.committer, super::Writer::Parts(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(events: u64, bytes: &[u8]) -> Snapshot {
        Snapshot {
            events,
            format: SNAPSHOT_FORMAT,
            state: hex(bytes),
            sha256: sha256(bytes),
        }
    }

    fn seen(events: u64, ledger: &str) -> (u64, Option<&str>) {
        (events, Some(ledger))
    }

    #[test]
    fn a_snapshot_that_does_not_match_its_records_is_not_used() {
        let good = snapshot(3, b"state");
        assert!(matches(&good, Some("L"), seen(3, "L")).is_ok());
        // Another number of the session's events before it.
        let e = matches(&good, Some("L"), seen(4, "L")).unwrap_err();
        assert!(e.contains("covers 3 events, 4"), "{e}");
        assert!(matches(&good, Some("L"), (0, None)).is_err());
        assert!(matches(&snapshot(0, b"s"), Some("L"), seen(0, "L")).is_err());
        // Another ledger hash than the last event's.
        let e = matches(&good, Some("M"), seen(3, "L")).unwrap_err();
        assert!(e.contains("ledger hash M"), "{e}");
        assert!(matches(&good, None, seen(3, "L")).is_err());
        // Bytes that do not hash as named, or are not hex.
        let mut changed = good.clone();
        changed.state = hex(b"other");
        let e = matches(&changed, Some("L"), seen(3, "L")).unwrap_err();
        assert!(e.contains("do not hash"), "{e}");
        changed.state = "zz".into();
        assert!(matches(&changed, Some("L"), seen(3, "L")).is_err());
        changed.state = "abc".into();
        assert!(matches(&changed, Some("L"), seen(3, "L")).is_err());
        // Another format.
        let mut other = good.clone();
        other.format += 1;
        assert!(matches(&other, Some("L"), seen(3, "L")).is_err());
    }

    #[test]
    fn hex_round_trips() {
        let bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(state_bytes(&snapshot(1, &bytes)).unwrap(), bytes);
        assert_eq!(hex(&bytes).len(), 512);
        let mut upper = snapshot(1, &bytes);
        upper.state = upper.state.to_ascii_uppercase();
        assert_eq!(state_bytes(&upper).unwrap(), bytes);
        for bad in ["0g", "+f", "f", " 0"] {
            let mut s = snapshot(1, b"");
            s.state = bad.into();
            assert!(state_bytes(&s).is_err(), "{bad}");
        }
    }
}
