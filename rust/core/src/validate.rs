//! Internal consistency of a compiled policy: every index points into its
//! list. The compiler only produces valid policies, but a policy can also be
//! read from JSON or CBOR, and the monitor must never index out of bounds.

use crate::label::MAX_CATEGORIES;
use crate::policy::{PathKind, Policy, StepPattern};
use crate::value::{ArgOp, Cond};

/// An inconsistency found by [`validate`]: the first field of the policy that
/// is out of range or contradicts another, displayed as `what: problem`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}: {problem}")]
pub struct ModelError {
    /// Where, e.g. `grants[3].tool`.
    pub what: String,
    /// What is wrong with it, e.g. `index 5 is out of range (2 tools)`.
    pub problem: String,
}

fn bad(what: impl Into<String>, problem: impl Into<String>) -> ModelError {
    ModelError {
        what: what.into(),
        problem: problem.into(),
    }
}

fn index(what: String, i: usize, len: usize, list: &str) -> Result<(), ModelError> {
    if i < len {
        Ok(())
    } else {
        Err(bad(
            what,
            format!("index {i} is out of range ({len} {list})"),
        ))
    }
}

/// Declared token kinds: at most `u16::MAX`, names unique and none a
/// built-in kind's keyword (each shape was checked when it was read).
fn shapes_ok(p: &Policy) -> Result<(), ModelError> {
    if p.token_shapes.len() > usize::from(u16::MAX) {
        return Err(bad("token_shapes", "too many token shapes"));
    }
    let mut seen = std::collections::HashSet::new();
    for (i, s) in p.token_shapes.iter().enumerate() {
        let builtin =
            s.name() == "token" || crate::tokens::TokenKind::from_keyword(s.name()).is_some();
        if builtin || !seen.insert(s.name()) {
            return Err(bad(
                format!("token_shapes[{i}].name"),
                format!("`{}` is a built-in token kind or declared twice", s.name()),
            ));
        }
    }
    Ok(())
}

