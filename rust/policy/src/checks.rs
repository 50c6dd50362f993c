//! Checks on the lowered policy as a whole: agent cycles, attenuation of
//! delegates' grants, and the warnings that need every rule at once.

use crate::compile::SourceMap;
use crate::names::Diags;
use agenra_core::policy::{FlowEffect, Grant, Quota};
use agenra_core::Policy;

/// Rejects delegation cycles, once per cycle (at its first agent).
pub fn agent_cycles(policy: &Policy, map: &SourceMap, d: &mut Diags) {
    for start in 0..policy.agents.len() {
        let mut chain = vec![start];
        let mut cur = start;
        while let Some(parent) = policy.agents.get(cur).and_then(|a| a.parent) {
            if chain.contains(&parent) {
                if parent == start && chain.iter().min() == Some(&start) {
                    let names: Vec<&str> = chain
                        .iter()
                        .chain(std::iter::once(&start))
                        .filter_map(|a| policy.agents.get(*a).map(|a| a.name.as_str()))
                        .collect();
                    let span = map.agents.get(start).copied().flatten().unwrap_or_default();
                    d.error(span, format!("agent cycle: {}", names.join(" -> ")));
                }
                break;
            }
            chain.push(parent);
            cur = parent;
        }
    }
}

/// Why `parent_grant` does not cover `grant`, if it does not.
fn not_covered_because(grant: &Grant, parent_grant: &Grant) -> Option<String> {
    let resource_ok = match (&grant.resource, &parent_grant.resource) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some(mine), Some(theirs)) => mine.is_subset_of(theirs),
    };
    if !resource_ok {
        return Some("its resource pattern is not covered".into());
    }
    if !parent_grant.args.iter().all(|a| grant.args.contains(a)) {
        return Some("it lacks some of the argument tests".into());
    }
    let quota_ok = match (grant.quota, parent_grant.quota) {
        (_, Quota::Unlimited) => true,
        (Quota::Limited(mine), Quota::Limited(theirs)) => mine <= theirs,
        (Quota::Unlimited, Quota::Limited(_)) => false,
    };
    if !quota_ok {
        return Some("its quota is larger".into());
    }
    if parent_grant.approval && !grant.approval {
        return Some("it does not require approval".into());
    }
    if let Some(theirs) = parent_grant.expires_at {
        if grant.expires_at.is_none_or(|mine| mine > theirs) {
            return Some("it expires later".into());
        }
    }
    if grant.discovers.is_some() && grant.discovers != parent_grant.discovers {
        return Some("it discovers into a different set".into());
    }
    None
}

/// Each grant of a delegate must be covered by a grant of its delegator
/// for the same tool (see the language reference, "Agents").
pub fn attenuation(policy: &Policy, map: &SourceMap, d: &mut Diags) {
    for (gi, grant) in policy.grants.iter().enumerate() {
        let Some(agent) = policy.agents.get(grant.agent) else {
            continue;
        };
        let Some(parent_id) = agent.parent else {
            continue;
        };
        let Some(parent) = policy.agents.get(parent_id) else {
            continue;
        };
        let tool = policy
            .tools
            .get(grant.tool)
            .map_or("?", |t| t.name.as_str());
        let candidates: Vec<&Grant> = policy
            .grants
            .iter()
            .filter(|h| h.agent == parent_id && h.tool == grant.tool)
            .collect();
        let reason = if candidates.is_empty() {
            Some(format!(
                "agent `{}` has no grant for tool `{tool}`",
                parent.name
            ))
        } else if candidates
            .iter()
            .any(|h| not_covered_because(grant, h).is_none())
        {
            None
        } else {
            candidates.first().and_then(|h| {
                not_covered_because(grant, h).map(|why| {
                    format!(
                        "compared with grant `{}` of agent `{}`, {why}",
                        h.name, parent.name
                    )
                })
            })
        };
        if let Some(reason) = reason {
            let span = map.grants.get(gi).copied().unwrap_or_default();
            d.error(
                span,
                format!(
                    "grant `{}` of agent `{}` is not an attenuation of its delegator's grants: {reason}",
                    grant.name, agent.name
                ),
            );
        }
    }
}

/// `earlier` matches every call `later` matches and is never used up, so
/// `later` is never consumed.
fn shadows(earlier: &Grant, later: &Grant) -> bool {
    earlier.agent == later.agent
        && earlier.tool == later.tool
        && earlier.quota == Quota::Unlimited
        && !earlier.approval
        && earlier.expires_at.is_none()
        && match (&later.resource, &earlier.resource) {
            (_, None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(e)) => l.is_subset_of(e),
        }
        && earlier.args.iter().all(|a| later.args.contains(a))
}

pub fn warnings(policy: &Policy, map: &SourceMap, d: &mut Diags) {
    for (gi, grant) in policy.grants.iter().enumerate() {
        let (Some(set), Some(tool)) = (grant.discovers, policy.tools.get(grant.tool)) else {
            continue;
        };
        if !tool.output.trusted {
            let span = map.grants.get(gi).copied().unwrap_or_default();
            d.warn(
                span,
                format!(
                    "grant `{}` adds what `{}` discovers to set `{}`, but that tool's output is untrusted: whoever controls it can widen every grant that tests `in {}`",
                    grant.name,
                    tool.name,
                    policy.sets.get(set).map_or("?", String::as_str),
                    policy.sets.get(set).map_or("?", String::as_str)
                ),
            );
        }
    }
    for (li, later) in policy.grants.iter().enumerate() {
        if let Some(earlier) = policy.grants.iter().take(li).find(|e| shadows(e, later)) {
            let span = map.grants.get(li).copied().unwrap_or_default();
            d.warn(
                span,
                format!(
                    "grant `{}` is never used: the earlier grant `{}` is unlimited, needs no approval, never expires and covers it",
                    later.name, earlier.name
                ),
            );
        }
    }
    for (ri, rule) in policy.flow_rules.iter().enumerate() {
        let span = map.flow_sinks.get(ri).copied().unwrap_or_default();
        let sink = policy.sinks.get(rule.sink).map_or("?", String::as_str);
        if !policy.tools.iter().any(|t| t.reaches(rule.sink)) {
            d.warn(
                span,
                format!("flow rule `{}`: no tool reaches sink `{sink}`", rule.name),
            );
        }
        let has_deny = policy.flow_rules.iter().any(|r| {
            r.sink == rule.sink && matches!(r.effect, FlowEffect::Deny(_) | FlowEffect::Pause(_))
        });
        if matches!(rule.effect, FlowEffect::Allow(_)) && !has_deny {
            d.warn(
                span,
                format!(
                    "allow rule `{}` has no effect: sink `{sink}` has no deny rule",
                    rule.name
                ),
            );
        }
    }
    for (si, set) in policy.sets.iter().enumerate() {
        if !policy.grants.iter().any(|g| g.discovers == Some(si))
            && !policy.task_seeds.contains(&si)
        {
            let span = map.sets.get(si).copied().unwrap_or_default();
            d.warn(
                span,
                format!(
                    "no grant discovers into set `{set}` and no task seeds it, so it stays empty"
                ),
            );
        }
    }
}
