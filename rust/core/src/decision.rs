//! What the monitor answers, and why.
//!
//! Reasons are structured (rendered against the policy only when someone
//! reads them), so the hot path formats no strings.

use crate::graph::NodeId;
use crate::hash::Hash;
use crate::label::Label;
use crate::policy::{AgentId, FactId, GrantId, Policy, SinkId, ToolId};
use crate::tokens::{TokenKind, TokenOrigin};
use crate::value::SetId;
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "UPPERCASE")]
/// The answer to a call: ALLOW (run it), DENY (do not), or PAUSE (ask a human first, then `approve`
/// or `reject`; its units are reserved meanwhile).
pub enum Verdict {
    /// The call may run: it is admitted and its units are taken.
    Allow,
    /// The call must not run. It consumes no authority; its node stays in the graph for audit.
    Deny,
    /// A human must decide: the call's units are reserved until it is approved (and re-checked) or
    /// rejected.
    Pause,
}

impl Verdict {
    /// The verdict as printed and serialized: `ALLOW`, `DENY` or `PAUSE`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allow => "ALLOW",
            Verdict::Deny => "DENY",
            Verdict::Pause => "PAUSE",
        }
    }
}

/// The rule or grant that decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// `well-formed`: an unknown tool, agent, argument or lineage, or an ill-typed or missing
    /// argument.
    WellFormed,
    /// A scope on the calling agent's delegation chain excludes the tool (index into
    /// [`Policy::scopes`]).
    Scope(usize),
    /// The scope the session's task opened.
    TaskScope,
    /// A flow rule into a sink (index into [`Policy::flow_rules`]).
    Flow(usize),
    /// A path rule or a count (`at most K`): index into [`Policy::path_rules`].
    Path(usize),
    /// An obligation (`require F before T`): index into [`Policy::obligations`].
    Obligation(usize),
    /// A `deny call` / `pause call` rule.
    Call(usize),
    /// A flow rule into an agent (`-> agent NAME`).
    Receive(usize),
    /// The grant that served the call (the caller's own for ALLOW), or the grant that needs
    /// approval.
    Grant(GrantId),
    /// `no-grant`: some agent on the delegation chain has no matching grant with quota left.
    NoGrant,
}