/// Checks that a compiled policy is internally consistent: every index
/// (tool, parameter, agent, sink, set, fact, level, category, ...) points
/// into its list, names are unique, the delegation chain has a root and no
/// cycle. Returns the first problem found.
///
/// [`CompiledPolicy::new`](crate::monitor::CompiledPolicy::new) calls it, so
/// a policy read from JSON or CBOR cannot make the monitor index out of
/// bounds.
pub fn validate(p: &Policy) -> Result<(), ModelError> {
    if p.levels.is_empty() || p.levels.len() > 256 {
        return Err(bad("levels", "must hold 1 to 256 levels"));
    }
    if p.categories.len() > MAX_CATEGORIES {
        return Err(bad(
            "categories",
            format!("at most {MAX_CATEGORIES} categories"),
        ));
    }
    if p.agents.first().is_none_or(|a| a.parent.is_some()) {
        return Err(bad(
            "agents[0]",
            "the root agent must exist and have no parent",
        ));
    }
    if p.agents.len() > u16::MAX as usize {
        return Err(bad("agents", "too many agents"));
    }
    let level_ok = |what: String, l: u8| index(what, l as usize, p.levels.len(), "levels");
    let label_ok = |what: String, l: &crate::label::Label| -> Result<(), ModelError> {
        level_ok(format!("{what}.sensitivity"), l.sensitivity)?;
        if l.categories.0 >> p.categories.len().min(63) > 0 && p.categories.len() < 64 {
            return Err(bad(
                format!("{what}.categories"),
                "names an undeclared category",
            ));
        }
        Ok(())
    };
    let op_ok = |what: String, op: &ArgOp| -> Result<(), ModelError> {
        match op.set() {
            Some(s) => index(what, s, p.sets.len(), "sets"),
            None => Ok(()),
        }
    };
    let agents_ok = |what: String, agents: Vec<usize>| -> Result<(), ModelError> {
        for a in agents {
            index(what.clone(), a, p.agents.len(), "agents")?;
        }
        Ok(())
    };
    shapes_ok(p)?;
    let kinds_ok = |what: String, kinds: Vec<crate::tokens::TokenKind>| {
        for k in kinds {
            if let crate::tokens::TokenKind::Declared(i) = k {
                index(
                    what.clone(),
                    usize::from(i),
                    p.token_shapes.len(),
                    "token shapes",
                )?;
            }
        }
        Ok(())
    };
    let cond_ok = |what: String, c: &Cond<usize>, params: usize| -> Result<(), ModelError> {
        for (param, op) in c.tests() {
            index(format!("{what}.param"), *param, params, "parameters")?;
            op_ok(format!("{what}.op"), op)?;
        }
        for (param, from) in c.token_tests() {
            index(format!("{what}.param"), *param, params, "parameters")?;
            origins_ok(format!("{what}.from"), from)?;
        }
        kinds_ok(format!("{what}.kind"), c.token_kinds())?;
        agents_ok(format!("{what}.agent"), c.agents())
    };
    let named_cond_ok = |what: String, c: &Cond<String>| -> Result<(), ModelError> {
        for (_, op) in c.tests() {
            op_ok(format!("{what}.op"), op)?;
        }
        for (_, from) in c.token_tests() {
            origins_ok(format!("{what}.from"), from)?;
        }
        kinds_ok(format!("{what}.kind"), c.token_kinds())?;
        agents_ok(format!("{what}.agent"), c.agents())
    };
    let effect_ok = |what: String, effect: crate::policy::FlowEffect| match effect {
        crate::policy::FlowEffect::Allow(l) => label_ok(format!("{what}.ceiling"), &l),
        crate::policy::FlowEffect::Deny(pat) | crate::policy::FlowEffect::Pause(pat) => {
            match pat.min_sensitivity {
                Some(l) => level_ok(format!("{what}.pattern"), l),
                None => Ok(()),
            }
        }
    };
    let step_ok = |what: String, s: &StepPattern| -> Result<(), ModelError> {
        if let Some(sink) = s.sink {
            index(format!("{what}.sink"), sink, p.sinks.len(), "sinks")?;
        }
        if let Some(c) = &s.when {
            named_cond_ok(format!("{what}.when"), c)?;
        }
        if let Some(l) = s.reads.and_then(|r| r.min_sensitivity) {
            level_ok(format!("{what}.reads"), l)?;
        }
        Ok(())
    };
    let mut tool_names = std::collections::BTreeSet::new();
    for (t, tool) in p.tools.iter().enumerate() {
        if !tool_names.insert(tool.name.as_str()) {
            return Err(bad(
                format!("tools[{t}].name"),
                format!("tool `{}` is declared twice", tool.name),
            ));
        }
        let mut params = std::collections::BTreeSet::new();
        for (i, param) in tool.params.iter().enumerate() {
            if !params.insert(param.name.as_str()) {
                return Err(bad(
                    format!("tools[{t}].params[{i}].name"),
                    format!("parameter `{}` is declared twice", param.name),
                ));
            }
            fields_ok(format!("tools[{t}].params[{i}]"), param, 1)?;
        }
        if let Some(r) = tool.resource {
            index(
                format!("tools[{t}].resource"),
                r,
                tool.params.len(),
                "parameters",
            )?;
        }
        for (i, s) in tool.sinks.iter().enumerate() {
            index(
                format!("tools[{t}].sinks[{i}].sink"),
                s.sink,
                p.sinks.len(),
                "sinks",
            )?;
            for (j, &param) in s.params.iter().flatten().enumerate() {
                index(
                    format!("tools[{t}].sinks[{i}].params[{j}]"),
                    param,
                    tool.params.len(),
                    "parameters",
                )?;
            }
        }
        label_ok(format!("tools[{t}].output"), &tool.output)?;
        if let Some(s) = tool.sanitizer {
            index(
                format!("tools[{t}].sanitizer"),
                s,
                p.sanitizers.len(),
                "sanitizers",
            )?;
        }
        for (i, f) in tool.facts.iter().enumerate() {
            index(
                format!("tools[{t}].facts[{i}].fact"),
                f.fact,
                p.facts.len(),
                "facts",
            )?;
        }
    }
    for (i, r) in p.resources.iter().enumerate() {
        label_ok(format!("resources[{i}].label"), &r.label)?;
    }
    for (i, s) in p.sanitizers.iter().enumerate() {
        if let Some(l) = s.max_sensitivity {
            level_ok(format!("sanitizers[{i}].max_sensitivity"), l)?;
        }
    }
    for (a, agent) in p.agents.iter().enumerate().skip(1) {
        match agent.parent {
            Some(parent) => index(
                format!("agents[{a}].parent"),
                parent,
                p.agents.len(),
                "agents",
            )?,
            None => {
                return Err(bad(
                    format!("agents[{a}].parent"),
                    "a delegate needs a delegator",
                ))
            }
        }
    }
    if let Some(a) = first_cyclic_agent(p) {
        return Err(bad(
            format!("agents[{a}].parent"),
            "the delegation chain has a cycle",
        ));
    }
    let mut agent_names = std::collections::BTreeSet::new();
    for (a, agent) in p.agents.iter().enumerate() {
        if !agent_names.insert(agent.name.as_str()) {
            return Err(bad(
                format!("agents[{a}].name"),
                format!("agent `{}` is declared twice", agent.name),
            ));
        }
        if let Some(s) = agent.scope {
            index(format!("agents[{a}].scope"), s, p.scopes.len(), "scopes")?;
        }
    }
    for (g, grant) in p.grants.iter().enumerate() {
        index(
            format!("grants[{g}].agent"),
            grant.agent,
            p.agents.len(),
            "agents",
        )?;
        index(
            format!("grants[{g}].tool"),
            grant.tool,
            p.tools.len(),
            "tools",
        )?;
        if grant.resource.is_some() && p.tools[grant.tool].resource.is_none() {
            return Err(bad(
                format!("grants[{g}].resource"),
                "the tool has no resource parameter",
            ));
        }
        for (i, c) in grant.args.iter().enumerate() {
            if c.has_tokens() {
                return Err(bad(
                    format!("grants[{g}].args[{i}]"),
                    "a grant may not test token origins (its match must not depend on what the session read)",
                ));
            }
            cond_ok(
                format!("grants[{g}].args[{i}]"),
                c,
                p.tools[grant.tool].params.len(),
            )?;
            field_paths_ok(
                format!("grants[{g}].args[{i}]"),
                c,
                &p.tools[grant.tool].params,
            )?;
        }
        if let Some(s) = grant.discovers {
            index(format!("grants[{g}].discovers"), s, p.sets.len(), "sets")?;
        }
    }
    for (i, &g) in p.shared_grants.iter().enumerate() {
        let what = format!("shared_grants[{i}]");
        index(what.clone(), g, p.grants.len(), "grants")?;
        if i > 0 && p.shared_grants[i - 1] >= g {
            return Err(bad(what, "must be strictly ascending"));
        }
        let grant = &p.grants[g];
        if grant.quota == crate::policy::Quota::Unlimited {
            return Err(bad(
                what,
                format!(
                    "grant `{}` has an unlimited quota: there is nothing to share",
                    grant.name
                ),
            ));
        }
        if p.grants.iter().filter(|o| o.name == grant.name).count() > 1 {
            return Err(bad(
                what,
                format!(
                    "grant `{}` shares its quota with the tenant, which counts it by name, but another grant has the same name",
                    grant.name
                ),
            ));
        }
    }
    for (i, m) in p.param_provenance.iter().enumerate() {
        let what = format!("param_provenance[{i}]");
        index(format!("{what}.tool"), m.tool, p.tools.len(), "tools")?;
        index(
            format!("{what}.param"),
            m.param,
            p.tools[m.tool].params.len(),
            "params",
        )?;
        if i > 0 {
            let prev = &p.param_provenance[i - 1];
            if (prev.tool, prev.param) >= (m.tool, m.param) {
                return Err(bad(what, "must be strictly ascending by (tool, param)"));
            }
        }
    }
    for (i, f) in p.output_fields.iter().enumerate() {
        let what = format!("output_fields[{i}]");
        index(format!("{what}.tool"), f.tool, p.tools.len(), "tools")?;
        label_ok(format!("{what}.label"), &f.label)?;
        if f.path.is_empty() {
            return Err(bad(what, "the path must name at least one field"));
        }
        if i > 0 {
            let prev = &p.output_fields[i - 1];
            if (prev.tool, &prev.path) >= (f.tool, &f.path) {
                return Err(bad(what, "must be strictly ascending by (tool, path)"));
            }
        }
    }
    for (i, b) in p.budgets.iter().enumerate() {
        let what = format!("budgets[{i}]");
        index(format!("{what}.grant"), b.grant, p.grants.len(), "grants")?;
        if i > 0 && p.budgets[i - 1].grant >= b.grant {
            return Err(bad(what, "must be strictly ascending by grant"));
        }
        let grant = &p.grants[b.grant];
        let params = &p.tools[grant.tool].params;
        index(format!("{what}.param"), b.param, params.len(), "params")?;
        let param = &params[b.param];
        if param.list
            || !matches!(
                param.ty,
                crate::value::ParamType::Decimal | crate::value::ParamType::Int
            )
        {
            return Err(bad(
                format!("{what}.param"),
                format!(
                    "grant `{}` spends parameter `{}` of type `{}`: a budget is spent in a `decimal` or `int` parameter",
                    grant.name,
                    param.name,
                    param.type_name()
                ),
            ));
        }
        if b.amount.is_negative() {
            return Err(bad(
                format!("{what}.amount"),
                format!("grant `{}` has a negative budget {}", grant.name, b.amount),
            ));
        }
        if b.per_tenant && p.grants.iter().filter(|o| o.name == grant.name).count() > 1 {
            return Err(bad(
                what,
                format!(
                    "grant `{}` shares its budget with the tenant, which counts it by name, but another grant has the same name",
                    grant.name
                ),
            ));
        }
    }
    for (i, r) in p.renewals.iter().enumerate() {
        let what = format!("renewals[{i}]");
        index(format!("{what}.grant"), r.grant, p.grants.len(), "grants")?;
        let key = |r: &crate::policy::Renewal| (r.grant, r.limit.is_amount());
        if i > 0 && key(&p.renewals[i - 1]) >= key(r) {
            return Err(bad(
                what,
                "must be strictly ascending by grant, units before amounts (at most one of each per grant)",
            ));
        }
        let grant = &p.grants[r.grant];
        if r.secs == 0 {
            return Err(bad(
                format!("{what}.secs"),
                format!("grant `{}` renews in a window of 0 seconds", grant.name),
            ));
        }
        match &r.limit {
            crate::policy::RenewLimit::Units(_) => {
                if grant.quota != crate::policy::Quota::Unlimited || p.is_shared(r.grant) {
                    return Err(bad(
                        what,
                        format!(
                            "grant `{}` renews its quota in windows, so its own quota must be unlimited and not shared",
                            grant.name
                        ),
                    ));
                }
            }
            crate::policy::RenewLimit::Amount { amount, param } => {
                let params = &p.tools[grant.tool].params;
                index(format!("{what}.param"), *param, params.len(), "params")?;
                let pm = &params[*param];
                if pm.list
                    || !matches!(
                        pm.ty,
                        crate::value::ParamType::Decimal | crate::value::ParamType::Int
                    )
                {
                    return Err(bad(
                        format!("{what}.param"),
                        format!(
                            "grant `{}` spends parameter `{}` of type `{}`: a budget is spent in a `decimal` or `int` parameter",
                            grant.name,
                            pm.name,
                            pm.type_name()
                        ),
                    ));
                }
                if amount.is_negative() {
                    return Err(bad(
                        format!("{what}.limit"),
                        format!("grant `{}` has a negative budget {}", grant.name, amount),
                    ));
                }
                if p.budget_of(r.grant).is_some() {
                    return Err(bad(
                        what,
                        format!(
                            "grant `{}` has both a budget and a renewing budget",
                            grant.name
                        ),
                    ));
                }
            }
        }
        if r.per_tenant && p.grants.iter().filter(|o| o.name == grant.name).count() > 1 {
            return Err(bad(
                what,
                format!(
                    "grant `{}` shares its window with the tenant, which counts it by name, but another grant has the same name",
                    grant.name
                ),
            ));
        }
    }
    for (r, rule) in p.flow_rules.iter().enumerate() {
        index(
            format!("flow_rules[{r}].sink"),
            rule.sink,
            p.sinks.len(),
            "sinks",
        )?;
        effect_ok(format!("flow_rules[{r}]"), rule.effect)?;
        named_cond_ok(format!("flow_rules[{r}].when"), &rule.when)?;
    }
    for (r, rule) in p.receive_rules.iter().enumerate() {
        index(
            format!("receive_rules[{r}].agent"),
            rule.agent,
            p.agents.len(),
            "agents",
        )?;
        effect_ok(format!("receive_rules[{r}]"), rule.effect)?;
        named_cond_ok(format!("receive_rules[{r}].when"), &rule.when)?;
    }
    for (r, rule) in p.call_rules.iter().enumerate() {
        index(
            format!("call_rules[{r}].tool"),
            rule.tool,
            p.tools.len(),
            "tools",
        )?;
        cond_ok(
            format!("call_rules[{r}].when"),
            &rule.when,
            p.tools[rule.tool].params.len(),
        )?;
        field_paths_ok(
            format!("call_rules[{r}].when"),
            &rule.when,
            &p.tools[rule.tool].params,
        )?;
    }
    for (r, rule) in p.path_rules.iter().enumerate() {
        match &rule.kind {
            PathKind::Sequence(steps) => {
                if steps.is_empty() {
                    return Err(bad(
                        format!("path_rules[{r}]"),
                        "a path needs at least one step",
                    ));
                }
                for (i, s) in steps.iter().enumerate() {
                    step_ok(format!("path_rules[{r}].steps[{i}]"), s)?;
                }
            }
            PathKind::AtMost { step, .. } => step_ok(format!("path_rules[{r}].step"), step)?,
        }
        if let Some(reset) = &rule.reset {
            step_ok(format!("path_rules[{r}].reset"), reset)?;
        }
    }
    for (i, w) in p.count_windows.iter().enumerate() {
        let what = format!("count_windows[{i}]");
        index(
            format!("{what}.rule"),
            w.rule,
            p.path_rules.len(),
            "path_rules",
        )?;
        if i > 0 && p.count_windows[i - 1].rule >= w.rule {
            return Err(bad(what, "must be strictly ascending by rule"));
        }
        let rule = &p.path_rules[w.rule];
        if !matches!(rule.kind, PathKind::AtMost { .. }) {
            return Err(bad(
                format!("{what}.rule"),
                format!("rule `{}` has a window but is not a count", rule.name),
            ));
        }
        if w.secs == 0 {
            return Err(bad(
                format!("{what}.secs"),
                format!("count `{}` has a window of 0 seconds", rule.name),
            ));
        }
    }
    for (o, ob) in p.obligations.iter().enumerate() {
        index(
            format!("obligations[{o}].fact"),
            ob.fact,
            p.facts.len(),
            "facts",
        )?;
    }
    Ok(())
}

