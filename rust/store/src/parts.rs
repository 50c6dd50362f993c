//! A log partitioned by session (issue 28; `docs/store.md`, "A log
//! partitioned by session").
//!
//! Each partition is its own hash chain (1, 2, 3, … from [`GENESIS`]) with
//! its own head row. Records that belong to no session (policy revisions,
//! checkpoints, refusals) live in the partition [`LOG_PARTITION`]; each
//! session's records live in [`session_partition`]`(tenant, session)`.
//! Every record names its partition (`"partition"`, absent in `log`), so
//! a chain cannot be moved to another partition.
//!
//! A write transaction ([`PartLog::begin`]) locks only the head rows of
//! the partitions it will append to (in sorted order, so two transactions
//! never wait on each other in a cycle), catches up on what other
//! processes appended to those partitions (and, without a lock, to `log`),
//! appends, moves each head by compare-and-set, and commits. Transactions
//! on distinct partitions never wait on one another.
//!
//! [`PartLog::read`] is the one reader: `log` first (the policies every
//! session names), then every other partition in name order, each chain
//! checked from its first record to its head. [`PartLog::verify_checkpoints`]
//! checks, besides, that every signed checkpoint (in `log`) commits to the
//! `log` chain before it, and that every partition it names is still there
//! and holds the head it committed to: a dropped or truncated session
//! partition is caught against the last signed checkpoint.
//!
//! `agenra serve --partitioned-log` runs on it (PostgreSQL, [`crate::PgParts`],
//! group commit in [`crate::PartCommitter`]); without the flag, and on the
//! embedded store, the gateway writes the single chain ([`crate::Log`]).
//! See `docs/store.md`, "A log partitioned by session".

use crate::checkpoint::{
    self, Checkpoint, CheckpointSigner, Checkpointing, Checkpoints, Every, PartitionHead,
    PublicKey, LOG_PARTITION,
};
use crate::record::{chain_line, split_line, Verifier};
use crate::{Head, Kind, Record, StoreError, VerifyError, GENESIS};
use std::collections::{BTreeMap, HashMap};

/// Called with each checked record: its partition, its sequence number in
/// that partition and its stored line.
pub type PartVisit<'a> = &'a mut dyn FnMut(&str, u64, &[u8]) -> Result<(), StoreError>;

/// The partition of `tenant`'s session `session`: `s/TENANT/SESSION`, with
/// `%` and `/` in either written `%25` and `%2F` (so that no two sessions
/// share a name, and no session is named `log`).
pub fn session_partition(tenant: &str, session: &str) -> String {
    format!("s/{}/{}", esc(tenant), esc(session))
}

/// The partition of `tenant`'s shared pools (`quota N per tenant`, tenant
/// budgets): `p/TENANT`. The events (and the closing) of a session whose
/// policy draws on them go here, in the order they used the pool; the
/// session's own partition holds its `session` record.
pub fn pool_partition(tenant: &str) -> String {
    format!("p/{}", esc(tenant))
}

fn esc(s: &str) -> String {
    s.replace('%', "%25").replace('/', "%2F")
}

/// The order the reader visits partitions in: `log` (the policies), the
/// sessions (their `session` records), then the pools (events that name
/// those sessions).
fn rank(part: &str) -> u8 {
    if part == LOG_PARTITION {
        0
    } else if part.starts_with("s/") {
        1
    } else if part.starts_with("p/") {
        2
    } else {
        3
    }
}

/// The session partition of a pool's record (`None` when it names none).
fn session_of(line: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Names {
        tenant: Option<String>,
        session: Option<String>,
    }
    let n: Names = serde_json::from_slice(line).ok()?;
    Some(session_partition(&n.tenant?, &n.session?))
}

/// One partition's stored records, appended in one transaction.
pub struct PartAppend<'a> {
    /// The partition.
    pub partition: &'a str,
    /// The sequence number of the first line.
    pub first: u64,
    /// The lines, in order.
    pub lines: &'a [Vec<u8>],
    /// The partition's head after them.
    pub head: &'a Head,
    /// Its head before them (the compare-and-set's expected value).
    pub before: &'a Head,
}

