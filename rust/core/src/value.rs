//! Argument values, parameter types, argument tests and conditions.
//!
//! Values are scalars (strings, integers, booleans, exact decimals), lists
//! of scalars, or `null` (an optional argument that is absent). Tests on a
//! list are quantified: by default a test holds only if it holds for every
//! element (`all`), or for some element with an explicit `any`. Lists are
//! never joined into strings.

use crate::ids::AgentId;
use crate::pattern::Pattern;
use crate::tokens::{
    text_tokens_with, NoSources, Token, TokenJudge, TokenKind, TokenOrigin, TokenShape,
};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::fmt;

pub use crate::decimal::Decimal;

/// The scalar type of a tool parameter (a parameter may also be a list of
/// it, or optional: see `policy::Param`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ParamType {
    /// `string`.
    Str,
    /// `int`: a 64-bit signed integer.
    Int,
    /// `bool`.
    Bool,
    /// `decimal`: exact fixed point, never a binary float.
    Decimal,
    /// An object with named fields (`{oldText: string, newText: string}`):
    /// the fields are the parameter's `fields` (`policy::Param::fields`).
    /// Tests apply to its scalar fields (`ArgOp::Field`), never to it.
    Object,
}

impl ParamType {
    /// The type's name in the policy language (`string`, `int`, `bool`, `decimal`).
    pub fn name(self) -> &'static str {
        match self {
            ParamType::Str => "string",
            ParamType::Int => "int",
            ParamType::Bool => "bool",
            ParamType::Decimal => "decimal",
            ParamType::Object => "object",
        }
    }

    /// Whether a test written for `operand` applies to this type (integers
    /// and decimals compare with each other).
    pub fn accepts(self, operand: ParamType) -> bool {
        self == operand || (self.is_numeric() && operand.is_numeric())
    }

    /// Whether it is `int` or `decimal`: the types that compare by value with `<`, `<=`, `>`, `>=`.
    pub fn is_numeric(self) -> bool {
        matches!(self, ParamType::Int | ParamType::Decimal)
    }
}

impl fmt::Display for ParamType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An argument value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Value {
    /// A string.
    Str(String),
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// An exact decimal; equal to an integer of the same value.
    Decimal(Decimal),
    /// A list of scalars of one type.
    List(Vec<Value>),
    /// An absent optional argument (or an explicit JSON `null` for one).
    Null,
    /// An object of a declared shape: every declared field, by name (an
    /// absent optional field is `Null`); never a field it does not declare.
    Object(std::collections::BTreeMap<String, Value>),
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Str(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Str(s)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Value {
        Value::Int(i)
    }
}

impl From<i32> for Value {
    fn from(i: i32) -> Value {
        Value::Int(i64::from(i))
    }
}

impl From<u32> for Value {
    fn from(i: u32) -> Value {
        Value::Int(i64::from(i))
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

impl From<Decimal> for Value {
    fn from(d: Decimal) -> Value {
        Value::Decimal(d)
    }
}

/// A list argument (`list<T>` parameters).
impl<T: Into<Value>> From<Vec<T>> for Value {
    fn from(items: Vec<T>) -> Value {
        Value::List(items.into_iter().map(Into::into).collect())
    }
}

/// `None` is an absent optional argument.
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::Null, Into::into)
    }
}

/// Why a JSON value is not a value of the parameter's type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeMismatch {
    /// What the JSON held, e.g. "string", "a non-integer number".
    pub got: String,
}

impl Value {
    /// The typed tokens of an argument (`crate::tokens`): of a string, or
    /// of each string of a list; other values carry none. Built-in kinds
    /// only: [`Value::tokens_with`] adds declared shapes.
    pub fn tokens(&self) -> Vec<Token> {
        self.tokens_with(&[])
    }

    /// [`Value::tokens`], with the tokens of the policy's declared shapes.
    pub fn tokens_with(&self, shapes: &[TokenShape]) -> Vec<Token> {
        let mut out = Vec::new();
        match self {
            Value::Str(s) => text_tokens_with(s, shapes, &mut out),
            Value::List(items) => {
                for i in items {
                    if let Value::Str(s) = i {
                        text_tokens_with(s, shapes, &mut out);
                    }
                }
            }
            _ => {}
        }
        out
    }

    /// The scalar type of a scalar value (`None` for lists and null).
    pub fn ty(&self) -> Option<ParamType> {
        match self {
            Value::Str(_) => Some(ParamType::Str),
            Value::Int(_) => Some(ParamType::Int),
            Value::Bool(_) => Some(ParamType::Bool),
            Value::Decimal(_) => Some(ParamType::Decimal),
            Value::List(_) | Value::Null | Value::Object(_) => None,
        }
    }

