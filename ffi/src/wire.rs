//! The model's types on the wire (`docs/lean-ffi.md`, "Encoding of the
//! model's types"), both directions, and the typed calls over any
//! [`Transport`].
//!
//! Only what the Lean model reads is sent: a [`Policy`] travels as its
//! tools' resource parameters, its agents' parents, its grants (with their
//! names, which key a shared grant in the tenant's pool), the names of its
//! sets and its shared grants (`shared_grants`, wire version 3). Decoding a
//! policy therefore fills everything else with [`Policy::empty`]'s
//! defaults. A [`Ledger`] travels as its counts: its `shared` list is the
//! policy's `shared_grants`, which the receiver of a message puts back
//! from the policy in the same message.

use crate::cbor::{Cbor, DecodeError};
use agenra_certify::classes::{Classes, MAX_TESTED_SETS};
use agenra_certify::product::{Chain, Flags, Held, State as PState, MAX_CHAIN};
use agenra_core::ledger::Ledger;
use agenra_core::policy::{Agent, AgentId, Grant, GrantId, Quota, Tool};
use agenra_core::pool::SharedCounts;
use agenra_core::spec::{Checks, Event, Outcome, Request, State};
use agenra_core::{ArgCond, ArgOp, Cond, Decimal, Label, Pattern, Policy, Quant, Value};
use std::collections::{BTreeMap, BTreeSet};

/// Why a call over the wire produced no answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The bytes are not a value of the CBOR subset.
    #[error("{what}: {source}")]
    Cbor {
        /// Which message (input or output of which entry point).
        what: String,
        /// The decoder's error.
        source: DecodeError,
    },
    /// A well-formed value of the wrong shape.
    #[error("{path}: expected {expected}, found {found}")]
    Shape {
        /// Where in the message, e.g. `input[0].grants[2].quota`.
        path: String,
        /// What the format requires there.
        expected: &'static str,
        /// What was there (CBOR diagnostic notation, shortened).
        found: String,
    },
    /// The other side could not decode the input (`[1, message]`).
    #[error("{entry}: the callee rejected the input: {message}")]
    Rejected {
        /// The entry point's symbol.
        entry: &'static str,
        /// The callee's message.
        message: String,
    },
    /// The transport failed (the Lean runtime did not initialize, ...).
    #[error("{0}")]
    Transport(String),
    /// Two policies and their call classes have no ledger abstraction
    /// (`Agenra.Ctx`) that the wire can carry, or a decoded abstraction
    /// is not one of any two policies (see [`SimCtx`]).
    #[error("the ledger abstraction: {0}")]
    Abstraction(String),
}

fn shape(path: &str, expected: &'static str, found: &Cbor) -> WireError {
    let mut found = found.to_string();
    if found.len() > 80 {
        let mut cut = 77;
        while !found.is_char_boundary(cut) {
            cut -= 1;
        }
        found.truncate(cut);
        found.push_str("...");
    }
    WireError::Shape {
        path: path.to_string(),
        expected,
        found,
    }
}

/// A type with an encoding on the wire.
pub trait Wire: Sized {
    /// The value on the wire.
    fn to_wire(&self) -> Cbor;
    /// Reads a value; `path` names where it is, for errors.
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError>;
}

/// The elements of an array of exactly `n` elements.
pub fn array_of<'a>(c: &'a Cbor, path: &str, n: usize) -> Result<&'a [Cbor], WireError> {
    match c {
        Cbor::Array(items) if items.len() == n => Ok(items),
        _ => Err(shape(
            path,
            match n {
                0 => "an array of 0 elements",
                1 => "an array of 1 element",
                2 => "an array of 2 elements",
                3 => "an array of 3 elements",
                4 => "an array of 4 elements",
                5 => "an array of 5 elements",
                6 => "an array of 6 elements",
                8 => "an array of 8 elements",
                9 => "an array of 9 elements",
                _ => "an array of another length",
            },
            c,
        )),
    }
}

/// A sum: its tag and its fields.
fn tagged<'a>(c: &'a Cbor, path: &str) -> Result<(u64, &'a [Cbor]), WireError> {
    match c {
        Cbor::Array(items) => match items.first() {
            Some(Cbor::Int(t)) if (0..=i128::from(u64::MAX)).contains(t) => {
                Ok((*t as u64, &items[1..]))
            }
            _ => Err(shape(path, "a tagged array [tag, fields...]", c)),
        },
        _ => Err(shape(path, "a tagged array [tag, fields...]", c)),
    }
}

/// The fields of constructor `tag` with exactly `n` fields.
fn fields<'a>(f: &'a [Cbor], c: &Cbor, path: &str, n: usize) -> Result<&'a [Cbor], WireError> {
    if f.len() == n {
        Ok(f)
    } else {
        Err(shape(path, "the constructor's number of fields", c))
    }
}

fn bad_tag(path: &str, c: &Cbor) -> WireError {
    shape(path, "a known constructor tag", c)
}

fn at(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

fn field(path: &str, name: &str) -> String {
    format!("{path}.{name}")
}

impl Wire for u64 {
    fn to_wire(&self) -> Cbor {
        Cbor::uint(*self)
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        match c {
            Cbor::Int(n) => {
                u64::try_from(*n).map_err(|_| shape(path, "an unsigned integer < 2^64", c))
            }
            _ => Err(shape(path, "an unsigned integer", c)),
        }
    }
}

impl Wire for usize {
    fn to_wire(&self) -> Cbor {
        Cbor::Int(*self as i128)
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        match c {
            Cbor::Int(n) => {
                usize::try_from(*n).map_err(|_| shape(path, "an index (unsigned, fits usize)", c))
            }
            _ => Err(shape(path, "an index (unsigned integer)", c)),
        }
    }
}

impl Wire for i64 {
    fn to_wire(&self) -> Cbor {
        Cbor::Int(i128::from(*self))
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        match c {
            Cbor::Int(n) => i64::try_from(*n).map_err(|_| shape(path, "an integer in i64", c)),
            _ => Err(shape(path, "an integer", c)),
        }
    }
}

impl Wire for bool {
    fn to_wire(&self) -> Cbor {
        Cbor::Bool(*self)
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        match c {
            Cbor::Bool(b) => Ok(*b),
            _ => Err(shape(path, "a boolean", c)),
        }
    }
}

impl Wire for String {
    fn to_wire(&self) -> Cbor {
        Cbor::Text(self.clone())
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        match c {
            Cbor::Text(s) => Ok(s.clone()),
            _ => Err(shape(path, "a text string", c)),
        }
    }
}

impl<T: Wire> Wire for Vec<T> {
    fn to_wire(&self) -> Cbor {
        Cbor::Array(self.iter().map(Wire::to_wire).collect())
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        match c {
            Cbor::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, x)| T::from_wire(x, &at(path, i)))
                .collect(),
            _ => Err(shape(path, "an array", c)),
        }
    }
}

/// `Option<T>` is `null` or `T`; only for types whose encoding is never `null`.
impl<T: Wire> Wire for Option<T> {
    fn to_wire(&self) -> Cbor {
        self.as_ref().map_or(Cbor::Null, Wire::to_wire)
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        match c {
            Cbor::Null => Ok(None),
            _ => T::from_wire(c, path).map(Some),
        }
    }
}

