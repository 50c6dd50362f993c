//! Checking an IR against a compiled policy: every reference resolves,
//! every part has evidence that lies inside its source, data edges are
//! acyclic, every tool, parameter, value, sink, fact, level and category is
//! one the policy declares.

use crate::error::{IrError, ValidationErrors};
use crate::ir::{ArgValues, LabelSpec, PermissionIr, Span, IR_VERSION};
use agenra_core::pattern::glob_matches;
use agenra_core::policy::{Policy, SinkId, ToolId};
use agenra_core::{Hash, Value};
use std::collections::{BTreeMap, BTreeSet};

/// An IR that passed [`validate`] against one policy. [`lower`](crate::lower)
/// takes only this, and only with the same policy.
#[derive(Clone, Debug, PartialEq)]
pub struct Validated {
    ir: PermissionIr,
    policy_hash: Option<Hash>,
}

impl Validated {
    /// The IR.
    pub fn ir(&self) -> &PermissionIr {
        &self.ir
    }

    /// The IR, giving up the proof that it is valid.
    pub fn into_inner(self) -> PermissionIr {
        self.ir
    }

    /// The content hash of the policy it was validated against.
    pub fn policy_hash(&self) -> Option<Hash> {
        self.policy_hash
    }
}

/// What kind of part an id names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Asset,
    Action,
    Obligation,
    Allowance,
    Forbidden,
    Sink,
}

/// Checks `ir` against `policy` and returns every defect found, in
/// document order (references are checked after all ids are known; the
/// cycle check runs on the edges whose ends resolve).
pub fn validate(ir: PermissionIr, policy: &Policy) -> Result<Validated, ValidationErrors> {
    let errors = check(&ir, policy);
    if errors.is_empty() {
        Ok(Validated {
            policy_hash: agenra_core::hash::content_hash(policy).ok(),
            ir,
        })
    } else {
        Err(ValidationErrors { errors })
    }
}

/// The defects of `ir` against `policy` (empty: valid).
pub fn check(ir: &PermissionIr, policy: &Policy) -> Vec<IrError> {
    let mut c = Checker {
        ir,
        policy,
        errors: Vec::new(),
    };
    c.run();
    c.errors
}

struct Checker<'a> {
    ir: &'a PermissionIr,
    policy: &'a Policy,
    errors: Vec<IrError>,
}

