//! The session graph: append-only nodes and typed edges with evidence.
//!
//! Nodes are calls (and the session's context node); edges say where data
//! came from (data), what came before (control) and which delegator a
//! delegate acts for (parent). The graph only grows: labels of call nodes
//! are fixed when the node is appended, and only the context node's label
//! rises (monotone repair). Compact on purpose: a node is 32 bytes and an
//! edge 12, so a session of thousands of events stays small.

use crate::label::Label;
use serde::{Deserialize, Serialize};

/// A node's id in its session graph, printed as `n<id>`. Ids are handed out
/// in order from 0 (the shared context) and never reused or changed, even
/// when a compact session forgets old nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NodeId(pub u32);

impl std::fmt::Display for NodeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "n{}", self.0)
    }
}

/// What a node stands for. For a call, set from its tool's declaration
/// when the node is appended: a sink if the tool reaches one, else a source
/// if its output can carry a label, else a plain tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

/// What an edge records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EdgeKind {
    /// Data flows from `from` into `to`: lineage of an argument, the
    /// context read by a call, or a result (or task) merged into a context.
    /// The only kind a DENY's path follows.
    Data,
    /// `from` is the call made just before `to`; for audit only.
    Control,
    /// `from` is the delegator's latest call when the delegate made `to`;
    /// for audit only.
    Parent,
}

/// How an edge is known. Inferred edges are kept for audit but never used to
/// narrow a flow: an argument with only inferred lineage still gets the
/// conservative edge from the context.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Trust {
    /// Reported by the adapter or the event itself: lineage the call names,
    /// a succeeded result or a task read into the context, control edges.
    Observed,
    /// Assumed by the monitor's rules: the conservative edge from the
    /// context, parent edges, the merge of a result whose outcome is
    /// unknown.
    Policy,
    /// Lineage the adapter guessed; recorded, never used to narrow a flow.
    Inferred,
    /// Provenance by value: the argument's value occurs in the source's
    /// text (the task, or a trusted output).
    Value,
}

/// What a node's label rests on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Evidence {
    /// Source rules and resource labels of the policy, joined with inputs.
    Policy,
    /// A trusted sanitizer specification transformed the inputs' label.
    Sanitized,
    /// Accumulated from results (the context node).
    Results,
}

/// Where a node stands: for a call, the state of its life cycle (decided,
/// then possibly resolved by a human, then finished by a result).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The call was denied (kept for the audit trail; nothing merged).
    Denied,
    /// The call PAUSEd and awaits a human's approval or rejection.
    Paused,
    /// The call was admitted (allowed, or paused and approved) and awaits
    /// its result.
    Running,
    /// A human rejected the paused call; its units were returned.
    Rejected,
    /// The result succeeded; its output label merged into the context.
    Succeeded,
    /// The result failed; its units were returned, nothing merged.
    Failed,
    /// The outcome is unknown: units stay spent, the output label merged.
    Unknown,
    /// The context node.
    Context,
    /// A task node.
    Task,
}

/// `tool` is an index into `Policy::tools`, or `NO_TOOL` for the context
/// node and for calls naming an unknown tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// What the node stands for.
    pub kind: NodeKind,
    /// Where a call is in its life cycle (or that the node is a context or
    /// task).
    pub status: Status,
    /// What the node's label rests on.
    pub evidence: Evidence,
    /// The calling agent (an [`AgentId`](crate::policy::AgentId)); for an
    /// agent's own context, its owner; 0 for the shared context and tasks.
    pub agent: u16,
    /// The tool called, or [`NO_TOOL`].
    pub tool: u32,
    /// For calls: the label of what the call returns. For the context: the
    /// join of everything the agents have read.
    pub label: Label,
    /// The time of the event that appended the node.
    pub time: u64,
    /// Index of the first edge appended after this node: a call node's
    /// incoming edges all come right after it (kept so explanations need
    /// not scan the whole graph; free, it fits in the padding).
    pub first_edge: u32,
}

/// [`Node::tool`] of a node that is not a call of a known tool.
pub const NO_TOOL: u32 = u32::MAX;