/// A discovered set: sorted on the way out; any order and duplicates on the way in.
impl Wire for BTreeSet<String> {
    fn to_wire(&self) -> Cbor {
        Cbor::Array(self.iter().map(|s| Cbor::Text(s.clone())).collect())
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        Vec::<String>::from_wire(c, path).map(|v| v.into_iter().collect())
    }
}

/// `paused`/`running`: `[[id, [grant]]]`; a duplicate id is an error.
impl Wire for BTreeMap<String, Vec<GrantId>> {
    fn to_wire(&self) -> Cbor {
        Cbor::Array(
            self.iter()
                .map(|(k, v)| Cbor::Array(vec![Cbor::Text(k.clone()), v.to_wire()]))
                .collect(),
        )
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        let Cbor::Array(items) = c else {
            return Err(shape(path, "an array of [id, [grant]] entries", c));
        };
        let mut map = BTreeMap::new();
        for (i, e) in items.iter().enumerate() {
            let p = at(path, i);
            let kv = array_of(e, &p, 2)?;
            let k = String::from_wire(&kv[0], &at(&p, 0))?;
            let v = Vec::<GrantId>::from_wire(&kv[1], &at(&p, 1))?;
            if map.insert(k, v).is_some() {
                return Err(shape(&p, "a call id not already in the map", &kv[0]));
            }
        }
        Ok(map)
    }
}

impl Wire for Pattern {
    fn to_wire(&self) -> Cbor {
        let (t, s) = match self {
            Pattern::Exact(s) => (0, s),
            Pattern::Prefix(s) => (1, s),
            Pattern::Glob(s) => (2, s),
        };
        Cbor::Array(vec![Cbor::uint(t), Cbor::text(s)])
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        let (t, f) = tagged(c, path)?;
        let f = fields(f, c, path, 1)?;
        let s = String::from_wire(&f[0], &at(path, 1))?;
        match t {
            0 => Ok(Pattern::Exact(s)),
            1 => Ok(Pattern::Prefix(s)),
            2 => Ok(Pattern::Glob(s)),
            _ => Err(bad_tag(path, c)),
        }
    }
}

/// The mantissa and scale of a decimal, read from its canonical text
/// (`Decimal` keeps them private; its `Display` writes every digit).
pub fn decimal_parts(d: &Decimal) -> (i128, u32) {
    let text = d.to_string();
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.as_str()),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    let mut m: i128 = 0;
    for b in int.bytes().chain(frac.bytes()) {
        m = m * 10 + i128::from(b - b'0');
    }
    (if negative { -m } else { m }, frac.len() as u32)
}

/// The decimal `mantissa · 10^-scale`, when Rust's `Decimal` can hold it.
pub fn decimal_from_parts(mantissa: i128, scale: u32) -> Option<Decimal> {
    let digits = mantissa.unsigned_abs().to_string();
    let scale = scale as usize;
    let padded = if digits.len() <= scale {
        format!("{}{digits}", "0".repeat(scale + 1 - digits.len()))
    } else {
        digits
    };
    let (int, frac) = padded.split_at(padded.len() - scale);
    let sign = if mantissa < 0 { "-" } else { "" };
    let text = if frac.is_empty() {
        format!("{sign}{int}")
    } else {
        format!("{sign}{int}.{frac}")
    };
    text.parse().ok()
}

impl Wire for Decimal {
    fn to_wire(&self) -> Cbor {
        let (m, s) = decimal_parts(self);
        Cbor::Array(vec![Cbor::Int(m), Cbor::uint(u64::from(s))])
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        let f = array_of(c, path, 2)?;
        let Cbor::Int(m) = f[0] else {
            return Err(shape(&at(path, 0), "an integer mantissa", &f[0]));
        };
        let s = u64::from_wire(&f[1], &at(path, 1))?;
        u32::try_from(s)
            .ok()
            .and_then(|s| decimal_from_parts(m, s))
            .ok_or_else(|| {
                shape(
                    path,
                    "a decimal of at most 20 digits, 18 after the point",
                    c,
                )
            })
    }
}

impl Wire for Value {
    fn to_wire(&self) -> Cbor {
        let t = |n: u64, rest: Vec<Cbor>| {
            let mut v = vec![Cbor::uint(n)];
            v.extend(rest);
            Cbor::Array(v)
        };
        match self {
            Value::Str(s) => t(0, vec![Cbor::text(s)]),
            Value::Int(i) => t(1, vec![i.to_wire()]),
            Value::Bool(b) => t(2, vec![Cbor::Bool(*b)]),
            Value::Decimal(d) => t(3, vec![d.to_wire()]),
            Value::List(vs) => t(4, vec![vs.to_wire()]),
            Value::Null => t(5, vec![]),
            Value::Object(m) => t(
                6,
                vec![
                    m.keys().cloned().collect::<Vec<String>>().to_wire(),
                    m.values().cloned().collect::<Vec<Value>>().to_wire(),
                ],
            ),
        }
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        let (t, f) = tagged(c, path)?;
        let p = at(path, 1);
        let one = || fields(f, c, path, 1).map(|f| &f[0]);
        match t {
            0 => Ok(Value::Str(String::from_wire(one()?, &p)?)),
            1 => Ok(Value::Int(i64::from_wire(one()?, &p)?)),
            2 => Ok(Value::Bool(bool::from_wire(one()?, &p)?)),
            3 => Ok(Value::Decimal(Decimal::from_wire(one()?, &p)?)),
            4 => Ok(Value::List(Vec::from_wire(one()?, &p)?)),
            5 => fields(f, c, path, 0).map(|_| Value::Null),
            6 => {
                let kv = fields(f, c, path, 2)?;
                let keys = Vec::<String>::from_wire(&kv[0], &p)?;
                let values = Vec::<Value>::from_wire(&kv[1], &at(path, 2))?;
                if keys.len() != values.len() {
                    return Err(shape(path, "as many field values as names", c));
                }
                Ok(Value::Object(keys.into_iter().zip(values).collect()))
            }
            _ => Err(bad_tag(path, c)),
        }
    }
}

impl Wire for Quant {
    fn to_wire(&self) -> Cbor {
        Cbor::uint(match self {
            Quant::All => 0,
            Quant::Any => 1,
        })
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        match u64::from_wire(c, path)? {
            0 => Ok(Quant::All),
            1 => Ok(Quant::Any),
            _ => Err(shape(path, "0 (all) or 1 (any)", c)),
        }
    }
}

