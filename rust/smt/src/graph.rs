//! The session graph as the SMT authorizer sees it: nodes whose labels are
//! label presence Booleans `H[v,ℓ]` ([`SymLabel`]), each defined from its
//! direct predecessors only (no transitive closure is materialized).
//!
//! * A **call** node: `H[v] ⇔ sanitize(input(v)) ⊔ own(v)`, where `own(v)`
//!   is the tool's source label joined with the labels of the resources
//!   its resource argument matches, and `input(v)` is the join of its
//!   arguments' labels (each the join of its predecessors through that
//!   argument), or the context's label when the call passes no data.
//! * A **context** node is one version of a context: `H[c] ⇔ H[c_prev] ⊔
//!   ⋁ H[r]` over the outputs merged since the previous version (the
//!   reads of the agents it covers). A call reads the version current when
//!   it is made, so the graph stays acyclic.
//! * A **task** node is trusted text at the lowest level (bottom).
//!
//! Inferred edges are recorded for audit and never enter a definition.
//! Value edges (provenance by value: the argument's value occurs in a task
//! text or a trusted output) are lineage the semantics derives from the
//! values, and enter definitions like observed lineage.

use crate::step::{Atom, SymLabel};
use agenra_core::label::Label;
use agenra_core::policy::{AgentId, Policy, ToolId};
use serde::Serialize;
use z3::ast::Bool;
use z3::Model;

/// What a node stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    /// A version of a context (what the agents had read when a call was
    /// made).
    Context,
    /// The user's request.
    Task,
    /// A call (well-formed or not; an ill-formed call carries nothing).
    Call,
}

/// How an edge is known (the native graph's trust levels).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EdgeTrust {
    /// Lineage the call names, a succeeded result merged into a context,
    /// a context's previous version.
    Observed,
    /// The conservative edge from the context into an argument without
    /// lineage, the merge of a result whose outcome is unknown.
    Policy,
    /// Provenance by value (`provenance by value;`): the argument's value
    /// occurs in the task's text or in the trusted output the edge comes
    /// from. The semantics counts it as lineage (docs/semantics.md: the
    /// argument takes that provenance's label, through an edge of trust
    /// `value`), so it carries labels like observed lineage.
    Value,
    /// Lineage the adapter guessed: recorded for audit, never used.
    Inferred,
}

/// A node of the graph.
#[derive(Clone, Debug)]
pub struct GraphNode {
    /// What the node stands for.
    pub kind: NodeKind,
    /// The call's or task's id; for a context, `context` or
    /// `context:AGENT` with a version (`@k`).
    pub name: String,
    /// The tool called (calls of a known tool).
    pub tool: Option<ToolId>,
    /// The calling agent (the owner of an own context; 0 otherwise).
    pub agent: AgentId,
    /// The label the node adds itself: the tool's source label joined with
    /// its resource's labels (bottom for contexts and tasks).
    pub own: Label,
    /// The sanitizer the tool applies to its input, if any.
    pub sanitizer: Option<usize>,
    /// `H[v,·]`: the node's label, as Booleans defined by the node's
    /// constraint.
    pub label: SymLabel,
    /// Where the call stands (`denied`, `paused`, `admitted`, ...), for
    /// drawing; empty for contexts.
    pub status: String,
}

/// A data edge.
#[derive(Clone, Debug, Serialize)]
pub struct GraphEdge {
    /// The node the data comes from.
    pub from: usize,
    /// The node it flows into.
    pub to: usize,
    /// The argument of `to` it flows into (`None`: a context version, or
    /// a call that reads the context as a whole).
    pub param: Option<usize>,
    /// How the edge is known.
    pub trust: EdgeTrust,
}

/// The graph: nodes in order of creation, and data edges.
#[derive(Clone, Debug, Default)]
pub struct SessionGraph {
    /// Nodes, indexed by their position.
    pub nodes: Vec<GraphNode>,
    /// Data edges (inferred ones included, marked as such).
    pub edges: Vec<GraphEdge>,
}

impl SessionGraph {
    /// The edges into `to` that carry data (not inferred).
    pub fn preds(&self, to: usize) -> impl Iterator<Item = &GraphEdge> {
        self.edges
            .iter()
            .filter(move |e| e.to == to && e.trust != EdgeTrust::Inferred)
    }

    /// Whether a non-inferred edge runs from `from` to `to`.
    pub fn has_edge(&self, from: usize, to: usize) -> bool {
        self.preds(to).any(|e| e.from == from)
    }