/// A token test's origins: not empty, strictly ascending (one encoding per
/// test, so equal tests hash equally).
fn origins_ok(what: String, from: &[crate::tokens::TokenOrigin]) -> Result<(), ModelError> {
    if from.is_empty() || from.windows(2).any(|w| w[0] >= w[1]) {
        return Err(bad(
            what,
            "token origins must be non-empty and strictly ascending",
        ));
    }
    Ok(())
}

/// Every field test of a condition on one tool names a field path of its
/// parameter's object type (the compiler only writes such tests).
fn field_paths_ok(
    what: String,
    c: &Cond<usize>,
    params: &[crate::policy::Param],
) -> Result<(), ModelError> {
    for (param, op) in c.tests() {
        let (path, _) = op.field_path();
        if !matches!(op, ArgOp::Field { .. }) {
            continue;
        }
        let path: Vec<String> = path.into_iter().map(str::to_string).collect();
        let fits = !path.is_empty()
            && params
                .get(*param)
                .is_some_and(|p| crate::object::field_at(p, &path).is_some());
        if !fits {
            return Err(bad(
                format!("{what}.op"),
                format!(
                    "the field path `{}` is not a field of parameter {param}",
                    path.join(".")
                ),
            ));
        }
    }
    Ok(())
}

/// The fields of an object type: only objects have them, names are unique,
/// nesting stays within [`crate::object::MAX_DEPTH`].
fn fields_ok(what: String, p: &crate::policy::Param, depth: usize) -> Result<(), ModelError> {
    if p.ty != crate::value::ParamType::Object {
        if !p.fields.is_empty() {
            return Err(bad(
                format!("{what}.fields"),
                format!("only an object type has fields, not `{}`", p.ty),
            ));
        }
        return Ok(());
    }
    if depth > crate::object::MAX_DEPTH {
        return Err(bad(
            what,
            format!(
                "object types nest more than {} deep",
                crate::object::MAX_DEPTH
            ),
        ));
    }
    let mut names = std::collections::BTreeSet::new();
    for (j, f) in p.fields.iter().enumerate() {
        if !names.insert(f.name.as_str()) {
            return Err(bad(
                format!("{what}.fields[{j}].name"),
                format!("field `{}` is declared twice", f.name),
            ));
        }
        fields_ok(format!("{what}.fields[{j}]"), f, depth + 1)?;
    }
    Ok(())
}

