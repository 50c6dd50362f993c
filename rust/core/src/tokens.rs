//! Typed tokens inside text: the URLs, e-mail addresses, IBANs, phone
//! numbers and numbers with a unit that a free-text argument carries, each
//! in one canonical form (`docs/semantics.md`, "Token provenance inside
//! text"). The reference, the monitor and the SMT engine all extract
//! tokens here, from arguments and from the texts they are compared with,
//! so a token is found in a source exactly when both extractions agree.
//!
//! Extraction is linear in the text: words are cut as provenance by value
//! cuts them (`crate::provenance::words`, glued sentences read both ways),
//! phone numbers are found by one byte scan.

use crate::decimal::Decimal;
pub use crate::token_shapes::TokenShape;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// The kinds of typed token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum TokenKind {
    /// `http://` or `https://` URLs.
    Url,
    /// E-mail addresses.
    Email,
    /// IBANs, also printed in groups of four.
    Iban,
    /// Phone numbers (starting with `+` or `0`, 9 to 15 digits).
    Phone,
    /// A number with a currency or a unit (`€50`, `10 kg`, `5%`).
    Quantity,
    /// A kind of a shape the policy declares: an index into
    /// [`Policy::token_shapes`](crate::Policy::token_shapes)
    /// (`crate::token_shapes`).
    Declared(u16),
}

impl TokenKind {
    /// Every built-in kind, in order.
    pub const ALL: [TokenKind; 5] = [
        TokenKind::Url,
        TokenKind::Email,
        TokenKind::Iban,
        TokenKind::Phone,
        TokenKind::Quantity,
    ];

    /// The keyword of the policy language (`url`, `email`, ...); a
    /// declared kind is named by its shape ([`TokenKind::name`]).
    pub fn keyword(self) -> &'static str {
        match self {
            TokenKind::Declared(_) => "declared",
            TokenKind::Url => "url",
            TokenKind::Email => "email",
            TokenKind::Iban => "iban",
            TokenKind::Phone => "phone",
            TokenKind::Quantity => "quantity",
        }
    }

    /// The kind a keyword names (`None` for `token` and anything else).
    pub fn from_keyword(w: &str) -> Option<TokenKind> {
        TokenKind::ALL.into_iter().find(|k| k.keyword() == w)
    }

    /// Its name: the keyword, or a declared kind's name in `shapes`.
    pub fn name(self, shapes: &[TokenShape]) -> &str {
        match self {
            TokenKind::Declared(i) => shapes.get(usize::from(i)).map_or("?", TokenShape::name),
            k => k.keyword(),
        }
    }
}

/// Where a token comes from: three classes that partition every token
/// (`docs/semantics.md`): a test names the classes it accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum TokenOrigin {
    /// It occurs in the text of a task of the session (the user typed it).
    Task,
    /// Not in a task; in a trusted output and in no untrusted output (and
    /// no untrusted output was too large to index).
    TrustedOutput,
    /// Neither: in an untrusted output, or nowhere at all (fail closed).
    Elsewhere,
}

/// One typed token in canonical form.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Token {
    /// Its kind.
    pub kind: TokenKind,
    /// Its canonical text (the same token always has the same text).
    pub text: String,
}

/// What judges a token's origin: the monitor's index, the reference's
/// naive search, or [`NoSources`].
pub trait TokenJudge {
    /// The class the token falls in now.
    fn origin(&self, token: &Token) -> TokenOrigin;

    /// The policy's declared token shapes, which arguments are cut with
    /// too (none by default).
    fn shapes(&self) -> &[TokenShape] {
        &[]
    }
}

/// A judge for a session that has read nothing: every token comes from
/// [`TokenOrigin::Elsewhere`]. Used by callers that evaluate conditions
/// without a session (they refuse token tests before: `verify`, `certify`).
pub struct NoSources;

impl TokenJudge for NoSources {
    fn origin(&self, _: &Token) -> TokenOrigin {
        TokenOrigin::Elsewhere
    }
}

