//! The partitioned log in PostgreSQL ([`crate::parts`]).
//!
//! ```sql
//! agenra_plog  (part text, seq bigint, line bytea NOT NULL, PRIMARY KEY (part, seq))
//! agenra_phead (part text PRIMARY KEY, seq bigint NOT NULL, hash text NOT NULL)
//! ```
//!
//! A write transaction locks the head rows of the partitions it appends
//! to (`SELECT … WHERE part = ANY(…) ORDER BY part FOR UPDATE`, after
//! creating missing rows in the same sorted order) and nothing else, so
//! transactions on distinct sessions never wait on one another.
//!
//! A database that holds the single chain (`agenra_log`, `agenra_head`
//! with records) is refused, and [`crate::PgBackend`] refuses one that
//! holds partitions: neither reads the other's log as empty.

use crate::parts::{PartAppend, PartBackend, PartVisit};
use crate::pg::{holds_partitions, seq_i64, PgConn, SCHEMA_LOCK};
use crate::{Head, StoreError};
use postgres::fallible_iterator::FallibleIterator;
use std::collections::BTreeMap;

/// The partitioned log in a PostgreSQL database (see the module docs).
pub struct PgParts {
    conn: PgConn,
}

impl PgParts {
    /// Connects to `url` and creates the partitioned tables when they do
    /// not exist. Refuses a database that holds the single-chain log.
    pub fn open(url: &str) -> Result<PgParts, StoreError> {
        let backend = PgParts {
            conn: PgConn::new(url)?,
        };
        let single = backend.conn.with(|c| {
            let mut t = c.transaction()?;
            t.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])?;
            let single: Option<i64> = if t
                .query_one("SELECT to_regclass('agenra_head') IS NOT NULL", &[])?
                .get(0)
            {
                t.query_opt("SELECT seq FROM agenra_head WHERE id = 1 AND seq > 0", &[])?
                    .map(|r| r.get(0))
            } else {
                None
            };
            if single.is_none() {
                t.batch_execute(
                    "CREATE TABLE IF NOT EXISTS agenra_plog (
                         part text NOT NULL, seq bigint NOT NULL, line bytea NOT NULL,
                         PRIMARY KEY (part, seq));
                     CREATE TABLE IF NOT EXISTS agenra_phead (
                         part text PRIMARY KEY, seq bigint NOT NULL, hash text NOT NULL);",
                )?;
            }
            t.commit()?;
            Ok(single)
        })?;
        if let Some(n) = single {
            return Err(backend.conn.err(format!(
                "the database holds a single-chain audit log ({n} records in agenra_log, \
                 written before logs were partitioned by session): it is not converted. Serve it \
                 with the single-chain store, or export it (`agenra audit export --store …`) and \
                 start the partitioned log in a new database"
            )));
        }
        Ok(backend)
    }

    fn head_of(&self, part: &str, seq: i64, hash: String) -> Result<Head, StoreError> {
        let seq = u64::try_from(seq).map_err(|_| {
            self.conn
                .err(format!("agenra_phead: partition {part} has seq {seq}"))
        })?;
        Ok(Head { seq, hash })
    }
}

