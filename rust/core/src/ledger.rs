//! The ledger: how much of each grant is left.

use crate::hash::Hash;
use crate::policy::{GrantId, Policy, Quota};
use serde::{Deserialize, Serialize};

/// Remaining quota per grant, indexed like `Policy::grants`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    /// What is left of each grant, at the grant's index.
    pub remaining: Vec<Quota>,
}

impl Ledger {
    /// Every grant at its full quota.
    pub fn initial(policy: &Policy) -> Ledger {
        Ledger {
            remaining: policy.grants.iter().map(|g| g.quota).collect(),
        }
    }

    /// Whether grant `g` has a unit left (always, when unlimited; never, for an unknown index).
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

    /// The ledger hash: a SHA-256 tree over the remaining counts
    /// (`LedgerTree`). Computed here from scratch; a session keeps the tree
    /// and updates it in `O(log n)` per unit taken or returned.
    pub fn hash(&self) -> Hash {
        LedgerTree::new(self).root()
    }
}

/// Grants per leaf block, and hashes per inner node, of the ledger's hash
/// tree.
pub const FAN_OUT: usize = 64;

/// 9 bytes per grant: a tag (0 limited, 1 unlimited) and the count.
fn encode(q: &Quota, out: &mut Vec<u8>) {
    match q {
        Quota::Unlimited => out.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0, 0]),
        Quota::Limited(n) => {
            out.push(0);
            out.extend_from_slice(&n.to_be_bytes());
        }
    }
}

/// The ledger's hash tree. It commits to every grant's remaining count as
/// SHA-256 does to its input, and lets a session rehash only what a step
/// changed (`docs/semantics.md`, "The ledger hash"):
///
/// * up to `FAN_OUT` grants: `SHA-256("agenra-ledger-v2" ‖ n ‖ counts)`;
/// * more: leaf block `b` (grants `64b … 64b+63`) is
///   `SHA-256("agenra-ledger-v2/leaves" ‖ b ‖ counts)`, node `j` of level
///   `k ≥ 1` is `SHA-256("agenra-ledger-v2/nodes" ‖ k ‖ j ‖ 64 child
///   hashes)`, up to a single top hash, and the ledger hash is
///   `SHA-256("agenra-ledger-v2" ‖ n ‖ top)`.
///
/// Numbers are 8-byte big-endian; counts are 9 bytes each (`encode`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LedgerTree {
    n: usize,
    /// `levels[0]`: leaf blocks; `levels[k+1]`: one per `FAN_OUT` of
    /// `levels[k]`, the last holding one hash. Empty for a flat ledger.
    levels: Vec<Vec<Hash>>,
    root: Hash,
}

impl LedgerTree {
    /// The tree of `ledger`, hashed from scratch.
    pub fn new(ledger: &Ledger) -> LedgerTree {
        let n = ledger.remaining.len();
        let mut tree = LedgerTree {
            n,
            levels: Vec::new(),
            root: Hash([0; 32]),
        };
        if n > FAN_OUT {
            let blocks = n.div_ceil(FAN_OUT);
            let mut level: Vec<Hash> = (0..blocks).map(|b| leaf_block(ledger, b)).collect();
            let mut k = 0u64;
            loop {
                let done = level.len() == 1;
                tree.levels.push(level);
                if done {
                    break;
                }
                k += 1;
                let below = &tree.levels[tree.levels.len() - 1];
                level = (0..below.len().div_ceil(FAN_OUT))
                    .map(|j| inner_node(k, j, below))
                    .collect();
            }
        }
        tree.root = tree.compute_root(ledger);
        tree
    }

    /// The ledger hash, as [`Ledger::hash`] computes it.
    pub fn root(&self) -> Hash {
        self.root
    }

    /// Rehashes after grant `g`'s count changed.
    pub fn update(&mut self, ledger: &Ledger, g: usize) {
        if self.levels.is_empty() || ledger.remaining.len() != self.n {
            *self = LedgerTree::new(ledger);
            return;
        }
        let mut index = g / FAN_OUT;
        if let Some(slot) = self.levels[0].get_mut(index) {
            *slot = leaf_block(ledger, index);
        }
        for k in 1..self.levels.len() {
            index /= FAN_OUT;
            let node = inner_node(k as u64, index, &self.levels[k - 1]);
            if let Some(slot) = self.levels[k].get_mut(index) {
                *slot = node;
            }
        }
        self.root = self.compute_root(ledger);
    }