    /// The text of a string value (`None` for any other value).
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The numeric value of an integer or a decimal.
    pub fn as_decimal(&self) -> Option<Decimal> {
        match self {
            Value::Int(i) => Some(Decimal::from(*i)),
            Value::Decimal(d) => Some(*d),
            _ => None,
        }
    }

    /// The value at a field path (`edits.newText` is `["newText"]` on
    /// `edits`): on an object, its field (`Null` when absent); on a list,
    /// the list of each element's value, lists flattened into it (so a
    /// test on a field of a list of objects is a test on a list); `Null`
    /// on anything else. The empty path is the value itself.
    pub fn project(&self, path: &[String]) -> Value {
        let Some((first, rest)) = path.split_first() else {
            return self.clone();
        };
        match self {
            Value::Object(fields) => fields.get(first).map_or(Value::Null, |v| v.project(rest)),
            Value::List(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    match item.project(path) {
                        Value::List(inner) => out.extend(inner),
                        other => out.push(other),
                    }
                }
                Value::List(out)
            }
            _ => Value::Null,
        }
    }

    /// The scalars of this value: the elements of a list, or itself.
    #[inline]
    pub fn scalars(&self) -> &[Value] {
        match self {
            Value::List(items) => items,
            other => std::slice::from_ref(other),
        }
    }

    /// Converts a JSON scalar without a declared type (output fields, task
    /// values): strings, booleans, integers, other numbers as exact decimals
    /// where the JSON text is unambiguous, `null`. `None` for arrays,
    /// objects and numbers beyond exact precision.
    pub fn from_json(v: &serde_json::Value) -> Option<Value> {
        match v {
            serde_json::Value::String(s) => Some(Value::Str(s.clone())),
            serde_json::Value::Bool(b) => Some(Value::Bool(*b)),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => Some(Value::Int(i)),
                None => Decimal::from_json_number(n).map(Value::Decimal),
            },
            serde_json::Value::Null => Some(Value::Null),
            _ => None,
        }
    }

    /// Converts a JSON argument to a value of scalar type `ty` (a list of
    /// them when `list`). Decimals accept JSON integers, JSON numbers whose
    /// shortest form has at most 15 significant digits, and strings such as
    /// `"98.70"` (exact). `null` is never accepted here: the caller decides
    /// what an absent or null argument means.
    #[inline]
    pub fn from_json_typed(
        v: &serde_json::Value,
        ty: ParamType,
        list: bool,
    ) -> Result<Value, TypeMismatch> {
        if list {
            let serde_json::Value::Array(items) = v else {
                return Err(TypeMismatch {
                    got: json_type_name(v).into(),
                });
            };
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let scalar = Self::scalar_typed(item, ty).map_err(|e| TypeMismatch {
                    got: format!("element {i} is {}", e.got),
                })?;
                out.push(scalar);
            }
            return Ok(Value::List(out));
        }
        Self::scalar_typed(v, ty)
    }

    #[inline]
    fn scalar_typed(v: &serde_json::Value, ty: ParamType) -> Result<Value, TypeMismatch> {
        let got = || TypeMismatch {
            got: json_type_name(v).into(),
        };
        match (ty, v) {
            (ParamType::Str, serde_json::Value::String(s)) => Ok(Value::Str(s.clone())),
            (ParamType::Bool, serde_json::Value::Bool(b)) => Ok(Value::Bool(*b)),
            (ParamType::Int, serde_json::Value::Number(n)) => {
                n.as_i64().map(Value::Int).ok_or_else(got)
            }
            (ParamType::Decimal, serde_json::Value::Number(n)) => match n.as_i64() {
                Some(i) => Ok(Value::Decimal(Decimal::from(i))),
                None => Decimal::from_json_number(n)
                    .map(Value::Decimal)
                    .ok_or_else(|| TypeMismatch {
                        got: "a number beyond exact decimal precision (pass it as a string)".into(),
                    }),
            },
            (ParamType::Decimal, serde_json::Value::String(s)) => s
                .parse::<Decimal>()
                .map(Value::Decimal)
                .map_err(|e| TypeMismatch {
                    got: format!("string {s:?} ({e})"),
                }),
            _ => Err(got()),
        }
    }
}

/// Names the JSON type of an argument that has the wrong type.
pub fn json_type_name(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "bool",
        serde_json::Value::Number(n) if n.is_i64() => "int",
        serde_json::Value::Number(n) if n.is_u64() => "an integer beyond the 64-bit signed range",
        serde_json::Value::Number(_) => "a non-integer number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Str(s) => write!(f, "{s:?}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Decimal(d) => write!(f, "{d}"),
            Value::List(items) => {
                f.write_str("[")?;
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_str("]")
            }
            Value::Null => f.write_str("null"),
            Value::Object(fields) => {
                f.write_str("{")?;
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k:?}: {v}")?;
                }
                f.write_str("}")
            }
        }
    }
}

