//! Settling paused calls, and the approval endpoints over the proxy's session.

use super::*;

/// How a waiting call is settled.
#[derive(Clone, Copy, Debug)]
pub(super) enum Settle {
    /// A human approved it: the monitor re-checks it.
    Approve,
    /// It is rejected: its units come back.
    Reject(Why),
}

/// Who settles a waiting call, with what they were shown and why.
pub(super) struct By {
    /// `role:name` of the approver's credential, or `server:mcp-proxy`.
    pub(super) actor: String,
    pub(super) digest: Option<String>,
    pub(super) reason: Option<String>,
    /// The time the approver's client claimed (recorded only).
    pub(super) time: Option<u64>,
}

impl By {
    /// The proxy itself (a timeout, a cancellation, a resumed session).
    pub(super) fn proxy(reason: &str) -> By {
        By {
            actor: "server:mcp-proxy".into(),
            digest: None,
            reason: Some(reason.into()),
            time: None,
        }
    }
}

/// Settles the waiting call `call` (the gateway's clock gives the time):
/// the approval or rejection goes to the monitor, then the client gets
/// its answer (an approved call admitted at re-check is forwarded, and
/// answered by the server). `Err` (nothing changed) when the call is not
/// waiting, or the monitor refuses the event.
pub(super) fn settle(
    proxy: &Proxy,
    call: &str,
    how: Settle,
    by: &By,
) -> Result<ApiOutcome, ApiError> {
    let mut st = lock(&proxy.state);
    if !st.waiting.contains_key(call) {
        // Listing the session's calls is not done under the state lock.
        drop(st);
        let known = proxy
            .calls()
            .is_ok_and(|calls| calls.iter().any(|(id, _)| id == call));
        return Err(if known {
            ApiError::field(
                409,
                "call",
                format!("call `{call}` does not wait for approval (it was settled already)"),
            )
        } else {
            ApiError::field(
                404,
                "call",
                format!(
                    "no call `{call}` of tenant `{}` waits for approval",
                    proxy.tenant
                ),
            )
        });
    }
    let outcome = proxy.resolve(call, by, matches!(how, Settle::Approve))?;
    // An approval that came after the pause expired was turned into a
    // rejection by the gateway.
    let how = match (how, outcome.kind) {
        (Settle::Approve, "reject") => Settle::Reject(Why::TimedOut(proxy.wait.unwrap_or(0))),
        (how, _) => how,
    };
    let Some(w) = st.waiting.remove(call) else {
        return Ok(outcome); // checked above, under the same lock
    };
    st.waiting_keys.remove(&w.key);
    let verdict = outcome.decision;
    let paused = format!("agenra: PAUSE by rule `{}`: {}", w.rule, w.reason);
    match (how, verdict) {
        (Settle::Approve, Some(v)) if v == Verdict::Allow.as_str() => {
            log(&format!("call {call} ({}) approved; forwarded", w.tool));
            st.pending
                .insert(w.key.clone(), Inflight::Call(call.to_string()));
            drop(st);
            if !to_server(proxy, &w.line) {
                // The server is gone: the call never ran, its unit returns.
                let mut st = lock(&proxy.state);
                st.pending.remove(&w.key);
                if let Err(e) = proxy.report(call, Outcome::Failed, Value::Null) {
                    log(&format!(
                        "call {call}: cannot report its result: {}",
                        e.error
                    ));
                }
                drop(st);
                log(&format!(
                    "call {call}: approved, but the server's input is closed"
                ));
                proxy.send_client(
                    tool_error(
                        &w.id,
                        "agenra: approved, but the MCP server's input is closed, so it was not run",
                    )
                    .as_bytes(),
                );
            }
        }
        (Settle::Approve, Some(v)) if v == Verdict::Pause.as_str() => {
            // Not expected (an approval admits or denies); keep waiting.
            st.waiting_keys.insert(w.key.clone(), call.to_string());
            st.waiting.insert(call.to_string(), w);
        }
        (Settle::Approve, _) => {
            drop(st);
            log(&format!(
                "call {call} ({}) approved, but DENY at re-check by `{}`: {}",
                w.tool,
                outcome.rule.as_deref().unwrap_or("?"),
                outcome.reason
            ));
            proxy.send_client(
                tool_error(
                    &w.id,
                    &format!(
                        "agenra: DENY by rule `{}` (approved by a human, then re-checked): {}",
                        outcome.rule.as_deref().unwrap_or("?"),
                        outcome.reason
                    ),
                )
                .as_bytes(),
            );
        }
        (Settle::Reject(why), _) => {
            drop(st);
            let text = match why {
                Why::Human => format!(
                    "{paused}; a human rejected it (POST /v1/approvals/{call}/reject), \
                     so it was not run"
                ),
                Why::TimedOut(secs) => format!(
                    "{paused}; no approval came within {secs} s, so it timed out and \
                     was rejected; it was not run"
                ),
                Why::Cancelled | Why::ClientGone => String::new(),
            };
            log(&format!("call {call} ({}) rejected: {why:?}", w.tool));
            // A cancelled request gets no answer (MCP); a gone client neither.
            if !text.is_empty() {
                proxy.send_client(tool_error(&w.id, &text).as_bytes());
            }
        }
    }
    Ok(outcome)
}

