//! The PostgreSQL backend: one log shared by several server replicas.
//!
//! Two tables (created on first use):
//!
//! ```sql
//! agenra_log  (seq bigint primary key, line bytea not null)
//! agenra_head (id int primary key check (id = 1), seq bigint not null, hash text not null)
//! ```
//!
//! Every write transaction starts with `SELECT … FROM agenra_head … FOR
//! UPDATE`: the head row is the one lock all replicas take, so their write
//! transactions run one at a time, in the order they got it. Inside it the
//! replica reads what the others appended since it last looked, decides,
//! appends after the head and moves the head (`docs/store.md`).

use crate::{Backend, Head, StoreError, Visit};
use postgres::fallible_iterator::FallibleIterator;
use postgres::{Client, Config, NoTls};
use std::str::FromStr;
use std::sync::Mutex;
use std::time::Duration;

/// Taken (as a transaction-level advisory lock) while creating the tables,
/// so that replicas starting together do not race on `CREATE TABLE`.
pub(crate) const SCHEMA_LOCK: i64 = 0x6167_656e_7261;

/// Whether `store` names a PostgreSQL database (`postgres://…` or
/// `postgresql://…`) rather than a file.
pub fn is_postgres_url(store: &str) -> bool {
    store.starts_with("postgres://") || store.starts_with("postgresql://")
}

/// `url` with its password (if any) replaced by `***`, for messages.
pub fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_string();
    };
    let rest = &url[scheme_end..];
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_string();
    };
    match rest[..at].find(':') {
        Some(colon) => format!(
            "{}{}:***{}",
            &url[..scheme_end],
            &rest[..colon],
            &rest[at..]
        ),
        None => url.to_string(),
    }
}

/// The log in a PostgreSQL database, shared by every server replica that
/// opens the same database. Connections are plain TCP or a Unix socket (no
/// TLS): keep the database on a private network.
pub struct PgBackend {
    conn: PgConn,
}

/// One connection to a PostgreSQL database, made again when it breaks:
/// what the single-chain and the partitioned backends share.
pub(crate) struct PgConn {
    config: Config,
    client: Mutex<Option<Client>>,
    /// The URL without its password (for messages).
    pub(crate) name: String,
    /// Whether a transaction this backend began is open.
    pub(crate) in_txn: bool,
}

impl PgConn {
    /// Parses `url` (nothing is connected until the first use).
    pub(crate) fn new(url: &str) -> Result<PgConn, StoreError> {
        let name = redact(url);
        let mut config = Config::from_str(url).map_err(|e| StoreError::Engine {
            path: name.clone(),
            message: format!("not a PostgreSQL URL: {e}"),
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(5));
        }
        config.application_name("agenra");
        Ok(PgConn {
            config,
            client: Mutex::new(None),
            name,
            in_txn: false,
        })
    }

    /// Runs `f` on the connection, connecting first when there is none (or
    /// the last one broke).
    pub(crate) fn with<T>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<T, postgres::Error>,
    ) -> Result<T, StoreError> {
        let mut slot = self
            .client
            .lock()
            .map_err(|_| self.err("connection poisoned"))?;
        if slot.as_ref().is_none_or(Client::is_closed) {
            let mut c = self
                .config
                .connect(NoTls)
                .map_err(|e| self.err(format!("cannot connect: {}", describe(&e))))?;
            // A replica that stops mid-transaction must not hold a head
            // lock for long; one that waits for a lock gives up in time.
            // The partitioned log's `literal` relies on standard strings
            // (backslashes literal).
            c.batch_execute(
                "SET idle_in_transaction_session_timeout = '30s'; SET lock_timeout = '15s'; \
                 SET standard_conforming_strings = on",
            )
            .map_err(|e| self.err(describe(&e)))?;
            *slot = Some(c);
        }
        let client = slot.as_mut().ok_or_else(|| self.err("no connection"))?;
        f(client).map_err(|e| self.err(describe(&e)))
    }

    pub(crate) fn err(&self, message: impl Into<String>) -> StoreError {
        StoreError::Engine {
            path: self.name.clone(),
            message: message.into(),
        }
    }

    /// Commits the open transaction.
    pub(crate) fn commit(&mut self) -> Result<(), StoreError> {
        self.in_txn = false;
        self.with(|c| c.batch_execute("COMMIT"))
    }

    /// Rolls back the open transaction, if any.
    pub(crate) fn rollback(&mut self) {
        if std::mem::take(&mut self.in_txn) {
            if let Ok(mut slot) = self.client.lock() {
                if let Some(c) = slot.as_mut() {
                    if c.batch_execute("ROLLBACK").is_err() {
                        // A broken connection: the server rolls back when
                        // it notices; connect afresh next time.
                        *slot = None;
                    }
                }
            }
        }
    }
}

