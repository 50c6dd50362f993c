//! `agenra authorize` and `agenra graph` (docs/smt.md).
//!
//! * `authorize --policy FILE TRACE [--engine smt|native|both] [--json]`
//!   applies every event of the trace but the last, then decides the last
//!   one (a call, or an approval: the paused call re-checked) and prints
//!   the decision with the granted capabilities or the counterexample.
//! * `graph --policy FILE [--ir IR] TRACE [--seq N] --format dot|json` draws the
//!   session graph the SMT authorizer builds, up to event N (default: the
//!   last), with the violating path of a denied call highlighted.

use crate::engine::{Engine, EngineDecision, EngineError, EngineOutput, EngineSession};
use crate::trace::{load_trace, TraceEvent};
use agenra_core::label::Label;
use agenra_core::{Event, Policy, Verdict};
use agenra_smt::authorizer::render_label;
use agenra_smt::graph::{EdgeTrust, NodeKind};
use agenra_smt::{SmtDecision, SmtSession};
use std::collections::BTreeSet;
use std::path::Path;

/// Reads a policy: `.agr` source (compiled; errors rendered), or a compiled
/// policy (`.json`, `.cbor`), validated.
pub fn load_policy(path: &Path) -> Result<Policy, String> {
    let ext = path.extension().and_then(|e| e.to_str());
    if matches!(ext, Some("json") | Some("cbor")) {
        let decoded = if ext == Some("cbor") {
            let bytes =
                std::fs::read(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
            agenra_core::hash::from_cbor::<Policy>(&bytes)
        } else {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
            agenra_core::hash::from_json::<Policy>(&text)
        };
        let policy =
            decoded.map_err(|e| format!("{}: not a compiled policy: {e}", path.display()))?;
        agenra_core::validate::validate(&policy)
            .map_err(|e| format!("{}: invalid compiled policy: {e}", path.display()))?;
        return Ok(policy);
    }
    let source = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let name = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("policy");
    agenra_policy::compile(&source, name)
        .map(|c| c.policy)
        .map_err(|e| e.render(&path.display().to_string(), &source))
}

fn events(trace: &Path) -> Result<Vec<Event>, String> {
    Ok(load_trace(trace)
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|t| t.event)
        .collect())
}

