//! Provenance by value: how argument values are compared with the words of
//! a task text or a tool output (`docs/semantics.md`, "Provenance by value").
//!
//! A value is compared whole, never as a substring of a word: the text is
//! cut into words at whitespace and at `, ; ( ) [ ] { } " ' < >`, trailing
//! `. : ! ?` are dropped, and each word and each value is put in a
//! canonical form:
//!
//! * e-mail addresses (a word with one `@`): lower case, `mailto:` removed;
//! * URLs (`http://`, `https://`): scheme and host in lower case, the
//!   default port and one trailing `/` removed (`crate::tokens`);
//! * IBANs (two letters, two digits, 11–30 letters or digits; in text also
//!   written in groups separated by spaces): upper case without spaces;
//! * numbers: exact decimals (`98.70` is `98.7`), apart from strings;
//! * anything else: as written (case matters).
//!
//! Two sentences glued without a space (`www.our-company.com.They`) are
//! read both ways: a word in which `.`, `!` or `?` follows a letter or digit
//! and comes before an upper-case letter is indexed whole and also as its
//! parts on either side of each such mark (one-word values find the parts;
//! phrases match whole words).
//!
//! A value with whitespace inside (a name, a subject line) occurs in a text
//! when its words occur there in a row, compared without letter case
//! (`Family Reunion` occurs in `the family reunion`): several words are
//! prose, where capitals are style. A one-word value is an identifier, a
//! code or a name, where case can matter, so it keeps its case.

use crate::fields::OutputLabels;
pub use crate::policy::ProvenanceMode;
use crate::tokens::{
    glued_parts, has_separator, is_ascii_separator, is_separator, looks_like_iban,
    looks_like_iban_start,
};
use crate::value::{Decimal, Value};
use std::borrow::Cow;

/// The most words indexed per output; an untrusted output beyond it turns
/// the trusted-output rule off for the session (it could hide a value).
pub const MAX_OUTPUT_WORDS: usize = 100_000;

/// The words of a text, as written (trailing sentence punctuation removed).
pub fn words(text: &str) -> Words<'_> {
    Words { rest: Some(text) }
}

/// The iterator of [`words`]: the text is cut at each separator (ASCII
/// bytes by table, other characters by [`is_separator`]), lazily, so a
/// lookup that stops at its first word reads no further.
pub struct Words<'a> {
    /// What is left to cut (`None` once the last piece is given).
    rest: Option<&'a str>,
}

impl<'a> Iterator for Words<'a> {
    type Item = &'a str;

    #[inline]
    fn next(&mut self) -> Option<&'a str> {
        loop {
            let text = self.rest?;
            let (piece, after) = match separator_at(text) {
                Some((at, len)) => (&text[..at], Some(&text[at + len..])),
                None => (text, None),
            };
            self.rest = after;
            let w = trim_sentence_end(piece);
            if !w.is_empty() {
                return Some(w);
            }
        }
    }
}

/// `w` without trailing `. : ! ?` (as `trim_end_matches` of those four
/// characters; they are ASCII, so cutting bytes keeps characters whole).
#[inline]
fn trim_sentence_end(w: &str) -> &str {
    let mut end = w.len();
    while end > 0 && matches!(w.as_bytes()[end - 1], b'.' | b':' | b'!' | b'?') {
        end -= 1;
    }
    &w[..end]
}

/// The first separator of `text`: its byte offset and length.
#[inline]
fn separator_at(text: &str) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b.is_ascii() {
            if is_ascii_separator(b) {
                return Some((i, 1));
            }
            i += 1;
        } else {
            // `i` starts a character: every byte before it was ASCII or a
            // whole character.
            let c = text.get(i..)?.chars().next()?;
            if is_separator(c) {
                return Some((i, c.len_utf8()));
            }
            i += c.len_utf8();
        }
    }
    None
}

/// The canonical form of one word or string value (see the module doc).
pub fn canonical(word: &str) -> String {
    canonical_cow(word).into_owned()
}

/// [`canonical`], borrowing `word` (trimmed) when its canonical form is
/// itself, as it is for most words: no allocation on the common case, and
/// no scan beyond a few bytes unless the word has an `@`, a scheme, or the
/// shape of an IBAN.
pub fn canonical_cow(word: &str) -> Cow<'_, str> {
    let w = word.trim();
    let w = w.strip_prefix("mailto:").unwrap_or(w);
    let bytes = w.as_bytes();
    if bytes.iter().filter(|&&b| b == b'@').count() == 1 {
        if bytes.is_ascii() {
            // By bytes: ASCII white space is these six (`char::is_whitespace`).
            if !bytes
                .iter()
                .any(|b| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))
            {
                // Most addresses are written in lower case already: borrowed.
                return if bytes.iter().any(u8::is_ascii_uppercase) {
                    Cow::Owned(w.to_ascii_lowercase())
                } else {
                    Cow::Borrowed(w)
                };
            }
        } else if !w.contains(char::is_whitespace) {
            return Cow::Owned(w.to_lowercase());
        }
    }
    // One form per kind, shared with token tests (`crate::tokens`).
    if let Some(url) = crate::tokens::canonical_url_cow(w) {
        return url;
    }
    // An IBAN: two letters and two digits first, 15 to 34 characters
    // without spaces (at most 42 with the usual groups of four).
    if (15..=42).contains(&bytes.len())
        && bytes[..2].iter().all(u8::is_ascii_alphabetic)
        && bytes[2..4].iter().all(u8::is_ascii_digit)
    {
        let compact: String = w.chars().filter(|c| !c.is_whitespace()).collect();
        if looks_like_iban(&compact) {
            return Cow::Owned(compact.to_ascii_uppercase());
        }
    }
    Cow::Borrowed(w)
}