/// Characters that end a word in addition to whitespace.
pub fn is_separator(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            ',' | ';' | '(' | ')' | '[' | ']' | '{' | '}' | '"' | '\'' | '<' | '>'
        )
}

/// [`is_separator`] for each ASCII byte, as a table.
const ASCII_SEPARATOR: [bool; 128] = {
    let mut table = [false; 128];
    let mut b = 0;
    while b < 128 {
        table[b] = is_separator_byte(b as u8);
        b += 1;
    }
    table
};

/// [`is_separator`] of an ASCII byte (`char::is_whitespace` of ASCII is
/// space, tab, newline, vertical tab, form feed and carriage return).
pub(crate) const fn is_separator_byte(b: u8) -> bool {
    matches!(
        b,
        b' ' | b'\t'
            | b'\n'
            | 0x0b
            | 0x0c
            | b'\r'
            | b','
            | b';'
            | b'('
            | b')'
            | b'['
            | b']'
            | b'{'
            | b'}'
            | b'"'
            | b'\''
            | b'<'
            | b'>'
    )
}

/// Whether `b` is an ASCII byte that is a separator.
#[inline]
pub fn is_ascii_separator(b: u8) -> bool {
    ASCII_SEPARATOR
        .get(usize::from(b))
        .copied()
        .unwrap_or(false)
}

/// Whether `s` holds a separator: one byte scan while it is ASCII.
#[inline]
pub fn has_separator(s: &str) -> bool {
    let bytes = s.as_bytes();
    match bytes
        .iter()
        .position(|&b| !b.is_ascii() || is_ascii_separator(b))
    {
        None => false,
        Some(i) if bytes[i].is_ascii() => true,
        // Every byte before `i` is ASCII: `i` starts a character.
        Some(i) => s.get(i..).is_some_and(|rest| rest.contains(is_separator)),
    }
}

/// The parts of a word that glues sentences together (see the module
/// doc), or `None` when it glues none (the common case: one byte scan, no
/// allocation).
pub fn glued_parts(w: &str) -> Option<Vec<&str>> {
    let is_glue = |i: usize| {
        matches!(w.as_bytes()[i], b'.' | b'!' | b'?')
            && w[..i]
                .chars()
                .next_back()
                .is_some_and(char::is_alphanumeric)
            && w[i + 1..].chars().next().is_some_and(char::is_uppercase)
    };
    let mut marks = (1..w.len()).filter(|&i| is_glue(i)).peekable();
    marks.peek()?;
    let mut parts = Vec::new();
    let mut start = 0;
    for i in marks {
        parts.push(&w[start..i]);
        start = i + 1;
    }
    parts.push(&w[start..]);
    Some(parts)
}

/// Whether a word without spaces has an IBAN's shape: two letters, two
/// digits, 11–30 letters or digits.
pub fn looks_like_iban(compact: &str) -> bool {
    let b = compact.as_bytes();
    (15..=34).contains(&b.len())
        && b[..2].iter().all(u8::is_ascii_alphabetic)
        && b[2..4].iter().all(u8::is_ascii_digit)
        && b[4..].iter().all(u8::is_ascii_alphanumeric)
}

/// Whether a four-character word can start an IBAN printed in groups.
pub fn looks_like_iban_start(w: &str) -> bool {
    let b = w.as_bytes();
    b.len() >= 4
        && b[..2].iter().all(u8::is_ascii_alphabetic)
        && b[2..4].iter().all(u8::is_ascii_digit)
}