impl Wire for ArgOp {
    fn to_wire(&self) -> Cbor {
        let (t, operand) = match self {
            ArgOp::Eq(v) => (0, v.to_wire()),
            ArgOp::Ne(v) => (1, v.to_wire()),
            ArgOp::In(vs) => (2, vs.to_wire()),
            ArgOp::NotIn(vs) => (3, vs.to_wire()),
            ArgOp::Prefix(s) => (4, Cbor::text(s)),
            ArgOp::Suffix(s) => (5, Cbor::text(s)),
            ArgOp::Matches(p) => (6, p.to_wire()),
            ArgOp::Contains(v) => (7, v.to_wire()),
            ArgOp::Lt(d) => (8, d.to_wire()),
            ArgOp::Le(d) => (9, d.to_wire()),
            ArgOp::Gt(d) => (10, d.to_wire()),
            ArgOp::Ge(d) => (11, d.to_wire()),
            ArgOp::InSet(k) => (12, k.to_wire()),
            ArgOp::NotInSet(k) => (13, k.to_wire()),
            ArgOp::Field { path, op } => (14, Cbor::Array(vec![path.to_wire(), op.to_wire()])),
        };
        Cbor::Array(vec![Cbor::uint(t), operand])
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        let (t, f) = tagged(c, path)?;
        let x = &fields(f, c, path, 1)?[0];
        let p = at(path, 1);
        Ok(match t {
            0 => ArgOp::Eq(Value::from_wire(x, &p)?),
            1 => ArgOp::Ne(Value::from_wire(x, &p)?),
            2 => ArgOp::In(Vec::from_wire(x, &p)?),
            3 => ArgOp::NotIn(Vec::from_wire(x, &p)?),
            4 => ArgOp::Prefix(String::from_wire(x, &p)?),
            5 => ArgOp::Suffix(String::from_wire(x, &p)?),
            6 => ArgOp::Matches(Pattern::from_wire(x, &p)?),
            7 => ArgOp::Contains(Value::from_wire(x, &p)?),
            8 => ArgOp::Lt(Decimal::from_wire(x, &p)?),
            9 => ArgOp::Le(Decimal::from_wire(x, &p)?),
            10 => ArgOp::Gt(Decimal::from_wire(x, &p)?),
            11 => ArgOp::Ge(Decimal::from_wire(x, &p)?),
            12 => ArgOp::InSet(usize::from_wire(x, &p)?),
            13 => ArgOp::NotInSet(usize::from_wire(x, &p)?),
            14 => match x {
                Cbor::Array(parts) if parts.len() == 2 => ArgOp::Field {
                    path: Vec::from_wire(&parts[0], &at(&p, 0))?,
                    op: Box::new(ArgOp::from_wire(&parts[1], &at(&p, 1))?),
                },
                _ => return Err(shape(&p, "[field path, test]", x)),
            },
            _ => return Err(bad_tag(path, c)),
        })
    }
}

