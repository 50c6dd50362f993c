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
    /// Calls `f` with the lines at the sequence numbers `seqs` (ascending),
    /// in that order; a number with no line is an error. The default scans
    /// from the first of them; a backend with keyed reads reads only those.
    fn get(&self, seqs: &[u64], f: Visit<'_>) -> Result<(), StoreError> {
        let Some(&first) = seqs.first() else {
            return Ok(());
        };
        let mut want = seqs.iter().copied().peekable();
        self.scan(first, &mut |seq, line| {
            if want.peek() == Some(&seq) {
                want.next();
                f(seq, line)?;
            }
            Ok(())
        })?;
        match want.next() {
            None => Ok(()),
            Some(seq) => Err(missing(seq)),
        }
    }
    /// Whether [`get`](Backend::get) reads only the records named (by key)
    /// rather than scanning from the first of them.
    fn keyed_reads(&self) -> bool {
        false
    }
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

/// A record a session's index names is not in the log.
fn missing(seq: u64) -> StoreError {
    StoreError::Chain(crate::VerifyError {
        seq,
        reason: "the record is not in the log".into(),
    })
}

const LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("log");
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

/// The first bytes of every redb file.
const REDB_MAGIC: &[u8] = b"redb\x1a\x0a\xa9\x0d\x0a";

/// The embedded ACID store: one [redb](https://docs.rs/redb) file. Each
/// append is one write transaction with immediate durability (synced
/// before the commit returns), followed by an empty one: redb keeps two
/// commit slots and falls back to the older one when the newer one does
/// not check (or when the one header bit that selects it flips), and the
/// second commit makes both slots hold every appended record before the
/// append returns. So no fallback can drop a record that was answered.
/// The file is locked: one server at a time.
///
/// A file that is corrupt is an error ([`StoreError::Corrupt`]), never a
/// panic: every call into redb runs under [`std::panic::catch_unwind`], and
/// after redb panicked once the backend refuses every later call.
pub struct RedbBackend {
    db: Option<redb::Database>,
    path: String,
    /// Set when redb panicked (its state may be inconsistent since).
    broken: std::sync::Mutex<Option<String>>,
}

thread_local! {
    /// Whether a panic on this thread is inside a guarded redb call (the
    /// hook then records it instead of printing it).
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// The last guarded panic's message and location.
    static LAST_PANIC: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Installs (once) a panic hook that records panics inside guarded redb
/// calls instead of printing them, and hands every other panic to the hook
/// that was there before.
fn install_hook() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let quiet = QUIET.try_with(std::cell::Cell::get).unwrap_or(false);
            if quiet {
                let payload = info.payload();
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown failure".into());
                let at = info
                    .location()
                    .map(|l| {
                        let file = l.file().rsplit('/').next().unwrap_or(l.file());
                        format!(" ({file}:{})", l.line())
                    })
                    .unwrap_or_default();
                let _ = LAST_PANIC.try_with(|p| *p.borrow_mut() = Some(format!("{message}{at}")));
            } else {
                previous(info);
            }
        }));
    });
}

/// Sets [`QUIET`] for as long as it lives (restoring the value before).
struct Quiet(bool);

impl Quiet {
    fn set(on: bool) -> Quiet {
        Quiet(QUIET.with(|q| q.replace(on)))
    }
}

impl Drop for Quiet {
    fn drop(&mut self) {
        QUIET.with(|q| q.set(self.0));
    }
}

/// Runs `f`, turning a panic inside it into its message and location
/// (not printed).
fn catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    install_hook();
    let _quiet = Quiet::set(true);
    LAST_PANIC.with(|p| p.borrow_mut().take());
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|payload| {
        LAST_PANIC
            .with(|p| p.borrow_mut().take())
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown failure".into())
            .replace('\n', " ")
    })
}

fn corrupt(path: &str, message: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        path: path.to_string(),
        message: message.into(),
    }
}

