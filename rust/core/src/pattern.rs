//! Resource patterns: exact names, prefixes and globs.
//!
//! A glob's `*` matches any run of characters (including `/` and none at
//! all) and `?` matches exactly one character; every other character stands
//! for itself. Resources are not only paths (URLs, e-mail addresses, shell
//! commands), so no character is special to the matcher.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
/// A pattern over resource names (`"a.txt"`, `prefix "src/"`, `glob "*.env"` in a policy).
pub enum Pattern {
    /// Matches this name only.
    Exact(String),
    /// Matches every name that starts with this string.
    Prefix(String),
    /// Matches by glob: `*` any run of characters, `?` one character.
    Glob(String),
}

impl Pattern {
    /// Whether the pattern matches the resource name `text`.
    pub fn matches(&self, text: &str) -> bool {
        match self {
            Pattern::Exact(s) => s == text,
            Pattern::Prefix(p) => text.starts_with(p.as_str()),
            Pattern::Glob(g) => glob_matches(g, text),
        }
    }

    /// A sound but incomplete test of `L(self) ⊆ L(other)`: `true` means
    /// every text `self` matches, `other` matches too. Used to check that a
    /// delegate's grants attenuate its delegator's.
    pub fn is_subset_of(&self, other: &Pattern) -> bool {
        match (self, other) {
            (Pattern::Exact(s), _) => other.matches(s),
            (Pattern::Prefix(a), Pattern::Prefix(b)) => a.starts_with(b.as_str()),
            (Pattern::Prefix(a), Pattern::Glob(g)) => {
                // `b*` with a literal `b` covers every prefix that extends `b`.
                literal_prefix_star(g).is_some_and(|b| a.starts_with(b)) || g == "*"
            }
            (Pattern::Glob(g), Pattern::Prefix(b)) => {
                // Every match of g starts with g's literal head.
                glob_literal_head(g).starts_with(b.as_str())
            }
            (Pattern::Glob(a), Pattern::Glob(b)) => {
                a == b
                    || b == "*"
                    || literal_prefix_star(b).is_some_and(|p| glob_literal_head(a).starts_with(p))
            }
            (Pattern::Prefix(_) | Pattern::Glob(_), Pattern::Exact(_)) => false,
        }
    }
}

/// If `g` is `literal*` (one trailing star, no other wildcard), `literal`.
fn literal_prefix_star(g: &str) -> Option<&str> {
    let head = g.strip_suffix('*')?;
    (!head.contains(['*', '?'])).then_some(head)
}

/// The characters before the first wildcard.
fn glob_literal_head(g: &str) -> &str {
    g.find(['*', '?']).map_or(g, |i| &g[..i])
}

/// Glob matching in O(|glob|·|text|) worst case, without recursion: the
/// classic two-pointer algorithm that remembers the last `*` to backtrack to.
pub fn glob_matches(glob: &str, text: &str) -> bool {
    // Bytes are characters when both are ASCII: no allocation on the hot path.
    if glob.is_ascii() && text.is_ascii() {
        return match_units(glob.as_bytes(), text.as_bytes(), b'*', b'?');
    }
    let g: Vec<char> = glob.chars().collect();
    let t: Vec<char> = text.chars().collect();
    match_units(&g, &t, '*', '?')
}

