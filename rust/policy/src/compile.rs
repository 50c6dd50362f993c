//! Name resolution, validation and lowering of a parsed file to the core
//! model. Declarations may come in any order: a first pass collects every
//! name, a second lowers each statement, and `checks` validates the
//! lowered policy as a whole (agent cycles, attenuation, warnings).

use crate::ast::*;
use crate::checks;
use crate::diagnostic::{did_you_mean, Diagnostic};
use crate::names::{Diags, Names};
use crate::span::Span;
use agenra_core::label::{Level, MAX_CATEGORIES};
use agenra_core::pattern::glob_matches;
use agenra_core::policy::{
    Agent, CallRule, FactRule, FlowEffect, FlowRule, Grant, Obligation, OutputTest, Param,
    PathKind, PathRule, Quota, ReceiveRule, ResourceLabel, RuleEffect, Scope, SinkUse, StepPattern,
    Tool,
};
use agenra_core::{
    ArgCond, ArgOp, CategorySet, Cond, Label, LabelPattern, NamedCond, ParamType, Policy, Quant,
    Sanitizer, Value,
};

pub use crate::source_map::SourceMap;

mod fields;
mod token_shapes;
use fields::Operand;

/// The most sensitivity levels a policy may declare (a `Level` is a `u8`).
pub const MAX_LEVELS: usize = 255;

/// Compiles a parsed file: the policy and its warnings, or the errors.
pub fn compile_file(
    file: &File,
    default_name: &str,
    broken_names: std::collections::BTreeSet<String>,
) -> Result<(Policy, Vec<Diagnostic>), Vec<Diagnostic>> {
    let mut c = Compiler::new();
    c.d.broken_names = broken_names;
    let name = c.collect(file);
    let mut policy = Policy::empty(name.as_deref().unwrap_or(default_name));
    let mut map = SourceMap::default();
    c.lower(file, &mut policy, &mut map);
    checks::agent_cycles(&policy, &map, &mut c.d);
    if c.d.errors.is_empty() {
        checks::attenuation(&policy, &map, &mut c.d);
    }
    if c.d.errors.is_empty() {
        checks::warnings(&policy, &map, &mut c.d);
    }
    let Diags {
        mut errors,
        mut warnings,
        ..
    } = c.d;
    if errors.is_empty() {
        warnings.sort_by_key(|w| w.span.start);
        Ok((policy, warnings))
    } else {
        errors.sort_by_key(|e| e.span.start);
        Err(errors)
    }
}

struct Compiler<'a> {
    d: Diags,
    levels: Names,
    categories: Names,
    sinks: Names,
    sets: Names,
    facts: Names,
    labels: Names,
    label_exprs: Vec<&'a LabelExpr>,
    label_values: Vec<Label>,
    tools: Names,
    tool_decls: Vec<&'a ToolDecl>,
    sanitizers: Names,
    sanitizer_decls: Vec<(&'a Ident, &'a [SanitizerClause])>,
    scopes: Names,
    scope_decls: Vec<(&'a Ident, &'a [ToolPat])>,
    agents: Names,
    /// Name, delegator, scope and `own context` of each agent.
    agent_decls: Vec<(&'a Ident, &'a Ident, Option<&'a Ident>, bool)>,
    grants: Names,
    rules: Names,
    /// Token kinds: the built-in ones, then the declared ones.
    token_kinds: Names,
    /// Each declared kind's shape (`None`: it had an error).
    token_shapes: Vec<Option<agenra_core::tokens::TokenShape>>,
    /// Conditions (negation, per-element tests, per-parameter provenance):
    /// what the condition being lowered does when it holds.
    neg: NegState,
}

/// The compiler's state for negated and per-element tests and for
/// `provenance MODE on PARAM` clauses.
#[derive(Default)]
struct NegState {
    /// The condition being lowered refuses the call when it holds (a deny
    /// or pause rule's, a counted or forbidden path step's), rather than
    /// admitting it (a grant's, an allow rule's, a `reset on` step's).
    /// Flipped under `!`.
    refusing: bool,
    /// Set by `lower_step` for its `where`: whether the step refuses.
    step_override: Option<bool>,
    /// `reset on` steps are being lowered (their `where` admits).
    in_reset: bool,
    /// Inside `any|all x in LIST: ...`: the bound name and the element's
    /// parameter types (one per tool that has the list parameter).
    each: Option<(String, Vec<Param>)>,
    /// The parameters the last resolution found (per tool).
    resolved: Vec<Param>,
    /// A grant's condition is being lowered (token tests are refused).
    in_grant: bool,
    /// `provenance MODE on PARAM` clauses of the tool being lowered.
    pending: Vec<(usize, agenra_core::policy::ProvenanceMode)>,
    /// `output PATH: LABEL` clauses of the tool being lowered.
    pending_fields: Vec<(Vec<String>, Label)>,
}

/// The span of the keyword a statement starts with.
fn keyword_span(stmt: &Stmt, keyword: &str) -> Span {
    Span {
        end: stmt.span.start + keyword.len(),
        ..stmt.span
    }
}

/// Reports a clause kind seen twice where it may appear once.
fn once<'k>(seen: &mut Vec<&'k str>, keyword: &'k str, span: Span, owner: &str, d: &mut Diags) {
    if seen.contains(&keyword) {
        d.error(span, format!("duplicate `{keyword}` clause in {owner}"));
    } else {
        seen.push(keyword);
    }
}

/// Whether a grant declares `quota N per tenant` (a limited quota shared by
/// the tenant's sessions; `quota unlimited per tenant` is an error).
fn shared_scope(g: &GrantDecl) -> bool {
    g.clauses.iter().any(|c| {
        matches!(
            &c.kind,
            GrantClauseKind::Quota(Some(_), Some(s)) if s.tenant && s.window.is_none()
        )
    })
}

fn non_negative(lit: &IntLit, what: &str, d: &mut Diags) -> u64 {
    u64::try_from(lit.value).unwrap_or_else(|_| {
        d.error(lit.span, format!("{what} must not be negative"));
        0
    })
}

impl<'a> Compiler<'a> {
    fn new() -> Self {
        Compiler {
            d: Diags::default(),
            levels: Names::with_builtin("level", "public"),
            categories: Names::new("category"),
            sinks: Names::new("sink"),
            sets: Names::new("set"),
            facts: Names::new("fact"),
            labels: Names::new("label"),
            label_exprs: Vec::new(),
            label_values: Vec::new(),
            tools: Names::new("tool"),
            tool_decls: Vec::new(),
            sanitizers: Names::new("sanitizer"),
            sanitizer_decls: Vec::new(),
            scopes: Names::new("scope"),
            scope_decls: Vec::new(),
            agents: Names::with_builtin("agent", agenra_core::policy::ROOT_AGENT),
            agent_decls: Vec::new(),
            grants: Names::new("grant"),
            rules: Names::new("rule"),
            token_kinds: Names::with_builtins("token kind", &token_shapes::BUILTIN_KINDS),
            token_shapes: Vec::new(),
            neg: NegState::default(),
        }
    }

