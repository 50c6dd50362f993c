//! Compact per-session tables, for sessions of millions of calls:
//!
//! * [`CallIds`]: call and task ids, interned in one text buffer and found
//!   through an open-addressing table of 8-byte buckets (std's `HashMap`
//!   keeps a `String` per id: 24 bytes in the bucket plus a heap block);
//! * [`NodeTable`]: the units paused and running calls hold, in a vector
//!   sorted by node id (calls are appended in id order) instead of a hash
//!   map;
//! * [`GrantList`]: the grants of one held call, inline for the usual one.
//!
//! They answer exactly what the maps they replace answered; only the
//! memory layout differs (the tests below compare them with std's maps).

use crate::graph::NodeId;
use crate::policy::GrantId;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

/// A bucket's slot index when the bucket is empty.
const EMPTY: u32 = u32::MAX;

/// Where one id's text is, and its node. `len == DEAD` marks a removed id
/// (until the next rebuild).
#[derive(Clone, Copy, Debug)]
struct Slot {
    start: usize,
    len: u32,
    node: NodeId,
}

const DEAD: u32 = u32::MAX;

/// An id's hash under one table's key ([`CallIds::hash_id`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IdHash(u32);

/// Call and task ids of a session and their nodes: a map from `String` to
/// [`NodeId`] with the methods the monitor uses. Ids come from the agent's
/// runtime, so they are hashed with std's keyed SipHash (crafted ids cannot
/// collide on purpose).
#[derive(Clone, Default)]
pub(crate) struct CallIds {
    hasher: RandomState,
    /// Linear probing. Per bucket: the index of its slot (`EMPTY`: none)
    /// and the low 32 bits of the id's hash (which place it, and filter
    /// comparisons). The length is 0 or a power of two.
    table: Vec<(u32, u32)>,
    /// Ids in insertion order.
    slots: Vec<Slot>,
    /// The ids' text, one after another.
    text: String,
    /// Live ids.
    live: usize,
    /// Whether the slots' nodes strictly increase (the monitor appends
    /// calls in node order): then a node's id is found by bisection.
    unsorted: bool,
}

impl std::fmt::Debug for CallIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl CallIds {
    fn hash(&self, id: &str) -> u32 {
        // The low bits place the id; fold the high half in so that all
        // 64 bits count.
        let h = self.hasher.hash_one(id);
        (h ^ (h >> 32)) as u32
    }

    fn text_of(&self, slot: &Slot) -> &str {
        &self.text[slot.start..slot.start + slot.len as usize]
    }

    /// The bucket holding `id`, if it is there.
    fn find(&self, id: &str) -> Option<usize> {
        if self.table.is_empty() {
            return None;
        }
        self.find_hashed(id, self.hash(id))
    }

