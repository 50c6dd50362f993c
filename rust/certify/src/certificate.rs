//! Certificates: what `agenra certify` proves, as a file (JSON or CBOR)
//! that `agenra check-cert` re-checks without search.

use crate::classes::Classes;
use crate::product::{Flags, State};
use crate::recognise::Construction;
use agenra_core::hash::{content_hash, from_cbor, from_json, to_cbor, EncodeError};
use agenra_core::Policy;
use serde::{Deserialize, Serialize};

pub const FORMAT: &str = "agenra-certificate/1";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Certificate {
    pub format: String,
    /// `sha256:` of OLD's and NEW's canonical CBOR.
    pub old_hash: String,
    pub new_hash: String,
    pub proof: Proof,
    /// When OLD and NEW differ in their rules (flows, call rules, path
    /// rules, counts, obligations): the rule side, decided by SMT over the
    /// shared step encoding (`agenra_smt::rules`). `check-cert` re-runs
    /// that check and compares its summary with this one. Absent when the
    /// rules are identical (the proof alone is then the certificate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<RuleSide>,
}

/// What the rule-side check established: NEW's rule stage (steps 3–4)
/// decides every call and every approval re-check of OLD's workflows as
/// OLD's does (docs/certify.md, "Rule changes").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSide {
    /// How it was decided (the solver and the encoding).
    pub method: String,
    /// The rule parts that differ between OLD and NEW (as `certify`
    /// names them).
    pub parts: Vec<String>,
    /// Call classes (split by rule conditions) whose calls OLD can admit.
    pub classes: usize,
    /// SMT queries answered `unsat`, one per class and obligation.
    pub queries: usize,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Proof {
    /// OLD and NEW are the same policy (up to the name).
    Identical,
    /// A by-construction class: the checker re-checks its side conditions
    /// on every call class.
    Construction {
        classes: Classes,
        construction: Construction,
    },
    /// The relation R, explicitly: the initial pair first. The checker
    /// re-checks that every step OLD admits from a pair of R is admitted
    /// by NEW and leads into R.
    Simulation {
        classes: Classes,
        flags: Flags,
        components: Vec<Component>,
    },
}

impl Certificate {
    pub fn method(&self) -> String {
        let grants: String = match &self.proof {
            Proof::Identical => "identical policies".into(),
            Proof::Construction { construction, .. } => construction.method(),
            Proof::Simulation { .. } => "checked simulation".into(),
        };
        match &self.rules {
            Some(r) => format!("{grants}; rules: {}", r.method),
            None => grants,
        }
    }

    pub fn to_json(&self) -> Result<String, EncodeError> {
        Ok(serde_json::to_string_pretty(self)?)
    }

    pub fn to_cbor(&self) -> Result<Vec<u8>, EncodeError> {
        to_cbor(self)
    }

    /// Reads a certificate: CBOR if the bytes do not start like JSON.
    pub fn read(bytes: &[u8]) -> Result<Certificate, String> {
        let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
        if first == Some(&b'{') {
            let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))?;
            from_json(text).map_err(|e| e.to_string())
        } else {
            from_cbor(bytes).map_err(|e| e.to_string())
        }
    }
}

/// The relation of one component (tools linked by discovered sets).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Component {
    pub tools: Vec<agenra_core::policy::ToolId>,
    pub relation: Vec<State>,
}

pub fn policy_hash(p: &Policy) -> String {
    content_hash(p).map_or_else(|e| format!("unhashable: {e}"), |h| h.to_string())
}
