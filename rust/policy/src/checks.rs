//! Checks on the lowered policy as a whole: agent cycles, attenuation of
//! delegates' grants, and the warnings that need every rule at once.

use crate::names::Diags;
use crate::source_map::SourceMap;
use agenra_core::policy::{FlowEffect, Grant, Quota};
use agenra_core::Policy;
use std::collections::{HashMap, HashSet};

/// Rejects delegation cycles, once per cycle (at its first agent).
pub fn agent_cycles(policy: &Policy, map: &SourceMap, d: &mut Diags) {
    // Each agent is settled once (0 unknown, 1 on the walk being followed,
    // 2 settled), so a long delegation chain checks in linear time.
    let n = policy.agents.len();
    let mut state = vec![0u8; n];
    for start in 0..n {
        let mut walk = Vec::new();
        let mut cur = start;
        let mut closed_at = None;
        loop {
            match state[cur] {
                2 => break,
                1 => {
                    closed_at = Some(cur);
                    break;
                }
                _ => {}
            }
            state[cur] = 1;
            walk.push(cur);
            match policy.agents[cur].parent.filter(|&p| p < n) {
                Some(parent) => cur = parent,
                None => break,
            }
        }
        if let Some(cur) = closed_at {
            if let Some(at) = walk.iter().position(|&w| w == cur) {
                // The cycle, named from its first agent, as the delegation
                // goes: `a -> b -> a`.
                let cycle = &walk[at..];
                let first = (0..cycle.len()).min_by_key(|&k| cycle[k]).unwrap_or(0);
                let names: Vec<&str> = cycle[first..]
                    .iter()
                    .chain(&cycle[..first])
                    .chain(std::iter::once(&cycle[first]))
                    .filter_map(|a| policy.agents.get(*a).map(|a| a.name.as_str()))
                    .collect();
                let span = map
                    .agents
                    .get(cycle[first])
                    .copied()
                    .flatten()
                    .unwrap_or_default();
                d.error(span, format!("agent cycle: {}", names.join(" -> ")));
            }
        }
        for w in walk {
            state[w] = 2;
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
    let by_owner = grants_by_owner(policy);
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
        let candidates: Vec<&Grant> = by_owner
            .get(&(parent_id, grant.tool))
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .filter_map(|&h| policy.grants.get(h))
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

/// `wide` matches every call `narrow` matches, whenever `narrow` matches it
/// (its resource pattern covers `narrow`'s as far as
/// `Pattern::is_subset_of` can show, its argument tests all appear in
/// `narrow`'s, and it expires no earlier), and it can admit at least one call.
fn covers(wide: &Grant, narrow: &Grant) -> bool {
    wide.agent == narrow.agent
        && wide.tool == narrow.tool
        && wide.quota != Quota::Limited(0)
        && match (&narrow.resource, &wide.resource) {
            (_, None) => true,
            (None, Some(_)) => false,
            (Some(n), Some(w)) => n.is_subset_of(w),
        }
        && wide.args.iter().all(|a| narrow.args.contains(a))
        && match (narrow.expires_at, wide.expires_at) {
            (_, None) => true,
            (None, Some(_)) => false,
            (Some(n), Some(w)) => n <= w,
        }
}

/// The later grant that admits, without approval, the calls of the approval
/// grant `g` once `g`'s units are reserved or spent: the first later grant of
/// the same agent and tool that covers `g`, looking past covering grants
/// that need approval and have a quota (they too run out), and stopping at
/// a covering unlimited grant that needs approval (it takes every call of
/// `g` first). `later` lists the grants after `g` of `g`'s agent and tool,
/// in policy order; at most `SHADOW_SCAN` of them are compared.
fn approval_bypass(policy: &Policy, g: &Grant, later: &[usize]) -> Option<usize> {
    for &h in later.iter().take(SHADOW_SCAN) {
        let Some(grant) = policy.grants.get(h) else {
            continue;
        };
        if !covers(grant, g) {
            continue;
        }
        if !grant.approval {
            return Some(h);
        }
        if grant.quota == Quota::Unlimited && policy.budget_of(h).is_none() && !policy.renews(h) {
            return None;
        }
    }
    None
}

/// Grant indexes per (agent, tool), in policy order.
fn grants_by_owner(policy: &Policy) -> HashMap<(usize, usize), Vec<usize>> {
    let mut out: HashMap<(usize, usize), Vec<usize>> = HashMap::new();
    for (g, grant) in policy.grants.iter().enumerate() {
        out.entry((grant.agent, grant.tool)).or_default().push(g);
    }
    out
}

/// How many earlier grants the shadowing warning compares a grant with
/// (the most recent ones that could shadow it), so that a policy of many
/// unlimited grants on one tool still checks in linear time. A grant with
/// neither resource pattern nor tests shadows everything after it and is
/// always found.
const SHADOW_SCAN: usize = 256;

pub fn warnings(policy: &Policy, map: &SourceMap, d: &mut Diags) {
    trusted_outputs(policy, map, d);
    unread_output_fields(policy, map, d);
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
    // Per (agent, tool): earlier grants that can shadow (unlimited, no
    // approval, no expiry), and the first of them that covers everything.
    let mut shadowing: HashMap<(usize, usize), (Vec<usize>, Option<usize>)> = HashMap::new();
    for (li, later) in policy.grants.iter().enumerate() {
        let key = (later.agent, later.tool);
        let (earlier_ones, universal) = shadowing.entry(key).or_default();
        let scanned = earlier_ones
            .iter()
            .rev()
            .take(SHADOW_SCAN)
            .copied()
            .filter(|&e| shadows(&policy.grants[e], later))
            .min();
        let found = match (*universal, scanned) {
            (Some(u), Some(s)) => Some(u.min(s)),
            (u, s) => u.or(s),
        };
        // A grant with a budget runs out like one with a quota: it shadows nothing.
        if later.quota == Quota::Unlimited
            && !later.approval
            && later.expires_at.is_none()
            && policy.budget_of(li).is_none()
            // Nor does one whose quota or budget renews in windows.
            && !policy.renews(li)
        {
            earlier_ones.push(li);
            if universal.is_none() && later.resource.is_none() && later.args.is_empty() {
                *universal = Some(li);
            }
        }
        if let Some(earlier) = found.and_then(|e| policy.grants.get(e)) {
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
    // An approval grant with a quota, followed by a grant without approval
    // that covers it: once its units are reserved or spent, its calls are
    // admitted by the later grant, and no human is asked.
    let by_owner = grants_by_owner(policy);
    // Each grant's place in its owner's list, so the scan stays linear.
    let mut place = vec![0usize; policy.grants.len()];
    for list in by_owner.values() {
        for (k, &g) in list.iter().enumerate() {
            if let Some(p) = place.get_mut(g) {
                *p = k;
            }
        }
    }
    for (gi, g) in policy.grants.iter().enumerate() {
        let Quota::Limited(units) = g.quota else {
            continue;
        };
        if !g.approval {
            continue;
        }
        let owned = by_owner
            .get(&(g.agent, g.tool))
            .map_or(&[][..], Vec::as_slice);
        let after = place.get(gi).map_or(owned.len(), |p| p + 1);
        let Some(hi) = approval_bypass(policy, g, owned.get(after..).unwrap_or_default()) else {
            continue;
        };
        let Some(h) = policy.grants.get(hi) else {
            continue;
        };
        let g_span = map.grants.get(gi).copied().unwrap_or_default();
        let h_span = map.grants.get(hi).copied().unwrap_or_default();
        let (unit, is) = if units == 1 {
            ("unit", "is")
        } else {
            ("units", "are")
        };
        d.warn(
            g_span,
            format!(
                "grant `{g}` ({gl}:{gc}) requires approval, but the later grant `{h}` ({hl}:{hc}) needs none and covers it: once the {units} {unit} of `{g}` {is} reserved or spent, the calls it matches are admitted by `{h}` without approval (put `{h}` first with a narrower match, add `approval` to `{h}`, or make `{g}` unlimited)",
                g = g.name,
                gl = g_span.line,
                gc = g_span.col,
                h = h.name,
                hl = h_span.line,
                hc = h_span.col,
            ),
        );
    }
    let reached: HashSet<usize> = policy
        .tools
        .iter()
        .flat_map(|t| t.sinks.iter().map(|s| s.sink))
        .collect();
    let denied: HashSet<usize> = policy
        .flow_rules
        .iter()
        .filter(|r| matches!(r.effect, FlowEffect::Deny(_) | FlowEffect::Pause(_)))
        .map(|r| r.sink)
        .collect();
    for (ri, rule) in policy.flow_rules.iter().enumerate() {
        let span = map.flow_sinks.get(ri).copied().unwrap_or_default();
        let sink = policy.sinks.get(rule.sink).map_or("?", String::as_str);
        if !reached.contains(&rule.sink) {
            d.warn(
                span,
                format!("flow rule `{}`: no tool reaches sink `{sink}`", rule.name),
            );
        }
        let has_deny = denied.contains(&rule.sink);
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
    let discovered: HashSet<usize> = policy.grants.iter().filter_map(|g| g.discovers).collect();
    for (si, set) in policy.sets.iter().enumerate() {
        if !discovered.contains(&si) && !policy.task_seeds.contains(&si) {
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

/// The trusted-output lint (issue #27, point 6): a tool declared with a
/// trusted `output` label still returns an untrusted output when an
/// argument of the call is untrusted (the output label joins the inputs'
/// labels); only a sanitizer that `trusts` vouches for it. Warns for a tool
/// with an explicit trusted output, no trusting sanitizer and parameters,
/// in a policy where untrusted data exists (a tool output or resource
/// label is untrusted), unless every parameter but the resource flows
/// into a sink that a deny rule `untrusted -> SINK` (without `when`)
/// guards, which refuses such a call outright (the resource parameter
/// selects what is read; resource labels describe it). Left out, to keep the lint quiet where trust is
/// established otherwise or spoken of elsewhere: policies with provenance
/// by value (an argument the user typed keeps the task's trust) and tools
/// a grant discovers from (the discovery warning speaks about those).
/// Field labels (`output FIELD: LABEL`) change only where values come from
/// for provenance by value and token tests; in a policy with neither they
/// change no decision, which a writer who meant them to would not expect.
fn unread_output_fields(policy: &Policy, map: &SourceMap, d: &mut Diags) {
    if policy.output_fields.is_empty() || policy.provenance_by_value || policy.has_token_tests() {
        return;
    }
    for (ti, tool) in policy.tools.iter().enumerate() {
        if let Some(span) = map.tool_output_fields.get(ti).copied().flatten() {
            d.warn(
                span,
                format!(
                    "the output field labels of `{}` change no decision: they only say where values come from for `provenance by value;` and token tests (`any url in PARAM from untrusted`), and this policy has neither",
                    tool.name
                ),
            );
        }
    }
}

fn trusted_outputs(policy: &Policy, map: &SourceMap, d: &mut Diags) {
    use agenra_core::policy::FlowEffect;
    if policy.provenance_by_value {
        return;
    }
    let untrusted_source = policy.tools.iter().any(|t| !t.output.trusted)
        || policy.resources.iter().any(|r| !r.label.trusted);
    if !untrusted_source {
        return;
    }
    // A sink where every untrusted flow is denied: a deny rule on exactly
    // `untrusted`, without `when`, and no allow rule that could exempt.
    let guarded = |sink: usize| {
        let on = || policy.flow_rules.iter().filter(move |r| r.sink == sink);
        on().any(|r| {
            r.when == agenra_core::Cond::TRUE
                && matches!(r.effect, FlowEffect::Deny(p)
                    if p.untrusted && p.min_sensitivity.is_none() && p.any_category.is_empty())
        }) && !on().any(|r| matches!(r.effect, FlowEffect::Allow(_)))
    };
    for (ti, tool) in policy.tools.iter().enumerate() {
        let Some(span) = map.tool_outputs.get(ti).copied().flatten() else {
            continue;
        };
        let trusts = tool
            .sanitizer
            .and_then(|s| policy.sanitizers.get(s))
            .is_some_and(|s| s.trusts);
        if !tool.output.trusted || trusts || tool.params.is_empty() {
            continue;
        }
        if policy
            .grants
            .iter()
            .any(|g| g.tool == ti && g.discovers.is_some())
        {
            continue;
        }
        let refused = |param: usize| {
            tool.sinks
                .iter()
                .any(|s| s.params.as_ref().is_none_or(|ps| ps.contains(&param)) && guarded(s.sink))
        };
        // The resource parameter only selects what is read (resource
        // labels describe it): a read tool's trusted output is the norm.
        let Some(open) = (0..tool.params.len()).find(|&i| tool.resource != Some(i) && !refused(i))
        else {
            continue;
        };
        d.warn(
            span,
            format!(
                "tool `{}` declares a trusted output, but its argument `{}` may be untrusted (untrusted data exists in this policy) and no sanitizer of it `trusts`: the output of such a call carries the argument's label, so it is untrusted; a trusted output does not launder an untrusted argument (declare a sanitizer with `trusts` if the tool really vouches for what it returns)",
                tool.name, tool.params[open].name
            ),
        );
    }
}
