//! Hand-written recursive-descent parser. The grammar nests only a few
//! levels deep (statement → clause → condition → value); conditions nest
//! through `!` and parentheses at most `MAX_NESTING` deep, so recursion is
//! bounded and no input makes it panic. On a syntax error it
//! reports the statement's first error and resumes after the next `;` or `}`.

use crate::ast::*;
use crate::diagnostic::{did_you_mean, Diagnostic};
use crate::lexer::{lex, LexComment, Punct, Token, TokenKind};
use crate::span::Span;
use agenra_core::{Pattern, Value};

type PResult<T> = Result<T, Diagnostic>;

/// How deep `!` and parentheses may nest in a condition.
pub const MAX_NESTING: usize = 64;

/// Test operators that may follow a parameter called `any` or `all`.
const TEST_WORDS: &[&str] = &[
    "in",
    "not",
    "contains",
    "starts_with",
    "ends_with",
    "matches",
];

const STATEMENTS: &[&str] = &[
    "policy",
    "levels",
    "categories",
    "category",
    "sinks",
    "sink",
    "sets",
    "set",
    "facts",
    "fact",
    "label",
    "tool",
    "resource",
    "sanitizer",
    "scope",
    "agent",
    "grant",
    "deny",
    "allow",
    "pause",
    "obligation",
    "provenance",
    "task",
    "token",
];

/// Parses a whole file. The file is complete (every statement parsed) when
/// the returned diagnostics are empty.
pub fn parse_file(src: &str) -> (File, Vec<Diagnostic>) {
    let parsed = parse_recovering(src);
    (parsed.file, parsed.errors)
}

/// What parsing recovered from a file with syntax errors.
pub struct Parsed {
    /// The statements that parsed.
    pub file: File,
    /// The syntax errors: the first of each broken statement (or tool-body clause), in source
    /// order.
    pub errors: Vec<Diagnostic>,
    /// Identifiers in the statements that did not parse (the names they
    /// may have declared).
    pub broken_names: std::collections::BTreeSet<String>,
}

/// Parses a whole file, keeping what it can after syntax errors.
pub fn parse_recovering(src: &str) -> Parsed {
    let (toks, comments) = lex(src);
    let eof_span = toks.last().map_or_else(Span::default, |t| t.span);
    let mut p = Parser {
        toks,
        pos: 0,
        eof: Token {
            kind: TokenKind::Eof,
            span: eof_span,
            blank_before: false,
        },
        comments,
        next_comment: 0,
        hoisted: Vec::new(),
        prev: Span::default(),
        errors: Vec::new(),
        depth: 0,
        broken_names: Default::default(),
    };
    let file = p.file();
    Parsed {
        file,
        errors: p.errors,
        broken_names: p.broken_names,
    }
}

struct Parser {
    toks: Vec<Token>,
    pos: usize,
    eof: Token,
    comments: Vec<LexComment>,
    next_comment: usize,
    /// Comments from inside the current statement's header, to be printed
    /// before the statement.
    hoisted: Vec<Comment>,
    /// The span of the last consumed token.
    prev: Span,
    errors: Vec<Diagnostic>,
    /// Current nesting of `!` and parentheses in a condition.
    depth: usize,
    broken_names: std::collections::BTreeSet<String>,
}

enum ClauseRecovery {
    NextClause,
    BodyClosed,
}

impl Parser {
    // ---- token access -------------------------------------------------

    fn peek(&self) -> &Token {
        self.toks.get(self.pos).unwrap_or(&self.eof)
    }

    /// The kind of the token `n` places ahead.
    fn peek_n(&self, n: usize) -> Option<&TokenKind> {
        self.toks.get(self.pos + n).map(|t| &t.kind)
    }

    fn at_eof(&self) -> bool {
        self.peek().kind == TokenKind::Eof
    }

    fn bump(&mut self) -> Token {
        let tok = self.peek().clone();
        if tok.kind != TokenKind::Eof {
            self.pos += 1;
            self.prev = tok.span;
        }
        tok
    }

    fn is_kw(&self, kw: &str) -> bool {
        matches!(&self.peek().kind, TokenKind::Ident(s) if s == kw)
    }

    fn is_punct(&self, p: Punct) -> bool {
        self.peek().kind == TokenKind::Punct(p)
    }

    fn eat_kw(&mut self, kw: &str) -> Option<Span> {
        self.is_kw(kw).then(|| self.bump().span)
    }

    fn eat_punct(&mut self, p: Punct) -> Option<Span> {
        self.is_punct(p).then(|| self.bump().span)
    }

    /// "expected X, found Y" at the current token (or the lexer's message if
    /// the token is malformed).
    fn unexpected(&self, expected: &str) -> Diagnostic {
        let tok = self.peek();
        match &tok.kind {
            TokenKind::Error(msg) => Diagnostic::error(tok.span, msg.clone()),
            found => Diagnostic::error(tok.span, format!("expected {expected}, found {found}")),
        }
    }

    fn expect_kw(&mut self, kw: &str) -> PResult<Span> {
        self.eat_kw(kw)
            .ok_or_else(|| self.unexpected(&format!("`{kw}`")))
    }

    fn expect_punct(&mut self, p: Punct) -> PResult<Span> {
        self.eat_punct(p)
            .ok_or_else(|| self.unexpected(&format!("`{}`", p.as_str())))
    }

    /// A name: bare (`fs.read`) or quoted (`` `get-tiny-image` ``).
    fn ident(&mut self, what: &str) -> PResult<Ident> {
        let (name, quoted) = match &self.peek().kind {
            TokenKind::Ident(name) => (name.clone(), false),
            TokenKind::Quoted(name) => (name.clone(), true),
            _ => return Err(self.unexpected(what)),
        };
        let span = self.bump().span;
        Ok(Ident { name, span, quoted })
    }

    /// A bare word where only keywords make sense (a parameter type).
    fn bare_ident(&mut self, what: &str) -> PResult<Ident> {
        match &self.peek().kind {
            TokenKind::Ident(_) => self.ident(what),
            _ => Err(self.unexpected(what)),
        }
    }

    fn string(&mut self, what: &str) -> PResult<StrLit> {
        match &self.peek().kind {
            TokenKind::Str(value) => {
                let value = value.clone();
                let span = self.bump().span;
                Ok(StrLit { value, span })
            }
            _ => Err(self.unexpected(what)),
        }
    }

    fn int(&mut self, what: &str) -> PResult<IntLit> {
        match self.peek().kind {
            TokenKind::Int(value) => {
                let span = self.bump().span;
                Ok(IntLit { value, span })
            }
            _ => Err(self.unexpected(what)),
        }
    }

    // ---- comments -------------------------------------------------------

    /// Takes the comments that start before byte `offset`.
    fn comments_before(&mut self, offset: usize) -> Vec<Comment> {
        let mut out = Vec::new();
        while let Some(c) = self.comments.get(self.next_comment) {
            if c.span.start >= offset {
                break;
            }
            out.push(Comment {
                text: c.text.clone(),
                span: c.span,
                blank_before: c.blank_before,
            });
            self.next_comment += 1;
        }
        out
    }

    /// Comments from inside a statement move before it, without blank lines.
    fn hoist_before(&mut self, offset: usize) {
        let inner = self.comments_before(offset);
        self.hoisted.extend(inner.into_iter().map(|c| Comment {
            blank_before: false,
            ..c
        }));
    }

