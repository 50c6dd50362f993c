//! Closing a session (`DELETE /v1/sessions/{id}`): an audit record
//! `closed`; the session's memory is freed, its units stay spent (the
//! tenant's pools are untouched), its paused calls leave the approval
//! queue with their reserved units spent, and every later request naming
//! it is a 409. Recovery replays the record, so it stays closed.

use super::{now_ms, Emit, Gateway, Key, Shared, Sink, DEFAULT_TENANT};
use crate::api::{check_name, ApiError};
use agenra_store::{Kind, Record};
use serde::Serialize;

/// The answer to `DELETE /v1/sessions/{id}`.
#[derive(Clone, Debug, Serialize)]
pub struct ClosedView {
    /// The tenant.
    pub tenant: String,
    /// The session.
    pub session: String,
    /// Always true.
    pub closed: bool,
    /// Events the session had applied.
    pub events: u64,
    /// Its ledger hash when it closed.
    pub ledger_hash: String,
    /// Calls that were paused for approval: they will never run, and
    /// their reserved units stay spent.
    pub dropped_pending: Vec<String>,
    /// False when the request found it already closed (a retry): no new
    /// record.
    pub newly: bool,
    /// The `closed` record's position in the audit log (absent for a retry).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit_seq: Option<u64>,
}

impl Shared {
    /// A 409 when `tenant`'s session `session` was closed.
    pub(super) fn check_not_closed(&self, tenant: &str, session: &str) -> Result<(), ApiError> {
        let key: Key = (tenant.to_string(), session.to_string());
        let closed = self
            .closed
            .read()
            .map_err(|_| ApiError::new(500, "closed-session table poisoned"))?
            .contains(&key);
        if closed {
            return Err(ApiError::field(
                409,
                "session",
                format!(
                    "session `{session}` of tenant `{tenant}` is closed (DELETE /v1/sessions): \
                     it takes no more events and its id cannot be reopened; open a new session"
                ),
            ));
        }
        Ok(())
    }

    /// Drops the session from memory and its paused calls from the
    /// approval queue, and marks it closed (recovery). Returns the dropped
    /// calls.
    pub(super) fn forget(&self, tenant: &str, session: &str) -> Result<Vec<String>, ApiError> {
        let key: Key = (tenant.to_string(), session.to_string());
        let mut sessions = self
            .sessions
            .write()
            .map_err(|_| ApiError::new(500, "session table poisoned"))?;
        sessions.remove(&key);
        self.mark_closed(key)?;
        drop(sessions);
        Ok(self.drop_pending(tenant, session))
    }

    fn mark_closed(&self, key: Key) -> Result<(), ApiError> {
        self.closed
            .write()
            .map_err(|_| ApiError::new(500, "closed-session table poisoned"))?
            .insert(key);
        Ok(())
    }

    fn drop_pending(&self, tenant: &str, session: &str) -> Vec<String> {
        let mut dropped = Vec::new();
        if let Ok(mut p) = self.pending.lock() {
            p.retain(|(t, s, call), _| {
                let ours = t == tenant && s == session;
                if ours {
                    dropped.push(call.clone());
                }
                !ours
            });
        }
        dropped
    }

    fn close_session(
        &self,
        sink: &Sink<'_>,
        tenant: String,
        id: String,
        actor: String,
    ) -> Result<Emit<ClosedView>, ApiError> {
        let key: Key = (tenant.clone(), id.clone());
        // An evicted session is closed like a live one: reloaded first.
        self.reload(&key)?;
        // Under the table's write lock: no request finds the entry between
        // the record and its removal.
        let mut sessions = self
            .sessions
            .write()
            .map_err(|_| ApiError::new(500, "session table poisoned"))?;
        super::evict::check_not_evicted(&self.evict, &key)?;
        let already = self
            .closed
            .read()
            .map_err(|_| ApiError::new(500, "closed-session table poisoned"))?
            .contains(&key);
        if already {
            let view = ClosedView {
                tenant,
                session: id,
                closed: true,
                events: 0,
                ledger_hash: String::new(),
                dropped_pending: Vec::new(),
                newly: false,
                audit_seq: None,
            };
            return Ok(sink.emit(None, view));
        }
        let entry = sessions.get(&key).cloned().ok_or_else(|| {
            ApiError::field(
                404,
                "session",
                format!("unknown session `{id}` of tenant `{tenant}`"),
            )
        })?;
        // The session's lock, held until the record is emitted: an event
        // applied before has emitted its record already, and a request
        // waiting for the lock finds the session closed once it has it
        // (`Shared::run` checks again).
        let e = entry
            .lock()
            .map_err(|_| ApiError::new(500, "session poisoned"))?;
        let state = e.session.state();
        let (events, ledger_hash) = (state.seq, state.ledger_hash().to_string());
        let policy_hash = e.session.policy_hash().to_string();
        sessions.remove(&key);
        self.mark_closed(key)?;
        let paused: Vec<String> = self
            .pending
            .lock()
            .map(|p| {
                p.keys()
                    .filter(|(t, s, _)| *t == tenant && *s == id)
                    .map(|(_, _, c)| c.clone())
                    .collect()
            })
            .unwrap_or_default();
        let record = Record {
            time_ms: now_ms(),
            kind: Kind::Closed,
            tenant: Some(tenant.clone()),
            session: Some(id.clone()),
            policy_hash,
            ledger_hash: Some(ledger_hash.clone()),
            actor: Some(actor),
            path: paused,
            ..Record::default()
        };
        let view = ClosedView {
            tenant: tenant.clone(),
            session: id.clone(),
            closed: true,
            events,
            ledger_hash,
            dropped_pending: record.path.clone(),
            newly: true,
            audit_seq: None,
        };
        let emitted = sink.emit(Some(record), view);
        drop(e);
        drop(sessions);
        self.drop_pending(&tenant, &id);
        Ok(emitted)
    }
}

impl Gateway {
    /// `DELETE /v1/sessions/{id}`: closes the session as `actor` (the
    /// caller's `role:name`). Answered once the `closed` record is
    /// durable; a retry of a closed session is answered without a record.
    pub fn close_session(
        &self,
        tenant: Option<String>,
        session: &str,
        actor: String,
    ) -> Result<super::Pending<ClosedView>, ApiError> {
        let tenant = tenant.unwrap_or_else(|| DEFAULT_TENANT.to_string());
        check_name("tenant", &tenant)?;
        check_name("session", session)?;
        let id = session.to_string();
        let target = Some((tenant.clone(), id.clone()));
        self.exec_on(target, move |shared, sink| {
            shared.close_session(sink, tenant, id, actor)
        })
    }
}