    /// Label definitions of every node, as the model gives them.
    pub fn eval_labels(&self, model: &Model) -> Vec<Option<Label>> {
        self.nodes.iter().map(|n| n.label.eval(model)).collect()
    }

    /// A shortest path of data edges, backwards from `start` (entered
    /// through `params`, or any edge when `None`), along nodes that carry
    /// `atom` in `model`, to a node that adds the atom itself. Returned
    /// source first, `start` last. `None` if the model does not carry the
    /// atom that way (it always does when the sink's label has it).
    pub fn taint_path(
        &self,
        policy: &Policy,
        model: &Model,
        start: usize,
        params: Option<&[usize]>,
        atom: Atom,
    ) -> Option<Vec<usize>> {
        let carries = |n: usize| -> bool {
            model
                .eval(&self.nodes[n].label.atom(atom), true)
                .and_then(|b| b.as_bool())
                .unwrap_or(false)
        };
        let passes = |n: usize| -> bool {
            // The node's sanitizer lets the atom through from its input.
            match self.nodes[n]
                .sanitizer
                .and_then(|s| policy.sanitizers.get(s))
            {
                None => true,
                Some(s) => match atom {
                    Atom::Sensitivity(l) => s.max_sensitivity.is_none_or(|m| l <= m),
                    Atom::Category(c) => !s.removes.contains(c),
                    Atom::Untrusted => !s.trusts,
                },
            }
        };
        let adds = |n: usize| {
            SymLabel::constant(policy, &self.nodes[n].own)
                .atom(atom)
                .as_bool()
                == Some(true)
        };
        // Breadth first from the start's entry edges.
        let mut parent: Vec<Option<usize>> = vec![None; self.nodes.len()];
        let mut seen = vec![false; self.nodes.len()];
        let mut queue = std::collections::VecDeque::new();
        for e in self.preds(start) {
            let through = params.is_none_or(|ps| e.param.is_some_and(|p| ps.contains(&p)));
            if through && !seen[e.from] && carries(e.from) {
                seen[e.from] = true;
                parent[e.from] = Some(start);
                queue.push_back(e.from);
            }
        }
        while let Some(n) = queue.pop_front() {
            if adds(n) {
                let mut path = vec![n];
                let mut cur = n;
                while let Some(p) = parent[cur] {
                    path.push(p);
                    cur = p;
                }
                return Some(path);
            }
            if !passes(n) {
                continue;
            }
            let next: Vec<usize> = self.preds(n).map(|e| e.from).collect();
            for m in next {
                if !seen[m] && carries(m) {
                    seen[m] = true;
                    parent[m] = Some(n);
                    queue.push_back(m);
                }
            }
        }
        None
    }

    /// The constraint defining node `n`'s label from its predecessors.
    pub(crate) fn definition(&self, policy: &Policy, n: usize) -> Bool {
        let node = &self.nodes[n];
        let def = match node.kind {
            NodeKind::Task => SymLabel::bottom(policy),
            NodeKind::Context => {
                let preds: Vec<&SymLabel> =
                    self.preds(n).map(|e| &self.nodes[e.from].label).collect();
                SymLabel::join_all(policy, preds)
            }
            NodeKind::Call => {
                let input = self.input(policy, n);
                let through = match node.sanitizer.and_then(|s| policy.sanitizers.get(s)) {
                    Some(s) => input.sanitize(s),
                    None => input,
                };
                through.join(&SymLabel::constant(policy, &node.own))
            }
        };
        node.label.iff(&def)
    }

    /// The label of argument `param` of call `n`: the join of its
    /// predecessors through that argument (bottom if none).
    pub fn arg_label(&self, policy: &Policy, n: usize, param: usize) -> SymLabel {
        let preds: Vec<&SymLabel> = self
            .preds(n)
            .filter(|e| e.param == Some(param))
            .map(|e| &self.nodes[e.from].label)
            .collect();
        SymLabel::join_all(policy, preds)
    }

    /// The input label of call `n`: the join of every data edge into it
    /// (argument edges, or the one context edge of a call that passes no
    /// data).
    pub fn input(&self, policy: &Policy, n: usize) -> SymLabel {
        let preds: Vec<&SymLabel> = self.preds(n).map(|e| &self.nodes[e.from].label).collect();
        SymLabel::join_all(policy, preds)
    }
}
