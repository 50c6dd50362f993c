//! The finite alphabet of a bounded check: concrete calls, one per call
//! class of `agenra_certify::classes` (what the ledger and the rules can
//! tell apart about a call), each with what a `succeeded` result of it
//! reports.

use crate::step::{CallInputs, SymLabel};
use agenra_certify::classes;
use agenra_core::label::Label;
use agenra_core::policy::{AgentId, FactId, Policy, ToolId};
use agenra_core::spec::Request;
use agenra_core::value::{ArgOp, Value};
use agenra_core::Decimal;
use serde_json::json;
use std::collections::BTreeSet;

/// One concrete call the bounded search may make.
#[derive(Clone, Debug)]
pub struct Letter {
    /// The calling agent.
    pub agent: AgentId,
    /// The tool.
    pub tool: ToolId,
    /// Arguments in parameter order (`Value::Null`: absent).
    pub args: Vec<Value>,
    /// The call's time (seconds).
    pub time: u64,
    /// The join of the labels of the resources its resource argument
    /// matches.
    pub resource_label: Label,
    /// The output a `succeeded` result reports (passes every fact test of
    /// the tool that some output can pass).
    pub output: serde_json::Value,
    /// The facts such a result establishes.
    pub facts: Vec<FactId>,
    /// Per discovered set of the policy: the call's strings that must be in
    /// it (a result of an earlier call discovers them).
    pub sets: Vec<BTreeSet<String>>,
}

impl Letter {
    /// The sets this call needs a value in.
    pub fn needs(&self) -> Vec<usize> {
        (0..self.sets.len())
            .filter(|&s| !self.sets[s].is_empty())
            .collect()
    }

    /// The request the reference and the step encoding read.
    pub fn request(&self) -> Request {
        Request {
            agent: self.agent,
            tool: self.tool,
            args: self.args.clone(),
            time: self.time,
        }
    }

    /// The same call made by another agent.
    pub fn as_agent(&self, agent: AgentId) -> Letter {
        Letter {
            agent,
            ..self.clone()
        }
    }

    /// The arguments as the JSON object of a `call` event (absent
    /// optional arguments left out).
    pub fn args_json(&self, policy: &Policy) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        for (p, v) in policy.tools[self.tool].params.iter().zip(&self.args) {
            if *v != Value::Null {
                m.insert(p.name.clone(), agenra_certify::replay::to_json(v));
            }
        }
        m
    }
}

/// The alphabet, and the constructs it leaves out.
#[derive(Clone, Debug)]
pub struct Alphabet {
    /// The letters.
    pub letters: Vec<Letter>,
    /// The letters whose arguments must be in a discovered set (also in
    /// `letters`): a bounded trace calls them only after a result
    /// discovered their values.
    pub set_letters: Vec<Letter>,
    /// The call classes the letters come from (with their matching grants).
    pub classes: classes::Classes,
}

/// The join of the labels of the resources `req`'s resource argument matches.
pub use agenra_core::spec::reference::resource_label;

/// The letters of `policy`: one concrete call per call class (split by the
/// conditions of grants and rules), restricted to calls that need no
/// discovered-set membership.
pub fn alphabet(policy: &Policy) -> Result<Alphabet, classes::Unsupported> {
    let cls = classes::enumerate_witnesses(policy, policy)?;
    let mut letters = Vec::new();
    let mut set_letters = Vec::new();
    let n = cls.tested_sets.len();
    for c in &cls.classes {
        let mut l = letter(
            policy,
            c.agent,
            c.tool,
            c.witness.args.clone(),
            c.witness.time,
        );
        for (p, v) in c.witness.args.iter().enumerate() {
            for (el, &t) in c.witness.types.get(p).into_iter().flatten().enumerate() {
                let (mask, _) = classes::type_masks(t, n);
                if let Some(Value::Str(s)) = v.scalars().get(el) {
                    for (bit, &set) in cls.tested_sets.iter().enumerate() {
                        if mask & (1 << bit) != 0 {
                            if let Some(x) = l.sets.get_mut(set) {
                                x.insert(s.clone());
                            }
                        }
                    }
                }
            }
        }
        if !l.needs().is_empty() {
            set_letters.push(l.clone());
        }
        letters.push(l);
    }
    // A delegate may make any call its delegators can: the classes split
    // by agent conditions only for the agent they name, so the delegators'
    // witnesses are added for each delegate in whose scope they are.
    let mut i = 0;
    while i < letters.len() {
        for (d, agent) in policy.agents.iter().enumerate() {
            let l = &letters[i];
            if agent.parent != Some(l.agent) || !classes::in_scope(policy, d, l.tool) {
                continue;
            }
            if letters
                .iter()
                .any(|x| x.agent == d && x.tool == l.tool && x.args == l.args)
            {
                continue;
            }
            let mut copy = l.as_agent(d);
            copy.time = l.time;
            if !copy.needs().is_empty() {
                set_letters.push(copy.clone());
            }
            letters.push(copy);
        }
        i += 1;
    }
    Ok(Alphabet {
        letters,
        set_letters,
        classes: cls,
    })
}

