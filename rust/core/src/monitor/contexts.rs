//! Contexts: what the agents have read. By default all agents of a session
//! share one context (node 0): a delegate receives its task from its
//! delegator and reports back to it, so in general nobody can tell which
//! agent saw what, and separate contexts would only pretend to precision.
//! An agent declared with `own context` (for adapters that do know) gets its
//! own context node, created at its first use: the arguments of its calls
//! (and of its delegates' calls, unless they have their own) read it, and
//! what those calls return merges into it, into the own contexts of the
//! agents above it, and into the shared context (it reports back).

use super::{Session, CONTEXT};
use crate::graph::{EdgeKind, Evidence, Node, NodeId, NodeKind, Status, Trust, NO_PARAM, NO_TOOL};
use crate::label::Label;
use crate::policy::AgentId;

impl Session {
    /// The label of the context an agent's arguments read, now.
    pub(crate) fn context_label_of(&self, agent: AgentId) -> Label {
        let node = match self
            .shared
            .0
            .index
            .context_owner
            .get(agent)
            .copied()
            .flatten()
        {
            None => Some(CONTEXT),
            Some(owner) => self.state.agent_contexts.value(owner),
        };
        // An own context not created yet holds nothing.
        node.and_then(|n| self.state.graph.node(n))
            .map_or(Label::BOTTOM, |n| n.label)
    }

    /// The context node an agent's arguments read, created if needed.
    pub(crate) fn context_node_of(&mut self, agent: AgentId) -> NodeId {
        match self
            .shared
            .0
            .index
            .context_owner
            .get(agent)
            .copied()
            .flatten()
        {
            None => CONTEXT,
            Some(owner) => self.own_context(owner),
        }
    }

    fn own_context(&mut self, owner: AgentId) -> NodeId {
        if let Some(n) = self.state.agent_contexts.value(owner) {
            return n;
        }
        let n = self.state.graph.push_node(Node {
            kind: NodeKind::Context,
            status: Status::Context,
            evidence: Evidence::Results,
            agent: owner as u16,
            tool: NO_TOOL,
            label: Label::BOTTOM,
            time: self.state.time,
            first_edge: 0,
        });
        let agents = self.shared.0.policy.agents.len();
        *self.state.agent_contexts.slot(owner, agents) = Some(n);
        n
    }

    /// A result of `node` (called by `agent`) is read: its label joins the
    /// shared context and the own contexts of the agents on the chain.
    pub(crate) fn merge_into_contexts(
        &mut self,
        node: NodeId,
        agent: AgentId,
        label: Label,
        trust: Trust,
    ) {
        let owners = self
            .shared
            .0
            .index
            .merge_into
            .get(agent)
            .cloned()
            .unwrap_or_default();
        let targets =
            std::iter::once(CONTEXT).chain(owners.into_iter().map(|o| self.own_context(o)));
        for ctx in targets.collect::<Vec<_>>() {
            if let Some(c) = self.state.graph.node_mut(ctx) {
                c.label = c.label.join(&label);
            }
            self.state
                .graph
                .push_edge(node, ctx, EdgeKind::Data, trust, NO_PARAM);
        }
    }
}