/// Equality as tests see it: integers and decimals compare by value.
pub fn values_equal(a: &Value, b: &Value) -> bool {
    match (a.as_decimal(), b.as_decimal()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// Index of a discovered-resource set in the policy's `sets` list.
pub type SetId = usize;

/// A test on one scalar value (or, for `Contains` and the null tests, on a
/// whole value).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ArgOp {
    /// `== V`; `== null` tests that an optional argument is absent.
    Eq(Value),
    /// `!= V`: the value has V's type and differs; `!= null`: present.
    Ne(Value),
    /// `in [V, ...]`: equal to one of the values.
    In(Vec<Value>),
    /// `not in [V, ...]`: a value of the operands' type, equal to none of them.
    NotIn(Vec<Value>),
    /// `starts_with S` on a string.
    Prefix(String),
    /// `ends_with S` on a string.
    Suffix(String),
    /// `matches PATTERN` on a string (exact, prefix or glob).
    Matches(Pattern),
    /// A string contains the substring; a list contains the element.
    Contains(Value),
    /// `< N`, on an integer or decimal.
    Lt(Decimal),
    /// `<= N`, on an integer or decimal.
    Le(Decimal),
    /// `> N`, on an integer or decimal.
    Gt(Decimal),
    /// `>= N`, on an integer or decimal.
    Ge(Decimal),
    /// Membership in a discovered-resource set (grown by results at run time).
    InSet(SetId),
    /// A string not in a discovered-resource set (true for an unknown set).
    NotInSet(SetId),
    /// `PARAM.FIELD OP`: the test `op` on the value at `path` in an object
    /// argument ([`Value::project`]): on a list of objects, a test on the
    /// list of their fields (every element, or some with `Quant::Any`).
    Field {
        /// Field names, outermost first (never empty in a compiled policy).
        path: Vec<String>,
        /// The test on the field's value.
        op: Box<ArgOp>,
    },
}

impl ArgOp {
    /// Whether the test looks at the whole value rather than at each scalar
    /// of a list: `contains` and the `null` tests.
    pub fn is_whole_value(&self) -> bool {
        match self {
            ArgOp::Field { op, .. } => op.is_whole_value(),
            _ => matches!(
                self,
                ArgOp::Contains(_) | ArgOp::Eq(Value::Null) | ArgOp::Ne(Value::Null)
            ),
        }
    }

    /// Evaluates the test on a scalar. `sets[i]` is the current content of
    /// discovered set `i`. A test applied to a value of the wrong type is
    /// false (the compiler rejects such policies; this keeps the monitor
    /// total).
    pub fn eval_scalar(&self, value: &Value, sets: &[BTreeSet<String>]) -> bool {
        let cmp = |bound: &Decimal, want: fn(Ordering) -> bool| {
            value.as_decimal().is_some_and(|d| want(d.cmp(bound)))
        };
        if let ArgOp::Field { path, op } = self {
            return op.eval(Quant::All, &value.project(path), sets);
        }
        match (self, value) {
            (_, Value::Null) => matches!(self, ArgOp::Eq(Value::Null)),
            (ArgOp::Eq(v), _) => values_equal(v, value),
            (ArgOp::Ne(Value::Null), _) => true,
            (ArgOp::Ne(v), _) => {
                let same_type = match (v.ty(), value.ty()) {
                    (Some(a), Some(b)) => a.accepts(b),
                    _ => false,
                };
                same_type && !values_equal(v, value)
            }
            (ArgOp::In(vs), _) => vs.iter().any(|v| values_equal(v, value)),
            (ArgOp::NotIn(vs), _) => {
                value.ty().is_some() && !vs.iter().any(|v| values_equal(v, value))
            }
            (ArgOp::Prefix(p), Value::Str(s)) => s.starts_with(p.as_str()),
            (ArgOp::Suffix(p), Value::Str(s)) => s.ends_with(p.as_str()),
            (ArgOp::Matches(p), Value::Str(s)) => p.matches(s),
            (ArgOp::Contains(Value::Str(sub)), Value::Str(s)) => s.contains(sub.as_str()),
            (ArgOp::Contains(v), Value::List(items)) => items.iter().any(|i| values_equal(v, i)),
            (ArgOp::Lt(n), _) => cmp(n, Ordering::is_lt),
            (ArgOp::Le(n), _) => cmp(n, Ordering::is_le),
            (ArgOp::Gt(n), _) => cmp(n, Ordering::is_gt),
            (ArgOp::Ge(n), _) => cmp(n, Ordering::is_ge),
            (ArgOp::InSet(set), Value::Str(s)) => sets.get(*set).is_some_and(|m| m.contains(s)),
            (ArgOp::NotInSet(set), Value::Str(s)) => sets.get(*set).is_none_or(|m| !m.contains(s)),
            _ => false,
        }
    }

    /// Evaluates the test on an argument: on each element of a list (all of
    /// them, or some with `Quant::Any`), on a scalar directly.
    pub fn eval(&self, quant: Quant, value: &Value, sets: &[BTreeSet<String>]) -> bool {
        if let ArgOp::Field { path, op } = self {
            return op.eval(quant, &value.project(path), sets);
        }
        match value {
            Value::List(items) if !self.is_whole_value() => match quant {
                Quant::All => items.iter().all(|v| self.eval_scalar(v, sets)),
                Quant::Any => items.iter().any(|v| self.eval_scalar(v, sets)),
            },
            _ => self.eval_scalar(value, sets),
        }
    }

    /// The scalar type this test applies to (`None`: any type).
    pub fn operand_type(&self) -> Option<ParamType> {
        match self {
            ArgOp::Eq(v) | ArgOp::Ne(v) => v.ty(),
            ArgOp::In(vs) | ArgOp::NotIn(vs) => vs.first().and_then(Value::ty),
            ArgOp::Contains(v) => v.ty(),
            ArgOp::Prefix(_)
            | ArgOp::Suffix(_)
            | ArgOp::Matches(_)
            | ArgOp::InSet(_)
            | ArgOp::NotInSet(_) => Some(ParamType::Str),
            ArgOp::Lt(_) | ArgOp::Le(_) | ArgOp::Gt(_) | ArgOp::Ge(_) => Some(ParamType::Decimal),
            ArgOp::Field { op, .. } => op.operand_type(),
        }
    }

    /// The test a field test applies, and the path it applies it at
    /// (`([], self)` for any other test).
    pub fn field_path(&self) -> (Vec<&str>, &ArgOp) {
        let mut path = Vec::new();
        let mut op = self;
        while let ArgOp::Field { path: p, op: inner } = op {
            path.extend(p.iter().map(String::as_str));
            op = inner;
        }
        (path, op)
    }

    /// The discovered set this test reads, if any.
    pub fn set(&self) -> Option<SetId> {
        match self {
            ArgOp::InSet(s) | ArgOp::NotInSet(s) => Some(*s),
            ArgOp::Field { op, .. } => op.set(),
            _ => None,
        }
    }
}

/// How a test applies to a list argument.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Quant {
    /// Every element (vacuously true on an empty list).
    #[default]
    All,
    /// Some element (false on an empty list).
    Any,
}

