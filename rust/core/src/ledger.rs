//! The ledger: how much of each grant is left.

use crate::decimal::Decimal;
use crate::hash::Hash;
use crate::policy::{GrantId, Policy, Quota};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Remaining quota per grant, indexed like `Policy::grants`.
///
/// A grant whose quota the tenant's sessions share (`quota N per tenant`,
/// listed in `shared`) is the exception: what is left of it lives in the
/// tenant's pool ([`crate::pool`]), and its entry here counts the units
/// **this session holds** of it (reserved by a pause, or spent), starting
/// at 0. [`Ledger::has_quota`] is false for it: only the pool can say.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    /// What is left of each grant, at the grant's index (for a shared
    /// grant: the units this session holds).
    pub remaining: Vec<Quota>,
    /// The shared grants (`Policy::shared_grants`), strictly ascending.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared: Vec<GrantId>,
}

impl Ledger {
    /// Every grant at its full quota; shared grants at 0 held.
    pub fn initial(policy: &Policy) -> Ledger {
        Ledger {
            remaining: policy
                .grants
                .iter()
                .enumerate()
                .map(|(g, gr)| {
                    if policy.is_shared(g) {
                        Quota::Limited(0)
                    } else {
                        gr.quota
                    }
                })
                .collect(),
            shared: policy.shared_grants.clone(),
        }
    }

    /// Whether `g` is a shared grant (its entry counts units held).
    pub fn is_shared(&self, g: GrantId) -> bool {
        !self.shared.is_empty() && self.shared.binary_search(&g).is_ok()
    }

    /// Units this session holds of shared grant `g` (0 for any other).
    pub fn held(&self, g: GrantId) -> u64 {
        match self.remaining.get(g) {
            Some(Quota::Limited(n)) if self.is_shared(g) => *n,
            _ => 0,
        }
    }

    /// Whether grant `g` has a unit left (always, when unlimited; never, for
    /// an unknown index or a shared grant, whose pool decides).
    pub fn has_quota(&self, g: GrantId) -> bool {
        !self.is_shared(g) && self.remaining.get(g).is_some_and(|q| q.is_available())
    }

    /// Takes one unit of `g`; false (and no change) when none is left. For a
    /// shared grant, the session now holds one more unit (the caller takes
    /// it from the pool).
    pub fn consume(&mut self, g: GrantId) -> bool {
        let shared = self.is_shared(g);
        match self.remaining.get_mut(g) {
            Some(Quota::Unlimited) => true,
            Some(Quota::Limited(n)) if shared => {
                *n = n.saturating_add(1);
                true
            }
            Some(Quota::Limited(n)) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        }
    }

