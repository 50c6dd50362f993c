//! Provenance by value (opt-in per policy): an argument without observed
//! lineage whose value occurs in the user's task text takes the task's
//! label (trusted, lowest), whatever else also contains it: the user asked
//! for it. One that occurs in a trusted output and in no untrusted output
//! takes that output's label. Anything else takes the context's label.
//! How values are compared is in `crate::provenance`.
//!
//! An attacker gains nothing by echoing a value the user typed: the call
//! then uses a value the user asked for. A value an attacker introduces
//! occurs in an untrusted output, so it never loses the context's label.

use super::key_filter::KeyFilter;
use crate::fields::OutputLabels;
use crate::graph::NodeId;
use crate::label::Label;
use crate::provenance::{
    labelled_output_keys, lookup_ref, output_keys, phrase_words_of, text_keys, Key, LookupRef,
};
use crate::value::{Decimal, Value};
// Keys come from untrusted text: SipHash with a random key, not FxHash.
use std::collections::HashMap;

pub(crate) use crate::provenance::MAX_OUTPUT_WORDS;

/// Where a word occurs: the first task text, and the outputs.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct Seen {
    /// The first task whose text contains it.
    task: Option<NodeId>,
    /// The join of the labels of the trusted outputs that contain it, and
    /// the first of them.
    trusted: Option<(Label, NodeId)>,
    untrusted: bool,
}

/// Tasks and outputs share one entry per key, and words and numbers have
/// a table each (words keyed by `String`, so that an argument is probed by
/// its borrowed canonical form): looking a scalar up is one hash probe.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
#[serde(from = "ValueIndexWire")]
pub(crate) struct ValueIndex {
    /// Canonical word -> where it occurs.
    words: HashMap<String, Seen>,
    /// Exact number -> where it occurs.
    numbers: HashMap<Decimal, Seen>,
    /// Task texts as phrase words, for values of several words.
    task_texts: Vec<(NodeId, Vec<String>)>,
    /// Every phrase word of every task text: a phrase with a word not here
    /// occurs in none, found at its first such word.
    task_phrase_words: std::collections::HashSet<String>,
    /// An untrusted output was too large to index.
    overflow: bool,
    /// Every key of `words`, `numbers` and `task_phrase_words`: most
    /// lookups end here, without a keyed hash. Not stored: rebuilt from
    /// the tables when the index is read back.
    #[serde(skip)]
    filter: KeyFilter,
}

/// The filter's tags for the three tables.
const WORD: u8 = 0;
const NUMBER: u8 = 1;
const PHRASE_WORD: u8 = 2;

/// [`ValueIndex`] as snapshots store it (the same fields, without the
/// filter, which is rebuilt from them).
#[derive(serde::Deserialize)]
struct ValueIndexWire {
    words: HashMap<String, Seen>,
    numbers: HashMap<Decimal, Seen>,
    task_texts: Vec<(NodeId, Vec<String>)>,
    task_phrase_words: std::collections::HashSet<String>,
    overflow: bool,
}

impl From<ValueIndexWire> for ValueIndex {
    fn from(w: ValueIndexWire) -> ValueIndex {
        let mut filter = KeyFilter::default();
        for k in w.words.keys() {
            filter.add_bytes(WORD, k.as_bytes());
        }
        for d in w.numbers.keys() {
            filter.add_bytes(NUMBER, &d.key_bytes());
        }
        for p in &w.task_phrase_words {
            filter.add_bytes(PHRASE_WORD, p.as_bytes());
        }
        ValueIndex {
            words: w.words,
            numbers: w.numbers,
            task_texts: w.task_texts,
            task_phrase_words: w.task_phrase_words,
            overflow: w.overflow,
            filter,
        }
    }
}

impl ValueIndex {
    /// The entry of `k`, created empty.
    fn entry(&mut self, k: Key) -> &mut Seen {
        match k {
            Key::Word(w) => {
                self.filter.add_bytes(WORD, w.as_bytes());
                self.words.entry(w).or_default()
            }
            Key::Number(d) => {
                self.filter.add_bytes(NUMBER, &d.key_bytes());
                self.numbers.entry(d).or_default()
            }
        }
    }

    pub fn add_task(&mut self, node: NodeId, text: &str) {
        for k in text_keys(text) {
            self.entry(k).task.get_or_insert(node);
        }
        let words = phrase_words_of(text);
        for w in &words {
            self.filter.add_bytes(PHRASE_WORD, w.as_bytes());
        }
        self.task_phrase_words.extend(words.iter().cloned());
        self.task_texts.push((node, words));
    }

    /// Indexes an output's words, each with the label of its field
    /// (`docs/semantics.md`, "Per-field output labels").
    pub fn add_output(&mut self, node: NodeId, labels: &OutputLabels, output: &serde_json::Value) {
        // Most tools declare no fields: every word has the output's label
        // (no path is tracked on the way).
        if labels.fields.is_empty() {
            let mut keys = Vec::new();
            output_keys(output, &mut keys);
            let label = labels.whole;
            if keys.len() > MAX_OUTPUT_WORDS {
                self.overflow |= !label.trusted;
                keys.truncate(MAX_OUTPUT_WORDS);
            }
            for k in keys {
                self.add_key(k, label, node);
            }
            return;
        }
        let mut keys = Vec::new();
        labelled_output_keys(output, labels, &mut keys);
        if keys.len() > MAX_OUTPUT_WORDS {
            if keys.iter().any(|(_, f)| !labels.label(*f).trusted) {
                self.overflow = true;
            }
            keys.truncate(MAX_OUTPUT_WORDS);
        }
        for (k, field) in keys {
            self.add_key(k, labels.label(field), node);
        }
    }