impl<'a> Checker<'a> {
    fn run(&mut self) {
        let ir = self.ir;
        if ir.version != IR_VERSION {
            self.errors
                .push(IrError::UnsupportedVersion { found: ir.version });
        }
        let ids = self.ids();
        if let Some(intent) = &ir.intent {
            self.evidence("intent.evidence", &intent.evidence, false);
        }
        for (i, a) in ir.assets.iter().enumerate() {
            let path = format!("assets[{i}]");
            self.evidence(&format!("{path}.evidence"), &a.evidence, false);
            if let Some(label) = &a.label {
                self.label(&format!("{path}.label"), &label.level, &label.categories);
                self.evidence(&format!("{path}.label.evidence"), &label.evidence, true);
            }
        }
        for (i, a) in ir.actions.iter().enumerate() {
            let path = format!("actions[{i}]");
            self.evidence(&format!("{path}.evidence"), &a.evidence, false);
            let tool = self.policy.tool_id(&a.tool);
            if tool.is_none() {
                self.errors.push(IrError::UnknownTool {
                    path: format!("{path}.tool"),
                    tool: a.tool.clone(),
                });
            }
            for (j, asset) in a.assets.iter().enumerate() {
                let apath = format!("{path}.assets[{j}]");
                match ids.get(asset.as_str()) {
                    Some((Kind::Asset, _)) => {
                        let has_resource = ir
                            .assets
                            .iter()
                            .any(|x| &x.id == asset && x.resource.is_some());
                        if !has_resource {
                            self.errors.push(IrError::AssetWithoutResource {
                                path: apath,
                                id: asset.clone(),
                            });
                        }
                    }
                    _ => self.errors.push(IrError::DanglingEdge {
                        path: apath,
                        id: asset.clone(),
                        expected: "an asset",
                    }),
                }
            }
            if let Some(t) = tool {
                if !a.assets.is_empty() && self.policy.tools[t].resource.is_none() {
                    self.errors.push(IrError::NoResourceParam {
                        path: format!("{path}.assets"),
                        tool: a.tool.clone(),
                    });
                }
                self.args(&format!("{path}.args"), &a.args, &[t], true);
            }
        }
        for (i, o) in ir.obligations.iter().enumerate() {
            let path = format!("obligations[{i}]");
            self.evidence(&format!("{path}.evidence"), &o.evidence, false);
            if !self.policy.facts.contains(&o.require) {
                self.errors.push(IrError::UnknownFact {
                    path: format!("{path}.require"),
                    fact: o.require.clone(),
                });
            }
            if !matches!(ids.get(o.before.as_str()), Some((Kind::Action, _))) {
                self.errors.push(IrError::DanglingEdge {
                    path: format!("{path}.before"),
                    id: o.before.clone(),
                    expected: "an action",
                });
            }
            if let Some(since) = &o.since {
                if self.tools_matching(since).is_empty() {
                    self.errors.push(IrError::UnknownTool {
                        path: format!("{path}.since"),
                        tool: since.clone(),
                    });
                }
            }
        }
        for (i, s) in ir.sinks.iter().enumerate() {
            let path = format!("sinks[{i}]");
            self.evidence(&format!("{path}.evidence"), &s.evidence, false);
            if sinks_matching(self.policy, &s.pattern).is_empty() {
                self.errors.push(IrError::UnknownSinkPattern {
                    path: format!("{path}.pattern"),
                    pattern: s.pattern.clone(),
                    known: self.policy.sinks.join(", "),
                });
            }
        }
        let mut allowed: BTreeMap<SinkId, String> = BTreeMap::new();
        let mut allowed_agents: BTreeMap<usize, String> = BTreeMap::new();
        for (i, a) in ir.allowances.iter().enumerate() {
            let path = format!("allowances[{i}]");
            self.evidence(&format!("{path}.evidence"), &a.evidence, false);
            self.ceiling(&format!("{path}.up_to"), &a.up_to);
            let sink_id = match (&a.sink, &a.agent) {
                (Some(sink), None) => sink,
                (None, Some(agent)) => {
                    let Some(g) = self.policy.agents.iter().position(|x| &x.name == agent) else {
                        self.errors.push(IrError::UnknownAgent {
                            path: format!("{path}.agent"),
                            agent: agent.clone(),
                            known: self
                                .policy
                                .agents
                                .iter()
                                .map(|x| x.name.as_str())
                                .collect::<Vec<_>>()
                                .join(", "),
                        });
                        continue;
                    };
                    if let Some(first) = allowed_agents.get(&g) {
                        self.errors.push(IrError::DuplicateAgentAllowance {
                            path: path.clone(),
                            agent: agent.clone(),
                            first: first.clone(),
                        });
                    } else {
                        allowed_agents.insert(g, path.clone());
                    }
                    let tools = agent_tools(self.policy, g);
                    if !tools.is_empty() {
                        self.args(&format!("{path}.args"), &a.args, &tools, false);
                    }
                    continue;
                }
                _ => {
                    self.errors
                        .push(IrError::AllowanceTarget { path: path.clone() });
                    continue;
                }
            };
            let Some(sink) = ir.sinks.iter().find(|s| &s.id == sink_id) else {
                self.errors.push(IrError::DanglingEdge {
                    path: format!("{path}.sink"),
                    id: sink_id.clone(),
                    expected: "a sink",
                });
                continue;
            };
            let sinks = sinks_matching(self.policy, &sink.pattern);
            for &s in &sinks {
                if let Some(first) = allowed.get(&s) {
                    self.errors.push(IrError::DuplicateAllowance {
                        path: path.clone(),
                        sink: self.policy.sinks[s].clone(),
                        first: first.clone(),
                    });
                } else {
                    allowed.insert(s, path.clone());
                }
            }
            let tools = tools_reaching(self.policy, &sinks);
            if !tools.is_empty() {
                self.args(&format!("{path}.args"), &a.args, &tools, true);
            }
        }
        for (i, f) in ir.forbidden.iter().enumerate() {
            let path = format!("forbidden[{i}]");
            self.evidence(&format!("{path}.evidence"), &f.evidence, false);
            if f.tool.is_none() && f.resource.is_none() && f.args.is_empty() {
                self.errors
                    .push(IrError::EmptyForbidden { path: path.clone() });
            }
            let tools = match &f.tool {
                Some(glob) => {
                    let tools = self.tools_matching(glob);
                    if tools.is_empty() {
                        self.errors.push(IrError::UnknownTool {
                            path: format!("{path}.tool"),
                            tool: glob.clone(),
                        });
                    }
                    tools
                }
                None => (0..self.policy.tools.len()).collect(),
            };
            if tools.is_empty() {
                continue;
            }
            if f.resource.is_some()
                && tools
                    .iter()
                    .all(|&t| self.policy.tools[t].resource.is_none())
            {
                self.errors.push(IrError::NoResourceParam {
                    path: format!("{path}.resource"),
                    tool: f.tool.clone().unwrap_or_else(|| "*".into()),
                });
            }
            self.args(&format!("{path}.args"), &f.args, &tools, false);
        }
        for (i, e) in ir.flows.iter().enumerate() {
            let path = format!("flows[{i}]");
            self.evidence(&format!("{path}.evidence"), &e.evidence, false);
            if !matches!(
                ids.get(e.from.as_str()),
                Some((Kind::Asset | Kind::Action, _))
            ) {
                self.errors.push(IrError::DanglingEdge {
                    path: format!("{path}.from"),
                    id: e.from.clone(),
                    expected: "an asset or action",
                });
            }
            if !matches!(ids.get(e.to.as_str()), Some((Kind::Action | Kind::Sink, _))) {
                self.errors.push(IrError::DanglingEdge {
                    path: format!("{path}.to"),
                    id: e.to.clone(),
                    expected: "an action or sink",
                });
            }
        }
        let resolves = |e: &crate::ir::Flow| {
            matches!(
                ids.get(e.from.as_str()),
                Some((Kind::Asset | Kind::Action, _))
            ) && matches!(ids.get(e.to.as_str()), Some((Kind::Action | Kind::Sink, _)))
        };
        if let Some(cycle) = find_cycle(ir.flows.iter().filter(|e| resolves(e))) {
            self.errors.push(IrError::DataCycle {
                path: "flows".into(),
                cycle,
            });
        }
    }

