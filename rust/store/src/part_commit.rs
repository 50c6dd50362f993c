//! Group commit on a log partitioned by session ([`crate::parts`]).
//!
//! Like [`crate::Committer`] on a shared log, one writer thread turns each
//! batch of queued decisions into one transaction: it locks the head rows
//! of the partitions the batch names (only those), applies what other
//! processes appended to them, runs each decision, appends the records to
//! their partitions and commits; only then are the submitters called back.

use crate::checkpoint::LOG_PARTITION;
use crate::commit::{idle_stop, next_job, refuse_batch, CommitStats, Counters, Done, Next};
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
    /// transaction; `catch_up` applies what others appended. With
    /// checkpoints on `log` ([`PartLog::with_checkpoints`]) a signed
    /// checkpoint follows the batch that makes one due (by records), is
    /// written in a transaction of its own when one falls due while the
    /// writer is idle (by time), and once more when the writer stops if
    /// anything was appended since the last.
    pub fn start(log: PartLog, max_batch: usize, catch_up: PartCatchUp) -> PartCommitter {
        let (tx, rx) = mpsc::channel::<Job>();
        let counters = Arc::new(Counters::default());
        let c = Arc::clone(&counters);
        let thread = std::thread::Builder::new()
            .name("agenra-store-writer".into())
            .spawn(move || writer(log, rx, max_batch.max(1), &c, catch_up))
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
) {
    let mut stopped: Option<String> = None;
    let mut jobs: Vec<Job> = Vec::with_capacity(max_batch);
    loop {
        let first = match next_job(&rx, log.checkpoint_tick()) {
            Next::Job(job) => job,
            Next::Closed => break,
            Next::Idle => {
                // Quiet: sign what was appended since the last checkpoint.
                if stopped.is_none() && log.checkpoint_due(0, false) {
                    stopped = idle_stop(idle_checkpoint(&mut log, counters, &mut catch_up));
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
                (job.refused)(Err(StoreError::Stopped(why.clone())));
            }
            continue;
        }
        let mut parts: Vec<String> = jobs.iter().flat_map(|j| j.parts.clone()).collect();
        // A checkpoint may follow this batch (at most one record a job):
        // it goes in `log`, whose head it then holds too.
        let checkpointing = log.checkpoint_due(jobs.len() as u64, false);
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
        if let (Ok(_), true) = (&appended, checkpointing && log.checkpoint_due(0, false)) {
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
    // Stopping: sign what this process appended since the last checkpoint,
    // so that the last checkpoint covers every head it moved.
    if stopped.is_none() && log.checkpoint_due(0, true) {
        if let Err(e) = idle_checkpoint(&mut log, counters, &mut catch_up) {
            eprintln!("agenra: the last checkpoint could not be written: {e}");
        }
    }
}

/// Appends a checkpoint with no other record, in a transaction of its own
/// that locks only `log` (after catching up on it).
fn idle_checkpoint(
    log: &mut PartLog,
    counters: &Counters,
    catch_up: &mut PartCatchUp,
) -> Result<(), StoreError> {
    log.begin(&[LOG_PARTITION.to_string()], true, &mut |p, seq, line| {
        counters.caught_up.fetch_add(1, Ordering::Relaxed);
        catch_up(p, seq, line)
    })?;
    let done = log.checkpoint(now_ms()).and_then(|_| log.commit());
    if done.is_err() {
        log.rollback();
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::{CheckpointSigner, Checkpoints, Every, PublicKey};
    use crate::parts::{session_partition, MemoryParts};
    use crate::Kind;
    use std::time::Duration;

    fn key() -> CheckpointSigner {
        CheckpointSigner::from_seed([9; 32])
    }

    fn committer(store: &MemoryParts, every: Every) -> PartCommitter {
        let log = PartLog::open(Box::new(store.clone())).with_checkpoints(Checkpoints {
            signer: key(),
            every,
            out: None,
        });
        PartCommitter::start(log, 16, Box::new(|_, _, _| Ok(())))
    }

    /// Decides one event of session `s` and waits until it is durable.
    fn decide(c: &PartCommitter, s: &str) {
        let part = session_partition("acme", s);
        let (tx, rx) = mpsc::channel();
        let tx2 = tx.clone();
        let record = Record {
            kind: Kind::Event,
            tenant: Some("acme".into()),
            session: Some(s.into()),
            ..Record::default()
        };
        c.decide(
            vec![part.clone()],
            false,
            Box::new(move || {
                let done: Done = Box::new(move |r| {
                    let _ = tx.send(r.is_ok());
                });
                (Some((part, record)), done)
            }),
            Box::new(move |r| {
                let _ = tx2.send(r.is_ok());
            }),
        );
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(true));
    }

    /// The checkpoints in `log`, each signature checked.
    fn checkpoints(store: &MemoryParts) -> u64 {
        let public = PublicKey::parse(&key().public_key()).unwrap();
        PartLog::open(Box::new(store.clone()))
            .verify_checkpoints(Some(&public), None)
            .map_or(0, |s| s.checkpoints)
    }

    #[test]
    fn an_idle_writer_signs_by_time_and_only_when_something_was_appended() {
        let store = MemoryParts::default();
        let c = committer(&store, Every::Time(Duration::from_millis(50)));
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(checkpoints(&store), 0, "nothing appended, nothing signed");
        decide(&c, "a");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while checkpoints(&store) == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(checkpoints(&store), 1);
        // Quiet again: no second checkpoint over the same heads.
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(checkpoints(&store), 1);
        drop(c);
        assert_eq!(checkpoints(&store), 1, "stopping adds none: nothing since");
    }

    #[test]
    fn a_stopping_writer_signs_what_it_appended_since_the_last_checkpoint() {
        let store = MemoryParts::default();
        let c = committer(&store, Every::Records(3));
        decide(&c, "a");
        decide(&c, "b");
        assert_eq!(checkpoints(&store), 0);
        decide(&c, "a");
        assert_eq!(checkpoints(&store), 1, "the batch that reaches 3 records");
        decide(&c, "b");
        drop(c);
        assert_eq!(
            checkpoints(&store),
            2,
            "the last one, when the writer stops"
        );
    }
}
