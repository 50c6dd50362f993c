//! Holders of calls paused for a human: the [`ApprovalDesk`] trait the
//! approval endpoints (`desk`) and the approvals page (`page`) are written
//! against, and `agenra serve`'s gateway as one ([`GatewayDesk`]);
//! `agenra mcp-proxy` is another.

use crate::api::{self, ApiError, Health, Outcome, PendingCall};
use crate::perimeter::Refusal;
use std::sync::Arc;

/// Holds calls paused for a human and settles them.
pub trait ApprovalDesk: Send + Sync + 'static {
    /// `GET /health` (answered with 503 unless `status` is `ok`).
    fn health(&self) -> Health;
    /// `GET /v1/approvals?tenant=T`: the tenant's paused calls.
    fn approvals(&self, tenant: Option<String>) -> Result<Vec<PendingCall>, ApiError>;
    /// `POST /v1/approvals/{call}/approve` (`approve` true) or `/reject`,
    /// by `actor` (the approver's `role:name`). May block briefly (it runs
    /// off the async workers).
    fn resolve(
        &self,
        call: String,
        req: api::ResolveIn,
        approve: bool,
        actor: &str,
    ) -> Result<Outcome, ApiError>;
    /// Records a request the perimeter refused.
    fn refused(&self, r: Refusal);

    /// The paused calls of every tenant `keep` accepts, newest first (the
    /// approvals page). By default, the default tenant's, filtered.
    fn approvals_where(&self, keep: &dyn Fn(&str) -> bool) -> Result<Vec<PendingCall>, ApiError> {
        let mut calls: Vec<PendingCall> = self
            .approvals(None)?
            .into_iter()
            .filter(|c| keep(&c.tenant))
            .collect();
        calls.sort_by_key(|c| std::cmp::Reverse(c.time));
        Ok(calls)
    }

    /// The `n` latest calls of a session, newest first (the approvals
    /// page); by default none are known.
    fn recent_calls(
        &self,
        _tenant: &str,
        _session: &str,
        _n: usize,
    ) -> Result<Vec<crate::api::RecentCall>, ApiError> {
        Ok(Vec::new())
    }
}

/// `agenra serve`'s gateway as a desk (the approvals page of
/// [`crate::page`] over it).
pub struct GatewayDesk(pub Arc<crate::Gateway>);

impl ApprovalDesk for GatewayDesk {
    fn health(&self) -> Health {
        let gw = &self.0;
        Health {
            status: if gw.is_failed() { "failed" } else { "ok" },
            policy_hash: gw.current_policy().hash().to_string(),
            sessions: gw.session_count(),
            pending_approvals: gw.pending_count(),
        }
    }

    fn approvals(&self, tenant: Option<String>) -> Result<Vec<PendingCall>, ApiError> {
        self.0.approvals(tenant)
    }

    fn approvals_where(&self, keep: &dyn Fn(&str) -> bool) -> Result<Vec<PendingCall>, ApiError> {
        self.0.approvals_where(keep)
    }

    fn recent_calls(
        &self,
        tenant: &str,
        session: &str,
        n: usize,
    ) -> Result<Vec<crate::api::RecentCall>, ApiError> {
        self.0.recent_calls(tenant, session, n)
    }

    fn resolve(
        &self,
        call: String,
        req: api::ResolveIn,
        approve: bool,
        actor: &str,
    ) -> Result<Outcome, ApiError> {
        let start = std::time::Instant::now();
        let (mut out, seq) = self.0.resolve(call, req, approve, actor)?.wait()?;
        out.audit_seq = seq;
        self.0
            .metrics
            .observe(out.decision, out.replayed, start.elapsed());
        Ok(out)
    }

    fn refused(&self, r: Refusal) {
        self.0.record_refusal(r);
    }
}

/// Settles `call` on `desk` off the async runtime (a settlement waits for
/// its record to be durable), as `actor`; an approval that found the pause
/// expired is the 410 it is.
pub(crate) async fn settle_on(
    desk: Arc<dyn ApprovalDesk>,
    call: String,
    req: api::ResolveIn,
    approve: bool,
    actor: String,
) -> Result<Outcome, ApiError> {
    let out = tokio::task::spawn_blocking(move || desk.resolve(call, req, approve, &actor))
        .await
        .map_err(|e| ApiError::new(500, e.to_string()))??;
    match crate::request::expired(approve, &out) {
        Some(e) => Err(e),
        None => Ok(out),
    }
}
