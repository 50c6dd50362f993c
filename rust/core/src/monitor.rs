//! The monitor: `step(state, event) -> (decision, state')` of DESIGN §2.
//!
//! The step is deterministic and does no I/O; time comes with the event.
//! `Monitor::step` updates the session in place (the hot path); `step_pure`
//! is the same function on values. Check order, so that a denied call never
//! consumes authority: well-formedness, graph append, flows, path rules and
//! obligations, and only then the ledger.

use crate::decision::{
    json_type_name, reason_text, Applied, Decision, Reason, Rule, StepError, StepOutput, Verdict,
};
use crate::event::{Call, Event, Outcome, Report, Resolve};
use crate::graph::{
    EdgeKind, Evidence, Graph, Node, NodeId, NodeKind, Status, Trust, NO_PARAM, NO_TOOL,
};
use crate::hash::{content_hash, EncodeError, Hash};
use crate::label::Label;
use crate::ledger::Ledger;
use crate::policy::{
    AgentId, FlowEffect, GrantId, PathKind, Policy, Quota, RuleEffect, StepPattern, ToolId,
};
use crate::spec;
use crate::validate::{validate, ModelError};
use crate::value::Value;
use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

/// An FxHash-style hasher with a final mix. Call ids come from the agent's
/// runtime, and SipHash was a tenth of the step's time. A hostile runtime
/// could at worst slow its own session down.
#[derive(Default, Clone, Copy)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word))
                .wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.0 = (self.0.rotate_left(5) ^ i as u64).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn finish(&self) -> u64 {
        // The multiply only carries differences upwards, and the table
        // indexes by the low bits: fold the high bits down (murmur3 fmix64).
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;
use std::sync::Arc;

/// Lookup tables computed once per policy, so that a step touches only what
/// applies to the call's tool.
#[derive(Debug)]
struct Index {
    /// Per agent: the agent and its delegators, nearest first.
    chains: Vec<Vec<AgentId>>,
    /// Grants per tool, in policy order.
    grants_for_tool: Vec<Vec<GrantId>>,
    /// Flow rules per sink, in policy order.
    flows_for_sink: Vec<Vec<usize>>,
    /// `scope_ok[agent][tool]`: every agent on the chain may call the tool.
    scope_ok: Vec<Vec<Option<usize>>>,
    /// Per path rule: which tools each step (and the reset) can match,
    /// ignoring the dynamic `reads` part.
    path_steps: Vec<Vec<Vec<bool>>>,
    path_reset: Vec<Option<Vec<bool>>>,
    /// Per obligation: tools matching `before` and `since`.
    obligation_before: Vec<Vec<bool>>,
    obligation_since: Vec<Option<Vec<bool>>>,
}

fn tools_matching(policy: &Policy, step: &StepPattern) -> Vec<bool> {
    policy
        .tools
        .iter()
        .map(|t| {
            step.tool
                .as_deref()
                .is_none_or(|g| crate::pattern::glob_matches(g, &t.name))
                && step.sink.is_none_or(|s| t.sinks.contains(&s))
        })
        .collect()
}

fn tools_globbed(policy: &Policy, glob: &str) -> Vec<bool> {
    policy
        .tools
        .iter()
        .map(|t| crate::pattern::glob_matches(glob, &t.name))
        .collect()
}

impl Index {
    fn new(policy: &Policy) -> Index {
        let mut grants_for_tool = vec![Vec::new(); policy.tools.len()];
        for (g, grant) in policy.grants.iter().enumerate() {
            grants_for_tool[grant.tool].push(g);
        }
        let mut flows_for_sink = vec![Vec::new(); policy.sinks.len()];
        for (r, rule) in policy.flow_rules.iter().enumerate() {
            flows_for_sink[rule.sink].push(r);
        }
        let scope_ok = (0..policy.agents.len())
            .map(|a| {
                policy
                    .tools
                    .iter()
                    .map(|t| {
                        // The first agent on the chain whose scope excludes the tool.
                        policy.agent_chain(a).into_iter().find_map(|x| {
                            let s = policy.agents[x].scope?;
                            (!policy.scopes[s].allows(&t.name)).then_some(s)
                        })
                    })
                    .collect()
            })
            .collect();
        let path_steps = policy
            .path_rules
            .iter()
            .map(|r| match &r.kind {
                PathKind::Sequence(steps) => {
                    steps.iter().map(|s| tools_matching(policy, s)).collect()
                }
                PathKind::AtMost { step, .. } => vec![tools_matching(policy, step)],
            })
            .collect();
        let path_reset = policy
            .path_rules
            .iter()
            .map(|r| r.reset.as_ref().map(|s| tools_matching(policy, s)))
            .collect();
        let obligation_before = policy
            .obligations
            .iter()
            .map(|o| tools_globbed(policy, &o.before))
            .collect();
        let obligation_since = policy
            .obligations
            .iter()
            .map(|o| o.since.as_deref().map(|g| tools_globbed(policy, g)))
            .collect();
        Index {
            chains: (0..policy.agents.len())
                .map(|a| policy.agent_chain(a))
                .collect(),
            grants_for_tool,
            flows_for_sink,
            scope_ok,
            path_steps,
            path_reset,
            obligation_before,
            obligation_since,
        }
    }
}

/// Units a paused or running call holds, and when it was admitted.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Held {
    grants: Vec<GrantId>,
    /// Sequence number of the admission (the call, or its approval).
    admitted_at: u64,
}