    /// Returns one unit of `g`, never beyond the grant's quota in `policy`.
    /// For a shared grant, the session holds one unit less (never below
    /// zero; the caller gives it back to the pool).
    pub fn refund(&mut self, policy: &Policy, g: GrantId) {
        if self.is_shared(g) {
            if let Some(Quota::Limited(n)) = self.remaining.get_mut(g) {
                *n = n.saturating_sub(1);
            }
            return;
        }
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

/// The amount a session holds of each budget grant (`budget AMOUNT on
/// PARAM`): reserved by paused and running calls, or kept by calls that
/// succeeded or ended unknown. Zero amounts are not stored.
pub type Spent = BTreeMap<GrantId, Decimal>;

/// The ledger hash of a session whose unit counts hash to `root` and that
/// holds `spent` of its budgets: `root` itself when it holds nothing (so
/// policies without budgets keep their hashes), otherwise
/// `SHA-256("agenra-ledger-v2/held" ‖ root ‖ budgets_digest(spent))`.
pub fn hash_with_budgets(root: Hash, spent: &Spent) -> Hash {
    match budgets_digest(spent) {
        None => root,
        Some(digest) => combine(root, digest),
    }
}

/// `SHA-256("agenra-ledger-v2/budgets" ‖ n ‖ (grant ‖ amount)*)`, grants
/// ascending, numbers 8-byte big-endian, each amount 17 bytes (its
/// normalized mantissa, 16 bytes, and scale); `None` when nothing is held.
fn budgets_digest(spent: &Spent) -> Option<Hash> {
    if spent.is_empty() {
        return None;
    }
    let mut bytes = Vec::with_capacity(24 + 8 + 25 * spent.len());
    bytes.extend_from_slice(b"agenra-ledger-v2/budgets");
    bytes.extend_from_slice(&(spent.len() as u64).to_be_bytes());
    for (&g, amount) in spent {
        bytes.extend_from_slice(&(g as u64).to_be_bytes());
        amount.encode(&mut bytes);
    }
    Some(Hash::of_bytes(&bytes))
}

/// The ledger hash of a session whose hash without windows is `h` and
/// that holds `windows` of renewing limits: `h` when it holds nothing,
/// otherwise `SHA-256("agenra-ledger-v2/held" ‖ h ‖ windows_digest)`, the
/// digest being `SHA-256("agenra-ledger-v2/windows" ‖ n ‖ (renewal ‖
/// window ‖ held)*)` (renewals ascending, numbers 8 bytes big-endian,
/// amounts 17 bytes).
pub fn hash_with_windows(h: Hash, windows: &crate::window::Windows) -> Hash {
    match windows_digest(windows) {
        None => h,
        Some(digest) => combine(h, digest),
    }
}

fn windows_digest(windows: &crate::window::Windows) -> Option<Hash> {
    if windows.is_empty() {
        return None;
    }
    let mut bytes = Vec::with_capacity(24 + 8 + 33 * windows.len());
    bytes.extend_from_slice(b"agenra-ledger-v2/windows");
    bytes.extend_from_slice(&(windows.len() as u64).to_be_bytes());
    for (&i, &(w, held)) in windows {
        bytes.extend_from_slice(&(i as u64).to_be_bytes());
        bytes.extend_from_slice(&w.to_be_bytes());
        held.encode(&mut bytes);
    }
    Some(Hash::of_bytes(&bytes))
}

fn combine(root: Hash, digest: Hash) -> Hash {
    let mut bytes = [0u8; 21 + 64];
    bytes[..21].copy_from_slice(b"agenra-ledger-v2/held");
    bytes[21..53].copy_from_slice(&root.0);
    bytes[53..].copy_from_slice(&digest.0);
    Hash::of_bytes(&bytes)
}

/// Grants per leaf block, and hashes per inner node, of the ledger's hash
/// tree.
pub const FAN_OUT: usize = 64;

/// One grant's entry in the hash: what is left of it, or, for a shared
/// grant, what this session holds of it.
#[derive(Clone, Copy)]
enum Count {
    Left(Quota),
    Held(u64),
}

impl Count {
    fn of(ledger: &Ledger, g: usize) -> Count {
        let q = ledger.remaining[g];
        match q {
            Quota::Limited(n) if ledger.is_shared(g) => Count::Held(n),
            _ => Count::Left(q),
        }
    }
}

/// 9 bytes per grant: a tag (0 limited, 1 unlimited, 2 shared: the units
/// this session holds) and the count.
fn encode(c: &Count, out: &mut Vec<u8>) {
    match c {
        Count::Left(Quota::Unlimited) => out.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0, 0]),
        Count::Left(Quota::Limited(n)) => {
            out.push(0);
            out.extend_from_slice(&n.to_be_bytes());
        }
        Count::Held(n) => {
            out.push(2);
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
    /// For a flat ledger (`n <= FAN_OUT`), the bytes its hash is taken of
    /// (`flat_bytes`): a session patches the counts it changed into a copy
    /// instead of encoding every grant again.
    flat: Vec<u8>,
    root: Hash,
}

impl LedgerTree {
    /// The tree of `ledger`, hashed from scratch.
    pub fn new(ledger: &Ledger) -> LedgerTree {
        let n = ledger.remaining.len();
        let mut tree = LedgerTree {
            n,
            levels: Vec::new(),
            flat: Vec::new(),
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
        if tree.levels.is_empty() {
            tree.flat = flat_bytes(n, |g| Count::of(ledger, g));
            tree.root = Hash::of_bytes(&tree.flat);
        } else {
            tree.root = tree.compute_root(ledger);
        }
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
        let top = self.levels.last().and_then(|top| top.first()).copied();
        root_of(self.n, top, |g| Count::of(ledger, g))
    }
}

fn leaf_block(ledger: &Ledger, b: usize) -> Hash {
    leaf_block_of(b, ledger.remaining.len(), |g| Count::of(ledger, g))
}

/// Leaf block `b` of a ledger of `n` grants whose counts `count` gives.
fn leaf_block_of(b: usize, n: usize, count: impl Fn(usize) -> Count) -> Hash {
    let grants = b * FAN_OUT..((b + 1) * FAN_OUT).min(n);
    let mut bytes = Vec::with_capacity(23 + 8 + 9 * grants.len());
    bytes.extend_from_slice(b"agenra-ledger-v2/leaves");
    bytes.extend_from_slice(&(b as u64).to_be_bytes());
    grants.for_each(|g| encode(&count(g), &mut bytes));
    Hash::of_bytes(&bytes)
}

fn inner_node(k: u64, j: usize, below: &[Hash]) -> Hash {
    inner_node_of(k, j, below.len(), |i| below[i])
}

/// Node `j` of level `k` over the `below` hashes of level `k - 1` that
/// `child` gives.
fn inner_node_of(k: u64, j: usize, below: usize, child: impl Fn(usize) -> Hash) -> Hash {
    let children = j * FAN_OUT..((j + 1) * FAN_OUT).min(below);
    let mut bytes = Vec::with_capacity(22 + 16 + 32 * children.len());
    bytes.extend_from_slice(b"agenra-ledger-v2/nodes");
    bytes.extend_from_slice(&k.to_be_bytes());
    bytes.extend_from_slice(&(j as u64).to_be_bytes());
    children.for_each(|i| bytes.extend_from_slice(&child(i).0));
    Hash::of_bytes(&bytes)
}

/// The ledger hash of `n` counts from `count` (flat form, `n <= FAN_OUT`)
/// or from the tree's top hash.
fn root_of(n: usize, top: Option<Hash>, count: impl Fn(usize) -> Count) -> Hash {
    match top {
        Some(top) => {
            let mut bytes = Vec::with_capacity(16 + 8 + 32);
            bytes.extend_from_slice(FLAT_PREFIX);
            bytes.extend_from_slice(&(n as u64).to_be_bytes());
            bytes.extend_from_slice(&top.0);
            Hash::of_bytes(&bytes)
        }
        None => Hash::of_bytes(&flat_bytes(n, count)),
    }
}

/// The ledger hash's prefix (then the grant count, then the counts or the
/// tree's top hash).
const FLAT_PREFIX: &[u8; 16] = b"agenra-ledger-v2";

/// Where grant `g`'s 9 bytes start in `flat_bytes`.
const fn flat_offset(g: usize) -> usize {
    FLAT_PREFIX.len() + 8 + 9 * g
}

/// What a flat ledger's hash is taken of: `"agenra-ledger-v2" ‖ n ‖ counts`.
fn flat_bytes(n: usize, count: impl Fn(usize) -> Count) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(flat_offset(n));
    bytes.extend_from_slice(FLAT_PREFIX);
    bytes.extend_from_slice(&(n as u64).to_be_bytes());
    (0..n).for_each(|g| encode(&count(g), &mut bytes));
    bytes
}

/// One session's ledger: the policy's initial ledger and hash tree, shared
/// by every session, and only what this session changed — the counts of
/// the limited grants it took or returned units of, and the tree hashes
/// above them. A session's memory therefore grows with the grants it
/// touches, never with the size of the policy, and its hash is the same
/// [`Ledger::hash`] of the whole ledger (`docs/semantics.md`, "The ledger
/// hash").
#[derive(Clone, Debug)]
pub struct SessionLedger {
    base: Arc<Ledger>,
    base_tree: Arc<LedgerTree>,
    /// Counts that differ from `base` (limited grants only).
    counts: BTreeMap<GrantId, u64>,
    /// Tree hashes that differ from `base_tree`: (level, index) → hash.
    hashes: BTreeMap<(usize, usize), Hash>,
    root: Hash,
    /// What this session holds of each budget (empty without budgets).
    spent: Spent,
    /// `budgets_digest(spent)`, kept up to date as amounts change.
    budgets: Option<Hash>,
    /// What this session holds of renewing limits (empty without them).
    windows: crate::window::Windows,
    /// `windows_digest(windows)`, kept up to date.
    windows_hash: Option<Hash>,
}

impl SessionLedger {
    /// A ledger equal to `base`, whose tree `base_tree` must be.
    pub fn new(base: Arc<Ledger>, base_tree: Arc<LedgerTree>) -> SessionLedger {
        let root = base_tree.root();
        SessionLedger {
            base,
            base_tree,
            counts: BTreeMap::new(),
            hashes: BTreeMap::new(),
            root,
            spent: Spent::new(),
            budgets: None,
            windows: crate::window::Windows::new(),
            windows_hash: None,
        }
    }

    /// What this session holds of renewing limit `i` (window, held).
    pub fn window(&self, i: usize) -> Option<(u64, Decimal)> {
        self.windows.get(&i).copied()
    }

    /// What this session holds of every renewing limit.
    pub fn windows(&self) -> &crate::window::Windows {
        &self.windows
    }

    /// Holds what a call was lent (the caller checked it fits).
    pub fn window_hold(&mut self, lent: &[(usize, u64, Decimal)]) {
        if lent.is_empty() {
            return;
        }
        crate::window::hold(&mut self.windows, lent);
        self.windows_hash = windows_digest(&self.windows);
    }

    /// Gives back what a call was lent, to the windows that lent it;
    /// answers how much came off each entry.
    pub fn window_release(&mut self, lent: &[(usize, u64, Decimal)]) -> Vec<Decimal> {
        if lent.is_empty() {
            return Vec::new();
        }
        let back = crate::window::release(&mut self.windows, lent);
        self.windows_hash = windows_digest(&self.windows);
        back
    }

    /// The amount this session holds of grant `g`'s budget (0 for none).
    pub fn spent(&self, g: GrantId) -> Decimal {
        self.spent.get(&g).copied().unwrap_or_default()
    }

    /// What this session holds of every budget.
    pub fn spent_all(&self) -> &Spent {
        &self.spent
    }

    /// Adds `amount` to what this session holds of `g`'s budget (the
    /// caller checked it fits the budget).
    pub fn add_spent(&mut self, g: GrantId, amount: Decimal) {
        let held = self.spent(g);
        self.set_spent(g, held.checked_add(amount).unwrap_or(held));
    }

    /// Takes `amount` off what this session holds of `g`'s budget, never
    /// below zero; answers how much was taken off.
    pub fn remove_spent(&mut self, g: GrantId, amount: Decimal) -> Decimal {
        let held = self.spent(g);
        let back = amount.min(held);
        self.set_spent(g, held.saturating_sub(back));
        back
    }

    fn set_spent(&mut self, g: GrantId, amount: Decimal) {
        if amount <= Decimal::default() {
            self.spent.remove(&g);
        } else {
            self.spent.insert(g, amount);
        }
        self.budgets = budgets_digest(&self.spent);
    }

    /// How many grants the ledger has.
    pub fn len(&self) -> usize {
        self.base.remaining.len()
    }

    /// Whether the policy has no grants.
    pub fn is_empty(&self) -> bool {
        self.base.remaining.is_empty()
    }

    /// What is left of grant `g` (`None` for an unknown index).
    pub fn remaining(&self, g: GrantId) -> Option<Quota> {
        match self.counts.get(&g) {
            Some(&n) => Some(Quota::Limited(n)),
            None => self.base.remaining.get(g).copied(),
        }
    }

    /// Whether grant `g` has a unit left (always, when unlimited; never, for
    /// an unknown index or a shared grant, whose pool decides).
    pub fn has_quota(&self, g: GrantId) -> bool {
        !self.base.is_shared(g) && self.remaining(g).is_some_and(|q| q.is_available())
    }

    /// Whether `g` is a shared grant (its entry counts the units held).
    pub fn is_shared(&self, g: GrantId) -> bool {
        self.base.is_shared(g)
    }

    /// Units this session holds of shared grant `g` (0 for any other).
    pub fn held(&self, g: GrantId) -> u64 {
        match self.remaining(g) {
            Some(Quota::Limited(n)) if self.base.is_shared(g) => n,
            _ => 0,
        }
    }

    /// Whether taking a unit of `g` changes the ledger (limited grants only).
    pub fn is_limited(&self, g: GrantId) -> bool {
        matches!(self.remaining(g), Some(Quota::Limited(_)))
    }

    /// Takes one unit of `g`; false (and no change) when none is left. For
    /// a shared grant, the session now holds one more unit (the caller
    /// takes it from the pool).
    pub fn consume(&mut self, g: GrantId) -> bool {
        match self.remaining(g) {
            Some(Quota::Unlimited) => true,
            Some(Quota::Limited(n)) if self.base.is_shared(g) => {
                self.set(g, n.saturating_add(1));
                true
            }
            Some(Quota::Limited(n)) if n > 0 => {
                self.set(g, n - 1);
                true
            }
            _ => false,
        }
    }

    /// Returns one unit of `g`, never beyond the grant's quota in `policy`.
    /// For a shared grant, the session holds one unit less (never below
    /// zero; the caller gives it back to the pool).
    pub fn refund(&mut self, policy: &Policy, g: GrantId) {
        if self.base.is_shared(g) {
            let held = self.held(g);
            if held > 0 {
                self.set(g, held - 1);
            }
            return;
        }
        let cap = policy.grants.get(g).map(|gr| gr.quota);
        if let (Some(Quota::Limited(n)), Some(Quota::Limited(cap))) = (self.remaining(g), cap) {
            if n < cap {
                self.set(g, n + 1);
            }
        }
    }

    /// The ledger hash, kept up to date as units are taken and returned
    /// (with the amounts held of budgets, when any are: `hash_with_budgets`).
    pub fn hash(&self) -> Hash {
        let h = match self.budgets {
            None => self.root,
            Some(digest) => combine(self.root, digest),
        };
        match self.windows_hash {
            None => h,
            Some(digest) => combine(h, digest),
        }
    }

    /// The whole ledger (`O(grants)`: for comparisons and reports).
    pub fn to_ledger(&self) -> Ledger {
        Ledger {
            remaining: (0..self.len())
                .map(|g| self.remaining(g).unwrap_or(Quota::Limited(0)))
                .collect(),
            shared: self.base.shared.clone(),
        }
    }

    /// Sets a limited grant's count and rehashes the block above it and its
    /// ancestors.
    fn set(&mut self, g: GrantId, n: u64) {
        self.counts.insert(g, n);
        // Checked once: policies without shared grants pay nothing per grant.
        let any_shared = !self.base.shared.is_empty();
        let count = |i: usize| match self.remaining(i).unwrap_or(Quota::Limited(0)) {
            Quota::Limited(n) if any_shared && self.base.is_shared(i) => Count::Held(n),
            q => Count::Left(q),
        };
        let len = self.len();
        let levels = &self.base_tree.levels;
        if levels.is_empty() {
            self.root = self.flat_root();
            return;
        }
        let mut index = g / FAN_OUT;
        let mut changed = vec![((0, index), leaf_block_of(index, len, count))];
        for k in 1..levels.len() {
            let below = levels[k - 1].len();
            let child = |i: usize| {
                if let Some(&((level, at), h)) = changed.last() {
                    if level == k - 1 && at == i {
                        return h;
                    }
                }
                self.hashes
                    .get(&(k - 1, i))
                    .copied()
                    .unwrap_or(levels[k - 1][i])
            };
            index /= FAN_OUT;
            let node = inner_node_of(k as u64, index, below, child);
            changed.push(((k, index), node));
        }
        let top = changed.last().map(|&(_, h)| h);
        self.root = root_of(len, top, |_| Count::Left(Quota::Unlimited));
        self.hashes.extend(changed);
    }
}

impl SessionLedger {
    /// The hash of a flat ledger (`n <= FAN_OUT`): the shared encoding of
    /// the initial counts, with the counts this session changed written
    /// over theirs. The same bytes as `flat_bytes` of the whole ledger: a
    /// changed count is a limited (or shared) grant's, whose tag is the
    /// initial one.
    fn flat_root(&self) -> Hash {
        let base = &self.base_tree.flat;
        let mut buf = [0u8; flat_offset(FAN_OUT)];
        let Some(bytes) = buf.get_mut(..base.len()) else {
            return root_of(self.len(), None, |g| self.count(g));
        };
        bytes.copy_from_slice(base);
        for (&g, &n) in &self.counts {
            let at = flat_offset(g) + 1;
            match bytes.get_mut(at..at + 8) {
                Some(slot) => slot.copy_from_slice(&n.to_be_bytes()),
                None => return root_of(self.len(), None, |g| self.count(g)),
            }
        }
        Hash::of_bytes(bytes)
    }

    /// Grant `g`'s entry in the hash.
    fn count(&self, g: GrantId) -> Count {
        match self.remaining(g).unwrap_or(Quota::Limited(0)) {
            Quota::Limited(n) if self.base.is_shared(g) => Count::Held(n),
            q => Count::Left(q),
        }
    }
}

impl PartialEq for SessionLedger {
    /// Two session ledgers are equal when every grant has the same count
    /// and the same amount held of its budget.
    fn eq(&self, other: &SessionLedger) -> bool {
        self.len() == other.len()
            && self.spent == other.spent
            && (0..self.len()).all(|g| self.remaining(g) == other.remaining(g))
    }
}

impl Eq for SessionLedger {}

/// What a session changed of its ledger, as a snapshot stores it: the
/// counts, the amounts held of budgets and renewing limits. The hash tree
/// is not stored: [`SessionLedger::restore`] rehashes it from the counts.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct LedgerParts {
    counts: BTreeMap<GrantId, u64>,
    spent: Spent,
    windows: crate::window::Windows,
}

/// Why stored ledger parts do not fit a policy's ledger.
#[derive(Debug, thiserror::Error)]
#[error("grant {grant} is not a limited grant of the policy's {len} grants")]
pub struct PartsError {
    /// The grant named.
    pub grant: GrantId,
    /// How many grants the policy has.
    pub len: usize,
}

impl SessionLedger {
    /// What this session changed (see [`LedgerParts`]).
    pub fn parts(&self) -> LedgerParts {
        LedgerParts {
            counts: self.counts.clone(),
            spent: self.spent.clone(),
            windows: self.windows.clone(),
        }
    }