impl Wire for ArgCond {
    fn to_wire(&self) -> Cbor {
        match self {
            Cond::Test { param, quant, op } => Cbor::Array(vec![
                Cbor::uint(0),
                param.to_wire(),
                quant.to_wire(),
                op.to_wire(),
            ]),
            Cond::Agent(agents) => Cbor::Array(vec![Cbor::uint(1), agents.to_wire()]),
            Cond::Not(c) => Cbor::Array(vec![Cbor::uint(2), c.to_wire()]),
            Cond::And(cs) => Cbor::Array(vec![Cbor::uint(3), cs.to_wire()]),
            Cond::Or(cs) => Cbor::Array(vec![Cbor::uint(4), cs.to_wire()]),
            // Per-element tests (issue #27): the Lean model has no such
            // constructors, so its decoder refuses tags 5 and 6 (an error,
            // never a decision); the Rust side round-trips them.
            Cond::Each { param, quant, body } => Cbor::Array(vec![
                Cbor::uint(5),
                param.to_wire(),
                quant.to_wire(),
                body.to_wire(),
            ]),
            Cond::Elem(op) => Cbor::Array(vec![Cbor::uint(6), op.to_wire()]),
            // Token tests (issue #27): the Lean model has none either, so
            // its decoder refuses tag 7; the Rust side round-trips them.
            Cond::Tokens {
                param,
                quant,
                kind,
                from,
            } => Cbor::Array(vec![
                Cbor::uint(7),
                param.to_wire(),
                quant.to_wire(),
                kind.map(token_kind_code).to_wire(),
                from.iter()
                    .map(|o| *o as u64)
                    .collect::<Vec<u64>>()
                    .to_wire(),
            ]),
        }
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        let (t, f) = tagged(c, path)?;
        match t {
            0 => {
                let f = fields(f, c, path, 3)?;
                Ok(Cond::Test {
                    param: usize::from_wire(&f[0], &at(path, 1))?,
                    quant: Quant::from_wire(&f[1], &at(path, 2))?,
                    op: ArgOp::from_wire(&f[2], &at(path, 3))?,
                })
            }
            1 => Ok(Cond::Agent(Vec::from_wire(
                &fields(f, c, path, 1)?[0],
                &at(path, 1),
            )?)),
            2 => Ok(Cond::Not(Box::new(ArgCond::from_wire(
                &fields(f, c, path, 1)?[0],
                &at(path, 1),
            )?))),
            3 => Ok(Cond::And(Vec::from_wire(
                &fields(f, c, path, 1)?[0],
                &at(path, 1),
            )?)),
            4 => Ok(Cond::Or(Vec::from_wire(
                &fields(f, c, path, 1)?[0],
                &at(path, 1),
            )?)),
            5 => {
                let f = fields(f, c, path, 3)?;
                Ok(Cond::Each {
                    param: usize::from_wire(&f[0], &at(path, 1))?,
                    quant: Quant::from_wire(&f[1], &at(path, 2))?,
                    body: Box::new(ArgCond::from_wire(&f[2], &at(path, 3))?),
                })
            }
            6 => Ok(Cond::Elem(ArgOp::from_wire(
                &fields(f, c, path, 1)?[0],
                &at(path, 1),
            )?)),
            7 => {
                use agenra_core::tokens::{TokenKind, TokenOrigin};
                let f = fields(f, c, path, 4)?;
                let kind = match Option::<u64>::from_wire(&f[2], &at(path, 3))? {
                    None => None,
                    Some(k) => Some(
                        TokenKind::ALL
                            .get(usize::try_from(k).unwrap_or(usize::MAX))
                            .copied()
                            .or_else(|| {
                                let declared = k.checked_sub(TokenKind::ALL.len() as u64)?;
                                u16::try_from(declared).ok().map(TokenKind::Declared)
                            })
                            .ok_or_else(|| {
                                shape(
                                    &at(path, 3),
                                    "a token kind 0..4, or 5 + a declared kind",
                                    &f[2],
                                )
                            })?,
                    ),
                };
                let origins = [
                    TokenOrigin::Task,
                    TokenOrigin::TrustedOutput,
                    TokenOrigin::Elsewhere,
                ];
                let from = Vec::<u64>::from_wire(&f[3], &at(path, 4))?
                    .into_iter()
                    .map(|o| {
                        origins
                            .get(usize::try_from(o).unwrap_or(usize::MAX))
                            .copied()
                            .ok_or_else(|| shape(&at(path, 4), "token origins 0..2", &f[3]))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Cond::Tokens {
                    param: usize::from_wire(&f[0], &at(path, 1))?,
                    quant: Quant::from_wire(&f[1], &at(path, 2))?,
                    kind,
                    from,
                })
            }
            _ => Err(bad_tag(path, c)),
        }
    }
}

impl Wire for Quota {
    fn to_wire(&self) -> Cbor {
        match self {
            Quota::Limited(n) => Cbor::Array(vec![Cbor::uint(0), Cbor::uint(*n)]),
            Quota::Unlimited => Cbor::Array(vec![Cbor::uint(1)]),
        }
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        let (t, f) = tagged(c, path)?;
        match t {
            0 => Ok(Quota::Limited(u64::from_wire(
                &fields(f, c, path, 1)?[0],
                &at(path, 1),
            )?)),
            1 => fields(f, c, path, 0).map(|_| Quota::Unlimited),
            _ => Err(bad_tag(path, c)),
        }
    }
}

impl Wire for Grant {
    fn to_wire(&self) -> Cbor {
        Cbor::Array(vec![
            self.agent.to_wire(),
            self.tool.to_wire(),
            self.resource.to_wire(),
            self.args.to_wire(),
            self.quota.to_wire(),
            self.approval.to_wire(),
            self.expires_at.to_wire(),
            self.discovers.to_wire(),
            Cbor::text(&self.name),
        ])
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        let f = array_of(c, path, 9)?;
        Ok(Grant {
            name: String::from_wire(&f[8], &field(path, "name"))?,
            agent: usize::from_wire(&f[0], &field(path, "agent"))?,
            tool: usize::from_wire(&f[1], &field(path, "tool"))?,
            resource: Option::from_wire(&f[2], &field(path, "resource"))?,
            args: Vec::from_wire(&f[3], &field(path, "args"))?,
            quota: Quota::from_wire(&f[4], &field(path, "quota"))?,
            approval: bool::from_wire(&f[5], &field(path, "approval"))?,
            expires_at: Option::from_wire(&f[6], &field(path, "expires_at"))?,
            discovers: Option::from_wire(&f[7], &field(path, "discovers"))?,
        })
    }
}

/// A token kind's code: a built-in kind's position in `TokenKind::ALL`,
/// a declared kind after them.
fn token_kind_code(k: agenra_core::tokens::TokenKind) -> u64 {
    use agenra_core::tokens::TokenKind;
    match k {
        TokenKind::Declared(i) => TokenKind::ALL.len() as u64 + u64::from(i),
        k => TokenKind::ALL.iter().position(|&b| b == k).unwrap_or(0) as u64,
    }
}

impl Wire for Policy {
    fn to_wire(&self) -> Cbor {
        Cbor::Array(vec![
            Cbor::Array(
                self.tools
                    .iter()
                    .map(|t| Cbor::Array(vec![t.resource.to_wire()]))
                    .collect(),
            ),
            Cbor::Array(
                self.agents
                    .iter()
                    .map(|a| Cbor::Array(vec![a.parent.to_wire()]))
                    .collect(),
            ),
            self.grants.to_wire(),
            self.sets.to_wire(),
            self.shared_grants.to_wire(),
        ])
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        let f = array_of(c, path, 5)?;
        let mut p = Policy::empty("wire");
        let tools_path = field(path, "tools");
        let Cbor::Array(tools) = &f[0] else {
            return Err(shape(&tools_path, "an array of tools", &f[0]));
        };
        p.tools = tools
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let tp = at(&tools_path, i);
                let r = array_of(t, &tp, 1)?;
                Ok(Tool {
                    name: format!("tool{i}"),
                    params: vec![],
                    resource: Option::from_wire(&r[0], &field(&tp, "resource"))?,
                    sinks: vec![],
                    output: Label::BOTTOM,
                    sanitizer: None,
                    facts: vec![],
                })
            })
            .collect::<Result<_, WireError>>()?;
        let agents_path = field(path, "agents");
        let Cbor::Array(agents) = &f[1] else {
            return Err(shape(&agents_path, "an array of agents", &f[1]));
        };
        p.agents = agents
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let ap = at(&agents_path, i);
                let r = array_of(a, &ap, 1)?;
                Ok(Agent {
                    name: format!("agent{i}"),
                    parent: Option::from_wire(&r[0], &field(&ap, "parent"))?,
                    scope: None,
                    own_context: false,
                })
            })
            .collect::<Result<_, WireError>>()?;
        p.grants = Vec::from_wire(&f[2], &field(path, "grants"))?;
        p.sets = Vec::from_wire(&f[3], &field(path, "sets"))?;
        // `Policy::is_shared` searches `shared_grants` by bisection and the
        // spec indexes `grants` by them: strictly ascending and in range,
        // as `validate.rs` requires (Lean's decoder checks the same).
        let shared_path = field(path, "shared");
        let shared = Vec::<GrantId>::from_wire(&f[4], &shared_path)?;
        if shared.windows(2).any(|w| w[0] >= w[1]) {
            return Err(shape(
                &shared_path,
                "strictly ascending grant indexes",
                &f[4],
            ));
        }
        if shared.iter().any(|&g| g >= p.grants.len()) {
            return Err(shape(
                &shared_path,
                "grant indexes in range of the policy's grants",
                &f[4],
            ));
        }
        p.shared_grants = shared;
        Ok(p)
    }
}

impl Wire for Ledger {
    fn to_wire(&self) -> Cbor {
        self.remaining.to_wire()
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        Ok(Ledger {
            remaining: Vec::from_wire(c, path)?,
            // The policy's `shared_grants`, which the wire sends once, with
            // the policy: the receiver sets it ([`shared_from`]).
            shared: vec![],
        })
    }
}

/// A ledger's `shared` list is its policy's `shared_grants` (what
/// `Ledger::initial` copies): set it on a ledger decoded from the wire.
pub fn shared_from(ledger: &mut Ledger, policy: &Policy) {
    ledger.shared = policy.shared_grants.clone();
}

/// The tenant's pool (`SharedCounts`, Lean `SharedCounts`): `[[name,
/// taken]]`, the grants with units taken, by name. Rust sends the entries
/// in name order and without zero counts; either side may answer in
/// another order. A name twice is an error; a zero count is no entry.
impl Wire for SharedCounts {
    fn to_wire(&self) -> Cbor {
        Cbor::Array(
            self.iter()
                .map(|(k, n)| Cbor::Array(vec![Cbor::text(k), Cbor::uint(n)]))
                .collect(),
        )
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        let Cbor::Array(items) = c else {
            return Err(shape(path, "an array of [name, taken] entries", c));
        };
        let mut pool = SharedCounts::default();
        let mut seen = BTreeSet::new();
        for (i, e) in items.iter().enumerate() {
            let p = at(path, i);
            let kv = array_of(e, &p, 2)?;
            let name = String::from_wire(&kv[0], &at(&p, 0))?;
            let taken = u64::from_wire(&kv[1], &at(&p, 1))?;
            if !seen.insert(name.clone()) {
                return Err(shape(&p, "a grant name not already in the pool", &kv[0]));
            }
            pool.set_taken(&name, taken);
        }
        Ok(pool)
    }
}

