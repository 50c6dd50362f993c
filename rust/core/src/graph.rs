//! The session graph: append-only nodes and typed edges with evidence.
//!
//! Nodes are calls (and the session's context node); edges say where data
//! came from (data), what came before (control) and which delegator a
//! delegate acts for (parent). The graph only grows: labels of call nodes
//! are fixed when the node is appended, and only the context node's label
//! rises (monotone repair). Compact on purpose: a node is 32 bytes and an
//! edge 12, so a session of thousands of events stays small.

use crate::label::Label;
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct NodeId(pub u32);

impl std::fmt::Display for NodeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "n{}", self.0)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    /// What the agent has read: the conservative source of every argument
    /// without observed lineage.
    Context,
    /// A call whose tool returns labeled data (a read).
    Source,
    /// A call with no sink and no labeled output.
    Tool,
    /// A call whose arguments flow into a sink.
    Sink,
    /// The user's request (a `task` event): trusted text.
    Task,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EdgeKind {
    Data,
    Control,
    Parent,
}

/// How an edge is known. Inferred edges are kept for audit but never used to
/// narrow a flow: an argument with only inferred lineage still gets the
/// conservative edge from the context.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Trust {
    Observed,
    Policy,
    Inferred,
    /// Provenance by value: the argument's value occurs in the source's
    /// text (the task, or a trusted output).
    Value,
}

/// What a node's label rests on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Evidence {
    /// Source rules and resource labels of the policy, joined with inputs.
    Policy,
    /// A trusted sanitizer specification transformed the inputs' label.
    Sanitized,
    /// Accumulated from results (the context node).
    Results,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Denied,
    Paused,
    Running,
    Rejected,
    Succeeded,
    Failed,
    Unknown,
    /// The context node.
    Context,
    /// A task node.
    Task,
}

/// `tool` is an index into `Policy::tools`, or `NO_TOOL` for the context
/// node and for calls naming an unknown tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Node {
    pub kind: NodeKind,
    pub status: Status,
    pub evidence: Evidence,
    pub agent: u16,
    pub tool: u32,
    /// For calls: the label of what the call returns. For the context: the
    /// join of everything the agents have read.
    pub label: Label,
    pub time: u64,
    /// Index of the first edge appended after this node: a call node's
    /// incoming edges all come right after it (kept so explanations need
    /// not scan the whole graph; free, it fits in the padding).
    pub first_edge: u32,
}

pub const NO_TOOL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Edge {
    pub from: NodeId,
    pub to: NodeId,
    pub kind: EdgeKind,
    pub trust: Trust,
    /// The parameter the data flows into, or `NO_PARAM`.
    pub param: u16,
}

pub const NO_PARAM: u16 = u16::MAX;

/// One merge into a context node: the edge, where it came from, and the
/// context's label right after it (labels only rise, so these are
/// increasing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Merge {
    pub edge: u32,
    pub from: NodeId,
    pub joined: Label,
}

/// How many merges a path explanation looks through, past the first one
/// at which the context carried the offending label, for a single source
/// that carries it alone. Beyond that the path ends at the context (which
/// is then the source: several reads together made the label).
const MERGE_SCAN: usize = 64;

#[derive(Clone, Debug, Default, Serialize)]
pub struct Graph {
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
    /// Per context node (the shared one, and agents' own): its merges in
    /// order. A handful of contexts, so a list.
    pub merges: Vec<(NodeId, Vec<Merge>)>,
}

impl Graph {
    pub fn push_node(&mut self, mut node: Node) -> NodeId {
        node.first_edge = self.edges.len() as u32;
        self.nodes.push(node);
        NodeId((self.nodes.len() - 1) as u32)
    }

    pub fn push_edge(
        &mut self,
        from: NodeId,
        to: NodeId,
        kind: EdgeKind,
        trust: Trust,
        param: u16,
    ) {
        if kind == EdgeKind::Data && self.node(to).is_some_and(|n| n.kind == NodeKind::Context) {
            let label = self.node(from).map_or(Label::BOTTOM, |n| n.label);
            let edge = self.edges.len() as u32;
            let i = match self.merges.iter().position(|(n, _)| *n == to) {
                Some(i) => i,
                None => {
                    self.merges.push((to, Vec::new()));
                    self.merges.len() - 1
                }
            };
            let log = &mut self.merges[i].1;
            let joined = log.last().map_or(label, |m| m.joined.join(&label));
            log.push(Merge { edge, from, joined });
        }
        self.edges.push(Edge {
            from,
            to,
            kind,
            trust,
            param,
        });
    }