    /// The ledger `base` becomes with `parts`: every count set (and its
    /// tree path rehashed) as the session once set it. A count of a grant
    /// that is not a limited grant of the policy is refused.
    pub fn restore(
        base: Arc<Ledger>,
        base_tree: Arc<LedgerTree>,
        parts: LedgerParts,
    ) -> Result<SessionLedger, PartsError> {
        let mut ledger = SessionLedger::new(base, base_tree);
        let len = ledger.len();
        let bad_count = parts.counts.keys().find(|&&g| !ledger.is_limited(g));
        let bad_spent = parts.spent.keys().find(|&&g| g >= len);
        if let Some(&grant) = bad_count.or(bad_spent) {
            return Err(PartsError { grant, len });
        }
        for (g, n) in parts.counts {
            ledger.set(g, n);
        }
        for (g, amount) in parts.spent {
            ledger.set_spent(g, amount);
        }
        ledger.windows = parts.windows;
        ledger.windows_hash = windows_digest(&ledger.windows);
        Ok(ledger)
    }
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
            shared: vec![],
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
    fn a_session_ledger_hashes_like_the_whole_ledger_and_stores_only_its_changes() {
        for n in [0, 1, 3, 64, 65, 130, 4096, 4097, 10_000] {
            let base = ledger(n);
            let mut policy = crate::policy::Policy::empty("p");
            for q in &base.remaining {
                policy.grants.push(crate::policy::Grant {
                    name: "g".into(),
                    agent: 0,
                    tool: 0,
                    resource: None,
                    args: vec![],
                    quota: *q,
                    approval: false,
                    expires_at: None,
                    discovers: None,
                });
            }
            let tree = Arc::new(LedgerTree::new(&base));
            let mut session = SessionLedger::new(Arc::new(base.clone()), tree);
            let mut plain = base.clone();
            assert_eq!(session.hash(), plain.hash(), "n = {n}");
            assert_eq!((session.len(), session.is_empty()), (n, n == 0));
            if n > 1 {
                // Grant 0 is unlimited, grant 1 has one unit (`ledger`).
                assert!(!session.is_limited(0) && session.is_limited(1));
                let mut fresh = session.clone();
                fresh.refund(&policy, 1);
                assert_eq!(
                    fresh.remaining(1),
                    Some(Quota::Limited(1)),
                    "never above the quota"
                );
                assert!(fresh.consume(1));
                assert!(!fresh.consume(1), "nothing left");
                assert_eq!(fresh.remaining(1), Some(Quota::Limited(0)));
            }
            let touched = [1, n / 2, n.saturating_sub(1), 63, 64, 65, 4095, 4096, 9_999];
            for (step, &g) in touched.iter().enumerate() {
                if g >= n {
                    continue;
                }
                assert_eq!(session.consume(g), plain.consume(g), "n = {n}, g = {g}");
                assert_eq!(session.hash(), plain.hash(), "consume: n = {n}, g = {g}");
                if step % 2 == 0 {
                    session.refund(&policy, g);
                    plain.refund(&policy, g);
                    assert_eq!(session.hash(), plain.hash(), "refund: n = {n}, g = {g}");
                }
                assert_eq!(session.remaining(g), plain.remaining.get(g).copied());
                assert_eq!(session.has_quota(g), plain.has_quota(g));
            }
            assert_eq!(session.to_ledger(), plain);
            assert!(
                session.counts.len() <= touched.len(),
                "only touched counts are stored"
            );
            assert!(session.hashes.len() <= 3 * touched.len());
            assert_eq!(session.remaining(n), None);
            assert!(!session.consume(n), "no such grant");
        }
    }