/// `agenra authorize`: the text (or JSON line) to print.
///
/// With `ir`, a Permission IR (docs/permission-ir.md) is validated against
/// the policy and lowered: the session runs under the lowered policy, with
/// the IR's task event before the trace's events.
pub fn run_authorize(
    policy: &Path,
    ir: Option<&Path>,
    trace: &Path,
    engine: Engine,
    json: bool,
) -> Result<String, String> {
    let mut policy = load_policy(policy)?;
    let events = load_trace(trace).map_err(|e| e.to_string())?;
    // The IR's task event runs first; it is not one of the trace's events.
    let mut task = None;
    let mut checks = None;
    if let Some(ir) = ir {
        let text = std::fs::read_to_string(ir)
            .map_err(|e| format!("{}: cannot read: {e}", ir.display()))?;
        let lowered = agenra_permission_ir::load(&text, &policy)
            .map_err(|e| format!("{}: {e}", ir.display()))?;
        task = Some((ir, lowered.task_event()));
        policy = lowered.policy.clone();
        checks = Some(lowered);
    }
    let Some((last, prefix)) = events.split_last() else {
        return Err(format!("{}: the trace has no events", trace.display()));
    };
    if !matches!(last.event, Event::Call(_) | Event::Approve(_)) {
        return Err(format!(
            "{}: the last event must be a call (or an approval) to authorize",
            trace.display()
        ));
    }
    let mut session = EngineSession::new(&policy, engine).map_err(|e| e.to_string())?;
    if let Some((ir, e)) = &task {
        session
            .step(e)
            .map_err(|err| format!("{}: the task event: {err}", ir.display()))?;
    }
    // Errors name the trace's own line numbers.
    let at = |t: &TraceEvent, err: EngineError| format!("{}:{}: {err}", trace.display(), t.line);
    for t in prefix {
        session.step(&t.event).map_err(|err| at(t, err))?;
    }
    let decision = match session.step(&last.event).map_err(|err| at(last, err))? {
        EngineOutput::Decision(d) => d,
        EngineOutput::Applied => return Err("the last event was not decided".into()),
    };
    if let Some(why) = &decision.disagreement {
        eprintln!("agenra: engines disagree: {why}");
    }
    // A DENY by a rule the task added: the IR parts it comes from, with
    // their evidence (the task text's spans, the trace's events).
    let from_task: Vec<&agenra_permission_ir::Check> = match &checks {
        Some(l) if decision.verdict == Verdict::Deny => l.checks_for(&decision.rule),
        _ => vec![],
    };
    if json {
        let mut v = serde_json::to_value(&decision).map_err(|e| e.to_string())?;
        if !from_task.is_empty() {
            v["task"] = serde_json::to_value(&from_task).map_err(|e| e.to_string())?;
        }
        return Ok(v.to_string() + "\n");
    }
    let mut out = render_decision(&policy, &decision);
    if let Some(l) = &checks {
        for c in &from_task {
            let spans: Vec<String> = c.evidence.iter().map(|s| l.show_span(s)).collect();
            out += &format!(
                "  task: {} ({}): {}{}\n",
                c.id,
                serde_json::to_value(c.kind)
                    .ok()
                    .and_then(|k| k.as_str().map(str::to_string))
                    .unwrap_or_default(),
                c.description,
                if spans.is_empty() {
                    String::new()
                } else {
                    format!("; evidence: {}", spans.join(", "))
                }
            );
        }
    }
    Ok(out)
}

/// A decision for people.
pub fn render_decision(policy: &Policy, d: &EngineDecision) -> String {
    let mut out = format!(
        "{} {} (engine {})\n",
        d.verdict.as_str(),
        d.rule,
        match d.engine {
            Engine::Native => "native",
            Engine::Smt => "smt",
            Engine::Both => "both",
        }
    );
    if let Some(why) = &d.disagreement {
        out += &format!("  engines disagree: {why}\n");
    }
    if d.verdict != Verdict::Deny {
        out += &format!("  granted: {}\n", d.granted.join(", "));
    }
    if let Some(n) = &d.native {
        if d.verdict == Verdict::Deny || d.engine == Engine::Native {
            out += &format!("  native: {}\n", n.reason);
        }
    }
    if let Some(s) = &d.smt {
        out += &render_smt(s);
    }
    let _ = policy;
    out
}

fn render_smt(s: &SmtDecision) -> String {
    let mut out = String::new();
    if let Some(cx) = &s.counterexample {
        out += &format!(
            "  counterexample: call {}{}{}\n",
            cx.node,
            cx.sink.as_ref().map_or(String::new(), |s| format!(", {s}")),
            cx.label
                .as_ref()
                .map_or(String::new(), |l| format!(", label {l}"))
        );
        for p in &cx.paths {
            let steps: Vec<String> = p
                .path
                .iter()
                .map(|st| format!("{} [{}]", st.node, st.evidence))
                .collect();
            out += &format!("    {}: {}\n", p.label, steps.join(" -> "));
        }
        if !cx.history.is_empty() {
            out += &format!("    history: {}\n", cx.history.join(" -> "));
        }
    }
    if !s.inferred.is_empty() {
        out += &format!(
            "  inferred lineage (audit only, not used): {}\n",
            s.inferred.join(", ")
        );
    }
    out
}

