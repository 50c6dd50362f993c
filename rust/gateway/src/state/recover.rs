//! Recovery reads the log once (`docs/store.md`, "Recovery").
//!
//! 1. [`Log::read_noting`] checks the whole chain (every record's hash and
//!    link) and hands each record here: one borrowed look at its fields
//!    notes its session for eviction, applies policy records, counts each
//!    session's events and chooses its last snapshot that matches the
//!    records before it (see `snapshot`).
//! 2. Each chosen snapshot is restored before anything is replayed; one that
//!    does not restore is reported (naming its record) and its session is
//!    replayed in full: never a silent loss.
//! 3. [`Log::reread`] reads, by number, only the records left to apply (in
//!    log order): every record a snapshot does not cover, and the covered
//!    events that leave more behind than their call id (a paused call, an
//!    approval). Each must hash as step 1 checked it. The covered events
//!    that leave only a call id behind are not read again: step 1 kept
//!    their id's hash.

use super::{id_hash, parts::pooled_policy, session_options, snapshot, Key, Shared};
use agenra_core::decision::Verdict;
use agenra_core::Session;
use agenra_store::{Head, Kind, Log, Noted, Snapshot, StoreError};
use serde::Deserialize;
use std::borrow::Cow;
use std::collections::HashMap;

/// The fields of a record the one pass reads (the others are skipped
/// over, strings borrowed where they need no unescaping).
#[derive(Deserialize)]
struct Glance<'a> {
    kind: Kind,
    tenant: Option<String>,
    session: Option<String>,
    #[serde(borrow, default)]
    ledger_hash: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    policy_hash: Cow<'a, str>,
    window: Option<u64>,
    snapshot: Option<Snapshot>,
    #[serde(borrow, default)]
    verdict: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    event: Option<GlancedEvent<'a>>,
}

#[derive(Deserialize)]
struct GlancedEvent<'a> {
    #[serde(borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
}

/// What an event record leaves behind besides the monitor's state, when
/// a snapshot covers it.
#[derive(Clone, Copy)]
enum Leaves {
    /// Nothing (a result, a task).
    Nothing,
    /// The hash of the call id it used (an allowed or denied call).
    Used(u64),
    /// More (a paused call, an approval, a rejection, or a record that
    /// does not read as one of these): read again and skipped as before.
    More,
}

/// A session's records as the pass saw them.
#[derive(Default)]
struct Track {
    /// Its event records so far.
    events: u64,
    /// The last one's ledger hash.
    ledger_hash: Option<String>,
    /// Its `session` record: number, policy hash, window.
    opened: Option<(u64, String, Option<u64>)>,
    /// Its event records: number, and what each leaves behind.
    notes: Vec<(u64, Leaves)>,
    /// Its last snapshot that matches the records before it.
    chosen: Option<snapshot::Chosen>,
}

/// What the pass found: per session, and the records to read again.
#[derive(Default)]
struct Pass {
    tracks: HashMap<Key, Track>,
    /// Records applied in the second step whatever the snapshots: all but
    /// events (decided later), policies (applied in the pass) and snapshots.
    again: Vec<u64>,
}

/// A session restored from its snapshot, installed at its `session`
/// record; its events before the snapshot's record are covered.
pub(super) struct Restored {
    session: Session,
    upto: u64,
    used: Vec<u64>,
}

impl Shared {
    /// Recovers every session from `log` (see the module doc); returns the
    /// head the checked chain ends at.
    pub(super) fn recover(&self, log: &Log) -> Result<Head, StoreError> {
        let mut pass = Pass::default();
        let (head, noted) = log.read_noting(&mut |seq, line| {
            self.glance(&mut pass, seq, line)
                .map_err(|reason| StoreError::Diverged { seq, reason })
        })?;
        let (mut restored, again) = self.restore_all(pass);
        self.apply_again(log, &noted, &again, &mut restored)?;
        Ok(head)
    }

    /// Step 1 for one record.
    fn glance(&self, pass: &mut Pass, seq: u64, line: &[u8]) -> Result<(), String> {
        let g: Glance =
            serde_json::from_slice(line).map_err(|e| format!("not an audit record: {e}"))?;
        if g.kind == Kind::Policy {
            return self.replay(line, true).map(|_| ());
        }
        let (Some(tenant), Some(session)) = (g.tenant, g.session) else {
            pass.again.push(seq);
            return Ok(());
        };
        let key = (tenant, session);
        self.evict.note(&g.kind, key.clone(), seq);
        let track = pass.tracks.entry(key).or_default();
        match g.kind {
            Kind::Event => {
                track.events += 1;
                match (track.ledger_hash.as_mut(), g.ledger_hash.as_deref()) {
                    (Some(last), Some(now)) => {
                        last.clear();
                        last.push_str(now);
                    }
                    (_, now) => track.ledger_hash = now.map(str::to_string),
                }
                track
                    .notes
                    .push((seq, leaves(g.event.as_ref(), g.verdict.as_deref())));
            }
            Kind::Snapshot => {
                let Some(snapshot) = g.snapshot else {
                    snapshot::warn(seq, "a snapshot record without its state");
                    return Ok(());
                };
                let ledger_hash = g.ledger_hash.as_deref();
                let seen = (track.events, track.ledger_hash.as_deref());
                match snapshot::matches(&snapshot, ledger_hash, seen) {
                    Ok(()) => {
                        track.chosen = Some(snapshot::Chosen {
                            seq,
                            snapshot,
                            ledger_hash: ledger_hash.unwrap_or_default().to_string(),
                            policy_hash: g.policy_hash.into_owned(),
                        });
                    }
                    Err(why) => snapshot::warn(seq, &why),
                }
            }
            Kind::Session => {
                track.opened = Some((seq, g.policy_hash.into_owned(), g.window));
                pass.again.push(seq);
            }
            Kind::Closed => {
                track.chosen = None;
                pass.again.push(seq);
            }
            _ => pass.again.push(seq),
        }
        Ok(())
    }

