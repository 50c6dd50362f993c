#![warn(missing_docs)]
//! Agenra core model: labels, patterns, grants, the ledger, the session
//! graph and the monitor step. Pure data and logic: no I/O, no clock reads
//! (time is an input of every event).

pub mod decimal;
pub mod fields;
pub mod hash;
pub mod ids;
pub mod label;
pub mod object;
pub mod pattern;
pub mod policy;
pub mod provenance;
pub mod token_evidence;
pub mod token_shapes;
pub mod tokens;
pub mod value;

pub use hash::Hash;
pub use label::{CategorySet, Label, LabelPattern, Sanitizer};
pub use pattern::Pattern;
pub use policy::Policy;
pub use value::{ArgCond, ArgOp, Cond, Decimal, NamedCond, ParamType, Quant, Value};
pub mod decision;
pub mod event;
pub mod graph;
pub mod ident;
pub mod ledger;
pub mod monitor;
pub mod pool;
mod session_tables;
pub mod spec;
pub mod strict;
pub mod validate;
pub mod window;

pub use decision::{Decision, DecisionPath, PathError, StepError, StepOutput, Stop, Verdict};
pub use event::{Call, Event, Report, Resolve, Task, TaskScope};
pub use monitor::{
    AgentHandle, AuditSink, CallArg, CompiledPolicy, Forgotten, LookupError, Monitor, MonitorError,
    ParamHandle, Session, SessionOptions, ToolHandle, TypedCall, WeakPolicy,
};
pub use pool::{SharedCounts, TenantPool};
