//! Where the lowered policy's declarations come from, for the checks that
//! speak about the policy as a whole (`checks`), filled in by `compile`.

use crate::span::Span;

/// Where the declarations and rules of the lowered policy come from, for
/// diagnostics about the policy as a whole.
#[derive(Debug, Default)]
pub struct SourceMap {
    /// Name span of each agent (`None` for `main`).
    pub agents: Vec<Option<Span>>,
    /// Name span of each grant.
    pub grants: Vec<Span>,
    /// Name span of each declared set.
    pub sets: Vec<Span>,
    /// Sink span of each flow rule.
    pub flow_sinks: Vec<Span>,
    /// Per tool: the span of its `output` clause, if it has one.
    pub tool_outputs: Vec<Option<Span>>,
    /// Per tool: the span of its first `output FIELD: LABEL` clause, if any.
    pub tool_output_fields: Vec<Option<Span>>,
}