    /// The comment on the same line after the token at `end`, if any.
    fn trailing_comment(&mut self, end: Span) -> Option<Comment> {
        let c = self.comments.get(self.next_comment)?;
        if c.span.line != end.line || c.span.start < end.end {
            return None;
        }
        self.next_comment += 1;
        Some(Comment {
            text: c.text.clone(),
            span: c.span,
            blank_before: false,
        })
    }

    // ---- file and recovery --------------------------------------------

    fn file(&mut self) -> File {
        let mut stmts = Vec::new();
        while !self.at_eof() {
            let first = self.peek().clone();
            let first_index = self.pos;
            let mut comments = self.comments_before(first.span.start);
            self.hoisted.clear();
            match self.statement() {
                Ok(kind) => {
                    let end = self.prev;
                    self.hoist_before(end.end);
                    comments.append(&mut self.hoisted);
                    let trailing = self.trailing_comment(end);
                    stmts.push(Stmt {
                        kind,
                        span: first.span.to(end),
                        trivia: Trivia {
                            comments,
                            blank_before: first.blank_before,
                            trailing,
                        },
                    });
                }
                Err(d) => {
                    self.errors.push(d);
                    self.recover_statement();
                    for tok in self.toks.get(first_index..self.pos).unwrap_or_default() {
                        if let TokenKind::Ident(name) | TokenKind::Quoted(name) = &tok.kind {
                            self.broken_names.insert(name.clone());
                        }
                    }
                }
            }
        }
        let trailing_comments = self.comments_before(usize::MAX);
        File {
            stmts,
            trailing_comments,
        }
    }

    /// Skips to just after the next `;` (outside braces), or after a `}`
    /// that is unmatched or ends a line (the end of a tool body).
    fn recover_statement(&mut self) {
        let mut depth = 0usize;
        loop {
            let tok = self.bump();
            match tok.kind {
                TokenKind::Eof => return,
                TokenKind::Punct(Punct::Semi) if depth == 0 => return,
                TokenKind::Punct(Punct::LBrace) => depth += 1,
                TokenKind::Punct(Punct::RBrace) => {
                    if depth == 0 {
                        return;
                    }
                    depth -= 1;
                    let next = self.peek();
                    if depth == 0
                        && (next.kind == TokenKind::Eof || next.span.line != tok.span.line)
                    {
                        return;
                    }
                }
                _ => {}
            }
        }
    }

    /// Inside a tool body: skips past the next `;`, or past the `}` that
    /// closes the body.
    fn recover_clause(&mut self) -> ClauseRecovery {
        let mut depth = 0usize;
        loop {
            let tok = self.bump();
            match tok.kind {
                TokenKind::Eof => return ClauseRecovery::BodyClosed,
                TokenKind::Punct(Punct::Semi) if depth == 0 => return ClauseRecovery::NextClause,
                TokenKind::Punct(Punct::LBrace) => depth += 1,
                TokenKind::Punct(Punct::RBrace) => {
                    if depth == 0 {
                        return ClauseRecovery::BodyClosed;
                    }
                    depth -= 1;
                }
                _ => {}
            }
        }
    }

    // ---- statements -----------------------------------------------------

    fn statement(&mut self) -> PResult<StmtKind> {
        let tok = self.peek().clone();
        let TokenKind::Ident(word) = &tok.kind else {
            return Err(self.unexpected("a statement"));
        };
        match word.as_str() {
            "policy" => {
                self.bump();
                let name = self.string("the policy name (a string)")?;
                self.expect_punct(Punct::Semi)?;
                Ok(StmtKind::Policy(name))
            }
            "levels" => {
                self.bump();
                let mut levels = vec![self.ident("a level name")?];
                while self.eat_punct(Punct::Lt).is_some() {
                    levels.push(self.ident("a level name")?);
                }
                self.expect_semi_or("`<`")?;
                Ok(StmtKind::Levels(levels))
            }
            "categories" | "category" => self.decl(DeclKind::Categories, "a category name"),
            "sinks" | "sink" => self.decl(DeclKind::Sinks, "a sink name"),
            "sets" | "set" => self.decl(DeclKind::Sets, "a set name"),
            "facts" | "fact" => self.decl(DeclKind::Facts, "a fact name"),
            "label" => {
                self.bump();
                let name = self.ident("a label name")?;
                self.expect_punct(Punct::Assign)?;
                let label = self.label()?;
                self.expect_punct(Punct::Semi)?;
                Ok(StmtKind::Label { name, label })
            }
            "tool" => self.tool(),
            "resource" => {
                self.bump();
                let pattern = self.pattern()?;
                self.expect_kw("label")?;
                let label = self.label()?;
                self.expect_punct(Punct::Semi)?;
                Ok(StmtKind::Resource { pattern, label })
            }
            "sanitizer" => self.sanitizer(),
            "scope" => {
                self.bump();
                let name = self.ident("a scope name")?;
                self.expect_punct(Punct::Colon)?;
                let mut tools = vec![self.tool_pat()?];
                while self.eat_punct(Punct::Comma).is_some() {
                    tools.push(self.tool_pat()?);
                }
                self.expect_semi_or("`,`")?;
                Ok(StmtKind::Scope { name, tools })
            }
            "agent" => {
                self.bump();
                let name = self.ident("an agent name")?;
                self.expect_kw("from")?;
                let parent = self.ident("the delegating agent")?;
                let scope = match self.eat_kw("scope") {
                    Some(_) => Some(self.ident("a scope name")?),
                    None => None,
                };
                let own_context = match self.eat_kw("own") {
                    Some(_) => {
                        self.expect_kw("context")?;
                        true
                    }
                    None => false,
                };
                self.expect_semi_or(match (scope.is_some(), own_context) {
                    (_, true) => "",
                    (true, false) => "`own context`",
                    (false, false) => "`scope`, `own context`",
                })?;
                Ok(StmtKind::Agent {
                    name,
                    parent,
                    scope,
                    own_context,
                })
            }
            "grant" => self.grant(),
            "deny" | "pause" | "allow" => self.rule(),
            "obligation" => self.obligation(),
            "provenance" => {
                self.bump();
                self.expect_kw("by")?;
                self.expect_kw("value")?;
                self.expect_punct(Punct::Semi)?;
                Ok(StmtKind::ProvenanceByValue)
            }
            "task" => {
                self.bump();
                self.expect_kw("seeds")?;
                let mut sets = vec![self.ident("a set name")?];
                while self.eat_punct(Punct::Comma).is_some() {
                    sets.push(self.ident("a set name")?);
                }
                self.expect_semi_or("`,`")?;
                Ok(StmtKind::TaskSeeds(sets))
            }
            "token" => self.token_shape(),
            other => Err(Diagnostic::error(
                tok.span,
                format!(
                    "unknown statement `{other}`{}",
                    did_you_mean(other, STATEMENTS.iter().copied())
                ),
            )),
        }
    }