    /// Every id, with its kind and first path; reports empty and duplicate ids.
    fn ids(&mut self) -> BTreeMap<&'a str, (Kind, String)> {
        let ir = self.ir;
        let mut ids: BTreeMap<&str, (Kind, String)> = BTreeMap::new();
        let parts =
            ir.assets
                .iter()
                .enumerate()
                .map(|(i, a)| (a.id.as_str(), Kind::Asset, format!("assets[{i}].id")))
                .chain(
                    ir.actions
                        .iter()
                        .enumerate()
                        .map(|(i, a)| (a.id.as_str(), Kind::Action, format!("actions[{i}].id"))),
                )
                .chain(ir.obligations.iter().enumerate().map(|(i, a)| {
                    (
                        a.id.as_str(),
                        Kind::Obligation,
                        format!("obligations[{i}].id"),
                    )
                }))
                .chain(ir.allowances.iter().enumerate().map(|(i, a)| {
                    (
                        a.id.as_str(),
                        Kind::Allowance,
                        format!("allowances[{i}].id"),
                    )
                }))
                .chain(
                    ir.forbidden.iter().enumerate().map(|(i, a)| {
                        (a.id.as_str(), Kind::Forbidden, format!("forbidden[{i}].id"))
                    }),
                )
                .chain(
                    ir.sinks
                        .iter()
                        .enumerate()
                        .map(|(i, a)| (a.id.as_str(), Kind::Sink, format!("sinks[{i}].id"))),
                );
        for (id, kind, path) in parts {
            if id.is_empty() {
                self.errors.push(IrError::EmptyId { path });
                continue;
            }
            match ids.get(id) {
                Some((_, first)) => self.errors.push(IrError::DuplicateId {
                    path,
                    id: id.to_string(),
                    first: first.clone(),
                }),
                None => {
                    ids.insert(id, (kind, path));
                }
            }
        }
        if self.ir.source.task_id.is_empty() {
            self.errors.push(IrError::EmptyId {
                path: "source.task_id".into(),
            });
        }
        ids
    }

    fn evidence(&mut self, path: &str, spans: &[Span], label: bool) {
        if spans.is_empty() {
            self.errors.push(if label {
                IrError::LabelWithoutEvidence { path: path.into() }
            } else {
                IrError::MissingEvidence { path: path.into() }
            });
        }
        let text = &self.ir.source.text;
        for (k, span) in spans.iter().enumerate() {
            let path = format!("{path}[{k}]");
            match span {
                Span::Event(seq) => {
                    let events = self.ir.source.events;
                    if *seq == 0 || *seq > events {
                        self.errors.push(IrError::EventOutsideTrace {
                            path,
                            seq: *seq,
                            events,
                        });
                    }
                }
                Span::Text(t) => {
                    if t.start >= t.end || t.end > text.len() {
                        self.errors.push(IrError::SpanOutsideText {
                            path,
                            start: t.start,
                            end: t.end,
                            len: text.len(),
                        });
                        continue;
                    }
                    if let Some(offset) = [t.start, t.end]
                        .into_iter()
                        .find(|&o| !text.is_char_boundary(o))
                    {
                        self.errors
                            .push(IrError::SpanNotOnCharBoundary { path, offset });
                        continue;
                    }
                    let actual = &text[t.start..t.end];
                    if let Some(q) = &t.quote {
                        if q != actual {
                            self.errors.push(IrError::QuoteMismatch {
                                path,
                                quote: q.clone(),
                                start: t.start,
                                end: t.end,
                                actual: actual.to_string(),
                            });
                        }
                    }
                }
            }
        }
    }

    fn label(&mut self, path: &str, level: &str, categories: &[String]) {
        if !self.policy.levels.iter().any(|l| l == level) {
            self.errors.push(IrError::UnknownLevel {
                path: format!("{path}.level"),
                level: level.into(),
            });
        }
        for (k, c) in categories.iter().enumerate() {
            if !self.policy.categories.contains(c) {
                self.errors.push(IrError::UnknownCategory {
                    path: format!("{path}.categories[{k}]"),
                    category: c.clone(),
                });
            }
        }
    }

    fn ceiling(&mut self, path: &str, l: &LabelSpec) {
        self.label(path, &l.level, &l.categories);
    }

    fn tools_matching(&self, glob: &str) -> Vec<ToolId> {
        tools_matching(self.policy, glob)
    }

    /// Checks argument constraints against `tools`. With `on_every`, each
    /// named parameter must be a parameter of every tool; otherwise of at
    /// least one. Values are checked against every tool that has the
    /// parameter.
    fn args(&mut self, path: &str, args: &ArgValues, tools: &[ToolId], on_every: bool) {
        for (name, values) in args {
            let ppath = format!("{path}.{name}");
            if values.is_empty() {
                self.errors.push(IrError::EmptyValues {
                    path: ppath.clone(),
                });
            }
            let with: Vec<ToolId> = tools
                .iter()
                .copied()
                .filter(|&t| self.policy.tools[t].param_index(name).is_some())
                .collect();
            let missing = tools.iter().copied().find(|t| !with.contains(t));
            match missing {
                Some(t) if on_every || with.is_empty() => {
                    self.errors.push(IrError::UnknownParam {
                        path: ppath.clone(),
                        tool: self.policy.tools[t].name.clone(),
                        param: name.clone(),
                    });
                    continue;
                }
                _ => {}
            }
            for (k, v) in values.iter().enumerate() {
                for &t in &with {
                    if let Err(got) = typed_value(self.policy, t, name, v) {
                        let tool = &self.policy.tools[t];
                        let param = tool.param_index(name).map(|i| &tool.params[i]);
                        self.errors.push(IrError::IllTypedValue {
                            path: format!("{ppath}[{k}]"),
                            tool: tool.name.clone(),
                            param: name.clone(),
                            expected: param.map_or_else(String::new, |p| {
                                if p.list {
                                    format!("{} (each element)", p.type_name())
                                } else if p.optional {
                                    format!("{}?", p.type_name())
                                } else {
                                    p.type_name()
                                }
                            }),
                            got,
                        });
                        break;
                    }
                }
            }
        }
    }
}

