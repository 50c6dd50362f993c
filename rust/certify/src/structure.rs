//! Which parts of two compiled policies differ, apart from their grants.
//!
//! The ledger abstraction (`classes`, `product`) assumes that steps 1–4 of
//! the monitor (well-formedness, flows, call rules, path rules, counts,
//! obligations) are the same function of the session on both sides. That
//! holds when every part they read is identical; each part that is not is
//! named here, and certification answers `unknown` for it.

use agenra_core::policy::Policy;

/// The parts the grant abstraction itself needs identical: tools (ids and
/// parameters), agents (delegation chains, scopes) and discovered sets (ids).
pub fn ledger_compatible(old: &Policy, new: &Policy) -> bool {
    old.tools == new.tools
        && old.agents == new.agents
        && old.scopes == new.scopes
        && old.sets == new.sets
        && old.task_seeds == new.task_seeds
}

/// Why the certifier cannot answer when OLD or NEW shares a grant's quota
/// with the tenant (`quota N per tenant`): the other sessions of the
/// tenant may drain the pool at any time, so no workflow of one session is
/// preserved (or even admitted twice by the same policy) unconditionally.
/// Names the first such grant; `None` when both policies have none.
pub fn shared_quota(old: &Policy, new: &Policy) -> Option<String> {
    [("OLD", old), ("NEW", new)].into_iter().find_map(|(which, p)| {
        let g = *p.shared_grants.first()?;
        Some(format!(
            "grant `{}` of {which} shares its quota with the tenant's sessions (`quota N per tenant`): other sessions may drain the pool at any time, which the ledger certifier does not model",
            p.grants.get(g).map_or("?", |g| g.name.as_str())
        ))
    })
}

/// Why the certifier cannot answer when OLD or NEW spends from an amount
/// budget (`budget AMOUNT on PARAM`): the ledger abstraction counts units,
/// not amounts, so it cannot tell which calls a budget still serves.
/// Names the first such grant; `None` when neither policy has a budget.
/// (Lifting this needs the amount ledger in `classes`/`product` and its
/// Lean mirror; until then, `unknown` is the sound answer.)
pub fn budgets(old: &Policy, new: &Policy) -> Option<String> {
    [("OLD", old), ("NEW", new)].into_iter().find_map(|(which, p)| {
        let b = p.budgets.first()?;
        Some(format!(
            "grant `{}` of {which} spends from an amount budget (`budget {} on {}`): the ledger certifier counts units, not amounts, and does not model budgets",
            p.grants.get(b.grant).map_or("?", |g| g.name.as_str()),
            b.amount,
            p.grants
                .get(b.grant)
                .and_then(|g| p.tools.get(g.tool))
                .and_then(|t| t.params.get(b.param))
                .map_or("?", |p| p.name.as_str())
        ))
    })
}

/// Why the certifier cannot answer when OLD or NEW has a renewing quota
/// or budget (`quota N per 10m`, `budget B on PARAM per day`): the ledger
/// abstraction has no clock, so it cannot tell which calls a window still
/// serves (a raised limit or a longer window is not certified by
/// construction either: with fixed windows, a longer window renews less
/// often). Names the first such grant; `None` when neither has one.
pub fn renewals(old: &Policy, new: &Policy) -> Option<String> {
    [("OLD", old), ("NEW", new)].into_iter().find_map(|(which, p)| {
        let r = p.renewals.first()?;
        Some(format!(
            "grant `{}` of {which} has a {} that renews every {} seconds: the ledger certifier has no clock and does not model windows",
            p.grants.get(r.grant).map_or("?", |g| g.name.as_str()),
            if r.limit.is_amount() { "budget" } else { "quota" },
            r.secs
        ))
    })
}

/// Why `certify` answers `unknown` when either policy has a count over a
/// sliding time window (`deny count c: at most 2 STEP within 1h`): the
/// certifier's runs have no clock, so it cannot tell which calls are still
/// inside a window (a longer window is not certified by construction
/// either). Names the first such count; `None` when neither has one.
pub fn count_windows(old: &Policy, new: &Policy) -> Option<String> {
    [("OLD", old), ("NEW", new)].into_iter().find_map(|(which, p)| {
        let w = p.count_windows.first()?;
        Some(format!(
            "count `{}` of {which} looks back over a sliding window of {} seconds: the certifier has no clock and does not model windows",
            p.path_rules.get(w.rule).map_or("?", |r| r.name.as_str()),
            w.secs
        ))
    })
}