    #[test]
    fn amounts_held_are_committed_to_and_only_when_held() {
        let d = |s: &str| s.parse::<Decimal>().unwrap();
        let base = ledger(3);
        let tree = Arc::new(LedgerTree::new(&base));
        let mut s = SessionLedger::new(Arc::new(base.clone()), tree);
        let plain = s.hash();
        assert_eq!(plain, base.hash(), "nothing held: the hash of the counts");
        s.add_spent(1, d("10.5"));
        let held = s.hash();
        assert_ne!(held, plain);
        assert_eq!(held, hash_with_budgets(base.hash(), s.spent_all()));
        let mut other = s.clone();
        other.add_spent(1, d("0.01"));
        assert_ne!(other.hash(), held, "the amount is committed to");
        assert_ne!(other, s);
        assert_eq!(other.remove_spent(1, d("0.01")), d("0.01"));
        assert_eq!(other.hash(), held);
        let mut moved =
            SessionLedger::new(Arc::new(base.clone()), Arc::new(LedgerTree::new(&base)));
        moved.add_spent(2, d("10.5"));
        assert_ne!(moved.hash(), held, "the grant is committed to");
        assert_eq!(s.remove_spent(1, d("100")), d("10.5"), "never below zero");
        assert_eq!(s.spent(1), d("0"));
        assert_eq!(s.hash(), plain, "nothing held again");
    }

