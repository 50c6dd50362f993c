//! A [`Transport`] that answers every entry point with the Rust executable
//! spec (`agenra_core::spec`, `pattern`, `value`) behind the same bytes as
//! the Lean library: it decodes the input with the Rust decoder, evaluates,
//! and encodes the envelope. It is what checks the codec without Lean, and
//! what `Ffi.lean` must behave like.
//!
//! `agenra_ffi_step` is `spec::step` (a session's private pool) and
//! `agenra_ffi_step_in` is `spec::step_in` (the tenant's pool, in and out);
//! a decoded ledger gets the policy's shared grants back
//! ([`shared_from`]).
//!
//! `agenra_ffi_check_simulation` answers with the Rust certificate checker
//! (`agenra_certify::check::closed`, which Lean's `checkSimulation`
//! mirrors) on two policies rebuilt from the decoded abstraction
//! ([`SimCtx::policies`]).

use crate::cbor::Cbor;
use crate::wire::{array_of, shared_from, Entry, SimCtx, Transport, Wire, WireError, VERSION};
use agenra_certify::product::{Ctx, State as PState};
use agenra_core::ledger::Ledger;
use agenra_core::pattern::glob_matches;
use agenra_core::policy::Grant;
use agenra_core::pool::SharedCounts;
use agenra_core::spec::{self, Checks, Event, Request, State};
use agenra_core::{ArgCond, ArgOp, Pattern, Policy, Quant, Value};
use std::collections::BTreeSet;

/// The Rust spec as a transport.
#[derive(Clone, Copy, Debug, Default)]
pub struct Loopback;

type Sets = Vec<BTreeSet<String>>;