/// Whether `s` is one word that is its own canonical form, by one byte
/// scan: ASCII, no `@`, no separator, no trailing sentence punctuation, no
/// scheme or `mailto:`, not the start of an IBAN. Most argument values
/// are; `false` only sends a value to the general path (`canonical_cow`,
/// `is_one_word`), which gives the same answer for those that are.
#[inline]
fn is_plain_word(s: &str) -> bool {
    let b = s.as_bytes();
    let Some(&last) = b.last() else {
        return false;
    };
    let special = matches!(last, b'.' | b':' | b'!' | b'?')
        || (b.len() >= 15 && looks_like_iban_start(s))
        || (b.len() >= 4 && b[..4].eq_ignore_ascii_case(b"http"))
        || s.starts_with("mailto:");
    !special && b.iter().all(|&c| PLAIN_BYTE[usize::from(c)])
}

/// The bytes a plain word is made of: ASCII, neither `@` nor a separator.
const PLAIN_BYTE: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 128 {
        table[b] = b != b'@' as usize && !crate::tokens::is_separator_byte(b as u8);
        b += 1;
    }
    table
};

/// Whether a string is one word as `words` cuts text (no separator inside,
/// no trailing sentence punctuation).
#[inline]
fn is_one_word(s: &str) -> bool {
    let t = s.trim();
    !t.is_empty() && !has_separator(t) && !t.ends_with(['.', ':', '!', '?'])
}

/// What a word or value is compared by: its canonical form, or its exact
/// number (numbers are kept apart from strings).
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Key {
    /// A word (or one-word string value) in canonical form: e-mail
    /// addresses and URL schemes and hosts in lower case, IBANs compact and
    /// upper case, anything else exactly.
    Word(String),
    /// A number, compared by exact value (`980` equals `980.00`).
    Number(Decimal),
}

/// The keys under which a text's words are found: each word's canonical
/// form, each word that is a number as a number, and IBANs written in
/// groups of up to nine words.
pub fn text_keys(text: &str) -> Vec<Key> {
    let ws: Vec<&str> = words(text).collect();
    let mut keys = Vec::with_capacity(ws.len());
    let push_word = |keys: &mut Vec<Key>, w: &str| {
        keys.push(Key::Word(canonical(w)));
        if let Ok(d) = w.parse::<Decimal>() {
            keys.push(Key::Number(d));
        }
    };
    for (i, w) in ws.iter().enumerate() {
        push_word(&mut keys, w);
        for part in glued_parts(w).into_iter().flatten() {
            push_word(&mut keys, part);
        }
        // An IBAN printed in groups: `DE89 3704 0044 0532 0130 00`.
        if w.len() == 4 && looks_like_iban_start(w) {
            let mut compact = String::new();
            for part in ws.iter().skip(i).take(9) {
                compact.push_str(part);
                if looks_like_iban(&compact) {
                    keys.push(Key::Word(compact.to_ascii_uppercase()));
                }
            }
        }
    }
    keys
}

/// What a scalar argument is looked up by: `None` for values provenance
/// does not judge (booleans, null) and for strings that are not one word
/// (see `phrase`).
pub fn value_key(v: &Value) -> Option<Key> {
    match v {
        Value::Str(s) => {
            let c = canonical(s);
            (is_one_word(s) || looks_like_iban(&c)).then_some(Key::Word(c))
        }
        Value::Int(i) => Some(Key::Number(Decimal::from(*i))),
        Value::Decimal(d) => Some(Key::Number(*d)),
        // An object is never looked up by value: it keeps the context's
        // label (docs/semantics.md, "Objects").
        Value::Bool(_) | Value::Null | Value::List(_) | Value::Object(_) => None,
    }
}

/// A string value of several words (one `value_key` does not judge), as
/// the canonical words to find in a row.
pub fn phrase(v: &Value) -> Option<Vec<String>> {
    match v {
        Value::Str(s) if value_key(v).is_none() => phrase_words(s),
        _ => None,
    }
}

/// The phrase words of a string (`None` when it has none).
fn phrase_words(s: &str) -> Option<Vec<String>> {
    let ws = phrase_words_of(s);
    (!ws.is_empty()).then_some(ws)
}