/// A letter for a concrete call.
pub fn letter(
    policy: &Policy,
    agent: AgentId,
    tool: ToolId,
    args: Vec<Value>,
    time: u64,
) -> Letter {
    let req = Request {
        agent,
        tool,
        args,
        time,
    };
    let (output, facts) = fact_output(policy, tool);
    Letter {
        resource_label: resource_label(policy, &req),
        agent,
        tool,
        args: req.args,
        time,
        output,
        facts,
        sets: vec![BTreeSet::new(); policy.sets.len()],
    }
}

/// An output that passes as many of the tool's fact tests as one output
/// can (the first found for each pointer), and the facts it establishes.
fn fact_output(policy: &Policy, tool: ToolId) -> (serde_json::Value, Vec<FactId>) {
    let t = &policy.tools[tool];
    let mut out = serde_json::Value::Null;
    for rule in &t.facts {
        let Some(test) = &rule.when else { continue };
        if test.holds(&out, &[]) {
            continue;
        }
        for cand in candidates(&test.op) {
            let mut trial = out.clone();
            if put(&mut trial, &test.pointer, cand) && test.holds(&trial, &[]) {
                out = trial;
                break;
            }
        }
    }
    let facts = t
        .facts
        .iter()
        .filter(|r| r.when.as_ref().is_none_or(|w| w.holds(&out, &[])))
        .map(|r| r.fact)
        .collect();
    (out, facts)
}

fn candidates(op: &ArgOp) -> Vec<serde_json::Value> {
    let num = |d: &Decimal, delta: i64| -> serde_json::Value {
        let s = d.to_string();
        match s.parse::<i64>() {
            Ok(i) => json!(i.saturating_add(delta)),
            Err(_) => json!(s),
        }
    };
    let v = |x: &Value| agenra_certify::replay::to_json(x);
    match op {
        ArgOp::Eq(x) | ArgOp::Contains(x) => vec![v(x), json!([v(x)])],
        ArgOp::In(xs) => xs.iter().map(v).collect(),
        ArgOp::Ne(_) | ArgOp::NotIn(_) => vec![json!("x"), json!(0), json!(true), json!(false)],
        ArgOp::Prefix(s) | ArgOp::Suffix(s) => vec![json!(s)],
        ArgOp::Matches(p) => vec![json!(match p {
            agenra_core::Pattern::Exact(s) | agenra_core::Pattern::Prefix(s) => s.clone(),
            agenra_core::Pattern::Glob(g) => g.replace('*', "").replace('?', "x"),
        })],
        ArgOp::Lt(d) => vec![num(d, -1)],
        ArgOp::Le(d) | ArgOp::Ge(d) => vec![num(d, 0)],
        ArgOp::Gt(d) => vec![num(d, 1)],
        ArgOp::InSet(_) | ArgOp::NotInSet(_) | ArgOp::Field { .. } => vec![],
    }
}

/// Writes `value` at a JSON pointer, creating objects on the way.
fn put(root: &mut serde_json::Value, pointer: &str, value: serde_json::Value) -> bool {
    if pointer.is_empty() {
        *root = value;
        return true;
    }
    let mut cur = root;
    let parts: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|p| p.replace("~1", "/").replace("~0", "~"))
        .collect();
    for (i, part) in parts.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        let Some(obj) = cur.as_object_mut() else {
            return false;
        };
        if i + 1 == parts.len() {
            obj.insert(part.clone(), value);
            return true;
        }
        cur = obj.entry(part.clone()).or_insert(json!({}));
    }
    false
}