/// The approval endpoints (`agenra_gateway::desk`) over the proxy's one
/// session (`--tenant`, `--session`; by default `default` and `mcp-proxy`).
impl ApprovalDesk for Proxy {
    fn health(&self) -> Health {
        let st = lock(&self.state);
        Health {
            status: if self.gateway.is_failed() {
                "failed"
            } else {
                "ok"
            },
            policy_hash: self.policy_hash.clone(),
            sessions: 1,
            pending_approvals: st.waiting.len(),
        }
    }

    fn approvals(&self, tenant: Option<String>) -> Result<Vec<PendingCall>, ApiError> {
        let tenant = tenant.unwrap_or_else(|| DEFAULT_TENANT.to_string());
        check_name("tenant", &tenant)?;
        if tenant != self.tenant {
            return Ok(Vec::new());
        }
        // The gateway's view (digest, expiry, arguments) of the calls this
        // proxy holds, listed without holding the state lock (which every
        // client line takes); the lock is then taken once to filter.
        let mut calls: Vec<PendingCall> = self
            .gateway
            .approvals(Some(tenant))?
            .into_iter()
            .filter(|p| p.session == self.session)
            .collect();
        let st = lock(&self.state);
        calls.retain(|p| st.waiting.contains_key(&p.call));
        calls.sort_by_key(|p| st.waiting.get(&p.call).map_or(0, |w| w.seq));
        Ok(calls)
    }

    /// The approvals page: this proxy's calls when `keep` accepts its
    /// tenant (whatever the tenant is called), none otherwise.
    fn approvals_where(&self, keep: &dyn Fn(&str) -> bool) -> Result<Vec<PendingCall>, ApiError> {
        if !keep(&self.tenant) {
            return Ok(Vec::new());
        }
        let mut calls = self.approvals(Some(self.tenant.clone()))?;
        calls.reverse();
        Ok(calls)
    }

    /// The approvals page's recent calls, for this proxy's session only.
    fn recent_calls(
        &self,
        tenant: &str,
        session: &str,
        n: usize,
    ) -> Result<Vec<agenra_gateway::state::RecentCall>, ApiError> {
        if tenant != self.tenant || session != self.session {
            return Ok(Vec::new());
        }
        self.gateway.recent_calls(tenant, session, n)
    }

    fn refused(&self, r: agenra_gateway::perimeter::Refusal) {
        self.gateway.record_refusal(r);
    }

    fn resolve(
        &self,
        call: String,
        req: ResolveIn,
        approve: bool,
        actor: &str,
    ) -> Result<ApiOutcome, ApiError> {
        let tenant = req.tenant.unwrap_or_else(|| DEFAULT_TENANT.to_string());
        check_name("tenant", &tenant)?;
        if let Some(session) = &req.session {
            check_name("session", session)?;
            if tenant != self.tenant || *session != self.session {
                return Err(ApiError::field(
                    404,
                    "session",
                    format!(
                        "unknown session `{session}` of tenant `{tenant}` \
                         (this MCP proxy has only session `{}` of tenant `{}`)",
                        self.session, self.tenant
                    ),
                ));
            }
        }
        if tenant != self.tenant {
            return Err(ApiError::field(
                404,
                "call",
                format!("no call `{call}` of tenant `{tenant}` waits for approval"),
            ));
        }
        let how = if approve {
            Settle::Approve
        } else {
            Settle::Reject(Why::Human)
        };
        let by = By {
            actor: actor.to_string(),
            digest: req.digest,
            reason: req.reason,
            time: req.time,
        };
        settle(self, &call, how, &by)
    }
}