impl RedbBackend {
    /// Opens the store at `path`, creating it only when no file exists
    /// there. An existing file must be a redb store with the log's tables:
    /// an empty file, a truncated one, or any other file is an error (it
    /// is never taken as a new, empty store).
    pub fn open(path: &Path) -> Result<RedbBackend, StoreError> {
        let name = path.display().to_string();
        let fresh = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path);
        match fresh {
            Ok(file) => {
                // The file is this call's: if the new store cannot be set
                // up, it goes again (an empty file left behind would be
                // refused at the next start).
                let created = RedbBackend::create(file, name.clone());
                if created.is_err() {
                    let _ = std::fs::remove_file(path);
                }
                created
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                check_file(path, &name)?;
                let backend = RedbBackend {
                    db: Some(open_existing(path, &name)?),
                    path: name,
                    broken: std::sync::Mutex::new(None),
                };
                // An existing store has both tables (a missing one is
                // corruption).
                backend.guard(|db| {
                    let txn = db.begin_read().eng(&backend.path)?;
                    txn.open_table(LOG).eng(&backend.path)?;
                    txn.open_table(META).eng(&backend.path)?;
                    Ok(())
                })?;
                Ok(backend)
            }
            Err(e) => Err(StoreError::Engine {
                path: name,
                message: format!("cannot create the store file: {e}"),
            }),
        }
    }

    /// A new store in the empty `file`, with both tables (so that readers
    /// never meet a missing one).
    fn create(file: std::fs::File, name: String) -> Result<RedbBackend, StoreError> {
        let db = catch(|| {
            redb::Builder::new()
                .set_cache_size(CACHE_BYTES)
                .create_file(file)
        })
        .map_err(|m| {
            corrupt(
                &name,
                format!("redb failed an internal check creating it: {m}"),
            )
        })?
        .eng(&name)?;
        let backend = RedbBackend {
            db: Some(db),
            path: name,
            broken: std::sync::Mutex::new(None),
        };
        backend.guard(|db| {
            let txn = begin_write(db, &backend.path)?;
            txn.open_table(LOG).eng(&backend.path)?;
            txn.open_table(META).eng(&backend.path)?;
            txn.commit().eng(&backend.path)
        })?;
        Ok(backend)
    }

    /// Runs `f` on the database, turning a panic inside redb into
    /// [`StoreError::Corrupt`] (and refusing every later call).
    fn guard<T>(
        &self,
        f: impl FnOnce(&redb::Database) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        if let Some(why) = self.broken.lock().ok().and_then(|b| b.clone()) {
            return Err(corrupt(&self.path, why));
        }
        let Some(db) = self.db.as_ref() else {
            return Err(corrupt(&self.path, "the store is closed"));
        };
        match catch(|| f(db)) {
            Ok(r) => r,
            Err(panic) => {
                let why = format!("redb failed an internal check: {panic}");
                if let Ok(mut b) = self.broken.lock() {
                    *b = Some(why.clone());
                }
                Err(corrupt(&self.path, why))
            }
        }
    }
}

impl Drop for RedbBackend {
    fn drop(&mut self) {
        // redb writes its allocator state when the database is dropped,
        // which can panic on a corrupt file.
        if let Some(db) = self.db.take() {
            let _ = catch(move || drop(db));
        }
    }
}

/// Opens the existing redb file at `path` and checks redb's checksums.
/// The embedded store's page cache. redb's default (1 GiB) would hold a
/// large log in memory, growing the gateway with every record until then;
/// the log is appended and read in order, so a small cache loses nothing
/// (the operating system's page cache serves the rest).
const CACHE_BYTES: usize = 16 * 1024 * 1024;

fn open_existing(path: &Path, name: &str) -> Result<redb::Database, StoreError> {
    let mut db = catch(|| redb::Builder::new().set_cache_size(CACHE_BYTES).open(path))
        .map_err(|m| {
            let hint = if m.contains("raw_file_len") {
                "the file is shorter than its header says (truncated); "
            } else {
                ""
            };
            corrupt(
                name,
                format!("{hint}redb failed an internal check opening it: {m}"),
            )
        })?
        .eng(name)?;
    // redb checks its checksums only when repairing after a crash: check
    // them all now (a corrupt page, or a commit slot pointing at an older
    // tree, is an error here).
    let checked = match catch(|| db.check_integrity()) {
        Ok(Ok(true)) => return Ok(db),
        Ok(Ok(false)) => corrupt(
            name,
            "redb's integrity check found damage and repaired the file (from its other commit \
             slot, which holds every appended record); check it with `agenra audit verify --store` \
             before serving from it",
        ),
        Ok(Err(e)) => engine_error(name, e),
        Err(m) => corrupt(
            name,
            format!("redb failed an internal check verifying it: {m}"),
        ),
    };
    let _ = catch(move || drop(db));
    Err(checked)
}

/// Checks that the existing file at `path` can be a redb store before redb
/// sees it (redb would take an empty file for a new database).
fn check_file(path: &Path, name: &str) -> Result<(), StoreError> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).map_err(|e| StoreError::Engine {
        path: name.to_string(),
        message: format!("cannot open the store file: {e}"),
    })?;
    let mut magic = [0u8; REDB_MAGIC.len()];
    let mut got = 0;
    while got < magic.len() {
        match file.read(&mut magic[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(StoreError::Engine {
                    path: name.to_string(),
                    message: format!("cannot read the store file: {e}"),
                })
            }
        }
    }
    if got == 0 {
        return Err(corrupt(
            name,
            "the file is empty (a store is created only where no file exists: \
             an empty file is a lost or truncated store; delete it only if it never held one)",
        ));
    }
    if got < magic.len() || magic != REDB_MAGIC {
        return Err(corrupt(
            name,
            format!("not a redb store file (it is {got}+ bytes without redb's header)"),
        ));
    }
    Ok(())
}