/// How provenance looks a scalar up: by its key, or as a phrase of words.
pub enum Lookup {
    /// A one-word string or a number: found under this key (in task texts
    /// and outputs).
    Key(Key),
    /// A string of several words: found when these phrase words occur in
    /// a row in a task text (never in outputs).
    Phrase(Vec<String>),
    /// Booleans, `null`, empty strings: no provenance.
    Nothing,
}

/// `value_key`, else (when `phrases`) `phrase`, computing the canonical
/// form once.
pub fn lookup_of(v: &Value, phrases: bool) -> Lookup {
    lookup_known(v, phrases, |_| true)
}

/// [`lookup_of`], where a phrase none of whose words is `known` (in any
/// task text) is [`Lookup::Nothing`] at its first unknown word: it cannot
/// occur in a row in a task text, so its other words are never
/// canonicalised. The answer is the same whenever `known` holds for every
/// word of every task text.
pub fn lookup_known(v: &Value, phrases: bool, known: impl Fn(&str) -> bool) -> Lookup {
    match lookup_ref(v, phrases, |_| true, known) {
        LookupRef::Word(w) => Lookup::Key(Key::Word(w.into_owned())),
        LookupRef::Number(d) => Lookup::Key(Key::Number(d)),
        LookupRef::Phrase(ws) => Lookup::Phrase(ws),
        LookupRef::Nothing => Lookup::Nothing,
    }
}

/// [`Lookup`] with a one-word key borrowed from the value where its
/// canonical form is the value itself (the monitor probes its index with
/// it without allocating).
pub enum LookupRef<'a> {
    /// A one-word string, in canonical form.
    Word(Cow<'a, str>),
    /// A number.
    Number(Decimal),
    /// A string of several words (see [`Lookup::Phrase`]).
    Phrase(Vec<String>),
    /// No provenance (see [`Lookup::Nothing`]).
    Nothing,
}

/// [`lookup_known`], borrowing the key (the one implementation of both).
/// `maybe` is a cheap test with no false `false` (every word `known`
/// holds for, it holds for): a phrase with a word it rejects is given up
/// before `known` is asked of any word.
pub fn lookup_ref(
    v: &Value,
    phrases: bool,
    maybe: impl Fn(&str) -> bool,
    known: impl Fn(&str) -> bool,
) -> LookupRef<'_> {
    match v {
        Value::Str(s) if is_plain_word(s) => LookupRef::Word(Cow::Borrowed(s)),
        // Several words, and not an IBAN printed in groups: a phrase (the
        // general path below answers the same, after canonicalising the
        // whole text first, which a phrase never needs).
        Value::Str(s) if has_separator(s.trim()) && !may_be_grouped_iban(s) => {
            if phrases {
                phrase_ref(s, maybe, known)
            } else {
                LookupRef::Nothing
            }
        }
        Value::Str(s) => {
            let c = canonical_cow(s);
            if is_one_word(s) || looks_like_iban(&c) {
                LookupRef::Word(c)
            } else if phrases {
                phrase_ref(s, maybe, known)
            } else {
                LookupRef::Nothing
            }
        }
        other => match value_key(other) {
            Some(Key::Number(d)) => LookupRef::Number(d),
            Some(Key::Word(w)) => LookupRef::Word(Cow::Owned(w)),
            None => LookupRef::Nothing,
        },
    }
}

/// Whether `canonical_cow(s)` could be an IBAN although `s` has a
/// separator: only an IBAN written in groups (`DE89 3704 ...`) is, and
/// it starts as one and is 15 to 42 bytes long.
#[inline]
fn may_be_grouped_iban(s: &str) -> bool {
    let w = s.trim();
    let w = w.strip_prefix("mailto:").unwrap_or(w);
    (15..=42).contains(&w.len()) && looks_like_iban_start(w)
}

/// The phrase words of `s` if every one is `known`, else
/// [`LookupRef::Nothing`] at the first that is not. Nothing is allocated
/// unless every word is known (a phrase that occurs in a task text).
fn phrase_ref(
    s: &str,
    maybe: impl Fn(&str) -> bool,
    known: impl Fn(&str) -> bool,
) -> LookupRef<'_> {
    let mut any = false;
    let all_maybe = words(s).all(|w| {
        any = true;
        with_phrase_word(w, &maybe)
    });
    if !any || !all_maybe {
        return LookupRef::Nothing;
    }
    if !words(s).all(|w| with_phrase_word(w, &known)) {
        return LookupRef::Nothing;
    }
    LookupRef::Phrase(words(s).map(phrase_word).collect())
}

/// The words of a text as phrases compare them, in order: each word in
/// canonical form and then in lower case, so a phrase is found whatever
/// its words' case. (Glued sentences are not cut here: their parts are
/// extra one-word keys, and a phrase is a sequence of whole words.)
pub fn phrase_words_of(text: &str) -> Vec<String> {
    words(text).map(phrase_word).collect()
}

/// One word as phrases compare it (in place for ASCII: no second
/// allocation on the common case).
fn phrase_word(w: &str) -> String {
    let mut c = canonical(w);
    if c.is_ascii() {
        c.make_ascii_lowercase();
        c
    } else {
        c.to_lowercase()
    }
}