impl Quant {
    fn is_all(&self) -> bool {
        *self == Quant::All
    }
}

/// A condition on a call: argument tests combined with `and`, `or` and
/// `not`, and tests on the calling agent. `P` names the parameter: an index
/// into the tool's parameters (`usize`, for grants and call rules, which
/// name one tool) or a parameter name (`String`, for flow rules and path
/// steps, which apply to every tool; the monitor resolves them once per
/// policy). A test on a parameter the tool lacks is false.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum Cond<P> {
    /// A test on one argument.
    Test {
        /// The parameter tested (an index or a name, see [`Cond`]).
        param: P,
        /// How the test applies to a list argument (default: every element).
        #[serde(default, skip_serializing_if = "Quant::is_all")]
        quant: Quant,
        /// The test.
        op: ArgOp,
    },
    /// The calling agent is one of these.
    Agent(Vec<AgentId>),
    /// The condition does not hold (plain two-valued negation).
    Not(Box<Cond<P>>),
    /// All hold (true when empty).
    And(Vec<Cond<P>>),
    /// Some holds (false when empty).
    Or(Vec<Cond<P>>),
    /// A per-element test (`any x in LIST: BODY`, `all x in LIST: BODY`):
    /// `body` holds for some element (`Quant::Any`; false on an empty
    /// list) or for every element (`Quant::All`; true on an empty list) of
    /// the list argument `param`. An absent (`null`) or non-list argument,
    /// or a parameter the tool lacks, fails it whatever the quantifier.
    /// In `body`, [`Cond::Elem`] tests the element; bodies do not nest.
    Each {
        /// The list parameter (an index or a name, see [`Cond`]).
        param: P,
        /// Some element or every element.
        quant: Quant,
        /// The condition on each element.
        body: Box<Cond<P>>,
    },
    /// A test on the element of the innermost enclosing [`Cond::Each`]
    /// (false outside one).
    Elem(ArgOp),
    /// A token test (`any url in body from untrusted`): some token (with
    /// `Quant::Any`) or every token (`Quant::All`) of `kind` (any kind if
    /// `None`) extracted from the string argument `param` (each string of
    /// a list) has one of the origins `from` (`crate::tokens`). An absent
    /// (`null`) argument, or a parameter the tool lacks, fails it whatever
    /// the quantifier. `docs/semantics.md`, "Token provenance inside text".
    Tokens {
        /// The string (or list of strings) parameter.
        param: P,
        /// Some token or every token.
        quant: Quant,
        /// The kind of token (`None`: every kind).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kind: Option<TokenKind>,
        /// The origins the test accepts, strictly ascending, not empty.
        from: Vec<TokenOrigin>,
    },
}

