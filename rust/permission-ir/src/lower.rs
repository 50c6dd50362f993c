//! Lowering a valid IR into what a session runs under: the policy ∧ the
//! task. Everything added only narrows the policy (see
//! `docs/permission-ir.md`, "Lowering").

use crate::error::LowerError;
use crate::ir::{Action, ArgValues, LabelSpec, PermissionIr, Span};
use crate::validate::{
    agent_tools, sinks_matching, tools_matching, tools_reaching, typed_value, Validated,
};
use agenra_core::label::CategorySet;
use agenra_core::policy::{
    CallRule, FlowEffect, Obligation, Policy, ResourceLabel, RuleEffect, SinkId, ToolId,
};
use agenra_core::{ArgCond, ArgOp, Cond, Event, Label, NamedCond, Quant, Task, TaskScope, Value};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// What a session needs to run under policy ∧ task.
#[derive(Clone, Debug, PartialEq)]
pub struct Lowered {
    /// The task event: feed it to the session before anything else. Its
    /// scope allows the tools of the IR's actions and forbids the
    /// tool-only and resource-only forbidden actions.
    pub task: Task,
    /// The policy narrowed by the task: call rules for calls the actions
    /// do not cover and for forbidden actions, the task's obligations,
    /// labels of labeled assets, and the policy's `allow flow` rules
    /// restricted to the IR's allowances. Added rules are named `task:...`.
    pub policy: Policy,
    /// One entry per constraint the task added, with the IR part it came
    /// from and that part's evidence.
    pub checks: Vec<Check>,
}

/// One constraint the lowering added (or a policy rule it restricted).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Check {
    /// The IR part it comes from (the task id for whole-task constraints).
    pub id: String,
    /// What kind of constraint.
    pub kind: CheckKind,
    /// The rule that enforces it in [`Lowered::policy`] (`task-scope` for
    /// the task event's scope).
    pub rule: String,
    /// The evidence of the IR part.
    pub evidence: Vec<Span>,
    /// A sentence.
    pub description: String,
}

/// The kinds of [`Check`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckKind {
    /// The task event's scope.
    Scope,
    /// A call rule: calls of a tool must match one of its actions.
    Cover,
    /// A call rule: a tool no action names.
    Outside,
    /// A call rule for a forbidden action.
    Forbidden,
    /// A task obligation.
    Obligation,
    /// An `allow flow` rule restricted (or disabled) by the allowances.
    Allowance,
    /// A resource label from a labeled asset.
    Label,
}

impl Lowered {
    /// The task event, as a session takes it.
    pub fn task_event(&self) -> Event {
        Event::Task(self.task.clone())
    }

    /// The checks a decision's rule enforces (`task-scope`, a `task:...`
    /// rule, including those a check names by a `:*` pattern), so that a
    /// DENY by the task maps back to the IR parts and their evidence.
    pub fn checks_for(&self, rule: &str) -> Vec<&Check> {
        self.checks
            .iter()
            .filter(|c| match c.rule.strip_suffix('*') {
                Some(prefix) => c.rule.starts_with(RULE_PREFIX) && rule.starts_with(prefix),
                None => c.rule == rule && (rule == "task-scope" || rule.starts_with(RULE_PREFIX)),
            })
            .collect()
    }

    /// One evidence span, for people: `event 3`, or `text 0..13 "Look up Alice"`.
    pub fn show_span(&self, span: &Span) -> String {
        match span {
            Span::Event(n) => format!("event {n}"),
            Span::Text(t) => match self.task.text.get(t.start..t.end) {
                Some(q) => format!("text {}..{} {q:?}", t.start, t.end),
                None => format!("text {}..{}", t.start, t.end),
            },
        }
    }

    /// A fresh session under [`Lowered::policy`] with the task event applied.
    pub fn session(&self) -> Result<agenra_core::Session, LowerError> {
        let mut session = agenra_core::Session::new(self.policy.clone())?;
        session
            .step(&self.task_event())
            .map_err(|e| LowerError::Task(e.to_string()))?;
        Ok(session)
    }
}

/// The name every rule the lowering adds starts with (a name no `.agr`
/// policy can declare: `:` is not an identifier character).
pub const RULE_PREFIX: &str = "task:";

