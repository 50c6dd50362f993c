//! The one reader's checks ([`crate::Log::read`]), and the pipeline of
//! [`crate::Log::read_noting`]: the calling thread reads the store and
//! hashes each line (which needs nothing but the line), a second thread
//! checks each record in order against the one before (key, `seq`,
//! `prev`, the hash it claims) and only then visits it.

use crate::record::{self, Verifier};
use crate::{Head, StoreError, VerifyError};
use std::sync::mpsc::{Receiver, SyncSender};

/// What the reader checks record by record, and at the end.
pub(crate) struct Check<'a> {
    /// The head the log read when opened (the chain must end there).
    head: &'a Head,
    /// A shared log's chain may go on past `head` (other replicas).
    shared: bool,
    /// Records before `from` are checked but not visited.
    from: u64,
    state: Verifier,
    ended: bool,
}

/// Visits a checked record with its hash's bytes.
pub(crate) type Checked<'f> = &'f mut dyn FnMut(u64, &[u8], [u8; 32]) -> Result<(), StoreError>;

impl<'a> Check<'a> {
    pub(crate) fn new(head: &'a Head, shared: bool, from: u64) -> Check<'a> {
        Check {
            head,
            shared,
            from,
            state: Verifier::default(),
            ended: false,
        }
    }

    /// Checks the line stored under `key` (`digest`: its bytes' hash, as
    /// [`record::line_digest`] gives it), then visits it with `f`.
    pub(crate) fn record(
        &mut self,
        key: u64,
        line: &[u8],
        digest: Option<[u8; 32]>,
        f: Checked<'_>,
    ) -> Result<(), StoreError> {
        if self.ended {
            return Ok(());
        }
        let limit = self.head.seq;
        if self.shared && key > limit && key == self.state.next_seq() {
            // Appended by another replica since this log's head was read.
            self.ended = true;
            return Ok(());
        }
        let digest = self.state.push_digested(key, line, digest)?;
        if key > limit {
            return Err(VerifyError {
                seq: key,
                reason: format!(
                    "it is past the store's head, which says {} records ending in {}",
                    self.head.seq, self.head.hash
                ),
            }
            .into());
        }
        if key >= self.from {
            f(key, line, digest)?;
        }
        Ok(())
    }

    /// The head the chain ends at, which must be the stored one.
    pub(crate) fn end(self) -> Result<Head, StoreError> {
        let got = self.state.head();
        if got != *self.head {
            return Err(VerifyError {
                seq: got.seq + 1,
                reason: format!(
                    "the store's head says {} records ending in {}, the chain has {} ending in {}",
                    self.head.seq, self.head.hash, got.seq, got.hash
                ),
            }
            .into());
        }
        Ok(got)
    }
}

/// Bytes of lines per batch (a batch is one copy, not one per line).
const BATCH_BYTES: usize = 1 << 20;

/// Batches read ahead of the checking thread at most.
pub(crate) const IN_FLIGHT: usize = 4;

/// Lines read, in key order: their keys, bytes and hashes.
#[derive(Default)]
pub(crate) struct Batch {
    bytes: Vec<u8>,
    /// Each line's key, where it ends in `bytes`, and its bytes' hash.
    ends: Vec<(u64, usize, Option<[u8; 32]>)>,
}

impl Batch {
    /// Adds the line stored under `key`, hashing it.
    fn push(&mut self, key: u64, line: &[u8]) {
        if self.bytes.capacity() == 0 {
            self.bytes.reserve(BATCH_BYTES + line.len());
        }
        self.bytes.extend_from_slice(line);
        let digest = record::line_digest(line).map(|(_, d)| d);
        self.ends.push((key, self.bytes.len(), digest));
    }
}

/// The reading side: adds each line to the batch, sending it when full.
/// Fails (to stop the scan) once the checking side has stopped.
pub(crate) fn send(
    tx: &SyncSender<Batch>,
    batch: &mut Batch,
    key: u64,
    line: &[u8],
) -> Result<(), StoreError> {
    batch.push(key, line);
    if batch.bytes.len() >= BATCH_BYTES && tx.send(std::mem::take(batch)).is_err() {
        return Err(StoreError::Stopped("the checking thread stopped".into()));
    }
    Ok(())
}

/// The checking side: checks and visits every line the batches bring, in
/// order, until they end or a check or `f` fails (the first failure in
/// key order, as a sequential read would give). The check at the end
/// ([`Check::end`]) is the caller's, once it knows the read did not fail.
pub(crate) fn check<'a>(
    rx: Receiver<Batch>,
    mut check: Check<'a>,
    f: Checked<'_>,
) -> Result<Check<'a>, StoreError> {
    for batch in rx {
        let mut start = 0;
        for &(key, end, digest) in &batch.ends {
            check.record(key, &batch.bytes[start..end], digest, f)?;
            start = end;
        }
    }
    Ok(check)
}
