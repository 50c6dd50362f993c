//! The differential harness: the functions the Lean model mirrors, behind
//! one trait, and its implementations.
//!
//! * [`RustSpec`]: the Rust executable spec (`agenra_core::spec`, `pattern`,
//!   `value`), called directly. Always.
//! * [`Wired`] over [`Loopback`]: the same Rust spec behind the bytes of the
//!   wire format (`docs/lean-ffi.md`), so the encoder and decoder that the
//!   Lean transport uses are exercised on every generated input. Always.
//! * [`Wired`] over the Lean library (`LeanTransport`): with `cargo test
//!   --features lean` (after `lake build Agenra:static`).
//!
//! The suite checks every implementation against independent expectations
//! (`oracle.rs`, the tables) and every implementation against [`RustSpec`].
#![allow(dead_code)]

pub mod gen;
pub mod oracle;

use agenra_certify::emit_lean::Part;
use agenra_certify::product::Ctx;
use agenra_core::ledger::Ledger;
use agenra_core::pattern::glob_matches;
use agenra_core::policy::{AgentId, Grant, GrantId};
use agenra_core::pool::SharedCounts;
use agenra_core::spec::{self, Checks, Event, Outcome, Request, State};
use agenra_core::{ArgCond, ArgOp, Pattern, Policy, Quant, Value};
use agenra_lean::wire::SimCtx;
use agenra_lean::{Client, Loopback, Transport};
use std::collections::BTreeSet;

/// An answer, or why there is none (a transport or decoding failure: never
/// a verdict).
pub type Answer<T> = Result<T, String>;

/// The functions of the executable spec that the Lean model mirrors
/// (`docs/lean.md`), with Rust types.
pub trait Reference {
    /// For failure messages.
    fn name(&self) -> String;
    /// `Pattern::matches` (Lean `Pattern.accepts`).
    fn pattern_matches(&self, p: &Pattern, text: &str) -> Answer<bool>;
    /// `glob_matches` (Lean `globChars`).
    fn glob_matches(&self, glob: &str, text: &str) -> Answer<bool>;
    /// `ArgOp::eval` (Lean `ArgOp.eval`).
    fn arg_op_eval(
        &self,
        op: &ArgOp,
        quant: Quant,
        v: &Value,
        sets: &[BTreeSet<String>],
    ) -> Answer<bool>;
    /// `ArgCond::eval` (Lean `ArgCond.eval`).
    fn arg_cond_eval(
        &self,
        c: &ArgCond,
        args: &[Value],
        agent: AgentId,
        sets: &[BTreeSet<String>],
    ) -> Answer<bool>;
    /// `spec::grant_matches` (Lean `grantMatches`).
    fn grant_matches(
        &self,
        p: &Policy,
        g: &Grant,
        owner: AgentId,
        req: &Request,
        sets: &[BTreeSet<String>],
    ) -> Answer<bool>;
    /// `spec::select` (Lean `select`).
    fn select(
        &self,
        p: &Policy,
        l: &Ledger,
        agent: AgentId,
        req: &Request,
        sets: &[BTreeSet<String>],
    ) -> Answer<Option<GrantId>>;
    /// `spec::step` (Lean `stepIn` with the private pool, which is `step`
    /// on a policy without shared grants).
    fn step(&self, p: &Policy, s: &State, e: &Event, checks: Checks) -> Answer<(Outcome, State)>;
    /// `spec::step_in` (Lean `stepIn`): one step of a session against the
    /// tenant's pool of shared grants; the answer carries the pool after it.
    fn step_in(
        &self,
        p: &Policy,
        s: &State,
        pool: &SharedCounts,
        e: &Event,
        checks: Checks,
    ) -> Answer<(Outcome, State, SharedCounts)>;
    /// The closure check of one component of a certificate
    /// (`agenra_certify::check::closed` on OLD, NEW, the component's call
    /// classes and flags; Lean `checkSimulation ctx R`): `part.relation`
    /// starts at the initial pair, fits the policies, and every event OLD
    /// admits from a pair of it is admitted by NEW and leads back into it.
    /// (`agenra_certify::emit_lean::relations` splits a certificate into
    /// its components.)
    fn check_simulation(&self, old: &Policy, new: &Policy, part: &Part) -> Answer<bool>;
}

/// The Rust executable spec, called directly.
pub struct RustSpec;