/// Calls `f` with [`phrase_word`]`(w)`, built on the stack for an ASCII
/// word of up to 64 bytes (most words).
fn with_phrase_word<R>(w: &str, f: impl FnOnce(&str) -> R) -> R {
    // A plain word is its own canonical form: no canonicalising scan; in
    // lower case already (most words of prose), it is its phrase word.
    let c = if is_plain_word(w) {
        if !w.bytes().any(|b| b.is_ascii_uppercase()) {
            return f(w);
        }
        Cow::Borrowed(w)
    } else {
        canonical_cow(w)
    };
    let mut buf = [0u8; 64];
    if let Some(b) = buf.get_mut(..c.len()).filter(|_| c.is_ascii()) {
        b.copy_from_slice(c.as_bytes());
        b.make_ascii_lowercase();
        if let Ok(lower) = std::str::from_utf8(b) {
            return f(lower);
        }
    }
    f(&phrase_word(w))
}

/// Whether `phrase` occurs as consecutive words of `text`.
pub fn text_has_phrase(text: &str, phrase: &[String]) -> bool {
    !phrase.is_empty()
        && phrase_words_of(text)
            .windows(phrase.len())
            .any(|w| w == phrase)
}

/// Whether a scalar is *short*: a number of at most two digits (`13`,
/// `7`, `2.5`) or a one-word string of at most two characters. Short
/// values occur by chance in any text (`13` in "June 13"), so they confer
/// trust by value only under [`ProvenanceMode::Exact`].
#[inline]
pub fn is_short(v: &Value) -> bool {
    match v {
        // Three bytes or more between ASCII non-blank ends: nothing to
        // trim, and at least three characters (the ends are one each, the
        // middle at least one): not short, at one look (most strings).
        Value::Str(s)
            if s.len() > 2
                && s.as_bytes()[0].is_ascii_graphic()
                && s.as_bytes()[s.len() - 1].is_ascii_graphic() =>
        {
            false
        }
        Value::Str(s) => {
            let t = s.trim();
            t.chars().nth(2).is_none() && is_one_word(t)
        }
        Value::Int(i) => i.unsigned_abs() <= 99,
        Value::Decimal(d) => d.has_at_most_two_digits(),
        Value::Bool(_) | Value::Null | Value::List(_) | Value::Object(_) => false,
    }
}

/// Whether a scalar is one typed token: an e-mail address, a URL or an
/// IBAN (in the canonical forms of this module). A URL is what token
/// tests read as one (`crate::tokens`): with `http://`/`https://`, or a
/// link without a scheme that starts with `www.`.
pub fn is_token(v: &Value) -> bool {
    let Value::Str(s) = v else {
        return false;
    };
    let c = canonical(s);
    if c.contains(char::is_whitespace) {
        return false;
    }
    let www = c.len() > 4 && c.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("www."));
    c.bytes().filter(|&b| b == b'@').count() == 1
        || c.starts_with("http://")
        || c.starts_with("https://")
        || www
        || looks_like_iban(&c)
}

/// Whether a parameter in `mode` may take its label by value from `v`:
/// every scalar of it (each element of a list) must be admitted
/// (`docs/semantics.md`, "Per-parameter provenance"). The monitor and the
/// reference both ask this before looking the value up.
#[inline]
pub fn admits(mode: ProvenanceMode, v: &Value) -> bool {
    let one = |s: &Value| match mode {
        ProvenanceMode::Off => false,
        ProvenanceMode::Exact => true,
        ProvenanceMode::Words => !is_short(s),
        ProvenanceMode::Tokens => is_token(s),
    };
    mode != ProvenanceMode::Off && v.scalars().iter().all(one)
}

/// The keys of every word in a tool output (string leaves and numbers,
/// recursively; object keys are field names, not data, and are skipped).
pub fn output_keys(output: &serde_json::Value, out: &mut Vec<Key>) {
    match output {
        serde_json::Value::String(_) | serde_json::Value::Number(_) => leaf_keys(output, out),
        serde_json::Value::Array(items) => items.iter().for_each(|i| output_keys(i, out)),
        serde_json::Value::Object(m) => m.values().for_each(|v| output_keys(v, out)),
        serde_json::Value::Bool(_) | serde_json::Value::Null => {}
    }
}

/// [`output_keys`] with the declared field each key occurs in (`None`:
/// the output's label applies; `docs/semantics.md`, "Per-field output
/// labels"), in the same order as [`output_keys`].
pub fn labelled_output_keys(
    output: &serde_json::Value,
    labels: &OutputLabels,
    out: &mut Vec<(Key, Option<usize>)>,
) {
    let mut keys = Vec::new();
    labels.walk(output, &mut |leaf, field| {
        keys.clear();
        leaf_keys(leaf, &mut keys);
        out.extend(keys.drain(..).map(|k| (k, field)));
    });
}