    /// [`CallIds::find`] with the id's hash already computed.
    fn find_hashed(&self, id: &str, hash: u32) -> Option<usize> {
        if self.table.is_empty() {
            return None;
        }
        let mask = self.table.len() - 1;
        let mut i = hash as usize & mask;
        loop {
            let (slot, h) = self.table[i];
            if slot == EMPTY {
                return None;
            }
            if h == hash && self.text_of(&self.slots[slot as usize]) == id {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// How many ids are stored.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether no id is stored.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The node of `id`.
    pub fn get(&self, id: &str) -> Option<&NodeId> {
        let b = self.find(id)?;
        Some(&self.slots[self.table[b].0 as usize].node)
    }

    /// Whether `id` is stored.
    pub fn contains_key(&self, id: &str) -> bool {
        self.find(id).is_some()
    }

    /// The hash of `id`, for [`CallIds::contains_hashed`] and
    /// [`CallIds::insert_hashed`]: an id checked and then stored is hashed
    /// once. (It stays valid while the table lives: rebuilding keeps the
    /// hasher.)
    pub fn hash_id(&self, id: &str) -> IdHash {
        IdHash(self.hash(id))
    }

    /// [`CallIds::contains_key`] with the hash of `id` (from
    /// [`CallIds::hash_id`] of this table).
    pub fn contains_hashed(&self, id: &str, hash: IdHash) -> bool {
        self.find_hashed(id, hash.0).is_some()
    }

    /// Stores `id` with `node`; the node it had before, if any.
    pub fn insert(&mut self, id: impl AsRef<str>, node: NodeId) -> Option<NodeId> {
        let id = id.as_ref();
        self.insert_hashed(id, IdHash(self.hash(id)), node)
    }

    /// [`CallIds::insert`] with the hash of `id` (from [`CallIds::hash_id`]
    /// of this table).
    pub fn insert_hashed(&mut self, id: &str, hash: IdHash, node: NodeId) -> Option<NodeId> {
        let hash = hash.0;
        if let Some(b) = self.find_hashed(id, hash) {
            let slot = &mut self.slots[self.table[b].0 as usize];
            self.unsorted = true;
            return Some(std::mem::replace(&mut slot.node, node));
        }
        // At most 3/4 full (linear probing stays short).
        if (self.live + 1) * 4 > self.table.len() * 3 {
            self.rebuild((self.live + 1) * 2);
        }
        let len = u32::try_from(id.len())
            .ok()
            .filter(|&l| l != DEAD)
            .expect("a call id shorter than 4 GB");
        let index = u32::try_from(self.slots.len())
            .ok()
            .filter(|&s| s != EMPTY)
            .expect("fewer than 2^32 ids");
        if self.slots.last().is_some_and(|s| s.node >= node) {
            self.unsorted = true;
        }
        self.slots.push(Slot {
            start: self.text.len(),
            len,
            node,
        });
        self.text.push_str(id);
        self.place(index, hash);
        self.live += 1;
        None
    }

    /// Puts slot `index` into the first free bucket from its hash on.
    fn place(&mut self, index: u32, hash: u32) {
        let mask = self.table.len() - 1;
        let mut i = hash as usize & mask;
        while self.table[i].0 != EMPTY {
            i = (i + 1) & mask;
        }
        self.table[i] = (index, hash);
    }

    /// Removes `id`; its node, if it was there.
    pub fn remove(&mut self, id: &str) -> Option<NodeId> {
        let b = self.find(id)?;
        let index = self.table[b].0 as usize;
        let node = self.slots[index].node;
        self.slots[index].len = DEAD;
        self.live -= 1;
        // Backward-shift deletion: later entries of the probe run move up
        // into the hole when it lies between their home bucket and them.
        let mask = self.table.len() - 1;
        let mut hole = b;
        let mut j = b;
        loop {
            j = (j + 1) & mask;
            let (slot, hash) = self.table[j];
            if slot == EMPTY {
                break;
            }
            let home = hash as usize & mask;
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.table[hole] = self.table[j];
                hole = j;
            }
        }
        self.table[hole] = (EMPTY, 0);
        // The usual removal undoes the latest insertion: drop its text.
        while self.slots.last().is_some_and(|s| s.len == DEAD) {
            let s = self.slots.pop().expect("a last slot");
            self.text.truncate(s.start);
        }
        if self.slots.len() > 2 * self.live + 64 {
            self.rebuild(self.live * 2);
        }
        Some(node)
    }

    /// Keeps the ids for which `keep` holds (it may change their nodes);
    /// the storage is rebuilt to fit what is kept.
    pub fn retain(&mut self, mut keep: impl FnMut(&str, &mut NodeId) -> bool) {
        let mut text = String::new();
        let mut slots = Vec::new();
        for s in &self.slots {
            if s.len == DEAD {
                continue;
            }
            let mut node = s.node;
            let id = self.text_of(s);
            if keep(id, &mut node) {
                slots.push(Slot {
                    start: text.len(),
                    len: s.len,
                    node,
                });
                text.push_str(id);
            }
        }
        self.live = slots.len();
        self.unsorted = slots.windows(2).any(|w| w[0].node >= w[1].node);
        self.slots = slots;
        self.text = text;
        self.rebuild(self.live * 2);
    }

    /// Rebuilds the table with at least `want` buckets (and room for the
    /// live ids), dropping removed slots and their text.
    fn rebuild(&mut self, want: usize) {
        if self.slots.len() != self.live {
            let mut text = String::with_capacity(self.text.len());
            let mut slots = Vec::with_capacity(self.live);
            for s in &self.slots {
                if s.len != DEAD {
                    slots.push(Slot {
                        start: text.len(),
                        ..*s
                    });
                    text.push_str(self.text_of(s));
                }
            }
            self.slots = slots;
            self.text = text;
        }
        let mut buckets = 16;
        while buckets < want || self.live * 4 >= buckets * 3 {
            buckets *= 2;
        }
        self.table = vec![(EMPTY, 0); buckets];
        for index in 0..self.slots.len() {
            let hash = self.hash(self.text_of(&self.slots[index]));
            self.place(index as u32, hash);
        }
    }

    /// The id stored with `node` (the first, if several are).
    pub fn id_of(&self, node: NodeId) -> Option<&str> {
        if self.unsorted {
            return self.iter().find(|(_, n)| **n == node).map(|(id, _)| id);
        }
        let i = self.slots.partition_point(|s| s.node < node);
        self.slots
            .get(i)
            .filter(|s| s.node == node && s.len != DEAD)
            .map(|s| self.text_of(s))
    }

    /// Every id with its node, in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &NodeId)> {
        self.slots
            .iter()
            .filter(|s| s.len != DEAD)
            .map(|s| (self.text_of(s), &s.node))
    }
}

/// Values per node id (the units held by paused and running calls): a
/// vector sorted by node id. Calls are appended in id order, so an insert
/// is a push; a removal leaves a hole, and the holes are squeezed out once
/// they outnumber the values.
#[derive(Clone, Debug)]
pub(crate) struct NodeTable<V> {
    entries: Vec<(NodeId, Option<V>)>,
    live: usize,
}

impl<V> Default for NodeTable<V> {
    fn default() -> Self {
        NodeTable {
            entries: Vec::new(),
            live: 0,
        }
    }
}

impl<V> NodeTable<V> {
    fn search(&self, node: NodeId) -> Result<usize, usize> {
        // The usual lookups are of recent calls: check the end first.
        match self.entries.last() {
            Some((last, _)) if *last < node => Err(self.entries.len()),
            _ => self.entries.binary_search_by_key(&node, |e| e.0),
        }
    }

