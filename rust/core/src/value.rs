//! Argument values, parameter types and argument predicates.

use crate::pattern::Pattern;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;

/// The type of a tool parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ParamType {
    Str,
    Int,
    Bool,
}

impl ParamType {
    pub fn name(self) -> &'static str {
        match self {
            ParamType::Str => "string",
            ParamType::Int => "int",
            ParamType::Bool => "bool",
        }
    }
}

impl fmt::Display for ParamType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A scalar argument value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Value {
    Str(String),
    Int(i64),
    Bool(bool),
}

impl Value {
    pub fn ty(&self) -> ParamType {
        match self {
            Value::Str(_) => ParamType::Str,
            Value::Int(_) => ParamType::Int,
            Value::Bool(_) => ParamType::Bool,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// Converts a JSON scalar; `None` for anything else (arrays, objects,
    /// null, non-integral numbers).
    pub fn from_json(v: &serde_json::Value) -> Option<Value> {
        match v {
            serde_json::Value::String(s) => Some(Value::Str(s.clone())),
            serde_json::Value::Bool(b) => Some(Value::Bool(*b)),
            serde_json::Value::Number(n) => n.as_i64().map(Value::Int),
            _ => None,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Str(s) => write!(f, "{s:?}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Bool(b) => write!(f, "{b}"),
        }
    }
}

/// Index of a discovered-resource set in the policy's `sets` list.
pub type SetId = usize;

/// A test on one argument value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ArgOp {
    Eq(Value),
    Ne(Value),
    In(Vec<Value>),
    Prefix(String),
    Suffix(String),
    Matches(Pattern),
    Lt(i64),
    Le(i64),
    Gt(i64),
    Ge(i64),
    /// Membership in a discovered-resource set (grown by results at run time).
    InSet(SetId),
}

impl ArgOp {
    /// Evaluates the test. `sets[i]` is the current content of discovered set
    /// `i`. A test applied to a value of the wrong type is false (the
    /// compiler rejects such policies; this keeps the monitor total).
    pub fn eval(&self, value: &Value, sets: &[BTreeSet<String>]) -> bool {
        match (self, value) {
            (ArgOp::Eq(v), _) => v == value,
            (ArgOp::Ne(v), _) => v.ty() == value.ty() && v != value,
            (ArgOp::In(vs), _) => vs.contains(value),
            (ArgOp::Prefix(p), Value::Str(s)) => s.starts_with(p.as_str()),
            (ArgOp::Suffix(p), Value::Str(s)) => s.ends_with(p.as_str()),
            (ArgOp::Matches(p), Value::Str(s)) => p.matches(s),
            (ArgOp::Lt(n), Value::Int(i)) => i < n,
            (ArgOp::Le(n), Value::Int(i)) => i <= n,
            (ArgOp::Gt(n), Value::Int(i)) => i > n,
            (ArgOp::Ge(n), Value::Int(i)) => i >= n,
            (ArgOp::InSet(set), Value::Str(s)) => sets.get(*set).is_some_and(|m| m.contains(s)),
            _ => false,
        }
    }

    /// The parameter type this test applies to (`None`: any type).
    pub fn operand_type(&self) -> Option<ParamType> {
        match self {
            ArgOp::Eq(v) | ArgOp::Ne(v) => Some(v.ty()),
            ArgOp::In(vs) => vs.first().map(Value::ty),
            ArgOp::Prefix(_) | ArgOp::Suffix(_) | ArgOp::Matches(_) | ArgOp::InSet(_) => {
                Some(ParamType::Str)
            }
            ArgOp::Lt(_) | ArgOp::Le(_) | ArgOp::Gt(_) | ArgOp::Ge(_) => Some(ParamType::Int),
        }
    }
}

/// A test on the argument at position `param` of the tool's parameter list.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ArgPredicate {
    pub param: usize,
    pub op: ArgOp,
}
