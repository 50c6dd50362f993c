//! Idle-session eviction (`serve --evict-idle`, `docs/store.md`, "Evicting
//! idle sessions"): a session with no open call and no event for that long
//! is dropped from memory; its next request reloads it by replaying its own
//! records, read by sequence number (an index kept here: the session's
//! record numbers, delta-encoded, a few bytes a record), never by scanning
//! the log.
//!
//! Which sessions are never evicted: those with a running or paused call
//! (paused calls stay in the approval queue), and those that draw on their
//! tenant's shared pools (replaying their events would spend the pool a
//! second time). Eviction needs the embedded store: on a shared one other
//! replicas' records are not indexed here.
//!
//! Locks: the sweep holds the session table's write lock and each evicted
//! session's own lock, and marks the entry `evicted`, so a request that
//! found the entry before waits for its lock and then looks again
//! (`Shared::run`). Reloads are serialized by one lock and read the log on
//! the store's writer thread after every record submitted before is
//! durable, so the replay includes the session's last event.

use super::{now_ms, pooled_policy, Entry, Key, Meta, Shared};
use crate::api::ApiError;
use agenra_core::graph::Status;
use agenra_core::CompiledPolicy;
use agenra_store::{Kind, LogReader, Record};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};

/// How long a session may stay idle before it is evicted, by default
/// (`serve --evict-idle`): ten minutes. Long enough that an agent pausing
/// between steps (a model call, a human reading) keeps its session warm,
/// short enough that a fleet of finished sessions does not pile up.
pub const DEFAULT_EVICT_IDLE_SECS: u64 = 600;

/// A `--evict-idle` value: `0` or `off` (never), `N` or `Ns` seconds,
/// `Nm` minutes, `Nh` hours.
pub fn parse_idle(text: &str) -> Result<std::time::Duration, IdleError> {
    let t = text.trim();
    if t == "off" {
        return Ok(std::time::Duration::ZERO);
    }
    let (digits, unit) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => t.split_at(i),
        None => (t, "s"),
    };
    let n: u64 = digits.parse().map_err(|_| IdleError(text.to_string()))?;
    let secs = match unit {
        "s" => Some(n),
        "m" => n.checked_mul(60),
        "h" => n.checked_mul(3600),
        _ => None,
    }
    .ok_or_else(|| IdleError(text.to_string()))?;
    Ok(std::time::Duration::from_secs(secs))
}

/// A `--evict-idle` value that is not a duration.
#[derive(Debug, thiserror::Error)]
#[error("--evict-idle: `{0}` is not a duration (`0`/`off`, `90`, `90s`, `10m`, `2h`)")]
pub struct IdleError(String);

/// A session's record numbers in ascending order, each stored as its
/// distance from the one before in LEB128 (7 bits a byte): 1 to 3 bytes a
/// record while sessions interleave in the log.
#[derive(Default, Debug, Clone)]
pub(super) struct SeqList {
    bytes: Vec<u8>,
    last: u64,
}

impl SeqList {
    /// Appends `seq`; a number not above the last is ignored (the writer
    /// hands numbers in order; a replayed record is noted once).
    pub(super) fn push(&mut self, seq: u64) {
        if seq <= self.last {
            return;
        }
        let mut d = seq - self.last;
        self.last = seq;
        loop {
            let low = (d & 0x7f) as u8;
            d >>= 7;
            if d == 0 {
                self.bytes.push(low);
                return;
            }
            self.bytes.push(low | 0x80);
        }
    }

    /// The numbers, in order.
    pub(super) fn to_vec(&self) -> Vec<u64> {
        let mut out = Vec::new();
        let (mut at, mut d, mut shift) = (0u64, 0u64, 0u32);
        for &b in &self.bytes {
            d |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                at += d;
                out.push(at);
                (d, shift) = (0, 0);
            } else {
                shift += 7;
            }
        }
        out
    }

    /// Heap bytes held.
    pub(super) fn heap_bytes(&self) -> usize {
        self.bytes.capacity()
    }
}

type Index = Arc<Mutex<HashMap<Key, SeqList>>>;