impl Wire for Request {
    fn to_wire(&self) -> Cbor {
        Cbor::Array(vec![
            self.agent.to_wire(),
            self.tool.to_wire(),
            self.args.to_wire(),
            self.time.to_wire(),
        ])
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        let f = array_of(c, path, 4)?;
        Ok(Request {
            agent: usize::from_wire(&f[0], &field(path, "agent"))?,
            tool: usize::from_wire(&f[1], &field(path, "tool"))?,
            args: Vec::from_wire(&f[2], &field(path, "args"))?,
            time: u64::from_wire(&f[3], &field(path, "time"))?,
        })
    }
}

impl Wire for Event {
    fn to_wire(&self) -> Cbor {
        let id = |t: u64, id: &String| Cbor::Array(vec![Cbor::uint(t), Cbor::text(id)]);
        match self {
            Event::Call { id, req } => {
                Cbor::Array(vec![Cbor::uint(0), Cbor::text(id), req.to_wire()])
            }
            Event::Approve { id: i } => id(1, i),
            Event::Reject { id: i } => id(2, i),
            Event::Succeeded { id, discovered } => {
                Cbor::Array(vec![Cbor::uint(3), Cbor::text(id), discovered.to_wire()])
            }
            Event::Failed { id: i } => id(4, i),
            Event::Unknown { id: i } => id(5, i),
            Event::Seed { set, values } => {
                Cbor::Array(vec![Cbor::uint(6), set.to_wire(), values.to_wire()])
            }
        }
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        let (t, f) = tagged(c, path)?;
        let (p1, p2) = (at(path, 1), at(path, 2));
        let id = |f: &[Cbor]| -> Result<String, WireError> {
            String::from_wire(&fields(f, c, path, 1)?[0], &p1)
        };
        Ok(match t {
            0 => {
                let f = fields(f, c, path, 2)?;
                Event::Call {
                    id: String::from_wire(&f[0], &p1)?,
                    req: Request::from_wire(&f[1], &p2)?,
                }
            }
            1 => Event::Approve { id: id(f)? },
            2 => Event::Reject { id: id(f)? },
            3 => {
                let f = fields(f, c, path, 2)?;
                Event::Succeeded {
                    id: String::from_wire(&f[0], &p1)?,
                    discovered: Vec::from_wire(&f[1], &p2)?,
                }
            }
            4 => Event::Failed { id: id(f)? },
            5 => Event::Unknown { id: id(f)? },
            6 => {
                let f = fields(f, c, path, 2)?;
                Event::Seed {
                    set: usize::from_wire(&f[0], &p1)?,
                    values: Vec::from_wire(&f[1], &p2)?,
                }
            }
            _ => return Err(bad_tag(path, c)),
        })
    }
}

impl Wire for Checks {
    fn to_wire(&self) -> Cbor {
        Cbor::uint(match self {
            Checks::Pass => 0,
            Checks::Pause => 1,
            Checks::Deny => 2,
        })
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        match u64::from_wire(c, path)? {
            0 => Ok(Checks::Pass),
            1 => Ok(Checks::Pause),
            2 => Ok(Checks::Deny),
            _ => Err(shape(path, "0 (pass), 1 (pause) or 2 (deny)", c)),
        }
    }
}

impl Wire for Outcome {
    fn to_wire(&self) -> Cbor {
        match self {
            Outcome::Allow(used) => Cbor::Array(vec![Cbor::uint(0), used.to_wire()]),
            Outcome::Pause(used) => Cbor::Array(vec![Cbor::uint(1), used.to_wire()]),
            Outcome::Deny => Cbor::Array(vec![Cbor::uint(2)]),
            Outcome::Applied => Cbor::Array(vec![Cbor::uint(3)]),
            Outcome::Invalid => Cbor::Array(vec![Cbor::uint(4)]),
        }
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        let (t, f) = tagged(c, path)?;
        let p = at(path, 1);
        match t {
            0 => Ok(Outcome::Allow(Vec::from_wire(
                &fields(f, c, path, 1)?[0],
                &p,
            )?)),
            1 => Ok(Outcome::Pause(Vec::from_wire(
                &fields(f, c, path, 1)?[0],
                &p,
            )?)),
            2 => fields(f, c, path, 0).map(|_| Outcome::Deny),
            3 => fields(f, c, path, 0).map(|_| Outcome::Applied),
            4 => fields(f, c, path, 0).map(|_| Outcome::Invalid),
            _ => Err(bad_tag(path, c)),
        }
    }
}

impl Wire for State {
    fn to_wire(&self) -> Cbor {
        Cbor::Array(vec![
            self.ledger.to_wire(),
            self.paused.to_wire(),
            self.running.to_wire(),
            self.sets.to_wire(),
        ])
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        let f = array_of(c, path, 4)?;
        Ok(State {
            ledger: Ledger::from_wire(&f[0], &field(path, "ledger"))?,
            paused: BTreeMap::from_wire(&f[1], &field(path, "paused"))?,
            running: BTreeMap::from_wire(&f[2], &field(path, "running"))?,
            sets: Vec::from_wire(&f[3], &field(path, "sets"))?,
        })
    }
}

/// The entry points (`docs/lean-ffi.md`, "Entry points").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Entry {
    /// `agenra_ffi_version`: `[]` → text.
    Version,
    /// `agenra_ffi_pattern_matches`: `[Pattern, text]` → bool.
    PatternMatches,
    /// `agenra_ffi_glob_matches`: `[glob, text]` → bool.
    GlobMatches,
    /// `agenra_ffi_arg_op_eval`: `[ArgOp, Quant, Value, Sets]` → bool.
    ArgOpEval,
    /// `agenra_ffi_arg_cond_eval`: `[ArgCond, [Value], agent, Sets]` → bool.
    ArgCondEval,
    /// `agenra_ffi_grant_matches`: `[Policy, Grant, owner, Request, Sets]` → bool.
    GrantMatches,
    /// `agenra_ffi_select`: `[Policy, Ledger, agent, Request, Sets]` → null or uint.
    Select,
    /// `agenra_ffi_step`: `[Policy, State, Event, Checks]` → `[Outcome, State]`.
    Step,
    /// `agenra_ffi_check_simulation`: `[Ctx, [PState]]` → bool (wire
    /// version 2).
    CheckSimulation,
    /// `agenra_ffi_step_in`: `[Policy, State, Pool, Event, Checks]` →
    /// `[Outcome, State, Pool]` (wire version 3).
    StepIn,
}

/// The wire version both sides must answer to [`Entry::Version`]
/// (`agenra-ffi/2` added [`Entry::CheckSimulation`]; `agenra-ffi/3` added
/// grant names, the policy's shared grants and [`Entry::StepIn`]).
pub const VERSION: &str = "agenra-ffi/3";

impl Entry {
    /// Every entry point.
    pub const ALL: [Entry; 10] = [
        Entry::Version,
        Entry::PatternMatches,
        Entry::GlobMatches,
        Entry::ArgOpEval,
        Entry::ArgCondEval,
        Entry::GrantMatches,
        Entry::Select,
        Entry::Step,
        Entry::CheckSimulation,
        Entry::StepIn,
    ];

