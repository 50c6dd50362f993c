//! Independent expectations: written from `docs/semantics.md` and
//! `docs/policy-language.md`, not from `pattern.rs`, `value.rs`,
//! `decimal.rs` or `spec/` (which the monitor shares, so a bug there is
//! invisible to the spec-vs-monitor tests). Nothing here calls them: text
//! is compared character by character, globs by backtracking over
//! characters, numbers as exact fractions.

use agenra_core::policy::{AgentId, Grant, Quota};
use agenra_core::spec::Request;
use agenra_core::{ArgCond, ArgOp, Cond, Pattern, Policy, Quant, Value};
use agenra_lean::wire::decimal_parts;
use std::cmp::Ordering;
use std::collections::BTreeSet;

/// `*` any run of characters (none, `/`, anything), `?` exactly one
/// character, every other character itself; on characters, not bytes.
/// Exponential backtracking, obviously right.
pub fn glob(g: &str, t: &str) -> bool {
    let g: Vec<char> = g.chars().collect();
    let t: Vec<char> = t.chars().collect();
    fn go(g: &[char], t: &[char]) -> bool {
        match g.split_first() {
            None => t.is_empty(),
            Some(('*', rest)) => (0..=t.len()).any(|k| go(rest, &t[k..])),
            Some(('?', rest)) => !t.is_empty() && go(rest, &t[1..]),
            Some((c, rest)) => t.first() == Some(c) && go(rest, &t[1..]),
        }
    }
    go(&g, &t)
}

/// `s` begins with the characters of `p`.
pub fn starts_with(s: &str, p: &str) -> bool {
    let (s, p): (Vec<char>, Vec<char>) = (s.chars().collect(), p.chars().collect());
    p.len() <= s.len() && (0..p.len()).all(|i| s[i] == p[i])
}

/// `s` ends with the characters of `p`.
pub fn ends_with(s: &str, p: &str) -> bool {
    let (s, p): (Vec<char>, Vec<char>) = (s.chars().collect(), p.chars().collect());
    p.len() <= s.len() && (0..p.len()).all(|i| s[s.len() - p.len() + i] == p[i])
}

/// `sub` occurs in `s` at some character position.
pub fn contains(s: &str, sub: &str) -> bool {
    let (s, sub): (Vec<char>, Vec<char>) = (s.chars().collect(), sub.chars().collect());
    sub.len() <= s.len()
        && (0..=s.len() - sub.len()).any(|i| (0..sub.len()).all(|j| s[i + j] == sub[j]))
}

/// A resource pattern: exact name, prefix, or glob.
pub fn pattern(p: &Pattern, text: &str) -> bool {
    match p {
        Pattern::Exact(s) => s.chars().eq(text.chars()),
        Pattern::Prefix(s) => starts_with(text, s),
        Pattern::Glob(g) => glob(g, text),
    }
}

/// A number as the fraction `mantissa / 10^scale`.
fn fraction(v: &Value) -> Option<(i128, u32)> {
    match v {
        Value::Int(i) => Some((i128::from(*i), 0)),
        Value::Decimal(d) => Some(decimal_parts(d)),
        _ => None,
    }
}

/// Compares `a/10^x` with `b/10^y` by cross-multiplying (exact; the test
/// generators keep the products within `i128`).
pub fn compare_numbers(a: (i128, u32), b: (i128, u32)) -> Ordering {
    let (ma, sa) = a;
    let (mb, sb) = b;
    let scale = sa.max(sb);
    (ma * 10i128.pow(scale - sa)).cmp(&(mb * 10i128.pow(scale - sb)))
}

/// Equality "as tests see it": integers and decimals by value (an integer
/// equals a decimal of the same value); strings and booleans by content;
/// `null` equals `null`; lists element by element, where each element is
/// compared as a value of its own kind (the elements of `[1]` and `[1.0]`
/// are different values, an `int` and a `decimal`: the numeric rule applies
/// to the values a test compares, not inside lists).
pub fn equal(a: &Value, b: &Value) -> bool {
    if let (Some(x), Some(y)) = (fraction(a), fraction(b)) {
        return compare_numbers(x, y) == Ordering::Equal;
    }
    structural(a, b)
}