    /// `;`, or an error that also names what else could have come here.
    /// `token NAME = PART PART ...;`, each part a string or
    /// `CLASS[{N}|{MIN,MAX}]`.
    fn token_shape(&mut self) -> PResult<StmtKind> {
        self.bump();
        let name = self.ident("a token kind name")?;
        self.expect_punct(Punct::Assign)?;
        let mut parts = Vec::new();
        let mut span: Option<Span> = None;
        loop {
            let start = self.peek().span;
            let part = match &self.peek().kind {
                TokenKind::Str(_) => ShapePartExpr::Literal(self.string("a literal")?),
                TokenKind::Ident(_) => {
                    let class = self.bare_ident("a character class")?;
                    let (min, max) = if self.eat_punct(Punct::LBrace).is_some() {
                        let min = self.int("a repetition count")?;
                        let max = match self.eat_punct(Punct::Comma) {
                            Some(_) => Some(self.int("the most repetitions")?),
                            None => None,
                        };
                        self.expect_punct(Punct::RBrace)?;
                        (min, max)
                    } else {
                        let one = IntLit {
                            value: 1,
                            span: class.span,
                        };
                        (one, None)
                    };
                    ShapePartExpr::Class { class, min, max }
                }
                _ if parts.is_empty() => {
                    return Err(self.unexpected("a string or a character class (`digit`, `upper`, `lower`, `letter`, `alnum`, `hex`)"))
                }
                _ => break,
            };
            let at = start.to(self.prev);
            span = Some(span.map_or(at, |s: Span| s.to(at)));
            parts.push(part);
        }
        self.expect_semi_or("a string or a character class")?;
        let span = span.unwrap_or(name.span);
        Ok(StmtKind::TokenShape { name, parts, span })
    }

    fn expect_semi_or(&mut self, alternative: &str) -> PResult<Span> {
        match self.eat_punct(Punct::Semi) {
            Some(s) => Ok(s),
            None if alternative.is_empty() => Err(self.unexpected("`;`")),
            None => Err(self.unexpected(&format!("{alternative} or `;`"))),
        }
    }

    fn decl(&mut self, kind: DeclKind, what: &str) -> PResult<StmtKind> {
        self.bump();
        let mut names = vec![self.ident(what)?];
        while self.eat_punct(Punct::Comma).is_some() {
            names.push(self.ident(what)?);
        }
        self.expect_semi_or("`,`")?;
        Ok(StmtKind::Decl { kind, names })
    }

    /// `NAME[?]: TYPE`, where TYPE is a scalar type, `list<TYPE>`, an
    /// object `{NAME[?]: TYPE, ...}`, or `{...}[]` (a list of objects).
    /// `depth` counts the objects around it.
    fn param_decl(&mut self, what: &str, depth: usize) -> PResult<ParamDecl> {
        let name = self.ident(what)?;
        let optional = self.eat_punct(Punct::Question).is_some();
        self.expect_punct(Punct::Colon)?;
        if self.is_punct(Punct::LBrace) {
            let (ty, fields) = self.object_type(depth)?;
            let list = if self.eat_punct(Punct::LBracket).is_some() {
                self.expect_punct(Punct::RBracket)?;
                true
            } else {
                false
            };
            return Ok(ParamDecl {
                name,
                optional,
                ty,
                list,
                fields: Some(fields),
            });
        }
        let first = self.bare_ident(
            "a parameter type (string, int, bool, decimal, list<TYPE> or {FIELD: TYPE, ...})",
        )?;
        let (ty, list, fields) = if first.name == "list" && self.is_punct(Punct::Lt) {
            self.bump();
            if self.is_punct(Punct::LBrace) {
                let (ty, fields) = self.object_type(depth)?;
                self.expect_punct(Punct::Gt)?;
                (ty, true, Some(fields))
            } else {
                let inner = self.bare_ident(
                    "an element type (string, int, bool, decimal or {FIELD: TYPE, ...})",
                )?;
                self.expect_punct(Punct::Gt)?;
                (inner, true, None)
            }
        } else {
            (first, false, None)
        };
        Ok(ParamDecl {
            name,
            optional,
            ty,
            list,
            fields,
        })
    }

    /// `{NAME[?]: TYPE, ...}` (at least one field); the type's name is
    /// `object`, spanning the braces.
    fn object_type(&mut self, depth: usize) -> PResult<(Ident, Vec<ParamDecl>)> {
        let start = self.peek().span;
        if depth + 1 > agenra_core::object::MAX_DEPTH {
            return Err(Diagnostic::error(
                start,
                format!(
                    "object types nest more than {} deep",
                    agenra_core::object::MAX_DEPTH
                ),
            ));
        }
        self.expect_punct(Punct::LBrace)?;
        let mut fields = vec![self.param_decl("a field name", depth + 1)?];
        while self.eat_punct(Punct::Comma).is_some() {
            if self.is_punct(Punct::RBrace) {
                break;
            }
            fields.push(self.param_decl("a field name", depth + 1)?);
        }
        let end = self.expect_punct(Punct::RBrace)?;
        Ok((
            Ident {
                name: "object".into(),
                span: start.to(end),
                quoted: false,
            },
            fields,
        ))
    }

    fn tool(&mut self) -> PResult<StmtKind> {
        self.bump();
        let name = self.ident("a tool name")?;
        self.expect_punct(Punct::LParen)?;
        let mut params = Vec::new();
        if self.eat_punct(Punct::RParen).is_none() {
            loop {
                params.push(self.param_decl("a parameter name", 0)?);
                if self.eat_punct(Punct::Comma).is_none() {
                    self.expect_punct(Punct::RParen)?;
                    break;
                }
            }
        }
        if self.eat_punct(Punct::Semi).is_some() {
            return Ok(StmtKind::Tool(ToolDecl {
                name,
                params,
                body: None,
            }));
        }
        let open = self
            .eat_punct(Punct::LBrace)
            .ok_or_else(|| self.unexpected("`{` or `;`"))?;
        self.hoist_before(open.end);
        let body = self.tool_body()?;
        Ok(StmtKind::Tool(ToolDecl {
            name,
            params,
            body: Some(body),
        }))
    }

    fn tool_body(&mut self) -> PResult<ToolBody> {
        let mut clauses = Vec::new();
        loop {
            let first = self.peek().clone();
            let mut comments = self.comments_before(first.span.start);
            if self.eat_punct(Punct::RBrace).is_some() {
                return Ok(ToolBody {
                    clauses,
                    closing_comments: comments,
                });
            }
            if self.at_eof() {
                return Err(self.unexpected("a tool clause or `}`"));
            }
            match self.tool_clause() {
                Ok(kind) => {
                    let end = self.prev;
                    comments.extend(self.comments_before(end.end).into_iter().map(|c| Comment {
                        blank_before: false,
                        ..c
                    }));
                    let trailing = self.trailing_comment(end);
                    clauses.push(ToolClause {
                        kind,
                        span: first.span.to(end),
                        trivia: Trivia {
                            comments,
                            blank_before: first.blank_before,
                            trailing,
                        },
                    });
                }
                Err(d) => {
                    self.errors.push(d);
                    if let ClauseRecovery::BodyClosed = self.recover_clause() {
                        return Ok(ToolBody {
                            clauses,
                            closing_comments: Vec::new(),
                        });
                    }
                }
            }
        }
    }

