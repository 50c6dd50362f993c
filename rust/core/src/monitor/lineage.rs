//! Step 2: the call is appended to the graph, and each argument is
//! connected to where its data came from. Lineage is per argument: an
//! argument with observed lineage takes the join of the output labels of
//! the calls it names; one without takes the context's label (everything
//! the session has read), through one conservative edge from the context.

use super::wellformed::Resolved;
use super::Session;
use crate::graph::{EdgeKind, Evidence, Node, NodeId, NodeKind, Status, Trust, NO_PARAM, NO_TOOL};
use crate::label::Label;
use crate::policy::ToolId;
use crate::session_tables::IdHash;
use crate::spec;
use crate::value::Value;

/// Where an argument's label comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ArgSource {
    /// Observed lineage: the calls the caller named.
    Observed,
    /// Everything the session has read.
    Context,
    /// Provenance by value: the task or trusted outputs holding the value
    /// (listed in [`CallLabels::by_value`]).
    Value,
    /// An absent optional argument (or `null`) without lineage: no data.
    Absent,
}

/// The labels of what flows into a call.
#[derive(Clone, Debug)]
pub(crate) struct CallLabels {
    /// Per parameter, when a sink of the tool is bound to some arguments
    /// (otherwise empty: only the input label is needed).
    pub args: Vec<Label>,
    /// Per parameter, with provenance by value (otherwise empty: observed
    /// lineage where given, the context elsewhere).
    pub sources: Vec<ArgSource>,
    /// (parameter, node) for each argument labelled by value: the task or
    /// trusted outputs holding its value, in parameter order (one list per
    /// call, not one per argument).
    pub by_value: Vec<(u16, NodeId)>,
    /// The join over the arguments (the context's label for a tool without
    /// parameters): what a sink that takes every argument receives.
    pub input: Label,
    /// The join of the labels of the resources the call's resource argument
    /// matches, and the first such resource rule (`None`: no labeled resource).
    pub resource: Option<(Label, usize)>,
}

impl CallLabels {
    /// Whether argument `i` reads the context (no observed lineage and no
    /// provenance by value).
    pub fn reads_context(&self, i: usize, r: &Resolved) -> bool {
        match self.sources.get(i) {
            Some(source) => *source == ArgSource::Context,
            None => i < r.lineage.len() && !r.lineage.has(i) && !is_absent(r, i),
        }
    }

    /// Whether the call gets the conservative edge from the context: some
    /// argument reads it, or the call passes no data at all.
    pub fn uses_context(&self, r: &Resolved) -> bool {
        !carries_data(r) || (0..r.lineage.len()).any(|i| self.reads_context(i, r))
    }
}

/// Whether argument `i` is absent (or `null`).
fn is_absent(r: &Resolved, i: usize) -> bool {
    matches!(r.req.args.get(i), Some(Value::Null))
}

/// Whether some argument passes data: it has observed lineage or a value.
/// A call that passes none (no parameters, or only absent arguments) reads
/// the context: that it is made at all depends on what was read.
pub(crate) fn carries_data(r: &Resolved) -> bool {
    (0..r.lineage.len()).any(|i| r.lineage.has(i) || !is_absent(r, i))
}

impl Session {
    /// Labels of the call's arguments as of now: the context's label is
    /// read at this moment (for an approval, at approval time).
    pub(crate) fn call_labels(&self, r: &Resolved) -> CallLabels {
        let graph = &self.state.graph;
        let context = self.context_label_of(r.req.agent);
        let by_value = self.shared.0.policy.provenance_by_value;
        let per_arg = by_value || self.shared.0.index.bound_sinks[r.req.tool];
        if !per_arg {
            // The common case, without allocating: the join of the sources.
            let reads = (0..r.lineage.len()).any(|i| !r.lineage.has(i) && !is_absent(r, i));
            let mut input = if reads || !carries_data(r) {
                context
            } else {
                Label::BOTTOM
            };
            for id in r.lineage.nodes() {
                if let Some(n) = graph.node(id) {
                    input = input.join(&n.label);
                }
            }
            return CallLabels {
                args: Vec::new(),
                sources: Vec::new(),
                by_value: Vec::new(),
                input,
                resource: self.resource_label(r.req.tool, &r.req.args),
            };
        }
        let mut args = Vec::with_capacity(r.lineage.len());
        let mut sources = Vec::with_capacity(r.lineage.len());
        let mut found = Vec::new();
        for i in 0..r.lineage.len() {
            let (label, source) = match r.lineage.get(i) {
                Some(ids) => (
                    ids.filter_map(|id| graph.node(id))
                        .fold(Label::BOTTOM, |acc, n| acc.join(&n.label)),
                    ArgSource::Observed,
                ),
                None if is_absent(r, i) => (Label::BOTTOM, ArgSource::Absent),
                None => match by_value
                    .then(|| {
                        let mode = self.shared.0.policy.provenance_mode(r.req.tool, i);
                        r.req
                            .args
                            .get(i)
                            .filter(|v| crate::provenance::admits(mode, v))
                            .and_then(|v| self.state.values.lookup(v, i as u16, &mut found))
                    })
                    .flatten()
                {
                    Some(label) => (label, ArgSource::Value),
                    None => (context, ArgSource::Context),
                },
            };
            args.push(label);
            sources.push(source);
        }
        let input = if carries_data(r) {
            args.iter().fold(Label::BOTTOM, |acc, l| acc.join(l))
        } else {
            context
        };
        CallLabels {
            args,
            sources,
            by_value: found,
            input,
            resource: self.resource_label(r.req.tool, &r.req.args),
        }
    }