    fn compute_root(&self, ledger: &Ledger) -> Hash {
        let mut bytes = Vec::with_capacity(16 + 8 + 9 * self.n.min(FAN_OUT));
        bytes.extend_from_slice(b"agenra-ledger-v2");
        bytes.extend_from_slice(&(self.n as u64).to_be_bytes());
        match self.levels.last().and_then(|top| top.first()) {
            Some(top) => bytes.extend_from_slice(&top.0),
            None => ledger.remaining.iter().for_each(|q| encode(q, &mut bytes)),
        }
        Hash::of_bytes(&bytes)
    }
}

fn leaf_block(ledger: &Ledger, b: usize) -> Hash {
    let grants = &ledger.remaining[b * FAN_OUT..((b + 1) * FAN_OUT).min(ledger.remaining.len())];
    let mut bytes = Vec::with_capacity(23 + 8 + 9 * grants.len());
    bytes.extend_from_slice(b"agenra-ledger-v2/leaves");
    bytes.extend_from_slice(&(b as u64).to_be_bytes());
    grants.iter().for_each(|q| encode(q, &mut bytes));
    Hash::of_bytes(&bytes)
}

fn inner_node(k: u64, j: usize, below: &[Hash]) -> Hash {
    let children = &below[j * FAN_OUT..((j + 1) * FAN_OUT).min(below.len())];
    let mut bytes = Vec::with_capacity(22 + 16 + 32 * children.len());
    bytes.extend_from_slice(b"agenra-ledger-v2/nodes");
    bytes.extend_from_slice(&k.to_be_bytes());
    bytes.extend_from_slice(&(j as u64).to_be_bytes());
    children.iter().for_each(|h| bytes.extend_from_slice(&h.0));
    Hash::of_bytes(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(n: usize) -> Ledger {
        Ledger {
            remaining: (0..n)
                .map(|i| {
                    if i % 5 == 0 {
                        Quota::Unlimited
                    } else {
                        Quota::Limited(i as u64)
                    }
                })
                .collect(),
        }
    }

    #[test]
    fn consume_stops_at_zero_and_refunds_stop_at_the_quota() {
        let mut policy = crate::policy::Policy::empty("p");
        for q in [Quota::Limited(1), Quota::Unlimited] {
            policy.grants.push(crate::policy::Grant {
                name: "g".into(),
                agent: 0,
                tool: 0,
                resource: None,
                args: vec![],
                quota: q,
                approval: false,
                expires_at: None,
                discovers: None,
            });
        }
        let mut l = Ledger::initial(&policy);
        assert!(l.has_quota(0) && l.has_quota(1) && !l.has_quota(2));
        assert!(l.consume(0));
        assert!(!l.has_quota(0), "the last unit is taken");
        assert_eq!(l.remaining[0], Quota::Limited(0));
        assert!(!l.consume(0), "nothing left");
        assert_eq!(l.remaining[0], Quota::Limited(0));
        assert!(l.consume(1) && l.consume(1));
        assert_eq!(l.remaining[1], Quota::Unlimited);
        l.refund(&policy, 0);
        l.refund(&policy, 0);
        assert_eq!(l.remaining[0], Quota::Limited(1), "never above the quota");
        assert!(!l.consume(9), "no such grant");
    }

    #[test]
    fn incremental_updates_equal_hashing_from_scratch() {
        for n in [0, 1, 3, 64, 65, 130, 4096, 4097, 10_000] {
            let mut l = ledger(n);
            let mut tree = LedgerTree::new(&l);
            assert_eq!(tree.root(), l.hash(), "n = {n}");
            for g in [0, n / 2, n.saturating_sub(1), 63, 64, 4095, 4096] {
                if g < n {
                    if let Quota::Limited(c) = &mut l.remaining[g] {
                        *c += 7;
                    }
                    tree.update(&l, g);
                    assert_eq!(tree.root(), l.hash(), "n = {n}, g = {g}");
                }
            }
        }
    }

    #[test]
    fn every_count_is_committed_to() {
        let base = ledger(200);
        let mut seen = std::collections::BTreeSet::new();
        seen.insert(base.hash());
        for g in 0..200 {
            let mut l = base.clone();
            l.remaining[g] = match l.remaining[g] {
                Quota::Unlimited => Quota::Limited(0),
                Quota::Limited(c) => Quota::Limited(c + 1),
            };
            assert!(
                seen.insert(l.hash()),
                "changing grant {g} did not change the hash"
            );
        }
        // Lengths are committed to as well.
        let mut longer = base.clone();
        longer.remaining.push(Quota::Unlimited);
        assert!(seen.insert(longer.hash()));
    }
}
