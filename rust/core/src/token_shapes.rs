//! Token kinds of a shape the policy declares (`token order_id = "ORD-"
//! digit{6};`, `docs/policy-language.md`, "Declared token shapes"): a
//! sequence of literal text and ASCII character classes with fixed or
//! bounded repetition. No alternation, no unbounded repetition: a shape
//! matches at most [`MAX_SHAPE_LEN`] characters, and matching runs the
//! shape's positions as a bit set (one `u128`), so finding a shape's
//! tokens is linear in the text and never backtracks.
//!
//! A token of a declared kind is a match that starts and ends at a word
//! boundary (the characters either side are not ASCII letters, digits,
//! `_` or non-ASCII); from each start the longest such match counts, and
//! matches of one kind do not overlap (scanning resumes after a match).
//! Its canonical form is its exact text: literals and classes are case
//! sensitive. Kinds are extracted independently of each other and of the
//! built-in kinds, so an id inside a URL is both part of the URL token and
//! a token of its own kind.

use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The most characters a shape can match (its positions fit one `u128`).
pub const MAX_SHAPE_LEN: usize = 120;

/// The largest repetition bound of a class.
pub const MAX_REPEAT: u32 = 64;

/// An ASCII character class of a shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CharClass {
    /// `0`-`9`.
    Digit,
    /// `A`-`Z`.
    Upper,
    /// `a`-`z`.
    Lower,
    /// `A`-`Z`, `a`-`z`.
    Letter,
    /// Letters and digits.
    Alnum,
    /// `0`-`9`, `a`-`f`, `A`-`F`.
    Hex,
}

impl CharClass {
    /// Every class, in order.
    pub const ALL: [CharClass; 6] = [
        CharClass::Digit,
        CharClass::Upper,
        CharClass::Lower,
        CharClass::Letter,
        CharClass::Alnum,
        CharClass::Hex,
    ];

    /// Its name in the policy language.
    pub fn keyword(self) -> &'static str {
        match self {
            CharClass::Digit => "digit",
            CharClass::Upper => "upper",
            CharClass::Lower => "lower",
            CharClass::Letter => "letter",
            CharClass::Alnum => "alnum",
            CharClass::Hex => "hex",
        }
    }

    /// The class a name denotes.
    pub fn from_keyword(w: &str) -> Option<CharClass> {
        CharClass::ALL.into_iter().find(|c| c.keyword() == w)
    }

    fn matches(self, b: u8) -> bool {
        match self {
            CharClass::Digit => b.is_ascii_digit(),
            CharClass::Upper => b.is_ascii_uppercase(),
            CharClass::Lower => b.is_ascii_lowercase(),
            CharClass::Letter => b.is_ascii_alphabetic(),
            CharClass::Alnum => b.is_ascii_alphanumeric(),
            CharClass::Hex => b.is_ascii_hexdigit(),
        }
    }
}

/// One part of a shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ShapePart {
    /// Exact text: printable ASCII other than space.
    Literal(String),
    /// `min` to `max` characters of a class (`digit{6}`, `alnum{2,8}`).
    Class {
        /// The class.
        class: CharClass,
        /// The fewest characters.
        min: u32,
        /// The most characters.
        max: u32,
    },
}

/// Why a shape is refused (by the compiler, naming the line and column,
/// and when a policy is read from JSON or CBOR).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    /// No part, or only optional ones: it would match empty text.
    #[error(
        "the shape can match the empty text: it needs a literal or a class repeated at least once"
    )]
    MatchesEmpty,
    /// A literal that is empty or holds a space, a control or a non-ASCII character.
    #[error("part {part}: literal {text:?} must be printable ASCII without spaces, at least one character")]
    BadLiteral {
        /// The part's index, from 0.
        part: usize,
        /// The literal.
        text: String,
    },
    /// `{min,max}` with `max` 0, `min > max` or `max` over [`MAX_REPEAT`].
    #[error("part {part}: repetition {{{min},{max}}} must have 0 <= min <= max, 1 <= max <= {MAX_REPEAT}")]
    BadRepeat {
        /// The part's index, from 0.
        part: usize,
        /// The lower bound.
        min: u32,
        /// The upper bound.
        max: u32,
    },
    /// It can match more than [`MAX_SHAPE_LEN`] characters.
    #[error("the shape matches up to {len} characters; at most {MAX_SHAPE_LEN}")]
    TooLong {
        /// The most characters it matches.
        len: usize,
    },
}

/// The written form of a shape (what the policy's encoding holds).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShapeSpec {
    /// The kind's name (`order_id`).
    pub name: String,
    /// Its parts, in order.
    pub parts: Vec<ShapePart>,
}