/// The value an argument constraint stands for, typed for parameter `name`
/// of tool `t` (an element, for a list parameter). `Err` names what was given.
pub(crate) fn typed_value(
    policy: &Policy,
    t: ToolId,
    name: &str,
    v: &serde_json::Value,
) -> Result<Value, String> {
    let tool = &policy.tools[t];
    let Some(p) = tool.param_index(name).map(|i| &tool.params[i]) else {
        return Err("no such parameter".into());
    };
    if v.is_null() {
        return if p.optional && !p.list {
            Ok(Value::Null)
        } else {
            Err("null".into())
        };
    }
    Value::from_json_typed(v, p.ty, false).map_err(|e| e.got)
}

/// The tools whose names `glob` matches.
pub(crate) fn tools_matching(policy: &Policy, glob: &str) -> Vec<ToolId> {
    (0..policy.tools.len())
        .filter(|&t| glob_matches(glob, &policy.tools[t].name))
        .collect()
}

/// The sinks whose names `glob` matches.
pub(crate) fn sinks_matching(policy: &Policy, glob: &str) -> Vec<SinkId> {
    (0..policy.sinks.len())
        .filter(|&s| glob_matches(glob, &policy.sinks[s]))
        .collect()
}

/// The tools agent `g` may call: those of its scope (every tool without one).
pub(crate) fn agent_tools(policy: &Policy, g: usize) -> Vec<ToolId> {
    let scope = policy
        .agents
        .get(g)
        .and_then(|a| a.scope)
        .and_then(|s| policy.scopes.get(s));
    (0..policy.tools.len())
        .filter(|&t| scope.is_none_or(|s| s.allows(&policy.tools[t].name)))
        .collect()
}

