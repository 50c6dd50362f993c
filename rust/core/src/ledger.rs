//! The ledger: how much of each grant is left.

use crate::hash::Hash;
use crate::policy::{GrantId, Policy, Quota};
use serde::{Deserialize, Serialize};

/// Remaining quota per grant, indexed like `Policy::grants`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    pub remaining: Vec<Quota>,
}

impl Ledger {
    /// Every grant at its full quota.
    pub fn initial(policy: &Policy) -> Ledger {
        Ledger {
            remaining: policy.grants.iter().map(|g| g.quota).collect(),
        }
    }

    pub fn has_quota(&self, g: GrantId) -> bool {
        self.remaining.get(g).is_some_and(|q| q.is_available())
    }

    /// Takes one unit of `g`; false (and no change) when none is left.
    pub fn consume(&mut self, g: GrantId) -> bool {
        match self.remaining.get_mut(g) {
            Some(Quota::Unlimited) => true,
            Some(Quota::Limited(n)) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        }
    }

    /// Returns one unit of `g`, never beyond the grant's quota in `policy`.
    pub fn refund(&mut self, policy: &Policy, g: GrantId) {
        let cap = policy.grants.get(g).map(|gr| gr.quota);
        if let (Some(Quota::Limited(n)), Some(Quota::Limited(cap))) =
            (self.remaining.get_mut(g), cap)
        {
            if *n < cap {
                *n += 1;
            }
        }
    }

    /// Whether taking a unit of `g` changes the ledger (limited grants only).
    pub fn is_limited(&self, g: GrantId) -> bool {
        matches!(self.remaining.get(g), Some(Quota::Limited(_)))
    }

    /// SHA-256 over the remaining counts: 9 bytes per grant (a tag byte and
    /// the count), so equal ledgers hash equally.
    pub fn hash(&self) -> Hash {
        let mut bytes = Vec::with_capacity(self.remaining.len() * 9 + 8);
        bytes.extend_from_slice(b"agenra-ledger-v1");
        for q in &self.remaining {
            match q {
                Quota::Unlimited => bytes.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0, 0]),
                Quota::Limited(n) => {
                    bytes.push(0);
                    bytes.extend_from_slice(&n.to_be_bytes());
                }
            }
        }
        Hash::of_bytes(&bytes)
    }
}