    /// First pass: every declared name, in order. Returns the policy name.
    fn collect(&mut self, file: &'a File) -> Option<String> {
        let mut policy_name: Option<(String, Span)> = None;
        let mut levels_at: Option<Span> = None;
        for stmt in &file.stmts {
            match &stmt.kind {
                StmtKind::Policy(name) => match &policy_name {
                    Some((_, first)) => self.d.error(
                        name.span,
                        format!(
                            "the policy name is set twice (first at {}:{})",
                            first.line, first.col
                        ),
                    ),
                    None => policy_name = Some((name.value.clone(), name.span)),
                },
                StmtKind::Levels(levels) => {
                    if let Some(first) = levels_at {
                        let span = keyword_span(stmt, "levels");
                        self.d.error(
                            span,
                            format!(
                                "`levels` is declared twice (first at {}:{})",
                                first.line, first.col
                            ),
                        );
                        continue;
                    }
                    levels_at = Some(stmt.span);
                    self.levels = Names::new("level");
                    for level in levels {
                        if self.levels.len() == MAX_LEVELS {
                            self.d.error(
                                level.span,
                                format!(
                                    "more than {MAX_LEVELS} levels (`{}` is one too many)",
                                    level.name
                                ),
                            );
                            break;
                        }
                        self.levels.declare(level, &mut self.d);
                    }
                }
                StmtKind::Decl { kind, names } => {
                    for name in names {
                        let table = match kind {
                            DeclKind::Categories => {
                                if self.categories.len() == MAX_CATEGORIES
                                    && self.categories.get(&name.name).is_none()
                                {
                                    self.d.error(
                                        name.span,
                                        format!(
                                            "more than {MAX_CATEGORIES} categories (`{}` is one too many)",
                                            name.name
                                        ),
                                    );
                                    continue;
                                }
                                &mut self.categories
                            }
                            DeclKind::Sinks => &mut self.sinks,
                            DeclKind::Sets => &mut self.sets,
                            DeclKind::Facts => &mut self.facts,
                        };
                        table.declare(name, &mut self.d);
                    }
                }
                StmtKind::Label { name, label } => {
                    if self.labels.declare(name, &mut self.d).is_some() {
                        self.label_exprs.push(label);
                    }
                }
                StmtKind::Tool(tool) => {
                    if self.tools.declare(&tool.name, &mut self.d).is_some() {
                        self.tool_decls.push(tool);
                    }
                }
                StmtKind::Sanitizer { name, clauses } => {
                    if self.sanitizers.declare(name, &mut self.d).is_some() {
                        self.sanitizer_decls.push((name, clauses));
                    }
                }
                StmtKind::Scope { name, tools } => {
                    if self.scopes.declare(name, &mut self.d).is_some() {
                        self.scope_decls.push((name, tools));
                    }
                }
                StmtKind::Agent {
                    name,
                    parent,
                    scope,
                    own_context,
                } => {
                    if self.agents.declare(name, &mut self.d).is_some() {
                        self.agent_decls
                            .push((name, parent, scope.as_ref(), *own_context));
                    }
                }
                StmtKind::Grant(g) => {
                    self.grants.declare(&g.name, &mut self.d);
                }
                StmtKind::Flow(FlowDecl { name, .. })
                | StmtKind::Path(PathDecl { name, .. })
                | StmtKind::Count(CountDecl { name, .. })
                | StmtKind::Obligation(ObligationDecl { name, .. })
                | StmtKind::CallRule(CallRuleDecl { name, .. }) => {
                    self.rules.declare(name, &mut self.d);
                }
                StmtKind::TokenShape { name, parts, span } => {
                    self.declare_token_shape(name, parts, *span);
                }
                StmtKind::Resource { .. }
                | StmtKind::ProvenanceByValue
                | StmtKind::TaskSeeds(_) => {}
            }
        }
        policy_name.map(|(n, _)| n)
    }

    /// Second pass: lowers every statement into `policy`.
    fn lower(&mut self, file: &'a File, policy: &mut Policy, map: &mut SourceMap) {
        policy.levels = self.levels.to_vec();
        policy.categories = self.categories.to_vec();
        policy.sinks = self.sinks.to_vec();
        policy.sets = self.sets.to_vec();
        policy.token_shapes = self.token_shapes.iter().flatten().cloned().collect();
        policy.facts = self.facts.to_vec();
        map.sets = (0..self.sets.len())
            .map(|i| self.sets.span(i).unwrap_or_default())
            .collect();
        self.resolve_label_aliases();

        for (name, clauses) in self.sanitizer_decls.clone() {
            let sanitizer = self.lower_sanitizer(name, clauses);
            policy.sanitizers.push(sanitizer);
        }
        for tool in self.tool_decls.clone() {
            map.tool_outputs.push(
                tool.body
                    .iter()
                    .flat_map(|b| &b.clauses)
                    .find(|c| matches!(c.kind, ToolClauseKind::Output(_)))
                    .map(|c| c.span),
            );
            map.tool_output_fields.push(
                tool.body
                    .iter()
                    .flat_map(|b| &b.clauses)
                    .find(|c| matches!(c.kind, ToolClauseKind::OutputField { .. }))
                    .map(|c| c.span),
            );
            let tool = self.lower_tool(tool);
            let id = policy.tools.len();
            for (param, mode) in std::mem::take(&mut self.neg.pending) {
                policy
                    .param_provenance
                    .push(agenra_core::policy::ParamProvenance {
                        tool: id,
                        param,
                        mode,
                    });
            }
            for (path, label) in std::mem::take(&mut self.neg.pending_fields) {
                policy.output_fields.push(agenra_core::policy::OutputField {
                    tool: id,
                    path,
                    label,
                });
            }
            policy.tools.push(tool);
        }
        policy.param_provenance.sort_by_key(|p| (p.tool, p.param));
        policy
            .output_fields
            .sort_by(|a, b| (a.tool, &a.path).cmp(&(b.tool, &b.path)));
        for (name, tools) in self.scope_decls.clone() {
            let tools = tools.iter().filter_map(|t| self.tool_glob(t)).collect();
            policy.scopes.push(Scope {
                name: name.name.clone(),
                tools,
            });
        }
        map.agents.push(None);
        for (name, parent, scope, own_context) in self.agent_decls.clone() {
            let parent = self.agents.resolve(parent, &mut self.d);
            let scope = scope.and_then(|s| self.scopes.resolve(s, &mut self.d));
            policy.agents.push(Agent {
                name: name.name.clone(),
                parent,
                scope,
                own_context,
            });
            map.agents.push(Some(name.span));
        }

        for stmt in &file.stmts {
            match &stmt.kind {
                StmtKind::Resource { pattern, label } => {
                    let label = self.lower_label(label);
                    policy.resources.push(ResourceLabel {
                        pattern: pattern.pattern.clone(),
                        label,
                    });
                }
                StmtKind::Grant(g) => {
                    let grant = self.lower_grant(g, &policy.tools);
                    if shared_scope(g) {
                        policy.shared_grants.push(policy.grants.len());
                    }
                    let renewals = self.lower_renewals(g, &grant, &policy.tools);
                    if let Some(budget) = self.lower_budget(g, &grant, &policy.tools) {
                        policy.budgets.push(agenra_core::policy::Budget {
                            grant: policy.grants.len(),
                            ..budget
                        });
                    }
                    let mut grant = grant;
                    for r in renewals {
                        if matches!(r.limit, agenra_core::policy::RenewLimit::Units(_)) {
                            // The window is the quota: the ledger's own count is unlimited.
                            grant.quota = Quota::Unlimited;
                        }
                        policy.renewals.push(agenra_core::policy::Renewal {
                            grant: policy.grants.len(),
                            ..r
                        });
                    }
                    policy.grants.push(grant);
                    map.grants.push(g.name.span);
                }
                StmtKind::Flow(f) if f.to_agent => {
                    let rule = self.lower_receive(f, &policy.tools);
                    policy.receive_rules.push(rule);
                }
                StmtKind::Flow(f) => {
                    let rule = self.lower_flow(f, &policy.tools);
                    policy.flow_rules.push(rule);
                    map.flow_sinks.push(f.sink.span);
                }
                StmtKind::Path(p) => {
                    let steps = p
                        .steps
                        .iter()
                        .map(|s| self.lower_step(s, &p.name.name, &policy.tools))
                        .collect();
                    self.neg.in_reset = true;
                    let reset = p
                        .reset
                        .as_ref()
                        .map(|s| self.lower_step(s, &p.name.name, &policy.tools));
                    self.neg.in_reset = false;
                    policy.path_rules.push(PathRule {
                        name: p.name.name.clone(),
                        effect: rule_effect(p.effect),
                        kind: PathKind::Sequence(steps),
                        reset,
                    });
                }
                StmtKind::Count(c) => {
                    let max = non_negative(
                        &c.max,
                        &format!("the count of rule `{}`", c.name.name),
                        &mut self.d,
                    );
                    let step = self.lower_step(&c.step, &c.name.name, &policy.tools);
                    self.neg.in_reset = true;
                    let reset = c
                        .reset
                        .as_ref()
                        .map(|s| self.lower_step(s, &c.name.name, &policy.tools));
                    self.neg.in_reset = false;
                    if let Some(w) = c.within {
                        policy.count_windows.push(agenra_core::policy::CountWindow {
                            rule: policy.path_rules.len(),
                            secs: w.secs,
                        });
                    }
                    policy.path_rules.push(PathRule {
                        name: c.name.name.clone(),
                        effect: rule_effect(c.effect),
                        kind: PathKind::AtMost { max, step },
                        reset,
                    });
                }
                StmtKind::Obligation(o) => {
                    let obligation = self.lower_obligation(o, &policy.tools);
                    policy.obligations.push(obligation);
                }
                StmtKind::ProvenanceByValue => policy.provenance_by_value = true,
                StmtKind::TokenShape { .. } => {} // lowered in the first pass
                StmtKind::TaskSeeds(sets) => {
                    for set in sets {
                        if let Some(id) = self.sets.resolve(set, &mut self.d) {
                            if policy.task_seeds.contains(&id) {
                                self.d.error(
                                    set.span,
                                    format!("set `{}` is seeded by tasks twice", set.name),
                                );
                            } else {
                                policy.task_seeds.push(id);
                            }
                        }
                    }
                }
                StmtKind::CallRule(c) => {
                    let owner = format!("call rule `{}`", c.name.name);
                    let tool = self.tools.resolve(&c.tool, &mut self.d);
                    let when = match tool.and_then(|t| policy.tools.get(t)) {
                        Some(t) => self.lower_cond_indexed(&c.when, t, &owner, true),
                        None => ArgCond::FALSE,
                    };
                    policy.call_rules.push(CallRule {
                        name: c.name.name.clone(),
                        effect: rule_effect(c.effect),
                        tool: tool.unwrap_or(0),
                        when,
                    });
                }
                _ => {}
            }
        }
    }