/// The tools that reach any of `sinks`.
pub(crate) fn tools_reaching(policy: &Policy, sinks: &[SinkId]) -> Vec<ToolId> {
    (0..policy.tools.len())
        .filter(|&t| sinks.iter().any(|&s| policy.tools[t].reaches(s)))
        .collect()
}

/// A cycle of data edges, as ids with the first repeated at the end.
fn find_cycle<'a>(flows: impl Iterator<Item = &'a crate::ir::Flow>) -> Option<Vec<String>> {
    let mut next: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for e in flows {
        next.entry(e.from.as_str())
            .or_default()
            .insert(e.to.as_str());
    }
    // Iterative depth-first search with colors: 1 on the stack, 2 done.
    let mut color: BTreeMap<&str, u8> = BTreeMap::new();
    let starts: Vec<&str> = next.keys().copied().collect();
    for start in starts {
        if color.contains_key(start) {
            continue;
        }
        let mut stack: Vec<(&str, Vec<&str>)> = vec![(start, succ(&next, start))];
        color.insert(start, 1);
        while let Some((node, rest)) = stack.last_mut() {
            let node = *node;
            match rest.pop() {
                Some(n) => match color.get(n) {
                    Some(1) => {
                        let from = stack.iter().position(|(x, _)| *x == n).unwrap_or(0);
                        let mut cycle: Vec<String> =
                            stack[from..].iter().map(|(x, _)| x.to_string()).collect();
                        cycle.push(n.to_string());
                        return Some(cycle);
                    }
                    Some(_) => {}
                    None => {
                        color.insert(n, 1);
                        stack.push((n, succ(&next, n)));
                    }
                },
                None => {
                    color.insert(node, 2);
                    stack.pop();
                }
            }
        }
    }
    None
}

fn succ<'a>(next: &BTreeMap<&'a str, BTreeSet<&'a str>>, n: &str) -> Vec<&'a str> {
    // Reversed, so that popping visits successors in order.
    next.get(n)
        .map(|s| s.iter().rev().copied().collect())
        .unwrap_or_default()
}
