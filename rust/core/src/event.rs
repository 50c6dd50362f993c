//! Session events, as a gateway or a trace file reports them
//! (`docs/events.md`). Unknown fields are rejected so that a misspelled
//! `lineage` can never silently widen a flow, and so are duplicate keys at
//! any depth (`crate::strict`): an ambiguous event is never decided.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// An agent asks to call a tool.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Call {
    /// The session the event belongs to (default: one implicit session).
    /// Each session has its own graph and ledger.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Unique within the session; results and approvals name it.
    pub id: String,
    /// Seconds; never less than the previous event's time.
    pub time: u64,
    /// The calling agent (default: `main`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The tool's name, as the policy declares it.
    pub tool: String,
    /// Arguments by parameter name. Every required parameter must be present with its declared
    /// type; an optional one may be absent or `null`.
    #[serde(default, deserialize_with = "crate::strict::object")]
    pub args: serde_json::Map<String, serde_json::Value>,
    /// Observed lineage: for each argument, the calls whose outputs it came
    /// from. An argument not listed gets the conservative edge from
    /// everything the session has read.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "crate::strict::lists"
    )]
    pub lineage: BTreeMap<String, Vec<String>>,
    /// Inferred lineage: recorded for audit, never used to narrow a flow.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "crate::strict::lists"
    )]
    pub inferred: BTreeMap<String, Vec<String>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
/// How a call that ran ended, as its result reports it.
pub enum Outcome {
    /// The call ran; its output is labeled and what it discovered is added.
    Succeeded,
    /// The call had no effect: its units are returned.
    Failed,
    /// Nobody knows whether it had an effect: its units stay spent and its
    /// output is assumed read.
    Unknown,
}

/// The result of an admitted call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    /// The session the event belongs to (default: one implicit session).
    /// Each session has its own graph and ledger.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The id of the call this is the result of.
    pub call: String,
    /// Seconds (default: the previous event's time); never less than it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<u64>,
    /// How the call ended: decides whether its units come back and its output is read.
    pub status: Outcome,
    /// The tool's output, for `fact ... when output.FIELD ...` tests.
    #[serde(
        default,
        skip_serializing_if = "serde_json::Value::is_null",
        deserialize_with = "crate::strict::value"
    )]
    pub output: serde_json::Value,
    /// Resources the result discovered (e.g. contact addresses).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub discovered: Vec<String>,
}

impl Call {
    /// A call of `tool` with id `id` at `time`, by `main`, without
    /// arguments or lineage; add them with the builder methods.
    ///
    /// ```
    /// use agenra_core::Call;
    /// use serde_json::json;
    /// let call = Call::new("c1", "email.send", 10)
    ///     .arg("to", json!("alice@example.com"))
    ///     .arg("body", json!("the report"))
    ///     .lineage("body", ["c0"]);
    /// assert_eq!(call.args["to"], json!("alice@example.com"));
    /// assert_eq!(call.lineage["body"], ["c0"]);
    /// ```
    pub fn new(id: impl Into<String>, tool: impl Into<String>, time: u64) -> Call {
        Call {
            session: None,
            id: id.into(),
            time,
            agent: None,
            tool: tool.into(),
            args: serde_json::Map::new(),
            lineage: BTreeMap::new(),
            inferred: BTreeMap::new(),
        }
    }

    /// Sets argument `name` (a later value for the same name replaces it).
    pub fn arg(mut self, name: impl Into<String>, value: serde_json::Value) -> Call {
        self.args.insert(name.into(), value);
        self
    }

    /// The calling agent (default: `main`).
    pub fn agent(mut self, agent: impl Into<String>) -> Call {
        self.agent = Some(agent.into());
        self
    }

    /// Observed lineage of argument `param`: the calls (or tasks) whose
    /// outputs it came from.
    pub fn lineage<I, S>(mut self, param: impl Into<String>, sources: I) -> Call
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.lineage
            .insert(param.into(), sources.into_iter().map(Into::into).collect());
        self
    }

    /// The session the call belongs to (for multi-session traces).
    pub fn in_session(mut self, session: impl Into<String>) -> Call {
        self.session = Some(session.into());
        self
    }
}

impl Report {
    /// The result of call `call` with `status`, at the previous event's
    /// time, without output or discovered resources.
    ///
    /// ```
    /// use agenra_core::{event::Outcome, Report};
    /// use serde_json::json;
    /// let ok = Report::succeeded("c1").output(json!({"id": 7})).discovered(["bob@example.com"]);
    /// assert_eq!(ok.status, Outcome::Succeeded);
    /// assert_eq!(Report::failed("c2").status, Outcome::Failed);
    /// ```
    pub fn new(call: impl Into<String>, status: Outcome) -> Report {
        Report {
            session: None,
            call: call.into(),
            time: None,
            status,
            output: serde_json::Value::Null,
            discovered: Vec::new(),
        }
    }

    /// `succeeded`: the output is labeled and what it discovered is added.
    pub fn succeeded(call: impl Into<String>) -> Report {
        Report::new(call, Outcome::Succeeded)
    }