/// A declared token kind: its [`ShapeSpec`] and the matcher built from it
/// once (a policy read from JSON or CBOR is checked the same way).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(try_from = "ShapeSpec", into = "ShapeSpec")]
pub struct TokenShape {
    spec: ShapeSpec,
    matcher: Arc<Matcher>,
}

impl PartialEq for TokenShape {
    fn eq(&self, other: &Self) -> bool {
        self.spec == other.spec
    }
}

impl Eq for TokenShape {}

impl From<TokenShape> for ShapeSpec {
    fn from(s: TokenShape) -> ShapeSpec {
        s.spec
    }
}

impl TryFrom<ShapeSpec> for TokenShape {
    type Error = ShapeError;

    fn try_from(spec: ShapeSpec) -> Result<TokenShape, ShapeError> {
        let matcher = Arc::new(Matcher::new(&spec.parts)?);
        Ok(TokenShape { spec, matcher })
    }
}

/// One position of a shape: a byte or a class, and whether it may be skipped.
#[derive(Clone, Copy)]
enum Want {
    Byte(u8),
    Class(CharClass),
}

/// The shape's positions as bits: bit `i` is "the first `i` positions are
/// matched"; bit `len` accepts.
#[derive(Debug)]
struct Matcher {
    /// Per ASCII byte, the positions it can fill.
    fills: [u128; 128],
    /// Positions that may be skipped (the optional tail of a repetition).
    optional: u128,
    /// How many positions.
    len: u32,
}

impl Matcher {
    fn new(parts: &[ShapePart]) -> Result<Matcher, ShapeError> {
        let mut wants: Vec<(Want, bool)> = Vec::new();
        for (part, p) in parts.iter().enumerate() {
            match p {
                ShapePart::Literal(text) => {
                    let ok = !text.is_empty() && text.bytes().all(|b| b.is_ascii_graphic());
                    if !ok {
                        return Err(ShapeError::BadLiteral {
                            part,
                            text: text.clone(),
                        });
                    }
                    wants.extend(text.bytes().map(|b| (Want::Byte(b), false)));
                }
                &ShapePart::Class { class, min, max } => {
                    if max == 0 || min > max || max > MAX_REPEAT {
                        return Err(ShapeError::BadRepeat { part, min, max });
                    }
                    let n = wants.len() + max as usize;
                    if n > MAX_SHAPE_LEN {
                        return Err(ShapeError::TooLong { len: n });
                    }
                    wants.extend((0..max).map(|i| (Want::Class(class), i >= min)));
                }
            }
            if wants.len() > MAX_SHAPE_LEN {
                return Err(ShapeError::TooLong { len: wants.len() });
            }
        }
        if wants.iter().all(|&(_, optional)| optional) {
            return Err(ShapeError::MatchesEmpty);
        }
        let mut fills = [0u128; 128];
        let mut optional = 0u128;
        for (i, &(want, opt)) in wants.iter().enumerate() {
            for (b, f) in (0u8..128).zip(fills.iter_mut()) {
                let hit = match want {
                    Want::Byte(w) => w == b,
                    Want::Class(c) => c.matches(b),
                };
                if hit {
                    *f |= 1 << i;
                }
            }
            if opt {
                optional |= 1 << i;
            }
        }
        Ok(Matcher {
            fills,
            optional,
            // At most MAX_SHAPE_LEN (checked above).
            len: wants.len() as u32,
        })
    }

    /// Adds the positions reached by skipping optional ones.
    fn close(&self, mut s: u128) -> u128 {
        loop {
            let next = s | ((s & self.optional) << 1);
            if next == s {
                return s;
            }
            s = next;
        }
    }

    fn fills(&self, b: u8) -> u128 {
        self.fills.get(usize::from(b)).copied().unwrap_or(0)
    }

    /// The end of the longest match from `start` that ends at a word
    /// boundary (see the module doc).
    fn longest_at(&self, text: &[u8], start: usize) -> Option<usize> {
        let accept = 1u128 << self.len;
        let mut s = self.close(1);
        let mut best = None;
        for (i, &b) in text.iter().enumerate().skip(start) {
            s = self.close((s & self.fills(b)) << 1);
            if s == 0 {
                break;
            }
            if s & accept != 0 && is_boundary(text.get(i + 1)) {
                best = Some(i + 1);
            }
        }
        best
    }
}