/// The keys of one string or number leaf.
fn leaf_keys(leaf: &serde_json::Value, out: &mut Vec<Key>) {
    match leaf {
        serde_json::Value::String(s) => out.extend(text_keys(s)),
        serde_json::Value::Number(n) => {
            if let Some(Value::Int(i)) = Value::from_json(leaf) {
                out.push(Key::Number(Decimal::from(i)));
            } else if let Some(d) = Decimal::from_json_number(n) {
                out.push(Key::Number(d));
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn has(text: &str, v: Value) -> bool {
        let keys = text_keys(text);
        match value_key(&v) {
            Some(k) => keys.contains(&k),
            None => phrase(&v).is_some_and(|p| text_has_phrase(text, &p)),
        }
    }

    #[test]
    fn whole_words_only() {
        let task =
            "Send the report to Alice@Example.com, then pay 98.70 to DE89 3704 0044 0532 0130 00.";
        assert!(has(task, Value::Str("alice@example.com".into())));
        assert!(has(task, Value::Str("mailto:ALICE@example.com".into())));
        assert!(!has(task, Value::Str("lice@example.com".into())));
        assert!(!has(task, Value::Str("example".into())));
        assert!(has(task, Value::Str("report".into())));
        assert!(!has(task, Value::Str("Report".into())));
        assert!(has(task, Value::Decimal("98.7".parse().unwrap())));
        assert!(!has(task, Value::Decimal("98.71".parse().unwrap())));
        assert!(has(task, Value::Str("DE89370400440532013000".into())));
        assert!(has(task, Value::Str("de89 3704 0044 0532 0130 00".into())));
        assert!(!has(task, Value::Str("DE89370400440532013001".into())));
        assert!(has(task, Value::Str("the report".into())));
        assert!(!has(task, Value::Str("the reports".into())));
        assert!(!has(task, Value::Bool(true)));
    }

    #[test]
    fn short_values_and_tokens() {
        use crate::policy::ProvenanceMode as M;
        let d = |t: &str| Value::Decimal(t.parse().expect("a decimal"));
        let s = |t: &str| Value::Str(t.into());
        for v in [
            Value::Int(13),
            Value::Int(-99),
            d("2.5"),
            d("9.90"),
            s("ab"),
            s(" x "),
        ] {
            assert!(is_short(&v), "{v}");
        }
        for v in [
            Value::Int(100),
            d("0.05"),
            d("13.5"),
            s("abc"),
            s("a b"),
            Value::Bool(true),
        ] {
            assert!(!is_short(&v), "{v}");
        }
        assert!(is_token(&s("Bob@Corp.com")) && is_token(&s("HTTPS://x.org/a")));
        assert!(is_token(&s("DE89 3704 0044 0532 0130 00")));
        assert!(!is_token(&s("report")) && !is_token(&Value::Int(5)) && !is_token(&s("a@b c")));
        // A link without a scheme is a URL, as token tests read one.
        assert!(is_token(&s("www.our-company.com")) && is_token(&s("WWW.x.org/a")));
        assert!(!is_token(&s("www.")) && !is_token(&s("www.x.org and more")));
        let list = Value::List(vec![s("bob@corp.com"), s("13")]);
        assert!(admits(M::Exact, &list) && !admits(M::Words, &list) && !admits(M::Tokens, &list));
        assert!(!admits(M::Off, &s("bob@corp.com")) && admits(M::Tokens, &s("bob@corp.com")));
        assert!(admits(M::Words, &Value::Int(4711)) && !admits(M::Words, &Value::Int(13)));
    }

    #[test]
    fn urls_compare_by_scheme_host_and_path() {
        let t = "open HTTPS://Docs.RS/serde/ and https://example.com/";
        assert!(has(t, Value::Str("https://docs.rs/serde/".into())));
        assert!(has(t, Value::Str("https://example.com".into())));
        assert!(!has(t, Value::Str("https://docs.rs/Serde/".into())));
    }

    #[test]
    fn outputs_are_searched_in_every_leaf() {
        let out = serde_json::json!({"contacts": [{"email": "bob@corp.com", "n": 3}], "note": "pay 12.50"});
        let mut keys = Vec::new();
        output_keys(&out, &mut keys);
        assert!(keys.contains(&value_key(&Value::Str("bob@corp.com".into())).unwrap()));
        assert!(keys.contains(&value_key(&Value::Int(3)).unwrap()));
        assert!(keys.contains(&value_key(&Value::Decimal("12.5".parse().unwrap())).unwrap()));
        assert!(!keys.contains(&Key::Word("contacts".to_string())));
    }

    #[test]
    fn words_are_cut_at_separators_and_sentence_ends() {
        let ws: Vec<&str> = words("a,b;(c) [d] {e} \"f\" 'g' <h> i. j?! k:  ").collect();
        assert_eq!(ws, ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"]);
        assert_eq!(words("x-y/z").collect::<Vec<_>>(), ["x-y/z"]);
        assert_eq!(words(" . ").count(), 0);
        assert_eq!(phrase_words_of("Hi, Bob!"), ["hi", "bob"]);
        assert!(phrase_words_of("  ").is_empty());
    }

    #[test]
    fn canonical_forms_of_short_and_odd_words() {
        // Short words: no e-mail, URL or IBAN shape to look at.
        for w in ["a", "ab", "abc", "x1", "http", "DE8", "AB12"] {
            assert_eq!(canonical(w), w);
        }
        // Only a word with exactly one `@` and no space is an address.
        assert_eq!(canonical("A@B@C"), "A@B@C");
        assert_eq!(canonical("Meet @ Noon"), "Meet @ Noon");
        assert_eq!(canonical("mailto:Bob@X.org"), "bob@x.org");
        assert_eq!(canonical("HTTP://A.B/C/"), "http://a.b/C");
        assert_eq!(canonical("https://A.B:443/c"), "https://a.b/c");
        assert_eq!(canonical("http://A.B:443/c"), "http://a.b:443/c");
        assert_eq!(canonical("https://A.B/"), "https://a.b");
        assert_eq!(canonical("httpx://A.B"), "httpx://A.B");
        // Too short for an IBAN once the spaces are gone: kept as written.
        assert_eq!(canonical("de89 3704 0044 0"), "de89 3704 0044 0");
        assert_eq!(
            canonical("de89 3704 0044 0532 0130 00"),
            "DE89370400440532013000"
        );
        // IBAN-like length and head but not alphanumeric.
        assert_eq!(canonical("DE89-3704-0044-05"), "DE89-3704-0044-05");
        assert_eq!(
            canonical("D189370400440532013000"),
            "D189370400440532013000"
        );
        assert_eq!(
            canonical("DEX9370400440532013000"),
            "DEX9370400440532013000"
        );
    }

    #[test]
    fn grouped_ibans_are_found_only_whole() {
        let keys = text_keys("pay de89 3704 0044 0532 0130 00 now");
        assert!(keys.contains(&Key::Word("DE89370400440532013000".into())));
        assert!(keys.contains(&Key::Word("de89".into())));
        assert!(keys.contains(&Key::Number(Decimal::from(3704))));
        for part in ["DE89", "DE893704", "DE8937040044"] {
            assert!(!keys.contains(&Key::Word(part.into())), "{part}");
        }
        // Four characters that do not start an IBAN start no group.
        let keys = text_keys("abcd 3704 0044 0532 0130 0000 x");
        assert!(!keys
            .iter()
            .any(|k| matches!(k, Key::Word(w) if w.starts_with("ABCD"))));
        let keys = text_keys("a1b2 3704 0044 0532 0130 00");
        assert!(!keys
            .iter()
            .any(|k| matches!(k, Key::Word(w) if w.starts_with("A1B2"))));
        let keys = text_keys("12ab 3704 0044 0532 0130 00");
        assert!(!keys
            .iter()
            .any(|k| matches!(k, Key::Word(w) if w.starts_with("12AB"))));
        // Words of other lengths are never an IBAN's first group.
        assert_eq!(
            text_keys("a bc"),
            vec![Key::Word("a".into()), Key::Word("bc".into())]
        );
    }

    #[test]
    fn values_are_keys_phrases_or_nothing() {
        let s = |t: &str| Value::Str(t.into());
        assert_eq!(value_key(&s("Bob")), Some(Key::Word("Bob".into())));
        assert_eq!(value_key(&s("Bob Smith")), None);
        assert_eq!(value_key(&s("done.")), None);
        assert_eq!(value_key(&s("")), None);
        assert_eq!(value_key(&s("  ")), None);
        assert_eq!(
            value_key(&s("DE89 3704 0044 0532 0130 00")),
            Some(Key::Word("DE89370400440532013000".into()))
        );
        assert_eq!(value_key(&Value::Null), None);
        assert_eq!(
            phrase(&s("Bob  Smith")),
            Some(vec!["bob".to_string(), "smith".to_string()])
        );
        assert_eq!(phrase(&s("Bob")), None);
        assert_eq!(phrase(&s(" , ")), None);
        assert_eq!(phrase(&Value::Int(3)), None);
        assert!(matches!(lookup_of(&s("Bob"), true), Lookup::Key(Key::Word(w)) if w == "Bob"));
        assert!(matches!(
            lookup_of(&s("de89 3704 0044 0532 0130 00"), false),
            Lookup::Key(Key::Word(w)) if w == "DE89370400440532013000"
        ));
        assert!(matches!(lookup_of(&s("Bob Smith"), true), Lookup::Phrase(p) if p.len() == 2));
        assert!(matches!(lookup_of(&s("Bob Smith"), false), Lookup::Nothing));
        assert!(matches!(lookup_of(&s(" ; "), true), Lookup::Nothing));
        assert!(matches!(
            lookup_of(&Value::Int(2), true),
            Lookup::Key(Key::Number(_))
        ));
        assert!(matches!(
            lookup_of(&Value::Bool(true), true),
            Lookup::Nothing
        ));
    }

    #[test]
    fn a_phrase_with_a_word_no_task_has_stops_at_that_word() {
        let s = |t: &str| Value::Str(t.into());
        let task: std::collections::HashSet<String> =
            phrase_words_of("the Family reunion").into_iter().collect();
        let known = |w: &str| task.contains(w);
        assert!(matches!(
            lookup_known(&s("family Reunion"), true, known),
            Lookup::Phrase(p) if p == ["family", "reunion"]
        ));
        assert!(matches!(
            lookup_known(&s("family picnic"), true, known),
            Lookup::Nothing
        ));
        // One-word values and numbers do not consult `known`.
        assert!(matches!(
            lookup_known(&s("zzz"), true, |_| false),
            Lookup::Key(_)
        ));
        assert!(matches!(
            lookup_known(&Value::Int(4711), true, |_| false),
            Lookup::Key(Key::Number(_))
        ));
    }

    #[test]
    fn glued_sentences_are_read_both_ways() {
        let t = "post them to www.our-company.com.They sent 980.Then? Ok!Go";
        for found in [
            "www.our-company.com",
            "They",
            "www.our-company.com.They",
            "Ok",
            "Go",
        ] {
            assert!(has(t, Value::Str(found.into())), "{found}");
        }
        assert!(has(t, Value::Int(980)));
        // The parts are extra one-word keys; phrases keep whole words.
        assert!(has(t, Value::Str("www.our-company.com.They sent".into())));
        assert!(!has(t, Value::Str("to www.our-company.com".into())));
        // A dot before a lower-case letter or after a mark glues nothing.
        for missing in ["www", "our-company", "com", "our-company.com"] {
            assert!(!has(t, Value::Str(missing.into())), "{missing}");
        }
        assert_eq!(glued_parts("a.b"), None);
        assert_eq!(glued_parts(".B"), None);
        assert_eq!(glued_parts("a..B"), None);
        assert_eq!(glued_parts("a!?B"), None);
        assert_eq!(glued_parts("x.B"), Some(vec!["x", "B"]));
        assert_eq!(glued_parts("Why?Because"), Some(vec!["Why", "Because"]));
        assert_eq!(glued_parts("a:B"), None);
        assert_eq!(glued_parts("U.S.A"), Some(vec!["U", "S", "A"]));
        assert_eq!(glued_parts("é!Élan"), Some(vec!["é", "Élan"]));
        assert_eq!(glued_parts("a.B."), Some(vec!["a", "B."]));
    }

    #[test]
    fn phrases_ignore_case_and_one_words_do_not() {
        let t = "Create an event for the family reunion, based on the mails.";
        assert!(has(t, Value::Str("Family Reunion".into())));
        assert!(has(t, Value::Str("FAMILY REUNION".into())));
        assert!(!has(t, Value::Str("Family Reunions".into())));
        assert!(has(t, Value::Str("family".into())));
        assert!(!has(t, Value::Str("Family".into())));
        assert!(has(
            "Treffen in München heute",
            Value::Str("TREFFEN IN MÜNCHEN".into())
        ));
        assert!(!has(
            "Treffen in Munchen heute",
            Value::Str("Treffen in München".into())
        ));
        // Canonical first: an address in a phrase, whatever its case.
        assert!(has(
            "mail Bob@Corp.com today",
            Value::Str("mail bob@corp.COM".into())
        ));
    }

    #[test]
    fn phrases_occur_as_consecutive_words() {
        let p = |t: &str| phrase_words_of(t);
        assert!(text_has_phrase("to Bob Smith, today", &p("Bob Smith")));
        assert!(!text_has_phrase("to Bob and Smith", &p("Bob Smith")));
        assert!(!text_has_phrase("to Smith Bob", &p("Bob Smith")));
        assert!(!text_has_phrase("anything", &[]));
        assert!(!text_has_phrase("", &p("Bob")));
    }

    /// The byte-scan fast path answers as the general one: a plain word
    /// is its own canonical form and one word, and the plain words named
    /// here (an id, a code) take the fast path.
    #[test]
    fn plain_words_are_their_own_canonical_form() {
        for w in ["acct-0012", "USD", "/data/2/345", "agent-3", "INV-77", "q3"] {
            assert!(is_plain_word(w), "{w}");
        }
        for w in [
            "",
            "a b",
            "end.",
            "x@y.z",
            "http://a",
            "HTTPS://A.b",
            "mailto:x",
            "DE89370400440532013000",
            "Bob,",
            "München",
        ] {
            assert!(!is_plain_word(w), "{w}");
        }
    }

    proptest::proptest! {
        /// The phrase word built on the stack is `phrase_word`'s, for
        /// words of any case, script and length (beyond the 64-byte buffer).
        #[test]
        fn stack_phrase_words_are_phrase_words(
            w in "(mailto:|https?://|HTTP://)?[a-zA-Z0-9@.:/éÉ-]{0,80}"
        ) {
            let stack = with_phrase_word(&w, str::to_string);
            proptest::prop_assert_eq!(stack, phrase_word(&w));
        }

        /// The lazy cutter gives the words `split` gave, for texts of any
        /// script and separators (Unicode spaces included).
        #[test]
        fn words_are_cut_as_split_cut_them(
            text in "[a-zA-Z0-9 .,:;!?()\\[\\]{}\"'<>\t\n@/é\u{a0}\u{2003}\u{3000}-]{0,60}"
        ) {
            let split: Vec<&str> = text
                .split(is_separator)
                .map(|w| w.trim_end_matches(['.', ':', '!', '?']))
                .filter(|w| !w.is_empty())
                .collect();
            proptest::prop_assert_eq!(words(&text).collect::<Vec<_>>(), split);
        }

        /// Trailing sentence marks are cut as `trim_end_matches` cuts
        /// them; a string's shortness is decided as by trimming and
        /// counting characters, with or without the long-string shortcut.
        #[test]
        fn sentence_ends_and_shortness_as_defined(w in "[ a-z.:!?é\u{a0}\t]{0,12}") {
            proptest::prop_assert_eq!(trim_sentence_end(&w), w.trim_end_matches(['.', ':', '!', '?']));
            let t = w.trim();
            let short = t.chars().nth(2).is_none() && is_one_word(t);
            proptest::prop_assert_eq!(is_short(&Value::Str(w.clone())), short);
        }

        /// The canonical form by byte scans is the one of the definition
        /// (addresses of any case and script, white space of any kind).
        #[test]
        fn canonical_forms_by_bytes_are_the_defined_ones(
            w in "(mailto:)?[a-zA-Z0-9@. \t\u{b}\u{c}\u{a0}éÉ/:]{0,30}|[a-zA-Z]{1,5}[ \t\u{b}\u{c}\u{a0}]?[a-zA-Zé]{0,5}@[a-zA-Z.]{1,8}"
        ) {
            let defined = {
                let t = w.trim();
                let t = t.strip_prefix("mailto:").unwrap_or(t);
                if t.matches('@').count() == 1 && !t.contains(char::is_whitespace) {
                    Some(t.to_lowercase())
                } else {
                    None
                }
            };
            let t = w.trim();
            let t = t.strip_prefix("mailto:").unwrap_or(t);
            match defined {
                Some(d) => proptest::prop_assert_eq!(canonical(&w), d),
                // Not an address (white space inside, or not one `@`),
                // not a link, not an IBAN (it has an `@`): as written.
                None if t.contains('@') && !t.to_ascii_lowercase().starts_with("http") => {
                    proptest::prop_assert_eq!(canonical(&w), t)
                }
                None => {}
            }
        }

        /// The lookup with its shortcuts (plain words, phrases sent to
        /// the phrase path before canonicalising, phrase words checked
        /// before any is copied) answers as the general definition: the
        /// whole value's canonical form, else its phrase words if each is
        /// known. `known` holds for words of even length, so both outcomes
        /// of a phrase are reached.
        #[test]
        fn lookups_agree_with_the_general_definition(
            s in "(mailto:|https?://|HTTP://|DE89|de89 )?[a-zA-Z0-9 .,:;/@!?()é-]{0,44}|(mailto:)?[A-Za-z]{2}[0-9]{2}( [A-Za-z0-9]{4}){1,9}( [A-Za-z0-9,]{1,4})?[ .]?",
            phrases in proptest::bool::ANY,
        ) {
            let known = |w: &str| w.len() & 1 == 0;
            let general = {
                let c = canonical(&s);
                if is_one_word(&s) || looks_like_iban(&c) {
                    Lookup::Key(Key::Word(c))
                } else if !phrases {
                    Lookup::Nothing
                } else {
                    let ws = phrase_words_of(&s);
                    if !ws.is_empty() && ws.iter().all(|w| known(w)) {
                        Lookup::Phrase(ws)
                    } else {
                        Lookup::Nothing
                    }
                }
            };
            let fast = lookup_known(&Value::Str(s.clone()), phrases, known);
            let shown = |l: &Lookup| match l {
                Lookup::Key(k) => format!("key {k:?}"),
                Lookup::Phrase(ws) => format!("phrase {ws:?}"),
                Lookup::Nothing => "nothing".to_string(),
            };
            proptest::prop_assert_eq!(shown(&fast), shown(&general));
            // With a pre-test that lets more words through than `known`
            // (as the monitor's filter does), the answer is the same.
            let value = Value::Str(s.clone());
            let filtered = match lookup_ref(&value, phrases, |w| known(w) || w.len() % 3 == 0, known) {
                LookupRef::Word(w) => Lookup::Key(Key::Word(w.into_owned())),
                LookupRef::Number(d) => Lookup::Key(Key::Number(d)),
                LookupRef::Phrase(ws) => Lookup::Phrase(ws),
                LookupRef::Nothing => Lookup::Nothing,
            };
            proptest::prop_assert_eq!(shown(&filtered), shown(&general));
        }

        #[test]
        fn the_fast_path_agrees_with_the_general_one(
            s in "(mailto:|https?://|HTTP://|DE89)?[a-zA-Z0-9 .,:;/@!?()-]{0,40}"
        ) {
            // The general path answers `Word(canonical(s))` for a one-word
            // value: the fast one answers `Word(s)`.
            if is_plain_word(&s) {
                proptest::prop_assert_eq!(canonical(&s), s.clone());
                proptest::prop_assert!(is_one_word(&s));
            }
        }
    }
}