    /// Step 2: restores each chosen snapshot; returns the restored sessions
    /// and the records to read again, in log order.
    fn restore_all(&self, pass: Pass) -> (HashMap<Key, Restored>, Vec<u64>) {
        let mut again = pass.again;
        let mut restored = HashMap::new();
        let mut skipped = 0;
        for (key, track) in pass.tracks {
            // A snapshot of a session whose `session` record does not
            // precede it is never used (the log fails elsewhere anyway).
            let opened = track.opened.as_ref();
            let chosen = track
                .chosen
                .filter(|c| opened.is_some_and(|&(at, _, _)| at < c.seq));
            let session = chosen.as_ref().and_then(|c| {
                self.restored_session(&key, c, opened)
                    .map_err(|why| snapshot::warn(c.seq, &why))
                    .ok()
            });
            let (Some(session), Some(c)) = (session, chosen) else {
                again.extend(track.notes.iter().map(|&(seq, _)| seq));
                continue;
            };
            let mut used = Vec::new();
            for (seq, left) in track.notes {
                match left {
                    _ if seq > c.seq => again.push(seq),
                    Leaves::Nothing => {}
                    Leaves::Used(id) => used.push(id),
                    Leaves::More => again.push(seq),
                }
                skipped += u64::from(seq < c.seq);
            }
            let upto = c.seq;
            restored.insert(
                key,
                Restored {
                    session,
                    upto,
                    used,
                },
            );
        }
        again.sort_unstable();
        self.snapshot_stats.add(restored.len() as u64, skipped);
        (restored, again)
    }

    /// The session `c` captured, for the session `key` opened by `opened`
    /// (its record's number, policy hash and window).
    fn restored_session(
        &self,
        key: &Key,
        c: &snapshot::Chosen,
        opened: Option<&(u64, String, Option<u64>)>,
    ) -> Result<Session, String> {
        let Some((at, opened_under, window)) = opened else {
            return Err("no session record precedes it".into());
        };
        if c.policy_hash != *opened_under {
            return Err(format!(
                "taken under policy {}, the session was opened under {opened_under}",
                c.policy_hash
            ));
        }
        let policy = self
            .policies
            .read()
            .map_err(|_| "poisoned")?
            .find(opened_under)
            .ok_or_else(|| format!("session record {at} names an unknown policy"))?;
        if pooled_policy(policy.policy()) {
            return Err("the session's policy draws on its tenant's pools".into());
        }
        // The options its `session` record opens it with (`Entry::opened`).
        let options = session_options(*window, &self.lane(&key.0).pool);
        snapshot::rebuild(&policy, options, Some((&c.snapshot, &c.ledger_hash)))
    }

    /// Step 3: the records left to apply, read again by number.
    fn apply_again(
        &self,
        log: &Log,
        noted: &Noted,
        again: &[u64],
        restored: &mut HashMap<Key, Restored>,
    ) -> Result<(), StoreError> {
        let mut upto: HashMap<Key, u64> = HashMap::new();
        log.reread(noted, again, &mut |seq, line| {
            self.apply_line(seq, line, restored, &mut upto)
                .map_err(|reason| StoreError::Diverged { seq, reason })
        })
    }

    fn apply_line(
        &self,
        seq: u64,
        line: &[u8],
        restored: &mut HashMap<Key, Restored>,
        upto: &mut HashMap<Key, u64>,
    ) -> Result<(), String> {
        let h: snapshot::Header =
            serde_json::from_slice(line).map_err(|e| format!("not an audit record: {e}"))?;
        let key = match (&h.tenant, &h.session) {
            (Some(t), Some(s)) => (t.clone(), s.clone()),
            _ => return self.replay(line, true).map(|_| ()),
        };
        match h.kind {
            Kind::Session => {
                self.replay(line, true)?;
                if let Some(r) = restored.remove(&key) {
                    let entry = self.entry_of(&key)?;
                    let mut e = entry.lock().map_err(|_| "poisoned")?;
                    e.session = r.session;
                    e.used.extend(r.used);
                    upto.insert(key, r.upto);
                }
                Ok(())
            }
            Kind::Event if upto.get(&key).is_some_and(|&u| seq < u) => self.skip(&key, h, line),
            _ => self.replay(line, true).map(|_| ()),
        }
    }
}

/// What a covered event record leaves behind (see `Shared::skip`, which
/// handles [`Leaves::More`]).
fn leaves(event: Option<&GlancedEvent<'_>>, verdict: Option<&str>) -> Leaves {
    let Some(event) = event else {
        return Leaves::More;
    };
    match (event.kind.as_ref(), verdict) {
        ("call", v) if v != Some(Verdict::Pause.as_str()) => match &event.id {
            Some(id) => Leaves::Used(id_hash(id)),
            None => Leaves::More,
        },
        ("result" | "task", _) => Leaves::Nothing,
        _ => Leaves::More,
    }
}
