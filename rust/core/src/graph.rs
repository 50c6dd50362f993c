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

#[derive(Clone, Debug, Default, Serialize)]
pub struct Graph {
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
}

impl Graph {
    pub fn push_node(&mut self, node: Node) -> NodeId {
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

    /// Data edges into `to` that may be trusted for a flow (not inferred).
    pub fn data_preds(&self, to: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        self.edges
            .iter()
            .filter(move |e| e.to == to && e.kind == EdgeKind::Data && e.trust != Trust::Inferred)
            .map(|e| e.from)
    }

    /// A path of data edges from a node whose label satisfies `bad` to
    /// `sink`, for explaining a DENY. Walks back from `sink`'s data
    /// predecessors, always to the earliest predecessor that still satisfies
    /// `bad`, until none does: that node is where the label came in.
    /// The result runs from the source to `sink`.
    pub fn explain_path(&self, sink: NodeId, bad: impl Fn(&Label) -> bool) -> Vec<NodeId> {
        let mut path = vec![sink];
        let mut cur = sink;
        // Each hop goes to a strictly earlier node or to the context node
        // (at most once), so the walk ends.
        let mut seen_context = false;
        loop {
            let next = self
                .data_preds(cur)
                .filter(|p| *p != cur && !path.contains(p))
                .filter(|p| self.node(*p).is_some_and(|n| bad(&n.label)))
                .filter(|p| {
                    let is_ctx = self.node(*p).is_some_and(|n| n.kind == NodeKind::Context);
                    !(is_ctx && seen_context)
                })
                .min();
            match next {
                Some(p) => {
                    if self.node(p).is_some_and(|n| n.kind == NodeKind::Context) {
                        seen_context = true;
                    }
                    path.push(p);
                    cur = p;
                }
                None => break,
            }
        }
        path.reverse();
        path
    }
}