/// Whether a byte ends a word (`None`: the text's end). Non-ASCII bytes
/// are part of words, so a token never starts or ends inside a character.
fn is_boundary(b: Option<&u8>) -> bool {
    b.is_none_or(|&b| b.is_ascii() && !b.is_ascii_alphanumeric() && b != b'_')
}

impl TokenShape {
    /// A shape from its parts, checked.
    pub fn new(name: impl Into<String>, parts: Vec<ShapePart>) -> Result<TokenShape, ShapeError> {
        TokenShape::try_from(ShapeSpec {
            name: name.into(),
            parts,
        })
    }

    /// The kind's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Its parts.
    pub fn parts(&self) -> &[ShapePart] {
        &self.spec.parts
    }

    /// The shape as the policy language writes it (`"ORD-" digit{6}`).
    pub fn source(&self) -> String {
        let part = |p: &ShapePart| match p {
            ShapePart::Literal(t) => format!("{t:?}"),
            ShapePart::Class { class, min, max } if min == max => {
                format!("{}{{{min}}}", class.keyword())
            }
            ShapePart::Class { class, min, max } => format!("{}{{{min},{max}}}", class.keyword()),
        };
        self.spec
            .parts
            .iter()
            .map(part)
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Whether the whole of `text` is one token of this shape.
    pub fn matches_whole(&self, text: &str) -> bool {
        self.matcher.longest_at(text.as_bytes(), 0) == Some(text.len())
    }

    /// The byte ranges of the shape's tokens in `text`, in order (see the
    /// module doc).
    pub fn find(&self, text: &str) -> Vec<(usize, usize)> {
        let b = text.as_bytes();
        let m = &self.matcher;
        let first = m.close(1);
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            let starts = (i == 0 || is_boundary(b.get(i - 1))) && first & m.fills(b[i]) != 0;
            match starts.then(|| m.longest_at(b, i)).flatten() {
                Some(end) => {
                    out.push((i, end));
                    i = end;
                }
                None => i += 1,
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn class(class: CharClass, min: u32, max: u32) -> ShapePart {
        ShapePart::Class { class, min, max }
    }
    fn lit(t: &str) -> ShapePart {
        ShapePart::Literal(t.into())
    }
    fn order() -> TokenShape {
        TokenShape::new("order_id", vec![lit("ORD-"), class(CharClass::Digit, 6, 6)]).unwrap()
    }
    fn found<'a>(s: &TokenShape, t: &'a str) -> Vec<&'a str> {
        s.find(t).into_iter().map(|(a, b)| &t[a..b]).collect()
    }

    #[test]
    fn a_fixed_shape_finds_whole_words_only() {
        let s = order();
        assert_eq!(
            found(
                &s,
                "ship ORD-123456, then (ORD-000001). ORD-1234567 xORD-123456 ord-123456"
            ),
            ["ORD-123456", "ORD-000001"]
        );
        assert_eq!(found(&s, "ORD-123456"), ["ORD-123456"]);
        assert_eq!(
            found(&s, "https://shop.example/ORD-123456?x=1"),
            ["ORD-123456"]
        );
        assert_eq!(
            found(&s, "ORD-123456_a ORD-12345 éORD-123456 ORD-123456é"),
            Vec::<&str>::new()
        );
        assert!(s.matches_whole("ORD-123456"));
        assert!(!s.matches_whole("ORD-123456 "));
        assert_eq!(s.source(), r#""ORD-" digit{6}"#);
    }

    #[test]
    fn bounded_repetition_takes_the_longest_match_without_backtracking() {
        // `alnum{1,5} digit{2}`: greedy alone would eat the digits.
        let s = TokenShape::new(
            "t",
            vec![class(CharClass::Alnum, 1, 5), class(CharClass::Digit, 2, 2)],
        )
        .unwrap();
        assert_eq!(found(&s, "ab12 a1234 abcdef12 1 x"), ["ab12", "a1234"]);
        // Optional parts in the middle.
        let s = TokenShape::new(
            "t",
            vec![
                class(CharClass::Upper, 2, 2),
                class(CharClass::Digit, 0, 2),
                lit("-"),
                class(CharClass::Hex, 4, 4),
            ],
        )
        .unwrap();
        assert_eq!(
            found(&s, "AB-beef AB12-00fF AB123-0000 A-0000"),
            ["AB-beef", "AB12-00fF"]
        );
    }

    #[test]
    fn a_match_must_end_at_a_boundary_and_the_longest_one_counts() {
        let s = TokenShape::new("t", vec![class(CharClass::Digit, 2, 4)]).unwrap();
        assert_eq!(
            found(&s, "1 12 123 1234 12345 12-34"),
            ["12", "123", "1234", "12", "34"]
        );
        // A literal that ends in a non-word character.
        let s = TokenShape::new("t", vec![lit("#"), class(CharClass::Digit, 1, 3)]).unwrap();
        assert_eq!(found(&s, "#1 #12# a#3 #4444"), ["#1", "#12"]);
    }

    #[test]
    fn bad_shapes_are_refused_with_the_part() {
        use ShapeError::*;
        let new = |p| TokenShape::new("t", p).unwrap_err();
        assert_eq!(new(vec![]), MatchesEmpty);
        assert_eq!(new(vec![class(CharClass::Digit, 0, 3)]), MatchesEmpty);
        assert!(matches!(new(vec![lit("a b")]), BadLiteral { part: 0, .. }));
        assert!(matches!(
            new(vec![lit("x"), lit("")]),
            BadLiteral { part: 1, .. }
        ));
        assert!(matches!(new(vec![lit("é")]), BadLiteral { .. }));
        assert_eq!(
            new(vec![class(CharClass::Hex, 3, 2)]),
            BadRepeat {
                part: 0,
                min: 3,
                max: 2
            }
        );
        assert_eq!(
            new(vec![class(CharClass::Hex, 0, 0)]),
            BadRepeat {
                part: 0,
                min: 0,
                max: 0
            }
        );
        assert_eq!(
            new(vec![class(CharClass::Hex, 1, 65)]),
            BadRepeat {
                part: 0,
                min: 1,
                max: 65
            }
        );
        assert_eq!(
            new(vec![
                class(CharClass::Hex, 64, 64),
                class(CharClass::Hex, 64, 64)
            ]),
            TooLong { len: 128 }
        );
        assert_eq!(new(vec![lit(&"x".repeat(121))]), TooLong { len: 121 });
        assert!(TokenShape::new("t", vec![lit(&"x".repeat(120))]).is_ok());
    }

    #[test]
    fn the_encoding_holds_the_spec_and_is_checked_when_read() {
        let s = order();
        let j = serde_json::to_value(&s).unwrap();
        assert_eq!(
            j,
            serde_json::json!({"name": "order_id", "parts": [{"literal": "ORD-"}, {"class": {"class": "digit", "min": 6, "max": 6}}]})
        );
        assert_eq!(serde_json::from_value::<TokenShape>(j).unwrap(), s);
        let bad = serde_json::json!({"name": "x", "parts": [{"class": {"class": "digit", "min": 0, "max": 2}}]});
        let err = serde_json::from_value::<TokenShape>(bad)
            .unwrap_err()
            .to_string();
        assert!(err.contains("empty text"), "{err}");
    }

    /// A naive matcher: every split of the text against the expanded
    /// positions, by recursion (exponential, fine for short inputs).
    fn naive_whole(parts: &[ShapePart], t: &[u8]) -> bool {
        match parts.split_first() {
            None => t.is_empty(),
            Some((ShapePart::Literal(l), rest)) => {
                t.starts_with(l.as_bytes()) && naive_whole(rest, &t[l.len()..])
            }
            Some((&ShapePart::Class { class, min, max }, rest)) => (min..=max).any(|n| {
                let n = n as usize;
                n <= t.len()
                    && t[..n].iter().all(|&b| class.matches(b))
                    && naive_whole(rest, &t[n..])
            }),
        }
    }

    proptest! {
        /// The bit-set matcher accepts a whole text exactly when the naive
        /// one does, and every token found is a whole match.
        #[test]
        fn matcher_agrees_with_a_naive_one(
            parts in proptest::collection::vec(
                prop_oneof![
                    "[A-Z-]{1,2}".prop_map(ShapePart::Literal),
                    (0usize..6, 0u32..3, 0u32..3).prop_map(|(c, min, extra)| {
                        ShapePart::Class { class: CharClass::ALL[c], min, max: (min + extra).max(1) }
                    }),
                ],
                1..4,
            ),
            texts in proptest::collection::vec("[A-Fa-f0-9Z -]{0,10}", 1..6),
        ) {
            let Ok(s) = TokenShape::new("t", parts.clone()) else { return Ok(()); };
            for t in &texts {
                prop_assert_eq!(s.matches_whole(t), naive_whole(&parts, t.as_bytes()), "{:?} on {:?}", parts, t);
                for (a, b) in s.find(t) {
                    prop_assert!(naive_whole(&parts, &t.as_bytes()[a..b]));
                    prop_assert!(a == 0 || is_boundary(t.as_bytes().get(a - 1)));
                    prop_assert!(is_boundary(t.as_bytes().get(b)));
                }
            }
        }
    }
}