/// Everything the monitor knows about one session.
#[derive(Clone, Debug)]
pub struct Session {
    pub graph: Graph,
    pub ledger: Ledger,
    ledger_hash: Hash,
    /// Discovered-resource sets, indexed like `Policy::sets`.
    pub sets: Vec<BTreeSet<String>>,
    calls: FastMap<String, NodeId>,
    held: FastMap<NodeId, Held>,
    /// Per path rule: steps matched so far (sequence) or calls counted.
    path_progress: Vec<u64>,
    /// Per sequence rule: the admitted calls that matched its steps so far
    /// (the violating path, should the rule fire).
    path_witness: Vec<Vec<NodeId>>,
    /// Per fact: admission sequence number of the latest call whose result
    /// established it.
    fact_seen: Vec<Option<u64>>,
    /// Per obligation: admission sequence number of the last `since` call.
    since_seen: Vec<Option<(u64, NodeId)>>,
    last_call: Option<NodeId>,
    /// Per agent: its latest call (parent edges point from it).
    last_by_agent: Vec<Option<NodeId>>,
    /// Events applied so far; the next event gets `seq + 1`.
    pub seq: u64,
    pub time: u64,
}

/// The session's context node: everything the agents have read.
pub const CONTEXT: NodeId = NodeId(0);

impl Session {
    pub fn new(policy: &Policy) -> Session {
        let mut graph = Graph::default();
        graph.push_node(Node {
            kind: NodeKind::Context,
            status: Status::Context,
            evidence: Evidence::Results,
            agent: 0,
            tool: NO_TOOL,
            label: Label::BOTTOM,
            time: 0,
            first_edge: 0,
        });
        let ledger = Ledger::initial(policy);
        Session {
            graph,
            ledger_hash: ledger.hash(),
            ledger,
            sets: vec![BTreeSet::new(); policy.sets.len()],
            calls: FastMap::default(),
            held: FastMap::default(),
            path_progress: vec![0; policy.path_rules.len()],
            path_witness: vec![Vec::new(); policy.path_rules.len()],
            fact_seen: vec![None; policy.facts.len()],
            since_seen: vec![None; policy.obligations.len()],
            last_call: None,
            last_by_agent: vec![None; policy.agents.len()],
            seq: 0,
            time: 0,
        }
    }

    pub fn ledger_hash(&self) -> Hash {
        self.ledger_hash
    }

    /// The node of call `id`, if the session has seen it.
    pub fn call_node(&self, id: &str) -> Option<NodeId> {
        self.calls.get(id).copied()
    }

    /// Grants whose units call `id` holds (paused or running).
    pub fn held_grants(&self, id: &str) -> Option<&[GrantId]> {
        let node = self.calls.get(id)?;
        self.held.get(node).map(|h| h.grants.as_slice())
    }

    /// The id of the call at `node` (a scan: for explanations, not the hot path).
    pub fn call_id_of(&self, node: NodeId) -> Option<&str> {
        self.calls
            .iter()
            .find(|(_, n)| **n == node)
            .map(|(id, _)| id.as_str())
    }

    fn context_label(&self) -> Label {
        self.graph.nodes[CONTEXT.0 as usize].label
    }
}

/// A monitor for one session under one policy.
#[derive(Clone, Debug)]
pub struct Monitor {
    policy: Arc<Policy>,
    index: Arc<Index>,
    policy_hash: Hash,
    session: Session,
}