    // ---- labels ---------------------------------------------------------

    /// Lowers `label NAME = LABEL;` aliases: literals first, then names
    /// followed along their chain (reporting cycles).
    fn resolve_label_aliases(&mut self) {
        let exprs = self.label_exprs.clone();
        self.label_values = exprs
            .iter()
            .map(|e| match e {
                LabelExpr::Literal { .. } => self.lower_label_literal(e),
                LabelExpr::Named(_) => Label::BOTTOM,
            })
            .collect();
        // Each alias is settled once: `done[i]` is the literal it ends at
        // (`Some(None)`: unknown name or cycle), so chains stay linear.
        let names = self.labels.to_vec();
        let mut done: Vec<Option<Option<usize>>> = exprs
            .iter()
            .enumerate()
            .map(|(i, e)| matches!(e, LabelExpr::Literal { .. }).then_some(Some(i)))
            .collect();
        for (i, expr) in exprs.iter().enumerate() {
            let LabelExpr::Named(first) = expr else {
                continue;
            };
            if done[i].is_some() {
                continue;
            }
            let Some(mut next) = self.labels.resolve(first, &mut self.d) else {
                done[i] = Some(None);
                continue;
            };
            let mut walk = vec![i];
            let end = loop {
                if let Some(settled) = done.get(next).copied().flatten() {
                    break settled;
                }
                if let Some(at) = walk.iter().position(|&w| w == next) {
                    // A cycle: reported once, at its first alias.
                    let cycle = &walk[at..];
                    let (start, _) = cycle
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, &w)| w)
                        .unwrap_or((0, &next));
                    let order: Vec<&str> = cycle[start..]
                        .iter()
                        .chain(&cycle[..start])
                        .chain(std::iter::once(&cycle[start]))
                        .filter_map(|&w| names.get(w).map(String::as_str))
                        .collect();
                    let span = self.labels.span(cycle[start]).unwrap_or(first.span);
                    self.d
                        .error(span, format!("label alias cycle: {}", order.join(" -> ")));
                    break None;
                }
                walk.push(next);
                match exprs.get(next) {
                    Some(LabelExpr::Named(id)) => match self.labels.get(&id.name) {
                        Some(j) => next = j,
                        None => break None, // reported at that alias
                    },
                    _ => break None,
                }
            };
            for w in walk {
                done[w] = Some(end);
            }
        }
        for (i, settled) in done.into_iter().enumerate() {
            if let (Some(Some(lit)), true) = (settled, matches!(exprs[i], LabelExpr::Named(_))) {
                if let Some(v) = self.label_values.get(lit).copied() {
                    self.label_values[i] = v;
                }
            }
        }
    }

    fn lower_label(&mut self, expr: &LabelExpr) -> Label {
        match expr {
            LabelExpr::Literal { .. } => self.lower_label_literal(expr),
            LabelExpr::Named(id) => self
                .labels
                .resolve(id, &mut self.d)
                .and_then(|i| self.label_values.get(i).copied())
                .unwrap_or(Label::BOTTOM),
        }
    }

    fn lower_label_literal(&mut self, expr: &LabelExpr) -> Label {
        let LabelExpr::Literal {
            level,
            categories,
            trusted,
            ..
        } = expr
        else {
            return Label::BOTTOM;
        };
        Label::new(self.level(level), self.category_set(categories), *trusted)
    }

    fn level(&mut self, id: &Ident) -> Level {
        self.levels
            .resolve(id, &mut self.d)
            .and_then(|i| Level::try_from(i).ok())
            .unwrap_or(0)
    }

    fn category_set(&mut self, ids: &[Ident]) -> CategorySet {
        let indexes: Vec<usize> = ids
            .iter()
            .filter_map(|id| self.categories.resolve(id, &mut self.d))
            .filter(|i| *i < MAX_CATEGORIES)
            .collect();
        CategorySet::from_indexes(indexes)
    }

    fn lower_label_pat(&mut self, pat: &LabelPatExpr) -> LabelPattern {
        let LabelPatExpr::Atoms(atoms) = pat else {
            return LabelPattern::ANY;
        };
        let mut out = LabelPattern::ANY;
        let mut seen = Vec::new();
        for atom in atoms {
            let keyword = match &atom.kind {
                LabelAtomKind::Untrusted => {
                    out.untrusted = true;
                    "untrusted"
                }
                LabelAtomKind::Sensitivity(level) => {
                    out.min_sensitivity = Some(self.level(level));
                    "sensitivity"
                }
                LabelAtomKind::Category(cats) => {
                    out.any_category = self.category_set(cats);
                    "category"
                }
            };
            if seen.contains(&keyword) {
                self.d.error(
                    atom.span,
                    format!("`{keyword}` appears twice in this label pattern"),
                );
            }
            seen.push(keyword);
        }
        out
    }

    // ---- tools and sanitizers ---------------------------------------------

    fn lower_sanitizer(&mut self, name: &Ident, clauses: &[SanitizerClause]) -> Sanitizer {
        let owner = format!("sanitizer `{}`", name.name);
        let mut s = Sanitizer {
            name: name.name.clone(),
            removes: CategorySet::EMPTY,
            max_sensitivity: None,
            trusts: false,
        };
        let mut seen = Vec::new();
        for clause in clauses {
            match clause {
                SanitizerClause::Removes(cats, span) => {
                    once(&mut seen, "removes", *span, &owner, &mut self.d);
                    s.removes = self.category_set(cats);
                }
                SanitizerClause::Max(level, span) => {
                    once(&mut seen, "max", *span, &owner, &mut self.d);
                    s.max_sensitivity = Some(self.level(level));
                }
                SanitizerClause::Trusts(span) => {
                    once(&mut seen, "trusts", *span, &owner, &mut self.d);
                    s.trusts = true;
                }
            }
        }
        s
    }

    fn lower_tool(&mut self, decl: &ToolDecl) -> Tool {
        let tool_name = &decl.name.name;
        let mut params = Names::new("parameter");
        let mut tool = Tool {
            name: tool_name.clone(),
            params: Vec::new(),
            resource: None,
            sinks: Vec::new(),
            output: Label::BOTTOM,
            sanitizer: None,
            facts: Vec::new(),
        };
        for p in &decl.params {
            let param = self.lower_param(p);
            if params.declare(&p.name, &mut self.d).is_some() {
                tool.params.push(param);
            }
        }
        let owner = format!("tool `{tool_name}`");
        let mut seen = Vec::new();
        for clause in decl.body.iter().flat_map(|b| &b.clauses) {
            let keyword = clause.kind.keyword();
            if !matches!(
                clause.kind,
                ToolClauseKind::Sinks { .. }
                    | ToolClauseKind::Fact { .. }
                    | ToolClauseKind::Provenance { .. }
                    | ToolClauseKind::OutputField { .. }
            ) {
                once(&mut seen, keyword, clause.span, &owner, &mut self.d);
            }
            match &clause.kind {
                ToolClauseKind::Resource(param) => {
                    tool.resource = self.param(&tool, param);
                    if let Some(p) = tool.resource.and_then(|i| tool.params.get(i)) {
                        if p.ty != ParamType::Str || p.list {
                            self.d.error(
                                param.span,
                                format!(
                                    "the resource parameter `{}` of tool `{tool_name}` must be a string, not {}",
                                    p.name, p.type_name()
                                ),
                            );
                        }
                    }
                }
                ToolClauseKind::Output(label) => tool.output = self.lower_label(label),
                ToolClauseKind::OutputField { path, label } => {
                    let label = self.lower_label(label);
                    self.output_field(path, label, &owner);
                }
                ToolClauseKind::Sinks { sinks, on } => {
                    let bound: Option<Vec<usize>> = if on.is_empty() {
                        None
                    } else {
                        Some(on.iter().filter_map(|p| self.param(&tool, p)).collect())
                    };
                    for sink in sinks {
                        let Some(id) = self.sinks.resolve(sink, &mut self.d) else {
                            continue;
                        };
                        if tool.reaches(id) {
                            self.d.error(
                                sink.span,
                                format!(
                                    "sink `{}` is listed twice for tool `{tool_name}`",
                                    sink.name
                                ),
                            );
                        } else {
                            tool.sinks.push(SinkUse {
                                sink: id,
                                params: bound.clone(),
                            });
                        }
                    }
                }
                ToolClauseKind::Sanitizer(name) => {
                    tool.sanitizer = self.sanitizers.resolve(name, &mut self.d);
                }
                ToolClauseKind::Fact { fact, when } => {
                    let fact = self.facts.resolve(fact, &mut self.d).unwrap_or(0);
                    let when = when.as_ref().and_then(|test| self.lower_output_test(test));
                    tool.facts.push(FactRule { fact, when });
                }
                ToolClauseKind::Provenance { mode, params } => {
                    use agenra_core::policy::ProvenanceMode;
                    let m = match mode.name.as_str() {
                        "off" => Some(ProvenanceMode::Off),
                        "exact" => Some(ProvenanceMode::Exact),
                        "words" => Some(ProvenanceMode::Words),
                        "tokens" => Some(ProvenanceMode::Tokens),
                        other => {
                            self.d.error(
                                mode.span,
                                format!(
                                    "unknown provenance mode `{other}` in {owner}: `off`, `exact`, `words` or `tokens`{}",
                                    did_you_mean(other, ["off", "exact", "words", "tokens"])
                                ),
                            );
                            None
                        }
                    };
                    for p in params {
                        let Some(i) = self.param(&tool, p) else {
                            continue;
                        };
                        if self.neg.pending.iter().any(|(j, _)| *j == i) {
                            self.d.error(
                                p.span,
                                format!(
                                    "parameter `{}` of {owner} has its provenance declared twice",
                                    p.name
                                ),
                            );
                        } else if let Some(m) = m {
                            self.neg.pending.push((i, m));
                        }
                    }
                }
            }
        }
        tool
    }

    /// `output PATH: LABEL`: a dotted path is cut at its dots, a path in
    /// backticks is one key. An empty key or a path declared twice in one
    /// tool is an error at the path.
    fn output_field(&mut self, path: &Ident, label: Label, owner: &str) {
        let keys: Vec<String> = if path.quoted {
            vec![path.name.clone()]
        } else {
            path.name.split('.').map(str::to_string).collect()
        };
        if keys.iter().any(String::is_empty) {
            self.d.error(
                path.span,
                format!("output field `{}` of {owner} has an empty key", path.name),
            );
        } else if self.neg.pending_fields.iter().any(|(p, _)| *p == keys) {
            self.d.error(
                path.span,
                format!(
                    "output field `{}` of {owner} has its label declared twice",
                    path.name
                ),
            );
        } else {
            self.neg.pending_fields.push((keys, label));
        }
    }

    /// `output.a.b` and `output "/a/b"` become JSON pointers. Output values
    /// are untyped, so the test is not type-checked; a value of another
    /// type fails it.
    fn lower_output_test(&mut self, test: &OutputTestExpr) -> Option<OutputTest> {
        let pointer = match &test.path {
            OutputPath::Whole(_) => String::new(),
            OutputPath::Dotted(f) => f
                .name
                .split('.')
                .map(|part| format!("/{}", part.replace('~', "~0").replace('/', "~1")))
                .collect(),
            OutputPath::Pointer(p) => {
                if !(p.value.is_empty() || p.value.starts_with('/')) {
                    self.d.error(
                        p.span,
                        format!(
                            "{} is not a JSON pointer: it must be empty or start with `/` (RFC 6901)",
                            Value::Str(p.value.clone())
                        ),
                    );
                }
                p.value.clone()
            }
        };
        let quant = match test.quant.as_ref().map(|q| q.name.as_str()) {
            Some("any") => Quant::Any,
            _ => Quant::All,
        };
        if let PredOp::Not(_, span) = &test.op {
            self.d.error(
                *span,
                "`not` before a test is not supported in a fact's output test (output values are untyped); `not in` is",
            );
            return None;
        }
        Some(OutputTest {
            pointer,
            quant,
            op: self.lower_op(&test.op)?,
        })
    }

    /// The index of a tool's parameter, or an error naming the tool.
    fn param(&mut self, tool: &Tool, param: &Ident) -> Option<usize> {
        let found = tool.param_index(&param.name);
        if found.is_none() {
            self.d.error(
                param.span,
                format!(
                    "tool `{}` has no parameter `{}`{}",
                    tool.name,
                    param.name,
                    did_you_mean(&param.name, tool.params.iter().map(|p| p.name.as_str()))
                ),
            );
        }
        found
    }

    // ---- tests ------------------------------------------------------------

    /// Lowers a test; an `in [..]` list must hold values of one type.
    /// `None` when the test itself is malformed (reported).
    fn lower_op(&mut self, op: &PredOp) -> Option<ArgOp> {
        let list = |c: &mut Self, values: &[ValueLit]| -> Vec<Value> {
            if let Some(first) = values.first() {
                for v in values.iter().skip(1) {
                    let same = match (v.value.ty(), first.value.ty()) {
                        (Some(a), Some(b)) => a.accepts(b),
                        _ => false,
                    };
                    if !same {
                        let ty = |v: &Value| v.ty().map_or("null", ParamType::name);
                        c.d.error(
                            v.span,
                            format!(
                                "the values of an `in` list must have one type: {} is {}, but the first value is {}",
                                v.value,
                                ty(&v.value),
                                ty(&first.value)
                            ),
                        );
                    }
                }
            }
            values.iter().map(|v| v.value.clone()).collect()
        };
        let number = |v: &ValueLit| v.value.as_decimal().unwrap_or_default();
        Some(match op {
            PredOp::Eq(v) => ArgOp::Eq(v.value.clone()),
            PredOp::Ne(v) => ArgOp::Ne(v.value.clone()),
            PredOp::InList(values) => ArgOp::In(list(self, values)),
            PredOp::NotInList(values) => ArgOp::NotIn(list(self, values)),
            PredOp::InSet(set) => ArgOp::InSet(self.sets.resolve(set, &mut self.d)?),
            PredOp::NotInSet(set) => ArgOp::NotInSet(self.sets.resolve(set, &mut self.d)?),
            PredOp::StartsWith(s) => ArgOp::Prefix(s.value.clone()),
            PredOp::EndsWith(s) => ArgOp::Suffix(s.value.clone()),
            PredOp::Matches(p) => ArgOp::Matches(p.pattern.clone()),
            PredOp::Contains(v) => {
                if v.value == Value::Null {
                    self.d
                        .error(v.span, "`contains null` never holds (test `== null`)");
                }
                ArgOp::Contains(v.value.clone())
            }
            PredOp::Lt(v) => ArgOp::Lt(number(v)),
            PredOp::Le(v) => ArgOp::Le(number(v)),
            PredOp::Gt(v) => ArgOp::Gt(number(v)),
            PredOp::Ge(v) => ArgOp::Ge(number(v)),
            // `not OP` lowers to a condition (`lower_cond`), not an operator.
            PredOp::Not(inner, _) => return self.lower_op(inner),
        })
    }

    /// Reports a test that does not fit the parameter: an operand of
    /// another type, a quantifier on a scalar, `null` for a required
    /// parameter. With `restrictive` (the condition of a deny or pause
    /// rule), warns about a list test without a quantifier: it holds only
    /// when every element passes, which is rarely what a forbidding rule
    /// means.
    fn type_check(
        &mut self,
        pred: &Pred,
        op: &ArgOp,
        param: &Param,
        owner: &str,
        restrictive: bool,
    ) {
        let quant = pred.quant.as_ref();
        if let Some(q) = quant {
            if !param.list {
                self.d.error(
                    q.span,
                    format!(
                        "`{}` in {owner} applies to list parameters, but `{}` is {}",
                        q.name,
                        param.name,
                        param.type_name()
                    ),
                );
            }
        }
        match op {
            ArgOp::Eq(Value::Null) | ArgOp::Ne(Value::Null) => {
                if !param.optional {
                    self.d.error(
                        pred.span,
                        format!(
                            "in {owner}: parameter `{}` is not optional (`{}?: {}`), so it is never null",
                            param.name,
                            param.name,
                            param.type_name()
                        ),
                    );
                }
                return;
            }
            ArgOp::Contains(v) => {
                if let Some(q) = quant.filter(|_| param.list) {
                    self.d.error(
                        q.span,
                        format!(
                            "`contains` tests the whole list `{}`: drop `{}`",
                            param.name, q.name
                        ),
                    );
                }
                let ok = match v.ty() {
                    Some(t) if param.list => param.ty.accepts(t),
                    Some(ParamType::Str) => param.ty == ParamType::Str,
                    _ => false,
                };
                if !ok {
                    self.d.error(
                        pred.span,
                        format!(
                            "type mismatch in {owner}: parameter `{}` is {}, so `contains {}` never holds",
                            param.name,
                            param.type_name(),
                            v
                        ),
                    );
                }
                return;
            }
            _ => {}
        }
        if let Some(needed) = op.operand_type() {
            if !param.ty.accepts(needed) {
                self.d.error(
                    pred.span,
                    format!(
                        "type mismatch in {owner}: parameter `{}` is {}, but `{}` here needs {}",
                        param.name,
                        param.type_name(),
                        pred.op.operator(),
                        if needed == ParamType::Decimal {
                            "a number".to_string()
                        } else {
                            needed.to_string()
                        }
                    ),
                );
            }
        }
        if restrictive && param.list && quant.is_none() {
            self.d.warn(
                pred.param.span,
                format!(
                    "{owner}: `{}` is a list, so this test holds only when every element passes; write `any {}` or `all {}` to say which",
                    param.name, param.name, param.name
                ),
            );
        }
    }

    /// Lowers a condition; `param` resolves (and type-checks) each test's
    /// parameter, or returns `None` when the test cannot hold.
    fn lower_cond<P: Clone>(
        &mut self,
        cond: &CondExpr,
        param: &mut dyn FnMut(&mut Self, &Pred, &mut ArgOp) -> Option<P>,
    ) -> Cond<P> {
        match cond {
            CondExpr::Test(pred) => {
                let Some(mut op) = self.lower_op(&pred.op) else {
                    return Cond::FALSE;
                };
                let quant = match pred.quant.as_ref().map(|q| q.name.as_str()) {
                    Some("any") => Quant::Any,
                    _ => Quant::All,
                };
                let negated = matches!(pred.op, PredOp::Not(..));
                if let Some(c) = self.lower_elem_test(pred, &op, negated) {
                    return c;
                }
                match param(self, pred, &mut op) {
                    Some(p) if negated => self.negated_test(p, quant, op),
                    Some(p) => Cond::Test {
                        param: p,
                        quant,
                        op,
                    },
                    None => Cond::FALSE,
                }
            }
            CondExpr::Each(e) => self.lower_each(e, param),
            CondExpr::Tokens(t) => self.lower_tokens(t, param),
            CondExpr::Agent {
                negated, agents, ..
            } => {
                let ids = agents
                    .iter()
                    .filter_map(|a| self.agents.resolve(a, &mut self.d))
                    .collect();
                let c = Cond::Agent(ids);
                if *negated {
                    Cond::Not(Box::new(c))
                } else {
                    c
                }
            }
            CondExpr::Not(inner, _) => {
                self.neg.refusing = !self.neg.refusing;
                let c = Cond::Not(Box::new(self.lower_cond(inner, param)));
                self.neg.refusing = !self.neg.refusing;
                c
            }
            CondExpr::And(cs) => Cond::And(cs.iter().map(|c| self.lower_cond(c, param)).collect()),
            CondExpr::Or(cs) => Cond::Or(cs.iter().map(|c| self.lower_cond(c, param)).collect()),
            CondExpr::Group(inner, _) => self.lower_cond(inner, param),
        }
    }

    /// `[any|all] PARAM not OP`, fail closed: on a value the test applies
    /// to it is the test's negation (`all`: no element passes, `any`: some
    /// element fails); on a missing value (absent, `null`, a parameter the
    /// tool lacks) it decides against the call. So where the condition
    /// refuses when it holds, it is `!([dual] PARAM OP)`, which holds on a
    /// missing value; where it admits, the value must also be present
    /// (`PARAM != null`), so a missing value never admits.
    fn negated_test<P: Clone>(&mut self, p: P, quant: Quant, op: ArgOp) -> Cond<P> {
        let dual = match quant {
            Quant::All => Quant::Any,
            Quant::Any => Quant::All,
        };
        // A field's value is present when every value the path reaches is
        // (`NOT IN []` holds on any non-null scalar, per element of a list);
        // a parameter's when it is not null.
        let present = match &op {
            ArgOp::Field { path, .. } => ArgOp::Field {
                path: path.clone(),
                op: Box::new(ArgOp::NotIn(Vec::new())),
            },
            _ => ArgOp::Ne(Value::Null),
        };
        let not = Cond::Not(Box::new(Cond::Test {
            param: p.clone(),
            quant: dual,
            op,
        }));
        if self.neg.refusing {
            not
        } else {
            Cond::And(vec![
                Cond::Test {
                    param: p,
                    quant: Quant::All,
                    op: present,
                },
                not,
            ])
        }
    }

    /// A test on the element bound by `any|all x in LIST:` (`None` when
    /// the test names something else): type-checked against the element's
    /// type. The element is always present, so `not OP` is plain negation.
    fn lower_elem_test<P>(&mut self, pred: &Pred, op: &ArgOp, negated: bool) -> Option<Cond<P>> {
        let (var, elems) = self.neg.each.clone()?;
        if pred.param.quoted || pred.param.name != var {
            return None;
        }
        if let Some(q) = &pred.quant {
            self.d.error(
                q.span,
                format!("`{}` is one element of a list: drop `{}`", var, q.name),
            );
        }
        for e in &elems {
            self.type_check(pred, op, e, "a per-element test", false);
        }
        let test = Cond::Elem(op.clone());
        Some(if negated {
            Cond::Not(Box::new(test))
        } else {
            test
        })
    }

    /// `any|all x in LIST: BODY`: LIST must be a list parameter; bodies do
    /// not nest.
    fn lower_each<P: Clone>(
        &mut self,
        e: &EachExpr,
        param: &mut dyn FnMut(&mut Self, &Pred, &mut ArgOp) -> Option<P>,
    ) -> Cond<P> {
        if self.neg.each.is_some() {
            self.d.error(
                e.quant.span,
                "a per-element test inside another is not supported",
            );
            return Cond::FALSE;
        }
        // Resolve the list through the same path as a test: `any LIST ...`
        // type-checks that it is a list.
        let probe = Pred {
            quant: Some(e.quant.clone()),
            param: e.list.clone(),
            op: PredOp::Eq(ValueLit {
                value: Value::List(Vec::new()),
                span: e.list.span,
                text: None,
            }),
            span: e.list.span,
        };
        let mut probe_op = ArgOp::Eq(Value::List(Vec::new()));
        let resolved = param(self, &probe, &mut probe_op);
        if matches!(probe_op, ArgOp::Field { .. }) {
            // The list is a field of an object (`cfg.tags`): the element
            // test would range over the object, not the field.
            self.d.error(
                e.list.span,
                "a per-element test over an object's field is not supported yet; test the field with `any`/`all` instead",
            );
            return Cond::FALSE;
        }
        let elems: Vec<Param> = self
            .neg
            .resolved
            .iter()
            .filter(|p| p.list)
            .map(|p| Param {
                list: false,
                optional: false,
                ..p.clone()
            })
            .collect();
        self.neg.each = Some((e.var.name.clone(), elems));
        let body = self.lower_cond(&e.body, param);
        self.neg.each = None;
        let quant = if e.quant.name == "any" {
            Quant::Any
        } else {
            Quant::All
        };
        match resolved {
            Some(p) => Cond::Each {
                param: p,
                quant,
                body: Box::new(body),
            },
            None => Cond::FALSE,
        }
    }

    /// `any|all KIND in PARAM [not] from SOURCE`: PARAM must be a string
    /// or a list of strings (in every tool that has it), not a field; not
    /// in a grant. `not from S` accepts the origins `from S` does not.
    fn lower_tokens<P: Clone>(
        &mut self,
        t: &TokensExpr,
        param: &mut dyn FnMut(&mut Self, &Pred, &mut ArgOp) -> Option<P>,
    ) -> Cond<P> {
        use agenra_core::tokens::TokenOrigin as O;
        if self.neg.in_grant {
            self.d.error(
                t.span,
                "a grant may not test where tokens come from (its match must not depend on what the session read): use a deny or pause rule",
            );
            return Cond::FALSE;
        }
        let Ok(kind) = self.token_kind(&t.kind) else {
            return Cond::FALSE;
        };
        let from: Vec<O> = match (t.source.name.as_str(), t.negated) {
            ("user", false) => vec![O::Task],
            ("user", true) => vec![O::TrustedOutput, O::Elsewhere],
            ("trusted", false) | ("untrusted", true) => vec![O::Task, O::TrustedOutput],
            ("untrusted", false) | ("trusted", true) => vec![O::Elsewhere],
            (other, _) => {
                self.d.error(
                    t.source.span,
                    format!("unknown token source `{other}`: `user`, `trusted` or `untrusted`"),
                );
                return Cond::FALSE;
            }
        };
        // Resolve the parameter as a test would; its own type check is
        // replaced by the one below (a token test needs strings).
        let probe = Pred {
            quant: None,
            param: t.param.clone(),
            op: PredOp::Eq(ValueLit {
                value: Value::Str(String::new()),
                span: t.param.span,
                text: None,
            }),
            span: t.span,
        };
        let mut probe_op = ArgOp::Eq(Value::Str(String::new()));
        let (errors, warnings) = (self.d.errors.len(), self.d.warnings.len());
        let resolved = param(self, &probe, &mut probe_op);
        let from_type_check = |m: &str| m.contains("type mismatch") || m.contains("is a list, so");
        let keep = |d: &mut Vec<crate::diagnostic::Diagnostic>, from: usize| {
            let mut i = from;
            while i < d.len() {
                if from_type_check(&d[i].message) {
                    d.remove(i);
                } else {
                    i += 1;
                }
            }
        };
        keep(&mut self.d.errors, errors);
        keep(&mut self.d.warnings, warnings);
        if matches!(probe_op, ArgOp::Field { .. }) {
            self.d.error(
                t.param.span,
                "a token test takes a string parameter, not an object's field",
            );
            return Cond::FALSE;
        }
        let bad: Vec<String> = self
            .neg
            .resolved
            .iter()
            .filter(|p| p.ty != ParamType::Str || !p.fields.is_empty())
            .map(|p| format!("`{}` is {}", p.name, p.type_name()))
            .collect();
        if !bad.is_empty() {
            self.d.error(
                t.param.span,
                format!(
                    "a token test needs a `string` or `list<string>` parameter, but {}",
                    bad.join(", ")
                ),
            );
            return Cond::FALSE;
        }
        let quant = if t.quant.name == "any" {
            Quant::Any
        } else {
            Quant::All
        };
        match resolved {
            Some(p) => Cond::Tokens {
                param: p,
                quant,
                kind,
                from,
            },
            None => Cond::FALSE,
        }
    }

    /// A condition on one tool's parameters (grants, call rules).
    fn lower_cond_indexed(
        &mut self,
        cond: &CondExpr,
        tool: &Tool,
        owner: &str,
        restrictive: bool,
    ) -> ArgCond {
        let saved = self.neg.refusing;
        self.neg.refusing = self.neg.step_override.unwrap_or(restrictive);
        let out = self.lower_cond(cond, &mut |c: &mut Self, pred: &Pred, op: &mut ArgOp| {
            c.neg.resolved.clear();
            match c.operand(&tool.params, &pred.param) {
                Operand::Field(index, path, field) => {
                    c.field_test(pred, op, path, &field, owner, restrictive);
                    return Some(index);
                }
                Operand::Bad => return None,
                Operand::Param | Operand::Missing => {}
            }
            let index = c.param(tool, &pred.param)?;
            if let Some(p) = tool.params.get(index) {
                c.type_check(pred, op, p, owner, restrictive);
                c.neg.resolved.push(p.clone());
            }
            Some(index)
        });
        self.neg.refusing = saved;
        out
    }

    /// A condition by parameter name, for rules that apply to several tools
    /// (`tools`): type-checked against every one that has the parameter; a
    /// warning when none has it.
    fn lower_cond_named(
        &mut self,
        cond: &CondExpr,
        tools: &[&Tool],
        (owner, which_tools): (&str, &str),
        restrictive: bool,
    ) -> NamedCond {
        let saved = self.neg.refusing;
        self.neg.refusing = self.neg.step_override.unwrap_or(restrictive);
        let out = self.lower_cond(cond, &mut |c: &mut Self, pred: &Pred, op: &mut ArgOp| {
            c.neg.resolved.clear();
            // A field access (`cfg.mode`) where some tool has an object
            // parameter it names: the same parameter and path in every tool.
            let mut fields: Vec<(String, Vec<String>)> = Vec::new();
            let mut plain = false;
            let base = op.clone();
            for t in tools {
                match c.operand(&t.params, &pred.param) {
                    Operand::Field(i, path, field) => {
                        let mut one = base.clone();
                        c.field_test(
                            pred,
                            &mut one,
                            path.clone(),
                            &field,
                            &format!("{owner} (tool `{}`)", t.name),
                            restrictive,
                        );
                        *op = one;
                        let key = (t.params[i].name.clone(), path);
                        if !fields.contains(&key) {
                            fields.push(key);
                        }
                    }
                    Operand::Bad => return None,
                    Operand::Param => plain = true,
                    Operand::Missing => {}
                }
            }
            if !fields.is_empty() {
                if plain || fields.len() > 1 {
                    c.d.error(
                        pred.param.span,
                        format!(
                            "{owner}: `{}` is a parameter of some tools and a field of others; rename one so that the test means one thing",
                            pred.param.name
                        ),
                    );
                    return None;
                }
                return fields.pop().map(|(name, _)| name);
            }
            let mut has_param = false;
            for t in tools {
                if let Some(param) = t.params.iter().find(|p| p.name == pred.param.name) {
                    has_param = true;
                    c.neg.resolved.push(param.clone());
                    c.type_check(
                        pred,
                        op,
                        param,
                        &format!("{owner} (tool `{}`)", t.name),
                        restrictive,
                    );
                }
            }
            if !has_param && !tools.is_empty() {
                c.d.warn(
                    pred.param.span,
                    format!(
                        "{owner}: no {which_tools} has a parameter `{}`, so this test never holds",
                        pred.param.name
                    ),
                );
            }
            Some(pred.param.name.clone())
        });
        self.neg.refusing = saved;
        out
    }

    // ---- grants -----------------------------------------------------------

    /// A grant's `budget AMOUNT on PARAM` (its `grant` index is the
    /// caller's to set): the parameter must be a `decimal` or `int` of the
    /// grant's tool (not a list), the amount a number not below zero.
    fn lower_budget(
        &mut self,
        g: &GrantDecl,
        grant: &Grant,
        tools: &[Tool],
    ) -> Option<agenra_core::policy::Budget> {
        let owner = format!("grant `{}`", g.name.name);
        let b = g.clauses.iter().find_map(|c| match &c.kind {
            GrantClauseKind::Budget(b) if b.scope.and_then(|s| s.window).is_none() => Some(b),
            _ => None,
        })?;
        let amount = match &b.amount.value {
            Value::Decimal(d) => *d,
            Value::Int(i) => agenra_core::Decimal::from(*i),
            _ => {
                self.d.error(
                    b.amount.span,
                    format!("the budget of {owner} must be a number"),
                );
                return None;
            }
        };
        if amount.is_negative() {
            self.d.error(
                b.amount.span,
                format!("the budget of {owner} must not be negative"),
            );
            return None;
        }
        let tool = tools.get(grant.tool)?;
        let Some(param) = tool.param_index(&b.param.name) else {
            self.d.error(
                b.param.span,
                format!(
                    "{owner} spends its budget in `{}`, but tool `{}` has no such parameter",
                    b.param.name, tool.name
                ),
            );
            return None;
        };
        let p = &tool.params[param];
        if p.list || !matches!(p.ty, ParamType::Decimal | ParamType::Int) {
            self.d.error(
                b.param.span,
                format!(
                    "{owner} spends its budget in `{}` of type `{}`: a budget is spent in a `decimal` or `int` parameter",
                    p.name,
                    p.type_name()
                ),
            );
            return None;
        }
        Some(agenra_core::policy::Budget {
            grant: 0,
            amount,
            param,
            per_tenant: b.scope.is_some_and(|s| s.tenant),
        })
    }

    /// A grant's renewing limits (`quota N per 10m`, `budget B on PARAM
    /// per day`), units first (their `grant` index is the caller's to
    /// set). A budget's parameter and amount are checked as
    /// `lower_budget` checks them.
    fn lower_renewals(
        &mut self,
        g: &GrantDecl,
        grant: &Grant,
        tools: &[Tool],
    ) -> Vec<agenra_core::policy::Renewal> {
        let mut out = Vec::new();
        for c in &g.clauses {
            if let GrantClauseKind::Quota(n, Some(s)) = &c.kind {
                let Some(w) = s.window else { continue };
                let Some(n) = n else {
                    self.d.error(
                        w.span,
                        format!(
                            "grant `{}` has `quota unlimited` with a window: an unlimited quota does not renew (write `quota N {}`)",
                            g.name.name,
                            "per ".to_string() + &w.text()
                        ),
                    );
                    continue;
                };
                let n = u64::try_from(n.value).unwrap_or(0);
                out.insert(
                    0,
                    agenra_core::policy::Renewal {
                        grant: 0,
                        secs: w.secs,
                        limit: agenra_core::policy::RenewLimit::Units(n),
                        per_tenant: s.tenant,
                    },
                );
            }
        }
        let windowed = g.clauses.iter().find_map(|c| match &c.kind {
            GrantClauseKind::Budget(b) => b.scope.and_then(|s| s.window.map(|w| (b, w, s.tenant))),
            _ => None,
        });
        if let Some((b, w, tenant)) = windowed {
            // Checked (and reported) like a plain budget, then moved.
            let unwindowed = GrantDecl {
                clauses: vec![GrantClause {
                    kind: GrantClauseKind::Budget(BudgetLit {
                        scope: None,
                        ..b.clone()
                    }),
                    span: w.span,
                }],
                ..g.clone()
            };
            if let Some(budget) = self.lower_budget(&unwindowed, grant, tools) {
                out.push(agenra_core::policy::Renewal {
                    grant: 0,
                    secs: w.secs,
                    limit: agenra_core::policy::RenewLimit::Amount {
                        amount: budget.amount,
                        param: budget.param,
                    },
                    per_tenant: tenant,
                });
            }
        }
        out
    }

    fn lower_grant(&mut self, g: &GrantDecl, tools: &[Tool]) -> Grant {
        let owner = format!("grant `{}`", g.name.name);
        let tool_id = self.tools.resolve(&g.tool, &mut self.d);
        let tool = tool_id.and_then(|t| tools.get(t));
        let mut grant = Grant {
            name: g.name.name.clone(),
            agent: 0,
            tool: tool_id.unwrap_or(0),
            resource: None,
            args: Vec::new(),
            quota: Quota::Limited(0),
            approval: false,
            expires_at: None,
            discovers: None,
        };
        let mut seen = Vec::new();
        for clause in &g.clauses {
            once(
                &mut seen,
                clause.kind.keyword(),
                clause.span,
                &owner,
                &mut self.d,
            );
            match &clause.kind {
                GrantClauseKind::On(p) => {
                    if let Some(t) = tool.filter(|t| t.resource.is_none()) {
                        self.d.error(
                            clause.span,
                            format!(
                                "{owner} has an `on` clause, but tool `{}` has no resource parameter (add `resource PARAM;` to the tool)",
                                t.name
                            ),
                        );
                    }
                    grant.resource = Some(p.pattern.clone());
                }
                GrantClauseKind::Where(cond) => {
                    let Some(t) = tool else { continue };
                    // A top-level `and` is the grant's list of conditions
                    // (attenuation and shadowing compare them one by one).
                    let parts: Vec<&CondExpr> = match cond {
                        CondExpr::And(cs) => cs.iter().collect(),
                        other => vec![other],
                    };
                    self.neg.in_grant = true;
                    for part in parts {
                        let c = self.lower_cond_indexed(part, t, &owner, false);
                        grant.args.push(c);
                    }
                    self.neg.in_grant = false;
                }
                GrantClauseKind::Quota(q, scope) => {
                    if let (None, Some(s)) = (q, scope.filter(|s| s.tenant)) {
                        self.d.error(
                            s.span,
                            format!(
                                "{owner} has `quota unlimited per tenant`: an unlimited quota has nothing to share (write `quota N per tenant`, or `quota unlimited`)"
                            ),
                        );
                    }
                    grant.quota = match q {
                        None => Quota::Unlimited,
                        Some(n) => Quota::Limited(non_negative(
                            n,
                            &format!("the quota of {owner}"),
                            &mut self.d,
                        )),
                    };
                }
                // Lowered by `lower_budget`, once the grant is.
                GrantClauseKind::Budget(_) => {}
                GrantClauseKind::Approval => grant.approval = true,
                GrantClauseKind::Expires(t) => {
                    grant.expires_at = Some(non_negative(
                        t,
                        &format!("the expiry of {owner}"),
                        &mut self.d,
                    ));
                }
                GrantClauseKind::Discovers(set) => {
                    grant.discovers = self.sets.resolve(set, &mut self.d)
                }
                GrantClauseKind::Agent(agent) => {
                    grant.agent = self.agents.resolve(agent, &mut self.d).unwrap_or(0)
                }
            }
        }
        if seen.contains(&"budget") && !seen.contains(&"quota") {
            // A budget bounds the grant: its quota, unwritten, is unlimited.
            grant.quota = Quota::Unlimited;
        } else if !seen.contains(&"quota") {
            self.d.error(
                g.name.span,
                format!("{owner} has no quota (add `quota N`, `quota unlimited` or `budget AMOUNT on PARAM`)"),
            );
        }
        grant
    }

    // ---- rules ------------------------------------------------------------

    /// A flow rule's effect, and whether it forbids (deny or pause).
    fn lower_flow_effect(&mut self, effect: &FlowEffectExpr) -> (FlowEffect, bool) {
        let effect = match effect {
            FlowEffectExpr::Deny(pat) => FlowEffect::Deny(self.lower_label_pat(pat)),
            FlowEffectExpr::Pause(pat) => FlowEffect::Pause(self.lower_label_pat(pat)),
            FlowEffectExpr::Allow(label) => FlowEffect::Allow(self.lower_label(label)),
        };
        let restrictive = !matches!(effect, FlowEffect::Allow(_));
        (effect, restrictive)
    }

    fn lower_flow(&mut self, f: &FlowDecl, tools: &[Tool]) -> FlowRule {
        let owner = format!("flow rule `{}`", f.name.name);
        let (effect, restrictive) = self.lower_flow_effect(&f.effect);
        let sink = self.sinks.resolve(&f.sink, &mut self.d);
        // Type-check against every tool reaching the sink that has the
        // parameter; a tool without it simply fails the test.
        let reaching: Vec<&Tool> = tools
            .iter()
            .filter(|t| sink.is_some_and(|s| t.reaches(s)))
            .collect();
        let when = match &f.when {
            Some(c) => {
                let which = format!("tool reaching sink `{}`", f.sink.name);
                self.lower_cond_named(c, &reaching, (&owner, &which), restrictive)
            }
            None => Cond::TRUE,
        };
        FlowRule {
            name: f.name.name.clone(),
            sink: sink.unwrap_or(0),
            effect,
            when,
        }
    }

    /// `deny|pause|allow flow NAME: ... -> agent AGENT [when COND]`: what the
    /// agent may receive, judged on every call it makes.
    fn lower_receive(&mut self, f: &FlowDecl, tools: &[Tool]) -> ReceiveRule {
        let owner = format!("flow rule `{}`", f.name.name);
        let (effect, restrictive) = self.lower_flow_effect(&f.effect);
        let agent = self.agents.resolve(&f.sink, &mut self.d);
        let all: Vec<&Tool> = tools.iter().collect();
        let when = match &f.when {
            Some(c) => self.lower_cond_named(c, &all, (&owner, "tool"), restrictive),
            None => Cond::TRUE,
        };
        ReceiveRule {
            name: f.name.name.clone(),
            agent: agent.unwrap_or(0),
            effect,
            when,
        }
    }

    /// A tool pattern: a bare name must be a declared tool.
    fn tool_glob(&mut self, pat: &ToolPat) -> Option<String> {
        match pat {
            ToolPat::Name(id) => self.tools.resolve(id, &mut self.d).map(|_| id.name.clone()),
            ToolPat::Glob(s) => Some(s.value.clone()),
        }
    }

    fn lower_step(&mut self, step: &StepExpr, rule: &str, tools: &[Tool]) -> StepPattern {
        let mut out = StepPattern::default();
        let mut seen = Vec::new();
        for atom in &step.atoms {
            let keyword = match &atom.kind {
                StepAtomKind::Any => "any",
                StepAtomKind::Call(pat) => {
                    out.tool = self.tool_glob(pat);
                    "call"
                }
                StepAtomKind::To(sink) => {
                    out.sink = self.sinks.resolve(sink, &mut self.d);
                    "to"
                }
                StepAtomKind::Reads(pat) => {
                    out.reads = Some(self.lower_label_pat(pat));
                    "reads"
                }
                StepAtomKind::Where(_) => "where",
            };
            if seen.contains(&keyword) {
                self.d
                    .error(atom.span, format!("`{keyword}` appears twice in this step"));
            }
            seen.push(keyword);
        }
        let matching: Vec<&Tool> = tools.iter().filter(|t| out.matches_tool(t)).collect();
        for atom in &step.atoms {
            if let StepAtomKind::Where(c) = &atom.kind {
                let owner = format!("rule `{rule}`");
                // A step's `where` refuses (it completes a forbidden
                // sequence or counts towards a bound), except in `reset on`.
                self.neg.step_override = Some(!self.neg.in_reset);
                out.when = Some(self.lower_cond_named(
                    c,
                    &matching,
                    (&owner, "tool this step matches"),
                    false,
                ));
                self.neg.step_override = None;
            }
        }
        let matches_a_tool = !matching.is_empty();
        if !matches_a_tool {
            self.d.warn(
                step.span,
                format!("rule `{rule}`: this step matches no tool"),
            );
        }
        out
    }

    fn lower_obligation(&mut self, o: &ObligationDecl, tools: &[Tool]) -> Obligation {
        let owner = format!("obligation `{}`", o.name.name);
        let fact = self.facts.resolve(&o.fact, &mut self.d);
        if let Some(f) = fact {
            if !tools.iter().any(|t| t.facts.iter().any(|r| r.fact == f)) {
                self.d.warn(
                    o.fact.span,
                    format!("{owner}: no tool establishes fact `{}`", o.fact.name),
                );
            }
        }
        let glob = |c: &mut Self, pat: &ToolPat, which: &str| {
            let g = c.tool_glob(pat);
            if let Some(g) = &g {
                if !tools.iter().any(|t| glob_matches(g, &t.name)) {
                    c.d.warn(
                        pat.span(),
                        format!(
                            "{owner}: the `{which}` pattern {} matches no tool",
                            Value::Str(g.clone())
                        ),
                    );
                }
            }
            g.unwrap_or_default()
        };
        let since = o.since.as_ref().map(|p| glob(self, p, "since"));
        let before = glob(self, &o.before, "before");
        Obligation {
            name: o.name.name.clone(),
            effect: if o.else_pause {
                RuleEffect::Pause
            } else {
                RuleEffect::Deny
            },
            fact: fact.unwrap_or(0),
            before,
            since,
        }
    }
}

fn rule_effect(kw: RuleEffectKw) -> RuleEffect {
    match kw {
        RuleEffectKw::Deny => RuleEffect::Deny,
        RuleEffectKw::Pause => RuleEffect::Pause,
    }
}
