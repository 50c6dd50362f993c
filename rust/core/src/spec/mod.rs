//! The reference semantics of consumable authority: grants, matching, the
//! ledger and the life of a call (admit, pause, approve, reject, succeed,
//! fail, unknown). Written to read like DESIGN §1–2 and to be mirrored line
//! by line in Lean (`lean/Agenra/Ledger.lean`); the monitor is an optimized
//! implementation of the same functions and is tested against this one.
//!
//! Everything here is a pure function: states are values, never mutated in
//! place by a caller-visible operation.

pub mod reference;

use crate::ledger::Ledger;
use crate::policy::{AgentId, Grant, GrantId, Policy, ToolId};
use crate::value::Value;
use std::collections::{BTreeMap, BTreeSet};

/// A well-formed call, as the ledger sees it: arguments complete and typed,
/// in the tool's parameter order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub agent: AgentId,
    pub tool: ToolId,
    pub args: Vec<Value>,
    pub time: u64,
}

/// The resource a request acts on: the value of its tool's resource parameter.
pub fn resource_of<'a>(policy: &Policy, tool: ToolId, args: &'a [Value]) -> Option<&'a str> {
    let index = policy.tools.get(tool)?.resource?;
    args.get(index)?.as_str()
}

/// A grant of `owner` (the caller or one of its delegators) matches a call
/// when it is `owner`'s grant for the call's tool, has not expired, its
/// resource pattern matches the call's resource, and every condition holds
/// on the call's arguments and calling agent (discovered-set tests read
/// `sets`).
pub fn grant_matches(
    policy: &Policy,
    grant: &Grant,
    owner: AgentId,
    req: &Request,
    sets: &[BTreeSet<String>],
) -> bool {
    grant.agent == owner
        && grant.tool == req.tool
        && grant.expires_at.is_none_or(|end| req.time < end)
        && grant
            .resource
            .as_ref()
            .is_none_or(|p| resource_of(policy, req.tool, &req.args).is_some_and(|r| p.matches(r)))
        && grant
            .args
            .iter()
            .all(|c| c.eval(&req.args, req.agent, sets))
}

/// The grant of `agent` that serves the request: the first, in policy
/// order, that matches and still has quota.
pub fn select(
    policy: &Policy,
    ledger: &Ledger,
    agent: AgentId,
    req: &Request,
    sets: &[BTreeSet<String>],
) -> Option<GrantId> {
    (0..policy.grants.len()).find(|&g| {
        grant_matches(policy, &policy.grants[g], agent, req, sets) && ledger.has_quota(g)
    })
}

/// Admission takes one unit from the serving grant of every agent on the
/// delegation chain (the caller first, `main` last), all or nothing.
/// `Err(agent)` names the first agent with no serving grant.
pub fn admit(
    policy: &Policy,
    ledger: &Ledger,
    req: &Request,
    sets: &[BTreeSet<String>],
) -> Result<(Vec<GrantId>, Ledger), AgentId> {
    let mut next = ledger.clone();
    let mut used = Vec::new();
    for agent in policy.agent_chain(req.agent) {
        let g = select(policy, &next, agent, req, sets).ok_or(agent)?;
        next.consume(g);
        used.push(g);
    }
    Ok((used, next))
}

/// Gives back the units a call took (a failed call, a rejected approval).
pub fn refund(policy: &Policy, ledger: &Ledger, used: &[GrantId]) -> Ledger {
    let mut next = ledger.clone();
    for &g in used {
        next.refund(policy, g);
    }
    next
}

