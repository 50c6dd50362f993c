//! Object arguments: a parameter of type `{a: string, b?: int}` (or a list
//! of such objects, or objects nested in objects) takes a JSON object with
//! exactly the declared fields. Objects are closed: a field the type does
//! not declare makes the argument ill-typed, as does a missing required
//! field or a field of the wrong type. The mismatch names the path inside
//! the argument (`edits[1].newText`), so the refusal says which part was
//! wrong. Recursion follows the declared type, never the input: an argument
//! nested deeper than its type is refused at the first level the type does
//! not declare.

use crate::policy::Param;
use crate::value::{json_type_name, ParamType, Value};
use std::collections::BTreeMap;

/// The deepest nesting of object types a policy may declare (a parameter
/// of object type is depth 1).
pub const MAX_DEPTH: usize = 16;

/// Why an argument does not have its parameter's declared type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// Where inside the argument, after the parameter's name: `""` for the
    /// argument itself, `[1].newText` for a field of a list element.
    pub at: String,
    /// The type expected there, as written (`string`, `{a: int}`), or
    /// `absent (not a declared field)` for an undeclared field.
    pub expected: String,
    /// What the argument held there (`int`, `element 2 is bool`,
    /// `nothing (a required field)`).
    pub got: String,
}

/// What [`Mismatch::expected`] says of a field the object type does not declare.
pub const UNDECLARED: &str = "absent (not a declared field)";
/// What [`Mismatch::got`] says of a required field the argument lacks.
pub const MISSING: &str = "nothing (a required field)";

pub use crate::policy::shape_name;

/// `.name`, or `["name"]` for a name that is not an identifier.
fn step(at: &str, name: &str) -> String {
    let ident = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ident {
        format!("{at}.{name}")
    } else {
        format!("{at}[{name:?}]")
    }
}

/// Converts a present, non-null JSON argument (or field) to a value of the
/// declared type of `p` (a list of them when `p.list`). Scalars convert as
/// [`Value::from_json_typed`] does; objects must have exactly the declared
/// fields.
pub fn from_json(p: &Param, v: &serde_json::Value) -> Result<Value, Mismatch> {
    json_param(p, v, String::new())
}

fn json_param(p: &Param, v: &serde_json::Value, at: String) -> Result<Value, Mismatch> {
    if p.ty != ParamType::Object {
        return Value::from_json_typed(v, p.ty, p.list).map_err(|e| Mismatch {
            at,
            expected: p.type_name(),
            got: e.got,
        });
    }
    if !p.list {
        return json_object(p, v, at);
    }
    let serde_json::Value::Array(items) = v else {
        return Err(Mismatch {
            at,
            expected: p.type_name(),
            got: json_type_name(v).into(),
        });
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        out.push(json_object(p, item, format!("{at}[{i}]"))?);
    }
    Ok(Value::List(out))
}

fn json_object(p: &Param, v: &serde_json::Value, at: String) -> Result<Value, Mismatch> {
    let serde_json::Value::Object(map) = v else {
        return Err(Mismatch {
            at,
            expected: crate::object::shape_name(&p.fields),
            got: json_type_name(v).into(),
        });
    };
    if let Some((k, x)) = map
        .iter()
        .find(|(k, _)| !p.fields.iter().any(|f| &f.name == *k))
    {
        return Err(Mismatch {
            at: step(&at, k),
            expected: UNDECLARED.into(),
            got: json_type_name(x).into(),
        });
    }
    let mut out = BTreeMap::new();
    for f in &p.fields {
        let here = step(&at, &f.name);
        let value = match map.get(&f.name) {
            None | Some(serde_json::Value::Null) if f.optional => Value::Null,
            None => {
                return Err(Mismatch {
                    at: here,
                    expected: f.type_name(),
                    got: MISSING.into(),
                })
            }
            Some(x) => json_param(f, x, here)?,
        };
        out.insert(f.name.clone(), value);
    }
    Ok(Value::Object(out))
}

