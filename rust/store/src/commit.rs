//! Group commit: one writer thread, one transaction per batch.

use crate::{Head, Log, Record, StoreError};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

/// Called once a submitted record is durable (with its position), or when
/// it could not be written (nothing of its batch was).
pub type Done = Box<dyn FnOnce(Result<Head, StoreError>) + Send>;

/// Decides, on the writer thread inside the write transaction (on a shared
/// log: after catching up on what other replicas appended), what to
/// append: the record (`None`: nothing) and the callback to call once it is
/// durable (or the transaction failed).
pub type Decide = Box<dyn FnOnce() -> (Option<Record>, Done) + Send>;

/// Applies a record another replica appended (its sequence number and
/// stored line) to this process's state, exactly as recovery would; an
/// error means this process can no longer follow the log.
pub type CatchUp = Box<dyn FnMut(u64, &[u8]) -> Result<(), StoreError> + Send>;

/// Reads the log on the writer thread, once every record submitted before
/// it is durable (see [`LogReader`]).
pub type ReadLog = Box<dyn FnOnce(&Log) + Send>;

struct Job {
    /// `None`: a barrier, answered once everything submitted before it is
    /// durable.
    record: Option<Record>,
    /// A read, run after the batch's commit (then `record` and `decide`
    /// are `None` and `done` does nothing).
    read: Option<ReadLog>,
    /// Decides the record inside the transaction (replacing `record` and
    /// `done`); `done` is then only called if the transaction cannot begin.
    decide: Option<Decide>,
    done: Done,
}

/// Counters of a [`Committer`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommitStats {
    /// Transactions committed (one fsync each).
    pub commits: u64,
    /// Records written.
    pub records: u64,
    /// Records other replicas appended that this one applied (shared logs).
    pub caught_up: u64,
    /// Time spent waiting for the log's head lock, summed over the jobs
    /// (decisions) of each transaction (nanoseconds; zero on the embedded
    /// store, whose one writer holds the file).
    pub lock_wait_ns: u64,
    /// Jobs (decisions, barriers) that went through a transaction.
    pub jobs: u64,
}

/// What a writer counts ([`Committer`] and the partitioned log's
/// [`crate::PartCommitter`] alike).
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) commits: AtomicU64,
    pub(crate) records: AtomicU64,
    pub(crate) caught_up: AtomicU64,
    lock_wait_ns: AtomicU64,
    jobs: AtomicU64,
}

impl Counters {
    pub(crate) fn stats(&self) -> CommitStats {
        CommitStats {
            commits: self.commits.load(Ordering::Relaxed),
            records: self.records.load(Ordering::Relaxed),
            caught_up: self.caught_up.load(Ordering::Relaxed),
            lock_wait_ns: self.lock_wait_ns.load(Ordering::Relaxed),
            jobs: self.jobs.load(Ordering::Relaxed),
        }
    }

    /// Every one of a transaction's `jobs` waited `waited` for the locks
    /// it took.
    pub(crate) fn waited(&self, waited: std::time::Duration, jobs: usize) {
        let ns = u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX);
        self.lock_wait_ns
            .fetch_add(ns.saturating_mul(jobs as u64), Ordering::Relaxed);
        self.jobs.fetch_add(jobs as u64, Ordering::Relaxed);
    }
}

/// The log's single writer. Records are appended in the order they are
/// submitted; every record submitted while a transaction is being written
/// goes into the next one, so concurrent submitters share one fsync. A
/// submitter is called back only after the transaction holding its record
/// has committed.
///
/// After a failed transaction the writer stops: that batch and every later
/// submission are answered with [`StoreError::Stopped`], since the caller's
/// in-memory state may now be ahead of the log (restarting recovers the
/// state from the log).
pub struct Committer {
    tx: Option<mpsc::Sender<Job>>,
    /// The sender [`LogReader`]s use, dropped when the writer stops (a
    /// reader must not keep the writer's queue open).
    reads: Arc<std::sync::Mutex<Option<mpsc::Sender<Job>>>>,
    thread: Option<JoinHandle<()>>,
    counters: Arc<Counters>,
}