    fn tool_clause(&mut self) -> PResult<ToolClauseKind> {
        const CLAUSES: &[&str] = &[
            "resource",
            "output",
            "sink",
            "sanitizer",
            "fact",
            "provenance",
        ];
        let tok = self.peek().clone();
        let word = match &tok.kind {
            TokenKind::Ident(w) => w.clone(),
            _ => {
                return Err(self
                    .unexpected("a tool clause (resource, output, sink, sanitizer, fact) or `}`"))
            }
        };
        let kind = match word.as_str() {
            "resource" => {
                self.bump();
                ToolClauseKind::Resource(self.ident("a parameter name")?)
            }
            "output" => {
                self.bump();
                let field = matches!(self.peek().kind, TokenKind::Ident(_) | TokenKind::Quoted(_))
                    && self.peek_n(1) == Some(&TokenKind::Punct(Punct::Colon));
                if field {
                    let path = self.ident("a field path")?;
                    self.expect_punct(Punct::Colon)?;
                    ToolClauseKind::OutputField {
                        path,
                        label: self.label()?,
                    }
                } else {
                    ToolClauseKind::Output(self.label()?)
                }
            }
            "sink" | "sinks" => {
                self.bump();
                let mut sinks = vec![self.ident("a sink name")?];
                while self.eat_punct(Punct::Comma).is_some() {
                    sinks.push(self.ident("a sink name")?);
                }
                let mut on = Vec::new();
                if self.eat_kw("on").is_some() {
                    on.push(self.ident("a parameter name")?);
                    while self.eat_punct(Punct::Comma).is_some() {
                        on.push(self.ident("a parameter name")?);
                    }
                }
                ToolClauseKind::Sinks { sinks, on }
            }
            "sanitizer" => {
                self.bump();
                ToolClauseKind::Sanitizer(self.ident("a sanitizer name")?)
            }
            "fact" => {
                self.bump();
                let fact = self.ident("a fact name")?;
                let when = match self.eat_kw("when") {
                    Some(_) => Some(self.output_test()?),
                    None => None,
                };
                ToolClauseKind::Fact { fact, when }
            }
            "provenance" => {
                self.bump();
                let mode = self.bare_ident("`off`, `exact`, `words` or `tokens`")?;
                self.expect_kw("on")?;
                let mut params = vec![self.ident("a parameter name")?];
                while self.eat_punct(Punct::Comma).is_some() {
                    params.push(self.ident("a parameter name")?);
                }
                ToolClauseKind::Provenance { mode, params }
            }
            other => {
                return Err(Diagnostic::error(
                    tok.span,
                    format!(
                        "unknown tool clause `{other}`{}",
                        did_you_mean(other, CLAUSES.iter().copied())
                    ),
                ))
            }
        };
        self.expect_punct(Punct::Semi)?;
        Ok(kind)
    }

    fn output_test(&mut self) -> PResult<OutputTestExpr> {
        let start = self.peek().span;
        let quant = match (&self.peek().kind, self.peek_n(1)) {
            (TokenKind::Ident(w), Some(TokenKind::Ident(next)))
                if (w == "any" || w == "all") && next.starts_with("output") =>
            {
                Some(self.ident("`any` or `all`")?)
            }
            _ => None,
        };
        let tok = self.peek().clone();
        let path = match &tok.kind {
            TokenKind::Ident(name) if name == "output" => {
                self.bump();
                if let TokenKind::Str(p) = &self.peek().kind {
                    let value = p.clone();
                    let span = self.bump().span;
                    OutputPath::Pointer(StrLit { value, span })
                } else {
                    OutputPath::Whole(tok.span)
                }
            }
            TokenKind::Ident(name) if name.starts_with("output.") => {
                self.bump();
                OutputPath::Dotted(Ident {
                    name: name["output.".len()..].to_string(),
                    span: tok.span,
                    quoted: false,
                })
            }
            _ => {
                return Err(
                    self.unexpected("`output`, `output.FIELD` or `output \"/json/pointer\"`")
                )
            }
        };
        let op = self.pred_op()?;
        Ok(OutputTestExpr {
            quant,
            path,
            op,
            span: start.to(self.prev),
        })
    }

    fn sanitizer(&mut self) -> PResult<StmtKind> {
        self.bump();
        let name = self.ident("a sanitizer name")?;
        let mut clauses = Vec::new();
        loop {
            if self.eat_punct(Punct::Semi).is_some() {
                break;
            }
            if let Some(start) = self.eat_kw("removes") {
                let cats = self.braced_names("a category name", true)?;
                clauses.push(SanitizerClause::Removes(cats, start.to(self.prev)));
            } else if let Some(start) = self.eat_kw("max") {
                let level = self.ident("a level name")?;
                clauses.push(SanitizerClause::Max(level, start.to(self.prev)));
            } else if let Some(span) = self.eat_kw("trusts") {
                clauses.push(SanitizerClause::Trusts(span));
            } else {
                return Err(self.unexpected("a sanitizer clause (removes, max, trusts) or `;`"));
            }
        }
        Ok(StmtKind::Sanitizer { name, clauses })
    }

    /// `per tenant` / `per session` and `per WINDOW` (`per 10m`, `per
    /// day`) after a quota or a budget, if written, in either order.
    fn scope_lit(&mut self) -> PResult<Option<QuotaScopeLit>> {
        let mut out: Option<QuotaScopeLit> = None;
        while let Some(per) = self.eat_kw("per") {
            let mut lit = out.unwrap_or(QuotaScopeLit {
                tenant: false,
                scoped: false,
                window: None,
                span: per,
            });
            if self.is_kw("tenant") || self.is_kw("session") {
                if lit.scoped {
                    return Err(self.unexpected("one `per tenant` or `per session`"));
                }
                lit.tenant = self.eat_kw("tenant").is_some();
                if !lit.tenant {
                    self.bump();
                }
                lit.scoped = true;
            } else {
                if lit.window.is_some() {
                    return Err(self.unexpected("one window (`per 10m`, `per day`)"));
                }
                lit.window = Some(self.window_lit(per)?);
            }
            lit.span = lit.span.to(self.prev);
            out = Some(lit);
        }
        Ok(out)
    }

    /// A window after `per`: `day`, `hour`, `minute`, `second`, or a count
    /// and a unit (`10m`, `2 h`; units `s`, `m`, `h`, `d`).
    fn window_lit(&mut self, per: Span) -> PResult<WindowLit> {
        const EXPECTED: &str =
            "`tenant`, `session` or a window (`day`, `hour`, `minute`, `second`, `10m`, `2h`, `30s`, `7d`) after `per`";
        let named = [
            ("day", 86_400),
            ("hour", 3_600),
            ("minute", 60),
            ("second", 1),
        ];
        for (word, secs) in named {
            if self.eat_kw(word).is_some() {
                return Ok(WindowLit {
                    secs,
                    span: per.to(self.prev),
                });
            }
        }
        let TokenKind::Int(n) = self.peek().kind else {
            return Err(self.unexpected(EXPECTED));
        };
        self.bump();
        let unit = match &self.peek().kind {
            TokenKind::Ident(u) => match u.as_str() {
                "s" => 1u64,
                "m" => 60,
                "h" => 3_600,
                "d" => 86_400,
                _ => return Err(self.unexpected("a window unit (`s`, `m`, `h` or `d`)")),
            },
            _ => return Err(self.unexpected("a window unit (`s`, `m`, `h` or `d`)")),
        };
        self.bump();
        let secs = u64::try_from(n)
            .ok()
            .filter(|&n| n > 0)
            .and_then(|n| n.checked_mul(unit));
        let span = per.to(self.prev);
        match secs {
            Some(secs) => Ok(WindowLit { secs, span }),
            None => Err(Diagnostic::error(
                span,
                format!("a window must be at least 1 second and fit in 64 bits, not {n}"),
            )),
        }
    }