/// Whether `w` starts with `prefix`, ignoring ASCII case.
fn starts_with_ignore_case(w: &str, prefix: &str) -> bool {
    w.len() >= prefix.len() && w.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

/// The canonical form of a URL word (`None` if it is not one): scheme and
/// host in lower case, the default port and one trailing `/` removed
/// (`https://a.b/x/` is `https://a.b/x`; the path keeps its case).
/// Provenance by value uses the same form.
pub fn canonical_url(w: &str) -> Option<String> {
    canonical_url_cow(w).map(Cow::into_owned)
}

/// [`canonical_url`], borrowing `w` when it is already in canonical form
/// (scheme and host in lower case, no default port): most links are.
pub fn canonical_url_cow(w: &str) -> Option<Cow<'_, str>> {
    for (scheme, port) in [("http://", ":80"), ("https://", ":443")] {
        if starts_with_ignore_case(w, scheme) {
            let rest = &w[scheme.len()..];
            let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let path = path.strip_suffix('/').unwrap_or(path);
            let canonical_host = host.strip_suffix(port).unwrap_or(host);
            if canonical_host.is_empty() {
                return None;
            }
            let as_is = w.starts_with(scheme)
                && canonical_host.len() == host.len()
                && !host.bytes().any(|b| b.is_ascii_uppercase());
            if as_is {
                return Some(Cow::Borrowed(&w[..scheme.len() + host.len() + path.len()]));
            }
            let host = canonical_host.to_ascii_lowercase();
            return Some(Cow::Owned(format!("{scheme}{host}{path}")));
        }
    }
    None
}

/// A link without a scheme (`www.evil.example/login`): the host in lower
/// case, one trailing `/` removed. It stays apart from the same link with
/// a scheme (which only makes a token test stricter: fail closed).
fn canonical_www(w: &str) -> Option<String> {
    if !starts_with_ignore_case(w, "www.") || w.len() <= 4 {
        return None;
    }
    let (host, path) = w.split_at(w.find('/').unwrap_or(w.len()));
    let path = path.strip_suffix('/').unwrap_or(path);
    Some(format!("{}{path}", host.to_ascii_lowercase()))
}

/// The canonical form of an e-mail word (`None` if it is not one).
fn canonical_email(w: &str) -> Option<String> {
    let w = if starts_with_ignore_case(w, "mailto:") {
        &w[7..]
    } else {
        w
    };
    let (local, domain) = w.split_once('@')?;
    let ok = !local.is_empty()
        && !domain.contains('@')
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.');
    ok.then(|| w.to_lowercase())
}

/// A currency symbol's or unit's code (`None` if `u` is not a unit).
fn unit_code(u: &str) -> Option<&'static str> {
    // Every unit is at most three bytes (`€` is three).
    if u.is_empty() || u.len() > 3 {
        return None;
    }
    const UNITS: [(&str, &str); 24] = [
        ("€", "EUR"),
        ("$", "USD"),
        ("£", "GBP"),
        ("eur", "EUR"),
        ("usd", "USD"),
        ("gbp", "GBP"),
        ("chf", "CHF"),
        ("jpy", "JPY"),
        ("%", "%"),
        ("kg", "kg"),
        ("g", "g"),
        ("km", "km"),
        ("m", "m"),
        ("l", "l"),
        ("ml", "ml"),
        ("h", "h"),
        ("min", "min"),
        ("s", "s"),
        ("kb", "KB"),
        ("mb", "MB"),
        ("gb", "GB"),
        ("tb", "TB"),
        ("mm", "mm"),
        ("cm", "cm"),
    ];
    UNITS
        .iter()
        .find(|(w, _)| w.eq_ignore_ascii_case(u))
        .map(|&(_, c)| c)
}

/// Whether a unit may also be written before the number (currencies).
fn is_currency(code: &str) -> bool {
    matches!(code, "EUR" | "USD" | "GBP" | "CHF" | "JPY")
}

/// A number as quantities write it: digits with an optional `.` decimal
/// part, thousands separated by `,` in groups of three.
fn quantity_number(w: &str) -> Option<Decimal> {
    // Most words are not numbers: one byte decides, nothing allocated.
    if !w.as_bytes().first().is_some_and(u8::is_ascii_digit) {
        return None;
    }
    let (int, frac) = w.split_once('.').unwrap_or((w, ""));
    if int.is_empty() || (w.contains('.') && frac.is_empty()) {
        return None;
    }
    let groups: Vec<&str> = int.split(',').collect();
    let grouped_ok = groups.len() == 1
        || (!groups[0].is_empty()
            && groups[0].len() <= 3
            && groups[1..].iter().all(|g| g.len() == 3));
    let digits_ok = groups.iter().all(|g| g.bytes().all(|b| b.is_ascii_digit()))
        && frac.bytes().all(|b| b.is_ascii_digit());
    if !grouped_ok || !digits_ok {
        return None;
    }
    let plain: String = int.chars().filter(|&c| c != ',').collect();
    let text = if frac.is_empty() {
        plain
    } else {
        format!("{plain}.{frac}")
    };
    text.parse().ok()
}