impl Rule {
    /// The rule's name in `policy` (`well-formed`, `no-grant`, `task-scope`, or the name the policy
    /// gives it); `?` for an index the policy does not have.
    pub fn name(&self, policy: &Policy) -> String {
        let get = |names: Option<&String>| names.cloned().unwrap_or_else(|| "?".into());
        match *self {
            Rule::WellFormed => "well-formed".into(),
            Rule::Scope(s) => get(policy.scopes.get(s).map(|s| &s.name)),
            Rule::TaskScope => "task-scope".into(),
            Rule::Flow(r) => get(policy.flow_rules.get(r).map(|r| &r.name)),
            Rule::Path(r) => get(policy.path_rules.get(r).map(|r| &r.name)),
            Rule::Obligation(r) => get(policy.obligations.get(r).map(|r| &r.name)),
            Rule::Call(r) => get(policy.call_rules.get(r).map(|r| &r.name)),
            Rule::Receive(r) => get(policy.receive_rules.get(r).map(|r| &r.name)),
            Rule::Grant(g) => get(policy.grants.get(g).map(|g| &g.name)),
            Rule::NoGrant => "no-grant".into(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// Why a call was decided as it was, structured: rendered by [`reason_text`] only when read.
pub enum Reason {
    /// The call names a tool the policy does not declare.
    UnknownTool(String),
    /// The call names an agent the policy does not declare.
    UnknownAgent(String),
    /// A required parameter has no argument (or `null`).
    MissingArg {
        /// The parameter's name.
        param: String,
    },
    /// An argument (or lineage) names a parameter the tool does not have.
    UnknownArg {
        /// The name as the call gave it.
        param: String,
    },
    /// An argument does not have its parameter's declared type.
    IllTyped {
        /// The parameter's name.
        param: String,
        /// The declared type, as written (`list<string>`).
        expected: String,
        /// What the argument was instead (`string`, `element 2 is bool`, ...).
        got: String,
    },
    /// An argument's lineage names a call or task the session does not know (or, in a compact
    /// session, one older than the window).
    UnknownLineage {
        /// The parameter whose lineage it is.
        param: String,
        /// The unknown call or task id.
        call: String,
    },
    /// A static scope on the delegation chain excludes the tool ([`Rule::Scope`] names it).
    OutOfScope {
        /// The calling agent.
        agent: AgentId,
    },
    /// The task's scope forbids the call, or does not include it.
    OutOfTaskScope {
        /// `true`: the scope forbids the call; `false`: its allow lists do not include it.
        forbidden: bool,
    },
    /// A flow rule into a sink denies (or pauses) what reaches it.
    Flow {
        /// The sink the label reaches (index into [`Policy::sinks`]).
        sink: SinkId,
        /// The label that reaches the sink: the join of the bound arguments and the call's own
        /// resource.
        label: Label,
        /// The call's own resource, when its label is what the rule matched.
        resource: Option<String>,
    },
    /// What the calling agent would receive is denied (or paused).
    Received {
        /// The calling agent, which the rule protects.
        agent: AgentId,
        /// What the call carries: its input label joined with its own resource's label.
        label: Label,
    },
    /// A `deny call` / `pause call` rule's condition holds.
    CallForbidden,
    /// The call would complete the sequence of a path rule ([`Decision::path`] lists the earlier
    /// calls).
    PathCompleted,
    /// The call would be one more than a count rule allows.
    CountExceeded {
        /// The most admitted calls the rule allows (`at most K`).
        max: u64,
    },
    /// The call needs a fact that was not established (since the last `since` call).
    ObligationUnmet {
        /// The fact required (index into [`Policy::facts`]).
        fact: FactId,
        /// Whether the obligation has a `since` clause, i.e. the fact had to follow the last such
        /// call.
        since: bool,
    },
    /// An agent on the delegation chain has no grant that covers the call with quota left.
    NoGrant {
        /// The first agent on the chain (caller first) that lacks a grant.
        agent: AgentId,
        /// A grant that matched the call but had no quota left, if one did.
        exhausted: Option<GrantId>,
    },
    /// An agent on the delegation chain has no grant that serves the call,
    /// and the first matching grant passed over was passed over for its
    /// amount budget (`budget AMOUNT on PARAM`).
    NoBudget {
        /// The first agent on the chain (caller first) that lacks a grant.
        agent: AgentId,
        /// The grant whose budget could not pay for the call.
        grant: GrantId,
        /// Why: no amount, a negative amount, or more than is left (boxed:
        /// decisions stay small).
        refusal: Box<crate::spec::BudgetRefusal>,
    },
    /// Allowed: every agent on the delegation chain has a grant with quota left.
    Granted {
        /// The calling agent.
        agent: AgentId,
        /// Units of the grant left after this call (`None`: unlimited).
        left: Option<u64>,
    },
    /// Paused: a grant that serves the call requires a human approval.
    NeedsApproval {
        /// The grant that requires approval.
        grant: GrantId,
    },
    /// A paused call was approved, re-checked at approval time and admitted.
    Approved,
    /// A paused call's re-check at approval time denied it.
    RecheckFailed(Box<Reason>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// The monitor's answer to a call (`authorize`, `approve`, or `check`), with what it rests on.
pub struct Decision {
    /// ALLOW, DENY or PAUSE.
    pub verdict: Verdict,
    /// The rule or grant that decided (for ALLOW, the caller's own grant).
    pub rule: Rule,
    /// Why, structured: [`Decision::reason_text`] renders it.
    pub reason: Reason,
    /// The call's node in the session graph.
    pub node: NodeId,
    /// The call's tool (`None` when the call names an unknown tool).
    pub tool: Option<ToolId>,
    /// The violation: for a flow rule, node ids from the labeled source to
    /// the sink; for a path rule or obligation, the earlier calls that make
    /// it up, then this one. A flow's path is built only when read:
    /// [`Session::path`](crate::Session::path) resolves it against the
    /// session that made the decision.
    pub path: DecisionPath,
    /// Units taken along the delegation chain (ALLOW and PAUSE; for an
    /// approval that ALLOWs, the units the call holds).
    pub grants: Vec<GrantId>,
    /// Units returned (an approval whose re-check denies).
    pub refunded: Vec<GrantId>,
    /// The hash of every grant's remaining count after this step (see `docs/semantics.md`).
    pub ledger_hash: Hash,
    /// For a DENY or PAUSE by a rule with a token test: the token that
    /// made the test decide ([`crate::token_evidence`]); the reason text
    /// names it.
    pub token: Option<Box<TokenEvidence>>,
}

/// A decision's path ([`Decision::path`]): the node ids themselves, or, for
/// a flow rule, what they are found from in the session graph, so that the
/// hot path walks no graph. [`Session::path`](crate::Session::path) gives
/// the node ids either way.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DecisionPath(PathRepr);

#[derive(Clone, Debug, PartialEq, Eq)]
enum PathRepr {
    Nodes(Vec<NodeId>),
    Flow(FlowTrace),
}

impl Default for PathRepr {
    fn default() -> Self {
        PathRepr::Nodes(Vec::new())
    }
}

/// What a flow's path is found from: the walk `Graph::explain_path` does
/// from the call's node, as the graph was when the flow was judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FlowTrace {
    /// The call's node (where the walk starts).
    pub node: NodeId,
    /// The call's tool, and which of its sink uses the flow went into
    /// (`None`: what the calling agent receives, i.e. every argument).
    pub tool: ToolId,
    pub sink_use: Option<u32>,
    /// The rule's label pattern: the walk follows labels it matches.
    pub pattern: crate::label::LabelPattern,
    /// Whether some argument bound to the sink reads the context (the
    /// call's edge from the context is followed).
    pub context: bool,
    /// The call's own resource carries the label: the path is the call.
    pub own_resource: bool,
    /// The graph's edge count when the flow was judged.
    pub horizon: u32,
}

impl DecisionPath {
    /// A path given by its node ids.
    pub fn from_nodes(nodes: Vec<NodeId>) -> DecisionPath {
        DecisionPath(PathRepr::Nodes(nodes))
    }

    pub(crate) fn flow(trace: FlowTrace) -> DecisionPath {
        DecisionPath(PathRepr::Flow(trace))
    }

    /// The node ids, when they are already known (every path but a flow
    /// rule's before it is read: use [`Session::path`](crate::Session::path)).
    pub fn nodes(&self) -> Option<&[NodeId]> {
        match &self.0 {
            PathRepr::Nodes(n) => Some(n),
            PathRepr::Flow(_) => None,
        }
    }

    /// Whether the decision has no path at all (an ALLOW, a missing grant,
    /// a count, an ill-formed call). A flow rule's path is never empty.
    pub fn is_empty(&self) -> bool {
        matches!(&self.0, PathRepr::Nodes(n) if n.is_empty())
    }

    pub(crate) fn trace(&self) -> Option<&FlowTrace> {
        match &self.0 {
            PathRepr::Nodes(_) => None,
            PathRepr::Flow(t) => Some(t),
        }
    }
}

impl From<Vec<NodeId>> for DecisionPath {
    fn from(nodes: Vec<NodeId>) -> DecisionPath {
        DecisionPath::from_nodes(nodes)
    }
}

/// Why a decision's path cannot be built when it is read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// A compact session no longer holds the call's node (it was older than
    /// the session's window when compaction ran): the audit sink received
    /// the graph instead. The node is always still there right after the
    /// decision.
    #[error("node {node} is no longer in the session's graph (a compact session forgot it)")]
    Forgotten {
        /// The decision's node.
        node: NodeId,
    },
}

impl Decision {
    /// A sentence a person can read: the reason, then the token that
    /// decided, if a token test did.
    pub fn reason_text(&self, policy: &Policy) -> String {
        let reason = reason_text(policy, &self.reason, self.rule, self.tool);
        match &self.token {
            Some(t) => format!("{reason}: {}", t.text(policy)),
            None => reason,
        }
    }
}

fn agent_name(policy: &Policy, a: AgentId) -> &str {
    policy.agents.get(a).map_or("?", |a| a.name.as_str())
}

/// `reason` as a sentence a person can read, naming the rule, the tool and the policy's names for
/// sinks, labels, agents and grants.
pub fn reason_text(policy: &Policy, reason: &Reason, rule: Rule, tool: Option<ToolId>) -> String {
    let tool_name = tool
        .and_then(|t| policy.tools.get(t))
        .map_or("?", |t| t.name.as_str());
    let rule_name = rule.name(policy);
    match reason {
        Reason::UnknownTool(t) => format!("unknown tool `{t}`"),
        Reason::UnknownAgent(a) => format!("unknown agent `{a}`"),
        Reason::MissingArg { param } => format!("missing argument `{param}` of `{tool_name}`"),
        Reason::UnknownArg { param } => format!("`{tool_name}` has no parameter `{param}`"),
        Reason::IllTyped {
            param,
            expected,
            got,
        } => {
            format!("argument `{param}` of `{tool_name}` must be {expected}, got {got}")
        }
        Reason::UnknownLineage { param, call } => {
            format!("lineage of `{param}` names unknown call `{call}`")
        }
        Reason::OutOfScope { agent } => format!(
            "agent `{}` is confined to scope `{rule_name}`, which does not include `{tool_name}`",
            agent_name(policy, *agent)
        ),
        Reason::OutOfTaskScope { forbidden: true } => {
            format!("the task's scope forbids this `{tool_name}` call")
        }
        Reason::OutOfTaskScope { forbidden: false } => {
            format!("the task's scope does not include this `{tool_name}` call")
        }
        Reason::Flow {
            sink,
            label,
            resource,
        } => {
            let pause = matches!(rule, Rule::Flow(r) if policy.flow_rules.get(r).is_some_and(|r| matches!(r.effect, crate::policy::FlowEffect::Pause(_))));
            format!(
                "flow of {} into sink `{}` {} `{rule_name}`{}",
                policy.show_label(label),
                policy.sinks.get(*sink).map_or("?", String::as_str),
                if pause {
                    "needs a human approval under"
                } else {
                    "is denied by"
                },
                match resource {
                    Some(r) => format!(" (the call's own resource {r:?} carries the label)"),
                    None => String::new(),
                }
            )
        }
        Reason::Received { agent, label } => {
            let pause = matches!(rule, Rule::Receive(r) if policy.receive_rules.get(r).is_some_and(|r| matches!(r.effect, crate::policy::FlowEffect::Pause(_))));
            format!(
                "agent `{}` receiving {} {} `{rule_name}`",
                agent_name(policy, *agent),
                policy.show_label(label),
                if pause {
                    "needs a human approval under"
                } else {
                    "is denied by"
                }
            )
        }
        Reason::CallForbidden => format!("`{rule_name}` forbids this `{tool_name}` call"),
        Reason::PathCompleted => {
            format!("`{tool_name}` would complete the forbidden path `{rule_name}`")
        }
        Reason::CountExceeded { max } => {
            format!("`{rule_name}` allows at most {max} such calls")
        }
        Reason::ObligationUnmet { fact, since } => {
            let since_glob = match rule {
                Rule::Obligation(o) => policy.obligations.get(o).and_then(|o| o.since.clone()),
                _ => None,
            };
            format!(
                "`{rule_name}` requires `{}` to have been seen{} before `{tool_name}`",
                policy.facts.get(*fact).map_or("?", String::as_str),
                match (since, since_glob) {
                    (true, Some(g)) => format!(" after the last `{g}` call"),
                    _ => String::new(),
                }
            )
        }
        Reason::NoGrant { agent, exhausted } => match exhausted {
            Some(g) => format!(
                "grant `{}` of `{}` matches but has no quota left",
                policy.grants.get(*g).map_or("?", |g| g.name.as_str()),
                agent_name(policy, *agent)
            ),
            None => format!(
                "no grant of `{}` covers this `{tool_name}` call",
                agent_name(policy, *agent)
            ),
        },
        Reason::NoBudget {
            agent,
            grant,
            refusal,
        } => format!(
            "grant `{}` of `{}` matches but its budget does not serve the call: {refusal}",
            policy.grants.get(*grant).map_or("?", |g| g.name.as_str()),
            agent_name(policy, *agent)
        ),
        Reason::Granted { agent, left } => format!(
            "granted to `{}` by `{rule_name}`{}",
            agent_name(policy, *agent),
            match left {
                Some(n) => format!(" ({n} left)"),
                None => String::new(),
            }
        ),
        Reason::NeedsApproval { grant } => format!(
            "grant `{}` requires a human approval",
            policy.grants.get(*grant).map_or("?", |g| g.name.as_str())
        ),
        Reason::Approved => "approved by a human: re-checked and admitted".into(),
        Reason::RecheckFailed(inner) => format!(
            "re-checked at approval time: {}; reserved units returned",
            reason_text(policy, inner, rule, tool)
        ),
    }
}

/// What a result, a rejection or a task did, structured: rendered only
/// when read ([`Applied::reason_text`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Note {
    /// A failed call: its units came back.
    Failed,
    /// An unknown outcome: its units stay spent, its output counts as read.
    Unknown,
    /// The call succeeded: its output label was merged into the context.
    Succeeded,
    /// `new` resources were added to discovered set `set`.
    Discovered {
        /// The discovered set (index into [`Policy::sets`]).
        set: SetId,
        /// How many of the reported resources were not yet in the set.
        new: usize,
    },
    /// The result established this fact (its output tests held).
    FactSeen(FactId),
    /// A paused call was rejected: its reserved units came back.
    Rejected,
    /// A task was recorded (its id): a trusted node in the graph.
    TaskRecorded(String),
    /// `new` values a task seeded into set `set`.
    Seeded {
        /// The seeded set (index into [`Policy::sets`]).
        set: SetId,
        /// How many of the task's values were not yet in the set.
        new: usize,
    },
    /// The task opened a scope: it is now the session's task scope.
    ScopeOpened,
}

impl Note {
    fn text(&self, policy: &Policy) -> String {
        let set_name = |s: SetId| policy.sets.get(s).cloned().unwrap_or_else(|| "?".into());
        match self {
            Note::Failed => "failed with no effect: units returned".into(),
            Note::Unknown => "outcome unknown: units stay spent, output assumed read".into(),
            Note::Succeeded => "succeeded".into(),
            Note::Discovered { set, new } => format!("{new} new in `{}`", set_name(*set)),
            Note::FactSeen(f) => format!(
                "fact `{}` seen",
                policy.facts.get(*f).map_or("?", String::as_str)
            ),
            Note::Rejected => "rejected: reserved units returned".into(),
            Note::TaskRecorded(id) => format!("task `{id}` recorded"),
            Note::Seeded { set, new } => format!("{new} seeded into `{}`", set_name(*set)),
            Note::ScopeOpened => "scope opened".into(),
        }
    }
}

/// The effect of a result, approval or rejection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    /// The node of the call (or, for a task, of the task).
    pub node: NodeId,
    /// The grant that admitted the call (the caller's own).
    pub rule: Option<Rule>,
    /// What happened, in order.
    pub notes: Vec<Note>,
    /// Grants whose units came back (a failed call, a rejection).
    pub refunded: Vec<GrantId>,
    /// The ledger hash after the event.
    pub ledger_hash: Hash,
}

/// A rule that stops a call: one entry of [`crate::Session::check_all`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stop {
    /// `Deny` or `Pause`.
    pub verdict: Verdict,
    /// The rule that stops the call.
    pub rule: Rule,
    /// Why, as in [`Decision::reason`].
    pub reason: Reason,
    /// As in [`Decision::path`].
    pub path: Vec<NodeId>,
}

impl Stop {
    pub(crate) fn new(
        effect: crate::policy::RuleEffect,
        rule: Rule,
        reason: Reason,
        path: Vec<NodeId>,
    ) -> Stop {
        let verdict = match effect {
            crate::policy::RuleEffect::Deny => Verdict::Deny,
            crate::policy::RuleEffect::Pause => Verdict::Pause,
        };
        Stop {
            verdict,
            rule,
            reason,
            path,
        }
    }