    fn grant(&mut self) -> PResult<StmtKind> {
        self.bump();
        let name = self.ident("a grant name")?;
        self.expect_punct(Punct::Colon)?;
        let tool = self.ident("a tool name")?;
        let mut clauses = Vec::new();
        loop {
            if self.eat_punct(Punct::Semi).is_some() {
                break;
            }
            let start = self.peek().span;
            let kind = if self.eat_kw("on").is_some() {
                GrantClauseKind::On(self.pattern()?)
            } else if self.eat_kw("where").is_some() {
                GrantClauseKind::Where(self.cond()?)
            } else if self.eat_kw("quota").is_some() {
                let n = if self.eat_kw("unlimited").is_some() {
                    None
                } else {
                    Some(self.int("a quota (an integer or `unlimited`)")?)
                };
                let scope = self.scope_lit()?;
                GrantClauseKind::Quota(n, scope)
            } else if self.eat_kw("budget").is_some() {
                let amount = self.number()?;
                if self.eat_kw("on").is_none() {
                    return Err(self.unexpected("`on PARAM` after the budget"));
                }
                let param = self.ident("the parameter the budget is spent in")?;
                let scope = self.scope_lit()?;
                GrantClauseKind::Budget(BudgetLit {
                    amount,
                    param,
                    scope,
                })
            } else if self.eat_kw("approval").is_some() {
                GrantClauseKind::Approval
            } else if self.eat_kw("expires").is_some() {
                GrantClauseKind::Expires(self.int("an expiry time (seconds)")?)
            } else if self.eat_kw("discovers").is_some() {
                GrantClauseKind::Discovers(self.ident("a set name")?)
            } else if self.eat_kw("agent").is_some() {
                GrantClauseKind::Agent(self.ident("an agent name")?)
            } else {
                return Err(self.unexpected(
                    "a grant clause (on, where, quota, budget, approval, expires, discovers, agent) or `;`",
                ));
            };
            clauses.push(GrantClause {
                kind,
                span: start.to(self.prev),
            });
        }
        Ok(StmtKind::Grant(GrantDecl {
            name,
            tool,
            clauses,
        }))
    }

    /// `deny|pause flow|path|count|call`, `allow flow`.
    fn rule(&mut self) -> PResult<StmtKind> {
        let effect_tok = self.bump();
        let effect = match &effect_tok.kind {
            TokenKind::Ident(w) if w == "allow" => None,
            TokenKind::Ident(w) if w == "pause" => Some(RuleEffectKw::Pause),
            _ => Some(RuleEffectKw::Deny),
        };
        let kind_tok = self.peek().clone();
        let kind = match (&kind_tok.kind, effect) {
            (TokenKind::Ident(w), _) if w == "flow" => "flow",
            (TokenKind::Ident(w), Some(_)) if w == "path" => "path",
            (TokenKind::Ident(w), Some(_)) if w == "count" => "count",
            (TokenKind::Ident(w), Some(_)) if w == "call" => "call",
            (_, None) => return Err(self.unexpected("`flow`")),
            (_, Some(_)) => return Err(self.unexpected("`flow`, `path`, `count` or `call`")),
        };
        self.bump();
        let name = self.ident("a rule name")?;
        self.expect_punct(Punct::Colon)?;
        match (kind, effect) {
            ("flow", _) => {
                let flow_effect = match effect {
                    None => {
                        self.expect_kw("up")?;
                        self.expect_kw("to")?;
                        FlowEffectExpr::Allow(self.label()?)
                    }
                    Some(RuleEffectKw::Deny) => FlowEffectExpr::Deny(self.label_pat()?),
                    Some(RuleEffectKw::Pause) => FlowEffectExpr::Pause(self.label_pat()?),
                };
                self.expect_punct(Punct::Arrow)?;
                // `-> agent NAME` unless a sink is called `agent`.
                let to_agent = self.is_kw("agent")
                    && (matches!(self.peek_n(1), Some(TokenKind::Ident(w)) if w != "when")
                        || matches!(self.peek_n(1), Some(TokenKind::Quoted(_))));
                if to_agent {
                    self.bump();
                }
                let sink = self.ident(if to_agent {
                    "an agent name"
                } else {
                    "a sink name or `agent NAME`"
                })?;
                let when = match self.eat_kw("when") {
                    Some(_) => Some(self.cond()?),
                    None => None,
                };
                self.expect_semi_or(if when.is_none() {
                    "`when`"
                } else {
                    "`and`, `or`"
                })?;
                Ok(StmtKind::Flow(FlowDecl {
                    name,
                    effect: flow_effect,
                    sink,
                    to_agent,
                    when,
                }))
            }
            ("call", Some(effect)) => {
                let tool = self.ident("a tool name")?;
                self.expect_kw("when")?;
                let when = self.cond()?;
                self.expect_semi_or("`and`, `or`")?;
                Ok(StmtKind::CallRule(CallRuleDecl {
                    effect,
                    name,
                    tool,
                    when,
                }))
            }
            ("path", Some(effect)) => {
                let mut steps = vec![self.step()?];
                self.expect_punct(Punct::Arrow)?;
                steps.push(self.step()?);
                while self.eat_punct(Punct::Arrow).is_some() {
                    steps.push(self.step()?);
                }
                let reset = self.reset()?;
                self.expect_semi_or(if reset.is_some() { "" } else { "`->`, `reset`" })?;
                Ok(StmtKind::Path(PathDecl {
                    effect,
                    name,
                    steps,
                    reset,
                }))
            }
            (_, effect) => {
                self.expect_kw("at")?;
                self.expect_kw("most")?;
                let max = self.int("a count")?;
                let step = self.step()?;
                let within = self.within()?;
                let reset = self.reset()?;
                self.expect_semi_or(match (&within, &reset) {
                    (_, Some(_)) => "",
                    (None, None) => "`within`, `reset`",
                    (Some(_), None) => "`reset`",
                })?;
                Ok(StmtKind::Count(CountDecl {
                    effect: effect.unwrap_or(RuleEffectKw::Deny),
                    name,
                    max,
                    step,
                    within,
                    reset,
                }))
            }
        }
    }

    /// `within WINDOW` after a count's step (a sliding window).
    fn within(&mut self) -> PResult<Option<WindowLit>> {
        let Some(kw) = self.eat_kw("within") else {
            return Ok(None);
        };
        let named = ["day", "hour", "minute", "second"]
            .iter()
            .any(|w| self.is_kw(w));
        if !named && !matches!(self.peek().kind, TokenKind::Int(_)) {
            return Err(self.unexpected(
                "a window (`day`, `hour`, `minute`, `second`, `10m`, `2h`, `30s`, `7d`) after `within`",
            ));
        }
        Ok(Some(self.window_lit(kw)?))
    }

    fn reset(&mut self) -> PResult<Option<StepExpr>> {
        if self.eat_kw("reset").is_none() {
            return Ok(None);
        }
        self.expect_kw("on")?;
        Ok(Some(self.step()?))
    }

