#![warn(missing_docs)]
//! Z3 encodings of the Agenra monitor step (DESIGN §3).
//!
//! * [`step`]: the decision of one call as constraints over Z3 terms — the
//!   one place the step is encoded, shared by the authorizer and
//!   `agenra verify`.
//! * [`authorizer`]: the SMT authorizer — the session graph as label
//!   presence Booleans `H[v,ℓ]`, the step instantiated on it, SAT → the
//!   granted capabilities, UNSAT → a counterexample path.
//!
//! `docs/smt.md` describes the encoding.

pub mod authorizer;
pub mod graph;
/// The rule side of `agenra certify`: rule changes certified over [`step`].
pub mod rules;
pub mod step;
pub mod verify;

pub use authorizer::{Counterexample, SmtDecision, SmtError, SmtSession};