impl PartBackend for PgParts {
    fn begin(
        &mut self,
        parts: &[String],
        create: &[String],
    ) -> Result<BTreeMap<String, Head>, StoreError> {
        if self.conn.in_txn {
            self.rollback();
        }
        let mut sorted = parts.to_vec();
        sorted.sort();
        sorted.dedup();
        let mut create = create.to_vec();
        create.sort();
        create.dedup();
        // One round trip when no row is new: BEGIN and the locks in one
        // simple query (its values quoted as SQL literals).
        let mut sql = String::from("BEGIN;");
        if !create.is_empty() {
            // New partitions get their head row first (sorted: two
            // transactions creating the same rows wait in one order).
            sql.push_str(&format!(
                "INSERT INTO agenra_phead (part, seq, hash) SELECT p, 0, {} FROM unnest({}) AS p \
                 ORDER BY p ON CONFLICT (part) DO NOTHING;",
                literal(crate::GENESIS)?,
                text_array(&create)?
            ));
        }
        sql.push_str(&format!(
            "SELECT part, seq, hash FROM agenra_phead WHERE part = ANY({}) ORDER BY part FOR UPDATE",
            text_array(&sorted)?
        ));
        self.conn.in_txn = true;
        let rows = self.conn.with(|c| {
            Ok(c.simple_query(&sql)?
                .into_iter()
                .filter_map(|m| match m {
                    postgres::SimpleQueryMessage::Row(r) => Some((
                        r.get(0).map(str::to_string),
                        r.get(1).and_then(|v| v.parse::<i64>().ok()),
                        r.get(2).map(str::to_string),
                    )),
                    _ => None,
                })
                .collect::<Vec<_>>())
        });
        let rows = match rows {
            Ok(r) => r,
            Err(e) => {
                self.rollback();
                return Err(e);
            }
        };
        let mut out = BTreeMap::new();
        for r in rows {
            let (Some(part), Some(seq), Some(hash)) = r else {
                self.rollback();
                return Err(self.conn.err("agenra_phead: an unreadable head row"));
            };
            let head = match self.head_of(&part, seq, hash) {
                Ok(h) => h,
                Err(e) => {
                    self.rollback();
                    return Err(e);
                }
            };
            out.insert(part, head);
        }
        if out.len() != sorted.len() {
            self.rollback();
            return Err(self.conn.err("a partition's head row could not be locked"));
        }
        Ok(out)
    }

    fn append(&mut self, appends: &[PartAppend<'_>]) -> Result<(), StoreError> {
        if !self.conn.in_txn {
            return Err(self.conn.err("append outside a transaction"));
        }
        let mut parts = Vec::new();
        let mut seqs = Vec::new();
        let mut lines: Vec<&[u8]> = Vec::new();
        let (mut hp, mut hs, mut hh, mut ho) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for a in appends {
            for (i, line) in a.lines.iter().enumerate() {
                parts.push(a.partition);
                seqs.push(seq_i64(a.first + i as u64));
                lines.push(line.as_slice());
            }
            hp.push(a.partition);
            hs.push(seq_i64(a.head.seq));
            hh.push(a.head.hash.as_str());
            ho.push(seq_i64(a.before.seq));
        }
        // One round trip: every line, and every head moved by
        // compare-and-set from where this transaction found it.
        let moved = self.conn.with(|c| {
            c.execute(
                "WITH appended AS (
                     INSERT INTO agenra_plog (part, seq, line)
                     SELECT * FROM unnest($1::text[], $2::bigint[], $3::bytea[]))
                 UPDATE agenra_phead h SET seq = u.seq, hash = u.hash
                 FROM unnest($4::text[], $5::bigint[], $6::text[], $7::bigint[])
                     AS u(part, seq, hash, old)
                 WHERE h.part = u.part AND h.seq = u.old",
                &[&parts, &seqs, &lines, &hp, &hs, &hh, &ho],
            )
        });
        match moved {
            Ok(n) if n == appends.len() as u64 => Ok(()),
            Ok(_) => {
                self.rollback();
                Err(self.conn.err(
                    "a partition's head is no longer where this transaction found it: \
                     nothing appended",
                ))
            }
            Err(e) => {
                self.rollback();
                Err(e)
            }
        }
    }

    fn scan(&self, part: &str, from: u64, f: PartVisit<'_>) -> Result<(), StoreError> {
        let from = seq_i64(from);
        let mut failed: Option<StoreError> = None;
        self.conn.with(|c| {
            let params: [&(dyn postgres::types::ToSql + Sync); 2] = [&part, &from];
            let mut rows = c.query_raw(
                "SELECT seq, line FROM agenra_plog WHERE part = $1 AND seq >= $2 ORDER BY seq",
                params,
            )?;
            while let Some(row) = rows.next()? {
                if failed.is_some() {
                    continue;
                }
                let seq: i64 = row.try_get(0)?;
                let line: &[u8] = row.try_get(1)?;
                if let Err(e) = f(part, u64::try_from(seq).unwrap_or(0), line) {
                    failed = Some(e);
                }
            }
            Ok(())
        })?;
        failed.map_or(Ok(()), Err)
    }