/// What a storage engine provides to a partitioned log.
pub trait PartBackend: Send {
    /// Opens a write transaction holding the head rows of `parts` (sorted,
    /// no duplicates) until [`commit`](PartBackend::commit) or
    /// [`rollback`](PartBackend::rollback); returns their heads as stored
    /// now. The rows of `create` (those of `parts` that may be new) are
    /// created at the empty head first when missing; a row of `parts` that
    /// is neither there nor created is an error.
    fn begin(
        &mut self,
        parts: &[String],
        create: &[String],
    ) -> Result<BTreeMap<String, Head>, StoreError>;
    /// Writes every partition's lines and moves its head from `before` to
    /// `head` (inside the open transaction); an error if a head is no
    /// longer at `before` or a sequence number is taken.
    fn append(&mut self, appends: &[PartAppend<'_>]) -> Result<(), StoreError>;
    /// Calls `f` with every line of `part` from sequence number `from` on,
    /// in order (`f` gets the partition, the key and the line).
    fn scan(&self, part: &str, from: u64, f: PartVisit<'_>) -> Result<(), StoreError>;
    /// Every partition's stored head, and every partition that has records
    /// but no head (`None`).
    fn heads(&self) -> Result<BTreeMap<String, Option<Head>>, StoreError>;
    /// Every stored head row (what a checkpoint commits to), without
    /// looking for records that have none (the reader's job).
    fn head_rows(&self) -> Result<BTreeMap<String, Head>, StoreError> {
        Ok(self
            .heads()?
            .into_iter()
            .filter_map(|(p, h)| h.map(|h| (p, h)))
            .collect())
    }
    /// Commits the open transaction (durable when it returns `Ok`).
    fn commit(&mut self) -> Result<(), StoreError>;
    /// Abandons the open transaction.
    fn rollback(&mut self);
    /// The store's name for messages.
    fn name(&self) -> String;
}

/// A partitioned log in memory (tests). Clones share the same store; it
/// takes no lock (one writer at a time).
#[derive(Clone, Default)]
pub struct MemoryParts {
    inner: std::sync::Arc<std::sync::Mutex<MemoryState>>,
    txn: Option<MemoryState>,
}

#[derive(Clone, Default)]
struct MemoryState {
    lines: BTreeMap<String, BTreeMap<u64, Vec<u8>>>,
    heads: BTreeMap<String, Head>,
}

impl MemoryParts {
    fn state(&self) -> Result<std::sync::MutexGuard<'_, MemoryState>, StoreError> {
        self.inner.lock().map_err(|_| StoreError::Engine {
            path: "memory".into(),
            message: "poisoned".into(),
        })
    }

    /// Removes partition `part` entirely: its records and its head (to
    /// test that the checkpoint catches it).
    pub fn drop_partition(&self, part: &str) -> Result<(), StoreError> {
        let mut s = self.state()?;
        s.lines.remove(part);
        s.heads.remove(part);
        Ok(())
    }

    /// Cuts partition `part` back to its first `keep` records, head too.
    pub fn truncate_partition(&self, part: &str, keep: u64) -> Result<(), StoreError> {
        let mut s = self.state()?;
        let hash = match s.lines.get(part).and_then(|l| l.get(&keep)) {
            Some(line) => split_line(line).map(|(_, h)| h).unwrap_or_default(),
            None => GENESIS.to_string(),
        };
        if let Some(l) = s.lines.get_mut(part) {
            l.retain(|k, _| *k <= keep);
        }
        s.heads.insert(part.to_string(), Head { seq: keep, hash });
        Ok(())
    }
}

impl PartBackend for MemoryParts {
    fn begin(
        &mut self,
        parts: &[String],
        _create: &[String],
    ) -> Result<BTreeMap<String, Head>, StoreError> {
        let s = self.state()?.clone();
        let heads = parts
            .iter()
            .map(|p| (p.clone(), s.heads.get(p).cloned().unwrap_or_default()))
            .collect();
        self.txn = Some(s);
        Ok(heads)
    }

    fn append(&mut self, appends: &[PartAppend<'_>]) -> Result<(), StoreError> {
        let err = |message: String| StoreError::Engine {
            path: "memory".into(),
            message,
        };
        let Some(t) = self.txn.as_mut() else {
            return Err(err("append outside a transaction".into()));
        };
        for a in appends {
            let now = t.heads.get(a.partition).cloned().unwrap_or_default();
            if now != *a.before {
                return Err(err(format!("the head of {} moved", a.partition)));
            }
            let lines = t.lines.entry(a.partition.to_string()).or_default();
            for (i, line) in a.lines.iter().enumerate() {
                lines.insert(a.first + i as u64, line.clone());
            }
            t.heads.insert(a.partition.to_string(), a.head.clone());
        }
        Ok(())
    }

    fn scan(&self, part: &str, from: u64, f: PartVisit<'_>) -> Result<(), StoreError> {
        let lines: Vec<(u64, Vec<u8>)> = self
            .state()?
            .lines
            .get(part)
            .map(|l| l.range(from..).map(|(k, v)| (*k, v.clone())).collect())
            .unwrap_or_default();
        for (k, line) in lines {
            f(part, k, &line)?;
        }
        Ok(())
    }

    fn heads(&self) -> Result<BTreeMap<String, Option<Head>>, StoreError> {
        let s = self.state()?;
        let mut out: BTreeMap<String, Option<Head>> = s
            .heads
            .iter()
            .map(|(k, v)| (k.clone(), Some(v.clone())))
            .collect();
        for p in s.lines.keys() {
            out.entry(p.clone()).or_insert(None);
        }
        Ok(out)
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        if let Some(t) = self.txn.take() {
            *self.state()? = t;
        }
        Ok(())
    }

    fn rollback(&mut self) {
        self.txn = None;
    }

    fn name(&self) -> String {
        "memory".into()
    }
}

/// The fields the partition check reads.
#[derive(serde::Deserialize)]
struct PartLink {
    #[serde(default)]
    partition: Option<String>,
    kind: Kind,
    #[serde(default)]
    tenant: Option<String>,
    #[serde(default)]
    session: Option<String>,
    seq: u64,
    prev: String,
    #[serde(default)]
    checkpoint: Option<Checkpoint>,
}

fn part_error(part: &str, seq: u64, reason: impl std::fmt::Display) -> StoreError {
    VerifyError {
        seq,
        reason: format!("partition {part}: {reason}"),
    }
    .into()
}

/// Checks that the record `line` at `seq` belongs in `part`: it names the
/// partition (none in `log`), and a session's records name that session.
fn check_home(part: &str, seq: u64, link: &PartLink) -> Result<(), StoreError> {
    let named = link.partition.as_deref().unwrap_or(LOG_PARTITION);
    if named != part {
        return Err(part_error(
            part,
            seq,
            format!("the record says it belongs to partition {named} (a chain was moved)"),
        ));
    }
    if part == LOG_PARTITION {
        if matches!(link.kind, Kind::Session | Kind::Event | Kind::Closed) {
            return Err(part_error(
                part,
                seq,
                "a session's record in the log partition",
            ));
        }
        return Ok(());
    }
    match (&link.tenant, &link.session) {
        (Some(t), Some(s)) if session_partition(t, s) == part => Ok(()),
        (Some(t), Some(_))
            if pool_partition(t) == part && matches!(link.kind, Kind::Event | Kind::Closed) =>
        {
            Ok(())
        }
        _ => Err(part_error(
            part,
            seq,
            format!(
                "the record is of session {:?}/{:?}, not of this partition",
                link.tenant, link.session
            ),
        )),
    }
}

/// What [`PartLog::verify_checkpoints`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartSummary {
    /// Partitions read (`log` included).
    pub partitions: u64,
    /// Records in all partitions.
    pub records: u64,
    /// Checkpoint records (in `log`), each signature checked.
    pub checkpoints: u64,
    /// The last checkpoint's position in `log`.
    pub last: Option<u64>,
    /// With a kept checkpoint: its position in `log`, which `log` reaches.
    pub kept: Option<u64>,
}

/// A hash-chained log partitioned by session, on a [`PartBackend`].
pub struct PartLog {
    backend: Box<dyn PartBackend>,
    /// The head of every partition this process has applied.
    known: HashMap<String, Head>,
    /// The partitions the open transaction holds, with their heads then.
    locked: Option<BTreeMap<String, Head>>,
    /// `known` of the locked partitions (and `log`) when the transaction
    /// began, for rollback.
    before: HashMap<String, Head>,
    /// Signed checkpoints (`serve --checkpoint-key`): when, and what this
    /// process appended since the last one.
    checkpoints: Option<Checkpointing>,
    lock_wait: std::time::Duration,
}

impl PartLog {
    /// Opens the partitioned log on `backend`; this process has applied
    /// nothing yet (see [`PartLog::read`]).
    pub fn open(backend: Box<dyn PartBackend>) -> PartLog {
        PartLog {
            backend,
            known: HashMap::new(),
            locked: None,
            before: HashMap::new(),
            checkpoints: None,
            lock_wait: std::time::Duration::ZERO,
        }
    }

    /// Signs checkpoints ([`PartLog::checkpoint`]) with `signer`, when
    /// the caller asks (no schedule of its own: [`PartLog::checkpoint_due`]
    /// is never true).
    pub fn with_signer(self, signer: CheckpointSigner) -> PartLog {
        self.with_checkpoints(Checkpoints {
            signer,
            every: Every::Records(u64::MAX),
            out: None,
        })
    }

    /// Signs checkpoints as `config` says: [`PartLog::checkpoint_due`]
    /// follows `config.every` (records this process appended, or time
    /// with records since), and each committed checkpoint's stored line is
    /// also written to `config.out` (atomically), as on the single chain.
    pub fn with_checkpoints(mut self, config: Checkpoints) -> PartLog {
        self.checkpoints = Some(Checkpointing::new(config));
        self
    }

    /// How long until a time-based checkpoint may be due (`None`: no
    /// checkpoints by time).
    pub fn checkpoint_tick(&self) -> Option<std::time::Duration> {
        match self.checkpoints.as_ref()?.config.every {
            Every::Records(_) => None,
            Every::Time(d) => Some(d.saturating_sub(self.checkpoints.as_ref()?.last.elapsed())),
        }
    }

    /// Whether a checkpoint is due once `n` more records are appended
    /// (`force`: whenever this process appended anything since the last).
    pub fn checkpoint_due(&self, n: u64, force: bool) -> bool {
        self.checkpoints.as_ref().is_some_and(|c| c.due(n, force))
    }

    /// How long the last [`PartLog::begin`] waited for its head locks.
    pub fn lock_wait(&self) -> std::time::Duration {
        self.lock_wait
    }

    /// The head of `part` this process has applied (the empty head when
    /// none).
    pub fn known(&self, part: &str) -> Head {
        self.known.get(part).cloned().unwrap_or_default()
    }

    /// Starts a write transaction that may append to `parts`: locks their
    /// head rows (sorted; nothing else is locked), then hands to
    /// `catch_up`, checked and in order, every record other processes
    /// appended since this process's heads: first, with `read_log` (or
    /// when `parts` holds it), to `log` (read without a lock: the policies
    /// a new session gets), then to each partition of `parts`. A partition
    /// this process has applied nothing of is preceded by `log` too (its
    /// first record, a session's, names a policy).
    ///
    /// Errors: [`StoreError::Unavailable`] (nothing applied: retry);
    /// [`StoreError::Chain`] or [`StoreError::Diverged`] when a record does
    /// not check or `catch_up` refuses it (the transaction is rolled back).
    pub fn begin(
        &mut self,
        parts: &[String],
        read_log: bool,
        catch_up: PartVisit<'_>,
    ) -> Result<(), StoreError> {
        if self.locked.is_some() {
            self.rollback();
        }
        let mut sorted: Vec<String> = parts.to_vec();
        sorted.sort();
        sorted.dedup();
        // A partition this process has seen records of has its head row.
        let create: Vec<String> = sorted
            .iter()
            .filter(|p| self.known(p).seq == 0)
            .cloned()
            .collect();
        let asked = std::time::Instant::now();
        let heads = self.backend.begin(&sorted, &create);
        self.lock_wait = asked.elapsed();
        let heads = heads.map_err(|e| StoreError::Unavailable(e.to_string()))?;
        self.before.clear();
        self.locked = Some(heads.clone());
        let mut todo: Vec<(String, Option<Head>)> = Vec::with_capacity(heads.len() + 1);
        if read_log && !heads.contains_key(LOG_PARTITION) {
            todo.push((LOG_PARTITION.to_string(), None));
        }
        todo.extend(heads.into_iter().map(|(p, h)| (p, Some(h))));
        for (part, until) in todo {
            if let Err(e) = self.catch_up(&part, until, catch_up) {
                self.rollback();
                return Err(e);
            }
        }
        // What was caught up on is applied: a rollback goes back to here.
        self.before = sorted
            .iter()
            .map(String::as_str)
            .chain([LOG_PARTITION])
            .map(|p| (p.to_string(), self.known(p)))
            .collect();
        Ok(())
    }

    /// Applies the records of `part` after this process's head, up to
    /// `until` (the locked head; `None`: whatever is committed).
    fn catch_up(
        &mut self,
        part: &str,
        until: Option<Head>,
        catch_up: PartVisit<'_>,
    ) -> Result<(), StoreError> {
        let from = self.known(part);
        if let Some(u) = &until {
            if *u == from {
                return Ok(());
            }
            if u.seq < from.seq {
                return Err(part_error(
                    part,
                    u.seq + 1,
                    format!(
                        "the store's head went back from {} to {} records",
                        from.seq, u.seq
                    ),
                ));
            }
        }
        if from.seq == 0 && part != LOG_PARTITION {
            // New to this process: its session names a policy in `log`.
            self.catch_up(LOG_PARTITION, None, catch_up)?;
        }
        // Read first, apply after: a read that fails applies nothing.
        let limit = until.as_ref().map_or(u64::MAX, |u| u.seq);
        let mut lines: Vec<(u64, Vec<u8>)> = Vec::new();
        self.backend
            .scan(part, from.seq + 1, &mut |_, seq, line| {
                if seq <= limit {
                    lines.push((seq, line.to_vec()));
                }
                Ok(())
            })
            .map_err(|e| StoreError::Unavailable(e.to_string()))?;
        let mut verifier = Verifier::after(from.clone());
        let pool = part.starts_with("p/");
        for (seq, line) in lines {
            verifier
                .push(seq, &line)
                .map_err(|e| part_error(part, e.seq, e.reason))?;
            let link = serde_json::from_slice::<PartLink>(&line)
                .map_err(|e| part_error(part, seq, format!("not an audit record: {e}")))?;
            check_home(part, seq, &link)?;
            if pool {
                // A pool's event names a session this process may not have
                // seen yet: its `session` record comes first.
                if let Some(s) = session_of(&line) {
                    if self.known(&s).seq == 0 {
                        self.catch_up(&s, None, catch_up)?;
                    }
                }
            }
            catch_up(part, seq, &line).map_err(|e| match e {
                StoreError::Diverged { .. } => e,
                other => StoreError::Diverged {
                    seq,
                    reason: format!("partition {part}: {other}"),
                },
            })?;
            self.known.insert(part.to_string(), verifier.head());
        }
        let got = verifier.head();
        if let Some(u) = until {
            if got != u {
                return Err(part_error(
                    part,
                    got.seq + 1,
                    format!(
                        "the head says {} records ending in {}, the chain has {} ending in {}",
                        u.seq, u.hash, got.seq, got.hash
                    ),
                ));
            }
        }
        self.known.insert(part.to_string(), got);
        Ok(())
    }

    /// Chains `records` (each with its partition, which the open
    /// transaction must hold) after their partitions' heads and writes
    /// them. Returns each record's partition head after it. On error
    /// nothing is written (roll back).
    pub fn append(&mut self, records: &mut [(String, Record)]) -> Result<Vec<Head>, StoreError> {
        let Some(locked) = &self.locked else {
            return Err(StoreError::Engine {
                path: self.backend.name(),
                message: "append outside a transaction (call begin first)".into(),
            });
        };
        // partition -> (head so far, head before, first seq, lines)
        type Pending = (Head, Head, u64, Vec<Vec<u8>>);
        let mut heads: BTreeMap<String, Pending> = BTreeMap::new();
        let mut out = Vec::with_capacity(records.len());
        for (part, r) in records.iter_mut() {
            if !locked.contains_key(part.as_str()) {
                return Err(StoreError::Engine {
                    path: self.backend.name(),
                    message: format!("partition {part} is not locked by this transaction"),
                });
            }
            let known = self.known(part);
            let entry = heads
                .entry(part.clone())
                .or_insert_with(|| (known.clone(), known.clone(), known.seq + 1, Vec::new()));
            r.seq = entry.0.seq + 1;
            r.prev = entry.0.hash.clone();
            r.partition = (part != LOG_PARTITION).then(|| part.clone());
            let (line, hash) = chain_line(r)?;
            entry.0 = Head { seq: r.seq, hash };
            entry.3.push(line);
            out.push(entry.0.clone());
        }
        let appends: Vec<PartAppend<'_>> = heads
            .iter()
            .map(|(p, (head, before, first, lines))| PartAppend {
                partition: p,
                first: *first,
                lines,
                head,
                before,
            })
            .collect();
        self.backend.append(&appends)?;
        for (p, (head, ..)) in heads {
            self.known.insert(p, head);
        }
        if let Some(c) = self.checkpoints.as_mut() {
            let n = records
                .iter()
                .filter(|(_, r)| r.kind != Kind::Checkpoint)
                .count();
            c.since += n as u64;
        }
        Ok(out)
    }

    /// Appends a signed checkpoint to `log` (which the open transaction
    /// must hold): it commits to `log`'s head before it and to every other
    /// partition's committed head (sorted by partition).
    pub fn checkpoint(&mut self, time_ms: u64) -> Result<Head, StoreError> {
        let Some(signer) = self.checkpoints.as_ref().map(|c| &c.config.signer) else {
            return Err(StoreError::Engine {
                path: self.backend.name(),
                message: "no checkpoint key".into(),
            });
        };
        let stored = self.backend.head_rows()?;
        let mut heads: Vec<PartitionHead> = Vec::with_capacity(stored.len() + 1);
        let log = self.known(LOG_PARTITION);
        for (p, h) in stored {
            // This transaction's own appends are what the partition holds.
            let h = if p == LOG_PARTITION {
                Some(log.clone())
            } else if self.locked.as_ref().is_some_and(|l| l.contains_key(&p)) {
                Some(self.known(&p))
            } else {
                Some(h)
            };
            if let Some(h) = h.filter(|h| h.seq > 0 || p == LOG_PARTITION) {
                heads.push(PartitionHead {
                    partition: p,
                    seq: h.seq,
                    hash: h.hash,
                });
            }
        }
        if !heads.iter().any(|h| h.partition == LOG_PARTITION) {
            heads.push(PartitionHead {
                partition: LOG_PARTITION.into(),
                seq: log.seq,
                hash: log.hash.clone(),
            });
        }
        heads.sort_by(|a, b| a.partition.cmp(&b.partition));
        let signed = signer.sign(time_ms, heads)?;
        let mut r = [(
            LOG_PARTITION.to_string(),
            Record {
                time_ms,
                kind: Kind::Checkpoint,
                checkpoint: Some(signed),
                ..Record::default()
            },
        )];
        let heads = self.append(&mut r)?;
        // `append` chained the record in place: the same bytes again, for
        // `--checkpoint-out` once the transaction commits.
        let (line, _) = chain_line(&r[0].1)?;
        if let Some(c) = self.checkpoints.as_mut() {
            c.since = 0;
            c.last = std::time::Instant::now();
            c.unwritten = Some(line);
        }
        heads.into_iter().next().ok_or_else(|| StoreError::Engine {
            path: self.backend.name(),
            message: "the checkpoint was not appended".into(),
        })
    }

    /// Commits the open transaction; a checkpoint it appended is then
    /// written to `--checkpoint-out` (a failure to write it is reported on
    /// standard error: the log itself holds the checkpoint).
    pub fn commit(&mut self) -> Result<(), StoreError> {
        if self.locked.take().is_none() {
            return Ok(());
        }
        self.before.clear();
        self.backend.commit()?;
        if let Some(c) = self.checkpoints.as_mut() {
            if let Some(line) = c.unwritten.take() {
                if let Err(e) = c.write_out(&line) {
                    eprintln!("agenra: {e}");
                }
            }
        }
        Ok(())
    }

    /// Abandons the open transaction: this process's heads go back to
    /// where they were after [`PartLog::begin`] caught up (what it applied
    /// then stays applied).
    pub fn rollback(&mut self) {
        if self.locked.take().is_some() {
            self.backend.rollback();
            for (p, h) in self.before.drain() {
                self.known.insert(p, h);
            }
            if let Some(c) = self.checkpoints.as_mut() {
                c.unwritten = None;
            }
        }
    }

    /// The one reader: every partition, `log` first, then the sessions,
    /// then the pools, each read from its first record and checked (key,
    /// seq, prev, hash, partition) to its head as read at the start (one
    /// snapshot of every head: records other replicas append meanwhile are
    /// left for the next read); only checked records are handed to `f`. A
    /// partition with records but no head, or a head its chain does not
    /// reach, is an error. Returns every partition's head
    /// (and remembers them as applied).
    pub fn read(&mut self, f: PartVisit<'_>) -> Result<BTreeMap<String, Head>, StoreError> {
        let stored = self.backend.heads()?;
        let mut order: Vec<&String> = stored.keys().collect();
        order.sort_by_key(|p| (rank(p), p.as_str()));
        let mut out = BTreeMap::new();
        for part in order {
            let Some(head) = stored.get(part).cloned().flatten() else {
                return Err(part_error(
                    part,
                    1,
                    "it holds records but has no head row (its head was removed)",
                ));
            };
            let mut verifier = Verifier::default();
            let mut failed: Option<StoreError> = None;
            self.backend.scan(part, 1, &mut |p, seq, line| {
                // Appended by another replica since the heads were read
                // (one snapshot): left for the next read, as on the single
                // chain in PostgreSQL.
                if failed.is_some() || seq > head.seq {
                    return Ok(());
                }
                let checked = verifier
                    .push(seq, line)
                    .map_err(|e| part_error(p, e.seq, e.reason))
                    .and_then(|()| {
                        serde_json::from_slice::<PartLink>(line)
                            .map_err(|e| part_error(p, seq, format!("not an audit record: {e}")))
                    })
                    .and_then(|link| check_home(p, seq, &link))
                    .and_then(|()| f(p, seq, line));
                if let Err(e) = checked {
                    failed = Some(e);
                }
                Ok(())
            })?;
            if let Some(e) = failed {
                return Err(e);
            }
            let got = verifier.head();
            if got != head {
                return Err(part_error(
                    part,
                    got.seq + 1,
                    format!(
                        "the head says {} records ending in {}, the chain has {} ending in {}",
                        head.seq, head.hash, got.seq, got.hash
                    ),
                ));
            }
            self.known.insert(part.clone(), got.clone());
            out.insert(part.clone(), got);
        }
        Ok(out)
    }

    /// [`PartLog::read`], and with `key` every checkpoint in `log`: it
    /// names the key and its signature checks, it commits to `log`'s chain
    /// just before it, and every partition it names is present with a
    /// chain through the head it committed to (a partition dropped, or
    /// truncated together with its head, is an error naming it). With a
    /// key the log must hold at least one checkpoint.
    pub fn verify_checkpoints(
        &mut self,
        key: Option<&PublicKey>,
        kept: Option<&[u8]>,
    ) -> Result<PartSummary, StoreError> {
        let mut summary = PartSummary::default();
        // partition -> (seq, hash, the checkpoint's position) of the
        // latest checkpoint naming it (a later one commits to as much).
        let mut promised: HashMap<String, (u64, String, u64)> = HashMap::new();
        // partition -> its hash at each promised seq, once read.
        let mut seen_at: HashMap<String, String> = HashMap::new();
        let mut lines_in_log: Vec<(u64, String)> = Vec::new();
        let heads = self.read(&mut |part, seq, line| {
            summary.records += 1;
            let hash = split_line(line).map(|(_, h)| h).unwrap_or_default();
            if part == LOG_PARTITION {
                lines_in_log.push((seq, hash.clone()));
                let link: PartLink = serde_json::from_slice(line)
                    .map_err(|e| part_error(part, seq, format!("not an audit record: {e}")))?;
                if link.kind == Kind::Checkpoint {
                    let cp =
                        checked_checkpoint(link, key).map_err(|why| part_error(part, seq, why))?;
                    summary.checkpoints += 1;
                    summary.last = Some(seq);
                    for h in cp.heads.iter().filter(|h| h.partition != LOG_PARTITION) {
                        promised.insert(h.partition.clone(), (h.seq, h.hash.clone(), seq));
                    }
                }
            } else if let Some((at, _, _)) = promised.get(part) {
                if *at == seq {
                    seen_at.insert(part.to_string(), hash);
                }
            }
            Ok(())
        })?;
        summary.partitions = heads.len() as u64;
        for (part, (seq, hash, at)) in &promised {
            let Some(head) = heads.get(part) else {
                return Err(part_error(
                    part,
                    1,
                    format!(
                        "the checkpoint at log record {at} commits to its record {seq}, but the \
                         store has no such partition (a session's chain was dropped)"
                    ),
                ));
            };
            if head.seq < *seq {
                return Err(part_error(
                    part,
                    head.seq + 1,
                    format!(
                        "it ends at record {}, but the checkpoint at log record {at} commits to \
                         its record {seq} (the partition was truncated)",
                        head.seq
                    ),
                ));
            }
            if seen_at.get(part) != Some(hash) {
                return Err(part_error(
                    part,
                    *seq,
                    format!(
                        "the checkpoint at log record {at} commits to its record {seq} with hash \
                         {hash}, but the partition's record {seq} hashes to {} (it was rewritten)",
                        seen_at.get(part).map_or("nothing", String::as_str)
                    ),
                ));
            }
        }
        if key.is_some() && summary.checkpoints == 0 {
            return Err(part_error(
                LOG_PARTITION,
                lines_in_log.len() as u64,
                "no signed checkpoint in the log: nothing to check the key against",
            ));
        }
        if let Some(kept) = kept {
            let Some(key) = key else {
                return Err(part_error(
                    LOG_PARTITION,
                    0,
                    "the kept checkpoint: checking it needs the public key",
                ));
            };
            let (at, hash) = kept_checkpoint(kept, key)?;
            let found = lines_in_log
                .iter()
                .find(|(seq, _)| *seq == at)
                .map(|(_, h)| h);
            reaches_kept(lines_in_log.len() as u64, at, &hash, found)?;
            summary.kept = Some(at);
        }
        Ok(summary)
    }

    /// With `--checkpoint-out FILE` and FILE present: checks, after
    /// [`PartLog::read`], that the `log` partition reaches the checkpoint
    /// kept there (its line checks, is signed by this log's key, and `log`
    /// holds that very record, whose heads the in-log check then covers).
    /// A log cut back behind the server's back is refused at start instead
    /// of being extended.
    pub fn check_kept_checkpoint(&self) -> Result<(), StoreError> {
        let Some(kept) = checkpoint::read_kept(self.checkpoints.as_ref())? else {
            return Ok(());
        };
        let out = kept.file;
        let named = |e: StoreError| StoreError::Engine {
            path: out.display().to_string(),
            message: e.to_string(),
        };
        let (at, hash) = kept_checkpoint(&kept.line, &kept.key).map_err(named)?;
        let log = self.known(LOG_PARTITION);
        let mut found = None;
        if at <= log.seq {
            self.backend.scan(LOG_PARTITION, at, &mut |_, seq, line| {
                if seq == at && found.is_none() {
                    found = split_line(line).map(|(_, h)| h);
                }
                Ok(())
            })?;
        }
        reaches_kept(log.seq, at, &hash, found.as_ref()).map_err(named)
    }
}

/// The checks of a checkpoint record in `log` that need no other record:
/// it carries its checkpoint, commits to `log`'s chain just before it, and
/// (with `key`) is signed by that key.
fn checked_checkpoint(link: PartLink, key: Option<&PublicKey>) -> Result<Checkpoint, String> {
    let cp = link
        .checkpoint
        .ok_or("a checkpoint record without its checkpoint")?;
    let own = cp.heads.iter().find(|h| h.partition == LOG_PARTITION);
    if own.is_none_or(|h| h.seq + 1 != link.seq || h.hash != link.prev) {
        return Err(format!(
            "the checkpoint commits to {}, but the log partition before it ends at record {} \
             with hash {}",
            serde_json::to_string(&cp.heads).unwrap_or_default(),
            link.seq.saturating_sub(1),
            link.prev
        ));
    }
    if let Some(k) = key {
        k.check(&cp)?;
    }
    Ok(cp)
}

/// A checkpoint's stored line kept elsewhere (`serve --checkpoint-out`),
/// checked on its own: it hashes to what it says, is a checkpoint record
/// of `log` in its place, signed by `key`. Returns its seq and hash.
fn kept_checkpoint(line: &[u8], key: &PublicKey) -> Result<(u64, String), StoreError> {
    let fail =
        |reason: String| part_error(LOG_PARTITION, 0, format!("the kept checkpoint: {reason}"));
    let Some((claimed, actual)) = split_line(line) else {
        return Err(fail("not a stored audit record (no \"hash\" field)".into()));
    };
    if claimed != actual {
        return Err(fail(format!(
            "it hashes to {actual}, but says {claimed} (it was changed)"
        )));
    }
    let link: PartLink =
        serde_json::from_slice(line).map_err(|e| fail(format!("not an audit record: {e}")))?;
    if link.kind != Kind::Checkpoint || link.partition.is_some() {
        return Err(fail("not a checkpoint record of the log partition".into()));
    }
    let seq = link.seq;
    checked_checkpoint(link, Some(key)).map_err(fail)?;
    Ok((seq, actual))
}

/// Whether `log`, `len` records long and holding `found` (the hash of its
/// record `at`, if any), reaches the kept checkpoint `at` with `hash`.
fn reaches_kept(len: u64, at: u64, hash: &str, found: Option<&String>) -> Result<(), StoreError> {
    if len < at {
        return Err(part_error(
            LOG_PARTITION,
            len + 1,
            format!(
                "it ends at record {len}, but the kept checkpoint is its record {at}: the log was \
                 truncated"
            ),
        ));
    }
    match found {
        Some(h) if h == hash => Ok(()),
        other => Err(part_error(
            LOG_PARTITION,
            at,
            format!(
                "its record {at} hashes to {}, but the kept checkpoint says {hash} (the log was \
                 rewritten from there on)",
                other.map_or("nothing", String::as_str)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(tenant: &str, session: &str, reason: &str) -> (String, Record) {
        (
            session_partition(tenant, session),
            Record {
                kind: Kind::Event,
                tenant: Some(tenant.into()),
                session: Some(session.into()),
                reason: Some(reason.into()),
                ..Record::default()
            },
        )
    }

    fn key() -> CheckpointSigner {
        CheckpointSigner::from_seed([7; 32])
    }

    fn public() -> PublicKey {
        PublicKey::parse(&key().public_key()).unwrap()
    }

    /// Two sessions' records, then a checkpoint, then one more record.
    fn written() -> (MemoryParts, PartLog) {
        let store = MemoryParts::default();
        let mut log = PartLog::open(Box::new(store.clone())).with_signer(key());
        let a = session_partition("acme", "a");
        let b = session_partition("acme", "b");
        log.begin(&[a.clone(), b.clone()], true, &mut |_, _, _| Ok(()))
            .unwrap();
        log.append(&mut [
            event("acme", "a", "1"),
            event("acme", "b", "1"),
            event("acme", "a", "2"),
        ])
        .unwrap();
        log.commit().unwrap();
        log.begin(&[LOG_PARTITION.to_string()], true, &mut |_, _, _| Ok(()))
            .unwrap();
        log.checkpoint(1).unwrap();
        log.commit().unwrap();
        log.begin(&[a], true, &mut |_, _, _| Ok(())).unwrap();
        log.append(&mut [event("acme", "a", "3")]).unwrap();
        log.commit().unwrap();
        (store, log)
    }

    #[test]
    fn each_session_is_its_own_chain_and_the_checkpoint_covers_them() {
        let (store, _) = written();
        let mut reader = PartLog::open(Box::new(store));
        let mut seen = Vec::new();
        let heads = reader
            .read(&mut |p, seq, _| {
                seen.push((p.to_string(), seq));
                Ok(())
            })
            .unwrap();
        assert_eq!(heads[&session_partition("acme", "a")].seq, 3);
        assert_eq!(heads[&session_partition("acme", "b")].seq, 1);
        assert_eq!(heads[LOG_PARTITION].seq, 1);
        // `log` first, then the sessions in name order.
        assert_eq!(seen[0], (LOG_PARTITION.to_string(), 1));
        let s = reader.verify_checkpoints(Some(&public()), None).unwrap();
        assert_eq!((s.partitions, s.records, s.checkpoints), (3, 5, 1));
    }

    #[test]
    fn a_dropped_session_partition_is_caught_by_the_checkpoint() {
        let (store, _) = written();
        store
            .drop_partition(&session_partition("acme", "b"))
            .unwrap();
        let mut reader = PartLog::open(Box::new(store));
        // The chains that are left are intact...
        reader.read(&mut |_, _, _| Ok(())).unwrap();
        // ...but the signed checkpoint names the dropped one.
        let e = reader
            .verify_checkpoints(Some(&public()), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("s/acme/b") && e.contains("dropped"), "{e}");
    }

    #[test]
    fn a_partition_truncated_with_its_head_is_caught_by_the_checkpoint() {
        let (store, _) = written();
        // Session a had 2 records at the checkpoint; cut it to 1.
        store
            .truncate_partition(&session_partition("acme", "a"), 1)
            .unwrap();
        let mut reader = PartLog::open(Box::new(store));
        reader.read(&mut |_, _, _| Ok(())).unwrap();
        let e = reader
            .verify_checkpoints(Some(&public()), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("truncated"), "{e}");
        // Cut back to the checkpoint's record exactly: still intact.
        let (store, _) = written();
        store
            .truncate_partition(&session_partition("acme", "a"), 2)
            .unwrap();
        PartLog::open(Box::new(store))
            .verify_checkpoints(Some(&public()), None)
            .unwrap();
    }

    #[test]
    fn a_checkpoint_signed_with_another_key_or_no_checkpoint_is_refused() {
        let (store, _) = written();
        let other = PublicKey::parse(&CheckpointSigner::from_seed([8; 32]).public_key()).unwrap();
        let e = PartLog::open(Box::new(store))
            .verify_checkpoints(Some(&other), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("another key"), "{e}");
        let store = MemoryParts::default();
        let mut log = PartLog::open(Box::new(store.clone()));
        let a = session_partition("acme", "a");
        log.begin(std::slice::from_ref(&a), true, &mut |_, _, _| Ok(()))
            .unwrap();
        log.append(&mut [event("acme", "a", "1")]).unwrap();
        log.commit().unwrap();
        let e = PartLog::open(Box::new(store))
            .verify_checkpoints(Some(&public()), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no signed checkpoint"), "{e}");
    }

    #[test]
    fn a_chain_moved_to_another_session_or_a_record_out_of_its_partition_is_caught() {
        let (store, _) = written();
        {
            let mut s = store.state().unwrap();
            let b = s.lines.remove(&session_partition("acme", "b")).unwrap();
            let h = s.heads.remove(&session_partition("acme", "b")).unwrap();
            s.lines.insert(session_partition("acme", "c"), b);
            s.heads.insert(session_partition("acme", "c"), h);
        }
        let e = PartLog::open(Box::new(store))
            .read(&mut |_, _, _| Ok(()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("belongs to partition s/acme/b"), "{e}");
        let mut log = PartLog::open(Box::new(MemoryParts::default()));
        let e = log.append(&mut [event("acme", "a", "1")]).unwrap_err();
        assert!(e.to_string().contains("outside a transaction"), "{e}");
        log.begin(&[session_partition("acme", "b")], true, &mut |_, _, _| {
            Ok(())
        })
        .unwrap();
        let e = log.append(&mut [event("acme", "a", "1")]).unwrap_err();
        assert!(e.to_string().contains("not locked"), "{e}");
    }

    #[test]
    fn a_second_writer_catches_up_on_its_partitions_only() {
        let (store, _) = written();
        let mut other = PartLog::open(Box::new(store.clone()));
        let mut applied = Vec::new();
        other
            .begin(&[session_partition("acme", "b")], true, &mut |p, seq, _| {
                applied.push((p.to_string(), seq));
                Ok(())
            })
            .unwrap();
        // `log` (read without a lock) and the one locked session; not `a`.
        assert_eq!(
            applied,
            vec![
                (LOG_PARTITION.to_string(), 1),
                (session_partition("acme", "b"), 1)
            ]
        );
        let h = other.append(&mut [event("acme", "b", "2")]).unwrap();
        assert_eq!(h[0].seq, 2);
        other.commit().unwrap();
        PartLog::open(Box::new(store))
            .verify_checkpoints(Some(&public()), None)
            .unwrap();
    }

    /// A path for a kept checkpoint in a directory of its own.
    fn kept_path(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "agenra-parts-{name}-{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("last.checkpoint")
    }

    /// `written()`, then a second checkpoint (log record 2, committing to
    /// session a's record 3), with every checkpoint also kept in `out`.
    fn written_and_kept(out: &std::path::Path) -> MemoryParts {
        let (store, log) = written();
        let config = Checkpoints {
            signer: key(),
            every: Every::Records(u64::MAX),
            out: Some(out.to_path_buf()),
        };
        let mut log = PartLog {
            checkpoints: Some(Checkpointing::new(config)),
            ..log
        };
        log.begin(&[LOG_PARTITION.to_string()], true, &mut |_, _, _| Ok(()))
            .unwrap();
        log.checkpoint(2).unwrap();
        log.commit().unwrap();
        store
    }

    #[test]
    fn a_kept_checkpoint_catches_a_log_cut_back_together_with_its_heads() {
        let out = kept_path("cut");
        let store = written_and_kept(&out);
        let kept = std::fs::read(&out).unwrap();
        let s = PartLog::open(Box::new(store.clone()))
            .verify_checkpoints(Some(&public()), Some(kept.trim_ascii()))
            .unwrap();
        assert_eq!((s.checkpoints, s.kept), (2, Some(2)));
        // Cut `log` back to its first checkpoint and session a to what that
        // one committed to: every chain and the checkpoint left still check...
        store.truncate_partition(LOG_PARTITION, 1).unwrap();
        store
            .truncate_partition(&session_partition("acme", "a"), 2)
            .unwrap();
        PartLog::open(Box::new(store.clone()))
            .verify_checkpoints(Some(&public()), None)
            .unwrap();
        // ...but not against the checkpoint kept elsewhere.
        let e = PartLog::open(Box::new(store.clone()))
            .verify_checkpoints(Some(&public()), Some(kept.trim_ascii()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("truncated") && e.contains("record 2"), "{e}");
        // The same check at start (`serve --checkpoint-out`).
        let mut log = PartLog::open(Box::new(store)).with_checkpoints(Checkpoints {
            signer: key(),
            every: Every::Records(u64::MAX),
            out: Some(out.clone()),
        });
        log.read(&mut |_, _, _| Ok(())).unwrap();
        let e = log.check_kept_checkpoint().unwrap_err().to_string();
        assert!(
            e.contains("truncated") && e.contains("last.checkpoint"),
            "{e}"
        );
    }

    #[test]
    fn a_kept_checkpoint_that_was_changed_or_is_another_keys_is_refused() {
        let out = kept_path("changed");
        let store = written_and_kept(&out);
        let kept = String::from_utf8(std::fs::read(&out).unwrap()).unwrap();
        let mut log = PartLog::open(Box::new(store.clone())).with_checkpoints(Checkpoints {
            signer: key(),
            every: Every::Records(u64::MAX),
            out: Some(out.clone()),
        });
        log.read(&mut |_, _, _| Ok(())).unwrap();
        log.check_kept_checkpoint().unwrap();
        let changed = kept.replacen("\"time_ms\":2", "\"time_ms\":3", 1);
        assert_ne!(changed, kept);
        let e = PartLog::open(Box::new(store.clone()))
            .verify_checkpoints(Some(&public()), Some(changed.trim().as_bytes()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("it was changed"), "{e}");
        let other = PublicKey::parse(&CheckpointSigner::from_seed([8; 32]).public_key()).unwrap();
        let e = PartLog::open(Box::new(store.clone()))
            .verify_checkpoints(Some(&other), Some(kept.trim().as_bytes()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("another key"), "{e}");
        // Without the key there is nothing to check it against.
        let e = PartLog::open(Box::new(store))
            .verify_checkpoints(None, Some(kept.trim().as_bytes()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs the public key"), "{e}");
    }

    #[test]
    fn partition_names_are_unambiguous() {
        assert_eq!(session_partition("a/b", "c"), "s/a%2Fb/c");
        assert_ne!(session_partition("a/b", "c"), session_partition("a", "b/c"));
        assert_ne!(
            session_partition("a%2Fb", "c"),
            session_partition("a/b", "c")
        );
    }
}
