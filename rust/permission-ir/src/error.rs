//! Typed errors: each names the field path (`actions[2].tool`) and the defect.

/// A document that is not an IR at all: not JSON, a duplicate key, an
/// unknown field, a missing field, a wrong type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// A key given twice in one object, at any depth: the document is
    /// ambiguous (another reader may keep the other value).
    #[error("line {line}, column {column}: duplicate key `{key}`")]
    DuplicateKey {
        /// The key.
        key: String,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column.
        column: usize,
    },
    /// Not JSON, or JSON that is not an IR (unknown or missing field, wrong type).
    #[error("line {line}, column {column}: {message}")]
    Json {
        /// What serde says.
        message: String,
        /// 1-based line (0 when the error is about the document's shape).
        line: usize,
        /// 1-based column.
        column: usize,
    },
}

/// One defect of an IR checked against a policy. `path` names the field,
/// e.g. `actions[2].args.to[0]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IrError {
    /// `version` is not [`IR_VERSION`](crate::IR_VERSION).
    #[error(
        "version: unsupported IR version {found} (this build reads {})",
        crate::IR_VERSION
    )]
    UnsupportedVersion {
        /// The version found.
        found: u32,
    },
    /// An empty id.
    #[error("{path}: empty id")]
    EmptyId {
        /// The field.
        path: String,
    },
    /// Two parts of the IR with the same id.
    #[error("{path}: duplicate id `{id}` (first used at {first})")]
    DuplicateId {
        /// The second use.
        path: String,
        /// The id.
        id: String,
        /// The first use.
        first: String,
    },
    /// A part without any evidence span.
    #[error("{path}: no evidence (every part of the IR must cite the task text or the trace)")]
    MissingEvidence {
        /// The part's evidence field.
        path: String,
    },
    /// A label claim without any evidence span.
    #[error("{path}: a label without evidence")]
    LabelWithoutEvidence {
        /// The label's evidence field.
        path: String,
    },
    /// A text span that does not lie inside the task text (or is empty or reversed).
    #[error("{path}: span {start}..{end} is outside the task text ({len} bytes)")]
    SpanOutsideText {
        /// The span.
        path: String,
        /// Its start.
        start: usize,
        /// Its end.
        end: usize,
        /// The text's length in bytes.
        len: usize,
    },
    /// A text span that cuts a UTF-8 character.
    #[error("{path}: offset {offset} is not on a character boundary of the task text")]
    SpanNotOnCharBoundary {
        /// The span.
        path: String,
        /// The offending offset.
        offset: usize,
    },
    /// A span's quote that is not the text it covers.
    #[error("{path}: quote {quote:?} is not the text at {start}..{end} ({actual:?})")]
    QuoteMismatch {
        /// The span.
        path: String,
        /// The quote.
        quote: String,
        /// The span's start.
        start: usize,
        /// The span's end.
        end: usize,
        /// What the text holds there.
        actual: String,
    },
    /// An event span beyond the trace (or 0).
    #[error("{path}: event {seq} is outside the trace ({events} events, numbered from 1)")]
    EventOutsideTrace {
        /// The span.
        path: String,
        /// The sequence number.
        seq: u64,
        /// The trace's length (`source.events`).
        events: u64,
    },
    /// A reference to an id the IR does not define, or to a part of the wrong kind.
    #[error("{path}: dangling edge: `{id}` is not {expected} of this IR")]
    DanglingEdge {
        /// The reference.
        path: String,
        /// The id referred to.
        id: String,
        /// What it must be (e.g. `an asset or action`).
        expected: &'static str,
    },
    /// Data edges that form a cycle (a datum that depends on itself).
    #[error("{path}: data cycle {}", cycle.join(" -> "))]
    DataCycle {
        /// `flows`.
        path: String,
        /// The ids on the cycle, the first repeated at the end.
        cycle: Vec<String>,
    },
    /// A tool (or tool glob) the policy does not declare (matches none).
    #[error("{path}: unknown tool `{tool}`")]
    UnknownTool {
        /// The field.
        path: String,
        /// The name or glob.
        tool: String,
    },
    /// A parameter the tool does not declare.
    #[error("{path}: tool `{tool}` has no parameter `{param}`")]
    UnknownParam {
        /// The field.
        path: String,
        /// The tool.
        tool: String,
        /// The parameter.
        param: String,
    },
    /// A value of the wrong type for its parameter.
    #[error("{path}: `{param}` of `{tool}` is {expected}, got {got}")]
    IllTypedValue {
        /// The value.
        path: String,
        /// The tool.
        tool: String,
        /// The parameter.
        param: String,
        /// Its declared type.
        expected: String,
        /// What was given.
        got: String,
    },
    /// An empty list of values (nothing could match: say `forbidden` instead).
    #[error("{path}: empty list of values")]
    EmptyValues {
        /// The field.
        path: String,
    },
    /// Resource constraints on a tool without a resource parameter.
    #[error("{path}: tool `{tool}` has no resource parameter")]
    NoResourceParam {
        /// The field.
        path: String,
        /// The tool.
        tool: String,
    },
    /// An action names an asset that stands for no resource.
    #[error("{path}: asset `{id}` has no resource pattern")]
    AssetWithoutResource {
        /// The reference.
        path: String,
        /// The asset.
        id: String,
    },
    /// A sink pattern that matches none of the policy's sinks.
    #[error("{path}: unknown sink pattern `{pattern}` (the policy's sinks: {known})")]
    UnknownSinkPattern {
        /// The field.
        path: String,
        /// The pattern.
        pattern: String,
        /// The declared sinks, comma-separated.
        known: String,
    },
    /// A fact the policy does not declare.
    #[error("{path}: unknown fact `{fact}`")]
    UnknownFact {
        /// The field.
        path: String,
        /// The fact.
        fact: String,
    },
    /// A level the policy does not declare.
    #[error("{path}: unknown level `{level}`")]
    UnknownLevel {
        /// The field.
        path: String,
        /// The level.
        level: String,
    },
    /// A category the policy does not declare.
    #[error("{path}: unknown category `{category}`")]
    UnknownCategory {
        /// The field.
        path: String,
        /// The category.
        category: String,
    },
    /// Two allowances for one sink of the policy.
    #[error("{path}: a second allowance for sink `{sink}` (first: {first}); merge them")]
    DuplicateAllowance {
        /// The second allowance.
        path: String,
        /// The policy's sink.
        sink: String,
        /// The first allowance's path.
        first: String,
    },
    /// Two allowances for one agent of the policy.
    #[error("{path}: a second allowance for agent `{agent}` (first: {first}); merge them")]
    DuplicateAgentAllowance {
        /// The second allowance.
        path: String,
        /// The policy's agent.
        agent: String,
        /// The first allowance's path.
        first: String,
    },
    /// An allowance that names both a sink and an agent, or neither.
    #[error("{path}: an allowance names exactly one of `sink` and `agent`")]
    AllowanceTarget {
        /// The allowance.
        path: String,
    },
    /// An agent the policy does not declare.
    #[error("{path}: unknown agent `{agent}` (the policy's agents: {known})")]
    UnknownAgent {
        /// The field.
        path: String,
        /// The agent.
        agent: String,
        /// The declared agents, comma-separated.
        known: String,
    },
    /// A forbidden action that names neither a tool nor a resource nor arguments.
    #[error("{path}: forbids nothing in particular (give `tool`, `resource` or `args`)")]
    EmptyForbidden {
        /// The forbidden action.
        path: String,
    },
}

