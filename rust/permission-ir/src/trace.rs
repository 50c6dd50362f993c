//! The deterministic producer: an IR from a trace's observed calls, their
//! arguments and their ancestry (observed lineage).

use crate::ir::{
    Action, Allowance, ArgValues, Asset, Flow, Intent, LabelSpec, PermissionIr, ResourcePattern,
    SinkRef, Source, Span, TextSpan, IR_VERSION,
};
use crate::validate::{tools_reaching, typed_value};
use agenra_core::policy::Policy;
use agenra_core::Event;
use std::collections::{BTreeMap, BTreeSet};

/// The IR of what a trace did: one action per call of a declared tool
/// (its resource as an exact asset, its scalar arguments as the only values
/// allowed), one sink per sink those calls reach, data edges from the
/// resources and from the observed lineage, and for each sink an allowance
/// scoped to the values its calls passed. Every part cites the events it
/// comes from. The first `task` event gives the text and the intent.
///
/// The result always passes [`validate`](crate::validate) against the same
/// policy (a property test checks it). Use it on a trace you trust: it
/// describes what happened, attacks included.
pub fn from_trace(events: &[Event], policy: &Policy) -> PermissionIr {
    let mut ir = PermissionIr {
        version: IR_VERSION,
        source: Source {
            task_id: String::new(),
            text: String::new(),
            events: events.len() as u64,
        },
        intent: None,
        assets: vec![],
        actions: vec![],
        obligations: vec![],
        allowances: vec![],
        forbidden: vec![],
        sinks: vec![],
        flows: vec![],
    };
    // Ids the trace uses: the lowered task must not reuse one.
    let mut used: BTreeSet<String> = BTreeSet::new();
    let mut task_seen = false;
    // (session, call id) -> action index.
    let mut action_of: BTreeMap<(Option<&str>, &str), usize> = BTreeMap::new();
    let mut asset_of: BTreeMap<&str, usize> = BTreeMap::new();
    let mut ids: BTreeSet<String> = BTreeSet::new();
    // Per sink: the events that reached it; per sink and parameter, the values.
    let mut sink_events: BTreeMap<usize, Vec<Span>> = BTreeMap::new();
    // Per calling agent: the events of its calls.
    let mut agent_events: BTreeMap<usize, Vec<Span>> = BTreeMap::new();
    let mut flows: Vec<Flow> = Vec::new();
    let mut flow_keys: BTreeSet<(String, String)> = BTreeSet::new();
    for (i, event) in events.iter().enumerate() {
        let seq = Span::Event(i as u64 + 1);
        let call = match event {
            Event::Task(t) => {
                used.insert(t.id.clone());
                if !task_seen {
                    task_seen = true;
                    ir.source.text = t.text.clone();
                    let mut evidence = vec![seq.clone()];
                    if !t.text.is_empty() {
                        evidence.push(Span::Text(TextSpan {
                            start: 0,
                            end: t.text.len(),
                            quote: None,
                        }));
                    }
                    ir.intent = Some(Intent {
                        summary: summary(&t.text),
                        evidence,
                    });
                }
                continue;
            }
            Event::Call(c) => c,
            _ => continue,
        };
        used.insert(call.id.clone());
        let Some(t) = policy.tool_id(&call.tool) else {
            continue;
        };
        if !well_formed(call, &policy.tools[t]) {
            continue; // the monitor denies it before anything else
        }
        let session = call.session.as_deref();
        if action_of.contains_key(&(session, call.id.as_str())) {
            continue; // a reused id: the monitor refuses the event
        }
        let id = fresh(
            &mut ids,
            &match session {
                Some(s) => format!("call:{s}:{}", call.id),
                None => format!("call:{}", call.id),
            },
        );
        let tool = &policy.tools[t];
        let mut action = Action {
            id: id.clone(),
            tool: tool.name.clone(),
            assets: vec![],
            args: ArgValues::new(),
            evidence: vec![seq.clone()],
        };
        for (p, param) in tool.params.iter().enumerate() {
            let Some(v) = call.args.get(&param.name) else {
                continue;
            };
            if Some(p) == tool.resource {
                let Some(r) = v.as_str() else { continue };
                let a = match asset_of.get(r) {
                    Some(&a) => {
                        if !ir.assets[a].evidence.contains(&seq) {
                            ir.assets[a].evidence.push(seq.clone());
                        }
                        a
                    }
                    None => {
                        let asset_id = fresh(&mut ids, &format!("asset:{}", ir.assets.len() + 1));
                        ir.assets.push(Asset {
                            id: asset_id,
                            resource: Some(ResourcePattern::Exact(r.to_string())),
                            label: None,
                            evidence: vec![seq.clone()],
                        });
                        asset_of.insert(r, ir.assets.len() - 1);
                        ir.assets.len() - 1
                    }
                };
                let asset_id = ir.assets[a].id.clone();
                action.assets.push(asset_id.clone());
                add_flow(&mut flows, &mut flow_keys, &asset_id, &id, &seq);
                continue;
            }
            // Scalars of the declared type only; lists and ill-typed values
            // stay unconstrained.
            if param.list || typed_value(policy, t, &param.name, v).is_err() {
                continue;
            }
            action.args.insert(param.name.clone(), vec![v.clone()]);
        }
        for sink in &tool.sinks {
            sink_events.entry(sink.sink).or_default().push(seq.clone());
        }
        let agent = match &call.agent {
            None => Some(0),
            Some(a) => policy.agents.iter().position(|x| &x.name == a),
        };
        if let Some(g) = agent {
            agent_events.entry(g).or_default().push(seq.clone());
        }
        // Ancestry: observed lineage names earlier calls of the session.
        for sources in call.lineage.values() {
            for src in sources {
                if let Some(&a) = action_of.get(&(session, src.as_str())) {
                    let from = ir.actions[a].id.clone();
                    add_flow(&mut flows, &mut flow_keys, &from, &id, &seq);
                }
            }
        }
        action_of.insert((session, call.id.as_str()), ir.actions.len());
        ir.actions.push(action);
    }
    // Sinks, flows into them, and the allowance scoped to what was sent.
    for (&s, evidence) in &sink_events {
        let name = &policy.sinks[s];
        let sink_id = fresh(&mut ids, &format!("sink:{name}"));
        ir.sinks.push(SinkRef {
            id: sink_id.clone(),
            pattern: name.clone(),
            evidence: evidence.clone(),
        });
        let tools = tools_reaching(policy, &[s]);
        let mut args: BTreeMap<String, Vec<serde_json::Value>> = BTreeMap::new();
        // Only parameters every tool reaching the sink has can scope it.
        let common: Vec<&str> = policy.tools[tools[0]]
            .params
            .iter()
            .map(|p| p.name.as_str())
            .filter(|n| {
                tools
                    .iter()
                    .all(|&t| policy.tools[t].param_index(n).is_some())
            })
            .collect();
        let mut constrained: BTreeSet<&str> = common.iter().copied().collect();
        for a in &ir.actions {
            let Some(t) = policy.tool_id(&a.tool) else {
                continue;
            };
            if !policy.tools[t].reaches(s) {
                continue;
            }
            add_flow(&mut flows, &mut flow_keys, &a.id, &sink_id, &a.evidence[0]);
            let tool = &policy.tools[t];
            for &p in &common {
                let i = tool.param_index(p);
                let value = if i == tool.resource {
                    a.assets
                        .first()
                        .and_then(|id| ir.assets.iter().find(|x| &x.id == id))
                        .and_then(|x| match &x.resource {
                            Some(ResourcePattern::Exact(r)) => Some(serde_json::json!(r)),
                            _ => None,
                        })
                } else {
                    a.args.get(p).and_then(|v| v.first().cloned())
                };
                // A call whose value is unknown (a list, ill-typed) leaves
                // the parameter unconstrained.
                let ok = value
                    .as_ref()
                    .is_some_and(|v| tools.iter().all(|&t| typed_value(policy, t, p, v).is_ok()));
                match value {
                    Some(v) if ok => {
                        let list = args.entry(p.to_string()).or_default();
                        if !list.contains(&v) {
                            list.push(v);
                        }
                    }
                    _ => {
                        constrained.remove(p);
                    }
                }
            }
        }
        args.retain(|k, _| constrained.contains(k.as_str()));
        let allowance_id = fresh(&mut ids, &format!("allow:{name}"));
        ir.allowances.push(Allowance {
            id: allowance_id,
            sink: Some(sink_id),
            agent: None,
            up_to: top(policy),
            args,
            evidence: evidence.clone(),
        });
    }
    // What the calling agents receive: the policy's declassifications into
    // them (`allow flow ... -> agent A`) apply as they are, for the agents
    // that made calls (none is added for an agent without such a rule).
    for (&g, evidence) in &agent_events {
        let declassified = policy
            .receive_rules
            .iter()
            .any(|r| r.agent == g && matches!(r.effect, agenra_core::policy::FlowEffect::Allow(_)));
        if !declassified {
            continue;
        }
        let name = &policy.agents[g].name;
        let allowance_id = fresh(&mut ids, &format!("allow:agent:{name}"));
        ir.allowances.push(Allowance {
            id: allowance_id,
            sink: None,
            agent: Some(name.clone()),
            up_to: top(policy),
            args: ArgValues::new(),
            evidence: evidence.clone(),
        });
    }
    ir.flows = flows;
    ir.source.task_id = fresh_task_id(&used);
    ir
}