/// Checks a typed argument (an embedding's [`Value`]) against the declared
/// type of `p`, as [`from_json`] does for JSON: the same fields, decimals
/// from integers and exact decimal strings. `scalar` converts one scalar
/// (the monitor's typed-call conversion).
pub fn conform(
    p: &Param,
    v: Value,
    scalar: &impl Fn(Value, ParamType, bool) -> Result<Value, crate::value::TypeMismatch>,
) -> Result<Value, Mismatch> {
    conform_at(p, v, String::new(), scalar)
}

fn conform_at(
    p: &Param,
    v: Value,
    at: String,
    scalar: &impl Fn(Value, ParamType, bool) -> Result<Value, crate::value::TypeMismatch>,
) -> Result<Value, Mismatch> {
    if p.ty != ParamType::Object {
        return scalar(v, p.ty, p.list).map_err(|e| Mismatch {
            at,
            expected: p.type_name(),
            got: e.got,
        });
    }
    if !p.list {
        return conform_object(p, v, at, scalar);
    }
    let Value::List(items) = v else {
        return Err(Mismatch {
            at,
            expected: p.type_name(),
            got: value_kind(&v).into(),
        });
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        out.push(conform_object(p, item, format!("{at}[{i}]"), scalar)?);
    }
    Ok(Value::List(out))
}

fn conform_object(
    p: &Param,
    v: Value,
    at: String,
    scalar: &impl Fn(Value, ParamType, bool) -> Result<Value, crate::value::TypeMismatch>,
) -> Result<Value, Mismatch> {
    let Value::Object(mut map) = v else {
        return Err(Mismatch {
            at,
            expected: shape_name(&p.fields),
            got: value_kind(&v).into(),
        });
    };
    if let Some((k, x)) = map
        .iter()
        .find(|(k, _)| !p.fields.iter().any(|f| &f.name == *k))
    {
        return Err(Mismatch {
            at: step(&at, k),
            expected: UNDECLARED.into(),
            got: value_kind(x).into(),
        });
    }
    let mut out = BTreeMap::new();
    for f in &p.fields {
        let here = step(&at, &f.name);
        let value = match map.remove(&f.name) {
            None | Some(Value::Null) if f.optional => Value::Null,
            None => {
                return Err(Mismatch {
                    at: here,
                    expected: f.type_name(),
                    got: MISSING.into(),
                })
            }
            Some(x) => conform_at(f, x, here, scalar)?,
        };
        out.insert(f.name.clone(), value);
    }
    Ok(Value::Object(out))
}

/// The kind of a typed value, for messages.
pub fn value_kind(v: &Value) -> &'static str {
    match v {
        Value::Str(_) => "string",
        Value::Int(_) => "int",
        Value::Bool(_) => "bool",
        Value::Decimal(_) => "decimal",
        Value::List(_) => "list",
        Value::Null => "null",
        Value::Object(_) => "object",
    }
}

/// The declared type at a field path of parameter `p` (`None` when a name
/// on the path is not a field): the field's parameter, and whether a list
/// was crossed on the way (a test there is then a test on a list).
pub fn field_at<'a>(p: &'a Param, path: &[String]) -> Option<(&'a Param, bool)> {
    let mut cur = p;
    let mut list = p.list;
    for name in path {
        if cur.ty != ParamType::Object {
            return None;
        }
        cur = cur.fields.iter().find(|f| &f.name == name)?;
        list |= cur.list;
    }
    Some((cur, list))
}

