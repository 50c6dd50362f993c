//! A certificate is input: a held-call count the product's steps would
//! wrap (0, or u32::MAX) is refused by the checker, never a panic.

use agenra_certify::{certificate::Certificate, certify, check_certificate, Verdict};

fn compile(src: &str) -> agenra_core::Policy {
    agenra_policy::compile(src, "p").expect("compiles").policy
}

/// Every `[held, count]` pair under a `calls` key, as JSON pointers to the count.
fn counts(v: &serde_json::Value, at: String, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                if k == "calls" {
                    if let Some(pairs) = x.as_array() {
                        for (i, p) in pairs.iter().enumerate() {
                            if p.as_array().is_some_and(|a| a.len() == 2) {
                                out.push(format!("{at}/calls/{i}/1"));
                            }
                        }
                    }
                }
                counts(x, format!("{at}/{k}"), out);
            }
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                counts(x, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn a_held_count_that_would_wrap_is_refused() {
    // NEW puts a new grant before one that serves some of its calls: not a
    // construction, so certify builds the relation, whose pairs hold
    // running calls.
    let old = compile("tool t(r: string) { resource r; }\ngrant b: t quota 2;\n");
    let new = compile(
        "tool t(r: string) { resource r; }\n\
         grant n: t on prefix \"z\" quota 1;\ngrant b: t quota 2;\n",
    );
    let report = certify(&old, &new);
    assert_eq!(report.verdict, Verdict::Certified, "{:?}", report.reasons);
    assert_eq!(report.method.as_deref(), Some("checked simulation"));
    let cert = report.certificate.expect("a certificate");
    let json = serde_json::to_value(&cert).unwrap();
    let mut at = Vec::new();
    counts(&json, String::new(), &mut at);
    assert!(!at.is_empty(), "no held calls in {json}");
    for path in &at {
        for bad in [0u64, u64::from(u32::MAX)] {
            let mut j = json.clone();
            *j.pointer_mut(path).unwrap() = serde_json::Value::from(bad);
            if let Ok(c) = serde_json::from_value::<Certificate>(j) {
                assert!(
                    check_certificate(&old, &new, &c).is_err(),
                    "count {bad} at {path} passes"
                );
            }
        }
    }
}
