//! Agenra: an authorization layer for LLM agents.
//!
//! Before every effectful tool call an agent makes, Agenra answers ALLOW,
//! DENY or PAUSE from what data flowed into the call, what happened before
//! it and how much consumable authority is left.
//!
//! Compile a policy once, share it (it is `Send + Sync` and cheap to
//! clone), and decide each call in a session of its own:
//!
//! ```
//! use agenra::{compile, TypedCall, Verdict};
//! let compiled = compile(r#"
//!     tool fs.read(path: string) { resource path; }
//!     grant src: fs.read on prefix "src/" quota unlimited;
//! "#, "example").unwrap();
//! assert!(compiled.warnings.is_empty());
//! let policy = compiled.policy;
//!
//! // Handles are resolved once; deciding compares indexes, not names.
//! let read = policy.tool("fs.read").unwrap();
//! let path = policy.param(read, "path").unwrap();
//!
//! let mut session = policy.session();
//! let call = TypedCall::new(read, "c1", 1).arg(path, "src/main.rs");
//! // What would happen, recording nothing:
//! assert_eq!(session.check(&call).unwrap().verdict, Verdict::Allow);
//! assert_eq!(session.authorize(call).unwrap().verdict, Verdict::Allow);
//!
//! // JSON calls from a gateway or a trace are accepted too.
//! let call: agenra::Call = serde_json::from_str(
//!     r#"{"id":"c2","time":2,"tool":"fs.read","args":{"path":"/etc/passwd"}}"#).unwrap();
//! assert_eq!(session.authorize(&call).unwrap().verdict, Verdict::Deny);
//! ```
//!
//! This crate is the library alone: the `agenra` command-line tool is the
//! crate `agenra-cli` (the repository's root), the benchmark harnesses are
//! `agenra-bench`. Besides sessions it holds trace replay (`trace`,
//! `replay`, `stream`) and, with the feature `smt`, the engine switch
//! between the native monitor and the Z3 authorizer (`engine`).
//!
//! `docs/embedding.md` walks through the rest: approvals, guards for tool
//! functions, reason sets and bounded sessions.

#[cfg(feature = "smt")]
pub mod engine;
pub mod guard;
pub mod replay;
#[cfg(feature = "rig")]
pub mod rig;
pub mod sessions;
pub mod stream;
pub mod trace;

pub use agenra_core as core;
pub use agenra_core::decision::Stop;
pub use agenra_core::decision::{
    Applied, Decision, DecisionPath, PathError, Reason, Rule, StepError, StepOutput, Verdict,
};
pub use agenra_core::event::{Call, Event, Outcome, Report, Resolve};
pub use agenra_core::{
    AgentHandle, CallArg, CompiledPolicy, LookupError, Monitor, MonitorError, ParamHandle, Policy,
    Session, SessionOptions, SharedCounts, TenantPool, ToolHandle, TypedCall, Value,
};
pub use agenra_policy as policy;
pub use agenra_policy::{Diagnostic, PolicyError};
pub use guard::{Admitted, Guard, Guarded, Ticket};
pub use sessions::{SessionError, Sessions};

/// A policy compiled from text, ready to decide, and what the compiler
/// warned about (shadowed grants, rules that can never fire, ...).
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The policy, ready for sessions.
    pub policy: CompiledPolicy,
    /// Warnings with their line and column (the policy compiled anyway).
    pub warnings: Vec<Diagnostic>,
}

/// Why policy text could not be compiled.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// Syntax or semantic errors, each with its line and column.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The compiled model failed validation (a compiler bug if it happens).
    #[error(transparent)]
    Invalid(#[from] MonitorError),
}

/// Compiles policy text into a shared policy, with the compiler's warnings;
/// `name` is used when the text has no `policy` statement.
pub fn compile(source: &str, name: &str) -> Result<Compiled, CompileError> {
    let compiled = agenra_policy::compile(source, name)?;
    Ok(Compiled {
        policy: CompiledPolicy::new(compiled.policy)?,
        warnings: compiled.warnings,
    })
}

/// Compiles policy text into its model (for tools that inspect or
/// serialize it); the warnings are dropped: prefer [`compile`].
pub fn compile_policy(source: &str, name: &str) -> Result<Policy, agenra_policy::PolicyError> {
    agenra_policy::compile(source, name).map(|c| c.policy)
}