fn quantity(n: Decimal, code: &str) -> Token {
    Token {
        kind: TokenKind::Quantity,
        text: format!("{n} {code}"),
    }
}

/// A quantity written as one word: `50EUR`, `10kg`, `5%`, `€50`, `$1,000`.
fn glued_quantity(w: &str) -> Option<Token> {
    let digit_start = w.find(|c: char| c.is_ascii_digit())?;
    if digit_start > 0 {
        let code = unit_code(&w[..digit_start]).filter(|c| is_currency(c))?;
        return quantity_number(&w[digit_start..]).map(|n| quantity(n, code));
    }
    let unit_start = w.rfind(|c: char| c.is_ascii_digit())? + 1;
    let code = unit_code(&w[unit_start..])?;
    quantity_number(&w[..unit_start]).map(|n| quantity(n, code))
}

/// The words of a text as provenance by value cuts them
/// (`crate::provenance::words`), except that a `,` between two digits
/// stays inside the word (a thousands separator: `€1,000.50`).
fn words(text: &str) -> Vec<&str> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    for (i, c) in text.char_indices() {
        let thousands = c == ','
            && i > 0
            && b[i - 1].is_ascii_digit()
            && b.get(i + 1).is_some_and(u8::is_ascii_digit);
        if is_separator(c) && !thousands {
            out.push(&text[start..i]);
            start = i + c.len_utf8();
        }
    }
    out.push(&text[start..]);
    out.into_iter()
        .map(|w| w.trim_end_matches(['.', ':', '!', '?']))
        .filter(|w| !w.is_empty())
        .collect()
}

/// [`text_tokens`], then the tokens of each declared shape in `shapes`,
/// kind by kind (`crate::token_shapes`: exact text, found independently
/// of the built-in kinds).
pub fn text_tokens_with(text: &str, shapes: &[TokenShape], out: &mut Vec<Token>) {
    text_tokens(text, out);
    for (i, shape) in shapes.iter().enumerate() {
        // The policy holds at most u16::MAX shapes (`crate::validate`).
        let kind = TokenKind::Declared(u16::try_from(i).unwrap_or(u16::MAX));
        out.extend(shape.find(text).into_iter().map(|(a, b)| Token {
            kind,
            text: text[a..b].to_string(),
        }));
    }
}

/// Appends the typed tokens of a text, in order of occurrence (a token
/// may appear more than once); built-in kinds only.
pub fn text_tokens(text: &str, out: &mut Vec<Token>) {
    let ws = words(text);
    let mut skip_until = 0;
    for (i, &w) in ws.iter().enumerate() {
        for p in std::iter::once(w).chain(glued_parts(w).into_iter().flatten()) {
            word_tokens(p, out);
        }
        if i < skip_until {
            continue;
        }
        // Two-word quantities: `50 EUR`, `EUR 50`, `€ 50`.
        if let Some(&next) = ws.get(i + 1) {
            if let (Some(n), Some(code)) = (quantity_number(w), unit_code(next)) {
                out.push(quantity(n, code));
            } else if let (Some(code), Some(n)) = (
                unit_code(w).filter(|c| is_currency(c)),
                quantity_number(next),
            ) {
                out.push(quantity(n, code));
            }
        }
        // An IBAN printed in groups: every group four characters but the
        // last, the longest run that has an IBAN's shape.
        if w.len() == 4 && looks_like_iban_start(w) && !looks_like_iban(w) {
            let mut compact = String::new();
            let mut found = None;
            for (j, part) in ws.iter().enumerate().skip(i).take(9) {
                if part.len() > 4 || !part.bytes().all(|b| b.is_ascii_alphanumeric()) {
                    break;
                }
                compact.push_str(part);
                if looks_like_iban(&compact) {
                    found = Some((compact.to_ascii_uppercase(), j));
                }
                if part.len() < 4 {
                    break;
                }
            }
            if let Some((iban, j)) = found {
                out.push(Token {
                    kind: TokenKind::Iban,
                    text: iban,
                });
                skip_until = j + 1;
            }
        }
    }
    phone_tokens(text, out);
}