    /// The exported symbol (`@[export ...]` in `lean/Agenra/Ffi.lean`).
    pub fn symbol(self) -> &'static str {
        match self {
            Entry::Version => "agenra_ffi_version",
            Entry::PatternMatches => "agenra_ffi_pattern_matches",
            Entry::GlobMatches => "agenra_ffi_glob_matches",
            Entry::ArgOpEval => "agenra_ffi_arg_op_eval",
            Entry::ArgCondEval => "agenra_ffi_arg_cond_eval",
            Entry::GrantMatches => "agenra_ffi_grant_matches",
            Entry::Select => "agenra_ffi_select",
            Entry::Step => "agenra_ffi_step",
            Entry::CheckSimulation => "agenra_ffi_check_simulation",
            Entry::StepIn => "agenra_ffi_step_in",
        }
    }
}

/// Something that runs an entry point: bytes in, bytes out.
pub trait Transport {
    /// Calls `entry` on the encoded input array; returns the encoded envelope.
    fn call(&self, entry: Entry, input: &[u8]) -> Result<Vec<u8>, WireError>;
}

/// The typed calls, over a transport.
#[derive(Debug, Default, Clone)]
pub struct Client<T> {
    /// The transport.
    pub transport: T,
}

impl<T: Transport> Client<T> {
    /// A client over `transport`.
    pub fn new(transport: T) -> Client<T> {
        Client { transport }
    }

    fn call<R: Wire>(&self, entry: Entry, input: Vec<Cbor>) -> Result<R, WireError> {
        let bytes = self.transport.call(entry, &Cbor::Array(input).encode())?;
        let what = format!("the answer of {}", entry.symbol());
        let answer = Cbor::decode(&bytes).map_err(|source| WireError::Cbor {
            what: what.clone(),
            source,
        })?;
        let (t, f) = tagged(&answer, &what)?;
        match (t, f) {
            (0, [result]) => R::from_wire(result, &format!("{what}[1]")),
            (1, [Cbor::Text(message)]) => Err(WireError::Rejected {
                entry: entry.symbol(),
                message: message.clone(),
            }),
            _ => Err(shape(&what, "[0, result] or [1, message]", &answer)),
        }
    }

    /// The callee's wire version (must be [`VERSION`]).
    pub fn version(&self) -> Result<String, WireError> {
        self.call(Entry::Version, vec![])
    }

    /// `Pattern::matches` / `Pattern.accepts`.
    pub fn pattern_matches(&self, p: &Pattern, text: &str) -> Result<bool, WireError> {
        self.call(Entry::PatternMatches, vec![p.to_wire(), Cbor::text(text)])
    }

    /// `glob_matches` / `globChars`.
    pub fn glob_matches(&self, glob: &str, text: &str) -> Result<bool, WireError> {
        self.call(Entry::GlobMatches, vec![Cbor::text(glob), Cbor::text(text)])
    }

    /// `ArgOp::eval` / `ArgOp.eval`.
    pub fn arg_op_eval(
        &self,
        op: &ArgOp,
        quant: Quant,
        value: &Value,
        sets: &[BTreeSet<String>],
    ) -> Result<bool, WireError> {
        self.call(
            Entry::ArgOpEval,
            vec![
                op.to_wire(),
                quant.to_wire(),
                value.to_wire(),
                sets.to_vec().to_wire(),
            ],
        )
    }

    /// `ArgCond::eval` / `ArgCond.eval`.
    pub fn arg_cond_eval(
        &self,
        c: &ArgCond,
        args: &[Value],
        agent: AgentId,
        sets: &[BTreeSet<String>],
    ) -> Result<bool, WireError> {
        self.call(
            Entry::ArgCondEval,
            vec![
                c.to_wire(),
                args.to_vec().to_wire(),
                agent.to_wire(),
                sets.to_vec().to_wire(),
            ],
        )
    }

    /// `spec::grant_matches` / `grantMatches`.
    pub fn grant_matches(
        &self,
        policy: &Policy,
        grant: &Grant,
        owner: AgentId,
        req: &Request,
        sets: &[BTreeSet<String>],
    ) -> Result<bool, WireError> {
        self.call(
            Entry::GrantMatches,
            vec![
                policy.to_wire(),
                grant.to_wire(),
                owner.to_wire(),
                req.to_wire(),
                sets.to_vec().to_wire(),
            ],
        )
    }

    /// `spec::select` / `select`.
    pub fn select(
        &self,
        policy: &Policy,
        ledger: &Ledger,
        agent: AgentId,
        req: &Request,
        sets: &[BTreeSet<String>],
    ) -> Result<Option<GrantId>, WireError> {
        self.call(
            Entry::Select,
            vec![
                policy.to_wire(),
                ledger.to_wire(),
                agent.to_wire(),
                req.to_wire(),
                sets.to_vec().to_wire(),
            ],
        )
    }

    /// `spec::step` / `step`.
    pub fn step(
        &self,
        policy: &Policy,
        state: &State,
        event: &Event,
        checks: Checks,
    ) -> Result<(Outcome, State), WireError> {
        let pair: Cbor = self.call(
            Entry::Step,
            vec![
                policy.to_wire(),
                state.to_wire(),
                event.to_wire(),
                checks.to_wire(),
            ],
        )?;
        let path = "the answer of agenra_ffi_step[1]";
        let f = array_of(&pair, path, 2)?;
        let mut next = State::from_wire(&f[1], &at(path, 1))?;
        shared_from(&mut next.ledger, policy);
        Ok((Outcome::from_wire(&f[0], &at(path, 0))?, next))
    }

    /// `spec::step_in` / `stepIn`: one step of a session against the
    /// tenant's pool; the answer carries the pool after the step.
    pub fn step_in(
        &self,
        policy: &Policy,
        state: &State,
        pool: &SharedCounts,
        event: &Event,
        checks: Checks,
    ) -> Result<(Outcome, State, SharedCounts), WireError> {
        let triple: Cbor = self.call(
            Entry::StepIn,
            vec![
                policy.to_wire(),
                state.to_wire(),
                pool.to_wire(),
                event.to_wire(),
                checks.to_wire(),
            ],
        )?;
        let path = "the answer of agenra_ffi_step_in[1]";
        let f = array_of(&triple, path, 3)?;
        let mut next = State::from_wire(&f[1], &at(path, 1))?;
        shared_from(&mut next.ledger, policy);
        Ok((
            Outcome::from_wire(&f[0], &at(path, 0))?,
            next,
            SharedCounts::from_wire(&f[2], &at(path, 2))?,
        ))
    }

    /// `check::closed` / `checkSimulation ctx R`: whether the relation
    /// closes over the ledger abstraction.
    pub fn check_simulation(&self, ctx: &SimCtx, relation: &[PState]) -> Result<bool, WireError> {
        self.call(
            Entry::CheckSimulation,
            vec![ctx.to_wire(), relation.to_vec().to_wire()],
        )
    }
}

/// A result is any value; the caller reads it.
impl Wire for Cbor {
    fn to_wire(&self) -> Cbor {
        self.clone()
    }
    fn from_wire(c: &Cbor, _path: &str) -> Result<Self, WireError> {
        Ok(c.clone())
    }
}

// ---------------------------------------------------------------------------
// Wire version 2: the ledger abstraction of `agenra certify` and a relation
// (`Agenra.Ctx`, `List Agenra.PState`; `check::closed` / `checkSimulation`).