/// Notes in `index` that `seq` is a record of kind `kind` of session `key`.
fn note(index: &Index, kind: &Kind, key: Key, seq: u64) {
    let Ok(mut index) = index.lock() else {
        return;
    };
    match kind {
        Kind::Session | Kind::Event => index.entry(key).or_default().push(seq),
        // A closed session is never reloaded.
        Kind::Closed => {
            index.remove(&key);
        }
        _ => {}
    }
}

/// What eviction keeps: the settings, the index, the evicted sessions.
#[derive(Default)]
pub(super) struct Evictor {
    /// Milliseconds of idleness before eviction (0: never).
    idle_ms: AtomicU64,
    /// Each live or evicted session's record numbers.
    index: Index,
    /// Evicted sessions and their policy, held strongly (a revision no live
    /// session uses would otherwise be freed, and the reload could not
    /// replay under it).
    evicted: Mutex<HashMap<Key, CompiledPolicy>>,
    /// One reload at a time (a request and its retry must not both replay).
    reloading: Mutex<()>,
    /// Reads the log on the store's writer thread (the embedded store only).
    reader: OnceLock<LogReader>,
    evictions: AtomicU64,
    reloads: AtomicU64,
}

/// Eviction's counters, for `GET /metrics`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EvictionStats {
    /// Sessions evicted since start.
    pub evictions: u64,
    /// Evicted sessions reloaded since start.
    pub reloads: u64,
    /// Sessions evicted now.
    pub evicted: u64,
    /// Heap bytes of the record-number index.
    pub index_bytes: u64,
}

fn poisoned(what: &str) -> ApiError {
    ApiError::new(500, format!("{what} poisoned"))
}

fn not_reloaded(tenant: &str, session: &str, why: impl std::fmt::Display) -> ApiError {
    ApiError::field(
        503,
        "session",
        format!(
            "session `{session}` of tenant `{tenant}` was evicted and cannot be reloaded: {why}"
        ),
    )
}

impl Evictor {
    /// Notes that record `seq`, of kind `kind`, belongs to session `key`
    /// (recovery's pass calls it for every record of a session).
    pub(super) fn note(&self, kind: &Kind, key: Key, seq: u64) {
        note(&self.index, kind, key, seq);
    }

    /// Uses `reader` to reload sessions (the embedded store).
    pub(super) fn attach(&self, reader: LogReader) {
        let _ = self.reader.set(reader);
    }

    pub(super) fn set_idle_ms(&self, ms: u64) {
        self.idle_ms.store(ms, Ordering::Relaxed);
    }

    pub(super) fn is_evicted(&self, key: &Key) -> bool {
        self.evicted.lock().is_ok_and(|e| e.contains_key(key))
    }

    pub(super) fn stats(&self) -> EvictionStats {
        EvictionStats {
            evictions: self.evictions.load(Ordering::Relaxed),
            reloads: self.reloads.load(Ordering::Relaxed),
            evicted: self.evicted.lock().map_or(0, |e| e.len() as u64),
            index_bytes: self.index.lock().map_or(0, |i| {
                i.values().map(|l| l.heap_bytes() as u64).sum::<u64>()
            }),
        }
    }

    /// The records of `key`, read on the writer thread once every record
    /// submitted before is durable: by then their numbers are in the index
    /// too (the writer notes them before it runs reads).
    fn records(&self, key: &Key) -> Result<Vec<Record>, String> {
        let reader = self.reader.get().ok_or("no store reader")?;
        let (tx, rx) = mpsc::channel::<Result<Vec<Vec<u8>>, String>>();
        let index = Arc::clone(&self.index);
        let key = key.clone();
        let sent = reader.read(Box::new(move |log| {
            let seqs = match index.lock() {
                Ok(i) => i.get(&key).map(SeqList::to_vec).unwrap_or_default(),
                Err(_) => {
                    let _ = tx.send(Err("index poisoned".into()));
                    return;
                }
            };
            let mut lines = Vec::with_capacity(seqs.len());
            let read = log.get(&seqs, &mut |_, line| {
                lines.push(line.to_vec());
                Ok(())
            });
            let _ = tx.send(read.map(|()| lines).map_err(|e| e.to_string()));
        }));
        if !sent {
            return Err("the store's writer is gone".into());
        }
        let lines = rx
            .recv()
            .map_err(|_| "the store's writer is gone".to_string())??;
        lines
            .iter()
            .map(|l| serde_json::from_slice(l).map_err(|e| format!("not an audit record: {e}")))
            .collect()
    }
}

