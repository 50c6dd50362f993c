#![warn(missing_docs)]
//! The Permission IR: what one task may do, as data a monitor can enforce.
//!
//! An IR names, in terms of a policy's tools, sinks, facts and labels, the
//! task's intent, assets, actions, obligations, scoped allowances, forbidden
//! actions, sinks and data flows, and links every part to its evidence
//! (byte ranges of the task text, sequence numbers of trace events).
//! `docs/permission-ir.md` is the reference; `docs/permission-ir.schema.json`
//! the JSON Schema.
//!
//! ```
//! use agenra_permission_ir as pir;
//! let policy = agenra_policy::compile(r#"
//!     tool fs.read(path: string) { resource path; }
//!     tool fs.delete(path: string) { resource path; }
//!     grant read: fs.read quota unlimited;
//!     grant delete: fs.delete quota unlimited;
//! "#, "p").unwrap().policy;
//! let ir = pir::parse(r#"{
//!   "version": 1,
//!   "source": {"text": "Read notes.txt"},
//!   "assets": [{"id": "notes", "resource": {"exact": "notes.txt"},
//!               "evidence": [{"text": {"start": 5, "end": 14}}]}],
//!   "actions": [{"id": "read", "tool": "fs.read", "assets": ["notes"],
//!                "evidence": [{"text": {"start": 0, "end": 4, "quote": "Read"}}]}]
//! }"#).unwrap();
//! let valid = pir::validate(ir, &policy).unwrap();
//! let lowered = pir::lower(&valid, &policy).unwrap();
//! let mut session = lowered.session().unwrap();
//! let call = |id: &str, tool: &str, path: &str| agenra_core::Event::Call(serde_json::from_value(
//!     serde_json::json!({"id": id, "time": 1, "tool": tool, "args": {"path": path}})).unwrap());
//! let verdict = |out: agenra_core::StepOutput| match out {
//!     agenra_core::StepOutput::Decision(d) => d.verdict,
//!     other => panic!("{other:?}"),
//! };
//! assert_eq!(verdict(session.step(&call("c1", "fs.read", "notes.txt")).unwrap()),
//!            agenra_core::Verdict::Allow);
//! assert_eq!(verdict(session.step(&call("c2", "fs.read", "other.txt")).unwrap()),
//!            agenra_core::Verdict::Deny);
//! assert_eq!(verdict(session.step(&call("c3", "fs.delete", "notes.txt")).unwrap()),
//!            agenra_core::Verdict::Deny);
//! ```

mod error;
mod ir;
mod llm;
mod lower;
mod parse;
mod trace;
mod validate;

pub use error::{IrError, LoadError, LowerError, ParseError, ValidationErrors};
pub use ir::{
    Action, Allowance, ArgValues, Asset, Flow, Forbidden, Intent, LabelClaim, LabelSpec,
    Obligation, PermissionIr, ResourcePattern, SinkRef, Source, Span, TextSpan, IR_VERSION,
};
pub use llm::{
    from_text, repair_quotes, request_body, vocabulary, LlmConfig, LlmError, ENV_API_KEY,
    ENV_BASE_URL, ENV_MODEL, ENV_TIMEOUT, SCHEMA,
};
pub use lower::{lower, meet, Check, CheckKind, Lowered, RULE_PREFIX};
pub use parse::{parse, to_json};
pub use trace::from_trace;
pub use validate::{check, validate, Validated};

/// Parses, validates and lowers an IR document against `policy`: what
/// `agenra authorize --ir` needs in one call.
pub fn load(text: &str, policy: &agenra_core::Policy) -> Result<Lowered, LoadError> {
    let valid = validate(parse(text)?, policy)?;
    Ok(lower(&valid, policy)?)
}