fn answer(entry: Entry, input: &[u8]) -> Result<Cbor, WireError> {
    let what = format!("the input of {}", entry.symbol());
    let c = Cbor::decode(input).map_err(|source| WireError::Cbor {
        what: what.clone(),
        source,
    })?;
    let p = |i: usize| format!("{what}[{i}]");
    Ok(match entry {
        Entry::Version => {
            array_of(&c, &what, 0)?;
            Cbor::text(VERSION)
        }
        Entry::PatternMatches => {
            let f = array_of(&c, &what, 2)?;
            let pat = Pattern::from_wire(&f[0], &p(0))?;
            let text = String::from_wire(&f[1], &p(1))?;
            Cbor::Bool(pat.matches(&text))
        }
        Entry::GlobMatches => {
            let f = array_of(&c, &what, 2)?;
            let g = String::from_wire(&f[0], &p(0))?;
            let text = String::from_wire(&f[1], &p(1))?;
            Cbor::Bool(glob_matches(&g, &text))
        }
        Entry::ArgOpEval => {
            let f = array_of(&c, &what, 4)?;
            let op = ArgOp::from_wire(&f[0], &p(0))?;
            let quant = Quant::from_wire(&f[1], &p(1))?;
            let v = Value::from_wire(&f[2], &p(2))?;
            let sets = Sets::from_wire(&f[3], &p(3))?;
            Cbor::Bool(op.eval(quant, &v, &sets))
        }
        Entry::ArgCondEval => {
            let f = array_of(&c, &what, 4)?;
            let cond = ArgCond::from_wire(&f[0], &p(0))?;
            let args = Vec::<Value>::from_wire(&f[1], &p(1))?;
            let agent = usize::from_wire(&f[2], &p(2))?;
            let sets = Sets::from_wire(&f[3], &p(3))?;
            Cbor::Bool(cond.eval(&args, agent, &sets))
        }
        Entry::GrantMatches => {
            let f = array_of(&c, &what, 5)?;
            let policy = Policy::from_wire(&f[0], &p(0))?;
            let grant = Grant::from_wire(&f[1], &p(1))?;
            let owner = usize::from_wire(&f[2], &p(2))?;
            let req = Request::from_wire(&f[3], &p(3))?;
            let sets = Sets::from_wire(&f[4], &p(4))?;
            Cbor::Bool(spec::grant_matches(&policy, &grant, owner, &req, &sets))
        }
        Entry::Select => {
            let f = array_of(&c, &what, 5)?;
            let policy = Policy::from_wire(&f[0], &p(0))?;
            let mut ledger = Ledger::from_wire(&f[1], &p(1))?;
            shared_from(&mut ledger, &policy);
            let agent = usize::from_wire(&f[2], &p(2))?;
            let req = Request::from_wire(&f[3], &p(3))?;
            let sets = Sets::from_wire(&f[4], &p(4))?;
            spec::select(&policy, &ledger, agent, &req, &sets).to_wire()
        }
        Entry::Step => {
            let f = array_of(&c, &what, 4)?;
            let policy = Policy::from_wire(&f[0], &p(0))?;
            let mut state = State::from_wire(&f[1], &p(1))?;
            shared_from(&mut state.ledger, &policy);
            let event = Event::from_wire(&f[2], &p(2))?;
            let checks = Checks::from_wire(&f[3], &p(3))?;
            if !fits(&policy, &state, &event) {
                return Err(out_of_range(what));
            }
            let (o, s) = spec::step(&policy, &state, &event, checks);
            Cbor::Array(vec![o.to_wire(), s.to_wire()])
        }
        Entry::StepIn => {
            let f = array_of(&c, &what, 5)?;
            let policy = Policy::from_wire(&f[0], &p(0))?;
            let mut state = State::from_wire(&f[1], &p(1))?;
            shared_from(&mut state.ledger, &policy);
            let pool = SharedCounts::from_wire(&f[2], &p(2))?;
            let event = Event::from_wire(&f[3], &p(3))?;
            let checks = Checks::from_wire(&f[4], &p(4))?;
            if !fits(&policy, &state, &event) {
                return Err(out_of_range(what));
            }
            let (o, s, pool) = spec::step_in(&policy, &state, &pool, &event, checks);
            Cbor::Array(vec![o.to_wire(), s.to_wire(), pool.to_wire()])
        }
        Entry::CheckSimulation => {
            let f = array_of(&c, &what, 2)?;
            let sim = SimCtx::from_wire(&f[0], &p(0))?;
            let relation = Vec::<PState>::from_wire(&f[1], &p(1))?;
            let (old, new, classes) = sim.policies()?;
            let ctx = Ctx {
                old: &old,
                new: &new,
                classes: &classes,
                flags: &sim.flags,
            };
            Cbor::Bool(agenra_certify::check::closed(&ctx, &relation).is_ok())
        }
    })
}

fn out_of_range(what: String) -> WireError {
    WireError::Shape {
        path: what,
        expected: "indexes in range of the policy (ledger length, held grants, agents)",
        found: "an index out of range".into(),
    }
}

/// `spec::step` indexes `policy.grants[g]` for the grants a call holds: a
/// decoded input must not make it panic.
fn fits(policy: &Policy, state: &State, event: &Event) -> bool {
    let n = policy.grants.len();
    let held_ok = |m: &std::collections::BTreeMap<String, Vec<usize>>| {
        m.values().all(|used| used.iter().all(|g| *g < n))
    };
    let agents_ok = policy
        .agents
        .iter()
        .all(|a| a.parent.is_none_or(|p| p < policy.agents.len()));
    let req_ok = match event {
        Event::Call { req, .. } => req.agent < policy.agents.len(),
        _ => true,
    };
    state.ledger.remaining.len() == n
        && held_ok(&state.paused)
        && held_ok(&state.running)
        && agents_ok
        && req_ok
}

impl Transport for Loopback {
    fn call(&self, entry: Entry, input: &[u8]) -> Result<Vec<u8>, WireError> {
        let envelope = match answer(entry, input) {
            Ok(result) => Cbor::Array(vec![Cbor::uint(0), result]),
            Err(e) => Cbor::Array(vec![Cbor::uint(1), Cbor::Text(e.to_string())]),
        };
        Ok(envelope.encode())
    }
}