    /// How many values are stored.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether no value is stored.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The value of `node`.
    pub fn get(&self, node: &NodeId) -> Option<&V> {
        let i = self.search(*node).ok()?;
        self.entries[i].1.as_ref()
    }

    /// The value of `node`, mutably.
    pub fn get_mut(&mut self, node: &NodeId) -> Option<&mut V> {
        let i = self.search(*node).ok()?;
        self.entries[i].1.as_mut()
    }

    /// Stores `value` for `node`; the value it had before, if any.
    pub fn insert(&mut self, node: NodeId, value: V) -> Option<V> {
        match self.search(node) {
            Ok(i) => {
                let old = self.entries[i].1.replace(value);
                if old.is_none() {
                    self.live += 1;
                }
                old
            }
            Err(i) => {
                self.entries.insert(i, (node, Some(value)));
                self.live += 1;
                None
            }
        }
    }

    /// Removes the value of `node`, and returns it.
    pub fn remove(&mut self, node: &NodeId) -> Option<V> {
        let i = self.search(*node).ok()?;
        let old = self.entries[i].1.take()?;
        self.live -= 1;
        while self.entries.last().is_some_and(|e| e.1.is_none()) {
            self.entries.pop();
        }
        if self.entries.len() > 2 * self.live + 64 {
            self.entries.retain(|e| e.1.is_some());
            if self.entries.capacity() > 4 * self.entries.len() + 64 {
                self.entries.shrink_to(2 * self.entries.len());
            }
        }
        Some(old)
    }

    /// Every stored value, in node order.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.entries.iter().filter_map(|e| e.1.as_ref())
    }
}

/// The grants a paused or running call holds units of: a slice, stored
/// inline when it is one grant (the usual case) instead of in a heap block.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum GrantList {
    /// No grant.
    #[default]
    Empty,
    /// One grant.
    One([GrantId; 1]),
    /// Several grants, in order (boxed twice: one word here, so that a
    /// list is two words).
    Many(Box<Box<[GrantId]>>),
}