/// The tokens of one word: a URL, an e-mail address, a one-word IBAN or a
/// one-word quantity.
fn word_tokens(w: &str, out: &mut Vec<Token>) {
    let token = |kind, text| Token { kind, text };
    if let Some(u) = canonical_url(w).or_else(|| canonical_www(w)) {
        out.push(token(TokenKind::Url, u));
    } else if let Some(e) = canonical_email(w) {
        out.push(token(TokenKind::Email, e));
    } else if looks_like_iban(w) {
        out.push(token(TokenKind::Iban, w.to_ascii_uppercase()));
    } else if let Some(q) = glued_quantity(w) {
        out.push(q);
    }
}

/// Phone numbers: a run starting with `+` or `0` after a boundary, of
/// digits with single spaces, `-`, `/`, `(`, `)` between them, 9 to 15
/// digits, not followed by a letter or digit: `+` and the digits.
fn phone_tokens(text: &str, out: &mut Vec<Token>) {
    let b = text.as_bytes();
    let boundary =
        |i: usize| i == 0 || b[i - 1].is_ascii_whitespace() || b"([{\"'<,;:".contains(&b[i - 1]);
    let mut i = 0;
    while i < b.len() {
        let starts = (b[i] == b'+' && b.get(i + 1).is_some_and(u8::is_ascii_digit))
            || b[i] == b'0'
            || (b[i] == b'(' && b.get(i + 1) == Some(&b'0'));
        if !starts || !boundary(i) {
            i += 1;
            continue;
        }
        let mut digits = String::new();
        let mut end = i;
        let mut j = i + usize::from(b[i] == b'+');
        while j < b.len() {
            match b[j] {
                d if d.is_ascii_digit() => {
                    digits.push(char::from(d));
                    end = j + 1;
                }
                b'-' | b'/' | b'(' | b')' => {}
                b' ' if b
                    .get(j + 1)
                    .is_some_and(|n| n.is_ascii_digit() || *n == b'(') => {}
                _ => break,
            }
            j += 1;
        }
        let followed_by_word = b.get(end).is_some_and(u8::is_ascii_alphanumeric);
        if (9..=15).contains(&digits.len()) && !followed_by_word {
            let plus = if b[i] == b'+' { "+" } else { "" };
            out.push(Token {
                kind: TokenKind::Phone,
                text: format!("{plus}{digits}"),
            });
        }
        i = j.max(i + 1);
    }
}

/// The tokens of a tool output: of every string leaf at any depth (object
/// keys are names, not data; numbers alone carry no unit).
pub fn output_tokens(output: &serde_json::Value, shapes: &[TokenShape], out: &mut Vec<Token>) {
    match output {
        serde_json::Value::String(s) => text_tokens_with(s, shapes, out),
        serde_json::Value::Array(items) => items.iter().for_each(|i| output_tokens(i, shapes, out)),
        serde_json::Value::Object(m) => m.values().for_each(|v| output_tokens(v, shapes, out)),
        _ => {}
    }
}

/// [`output_tokens`] with whether each token's field is trusted
/// (`docs/semantics.md`, "Per-field output labels"), in the same order.
pub fn labelled_output_tokens(
    output: &serde_json::Value,
    labels: &crate::fields::OutputLabels,
    shapes: &[TokenShape],
    out: &mut Vec<(Token, bool)>,
) {
    let mut ts = Vec::new();
    labels.walk(output, &mut |leaf, field| {
        if let serde_json::Value::String(s) = leaf {
            let trusted = labels.label(field).trusted;
            ts.clear();
            text_tokens_with(s, shapes, &mut ts);
            out.extend(ts.drain(..).map(|t| (t, trusted)));
        }
    });
}