/// Lowers `ir` (validated against `policy`) into the task event and the
/// narrowed policy. Fails only when `policy` is not the policy `ir` was
/// validated against, or the result does not pass the core model's checks.
pub fn lower(valid: &Validated, policy: &Policy) -> Result<Lowered, LowerError> {
    let given = agenra_core::hash::content_hash(policy).map_err(agenra_core::MonitorError::from)?;
    if valid.policy_hash() != Some(given) {
        return Err(LowerError::PolicyMismatch {
            validated: valid
                .policy_hash()
                .map_or_else(|| "?".into(), |h| h.to_string()),
            given: given.to_string(),
        });
    }
    let ir = valid.ir();
    let mut l = Lowering {
        ir,
        policy: policy.clone(),
        checks: Vec::new(),
    };
    let scope = l.scope();
    l.cover();
    l.forbidden();
    l.obligations();
    l.allowances();
    l.labels();
    agenra_core::validate::validate(&l.policy).map_err(agenra_core::MonitorError::from)?;
    Ok(Lowered {
        task: Task {
            session: None,
            id: ir.source.task_id.clone(),
            time: None,
            text: ir.source.text.clone(),
            sets: Default::default(),
            scope: Some(scope),
        },
        policy: l.policy,
        checks: l.checks,
    })
}

struct Lowering<'a> {
    ir: &'a PermissionIr,
    policy: Policy,
    checks: Vec<Check>,
}

