//! What the monitor answers, and why.
//!
//! Reasons are structured (rendered against the policy only when someone
//! reads them), so the hot path formats no strings.

use crate::graph::NodeId;
use crate::hash::Hash;
use crate::label::Label;
use crate::policy::{AgentId, FactId, GrantId, Policy, SinkId, ToolId};
use crate::value::SetId;
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    Allow,
    Deny,
    Pause,
}

impl Verdict {
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
    WellFormed,
    Scope(usize),
    /// The scope the session's task opened.
    TaskScope,
    Flow(usize),
    Path(usize),
    Obligation(usize),
    /// A `deny call` / `pause call` rule.
    Call(usize),
    /// A flow rule into an agent (`-> agent NAME`).
    Receive(usize),
    Grant(GrantId),
    NoGrant,
}

impl Rule {
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
pub enum Reason {
    UnknownTool(String),
    UnknownAgent(String),
    MissingArg {
        param: String,
    },
    UnknownArg {
        param: String,
    },
    IllTyped {
        param: String,
        /// The declared type, as written (`list<string>`).
        expected: String,
        got: String,
    },
    UnknownLineage {
        param: String,
        call: String,
    },
    OutOfScope {
        agent: AgentId,
    },
    /// The task's scope forbids the call, or does not include it.
    OutOfTaskScope {
        forbidden: bool,
    },
    Flow {
        sink: SinkId,
        label: Label,
        /// The call's own resource, when its label is what the rule matched.
        resource: Option<String>,
    },
    /// What the calling agent would receive is denied (or paused).
    Received {
        agent: AgentId,
        label: Label,
    },
    /// A `deny call` / `pause call` rule's condition holds.
    CallForbidden,
    PathCompleted,
    CountExceeded {
        max: u64,
    },
    ObligationUnmet {
        fact: FactId,
        since: bool,
    },
    NoGrant {
        agent: AgentId,
        exhausted: Option<GrantId>,
    },
    Granted {
        agent: AgentId,
        /// Units of the grant left after this call (`None`: unlimited).
        left: Option<u64>,
    },
    NeedsApproval {
        grant: GrantId,
    },
    Approved,
    /// A paused call's re-check at approval time denied it.
    RecheckFailed(Box<Reason>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub verdict: Verdict,
    pub rule: Rule,
    pub reason: Reason,
    /// The call's node in the session graph.
    pub node: NodeId,
    pub tool: Option<ToolId>,
    /// The violation: for a flow DENY, node ids from the labeled source to
    /// the sink; for a path rule or obligation, the earlier calls that make
    /// it up, then this one.
    pub path: Vec<NodeId>,
    /// Units taken along the delegation chain (ALLOW and PAUSE; for an
    /// approval that ALLOWs, the units the call holds).
    pub grants: Vec<GrantId>,
    /// Units returned (an approval whose re-check denies).
    pub refunded: Vec<GrantId>,
    pub ledger_hash: Hash,
}

impl Decision {
    /// A sentence a person can read.
    pub fn reason_text(&self, policy: &Policy) -> String {
        reason_text(policy, &self.reason, self.rule, self.tool)
    }
}

fn agent_name(policy: &Policy, a: AgentId) -> &str {
    policy.agents.get(a).map_or("?", |a| a.name.as_str())
}

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
    Succeeded,
    /// `new` resources were added to discovered set `set`.
    Discovered {
        set: SetId,
        new: usize,
    },
    FactSeen(FactId),
    /// A paused call was rejected: its reserved units came back.
    Rejected,
    TaskRecorded(String),
    /// `new` values a task seeded into set `set`.
    Seeded {
        set: SetId,
        new: usize,
    },
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
    pub node: NodeId,
    /// The grant that admitted the call (the caller's own).
    pub rule: Option<Rule>,
    /// What happened, in order.
    pub notes: Vec<Note>,
    pub refunded: Vec<GrantId>,
    pub ledger_hash: Hash,
}

/// A rule that stops a call: one entry of [`crate::Session::check_all`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stop {
    /// `Deny` or `Pause`.
    pub verdict: Verdict,
    pub rule: Rule,
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
    Decision(Decision),
    Applied(Applied),
}

/// Events that cannot be applied at all (as opposed to calls that are
/// denied): the session is left unchanged.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    #[error("call id `{0}` is already used in this session")]
    DuplicateCall(String),
    #[error("unknown call `{0}`")]
    UnknownCall(String),
    #[error("call `{call}` is {status}, so it cannot take {event}")]
    WrongState {
        call: String,
        status: &'static str,
        event: &'static str,
    },
    #[error("time {time} is before the previous event's time {last}")]
    TimeWentBackwards { time: u64, last: u64 },
    #[error("the session graph is full (2^32 nodes)")]
    GraphFull,
    #[error("call `{call}` uses a {handle} handle of another policy or tool")]
    ForeignHandle { call: String, handle: &'static str },
    #[error("task `{task}` seeds unknown set `{set}`")]
    UnknownSet { task: String, set: String },
    #[error("task `{task}` seeds set `{set}`, which the policy does not let tasks seed (add `task seeds {set};`)")]
    NotSeedable { task: String, set: String },
}