/// How deep the object types of `p` nest (0 for a scalar parameter).
pub fn depth(p: &Param) -> usize {
    if p.ty == ParamType::Object {
        1 + p.fields.iter().map(depth).max().unwrap_or(0)
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scalar(name: &str, ty: ParamType, optional: bool) -> Param {
        Param {
            name: name.into(),
            ty,
            list: false,
            optional,
            fields: Vec::new(),
        }
    }

    fn edits() -> Param {
        Param {
            name: "edits".into(),
            ty: ParamType::Object,
            list: true,
            optional: false,
            fields: vec![
                scalar("oldText", ParamType::Str, false),
                scalar("newText", ParamType::Str, false),
                scalar("n", ParamType::Int, true),
            ],
        }
    }

    #[test]
    fn objects_take_exactly_their_fields_and_name_the_path_of_a_mismatch() {
        let p = edits();
        assert_eq!(
            p.type_name(),
            "list<{oldText: string, newText: string, n?: int}>"
        );
        let ok = from_json(&p, &json!([{"oldText": "a", "newText": "b"}])).expect("matches");
        assert_eq!(
            ok.project(&["newText".into()]),
            Value::List(vec!["b".into()])
        );
        assert_eq!(ok.project(&["n".into()]), Value::List(vec![Value::Null]));
        let err = |v: serde_json::Value| from_json(&p, &v).expect_err("refused");
        let e = err(json!([{"oldText": "a", "newText": "b"}, {"oldText": "a", "newText": 1}]));
        assert_eq!(
            (e.at.as_str(), e.expected.as_str(), e.got.as_str()),
            ("[1].newText", "string", "int")
        );
        let e = err(json!([{"oldText": "a", "newText": "b", "extra": true}]));
        assert_eq!(
            (e.at.as_str(), e.expected.as_str()),
            ("[0].extra", UNDECLARED)
        );
        let e = err(json!([{"oldText": "a"}]));
        assert_eq!((e.at.as_str(), e.got.as_str()), ("[0].newText", MISSING));
        let e = err(json!({"oldText": "a", "newText": "b"}));
        assert_eq!((e.at.as_str(), e.got.as_str()), ("", "object"));
        let e = err(json!(["x"]));
        assert_eq!((e.at.as_str(), e.got.as_str()), ("[0]", "string"));
        let e = err(json!([{"oldText": "a", "newText": "b", "we-ird": 1}]));
        assert_eq!(e.at, "[0][\"we-ird\"]");
    }

    #[test]
    fn typed_objects_conform_like_json_ones() {
        let p = edits();
        let conv = |v: Value, ty: ParamType, list: bool| {
            Value::from_json_typed(&crate::object::tests::to_json(&v), ty, list)
        };
        let obj = |pairs: &[(&str, Value)]| {
            Value::Object(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect(),
            )
        };
        let good = Value::List(vec![obj(&[
            ("oldText", "a".into()),
            ("newText", "b".into()),
        ])]);
        let got = conform(&p, good, &conv).expect("conforms");
        assert_eq!(
            got,
            Value::List(vec![obj(&[
                ("oldText", "a".into()),
                ("newText", "b".into()),
                ("n", Value::Null)
            ])])
        );
        let bad = Value::List(vec![obj(&[
            ("oldText", "a".into()),
            ("newText", "b".into()),
            ("x", Value::Int(1)),
        ])]);
        assert_eq!(conform(&p, bad, &conv).expect_err("refused").at, "[0].x");
    }

    pub(super) fn to_json(v: &Value) -> serde_json::Value {
        match v {
            Value::Str(s) => json!(s),
            Value::Int(i) => json!(i),
            Value::Bool(b) => json!(b),
            Value::Decimal(d) => json!(d.to_string()),
            Value::List(items) => items.iter().map(to_json).collect(),
            Value::Null => serde_json::Value::Null,
            Value::Object(m) => m.iter().map(|(k, v)| (k.clone(), to_json(v))).collect(),
        }
    }

    #[test]
    fn field_types_and_depth() {
        let p = edits();
        let (f, list) = field_at(&p, &["n".into()]).expect("a field");
        assert_eq!((f.ty, list), (ParamType::Int, true));
        assert!(field_at(&p, &["m".into()]).is_none());
        assert!(field_at(&p, &["n".into(), "x".into()]).is_none());
        assert_eq!(depth(&p), 1);
        assert_eq!(depth(&scalar("x", ParamType::Str, false)), 0);
    }
}