fn structural(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Decimal(_), Value::Decimal(_)) => {
            compare_numbers(fraction(a).unwrap(), fraction(b).unwrap()) == Ordering::Equal
        }
        (Value::Null, Value::Null) => true,
        (Value::List(xs), Value::List(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| structural(x, y))
        }
        (Value::Object(xs), Value::Object(ys)) => {
            xs.len() == ys.len()
                && xs
                    .iter()
                    .zip(ys)
                    .all(|((k, x), (l, y))| k == l && structural(x, y))
        }
        _ => false,
    }
}

/// The kind of a scalar: `Some` for strings, integers, booleans, decimals;
/// integers and decimals are one kind for `!=` ("compare by value").
fn kind(v: &Value) -> Option<u8> {
    match v {
        Value::Str(_) => Some(0),
        Value::Int(_) | Value::Decimal(_) => Some(1),
        Value::Bool(_) => Some(2),
        Value::List(_) | Value::Null | Value::Object(_) => None,
    }
}

/// The value at a field path (`docs/semantics.md`, "Objects"): a field of
/// an object (null when absent), the fields of a list's elements in
/// order (lists found there spliced in), null on anything else.
fn at_path(v: &Value, path: &[String]) -> Value {
    let Some((name, rest)) = path.split_first() else {
        return v.clone();
    };
    match v {
        Value::Object(fields) => match fields.get(name) {
            Some(x) => at_path(x, rest),
            None => Value::Null,
        },
        Value::List(items) => {
            let mut out = Vec::new();
            for item in items {
                match at_path(item, path) {
                    Value::List(xs) => out.extend(xs),
                    x => out.push(x),
                }
            }
            Value::List(out)
        }
        _ => Value::Null,
    }
}

/// A test on one scalar (not `null`, not a list).
fn scalar(op: &ArgOp, x: &Value, sets: &[BTreeSet<String>]) -> bool {
    let text = match x {
        Value::Str(s) => Some(s.as_str()),
        _ => None,
    };
    let num = |n: &agenra_core::Decimal, want: fn(Ordering) -> bool| {
        fraction(x).is_some_and(|f| want(compare_numbers(f, decimal_parts(n))))
    };
    match op {
        ArgOp::Eq(w) => equal(w, x),
        // "`!=` ... need[s] a value of the operand's type".
        ArgOp::Ne(w) => kind(w).is_some() && kind(w) == kind(x) && !equal(w, x),
        ArgOp::In(ws) => ws.iter().any(|w| equal(w, x)),
        // `not in [...]`: a scalar equal to none of them. The operand list's
        // type is not checked at run time (the compiler checks it).
        ArgOp::NotIn(ws) => kind(x).is_some() && !ws.iter().any(|w| equal(w, x)),
        ArgOp::Prefix(p) => text.is_some_and(|s| starts_with(s, p)),
        ArgOp::Suffix(p) => text.is_some_and(|s| ends_with(s, p)),
        ArgOp::Matches(p) => text.is_some_and(|s| pattern(p, s)),
        ArgOp::Contains(_) => unreachable!("contains looks at the whole value"),
        ArgOp::Lt(n) => num(n, |o| o == Ordering::Less),
        ArgOp::Le(n) => num(n, |o| o != Ordering::Greater),
        ArgOp::Gt(n) => num(n, |o| o == Ordering::Greater),
        ArgOp::Ge(n) => num(n, |o| o != Ordering::Less),
        ArgOp::InSet(k) => text.is_some_and(|s| sets.get(*k).is_some_and(|m| m.contains(s))),
        // A set the policy does not have holds nothing.
        ArgOp::NotInSet(k) => text.is_some_and(|s| sets.get(*k).is_none_or(|m| !m.contains(s))),
        ArgOp::Field { .. } => unreachable!("a field test reads its field first"),
    }
}

