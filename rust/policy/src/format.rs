//! The canonical pretty-printer. Statements stay in order, one per line;
//! tool-body clauses go one per line, indented two spaces; at most one blank
//! line is kept between statements. Every comment is kept: a comment on the
//! line after a statement's last token stays there (`stmt; // note`); any
//! other comment, including one from inside a statement, is printed on its
//! own line before the statement (or clause) that follows it.

use crate::ast::*;
use crate::lexer::{is_bare_name, quote, quote_name};
use agenra_core::{Pattern, Value};

/// `file` printed in canonical form, comments kept (see the module docs).
pub fn format_file(file: &File) -> String {
    let mut w = Writer::default();
    for stmt in &file.stmts {
        w.leading(&stmt.trivia.comments, "");
        w.blank_if(stmt.trivia.blank_before);
        match &stmt.kind {
            StmtKind::Tool(tool) => w.tool(tool, stmt.trivia.trailing.as_ref()),
            kind => w.line("", &statement(kind), stmt.trivia.trailing.as_ref()),
        }
    }
    w.leading(&file.trailing_comments, "");
    w.out
}

#[derive(Default)]
struct Writer {
    out: String,
    /// Something was printed since the start of the file or of a tool body,
    /// so a blank line may follow.
    started: bool,
}

impl Writer {
    fn blank_if(&mut self, blank: bool) {
        if blank && self.started {
            self.out.push('\n');
        }
    }

    fn line(&mut self, indent: &str, text: &str, trailing: Option<&Comment>) {
        self.out.push_str(indent);
        self.out.push_str(text);
        if let Some(c) = trailing {
            self.out.push_str(" //");
            self.out.push_str(&c.text);
        }
        self.out.push('\n');
        self.started = true;
    }

    fn leading(&mut self, comments: &[Comment], indent: &str) {
        for c in comments {
            self.blank_if(c.blank_before);
            self.line(indent, &format!("//{}", c.text), None);
        }
    }

    fn tool(&mut self, tool: &ToolDecl, trailing: Option<&Comment>) {
        let params: Vec<String> = tool.params.iter().map(param_decl).collect();
        let head = format!("tool {}({})", n(&tool.name), params.join(", "));
        let body = tool
            .body
            .as_ref()
            .filter(|b| !b.clauses.is_empty() || !b.closing_comments.is_empty());
        let Some(body) = body else {
            self.line("", &format!("{head};"), trailing);
            return;
        };
        self.line("", &format!("{head} {{"), None);
        // No blank line right after `{`.
        self.started = false;
        for clause in &body.clauses {
            self.leading(&clause.trivia.comments, "  ");
            self.blank_if(clause.trivia.blank_before);
            self.line(
                "  ",
                &tool_clause(&clause.kind),
                clause.trivia.trailing.as_ref(),
            );
        }
        self.leading(&body.closing_comments, "  ");
        self.line("", "}", trailing);
    }
}

fn names(ids: &[Ident], sep: &str) -> String {
    ids.iter().map(n).collect::<Vec<_>>().join(sep)
}

/// A name as written: bare when it was and can be, else in backticks.
fn n(id: &Ident) -> String {
    if id.quoted || !is_bare_name(&id.name) {
        quote_name(&id.name)
    } else {
        id.name.clone()
    }
}