    pub fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(id.0 as usize)
    }

    pub fn node_mut(&mut self, id: NodeId) -> Option<&mut Node> {
        self.nodes.get_mut(id.0 as usize)
    }

    /// The merges into a context node made before edge `horizon`.
    fn merges_before(&self, context: NodeId, horizon: usize) -> &[Merge] {
        let log = self
            .merges
            .iter()
            .find(|(n, _)| *n == context)
            .map_or(&[][..], |(_, l)| l.as_slice());
        &log[..log.partition_point(|m| (m.edge as usize) < horizon)]
    }

    /// Indexes of the edges into the call node `to` appended before
    /// `horizon` (they all come right after the node).
    fn in_edges(&self, to: NodeId, horizon: usize) -> Vec<usize> {
        let Some(node) = self.node(to) else {
            return vec![];
        };
        let start = node.first_edge as usize;
        let end = self
            .nodes
            .get(to.0 as usize + 1)
            .map_or(self.edges.len(), |n| n.first_edge as usize)
            .min(horizon);
        (start..end.max(start))
            .filter(|&i| self.edges[i].to == to)
            .collect()
    }

    /// Data predecessors of `to` that may be trusted for a flow (not inferred).
    pub fn data_preds(&self, to: NodeId) -> Vec<NodeId> {
        let is_context = self.node(to).is_some_and(|n| n.kind == NodeKind::Context);
        if is_context {
            return self
                .merges_before(to, self.edges.len())
                .iter()
                .map(|m| m.from)
                .collect();
        }
        self.in_edges(to, self.edges.len())
            .into_iter()
            .map(|i| self.edges[i])
            .filter(|e| e.kind == EdgeKind::Data && e.trust != Trust::Inferred)
            .map(|e| e.from)
            .collect()
    }

    /// A path of data edges from a node whose label satisfies `bad` to
    /// `sink`, for explaining a DENY; it runs from the source to `sink`.
    ///
    /// Walks back from `sink`. From a call, to its earliest data
    /// predecessor whose label (as it was when the edge was used) satisfies
    /// `bad`; `first_hop` restricts the edges followed into `sink` itself
    /// (the arguments bound to the sink). From a context, to the first read
    /// that carried the label alone: found by binary search over the
    /// context's rising labels, then at most `MERGE_SCAN` merges on, so an
    /// explanation never rescans the session's history. The walk stops
    /// where no predecessor satisfies `bad`: that node is where the label
    /// came in.
    pub fn explain_path(
        &self,
        sink: NodeId,
        bad: impl Fn(&Label) -> bool,
        first_hop: impl Fn(&Edge) -> bool,
    ) -> Vec<NodeId> {
        let mut path = vec![sink];
        let mut cur = sink;
        let mut horizon = self.edges.len();
        loop {
            let next = if self.node(cur).is_some_and(|n| n.kind == NodeKind::Context) {
                let merges = self.merges_before(cur, horizon);
                let first = merges.partition_point(|m| !bad(&m.joined));
                merges[first..]
                    .iter()
                    .take(MERGE_SCAN)
                    .find(|m| {
                        !path.contains(&m.from)
                            && self.satisfies_as_of(m.from, m.edge as usize, &bad)
                    })
                    .map(|m| (m.edge as usize, m.from))
            } else {
                let mut best: Option<(usize, NodeId)> = None;
                for i in self.in_edges(cur, horizon) {
                    let e = self.edges[i];
                    if e.kind != EdgeKind::Data
                        || e.trust == Trust::Inferred
                        || path.contains(&e.from)
                        || (cur == sink && !first_hop(&e))
                    {
                        continue;
                    }
                    if best.is_some_and(|(_, b)| b <= e.from) {
                        continue;
                    }
                    if self.satisfies_as_of(e.from, i, &bad) {
                        best = Some((i, e.from));
                    }
                }
                best
            };
            match next {
                Some((i, from)) => {
                    path.push(from);
                    cur = from;
                    horizon = i;
                }
                None => break,
            }
        }
        path.reverse();
        path
    }

    /// Whether `node`'s label, as it was before edge `horizon`, satisfies
    /// `bad` (upward closed). Call nodes never change; a context's label is
    /// the join of its merges before `horizon`, found by binary search.
    fn satisfies_as_of(&self, node: NodeId, horizon: usize, bad: &impl Fn(&Label) -> bool) -> bool {
        match self.node(node) {
            Some(n) if n.kind == NodeKind::Context => self
                .merges_before(node, horizon)
                .last()
                .is_some_and(|m| bad(&m.joined)),
            Some(n) => bad(&n.label),
            None => false,
        }
    }
}