#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    #[error("invalid policy: {0}")]
    Invalid(#[from] ModelError),
    #[error(transparent)]
    Encode(#[from] EncodeError),
}

/// Why a call is not well-formed.
type Malformed = (Rule, Reason);

/// A path rule or obligation the call would break.
struct Violation {
    rule: Rule,
    reason: Reason,
    effect: RuleEffect,
    /// Earlier admitted calls that make up the violation, then the call
    /// (empty for counts: the reason says how many).
    path: Vec<NodeId>,
}

/// A well-formed call, resolved against the policy.
struct Resolved {
    tool: ToolId,
    agent: AgentId,
    args: Vec<Value>,
    /// Observed data sources per parameter (`None`: use the context).
    lineage: Vec<Option<Vec<NodeId>>>,
    inferred: Vec<(u16, NodeId)>,
}

impl Monitor {
    /// Checks the policy's internal references (a policy read from JSON may
    /// be corrupt) and starts an empty session.
    pub fn new(policy: Policy) -> Result<Monitor, MonitorError> {
        validate(&policy)?;
        let policy_hash = content_hash(&policy)?;
        let index = Index::new(&policy);
        let session = Session::new(&policy);
        Ok(Monitor {
            policy: Arc::new(policy),
            index: Arc::new(index),
            policy_hash,
            session,
        })
    }

    /// A fresh session under the same policy (no re-validation, shared
    /// lookup tables).
    pub fn new_session(&self) -> Monitor {
        Monitor {
            policy: Arc::clone(&self.policy),
            index: Arc::clone(&self.index),
            policy_hash: self.policy_hash,
            session: Session::new(&self.policy),
        }
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }
    pub fn policy_hash(&self) -> Hash {
        self.policy_hash
    }
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Applies one event. On error the session is unchanged.
    pub fn step(&mut self, event: &Event) -> Result<StepOutput, StepError> {
        match event {
            Event::Call(c) => self.authorize(c).map(StepOutput::Decision),
            Event::Result(r) => self.report(r).map(StepOutput::Applied),
            Event::Approve(a) => self.approve_at(a).map(StepOutput::Applied),
            Event::Reject(r) => self.reject_at(r).map(StepOutput::Applied),
        }
    }

    /// `step` as a pure function: the input monitor is left as it was.
    pub fn step_pure(&self, event: &Event) -> (Result<StepOutput, StepError>, Monitor) {
        let mut next = self.clone();
        let out = next.step(event);
        (out, next)
    }

    fn advance_time(&mut self, time: Option<u64>) -> Result<u64, StepError> {
        let time = time.unwrap_or(self.session.time);
        if time < self.session.time {
            return Err(StepError::TimeWentBackwards {
                time,
                last: self.session.time,
            });
        }
        Ok(time)
    }

    /// Decides a call: ALLOW, DENY or PAUSE.
    pub fn authorize(&mut self, call: &Call) -> Result<Decision, StepError> {
        let time = self.advance_time(Some(call.time))?;
        if self.session.calls.contains_key(&call.id) {
            return Err(StepError::DuplicateCall(call.id.clone()));
        }
        if self.session.graph.nodes.len() >= u32::MAX as usize {
            return Err(StepError::GraphFull);
        }
        self.session.time = time;
        self.session.seq += 1;

        // 1. Well-formedness (fail closed, naming the field).
        let resolved = match self.resolve(call) {
            Ok(r) => r,
            Err((rule, reason)) => {
                let tool = self.policy.tool_id(&call.tool);
                let node = self.append_denied(call, tool, time);
                return Ok(self.decide(Verdict::Deny, rule, reason, node, tool, vec![], vec![]));
            }
        };
        let tool = resolved.tool;

        // 2. Append the call and connect its arguments to their sources.
        let (node, input) = self.append_call(&call.id, &resolved, time);

        // 3. Flows into every sink the call reaches.
        if let Some((rule, sink)) = self.violated_flow(&resolved, &input) {
            self.set_status(node, Status::Denied);
            let bad = match self.policy.flow_rules[rule].effect {
                FlowEffect::Deny(p) => p,
                FlowEffect::Allow(_) => crate::label::LabelPattern::ANY,
            };
            let path = self.session.graph.explain_path(node, |l| bad.matches(l));
            return Ok(self.decide(
                Verdict::Deny,
                Rule::Flow(rule),
                Reason::Flow { sink, label: input },
                node,
                Some(tool),
                path,
                vec![],
            ));
        }

        // 4. Path rules and obligations over the history.
        let mut pause: Option<Violation> = None;
        for v in self.history_violations(node) {
            match v.effect {
                RuleEffect::Deny => {
                    self.set_status(node, Status::Denied);
                    return Ok(self.decide(
                        Verdict::Deny,
                        v.rule,
                        v.reason,
                        node,
                        Some(tool),
                        v.path,
                        vec![],
                    ));
                }
                RuleEffect::Pause => {
                    pause.get_or_insert(v);
                }
            }
        }

        // 5. The ledger: one unit of the first matching grant with quota,
        //    along the delegation chain.
        let grants = match self.select_chain(&resolved, time) {
            Ok(g) => g,
            Err(reason) => {
                self.set_status(node, Status::Denied);
                return Ok(self.decide(
                    Verdict::Deny,
                    Rule::NoGrant,
                    reason,
                    node,
                    Some(tool),
                    vec![],
                    vec![],
                ));
            }
        };
        for &g in &grants {
            self.session.ledger.consume(g);
        }
        if grants.iter().any(|&g| self.session.ledger.is_limited(g)) {
            self.session.ledger_hash = self.session.ledger.hash();
        }
        // The chain always holds the caller itself, so `grants` is not empty.
        let own = grants.first().copied().unwrap_or_default();
        let approval = grants.iter().find(|&&g| self.policy.grants[g].approval);
        let seq = self.session.seq;
        let (verdict, rule, reason, path) = match (pause, approval) {
            (Some(v), _) => (Verdict::Pause, v.rule, v.reason, v.path),
            (None, Some(&g)) => (
                Verdict::Pause,
                Rule::Grant(g),
                Reason::NeedsApproval { grant: g },
                vec![],
            ),
            (None, None) => (
                Verdict::Allow,
                Rule::Grant(own),
                Reason::Granted {
                    agent: resolved.agent,
                    left: match self.session.ledger.remaining.get(own) {
                        Some(Quota::Limited(n)) => Some(*n),
                        _ => None,
                    },
                },
                vec![],
            ),
        };
        self.session.held.insert(
            node,
            Held {
                grants: grants.clone(),
                admitted_at: seq,
            },
        );
        if verdict == Verdict::Allow {
            self.admit(node, seq);
        } else {
            self.set_status(node, Status::Paused);
        }
        Ok(self.decide(verdict, rule, reason, node, Some(tool), path, grants))
    }

    #[allow(clippy::too_many_arguments)]
    fn decide(
        &self,
        verdict: Verdict,
        rule: Rule,
        reason: Reason,
        node: NodeId,
        tool: Option<ToolId>,
        path: Vec<NodeId>,
        grants: Vec<GrantId>,
    ) -> Decision {
        Decision {
            verdict,
            rule,
            reason,
            node,
            tool,
            path,
            grants,
            ledger_hash: self.session.ledger_hash,
        }
    }

    fn set_status(&mut self, node: NodeId, status: Status) {
        if let Some(n) = self.session.graph.node_mut(node) {
            n.status = status;
        }
    }

    fn resolve(&self, call: &Call) -> Result<Resolved, Malformed> {
        let policy = &*self.policy;
        let tool = policy
            .tool_id(&call.tool)
            .ok_or_else(|| (Rule::WellFormed, Reason::UnknownTool(call.tool.clone())))?;
        let agent = match &call.agent {
            None => 0,
            Some(name) => policy
                .agent_id(name)
                .ok_or_else(|| (Rule::WellFormed, Reason::UnknownAgent(name.clone())))?,
        };
        if let Some(scope) = self.index.scope_ok[agent][tool] {
            return Err((Rule::Scope(scope), Reason::OutOfScope { agent }));
        }
        let spec = &policy.tools[tool];
        if let Some(extra) = call.args.keys().find(|k| spec.param_index(k).is_none()) {
            return Err((
                Rule::WellFormed,
                Reason::UnknownArg {
                    param: extra.clone(),
                },
            ));
        }
        let mut args = Vec::with_capacity(spec.params.len());
        for p in &spec.params {
            let raw = call.args.get(&p.name).ok_or_else(|| {
                (
                    Rule::WellFormed,
                    Reason::MissingArg {
                        param: p.name.clone(),
                    },
                )
            })?;
            match Value::from_json(raw).filter(|v| v.ty() == p.ty) {
                Some(v) => args.push(v),
                None => {
                    return Err((
                        Rule::WellFormed,
                        Reason::IllTyped {
                            param: p.name.clone(),
                            expected: p.ty,
                            got: json_type_name(raw),
                        },
                    ))
                }
            }
        }
        let lookup = |param: &str, ids: &Vec<String>| -> Result<(usize, Vec<NodeId>), Malformed> {
            let index = spec.param_index(param).ok_or_else(|| {
                (
                    Rule::WellFormed,
                    Reason::UnknownArg {
                        param: param.to_string(),
                    },
                )
            })?;
            let nodes = ids
                .iter()
                .map(|id| {
                    self.session.calls.get(id).copied().ok_or_else(|| {
                        (
                            Rule::WellFormed,
                            Reason::UnknownLineage {
                                param: param.to_string(),
                                call: id.clone(),
                            },
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok((index, nodes))
        };
        let mut lineage = vec![None; spec.params.len()];
        for (param, ids) in &call.lineage {
            let (index, nodes) = lookup(param, ids)?;
            lineage[index] = Some(nodes);
        }
        let mut inferred = Vec::new();
        for (param, ids) in &call.inferred {
            let (index, nodes) = lookup(param, ids)?;
            inferred.extend(nodes.into_iter().map(|n| (index as u16, n)));
        }
        Ok(Resolved {
            tool,
            agent,
            args,
            lineage,
            inferred,
        })
    }

    /// Records a call that failed well-formedness (for the audit trail).
    fn append_denied(&mut self, call: &Call, tool: Option<ToolId>, time: u64) -> NodeId {
        let agent = call
            .agent
            .as_deref()
            .and_then(|a| self.policy.agent_id(a))
            .unwrap_or(0);
        let node = self.session.graph.push_node(Node {
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
        self.session.calls.insert(call.id.clone(), node);
        node
    }

    fn link_control(&mut self, node: NodeId) {
        if let Some(prev) = self.session.last_call {
            self.session
                .graph
                .push_edge(prev, node, EdgeKind::Control, Trust::Observed, NO_PARAM);
        }
        self.session.last_call = Some(node);
    }

    /// Appends the call node with its edges; returns it and the label of the
    /// data flowing into it.
    fn append_call(&mut self, id: &str, r: &Resolved, time: u64) -> (NodeId, Label) {
        let policy = Arc::clone(&self.policy);
        let spec = &policy.tools[r.tool];
        let graph = &self.session.graph;
        // Label of everything flowing in: observed lineage where given, the
        // conservative context for the rest.
        let needs_context = r.lineage.iter().any(Option::is_none) || r.lineage.is_empty();
        let mut input = if needs_context {
            self.session.context_label()
        } else {
            Label::BOTTOM
        };
        for sources in r.lineage.iter().flatten() {
            for s in sources {
                if let Some(n) = graph.node(*s) {
                    input = input.join(&n.label);
                }
            }
        }
        let (through, evidence) = match spec.sanitizer.and_then(|s| policy.sanitizers.get(s)) {
            Some(s) => (s.apply(&input), Evidence::Sanitized),
            None => (input, Evidence::Policy),
        };
        let mut output = through.join(&spec.output);
        if let Some(resource) = spec::resource_of(&policy, r.tool, &r.args) {
            for rl in &policy.resources {
                if rl.pattern.matches(resource) {
                    output = output.join(&rl.label);
                }
            }
        }
        let kind = if !spec.sinks.is_empty() {
            NodeKind::Sink
        } else if spec.output != Label::BOTTOM
            || (!policy.resources.is_empty() && spec.resource.is_some())
        {
            NodeKind::Source
        } else {
            NodeKind::Tool
        };
        let node = self.session.graph.push_node(Node {
            kind,
            status: Status::Running,
            evidence,
            agent: r.agent as u16,
            tool: r.tool as u32,
            label: output,
            time,
            first_edge: 0,
        });
        self.link_control(node);
        self.session.calls.insert(id.to_string(), node);
        let graph = &mut self.session.graph;
        if needs_context {
            graph.push_edge(CONTEXT, node, EdgeKind::Data, Trust::Policy, NO_PARAM);
        }
        for (param, sources) in r.lineage.iter().enumerate() {
            for s in sources.iter().flatten() {
                graph.push_edge(*s, node, EdgeKind::Data, Trust::Observed, param as u16);
            }
        }
        for &(param, s) in &r.inferred {
            graph.push_edge(s, node, EdgeKind::Data, Trust::Inferred, param);
        }
        // A delegate acts for its delegator: link the delegator's latest call.
        if let Some(parent) = policy.agents.get(r.agent).and_then(|a| a.parent) {
            if let Some(p) = self.session.last_by_agent.get(parent).copied().flatten() {
                graph.push_edge(p, node, EdgeKind::Parent, Trust::Policy, NO_PARAM);
            }
        }
        if let Some(slot) = self.session.last_by_agent.get_mut(r.agent) {
            *slot = Some(node);
        }
        (node, input)
    }

    /// The first flow rule that denies `input` into one of the call's sinks.
    fn violated_flow(&self, r: &Resolved, input: &Label) -> Option<(usize, usize)> {
        let policy = &*self.policy;
        let spec = &policy.tools[r.tool];
        let holds = |rule: usize| {
            policy.flow_rules[rule].when.iter().all(|t| {
                spec.param_index(&t.param)
                    .and_then(|i| r.args.get(i))
                    .is_some_and(|v| t.op.eval(v, &self.session.sets))
            })
        };
        for &sink in &spec.sinks {
            let rules = &self.index.flows_for_sink[sink];
            let exempt = rules.iter().any(|&a| match policy.flow_rules[a].effect {
                FlowEffect::Allow(ceiling) => input.flows_to(&ceiling) && holds(a),
                FlowEffect::Deny(_) => false,
            });
            if exempt {
                continue;
            }
            for &d in rules {
                if let FlowEffect::Deny(p) = policy.flow_rules[d].effect {
                    if p.matches(input) && holds(d) {
                        return Some((d, sink));
                    }
                }
            }
        }
        None
    }

    fn step_matches(&self, static_ok: &[bool], step: &StepPattern, node: &Node) -> bool {
        static_ok.get(node.tool as usize).copied().unwrap_or(false)
            && step.reads.is_none_or(|p| p.matches(&node.label))
    }

    /// Path rules and obligations that the call at `node` would break.
    fn history_violations(&self, node: NodeId) -> Vec<Violation> {
        let policy = &*self.policy;
        let mut out = Vec::new();
        let Some(n) = self.session.graph.node(node).copied() else {
            return out;
        };
        for (r, rule) in policy.path_rules.iter().enumerate() {
            let progress = self.session.path_progress[r];
            let steps = &self.index.path_steps[r];
            match &rule.kind {
                PathKind::Sequence(pattern) => {
                    let last = pattern.len().saturating_sub(1);
                    if progress as usize >= last
                        && pattern
                            .get(last)
                            .is_some_and(|s| self.step_matches(&steps[last], s, &n))
                    {
                        let mut path = self.session.path_witness[r].clone();
                        path.push(node);
                        out.push(Violation {
                            rule: Rule::Path(r),
                            reason: Reason::PathCompleted,
                            effect: rule.effect,
                            path,
                        });
                    }
                }
                PathKind::AtMost { max, step } => {
                    if progress >= *max && self.step_matches(&steps[0], step, &n) {
                        out.push(Violation {
                            rule: Rule::Path(r),
                            reason: Reason::CountExceeded { max: *max },
                            effect: rule.effect,
                            path: vec![],
                        });
                    }
                }
            }
        }
        for (o, ob) in policy.obligations.iter().enumerate() {
            if !self.index.obligation_before[o][n.tool as usize] {
                continue;
            }
            let since = self.session.since_seen[o];
            let met = match (self.session.fact_seen[ob.fact], since) {
                (None, _) => false,
                (Some(_), None) => true,
                (Some(f), Some((s, _))) => f > s,
            };
            if !met {
                // The path: the call the fact should have followed, then this one.
                let path = since.map(|(_, n)| n).into_iter().chain([node]).collect();
                out.push(Violation {
                    rule: Rule::Obligation(o),
                    reason: Reason::ObligationUnmet {
                        fact: ob.fact,
                        since: ob.since.is_some(),
                    },
                    effect: ob.effect,
                    path,
                });
            }
        }
        out
    }

    /// The serving grant of every agent on the chain, or why there is none.
    fn select_chain(&self, r: &Resolved, time: u64) -> Result<Vec<GrantId>, Reason> {
        let policy = &*self.policy;
        let candidates = &self.index.grants_for_tool[r.tool];
        let mut chosen = Vec::with_capacity(1);
        for &agent in &self.index.chains[r.agent] {
            let mut exhausted = None;
            let found = candidates.iter().copied().find(|&g| {
                let grant = &policy.grants[g];
                if !spec::grant_matches(
                    policy,
                    grant,
                    agent,
                    r.tool,
                    &r.args,
                    time,
                    &self.session.sets,
                ) {
                    return false;
                }
                if self.session.ledger.has_quota(g) {
                    true
                } else {
                    exhausted.get_or_insert(g);
                    false
                }
            });
            match found {
                Some(g) => chosen.push(g),
                None => return Err(Reason::NoGrant { agent, exhausted }),
            }
        }
        Ok(chosen)
    }

    /// Effects of admission on the history: path automata, counts and
    /// `since` marks move on; the node becomes running.
    fn admit(&mut self, node: NodeId, seq: u64) {
        self.set_status(node, Status::Running);
        let Some(n) = self.session.graph.node(node).copied() else {
            return;
        };
        let policy = Arc::clone(&self.policy);
        for (r, rule) in policy.path_rules.iter().enumerate() {
            if let (Some(reset), Some(ok)) = (&rule.reset, &self.index.path_reset[r]) {
                if self.step_matches(ok, reset, &n) {
                    self.session.path_progress[r] = 0;
                    self.session.path_witness[r].clear();
                }
            }
            let progress = self.session.path_progress[r];
            let steps = &self.index.path_steps[r];
            match &rule.kind {
                PathKind::Sequence(pattern) => {
                    let k = progress as usize;
                    if k + 1 < pattern.len() && self.step_matches(&steps[k], &pattern[k], &n) {
                        self.session.path_progress[r] += 1;
                        self.session.path_witness[r].push(node);
                    }
                }
                PathKind::AtMost { step, .. } => {
                    if self.step_matches(&steps[0], step, &n) {
                        self.session.path_progress[r] += 1;
                    }
                }
            }
        }
        for o in 0..policy.obligations.len() {
            if let Some(ok) = &self.index.obligation_since[o] {
                if ok.get(n.tool as usize).copied().unwrap_or(false) {
                    self.session.since_seen[o] = Some((seq, node));
                }
            }
        }
    }

    fn applied(
        &self,
        node: NodeId,
        rule: Option<Rule>,
        reason: String,
        refunded: Vec<GrantId>,
    ) -> Applied {
        Applied {
            node,
            rule,
            reason,
            refunded,
            ledger_hash: self.session.ledger_hash,
        }
    }

    fn status_name(status: Status) -> &'static str {
        match status {
            Status::Denied => "denied",
            Status::Paused => "paused",
            Status::Running => "running",
            Status::Rejected => "rejected",
            Status::Succeeded => "succeeded",
            Status::Failed => "failed",
            Status::Unknown => "finished (unknown outcome)",
            Status::Context => "the context",
        }
    }

    /// The node of `call` if it is in `want`; otherwise the error.
    fn node_in(&self, call: &str, want: Status, event: &'static str) -> Result<NodeId, StepError> {
        let node = self
            .session
            .calls
            .get(call)
            .copied()
            .ok_or_else(|| StepError::UnknownCall(call.to_string()))?;
        let status = self
            .session
            .graph
            .node(node)
            .map_or(Status::Denied, |n| n.status);
        if status != want {
            return Err(StepError::WrongState {
                call: call.to_string(),
                status: Self::status_name(status),
                event,
            });
        }
        Ok(node)
    }

    fn refund(&mut self, grants: &[GrantId]) {
        for &g in grants {
            self.session.ledger.refund(&self.policy, g);
        }
        if grants.iter().any(|&g| self.session.ledger.is_limited(g)) {
            self.session.ledger_hash = self.session.ledger.hash();
        }
    }

    /// Applies the result of an admitted call.
    pub fn report(&mut self, report: &Report) -> Result<Applied, StepError> {
        let time = self.advance_time(report.time)?;
        let node = self.node_in(&report.call, Status::Running, "a result")?;
        self.session.time = time;
        self.session.seq += 1;
        let held = self.session.held.remove(&node).unwrap_or(Held {
            grants: vec![],
            admitted_at: self.session.seq,
        });
        let rule = held.grants.first().map(|&g| Rule::Grant(g));
        let policy = Arc::clone(&self.policy);
        let n = self.session.graph.nodes[node.0 as usize];
        match report.status {
            Outcome::Failed => {
                self.set_status(node, Status::Failed);
                self.refund(&held.grants);
                Ok(self.applied(
                    node,
                    rule,
                    "failed with no effect: units returned".into(),
                    held.grants,
                ))
            }
            Outcome::Unknown => {
                self.set_status(node, Status::Unknown);
                self.merge_into_context(node, n.label, Trust::Policy);
                Ok(self.applied(
                    node,
                    rule,
                    "outcome unknown: units stay spent, output assumed read".into(),
                    vec![],
                ))
            }
            Outcome::Succeeded => {
                self.set_status(node, Status::Succeeded);
                self.merge_into_context(node, n.label, Trust::Observed);
                let mut notes = vec!["succeeded".to_string()];
                let target = held
                    .grants
                    .first()
                    .and_then(|&g| policy.grants[g].discovers);
                if let Some(set) = target {
                    let before = self.session.sets[set].len();
                    self.session.sets[set].extend(report.discovered.iter().cloned());
                    notes.push(format!(
                        "{} new in `{}`",
                        self.session.sets[set].len() - before,
                        policy.sets[set]
                    ));
                }
                if let Some(tool) = policy.tools.get(n.tool as usize) {
                    for rule in &tool.facts {
                        let holds = rule.when.as_ref().is_none_or(|t| {
                            report
                                .output
                                .get(&t.field)
                                .and_then(Value::from_json)
                                .is_some_and(|v| t.op.eval(&v, &self.session.sets))
                        });
                        if holds {
                            let seen = &mut self.session.fact_seen[rule.fact];
                            *seen =
                                Some(seen.map_or(held.admitted_at, |s| s.max(held.admitted_at)));
                            notes.push(format!("fact `{}` seen", policy.facts[rule.fact]));
                        }
                    }
                }
                Ok(self.applied(node, rule, notes.join("; "), vec![]))
            }
        }
    }

    fn merge_into_context(&mut self, node: NodeId, label: Label, trust: Trust) {
        let ctx = &mut self.session.graph.nodes[CONTEXT.0 as usize];
        ctx.label = ctx.label.join(&label);
        self.session
            .graph
            .push_edge(node, CONTEXT, EdgeKind::Data, trust, NO_PARAM);
    }

    /// A human approves a paused call: it is admitted (ALLOW).
    pub fn approve(&mut self, call: &str) -> Result<Applied, StepError> {
        self.approve_at(&Resolve {
            session: None,
            call: call.to_string(),
            time: None,
        })
    }

    /// A human rejects a paused call: its reserved units are returned.
    pub fn reject(&mut self, call: &str) -> Result<Applied, StepError> {
        self.reject_at(&Resolve {
            session: None,
            call: call.to_string(),
            time: None,
        })
    }

    fn approve_at(&mut self, a: &Resolve) -> Result<Applied, StepError> {
        let time = self.advance_time(a.time)?;
        let node = self.node_in(&a.call, Status::Paused, "an approval")?;
        self.session.time = time;
        self.session.seq += 1;
        let seq = self.session.seq;
        let mut rule = None;
        if let Some(h) = self.session.held.get_mut(&node) {
            h.admitted_at = seq;
            rule = h.grants.first().map(|&g| Rule::Grant(g));
        }
        self.admit(node, seq);
        Ok(self.applied(
            node,
            rule,
            "approved: the call is admitted (ALLOW)".into(),
            vec![],
        ))
    }

    fn reject_at(&mut self, r: &Resolve) -> Result<Applied, StepError> {
        let time = self.advance_time(r.time)?;
        let node = self.node_in(&r.call, Status::Paused, "a rejection")?;
        self.session.time = time;
        self.session.seq += 1;
        let held = self
            .session
            .held
            .remove(&node)
            .map(|h| h.grants)
            .unwrap_or_default();
        self.set_status(node, Status::Rejected);
        self.refund(&held);
        let rule = held.first().map(|&g| Rule::Grant(g));
        Ok(self.applied(node, rule, "rejected: reserved units returned".into(), held))
    }

    /// Renders a decision's reason against this monitor's policy.
    pub fn reason_text(&self, d: &Decision) -> String {
        reason_text(&self.policy, &d.reason, d.rule, d.tool)
    }
}