impl Shared {
    /// The entry of `tenant`'s session `session`, looked up again (and so
    /// reloaded) if it was evicted while this request waited for it.
    pub(super) fn unevicted_entry(
        &self,
        tenant: &str,
        session: &str,
    ) -> Result<Arc<Mutex<Entry>>, ApiError> {
        let mut entry = self.entry(tenant, session)?;
        for _ in 0..3 {
            let evicted = entry.lock().map_err(|_| poisoned("session"))?.evicted;
            if !evicted {
                break;
            }
            entry = self.entry(tenant, session)?;
        }
        Ok(entry)
    }

    /// What to call with `record`'s position once it is durable, when it
    /// is one of a session's records (the index of reloads).
    pub(super) fn index_note(&self, record: &Record) -> Option<Box<dyn FnOnce(u64) + Send>> {
        if !matches!(record.kind, Kind::Session | Kind::Event | Kind::Closed) {
            return None;
        }
        let key = (record.tenant.clone()?, record.session.clone()?);
        let index = Arc::clone(&self.evict.index);
        let kind = record.kind;
        Some(Box::new(move |seq| note(&index, &kind, key, seq)))
    }

    /// Evicts every session idle for `--evict-idle` or longer (`force`: every
    /// session that may be evicted, however recently used; a test hook).
    /// Returns how many were evicted.
    pub(super) fn evict_idle(&self, force: bool) -> usize {
        let idle = self.evict.idle_ms.load(Ordering::Relaxed);
        if (idle == 0 && !force) || self.evict.reader.get().is_none() {
            return 0;
        }
        let now = now_ms();
        let Ok(mut sessions) = self.sessions.write() else {
            return 0;
        };
        let Ok(index) = self.evict.index.lock() else {
            return 0;
        };
        let mut gone: Vec<(Key, CompiledPolicy)> = Vec::new();
        for (key, entry) in sessions.iter() {
            // Busy: a request holds it, so it is not idle.
            let Ok(mut e) = entry.try_lock() else {
                continue;
            };
            let old = force || now.saturating_sub(e.last_ms) >= idle;
            if old && index.contains_key(key) && may_evict(&e) {
                e.evicted = true;
                gone.push((key.clone(), e.session.compiled().clone()));
            }
        }
        drop(index);
        let Ok(mut evicted) = self.evict.evicted.lock() else {
            return 0;
        };
        for (key, policy) in &gone {
            sessions.remove(key);
            evicted.insert(key.clone(), policy.clone());
        }
        let n = gone.len();
        self.evict.evictions.fetch_add(n as u64, Ordering::Relaxed);
        n
    }

    /// The live entry of `key`, reloaded from its records when it was
    /// evicted (`None`: neither live nor evicted). Both tables are read
    /// under the session table's lock, which the sweep and a reload hold to
    /// move a session from one to the other.
    pub(super) fn reload(&self, key: &Key) -> Result<Option<Arc<Mutex<Entry>>>, ApiError> {
        match self.find(key)? {
            Found::Live(e) => return Ok(Some(e)),
            Found::Neither => return Ok(None),
            Found::Evicted(_) => {}
        }
        let _one = self
            .evict
            .reloading
            .lock()
            .map_err(|_| poisoned("reload lock"))?;
        // Reloaded meanwhile by another request, or closed.
        let policy = match self.find(key)? {
            Found::Live(e) => return Ok(Some(e)),
            Found::Neither => return Ok(None),
            Found::Evicted(policy) => policy,
        };
        let (tenant, session) = key;
        let records = self
            .evict
            .records(key)
            .map_err(|why| not_reloaded(tenant, session, why))?;
        let entry = self
            .rebuild(&policy, records)
            .map_err(|why| not_reloaded(tenant, session, why))?;
        let entry = Arc::new(Mutex::new(entry));
        let mut live = self
            .sessions
            .write()
            .map_err(|_| poisoned("session table"))?;
        live.insert(key.clone(), Arc::clone(&entry));
        self.evict
            .evicted
            .lock()
            .map_err(|_| poisoned("evicted table"))?
            .remove(key);
        self.evict.reloads.fetch_add(1, Ordering::Relaxed);
        Ok(Some(entry))
    }