    fn obligation(&mut self) -> PResult<StmtKind> {
        self.bump();
        let name = self.ident("an obligation name")?;
        self.expect_punct(Punct::Colon)?;
        self.expect_kw("require")?;
        let fact = self.ident("a fact name")?;
        let since = match self.eat_kw("since") {
            Some(_) => Some(self.tool_pat()?),
            None => None,
        };
        self.expect_kw("before")?;
        let before = self.tool_pat()?;
        let else_pause = match self.eat_kw("else") {
            Some(_) => {
                self.expect_kw("pause")?;
                true
            }
            None => false,
        };
        self.expect_semi_or(if else_pause { "" } else { "`else`" })?;
        Ok(StmtKind::Obligation(ObligationDecl {
            name,
            fact,
            since,
            before,
            else_pause,
        }))
    }

    // ---- pieces ---------------------------------------------------------

    /// `{a, b}` (an empty list only when `allow_empty`).
    fn braced_names(&mut self, what: &str, allow_empty: bool) -> PResult<Vec<Ident>> {
        self.expect_punct(Punct::LBrace)?;
        let mut names = Vec::new();
        if allow_empty && self.eat_punct(Punct::RBrace).is_some() {
            return Ok(names);
        }
        loop {
            names.push(self.ident(what)?);
            if self.eat_punct(Punct::Comma).is_none() {
                self.expect_punct(Punct::RBrace)?;
                return Ok(names);
            }
        }
    }

    fn label(&mut self) -> PResult<LabelExpr> {
        let Some(start) = self.eat_punct(Punct::Lt) else {
            return Ok(LabelExpr::Named(self.ident(
                "a label (`<level, {categories}, trust>` or a label name)",
            )?));
        };
        let level = self.ident("a level name")?;
        self.expect_punct(Punct::Comma)?;
        let categories = self.braced_names("a category name", true)?;
        self.expect_punct(Punct::Comma)?;
        let trusted = if self.eat_kw("trusted").is_some() {
            true
        } else if self.eat_kw("untrusted").is_some() {
            false
        } else {
            return Err(self.unexpected("`trusted` or `untrusted`"));
        };
        let end = self.expect_punct(Punct::Gt)?;
        Ok(LabelExpr::Literal {
            level,
            categories,
            trusted,
            span: start.to(end),
        })
    }

    fn label_pat(&mut self) -> PResult<LabelPatExpr> {
        if let Some(span) = self.eat_kw("any") {
            return Ok(LabelPatExpr::Any(span));
        }
        let mut atoms = vec![self.label_atom()?];
        while self.eat_kw("and").is_some() {
            atoms.push(self.label_atom()?);
        }
        Ok(LabelPatExpr::Atoms(atoms))
    }

    fn label_atom(&mut self) -> PResult<LabelAtom> {
        let start = self.peek().span;
        let kind = if self.eat_kw("untrusted").is_some() {
            LabelAtomKind::Untrusted
        } else if self.eat_kw("sensitivity").is_some() {
            self.expect_punct(Punct::Ge)?;
            LabelAtomKind::Sensitivity(self.ident("a level name")?)
        } else if self.eat_kw("category").is_some() {
            if self.is_punct(Punct::LBrace) {
                LabelAtomKind::Category(self.braced_names("a category name", false)?)
            } else {
                LabelAtomKind::Category(vec![self.ident("a category name or `{`")?])
            }
        } else {
            return Err(self
                .unexpected("a label pattern (any, untrusted, sensitivity >= LEVEL, category C)"));
        };
        Ok(LabelAtom {
            kind,
            span: start.to(self.prev),
        })
    }

    fn pattern(&mut self) -> PResult<PatternLit> {
        let start = self.peek().span;
        let pattern = if let TokenKind::Str(s) = &self.peek().kind {
            let s = s.clone();
            self.bump();
            Pattern::Exact(s)
        } else if self.eat_kw("prefix").is_some() {
            Pattern::Prefix(self.string("a string after `prefix`")?.value)
        } else if self.eat_kw("glob").is_some() {
            Pattern::Glob(self.string("a string after `glob`")?.value)
        } else {
            return Err(self.unexpected("a pattern (a string, `prefix \"...\"` or `glob \"...\"`)"));
        };
        Ok(PatternLit {
            pattern,
            span: start.to(self.prev),
        })
    }

    fn tool_pat(&mut self) -> PResult<ToolPat> {
        match &self.peek().kind {
            TokenKind::Str(s) => {
                let value = s.clone();
                let span = self.bump().span;
                Ok(ToolPat::Glob(StrLit { value, span }))
            }
            TokenKind::Ident(_) | TokenKind::Quoted(_) => Ok(ToolPat::Name(self.ident("a tool")?)),
            _ => Err(self.unexpected("a tool name or a glob string")),
        }
    }

    /// `COND := AND {"or" AND}`; `AND := UNARY {"and" UNARY}`;
    /// `UNARY := "!" UNARY | "(" COND ")" | TEST`.
    fn cond(&mut self) -> PResult<CondExpr> {
        self.cond_list("or", Self::cond_and, CondExpr::Or)
    }

    fn cond_and(&mut self) -> PResult<CondExpr> {
        self.cond_list("and", Self::cond_unary, CondExpr::And)
    }

    /// `PART {KEYWORD PART}`: one part alone, or `make` of them all.
    fn cond_list(
        &mut self,
        keyword: &str,
        part: fn(&mut Self) -> PResult<CondExpr>,
        make: fn(Vec<CondExpr>) -> CondExpr,
    ) -> PResult<CondExpr> {
        let mut parts = vec![part(self)?];
        while self.eat_kw(keyword).is_some() {
            parts.push(part(self)?);
        }
        Ok(if parts.len() == 1 {
            parts.remove(0)
        } else {
            make(parts)
        })
    }