/// A typed edge of the session graph, from an earlier node to a later one
/// (or into a context). Edges are never removed, except by a compact
/// session forgetting old nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Edge {
    /// Where the data (or precedence, or delegation) comes from.
    pub from: NodeId,
    /// The node it goes to.
    pub to: NodeId,
    /// What the edge records.
    pub kind: EdgeKind,
    /// How the edge is known; [`Trust::Inferred`] edges never narrow a flow.
    pub trust: Trust,
    /// The parameter the data flows into, or `NO_PARAM`.
    pub param: u16,
}

/// [`Edge::param`] of an edge that is not tied to one argument (control,
/// parent and context edges, merges).
pub const NO_PARAM: u16 = u16::MAX;

/// One merge into a context node: the edge, where it came from, and the
/// context's label right after it (labels only rise, so these are
/// increasing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Merge {
    /// The absolute index of the merging edge.
    pub edge: u32,
    /// The node merged (a call's result, or a task).
    pub from: NodeId,
    /// The context's label right after the merge.
    pub joined: Label,
}

/// The capacity a vector of a compact session's graph keeps once it has
/// forgotten down to `len` items. A compact session forgets when it
/// holds twice its window, so what it keeps then is about half the most
/// it will hold until the next time; a doubling vector would keep up to
/// twice that peak, spare for ever (issue #28: bytes a call). A few items
/// of slack (pinned nodes, a result's extra edges) keep the shrink from
/// being undone by a regrowth every time; once shrunk, it is a no-op.
fn after_forgetting(len: usize) -> usize {
    2 * len + 8
}

/// How many merges a path explanation looks through, past the first one
/// at which the context carried the offending label, for a single source
/// that carries it alone. Beyond that the path ends at the context (which
/// is then the source: several reads together made the label).
const MERGE_SCAN: usize = 64;

/// A session's graph: its nodes, edges and the merge log of each context.
///
/// Appended to by the monitor, read for audit and to explain DENYs
/// ([`Graph::explain_path`]). Nodes and edges are addressed by absolute id
/// and index, which stay valid when a compact session forgets old ones
/// (lookups of forgotten items return `None`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Graph {
    /// The nodes from `base` on (all of them, unless the session is
    /// compact), indexed by `id - base`.
    pub nodes: Vec<Node>,
    /// The edges from `edge_base` on, indexed by `index - edge_base`.
    pub edges: Vec<Edge>,
    /// Per context node (the shared one, and agents' own): its merges in
    /// order. A handful of contexts, so a list.
    pub merges: Vec<(NodeId, Vec<Merge>)>,
    /// A compact session forgets old nodes: the id of `nodes[0]`, and the
    /// index of `edges[0]`. Ids and edge indexes never change.
    pub base: u32,
    /// The absolute index of `edges[0]` (see `base`).
    pub edge_base: u32,
    /// Nodes older than `base` that are still needed (contexts, tasks,
    /// paused and running calls), without their edges.
    pub pinned: std::collections::BTreeMap<u32, Node>,
}

impl Graph {
    /// Appends `node` and returns its id. Its incoming edges must be pushed
    /// right after it, before the next node (`first_edge` is set here).
    pub fn push_node(&mut self, mut node: Node) -> NodeId {
        node.first_edge = self.edge_count() as u32;
        self.nodes.push(node);
        NodeId((self.len() - 1) as u32)
    }

    /// Node ids handed out so far (the next node's id).
    pub fn len(&self) -> usize {
        self.base as usize + self.nodes.len()
    }

    /// Whether no node was ever added.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Edges added so far (the next edge's index).
    pub fn edge_count(&self) -> usize {
        self.edge_base as usize + self.edges.len()
    }

    /// Edge `i` (an absolute index), unless it was forgotten.
    pub fn edge(&self, i: usize) -> Option<&Edge> {
        self.edges.get(i.checked_sub(self.edge_base as usize)?)
    }

    /// Removes the nodes and edges added after the first `nodes` nodes and
    /// `edges` edges (undoing a speculative call; never below `base`).
    pub fn truncate(&mut self, nodes: usize, edges: usize) {
        self.nodes
            .truncate(nodes.saturating_sub(self.base as usize));
        self.edges
            .truncate(edges.saturating_sub(self.edge_base as usize));
    }