/// A grant as the certify abstraction reads it (Lean `Agenra.LGrant`):
/// `[agent, Quota, approval, discovers: null | uint]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimGrant {
    /// The agent holding the grant.
    pub agent: AgentId,
    /// Its quota.
    pub quota: Quota,
    /// Whether admission pauses for a human.
    pub approval: bool,
    /// The discovered set its results add to.
    pub discovers: Option<usize>,
}

/// A call class as the abstraction reads it (Lean `Agenra.Class`):
/// `[chain: [uint], region: uint, old: [uint], new: [uint], types: uint]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimClass {
    /// The calling agent's delegation chain, the caller first
    /// (`Policy::chain_iter`, the same in OLD and NEW).
    pub chain: Vec<AgentId>,
    /// The class's time region.
    pub region: usize,
    /// OLD's grants that match the class, ascending.
    pub old: Vec<GrantId>,
    /// NEW's grants that match the class, ascending.
    pub new: Vec<GrantId>,
    /// The membership types its strings carry (bit `t` = type `t`).
    pub types: u64,
}

/// The ledger abstraction of one component (Lean `Agenra.Ctx`):
/// `[old: [LGrant], new: [LGrant], tested: [uint], seeds: [uint], Flags,
/// classes: [Class]]`.
///
/// The Rust decoder accepts only what Rust's types can hold: at most
/// [`MAX_TESTED_SETS`] tested sets, types below `2^64`. The loopback
/// rebuilds two policies from it ([`SimCtx::policies`]), which needs
/// non-empty delegation chains that agree on every agent's parent and
/// matching grants in range; Lean's functions are total and need none of
/// this.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimCtx {
    /// OLD's grants.
    pub old: Vec<SimGrant>,
    /// NEW's grants.
    pub new: Vec<SimGrant>,
    /// The discovered sets tested by some grant (`Classes::tested_sets`).
    pub tested: Vec<usize>,
    /// OLD's task seeds (`Policy::task_seeds`).
    pub seeds: Vec<usize>,
    /// The rule flags.
    pub flags: Flags,
    /// The call classes of the component.
    pub classes: Vec<SimClass>,
}

impl SimCtx {
    /// The abstraction of `old` and `new` with the call classes `classes`
    /// (one component, `classes::restrict`) and the rule flags: what
    /// `agenra certify --emit-lean` writes as `ctxN`. An error if OLD and
    /// NEW follow different delegation chains for a class's agent.
    pub fn of(
        old: &Policy,
        new: &Policy,
        classes: &Classes,
        flags: &Flags,
    ) -> Result<SimCtx, WireError> {
        let grants = |p: &Policy| -> Vec<SimGrant> {
            p.grants
                .iter()
                .map(|g| SimGrant {
                    agent: g.agent,
                    quota: g.quota,
                    approval: g.approval,
                    discovers: g.discovers,
                })
                .collect()
        };
        let mut out = Vec::with_capacity(classes.classes.len());
        for c in &classes.classes {
            let chain: Vec<AgentId> = old.chain_iter(c.agent).collect();
            if new.chain_iter(c.agent).ne(chain.iter().copied()) {
                return Err(WireError::Abstraction(format!(
                    "agent {} has different delegation chains in OLD and NEW",
                    c.agent
                )));
            }
            out.push(SimClass {
                chain,
                region: c.region,
                old: c.old.clone(),
                new: c.new.clone(),
                types: c.types,
            });
        }
        Ok(SimCtx {
            old: grants(old),
            new: grants(new),
            tested: classes.tested_sets.clone(),
            seeds: old.task_seeds.clone(),
            flags: flags.clone(),
            classes: out,
        })
    }

    /// Two policies and the call classes whose abstraction this is, for
    /// `check::closed`: grants (tool 0, no resource or arguments) with the
    /// agent, quota, approval and discovered set of each; agents whose
    /// parents follow the chains of the classes; OLD's task seeds in
    /// both; one time region per region index up to the largest class
    /// region. An error (never a panic in `closed`) when no two policies
    /// have this abstraction: an empty or cyclic chain, two chains that
    /// disagree on an agent's parent, or a matching grant out of range.
    pub fn policies(&self) -> Result<(Policy, Policy, Classes), WireError> {
        let err = |m: String| Err(WireError::Abstraction(m));
        let mut parents: BTreeMap<AgentId, Option<AgentId>> = BTreeMap::new();
        for (i, c) in self.classes.iter().enumerate() {
            if c.chain.is_empty() {
                return err(format!("classes[{i}].chain is empty"));
            }
            let distinct: BTreeSet<_> = c.chain.iter().collect();
            if distinct.len() != c.chain.len() {
                return err(format!("classes[{i}].chain repeats an agent"));
            }
            for (k, &a) in c.chain.iter().enumerate() {
                let parent = c.chain.get(k + 1).copied();
                if *parents.entry(a).or_insert(parent) != parent {
                    return err(format!(
                        "classes[{i}].chain gives agent {a} another parent than an earlier class"
                    ));
                }
            }
            for (side, ids, n) in [
                ("old", &c.old, self.old.len()),
                ("new", &c.new, self.new.len()),
            ] {
                if let Some(g) = ids.iter().find(|&&g| g >= n) {
                    return err(format!("classes[{i}].{side}: grant {g} is out of range"));
                }
            }
        }
        let n_agents = parents
            .keys()
            .next_back()
            .map_or(1, |&a| a.saturating_add(1));
        if n_agents > 1 << 16 {
            return err(format!(
                "{n_agents} agents is more than this check rebuilds"
            ));
        }
        let policy = |name: &str, grants: &[SimGrant]| {
            let mut p = Policy::empty(name);
            p.agents = (0..n_agents)
                .map(|a| Agent {
                    name: format!("a{a}"),
                    parent: parents.get(&a).copied().flatten(),
                    scope: None,
                    own_context: false,
                })
                .collect();
            p.grants = grants
                .iter()
                .enumerate()
                .map(|(i, g)| Grant {
                    name: format!("g{i}"),
                    agent: g.agent,
                    tool: 0,
                    resource: None,
                    args: vec![],
                    quota: g.quota,
                    approval: g.approval,
                    expires_at: None,
                    discovers: g.discovers,
                })
                .collect();
            p.task_seeds = self.seeds.clone();
            p
        };
        let regions = self.classes.iter().map(|c| c.region).max().unwrap_or(0);
        if regions >= 1 << 16 {
            return err(format!("region {regions} is more than this check rebuilds"));
        }
        let classes = Classes {
            regions: (0..=regions as u64).collect(),
            tested_sets: self.tested.clone(),
            possible_types: u64::MAX,
            classes: self
                .classes
                .iter()
                .map(|c| agenra_certify::classes::Class {
                    agent: c.chain[0],
                    tool: 0,
                    region: c.region,
                    old: c.old.clone(),
                    new: c.new.clone(),
                    types: c.types,
                    witness: agenra_certify::classes::Witness {
                        time: 0,
                        args: vec![],
                        types: vec![],
                    },
                })
                .collect(),
        };
        Ok((policy("old", &self.old), policy("new", &self.new), classes))
    }
}

