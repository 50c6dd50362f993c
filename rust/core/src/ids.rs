//! The indexes a compiled policy's parts refer to each other by. They live
//! apart from `policy` so that `value` can name an agent without importing
//! the policy that imports it.

/// Index into [`Policy::tools`](crate::policy::Policy::tools).
pub type ToolId = usize;
/// Index into [`Policy::sinks`](crate::policy::Policy::sinks).
pub type SinkId = usize;
/// Index into [`Policy::facts`](crate::policy::Policy::facts).
pub type FactId = usize;
/// Index into [`Policy::agents`](crate::policy::Policy::agents); agent 0 is the root agent [`ROOT_AGENT`](crate::policy::ROOT_AGENT).
pub type AgentId = usize;
/// Index into [`Policy::scopes`](crate::policy::Policy::scopes).
pub type ScopeId = usize;
/// Index into [`Policy::grants`](crate::policy::Policy::grants) (and into the ledger's remaining counts).
pub type GrantId = usize;
/// Index into [`Policy::sanitizers`](crate::policy::Policy::sanitizers).
pub type SanitizerId = usize;