/// A condition on one tool's parameters, by index.
pub type ArgCond = Cond<usize>;
/// A condition on parameters by name, for rules that apply to several tools.
pub type NamedCond = Cond<String>;

impl<P> Cond<P> {
    /// The condition that always holds (an empty `And`).
    pub const TRUE: Cond<P> = Cond::And(Vec::new());
    /// The condition that never holds (an empty `Or`).
    pub const FALSE: Cond<P> = Cond::Or(Vec::new());

    /// Every argument test in the condition, in order; a per-element test
    /// counts as a test of its list parameter.
    pub fn tests(&self) -> Vec<(&P, &ArgOp)> {
        fn go<'a, P>(c: &'a Cond<P>, list: Option<&'a P>, out: &mut Vec<(&'a P, &'a ArgOp)>) {
            match c {
                Cond::Test { param, op, .. } => out.push((param, op)),
                Cond::Elem(op) => {
                    if let Some(p) = list {
                        out.push((p, op));
                    }
                }
                Cond::Each { param, body, .. } => go(body, Some(param), out),
                Cond::Not(c) => go(c, list, out),
                Cond::And(cs) | Cond::Or(cs) => cs.iter().for_each(|c| go(c, list, out)),
                Cond::Agent(_) | Cond::Tokens { .. } => {}
            }
        }
        let mut out = Vec::new();
        go(self, None, &mut out);
        out
    }

    /// Whether the condition has a per-element test (`any x in LIST: ...`).
    pub fn has_each(&self) -> bool {
        let mut found = false;
        self.walk(&mut |c| found |= matches!(c, Cond::Each { .. }));
        found
    }

    /// Every token test in the condition: its parameter and origins.
    pub fn token_tests(&self) -> Vec<(&P, &[TokenOrigin])> {
        let mut out = Vec::new();
        self.walk(&mut |c| {
            if let Cond::Tokens { param, from, .. } = c {
                out.push((param, from.as_slice()));
            }
        });
        out
    }

    /// The kind of every token test that names one.
    pub fn token_kinds(&self) -> Vec<TokenKind> {
        let mut out = Vec::new();
        self.walk(&mut |c| {
            if let Cond::Tokens { kind: Some(k), .. } = c {
                out.push(*k);
            }
        });
        out
    }

    /// Whether the condition has a token test (`any url in body from ...`).
    pub fn has_tokens(&self) -> bool {
        let mut found = false;
        self.walk(&mut |c| found |= matches!(c, Cond::Tokens { .. }));
        found
    }

    /// Every agent named by an agent test.
    pub fn agents(&self) -> Vec<AgentId> {
        let mut out = Vec::new();
        self.walk(&mut |c| {
            if let Cond::Agent(a) = c {
                out.extend(a.iter().copied());
            }
        });
        out
    }

    fn walk<'a>(&'a self, f: &mut impl FnMut(&'a Cond<P>)) {
        f(self);
        match self {
            Cond::Not(c) => c.walk(f),
            Cond::Each { body, .. } => body.walk(f),
            Cond::And(cs) | Cond::Or(cs) => cs.iter().for_each(|c| c.walk(f)),
            Cond::Test { .. } | Cond::Agent(_) | Cond::Elem(_) | Cond::Tokens { .. } => {}
        }
    }
}

impl ArgCond {
    /// Evaluates the condition on a call's arguments (in parameter order)
    /// and calling agent, for a caller without a session: a token test
    /// judges every token [`TokenOrigin::Elsewhere`] ([`NoSources`]).
    pub fn eval(&self, args: &[Value], agent: AgentId, sets: &[BTreeSet<String>]) -> bool {
        self.eval_with(args, agent, sets, &NoSources)
    }

    /// `eval`, with the session's token origins for token tests.
    pub fn eval_with(
        &self,
        args: &[Value],
        agent: AgentId,
        sets: &[BTreeSet<String>],
        judge: &dyn TokenJudge,
    ) -> bool {
        self.eval_at(args, agent, sets, judge, None)
    }