impl Wire for SimGrant {
    fn to_wire(&self) -> Cbor {
        Cbor::Array(vec![
            self.agent.to_wire(),
            self.quota.to_wire(),
            self.approval.to_wire(),
            self.discovers.to_wire(),
        ])
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        let f = array_of(c, path, 4)?;
        Ok(SimGrant {
            agent: usize::from_wire(&f[0], &field(path, "agent"))?,
            quota: Quota::from_wire(&f[1], &field(path, "quota"))?,
            approval: bool::from_wire(&f[2], &field(path, "approval"))?,
            discovers: Option::from_wire(&f[3], &field(path, "discovers"))?,
        })
    }
}

/// `[rule_pauses, approval_denials, history_rules, rules_read_sets]`.
impl Wire for Flags {
    fn to_wire(&self) -> Cbor {
        Cbor::Array(vec![
            Cbor::Bool(self.rule_pauses),
            Cbor::Bool(self.approval_denials),
            Cbor::Bool(self.history_rules),
            Cbor::Bool(self.rules_read_sets),
        ])
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        let f = array_of(c, path, 4)?;
        Ok(Flags {
            rule_pauses: bool::from_wire(&f[0], &field(path, "rule_pauses"))?,
            approval_denials: bool::from_wire(&f[1], &field(path, "approval_denials"))?,
            history_rules: bool::from_wire(&f[2], &field(path, "history_rules"))?,
            rules_read_sets: bool::from_wire(&f[3], &field(path, "rules_read_sets"))?,
        })
    }
}

impl Wire for SimClass {
    fn to_wire(&self) -> Cbor {
        Cbor::Array(vec![
            self.chain.to_wire(),
            self.region.to_wire(),
            self.old.to_wire(),
            self.new.to_wire(),
            self.types.to_wire(),
        ])
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        let f = array_of(c, path, 5)?;
        Ok(SimClass {
            chain: Vec::from_wire(&f[0], &field(path, "chain"))?,
            region: usize::from_wire(&f[1], &field(path, "region"))?,
            old: Vec::from_wire(&f[2], &field(path, "old"))?,
            new: Vec::from_wire(&f[3], &field(path, "new"))?,
            types: u64::from_wire(&f[4], &field(path, "types"))?,
        })
    }
}

impl Wire for SimCtx {
    fn to_wire(&self) -> Cbor {
        Cbor::Array(vec![
            self.old.to_wire(),
            self.new.to_wire(),
            self.tested.to_wire(),
            self.seeds.to_wire(),
            self.flags.to_wire(),
            self.classes.to_wire(),
        ])
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        let f = array_of(c, path, 6)?;
        let tested_path = field(path, "tested");
        let tested = Vec::<usize>::from_wire(&f[2], &tested_path)?;
        if tested.len() > MAX_TESTED_SETS {
            return Err(shape(
                &tested_path,
                "at most 3 tested sets (membership types have 6 bits)",
                &f[2],
            ));
        }
        Ok(SimCtx {
            old: Vec::from_wire(&f[0], &field(path, "old"))?,
            new: Vec::from_wire(&f[1], &field(path, "new"))?,
            tested,
            seeds: Vec::from_wire(&f[3], &field(path, "seeds"))?,
            flags: Flags::from_wire(&f[4], &field(path, "flags"))?,
            classes: Vec::from_wire(&f[5], &field(path, "classes"))?,
        })
    }
}

/// A chain of grants: `[uint]`, at most [`MAX_CHAIN`] ids below `2^32`.
impl Wire for Chain {
    fn to_wire(&self) -> Cbor {
        self.to_vec().to_wire()
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        let ids = Vec::<GrantId>::from_wire(c, path)?;
        if ids.len() > MAX_CHAIN {
            return Err(shape(path, "a chain of at most 4 grants", c));
        }
        Chain::from_slice(&ids).ok_or_else(|| shape(path, "grant ids below 2^32", c))
    }
}

/// `[old_paused, new_paused, old: [uint], new: [uint]]` (Lean `Agenra.Held`).
impl Wire for Held {
    fn to_wire(&self) -> Cbor {
        Cbor::Array(vec![
            Cbor::Bool(self.old_paused),
            Cbor::Bool(self.new_paused),
            self.old.to_wire(),
            self.new.to_wire(),
        ])
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        let f = array_of(c, path, 4)?;
        Ok(Held {
            old_paused: bool::from_wire(&f[0], &field(path, "old_paused"))?,
            new_paused: bool::from_wire(&f[1], &field(path, "new_paused"))?,
            old: Chain::from_wire(&f[2], &field(path, "old"))?,
            new: Chain::from_wire(&f[3], &field(path, "new"))?,
        })
    }
}

/// A pair state (Lean `Agenra.PState`): `[region, old: [Quota], new:
/// [Quota], calls: [[Held, count]], types]`. The held calls go in Rust's
/// key order (`Ord for Held`, Lean `heldCmp`); the decoder requires them
/// strictly ascending (as Lean's `upsert` keeps them), so that equal
/// states have one encoding, and counts from 1 to `2^32 - 2` (a held
/// call is counted at least once, and the checker may add one).
impl Wire for PState {
    fn to_wire(&self) -> Cbor {
        Cbor::Array(vec![
            self.region.to_wire(),
            self.old.to_wire(),
            self.new.to_wire(),
            Cbor::Array(
                self.calls
                    .iter()
                    .map(|(h, n)| Cbor::Array(vec![h.to_wire(), Cbor::uint(u64::from(*n))]))
                    .collect(),
            ),
            self.types.to_wire(),
        ])
    }
    fn from_wire(c: &Cbor, path: &str) -> Result<Self, WireError> {
        let f = array_of(c, path, 5)?;
        let calls_path = field(path, "calls");
        let Cbor::Array(items) = &f[3] else {
            return Err(shape(
                &calls_path,
                "an array of [Held, count] entries",
                &f[3],
            ));
        };
        let mut calls = BTreeMap::new();
        let mut last: Option<Held> = None;
        for (i, e) in items.iter().enumerate() {
            let p = at(&calls_path, i);
            let kv = array_of(e, &p, 2)?;
            let h = Held::from_wire(&kv[0], &at(&p, 0))?;
            let n = u64::from_wire(&kv[1], &at(&p, 1))?;
            let n = u32::try_from(n)
                .ok()
                .filter(|n| (1..u32::MAX).contains(n))
                .ok_or_else(|| shape(&at(&p, 1), "a count from 1 to 2^32 - 2", &kv[1]))?;
            if last.is_some_and(|l| l >= h) {
                return Err(shape(
                    &at(&p, 0),
                    "held calls in strictly ascending order",
                    &kv[0],
                ));
            }
            last = Some(h);
            calls.insert(h, n);
        }
        Ok(PState {
            region: usize::from_wire(&f[0], &field(path, "region"))?,
            old: Vec::from_wire(&f[1], &field(path, "old"))?,
            new: Vec::from_wire(&f[2], &field(path, "new"))?,
            calls,
            types: u64::from_wire(&f[4], &field(path, "types"))?,
        })
    }
}
