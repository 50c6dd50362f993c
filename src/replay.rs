//! Running a trace through the monitor, and the records it produces.

use crate::sessions::{SessionError, Sessions};
use crate::trace::TraceEvent;
use agenra_core::decision::{Rule, StepOutput};
use agenra_core::graph::NodeId;
use agenra_core::{Event, Verdict};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// What happened at one event: the JSON object `replay --json` prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Record {
    /// 1-based position of the event in the trace.
    pub seq: u64,
    /// The event's session (absent: the default session).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    pub kind: &'static str,
    /// The call the event is about.
    pub call: String,
    /// The call's tool (as the event named it, for calls).
    pub tool: Option<String>,
    /// ALLOW / DENY / PAUSE for calls; null otherwise.
    pub decision: Option<Verdict>,
    /// The grant or rule that decided (or that the event concerns).
    pub rule: Option<String>,
    pub reason: String,
    /// The violation's node ids (see `docs/events.md`).
    pub path: Vec<NodeId>,
    /// Grants whose units the call took (calls) or got back (results, rejections).
    pub grants: Vec<String>,
    pub node: NodeId,
    pub policy_hash: String,
    pub ledger_hash: String,
}

#[derive(Debug, thiserror::Error)]
#[error("{path}:{line}: error: {source}")]
pub struct ReplayError {
    pub path: PathBuf,
    pub line: usize,
    /// How many events were applied before the failing one.
    pub applied: usize,
    #[source]
    pub source: SessionError,
}

fn call_of(event: &Event) -> &str {
    match event {
        Event::Call(c) => &c.id,
        Event::Result(r) => &r.call,
        Event::Approve(a) | Event::Reject(a) => &a.call,
    }
}

/// Applies one event to its session and describes it.
pub fn apply(sessions: &mut Sessions, seq: u64, event: &Event) -> Result<Record, SessionError> {
    let out = sessions.step(event)?;
    let session = event.session().map(str::to_string);
    let monitor = sessions
        .get(event.session())
        .ok_or_else(|| SessionError::UnknownSession(session.clone().unwrap_or_default()))?;
    let policy = monitor.policy();
    let grant_names = |ids: &[usize]| -> Vec<String> {
        ids.iter()
            .filter_map(|&g| policy.grants.get(g).map(|g| g.name.clone()))
            .collect()
    };
    let policy_hash = monitor.policy_hash().to_string();
    let tool_of = |node: NodeId| -> Option<String> {
        match event {
            Event::Call(c) => Some(c.tool.clone()),
            _ => monitor
                .session()
                .graph
                .node(node)
                .and_then(|n| policy.tools.get(n.tool as usize))
                .map(|t| t.name.clone()),
        }
    };
    Ok(match out {
        StepOutput::Decision(d) => Record {
            seq,
            session,
            kind: event.kind(),
            call: call_of(event).to_string(),
            tool: tool_of(d.node),
            decision: Some(d.verdict),
            rule: Some(d.rule.name(policy)),
            reason: d.reason_text(policy),
            path: d.path.clone(),
            grants: grant_names(&d.grants),
            node: d.node,
            policy_hash,
            ledger_hash: d.ledger_hash.to_string(),
        },
        StepOutput::Applied(a) => Record {
            seq,
            session,
            kind: event.kind(),
            call: call_of(event).to_string(),
            tool: tool_of(a.node),
            decision: None,
            rule: a.rule.map(|r: Rule| r.name(policy)),
            reason: a.reason.clone(),
            path: vec![],
            grants: grant_names(&a.refunded),
            node: a.node,
            policy_hash,
            ledger_hash: a.ledger_hash.to_string(),
        },
    })
}

/// Replays `events` (optionally only the first `limit`), collecting records.
pub fn replay(
    sessions: &mut Sessions,
    path: &Path,
    events: &[TraceEvent],
    limit: Option<usize>,
) -> Result<Vec<Record>, (Vec<Record>, ReplayError)> {
    let mut records = Vec::with_capacity(events.len());
    for (i, te) in events.iter().take(limit.unwrap_or(usize::MAX)).enumerate() {
        match apply(sessions, i as u64 + 1, &te.event) {
            Ok(r) => records.push(r),
            Err(source) => {
                let applied = records.len();
                return Err((
                    records,
                    ReplayError {
                        path: path.to_path_buf(),
                        line: te.line,
                        applied,
                        source,
                    },
                ));
            }
        }
    }
    Ok(records)
}