/// A write transaction (immediate durability, redb's default).
fn begin_write(db: &redb::Database, path: &str) -> Result<redb::WriteTransaction, StoreError> {
    db.begin_write().eng(path)
}

/// Maps any redb error to [`StoreError::Engine`] naming the store (or
/// [`StoreError::Corrupt`] for what redb found corrupt or missing).
trait Engine<T> {
    fn eng(self, path: &str) -> Result<T, StoreError>;
}

impl<T, E: Into<redb::Error>> Engine<T> for Result<T, E> {
    fn eng(self, path: &str) -> Result<T, StoreError> {
        self.map_err(|e| engine_error(path, e))
    }
}

fn engine_error(path: &str, e: impl Into<redb::Error>) -> StoreError {
    match e.into() {
        e @ (redb::Error::Corrupted(_)
        | redb::Error::TableDoesNotExist(_)
        | redb::Error::TableTypeMismatch { .. }
        | redb::Error::TableIsMultimap(_)
        | redb::Error::TypeDefinitionChanged { .. }) => corrupt(path, e.to_string()),
        redb::Error::Io(io) if io.kind() == std::io::ErrorKind::InvalidData => {
            corrupt(path, format!("not a readable redb store file ({io})"))
        }
        redb::Error::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => corrupt(
            path,
            format!("the file ends before redb's data does: truncated? ({io})"),
        ),
        e => StoreError::Engine {
            path: path.to_string(),
            message: e.to_string(),
        },
    }
}

impl Backend for RedbBackend {
    fn append(&mut self, first: u64, lines: &[Vec<u8>], head: &Head) -> Result<(), StoreError> {
        let head = serde_json::to_vec(head)?;
        self.guard(|db| {
            let e = self.path.as_str();
            let txn = begin_write(db, e)?;
            {
                let mut log = txn.open_table(LOG).eng(e)?;
                for (i, line) in lines.iter().enumerate() {
                    log.insert(first + i as u64, line.as_slice()).eng(e)?;
                }
                let mut meta = txn.open_table(META).eng(e)?;
                meta.insert("head", head.as_slice()).eng(e)?;
            }
            txn.commit().eng(e)?;
            // The same tree into the other commit slot (see above).
            begin_write(db, e)?.commit().eng(e)
        })
    }

    fn scan(&self, from: u64, f: Visit<'_>) -> Result<(), StoreError> {
        // A panic in the caller's code is the caller's: it is printed, and
        // goes on unwinding once out of the guard.
        let mut theirs = None;
        let scanned = self.guard(|db| {
            let e = self.path.as_str();
            let txn = db.begin_read().eng(e)?;
            let log = txn.open_table(LOG).eng(e)?;
            for item in log.range(from..).eng(e)? {
                let (k, v) = item.eng(e)?;
                let called = {
                    let _loud = Quiet::set(false);
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        f(k.value(), v.value())
                    }))
                };
                match called {
                    Ok(r) => r?,
                    Err(payload) => {
                        theirs = Some(payload);
                        return Ok(());
                    }
                }
            }
            Ok(())
        });
        if let Some(payload) = theirs {
            std::panic::resume_unwind(payload);
        }
        scanned
    }

    fn keyed_reads(&self) -> bool {
        true
    }

    fn get(&self, seqs: &[u64], f: Visit<'_>) -> Result<(), StoreError> {
        // Read first, then visit: the caller's code runs outside the guard.
        let lines = self.guard(|db| {
            let e = self.path.as_str();
            let txn = db.begin_read().eng(e)?;
            let log = txn.open_table(LOG).eng(e)?;
            let mut lines = Vec::with_capacity(seqs.len());
            for &seq in seqs {
                let line = log.get(seq).eng(e)?.ok_or_else(|| missing(seq))?;
                lines.push(line.value().to_vec());
            }
            Ok(lines)
        })?;
        for (&seq, line) in seqs.iter().zip(&lines) {
            f(seq, line)?;
        }
        Ok(())
    }

    fn head(&self) -> Result<Head, StoreError> {
        self.guard(|db| {
            let e = self.path.as_str();
            let txn = db.begin_read().eng(e)?;
            let meta = txn.open_table(META).eng(e)?;
            let head = match meta.get("head").eng(e)? {
                Some(v) => serde_json::from_slice(v.value())
                    .map_err(|err| corrupt(e, format!("its head is unreadable: {err}")))?,
                None => Head::default(),
            };
            Ok(head)
        })
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

    fn keyed_reads(&self) -> bool {
        true
    }

    fn get(&self, seqs: &[u64], f: Visit<'_>) -> Result<(), StoreError> {
        for &seq in seqs {
            let i = usize::try_from(seq.wrapping_sub(1)).map_err(|_| missing(seq))?;
            let line = self.lines.get(i).ok_or_else(|| missing(seq))?;
            f(seq, line)?;
        }
        Ok(())
    }

    fn head(&self) -> Result<Head, StoreError> {
        Ok(self.head.clone())
    }
}
