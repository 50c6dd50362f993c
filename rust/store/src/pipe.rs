//! The batches [`crate::Log::read_noting`] hands from the thread that reads
//! and checks the log to the thread that visits its records.

use crate::StoreError;
use std::sync::mpsc::Receiver;

/// Bytes of lines per batch (a batch is copied once, not per line).
const BATCH_BYTES: usize = 1 << 20;

/// Batches read ahead of the visitor at most.
pub(crate) const IN_FLIGHT: usize = 4;

/// Checked records, in order: their numbers and their lines' bytes.
#[derive(Default)]
pub(crate) struct Batch {
    bytes: Vec<u8>,
    /// Each record's number and where its line ends in `bytes`.
    ends: Vec<(u64, usize)>,
}

impl Batch {
    pub(crate) fn push(&mut self, seq: u64, line: &[u8]) {
        if self.bytes.capacity() == 0 {
            self.bytes.reserve(BATCH_BYTES + line.len());
        }
        self.bytes.extend_from_slice(line);
        self.ends.push((seq, self.bytes.len()));
    }

    pub(crate) fn is_full(&self) -> bool {
        self.bytes.len() >= BATCH_BYTES
    }
}

/// Calls `f` with every record of every batch `rx` brings, in order, until
/// the batches end or `f` fails (then the reader's next send fails).
pub(crate) fn visit(
    rx: Receiver<Batch>,
    f: &mut (dyn FnMut(u64, &[u8]) -> Result<(), StoreError> + Send),
) -> Result<(), StoreError> {
    for batch in rx {
        let mut start = 0;
        for &(seq, end) in &batch.ends {
            f(seq, &batch.bytes[start..end])?;
            start = end;
        }
    }
    Ok(())
}