impl Lowering<'_> {
    fn task_id(&self) -> String {
        self.ir.source.task_id.clone()
    }

    fn all_evidence<'b>(parts: impl Iterator<Item = &'b Vec<Span>>) -> Vec<Span> {
        let mut out: Vec<Span> = Vec::new();
        for spans in parts {
            for s in spans {
                if !out.contains(s) {
                    out.push(s.clone());
                }
            }
        }
        out
    }

    /// The task event's scope, and call rules denying every tool no action names.
    fn scope(&mut self) -> TaskScope {
        let ir = self.ir;
        let tools: BTreeSet<&str> = ir.actions.iter().map(|a| a.tool.as_str()).collect();
        let mut forbid = Vec::new();
        let mut forbid_resources = Vec::new();
        for f in &ir.forbidden {
            if !f.args.is_empty() {
                continue;
            }
            match (&f.tool, &f.resource) {
                (Some(t), None) => forbid.push(t.clone()),
                (None, Some(r)) => {
                    if let Some(g) = r.to_glob() {
                        forbid_resources.push(g);
                    }
                }
                _ => {}
            }
        }
        let scope = TaskScope {
            tools: Some(tools.iter().map(|t| t.to_string()).collect()),
            forbid,
            forbid_resources,
            resources: None,
        };
        self.checks.push(Check {
            id: self.task_id(),
            kind: CheckKind::Scope,
            rule: "task-scope".into(),
            // The actions (what the scope allows) and the forbidden
            // actions it carries.
            evidence: Self::all_evidence(
                ir.actions.iter().map(|a| &a.evidence).chain(
                    ir.forbidden
                        .iter()
                        .filter(|f| f.args.is_empty() && f.tool.is_some() != f.resource.is_some())
                        .map(|f| &f.evidence),
                ),
            ),
            description: format!(
                "the task's tools: {}{}",
                if tools.is_empty() {
                    "none".to_string()
                } else {
                    tools.iter().copied().collect::<Vec<_>>().join(", ")
                },
                if scope.forbid.is_empty() && scope.forbid_resources.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; forbidden tools: [{}], forbidden resources: [{}]",
                        scope.forbid.join(", "),
                        scope.forbid_resources.join(", ")
                    )
                }
            ),
        });
        // The same, as call rules: a later task event that replaces the
        // scope does not lift them.
        let outside: Vec<ToolId> = (0..self.policy.tools.len())
            .filter(|&t| !tools.contains(self.policy.tools[t].name.as_str()))
            .collect();
        for &t in &outside {
            let name = format!("{RULE_PREFIX}outside:{}", self.policy.tools[t].name);
            self.policy.call_rules.push(CallRule {
                name,
                effect: RuleEffect::Deny,
                tool: t,
                when: Cond::TRUE,
            });
        }
        if !outside.is_empty() {
            let names: Vec<&str> = outside
                .iter()
                .map(|&t| self.policy.tools[t].name.as_str())
                .collect();
            self.checks.push(Check {
                id: self.task_id(),
                kind: CheckKind::Outside,
                rule: format!("{RULE_PREFIX}outside:*"),
                evidence: Self::all_evidence(ir.intent.iter().map(|i| &i.evidence)),
                description: format!("no action of the task calls {}", names.join(", ")),
            });
        }
        scope
    }

    /// For each tool whose actions all constrain the call: a call rule
    /// denying the calls none of them covers.
    fn cover(&mut self) {
        let ir = self.ir;
        let tools: BTreeSet<&str> = ir.actions.iter().map(|a| a.tool.as_str()).collect();
        for tool_name in tools {
            let Some(t) = self.policy.tool_id(tool_name) else {
                continue;
            };
            let actions: Vec<&Action> = ir.actions.iter().filter(|a| a.tool == tool_name).collect();
            if actions
                .iter()
                .any(|a| a.assets.is_empty() && a.args.is_empty())
            {
                continue; // some action covers every call of the tool
            }
            // Actions that differ only in their resource, or in the values
            // of one scalar argument, make one condition (an exact merge):
            // a trace's IR has one action per call, its cover rule one
            // condition per distinct kind of call.
            let covers: Vec<ArgCond> = merged_covers(&self.policy.tools[t], &actions)
                .iter()
                .map(|a| self.action_cond(t, a))
                .collect();
            let rule = format!("{RULE_PREFIX}cover:{tool_name}");
            self.policy.call_rules.push(CallRule {
                name: rule.clone(),
                effect: RuleEffect::Deny,
                tool: t,
                when: Cond::Not(Box::new(Cond::Or(covers))),
            });
            let ids: Vec<&str> = actions.iter().map(|a| a.id.as_str()).collect();
            // A trace's IR may have thousands of actions: name a few.
            const SHOWN: usize = 5;
            let mut shown = ids[..ids.len().min(SHOWN)].join(" or ");
            if ids.len() > SHOWN {
                shown.push_str(&format!(" (or {} more)", ids.len() - SHOWN));
            }
            self.checks.push(Check {
                id: ids.join(","),
                kind: CheckKind::Cover,
                rule,
                evidence: Self::all_evidence(actions.iter().map(|a| &a.evidence)),
                description: format!(
                    "a call of `{tool_name}` must match action {shown} (resource and arguments)"
                ),
            });
        }
    }

    fn action_cond(&self, t: ToolId, a: &Action) -> ArgCond {
        let mut parts = Vec::new();
        if !a.assets.is_empty() {
            if let Some(r) = self.policy.tools[t].resource {
                let pats: Vec<ArgCond> = a
                    .assets
                    .iter()
                    .filter_map(|id| self.ir.assets.iter().find(|x| &x.id == id))
                    .filter_map(|x| x.resource.as_ref())
                    .map(|p| Cond::Test {
                        param: r,
                        quant: Quant::All,
                        op: ArgOp::Matches(p.to_pattern()),
                    })
                    .collect();
                parts.push(Cond::Or(pats));
            }
        }
        parts.extend(self.arg_tests(t, &a.args));
        Cond::And(parts)
    }

    /// `param in [values]` for each constrained parameter of tool `t` (a
    /// parameter the tool lacks makes the test false).
    fn arg_tests(&self, t: ToolId, args: &ArgValues) -> Vec<ArgCond> {
        let tool = &self.policy.tools[t];
        args.iter()
            .map(|(name, values)| match tool.param_index(name) {
                Some(i) => one_of(
                    i,
                    values
                        .iter()
                        .filter_map(|v| typed_value(&self.policy, t, name, v).ok())
                        .collect(),
                ),
                None => Cond::FALSE,
            })
            .collect()
    }

    fn forbidden(&mut self) {
        let ir = self.ir;
        for f in &ir.forbidden {
            let tools = match &f.tool {
                Some(g) => tools_matching(&self.policy, g),
                None => (0..self.policy.tools.len()).collect(),
            };
            let mut rules = Vec::new();
            for t in tools {
                let tool = &self.policy.tools[t];
                // Only tools that have what the forbidden action names can make such a call.
                if f.resource.is_some() && tool.resource.is_none() {
                    continue;
                }
                if f.args.keys().any(|p| tool.param_index(p).is_none()) {
                    continue;
                }
                let mut parts = Vec::new();
                if let (Some(r), Some(p)) = (tool.resource, &f.resource) {
                    parts.push(Cond::Test {
                        param: r,
                        quant: Quant::All,
                        op: ArgOp::Matches(p.to_pattern()),
                    });
                }
                parts.extend(self.arg_tests(t, &f.args));
                let name = format!("{RULE_PREFIX}{}:{}", f.id, tool.name);
                rules.push(name.clone());
                self.policy.call_rules.push(CallRule {
                    name,
                    effect: RuleEffect::Deny,
                    tool: t,
                    when: Cond::And(parts),
                });
            }
            self.checks.push(Check {
                id: f.id.clone(),
                kind: CheckKind::Forbidden,
                rule: format!("{RULE_PREFIX}{}:*", f.id),
                evidence: f.evidence.clone(),
                description: format!(
                    "forbidden: {}{}{} ({} call rules)",
                    f.tool.as_deref().unwrap_or("any tool"),
                    f.resource
                        .as_ref()
                        .map(|r| format!(" on {}", serde_json::to_string(r).unwrap_or_default()))
                        .unwrap_or_default(),
                    if f.args.is_empty() {
                        String::new()
                    } else {
                        format!(
                            " with {}",
                            serde_json::to_string(&f.args).unwrap_or_default()
                        )
                    },
                    rules.len()
                ),
            });
        }
    }

    fn obligations(&mut self) {
        let ir = self.ir;
        for o in &ir.obligations {
            let Some(action) = ir.actions.iter().find(|a| a.id == o.before) else {
                continue;
            };
            let Some(fact) = self.policy.facts.iter().position(|f| f == &o.require) else {
                continue;
            };
            let name = format!("{RULE_PREFIX}{}", o.id);
            self.policy.obligations.push(Obligation {
                name: name.clone(),
                effect: RuleEffect::Deny,
                fact,
                before: action.tool.clone(),
                since: o.since.clone(),
            });
            self.checks.push(Check {
                id: o.id.clone(),
                kind: CheckKind::Obligation,
                rule: name,
                evidence: o.evidence.clone(),
                description: format!(
                    "require `{}`{} before `{}`",
                    o.require,
                    o.since
                        .as_ref()
                        .map(|s| format!(" since `{s}`"))
                        .unwrap_or_default(),
                    action.tool
                ),
            });
        }
    }

    /// Restricts every `allow flow` rule (a declassification) to what the
    /// allowance of its sink admits; a rule on a sink without an allowance
    /// never fires.
    fn allowances(&mut self) {
        let ir = self.ir;
        // The allowance of each policy sink (validation allows one).
        let mut of_sink: Vec<Option<usize>> = vec![None; self.policy.sinks.len()];
        for (i, a) in ir.allowances.iter().enumerate() {
            let Some(sink) = &a.sink else { continue };
            if let Some(s) = ir.sinks.iter().find(|s| &s.id == sink) {
                for sink in sinks_matching(&self.policy, &s.pattern) {
                    of_sink[sink].get_or_insert(i);
                }
            }
        }
        for r in 0..self.policy.flow_rules.len() {
            let FlowEffect::Allow(ceiling) = self.policy.flow_rules[r].effect else {
                continue;
            };
            let sink: SinkId = self.policy.flow_rules[r].sink;
            let rule_name = self.policy.flow_rules[r].name.clone();
            let sink_name = self.policy.sinks.get(sink).cloned().unwrap_or_default();
            match of_sink.get(sink).copied().flatten() {
                None => {
                    self.policy.flow_rules[r].when = Cond::FALSE;
                    self.checks.push(Check {
                        id: self.task_id(),
                        kind: CheckKind::Allowance,
                        rule: rule_name.clone(),
                        evidence: Vec::new(),
                        description: format!(
                            "`allow flow {rule_name}` declassifies nothing: the task has no allowance for sink `{sink_name}`"
                        ),
                    });
                }
                Some(i) => {
                    let a = &ir.allowances[i];
                    let up_to = self.label(&a.up_to);
                    let met = meet(&ceiling, &up_to);
                    let tools = tools_reaching(&self.policy, &[sink]);
                    let cond = self.named_tests(&tools, &a.args);
                    let rule = &mut self.policy.flow_rules[r];
                    rule.effect = FlowEffect::Allow(met);
                    let old = std::mem::replace(&mut rule.when, Cond::TRUE);
                    rule.when = Cond::And(vec![old, cond]);
                    let shown = self.policy.show_label(&met);
                    self.checks.push(Check {
                        id: a.id.clone(),
                        kind: CheckKind::Allowance,
                        rule: rule_name.clone(),
                        evidence: a.evidence.clone(),
                        description: format!(
                            "`allow flow {rule_name}` into `{sink_name}` declassifies up to {shown}{}",
                            only_with(&a.args)
                        ),
                    });
                }
            }
        }
        self.agent_allowances();
    }

    /// The same for what delegated agents may receive: every `allow flow
    /// ... -> agent A` rule fires only within the allowance naming agent
    /// `A` (ceiling met with `up_to`, `when` conjoined with its argument
    /// values), and not at all without one.
    fn agent_allowances(&mut self) {
        let ir = self.ir;
        let of_agent = |name: &str| {
            ir.allowances
                .iter()
                .find(|a| a.agent.as_deref() == Some(name))
        };
        for r in 0..self.policy.receive_rules.len() {
            let FlowEffect::Allow(ceiling) = self.policy.receive_rules[r].effect else {
                continue;
            };
            let g = self.policy.receive_rules[r].agent;
            let rule_name = self.policy.receive_rules[r].name.clone();
            let agent = self
                .policy
                .agents
                .get(g)
                .map(|a| a.name.clone())
                .unwrap_or_default();
            match of_agent(&agent) {
                None => {
                    self.policy.receive_rules[r].when = Cond::FALSE;
                    self.checks.push(Check {
                        id: self.task_id(),
                        kind: CheckKind::Allowance,
                        rule: rule_name.clone(),
                        evidence: Vec::new(),
                        description: format!(
                            "`allow flow {rule_name}` declassifies nothing: the task has no allowance for agent `{agent}`"
                        ),
                    });
                }
                Some(a) => {
                    let met = meet(&ceiling, &self.label(&a.up_to));
                    let cond = self.named_tests(&agent_tools(&self.policy, g), &a.args);
                    let rule = &mut self.policy.receive_rules[r];
                    rule.effect = FlowEffect::Allow(met);
                    let old = std::mem::replace(&mut rule.when, Cond::TRUE);
                    rule.when = Cond::And(vec![old, cond]);
                    let shown = self.policy.show_label(&met);
                    self.checks.push(Check {
                        id: a.id.clone(),
                        kind: CheckKind::Allowance,
                        rule: rule_name.clone(),
                        evidence: a.evidence.clone(),
                        description: format!(
                            "`allow flow {rule_name}` into agent `{agent}` declassifies up to {shown}{}",
                            only_with(&a.args)
                        ),
                    });
                }
            }
        }
    }

    /// `param in [values]` by parameter name, typed by the first of `tools`
    /// that has the parameter (validation checked the values against all).
    fn named_tests(&self, tools: &[ToolId], args: &ArgValues) -> NamedCond {
        let tests = args
            .iter()
            .map(|(name, values)| {
                let t = tools
                    .iter()
                    .copied()
                    .find(|&t| self.policy.tools[t].param_index(name).is_some());
                let values: Vec<Value> = match t {
                    Some(t) => values
                        .iter()
                        .filter_map(|v| typed_value(&self.policy, t, name, v).ok())
                        .collect(),
                    None => values.iter().filter_map(Value::from_json).collect(),
                };
                one_of(name.clone(), values)
            })
            .collect();
        Cond::And(tests)
    }

    fn label(&self, l: &LabelSpec) -> Label {
        let level = self
            .policy
            .levels
            .iter()
            .position(|x| x == &l.level)
            .unwrap_or(0);
        let cats = l
            .categories
            .iter()
            .filter_map(|c| self.policy.categories.iter().position(|x| x == c));
        Label::new(level as u8, CategorySet::from_indexes(cats), l.trusted)
    }

    fn labels(&mut self) {
        let ir = self.ir;
        for a in &ir.assets {
            let (Some(r), Some(claim)) = (&a.resource, &a.label) else {
                continue;
            };
            let label = self.label(&LabelSpec {
                level: claim.level.clone(),
                categories: claim.categories.clone(),
                trusted: claim.trusted,
            });
            self.policy.resources.push(ResourceLabel {
                pattern: r.to_pattern(),
                label,
            });
            self.checks.push(Check {
                id: a.id.clone(),
                kind: CheckKind::Label,
                rule: "resource-label".into(),
                evidence: claim.evidence.clone(),
                description: format!(
                    "resources {} are at least {}",
                    serde_json::to_string(r).unwrap_or_default(),
                    self.policy.show_label(&label)
                ),
            });
        }
    }
}