/// What the bounded encoding reads of a letter: agent, tool, time,
/// resource label, which arguments are absent, the facts its result
/// establishes, the sets it needs values in, and every condition of the
/// step (flow, receive and call rules' `when`, path and reset steps'
/// `where`, grants' matches) evaluated with each agent of its delegation
/// chain as the caller (delegation safety asks the delegator the same
/// call). Two letters with the same signature give the same terms.
fn signature(policy: &Policy, l: &Letter) -> Vec<u64> {
    let mut out = vec![
        l.agent as u64,
        l.tool as u64,
        l.time,
        l.resource_label.sensitivity as u64,
        u64::from(l.resource_label.trusted),
    ];
    out.extend(
        (0..policy.categories.len()).map(|c| u64::from(l.resource_label.categories.contains(c))),
    );
    out.extend(l.args.iter().map(|v| u64::from(*v == Value::Null)));
    out.push(u64::MAX);
    out.extend(l.facts.iter().map(|&f| f as u64));
    out.push(u64::MAX);
    out.extend(l.needs().into_iter().map(|s| s as u64));
    for agent in policy.chain_iter(l.agent) {
        let c = letter_inputs(policy, &l.as_agent(agent));
        let bits = c
            .flow_when
            .iter()
            .chain(&c.receive_when)
            .chain(&c.call_when)
            .chain(c.step_when.iter().flatten())
            .chain(&c.reset_when)
            .chain(&c.grant_match);
        out.push(u64::MAX);
        out.extend(bits.map(|b| match b.as_bool() {
            Some(true) => 1,
            Some(false) => 0,
            None => 2,
        }));
    }
    out
}

/// The letters with distinct signatures (`signature`), the first of each kept (in
/// order). The bounded encoding cannot tell two letters of one signature
/// apart — every term it builds from a letter is a function of the
/// signature — so a trace over the full alphabet has a trace over the kept
/// letters with the same decisions and labels at every step, and the
/// reverse: the searches over the smaller alphabet are exact.
pub fn distinct(policy: &Policy, letters: &[Letter]) -> Vec<Letter> {
    let mut seen = std::collections::HashSet::new();
    letters
        .iter()
        .filter(|l| seen.insert(signature(policy, l)))
        .cloned()
        .collect()
}

/// Whether a call of `l` can ever be admitted: every agent on its
/// delegation chain has a grant of its tool that matches it (quota aside),
/// and no `deny call` rule holds on it. A letter for which this fails is
/// DENIED in every state, and a denied step changes nothing later steps
/// read (no units taken, no history advanced, no result, no label merged;
/// admission numbers only shift, which keeps their order): removing such
/// steps from a trace keeps every later decision and label. Every
/// violation the bounded searches look for ends in a call that is admitted
/// (or, for taint monotonicity, admitted in the second run), so they range
/// over the letters that can be admitted only.
pub fn may_be_admitted(policy: &Policy, l: &Letter) -> bool {
    let c = letter_inputs(policy, l);
    let granted = policy.chain_iter(l.agent).all(|agent| {
        policy.grants.iter().enumerate().any(|(g, x)| {
            x.agent == agent && x.tool == l.tool && c.grant_match[g].as_bool() != Some(false)
        })
    });
    let denied = policy.call_rules.iter().enumerate().any(|(i, r)| {
        r.tool == l.tool
            && r.effect == agenra_core::policy::RuleEffect::Deny
            && c.call_when[i].as_bool() == Some(true)
    });
    granted && !denied
}

/// Per letter, the constant conditions of a call (`when`, grant matches).
pub(crate) fn letter_inputs(policy: &Policy, l: &Letter) -> CallInputs {
    let b = SymLabel::bottom(policy);
    let sinks = vec![b.clone(); policy.tools[l.tool].sinks.len()];
    CallInputs::concrete(policy, &l.request(), &l.sets, sinks, b.clone(), b, 0)
}