    /// `failed`: the call had no effect and its units are returned.
    pub fn failed(call: impl Into<String>) -> Report {
        Report::new(call, Outcome::Failed)
    }

    /// `unknown`: the units stay spent and the output is assumed read.
    pub fn unknown(call: impl Into<String>) -> Report {
        Report::new(call, Outcome::Unknown)
    }

    /// The tool's output.
    pub fn output(mut self, output: serde_json::Value) -> Report {
        self.output = output;
        self
    }

    /// Resources the result discovered.
    pub fn discovered<I, S>(mut self, values: I) -> Report
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.discovered = values.into_iter().map(Into::into).collect();
        self
    }

    /// The time of the result (default: the previous event's).
    pub fn at(mut self, time: u64) -> Report {
        self.time = Some(time);
        self
    }

    /// The session the result belongs to.
    pub fn in_session(mut self, session: impl Into<String>) -> Report {
        self.session = Some(session.into());
        self
    }
}

/// A human's answer to a PAUSE.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resolve {
    /// The session the event belongs to (default: one implicit session).
    /// Each session has its own graph and ledger.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The id of the paused call.
    pub call: String,
    /// Seconds (default: the previous event's time); never less than it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<u64>,
}

/// The user's request: trusted text the agent works from. It may seed
/// discovered sets the policy lets tasks seed, and open a task scope.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// The session the event belongs to (default: one implicit session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Unique within the session, in the same namespace as call ids: lineage
    /// may name the task.
    pub id: String,
    /// Seconds (default: the previous event's time); never less than it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<u64>,
    /// What the user asked, verbatim.
    pub text: String,
    /// Values for discovered sets (`task seeds SET;` in the policy), e.g.
    /// the recipients the user named.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "crate::strict::lists"
    )]
    pub sets: BTreeMap<String, Vec<String>>,
    /// What this task may use; narrows the policy's static scopes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<TaskScope>,
}

/// A task scope. Every part is optional; globs use `*` and `?`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskScope {
    /// Tool-name globs the task may call (absent: any tool the policy allows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Tool-name globs the task must not call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forbid: Vec<String>,
    /// Globs over the resource argument of calls that have one (absent: any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<String>>,
    /// Resource globs the task must not touch.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forbid_resources: Vec<String>,
}

impl TaskScope {
    /// Why a call is outside the scope: `Some(true)` when a `forbid` list
    /// excludes it, `Some(false)` when an allow list does not include it.
    pub fn excludes(&self, tool: &str, resource: Option<&str>) -> Option<bool> {
        use crate::pattern::glob_matches;
        if self.forbid.iter().any(|g| glob_matches(g, tool)) {
            return Some(true);
        }
        if let Some(r) = resource {
            if self.forbid_resources.iter().any(|g| glob_matches(g, r)) {
                return Some(true);
            }
            if let Some(allowed) = &self.resources {
                if !allowed.iter().any(|g| glob_matches(g, r)) {
                    return Some(false);
                }
            }
        }
        match &self.tools {
            Some(allowed) if !allowed.iter().any(|g| glob_matches(g, tool)) => Some(false),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", try_from = "Unchecked")]
/// One event of a session, tagged by `kind` in JSON (`call`, `result`, `approve`, `reject`,
/// `task`). Decoding it checks its ids and names ([`Event::check_identifiers`]):
/// an id with a control, bidirectional or invisible character is an error
/// (`crate::ident`).
pub enum Event {
    /// An agent asks to call a tool: the monitor decides.
    Call(Call),
    /// An admitted call's result.
    Result(Report),
    /// A human approves a paused call: it is re-checked, then admitted or denied.
    Approve(Resolve),
    /// A human rejects a paused call: its reserved units come back.
    Reject(Resolve),
    /// The user's request.
    Task(Task),
}

/// An event as JSON holds it, before its identifiers are checked
/// ([`Event::from_recorded`] keeps it so).
#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub(crate) enum Unchecked {
    Call(Call),
    Result(Report),
    Approve(Resolve),
    Reject(Resolve),
    Task(Task),
}

impl Unchecked {
    pub(crate) fn into_event(self) -> Event {
        match self {
            Unchecked::Call(c) => Event::Call(c),
            Unchecked::Result(r) => Event::Result(r),
            Unchecked::Approve(a) => Event::Approve(a),
            Unchecked::Reject(a) => Event::Reject(a),
            Unchecked::Task(t) => Event::Task(t),
        }
    }
}

impl Event {
    /// The session the event names (`None`: the implicit session).
    pub fn session(&self) -> Option<&str> {
        match self {
            Event::Call(c) => c.session.as_deref(),
            Event::Result(r) => r.session.as_deref(),
            Event::Approve(a) | Event::Reject(a) => a.session.as_deref(),
            Event::Task(t) => t.session.as_deref(),
        }
    }

    /// The event's `kind` tag, as in JSON.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Call(_) => "call",
            Event::Result(_) => "result",
            Event::Approve(_) => "approve",
            Event::Reject(_) => "reject",
            Event::Task(_) => "task",
        }
    }
}
