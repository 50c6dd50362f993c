//! Tokens with spans. Comments are returned separately (the parser attaches
//! them to statements for the formatter); a malformed token becomes an
//! `Error` token carrying its message, so lexing never fails.

use crate::span::Span;
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
/// A punctuation token.
pub enum Punct {
    /// `;`
    Semi,
    /// `:`
    Colon,
    /// `,`
    Comma,
    /// `(`
    LParen,
    /// `)`
    RParen,
    /// `{`
    LBrace,
    /// `}`
    RBrace,
    /// `[`
    LBracket,
    /// `]`
    RBracket,
    /// `<`
    Lt,
    /// `>`
    Gt,
    /// `<=`
    Le,
    /// `>=`
    Ge,
    /// `==`
    EqEq,
    /// `!=`
    Ne,
    /// `->`
    Arrow,
    /// `=`
    Assign,
    /// `!`
    Bang,
    /// `?`
    Question,
}

impl Punct {
    /// The punctuation as written.
    pub fn as_str(self) -> &'static str {
        match self {
            Punct::Semi => ";",
            Punct::Colon => ":",
            Punct::Comma => ",",
            Punct::LParen => "(",
            Punct::RParen => ")",
            Punct::LBrace => "{",
            Punct::RBrace => "}",
            Punct::LBracket => "[",
            Punct::RBracket => "]",
            Punct::Lt => "<",
            Punct::Gt => ">",
            Punct::Le => "<=",
            Punct::Ge => ">=",
            Punct::EqEq => "==",
            Punct::Ne => "!=",
            Punct::Arrow => "->",
            Punct::Assign => "=",
            Punct::Bang => "!",
            Punct::Question => "?",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// The kinds of token.
pub enum TokenKind {
    /// An identifier, possibly dotted (`fs.read`). Keywords are identifiers.
    Ident(String),
    /// A name in backticks (`` `get-tiny-image` ``), unescaped: any
    /// characters but control, bidirectional and invisible ones. Never a
    /// keyword.
    Quoted(String),
    /// A string literal, unescaped.
    Str(String),
    /// An integer literal (fits in `i64`; a `-` directly before a digit is part of it).
    Int(i64),
    /// A decimal literal with a point (`98.70`), exact, and its text as
    /// written (the formatter keeps the trailing zeros).
    Decimal(agenra_core::Decimal, String),
    /// Punctuation.
    Punct(Punct),
    /// A malformed token and what is wrong with it.
    Error(String),
    /// The end of the source: the last token, always present.
    Eof,
}

impl fmt::Display for TokenKind {
    /// How a token is named in "found ..." messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenKind::Ident(s) => write!(f, "`{s}`"),
            TokenKind::Quoted(s) => write!(f, "quoted name {}", quote_name(s)),
            TokenKind::Str(s) => write!(f, "string {}", quote(s)),
            TokenKind::Int(i) => write!(f, "integer `{i}`"),
            TokenKind::Decimal(_, text) => write!(f, "decimal `{text}`"),
            TokenKind::Punct(p) => write!(f, "`{}`", p.as_str()),
            TokenKind::Error(m) => f.write_str(m),
            TokenKind::Eof => f.write_str("end of file"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// A token and where it is.
pub struct Token {
    /// What the token is.
    pub kind: TokenKind,
    /// Where it is written.
    pub span: Span,
    /// A blank line separates this token from the previous token or comment.
    pub blank_before: bool,
}

/// A `//` comment: `text` is what follows `//`, without trailing whitespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LexComment {
    /// What follows `//`, without trailing whitespace.
    pub text: String,
    /// From `//` to the end of the line (the newline excluded).
    pub span: Span,
    /// A blank line separates it from the previous token or comment.
    pub blank_before: bool,
}

/// The canonical string literal for `s`: `"` and `\` escaped, newlines and
/// tabs as `\n` and `\t`.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Whether `name` can be written bare: identifier parts
/// (`[A-Za-z_][A-Za-z0-9_]*`) joined by single dots (`fs.read`).
pub fn is_bare_name(name: &str) -> bool {
    !name.is_empty()
        && name.split('.').all(|part| {
            let mut chars = part.chars();
            chars.next().is_some_and(is_ident_start) && chars.all(is_ident_char)
        })
}

/// `name` in backticks, `` ` `` and `\` escaped (`` `get-tiny-image` ``).
pub fn quote_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    out.push('`');
    for c in name.chars() {
        if c == '`' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('`');
    out
}

/// Words a condition reads as keywords where a parameter name could stand
/// (`agent == x` tests the calling agent; `any`/`all` quantify).
const CONDITION_WORDS: &[&str] = &[
    "agent",
    "any",
    "all",
    "in",
    "not",
    "contains",
    "starts_with",
    "ends_with",
    "matches",
];

/// `name` as a policy writes it, safe in any position: bare when it can be
/// and is not a word a condition reads as a keyword, else in backticks.
pub fn write_name(name: &str) -> String {
    if is_bare_name(name) && !CONDITION_WORDS.contains(&name) {
        name.to_string()
    } else {
        quote_name(name)
    }
}

/// Whether `c` may start an identifier: an ASCII letter or `_`.
pub fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

/// Whether `c` may continue an identifier part: an ASCII letter, digit or `_`.
pub fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

struct Lexer<'a> {
    src: &'a str,
    chars: Vec<(usize, char)>,
    i: usize,
    line: u32,
    col: u32,
    newlines_since_last: u32,
    tokens: Vec<Token>,
    comments: Vec<LexComment>,
}

/// Splits `src` into tokens (ending with `Eof`) and comments.
pub fn lex(src: &str) -> (Vec<Token>, Vec<LexComment>) {
    let mut lx = Lexer {
        src,
        chars: src.char_indices().collect(),
        i: 0,
        line: 1,
        col: 1,
        newlines_since_last: 0,
        tokens: Vec::new(),
        comments: Vec::new(),
    };
    lx.run();
    (lx.tokens, lx.comments)
}

impl Lexer<'_> {
    fn peek_at(&self, k: usize) -> Option<char> {
        self.chars.get(self.i + k).map(|(_, c)| *c)
    }

    fn offset(&self) -> usize {
        self.chars.get(self.i).map_or(self.src.len(), |(o, _)| *o)
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek_at(0)?;
        self.i += 1;
        if c == '\n' {
            self.line += 1;
            self.col = 1;
            self.newlines_since_last += 1;
        } else {
            self.col += 1;
        }
        Some(c)
    }

    fn here(&self) -> Span {
        let o = self.offset();
        Span {
            start: o,
            end: o,
            line: self.line,
            col: self.col,
        }
    }

    fn push(&mut self, kind: TokenKind, start: Span) {
        let span = Span {
            end: self.offset(),
            ..start
        };
        self.tokens.push(Token {
            kind,
            span,
            blank_before: self.newlines_since_last >= 2,
        });
        self.newlines_since_last = 0;
    }

    fn run(&mut self) {
        // A UTF-8 byte order mark some editors write is not part of the text.
        if self.peek_at(0) == Some('\u{feff}') {
            self.i += 1;
        }
        while let Some(c) = self.peek_at(0) {
            let start = self.here();
            if c.is_whitespace() {
                self.bump();
            } else if c == '/' && self.peek_at(1) == Some('/') {
                self.comment(start);
            } else if is_ident_start(c) {
                self.ident(start);
            } else if c.is_ascii_digit()
                || (c == '-' && self.peek_at(1).is_some_and(|d| d.is_ascii_digit()))
            {
                self.int(start);
            } else if c == '"' {
                self.string(start);
            } else if c == '`' {
                self.quoted(start);
            } else {
                self.punct(start, c);
            }
        }
        let end = self.here();
        self.push(TokenKind::Eof, end);
    }

    fn comment(&mut self, start: Span) {
        self.bump();
        self.bump();
        let mut text = String::new();
        while let Some(c) = self.peek_at(0).filter(|c| *c != '\n') {
            text.push(c);
            self.bump();
        }
        let span = Span {
            end: self.offset(),
            ..start
        };
        self.comments.push(LexComment {
            text: text.trim_end().to_string(),
            span,
            blank_before: self.newlines_since_last >= 2,
        });
        self.newlines_since_last = 0;
    }

    fn ident(&mut self, start: Span) {
        let mut name = String::new();
        loop {
            while let Some(c) = self.peek_at(0).filter(|c| is_ident_char(*c)) {
                name.push(c);
                self.bump();
            }
            // A letter outside ASCII (a Cyrillic `а` that looks like `a`)
            // makes the whole word an error that names it.
            if let Some(odd) = self
                .peek_at(0)
                .filter(|c| c.is_alphanumeric() && !c.is_ascii())
            {
                while let Some(c) = self.peek_at(0).filter(|c| c.is_alphanumeric() || *c == '_') {
                    name.push(c);
                    self.bump();
                }
                self.push(
                    TokenKind::Error(format!(
                        "`{name}` contains `{odd}` (U+{:04X}), which is not an ASCII letter; names are ASCII",
                        odd as u32
                    )),
                    start,
                );
                return;
            }
            // `get-tiny-image`: a name with a `-` needs backticks.
            if self.peek_at(0) == Some('-') && self.peek_at(1).is_some_and(is_ident_start) {
                while let Some(c) = self
                    .peek_at(0)
                    .filter(|c| is_ident_char(*c) || *c == '-' || *c == '.')
                {
                    name.push(c);
                    self.bump();
                }
                self.push(
                    TokenKind::Error(format!(
                        "`{name}` contains `-`; a name with characters other than letters, digits, `_` and `.` is written in backticks: {}",
                        quote_name(&name)
                    )),
                    start,
                );
                return;
            }
            // A dot directly between identifier parts continues the name.
            if self.peek_at(0) == Some('.') && self.peek_at(1).is_some_and(is_ident_start) {
                name.push('.');
                self.bump();
            } else {
                break;
            }
        }
        self.push(TokenKind::Ident(name), start);
    }

    fn int(&mut self, start: Span) {
        let mut digits = String::new();
        if self.peek_at(0) == Some('-') {
            digits.push('-');
            self.bump();
        }
        while let Some(c) = self.peek_at(0).filter(char::is_ascii_digit) {
            digits.push(c);
            self.bump();
        }
        // A point directly followed by a digit makes a decimal: `98.70`.
        if self.peek_at(0) == Some('.') && self.peek_at(1).is_some_and(|d| d.is_ascii_digit()) {
            digits.push('.');
            self.bump();
            while let Some(c) = self.peek_at(0).filter(char::is_ascii_digit) {
                digits.push(c);
                self.bump();
            }
            let kind = match digits.parse::<agenra_core::Decimal>() {
                Ok(d) => TokenKind::Decimal(d, digits),
                Err(e) => TokenKind::Error(format!("decimal `{digits}`: {e}")),
            };
            self.push(kind, start);
            return;
        }
        let kind = match digits.parse::<i64>() {
            Ok(v) => TokenKind::Int(v),
            Err(_) => TokenKind::Error(format!(
                "integer `{digits}` is out of range (from -9223372036854775808 to 9223372036854775807)"
            )),
        };
        self.push(kind, start);
    }

    fn string(&mut self, start: Span) {
        self.bump();
        let mut value = String::new();
        let mut error: Option<String> = None;
        loop {
            match self.peek_at(0) {
                None | Some('\n') => {
                    self.push(TokenKind::Error("unterminated string".into()), start);
                    return;
                }
                Some('"') => {
                    self.bump();
                    break;
                }
                Some('\\') => {
                    self.bump();
                    match self.peek_at(0) {
                        Some('"') => value.push('"'),
                        Some('\\') => value.push('\\'),
                        Some('n') => value.push('\n'),
                        Some('t') => value.push('\t'),
                        // Leave the newline (or end) to end the string above.
                        None | Some('\n') => continue,
                        Some(c) => {
                            error.get_or_insert(format!(
                                "unknown escape `\\{c}` in string (use \\\", \\\\, \\n or \\t)"
                            ));
                        }
                    }
                    self.bump();
                }
                Some(c) => {
                    if c.is_control() && c != '\t' {
                        error.get_or_insert(format!(
                            "the control character U+{:04X} cannot appear in a string",
                            c as u32
                        ));
                    }
                    value.push(c);
                    self.bump();
                }
            }
        }
        let kind = error.map_or(TokenKind::Str(value), TokenKind::Error);
        self.push(kind, start);
    }

    /// `` `name` ``: escapes `` \` `` and `\\`; no control, bidirectional or
    /// invisible character (`agenra_core::ident::is_refused`), so that every
    /// name a policy declares is one an event may carry.
    fn quoted(&mut self, start: Span) {
        self.bump();
        let mut name = String::new();
        // The first problem and where it is.
        let mut error: Option<(String, Span)> = None;
        loop {
            match self.peek_at(0) {
                None | Some('\n') => {
                    self.push(TokenKind::Error("unterminated quoted name".into()), start);
                    return;
                }
                Some('`') => {
                    self.bump();
                    break;
                }
                Some('\\') => {
                    let at = self.here();
                    self.bump();
                    match self.peek_at(0) {
                        Some(c @ ('`' | '\\')) => name.push(c),
                        None | Some('\n') => continue,
                        Some(c) => {
                            error.get_or_insert((
                                format!(
                                    "unknown escape `\\{}` in quoted name (use \\` or \\\\)",
                                    c.escape_debug()
                                ),
                                at,
                            ));
                        }
                    }
                    self.bump();
                }
                Some(c) => {
                    if agenra_core::ident::is_refused(c) {
                        error.get_or_insert((
                            format!(
                                "quoted name contains U+{:04X} ({}): names may not hold control, bidirectional or invisible characters",
                                c as u32,
                                agenra_core::ident::describe(c)
                            ),
                            self.here(),
                        ));
                    }
                    name.push(c);
                    self.bump();
                }
            }
        }
        if name.is_empty() {
            error.get_or_insert(("empty quoted name".into(), start));
        }
        match error {
            None => self.push(TokenKind::Quoted(name), start),
            Some((message, at)) => self.push(TokenKind::Error(message), at),
        }
    }

    fn punct(&mut self, start: Span, c: char) {
        let next = self.peek_at(1);
        let (p, len) = match (c, next) {
            ('<', Some('=')) => (Some(Punct::Le), 2),
            ('>', Some('=')) => (Some(Punct::Ge), 2),
            ('=', Some('=')) => (Some(Punct::EqEq), 2),
            ('!', Some('=')) => (Some(Punct::Ne), 2),
            ('-', Some('>')) => (Some(Punct::Arrow), 2),
            (';', _) => (Some(Punct::Semi), 1),
            (':', _) => (Some(Punct::Colon), 1),
            (',', _) => (Some(Punct::Comma), 1),
            ('(', _) => (Some(Punct::LParen), 1),
            (')', _) => (Some(Punct::RParen), 1),
            ('{', _) => (Some(Punct::LBrace), 1),
            ('}', _) => (Some(Punct::RBrace), 1),
            ('[', _) => (Some(Punct::LBracket), 1),
            (']', _) => (Some(Punct::RBracket), 1),
            ('<', _) => (Some(Punct::Lt), 1),
            ('>', _) => (Some(Punct::Gt), 1),
            ('=', _) => (Some(Punct::Assign), 1),
            ('!', _) => (Some(Punct::Bang), 1),
            ('?', _) => (Some(Punct::Question), 1),
            _ => (None, 1),
        };
        for _ in 0..len {
            self.bump();
        }
        let kind = p.map_or_else(
            || TokenKind::Error(format!("unexpected character `{}`", c.escape_debug())),
            TokenKind::Punct,
        );
        self.push(kind, start);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<TokenKind> {
        lex(src).0.into_iter().map(|t| t.kind).collect()
    }

    #[test]
    fn dotted_identifiers_are_one_token() {
        assert_eq!(
            kinds("fs.read a. b"),
            vec![
                TokenKind::Ident("fs.read".into()),
                TokenKind::Ident("a".into()),
                TokenKind::Error("unexpected character `.`".into()),
                TokenKind::Ident("b".into()),
                TokenKind::Eof
            ]
        );
    }

    #[test]
    fn numbers_arrows_and_strings() {
        assert_eq!(
            kinds(r#"-3 -> "a\"b\n" <= !"#),
            vec![
                TokenKind::Int(-3),
                TokenKind::Punct(Punct::Arrow),
                TokenKind::Str("a\"b\n".into()),
                TokenKind::Punct(Punct::Le),
                TokenKind::Punct(Punct::Bang),
                TokenKind::Eof
            ]
        );
    }

    #[test]
    fn decimals_keep_their_text_and_need_digits_after_the_point() {
        let d: agenra_core::Decimal = "98.7".parse().unwrap();
        assert_eq!(
            kinds("98.70 -0.5 1. x?"),
            vec![
                TokenKind::Decimal(d, "98.70".into()),
                TokenKind::Decimal("-0.5".parse().unwrap(), "-0.5".into()),
                TokenKind::Int(1),
                TokenKind::Error("unexpected character `.`".into()),
                TokenKind::Ident("x".into()),
                TokenKind::Punct(Punct::Question),
                TokenKind::Eof
            ]
        );
        assert_eq!(
            kinds("0.1234567890123456789"),
            vec![
                TokenKind::Error(
                    "decimal `0.1234567890123456789`: more than 18 digits after the point".into()
                ),
                TokenKind::Eof
            ]
        );
    }

    #[test]
    fn quoted_names_are_one_token_with_escapes() {
        assert_eq!(
            kinds(r"`get-tiny-image` `a\`b\\c` `fs.read` `agent` `x y.z/é`"),
            vec![
                TokenKind::Quoted("get-tiny-image".into()),
                TokenKind::Quoted("a`b\\c".into()),
                TokenKind::Quoted("fs.read".into()),
                TokenKind::Quoted("agent".into()),
                TokenKind::Quoted("x y.z/é".into()),
                TokenKind::Eof
            ]
        );
        assert_eq!(write_name("agent"), "`agent`");
        assert_eq!(write_name("any"), "`any`");
        for name in ["get-tiny-image", "a`b\\c", "fs.read", "", "1x", "a..b", "é"] {
            let written = write_name(name);
            if is_bare_name(name) {
                assert_eq!(written, name);
            } else {
                assert!(written.starts_with('`'), "{written}");
            }
            if !name.is_empty() {
                let toks = kinds(&written);
                let want = if is_bare_name(name) {
                    TokenKind::Ident(name.into())
                } else {
                    TokenKind::Quoted(name.into())
                };
                assert_eq!(toks, vec![want, TokenKind::Eof], "{written}");
            }
        }
    }

    #[test]
    fn bad_quoted_names_are_errors_at_their_place() {
        let err = |src: &str| {
            let (toks, _) = lex(src);
            let t = toks.into_iter().next().unwrap_or_else(|| panic!("{src}"));
            match t.kind {
                TokenKind::Error(m) => (m, t.span.line, t.span.col),
                other => panic!("{src}: {other:?}"),
            }
        };
        assert_eq!(err("``"), ("empty quoted name".to_string(), 1, 1));
        assert_eq!(
            err("`get-tiny\n`"),
            ("unterminated quoted name".to_string(), 1, 1)
        );
        assert_eq!(
            err("\n  `c4\u{202e}gnp`"),
            (
                "quoted name contains U+202E (RIGHT-TO-LEFT OVERRIDE): names may not hold control, bidirectional or invisible characters".to_string(),
                2,
                6
            )
        );
        assert_eq!(
            err("`a\tb`").0,
            "quoted name contains U+0009 (CHARACTER TABULATION): names may not hold control, bidirectional or invisible characters"
        );
        assert_eq!(
            err("`ab\\n`"),
            (
                "unknown escape `\\n` in quoted name (use \\` or \\\\)".to_string(),
                1,
                4
            )
        );
        assert_eq!(
            err("get-tiny-image"),
            (
                "`get-tiny-image` contains `-`; a name with characters other than letters, digits, `_` and `.` is written in backticks: `get-tiny-image`".to_string(),
                1,
                1
            )
        );
        // `->` and negative numbers still follow a name directly.
        assert_eq!(
            kinds("a->b x-1"),
            vec![
                TokenKind::Ident("a".into()),
                TokenKind::Punct(Punct::Arrow),
                TokenKind::Ident("b".into()),
                TokenKind::Ident("x".into()),
                TokenKind::Int(-1),
                TokenKind::Eof
            ]
        );
    }

    #[test]
    fn spans_and_comments() {
        let (toks, comments) = lex("a // hi \n\n  b \"x\n");
        assert_eq!(toks[1].span.line, 3);
        assert_eq!(toks[1].span.col, 3);
        assert!(toks[1].blank_before);
        assert_eq!(toks[2].kind, TokenKind::Error("unterminated string".into()));
        assert_eq!(toks[2].span.col, 5);
        assert_eq!(comments[0].text, " hi");
        assert_eq!(quote("a\"\\\n\t"), r#""a\"\\\n\t""#);
    }
}