impl std::ops::Deref for GrantList {
    type Target = [GrantId];
    fn deref(&self) -> &[GrantId] {
        match self {
            GrantList::Empty => &[],
            GrantList::One(g) => g,
            GrantList::Many(g) => g,
        }
    }
}

impl From<&[GrantId]> for GrantList {
    fn from(grants: &[GrantId]) -> GrantList {
        match grants {
            [] => GrantList::Empty,
            [g] => GrantList::One([*g]),
            many => GrantList::Many(Box::new(many.into())),
        }
    }
}

// Snapshots (`monitor::snapshot`) store the tables by content: the ids in
// insertion order, the held values in node order. The hashing key and the
// table layout are rebuilt, so a restored table answers what the original
// did.

impl serde::Serialize for CallIds {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> serde::Deserialize<'de> for CallIds {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<CallIds, D::Error> {
        let ids = Vec::<(String, NodeId)>::deserialize(d)?;
        let mut table = CallIds::default();
        for (id, node) in ids {
            if table.insert(&id, node).is_some() {
                return Err(serde::de::Error::custom(format!("call id `{id}` twice")));
            }
        }
        Ok(table)
    }
}

impl<V: serde::Serialize> serde::Serialize for NodeTable<V> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(
            self.entries
                .iter()
                .filter_map(|(n, v)| v.as_ref().map(|v| (n, v))),
        )
    }
}

