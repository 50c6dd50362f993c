//! Agenra: a verified authorization layer for LLM agents.
//!
//! Before every effectful tool call an agent makes, Agenra answers ALLOW,
//! DENY or PAUSE from what data flowed into the call, what happened before
//! it and how much consumable authority is left.
//!
//! ```
//! use agenra::{Monitor, Call, Verdict};
//! let policy = agenra::compile_policy(r#"
//!     tool fs.read(path: string) { resource path; }
//!     grant src: fs.read on prefix "src/" quota unlimited;
//! "#, "example").unwrap();
//! let mut monitor = Monitor::new(policy).unwrap();
//! let call: Call = serde_json::from_str(
//!     r#"{"id":"c1","time":1,"tool":"fs.read","args":{"path":"src/main.rs"}}"#).unwrap();
//! assert_eq!(monitor.authorize(&call).unwrap().verdict, Verdict::Allow);
//! ```

pub mod bench;
pub mod bench_scale;
pub mod render;
pub mod replay;
pub mod sessions;
pub mod stream;
pub mod trace;

pub use agenra_core as core;
pub use agenra_core::decision::{Applied, Decision, Reason, Rule, StepError, StepOutput, Verdict};
pub use agenra_core::event::{Call, Event, Outcome, Report, Resolve};
pub use agenra_core::{Monitor, MonitorError, Policy};
pub use agenra_policy as policy;
pub use sessions::{SessionError, Sessions};

/// Compiles policy text; `name` is used when the text has no `policy` statement.
pub fn compile_policy(source: &str, name: &str) -> Result<Policy, agenra_policy::PolicyError> {
    agenra_policy::compile(source, name).map(|c| c.policy)
}
