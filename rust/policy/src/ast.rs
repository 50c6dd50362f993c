//! The syntax tree of a policy file. Every node carries its span; statements
//! (and tool-body clauses) carry the comments before them, so the formatter
//! can print them back.

use crate::span::Span;
use agenra_core::{Pattern, Value};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StrLit {
    pub value: String,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntLit {
    pub value: i64,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValueLit {
    pub value: Value,
    pub span: Span,
    /// A decimal as written (`98.70`), for the formatter.
    pub text: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatternLit {
    pub pattern: Pattern,
    pub span: Span,
}

/// A `//` comment; `text` follows the `//`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Comment {
    pub text: String,
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
pub struct File {
    pub stmts: Vec<Stmt>,
    /// Comments after the last statement.
    pub trailing_comments: Vec<Comment>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
    pub trivia: Trivia,
}

/// The name lists `categories`, `sinks`, `sets` and `facts`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeclKind {
    Categories,
    Sinks,
    Sets,
    Facts,
}

impl DeclKind {
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
pub enum StmtKind {
    Policy(StrLit),
    Levels(Vec<Ident>),
    Decl {
        kind: DeclKind,
        names: Vec<Ident>,
    },
    Label {
        name: Ident,
        label: LabelExpr,
    },
    Tool(ToolDecl),
    Resource {
        pattern: PatternLit,
        label: LabelExpr,
    },
    Sanitizer {
        name: Ident,
        clauses: Vec<SanitizerClause>,
    },
    Scope {
        name: Ident,
        tools: Vec<ToolPat>,
    },
    Agent {
        name: Ident,
        parent: Ident,
        scope: Option<Ident>,
        /// `own context`.
        own_context: bool,
    },
    Grant(GrantDecl),
    Flow(FlowDecl),
    Path(PathDecl),
    Count(CountDecl),
    Obligation(ObligationDecl),
    CallRule(CallRuleDecl),
    /// `provenance by value;`
    ProvenanceByValue,
    /// `task seeds SET {, SET};`
    TaskSeeds(Vec<Ident>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LabelExpr {
    Literal {
        level: Ident,
        categories: Vec<Ident>,
        trusted: bool,
        span: Span,
    },
    Named(Ident),
}

impl LabelExpr {
    pub fn span(&self) -> Span {
        match self {
            LabelExpr::Literal { span, .. } => *span,
            LabelExpr::Named(id) => id.span,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LabelPatExpr {
    Any(Span),
    Atoms(Vec<LabelAtom>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelAtom {
    pub kind: LabelAtomKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LabelAtomKind {
    Untrusted,
    Sensitivity(Ident),
    /// `category c` or `category {a, b}`.
    Category(Vec<Ident>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamDecl {
    pub name: Ident,
    /// `name?: ty`.
    pub optional: bool,
    /// The scalar type name (`string` in `list<string>`).
    pub ty: Ident,
    /// `list<ty>`.
    pub list: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolDecl {
    pub name: Ident,
    pub params: Vec<ParamDecl>,
    /// `None` for `tool x();`.
    pub body: Option<ToolBody>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolBody {
    pub clauses: Vec<ToolClause>,
    /// Comments after the last clause, before `}`.
    pub closing_comments: Vec<Comment>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolClause {
    pub kind: ToolClauseKind,
    pub span: Span,
    pub trivia: Trivia,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolClauseKind {
    Resource(Ident),
    Output(LabelExpr),
    /// `sink a, b [on PARAM, ...]`.
    Sinks {
        sinks: Vec<Ident>,
        on: Vec<Ident>,
    },
    Sanitizer(Ident),
    Fact {
        fact: Ident,
        when: Option<OutputTestExpr>,
    },
}

impl ToolClauseKind {
    pub fn keyword(&self) -> &'static str {
        match self {
            ToolClauseKind::Resource(_) => "resource",
            ToolClauseKind::Output(_) => "output",
            ToolClauseKind::Sinks { .. } => "sink",
            ToolClauseKind::Sanitizer(_) => "sanitizer",
            ToolClauseKind::Fact { .. } => "fact",
        }
    }
}

/// `[any|all] output[.a.b | "/json/pointer"] OP`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputTestExpr {
    pub quant: Option<Ident>,
    pub path: OutputPath,
    pub op: PredOp,
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
pub enum SanitizerClause {
    Removes(Vec<Ident>, Span),
    Max(Ident, Span),
    Trusts(Span),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolPat {
    Name(Ident),
    Glob(StrLit),
}

impl ToolPat {
    pub fn span(&self) -> Span {
        match self {
            ToolPat::Name(i) => i.span,
            ToolPat::Glob(s) => s.span,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantDecl {
    pub name: Ident,
    pub tool: Ident,
    pub clauses: Vec<GrantClause>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantClause {
    pub kind: GrantClauseKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GrantClauseKind {
    On(PatternLit),
    Where(CondExpr),
    /// `None` is `quota unlimited`.
    Quota(Option<IntLit>),
    Approval,
    Expires(IntLit),
    Discovers(Ident),
    Agent(Ident),
}

impl GrantClauseKind {
    pub fn keyword(&self) -> &'static str {
        match self {
            GrantClauseKind::On(_) => "on",
            GrantClauseKind::Where(_) => "where",
            GrantClauseKind::Quota(_) => "quota",
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
    pub param: Ident,
    pub op: PredOp,
    pub span: Span,
}

/// A condition: tests combined with `!`, `and`, `or` and parentheses.
/// Parentheses are kept (`Group`) so the formatter prints them as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CondExpr {
    Test(Pred),
    /// `agent == A`, `agent != A`, `agent in [A, ...]`, `agent not in [...]`.
    Agent {
        negated: bool,
        /// `in [...]` rather than `==`/`!=`.
        list: bool,
        agents: Vec<Ident>,
        span: Span,
    },
    Not(Box<CondExpr>, Span),
    And(Vec<CondExpr>),
    Or(Vec<CondExpr>),
    Group(Box<CondExpr>, Span),
}

impl CondExpr {
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
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PredOp {
    Eq(ValueLit),
    Ne(ValueLit),
    InList(Vec<ValueLit>),
    NotInList(Vec<ValueLit>),
    InSet(Ident),
    NotInSet(Ident),
    StartsWith(StrLit),
    EndsWith(StrLit),
    Matches(PatternLit),
    Contains(ValueLit),
    /// Numeric bounds: an integer or a decimal.
    Lt(ValueLit),
    Le(ValueLit),
    Gt(ValueLit),
    Ge(ValueLit),
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
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlowEffectExpr {
    Deny(LabelPatExpr),
    Pause(LabelPatExpr),
    /// `up to LABEL`.
    Allow(LabelExpr),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowDecl {
    pub name: Ident,
    pub effect: FlowEffectExpr,
    /// The sink, or with `to_agent` the agent (`-> agent NAME`).
    pub sink: Ident,
    pub to_agent: bool,
    pub when: Option<CondExpr>,
}

/// `deny call NAME: TOOL when COND;` (or `pause call`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallRuleDecl {
    pub effect: RuleEffectKw,
    pub name: Ident,
    pub tool: Ident,
    pub when: CondExpr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleEffectKw {
    Deny,
    Pause,
}

impl RuleEffectKw {
    pub fn keyword(self) -> &'static str {
        match self {
            RuleEffectKw::Deny => "deny",
            RuleEffectKw::Pause => "pause",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathDecl {
    pub effect: RuleEffectKw,
    pub name: Ident,
    /// At least two.
    pub steps: Vec<StepExpr>,
    pub reset: Option<StepExpr>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CountDecl {
    pub effect: RuleEffectKw,
    pub name: Ident,
    pub max: IntLit,
    pub step: StepExpr,
    pub reset: Option<StepExpr>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepExpr {
    pub atoms: Vec<StepAtom>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepAtom {
    pub kind: StepAtomKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepAtomKind {
    Any,
    Call(ToolPat),
    To(Ident),
    Reads(LabelPatExpr),
    /// `where COND` on the call's arguments (last in a step).
    Where(CondExpr),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObligationDecl {
    pub name: Ident,
    pub fact: Ident,
    pub since: Option<ToolPat>,
    pub before: ToolPat,
    /// `else pause`: the effect is PAUSE rather than DENY.
    pub else_pause: bool,
}