impl PgBackend {
    /// Connects to `url` (`postgres://user[:password]@host:port/db`) and
    /// creates the tables when they do not exist.
    pub fn open(url: &str) -> Result<PgBackend, StoreError> {
        let backend = PgBackend {
            conn: PgConn::new(url)?,
        };
        // A database that holds a log partitioned by session is not read
        // as an empty single chain.
        if let Some(n) = backend.conn.with(holds_partitions)? {
            return Err(backend.conn.err(format!(
                "the database holds an audit log partitioned by session ({n} partitions in \
                 agenra_plog): the single-chain store does not read it"
            )));
        }
        backend.conn.with(|c| {
            let mut t = c.transaction()?;
            t.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])?;
            t.batch_execute(
                "CREATE TABLE IF NOT EXISTS agenra_log (seq bigint PRIMARY KEY, line bytea NOT NULL);
                 CREATE TABLE IF NOT EXISTS agenra_head (
                     id int PRIMARY KEY CHECK (id = 1), seq bigint NOT NULL, hash text NOT NULL);",
            )?;
            t.execute(
                "INSERT INTO agenra_head (id, seq, hash) VALUES (1, 0, $1) ON CONFLICT (id) DO NOTHING",
                &[&crate::GENESIS],
            )?;
            t.commit()
        })?;
        Ok(backend)
    }
}

/// The server's message when there is one (`postgres::Error`'s own
/// display is often just "db error").
pub(crate) fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => {
            let mut s = e.to_string();
            let mut src = std::error::Error::source(e);
            while let Some(inner) = src {
                s.push_str(": ");
                s.push_str(&inner.to_string());
                src = inner.source();
            }
            s
        }
    }
}

pub(crate) fn seq_i64(seq: u64) -> i64 {
    i64::try_from(seq).unwrap_or(i64::MAX)
}