/// An agent whose delegation chain never reaches the root, if any. Linear:
/// each agent's status is settled once (0 unknown, 1 on the walk being
/// followed, 2 reaches the root).
fn first_cyclic_agent(p: &Policy) -> Option<usize> {
    let mut state = vec![0u8; p.agents.len()];
    if let Some(root) = state.first_mut() {
        *root = 2;
    }
    for start in 0..p.agents.len() {
        let mut walk = Vec::new();
        let mut cur = start;
        loop {
            match state[cur] {
                2 => break,
                1 => return Some(start),
                _ => {
                    state[cur] = 1;
                    walk.push(cur);
                    match p.agents[cur].parent {
                        Some(parent) if parent < p.agents.len() => cur = parent,
                        _ => return Some(start),
                    }
                }
            }
        }
        for a in walk {
            state[a] = 2;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Grant, Param, Quota, Tool};
    use crate::value::{ArgOp, Quant, Value};

    fn policy_with(cond: Cond<usize>) -> Policy {
        let mut p = Policy::empty("p");
        p.sets = vec!["s".into()];
        p.tools.push(Tool {
            name: "t".into(),
            params: vec![Param {
                name: "a".into(),
                ty: crate::value::ParamType::Str,
                list: false,
                optional: false,
                fields: Vec::new(),
            }],
            resource: None,
            sinks: vec![],
            output: crate::label::Label::BOTTOM,
            sanitizer: None,
            facts: vec![],
        });
        p.grants.push(Grant {
            name: "g".into(),
            agent: 0,
            tool: 0,
            resource: None,
            args: vec![cond],
            quota: Quota::Unlimited,
            approval: false,
            expires_at: None,
            discovers: None,
        });
        p
    }

    fn test(param: usize, op: ArgOp) -> Cond<usize> {
        Cond::Not(Box::new(Cond::Or(vec![Cond::Test {
            param,
            quant: Quant::All,
            op,
        }])))
    }

    #[test]
    fn conditions_may_only_name_what_exists() {
        assert!(validate(&policy_with(test(0, ArgOp::InSet(0)))).is_ok());
        let err = validate(&policy_with(test(1, ArgOp::Eq(Value::Null)))).unwrap_err();
        assert_eq!(err.what, "grants[0].args[0].param");
        let err = validate(&policy_with(test(0, ArgOp::NotInSet(1)))).unwrap_err();
        assert_eq!(err.what, "grants[0].args[0].op");
        let err = validate(&policy_with(Cond::Agent(vec![0, 5]))).unwrap_err();
        assert_eq!(err.what, "grants[0].args[0].agent");
    }

    #[test]
    fn declared_token_kinds_are_checked() {
        use crate::policy::{CallRule, RuleEffect};
        use crate::token_shapes::{CharClass, ShapePart, TokenShape};
        use crate::tokens::{TokenKind, TokenOrigin as O};
        let shape = |name: &str| {
            TokenShape::new(
                name,
                vec![ShapePart::Class {
                    class: CharClass::Digit,
                    min: 2,
                    max: 2,
                }],
            )
            .unwrap()
        };
        let with = |shapes: Vec<TokenShape>, kind: u16| {
            let mut p = policy_with(Cond::TRUE);
            p.token_shapes = shapes;
            p.call_rules.push(CallRule {
                name: "r".into(),
                effect: RuleEffect::Deny,
                tool: 0,
                when: Cond::Tokens {
                    param: 0,
                    quant: crate::value::Quant::Any,
                    kind: Some(TokenKind::Declared(kind)),
                    from: vec![O::Elsewhere],
                },
            });
            validate(&p)
        };
        assert!(with(vec![shape("a"), shape("b")], 1).is_ok());
        let err = with(vec![shape("a")], 1).unwrap_err();
        assert_eq!(err.what, "call_rules[0].when.kind");
        let err = with(vec![shape("a"), shape("a")], 0).unwrap_err();
        assert_eq!(err.what, "token_shapes[1].name");
        let err = with(vec![shape("url")], 0).unwrap_err();
        assert_eq!(err.what, "token_shapes[0].name");
        let err = with(vec![shape("token")], 0).unwrap_err();
        assert_eq!(err.what, "token_shapes[0].name");
    }

    #[test]
    fn token_tests_are_refused_in_grants_and_checked_in_rules() {
        use crate::policy::{CallRule, RuleEffect};
        use crate::tokens::TokenOrigin as O;
        let tokens = |param, from: Vec<O>| Cond::Tokens {
            param,
            quant: crate::value::Quant::Any,
            kind: None,
            from,
        };
        let err = validate(&policy_with(tokens(0, vec![O::Elsewhere]))).unwrap_err();
        assert_eq!(err.what, "grants[0].args[0]");
        assert!(
            err.problem.contains("may not test token origins"),
            "{}",
            err.problem
        );
        let rule = |c| {
            let mut p = policy_with(Cond::TRUE);
            p.call_rules.push(CallRule {
                name: "r".into(),
                effect: RuleEffect::Deny,
                tool: 0,
                when: c,
            });
            validate(&p)
        };
        assert!(rule(tokens(0, vec![O::Task, O::Elsewhere])).is_ok());
        for bad in [vec![], vec![O::Elsewhere, O::Task], vec![O::Task, O::Task]] {
            let err = rule(tokens(0, bad)).unwrap_err();
            assert_eq!(err.what, "call_rules[0].when.from");
        }
        assert_eq!(
            rule(tokens(1, vec![O::Task])).unwrap_err().what,
            "call_rules[0].when.param"
        );
    }

    #[test]
    fn delegation_cycles_are_found_in_linear_time() {
        let mut p = Policy::empty("p");
        for i in 1..2_000 {
            p.agents.push(crate::policy::Agent {
                name: format!("a{i}"),
                parent: Some(i - 1),
                scope: None,
                own_context: false,
            });
        }
        assert!(validate(&p).is_ok());
        // Close a loop between the last two.
        p.agents[1_998].parent = Some(1_999);
        let err = validate(&p).unwrap_err();
        assert_eq!(err.problem, "the delegation chain has a cycle");
    }
}

#[cfg(test)]
mod limits {
    use super::*;
    use crate::label::{CategorySet, Label};
    use crate::policy::{Agent, Grant, Param, Quota, Tool};
    use crate::value::ParamType;

    fn tool(name: &str, params: &[&str], output: Label) -> Tool {
        Tool {
            name: name.into(),
            params: params
                .iter()
                .map(|p| Param {
                    name: p.to_string(),
                    ty: ParamType::Str,
                    list: false,
                    optional: false,
                    fields: Vec::new(),
                })
                .collect(),
            resource: None,
            sinks: vec![],
            output,
            sanitizer: None,
            facts: vec![],
        }
    }

    fn agent(name: &str, parent: Option<usize>) -> Agent {
        Agent {
            name: name.into(),
            parent,
            scope: None,
            own_context: false,
        }
    }

    fn what(p: &Policy) -> String {
        validate(p).map_or_else(|e| e.what, |()| "ok".into())
    }

    #[test]
    fn indexes_must_be_below_the_length() {
        let mut p = Policy::empty("p");
        p.levels = vec!["l0".into(), "l1".into()];
        p.tools
            .push(tool("t", &[], Label::new(1, CategorySet::EMPTY, true)));
        assert_eq!(what(&p), "ok");
        p.tools[0].output.sensitivity = 2;
        let err = validate(&p).unwrap_err();
        assert_eq!(err.what, "tools[0].output.sensitivity");
        assert_eq!(err.problem, "index 2 is out of range (2 levels)");
        assert_eq!(
            err.to_string(),
            "tools[0].output.sensitivity: index 2 is out of range (2 levels)"
        );
    }

    #[test]
    fn output_fields_are_checked() {
        use crate::policy::OutputField;
        let mut p = Policy::empty("p");
        p.levels = vec!["l0".into()];
        p.tools.push(tool("t", &[], Label::BOTTOM));
        let field = |tool: usize, path: &[&str], sensitivity: u8| OutputField {
            tool,
            path: path.iter().map(|k| k.to_string()).collect(),
            label: Label::new(sensitivity, CategorySet::EMPTY, true),
        };
        p.output_fields = vec![field(0, &["a"], 0), field(0, &["a", "b"], 0)];
        assert_eq!(what(&p), "ok");
        p.output_fields = vec![field(1, &["a"], 0)];
        assert_eq!(what(&p), "output_fields[0].tool");
        p.output_fields = vec![field(0, &["a"], 1)];
        assert_eq!(what(&p), "output_fields[0].label.sensitivity");
        p.output_fields = vec![field(0, &[], 0)];
        assert_eq!(what(&p), "output_fields[0]");
        p.output_fields = vec![field(0, &["b"], 0), field(0, &["a"], 0)];
        assert_eq!(what(&p), "output_fields[1]");
        p.output_fields = vec![field(0, &["a"], 0), field(0, &["a"], 0)];
        assert_eq!(what(&p), "output_fields[1]");
    }

    #[test]
    fn levels_categories_and_agents_have_bounds() {
        let mut p = Policy::empty("p");
        p.levels = vec![];
        assert_eq!(what(&p), "levels");
        p.levels = (0..256).map(|i| format!("l{i}")).collect();
        assert_eq!(what(&p), "ok");
        p.levels.push("one too many".into());
        assert_eq!(what(&p), "levels");

        let mut p = Policy::empty("p");
        p.categories = (0..64).map(|i| format!("c{i}")).collect();
        assert_eq!(what(&p), "ok");
        p.categories.push("c64".into());
        assert_eq!(what(&p), "categories");

        let mut p = Policy::empty("p");
        p.agents
            .extend((1..u16::MAX as usize).map(|i| agent(&format!("a{i}"), Some(0))));
        assert_eq!(p.agents.len(), u16::MAX as usize);
        assert_eq!(what(&p), "ok");
        p.agents.push(agent("last", Some(0)));
        assert_eq!(what(&p), "agents");
    }

    #[test]
    fn labels_name_only_declared_categories() {
        let mut p = Policy::empty("p");
        p.categories = vec!["a".into(), "b".into()];
        p.tools
            .push(tool("t", &[], Label::new(0, CategorySet(0b11), false)));
        assert_eq!(what(&p), "ok");
        p.tools[0].output.categories = CategorySet(0b100);
        assert_eq!(what(&p), "tools[0].output.categories");
        // With all 64 declared, every bit is a declared category.
        p.categories = (0..64).map(|i| format!("c{i}")).collect();
        p.tools[0].output.categories = CategorySet(1 << 63 | 1);
        assert_eq!(what(&p), "ok");
        p.categories.truncate(63);
        assert_eq!(what(&p), "tools[0].output.categories");
    }

    #[test]
    fn names_are_declared_once() {
        let mut p = Policy::empty("p");
        p.tools.push(tool("t", &["a", "b"], Label::BOTTOM));
        p.tools.push(tool("u", &["a"], Label::BOTTOM));
        p.agents.push(agent("helper", Some(0)));
        assert_eq!(what(&p), "ok");
        p.tools[1].name = "t".into();
        assert_eq!(what(&p), "tools[1].name");
        p.tools[1].name = "u".into();
        let again = p.tools[1].params[0].clone();
        p.tools[1].params.push(again);
        assert_eq!(what(&p), "tools[1].params[1].name");
        p.tools[1].params.pop();
        p.agents.push(agent("helper", Some(0)));
        assert_eq!(what(&p), "agents[2].name");
    }

    #[test]
    fn a_resource_pattern_needs_a_resource_parameter() {
        let mut p = Policy::empty("p");
        p.tools.push(tool("t", &["path"], Label::BOTTOM));
        p.grants.push(Grant {
            name: "g".into(),
            agent: 0,
            tool: 0,
            resource: None,
            args: vec![],
            quota: Quota::Unlimited,
            approval: false,
            expires_at: None,
            discovers: None,
        });
        assert_eq!(what(&p), "ok");
        p.grants[0].resource = Some(crate::pattern::Pattern::Prefix("/a/".into()));
        assert_eq!(what(&p), "grants[0].resource");
        p.tools[0].resource = Some(0);
        assert_eq!(what(&p), "ok");
    }

    #[test]
    fn shared_grants_are_limited_ascending_and_uniquely_named() {
        let mut p = Policy::empty("p");
        p.tools.push(tool("t", &["a"], Label::BOTTOM));
        let g = |name: &str, quota| Grant {
            name: name.into(),
            agent: 0,
            tool: 0,
            resource: None,
            args: vec![],
            quota,
            approval: false,
            expires_at: None,
            discovers: None,
        };
        p.grants = vec![g("a", Quota::Limited(2)), g("b", Quota::Limited(1))];
        p.shared_grants = vec![0, 1];
        assert_eq!(what(&p), "ok");
        assert!(p.is_shared(1) && !p.is_shared(2));
        p.shared_grants = vec![1, 0];
        assert_eq!(what(&p), "shared_grants[1]");
        p.shared_grants = vec![0, 0];
        assert_eq!(what(&p), "shared_grants[1]");
        p.shared_grants = vec![2];
        assert_eq!(what(&p), "shared_grants[0]");
        p.shared_grants = vec![1];
        p.grants[1].quota = Quota::Unlimited;
        let err = validate(&p).unwrap_err();
        assert_eq!(err.what, "shared_grants[0]");
        assert!(err.problem.contains("nothing to share"), "{err}");
        p.grants[1].quota = Quota::Limited(1);
        p.grants[0].name = "b".into();
        let err = validate(&p).unwrap_err();
        assert!(err.problem.contains("same name"), "{err}");
    }

    #[test]
    fn budgets_spend_a_scalar_number_ascending_and_not_negative() {
        use crate::policy::Budget;
        use crate::value::ParamType;
        let mut p = Policy::empty("p");
        p.tools.push(tool("t", &["a", "n"], Label::BOTTOM));
        p.tools[0].params[1].ty = ParamType::Decimal;
        let g = |name: &str| Grant {
            name: name.into(),
            agent: 0,
            tool: 0,
            resource: None,
            args: vec![],
            quota: Quota::Unlimited,
            approval: false,
            expires_at: None,
            discovers: None,
        };
        p.grants = vec![g("a"), g("b")];
        let budget = |grant, param, amount: &str| Budget {
            grant,
            amount: amount.parse().unwrap(),
            param,
            per_tenant: false,
        };
        p.budgets = vec![budget(0, 1, "10.5"), budget(1, 1, "0")];
        assert_eq!(what(&p), "ok");
        assert_eq!(p.budget_of(1).map(|b| b.grant), Some(1));
        assert!(p.budget_of(2).is_none() && !p.has_tenant_budgets());
        p.budgets = vec![budget(1, 1, "1"), budget(0, 1, "1")];
        assert_eq!(what(&p), "budgets[1]");
        p.budgets = vec![budget(2, 1, "1")];
        assert_eq!(what(&p), "budgets[0].grant");
        p.budgets = vec![budget(0, 2, "1")];
        assert_eq!(what(&p), "budgets[0].param");
        p.budgets = vec![budget(0, 0, "1")];
        let err = validate(&p).unwrap_err();
        assert_eq!(err.what, "budgets[0].param");
        assert!(err.problem.contains("`decimal` or `int`"), "{err}");
        p.budgets = vec![budget(0, 1, "-1")];
        assert_eq!(what(&p), "budgets[0].amount");
        p.budgets = vec![budget(0, 1, "1")];
        p.budgets[0].per_tenant = true;
        assert_eq!(what(&p), "ok");
        assert!(p.has_tenant_budgets());
        p.grants[1].name = "a".into();
        let err = validate(&p).unwrap_err();
        assert!(err.problem.contains("same name"), "{err}");
    }

    #[test]
    fn delegates_need_a_delegator_that_exists() {
        let mut p = Policy::empty("p");
        p.agents.push(agent("a", Some(0)));
        p.agents.push(agent("b", Some(1)));
        p.agents.push(agent("c", Some(1)));
        assert_eq!(what(&p), "ok");
        p.agents[2].parent = Some(4);
        assert_eq!(what(&p), "agents[2].parent");
        p.agents[2].parent = None;
        assert_eq!(what(&p), "agents[2].parent");
        p.agents[2].parent = Some(2);
        let err = validate(&p).unwrap_err();
        assert_eq!(
            (err.what.as_str(), err.problem.as_str()),
            ("agents[2].parent", "the delegation chain has a cycle")
        );
        p.agents[0].parent = Some(0);
        assert_eq!(what(&p), "agents[0]");
    }
}