impl Committer {
    /// Starts the writer thread on `log`; at most `max_batch` records go
    /// into one transaction.
    pub fn start(log: Log, max_batch: usize) -> Committer {
        Committer::start_with(log, max_batch, None)
    }

    /// Starts the writer thread on a log that other replicas share:
    /// each transaction first locks the log's head and hands every record
    /// appended by others since to `catch_up`, in order, before anything
    /// queued is decided or written.
    pub fn start_shared(log: Log, max_batch: usize, catch_up: CatchUp) -> Committer {
        Committer::start_with(log, max_batch, Some(catch_up))
    }

    fn start_with(log: Log, max_batch: usize, catch_up: Option<CatchUp>) -> Committer {
        let (tx, rx) = mpsc::channel::<Job>();
        let counters = Arc::new(Counters::default());
        let c = Arc::clone(&counters);
        let thread = std::thread::Builder::new()
            .name("agenra-store-writer".into())
            .spawn(move || writer(log, rx, max_batch.max(1), &c, catch_up))
            .ok();
        Committer {
            reads: Arc::new(std::sync::Mutex::new(Some(tx.clone()))),
            tx: Some(tx),
            thread,
            counters,
        }
    }

    /// A handle that reads the log on the writer thread (see
    /// [`LogReader::read`]).
    pub fn reader(&self) -> LogReader {
        LogReader {
            tx: Arc::clone(&self.reads),
        }
    }

    /// Queues `record`; `done` is called when it is durable.
    pub fn submit(&self, record: Record, done: Done) {
        self.send(Job {
            record: Some(record),
            read: None,
            decide: None,
            done,
        });
    }

    /// Queues a decision to be taken inside the next transaction (after
    /// the catch-up, on a shared log); `refused` is called instead when
    /// that transaction cannot begin (nothing was decided).
    pub fn decide(&self, decide: Decide, refused: Done) {
        self.send(Job {
            record: None,
            read: None,
            decide: Some(decide),
            done: refused,
        });
    }

    /// `done` is called once every record submitted before is durable
    /// (with the log's head then).
    pub fn barrier(&self, done: Done) {
        self.send(Job {
            record: None,
            read: None,
            decide: None,
            done,
        });
    }

    fn send(&self, job: Job) {
        let unsent = match &self.tx {
            Some(tx) => tx.send(job).err().map(|e| e.0),
            None => Some(job),
        };
        if let Some(job) = unsent {
            (job.done)(Err(StoreError::Stopped("the writer thread is gone".into())));
        }
    }

