//! Running events through the monitor, and the records it produces.
//!
//! [`Stepper::step_line`] is the one per-line step shared by `agenra replay`
//! (a whole file, stopping at the first error), `agenra explain` and
//! `agenra monitor` (standard input, going on after errors): parse one
//! event line, apply it to its session, and describe it as a [`Record`] or
//! say why it could not apply.

use crate::sessions::{SessionError, Sessions};
use crate::trace::{parse_line, LineParseError};
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

/// Why an event line gave no record. The sessions are unchanged by it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    /// The line is not an event.
    #[error(transparent)]
    Parse(#[from] LineParseError),
    /// The event cannot apply (unknown call or session, wrong state, ...).
    #[error(transparent)]
    Apply(#[from] SessionError),
}

/// The first error of a replayed trace file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayError {
    pub path: PathBuf,
    pub line: usize,
    /// How many events were applied before the failing one.
    pub applied: usize,
    pub source: LineError,
}

impl std::fmt::Display for ReplayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = self.path.display();
        match &self.source {
            LineError::Parse(e) => {
                write!(f, "{path}:{}:{}: {}", self.line, e.column, e.message)
            }
            LineError::Apply(e) => write!(f, "{path}:{}: {e}", self.line),
        }
    }
}

impl std::error::Error for ReplayError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

fn call_of(event: &Event) -> &str {
    match event {
        Event::Call(c) => &c.id,
        Event::Result(r) => &r.call,
        Event::Approve(a) | Event::Reject(a) => &a.call,
        Event::Task(t) => &t.id,
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
                .state()
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
            // Built now, right after the step (the node is always there).
            path: monitor.path(&d).unwrap_or_default(),
            // Units taken, or (an approval that DENYs) given back.
            grants: grant_names(if d.refunded.is_empty() {
                &d.grants
            } else {
                &d.refunded
            }),
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
            reason: a.reason_text(policy),
            path: vec![],
            grants: grant_names(&a.refunded),
            node: a.node,
            policy_hash,
            ledger_hash: a.ledger_hash.to_string(),
        },
    })
}

/// Sessions fed one event line at a time, numbering the applied events.
#[derive(Debug, Clone)]
pub struct Stepper {
    sessions: Sessions,
    applied: u64,
}

impl Stepper {
    pub fn new(sessions: Sessions) -> Stepper {
        Stepper {
            sessions,
            applied: 0,
        }
    }

    pub fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    /// How many events have been applied.
    pub fn applied(&self) -> u64 {
        self.applied
    }

    /// The `seq` the next applied event gets (an event that fails does not
    /// take a number: the next one gets the same).
    pub fn next_seq(&self) -> u64 {
        self.applied + 1
    }

    /// The step of `replay`, `explain` and `monitor`: parses one trace line
    /// and applies it. `None` for a blank or `//` line; on an error the
    /// sessions are unchanged.
    pub fn step_line(&mut self, line: &str) -> Option<Result<Record, LineError>> {
        match parse_line(line) {
            Ok(None) => None,
            Ok(Some(event)) => Some(self.step_event(&event)),
            Err(e) => Some(Err(e.into())),
        }
    }

    /// Applies one parsed event (the second half of [`Stepper::step_line`]).
    pub fn step_event(&mut self, event: &Event) -> Result<Record, LineError> {
        let seq = self.next_seq();
        let record = apply(&mut self.sessions, seq, event)?;
        self.applied += 1;
        Ok(record)
    }
}

/// Replays the text of a trace file line by line, stopping at the first
/// error; `path` only names the file in the error.
pub fn replay(
    stepper: &mut Stepper,
    path: &Path,
    text: &str,
) -> Result<Vec<Record>, (Vec<Record>, ReplayError)> {
    let mut records = Vec::new();
    for (i, line) in text.lines().enumerate() {
        match stepper.step_line(line) {
            None => {}
            Some(Ok(record)) => records.push(record),
            Some(Err(source)) => {
                let applied = records.len();
                return Err((
                    records,
                    ReplayError {
                        path: path.to_path_buf(),
                        line: i + 1,
                        applied,
                        source,
                    },
                ));
            }
        }
    }
    Ok(records)
}
