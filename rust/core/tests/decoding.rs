//! Decoding events: an event with a key given twice in any object, at any
//! depth, is rejected (it is ambiguous); the same event without the
//! duplicate decodes to what it was.

mod common;

use agenra_core::Event;
use common::*;
use proptest::prelude::*;

/// Writes `v` as JSON; the `target`-th object (depth first, from 0) gets its
/// first key twice, the second time with `dup` as its value.
fn write(
    v: &serde_json::Value,
    target: usize,
    seen: &mut usize,
    dup: &serde_json::Value,
    out: &mut String,
) {
    match v {
        serde_json::Value::Object(m) => {
            let me = *seen;
            *seen += 1;
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(k).expect("a key"));
                out.push(':');
                write(x, target, seen, dup, out);
                if i == 0 && me == target {
                    out.push(',');
                    out.push_str(&serde_json::to_string(k).expect("a key"));
                    out.push(':');
                    out.push_str(&dup.to_string());
                }
            }
            out.push('}');
        }
        serde_json::Value::Array(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(x, target, seen, dup, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Every non-empty object of `v`, depth first.
fn objects(v: &serde_json::Value) -> usize {
    match v {
        serde_json::Value::Object(m) => {
            usize::from(!m.is_empty()) + m.values().map(objects).sum::<usize>()
        }
        serde_json::Value::Array(items) => items.iter().map(objects).sum(),
        _ => 0,
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: common::cases(256),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn events_with_a_duplicated_key_at_any_depth_are_rejected(
        (policy, steps) in full_policy().prop_flat_map(|p| {
            let agents = p.agents.len();
            (Just(p), steps(agents))
        }),
        pick in any::<prop::sample::Index>(),
        same in any::<bool>(),
    ) {
        for event in events(&policy, &steps) {
            let mut json = serde_json::to_value(&event).expect("serializes");
            // Nested objects somewhere below the top level, too.
            if let Event::Result(_) = event {
                json["output"] = serde_json::json!({"a": {"b": [1, {"c": 2}]}});
            }
            let back: Event = serde_json::from_str(&json.to_string()).expect("decodes");
            prop_assert_eq!(serde_json::to_value(&back).expect("serializes"), json.clone());
            let n = objects(&json);
            // Objects that are empty have no key to repeat.
            if n == 0 {
                continue;
            }
            let target = pick.index(n);
            // Skip empty objects when counting, as `objects` does.
            let mut text = String::new();
            let mut seen = 0;
            let dup = if same { serde_json::json!([]) } else { serde_json::json!("other") };
            write(&strip_empty(&json), target, &mut seen, &dup, &mut text);
            prop_assert!(serde_json::from_str::<Event>(&text).is_err(), "accepted {}", text);
        }
    }
}

/// `v` without empty objects (they cannot hold a duplicate key), so that the
/// object count of `objects` and `write` agree.
fn strip_empty(v: &serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(m) => serde_json::Value::Object(
            m.iter()
                .filter(|(_, x)| !matches!(x, serde_json::Value::Object(o) if o.is_empty()))
                .map(|(k, x)| (k.clone(), strip_empty(x)))
                .collect(),
        ),
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.iter().map(strip_empty).collect())
        }
        other => other.clone(),
    }
}