    fn heads(&self) -> Result<BTreeMap<String, Option<Head>>, StoreError> {
        let rows = self.conn.with(|c| {
            c.query(
                "SELECT p.part, h.seq, h.hash FROM
                     (SELECT part FROM agenra_phead UNION SELECT DISTINCT part FROM agenra_plog) p
                 LEFT JOIN agenra_phead h ON h.part = p.part",
                &[],
            )
        })?;
        let mut out = BTreeMap::new();
        for r in rows {
            let part: String = r.get(0);
            let seq: Option<i64> = r.get(1);
            let hash: Option<String> = r.get(2);
            let head = match (seq, hash) {
                (Some(s), Some(h)) => Some(self.head_of(&part, s, h)?),
                _ => None,
            };
            out.insert(part, head);
        }
        Ok(out)
    }

    fn head_rows(&self) -> Result<BTreeMap<String, Head>, StoreError> {
        let rows = self
            .conn
            .with(|c| c.query("SELECT part, seq, hash FROM agenra_phead", &[]))?;
        let mut out = BTreeMap::new();
        for r in rows {
            let part: String = r.get(0);
            let head = self.head_of(&part, r.get(1), r.get(2))?;
            out.insert(part, head);
        }
        Ok(out)
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        self.conn.commit()
    }

    fn rollback(&mut self) {
        self.conn.rollback()
    }

    fn name(&self) -> String {
        self.conn.name.clone()
    }
}

/// `text` as an SQL string literal (every connection sets
/// `standard_conforming_strings`, which keeps backslashes literal); a NUL
/// character, which no literal can hold, is refused.
fn literal(text: &str) -> Result<String, StoreError> {
    if text.contains('\0') {
        return Err(StoreError::Engine {
            path: "postgres".into(),
            message: format!("a partition name with a NUL character: {text:?}"),
        });
    }
    Ok(format!("'{}'", text.replace('\'', "''")))
}

/// `items` as an SQL `text[]` value.
fn text_array(items: &[String]) -> Result<String, StoreError> {
    let quoted: Result<Vec<String>, StoreError> = items.iter().map(|i| literal(i)).collect();
    Ok(format!("ARRAY[{}]::text[]", quoted?.join(",")))
}

/// Whether the PostgreSQL database at `url` holds a log partitioned by
/// session with records (`agenra audit verify` then reads it with
/// [`crate::PartLog`]). Creates nothing.
pub fn is_partitioned_pg(url: &str) -> Result<bool, StoreError> {
    Ok(PgConn::new(url)?.with(holds_partitions)?.is_some())
}

/// Tests against a real server (`AGENRA_TEST_PG`).
#[cfg(test)]
mod live {
    use super::*;
    use crate::parts::{session_partition, PartLog};
    use crate::{Kind, PgBackend, Record};

    fn event(tenant: &str, session: &str, n: u64) -> (String, Record) {
        (
            session_partition(tenant, session),
            Record {
                kind: Kind::Event,
                tenant: Some(tenant.into()),
                session: Some(session.into()),
                reason: Some(format!("{n}")),
                ..Record::default()
            },
        )
    }