/// The most tokens indexed per output; an untrusted output beyond it makes
/// every token not in a task text [`TokenOrigin::Elsewhere`] for the rest
/// of the session (it could hide a token).
pub const MAX_OUTPUT_TOKENS: usize = 100_000;

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(t: &str) -> Vec<(TokenKind, String)> {
        let mut out = Vec::new();
        text_tokens(t, &mut out);
        out.into_iter().map(|t| (t.kind, t.text)).collect()
    }
    fn has(t: &str, kind: TokenKind, text: &str) -> bool {
        toks(t).contains(&(kind, text.to_string()))
    }

    #[test]
    fn urls_have_one_form() {
        use TokenKind::Url;
        let t = "see HTTPS://Docs.RS:443/serde/ and (http://X.org:80/) or https://a.b/Path.";
        assert!(has(t, Url, "https://docs.rs/serde"));
        assert!(has(t, Url, "http://x.org"));
        assert!(has(t, Url, "https://a.b/Path"));
        assert!(!has(t, Url, "https://a.b/path"));
        assert!(toks("ftp://x.org httpx://y https://").is_empty());
        assert!(has(
            "go to https://evil.com.Then pay",
            Url,
            "https://evil.com"
        ));
        assert!(has("at https://x.org:8443/a", Url, "https://x.org:8443/a"));
        // Without a scheme: a link too, in its own form.
        assert!(has(
            "log in at WWW.Evil.example/Login/ now",
            Url,
            "www.evil.example/Login"
        ));
        assert!(!has("www.", Url, "www."));
    }

    #[test]
    fn emails_ibans_and_phones() {
        use TokenKind::*;
        assert!(has("mail Bob@Corp.COM, now", Email, "bob@corp.com"));
        assert!(has("mailto:Bob@Corp.com", Email, "bob@corp.com"));
        for not in ["a@b", "@x.org", "a@b@c.org", "a@.org", "a@org."] {
            assert!(toks(not).is_empty(), "{not}");
        }
        let t = "pay de89 3704 0044 0532 0130 00 EUR 5 or GB82WEST12345698765432";
        assert!(has(t, Iban, "DE89370400440532013000"));
        assert!(has(t, Iban, "GB82WEST12345698765432"));
        assert_eq!(toks(t).iter().filter(|(k, _)| *k == Iban).count(), 2);
        assert!(has("call +49 (30) 123-4567 now", Phone, "+49301234567"));
        assert!(has("call 030/1234 5678.", Phone, "03012345678"));
        for not in [
            "on 04-12-2026",
            "0123",
            "x0301234567",
            "https://a.b/0301234567",
            "0301234567abc",
            "+4930123456789012345",
        ] {
            assert!(
                !toks(not).iter().any(|(k, _)| *k == Phone),
                "{not}: {:?}",
                toks(not)
            );
        }
    }

    #[test]
    fn quantities_have_one_form() {
        use TokenKind::Quantity;
        for t in [
            "€1,000.50",
            "1000.5 EUR",
            "EUR 1000.50",
            "1,000.500eur",
            "€ 1000.5",
            "1000.50€",
        ] {
            assert!(has(t, Quantity, "1000.5 EUR"), "{t}: {:?}", toks(t));
        }
        assert!(has("ship 10kg", Quantity, "10 kg"));
        assert!(has("ship 10 KG", Quantity, "10 kg"));
        assert!(has("5% off", Quantity, "5 %"));
        assert!(has("$20", Quantity, "20 USD"));
        for not in ["kg 10", "1,00 EUR", "10 apples", "1.5.2 kg", "EUR"] {
            assert!(
                !toks(not).iter().any(|(k, _)| *k == Quantity),
                "{not}: {:?}",
                toks(not)
            );
        }
    }

    /// The canonical form as it was computed before the borrowing path:
    /// the oracle of the property below.
    fn canonical_url_owned(w: &str) -> Option<String> {
        for (scheme, port) in [("http://", ":80"), ("https://", ":443")] {
            if starts_with_ignore_case(w, scheme) {
                let rest = &w[scheme.len()..];
                let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
                let host = host.to_ascii_lowercase();
                let host = host.strip_suffix(port).unwrap_or(&host);
                let path = path.strip_suffix('/').unwrap_or(path);
                return (!host.is_empty()).then(|| format!("{scheme}{host}{path}"));
            }
        }
        None
    }

    #[test]
    fn canonical_urls_borrow_only_when_already_canonical() {
        let borrowed = |w: &str| matches!(canonical_url_cow(w), Some(Cow::Borrowed(_)));
        assert!(borrowed("https://docs.example.com/r/1"));
        assert!(borrowed("https://docs.example.com/"));
        assert!(!borrowed("HTTPS://docs.example.com/"));
        assert!(!borrowed("https://Docs.example.com/"));
        assert!(!borrowed("https://docs.example.com:443/a"));
        assert_eq!(
            canonical_url("https://x.org:443/"),
            Some("https://x.org".into())
        );
        assert_eq!(canonical_url("http://:80/a"), None);
    }

    /// The byte table answers as the character test, for every ASCII byte.
    #[test]
    fn the_separator_table_agrees_with_the_character_test() {
        for b in 0u8..128 {
            assert_eq!(is_ascii_separator(b), is_separator(char::from(b)), "{b}");
        }
        assert!(!is_ascii_separator(0xc3));
    }

    proptest::proptest! {
        /// Any text, ASCII or not: the scan finds a separator exactly when
        /// the character search does.
        #[test]
        fn has_separator_agrees_with_the_character_search(
            s in "[a-z0-9 ,;()<>'\"\t.é€\u{a0}\u{2003}]{0,20}"
        ) {
            proptest::prop_assert_eq!(has_separator(&s), s.contains(is_separator));
        }

        /// Borrowed or not, a link's canonical form is the one computed by
        /// lower-casing and rebuilding it.
        #[test]
        fn canonical_url_cow_agrees_with_the_owned_form(
            w in "(https?|HTTPS?|Http)://[a-zA-Z.:0-9]{0,12}(:80|:443)?(/[a-zA-Z0-9/]{0,8})?/?"
        ) {
            proptest::prop_assert_eq!(canonical_url(&w), canonical_url_owned(&w));
        }

        /// Any text (ASCII punctuation, digits, `€`, `@`, letters of any
        /// case, other scripts): extraction never panics, and every token
        /// found is a fixed point: its own text extracts to itself.
        #[test]
        fn extraction_is_total_and_canonical(t in "[a-zA-Z0-9 .,:;/@+()€$%é-]{0,60}") {
            let mut out = Vec::new();
            text_tokens(&t, &mut out);
            for tok in out {
                if tok.kind == TokenKind::Quantity || tok.kind == TokenKind::Phone {
                    continue; // their canonical text is not written as in texts
                }
                let mut again = Vec::new();
                text_tokens(&tok.text, &mut again);
                proptest::prop_assert!(again.contains(&tok), "{:?} from {:?}: {:?}", tok, t, again);
            }
        }
    }

    #[test]
    fn arguments_and_outputs_use_the_same_extraction() {
        use crate::value::Value;
        let a = Value::List(vec![
            Value::Str("see https://x.org/".into()),
            Value::Int(5),
            Value::Str("bob@x.org".into()),
        ])
        .tokens();
        let mut a = a;
        let mut o = Vec::new();
        output_tokens(
            &serde_json::json!({"https://k.org": ["Bob@X.org", {"u": "HTTPS://x.org"}], "n": 5}),
            &[],
            &mut o,
        );
        a.sort();
        o.sort();
        assert_eq!(a, o);
    }
}