    /// Queues `record` and waits until it is durable (for callers outside
    /// an async runtime).
    pub fn submit_wait(&self, record: Record) -> Result<Head, StoreError> {
        let (tx, rx) = mpsc::channel();
        self.submit(
            record,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        rx.recv()
            .unwrap_or_else(|_| Err(StoreError::Stopped("the writer thread is gone".into())))
    }

    /// Transactions and records written so far.
    pub fn stats(&self) -> CommitStats {
        self.counters.stats()
    }

    /// Writes what is queued and stops the writer.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Ok(mut reads) = self.reads.lock() {
            *reads = None;
        }
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads the log on the writer thread of a [`Committer`] (which owns it).
#[derive(Clone)]
pub struct LogReader {
    tx: Arc<std::sync::Mutex<Option<mpsc::Sender<Job>>>>,
}

impl LogReader {
    /// Runs `read` on the writer thread once every record submitted before
    /// this call is durable (and its `done` called). Returns false when
    /// the writer is gone (`read` is then dropped, never run); a writer
    /// that failed drops it too.
    pub fn read(&self, read: ReadLog) -> bool {
        let Ok(tx) = self.tx.lock() else {
            return false;
        };
        let Some(tx) = tx.as_ref() else {
            return false;
        };
        tx.send(Job {
            record: None,
            read: Some(read),
            decide: None,
            done: Box::new(|_| {}),
        })
        .is_ok()
    }
}

impl Drop for Committer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn writer(
    mut log: Log,
    rx: mpsc::Receiver<Job>,
    max_batch: usize,
    counters: &Counters,
    mut catch_up: Option<CatchUp>,
) {
    let mut stopped: Option<String> = None;
    let mut jobs: Vec<Job> = Vec::with_capacity(max_batch);
    let mut records = Vec::with_capacity(max_batch);
    // Each callback, and whether its job carried a record.
    let mut dones: Vec<(Done, bool)> = Vec::with_capacity(max_batch);
    let mut reads: Vec<ReadLog> = Vec::new();
    loop {
        let first = match next_job(&rx, log.checkpoint_tick()) {
            Next::Job(job) => job,
            Next::Closed => break,
            Next::Idle => {
                // Quiet: sign what was appended since the last checkpoint.
                if stopped.is_none() && log.checkpoint_due(false) {
                    stopped = idle_stop(idle_checkpoint(&mut log, &mut catch_up, false));
                }
                continue;
            }
        };
        jobs.push(first);
        while jobs.len() < max_batch {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        if let Some(why) = &stopped {
            for job in jobs.drain(..) {
                (job.done)(Err(StoreError::Stopped(why.clone())));
            }
            continue;
        }
        // A shared log: lock its head and apply what others appended.
        let before = log.head().seq;
        let begun = log.begin(&mut |seq, line| match catch_up.as_mut() {
            Some(f) => f(seq, line),
            None => Err(StoreError::Diverged {
                seq,
                reason: "another process appended to the log, and this one cannot follow it".into(),
            }),
        });
        counters
            .caught_up
            .fetch_add(log.head().seq.saturating_sub(before), Ordering::Relaxed);
        // Every job of the batch waited for the lock this transaction took.
        counters.waited(log.lock_wait(), jobs.len());
        if let Err(e) = begun {
            stopped = refuse_batch(e, &mut jobs, |job, e| (job.done)(Err(e)));
            continue;
        }
        for job in jobs.drain(..) {
            if let Some(read) = job.read {
                reads.push(read);
                continue;
            }
            let (record, done) = match job.decide {
                Some(decide) => decide(),
                None => (job.record, job.done),
            };
            dones.push((done, record.is_some()));
            if let Some(r) = record {
                records.push(r);
            }
        }
        let appended = if records.is_empty() {
            Ok(Vec::new())
        } else {
            log.append(&mut records)
        };
        let appended = appended.and_then(|heads| log.commit().map(|()| heads));
        match appended {
            Ok(heads) => {
                if !heads.is_empty() {
                    counters.commits.fetch_add(1, Ordering::Relaxed);
                    counters
                        .records
                        .fetch_add(heads.len() as u64, Ordering::Relaxed);
                }
                let mut heads = heads.into_iter();
                let last = log.head();
                // A barrier after a record gets that record's head, which
                // is what was durable when it was submitted.
                let mut at = None;
                for (done, has_record) in dones.drain(..) {
                    if has_record {
                        at = heads.next();
                    }
                    let head = at.clone().unwrap_or_else(|| last.clone());
                    done(Ok(head));
                }
                // After the commit: a read sees every record submitted
                // before it.
                for read in reads.drain(..) {
                    read(&log);
                }
            }
            Err(e) => {
                log.rollback();
                reads.clear();
                let why = e.to_string();
                for (done, _) in dones.drain(..) {
                    done(Err(StoreError::Stopped(why.clone())));
                }
                stopped = Some(why);
            }
        }
        records.clear();
    }
    // Stopping: sign what was appended since the last checkpoint, so the
    // kept checkpoint covers the whole log.
    if stopped.is_none() && log.checkpoint_due(true) {
        if let Err(e) = idle_checkpoint(&mut log, &mut catch_up, true) {
            eprintln!("agenra: the last checkpoint could not be written: {e}");
        }
    }
}

/// What a writer waits for: a job, or (with checkpoints by time) a tick
/// that passed with none, or the end (every sender gone).
pub(crate) enum Next<J> {
    Job(J),
    Idle,
    Closed,
}

/// Waits for the next job, at most `tick` when there is one.
pub(crate) fn next_job<J>(rx: &mpsc::Receiver<J>, tick: Option<std::time::Duration>) -> Next<J> {
    let got = match tick {
        None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
        Some(tick) => rx.recv_timeout(tick),
    };
    match got {
        Ok(job) => Next::Job(job),
        Err(mpsc::RecvTimeoutError::Timeout) => Next::Idle,
        Err(mpsc::RecvTimeoutError::Disconnected) => Next::Closed,
    }
}

/// Whether a failed idle checkpoint stops the writer: a store not
/// reachable now is tried again at the next tick; anything else stops it.
pub(crate) fn idle_stop(done: Result<(), StoreError>) -> Option<String> {
    match done {
        Ok(()) | Err(StoreError::Unavailable(_)) => None,
        Err(e) => Some(e.to_string()),
    }
}

/// Appends a checkpoint with no other record, in its own transaction (on a
/// shared log: after catching up).
fn idle_checkpoint(
    log: &mut Log,
    catch_up: &mut Option<CatchUp>,
    force: bool,
) -> Result<(), StoreError> {
    log.begin(&mut |seq, line| match catch_up.as_mut() {
        Some(f) => f(seq, line),
        None => Err(StoreError::Diverged {
            seq,
            reason: "another process appended to the log, and this one cannot follow it".into(),
        }),
    })?;
    let done = log.checkpoint(force).and_then(|_| log.commit());
    if done.is_err() {
        log.rollback();
    }
    done
}

/// Refuses every job of a batch whose transaction could not begin, and
/// says whether the writer stops: an unavailable store (`Unavailable`)
/// decided nothing, so only this batch is refused and the writer goes on
/// (`None`); any other error stops the writer (`Some(reason)`), and each
/// job gets `Stopped` with that reason. Shared by both writers.
pub(crate) fn refuse_batch<J>(
    e: StoreError,
    jobs: &mut Vec<J>,
    mut refuse: impl FnMut(J, StoreError),
) -> Option<String> {
    let (unavailable, why) = match e {
        StoreError::Unavailable(why) => (true, why),
        e => (false, e.to_string()),
    };
    for job in jobs.drain(..) {
        let e = if unavailable {
            StoreError::Unavailable(why.clone())
        } else {
            StoreError::Stopped(why.clone())
        };
        refuse(job, e);
    }
    (!unavailable).then_some(why)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Kind, MemoryBackend};

    #[test]
    fn concurrent_submitters_are_chained_in_submission_order() {
        let log = Log::open(Box::new(MemoryBackend::default())).unwrap();
        let c = Arc::new(Committer::start(log, 64));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let c = Arc::clone(&c);
                std::thread::spawn(move || {
                    let mut last = 0;
                    for i in 0..50 {
                        let r = Record {
                            kind: Kind::Event,
                            reason: Some(format!("{t}-{i}")),
                            ..Record::default()
                        };
                        let head = c.submit_wait(r).unwrap();
                        assert!(head.seq > last);
                        last = head.seq;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = c.stats();
        assert_eq!(s.records, 200);
        assert!(s.commits >= 1 && s.commits <= 200);
    }

    #[test]
    fn a_read_sees_every_record_submitted_before_it() {
        let log = Log::open(Box::new(MemoryBackend::default())).unwrap();
        let c = Committer::start(log, 64);
        let reader = c.reader();
        for i in 0..100u64 {
            // Not waited for: the read must still come after it.
            let r = Record {
                kind: Kind::Event,
                reason: Some(i.to_string()),
                ..Record::default()
            };
            c.submit(r, Box::new(|_| {}));
            let (tx, rx) = mpsc::channel();
            assert!(reader.read(Box::new(move |log| {
                let _ = tx.send(log.head().seq);
            })));
            assert_eq!(rx.recv().unwrap(), i + 1);
        }
        c.shutdown();
        // The writer is gone: a read is refused, never left waiting.
        assert!(!reader.read(Box::new(|_| {})));
    }
}