/// Every non-grant part that differs, with a sentence naming it. The
/// policy name is not compared: it is not part of any decision.
pub fn differences(old: &Policy, new: &Policy) -> Vec<String> {
    fields_considered(old);
    differences_of(old, new)
}

/// The rule parts (flow rules into sinks and into agents, call rules,
/// path rules and counts, obligations) that differ, and every other
/// non-grant part that differs. Only the first kind can be certified, by
/// the rule-side SMT check (`RuleOracle`); the second is always `unknown`.
pub fn split_differences(old: &Policy, new: &Policy) -> (Vec<String>, Vec<String>) {
    let all = differences(old, new);
    let others = differences(old, &with_rules_of(new, old));
    let rules = all.into_iter().filter(|d| !others.contains(d)).collect();
    (rules, others)
}

/// `p` with the rules of `from` (everything else of `p`).
pub fn with_rules_of(p: &Policy, from: &Policy) -> Policy {
    let mut out = p.clone();
    out.flow_rules = from.flow_rules.clone();
    out.receive_rules = from.receive_rules.clone();
    out.call_rules = from.call_rules.clone();
    out.path_rules = from.path_rules.clone();
    out.obligations = from.obligations.clone();
    out
}

/// Every field of the model, listed: a field added to `Policy` or `Grant`
/// fails to compile here until the certifier considers it.
fn fields_considered(p: &Policy) {
    let Policy {
        name: _,
        levels: _,
        categories: _,
        sinks: _,
        sets: _,
        facts: _,
        tools: _,
        resources: _,
        sanitizers: _,
        agents: _,
        scopes: _,
        grants,
        flow_rules: _,
        path_rules: _,
        obligations: _,
        call_rules: _,
        receive_rules: _,
        provenance_by_value: _,
        task_seeds: _,
        // Shared quotas: `certify` answers `unknown` when either policy has
        // one (lib.rs, `shared_quota_unknown`).
        shared_grants: _,
        // Budgets: `certify` answers `unknown` when either policy has one
        // (`budgets` above).
        budgets: _,
        // Per-parameter provenance: compared with provenance by value below.
        param_provenance: _,
        // Renewing quotas and budgets: `certify` answers `unknown` when
        // either policy has one (`renewals` above).
        renewals: _,
        // Counts over time windows: `certify` answers `unknown` when either
        // policy has one (lib.rs, `count_windows`).
        count_windows: _,
        // Per-field output labels: compared with provenance by value below.
        output_fields: _,
        // Declared token shapes: only token tests read them, and `certify`
        // answers `unknown` for a policy with token tests; compared below.
        token_shapes: _,
    } = p;
    for g in grants {
        let agenra_core::policy::Grant {
            name: _,
            agent: _,
            tool: _,
            resource: _,
            args: _,
            quota: _,
            approval: _,
            expires_at: _,
            discovers: _,
        } = g;
    }
}

fn differences_of(old: &Policy, new: &Policy) -> Vec<String> {
    let mut out = Vec::new();
    let mut part = |same: bool, what: &str| {
        if !same {
            out.push(format!(
                "{what} differ between OLD and NEW: not modeled by the ledger certifier"
            ));
        }
    };
    part(old.levels == new.levels, "sensitivity levels");
    part(old.categories == new.categories, "categories");
    part(old.sinks == new.sinks, "sinks");
    part(old.sets == new.sets, "discovered sets");
    part(old.facts == new.facts, "facts");
    part(
        old.tools == new.tools,
        "tool signatures (parameters, resources, sinks, output labels, sanitizers, facts)",
    );
    part(old.resources == new.resources, "resource labels");
    part(old.sanitizers == new.sanitizers, "sanitizers");
    part(old.agents == new.agents, "agents");
    part(old.scopes == new.scopes, "scopes");
    part(
        old.flow_rules == new.flow_rules,
        &rule_names(
            "flow rules",
            &names(&old.flow_rules, |r| &r.name),
            &names(&new.flow_rules, |r| &r.name),
        ),
    );
    part(
        old.receive_rules == new.receive_rules,
        &rule_names(
            "flow rules into agents",
            &names(&old.receive_rules, |r| &r.name),
            &names(&new.receive_rules, |r| &r.name),
        ),
    );
    part(
        old.path_rules == new.path_rules,
        &rule_names(
            "path rules and counts",
            &names(&old.path_rules, |r| &r.name),
            &names(&new.path_rules, |r| &r.name),
        ),
    );
    part(
        old.obligations == new.obligations,
        &rule_names(
            "obligations",
            &names(&old.obligations, |r| &r.name),
            &names(&new.obligations, |r| &r.name),
        ),
    );
    part(
        old.call_rules == new.call_rules,
        &rule_names(
            "call rules",
            &names(&old.call_rules, |r| &r.name),
            &names(&new.call_rules, |r| &r.name),
        ),
    );
    part(
        old.provenance_by_value == new.provenance_by_value
            && old.param_provenance == new.param_provenance
            && old.output_fields == new.output_fields,
        "provenance by value",
    );
    part(old.task_seeds == new.task_seeds, "task seeds");
    part(
        old.token_shapes == new.token_shapes,
        "declared token shapes",
    );
    // Anything else (there is nothing else today; see the list above).
    let (mut a, mut b) = (old.clone(), new.clone());
    a.name.clear();
    b.name.clear();
    a.grants.clear();
    b.grants.clear();
    if out.is_empty() && a != b {
        out.push("other parts of the policies differ: not modeled".into());
    }
    out
}