fn match_units<T: PartialEq + Copy>(g: &[T], t: &[T], star_unit: T, any_unit: T) -> bool {
    let (mut gi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if gi < g.len() && (g[gi] == any_unit || (g[gi] != star_unit && g[gi] == t[ti])) {
            gi += 1;
            ti += 1;
        } else if gi < g.len() && g[gi] == star_unit {
            star = Some((gi, ti));
            gi += 1;
        } else if let Some((sg, st)) = star {
            gi = sg + 1;
            ti = st + 1;
            star = Some((sg, st + 1));
        } else {
            return false;
        }
    }
    g[gi..].iter().all(|c| *c == star_unit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Obviously correct exponential matcher, the oracle for `glob_matches`.
    fn naive(g: &[char], t: &[char]) -> bool {
        match g.first() {
            None => t.is_empty(),
            Some('*') => (0..=t.len()).any(|k| naive(&g[1..], &t[k..])),
            Some('?') => !t.is_empty() && naive(&g[1..], &t[1..]),
            Some(c) => t.first() == Some(c) && naive(&g[1..], &t[1..]),
        }
    }

    #[test]
    fn glob_examples() {
        assert!(glob_matches("src/*", "src/a/b.rs"));
        assert!(glob_matches("*.rs", "main.rs"));
        assert!(!glob_matches("*.rs", "main.rsx"));
        assert!(glob_matches("a?c", "abc"));
        assert!(!glob_matches("a?c", "ac"));
        assert!(glob_matches("", ""));
        assert!(glob_matches("**", ""));
        assert!(glob_matches(
            "https://*.example.com/*",
            "https://api.example.com/v1"
        ));
    }

    fn prefix(s: &str) -> Pattern {
        Pattern::Prefix(s.to_string())
    }

    fn glob(s: &str) -> Pattern {
        Pattern::Glob(s.to_string())
    }

    /// `subset_is_sound` only proves that a `true` is never wrong; these pin
    /// the cases each arm claims to decide, so a test that answers `false`
    /// everywhere (sound, and useless for attenuation) fails here.
    #[test]
    fn subset_decides_the_cases_it_claims() {
        let exact = |s: &str| Pattern::Exact(s.to_string());
        let holds = [
            (exact("a.txt"), glob("*.txt")),
            (prefix("ab"), prefix("a")),
            (prefix("ab"), prefix("ab")),
            (prefix("ab"), glob("a*")),
            (prefix("src/"), glob("*")),
            (glob("ab*"), prefix("a")),
            (glob("ab?c"), prefix("ab")),
            (glob("a?b"), glob("a?b")),
            (glob("a?b"), glob("*")),
            (glob("ab?"), glob("a*")),
        ];
        for (a, b) in &holds {
            assert!(a.is_subset_of(b), "{a:?} should be a subset of {b:?}");
        }
        let fails = [
            (exact("a.rs"), glob("*.txt")),
            (prefix("a"), prefix("ab")),
            (prefix("a"), glob("ab*")),
            // `a*b*` is not `literal*`: "ac" starts with "a" but has no `b`.
            (prefix("ac"), glob("a*b*")),
            (prefix("a"), exact("a")),
            (glob("*"), prefix("a")),
            (glob("?b"), prefix("a")),
            (glob("a*"), prefix("ab")),
            (glob("a*"), glob("ab*")),
            (glob("a?"), glob("a?b")),
            (glob("a"), exact("a")),
        ];
        for (a, b) in &fails {
            assert!(
                !a.is_subset_of(b),
                "{a:?} must not count as a subset of {b:?}"
            );
        }
    }

    #[test]
    fn glob_literal_parts() {
        assert_eq!(literal_prefix_star("src/*"), Some("src/"));
        assert_eq!(literal_prefix_star("*"), Some(""));
        assert_eq!(literal_prefix_star("a*b*"), None);
        assert_eq!(literal_prefix_star("a?*"), None);
        assert_eq!(literal_prefix_star("abc"), None);
        assert_eq!(glob_literal_head("src/*.rs"), "src/");
        assert_eq!(glob_literal_head("ab?c"), "ab");
        assert_eq!(glob_literal_head("abc"), "abc");
        assert_eq!(glob_literal_head("*x"), "");
    }

    proptest! {
        #[test]
        fn glob_agrees_with_naive(g in "[aé*?]{0,6}", t in "[aé]{0,8}") {
            let gc: Vec<char> = g.chars().collect();
            let tc: Vec<char> = t.chars().collect();
            prop_assert_eq!(glob_matches(&g, &t), naive(&gc, &tc));
        }

        #[test]
        fn subset_is_sound(a in pattern(), b in pattern(), t in "[ab/]{0,6}") {
            if a.is_subset_of(&b) && a.matches(&t) {
                prop_assert!(b.matches(&t));
            }
        }
    }

    fn pattern() -> impl Strategy<Value = Pattern> {
        prop_oneof![
            "[ab/]{0,4}".prop_map(Pattern::Exact),
            "[ab/]{0,3}".prop_map(Pattern::Prefix),
            "[ab/*?]{0,4}".prop_map(Pattern::Glob),
        ]
    }
}