    pub(crate) fn deny(rule: Rule, reason: Reason, path: Vec<NodeId>) -> Stop {
        Stop {
            verdict: Verdict::Deny,
            rule,
            reason,
            path,
        }
    }
}

impl Applied {
    /// The notes as text, against the policy they were made under.
    pub fn reason_text(&self, policy: &Policy) -> String {
        let texts: Vec<String> = self.notes.iter().map(|n| n.text(policy)).collect();
        texts.join("; ")
    }
}

/// What one step returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepOutput {
    /// The answer to a call or an approval.
    Decision(Decision),
    /// The effect of a result, rejection or task.
    Applied(Applied),
}

/// Events that cannot be applied at all (as opposed to calls that are
/// denied): the session is left unchanged.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    /// A call reuses the id of an earlier call of the session.
    #[error("call id `{0}` is already used in this session")]
    DuplicateCall(String),
    /// An approval, rejection or result names a call the session does not know.
    #[error("unknown call `{0}`")]
    UnknownCall(String),
    /// The call is not in a state that can take the event (e.g. approving a call that is not
    /// paused).
    #[error("call `{call}` is {status}, so it cannot take {event}")]
    WrongState {
        /// The call's id.
        call: String,
        /// The state it is in (`denied`, `running`, ...).
        status: &'static str,
        /// The event it cannot take (`an approval`, `a result`, ...).
        event: &'static str,
    },
    /// The event's time is before the previous event's: time never goes backwards.
    #[error("time {time} is before the previous event's time {last}")]
    TimeWentBackwards {
        /// The event's time.
        time: u64,
        /// The previous event's time.
        last: u64,
    },
    /// The graph already holds 2^32 nodes.
    #[error("the session graph is full (2^32 nodes)")]
    GraphFull,
    /// A call or task id of 4 GiB or more (the session's id table stores
    /// 32-bit lengths).
    #[error("an id of {0} bytes is too long (the limit is 4 GiB)")]
    IdTooLong(usize),
    /// A typed call uses a handle resolved against another policy, or a parameter handle of another
    /// tool.
    #[error("call `{call}` uses a {handle} handle of another policy or tool")]
    ForeignHandle {
        /// The call's id.
        call: String,
        /// The kind of handle: `tool`, `parameter` or `agent`.
        handle: &'static str,
    },
    /// A task seeds a set the policy does not declare.
    #[error("task `{task}` seeds unknown set `{set}`")]
    UnknownSet {
        /// The task's id.
        task: String,
        /// The set's name, as the task gave it.
        set: String,
    },
    /// A task seeds a set that the policy does not declare seedable (`task seeds SET;`).
    #[error("task `{task}` seeds set `{set}`, which the policy does not let tasks seed (add `task seeds {set};`)")]
    NotSeedable {
        /// The task's id.
        task: String,
        /// The set's name.
        set: String,
    },
}

