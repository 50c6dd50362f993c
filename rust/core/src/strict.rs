//! Strict decoding of events: a JSON object with the same key twice, at any
//! depth, is an error. serde's maps keep the last value, so
//! `"lineage":{"body":["w1"],"body":[]}` would silently drop observed
//! lineage and `"args":{"to":"a","to":"b"}` would check a value another
//! consumer of the same bytes may not send. An ambiguous event must never be
//! decided.

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;

/// A JSON value whose objects have no duplicate keys, at any depth.
pub struct StrictValue(pub serde_json::Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<StrictValue, D::Error> {
        d.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, b: bool) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Bool(b))
    }
    fn visit_i64<E>(self, i: i64) -> Result<Self::Value, E> {
        Ok(i.into())
    }
    fn visit_u64<E>(self, u: u64) -> Result<Self::Value, E> {
        Ok(u.into())
    }
    fn visit_f64<E: de::Error>(self, f: f64) -> Result<Self::Value, E> {
        serde_json::Number::from_f64(f)
            .map(serde_json::Value::Number)
            .ok_or_else(|| E::custom("a number that is not finite"))
    }
    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(serde_json::Value::String(s.to_string()))
    }
    fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
        Ok(serde_json::Value::String(s))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        StrictValue::deserialize(d).map(|v| v.0)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(StrictValue(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(serde_json::Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let StrictValue(value) = map.next_value()?;
            if out.contains_key(&key) {
                return Err(de::Error::custom(format_args!("duplicate key `{key}`")));
            }
            out.insert(key, value);
        }
        Ok(serde_json::Value::Object(out))
    }
}

/// `deserialize_with` for a JSON value (a tool's output).
pub fn value<'de, D: Deserializer<'de>>(d: D) -> Result<serde_json::Value, D::Error> {
    StrictValue::deserialize(d).map(|v| v.0)
}

/// `deserialize_with` for a JSON object (a call's arguments).
pub fn object<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<serde_json::Map<String, serde_json::Value>, D::Error> {
    match StrictValue::deserialize(d)?.0 {
        serde_json::Value::Object(m) => Ok(m),
        other => Err(de::Error::custom(format_args!(
            "expected an object, found {}",
            crate::value::json_type_name(&other)
        ))),
    }
}

/// `deserialize_with` for a map of lists of strings (lineage, seeded sets).
pub fn lists<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, Vec<String>>, D::Error> {
    struct ListsVisitor;
    impl<'de> Visitor<'de> for ListsVisitor {
        type Value = BTreeMap<String, Vec<String>>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object of lists of strings")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some(key) = map.next_key::<String>()? {
                let value: Vec<String> = map.next_value()?;
                if out.contains_key(&key) {
                    return Err(de::Error::custom(format_args!("duplicate key `{key}`")));
                }
                out.insert(key, value);
            }
            Ok(out)
        }
    }
    d.deserialize_map(ListsVisitor)
}

#[cfg(test)]
mod tests {
    use crate::event::Event;

    fn err(json: &str) -> String {
        match serde_json::from_str::<Event>(json) {
            Ok(e) => panic!("accepted {e:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn duplicate_keys_are_rejected_at_every_depth() {
        let call = |rest: &str| format!(r#"{{"kind":"call","id":"c","time":1,"tool":"t",{rest}}}"#);
        assert!(
            err(&call(r#""args":{"to":"evil@x","to":"a@corp"}"#)).contains("duplicate key `to`")
        );
        assert!(err(&call(r#""args":{"a":[{"k":1,"k":2}]}"#)).contains("duplicate key `k`"));
        assert!(
            err(&call(r#""lineage":{"body":["w1"],"body":[]}"#)).contains("duplicate key `body`")
        );
        assert!(err(&call(r#""inferred":{"b":[],"b":[]}"#)).contains("duplicate key `b`"));
        assert!(err(
            r#"{"kind":"result","call":"c","status":"succeeded","output":{"a":{"x":0,"x":1}}}"#
        )
        .contains("duplicate key `x`"));
        assert!(
            err(r#"{"kind":"task","id":"t","text":"x","sets":{"s":[],"s":["a"]}}"#)
                .contains("duplicate key `s`")
        );
        // Top-level duplicates were already errors.
        assert!(
            err(r#"{"kind":"call","id":"c","id":"d","time":1,"tool":"t"}"#).contains("duplicate")
        );
        // Scalars come through unchanged.
        let out = r#"{"a":true,"b":-1,"c":"s","d":null,"e":[2.5,18446744073709551615]}"#;
        match serde_json::from_str::<Event>(&format!(
            r#"{{"kind":"result","call":"c","status":"succeeded","output":{out}}}"#
        )) {
            Ok(Event::Result(r)) => assert_eq!(
                r.output,
                serde_json::from_str::<serde_json::Value>(out).unwrap()
            ),
            other => panic!("{other:?}"),
        }
        // Without duplicates, the same shapes decode.
        assert!(serde_json::from_str::<Event>(&call(
            r#""args":{"a":[{"k":1}],"b":null},"lineage":{"a":[]}"#
        ))
        .is_ok());
    }
}