/// Whether the monitor would find the call well-formed as far as its
/// arguments go: known parameters, required ones present, declared types.
fn well_formed(call: &agenra_core::Call, tool: &agenra_core::policy::Tool) -> bool {
    call.args.keys().all(|k| tool.param_index(k).is_some())
        && tool.params.iter().all(|p| match call.args.get(&p.name) {
            None | Some(serde_json::Value::Null) => p.optional,
            Some(v) => agenra_core::Value::from_json_typed(v, p.ty, p.list).is_ok(),
        })
}

/// The label above every other: a trace does not show what flowed, so the
/// allowance is scoped by its arguments, and the policy's own ceilings apply.
fn top(policy: &Policy) -> LabelSpec {
    LabelSpec {
        level: policy.levels.last().cloned().unwrap_or_default(),
        categories: policy.categories.clone(),
        trusted: false,
    }
}

fn add_flow(
    flows: &mut Vec<Flow>,
    keys: &mut BTreeSet<(String, String)>,
    from: &str,
    to: &str,
    seq: &Span,
) {
    if keys.insert((from.to_string(), to.to_string())) {
        flows.push(Flow {
            from: from.to_string(),
            to: to.to_string(),
            evidence: vec![seq.clone()],
        });
    }
}

/// `base`, or `base#2`, `base#3`, ... : the first not yet in `ids`.
fn fresh(ids: &mut BTreeSet<String>, base: &str) -> String {
    let mut id = base.to_string();
    let mut n = 1;
    while ids.contains(&id) || id.is_empty() {
        n += 1;
        id = format!("{base}#{n}");
    }
    ids.insert(id.clone());
    id
}

fn fresh_task_id(used: &BTreeSet<String>) -> String {
    let mut id = "ir-task".to_string();
    let mut n = 1;
    while used.contains(&id) {
        n += 1;
        id = format!("ir-task-{n}");
    }
    id
}

fn summary(text: &str) -> String {
    const MAX: usize = 120;
    let line = text.lines().next().unwrap_or_default().trim();
    if line.chars().count() <= MAX {
        if line.is_empty() {
            "the trace's task".into()
        } else {
            line.to_string()
        }
    } else {
        let cut: String = line.chars().take(MAX).collect();
        format!("{cut}…")
    }
}