fn names<T>(rules: &[T], name: impl Fn(&T) -> &String) -> Vec<String> {
    rules.iter().map(|r| name(r).clone()).collect()
}

/// "flow rules (`a` only in NEW, `b` changed)": which rules to look at.
fn rule_names(kind: &str, old: &[String], new: &[String]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for n in new.iter().filter(|n| !old.contains(n)) {
        parts.push(format!("`{n}` only in NEW"));
    }
    for o in old.iter().filter(|o| !new.contains(o)) {
        parts.push(format!("`{o}` only in OLD"));
    }
    if parts.is_empty() {
        format!("{kind} (changed or reordered)")
    } else {
        format!("{kind} ({})", parts.join(", "))
    }
}

/// Whether some rule or fact test reads discovered set membership: then the
/// sets must stay identical on both sides.
pub fn rules_read_sets(p: &Policy) -> bool {
    use agenra_core::value::Cond;
    fn reads<P>(c: &Cond<P>) -> bool {
        c.tests().iter().any(|(_, op)| op.set().is_some())
    }
    p.flow_rules.iter().any(|r| reads(&r.when))
        || p.receive_rules.iter().any(|r| reads(&r.when))
        || p.call_rules.iter().any(|r| reads(&r.when))
        || p.path_rules.iter().any(|r| {
            let steps: Vec<&agenra_core::policy::StepPattern> = match &r.kind {
                agenra_core::policy::PathKind::Sequence(s) => s.iter().collect(),
                agenra_core::policy::PathKind::AtMost { step, .. } => vec![step],
            };
            steps
                .into_iter()
                .chain(r.reset.iter())
                .any(|s| s.when.as_ref().is_some_and(reads))
        })
        || p.tools.iter().any(|t| {
            t.facts
                .iter()
                .any(|f| f.when.as_ref().is_some_and(|w| w.op.set().is_some()))
        })
}

/// Whether any rule can PAUSE a call (then a call may pause for a reason
/// other than its grant).
pub fn has_pause_rules(p: &Policy) -> bool {
    use agenra_core::policy::{FlowEffect, RuleEffect};
    p.flow_rules
        .iter()
        .any(|r| matches!(r.effect, FlowEffect::Pause(_)))
        || p.receive_rules
            .iter()
            .any(|r| matches!(r.effect, FlowEffect::Pause(_)))
        || p.call_rules.iter().any(|r| r.effect == RuleEffect::Pause)
        || p.path_rules.iter().any(|r| r.effect == RuleEffect::Pause)
        || p.obligations.iter().any(|r| r.effect == RuleEffect::Pause)
}

/// Whether any rule can DENY (then an approval may be denied at
/// re-authorization time, returning the units).
pub fn has_deny_rules(p: &Policy) -> bool {
    use agenra_core::policy::{FlowEffect, RuleEffect};
    p.flow_rules
        .iter()
        .any(|r| matches!(r.effect, FlowEffect::Deny(_)))
        || p.receive_rules
            .iter()
            .any(|r| matches!(r.effect, FlowEffect::Deny(_)))
        || p.call_rules.iter().any(|r| r.effect == RuleEffect::Deny)
        || p.path_rules.iter().any(|r| r.effect == RuleEffect::Deny)
        || p.obligations.iter().any(|r| r.effect == RuleEffect::Deny)
}

/// Whether decisions depend on the order in which calls were admitted
/// (path rules, counts, obligations): then a call that NEW admits earlier
/// than OLD (OLD paused it, NEW allowed it) changes NEW's history.
pub fn has_history_rules(p: &Policy) -> bool {
    !p.path_rules.is_empty() || !p.obligations.is_empty()
}