impl Backend for PgBackend {
    fn append(&mut self, first: u64, lines: &[Vec<u8>], head: &Head) -> Result<(), StoreError> {
        let own_txn = !self.conn.in_txn;
        if own_txn {
            let at = self.begin()?;
            if at.seq + 1 != first {
                self.rollback();
                return Err(self.conn.err(format!(
                    "append at {first}, but the log's head is at {} (another replica appended)",
                    at.seq
                )));
            }
        }
        let seqs: Vec<i64> = (0..lines.len() as u64)
            .map(|i| seq_i64(first + i))
            .collect();
        let bodies: Vec<&[u8]> = lines.iter().map(Vec::as_slice).collect();
        let prev_seq = seq_i64(first.saturating_sub(1));
        let head_seq = seq_i64(head.seq);
        // One round trip: the lines, and the head moved by compare-and-set
        // (only from where this transaction found it: a second guard
        // besides the row lock and the primary key on seq).
        let result = self.conn.with(|c| {
            c.execute(
                "WITH appended AS (
                     INSERT INTO agenra_log (seq, line)
                     SELECT * FROM unnest($1::bigint[], $2::bytea[]))
                 UPDATE agenra_head SET seq = $3, hash = $4 WHERE id = 1 AND seq = $5",
                &[&seqs, &bodies, &head_seq, &head.hash, &prev_seq],
            )
        });
        let moved = match result {
            Ok(n) => n,
            Err(e) => {
                if own_txn {
                    self.rollback();
                }
                return Err(e);
            }
        };
        if moved != 1 {
            self.rollback();
            return Err(self.conn.err(format!(
                "the head is no longer at {} (another writer moved it): nothing appended",
                first.saturating_sub(1)
            )));
        }
        if own_txn {
            self.commit()?;
        }
        Ok(())
    }

    fn scan(&self, from: u64, f: Visit<'_>) -> Result<(), StoreError> {
        let from = seq_i64(from);
        let mut failed: Option<StoreError> = None;
        self.conn.with(|c| {
            let params: [&(dyn postgres::types::ToSql + Sync); 1] = [&from];
            let mut rows = c.query_raw(
                "SELECT seq, line FROM agenra_log WHERE seq >= $1 ORDER BY seq",
                params,
            )?;
            while let Some(row) = rows.next()? {
                if failed.is_some() {
                    continue;
                }
                let seq: i64 = row.try_get(0)?;
                let line: &[u8] = row.try_get(1)?;
                // A negative key is no record's key: the reader names it
                // (as key 0, which no record has).
                if let Err(e) = f(u64::try_from(seq).unwrap_or(0), line) {
                    failed = Some(e);
                }
            }
            Ok(())
        })?;
        match failed {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn head(&self) -> Result<Head, StoreError> {
        let row = self
            .conn
            .with(|c| c.query_opt("SELECT seq, hash FROM agenra_head WHERE id = 1", &[]))?;
        match row {
            Some(r) => {
                let seq: i64 = r
                    .try_get(0)
                    .map_err(|e| self.conn.err(format!("agenra_head.seq: {}", describe(&e))))?;
                let hash: String = r
                    .try_get(1)
                    .map_err(|e| self.conn.err(format!("agenra_head.hash: {}", describe(&e))))?;
                let seq = u64::try_from(seq)
                    .map_err(|_| self.conn.err(format!("agenra_head.seq is {seq}, below 0")))?;
                Ok(Head { seq, hash })
            }
            None => Ok(Head::default()),
        }
    }

    fn shared(&self) -> bool {
        true
    }

    fn begin(&mut self) -> Result<Head, StoreError> {
        if self.conn.in_txn {
            self.rollback();
        }
        // One round trip: BEGIN and the lock (the simple query protocol
        // runs both, and answers the row as text).
        let row = self.conn.with(|c| {
            let messages =
                c.simple_query("BEGIN; SELECT seq, hash FROM agenra_head WHERE id = 1 FOR UPDATE")?;
            Ok(messages.into_iter().find_map(|m| match m {
                postgres::SimpleQueryMessage::Row(r) => Some((
                    r.get(0).and_then(|v| v.parse::<u64>().ok()),
                    r.get(1).map(str::to_string),
                )),
                _ => None,
            }))
        });
        let row = match row {
            Ok(r) => r,
            Err(e) => {
                self.conn.in_txn = true;
                self.rollback();
                return Err(e);
            }
        };
        self.conn.in_txn = true;
        match row {
            Some((Some(seq), Some(hash))) => Ok(Head { seq, hash }),
            _ => {
                self.rollback();
                Err(self
                    .conn
                    .err("the head row is missing or unreadable (agenra_head)"))
            }
        }
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        self.conn.commit()
    }

    fn rollback(&mut self) {
        self.conn.rollback()
    }
}

/// Whether the database at the other end of `c` holds a partitioned log
/// with records (then the single-chain store refuses it).
pub(crate) fn holds_partitions(c: &mut Client) -> Result<Option<i64>, postgres::Error> {
    let exists: bool = c
        .query_one("SELECT to_regclass('agenra_phead') IS NOT NULL", &[])?
        .get(0);
    if !exists {
        return Ok(None);
    }
    let n: i64 = c
        .query_one("SELECT count(*) FROM agenra_phead WHERE seq > 0", &[])?
        .get(0);
    Ok((n > 0).then_some(n))
}

/// Creates the database `name` on the server of `url` when it does not
/// exist, and returns `url` pointing at it. For tests and setup scripts
/// (each test gets a log of its own).
pub fn create_database(url: &str, name: &str) -> Result<String, StoreError> {
    let err = |message: String| StoreError::Engine {
        path: redact(url),
        message,
    };
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    {
        return Err(err(format!(
            "database name `{name}`: use lowercase letters, digits and _"
        )));
    }
    let config = Config::from_str(url).map_err(|e| err(format!("not a PostgreSQL URL: {e}")))?;
    let mut c = config
        .connect(NoTls)
        .map_err(|e| err(format!("cannot connect: {}", describe(&e))))?;
    let exists = c
        .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name])
        .map_err(|e| err(describe(&e)))?
        .is_some();
    if !exists {
        c.batch_execute(&format!("CREATE DATABASE {name}"))
            .map_err(|e| err(describe(&e)))?;
    }
    // Replace the path (the database) of the URL, keeping any query.
    let (base, query) = match url.find('?') {
        Some(q) => (&url[..q], &url[q..]),
        None => (url, ""),
    };
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let base = match base[authority_start..].find('/') {
        Some(slash) => &base[..authority_start + slash],
        None => base,
    };
    Ok(format!("{base}/{name}{query}"))
}