    /// `eval`, with the element a per-element test is at (`None` outside one).
    fn eval_at(
        &self,
        args: &[Value],
        agent: AgentId,
        sets: &[BTreeSet<String>],
        judge: &dyn TokenJudge,
        elem: Option<&Value>,
    ) -> bool {
        match self {
            Cond::Tokens {
                param,
                quant,
                kind,
                from,
            } => match args.get(*param) {
                None | Some(Value::Null) => false,
                Some(v) => {
                    let tokens = v.tokens_with(judge.shapes());
                    let mut of_kind = tokens.iter().filter(|t| kind.is_none_or(|k| t.kind == k));
                    let accepted = |t: &Token| from.contains(&judge.origin(t));
                    match quant {
                        Quant::Any => of_kind.any(accepted),
                        Quant::All => of_kind.all(accepted),
                    }
                }
            },
            Cond::Test { param, quant, op } => {
                args.get(*param).is_some_and(|v| op.eval(*quant, v, sets))
            }
            Cond::Agent(agents) => agents.contains(&agent),
            Cond::Not(c) => !c.eval_at(args, agent, sets, judge, elem),
            Cond::And(cs) => cs.iter().all(|c| c.eval_at(args, agent, sets, judge, elem)),
            Cond::Or(cs) => cs.iter().any(|c| c.eval_at(args, agent, sets, judge, elem)),
            Cond::Each { param, quant, body } => match args.get(*param) {
                Some(Value::List(items)) => {
                    let one = |v: &Value| body.eval_at(args, agent, sets, judge, Some(v));
                    match quant {
                        Quant::Any => items.iter().any(one),
                        Quant::All => items.iter().all(one),
                    }
                }
                _ => false,
            },
            Cond::Elem(op) => elem.is_some_and(|v| op.eval_scalar(v, sets)),
        }
    }
}

impl NamedCond {
    /// The condition for one tool: names become indexes; a test on a
    /// parameter the tool lacks becomes false.
    pub fn resolve(&self, index_of: &impl Fn(&str) -> Option<usize>) -> ArgCond {
        match self {
            Cond::Test { param, quant, op } => match index_of(param) {
                Some(i) => Cond::Test {
                    param: i,
                    quant: *quant,
                    op: op.clone(),
                },
                None => Cond::FALSE,
            },
            Cond::Agent(a) => Cond::Agent(a.clone()),
            Cond::Elem(op) => Cond::Elem(op.clone()),
            Cond::Tokens {
                param,
                quant,
                kind,
                from,
            } => match index_of(param) {
                Some(i) => Cond::Tokens {
                    param: i,
                    quant: *quant,
                    kind: *kind,
                    from: from.clone(),
                },
                None => Cond::FALSE,
            },
            Cond::Each { param, quant, body } => match index_of(param) {
                Some(i) => Cond::Each {
                    param: i,
                    quant: *quant,
                    body: Box::new(body.resolve(index_of)),
                },
                None => Cond::FALSE,
            },
            Cond::Not(c) => Cond::Not(Box::new(c.resolve(index_of))),
            Cond::And(cs) => Cond::And(cs.iter().map(|c| c.resolve(index_of)).collect()),
            Cond::Or(cs) => Cond::Or(cs.iter().map(|c| c.resolve(index_of)).collect()),
        }
    }
}