    fn find(&self, key: &Key) -> Result<Found, ApiError> {
        let live = self
            .sessions
            .read()
            .map_err(|_| poisoned("session table"))?;
        if let Some(e) = live.get(key) {
            return Ok(Found::Live(Arc::clone(e)));
        }
        let evicted = self
            .evict
            .evicted
            .lock()
            .map_err(|_| poisoned("evicted table"))?;
        Ok(match evicted.get(key) {
            Some(policy) => Found::Evicted(policy.clone()),
            None => Found::Neither,
        })
    }

    /// Rebuilds one session from its records, in log order: its `session`
    /// record (which names its policy, `policy`, and its window), then its
    /// events, each replayed through the monitor and checked against the
    /// recorded decision and ledger hash, exactly as recovery does.
    pub(super) fn rebuild(
        &self,
        policy: &CompiledPolicy,
        records: Vec<Record>,
    ) -> Result<Entry, String> {
        let mut records = records.into_iter();
        let opened = records.next().ok_or("no records")?;
        let (Kind::Session, Some(tenant), Some(id)) = (&opened.kind, opened.tenant, opened.session)
        else {
            return Err("its first record is not its `session` record".into());
        };
        if opened.policy_hash != policy.hash().to_string() {
            return Err(format!(
                "its session record names policy {}, it ran {}",
                opened.policy_hash,
                policy.hash()
            ));
        }
        let lane = self.lane(&tenant);
        let mut entry = Entry::opened(tenant, id, opened.agent, policy, opened.window, lane);
        for r in records {
            if r.kind != Kind::Event {
                return Err(format!("record {}: not an event of the session", r.seq));
            }
            let ev = r.event.ok_or("event record without its event")?;
            entry
                .replay_event(
                    ev,
                    r.verdict.as_deref(),
                    r.ledger_hash.as_deref(),
                    Meta::default(),
                )
                .map_err(|why| format!("record {}: {why}", r.seq))?;
        }
        if !may_evict(&entry) {
            return Err("it has an open call".into());
        }
        Ok(entry)
    }
}

/// Where a session is.
enum Found {
    Live(Arc<Mutex<Entry>>),
    /// Evicted, with the policy it runs.
    Evicted(CompiledPolicy),
    /// Not open.
    Neither,
}

/// A 503 when `e` was evicted while the request waited for its lock
/// (evicted again right after a reload: the sweep found it idle).
pub(super) fn check_live(e: &Entry) -> Result<(), ApiError> {
    if e.evicted {
        return Err(ApiError::field(
            503,
            "session",
            format!(
                "session `{}` of tenant `{}` was evicted while this request waited; retry",
                e.id, e.tenant
            ),
        ));
    }
    Ok(())
}

/// A 503 when `key` was evicted again between its reload and the table's
/// write lock (nothing was decided; a retry reloads it).
pub(super) fn check_not_evicted(ev: &Evictor, key: &Key) -> Result<(), ApiError> {
    if ev.is_evicted(key) {
        return Err(ApiError::field(
            503,
            "session",
            format!(
                "session `{}` of tenant `{}` was evicted while this request waited; retry",
                key.1, key.0
            ),
        ));
    }
    Ok(())
}

/// Whether `e` may leave memory: no running or paused call, and no share
/// in its tenant's pools.
fn may_evict(e: &Entry) -> bool {
    let state = e.session.state();
    let open = e.answers.keys().any(|id| {
        matches!(
            state.call_status(id),
            Some(Status::Running | Status::Paused)
        )
    });
    !open && !pooled_policy(e.session.policy())
}