/// What a covered call may look like: its resource among these assets
/// (`None`: any resource), each constrained argument among its values
/// (canonical JSON text).
type Shape = (Option<BTreeSet<String>>, BTreeMap<String, BTreeSet<String>>);

/// The actions of one tool, merged without changing which calls they
/// cover: actions with the same argument constraints become one with the
/// union of their assets, `(r ∈ A ∧ X) ∨ (r ∈ B ∧ X) = r ∈ A ∪ B ∧ X`; actions
/// with the same assets and constraints but for one scalar parameter
/// become one with the union of its values (or without the constraint,
/// when one of them leaves it free); repeated until nothing merges. List
/// parameters are never merged by value (their test is on every element:
/// `all ∈ X ∨ all ∈ Y` is not `all ∈ X ∪ Y`).
pub(crate) fn merged_covers(tool: &agenra_core::policy::Tool, actions: &[&Action]) -> Vec<Action> {
    let mut shapes: Vec<Shape> = actions
        .iter()
        .map(|a| {
            let assets = (!a.assets.is_empty()).then(|| a.assets.iter().cloned().collect());
            let args = a
                .args
                .iter()
                .map(|(k, vs)| (k.clone(), vs.iter().map(|v| v.to_string()).collect()))
                .collect();
            (assets, args)
        })
        .collect();
    // `None` (unconstrained) absorbs; otherwise the union.
    fn union(a: &mut Option<BTreeSet<String>>, b: Option<BTreeSet<String>>) {
        match (a.as_mut(), b) {
            (Some(x), Some(y)) => x.extend(y),
            _ => *a = None,
        }
    }
    let scalars: Vec<&str> = tool
        .params
        .iter()
        .filter(|p| !p.list)
        .map(|p| p.name.as_str())
        .collect();
    loop {
        let before = shapes.len();
        let mut by_args: BTreeMap<BTreeMap<String, BTreeSet<String>>, Option<BTreeSet<String>>> =
            BTreeMap::new();
        for (assets, args) in shapes {
            match by_args.entry(args) {
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(assets);
                }
                std::collections::btree_map::Entry::Occupied(mut o) => union(o.get_mut(), assets),
            }
        }
        shapes = by_args
            .into_iter()
            .map(|(args, assets)| (assets, args))
            .collect();
        for &p in &scalars {
            let mut by_rest: BTreeMap<Shape, Option<BTreeSet<String>>> = BTreeMap::new();
            for (assets, mut args) in shapes {
                let values = args.remove(p);
                match by_rest.entry((assets, args)) {
                    std::collections::btree_map::Entry::Vacant(v) => {
                        v.insert(values);
                    }
                    std::collections::btree_map::Entry::Occupied(mut o) => {
                        union(o.get_mut(), values)
                    }
                }
            }
            shapes = by_rest
                .into_iter()
                .map(|((assets, mut args), values)| {
                    if let Some(v) = values {
                        args.insert(p.to_string(), v);
                    }
                    (assets, args)
                })
                .collect();
        }
        if shapes.len() == before {
            break;
        }
    }
    shapes
        .into_iter()
        .map(|(assets, args)| Action {
            id: String::new(),
            tool: tool.name.clone(),
            assets: assets.map(|a| a.into_iter().collect()).unwrap_or_default(),
            args: args
                .into_iter()
                .map(|(k, vs)| {
                    let values = vs
                        .iter()
                        .filter_map(|v| serde_json::from_str(v).ok())
                        .collect();
                    (k, values)
                })
                .collect(),
            evidence: vec![],
        })
        .collect()
}

/// The greatest lower bound: data below both labels.
pub fn meet(a: &Label, b: &Label) -> Label {
    Label::new(
        a.sensitivity.min(b.sensitivity),
        a.categories.intersection(b.categories),
        a.trusted || b.trusted,
    )
}

/// How an allowance's argument scope reads in a check's description.
fn only_with(args: &ArgValues) -> String {
    if args.is_empty() {
        String::new()
    } else {
        format!(
            ", only with {}",
            serde_json::to_string(args).unwrap_or_default()
        )
    }
}

/// `param in [values]`, where a `null` among the values stands for the
/// argument being absent (`In` alone never holds on an absent argument).
fn one_of<P: Clone>(param: P, values: Vec<Value>) -> Cond<P> {
    let (nulls, present): (Vec<Value>, Vec<Value>) =
        values.into_iter().partition(|v| matches!(v, Value::Null));
    let test = |op| Cond::Test {
        param: param.clone(),
        quant: Quant::All,
        op,
    };
    if nulls.is_empty() {
        return test(ArgOp::In(present));
    }
    Cond::Or(vec![test(ArgOp::Eq(Value::Null)), test(ArgOp::In(present))])
}