// Beside `Value`, so that `decimal` needs nothing of this module.
impl Decimal {
    /// The exact decimal an argument holds: a decimal or an integer;
    /// `None` for any other value (a string, a list, an absent argument).
    pub fn of_value(v: &Value) -> Option<Decimal> {
        match v {
            Value::Decimal(d) => Some(*d),
            Value::Int(i) => Some(Decimal::from(*i)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    //! Every operator on its own, at its bounds: the monitor and the
    //! reference share `ArgOp::eval`, so the differential tests cannot catch
    //! a bug here.
    use super::*;
    use std::collections::BTreeSet;

    fn s(x: &str) -> Value {
        Value::Str(x.into())
    }
    fn d(x: &str) -> Decimal {
        x.parse().expect("a decimal")
    }
    fn holds(op: ArgOp, v: Value) -> bool {
        let sets = vec![BTreeSet::from(["ann@x".to_string()])];
        op.eval(Quant::All, &v, &sets)
    }

    #[test]
    fn equality_and_membership() {
        assert!(holds(ArgOp::Eq(s("a")), s("a")));
        assert!(!holds(ArgOp::Eq(s("a")), s("b")));
        assert!(holds(ArgOp::Eq(Value::Int(98)), Value::Decimal(d("98.00"))));
        assert!(holds(ArgOp::Ne(s("ceo@corp")), s("bob@corp")));
        assert!(!holds(ArgOp::Ne(s("ceo@corp")), s("ceo@corp")));
        assert!(
            !holds(ArgOp::Ne(s("1")), Value::Int(1)),
            "!= needs the same type"
        );
        assert!(holds(ArgOp::In(vec![s("a"), s("b")]), s("b")));
        assert!(!holds(ArgOp::In(vec![s("a"), s("b")]), s("c")));
        assert!(holds(ArgOp::NotIn(vec![s("a")]), s("c")));
        assert!(!holds(ArgOp::NotIn(vec![s("a")]), s("a")));
        assert!(holds(ArgOp::InSet(0), s("ann@x")));
        assert!(!holds(ArgOp::InSet(0), s("bob@x")));
        assert!(
            !holds(ArgOp::InSet(1), s("ann@x")),
            "an unknown set holds nothing"
        );
        assert!(holds(ArgOp::NotInSet(0), s("bob@x")));
        assert!(!holds(ArgOp::NotInSet(0), s("ann@x")));
    }

    #[test]
    fn strings() {
        assert!(holds(ArgOp::Prefix("/src/".into()), s("/src/a")));
        assert!(!holds(ArgOp::Prefix("/src/".into()), s("/etc/src/a")));
        assert!(holds(ArgOp::Suffix("@corp".into()), s("a@corp")));
        assert!(!holds(ArgOp::Suffix("@corp".into()), s("a@corp.evil")));
        assert!(holds(
            ArgOp::Matches(Pattern::Glob("*.pdf".into())),
            s("a.pdf")
        ));
        assert!(!holds(
            ArgOp::Matches(Pattern::Glob("*.pdf".into())),
            s("a.pdfx")
        ));
        assert!(holds(ArgOp::Contains(s("ell")), s("hello")));
        assert!(!holds(ArgOp::Contains(s("elo")), s("hello")));
        assert!(
            !holds(ArgOp::Prefix("1".into()), Value::Int(12)),
            "wrong type is false"
        );
    }

    #[test]
    fn numbers_at_their_bounds() {
        let n = |x: &str| Value::Decimal(d(x));
        assert!(holds(ArgOp::Lt(d("100")), n("99.99")));
        assert!(!holds(ArgOp::Lt(d("100")), n("100.00")));
        assert!(holds(ArgOp::Le(d("100")), n("100")));
        assert!(!holds(ArgOp::Le(d("100")), n("100.01")));
        assert!(holds(ArgOp::Gt(d("100")), n("100.01")));
        assert!(!holds(ArgOp::Gt(d("100")), Value::Int(100)));
        assert!(holds(ArgOp::Ge(d("100")), Value::Int(100)));
        assert!(!holds(ArgOp::Ge(d("100")), n("99.999")));
        assert!(!holds(ArgOp::Lt(d("100")), s("5")), "a string is no number");
    }

    #[test]
    fn null_and_lists() {
        assert!(holds(ArgOp::Eq(Value::Null), Value::Null));
        assert!(!holds(ArgOp::Eq(Value::Null), s("x")));
        assert!(holds(ArgOp::Ne(Value::Null), s("x")));
        assert!(!holds(ArgOp::Ne(Value::Null), Value::Null));
        assert!(!holds(ArgOp::Lt(d("1")), Value::Null));
        assert!(!holds(ArgOp::NotIn(vec![s("a")]), Value::Null));
        let list = Value::List(vec![s("a@corp"), s("b@evil")]);
        let sets: Vec<BTreeSet<String>> = vec![];
        let op = ArgOp::Suffix("@corp".into());
        assert!(!op.eval(Quant::All, &list, &sets));
        assert!(op.eval(Quant::Any, &list, &sets));
        assert!(op.eval(Quant::All, &Value::List(vec![]), &sets));
        assert!(!op.eval(Quant::Any, &Value::List(vec![]), &sets));
        // Whole-value tests ignore the quantifier.
        assert!(ArgOp::Contains(s("b@evil")).eval(Quant::All, &list, &sets));
        assert!(!ArgOp::Eq(Value::Null).eval(Quant::Any, &list, &sets));
    }

    #[test]
    fn conditions_combine_and_resolve() {
        let sets: Vec<BTreeSet<String>> = vec![];
        let args = [s("x"), Value::Int(5)];
        let t = |p: usize, op: ArgOp| Cond::Test {
            param: p,
            quant: Quant::All,
            op,
        };
        let yes = t(0, ArgOp::Eq(s("x")));
        let no = t(1, ArgOp::Gt(d("5")));
        assert!(
            Cond::And(vec![yes.clone(), Cond::Not(Box::new(no.clone()))]).eval(&args, 0, &sets)
        );
        assert!(!Cond::And(vec![yes.clone(), no.clone()]).eval(&args, 0, &sets));
        assert!(Cond::Or(vec![no.clone(), yes.clone()]).eval(&args, 0, &sets));
        assert!(!Cond::<usize>::FALSE.eval(&args, 0, &sets));
        assert!(Cond::<usize>::TRUE.eval(&args, 0, &sets));
        assert!(Cond::<usize>::Agent(vec![2]).eval(&args, 2, &sets));
        assert!(!Cond::<usize>::Agent(vec![2]).eval(&args, 1, &sets));
        assert!(
            !t(7, ArgOp::Eq(Value::Null)).eval(&args, 0, &sets),
            "no such argument"
        );
        let named = Cond::Test {
            param: "missing".to_string(),
            quant: Quant::All,
            op: ArgOp::Ne(s("y")),
        };
        assert_eq!(named.resolve(&|_| None), Cond::FALSE);
        assert!(
            Cond::Not(Box::new(named))
                .resolve(&|_| None)
                .eval(&args, 0, &sets),
            "a test on a parameter the tool lacks is false, and `!` negates it"
        );
    }

    #[test]
    fn names_conversions_and_rendering() {
        assert_eq!(ParamType::Decimal.to_string(), "decimal");
        assert_eq!(
            [ParamType::Str, ParamType::Int, ParamType::Bool].map(|t| t.name()),
            ["string", "int", "bool"]
        );
        assert!(ParamType::Int.accepts(ParamType::Decimal));
        assert!(!ParamType::Str.accepts(ParamType::Int));
        assert_eq!(s("a").as_str(), Some("a"));
        assert_eq!(Value::Int(1).as_str(), None);
        assert_eq!(
            Value::List(vec![s("a"), s("b")]).scalars(),
            &[s("a"), s("b")]
        );
        assert_eq!(s("a").scalars(), &[s("a")]);
        let j = |t: &str| serde_json::from_str::<serde_json::Value>(t).expect("json");
        assert_eq!(Value::from_json(&j(r#""x""#)), Some(s("x")));
        assert_eq!(Value::from_json(&j("true")), Some(Value::Bool(true)));
        assert_eq!(Value::from_json(&j("-3")), Some(Value::Int(-3)));
        assert_eq!(Value::from_json(&j("2.50")), Some(Value::Decimal(d("2.5"))));
        assert_eq!(Value::from_json(&j("null")), Some(Value::Null));
        assert_eq!(Value::from_json(&j("[1]")), None);
        assert_eq!(
            Value::from_json_typed(&j("false"), ParamType::Bool, false),
            Ok(Value::Bool(false))
        );
        assert_eq!(
            Value::from_json_typed(&j(r#"["a", 1]"#), ParamType::Str, true).map_err(|e| e.got),
            Err("element 1 is int".to_string())
        );
        for (text, name) in [
            ("null", "null"),
            ("true", "bool"),
            ("1", "int"),
            (
                "18446744073709551615",
                "an integer beyond the 64-bit signed range",
            ),
            ("1.5", "a non-integer number"),
            (r#""s""#, "string"),
            ("[]", "array"),
            ("{}", "object"),
        ] {
            assert_eq!(json_type_name(&j(text)), name, "{text}");
        }
        assert_eq!(
            Value::List(vec![s("a"), Value::Decimal(d("1.50")), Value::Null]).to_string(),
            r#"["a", 1.5, null]"#
        );
        assert_eq!(Value::List(vec![]).to_string(), "[]");
    }

    #[test]
    fn what_tests_read() {
        assert_eq!(ArgOp::Lt(d("1")).operand_type(), Some(ParamType::Decimal));
        assert_eq!(
            ArgOp::In(vec![Value::Int(1)]).operand_type(),
            Some(ParamType::Int)
        );
        assert_eq!(ArgOp::NotInSet(3).operand_type(), Some(ParamType::Str));
        assert_eq!(
            ArgOp::Contains(Value::Bool(true)).operand_type(),
            Some(ParamType::Bool)
        );
        assert_eq!(ArgOp::InSet(2).set(), Some(2));
        assert_eq!(ArgOp::NotInSet(4).set(), Some(4));
        assert_eq!(ArgOp::Eq(s("x")).set(), None);
        let c: Cond<usize> = Cond::And(vec![
            Cond::Test {
                param: 1,
                quant: Quant::Any,
                op: ArgOp::InSet(0),
            },
            Cond::Not(Box::new(Cond::Or(vec![
                Cond::Agent(vec![3, 4]),
                Cond::Test {
                    param: 2,
                    quant: Quant::All,
                    op: ArgOp::Eq(Value::Null),
                },
            ]))),
        ]);
        assert_eq!(
            c.tests(),
            vec![(&1, &ArgOp::InSet(0)), (&2, &ArgOp::Eq(Value::Null))]
        );
        assert_eq!(c.agents(), vec![3, 4]);
        // `all` is the default and is left out of the encoding; `any` is kept.
        let text = serde_json::to_string(&c).expect("serializes");
        assert!(text.contains(r#""quant":"Any""#), "{text}");
        assert_eq!(text.matches("quant").count(), 1, "{text}");
        assert_eq!(
            serde_json::from_str::<Cond<usize>>(&text).expect("decodes"),
            c
        );
    }
}
