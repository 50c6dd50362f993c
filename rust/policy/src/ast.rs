//! The syntax tree of a policy file. Every node carries its span; statements
//! (and tool-body clauses) carry the comments before them, so the formatter
//! can print them back.

use crate::span::Span;
use agenra_core::{Pattern, Value};

#[derive(Clone, Debug, PartialEq, Eq)]
/// A name as written: an identifier, possibly dotted (`fs.read`), or a
/// quoted name (`` `get-tiny-image` ``).
pub struct Ident {
    /// The name (unquoted, escapes resolved).
    pub name: String,
    /// Where it is written.
    pub span: Span,
    /// Written in backticks: never a keyword, and printed in backticks again.
    pub quoted: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// A string literal.
pub struct StrLit {
    /// The string, escapes resolved.
    pub value: String,
    /// Where it is written, quotes included.
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// An integer literal (quotas, times, counts).
pub struct IntLit {
    /// The integer.
    pub value: i64,
    /// Where it is written.
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// A value in a test: a string, integer, decimal, `true`, `false` or `null`.
pub struct ValueLit {
    /// The value.
    pub value: Value,
    /// Where it is written.
    pub span: Span,
    /// A decimal as written (`98.70`), for the formatter.
    pub text: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// A resource pattern: `"exact"`, `prefix "..."` or `glob "..."`.
pub struct PatternLit {
    /// The pattern.
    pub pattern: Pattern,
    /// Where it is written, keyword included.
    pub span: Span,
}

/// A `//` comment; `text` follows the `//`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Comment {
    /// What follows `//`, without trailing whitespace.
    pub text: String,
    /// Where it is written.
    pub span: Span,
    /// A blank line precedes the comment.
    pub blank_before: bool,
}

/// What surrounds a statement or clause in the source.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trivia {
    /// Comments before it, and comments from inside it, in source order.
    pub comments: Vec<Comment>,
    /// A blank line precedes the statement's first token.
    pub blank_before: bool,
    /// A comment on the same line, after its last token.
    pub trailing: Option<Comment>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
/// A whole policy file.
pub struct File {
    /// The statements, in source order.
    pub stmts: Vec<Stmt>,
    /// Comments after the last statement.
    pub trailing_comments: Vec<Comment>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// One statement, with its comments.
pub struct Stmt {
    /// What the statement says.
    pub kind: StmtKind,
    /// From its first token to its `;` (or the `}` of a tool body).
    pub span: Span,
    /// Its comments and blank lines, for the formatter.
    pub trivia: Trivia,
}

/// The name lists `categories`, `sinks`, `sets` and `facts`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeclKind {
    /// `categories` (or `category`): data categories labels carry.
    Categories,
    /// `sinks` (or `sink`): where data may leave (network, e-mail, ...).
    Sinks,
    /// `sets` (or `set`): discovered-resource sets that results and tasks grow.
    Sets,
    /// `facts` (or `fact`): facts that results establish, for obligations.
    Facts,
}

impl DeclKind {
    /// The plural keyword, as `agenra fmt` prints it.
    pub fn keyword(self) -> &'static str {
        match self {
            DeclKind::Categories => "categories",
            DeclKind::Sinks => "sinks",
            DeclKind::Sets => "sets",
            DeclKind::Facts => "facts",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// The kinds of statement.
pub enum StmtKind {
    /// `policy "NAME";`: the policy's name.
    Policy(StrLit),
    /// `levels a < b < ...;`: the sensitivity levels, lowest first.
    Levels(Vec<Ident>),
    /// `categories`, `sinks`, `sets` or `facts`, with the names it declares.
    Decl {
        /// Which list.
        kind: DeclKind,
        /// The names declared.
        names: Vec<Ident>,
    },
    /// `label NAME = LABEL;`: a named label.
    Label {
        /// The name defined.
        name: Ident,
        /// What it stands for (a literal or another name).
        label: LabelExpr,
    },
    /// `tool NAME(PARAMS) [{ ... }]`.
    Tool(ToolDecl),
    /// `resource PATTERN label LABEL;`: the label of the resources the pattern matches.
    Resource {
        /// The resources labeled.
        pattern: PatternLit,
        /// Their label.
        label: LabelExpr,
    },
    /// `sanitizer NAME CLAUSES;`: a trusted sanitizer specification.
    Sanitizer {
        /// The sanitizer's name.
        name: Ident,
        /// What it does to labels, in source order.
        clauses: Vec<SanitizerClause>,
    },
    /// `scope NAME: TOOLPAT, ...;`: the tools an agent confined to it may call.
    Scope {
        /// The scope's name.
        name: Ident,
        /// The tools it includes (names or globs).
        tools: Vec<ToolPat>,
    },
    /// `agent NAME from PARENT [scope S] [own context];`: a delegate.
    Agent {
        /// The agent's name.
        name: Ident,
        /// Its delegator (`from`).
        parent: Ident,
        /// The scope it is confined to, if any.
        scope: Option<Ident>,
        /// `own context`.
        own_context: bool,
    },
    /// `grant NAME: TOOL CLAUSES;`.
    Grant(GrantDecl),
    /// `deny|pause|allow flow ...`.
    Flow(FlowDecl),
    /// `deny|pause path ...`.
    Path(PathDecl),
    /// `deny|pause count ...`.
    Count(CountDecl),
    /// `obligation NAME: require ...`.
    Obligation(ObligationDecl),
    /// `deny|pause call ...`.
    CallRule(CallRuleDecl),
    /// `provenance by value;`
    ProvenanceByValue,
    /// `task seeds SET {, SET};`
    TaskSeeds(Vec<Ident>),
    /// `token NAME = PART PART ...;`: a token kind of a declared shape.
    TokenShape {
        /// The kind's name.
        name: Ident,
        /// Its shape, in order (at least one part when parsed).
        parts: Vec<ShapePartExpr>,
        /// The whole shape, from its first part to its last.
        span: Span,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// A part of a token shape: `"ORD-"`, `digit`, `digit{6}` or `alnum{2,8}`.
pub enum ShapePartExpr {
    /// Literal text.
    Literal(StrLit),
    /// A character class with its repetition (`{1}` when none is written).
    Class {
        /// The class's name (`digit`, `upper`, ...).
        class: Ident,
        /// The fewest characters.
        min: IntLit,
        /// The most characters (`None`: exactly `min`).
        max: Option<IntLit>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// A label: a literal `<LEVEL, {CATS}, trusted|untrusted>` or the name of a declared label.
pub enum LabelExpr {
    /// `<LEVEL, {CATS}, trusted|untrusted>`.
    Literal {
        /// The sensitivity level.
        level: Ident,
        /// The categories (possibly none).
        categories: Vec<Ident>,
        /// `trusted` rather than `untrusted`.
        trusted: bool,
        /// From `<` to `>`.
        span: Span,
    },
    /// A label declared with `label NAME = ...;`.
    Named(Ident),
}

impl LabelExpr {
    /// Where the label is written.
    pub fn span(&self) -> Span {
        match self {
            LabelExpr::Literal { span, .. } => *span,
            LabelExpr::Named(id) => id.span,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// A label pattern (`LABELPAT`): `any`, or atoms joined by `and`, all of which must hold.
pub enum LabelPatExpr {
    /// `any`: every label matches.
    Any(Span),
    /// Atoms joined by `and`, each kind at most once.
    Atoms(Vec<LabelAtom>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// One atom of a label pattern.
pub struct LabelAtom {
    /// What it tests.
    pub kind: LabelAtomKind,
    /// Where it is written.
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// The kinds of label-pattern atom: each is upward closed.
pub enum LabelAtomKind {
    /// `untrusted`: the label is untrusted.
    Untrusted,
    /// `sensitivity >= LEVEL`.
    Sensitivity(Ident),
    /// `category c` or `category {a, b}`.
    Category(Vec<Ident>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// A tool parameter: `name[?]: type` or `name[?]: list<type>`.
pub struct ParamDecl {
    /// The parameter's name, unique within its tool.
    pub name: Ident,
    /// `name?: ty`.
    pub optional: bool,
    /// The scalar type name (`string` in `list<string>`).
    pub ty: Ident,
    /// `list<ty>`.
    pub list: bool,
    /// An object type `{FIELD: TYPE, ...}` (`ty` is then `object`, spanning
    /// the braces): its fields, each declared like a parameter.
    pub fields: Option<Vec<ParamDecl>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// `tool NAME(PARAMS) [{ CLAUSES }]`: a tool's signature and what it does to labels.
pub struct ToolDecl {
    /// The tool's name (may be dotted: `fs.read`).
    pub name: Ident,
    /// Its parameters, in order.
    pub params: Vec<ParamDecl>,
    /// `None` for `tool x();`.
    pub body: Option<ToolBody>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// The `{ ... }` of a tool.
pub struct ToolBody {
    /// The clauses, in source order.
    pub clauses: Vec<ToolClause>,
    /// Comments after the last clause, before `}`.
    pub closing_comments: Vec<Comment>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// One clause of a tool body, with its comments.
pub struct ToolClause {
    /// What the clause says.
    pub kind: ToolClauseKind,
    /// From its keyword to its `;`.
    pub span: Span,
    /// Its comments and blank lines, for the formatter.
    pub trivia: Trivia,
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// The kinds of tool-body clause.
pub enum ToolClauseKind {
    /// `resource PARAM;`: the argument that names the resource the call touches.
    Resource(Ident),
    /// `output LABEL;`: the source label of the tool's output (default: bottom).
    Output(LabelExpr),
    /// `output FIELD.PATH: LABEL;`: for provenance, the label of the values
    /// under one field of the output, in place of the tool's.
    OutputField {
        /// The path as written: a dotted name (`tx.iban`), or one key in
        /// backticks.
        path: Ident,
        /// The field's label.
        label: LabelExpr,
    },
    /// `sink a, b [on PARAM, ...]`.
    Sinks {
        /// The sinks the arguments flow into.
        sinks: Vec<Ident>,
        /// The parameters bound to them (empty: every argument).
        on: Vec<Ident>,
    },
    /// `sanitizer NAME;`: the declared sanitizer applied to the inputs' label.
    Sanitizer(Ident),
    /// `fact F [when TEST];`: a succeeded result establishes `F` (if the output test holds).
    Fact {
        /// The fact established.
        fact: Ident,
        /// The test on the result's output (`None`: every succeeded result).
        when: Option<OutputTestExpr>,
    },
    /// `provenance MODE on PARAM {, PARAM};`: how these parameters' values
    /// gain trust by value (`off`, `exact`, `words`, `tokens`).
    Provenance {
        /// The mode, as written.
        mode: Ident,
        /// The parameters it applies to.
        params: Vec<Ident>,
    },
}

impl ToolClauseKind {
    /// The clause's keyword, for messages (`sink` for `sinks`).
    pub fn keyword(&self) -> &'static str {
        match self {
            ToolClauseKind::Resource(_) => "resource",
            ToolClauseKind::Output(_) | ToolClauseKind::OutputField { .. } => "output",
            ToolClauseKind::Sinks { .. } => "sink",
            ToolClauseKind::Sanitizer(_) => "sanitizer",
            ToolClauseKind::Fact { .. } => "fact",
            ToolClauseKind::Provenance { .. } => "provenance",
        }
    }
}

/// `[any|all] output[.a.b | "/json/pointer"] OP`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputTestExpr {
    /// `any` or `all`, when written (for an array in the output).
    pub quant: Option<Ident>,
    /// Where in the output the test looks.
    pub path: OutputPath,
    /// The test.
    pub op: PredOp,
    /// From the quantifier (or `output`) to the end of the operand.
    pub span: Span,
}

/// Where in the output a test looks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutputPath {
    /// `output`: the whole output (a text output is a JSON string).
    Whole(Span),
    /// `output.a.b`: `name` is the part after `output.`.
    Dotted(Ident),
    /// `output "/a/0/b"`: a JSON pointer.
    Pointer(StrLit),
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// One clause of a sanitizer statement; each span covers the clause.
pub enum SanitizerClause {
    /// `removes {CATS}`: categories removed from the label.
    Removes(Vec<Ident>, Span),
    /// `max LEVEL`: the sensitivity is capped at this level.
    Max(Ident, Span),
    /// `trusts`: the output is vouched for (trusted).
    Trusts(Span),
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// `TOOLPAT`: a declared tool's name or a glob over tool names.
pub enum ToolPat {
    /// A declared tool's name.
    Name(Ident),
    /// A string: a glob over tool names (`"web.*"`).
    Glob(StrLit),
}

impl ToolPat {
    /// Where the pattern is written.
    pub fn span(&self) -> Span {
        match self {
            ToolPat::Name(i) => i.span,
            ToolPat::Glob(s) => s.span,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
/// `per tenant` or `per session` after a quota: whether all sessions of a
/// tenant share the grant's quota (default: each session has its own).
pub struct QuotaScopeLit {
    /// `per tenant`.
    pub tenant: bool,
    /// `per tenant` or `per session` is written (a window alone leaves it
    /// false).
    pub scoped: bool,
    /// `per 10m`, `per day`: the quota or budget renews in fixed windows.
    pub window: Option<WindowLit>,
    /// Where `per ...` is written.
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
/// `per 10m`, `per day`, `per hour` after a quota or a budget: the window
/// it renews in.
pub struct WindowLit {
    /// The window's length in seconds.
    pub secs: u64,
    /// Where it is written.
    pub span: Span,
}

impl WindowLit {
    /// The window as written canonically: `day`, `hour`, `minute`,
    /// `second`, or `Nd`, `Nh`, `Nm`, `Ns` (the largest exact unit).
    pub fn text(&self) -> String {
        match self.secs {
            86_400 => "day".into(),
            3_600 => "hour".into(),
            60 => "minute".into(),
            1 => "second".into(),
            s if s % 86_400 == 0 => format!("{}d", s / 86_400),
            s if s % 3_600 == 0 => format!("{}h", s / 3_600),
            s if s % 60 == 0 => format!("{}m", s / 60),
            s => format!("{s}s"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// `budget AMOUNT on PARAM [per tenant|per session]` on a grant.
pub struct BudgetLit {
    /// The budget (a number: `5000`, `5000.00`).
    pub amount: ValueLit,
    /// The parameter whose value a call spends.
    pub param: Ident,
    /// `per tenant` / `per session`, if written (default: per session).
    pub scope: Option<QuotaScopeLit>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// `grant NAME: TOOL CLAUSES;`: consumable authority to call a tool.
pub struct GrantDecl {
    /// The grant's name.
    pub name: Ident,
    /// The tool it covers.
    pub tool: Ident,
    /// Its clauses, in source order (each kind at most once; `quota` required).
    pub clauses: Vec<GrantClause>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// One clause of a grant.
pub struct GrantClause {
    /// What the clause says.
    pub kind: GrantClauseKind,
    /// Where it is written.
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// The kinds of grant clause.
pub enum GrantClauseKind {
    /// `on PATTERN`: the resources the grant covers (the tool needs a resource parameter).
    On(PatternLit),
    /// `where COND`: conditions on the arguments and the calling agent.
    Where(CondExpr),
    /// `None` is `quota unlimited`; then the scope, if written
    /// (`per tenant`, `per session`).
    Quota(Option<IntLit>, Option<QuotaScopeLit>),
    /// `budget AMOUNT on PARAM [per tenant|per session]`: each call the
    /// grant serves spends the value of `PARAM` from `AMOUNT`.
    Budget(BudgetLit),
    /// `approval`: a call it serves PAUSEs for a human; the unit is reserved.
    Approval,
    /// `expires T`: the grant matches no call at time `>= T` (seconds).
    Expires(IntLit),
    /// `discovers SET`: resources its calls' results discover are added to `SET`.
    Discovers(Ident),
    /// `agent A`: the agent the grant belongs to (default: `main`).
    Agent(Ident),
}

impl GrantClauseKind {
    /// The clause's keyword, for messages.
    pub fn keyword(&self) -> &'static str {
        match self {
            GrantClauseKind::On(_) => "on",
            GrantClauseKind::Where(_) => "where",
            GrantClauseKind::Quota(..) => "quota",
            GrantClauseKind::Budget(_) => "budget",
            GrantClauseKind::Approval => "approval",
            GrantClauseKind::Expires(_) => "expires",
            GrantClauseKind::Discovers(_) => "discovers",
            GrantClauseKind::Agent(_) => "agent",
        }
    }
}

/// `[any|all] PARAM OP`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pred {
    /// `any` or `all` before the parameter (lists).
    pub quant: Option<Ident>,
    /// The parameter tested.
    pub param: Ident,
    /// The test.
    pub op: PredOp,
    /// From the quantifier (or the parameter) to the end of the operand.
    pub span: Span,
}

/// A condition: tests combined with `!`, `and`, `or` and parentheses.
/// Parentheses are kept (`Group`) so the formatter prints them as written.
// A tree built once per parse: boxing the tests would only add indirection.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CondExpr {
    /// A test on an argument.
    Test(Pred),
    /// `agent == A`, `agent != A`, `agent in [A, ...]`, `agent not in [...]`.
    Agent {
        /// `!=` or `not in`.
        negated: bool,
        /// `in [...]` rather than `==`/`!=`.
        list: bool,
        /// The agents named.
        agents: Vec<Ident>,
        /// From `agent` to the last agent named (or `]`).
        span: Span,
    },
    /// `!COND`; the span starts at `!`.
    Not(Box<CondExpr>, Span),
    /// `a and b and ...` (at least two operands).
    And(Vec<CondExpr>),
    /// `a or b or ...` (at least two operands).
    Or(Vec<CondExpr>),
    /// `(COND)`, kept so the formatter prints the parentheses; the span covers them.
    Group(Box<CondExpr>, Span),
    /// `any x in LIST: BODY` / `all x in LIST: BODY`: a per-element test on a
    /// list parameter. In `BODY` (one test, a `!`, or a parenthesized
    /// condition) a test on the bound name `x` tests the element.
    Each(EachExpr),
    /// `any|all KIND in PARAM [not] from SOURCE`: a token test.
    Tokens(Box<TokensExpr>),
}

/// `any|all KIND in PARAM [not] from SOURCE` (`docs/policy-language.md`,
/// "Token tests").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokensExpr {
    /// `any` or `all`.
    pub quant: Ident,
    /// `url`, `email`, `iban`, `phone`, `quantity` or `token`.
    pub kind: Ident,
    /// The string (or list of strings) parameter.
    pub param: Ident,
    /// `not from`.
    pub negated: bool,
    /// `user`, `trusted` or `untrusted`.
    pub source: Ident,
    /// From the quantifier to the source.
    pub span: Span,
}

/// `any|all VAR in LIST: BODY`, a per-element test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EachExpr {
    /// `any` or `all`.
    pub quant: Ident,
    /// The bound name: an atom of the body's tests naming the element.
    pub var: Ident,
    /// The list parameter whose elements are tested.
    pub list: Ident,
    /// The condition on each element.
    pub body: Box<CondExpr>,
    /// From the quantifier to the end of the body.
    pub span: Span,
}

impl CondExpr {
    /// Where the condition is written.
    pub fn span(&self) -> Span {
        match self {
            CondExpr::Test(p) => p.span,
            CondExpr::Agent { span, .. } | CondExpr::Not(_, span) | CondExpr::Group(_, span) => {
                *span
            }
            CondExpr::And(cs) | CondExpr::Or(cs) => match (cs.first(), cs.last()) {
                (Some(a), Some(b)) => a.span().to(b.span()),
                _ => Span::default(),
            },
            CondExpr::Each(e) => e.span,
            CondExpr::Tokens(t) => t.span,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// A test operator with its operand (`OP` in the grammar).
pub enum PredOp {
    /// `== VALUE` (`== null`: an absent optional argument).
    Eq(ValueLit),
    /// `!= VALUE` (`!= null`: a present optional argument).
    Ne(ValueLit),
    /// `in [VALUE, ...]`.
    InList(Vec<ValueLit>),
    /// `not in [VALUE, ...]`.
    NotInList(Vec<ValueLit>),
    /// `in SET`: membership in a discovered-resource set.
    InSet(Ident),
    /// `not in SET`.
    NotInSet(Ident),
    /// `starts_with STRING`.
    StartsWith(StrLit),
    /// `ends_with STRING`.
    EndsWith(StrLit),
    /// `matches PATTERN`.
    Matches(PatternLit),
    /// `contains VALUE`: a substring of a string, or an element of a list.
    Contains(ValueLit),
    /// Numeric bounds: an integer or a decimal.
    Lt(ValueLit),
    /// `<= NUMBER`.
    Le(ValueLit),
    /// `> NUMBER`.
    Gt(ValueLit),
    /// `>= NUMBER`.
    Ge(ValueLit),
    /// `not OP` (any test but `in`, which has `not in`): holds when the
    /// test fails on a value it applies to; on a missing value it decides
    /// against the call (`docs/policy-language.md`, "General negation").
    /// The span covers `not`.
    Not(Box<PredOp>, Span),
}

impl PredOp {
    /// The operator as written, for messages.
    pub fn operator(&self) -> &'static str {
        match self {
            PredOp::Eq(_) => "==",
            PredOp::Ne(_) => "!=",
            PredOp::InList(_) | PredOp::InSet(_) => "in",
            PredOp::NotInList(_) | PredOp::NotInSet(_) => "not in",
            PredOp::Contains(_) => "contains",
            PredOp::StartsWith(_) => "starts_with",
            PredOp::EndsWith(_) => "ends_with",
            PredOp::Matches(_) => "matches",
            PredOp::Lt(_) => "<",
            PredOp::Le(_) => "<=",
            PredOp::Gt(_) => ">",
            PredOp::Ge(_) => ">=",
            PredOp::Not(inner, _) => match **inner {
                PredOp::Contains(_) => "not contains",
                PredOp::StartsWith(_) => "not starts_with",
                PredOp::EndsWith(_) => "not ends_with",
                PredOp::Matches(_) => "not matches",
                PredOp::Eq(_) => "not ==",
                PredOp::Lt(_) => "not <",
                PredOp::Le(_) => "not <=",
                PredOp::Gt(_) => "not >",
                PredOp::Ge(_) => "not >=",
                _ => "not",
            },
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// What a flow rule does, with its label pattern or ceiling.
pub enum FlowEffectExpr {
    /// `deny flow N: LABELPAT -> ...`: deny a flow whose label matches.
    Deny(LabelPatExpr),
    /// `pause flow N: LABELPAT -> ...`: ask a human about a flow whose label matches.
    Pause(LabelPatExpr),
    /// `up to LABEL`.
    Allow(LabelExpr),
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// A flow rule: `deny|pause|allow flow NAME: ... -> SINK [when COND];`.
pub struct FlowDecl {
    /// The rule's name.
    pub name: Ident,
    /// Deny, pause or allow, with the pattern or ceiling.
    pub effect: FlowEffectExpr,
    /// The sink, or with `to_agent` the agent (`-> agent NAME`).
    pub sink: Ident,
    /// `-> agent NAME`: the rule judges what that agent receives, not a sink.
    pub to_agent: bool,
    /// `when COND`: the rule applies only when it holds.
    pub when: Option<CondExpr>,
}

/// `deny call NAME: TOOL when COND;` (or `pause call`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallRuleDecl {
    /// `deny` or `pause`.
    pub effect: RuleEffectKw,
    /// The rule's name.
    pub name: Ident,
    /// The tool whose calls it judges.
    pub tool: Ident,
    /// The condition on the arguments (and the calling agent) that stops the call.
    pub when: CondExpr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
/// The effect of a call rule, path rule or count.
pub enum RuleEffectKw {
    /// `deny`: the call is denied.
    Deny,
    /// `pause`: the call PAUSEs for a human (it still needs a grant).
    Pause,
}

impl RuleEffectKw {
    /// `deny` or `pause`, as written.
    pub fn keyword(self) -> &'static str {
        match self {
            RuleEffectKw::Deny => "deny",
            RuleEffectKw::Pause => "pause",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// `deny|pause path NAME: STEP -> STEP ... [reset on STEP];`: a forbidden sequence of admitted
/// calls.
pub struct PathDecl {
    /// `deny` or `pause`.
    pub effect: RuleEffectKw,
    /// The rule's name.
    pub name: Ident,
    /// At least two.
    pub steps: Vec<StepExpr>,
    /// `reset on STEP`: an admitted call matching it starts the sequence afresh.
    pub reset: Option<StepExpr>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// `deny|pause count NAME: at most N STEP [within WINDOW] [reset on STEP];`.
pub struct CountDecl {
    /// `deny` or `pause`.
    pub effect: RuleEffectKw,
    /// The rule's name.
    pub name: Ident,
    /// `at most N`: the call that would be number `N + 1` is stopped.
    pub max: IntLit,
    /// The calls counted.
    pub step: StepExpr,
    /// `within 10m`: only calls admitted less than the window before the
    /// judged call count (a sliding window).
    pub within: Option<WindowLit>,
    /// `reset on STEP`: an admitted call matching it sets the count back to zero.
    pub reset: Option<StepExpr>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// A step of a path rule or count: atoms joined by `and`, all of which a call must match.
pub struct StepExpr {
    /// The atoms, each kind at most once; a `where` comes last.
    pub atoms: Vec<StepAtom>,
    /// Where the step is written.
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// One atom of a step.
pub struct StepAtom {
    /// What it tests.
    pub kind: StepAtomKind,
    /// Where it is written.
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// The kinds of step atom (`SATOM`).
pub enum StepAtomKind {
    /// `any`: every call.
    Any,
    /// `call TOOLPAT`: a call of a matching tool.
    Call(ToolPat),
    /// `to SINK`: a call of a tool that reaches the sink.
    To(Ident),
    /// `reads(LABELPAT)`: a call whose output label matches.
    Reads(LabelPatExpr),
    /// `where COND` on the call's arguments (last in a step).
    Where(CondExpr),
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// `obligation NAME: require FACT [since TOOLPAT] before TOOLPAT [else pause];`.
pub struct ObligationDecl {
    /// The obligation's name.
    pub name: Ident,
    /// The fact required.
    pub fact: Ident,
    /// `since TOOLPAT`: the fact must be established after the last admitted call matching it
    /// (`None`: ever).
    pub since: Option<ToolPat>,
    /// The calls that need the fact.
    pub before: ToolPat,
    /// `else pause`: the effect is PAUSE rather than DENY.
    pub else_pause: bool,
}
