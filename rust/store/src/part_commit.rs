//! Group commit on a log partitioned by session ([`crate::parts`]).
//!
//! Like [`crate::Committer`] on a shared log, one writer thread turns each
//! batch of queued decisions into one transaction: it locks the head rows
//! of the partitions the batch names (only those), applies what other
//! processes appended to them, runs each decision, appends the records to
//! their partitions and commits; only then are the submitters called back.

use crate::checkpoint::LOG_PARTITION;
use crate::commit::{refuse_batch, CommitStats, Counters, Done};
use crate::parts::PartLog;
use crate::{Record, StoreError};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

/// Decides, on the writer thread inside the transaction (after catching
/// up), what to append: the record with its partition (which the job
/// named) or nothing, and the callback for when it is durable.
pub type PartDecide = Box<dyn FnOnce() -> (Option<(String, Record)>, Done) + Send>;

/// Applies a record another process appended (partition, seq, line).
pub type PartCatchUp = Box<dyn FnMut(&str, u64, &[u8]) -> Result<(), StoreError> + Send>;

struct Job {
    parts: Vec<String>,
    read_log: bool,
    decide: PartDecide,
    refused: Done,
}

/// The single writer of a [`PartLog`] (see the module docs). After a
/// transaction fails once it has decided, the writer stops, as
/// [`crate::Committer`] does: the caller's memory may be ahead of the log.
pub struct PartCommitter {
    tx: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    counters: Arc<Counters>,
}

impl PartCommitter {
    /// Starts the writer on `log`: at most `max_batch` jobs per
    /// transaction; `catch_up` applies what others appended; with
    /// `checkpoint_every` (and a signer on `log`) a signed checkpoint
    /// follows the batch that reaches that many records since the last.
    pub fn start(
        log: PartLog,
        max_batch: usize,
        catch_up: PartCatchUp,
        checkpoint_every: Option<u64>,
    ) -> PartCommitter {
        let (tx, rx) = mpsc::channel::<Job>();
        let counters = Arc::new(Counters::default());
        let c = Arc::clone(&counters);
        let thread = std::thread::Builder::new()
            .name("agenra-store-writer".into())
            .spawn(move || writer(log, rx, max_batch.max(1), &c, catch_up, checkpoint_every))
            .ok();
        PartCommitter {
            tx: Some(tx),
            thread,
            counters,
        }
    }

    /// Queues a decision to take inside the next transaction, which locks
    /// `parts` (and, with `read_log`, first reads what `log` gained: the
    /// policy a new session gets); `refused` is called instead when that
    /// transaction cannot begin (nothing was decided).
    pub fn decide(&self, parts: Vec<String>, read_log: bool, decide: PartDecide, refused: Done) {
        let job = Job {
            parts,
            read_log,
            decide,
            refused,
        };
        let unsent = match &self.tx {
            Some(tx) => tx.send(job).err().map(|e| e.0),
            None => Some(job),
        };
        if let Some(job) = unsent {
            (job.refused)(Err(StoreError::Stopped("the writer thread is gone".into())));
        }
    }

    /// Transactions and records written so far.
    pub fn stats(&self) -> CommitStats {
        self.counters.stats()
    }

    fn stop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for PartCommitter {
    fn drop(&mut self) {
        self.stop();
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn writer(
    mut log: PartLog,
    rx: mpsc::Receiver<Job>,
    max_batch: usize,
    counters: &Counters,
    mut catch_up: PartCatchUp,
    checkpoint_every: Option<u64>,
) {
    let mut stopped: Option<String> = None;
    let mut since: u64 = 0;
    let mut jobs: Vec<Job> = Vec::with_capacity(max_batch);
    while let Ok(first) = rx.recv() {
        jobs.push(first);
        while jobs.len() < max_batch {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        if let Some(why) = &stopped {
            for job in jobs.drain(..) {
                (job.refused)(Err(StoreError::Stopped(why.clone())));
            }
            continue;
        }
        let mut parts: Vec<String> = jobs.iter().flat_map(|j| j.parts.clone()).collect();
        // A checkpoint may follow this batch: it goes in `log`.
        let checkpointing = checkpoint_every.is_some_and(|n| since + jobs.len() as u64 >= n);
        if checkpointing {
            parts.push(LOG_PARTITION.to_string());
        }
        let read_log = jobs.iter().any(|j| j.read_log);
        let begun = log.begin(&parts, read_log, &mut |p, seq, line| {
            counters.caught_up.fetch_add(1, Ordering::Relaxed);
            catch_up(p, seq, line)
        });
        counters.waited(log.lock_wait(), jobs.len());
        if let Err(e) = begun {
            stopped = refuse_batch(e, &mut jobs, |job, e| (job.refused)(Err(e)));
            continue;
        }
        let mut records = Vec::with_capacity(jobs.len());
        let mut dones: Vec<(Done, bool)> = Vec::with_capacity(jobs.len());
        for job in jobs.drain(..) {
            let (record, done) = (job.decide)();
            dones.push((done, record.is_some()));
            if let Some(r) = record {
                records.push(r);
            }
        }
        let mut appended = if records.is_empty() {
            Ok(Vec::new())
        } else {
            log.append(&mut records)
        };
        let n = records.len() as u64;
        if let (Ok(_), true) = (
            &appended,
            checkpointing && since + n >= checkpoint_every.unwrap_or(0),
        ) {
            if let Err(e) = log.checkpoint(now_ms()) {
                appended = Err(e);
            }
        }
        let appended = appended.and_then(|heads| log.commit().map(|()| heads));
        match appended {
            Ok(heads) => {
                if !heads.is_empty() {
                    counters.commits.fetch_add(1, Ordering::Relaxed);
                    counters.records.fetch_add(n, Ordering::Relaxed);
                    since += n;
                }
                if checkpointing && checkpoint_every.is_some_and(|e| since >= e) {
                    since = 0;
                }
                let mut heads = heads.into_iter();
                let mut at = None;
                for (done, has_record) in dones.drain(..) {
                    if has_record {
                        at = heads.next();
                    }
                    done(Ok(at.clone().unwrap_or_default()));
                }
            }
            Err(e) => {
                log.rollback();
                let why = e.to_string();
                for (done, _) in dones.drain(..) {
                    done(Err(StoreError::Stopped(why.clone())));
                }
                stopped = Some(why);
            }
        }
    }
}
