//! The monitor: `step(state, event) -> (decision, state')` of DESIGN §2.
//!
//! The step is deterministic and does no I/O; time comes with the event.
//! `Monitor::step` updates the session in place (the hot path); `step_pure`
//! is the same function on values. Each stage of a call's step has its own
//! module, named as in `docs/semantics.md`, in the order that makes a
//! denied call consume nothing:
//!
//! 1. `wellformed`: tool, agent, scope, arguments and their types;
//! 2. `lineage`: append the call, label each argument;
//! 3. `flows`: what reaches each sink;
//! 4. `history`: call rules, path rules, counts, obligations;
//! 5. `grants`: the ledger.
//!
//! `approvals` re-authorizes paused calls; `results` applies outcomes.

mod approvals;
mod contexts;
mod fast_map;
mod flows;
mod grants;
mod history;
mod index;
mod lineage;
mod results;
mod tasks;
mod values;
mod wellformed;

use crate::decision::{Applied, Decision, Reason, Rule, StepError, StepOutput, Verdict};
use crate::event::{Call, Event, Resolve};
use crate::graph::{Evidence, Graph, Node, NodeId, NodeKind, Status, NO_TOOL};
use crate::hash::{content_hash, EncodeError, Hash};
use crate::label::Label;
use crate::ledger::{Ledger, LedgerTree};
use crate::policy::{GrantId, Policy, Quota, RuleEffect, ToolId};
use crate::validate::{validate, ModelError};
use fast_map::FastMap;
use history::Violation;
use index::Index;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use wellformed::Resolved;

/// Units a paused or running call holds, and when it was admitted.
#[derive(Clone, Debug)]
struct Held {
    grants: Vec<GrantId>,
    /// Sequence number of the admission (the call, or its approval).
    admitted_at: u64,
    /// A paused call, kept for the re-check at approval time.
    pending: Option<Box<Resolved>>,
}

/// Everything the monitor knows about one session.
#[derive(Clone, Debug)]
pub struct Session {
    pub graph: Graph,
    pub ledger: Ledger,
    /// The ledger's hash tree: a unit taken or returned rehashes one block
    /// and its ancestors, not every grant.
    ledger_tree: LedgerTree,
    /// Discovered-resource sets, indexed like `Policy::sets`.
    pub sets: Vec<BTreeSet<String>>,
    /// Call and task ids. They come from the agent's runtime, so the map
    /// uses std's keyed SipHash: crafted ids cannot collide on purpose and
    /// make one session (and the process serving it) quadratic.
    calls: HashMap<String, NodeId>,
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
    /// Per agent with its own context: its context node, once it exists.
    agent_contexts: Vec<Option<NodeId>>,
    /// Task texts and output words, for provenance by value.
    values: values::ValueIndex,
    /// The scope the latest task opened (narrows the static scopes).
    task_scope: Option<crate::event::TaskScope>,
    /// Values tasks seeded into discovered sets: (set, value, task node).
    pub seeded: Vec<(usize, String, NodeId)>,
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
            ledger_tree: LedgerTree::new(&ledger),
            ledger,
            sets: vec![BTreeSet::new(); policy.sets.len()],
            calls: HashMap::new(),
            held: FastMap::default(),
            path_progress: vec![0; policy.path_rules.len()],
            path_witness: vec![Vec::new(); policy.path_rules.len()],
            fact_seen: vec![None; policy.facts.len()],
            since_seen: vec![None; policy.obligations.len()],
            last_call: None,
            last_by_agent: vec![None; policy.agents.len()],
            agent_contexts: vec![None; policy.agents.len()],
            values: values::ValueIndex::default(),
            task_scope: None,
            seeded: Vec::new(),
            seq: 0,
            time: 0,
        }
    }

    pub fn ledger_hash(&self) -> Hash {
        self.ledger_tree.root()
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
            Event::Approve(a) => self.approve_at(a).map(StepOutput::Decision),
            Event::Reject(r) => self.reject_at(r).map(StepOutput::Applied),
            Event::Task(t) => self.task(t).map(StepOutput::Applied),
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
                let tool = self.tool_of(&call.tool);
                let agent = self.agent_of(call.agent.as_deref()).unwrap_or(0);
                let node = self.append_denied(&call.id, tool, agent, time);
                return Ok(self.decide(Verdict::Deny, rule, reason, node, tool, vec![], vec![]));
            }
        };
        let tool = Some(resolved.req.tool);

        // 2. Append the call and label each argument.
        let labels = self.call_labels(&resolved);
        let node = self.append_call(&call.id, &resolved, &labels);

        // 3. Flows into every sink the call reaches.
        let flows = self.check_flows(&resolved, &labels);
        if let Some(hit) = flows.deny {
            self.set_status(node, Status::Denied);
            let path = self.flow_path(node, &hit, &labels, &resolved);
            let (rule, reason) = hit.rule_and_reason();
            return Ok(self.decide(Verdict::Deny, rule, reason, node, tool, path, vec![]));
        }
        let mut pause: Option<Violation> = flows.pause.map(|hit| {
            let (rule, reason) = hit.rule_and_reason();
            Violation {
                rule,
                path: self.flow_path(node, &hit, &labels, &resolved),
                reason,
                effect: RuleEffect::Pause,
            }
        });

        // 4. Call rules, path rules, counts and obligations.
        for v in self.history_violations(node, &resolved) {
            match v.effect {
                RuleEffect::Deny => {
                    self.set_status(node, Status::Denied);
                    return Ok(self.decide(
                        Verdict::Deny,
                        v.rule,
                        v.reason,
                        node,
                        tool,
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
        let grants = match self.select_chain(&resolved) {
            Ok(g) => g,
            Err(reason) => {
                self.set_status(node, Status::Denied);
                return Ok(self.decide(
                    Verdict::Deny,
                    Rule::NoGrant,
                    reason,
                    node,
                    tool,
                    vec![],
                    vec![],
                ));
            }
        };
        self.consume(&grants);
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
                    agent: resolved.req.agent,
                    left: match self.session.ledger.remaining.get(own) {
                        Some(Quota::Limited(n)) => Some(*n),
                        _ => None,
                    },
                },
                vec![],
            ),
        };
        if verdict == Verdict::Allow {
            self.admit(node, &resolved, seq);
            self.session.held.insert(
                node,
                Held {
                    grants: grants.clone(),
                    admitted_at: seq,
                    pending: None,
                },
            );
        } else {
            self.set_status(node, Status::Paused);
            self.session.held.insert(
                node,
                Held {
                    grants: grants.clone(),
                    admitted_at: seq,
                    pending: Some(Box::new(resolved)),
                },
            );
        }
        Ok(self.decide(verdict, rule, reason, node, tool, path, grants))
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
            refunded: vec![],
            ledger_hash: self.session.ledger_hash(),
        }
    }

    fn set_status(&mut self, node: NodeId, status: Status) {
        if let Some(n) = self.session.graph.node_mut(node) {
            n.status = status;
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
            ledger_hash: self.session.ledger_hash(),
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
            Status::Task => "a task",
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

    /// A human approves a paused call: it is re-authorized now, and admitted
    /// (ALLOW) unless the re-check denies it (DENY, units returned).
    pub fn approve(&mut self, call: &str) -> Result<Decision, StepError> {
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

    /// Renders a decision's reason against this monitor's policy.
    pub fn reason_text(&self, d: &Decision) -> String {
        d.reason_text(&self.policy)
    }
}