/// The policy, narrowed by the Permission IR `ir` if given, and the IR's
/// task event (to apply before the trace).
fn policy_and_task(policy: &Path, ir: Option<&Path>) -> Result<(Policy, Option<Event>), String> {
    let policy = load_policy(policy)?;
    let Some(ir) = ir else {
        return Ok((policy, None));
    };
    let text =
        std::fs::read_to_string(ir).map_err(|e| format!("{}: cannot read: {e}", ir.display()))?;
    let lowered =
        agenra_permission_ir::load(&text, &policy).map_err(|e| format!("{}: {e}", ir.display()))?;
    let task = lowered.task_event();
    Ok((lowered.policy, Some(task)))
}

/// `agenra graph`: DOT or JSON. With `ir`, the graph under policy ∧ task
/// (as `authorize --ir`): the IR's task event is applied first (it is not
/// one of the trace's events, which `seq` counts) and the lowered policy
/// decides.
pub fn run_graph(
    policy: &Path,
    ir: Option<&Path>,
    trace: &Path,
    seq: Option<usize>,
    dot: bool,
) -> Result<String, String> {
    let (policy, task) = policy_and_task(policy, ir)?;
    let events = events(trace)?;
    let upto = seq.unwrap_or(events.len());
    if upto == 0 || upto > events.len() {
        return Err(format!(
            "--seq {upto}: the trace has {} events",
            events.len()
        ));
    }
    let mut s = SmtSession::new(&policy).map_err(|e| e.to_string())?;
    if let (Some(e), Some(ir)) = (&task, ir) {
        s.apply(e)
            .map_err(|err| format!("{}: the task event: {err}", ir.display()))?;
    }
    for (i, e) in events[..upto - 1].iter().enumerate() {
        s.apply(e)
            .map_err(|err| format!("{}: event {}: {err}", trace.display(), i + 1))?;
    }
    let last = &events[upto - 1];
    let decision = match last {
        Event::Call(c) => Some(s.decide(c).map_err(|e| e.to_string())?),
        Event::Approve(a) => Some(s.decide_approval(a).map_err(|e| e.to_string())?),
        _ => None,
    };
    s.apply(last)
        .map_err(|err| format!("{}: event {upto}: {err}", trace.display()))?;
    let labels = s.labels().map_err(|e| e.to_string())?;
    let path = violating(decision.as_ref());
    if dot {
        Ok(to_dot(&policy, &s, &labels, &path, decision.as_ref()))
    } else {
        Ok(to_json(&policy, &s, &labels, &path, decision.as_ref()) + "\n")
    }
}

/// Pairs of consecutive node names on the counterexample's paths.
fn violating(d: Option<&SmtDecision>) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    if let Some(cx) = d.and_then(|d| d.counterexample.as_ref()) {
        for p in &cx.paths {
            for w in p.path.windows(2) {
                out.insert((w[0].node.clone(), w[1].node.clone()));
            }
            if let [one] = p.path.as_slice() {
                out.insert((one.node.clone(), one.node.clone()));
            }
        }
    }
    out
}

/// Hops of the counterexample's paths that are no edge of the graph: the
/// last hop of an approval's path, into the paused call as it was
/// re-checked at approval time (the context version it read then is a node
/// of the graph; the re-check's own node is not kept). As node indexes.
fn approval_hops(s: &SmtSession, path: &BTreeSet<(String, String)>) -> Vec<(usize, usize)> {
    let g = s.graph();
    let index = |name: &str| g.nodes.iter().rposition(|n| n.name == name);
    path.iter()
        .filter(|(a, b)| a != b)
        .filter_map(|(a, b)| Some((index(a)?, index(b)?)))
        .filter(|&(a, b)| !g.edges.iter().any(|e| e.from == a && e.to == b))
        .collect()
}