impl super::Gateway {
    /// Evicts sessions idle for `idle` or longer (`serve --evict-idle`;
    /// zero: never). Refused on a shared store (replicas): its other
    /// replicas' records are not indexed here.
    pub fn set_evict_idle(&self, idle: std::time::Duration) -> Result<(), String> {
        if !idle.is_zero() && self.shared.evict.reader.get().is_none() {
            return Err(
                "--evict-idle needs the embedded store (on a shared store, use --evict-idle 0)"
                    .into(),
            );
        }
        let ms = u64::try_from(idle.as_millis()).unwrap_or(u64::MAX);
        self.shared.evict.set_idle_ms(ms);
        Ok(())
    }

    /// Evicts the sessions idle long enough; returns how many (`serve`
    /// calls it every second).
    pub fn evict_idle(&self) -> usize {
        self.shared.evict_idle(false)
    }

    /// Evicts every session that may be evicted, however recently used
    /// (tests, `bench memory`).
    pub fn evict_all_idle(&self) -> usize {
        self.shared.evict_idle(true)
    }

    /// Eviction's counters.
    pub fn eviction_stats(&self) -> EvictionStats {
        self.shared.evict.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agenra_core::event::{Call, Event};

    #[test]
    fn a_seq_list_gives_back_what_was_pushed_in_few_bytes() {
        let mut l = SeqList::default();
        let seqs = [1u64, 2, 129, 130, 20_000, 20_001, 1 << 40, (1 << 40) + 3];
        for &s in &seqs {
            l.push(s);
        }
        // Not above the last: ignored.
        l.push(5);
        assert_eq!(l.to_vec(), seqs);
        // Deltas 1, 1, 127, 1 (a byte each: under 128), 19,870 (3 bytes:
        // 16,384 or more), 1, about 2^40 (6 bytes), 3.
        assert_eq!(l.bytes.len(), 1 + 1 + 1 + 1 + 3 + 1 + 6 + 1);
    }

    fn shared() -> (Shared, CompiledPolicy) {
        let text = "tool fs.read(path: string) { resource path; }\n\
                    grant read: fs.read quota 2;\n";
        let p = agenra_policy::compile(text, "t").unwrap().policy;
        let c = CompiledPolicy::new(p).unwrap();
        (Shared::new(&c), c)
    }

    fn opened(c: &CompiledPolicy) -> Record {
        Record {
            kind: Kind::Session,
            tenant: Some("t".into()),
            session: Some("s".into()),
            policy_hash: c.hash().to_string(),
            ..Record::default()
        }
    }

    /// The record of call `id`, decided on `entry` (as the gateway wrote it).
    fn decided(entry: &mut Entry, id: &str) -> Record {
        let call: Call = serde_json::from_value(serde_json::json!({
            "id": id, "time": 0, "tool": "fs.read", "args": {"path": "/a"}}))
        .unwrap();
        let (_, mut r) = entry.apply(&Event::Call(call), Meta::default()).unwrap();
        r.seq = 2;
        r
    }

    #[test]
    fn a_rebuild_replays_and_refuses_what_does_not_replay() {
        let (shared, c) = shared();
        let mut live = shared.rebuild(&c, vec![opened(&c)]).unwrap();
        let first = decided(&mut live, "c1");
        // Open calls keep a session in memory: not rebuilt as evictable.
        let e = shared.rebuild(&c, vec![opened(&c), first.clone()]);
        assert_eq!(e.err().unwrap(), "it has an open call");

        let mut tampered = first.clone();
        tampered.verdict = Some("DENY".into());
        let e = shared
            .rebuild(&c, vec![opened(&c), tampered])
            .err()
            .unwrap();
        assert!(e.contains("record 2: replaying gives ALLOW"), "{e}");

        let e = shared.rebuild(&c, vec![first.clone()]).err().unwrap();
        assert!(e.contains("not its `session` record"), "{e}");
        let e = shared.rebuild(&c, vec![]).err().unwrap();
        assert_eq!(e, "no records");

        let mut other = opened(&c);
        other.policy_hash = "sha256:00".into();
        let e = shared.rebuild(&c, vec![other]).err().unwrap();
        assert!(e.contains("names policy sha256:00"), "{e}");

        let mut closed = first;
        closed.kind = Kind::Closed;
        let e = shared.rebuild(&c, vec![opened(&c), closed]).err().unwrap();
        assert!(e.contains("not an event of the session"), "{e}");
    }
}
