//! The IR's data types, as JSON (`docs/permission-ir.md`,
//! `docs/permission-ir.schema.json`). Unknown fields are errors at every
//! level, and so are duplicate keys (see [`crate::parse`]).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The only IR version this crate reads and writes.
pub const IR_VERSION: u32 = 1;

/// A task's permissions: what the user asked for, in terms of the policy's
/// tools, sinks, facts and labels, each part linked to its evidence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionIr {
    /// Must be [`IR_VERSION`].
    pub version: u32,
    /// The text and trace the evidence spans point into.
    pub source: Source,
    /// What the user wants done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<Intent>,
    /// Resources and data the task involves.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assets: Vec<Asset>,
    /// The tool calls the task covers; a call no action covers is outside the task.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<Action>,
    /// Facts that must have been observed before an action runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub obligations: Vec<Obligation>,
    /// Scoped allowances: the declassification the task admits into a sink.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowances: Vec<Allowance>,
    /// Calls the task must not make.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forbidden: Vec<Forbidden>,
    /// The policy's sinks the task's data may reach.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sinks: Vec<SinkRef>,
    /// Data edges: from an asset or action to an action or sink. Acyclic.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<Flow>,
}

/// What evidence spans point into.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// The id the lowered `task` event gets (default `task`); it must not
    /// be a call id of the trace the task is run with.
    #[serde(default = "default_task_id")]
    pub task_id: String,
    /// The user's request, verbatim: text spans are UTF-8 byte offsets into it.
    pub text: String,
    /// The number of events of the trace that `event` spans cite (1-based
    /// sequence numbers, as `agenra replay` numbers them); 0: no trace.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub events: u64,
}

fn default_task_id() -> String {
    "task".into()
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Where a part of the IR comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum Span {
    /// A range of the task text.
    Text(TextSpan),
    /// The 1-based sequence number of a trace event.
    Event(u64),
}

/// `[start, end)` in UTF-8 bytes of [`Source::text`], both on character
/// boundaries, `start < end`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextSpan {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
    /// The quoted text; when given, it must equal `text[start..end]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quote: Option<String>,
}

/// What the user wants done, in a sentence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Intent {
    /// A short summary.
    pub summary: String,
    /// Where it comes from (at least one span).
    pub evidence: Vec<Span>,
}

/// A resource pattern over a call's resource argument.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum ResourcePattern {
    /// This resource only.
    Exact(String),
    /// Every resource that starts with this.
    Prefix(String),
    /// A glob: `*` any run of characters, `?` one character.
    Glob(String),
}

impl ResourcePattern {
    /// The core model's pattern.
    pub fn to_pattern(&self) -> agenra_core::Pattern {
        match self {
            ResourcePattern::Exact(s) => agenra_core::Pattern::Exact(s.clone()),
            ResourcePattern::Prefix(s) => agenra_core::Pattern::Prefix(s.clone()),
            ResourcePattern::Glob(s) => agenra_core::Pattern::Glob(s.clone()),
        }
    }

    /// The same set of resources as a glob, when one exists (no `*` or `?`
    /// in an exact name or prefix).
    pub fn to_glob(&self) -> Option<String> {
        let plain = |s: &str| !s.contains(['*', '?']);
        match self {
            ResourcePattern::Exact(s) if plain(s) => Some(s.clone()),
            ResourcePattern::Prefix(s) if plain(s) => Some(format!("{s}*")),
            ResourcePattern::Glob(g) => Some(g.clone()),
            _ => None,
        }
    }
}

/// A resource or datum the task involves.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Asset {
    /// Unique among all ids of the IR.
    pub id: String,
    /// The resources it stands for (absent: a datum, not a resource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourcePattern>,
    /// How sensitive the task says it is (raises, never lowers, the
    /// policy's labels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<LabelClaim>,
    /// Where it comes from (at least one span).
    pub evidence: Vec<Span>,
}

/// A label the task attributes to an asset, with its own evidence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabelClaim {
    /// A level the policy declares.
    pub level: String,
    /// Categories the policy declares.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub categories: Vec<String>,
    /// Whether the data is trusted.
    pub trusted: bool,
    /// Why the asset has this label (at least one span).
    pub evidence: Vec<Span>,
}

/// A label as a ceiling (no evidence of its own: the allowance's covers it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabelSpec {
    /// A level the policy declares.
    pub level: String,
    /// Categories the policy declares.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub categories: Vec<String>,
    /// Whether the ceiling is trusted (then untrusted data exceeds it).
    pub trusted: bool,
}

/// Argument constraints: for each named parameter, the values it may take
/// (every element, for a list parameter). JSON scalars of the parameter's
/// type; `null` only for optional parameters.
pub type ArgValues = BTreeMap<String, Vec<serde_json::Value>>;

/// A kind of tool call the task covers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Action {
    /// Unique among all ids of the IR.
    pub id: String,
    /// A tool the policy declares (exact name).
    pub tool: String,
    /// Asset ids: the call's resource argument must match one of their
    /// patterns (empty: any resource).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assets: Vec<String>,
    /// Constraints on other arguments.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub args: ArgValues,
    /// Where it comes from (at least one span).
    pub evidence: Vec<Span>,
}

/// `require FACT [since TOOLGLOB] before ACTION`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Obligation {
    /// Unique among all ids of the IR.
    pub id: String,
    /// A fact the policy declares.
    pub require: String,
    /// An action id: calls of its tool need the fact.
    pub before: String,
    /// A tool glob: the fact must be seen after the last admitted call matching it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Where it comes from (at least one span).
    pub evidence: Vec<Span>,
}

/// A scoped allowance: data up to `up_to` may be declassified into the
/// sink (or into the calls of a delegated agent), only when the arguments
/// satisfy `args`, and only as far as the policy's own `allow flow` rules
/// declassify. Never a permission by itself. Exactly one of `sink` and
/// `agent` is given.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Allowance {
    /// Unique among all ids of the IR.
    pub id: String,
    /// A sink id of this IR: the allowance narrows the policy's
    /// `allow flow ... -> SINK` rules on the sinks it matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sink: Option<String>,
    /// A policy agent: the allowance narrows the policy's
    /// `allow flow ... -> agent AGENT` rules (what the agent may receive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The ceiling.
    pub up_to: LabelSpec,
    /// Argument constraints, by parameter name; every tool reaching the
    /// sink must have each named parameter (for an agent: at least one of
    /// the tools the agent may call).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub args: ArgValues,
    /// Where it comes from (at least one span).
    pub evidence: Vec<Span>,
}

/// Calls the task must not make: those of a tool (glob) and/or on a
/// resource, optionally only with some argument values.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Forbidden {
    /// Unique among all ids of the IR.
    pub id: String,
    /// A glob over tool names (absent: every tool, with a resource or `args`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The resources it must not touch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourcePattern>,
    /// Only calls whose arguments take these values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub args: ArgValues,
    /// Where it comes from (at least one span).
    pub evidence: Vec<Span>,
}

/// A sink of the policy (glob over its sink names) the task's data reaches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SinkRef {
    /// Unique among all ids of the IR.
    pub id: String,
    /// A glob over the policy's sink names; it must match at least one.
    pub pattern: String,
    /// Where it comes from (at least one span).
    pub evidence: Vec<Span>,
}

/// A data edge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Flow {
    /// An asset or action id.
    pub from: String,
    /// An action or sink id.
    pub to: String,
    /// Where it comes from (at least one span).
    pub evidence: Vec<Span>,
}