fn on_path(path: &BTreeSet<(String, String)>, name: &str) -> bool {
    path.iter().any(|(a, b)| a == name || b == name)
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn to_dot(
    policy: &Policy,
    s: &SmtSession,
    labels: &[Option<Label>],
    path: &BTreeSet<(String, String)>,
    d: Option<&SmtDecision>,
) -> String {
    let g = s.graph();
    let mut out =
        String::from("digraph session {\n  rankdir=LR;\n  node [fontname=\"monospace\"];\n");
    if let Some(d) = d {
        out += &format!(
            "  label=\"{} {}\";\n",
            d.verdict.as_str(),
            dot_escape(&d.rule_name)
        );
    }
    for (i, n) in g.nodes.iter().enumerate() {
        let shape = match n.kind {
            NodeKind::Context => "ellipse",
            NodeKind::Task => "note",
            NodeKind::Call => "box",
        };
        let tool = n.tool.map_or(String::new(), |t| {
            format!("\\n{}", dot_escape(&policy.tools[t].name))
        });
        let label = labels.get(i).cloned().flatten().map_or(String::new(), |l| {
            format!("\\n{}", dot_escape(&render_label(policy, &l)))
        });
        let status = if n.status.is_empty() || n.kind == NodeKind::Context {
            String::new()
        } else {
            format!("\\n{}", n.status)
        };
        let hot = if on_path(path, &n.name) {
            ", color=red, penwidth=2"
        } else {
            ""
        };
        out += &format!(
            "  n{i} [shape={shape}, label=\"{}{tool}{label}{status}\"{hot}];\n",
            dot_escape(&n.name)
        );
    }
    for e in &g.edges {
        let (style, note) = match e.trust {
            EdgeTrust::Observed => ("solid", ""),
            EdgeTrust::Value => ("solid", ", color=darkgreen"),
            EdgeTrust::Policy => ("dashed", ""),
            EdgeTrust::Inferred => ("dotted", ", color=gray, fontcolor=gray"),
        };
        let param = e
            .param
            .zip(g.nodes[e.to].tool)
            .and_then(|(p, t)| policy.tools[t].params.get(p))
            .map_or(String::new(), |p| {
                format!(", label=\"{}\"", dot_escape(&p.name))
            });
        let hot = if path.contains(&(g.nodes[e.from].name.clone(), g.nodes[e.to].name.clone())) {
            ", color=red, penwidth=2"
        } else {
            ""
        };
        out += &format!(
            "  n{} -> n{} [style={style}{param}{note}{hot}];\n",
            e.from, e.to
        );
    }
    for (from, to) in approval_hops(s, path) {
        out += &format!(
            "  n{from} -> n{to} [style=dashed, label=\"re-checked at approval\", color=red, penwidth=2];\n"
        );
    }
    out += "}\n";
    out
}

fn to_json(
    policy: &Policy,
    s: &SmtSession,
    labels: &[Option<Label>],
    path: &BTreeSet<(String, String)>,
    d: Option<&SmtDecision>,
) -> String {
    let g = s.graph();
    let nodes: Vec<serde_json::Value> = g
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            serde_json::json!({
                "id": i,
                "name": n.name,
                "kind": n.kind,
                "tool": n.tool.map(|t| policy.tools[t].name.clone()),
                "status": n.status,
                "label": labels.get(i).cloned().flatten().map(|l| render_label(policy, &l)),
                "violating": on_path(path, &n.name),
            })
        })
        .collect();
    let mut edges: Vec<serde_json::Value> = g
        .edges
        .iter()
        .map(|e| {
            serde_json::json!({
                "from": e.from,
                "to": e.to,
                "param": e.param.zip(g.nodes[e.to].tool)
                    .and_then(|(p, t)| policy.tools[t].params.get(p))
                    .map(|p| p.name.clone()),
                "trust": e.trust,
                "violating": path.contains(&(g.nodes[e.from].name.clone(), g.nodes[e.to].name.clone())),
            })
        })
        .collect();
    // An approval's last hop: into the call as re-checked at approval time.
    for (from, to) in approval_hops(s, path) {
        edges.push(serde_json::json!({
            "from": from,
            "to": to,
            "param": null,
            "trust": "approval",
            "violating": true,
        }));
    }
    serde_json::json!({"nodes": nodes, "edges": edges, "decision": d}).to_string()
}