/// What happens to a call, as far as authority is concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Call {
        id: String,
        req: Request,
    },
    Approve {
        id: String,
    },
    Reject {
        id: String,
    },
    Succeeded {
        id: String,
        discovered: Vec<String>,
    },
    Failed {
        id: String,
    },
    Unknown {
        id: String,
    },
    /// A task seeds values into a discovered set.
    Seed {
        set: usize,
        values: Vec<String>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Allow(Vec<GrantId>),
    Pause(Vec<GrantId>),
    Deny,
    /// Approve/reject/result events: accepted and applied.
    Applied,
    /// An event about a call that is not in the state it needs.
    Invalid,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    pub ledger: Ledger,
    /// Calls waiting for an approval, with the units reserved for them.
    pub paused: BTreeMap<String, Vec<GrantId>>,
    /// Admitted calls whose result has not been reported.
    pub running: BTreeMap<String, Vec<GrantId>>,
    /// Discovered-resource sets, indexed like `Policy::sets`.
    pub sets: Vec<BTreeSet<String>>,
}

impl State {
    pub fn initial(policy: &Policy) -> State {
        State {
            ledger: Ledger::initial(policy),
            paused: BTreeMap::new(),
            running: BTreeMap::new(),
            sets: vec![BTreeSet::new(); policy.sets.len()],
        }
    }
}

/// What the checks before the ledger (well-formedness, flows, call rules,
/// path rules, counts, obligations: steps 1–4) decided about a call, or
/// about a paused call at approval time. The ledger semantics takes it as
/// an input; `spec::history` computes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checks {
    Pass,
    /// A rule asks a human (the ledger still reserves the units).
    Pause,
    Deny,
}

/// One step of the ledger semantics. `checks` is what steps 1–4 decided
/// about the event's call (for calls and approvals; other events ignore it).
///
/// Approval is a just-in-time re-authorization: when the re-check at
/// approval time denies, the reserved units return and the answer is DENY.
pub fn step(policy: &Policy, state: &State, event: &Event, checks: Checks) -> (Outcome, State) {
    let mut next = state.clone();
    let outcome = match event {
        Event::Call { .. } if checks == Checks::Deny => Outcome::Deny,
        Event::Call { id, req } => match admit(policy, &state.ledger, req, &state.sets) {
            Err(_) => Outcome::Deny,
            Ok((used, ledger)) => {
                next.ledger = ledger;
                let approval = used.iter().any(|&g| policy.grants[g].approval);
                if approval || checks == Checks::Pause {
                    next.paused.insert(id.clone(), used.clone());
                    Outcome::Pause(used)
                } else {
                    next.running.insert(id.clone(), used.clone());
                    Outcome::Allow(used)
                }
            }
        },
        Event::Approve { id } => match next.paused.remove(id) {
            Some(used) if checks == Checks::Deny => {
                next.ledger = refund(policy, &next.ledger, &used);
                Outcome::Deny
            }
            Some(used) => {
                next.running.insert(id.clone(), used.clone());
                Outcome::Allow(used)
            }
            None => Outcome::Invalid,
        },
        Event::Reject { id } => match next.paused.remove(id) {
            Some(used) => {
                next.ledger = refund(policy, &next.ledger, &used);
                Outcome::Applied
            }
            None => Outcome::Invalid,
        },
        Event::Succeeded { id, discovered } => match next.running.remove(id) {
            Some(used) => {
                // The caller's own grant says where discovered values go.
                let target = used.first().and_then(|&g| policy.grants[g].discovers);
                if let Some(set) = target.and_then(|s| next.sets.get_mut(s)) {
                    set.extend(discovered.iter().cloned());
                }
                Outcome::Applied
            }
            None => Outcome::Invalid,
        },
        Event::Failed { id } => match next.running.remove(id) {
            Some(used) => {
                next.ledger = refund(policy, &next.ledger, &used);
                Outcome::Applied
            }
            None => Outcome::Invalid,
        },
        Event::Seed { set, values } => match next.sets.get_mut(*set) {
            Some(s) => {
                s.extend(values.iter().cloned());
                Outcome::Applied
            }
            None => Outcome::Invalid,
        },
        // The effect may have happened: the units stay spent.
        Event::Unknown { id } => match next.running.remove(id) {
            Some(_) => Outcome::Applied,
            None => Outcome::Invalid,
        },
    };
    (outcome, next)
}