    fn cond_unary(&mut self) -> PResult<CondExpr> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            self.depth -= 1;
            return Err(Diagnostic::error(
                self.peek().span,
                format!("conditions nest more than {MAX_NESTING} deep"),
            ));
        }
        let out = self.cond_unary_inner();
        self.depth -= 1;
        out
    }

    fn cond_unary_inner(&mut self) -> PResult<CondExpr> {
        if let Some(start) = self.eat_punct(Punct::Bang) {
            let inner = self.cond_unary()?;
            return Ok(CondExpr::Not(Box::new(inner), start.to(self.prev)));
        }
        if let Some(start) = self.eat_punct(Punct::LParen) {
            let inner = self.cond()?;
            let end = self.expect_punct(Punct::RParen)?;
            return Ok(CondExpr::Group(Box::new(inner), start.to(end)));
        }
        if self.is_kw("agent") {
            let start = self.bump().span;
            let (negated, list) = if self.eat_punct(Punct::EqEq).is_some() {
                (false, false)
            } else if self.eat_punct(Punct::Ne).is_some() {
                (true, false)
            } else if self.eat_kw("in").is_some() {
                (false, true)
            } else if self.eat_kw("not").is_some() {
                self.expect_kw("in")?;
                (true, true)
            } else {
                return Err(self.unexpected("`==`, `!=`, `in` or `not in` after `agent`"));
            };
            let agents = if list {
                self.expect_punct(Punct::LBracket)?;
                let mut agents = vec![self.ident("an agent name")?];
                while self.eat_punct(Punct::Comma).is_some() {
                    agents.push(self.ident("an agent name")?);
                }
                self.expect_punct(Punct::RBracket)?;
                agents
            } else {
                vec![self.ident("an agent name")?]
            };
            return Ok(CondExpr::Agent {
                negated,
                list,
                agents,
                span: start.to(self.prev),
            });
        }
        if self.at_each() {
            return self.each();
        }
        if self.at_tokens() {
            return self.tokens();
        }
        Ok(CondExpr::Test(self.pred()?))
    }

    /// Whether `any|all KIND in PARAM [not] from` starts here (a token test).
    fn at_tokens(&self) -> bool {
        let name =
            |k: Option<&TokenKind>| matches!(k, Some(TokenKind::Ident(_) | TokenKind::Quoted(_)));
        let word =
            |n: usize, w: &str| matches!(self.peek_n(n), Some(TokenKind::Ident(x)) if x == w);
        (self.is_kw("any") || self.is_kw("all"))
            && matches!(self.peek_n(1), Some(TokenKind::Ident(_)))
            && word(2, "in")
            && name(self.peek_n(3))
            && (word(4, "from") || (word(4, "not") && word(5, "from")))
    }

    /// `any|all KIND in PARAM [not] from SOURCE`.
    fn tokens(&mut self) -> PResult<CondExpr> {
        let quant = self.ident("`any` or `all`")?;
        let kind = self.bare_ident("a token kind")?;
        self.expect_kw("in")?;
        let param = self.ident("a string parameter")?;
        let negated = self.eat_kw("not").is_some();
        self.expect_kw("from")?;
        let source = self.bare_ident("`user`, `trusted` or `untrusted`")?;
        let span = quant.span.to(source.span);
        Ok(CondExpr::Tokens(Box::new(TokensExpr {
            quant,
            kind,
            param,
            negated,
            source,
            span,
        })))
    }

    /// Whether `any|all NAME in LIST :` starts here (a per-element test).
    fn at_each(&self) -> bool {
        let name =
            |k: Option<&TokenKind>| matches!(k, Some(TokenKind::Ident(_) | TokenKind::Quoted(_)));
        (self.is_kw("any") || self.is_kw("all"))
            && matches!(self.peek_n(1), Some(TokenKind::Ident(_)))
            && matches!(self.peek_n(2), Some(TokenKind::Ident(w)) if w == "in")
            && name(self.peek_n(3))
            && matches!(self.peek_n(4), Some(TokenKind::Punct(Punct::Colon)))
    }

    /// `any|all VAR in LIST: BODY`, where BODY is one unary condition.
    fn each(&mut self) -> PResult<CondExpr> {
        let quant = self.ident("`any` or `all`")?;
        let var = self.bare_ident("a name for the element")?;
        if ["agent", "any", "all", "in", "not", "and", "or"].contains(&var.name.as_str()) {
            return Err(Diagnostic::error(
                var.span,
                format!(
                    "`{}` is a keyword in conditions: name the element otherwise",
                    var.name
                ),
            ));
        }
        self.expect_kw("in")?;
        let list = self.ident("a list parameter")?;
        self.expect_punct(Punct::Colon)?;
        let body = self.cond_unary()?;
        let span = quant.span.to(self.prev);
        Ok(CondExpr::Each(EachExpr {
            quant,
            var,
            list,
            body: Box::new(body),
            span,
        }))
    }

    fn pred(&mut self) -> PResult<Pred> {
        let start = self.peek().span;
        // `any`/`all` is a quantifier when a parameter name follows it.
        let quant = match (&self.peek().kind, self.peek_n(1)) {
            (TokenKind::Ident(w), Some(TokenKind::Ident(next)))
                if (w == "any" || w == "all") && !TEST_WORDS.contains(&next.as_str()) =>
            {
                Some(self.ident("`any` or `all`")?)
            }
            (TokenKind::Ident(w), Some(TokenKind::Quoted(_))) if w == "any" || w == "all" => {
                Some(self.ident("`any` or `all`")?)
            }
            _ => None,
        };
        let param = self.ident("a parameter name, `agent`, `!` or `(`")?;
        let op = self.pred_op()?;
        let span = start.to(self.prev);
        Ok(Pred {
            quant,
            param,
            op,
            span,
        })
    }

    fn pred_op(&mut self) -> PResult<PredOp> {
        let tok = self.peek().clone();
        let op = match &tok.kind {
            TokenKind::Punct(p) => {
                let p = *p;
                let num_op: Option<fn(ValueLit) -> PredOp> = match p {
                    Punct::Lt => Some(PredOp::Lt),
                    Punct::Le => Some(PredOp::Le),
                    Punct::Gt => Some(PredOp::Gt),
                    Punct::Ge => Some(PredOp::Ge),
                    _ => None,
                };
                if let Some(make) = num_op {
                    self.bump();
                    make(self.number()?)
                } else if p == Punct::EqEq {
                    self.bump();
                    PredOp::Eq(self.value()?)
                } else if p == Punct::Ne {
                    self.bump();
                    PredOp::Ne(self.value()?)
                } else {
                    return Err(self.unexpected_test());
                }
            }
            TokenKind::Ident(w) => match w.as_str() {
                "not" if !matches!(self.peek_n(1), Some(TokenKind::Ident(n)) if n == "in") => {
                    let not = self.bump().span;
                    if self.is_kw("not") {
                        return Err(self.unexpected("a test after `not` (not another `not`)"));
                    }
                    let inner = self.pred_op()?;
                    if let PredOp::Eq(v) | PredOp::Ne(v) = &inner {
                        if v.value == Value::Null {
                            return Err(Diagnostic::error(
                                v.span,
                                "`not` before a `null` test: write `== null` or `!= null`",
                            ));
                        }
                    }
                    if matches!(inner, PredOp::Ne(_)) {
                        return Err(Diagnostic::error(not, "`not !=`: write `==` (or `not ==`)"));
                    }
                    PredOp::Not(Box::new(inner), not)
                }
                "in" | "not" => {
                    self.bump();
                    let negated = w == "not";
                    if negated {
                        self.expect_kw("in")?;
                    }
                    if self.eat_punct(Punct::LBracket).is_some() {
                        let mut values = vec![self.value()?];
                        while self.eat_punct(Punct::Comma).is_some() {
                            values.push(self.value()?);
                        }
                        self.expect_punct(Punct::RBracket)?;
                        if negated {
                            PredOp::NotInList(values)
                        } else {
                            PredOp::InList(values)
                        }
                    } else {
                        let set = self.ident("`[` or a set name")?;
                        if negated {
                            PredOp::NotInSet(set)
                        } else {
                            PredOp::InSet(set)
                        }
                    }
                }
                "contains" => {
                    self.bump();
                    PredOp::Contains(self.value()?)
                }
                "starts_with" => {
                    self.bump();
                    PredOp::StartsWith(self.string("a string")?)
                }
                "ends_with" => {
                    self.bump();
                    PredOp::EndsWith(self.string("a string")?)
                }
                "matches" => {
                    self.bump();
                    PredOp::Matches(self.pattern()?)
                }
                _ => return Err(self.unexpected_test()),
            },
            _ => return Err(self.unexpected_test()),
        };
        Ok(op)
    }

    fn unexpected_test(&self) -> Diagnostic {
        self.unexpected(
            "a test (==, !=, in, not in, contains, starts_with, ends_with, matches, <, <=, >, >=)",
        )
    }

    fn value(&mut self) -> PResult<ValueLit> {
        let tok = self.peek().clone();
        let value = match &tok.kind {
            TokenKind::Str(s) => Value::Str(s.clone()),
            TokenKind::Int(i) => Value::Int(*i),
            TokenKind::Decimal(d, _) => Value::Decimal(*d),
            TokenKind::Ident(w) if w == "true" => Value::Bool(true),
            TokenKind::Ident(w) if w == "false" => Value::Bool(false),
            TokenKind::Ident(w) if w == "null" => Value::Null,
            _ => return Err(self.unexpected("a value (a string, a number, true, false or null)")),
        };
        self.bump();
        let text = match &tok.kind {
            TokenKind::Decimal(_, t) => Some(t.clone()),
            _ => None,
        };
        Ok(ValueLit {
            value,
            span: tok.span,
            text,
        })
    }

    /// An integer or decimal literal.
    fn number(&mut self) -> PResult<ValueLit> {
        match self.peek().kind {
            TokenKind::Int(_) | TokenKind::Decimal(..) => self.value(),
            _ => Err(self.unexpected("a number")),
        }
    }

    fn step(&mut self) -> PResult<StepExpr> {
        let start = self.peek().span;
        let mut atoms = vec![self.step_atom()?];
        while !matches!(atoms.last().map(|a| &a.kind), Some(StepAtomKind::Where(_))) {
            if self.eat_kw("and").is_some() {
                atoms.push(self.step_atom()?);
            } else if let Some(at) = self.eat_kw("where") {
                // `call pay where amount > 100`: the condition ends the step.
                let cond = self.cond()?;
                atoms.push(StepAtom {
                    kind: StepAtomKind::Where(cond),
                    span: at.to(self.prev),
                });
            } else {
                break;
            }
        }
        Ok(StepExpr {
            atoms,
            span: start.to(self.prev),
        })
    }

    fn step_atom(&mut self) -> PResult<StepAtom> {
        let start = self.peek().span;
        let kind = if self.eat_kw("where").is_some() {
            StepAtomKind::Where(self.cond()?)
        } else if self.eat_kw("any").is_some() {
            StepAtomKind::Any
        } else if self.eat_kw("call").is_some() {
            StepAtomKind::Call(self.tool_pat()?)
        } else if self.eat_kw("to").is_some() {
            StepAtomKind::To(self.ident("a sink name")?)
        } else if self.eat_kw("reads").is_some() {
            self.expect_punct(Punct::LParen)?;
            let pat = self.label_pat()?;
            self.expect_punct(Punct::RParen)?;
            StepAtomKind::Reads(pat)
        } else {
            return Err(
                self.unexpected("a step (any, call TOOL, to SINK, reads(LABELPAT), where COND)")
            );
        };
        Ok(StepAtom {
            kind,
            span: start.to(self.prev),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(src: &str) -> Vec<String> {
        parse_file(src)
            .1
            .into_iter()
            .map(|d| d.to_string())
            .collect()
    }

    #[test]
    fn reports_one_error_per_statement_and_resynchronises() {
        let src = "grant a fs.read quota 1;\ntool x(p: string) {\n  resource;\n  output <public, {}, trusted>;\n}\nsinks net\ngrnat b: y quota 2;\n";
        assert_eq!(
            errors(src),
            vec![
                "1:9: error: expected `:`, found `fs.read`",
                "3:11: error: expected a parameter name, found `;`",
                "7:1: error: expected `,` or `;`, found `grnat`",
            ]
        );
        assert_eq!(
            errors("grnat b: y quota 2;"),
            vec!["1:1: error: unknown statement `grnat` (did you mean `grant`?)"]
        );
    }

    #[test]
    fn quoted_names_wherever_a_name_goes_and_never_keywords() {
        let src = "tool `get-tiny-image`(`message-type`: string, `agent`: int, `tags.x`: list<string>) { resource `message-type`; sink net on `message-type`; }\ngrant g: `get-tiny-image` where `agent` > 1 and any `tags.x` == \"a\" and agent == `sub-agent` quota 1;\ndeny flow f: any -> agent `sub-agent`;\nscope s: `get-tiny-image`, \"web.*\";\n";
        let (file, errs) = parse_file(src);
        assert!(errs.is_empty(), "{errs:?}");
        let StmtKind::Tool(tool) = &file.stmts[0].kind else {
            panic!("{:?}", file.stmts[0].kind)
        };
        assert_eq!(tool.name.name, "get-tiny-image");
        assert!(tool.name.quoted);
        let params: Vec<(&str, bool)> = tool
            .params
            .iter()
            .map(|p| (p.name.name.as_str(), p.name.quoted))
            .collect();
        assert_eq!(
            params,
            vec![("message-type", true), ("agent", true), ("tags.x", true)]
        );
        let StmtKind::Grant(g) = &file.stmts[1].kind else {
            panic!("{:?}", file.stmts[1].kind)
        };
        assert_eq!(g.tool.name, "get-tiny-image");
        let GrantClauseKind::Where(CondExpr::And(tests)) = &g.clauses[0].kind else {
            panic!("{:?}", g.clauses[0].kind)
        };
        // `` `agent` `` is the parameter; bare `agent` tests the calling agent.
        assert!(
            matches!(&tests[0], CondExpr::Test(p) if p.param.name == "agent" && p.quant.is_none())
        );
        assert!(
            matches!(&tests[1], CondExpr::Test(p) if p.param.name == "tags.x" && p.quant.as_ref().is_some_and(|q| q.name == "any"))
        );
        assert!(
            matches!(&tests[2], CondExpr::Agent { agents, .. } if agents[0].name == "sub-agent")
        );
        let StmtKind::Flow(f) = &file.stmts[2].kind else {
            panic!("{:?}", file.stmts[2].kind)
        };
        assert!(f.to_agent);
        assert_eq!(f.sink.name, "sub-agent");
        let StmtKind::Scope { tools, .. } = &file.stmts[3].kind else {
            panic!("{:?}", file.stmts[3].kind)
        };
        assert!(matches!(&tools[0], ToolPat::Name(id) if id.name == "get-tiny-image"));
        assert!(matches!(&tools[1], ToolPat::Glob(_)));
        // A quoted word is a name, not a keyword or a type.
        assert_eq!(
            errors("`grant` g: t quota 1;"),
            vec!["1:1: error: expected a statement, found quoted name `grant`"]
        );
        assert_eq!(
            errors("tool t(a: `string`);"),
            vec!["1:11: error: expected a parameter type (string, int, bool, decimal, list<TYPE> or {FIELD: TYPE, ...}), found quoted name `string`"]
        );
        assert_eq!(
            errors("tool get-tiny-image();"),
            vec!["1:6: error: `get-tiny-image` contains `-`; a name with characters other than letters, digits, `_` and `.` is written in backticks: `get-tiny-image`"]
        );
    }

    #[test]
    fn comments_attach_to_the_next_statement_or_trail_on_their_line() {
        let src = "// lead\n\ngrant a: t // inside\n  quota 1; // tail\n// end\n";
        let (file, errs) = parse_file(src);
        assert!(errs.is_empty());
        let stmt = &file.stmts[0];
        let texts: Vec<&str> = stmt
            .trivia
            .comments
            .iter()
            .map(|c| c.text.as_str())
            .collect();
        assert_eq!(texts, vec![" lead", " inside"]);
        assert!(stmt.trivia.blank_before);
        assert_eq!(
            stmt.trivia.trailing.as_ref().map(|c| c.text.as_str()),
            Some(" tail")
        );
        assert_eq!(file.trailing_comments.len(), 1);
    }
}
