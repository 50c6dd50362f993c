#![warn(missing_docs)]
//! The durable store of the Agenra gateway (`docs/store.md`).
//!
//! Everything the gateway must not forget is one append-only,
//! hash-chained log of [`Record`]s: each policy revision the server ran
//! (with the certificate that admitted it), each session it opened, and
//! each event it applied with the decision it gave. The log is both the
//! audit trail and the recovery source: the monitor's step is a pure
//! function, so replaying a session's events rebuilds its graph, ledger and
//! pending approvals exactly.
//!
//! * [`Backend`] is what a storage engine provides (append a batch in one
//!   transaction, read back in order). [`RedbBackend`] is the embedded
//!   default; [`MemoryBackend`] is for tests; [`PgBackend`] is one log in
//!   PostgreSQL shared by several server replicas (each write transaction
//!   locks the head and first catches up on what the others appended).
//! * [`Log`] assigns sequence numbers and chains the hashes.
//! * [`Committer`] is group commit: one writer thread takes every record
//!   submitted meanwhile, writes them in one transaction (one fsync) and
//!   only then calls each submitter back.
//! * [`Log::read`] is the one reader of a store (recovery and `agenra audit
//!   verify` alike): it checks each record's key, `seq` and hash links and
//!   stops at the first that disagrees. [`verify_lines`] checks an exported
//!   chain the same way and names the first broken record.

mod backend;
pub mod checkpoint;
mod commit;
mod part_commit;
pub mod parts;
mod pg;
mod pg_parts;
mod reader;
mod record;

pub use backend::{Backend, MemoryBackend, RedbBackend};
pub use checkpoint::{
    generate_key_file, CheckpointSigner, CheckpointSummary, CheckpointVerifier, Checkpoints, Every,
    KeyError, PublicKey,
};
pub use commit::{CatchUp, CommitStats, Committer, Decide, Done, LogReader, ReadLog};
pub use part_commit::{PartCatchUp, PartCommitter, PartDecide};
pub use parts::{
    pool_partition, session_partition, MemoryParts, PartBackend, PartLog, PartSummary,
};
pub use pg::{create_database, is_postgres_url, redact, test_database, PgBackend};
pub use pg_parts::{is_partitioned_pg, PgParts};
pub use record::{
    chain_line, split_line, verify_lines, Head, Kind, Record, Snapshot, VerifyError, GENESIS,
};

/// Called with each stored line and its sequence number, in order.
pub type Visit<'a> = &'a mut dyn FnMut(u64, &[u8]) -> Result<(), StoreError>;