fn statement(kind: &StmtKind) -> String {
    match kind {
        StmtKind::Policy(name) => format!("policy {};", quote(&name.value)),
        StmtKind::Levels(levels) => format!("levels {};", names(levels, " < ")),
        StmtKind::Decl { kind, names: ids } => format!("{} {};", kind.keyword(), names(ids, ", ")),
        StmtKind::Label { name, label: l } => format!("label {} = {};", n(name), label(l)),
        StmtKind::Tool(_) => String::new(), // printed by `Writer::tool`
        StmtKind::Resource {
            pattern: p,
            label: l,
        } => {
            format!("resource {} label {};", pattern(&p.pattern), label(l))
        }
        StmtKind::Sanitizer { name, clauses } => {
            let mut s = format!("sanitizer {}", n(name));
            for c in clauses {
                s.push(' ');
                match c {
                    SanitizerClause::Removes(cats, _) => {
                        s.push_str(&format!("removes {{{}}}", names(cats, ", ")))
                    }
                    SanitizerClause::Max(level, _) => s.push_str(&format!("max {}", n(level))),
                    SanitizerClause::Trusts(_) => s.push_str("trusts"),
                }
            }
            s.push(';');
            s
        }
        StmtKind::Scope { name, tools } => {
            let tools: Vec<String> = tools.iter().map(tool_pat).collect();
            format!("scope {}: {};", n(name), tools.join(", "))
        }
        StmtKind::Agent {
            name,
            parent,
            scope,
            own_context,
        } => {
            let scope = scope
                .as_ref()
                .map_or(String::new(), |s| format!(" scope {}", n(s)));
            let own = if *own_context { " own context" } else { "" };
            format!("agent {} from {}{scope}{own};", n(name), n(parent))
        }
        StmtKind::Grant(g) => {
            let mut s = format!("grant {}: {}", n(&g.name), n(&g.tool));
            for c in &g.clauses {
                s.push(' ');
                s.push_str(&grant_clause(&c.kind));
            }
            s.push(';');
            s
        }
        StmtKind::Flow(f) => {
            let head = match &f.effect {
                FlowEffectExpr::Deny(p) => format!("deny flow {}: {}", n(&f.name), label_pat(p)),
                FlowEffectExpr::Pause(p) => {
                    format!("pause flow {}: {}", n(&f.name), label_pat(p))
                }
                FlowEffectExpr::Allow(l) => {
                    format!("allow flow {}: up to {}", n(&f.name), label(l))
                }
            };
            let when = f
                .when
                .as_ref()
                .map_or(String::new(), |c| format!(" when {}", cond(c)));
            let agent = if f.to_agent { "agent " } else { "" };
            format!("{head} -> {agent}{}{when};", n(&f.sink))
        }
        StmtKind::ProvenanceByValue => "provenance by value;".into(),
        StmtKind::TaskSeeds(sets) => format!("task seeds {};", names(sets, ", ")),
        StmtKind::TokenShape { name, parts, .. } => {
            let part = |p: &ShapePartExpr| match p {
                ShapePartExpr::Literal(l) => quote(&l.value),
                ShapePartExpr::Class { class, min, max } => match max {
                    Some(max) => format!("{}{{{},{}}}", class.name, min.value, max.value),
                    None if min.span == class.span => class.name.clone(),
                    None => format!("{}{{{}}}", class.name, min.value),
                },
            };
            let parts: Vec<String> = parts.iter().map(part).collect();
            format!("token {} = {};", n(name), parts.join(" "))
        }
        StmtKind::CallRule(c) => format!(
            "{} call {}: {} when {};",
            c.effect.keyword(),
            n(&c.name),
            n(&c.tool),
            cond(&c.when)
        ),
        StmtKind::Path(p) => {
            let steps: Vec<String> = p.steps.iter().map(step).collect();
            format!(
                "{} path {}: {}{};",
                p.effect.keyword(),
                n(&p.name),
                steps.join(" -> "),
                reset(p.reset.as_ref())
            )
        }
        StmtKind::Count(c) => format!(
            "{} count {}: at most {} {}{}{};",
            c.effect.keyword(),
            n(&c.name),
            c.max.value,
            step(&c.step),
            c.within
                .map(|w| format!(" within {}", w.text()))
                .unwrap_or_default(),
            reset(c.reset.as_ref())
        ),
        StmtKind::Obligation(o) => {
            let since = o
                .since
                .as_ref()
                .map_or(String::new(), |s| format!(" since {}", tool_pat(s)));
            let else_pause = if o.else_pause { " else pause" } else { "" };
            format!(
                "obligation {}: require {}{since} before {}{else_pause};",
                n(&o.name),
                n(&o.fact),
                tool_pat(&o.before)
            )
        }
    }
}