    /// The join of the labels of every resource rule matching the call's
    /// resource argument, and the first rule that matched.
    pub(crate) fn resource_label(
        &self,
        tool: ToolId,
        args: &[crate::value::Value],
    ) -> Option<(Label, usize)> {
        if !self.shared.0.index.has_resource_labels {
            return None;
        }
        let resource = spec::resource_of(&self.shared.0.policy, tool, args)?;
        let mut out: Option<(Label, usize)> = None;
        for (i, rl) in self.shared.0.policy.resources.iter().enumerate() {
            if rl.pattern.matches(resource) {
                out = Some(match out {
                    None => (rl.label, i),
                    Some((l, first)) => (l.join(&rl.label), first),
                });
            }
        }
        out
    }

    /// Records a call that failed well-formedness (for the audit trail).
    pub(crate) fn append_denied(
        &mut self,
        id: &str,
        id_hash: IdHash,
        tool: Option<ToolId>,
        agent: usize,
        time: u64,
    ) -> NodeId {
        let node = self.state.graph.push_node(Node {
            kind: NodeKind::Tool,
            status: Status::Denied,
            evidence: Evidence::Policy,
            agent: agent as u16,
            tool: tool.map_or(NO_TOOL, |t| t as u32),
            label: Label::BOTTOM,
            time,
            first_edge: 0,
        });
        self.link_control(node);
        self.state.calls.insert_hashed(id, id_hash, node);
        node
    }

    fn link_control(&mut self, node: NodeId) {
        if let Some(prev) = self.state.last_call {
            self.state
                .graph
                .push_edge(prev, node, EdgeKind::Control, Trust::Observed, NO_PARAM);
        }
        self.state.last_call = Some(node);
    }

    /// Appends the call node with its edges. Its label is what the call
    /// returns: `sanitize(input) ⊔ source label ⊔ resource labels`.
    /// Also answers the label without the tool's `output` label
    /// (`sanitize(input) ⊔ resource labels`), which output fields join.
    pub(crate) fn append_call(
        &mut self,
        id: &str,
        id_hash: IdHash,
        r: &Resolved,
        labels: &CallLabels,
    ) -> (NodeId, Label) {
        // Everything read from the policy is read first, so that the
        // session can then be changed without holding (or cloning) it.
        let policy = &*self.shared.0.policy;
        let spec = &policy.tools[r.req.tool];
        let (through, evidence) = match spec.sanitizer.and_then(|s| policy.sanitizers.get(s)) {
            Some(s) => (s.apply(&labels.input), Evidence::Sanitized),
            None => (labels.input, Evidence::Policy),
        };
        let mut base = through;
        if let Some((l, _)) = labels.resource {
            base = base.join(&l);
        }
        let output = base.join(&spec.output);
        let kind = if !spec.sinks.is_empty() {
            NodeKind::Sink
        } else if spec.output != Label::BOTTOM
            || (self.shared.0.index.has_resource_labels && spec.resource.is_some())
        {
            NodeKind::Source
        } else {
            NodeKind::Tool
        };
        let parent = policy.agents.get(r.req.agent).and_then(|a| a.parent);
        let agents = policy.agents.len();
        // An agent's own context is created before the call's node: a
        // node's incoming edges must directly follow it in the edge list.
        let context = labels
            .uses_context(r)
            .then(|| self.context_node_of(r.req.agent));
        let node = self.state.graph.push_node(Node {
            kind,
            status: Status::Running,
            evidence,
            agent: r.req.agent as u16,
            tool: r.req.tool as u32,
            label: output,
            time: r.req.time,
            first_edge: 0,
        });
        self.link_control(node);
        self.state.calls.insert_hashed(id, id_hash, node);
        if let Some(ctx) = context {
            self.state
                .graph
                .push_edge(ctx, node, EdgeKind::Data, Trust::Policy, NO_PARAM);
        }
        let graph = &mut self.state.graph;
        for (param, s) in r.lineage.given() {
            graph.push_edge(s, node, EdgeKind::Data, Trust::Observed, param as u16);
        }
        for &(param, s) in &labels.by_value {
            graph.push_edge(s, node, EdgeKind::Data, Trust::Value, param);
        }
        for &(param, s) in &r.inferred {
            graph.push_edge(s, node, EdgeKind::Data, Trust::Inferred, param);
        }
        // A delegate acts for its delegator: link the delegator's latest call.
        if let Some(parent) = parent {
            if let Some(p) = self.state.last_by_agent.value(parent) {
                self.state
                    .graph
                    .push_edge(p, node, EdgeKind::Parent, Trust::Policy, NO_PARAM);
            }
        }
        *self.state.last_by_agent.slot(r.req.agent, agents) = Some(node);
        (node, base)
    }
}
