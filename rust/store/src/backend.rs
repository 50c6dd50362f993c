//! Storage engines for the log.

use crate::{Head, StoreError, Visit};
use redb::TableDefinition;
use std::path::Path;

/// What a storage engine provides to the log. Implementations must make
/// `append` atomic and durable: when it returns `Ok`, every line and the
/// new head survive a crash (or power loss), and when it fails none does.
///
/// The embedded [`RedbBackend`] is the default. [`crate::PgBackend`] keeps
/// the log in PostgreSQL, where several server replicas append to the same
/// log: it is *shared*, and each write transaction then goes
/// [`begin`](Backend::begin) (lock the head, read it), catch up on what
/// others appended ([`scan`](Backend::scan) inside the transaction),
/// [`append`](Backend::append), [`commit`](Backend::commit).
pub trait Backend: Send {
    /// Writes `lines` at sequence numbers `first, first + 1, …` and records
    /// `head` as the new head, in one transaction (inside the one
    /// [`begin`](Backend::begin) opened, for a shared backend).
    fn append(&mut self, first: u64, lines: &[Vec<u8>], head: &Head) -> Result<(), StoreError>;
    /// Calls `f` with every line from sequence number `from` on, in order.
    fn scan(&self, from: u64, f: Visit<'_>) -> Result<(), StoreError>;
    /// The head recorded by the last append (the empty log's head at first).
    fn head(&self) -> Result<Head, StoreError>;
    /// Whether other processes append to this log too (replicas): then
    /// every write goes through [`begin`](Backend::begin) and
    /// [`commit`](Backend::commit). False for an embedded, locked file.
    fn shared(&self) -> bool {
        false
    }
    /// Opens a write transaction that holds the log's head lock until
    /// [`commit`](Backend::commit) or [`rollback`](Backend::rollback), and
    /// returns the head as stored now (ahead of this process's when others
    /// appended). Only called when [`shared`](Backend::shared).
    fn begin(&mut self) -> Result<Head, StoreError> {
        self.head()
    }
    /// Commits the transaction [`begin`](Backend::begin) opened: durable
    /// when it returns `Ok`.
    fn commit(&mut self) -> Result<(), StoreError> {
        Ok(())
    }
    /// Abandons the transaction [`begin`](Backend::begin) opened.
    fn rollback(&mut self) {}
}

const LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("log");
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

/// The embedded ACID store: one [redb](https://docs.rs/redb) file. Each
/// append is one write transaction with immediate durability (the file is
/// synced before the commit returns). The file is locked: one server at a
/// time.
pub struct RedbBackend {
    db: redb::Database,
    path: String,
}

impl RedbBackend {
    /// Opens the store at `path`, creating it when it does not exist.
    pub fn open(path: &Path) -> Result<RedbBackend, StoreError> {
        let name = path.display().to_string();
        let db = redb::Database::create(path).eng(&name)?;
        let backend = RedbBackend { db, path: name };
        // Create both tables, so that readers never meet a missing one.
        let txn = backend.db.begin_write().eng(&backend.path)?;
        txn.open_table(LOG).eng(&backend.path)?;
        txn.open_table(META).eng(&backend.path)?;
        txn.commit().eng(&backend.path)?;
        Ok(backend)
    }
}

/// Maps any redb error to [`StoreError::Engine`] naming the store.
trait Engine<T> {
    fn eng(self, path: &str) -> Result<T, StoreError>;
}

impl<T, E: Into<redb::Error>> Engine<T> for Result<T, E> {
    fn eng(self, path: &str) -> Result<T, StoreError> {
        self.map_err(|e| StoreError::Engine {
            path: path.to_string(),
            message: e.into().to_string(),
        })
    }
}

impl Backend for RedbBackend {
    fn append(&mut self, first: u64, lines: &[Vec<u8>], head: &Head) -> Result<(), StoreError> {
        let e = self.path.as_str();
        let txn = self.db.begin_write().eng(e)?;
        {
            let mut log = txn.open_table(LOG).eng(e)?;
            for (i, line) in lines.iter().enumerate() {
                log.insert(first + i as u64, line.as_slice()).eng(e)?;
            }
            let mut meta = txn.open_table(META).eng(e)?;
            let head = serde_json::to_vec(head)?;
            meta.insert("head", head.as_slice()).eng(e)?;
        }
        txn.commit().eng(e)?;
        Ok(())
    }

    fn scan(&self, from: u64, f: Visit<'_>) -> Result<(), StoreError> {
        let e = self.path.as_str();
        let txn = self.db.begin_read().eng(e)?;
        let log = txn.open_table(LOG).eng(e)?;
        for item in log.range(from..).eng(e)? {
            let (k, v) = item.eng(e)?;
            f(k.value(), v.value())?;
        }
        Ok(())
    }

    fn head(&self) -> Result<Head, StoreError> {
        let e = self.path.as_str();
        let txn = self.db.begin_read().eng(e)?;
        let meta = txn.open_table(META).eng(e)?;
        let head = match meta.get("head").eng(e)? {
            Some(v) => serde_json::from_slice(v.value()).map_err(|err| StoreError::Engine {
                path: self.path.clone(),
                message: format!("unreadable head: {err}"),
            })?,
            None => Head::default(),
        };
        Ok(head)
    }
}

/// A log in memory, for tests: nothing survives the process.
#[derive(Default)]
pub struct MemoryBackend {
    lines: Vec<Vec<u8>>,
    head: Head,
}

impl Backend for MemoryBackend {
    fn append(&mut self, first: u64, lines: &[Vec<u8>], head: &Head) -> Result<(), StoreError> {
        if first != self.lines.len() as u64 + 1 {
            return Err(StoreError::Engine {
                path: "memory".into(),
                message: format!("append at {first} after {} lines", self.lines.len()),
            });
        }
        self.lines.extend(lines.iter().cloned());
        self.head = head.clone();
        Ok(())
    }

    fn scan(&self, from: u64, f: Visit<'_>) -> Result<(), StoreError> {
        for (i, line) in self
            .lines
            .iter()
            .enumerate()
            .skip(from.saturating_sub(1) as usize)
        {
            f(i as u64 + 1, line)?;
        }
        Ok(())
    }

    fn head(&self) -> Result<Head, StoreError> {
        Ok(self.head.clone())
    }
}