fn tool_clause(kind: &ToolClauseKind) -> String {
    match kind {
        ToolClauseKind::Resource(p) => format!("resource {};", n(p)),
        ToolClauseKind::Output(l) => format!("output {};", label(l)),
        ToolClauseKind::OutputField { path, label: l } => {
            format!("output {}: {};", n(path), label(l))
        }
        ToolClauseKind::Sinks { sinks, on } if on.is_empty() => {
            format!("sink {};", names(sinks, ", "))
        }
        ToolClauseKind::Sinks { sinks, on } => {
            format!("sink {} on {};", names(sinks, ", "), names(on, ", "))
        }
        ToolClauseKind::Sanitizer(s) => format!("sanitizer {};", n(s)),
        ToolClauseKind::Fact { fact, when: None } => format!("fact {};", n(fact)),
        ToolClauseKind::Provenance { mode, params } => {
            format!("provenance {} on {};", mode.name, names(params, ", "))
        }
        ToolClauseKind::Fact {
            fact,
            when: Some(test),
        } => {
            let quant = test
                .quant
                .as_ref()
                .map_or(String::new(), |q| format!("{} ", n(q)));
            let path = match &test.path {
                OutputPath::Whole(_) => "output".to_string(),
                OutputPath::Dotted(f) => format!("output.{}", f.name),
                OutputPath::Pointer(p) => format!("output {}", quote(&p.value)),
            };
            format!("fact {} when {quant}{path} {};", n(fact), pred_op(&test.op))
        }
    }
}

fn grant_clause(kind: &GrantClauseKind) -> String {
    match kind {
        GrantClauseKind::On(p) => format!("on {}", pattern(&p.pattern)),
        GrantClauseKind::Where(c) => format!("where {}", cond(c)),
        GrantClauseKind::Quota(n, scope) => {
            let n = n
                .as_ref()
                .map_or("unlimited".into(), |n| n.value.to_string());
            format!("quota {n}{}", scope_text(scope.as_ref()))
        }
        GrantClauseKind::Budget(b) => {
            let amount = value(&b.amount);
            format!(
                "budget {amount} on {}{}",
                n(&b.param),
                scope_text(b.scope.as_ref())
            )
        }
        GrantClauseKind::Approval => "approval".into(),
        GrantClauseKind::Expires(t) => format!("expires {}", t.value),
        GrantClauseKind::Discovers(s) => format!("discovers {}", n(s)),
        GrantClauseKind::Agent(a) => format!("agent {}", n(a)),
    }
}

/// ` per WINDOW` and ` per tenant|session`, as written (empty for none).
fn scope_text(scope: Option<&QuotaScopeLit>) -> String {
    let Some(s) = scope else {
        return String::new();
    };
    let mut out = String::new();
    if let Some(w) = s.window {
        out.push_str(&format!(" per {}", w.text()));
    }
    if s.scoped {
        out.push_str(if s.tenant {
            " per tenant"
        } else {
            " per session"
        });
    }
    out
}

fn label(l: &LabelExpr) -> String {
    match l {
        LabelExpr::Named(id) => n(id),
        LabelExpr::Literal {
            level,
            categories,
            trusted,
            ..
        } => format!(
            "<{}, {{{}}}, {}>",
            n(level),
            names(categories, ", "),
            if *trusted { "trusted" } else { "untrusted" }
        ),
    }
}

fn label_pat(p: &LabelPatExpr) -> String {
    match p {
        LabelPatExpr::Any(_) => "any".into(),
        LabelPatExpr::Atoms(atoms) => atoms
            .iter()
            .map(|a| match &a.kind {
                LabelAtomKind::Untrusted => "untrusted".to_string(),
                LabelAtomKind::Sensitivity(l) => format!("sensitivity >= {}", n(l)),
                LabelAtomKind::Category(cats) if cats.len() == 1 => {
                    format!("category {}", names(cats, ""))
                }
                LabelAtomKind::Category(cats) => format!("category {{{}}}", names(cats, ", ")),
            })
            .collect::<Vec<_>>()
            .join(" and "),
    }
}

fn pattern(p: &Pattern) -> String {
    match p {
        Pattern::Exact(s) => quote(s),
        Pattern::Prefix(s) => format!("prefix {}", quote(s)),
        Pattern::Glob(s) => format!("glob {}", quote(s)),
    }
}

fn tool_pat(t: &ToolPat) -> String {
    match t {
        ToolPat::Name(id) => n(id),
        ToolPat::Glob(s) => quote(&s.value),
    }
}

fn value(v: &ValueLit) -> String {
    if let Some(text) = &v.text {
        return text.clone();
    }
    match &v.value {
        Value::Str(s) => quote(s),
        Value::Int(i) => i.to_string(),
        other => other.to_string(),
    }
}