    #[test]
    fn two_writers_on_distinct_sessions_interleave_without_forking_any_chain() {
        let Some(url) = crate::test_database("parts_interleave") else {
            return;
        };
        PgParts::open(&url).unwrap();
        // Two writers (as two replicas would), each on its own sessions,
        // with a third session both append to.
        let threads: Vec<_> = (0..2)
            .map(|w| {
                let url = url.clone();
                std::thread::spawn(move || {
                    let mut log = PartLog::open(Box::new(PgParts::open(&url).unwrap()));
                    for n in 0..40u64 {
                        let own = format!("w{w}-{}", n % 3);
                        let parts = [session_partition("t", &own), session_partition("t", "both")];
                        log.begin(&parts, false, &mut |_, _, _| Ok(())).unwrap();
                        log.append(&mut [event("t", &own, n), event("t", "both", n)])
                            .unwrap();
                        log.commit().unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let mut reader = PartLog::open(Box::new(PgParts::open(&url).unwrap()));
        let heads = reader.read(&mut |_, _, _| Ok(())).unwrap();
        // Six sessions of their own and the shared one; nothing forked.
        assert_eq!(heads[&session_partition("t", "both")].seq, 80);
        let own: u64 = heads
            .iter()
            .filter(|(p, _)| p.starts_with("s/t/w"))
            .map(|(_, h)| h.seq)
            .sum();
        assert_eq!(own, 80);
        assert_eq!(heads.len(), 7);
    }

    #[test]
    fn a_writer_does_not_wait_for_another_sessions_lock() {
        let Some(url) = crate::test_database("parts_nowait") else {
            return;
        };
        let mut a = PartLog::open(Box::new(PgParts::open(&url).unwrap()));
        let mut b = PartLog::open(Box::new(PgParts::open(&url).unwrap()));
        // A holds session x's head open; B appends to y and commits while
        // A's transaction is still open (it would block on one shared lock).
        a.begin(&[session_partition("t", "x")], true, &mut |_, _, _| Ok(()))
            .unwrap();
        a.append(&mut [event("t", "x", 1)]).unwrap();
        b.begin(&[session_partition("t", "y")], true, &mut |_, _, _| Ok(()))
            .unwrap();
        b.append(&mut [event("t", "y", 1)]).unwrap();
        b.commit().unwrap();
        a.commit().unwrap();
        let heads = PartLog::open(Box::new(PgParts::open(&url).unwrap()))
            .read(&mut |_, _, _| Ok(()))
            .unwrap();
        assert_eq!(heads.len(), 2);
    }

    #[test]
    fn quotes_and_backslashes_in_names_are_data() {
        let Some(url) = crate::test_database("parts_quotes") else {
            return;
        };
        let odd = "o'k\\'); DROP TABLE agenra_plog; --";
        let mut log = PartLog::open(Box::new(PgParts::open(&url).unwrap()));
        for n in 0..2 {
            log.begin(&[session_partition("t", odd)], false, &mut |_, _, _| Ok(()))
                .unwrap();
            log.append(&mut [event("t", odd, n)]).unwrap();
            log.commit().unwrap();
        }
        let heads = PartLog::open(Box::new(PgParts::open(&url).unwrap()))
            .read(&mut |_, _, _| Ok(()))
            .unwrap();
        assert_eq!(heads[&session_partition("t", odd)].seq, 2);
        assert!(literal("a\0b").is_err());
    }

    #[test]
    fn a_single_chain_database_and_a_partitioned_one_refuse_each_other() {
        let Some(url) = crate::test_database("parts_migration") else {
            return;
        };
        let mut single = crate::Log::open_pg(&url).unwrap();
        single
            .append(&mut [Record {
                kind: Kind::Refused,
                ..Record::default()
            }])
            .unwrap();
        let e = PgParts::open(&url).err().unwrap().to_string();
        assert!(e.contains("single-chain audit log (1 records"), "{e}");
        let Some(url) = crate::test_database("parts_migration2") else {
            return;
        };
        let mut log = PartLog::open(Box::new(PgParts::open(&url).unwrap()));
        log.begin(&[session_partition("t", "x")], true, &mut |_, _, _| Ok(()))
            .unwrap();
        log.append(&mut [event("t", "x", 1)]).unwrap();
        log.commit().unwrap();
        let e = PgBackend::open(&url).err().unwrap().to_string();
        assert!(e.contains("partitioned by session"), "{e}");
    }
}
