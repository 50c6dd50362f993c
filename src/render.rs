//! Human-readable output of `replay` and `explain`.

use crate::replay::Record;
use crate::sessions::Sessions;
use agenra_core::graph::{NodeId, NodeKind};
use agenra_core::ledger::Ledger;
use agenra_core::policy::Quota;
use agenra_core::{Monitor, Verdict};
use std::fmt::Write;

fn verdict_cell(r: &Record) -> &'static str {
    r.decision.map_or("-", Verdict::as_str)
}

/// The column titles above `record_line`s.
pub const HEADER: &str =
    " seq  event   call   tool               answer rule                     reason";

/// One line per event, plus a path line under flow denials.
pub fn record_line(sessions: &Sessions, r: &Record) -> String {
    let call = match &r.session {
        Some(s) => format!("{s}/{}", r.call),
        None => r.call.clone(),
    };
    let mut out = format!(
        "{:>4}  {:<7} {:<6} {:<18} {:<6} {:<24} {}",
        r.seq,
        r.kind,
        call,
        r.tool.as_deref().unwrap_or(""),
        verdict_cell(r),
        r.rule.as_deref().unwrap_or("-"),
        r.reason
    );
    if let (false, Some(monitor)) = (r.path.is_empty(), sessions.get(r.session.as_deref())) {
        let _ = write!(out, "\n{:>14}path: {}", "", describe_path(monitor, &r.path));
    }
    out
}

/// `n3 c3 fs.read -> n0 context -> n5 c5 http.get`
pub fn describe_path(monitor: &Monitor, path: &[NodeId]) -> String {
    path.iter()
        .map(|n| describe_node(monitor, *n))
        .collect::<Vec<_>>()
        .join(" -> ")
}

pub fn describe_node(monitor: &Monitor, id: NodeId) -> String {
    let session = monitor.session();
    let Some(node) = session.graph.node(id) else {
        return id.to_string();
    };
    if node.kind == NodeKind::Context {
        return format!("{id} context");
    }
    let tool = monitor
        .policy()
        .tools
        .get(node.tool as usize)
        .map_or("?", |t| t.name.as_str());
    match session.call_id_of(id) {
        Some(call) => format!("{id} {call} {tool}"),
        None => format!("{id} {tool}"),
    }
}

pub fn summary(records: &[Record]) -> String {
    let count = |v| records.iter().filter(|r| r.decision == Some(v)).count();
    let last = records.last().map_or("-", |r| r.ledger_hash.as_str());
    format!(
        "{} events: {} ALLOW, {} DENY, {} PAUSE; ledger {}",
        records.len(),
        count(Verdict::Allow),
        count(Verdict::Deny),
        count(Verdict::Pause),
        last
    )
}

fn quota(q: Quota) -> String {
    match q {
        Quota::Unlimited => "unlimited".into(),
        Quota::Limited(n) => n.to_string(),
    }
}

/// The `explain` report for one event.
pub fn explanation(
    monitor: &Monitor,
    r: &Record,
    line: usize,
    before: &Ledger,
    before_hash: &str,
) -> String {
    let policy = monitor.policy();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "event {} (trace line {line}): {} {}{}",
        r.seq,
        r.kind,
        r.call,
        r.tool
            .as_deref()
            .map(|t| format!(" {t}"))
            .unwrap_or_default()
    );
    let _ = writeln!(out, "decision: {}", verdict_cell(r));
    let _ = writeln!(out, "rule:     {}", r.rule.as_deref().unwrap_or("-"));
    let _ = writeln!(out, "reason:   {}", r.reason);
    if let Some(node) = monitor.session().graph.node(r.node) {
        let _ = writeln!(
            out,
            "node:     {} ({:?}, {:?})",
            describe_node(monitor, r.node),
            node.kind,
            node.status
        );
        if node.kind != NodeKind::Context {
            let _ = writeln!(out, "output label: {}", policy.show_label(&node.label));
        }
    }
    if !r.path.is_empty() {
        let _ = writeln!(out, "path (source to sink):");
        for n in &r.path {
            let label = monitor
                .session()
                .graph
                .node(*n)
                .map(|x| policy.show_label(&x.label))
                .unwrap_or_default();
            let _ = writeln!(out, "  {:<28} {}", describe_node(monitor, *n), label);
        }
    }
    let after = &monitor.session().ledger;
    let _ = writeln!(out, "ledger (grant: before -> after):");
    for (g, grant) in policy.grants.iter().enumerate() {
        let (b, a) = (before.remaining[g], after.remaining[g]);
        let mark = if a != b { "  *" } else { "" };
        let agent = policy
            .agents
            .get(grant.agent)
            .map_or("?", |a| a.name.as_str());
        let _ = writeln!(
            out,
            "  {:<20} {:<8} {} -> {}{mark}",
            grant.name,
            agent,
            quota(b),
            quota(a)
        );
    }
    let _ = writeln!(out, "policy hash: {}", r.policy_hash);
    let _ = writeln!(out, "ledger hash: {before_hash} -> {}", r.ledger_hash);
    out
}