fn pred_op(op: &PredOp) -> String {
    match op {
        PredOp::Eq(v) => format!("== {}", value(v)),
        PredOp::Ne(v) => format!("!= {}", value(v)),
        PredOp::InList(vs) => format!(
            "in [{}]",
            vs.iter().map(value).collect::<Vec<_>>().join(", ")
        ),
        PredOp::NotInList(vs) => format!(
            "not in [{}]",
            vs.iter().map(value).collect::<Vec<_>>().join(", ")
        ),
        PredOp::InSet(s) => format!("in {}", n(s)),
        PredOp::NotInSet(s) => format!("not in {}", n(s)),
        PredOp::Contains(v) => format!("contains {}", value(v)),
        PredOp::StartsWith(s) => format!("starts_with {}", quote(&s.value)),
        PredOp::EndsWith(s) => format!("ends_with {}", quote(&s.value)),
        PredOp::Matches(p) => format!("matches {}", pattern(&p.pattern)),
        PredOp::Lt(v) => format!("< {}", value(v)),
        PredOp::Le(v) => format!("<= {}", value(v)),
        PredOp::Gt(v) => format!("> {}", value(v)),
        PredOp::Ge(v) => format!(">= {}", value(v)),
        PredOp::Not(inner, _) => format!("not {}", pred_op(inner)),
    }
}

fn cond(c: &CondExpr) -> String {
    match c {
        CondExpr::Test(p) => {
            let quant = p
                .quant
                .as_ref()
                .map_or(String::new(), |q| format!("{} ", n(q)));
            format!("{quant}{} {}", n(&p.param), pred_op(&p.op))
        }
        CondExpr::Agent {
            negated,
            list,
            agents,
            ..
        } => match (negated, list) {
            (false, false) => format!("agent == {}", names(agents, "")),
            (true, false) => format!("agent != {}", names(agents, "")),
            (false, true) => format!("agent in [{}]", names(agents, ", ")),
            (true, true) => format!("agent not in [{}]", names(agents, ", ")),
        },
        CondExpr::Not(inner, _) => format!("!{}", cond(inner)),
        CondExpr::And(cs) => cs.iter().map(cond).collect::<Vec<_>>().join(" and "),
        CondExpr::Or(cs) => cs.iter().map(cond).collect::<Vec<_>>().join(" or "),
        CondExpr::Group(inner, _) => format!("({})", cond(inner)),
        CondExpr::Each(e) => format!(
            "{} {} in {}: {}",
            e.quant.name,
            e.var.name,
            n(&e.list),
            cond(&e.body)
        ),
        CondExpr::Tokens(t) => format!(
            "{} {} in {} {}from {}",
            t.quant.name,
            t.kind.name,
            n(&t.param),
            if t.negated { "not " } else { "" },
            t.source.name
        ),
    }
}

fn step(s: &StepExpr) -> String {
    let mut out = String::new();
    for (i, a) in s.atoms.iter().enumerate() {
        let text = match &a.kind {
            StepAtomKind::Any => "any".to_string(),
            StepAtomKind::Call(t) => format!("call {}", tool_pat(t)),
            StepAtomKind::To(sink) => format!("to {}", n(sink)),
            StepAtomKind::Reads(p) => format!("reads({})", label_pat(p)),
            StepAtomKind::Where(c) => format!("where {}", cond(c)),
        };
        // A condition follows the atoms directly: `call pay where x > 1`.
        let sep = match (&a.kind, i) {
            (_, 0) => "",
            (StepAtomKind::Where(_), _) => " ",
            _ => " and ",
        };
        out.push_str(sep);
        out.push_str(&text);
    }
    out
}

fn reset(s: Option<&StepExpr>) -> String {
    s.map_or(String::new(), |s| format!(" reset on {}", step(s)))
}

/// `NAME[?]: TYPE`, objects as `{FIELD: TYPE, ...}` and lists of them as
/// `list<{...}>`.
fn param_decl(p: &ParamDecl) -> String {
    let one = match &p.fields {
        Some(fields) => format!(
            "{{{}}}",
            fields.iter().map(param_decl).collect::<Vec<_>>().join(", ")
        ),
        None => n(&p.ty),
    };
    let ty = if p.list { format!("list<{one}>") } else { one };
    format!("{}{}: {ty}", n(&p.name), if p.optional { "?" } else { "" })
}