    /// Forgets the nodes older than `keep_from` (a compact session), in id
    /// order. Each is handed to `forget` with the edges stored after it (its
    /// incoming edges, then later ones up to the next node, such as the merge
    /// of its result into a context), which are dropped; those `pin` keeps
    /// then move to `pinned`, without edges. Merges made through dropped
    /// edges go too (they only explain paths).
    pub fn forget_before(
        &mut self,
        keep_from: u32,
        pin: impl Fn(NodeId, &Node) -> bool,
        mut forget: impl FnMut(NodeId, &Node, &[Edge]),
    ) {
        let keep_from = keep_from.min(self.len() as u32);
        if keep_from <= self.base {
            return;
        }
        let cut = (keep_from - self.base) as usize;
        let edge_cut = self
            .nodes
            .get(cut)
            .map_or(self.edge_count(), |n| n.first_edge as usize);
        for i in 0..cut {
            let id = NodeId(self.base + i as u32);
            let node = self.nodes[i];
            let end = self
                .nodes
                .get(i + 1)
                .map_or(self.edge_count(), |n| n.first_edge as usize);
            let range = (node.first_edge as usize).saturating_sub(self.edge_base as usize)
                ..end.saturating_sub(self.edge_base as usize);
            let edges = self.edges.get(range).unwrap_or(&[]);
            forget(id, &node, edges);
            if pin(id, &node) {
                self.pinned.insert(id.0, node);
            }
        }
        self.nodes.drain(..cut);
        let drop_edges = edge_cut.saturating_sub(self.edge_base as usize);
        self.edges.drain(..drop_edges.min(self.edges.len()));
        self.base = keep_from;
        self.edge_base = edge_cut as u32;
        for (_, log) in &mut self.merges {
            let first = log.partition_point(|m| (m.edge as usize) < edge_cut);
            // The label a context had stays in the first kept merge's join.
            log.drain(..first);
            log.shrink_to(after_forgetting(log.len()));
        }
        self.nodes.shrink_to(after_forgetting(self.nodes.len()));
        self.edges.shrink_to(after_forgetting(self.edges.len()));
    }

    /// Drops pinned nodes that `keep` no longer needs.
    pub fn unpin(&mut self, keep: impl Fn(NodeId, &Node) -> bool) {
        self.pinned.retain(|&id, n| keep(NodeId(id), n));
    }

    /// Appends an edge. A data edge into a context node is also logged as a
    /// merge, with the context's label after it (the join of the merges so
    /// far and `from`'s label); the context node's own label is not
    /// changed here.
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
            let edge = self.edge_count() as u32;
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

    /// Node `id`, if it exists and was not forgotten (pinned nodes are
    /// found too).
    pub fn node(&self, id: NodeId) -> Option<&Node> {
        match id.0.checked_sub(self.base) {
            Some(i) => self.nodes.get(i as usize),
            None => self.pinned.get(&id.0),
        }
    }

    /// Node `id`, mutably (to update a call's status or a context's label).
    pub fn node_mut(&mut self, id: NodeId) -> Option<&mut Node> {
        match id.0.checked_sub(self.base) {
            Some(i) => self.nodes.get_mut(i as usize),
            None => self.pinned.get_mut(&id.0),
        }
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
        // A pinned node's edges were forgotten with its neighbours.
        let Some(slot) = to.0.checked_sub(self.base) else {
            return vec![];
        };
        let Some(node) = self.nodes.get(slot as usize) else {
            return vec![];
        };
        let start = (node.first_edge as usize).max(self.edge_base as usize);
        let end = self
            .nodes
            .get(slot as usize + 1)
            .map_or(self.edge_count(), |n| n.first_edge as usize)
            .min(horizon);
        (start..end.max(start))
            .filter(|&i| self.edge(i).is_some_and(|e| e.to == to))
            .collect()
    }

    /// Data predecessors of `to` that may be trusted for a flow (not inferred).
    pub fn data_preds(&self, to: NodeId) -> Vec<NodeId> {
        let is_context = self.node(to).is_some_and(|n| n.kind == NodeKind::Context);
        if is_context {
            return self
                .merges_before(to, self.edge_count())
                .iter()
                .map(|m| m.from)
                .collect();
        }
        self.in_edges(to, self.edge_count())
            .into_iter()
            .filter_map(|i| self.edge(i).copied())
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
        self.explain_path_before(sink, self.edge_count(), bad, first_hop)
    }