/// A test on an argument (`docs/semantics.md`, "Values and tests").
pub fn arg_op(op: &ArgOp, quant: Quant, v: &Value, sets: &[BTreeSet<String>]) -> bool {
    match op {
        // A test on a field is the test on the value at its path.
        ArgOp::Field { path, op } => arg_op(op, quant, &at_path(v, path), sets),
        // The three tests on the whole value.
        ArgOp::Eq(Value::Null) => matches!(v, Value::Null),
        ArgOp::Ne(Value::Null) => !matches!(v, Value::Null),
        ArgOp::Contains(w) => match (v, w) {
            (Value::Str(s), Value::Str(sub)) => contains(s, sub),
            (Value::List(items), _) => items.iter().any(|i| equal(w, i)),
            _ => false,
        },
        // "Any other test on null is false."
        _ if matches!(v, Value::Null) => false,
        _ => match v {
            Value::List(items) => match quant {
                Quant::All => items
                    .iter()
                    .all(|x| !matches!(x, Value::Null) && scalar(op, x, sets)),
                Quant::Any => items
                    .iter()
                    .any(|x| !matches!(x, Value::Null) && scalar(op, x, sets)),
            },
            x => scalar(op, x, sets),
        },
    }
}

/// A condition; a test on a parameter the call does not have is false.
pub fn arg_cond(c: &ArgCond, args: &[Value], agent: AgentId, sets: &[BTreeSet<String>]) -> bool {
    cond_at(c, args, agent, sets, None)
}

/// `arg_cond` at an element of a per-element test (`any x in L: ...`):
/// the body holds for some (every) element of the list argument; an
/// argument that is not a list fails it; an element test outside one is
/// false.
fn cond_at(
    c: &ArgCond,
    args: &[Value],
    agent: AgentId,
    sets: &[BTreeSet<String>],
    elem: Option<&Value>,
) -> bool {
    match c {
        Cond::Test { param, quant, op } => args
            .get(*param)
            .is_some_and(|v| arg_op(op, *quant, v, sets)),
        Cond::Agent(agents) => agents.contains(&agent),
        Cond::Not(c) => !cond_at(c, args, agent, sets, elem),
        Cond::And(cs) => cs.iter().all(|c| cond_at(c, args, agent, sets, elem)),
        Cond::Or(cs) => cs.iter().any(|c| cond_at(c, args, agent, sets, elem)),
        Cond::Each { param, quant, body } => {
            let Some(Value::List(items)) = args.get(*param) else {
                return false;
            };
            let mut hits = items
                .iter()
                .map(|x| cond_at(body, args, agent, sets, Some(x)));
            match quant {
                Quant::All => hits.all(|h| h),
                Quant::Any => hits.any(|h| h),
            }
        }
        // The element is tested as a scalar argument would be.
        Cond::Elem(op) => elem.is_some_and(|x| arg_op(op, Quant::All, x, sets)),
        // Token tests judge what the session read, not the arguments alone;
        // the generated policies carry none (`validate` refuses them in
        // grants), so this oracle does not model them.
        Cond::Tokens { .. } => false,
    }
}

/// A grant of `owner` serves a call when it is `owner`'s, for the call's
/// tool, not expired (it matches no call at time ≥ `expires`), its pattern
/// matches the call's resource (the string in the tool's resource
/// parameter; no such string: no match), and its conditions hold for the
/// calling agent.
pub fn grant_matches(
    p: &Policy,
    g: &Grant,
    owner: AgentId,
    req: &Request,
    sets: &[BTreeSet<String>],
) -> bool {
    let resource = p
        .tools
        .get(req.tool)
        .and_then(|t| t.resource)
        .and_then(|i| req.args.get(i))
        .and_then(|v| match v {
            Value::Str(s) => Some(s.as_str()),
            _ => None,
        });
    g.agent == owner
        && g.tool == req.tool
        && g.expires_at.is_none_or(|end| req.time < end)
        && match &g.resource {
            None => true,
            Some(pat) => resource.is_some_and(|r| pattern(pat, r)),
        }
        && g.args
            .iter()
            .all(|c| arg_cond(c, &req.args, req.agent, sets))
}

/// The first grant, in policy order, that matches and has a unit left.
pub fn select(
    p: &Policy,
    remaining: &[Quota],
    agent: AgentId,
    req: &Request,
    sets: &[BTreeSet<String>],
) -> Option<usize> {
    (0..p.grants.len()).find(|&g| {
        grant_matches(p, &p.grants[g], agent, req, sets)
            && match remaining.get(g) {
                Some(Quota::Unlimited) => true,
                Some(Quota::Limited(n)) => *n > 0,
                None => false,
            }
    })
}