/// For tests that need PostgreSQL: a fresh, empty database named after
/// `name` on the server `AGENRA_TEST_PG` names (`scripts/with-postgres`
/// starts one and sets it), as a URL. Without `AGENRA_TEST_PG` it prints
/// `SKIPPED (no PostgreSQL: set AGENRA_TEST_PG)` and returns `None`.
///
/// # Panics
///
/// When `CI=true` and `AGENRA_TEST_PG` is not set (CI must not pass a
/// test it did not run), or when the server cannot be used.
pub fn test_database(name: &str) -> Option<String> {
    let Some(url) = std::env::var("AGENRA_TEST_PG")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{name}: no PostgreSQL under CI=true: run the tests under scripts/with-postgres (AGENRA_TEST_PG)");
        }
        // Straight to the process's stderr, past the test harness's
        // capture, so the line shows in every run.
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr().lock(),
            "{name}: SKIPPED (no PostgreSQL: set AGENRA_TEST_PG, or run under scripts/with-postgres)"
        );
        return None;
    };
    let db: String = format!("agenra_t_{}_{}", name, std::process::id())
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .take(63)
        .collect();
    let config = Config::from_str(&url).unwrap_or_else(|e| panic!("AGENRA_TEST_PG={url}: {e}"));
    let mut c = config
        .connect(NoTls)
        .unwrap_or_else(|e| panic!("AGENRA_TEST_PG={}: {}", redact(&url), describe(&e)));
    c.batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
        .unwrap_or_else(|e| panic!("dropping {db}: {}", describe(&e)));
    Some(create_database(&url, &db).unwrap_or_else(|e| panic!("{e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_recognised_and_passwords_redacted() {
        assert!(is_postgres_url("postgres://u@h:5432/db"));
        assert!(is_postgres_url("postgresql://h/db"));
        assert!(!is_postgres_url("agenra.redb"));
        assert_eq!(
            redact("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact("postgres://h/db"), "postgres://h/db");
    }

    #[test]
    fn a_bad_url_or_an_unreachable_server_is_an_error_not_a_panic() {
        let e = PgBackend::open("postgres://u@h:notaport/db").err().unwrap();
        assert!(e.to_string().contains("not a PostgreSQL URL"), "{e}");
        // Port 1 on loopback: nothing listens, the connection is refused.
        let e = PgBackend::open("postgres://u:pw@127.0.0.1:1/db")
            .err()
            .unwrap();
        let text = e.to_string();
        assert!(text.contains("cannot connect"), "{text}");
        assert!(!text.contains("pw"), "{text}");
    }
}

/// Tests against a real server (`AGENRA_TEST_PG`).
#[cfg(test)]
mod live {
    use super::*;
    use crate::{Committer, Done, Kind, Log, Record};
    use std::sync::{Arc, Mutex};

    fn take(who: &str) -> Record {
        Record {
            kind: Kind::Event,
            verdict: Some("ALLOW".into()),
            reason: Some(who.into()),
            ..Record::default()
        }
    }

    #[test]
    fn two_logs_on_one_database_continue_each_others_chain() {
        let Some(url) = test_database("store_chain") else {
            return;
        };
        let mut a = Log::open_pg(&url).unwrap();
        let mut b = Log::open_pg(&url).unwrap();
        assert!(a.is_shared());
        let mut seen_by_b = Vec::new();
        a.begin(&mut |_, _| panic!("nothing to catch up")).unwrap();
        a.append(&mut [take("a1"), take("a2")]).unwrap();
        a.commit().unwrap();
        // b has not seen a's records: it must catch up before appending.
        b.begin(&mut |seq, line| {
            let r: Record = serde_json::from_slice(line).unwrap();
            seen_by_b.push((seq, r.reason.unwrap()));
            Ok(())
        })
        .unwrap();
        assert_eq!(
            seen_by_b,
            vec![(1, "a1".to_string()), (2, "a2".to_string())]
        );
        let heads = b.append(&mut [take("b1")]).unwrap();
        b.commit().unwrap();
        assert_eq!(heads[0].seq, 3);
        // Appending without catching up is refused (the head moved).
        let e = a.append(&mut [take("a3")]).unwrap_err();
        assert!(e.to_string().contains("another replica appended"), "{e}");
        // A rolled-back transaction leaves nothing.
        b.begin(&mut |_, _| Ok(())).unwrap();
        b.append(&mut [take("b2")]).unwrap();
        b.rollback();
        assert_eq!(b.head().seq, 3);
        let fresh = Log::open_pg(&url).unwrap();
        assert_eq!(fresh.head().seq, 3);
        assert_eq!(fresh.verify().unwrap(), fresh.head());
        // A catch-up that refuses a record stops that log.
        let mut a2 = Log::open_pg(&url).unwrap();
        b.begin(&mut |_, _| Ok(())).unwrap();
        b.append(&mut [take("b3")]).unwrap();
        b.commit().unwrap();
        let e = a2
            .begin(&mut |_, _| {
                Err(StoreError::Encode(
                    serde_json::from_str::<u8>("x").unwrap_err(),
                ))
            })
            .unwrap_err();
        assert!(matches!(e, StoreError::Diverged { seq: 4, .. }), "{e}");
    }

    /// The one reader checks PostgreSQL's rows as it checks redb's: a row
    /// whose key was changed stops `verify` and recovery at that record.
    #[test]
    fn a_row_under_another_key_is_named_by_the_reader() {
        let Some(url) = test_database("store_moved_row") else {
            return;
        };
        let mut log = Log::open_pg(&url).unwrap();
        log.begin(&mut |_, _| Ok(())).unwrap();
        log.append(&mut [take("a"), take("b"), take("c")]).unwrap();
        log.commit().unwrap();
        let mut c = Config::from_str(&url).unwrap().connect(NoTls).unwrap();
        c.batch_execute("UPDATE agenra_log SET seq = 1000 WHERE seq = 3")
            .unwrap();
        let fresh = Log::open_pg(&url).unwrap();
        let e = fresh.verify().unwrap_err().to_string();
        assert!(
            e.starts_with(
                "audit record 3: the next record is stored under key 1000, expected key 3"
            ),
            "{e}"
        );
        let mut seen = Vec::new();
        let scanned = fresh.scan(1, &mut |seq, _| {
            seen.push(seq);
            Ok(())
        });
        assert_eq!(scanned.unwrap_err().to_string(), e);
        assert_eq!(seen, vec![1, 2]);
    }

    /// Two writers (replicas) on one database, each with several threads
    /// deciding against a quota they only know from the log: exactly
    /// `QUOTA` takes are appended, whatever the interleaving.
    #[test]
    fn replicas_deciding_concurrently_never_exceed_a_quota() {
        const QUOTA: u64 = 40;
        let Some(url) = test_database("store_quota") else {
            return;
        };
        let replicas: Vec<(Arc<Committer>, Arc<Mutex<u64>>)> = (0..2)
            .map(|_| {
                let log = Log::open_pg(&url).unwrap();
                let taken = Arc::new(Mutex::new(0u64));
                let t = Arc::clone(&taken);
                let committer = Committer::start_shared(
                    log,
                    64,
                    Box::new(move |_, line| {
                        let r: Record = serde_json::from_slice(line)?;
                        if r.verdict.as_deref() == Some("ALLOW") {
                            *t.lock().unwrap() += 1;
                        }
                        Ok(())
                    }),
                );
                (Arc::new(committer), taken)
            })
            .collect();
        let allowed = Arc::new(Mutex::new(0u64));
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let (committer, taken) = replicas[i % 2].clone();
                let allowed = Arc::clone(&allowed);
                std::thread::spawn(move || {
                    for _ in 0..15 {
                        let (tx, rx) = std::sync::mpsc::channel();
                        let taken = Arc::clone(&taken);
                        let refused_tx = tx.clone();
                        committer.decide(
                            Box::new(move || {
                                let mut n = taken.lock().unwrap();
                                if *n >= QUOTA {
                                    let done: Done = Box::new(move |_| {
                                        let _ = tx.send(false);
                                    });
                                    return (None, done);
                                }
                                *n += 1;
                                let done: Done = Box::new(move |r| {
                                    let _ = tx.send(r.is_ok());
                                });
                                (Some(take("t")), done)
                            }),
                            Box::new(move |_| {
                                let _ = refused_tx.send(false);
                            }),
                        );
                        if rx.recv().unwrap() {
                            *allowed.lock().unwrap() += 1;
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*allowed.lock().unwrap(), QUOTA);
        let log = Log::open_pg(&url).unwrap();
        assert_eq!(log.head().seq, QUOTA);
        log.verify().unwrap();
    }
}