/// A [`Visit`] that may run on another thread ([`Log::read_noting`]).
pub type SendVisit<'a> = &'a mut (dyn FnMut(u64, &[u8]) -> Result<(), StoreError> + Send);

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The storage engine failed (disk, file lock, corruption it detected).
    #[error("store {path}: {message}")]
    Engine {
        /// The store's path (or `memory`).
        path: String,
        /// The engine's message.
        message: String,
    },
    /// The store's file is corrupt, truncated, empty or not a store: redb
    /// refused it (or panicked on it), or it lacks the log's tables.
    #[error("the store file {path} is corrupt: {message}")]
    Corrupt {
        /// The store's path.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A record could not be encoded.
    #[error("cannot encode audit record: {0}")]
    Encode(#[from] serde_json::Error),
    /// The stored chain is broken (see [`VerifyError`]).
    #[error(transparent)]
    Chain(#[from] VerifyError),
    /// The writer thread stopped after an earlier failure: nothing more is
    /// committed until the server restarts (and recovers from the log).
    #[error("the store's writer stopped after an earlier failure: {0}")]
    Stopped(String),
    /// A shared store could not be reached (or its head lock not taken):
    /// nothing was decided or written; a later request may succeed.
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
    /// A record another replica appended could not be applied here (the
    /// callback given to [`Log::begin`] refused it): this process no
    /// longer follows the log.
    #[error("audit record {seq} (appended by another replica) cannot be applied: {reason}")]
    Diverged {
        /// The record's position.
        seq: u64,
        /// Why.
        reason: String,
    },
}

/// Records [`Log::reread`] reads per backend call (a batch's lines are in
/// memory together).
const REREAD_BATCH: usize = 4096;

/// Each record's hash as [`Log::read_noting`] checked it (32 bytes a
/// record, for the length of recovery).
#[derive(Default)]
pub struct Noted {
    digests: Vec<[u8; 32]>,
}

impl Noted {
    /// Whether `line` is the record `seq` as it was checked: its bytes hash
    /// to the same hash, and it claims that hash.
    fn check(&self, seq: u64, line: &[u8]) -> Result<(), VerifyError> {
        let fail = |reason: &str| VerifyError {
            seq,
            reason: reason.to_string(),
        };
        let noted = usize::try_from(seq.wrapping_sub(1))
            .ok()
            .and_then(|i| self.digests.get(i))
            .ok_or_else(|| fail("it was not read when the log was checked"))?;
        let (claimed, digest) = record::line_digest(line)
            .ok_or_else(|| fail("the line does not end with its \"hash\" field"))?;
        if digest != *noted || claimed != record::hex(noted) {
            return Err(fail(
                "it changed since the chain was checked at start (read again, its bytes differ)",
            ));
        }
        Ok(())
    }
}

/// An append-only, hash-chained log on a [`Backend`].
pub struct Log {
    backend: Box<dyn Backend>,
    head: Head,
    /// The head when the open transaction began (shared backends).
    committed: Option<Head>,
    /// Signed checkpoints (`agenra serve --checkpoint-key`).
    checkpoints: Option<checkpoint::Checkpointing>,
    /// How long the last [`Log::begin`] waited for the head lock.
    lock_wait: std::time::Duration,
}

impl Log {
    /// Opens the log on `backend` and reads its head.
    pub fn open(backend: Box<dyn Backend>) -> Result<Log, StoreError> {
        let head = backend.head()?;
        Ok(Log {
            backend,
            head,
            committed: None,
            checkpoints: None,
            lock_wait: std::time::Duration::ZERO,
        })
    }

    /// Opens the embedded store at `path`, creating it only when no file
    /// exists there (an empty, truncated or corrupt file is
    /// [`StoreError::Corrupt`]; see [`RedbBackend::open`]).
    pub fn open_redb(path: &std::path::Path) -> Result<Log, StoreError> {
        Log::open(Box::new(RedbBackend::open(path)?))
    }

    /// Opens the log in the PostgreSQL database at `url`, creating its
    /// tables on first use.
    pub fn open_pg(url: &str) -> Result<Log, StoreError> {
        Log::open(Box::new(PgBackend::open(url)?))
    }

    /// Opens `store`: a `postgres://` URL, or the embedded store's file.
    pub fn open_store(store: &str) -> Result<Log, StoreError> {
        if is_postgres_url(store) {
            Log::open_pg(store)
        } else {
            Log::open_redb(std::path::Path::new(store))
        }
    }

    /// With checkpoints written out (`--checkpoint-out FILE`) and FILE
    /// present: checks that this log reaches the checkpoint kept there
    /// (its record checks, is signed by this log's key, and the log holds
    /// that very record). A log truncated or rewritten behind the server's
    /// back is then refused at start instead of being extended.
    pub fn check_kept_checkpoint(&self) -> Result<(), StoreError> {
        let Some(kept) = checkpoint::read_kept(self.checkpoints.as_ref())? else {
            return Ok(());
        };
        let (out, key) = (kept.file, kept.key);
        let kept = kept.line.as_slice();
        let mut v = CheckpointVerifier::new(Some(key));
        let named = |e: VerifyError| VerifyError {
            seq: e.seq,
            reason: format!("{} (checked against {})", e.reason, out.display()),
        };
        v.keep(kept).map_err(named)?;
        let at: Record = serde_json::from_slice(kept)?;
        if at.seq > self.head.seq {
            return Err(named(VerifyError {
                seq: self.head.seq + 1,
                reason: format!(
                    "the log ends at record {}, but the kept checkpoint is record {}: \
                     the log was truncated",
                    self.head.seq, at.seq
                ),
            })
            .into());
        }
        let mut found: Option<Result<(), VerifyError>> = None;
        self.backend.scan(at.seq, &mut |seq, line| {
            if found.is_none() {
                found = Some(if seq == at.seq {
                    v.push(seq, line).map_err(named)
                } else {
                    Err(named(VerifyError {
                        seq: at.seq,
                        reason: "the log has no record at the kept checkpoint's place".into(),
                    }))
                });
            }
            Ok(())
        })?;
        match found {
            Some(r) => r.map_err(Into::into),
            None => Err(named(VerifyError {
                seq: at.seq,
                reason: "the log has no record at the kept checkpoint's place".into(),
            })
            .into()),
        }
    }

    /// How long the last [`Log::begin`] waited to take the log's head lock
    /// (zero on a log that is not shared: its one writer holds the file).
    pub fn lock_wait(&self) -> std::time::Duration {
        self.lock_wait
    }

    /// Appends a signed checkpoint record as `config` says (every N
    /// records, or with the first batch after a time; see
    /// [`Log::append`]).
    pub fn with_checkpoints(mut self, config: Checkpoints) -> Log {
        self.checkpoints = Some(checkpoint::Checkpointing::new(config));
        self
    }

    /// How long until a time-based checkpoint may be due (`None`: no
    /// checkpoints by time).
    pub fn checkpoint_tick(&self) -> Option<std::time::Duration> {
        match self.checkpoints.as_ref()?.config.every {
            Every::Time(d) => Some(d),
            Every::Records(_) => None,
        }
    }

    /// Whether a checkpoint is due now with no new record (`force`:
    /// whenever a record was appended since the last one).
    pub fn checkpoint_due(&self, force: bool) -> bool {
        self.checkpoints.as_ref().is_some_and(|c| c.due(0, force))
    }

    /// Appends a checkpoint now if [`Log::checkpoint_due`] (inside the open
    /// transaction, on a shared log). Returns whether it did.
    pub fn checkpoint(&mut self, force: bool) -> Result<bool, StoreError> {
        if !self.checkpoint_due(force) {
            return Ok(false);
        }
        self.append_with(&mut [], true)?;
        Ok(true)
    }

    /// Whether other processes append to this log too (see
    /// [`Backend::shared`]).
    pub fn is_shared(&self) -> bool {
        self.backend.shared()
    }

    /// Starts a write transaction on a shared log: takes the head lock,
    /// then checks and hands to `catch_up`, in order, every record others
    /// appended since this log's head (advancing the head past each one
    /// applied). Nothing to do on a log that is not shared.
    ///
    /// Errors: [`StoreError::Unavailable`] when the store cannot be reached
    /// (nothing was applied that is not in the log: retry later);
    /// [`StoreError::Chain`] or [`StoreError::Diverged`] when a record does
    /// not check or `catch_up` refuses it.
    pub fn begin(&mut self, catch_up: Visit<'_>) -> Result<(), StoreError> {
        self.lock_wait = std::time::Duration::ZERO;
        if !self.backend.shared() {
            return Ok(());
        }
        let asked = std::time::Instant::now();
        let stored = self.backend.begin();
        self.lock_wait = asked.elapsed();
        let stored = stored.map_err(|e| StoreError::Unavailable(e.to_string()))?;
        if stored != self.head {
            if stored.seq < self.head.seq {
                self.backend.rollback();
                return Err(VerifyError {
                    seq: stored.seq + 1,
                    reason: format!(
                        "the store's head went back from {} to {} records",
                        self.head.seq, stored.seq
                    ),
                }
                .into());
            }
            let mut verifier = record::Verifier::after(self.head.clone());
            let mut failed: Option<StoreError> = None;
            let head = &mut self.head;
            let scanned = self.backend.scan(head.seq + 1, &mut |seq, line| {
                if failed.is_some() || seq > stored.seq {
                    return Ok(());
                }
                if let Err(e) = verifier.push(seq, line) {
                    failed = Some(e.into());
                    return Ok(());
                }
                if let Err(e) = catch_up(seq, line) {
                    failed = Some(match e {
                        StoreError::Diverged { .. } => e,
                        other => StoreError::Diverged {
                            seq,
                            reason: other.to_string(),
                        },
                    });
                    return Ok(());
                }
                *head = verifier.head();
                Ok(())
            });
            let problem = match (failed, scanned) {
                (Some(e), _) => Some(e),
                (None, Err(e)) => Some(StoreError::Unavailable(e.to_string())),
                (None, Ok(())) if *head != stored => Some(
                    VerifyError {
                        seq: head.seq + 1,
                        reason: format!(
                            "the store's head says {} records ending in {}, the chain has {} ending in {}",
                            stored.seq, stored.hash, head.seq, head.hash
                        ),
                    }
                    .into(),
                ),
                (None, Ok(())) => None,
            };
            if let Some(e) = problem {
                self.backend.rollback();
                return Err(e);
            }
        }
        self.committed = Some(self.head.clone());
        Ok(())
    }

    /// Commits the transaction [`begin`](Log::begin) opened (everything
    /// appended since is durable when this returns `Ok`).
    pub fn commit(&mut self) -> Result<(), StoreError> {
        if self.committed.take().is_none() {
            return Ok(());
        }
        self.backend.commit()?;
        self.write_out_checkpoint();
        Ok(())
    }

    /// Writes a committed checkpoint to `--checkpoint-out` (a failure is
    /// reported on standard error: the log itself holds the checkpoint).
    fn write_out_checkpoint(&mut self) {
        if let Some(c) = self.checkpoints.as_mut() {
            if let Some(line) = c.unwritten.take() {
                if let Err(e) = c.write_out(&line) {
                    eprintln!("agenra: {e}");
                }
            }
        }
    }

    /// Abandons the transaction [`begin`](Log::begin) opened: the head
    /// goes back to where it began.
    pub fn rollback(&mut self) {
        if let Some(head) = self.committed.take() {
            self.backend.rollback();
            self.head = head;
            if let Some(c) = self.checkpoints.as_mut() {
                c.unwritten = None;
            }
        }
    }

    /// The last record's sequence number and hash.
    pub fn head(&self) -> Head {
        self.head.clone()
    }

    /// Chains `records` after the head and writes them in one durable
    /// transaction. Returns each record's sequence number and hash. On
    /// error nothing is written and the head is unchanged.
    ///
    /// With checkpoints ([`Log::with_checkpoints`]), when one is due a
    /// signed checkpoint record committing to the chain through the last
    /// of `records` follows them in the same transaction (its position is
    /// not among those returned; [`Log::head`] includes it).
    pub fn append(&mut self, records: &mut [Record]) -> Result<Vec<Head>, StoreError> {
        self.append_with(records, false)
    }

    fn append_with(
        &mut self,
        records: &mut [Record],
        force: bool,
    ) -> Result<Vec<Head>, StoreError> {
        let n = records.len() as u64;
        let due = self.checkpoints.as_ref().is_some_and(|c| c.due(n, force));
        if records.is_empty() && !due {
            return Ok(Vec::new());
        }
        let mut head = self.head.clone();
        let mut lines = Vec::with_capacity(records.len() + 1);
        let mut heads = Vec::with_capacity(records.len());
        for r in records.iter_mut() {
            r.seq = head.seq + 1;
            r.prev = head.hash.clone();
            let (line, hash) = chain_line(r)?;
            head = Head { seq: r.seq, hash };
            heads.push(head.clone());
            lines.push(line);
        }
        let mut checkpoint_line = None;
        if let (true, Some(c)) = (due, self.checkpoints.as_ref()) {
            let time_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            let signed = c.config.signer.sign(
                time_ms,
                vec![checkpoint::PartitionHead {
                    partition: checkpoint::LOG_PARTITION.into(),
                    seq: head.seq,
                    hash: head.hash.clone(),
                }],
            )?;
            let r = Record {
                seq: head.seq + 1,
                prev: head.hash.clone(),
                time_ms,
                kind: Kind::Checkpoint,
                checkpoint: Some(signed),
                ..Record::default()
            };
            let (line, hash) = chain_line(&r)?;
            head = Head { seq: r.seq, hash };
            checkpoint_line = Some(line.clone());
            lines.push(line);
        }
        self.backend.append(self.head.seq + 1, &lines, &head)?;
        self.head = head;
        if let Some(c) = self.checkpoints.as_mut() {
            if checkpoint_line.is_some() {
                c.since = 0;
                c.last = std::time::Instant::now();
                c.unwritten = checkpoint_line;
            } else {
                c.since += n;
            }
        }
        if self.committed.is_none() {
            // Not inside a transaction: durable now.
            self.write_out_checkpoint();
        }
        Ok(heads)
    }

    /// Calls `f` with every stored line from sequence number `from` on, in
    /// order, each after it checked: this is [`Log::read`] (the whole chain
    /// is read and checked from the first record, and the first record that
    /// does not check is an error; none after it is visited).
    pub fn scan(&self, from: u64, f: Visit<'_>) -> Result<(), StoreError> {
        self.read(from, f).map(|_| ())
    }

    /// Calls `f` with the records at sequence numbers `seqs` (ascending),
    /// in that order, reading only those where the backend can (the
    /// embedded store, the in-memory one): a session reloaded after
    /// eviction reads its own records, not the log. The chain is not
    /// checked again here (it was when the log was opened, and redb
    /// checksums its pages); a number with no record is an error.
    pub fn get(&self, seqs: &[u64], f: Visit<'_>) -> Result<(), StoreError> {
        self.backend.get(seqs, f)
    }

    /// Checks the whole chain, and that it ends at the stored head (this is
    /// [`Log::read`] visiting nothing). On a shared log, records appended
    /// after this log's head was read (by other replicas, meanwhile) are
    /// left for the next check.
    pub fn verify(&self) -> Result<Head, StoreError> {
        self.read(u64::MAX, &mut |_, _| Ok(()))
    }

    /// The one reader of the log, used by recovery and by `agenra audit
    /// verify` alike. Reads the records in key order from the first and
    /// checks each: that it is stored under the next key (1, 2, 3, …),
    /// that its own `seq` is that key, that its `prev` is the hash of the
    /// record before, and that its contents hash to the hash it claims.
    /// Only a record that checks is handed to `f` (when its key is `from`
    /// or later). The first record that does not check stops the read: the
    /// error names it and what disagreed, and no record is skipped.
    ///
    /// The chain must end at the stored head: a record past it, or a head
    /// that the chain does not reach, is an error. On a shared log the read
    /// ends at the head this log last saw (other replicas may have
    /// appended meanwhile: [`Log::begin`] catches up with those).
    ///
    /// Returns the head the chain ends at.
    pub fn read(&self, from: u64, f: Visit<'_>) -> Result<Head, StoreError> {
        self.read_checked(from, &mut |seq, line, _| f(seq, line))
    }

    /// [`Log::read`] from the first record, keeping each record's hash:
    /// [`Log::reread`] then reads some records again and refuses any whose
    /// bytes are not the ones this read checked. Recovery reads the log
    /// once this way (`docs/store.md`, "Recovery").
    ///
    /// Two threads share the work, in a pipeline that keeps the order:
    /// this one reads and checks the records (as [`Log::read`]), another
    /// calls `f` with each checked record, in order. The answer is the
    /// sequential one: `f` sees only checked records, and an error of `f`
    /// at a record comes before a check failing at a later one.
    pub fn read_noting(&self, f: SendVisit<'_>) -> Result<(Head, Noted), StoreError> {
        let mut noted = Noted::default();
        let check = reader::Check::new(&self.head, self.backend.shared(), 1);
        let (tx, rx) = std::sync::mpsc::sync_channel::<reader::Batch>(reader::IN_FLIGHT);
        let digests = &mut noted.digests;
        let (checked, read) = std::thread::scope(|scope| {
            let checking = scope.spawn(move || {
                reader::check(rx, check, &mut |seq, line, digest| {
                    digests.push(digest);
                    f(seq, line)
                })
            });
            let mut batch = reader::Batch::default();
            let read = self
                .backend
                .scan(1, &mut |key, line| reader::send(&tx, &mut batch, key, line));
            // What was read before a failure is checked first.
            let _ = tx.send(batch);
            drop(tx);
            let checked = checking
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (checked, read)
        });
        // A failure of the checking side comes first in key order; a
        // failed read is the answer when all it read checked.
        let head = match (checked, read) {
            (Err(e), _) | (Ok(_), Err(e)) => return Err(e),
            (Ok(check), Ok(())) => check.end()?,
        };
        Ok((head, noted))
    }

    /// Calls `f` with the records at `seqs` (ascending, each at most the
    /// head [`Log::read_noting`] returned), in that order, each after
    /// checking that its bytes hash to the hash that read checked: the
    /// chain is not read again, and a record changed since is an error
    /// naming it. Reads by key where the backend can, in batches (a
    /// backend without keyed reads scans once).
    pub fn reread(&self, noted: &Noted, seqs: &[u64], f: Visit<'_>) -> Result<(), StoreError> {
        let mut checked = |seq: u64, line: &[u8]| {
            noted.check(seq, line)?;
            f(seq, line)
        };
        if !self.backend.keyed_reads() {
            return self.backend.get(seqs, &mut checked);
        }
        for batch in seqs.chunks(REREAD_BATCH) {
            self.backend.get(batch, &mut checked)?;
        }
        Ok(())
    }

    fn read_checked(&self, from: u64, f: reader::Checked<'_>) -> Result<Head, StoreError> {
        let mut check = reader::Check::new(&self.head, self.backend.shared(), from);
        self.backend.scan(1, &mut |key, line| {
            let digest = record::line_digest(line).map(|(_, d)| d);
            check.record(key, line, digest, f)
        })?;
        check.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(reason: &str) -> Record {
        Record {
            kind: Kind::Event,
            reason: Some(reason.into()),
            ..Record::default()
        }
    }

    #[test]
    fn redb_log_survives_reopening_and_verifies() {
        let dir = std::env::temp_dir().join(format!("agenra-store-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        {
            let mut log = Log::open_redb(&dir).unwrap();
            log.append(&mut [event("a"), event("b")]).unwrap();
            log.append(&mut [event("c")]).unwrap();
        }
        let log = Log::open_redb(&dir).unwrap();
        assert_eq!(log.head().seq, 3);
        assert_eq!(log.verify().unwrap(), log.head());
        let mut seen = Vec::new();
        log.scan(2, &mut |seq, line| {
            let r: Record = serde_json::from_slice(line).unwrap();
            seen.push((seq, r.reason.unwrap()));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, vec![(2, "b".to_string()), (3, "c".to_string())]);
        drop(log);
        let _ = std::fs::remove_file(&dir);
    }

    /// The reasons of the records `log.get` reads at `seqs`.
    fn got(log: &Log, seqs: &[u64]) -> Result<Vec<(u64, String)>, StoreError> {
        let mut seen = Vec::new();
        log.get(seqs, &mut |seq, line| {
            let r: Record = serde_json::from_slice(line).unwrap();
            seen.push((seq, r.reason.unwrap()));
            Ok(())
        })?;
        Ok(seen)
    }

    #[test]
    fn get_reads_the_records_named_and_refuses_a_missing_one() {
        let path = std::env::temp_dir().join(format!("agenra-get-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let logs = [
            Log::open(Box::new(MemoryBackend::default())).unwrap(),
            Log::open_redb(&path).unwrap(),
        ];
        for mut log in logs {
            log.append(&mut [event("a"), event("b"), event("c"), event("d")])
                .unwrap();
            let want = vec![(1, "a".to_string()), (3, "c".to_string()), (4, "d".into())];
            assert_eq!(got(&log, &[1, 3, 4]).unwrap(), want);
            assert_eq!(got(&log, &[]).unwrap(), vec![]);
            for bad in [vec![2, 5], vec![0]] {
                let e = got(&log, &bad).unwrap_err().to_string();
                assert!(e.contains("not in the log"), "{bad:?}: {e}");
            }
        }
        let _ = std::fs::remove_file(&path);
    }

    /// A backend with no keyed read: the default `get` (a scan).
    struct ScanOnly(MemoryBackend);

    impl Backend for ScanOnly {
        fn append(&mut self, first: u64, lines: &[Vec<u8>], head: &Head) -> Result<(), StoreError> {
            self.0.append(first, lines, head)
        }
        fn scan(&self, from: u64, f: Visit<'_>) -> Result<(), StoreError> {
            self.0.scan(from, f)
        }
        fn head(&self) -> Result<Head, StoreError> {
            self.0.head()
        }
    }

    #[test]
    fn the_default_get_scans_from_the_first_number() {
        let mut log = Log::open(Box::new(ScanOnly(MemoryBackend::default()))).unwrap();
        log.append(&mut [event("a"), event("b"), event("c")])
            .unwrap();
        assert_eq!(
            got(&log, &[2, 3]).unwrap(),
            vec![(2, "b".to_string()), (3, "c".to_string())]
        );
        let e = got(&log, &[3, 7]).unwrap_err().to_string();
        assert!(e.contains("record 7") || e.contains("7"), "{e}");
    }

    /// A memory log of `n` records (big enough for several batches of the
    /// pipeline) whose record `changed` (if any) has other bytes.
    fn log_of(n: u64, changed: Option<u64>) -> Log {
        let mut log = Log::open(Box::new(MemoryBackend::default())).unwrap();
        let pad = "x".repeat(500);
        let mut records: Vec<Record> = (0..n).map(|i| event(&format!("{i} {pad}"))).collect();
        let heads = log.append(&mut records).unwrap();
        let mut backend = MemoryBackend::default();
        let mut lines = vec![];
        log.scan(1, &mut |seq, line| {
            let mut line = line.to_vec();
            if Some(seq) == changed {
                line = String::from_utf8(line)
                    .unwrap()
                    .replace(" x", " y")
                    .into_bytes();
            }
            lines.push(line);
            Ok(())
        })
        .unwrap();
        backend.append(1, &lines, &heads[heads.len() - 1]).unwrap();
        Log::open(Box::new(backend)).unwrap()
    }

    #[test]
    fn the_pipelined_read_answers_as_the_sequential_one() {
        let n = 5000;
        let intact = log_of(n, None);
        let mut seen = vec![];
        let (head, noted) = intact
            .read_noting(&mut |seq, _| {
                seen.push(seq);
                Ok(())
            })
            .unwrap();
        assert_eq!(head, intact.verify().unwrap());
        assert_eq!(seen, (1..=n).collect::<Vec<_>>());
        // Read again by number: each must be the record checked.
        let mut again = vec![];
        intact
            .reread(&noted, &[2, 4000], &mut |seq, _| {
                again.push(seq);
                Ok(())
            })
            .unwrap();
        assert_eq!(again, vec![2, 4000]);
        let other = log_of(n, Some(4000));
        let e = other
            .reread(&noted, &[4000], &mut |_, _| Ok(()))
            .unwrap_err();
        assert!(
            e.to_string().contains("audit record 4000: it changed"),
            "{e}"
        );

        // A changed record: the same error as the sequential read, and
        // nothing from it on is visited.
        let broken = log_of(n, Some(3001));
        let sequential = broken.verify().unwrap_err().to_string();
        let mut last = 0;
        let e = broken
            .read_noting(&mut |seq, _| {
                last = seq;
                Ok(())
            })
            .err()
            .unwrap();
        assert_eq!(e.to_string(), sequential);
        assert!(sequential.contains("audit record 3001"), "{sequential}");
        assert_eq!(last, 3000);
        // The visitor failing first is the answer.
        let e = broken
            .read_noting(&mut |seq, _| match seq {
                17 => Err(StoreError::Stopped("seventeen".into())),
                _ => Ok(()),
            })
            .err()
            .unwrap();
        assert!(e.to_string().contains("seventeen"), "{e}");
    }

    #[test]
    fn a_head_that_does_not_match_the_chain_fails_verification() {
        let mut backend = MemoryBackend::default();
        let mut log = Log::open(Box::new(MemoryBackend::default())).unwrap();
        let heads = log.append(&mut [event("a"), event("b")]).unwrap();
        // Copy only the first line into a backend whose head claims two.
        log.scan(1, &mut |seq, line| {
            if seq == 1 {
                backend.append(1, &[line.to_vec()], &heads[1]).unwrap();
            }
            Ok(())
        })
        .unwrap();
        let truncated = Log::open(Box::new(backend)).unwrap();
        let e = truncated.verify().unwrap_err();
        assert!(e.to_string().contains("head says 2 records"), "{e}");
    }
}