impl IrError {
    /// A stable name for the kind of defect (`dangling-edge`, ...), for JSON output.
    pub fn kind(&self) -> &'static str {
        match self {
            IrError::UnsupportedVersion { .. } => "unsupported-version",
            IrError::EmptyId { .. } => "empty-id",
            IrError::DuplicateId { .. } => "duplicate-id",
            IrError::MissingEvidence { .. } => "missing-evidence",
            IrError::LabelWithoutEvidence { .. } => "label-without-evidence",
            IrError::SpanOutsideText { .. } => "span-outside-text",
            IrError::SpanNotOnCharBoundary { .. } => "span-not-on-char-boundary",
            IrError::QuoteMismatch { .. } => "quote-mismatch",
            IrError::EventOutsideTrace { .. } => "event-outside-trace",
            IrError::DanglingEdge { .. } => "dangling-edge",
            IrError::DataCycle { .. } => "data-cycle",
            IrError::UnknownTool { .. } => "unknown-tool",
            IrError::UnknownParam { .. } => "unknown-param",
            IrError::IllTypedValue { .. } => "ill-typed-value",
            IrError::EmptyValues { .. } => "empty-values",
            IrError::NoResourceParam { .. } => "no-resource-param",
            IrError::AssetWithoutResource { .. } => "asset-without-resource",
            IrError::UnknownSinkPattern { .. } => "unknown-sink-pattern",
            IrError::UnknownFact { .. } => "unknown-fact",
            IrError::UnknownLevel { .. } => "unknown-level",
            IrError::UnknownCategory { .. } => "unknown-category",
            IrError::DuplicateAllowance { .. } | IrError::DuplicateAgentAllowance { .. } => {
                "duplicate-allowance"
            }
            IrError::AllowanceTarget { .. } => "allowance-target",
            IrError::UnknownAgent { .. } => "unknown-agent",
            IrError::EmptyForbidden { .. } => "empty-forbidden",
        }
    }

    /// The field path the defect is at.
    pub fn path(&self) -> &str {
        match self {
            IrError::UnsupportedVersion { .. } => "version",
            IrError::EmptyId { path }
            | IrError::DuplicateId { path, .. }
            | IrError::MissingEvidence { path }
            | IrError::LabelWithoutEvidence { path }
            | IrError::SpanOutsideText { path, .. }
            | IrError::SpanNotOnCharBoundary { path, .. }
            | IrError::QuoteMismatch { path, .. }
            | IrError::EventOutsideTrace { path, .. }
            | IrError::DanglingEdge { path, .. }
            | IrError::DataCycle { path, .. }
            | IrError::UnknownTool { path, .. }
            | IrError::UnknownParam { path, .. }
            | IrError::IllTypedValue { path, .. }
            | IrError::EmptyValues { path }
            | IrError::NoResourceParam { path, .. }
            | IrError::AssetWithoutResource { path, .. }
            | IrError::UnknownSinkPattern { path, .. }
            | IrError::UnknownFact { path, .. }
            | IrError::UnknownLevel { path, .. }
            | IrError::UnknownCategory { path, .. }
            | IrError::DuplicateAllowance { path, .. }
            | IrError::DuplicateAgentAllowance { path, .. }
            | IrError::AllowanceTarget { path }
            | IrError::UnknownAgent { path, .. }
            | IrError::EmptyForbidden { path } => path,
        }
    }
}

/// Every defect [`validate`](crate::validate) found, in document order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", render(.errors))]
pub struct ValidationErrors {
    /// At least one.
    pub errors: Vec<IrError>,
}

fn render(errors: &[IrError]) -> String {
    let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
    lines.join("\n")
}

/// Why [`lower`](crate::lower) failed.
#[derive(Debug, thiserror::Error)]
pub enum LowerError {
    /// The IR was validated against another policy.
    #[error("the IR was validated against policy {validated}, not {given}")]
    PolicyMismatch {
        /// The hash the IR was validated against.
        validated: String,
        /// The hash of the policy given.
        given: String,
    },
    /// The policy cannot be hashed or compiled for the monitor.
    #[error(transparent)]
    Monitor(#[from] agenra_core::MonitorError),
    /// The session refused the task event.
    #[error("the task event: {0}")]
    Task(String),
}

/// Why [`load`](crate::load) failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Not an IR.
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// Defects against the policy.
    #[error(transparent)]
    Invalid(#[from] ValidationErrors),
    /// Lowering failed.
    #[error(transparent)]
    Lower(#[from] LowerError),
}