impl Reference for RustSpec {
    fn name(&self) -> String {
        "the Rust spec".into()
    }
    fn pattern_matches(&self, p: &Pattern, text: &str) -> Answer<bool> {
        Ok(p.matches(text))
    }
    fn glob_matches(&self, glob: &str, text: &str) -> Answer<bool> {
        Ok(glob_matches(glob, text))
    }
    fn arg_op_eval(
        &self,
        op: &ArgOp,
        quant: Quant,
        v: &Value,
        sets: &[BTreeSet<String>],
    ) -> Answer<bool> {
        Ok(op.eval(quant, v, sets))
    }
    fn arg_cond_eval(
        &self,
        c: &ArgCond,
        args: &[Value],
        agent: AgentId,
        sets: &[BTreeSet<String>],
    ) -> Answer<bool> {
        Ok(c.eval(args, agent, sets))
    }
    fn grant_matches(
        &self,
        p: &Policy,
        g: &Grant,
        owner: AgentId,
        req: &Request,
        sets: &[BTreeSet<String>],
    ) -> Answer<bool> {
        Ok(spec::grant_matches(p, g, owner, req, sets))
    }
    fn select(
        &self,
        p: &Policy,
        l: &Ledger,
        agent: AgentId,
        req: &Request,
        sets: &[BTreeSet<String>],
    ) -> Answer<Option<GrantId>> {
        Ok(spec::select(p, l, agent, req, sets))
    }
    fn step(&self, p: &Policy, s: &State, e: &Event, checks: Checks) -> Answer<(Outcome, State)> {
        Ok(spec::step(p, s, e, checks))
    }
    fn step_in(
        &self,
        p: &Policy,
        s: &State,
        pool: &SharedCounts,
        e: &Event,
        checks: Checks,
    ) -> Answer<(Outcome, State, SharedCounts)> {
        Ok(spec::step_in(p, s, pool, e, checks))
    }
    fn check_simulation(&self, old: &Policy, new: &Policy, part: &Part) -> Answer<bool> {
        let ctx = Ctx {
            old,
            new,
            classes: &part.classes,
            flags: &part.flags,
        };
        Ok(agenra_certify::check::closed(&ctx, &part.relation).is_ok())
    }
}

/// An implementation behind the wire format.
pub struct Wired<T> {
    pub label: &'static str,
    pub client: Client<T>,
}

impl<T: Transport> Reference for Wired<T> {
    fn name(&self) -> String {
        self.label.into()
    }
    fn pattern_matches(&self, p: &Pattern, text: &str) -> Answer<bool> {
        self.client
            .pattern_matches(p, text)
            .map_err(|e| e.to_string())
    }
    fn glob_matches(&self, glob: &str, text: &str) -> Answer<bool> {
        self.client
            .glob_matches(glob, text)
            .map_err(|e| e.to_string())
    }
    fn arg_op_eval(
        &self,
        op: &ArgOp,
        quant: Quant,
        v: &Value,
        sets: &[BTreeSet<String>],
    ) -> Answer<bool> {
        self.client
            .arg_op_eval(op, quant, v, sets)
            .map_err(|e| e.to_string())
    }
    fn arg_cond_eval(
        &self,
        c: &ArgCond,
        args: &[Value],
        agent: AgentId,
        sets: &[BTreeSet<String>],
    ) -> Answer<bool> {
        self.client
            .arg_cond_eval(c, args, agent, sets)
            .map_err(|e| e.to_string())
    }
    fn grant_matches(
        &self,
        p: &Policy,
        g: &Grant,
        owner: AgentId,
        req: &Request,
        sets: &[BTreeSet<String>],
    ) -> Answer<bool> {
        self.client
            .grant_matches(p, g, owner, req, sets)
            .map_err(|e| e.to_string())
    }
    fn select(
        &self,
        p: &Policy,
        l: &Ledger,
        agent: AgentId,
        req: &Request,
        sets: &[BTreeSet<String>],
    ) -> Answer<Option<GrantId>> {
        self.client
            .select(p, l, agent, req, sets)
            .map_err(|e| e.to_string())
    }
    fn step(&self, p: &Policy, s: &State, e: &Event, checks: Checks) -> Answer<(Outcome, State)> {
        self.client.step(p, s, e, checks).map_err(|e| e.to_string())
    }
    fn step_in(
        &self,
        p: &Policy,
        s: &State,
        pool: &SharedCounts,
        e: &Event,
        checks: Checks,
    ) -> Answer<(Outcome, State, SharedCounts)> {
        self.client
            .step_in(p, s, pool, e, checks)
            .map_err(|e| e.to_string())
    }
    fn check_simulation(&self, old: &Policy, new: &Policy, part: &Part) -> Answer<bool> {
        let ctx = SimCtx::of(old, new, &part.classes, &part.flags).map_err(|e| e.to_string())?;
        self.client
            .check_simulation(&ctx, &part.relation)
            .map_err(|e| e.to_string())
    }
}

/// Every implementation this build has: the Rust spec, the Rust spec behind
/// the wire format, and (feature `lean`) the Lean model.
pub fn implementations() -> Vec<Box<dyn Reference>> {
    #[allow(unused_mut)]
    let mut all: Vec<Box<dyn Reference>> = vec![
        Box::new(RustSpec),
        Box::new(Wired {
            label: "the Rust spec over the wire (loopback)",
            client: Client::new(Loopback),
        }),
    ];
    #[cfg(feature = "lean")]
    {
        let client = agenra_lean::lean()
            .unwrap_or_else(|e| panic!("feature `lean`: the Lean runtime did not start: {e}"));
        let version = client
            .version()
            .unwrap_or_else(|e| panic!("feature `lean`: agenra_ffi_version failed: {e}"));
        assert_eq!(
            version,
            agenra_lean::VERSION,
            "libAgenra.a speaks another wire version: rebuild it with `lake build Agenra:static`"
        );
        all.push(Box::new(Wired {
            label: "the Lean model (FFI)",
            client,
        }));
    }
    all
}

/// Unwraps an answer, naming the implementation.
pub fn ok<T>(r: &dyn Reference, a: Answer<T>) -> T {
    a.unwrap_or_else(|e| panic!("{}: no answer: {e}", r.name()))
}