impl<'de, V: serde::Deserialize<'de>> serde::Deserialize<'de> for NodeTable<V> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<NodeTable<V>, D::Error> {
        let entries = Vec::<(NodeId, V)>::deserialize(d)?;
        if entries.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(serde::de::Error::custom("held calls out of node order"));
        }
        Ok(NodeTable {
            live: entries.len(),
            entries: entries.into_iter().map(|(n, v)| (n, Some(v))).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn a_grant_list_is_two_words_and_derefs_to_its_grants() {
        assert!(std::mem::size_of::<GrantList>() <= 16);
        for grants in [&[][..], &[3], &[1, 2, 3]] {
            let list = GrantList::from(grants);
            assert_eq!(&*list, grants);
            assert_eq!(list.to_vec(), grants.to_vec());
        }
        assert_eq!(GrantList::default().first(), None);
    }

    /// xorshift, for operation sequences.
    fn next(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    #[test]
    fn call_ids_answer_like_a_hash_map() {
        let mut x = 0x2545_f491_4f6c_dd1d;
        let mut ids = CallIds::default();
        let mut model: HashMap<String, NodeId> = HashMap::new();
        for step in 0..20_000u32 {
            // Few distinct ids, so that inserts hit, removals find, and
            // probe runs wrap around and shift.
            let id = format!("c{}", next(&mut x) % 700);
            match next(&mut x) % 10 {
                0..=4 => assert_eq!(
                    ids.insert(id.clone(), NodeId(step)),
                    model.insert(id.clone(), NodeId(step))
                ),
                5..=7 => assert_eq!(ids.remove(&id), model.remove(&id)),
                8 => {
                    let r = next(&mut x) % 5;
                    ids.retain(|_, n| n.0 % 5 != r as u32);
                    model.retain(|_, n| n.0 % 5 != r as u32);
                }
                _ => {
                    // Undo the latest insertion (a rollback).
                    let id = format!("new{step}");
                    assert_eq!(ids.insert(id.as_str(), NodeId(step)), None);
                    assert_eq!(ids.remove(&id), Some(NodeId(step)));
                }
            }
            assert_eq!(ids.len(), model.len());
            assert_eq!(ids.get(&id), model.get(&id));
            let n = NodeId((next(&mut x) % u64::from(step + 1)) as u32);
            let want: Vec<&str> = model
                .iter()
                .filter(|(_, v)| **v == n)
                .map(|(k, _)| k.as_str())
                .collect();
            assert_eq!(ids.id_of(n).into_iter().collect::<Vec<_>>(), want);
            assert_eq!(ids.contains_key(&id), model.contains_key(&id));
        }
        let mut all: Vec<(String, NodeId)> = ids.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        all.sort();
        let mut want: Vec<(String, NodeId)> = model.into_iter().collect();
        want.sort();
        assert_eq!(all, want);
        assert!(!ids.is_empty());
        assert!(CallIds::default().is_empty());
        assert!(CallIds::default().get("x").is_none());
        assert_eq!(format!("{:?}", CallIds::default()), "{}");
    }

    /// An id hashed once, checked and then stored with that hash, is found
    /// by its text afterwards, also after the table grows.
    #[test]
    fn ids_stored_by_their_hash_are_found_by_their_text() {
        let mut ids = CallIds::default();
        for n in 0..100u32 {
            let id = format!("c{n}");
            let h = ids.hash_id(&id);
            assert!(!ids.contains_hashed(&id, h));
            assert_eq!(ids.insert_hashed(&id, h, NodeId(n)), None);
            assert!(ids.contains_hashed(&id, h));
        }
        assert!((0..100u32).all(|n| ids.get(&format!("c{n}")) == Some(&NodeId(n))));
        assert!(!ids.contains_key("c100"));
    }

    #[test]
    fn ids_appended_in_node_order_are_found_by_node() {
        let mut ids = CallIds::default();
        for i in 0..100u32 {
            ids.insert(format!("c{i}"), NodeId(2 * i + 1));
        }
        ids.insert("gone", NodeId(500));
        ids.remove("gone");
        ids.insert("next", NodeId(500));
        ids.remove("c10");
        assert!(!ids.unsorted);
        assert_eq!(ids.id_of(NodeId(7)), Some("c3"));
        assert_eq!(ids.id_of(NodeId(500)), Some("next"));
        assert_eq!(ids.id_of(NodeId(21)), None, "removed");
        assert_eq!(ids.id_of(NodeId(8)), None);
        assert_eq!(ids.id_of(NodeId(501)), None);
        ids.retain(|_, n| n.0 % 3 != 0);
        assert!(!ids.unsorted);
        assert_eq!(ids.id_of(NodeId(9)), None);
        assert_eq!(ids.id_of(NodeId(11)), Some("c5"));
        // Out of order: found by a scan.
        ids.insert("early", NodeId(0));
        assert!(ids.unsorted);
        assert_eq!(ids.id_of(NodeId(0)), Some("early"));
        assert_eq!(ids.id_of(NodeId(11)), Some("c5"));
    }

    #[test]
    fn call_ids_keep_their_text_compact() {
        // Both parities: removals drop the live count by one while the
        // slots stay, so the garbage bound is crossed, not always met.
        for n in [1000u32, 1001] {
            let mut ids = CallIds::default();
            for i in 0..n {
                ids.insert(format!("id{i}"), NodeId(i));
            }
            let text = ids.text.len();
            ids.insert("tmp", NodeId(n));
            ids.remove("tmp");
            assert_eq!(ids.text.len(), text, "a rolled-back id leaves no text");
            for i in 0..900u32 {
                ids.remove(&format!("id{i}"));
                assert!(ids.slots.len() <= 2 * ids.len() + 64, "{n}: {i}");
            }
            assert_eq!(ids.get("id950"), Some(&NodeId(950)));
            assert!(ids.table.len() * 3 > ids.len() * 4);
        }
    }

    #[test]
    fn call_ids_grow_their_table_by_doubling_only() {
        let mut ids = CallIds::default();
        for i in 0..1000u32 {
            ids.insert(format!("id{i}"), NodeId(i));
            // At most 3/4 full, and at most 4 buckets (32 bytes) per id
            // past the first 16.
            assert!(ids.table.len() * 3 >= ids.len() * 4, "{i}");
            assert!(ids.table.len() <= (4 * ids.len()).max(16), "{i}");
        }
        assert_eq!(ids.table.len(), 2048);
    }

    #[test]
    fn ids_whose_hashes_collide_are_told_apart_by_their_text() {
        let mut ids = CallIds::default();
        ids.insert("a", NodeId(1));
        let h = ids.hash("a");
        let b = ids.find_hashed("a", h).expect("found");
        assert_eq!(ids.table[b].0, 0);
        // "b" probed with a's 32-bit hash (a collision) meets a's bucket,
        // whose text differs.
        assert_eq!(ids.find_hashed("b", h), None);
        // The same text under another hash is another bucket's business.
        assert_eq!(ids.find_hashed("a", h ^ 1), None);
    }

    #[test]
    fn ids_spread_over_the_table() {
        // Keyed SipHash: 1000 ids take (almost) 1000 hashes, and linear
        // probing from each id's home bucket stays short.
        let mut ids = CallIds::default();
        for i in 0..1000u32 {
            ids.insert(format!("c{i}"), NodeId(i));
        }
        let hashes: std::collections::HashSet<u32> =
            ids.iter().map(|(id, _)| ids.hash(id)).collect();
        assert!(hashes.len() >= 990, "{}", hashes.len());
        let mask = ids.table.len() - 1;
        let longest = (0..ids.table.len())
            .filter(|&i| ids.table[i].0 != EMPTY)
            .map(|i| i.wrapping_sub(ids.table[i].1 as usize) & mask)
            .max();
        assert!(longest.is_some_and(|d| d < 64), "{longest:?}");
    }

    #[test]
    fn a_node_table_squeezes_its_holes_out() {
        // Both parities, as for call ids: the bound is crossed, not always
        // met.
        for n in [1000u32, 1001] {
            let mut table: NodeTable<u32> = NodeTable::default();
            for i in 0..n {
                table.insert(NodeId(i), i);
            }
            for i in 0..900u32 {
                assert_eq!(table.remove(&NodeId(i)), Some(i));
                assert!(table.entries.len() <= 2 * table.len() + 64, "{n}: {i}");
                // Squeezing gives the spare capacity back too.
                assert!(
                    table.entries.capacity() <= 4 * table.entries.len() + 64,
                    "{n}: {i}: {} for {}",
                    table.entries.capacity(),
                    table.entries.len()
                );
            }
            assert_eq!(table.get(&NodeId(950)), Some(&950));
            assert_eq!(table.get(&NodeId(899)), None);
            assert_eq!(table.values().count(), n as usize - 900);
        }
    }

    #[test]
    fn a_node_table_answers_like_a_hash_map() {
        let mut x = 0x9e37_79b9_7f4a_7c15;
        let mut table: NodeTable<u64> = NodeTable::default();
        let mut model: HashMap<NodeId, u64> = HashMap::new();
        let mut top = 0u32;
        for step in 0..20_000u64 {
            match next(&mut x) % 8 {
                // Mostly appends, as calls come.
                0..=3 => {
                    top += 1 + (next(&mut x) % 3) as u32;
                    assert_eq!(
                        table.insert(NodeId(top), step),
                        model.insert(NodeId(top), step)
                    );
                }
                4 => {
                    let n = NodeId((next(&mut x) % (top as u64 + 1)) as u32);
                    assert_eq!(table.insert(n, step), model.insert(n, step));
                }
                5 | 6 => {
                    let n = NodeId((next(&mut x) % (top as u64 + 1)) as u32);
                    assert_eq!(table.remove(&n), model.remove(&n));
                }
                _ => {
                    let n = NodeId((next(&mut x) % (top as u64 + 1)) as u32);
                    if let Some(v) = table.get_mut(&n) {
                        *v += 1;
                    }
                    if let Some(v) = model.get_mut(&n) {
                        *v += 1;
                    }
                }
            }
            let n = NodeId((next(&mut x) % (top as u64 + 2)) as u32);
            assert_eq!(table.get(&n), model.get(&n));
            assert_eq!(table.len(), model.len());
            assert_eq!(table.is_empty(), model.is_empty());
        }
        let mut values: Vec<u64> = table.values().copied().collect();
        values.sort_unstable();
        let mut want: Vec<u64> = model.values().copied().collect();
        want.sort_unstable();
        assert_eq!(values, want);
        assert!(table.entries.len() <= 2 * table.len() + 64);
    }
}
