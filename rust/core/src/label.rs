//! Labels and their lattice: ⟨sensitivity, categories, trust⟩.
//!
//! `l1 ⊑ l2` iff `s1 ≤ s2`, `C1 ⊆ C2` and (`l2` trusted ⇒ `l1` trusted).
//! Join takes the maximum sensitivity, the union of categories, and is
//! trusted only when both sides are. The bottom label is
//! ⟨lowest level, ∅, trusted⟩.

use serde::{Deserialize, Serialize};

/// Index of a sensitivity level in the policy's ordered `levels` list.
pub type Level = u8;

/// The most categories a policy may declare: a category set is a bit set.
pub const MAX_CATEGORIES: usize = 64;

/// A set of category indexes, as a 64-bit set.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct CategorySet(pub u64);

impl CategorySet {
    /// No categories.
    pub const EMPTY: CategorySet = CategorySet(0);

    /// The set holding only category `index` (`index < MAX_CATEGORIES`).
    pub fn single(index: usize) -> CategorySet {
        debug_assert!(index < MAX_CATEGORIES);
        CategorySet(1u64 << (index % MAX_CATEGORIES))
    }
    /// The set of the given category indexes (each `< MAX_CATEGORIES`).
    pub fn from_indexes(indexes: impl IntoIterator<Item = usize>) -> CategorySet {
        indexes.into_iter().fold(CategorySet::EMPTY, |acc, i| {
            acc.union(CategorySet::single(i))
        })
    }
    /// `self ∪ other`.
    pub fn union(self, other: CategorySet) -> CategorySet {
        CategorySet(self.0 | other.0)
    }
    /// `self ∩ other`.
    pub fn intersection(self, other: CategorySet) -> CategorySet {
        CategorySet(self.0 & other.0)
    }
    /// `self \ other`: what a sanitizer leaves when it removes `other`.
    pub fn minus(self, other: CategorySet) -> CategorySet {
        CategorySet(self.0 & !other.0)
    }
    /// `self ⊆ other`.
    pub fn is_subset(self, other: CategorySet) -> bool {
        self.0 & !other.0 == 0
    }
    /// Whether the set holds no category.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// Whether category `index` is in the set (`false` for indexes out of range).
    pub fn contains(self, index: usize) -> bool {
        index < MAX_CATEGORIES && self.0 & (1u64 << index) != 0
    }
    /// Category indexes in increasing order.
    pub fn indexes(self) -> impl Iterator<Item = usize> {
        (0..MAX_CATEGORIES).filter(move |i| self.contains(*i))
    }
}

/// A data label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Label {
    /// Index into the policy's `levels` (0: lowest).
    pub sensitivity: Level,
    /// Categories (indexes into the policy's `categories`) the data carries.
    pub categories: CategorySet,
    /// Whether the data is trusted. Untrusted is higher: a join is trusted only when both sides
    /// are.
    pub trusted: bool,
}

impl Default for Label {
    fn default() -> Self {
        Label::BOTTOM
    }
}

impl Label {
    /// The least label: public, no categories, trusted.
    pub const BOTTOM: Label = Label {
        sensitivity: 0,
        categories: CategorySet::EMPTY,
        trusted: true,
    };

    /// The label ⟨`sensitivity`, `categories`, `trusted`⟩.
    pub fn new(sensitivity: Level, categories: CategorySet, trusted: bool) -> Label {
        Label {
            sensitivity,
            categories,
            trusted,
        }
    }

    /// `self ⊑ other`: data labeled `self` may be treated as labeled `other`.
    pub fn flows_to(&self, other: &Label) -> bool {
        self.sensitivity <= other.sensitivity
            && self.categories.is_subset(other.categories)
            && (!other.trusted || self.trusted)
    }

    /// Least upper bound.
    #[inline]
    pub fn join(&self, other: &Label) -> Label {
        Label {
            sensitivity: self.sensitivity.max(other.sensitivity),
            categories: self.categories.union(other.categories),
            trusted: self.trusted && other.trusted,
        }
    }
}

/// A condition on labels that is upward closed: if it holds for `l` and
/// `l ⊑ l'`, it holds for `l'`. Deny rules and path steps use these, which is
/// what makes "adding labels never turns a DENY into an ALLOW" true.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabelPattern {
    /// Holds when the sensitivity is at least this level.
    pub min_sensitivity: Option<Level>,
    /// Holds when the label carries at least one of these (ignored if empty).
    pub any_category: CategorySet,
    /// Holds only for untrusted labels.
    pub untrusted: bool,
}

impl LabelPattern {
    /// The pattern every label matches.
    pub const ANY: LabelPattern = LabelPattern {
        min_sensitivity: None,
        any_category: CategorySet::EMPTY,
        untrusted: false,
    };

    /// Whether `label` satisfies every part of the pattern (an empty pattern matches everything).
    pub fn matches(&self, label: &Label) -> bool {
        self.min_sensitivity.is_none_or(|m| label.sensitivity >= m)
            && (self.any_category.is_empty()
                || !self.any_category.intersection(label.categories).is_empty())
            && (!self.untrusted || !label.trusted)
    }
}

/// A trusted sanitizer specification: the transformation a declared
/// sanitizer applies to the label of what flows through it. Only a declared
/// specification transforms labels; anything else ("summarize") propagates
/// its inputs' labels unchanged.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sanitizer {
    /// The name the policy declares it under.
    pub name: String,
    /// Categories the sanitizer removes.
    pub removes: CategorySet,
    /// Sensitivity is lowered to at most this level.
    pub max_sensitivity: Option<Level>,
    /// The output is vouched for (trusted) by the sanitizer.
    pub trusts: bool,
}