    /// [`Graph::explain_path`] as the graph was when it held `horizon`
    /// edges: edges appended since are not followed (a path built when a
    /// decision is read is the one it had when it was made).
    pub fn explain_path_before(
        &self,
        sink: NodeId,
        horizon: usize,
        bad: impl Fn(&Label) -> bool,
        first_hop: impl Fn(&Edge) -> bool,
    ) -> Vec<NodeId> {
        let mut path = vec![sink];
        let mut cur = sink;
        let mut horizon = horizon.min(self.edge_count());
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
                    let Some(&e) = self.edge(i) else { continue };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::label::CategorySet;

    fn node(kind: NodeKind, label: Label) -> Node {
        Node {
            kind,
            status: Status::Succeeded,
            evidence: Evidence::Policy,
            agent: 0,
            tool: 0,
            label,
            time: 0,
            first_edge: 0,
        }
    }

    fn context() -> Node {
        node(NodeKind::Context, Label::BOTTOM)
    }

    /// Public, trusted, with the given categories.
    fn cats(c: u64) -> Label {
        Label::new(0, CategorySet(c), true)
    }

    const SECRET: Label = Label {
        sensitivity: 2,
        categories: CategorySet(1),
        trusted: true,
    };

    fn secret(l: &Label) -> bool {
        l.sensitivity >= 2
    }

    fn data(g: &mut Graph, from: NodeId, to: NodeId, param: u16) {
        g.push_edge(from, to, EdgeKind::Data, Trust::Observed, param);
    }

    #[test]
    fn node_ids_print_with_an_n() {
        assert_eq!(NodeId(7).to_string(), "n7");
        assert_eq!(format!("{} {}", NodeId(0), NodeId(12)), "n0 n12");
    }

    #[test]
    fn nodes_get_consecutive_ids_and_remember_the_edge_count() {
        let mut g = Graph::default();
        let a = g.push_node(context());
        let b = g.push_node(node(NodeKind::Source, SECRET));
        data(&mut g, b, a, NO_PARAM);
        g.push_edge(a, b, EdgeKind::Control, Trust::Observed, NO_PARAM);
        let c = g.push_node(node(NodeKind::Sink, Label::BOTTOM));
        assert_eq!((a, b, c), (NodeId(0), NodeId(1), NodeId(2)));
        assert_eq!(g.node(c).unwrap().first_edge, 2);
        assert_eq!(g.node(b).unwrap().first_edge, 0);
        assert_eq!(g.node(b).unwrap().label, SECRET);
        assert!(g.node(NodeId(3)).is_none());
        assert!(g.node_mut(NodeId(3)).is_none());
        g.node_mut(a).unwrap().label = SECRET;
        assert_eq!(g.node(a).unwrap().label, SECRET);
        assert_eq!(g.nodes.len(), 3);
    }

    #[test]
    fn edges_are_kept_and_only_data_into_a_context_is_a_merge() {
        let mut g = Graph::default();
        let shared = g.push_node(context());
        let own = g.push_node(context());
        let a = g.push_node(node(NodeKind::Source, cats(1)));
        let b = g.push_node(node(NodeKind::Source, cats(2)));
        let call = g.push_node(node(NodeKind::Tool, Label::BOTTOM));
        data(&mut g, a, call, 0); // into a call: no merge
        g.push_edge(b, shared, EdgeKind::Control, Trust::Observed, NO_PARAM); // control: no merge
        g.push_edge(a, shared, EdgeKind::Parent, Trust::Policy, NO_PARAM); // parent: no merge
        data(&mut g, a, shared, NO_PARAM); // edge 3
        data(&mut g, b, own, NO_PARAM); // edge 4
        data(&mut g, b, shared, NO_PARAM); // edge 5
        data(&mut g, NodeId(99), own, NO_PARAM); // edge 6: unknown source, bottom
        assert_eq!(g.edges.len(), 7);
        assert_eq!(
            g.edges[2],
            Edge {
                from: a,
                to: shared,
                kind: EdgeKind::Parent,
                trust: Trust::Policy,
                param: NO_PARAM
            }
        );
        assert_eq!(g.edges[0].param, 0);
        assert_eq!(
            g.merges,
            vec![
                (
                    shared,
                    vec![
                        Merge {
                            edge: 3,
                            from: a,
                            joined: cats(1)
                        },
                        Merge {
                            edge: 5,
                            from: b,
                            joined: cats(3)
                        },
                    ]
                ),
                (
                    own,
                    vec![
                        Merge {
                            edge: 4,
                            from: b,
                            joined: cats(2)
                        },
                        Merge {
                            edge: 6,
                            from: NodeId(99),
                            joined: cats(2)
                        },
                    ]
                ),
            ]
        );
        assert_eq!(g.merges_before(shared, 5).len(), 1);
        assert_eq!(g.merges_before(shared, 6).len(), 2);
        assert_eq!(g.merges_before(shared, 3).len(), 0);
        assert_eq!(g.merges_before(own, 5)[0].from, b);
        assert!(g.merges_before(call, 7).is_empty());
    }

    /// n0 context; n1, n2 sources; n3 a call reading both plus a control
    /// and an inferred edge; n4 a sink; then n3's result merges into the
    /// context (an edge after n4's own edges).
    fn chain() -> (Graph, [NodeId; 5]) {
        let mut g = Graph::default();
        let ctx = g.push_node(context());
        let s1 = g.push_node(node(NodeKind::Source, SECRET));
        let s2 = g.push_node(node(NodeKind::Source, cats(2)));
        data(&mut g, s1, ctx, NO_PARAM); // e0
        let call = g.push_node(node(NodeKind::Tool, SECRET));
        g.push_edge(s1, call, EdgeKind::Control, Trust::Observed, NO_PARAM); // e1
        data(&mut g, s2, call, 0); // e2
        g.push_edge(ctx, call, EdgeKind::Data, Trust::Inferred, 1); // e3
        g.push_edge(s1, call, EdgeKind::Data, Trust::Value, 2); // e4
        let sink = g.push_node(node(NodeKind::Sink, Label::BOTTOM));
        data(&mut g, s2, sink, 0); // e5
        data(&mut g, call, sink, 1); // e6
        data(&mut g, s2, ctx, NO_PARAM); // e7
        (g, [ctx, s1, s2, call, sink])
    }

    #[test]
    fn data_predecessors_skip_control_and_inferred_edges() {
        let (g, [ctx, s1, s2, call, sink]) = chain();
        assert_eq!(g.data_preds(call), vec![s2, s1]);
        assert_eq!(g.data_preds(sink), vec![s2, call]);
        assert_eq!(g.data_preds(ctx), vec![s1, s2]);
        assert!(g.data_preds(s1).is_empty());
        assert!(g.data_preds(NodeId(42)).is_empty());
        assert_eq!(g.in_edges(call, g.edges.len()), vec![1, 2, 3, 4]);
        assert_eq!(g.in_edges(sink, g.edges.len()), vec![5, 6]);
        assert_eq!(g.in_edges(sink, 6), vec![5]);
    }

    #[test]
    fn a_path_runs_from_the_source_through_calls_to_the_sink() {
        let (g, [ctx, s1, s2, call, sink]) = chain();
        assert_eq!(g.explain_path(sink, secret, |_| true), vec![s1, call, sink]);
        // Only the arguments bound to the sink are followed out of it.
        assert_eq!(g.explain_path(sink, secret, |e| e.param == 0), vec![sink]);
        assert_eq!(
            g.explain_path(sink, secret, |e| e.param == 1),
            vec![s1, call, sink]
        );
        // Nothing bad: the path is the sink alone.
        assert_eq!(
            g.explain_path(sink, |l| l.sensitivity > 2, |_| true),
            vec![sink]
        );
        // From the context: the read that brought the label in.
        assert_eq!(g.explain_path(ctx, secret, |_| true), vec![s1, ctx]);
        // Category 1 came in with s2, bound to the sink's parameter 0.
        let cat2 = |l: &Label| l.categories.contains(1);
        assert_eq!(g.explain_path(sink, cat2, |e| e.param == 0), vec![s2, sink]);
    }

    #[test]
    fn a_path_prefers_the_earliest_bad_argument() {
        let mut g = Graph::default();
        let _ctx = g.push_node(context());
        let a = g.push_node(node(NodeKind::Source, SECRET));
        let b = g.push_node(node(NodeKind::Source, SECRET));
        let c = g.push_node(node(NodeKind::Source, SECRET));
        let sink = g.push_node(node(NodeKind::Sink, Label::BOTTOM));
        data(&mut g, c, sink, 0);
        data(&mut g, b, sink, 1);
        data(&mut g, a, sink, 2);
        data(&mut g, b, sink, 3);
        assert_eq!(g.explain_path(sink, secret, |_| true), vec![a, sink]);
        assert_eq!(
            g.explain_path(sink, secret, |e| e.param != 2),
            vec![b, sink]
        );
    }

    #[test]
    fn a_path_through_the_context_stops_at_the_read_that_carried_the_label() {
        // Sensitivity and category 0 together are bad: n1 brings one, n2
        // the other, so the context is bad from n2's merge on although
        // neither read is; n3 is a read that is bad by itself, and it also
        // read the context.
        let bad = |l: &Label| l.sensitivity >= 1 && l.categories.contains(0);
        let mut g = Graph::default();
        let ctx = g.push_node(context());
        let n1 = g.push_node(node(NodeKind::Source, Label::new(1, CategorySet(0), true)));
        data(&mut g, n1, ctx, NO_PARAM); // e0
        let n2 = g.push_node(node(NodeKind::Source, cats(1)));
        data(&mut g, n2, ctx, NO_PARAM); // e1
        let n3 = g.push_node(node(NodeKind::Source, Label::new(1, CategorySet(1), true)));
        data(&mut g, ctx, n3, 0); // e2
        data(&mut g, n3, ctx, NO_PARAM); // e3
        let sink = g.push_node(node(NodeKind::Sink, Label::BOTTOM));
        data(&mut g, ctx, sink, 0); // e4
        assert_eq!(g.explain_path(sink, bad, |_| true), vec![n3, ctx, sink]);
        // Before n3's merge, no single read carried it: the context is the source.
        let mut early = Graph::default();
        let ctx = early.push_node(context());
        let n1 = early.push_node(node(NodeKind::Source, Label::new(1, CategorySet(0), true)));
        data(&mut early, n1, ctx, NO_PARAM);
        let n2 = early.push_node(node(NodeKind::Source, cats(1)));
        data(&mut early, n2, ctx, NO_PARAM);
        let sink = early.push_node(node(NodeKind::Sink, Label::BOTTOM));
        data(&mut early, ctx, sink, 0);
        assert_eq!(early.explain_path(sink, bad, |_| true), vec![ctx, sink]);
        // The context is judged as it was when the sink used it: a bad read
        // merged after the sink is not on the path.
        let late = early.push_node(node(NodeKind::Source, SECRET));
        data(&mut early, late, ctx, NO_PARAM);
        assert_eq!(early.explain_path(sink, secret, |_| true), vec![sink]);
        assert_eq!(early.explain_path(ctx, secret, |_| true), vec![late, ctx]);
    }

    #[test]
    fn each_context_keeps_its_own_merges() {
        let mut g = Graph::default();
        let shared = g.push_node(context());
        let own = g.push_node(context());
        let a = g.push_node(node(NodeKind::Source, SECRET));
        let b = g.push_node(node(NodeKind::Source, SECRET));
        data(&mut g, a, shared, NO_PARAM);
        data(&mut g, b, own, NO_PARAM);
        let sink = g.push_node(node(NodeKind::Sink, Label::BOTTOM));
        data(&mut g, own, sink, 0);
        assert_eq!(g.data_preds(own), vec![b]);
        assert_eq!(g.data_preds(shared), vec![a]);
        assert_eq!(g.explain_path(sink, secret, |_| true), vec![b, own, sink]);
    }

    /// n0 context; n1 a read merged into it (e0); n2 a call on n1 (e1);
    /// n3 a call on n2 and the context (e2, e3); n4 a read merged (e4);
    /// n5 a sink on n3 and the context (e5, e6).
    fn compactable() -> Graph {
        let mut g = Graph::default();
        let ctx = g.push_node(context());
        let n1 = g.push_node(node(NodeKind::Source, SECRET));
        data(&mut g, n1, ctx, NO_PARAM);
        let n2 = g.push_node(node(NodeKind::Tool, SECRET));
        data(&mut g, n1, n2, 0);
        let n3 = g.push_node(node(NodeKind::Tool, SECRET));
        data(&mut g, n2, n3, 0);
        data(&mut g, ctx, n3, 1);
        let n4 = g.push_node(node(NodeKind::Source, SECRET));
        data(&mut g, n4, ctx, NO_PARAM);
        let n5 = g.push_node(node(NodeKind::Sink, Label::BOTTOM));
        data(&mut g, n3, n5, 0);
        data(&mut g, ctx, n5, 1);
        g
    }

    fn forget(g: &mut Graph, keep_from: u32) -> Vec<(u32, Vec<u32>)> {
        let mut gone = Vec::new();
        g.forget_before(
            keep_from,
            |_, n| n.kind == NodeKind::Context,
            |id, _, edges| gone.push((id.0, edges.iter().map(|e| e.from.0).collect())),
        );
        gone
    }

    fn merge_edges(g: &Graph) -> Vec<u32> {
        g.merges[0].1.iter().map(|m| m.edge).collect()
    }

    #[test]
    fn a_compact_graph_forgets_old_nodes_but_keeps_ids() {
        assert!(Graph::default().is_empty());
        let mut g = compactable();
        assert!(!g.is_empty());
        assert_eq!((g.len(), g.edge_count()), (6, 7));
        assert_eq!(merge_edges(&g), [0, 4]);
        // Forget n0..n2: the context is pinned, n1 and n2 go with the
        // edges appended after them.
        // Every node is handed over, the pinned context too (with its edges).
        assert_eq!(forget(&mut g, 3), [(0, vec![]), (1, vec![1]), (2, vec![1])]);
        assert_eq!((g.base, g.edge_base), (3, 2));
        assert_eq!((g.len(), g.edge_count()), (6, 7));
        assert!(g.edge(1).is_none());
        assert_eq!(
            g.edge(2).map(|e| (e.from, e.to)),
            Some((NodeId(2), NodeId(3)))
        );
        assert_eq!(g.edge(6).map(|e| e.to), Some(NodeId(5)));
        assert!(g.edge(7).is_none());
        assert!(g.node(NodeId(0)).is_some() && g.node_mut(NodeId(0)).is_some());
        assert!(g.node(NodeId(1)).is_none() && g.node_mut(NodeId(2)).is_none());
        assert_eq!(g.node(NodeId(3)).map(|n| n.kind), Some(NodeKind::Tool));
        assert_eq!(merge_edges(&g), [4]);
        assert_eq!(g.data_preds(NodeId(3)), [NodeId(2), NodeId(0)]);
        assert_eq!(g.data_preds(NodeId(0)), [NodeId(4)]);
        // A path stops where the graph was forgotten.
        assert_eq!(
            g.explain_path(NodeId(5), secret, |e| e.param == 0),
            [NodeId(3), NodeId(5)]
        );
        // Nothing older than the base to forget.
        assert!(forget(&mut g, 3).is_empty());
        assert!(forget(&mut g, 1).is_empty());
        // Forget n3: n4's first edge is its merge, which stays.
        assert_eq!(forget(&mut g, 4), [(3, vec![2, 0])]);
        assert_eq!((g.base, g.edge_base), (4, 4));
        assert_eq!(merge_edges(&g), [4]);
        // Past the end: everything but the context goes.
        assert_eq!(forget(&mut g, 100), [(4, vec![4]), (5, vec![3, 0])]);
        assert_eq!((g.len(), g.edge_count(), g.nodes.len()), (6, 7, 0));
        assert!(merge_edges(&g).is_empty());
        g.unpin(|_, _| true);
        assert!(g.node(NodeId(0)).is_some());
        g.unpin(|_, _| false);
        assert!(g.node(NodeId(0)).is_none());
    }

    #[test]
    fn truncating_undoes_the_last_nodes_and_edges() {
        let mut g = compactable();
        g.truncate(5, 5);
        assert_eq!((g.len(), g.edge_count()), (5, 5));
        assert!(g.node(NodeId(5)).is_none() && g.edge(5).is_none());
        forget(&mut g, 3);
        g.truncate(4, 3);
        assert_eq!((g.len(), g.edge_count()), (4, 3));
        assert!(g.node(NodeId(3)).is_some() && g.node(NodeId(4)).is_none());
        // Never below the base.
        g.truncate(0, 0);
        assert_eq!((g.len(), g.edge_count()), (3, 2));
    }
}