    #[test]
    fn only_a_limited_grant_is_limited() {
        let l = ledger(3);
        // Grant 0 is unlimited, grants 1 and 2 limited (`ledger`).
        assert!(!l.is_limited(0));
        assert!(l.is_limited(1) && l.is_limited(2));
        assert!(!l.is_limited(3), "no such grant");
    }

    #[test]
    fn only_a_shared_grant_counts_units_held() {
        // Grant 2 is shared; grants 1 (limited) and 0 (unlimited) are not.
        let mut l = ledger(3);
        l.shared = vec![2];
        assert_eq!(l.held(2), 2);
        assert!(l.consume(2), "a shared grant's pool decides");
        assert_eq!(l.held(2), 3);
        assert_eq!((l.held(0), l.held(1), l.held(3)), (0, 0, 0));
    }

    #[test]
    fn a_session_ledger_counts_units_held_of_shared_grants_only() {
        // Grant 2 is shared, held at 0; grants 1 (limited) and 0 (unlimited) are not.
        let mut policy = crate::policy::Policy::empty("p");
        for q in [Quota::Unlimited, Quota::Limited(1), Quota::Limited(5)] {
            policy.grants.push(crate::policy::Grant {
                name: format!("g{}", policy.grants.len()),
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
        policy.shared_grants = vec![2];
        let base = Ledger::initial(&policy);
        let tree = Arc::new(LedgerTree::new(&base));
        let mut s = SessionLedger::new(Arc::new(base), tree);
        assert!(s.is_shared(2));
        assert!(!s.is_shared(0) && !s.is_shared(1) && !s.is_shared(3));
        assert_eq!((s.held(0), s.held(1), s.held(2), s.held(3)), (0, 0, 0, 0));
        // Returning a unit of a shared grant the session holds none of
        // changes nothing.
        s.refund(&policy, 2);
        assert_eq!(s.held(2), 0);
        assert_eq!(s.remaining(2), Some(Quota::Limited(0)));
        assert!(s.consume(2) && s.consume(2));
        assert_eq!(s.held(2), 2);
        s.refund(&policy, 2);
        assert_eq!(s.held(2), 1);
        assert_eq!(s.hash(), s.to_ledger().hash());
    }

    #[test]
    fn a_large_session_ledger_hashes_shared_grants_as_held() {
        // 130 grants (a tree): grant 66 shared, its block's others limited
        // or unlimited (`ledger`).
        let mut base = ledger(130);
        base.shared = vec![66];
        base.remaining[66] = Quota::Limited(0);
        let mut policy = crate::policy::Policy::empty("p");
        for (i, q) in ledger(130).remaining.into_iter().enumerate() {
            policy.grants.push(crate::policy::Grant {
                name: format!("g{i}"),
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
        policy.shared_grants = vec![66];
        let tree = Arc::new(LedgerTree::new(&base));
        let mut s = SessionLedger::new(Arc::new(base.clone()), tree);
        let mut plain = base;
        for g in [66, 67, 66, 1] {
            assert_eq!(s.consume(g), plain.consume(g));
            assert_eq!(s.hash(), plain.hash(), "consume {g}");
        }
        s.refund(&policy, 66);
        plain.refund(&policy, 66);
        assert_eq!(s.hash(), plain.hash(), "refund");
        assert_eq!(s.to_ledger(), plain);
    }

    #[test]
    fn session_ledgers_are_equal_when_every_count_is() {
        let session = |n: usize| {
            let base = ledger(n);
            let tree = Arc::new(LedgerTree::new(&base));
            SessionLedger::new(Arc::new(base), tree)
        };
        let a = session(3);
        let mut b = session(3);
        assert_eq!(a, b);
        assert!(b.consume(1));
        assert_ne!(a, b, "grant 1's count differs");
        assert_ne!(session(3), session(4), "lengths differ");
        assert_ne!(session(4), session(3), "lengths differ");
    }

    #[test]
    fn updating_a_tree_for_a_ledger_of_another_length_rehashes_it() {
        for (from, to) in [(130, 200), (200, 130), (4097, 130), (65, 3)] {
            let mut tree = LedgerTree::new(&ledger(from));
            let l = ledger(to);
            tree.update(&l, 1);
            assert_eq!(tree.root(), l.hash(), "{from} -> {to} grants");
            assert_eq!(tree, LedgerTree::new(&l), "{from} -> {to} grants");
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