    /// Records that an output of `label` (at `node`) holds `k`.
    fn add_key(&mut self, k: Key, label: Label, node: NodeId) {
        let seen = self.entry(k);
        if label.trusted {
            seen.trusted = Some(match seen.trusted {
                None => (label, node),
                Some((l, first)) => (l.join(&label), first),
            });
        } else {
            seen.untrusted = true;
        }
    }

    /// The label of one scalar and where it came from, if provenance
    /// applies to it.
    #[inline]
    fn scalar(&self, v: &Value) -> Option<(Label, NodeId)> {
        // Every phrase word is first checked against the filter alone: a
        // phrase with a word no task has costs no keyed hash.
        let maybe = |w: &str| self.filter.may_hold(PHRASE_WORD, w.as_bytes());
        let known = |w: &str| self.task_phrase_words.contains(w);
        let seen = match lookup_ref(v, !self.task_texts.is_empty(), maybe, known) {
            LookupRef::Word(w) if self.filter.may_hold(WORD, w.as_bytes()) => {
                self.words.get(w.as_ref())
            }
            LookupRef::Number(d) if self.filter.may_hold(NUMBER, &d.key_bytes()) => {
                self.numbers.get(&d)
            }
            LookupRef::Word(_) | LookupRef::Number(_) => None,
            LookupRef::Nothing => None,
            LookupRef::Phrase(words) => {
                return self
                    .task_texts
                    .iter()
                    .find(|(_, text)| text.windows(words.len().max(1)).any(|w| w == words))
                    .map(|(node, _)| (Label::BOTTOM, *node))
            }
        }?;
        if let Some(task) = seen.task {
            return Some((Label::BOTTOM, task));
        }
        if self.overflow {
            return None;
        }
        match seen {
            Seen {
                trusted: Some(found),
                untrusted: false,
                ..
            } => Some(*found),
            _ => None,
        }
    }

    /// The label of argument `param` by provenance, `None` unless every
    /// scalar of it (each element of a list) has one. The nodes it came
    /// from are pushed onto `found` as `(param, node)`, each once (nothing
    /// is pushed on `None`).
    #[inline]
    pub fn lookup(&self, v: &Value, param: u16, found: &mut Vec<(u16, NodeId)>) -> Option<Label> {
        // Booleans and `null` are never looked up (`provenance::value_key`).
        if matches!(v, Value::Bool(_) | Value::Null) {
            return None;
        }
        let start = found.len();
        let mut label = Label::BOTTOM;
        for s in v.scalars() {
            let Some((l, node)) = self.scalar(s) else {
                found.truncate(start);
                return None;
            };
            label = label.join(&l);
            if !found[start..].iter().any(|&(_, n)| n == node) {
                found.push((param, node));
            }
        }
        Some(label)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An index read back (as a snapshot reads it) rebuilds its filter
    /// from its tables: every value found before is found after, and the
    /// filter is bit for bit the one the index had.
    #[test]
    fn a_read_back_index_finds_what_it_found() {
        let mut index = ValueIndex::default();
        index.add_task(
            NodeId(1),
            "Pay 98.70 to acct-0007, subject Quarterly Report",
        );
        index.add_output(
            NodeId(2),
            &OutputLabels::whole(Label::BOTTOM),
            &serde_json::json!({"iban": "DE89370400440532013000", "n": 1234}),
        );
        let bytes = serde_json::to_vec(&index).expect("encodes");
        let back: ValueIndex = serde_json::from_slice(&bytes).expect("decodes");
        assert_eq!(format!("{:?}", back.filter), format!("{:?}", index.filter));
        let values = [
            Value::Str("acct-0007".into()),
            Value::Str("DE89370400440532013000".into()),
            Value::Str("quarterly report".into()),
            Value::Decimal("98.7".parse().expect("a decimal")),
            Value::Int(1234),
            Value::Str("acct-0008".into()),
        ];
        for v in &values {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            assert_eq!(index.lookup(v, 0, &mut a), back.lookup(v, 0, &mut b), "{v}");
            assert_eq!(a, b, "{v}");
        }
        // And they are found at all (the filter lets them through).
        for v in &values[..5] {
            assert!(index.lookup(v, 0, &mut Vec::new()).is_some(), "{v}");
        }
        assert!(index.lookup(&values[5], 0, &mut Vec::new()).is_none());
    }

    /// A list whose elements come from one output names that output once
    /// (one edge); elements from two outputs name both, in order.
    #[test]
    fn a_source_is_named_once_per_argument() {
        let trusted = OutputLabels::whole(Label::BOTTOM);
        let mut index = ValueIndex::default();
        index.add_output(
            NodeId(1),
            &trusted,
            &serde_json::json!(["acct-0001", "acct-0002"]),
        );
        index.add_output(NodeId(2), &trusted, &serde_json::json!("acct-0003"));
        let list =
            |items: &[&str]| Value::List(items.iter().map(|s| Value::Str((*s).into())).collect());
        let mut found = vec![(0, NodeId(9))];
        assert!(index
            .lookup(&list(&["acct-0001", "acct-0002"]), 3, &mut found)
            .is_some());
        assert_eq!(found, vec![(0, NodeId(9)), (3, NodeId(1))]);
        assert!(index
            .lookup(&list(&["acct-0003", "acct-0001"]), 4, &mut found)
            .is_some());
        assert_eq!(found[2..], [(4, NodeId(2)), (4, NodeId(1))]);
        // Not every element found: nothing is pushed.
        assert!(index
            .lookup(&list(&["acct-0001", "other"]), 5, &mut found)
            .is_none());
        assert_eq!(found.len(), 4);
    }
}