/// The most characters of a token a reason shows.
pub const SHOWN_CHARS: usize = 60;

/// A token that decided a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenEvidence {
    /// Its kind.
    pub kind: TokenKind,
    /// Its canonical text, at most [`SHOWN_CHARS`] characters (then `…`).
    pub text: String,
    /// The parameter it was found in.
    pub param: String,
    /// Where it comes from.
    pub origin: TokenOrigin,
}

impl TokenEvidence {
    /// The evidence as a clause of a reason: ``url `https://evil.example/x`
    /// in `body` is in an untrusted output or in no source``.
    pub fn text(&self, policy: &Policy) -> String {
        let whence = match self.origin {
            TokenOrigin::Task => "is in a task text (from the user)",
            TokenOrigin::TrustedOutput => "is only in trusted outputs",
            TokenOrigin::Elsewhere => "is in an untrusted output or in no task or output",
        };
        format!(
            "{} `{}` in `{}` {whence}",
            self.kind.name(&policy.token_shapes),
            self.text,
            self.param
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::label::{CategorySet, LabelPattern};
    use crate::policy::{
        Agent, CallRule, FlowEffect, FlowRule, Grant, Obligation, Param, PathKind, PathRule, Quota,
        ReceiveRule, RuleEffect, Scope, StepPattern, Tool,
    };
    use crate::value::{ArgCond, NamedCond, ParamType};

    /// A policy with two of everything a reason names, so that each name
    /// is told apart from its neighbour (and an index past the end is `?`).
    fn policy() -> Policy {
        let mut p = Policy::empty("names");
        p.levels = vec!["public".into(), "secret".into()];
        p.categories = vec!["pii".into(), "web".into()];
        p.sinks = vec!["email".into(), "network".into()];
        p.sets = vec!["contacts".into(), "hosts".into()];
        p.facts = vec!["tested".into(), "reviewed".into()];
        let tool = |name: &str| Tool {
            name: name.into(),
            params: vec![Param {
                name: "to".into(),
                ty: ParamType::Str,
                list: false,
                optional: false,
                fields: Vec::new(),
            }],
            resource: None,
            sinks: vec![],
            output: Label::BOTTOM,
            sanitizer: None,
            facts: vec![],
        };
        p.tools = vec![tool("web.fetch"), tool("email.send")];
        p.agents.push(Agent {
            name: "helper".into(),
            parent: Some(0),
            scope: Some(0),
            own_context: false,
        });
        p.scopes = vec![
            Scope {
                name: "reading".into(),
                tools: vec!["web.*".into()],
            },
            Scope {
                name: "writing".into(),
                tools: vec!["email.*".into()],
            },
        ];
        let grant = |name: &str| Grant {
            name: name.into(),
            agent: 0,
            tool: 1,
            resource: None,
            args: vec![],
            quota: Quota::Limited(3),
            approval: false,
            expires_at: None,
            discovers: None,
        };
        p.grants = vec![grant("send_colleagues"), grant("send_reviewed")];
        let flow = |name: &str, effect| FlowRule {
            name: name.into(),
            sink: 0,
            effect,
            when: NamedCond::TRUE,
        };
        p.flow_rules = vec![
            flow("web_denied", FlowEffect::Deny(LabelPattern::default())),
            flow("web_paused", FlowEffect::Pause(LabelPattern::default())),
            flow("reports_ok", FlowEffect::Allow(Label::BOTTOM)),
        ];
        let path = |name: &str| PathRule {
            name: name.into(),
            effect: RuleEffect::Deny,
            kind: PathKind::AtMost {
                max: 2,
                step: StepPattern::default(),
            },
            reset: None,
        };
        p.path_rules = vec![path("exfil"), path("few_sends")];
        let obligation = |name: &str, since: Option<&str>| Obligation {
            name: name.into(),
            effect: RuleEffect::Deny,
            fact: 0,
            before: "deploy".into(),
            since: since.map(String::from),
        };
        p.obligations = vec![
            obligation("test_first", Some("edit")),
            obligation("review_first", None),
        ];
        p.call_rules = vec![CallRule {
            name: "no_ceo".into(),
            effect: RuleEffect::Deny,
            tool: 1,
            when: ArgCond::TRUE,
        }];
        let receive = |name: &str, effect| ReceiveRule {
            name: name.into(),
            agent: 1,
            effect,
            when: NamedCond::TRUE,
        };
        p.receive_rules = vec![
            receive("helper_denied", FlowEffect::Deny(LabelPattern::default())),
            receive("helper_paused", FlowEffect::Pause(LabelPattern::default())),
        ];
        p
    }

    fn web() -> Label {
        Label::new(1, CategorySet::from_indexes([0, 1]), false)
    }

    #[test]
    fn verdicts_print_in_capitals() {
        assert_eq!(Verdict::Allow.as_str(), "ALLOW");
        assert_eq!(Verdict::Deny.as_str(), "DENY");
        assert_eq!(Verdict::Pause.as_str(), "PAUSE");
    }

    #[test]
    fn rules_are_named_by_the_policy_or_by_their_kind() {
        let p = policy();
        let cases = [
            (Rule::WellFormed, "well-formed"),
            (Rule::Scope(1), "writing"),
            (Rule::Scope(2), "?"),
            (Rule::TaskScope, "task-scope"),
            (Rule::Flow(1), "web_paused"),
            (Rule::Flow(3), "?"),
            (Rule::Path(1), "few_sends"),
            (Rule::Path(2), "?"),
            (Rule::Obligation(1), "review_first"),
            (Rule::Obligation(2), "?"),
            (Rule::Call(0), "no_ceo"),
            (Rule::Call(1), "?"),
            (Rule::Receive(1), "helper_paused"),
            (Rule::Receive(2), "?"),
            (Rule::Grant(1), "send_reviewed"),
            (Rule::Grant(2), "?"),
            (Rule::NoGrant, "no-grant"),
        ];
        for (rule, name) in cases {
            assert_eq!(rule.name(&p), name, "{rule:?}");
        }
    }

    #[test]
    fn decision_paths_hold_nodes_or_a_flow_trace() {
        let nodes = vec![NodeId(3), NodeId(7)];
        let path = DecisionPath::from_nodes(nodes.clone());
        assert_eq!(path.nodes(), Some(&nodes[..]));
        assert!(!path.is_empty());
        assert!(path.trace().is_none());
        assert_eq!(DecisionPath::from(nodes.clone()), path);
        assert_ne!(path, DecisionPath::default());

        let empty = DecisionPath::from(Vec::new());
        assert!(empty.is_empty());
        assert_eq!(empty.nodes(), Some(&[][..]));
        assert_eq!(empty, DecisionPath::default());
        assert!(DecisionPath::default().is_empty());

        let trace = FlowTrace {
            node: NodeId(9),
            tool: 1,
            sink_use: Some(0),
            pattern: LabelPattern::default(),
            context: true,
            own_resource: false,
            horizon: 4,
        };
        let flow = DecisionPath::flow(trace);
        assert_eq!(flow.trace(), Some(&trace));
        assert_eq!(flow.nodes(), None);
        assert!(!flow.is_empty(), "a flow rule's path is never empty");
        assert_ne!(flow, DecisionPath::default());
    }

    #[test]
    fn every_reason_reads_as_a_sentence_with_the_policys_names() {
        let p = policy();
        let send = Some(1);
        let cases: Vec<(Reason, Rule, Option<ToolId>, &str)> = vec![
            (
                Reason::UnknownTool("rm".into()),
                Rule::WellFormed,
                None,
                "unknown tool `rm`",
            ),
            (
                Reason::UnknownAgent("eve".into()),
                Rule::WellFormed,
                None,
                "unknown agent `eve`",
            ),
            (
                Reason::MissingArg { param: "to".into() },
                Rule::WellFormed,
                send,
                "missing argument `to` of `email.send`",
            ),
            (
                Reason::MissingArg { param: "to".into() },
                Rule::WellFormed,
                Some(5),
                "missing argument `to` of `?`",
            ),
            (
                Reason::UnknownArg { param: "cc".into() },
                Rule::WellFormed,
                Some(0),
                "`web.fetch` has no parameter `cc`",
            ),
            (
                Reason::IllTyped {
                    param: "to".into(),
                    expected: "string".into(),
                    got: "int".into(),
                },
                Rule::WellFormed,
                send,
                "argument `to` of `email.send` must be string, got int",
            ),
            (
                Reason::UnknownLineage {
                    param: "to".into(),
                    call: "c9".into(),
                },
                Rule::WellFormed,
                send,
                "lineage of `to` names unknown call `c9`",
            ),
            (
                Reason::OutOfScope { agent: 1 },
                Rule::Scope(0),
                send,
                "agent `helper` is confined to scope `reading`, which does not include `email.send`",
            ),
            (
                Reason::OutOfScope { agent: 7 },
                Rule::Scope(0),
                send,
                "agent `?` is confined to scope `reading`, which does not include `email.send`",
            ),
            (
                Reason::OutOfTaskScope { forbidden: true },
                Rule::TaskScope,
                send,
                "the task's scope forbids this `email.send` call",
            ),
            (
                Reason::OutOfTaskScope { forbidden: false },
                Rule::TaskScope,
                send,
                "the task's scope does not include this `email.send` call",
            ),
            (
                Reason::Flow {
                    sink: 0,
                    label: web(),
                    resource: None,
                },
                Rule::Flow(0),
                send,
                "flow of <secret, {pii, web}, untrusted> into sink `email` is denied by `web_denied`",
            ),
            (
                Reason::Flow {
                    sink: 1,
                    label: Label::BOTTOM,
                    resource: Some("a@b".into()),
                },
                Rule::Flow(1),
                send,
                "flow of <public, {}, trusted> into sink `network` needs a human approval under \
                 `web_paused` (the call's own resource \"a@b\" carries the label)",
            ),
            (
                Reason::Flow {
                    sink: 2,
                    label: Label::BOTTOM,
                    resource: None,
                },
                Rule::Path(0),
                send,
                "flow of <public, {}, trusted> into sink `?` is denied by `exfil`",
            ),
            (
                Reason::Received {
                    agent: 1,
                    label: web(),
                },
                Rule::Receive(0),
                send,
                "agent `helper` receiving <secret, {pii, web}, untrusted> is denied by `helper_denied`",
            ),
            (
                Reason::Received {
                    agent: 1,
                    label: web(),
                },
                Rule::Receive(1),
                send,
                "agent `helper` receiving <secret, {pii, web}, untrusted> needs a human approval \
                 under `helper_paused`",
            ),
            (
                Reason::CallForbidden,
                Rule::Call(0),
                send,
                "`no_ceo` forbids this `email.send` call",
            ),
            (
                Reason::PathCompleted,
                Rule::Path(0),
                send,
                "`email.send` would complete the forbidden path `exfil`",
            ),
            (
                Reason::CountExceeded { max: 2 },
                Rule::Path(1),
                send,
                "`few_sends` allows at most 2 such calls",
            ),
            (
                Reason::ObligationUnmet {
                    fact: 0,
                    since: true,
                },
                Rule::Obligation(0),
                send,
                "`test_first` requires `tested` to have been seen after the last `edit` call \
                 before `email.send`",
            ),
            (
                Reason::ObligationUnmet {
                    fact: 1,
                    since: false,
                },
                Rule::Obligation(0),
                send,
                "`test_first` requires `reviewed` to have been seen before `email.send`",
            ),
            (
                Reason::ObligationUnmet {
                    fact: 0,
                    since: true,
                },
                Rule::Obligation(1),
                send,
                "`review_first` requires `tested` to have been seen before `email.send`",
            ),
            (
                Reason::ObligationUnmet {
                    fact: 9,
                    since: true,
                },
                Rule::Call(0),
                send,
                "`no_ceo` requires `?` to have been seen before `email.send`",
            ),
            (
                Reason::NoGrant {
                    agent: 1,
                    exhausted: Some(1),
                },
                Rule::NoGrant,
                send,
                "grant `send_reviewed` of `helper` matches but has no quota left",
            ),
            (
                Reason::NoGrant {
                    agent: 0,
                    exhausted: Some(4),
                },
                Rule::NoGrant,
                send,
                "grant `?` of `main` matches but has no quota left",
            ),
            (
                Reason::NoGrant {
                    agent: 1,
                    exhausted: None,
                },
                Rule::NoGrant,
                send,
                "no grant of `helper` covers this `email.send` call",
            ),
            (
                Reason::NoBudget {
                    agent: 0,
                    grant: 1,
                    refusal: Box::new(crate::spec::BudgetRefusal::Exceeds {
                        amount: "10.5".parse().unwrap(),
                        left: "3".parse().unwrap(),
                    }),
                },
                Rule::NoGrant,
                send,
                "grant `send_reviewed` of `main` matches but its budget does not serve the call: the amount 10.5 exceeds what is left of the budget (3)",
            ),
            (
                Reason::NoBudget {
                    agent: 0,
                    grant: 1,
                    refusal: Box::new(crate::spec::BudgetRefusal::Negative {
                        param: "amount".into(),
                        amount: "-1".parse().unwrap(),
                    }),
                },
                Rule::NoGrant,
                send,
                "grant `send_reviewed` of `main` matches but its budget does not serve the call: the amount in `amount` is negative (-1)",
            ),
            (
                Reason::NoBudget {
                    agent: 0,
                    grant: 1,
                    refusal: Box::new(crate::spec::BudgetRefusal::Missing {
                        param: "amount".into(),
                    }),
                },
                Rule::NoGrant,
                send,
                "grant `send_reviewed` of `main` matches but its budget does not serve the call: the call gives no amount in `amount`",
            ),
            (
                Reason::Granted {
                    agent: 1,
                    left: Some(2),
                },
                Rule::Grant(0),
                send,
                "granted to `helper` by `send_colleagues` (2 left)",
            ),
            (
                Reason::Granted {
                    agent: 0,
                    left: None,
                },
                Rule::Grant(1),
                send,
                "granted to `main` by `send_reviewed`",
            ),
            (
                Reason::NeedsApproval { grant: 1 },
                Rule::Grant(1),
                send,
                "grant `send_reviewed` requires a human approval",
            ),
            (
                Reason::NeedsApproval { grant: 3 },
                Rule::Grant(3),
                send,
                "grant `?` requires a human approval",
            ),
            (
                Reason::Approved,
                Rule::Grant(0),
                send,
                "approved by a human: re-checked and admitted",
            ),
            (
                Reason::RecheckFailed(Box::new(Reason::PathCompleted)),
                Rule::Path(0),
                send,
                "re-checked at approval time: `email.send` would complete the forbidden path \
                 `exfil`; reserved units returned",
            ),
        ];
        for (reason, rule, tool, text) in cases {
            assert_eq!(reason_text(&p, &reason, rule, tool), text, "{reason:?}");
            let decision = Decision {
                verdict: Verdict::Deny,
                rule,
                reason: reason.clone(),
                node: NodeId(0),
                tool,
                path: DecisionPath::default(),
                grants: vec![],
                refunded: vec![],
                ledger_hash: Hash([0; 32]),
                token: None,
            };
            assert_eq!(decision.reason_text(&p), text, "{reason:?}");
        }
    }

    #[test]
    fn notes_read_as_sentences_joined_in_order() {
        let p = policy();
        let cases = [
            (Note::Failed, "failed with no effect: units returned"),
            (
                Note::Unknown,
                "outcome unknown: units stay spent, output assumed read",
            ),
            (Note::Succeeded, "succeeded"),
            (Note::Discovered { set: 1, new: 3 }, "3 new in `hosts`"),
            (Note::Discovered { set: 2, new: 0 }, "0 new in `?`"),
            (Note::FactSeen(1), "fact `reviewed` seen"),
            (Note::FactSeen(2), "fact `?` seen"),
            (Note::Rejected, "rejected: reserved units returned"),
            (Note::TaskRecorded("t1".into()), "task `t1` recorded"),
            (Note::Seeded { set: 0, new: 2 }, "2 seeded into `contacts`"),
            (Note::Seeded { set: 5, new: 1 }, "1 seeded into `?`"),
            (Note::ScopeOpened, "scope opened"),
        ];
        for (note, text) in &cases {
            assert_eq!(note.text(&p), *text, "{note:?}");
        }
        let applied = |notes: Vec<Note>| Applied {
            node: NodeId(1),
            rule: None,
            notes,
            refunded: vec![],
            ledger_hash: Hash([0; 32]),
        };
        assert_eq!(applied(vec![]).reason_text(&p), "");
        assert_eq!(applied(vec![Note::Succeeded]).reason_text(&p), "succeeded");
        assert_eq!(
            applied(vec![
                Note::Succeeded,
                Note::Discovered { set: 0, new: 1 },
                Note::FactSeen(0)
            ])
            .reason_text(&p),
            "succeeded; 1 new in `contacts`; fact `tested` seen"
        );
    }

    #[test]
    fn stops_take_their_verdict_from_the_effect() {
        let path = vec![NodeId(2), NodeId(5)];
        let deny = Stop::new(
            RuleEffect::Deny,
            Rule::Call(0),
            Reason::CallForbidden,
            path.clone(),
        );
        assert_eq!(deny.verdict, Verdict::Deny);
        assert_eq!(deny.rule, Rule::Call(0));
        assert_eq!(deny.reason, Reason::CallForbidden);
        assert_eq!(deny.path, path);
        let pause = Stop::new(
            RuleEffect::Pause,
            Rule::Path(1),
            Reason::PathCompleted,
            vec![],
        );
        assert_eq!(pause.verdict, Verdict::Pause);
        assert_eq!(pause.rule, Rule::Path(1));
        assert_eq!(pause.reason, Reason::PathCompleted);
        assert!(pause.path.is_empty());
        let stop = Stop::deny(
            Rule::TaskScope,
            Reason::OutOfTaskScope { forbidden: true },
            path.clone(),
        );
        assert_eq!(
            stop,
            Stop {
                verdict: Verdict::Deny,
                rule: Rule::TaskScope,
                reason: Reason::OutOfTaskScope { forbidden: true },
                path,
            }
        );
    }
}