impl Sanitizer {
    /// The label of what comes out when data labeled `label` goes through the sanitizer: categories
    /// removed, sensitivity capped, trust vouched for.
    pub fn apply(&self, label: &Label) -> Label {
        Label {
            sensitivity: self
                .max_sensitivity
                .map_or(label.sensitivity, |m| label.sensitivity.min(m)),
            categories: label.categories.minus(self.removes),
            trusted: label.trusted || self.trusts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn category_sets_hold_exactly_their_indexes() {
        let s = CategorySet::from_indexes([0, 5, 63]);
        assert_eq!(s, CategorySet((1 << 0) | (1 << 5) | (1 << 63)));
        assert_eq!(CategorySet::single(7), CategorySet(1 << 7));
        assert_eq!(s.indexes().collect::<Vec<_>>(), vec![0, 5, 63]);
        assert!(s.contains(5) && s.contains(63) && !s.contains(4) && !s.contains(64));
        assert!(!CategorySet::single(0).contains(1));
        assert_eq!(
            s.intersection(CategorySet::from_indexes([5, 6])),
            CategorySet::single(5)
        );
        assert!(CategorySet::EMPTY.is_empty() && !s.is_empty());
        assert!(s.intersection(CategorySet::single(6)).is_empty());
    }

    #[test]
    fn label_patterns_test_each_part() {
        let l = |s: Level, cats: &[usize], trusted: bool| {
            Label::new(s, CategorySet::from_indexes(cats.iter().copied()), trusted)
        };
        let p = |min: Option<Level>, cats: &[usize], untrusted: bool| LabelPattern {
            min_sensitivity: min,
            any_category: CategorySet::from_indexes(cats.iter().copied()),
            untrusted,
        };
        assert!(LabelPattern::ANY.matches(&Label::BOTTOM));
        assert!(p(Some(2), &[], false).matches(&l(2, &[], true)));
        assert!(!p(Some(2), &[], false).matches(&l(1, &[], true)));
        assert!(p(None, &[1, 2], false).matches(&l(0, &[2], true)));
        assert!(!p(None, &[1, 2], false).matches(&l(0, &[3], true)));
        assert!(p(None, &[], true).matches(&l(0, &[], false)));
        assert!(!p(None, &[], true).matches(&l(0, &[], true)));
        // All parts must hold.
        assert!(p(Some(1), &[0], true).matches(&l(1, &[0], false)));
        assert!(!p(Some(1), &[0], true).matches(&l(0, &[0], false)));
        assert!(!p(Some(1), &[0], true).matches(&l(1, &[1], false)));
        assert!(!p(Some(1), &[0], true).matches(&l(1, &[0], true)));
    }

    #[test]
    fn sanitizers_remove_cap_and_vouch_exactly() {
        let l = Label::new(3, CategorySet::from_indexes([0, 1, 2]), false);
        let s = Sanitizer {
            name: "s".into(),
            removes: CategorySet::from_indexes([1]),
            max_sensitivity: Some(2),
            trusts: true,
        };
        assert_eq!(
            s.apply(&l),
            Label::new(2, CategorySet::from_indexes([0, 2]), true)
        );
        let keep = Sanitizer {
            name: "k".into(),
            removes: CategorySet::EMPTY,
            max_sensitivity: Some(5),
            trusts: false,
        };
        assert_eq!(keep.apply(&l), l);
        assert_eq!(
            CategorySet::from_indexes([0, 3]).minus(CategorySet::from_indexes([3, 4])),
            CategorySet::from_indexes([0])
        );
    }

    fn label() -> impl Strategy<Value = Label> {
        (0u8..4, any::<u8>(), any::<bool>())
            .prop_map(|(s, c, t)| Label::new(s, CategorySet(c as u64), t))
    }

    proptest! {
        #[test]
        fn join_is_least_upper_bound(a in label(), b in label(), c in label()) {
            let j = a.join(&b);
            prop_assert!(a.flows_to(&j) && b.flows_to(&j));
            if a.flows_to(&c) && b.flows_to(&c) {
                prop_assert!(j.flows_to(&c));
            }
        }

        #[test]
        fn flows_to_is_a_partial_order(a in label(), b in label(), c in label()) {
            prop_assert!(a.flows_to(&a));
            if a.flows_to(&b) && b.flows_to(&a) { prop_assert_eq!(a, b); }
            if a.flows_to(&b) && b.flows_to(&c) { prop_assert!(a.flows_to(&c)); }
        }

        #[test]
        fn patterns_are_upward_closed(a in label(), b in label(), min in proptest::option::of(0u8..4), cats in any::<u8>(), untrusted in any::<bool>()) {
            let p = LabelPattern { min_sensitivity: min, any_category: CategorySet(cats as u64), untrusted };
            if p.matches(&a) && a.flows_to(&b) { prop_assert!(p.matches(&b)); }
        }

        #[test]
        fn sanitizer_is_monotone(a in label(), b in label(), rm in any::<u8>(), trusts in any::<bool>()) {
            let s = Sanitizer { name: "s".into(), removes: CategorySet(rm as u64), max_sensitivity: Some(1), trusts };
            if a.flows_to(&b) { prop_assert!(s.apply(&a).flows_to(&s.apply(&b))); }
        }
    }

    #[test]
    fn bottom_flows_everywhere_and_untrusted_does_not_flow_to_trusted() {
        let untrusted = Label::new(0, CategorySet::EMPTY, false);
        assert!(Label::BOTTOM.flows_to(&untrusted));
        assert!(!untrusted.flows_to(&Label::BOTTOM));
    }
}
