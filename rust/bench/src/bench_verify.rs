//! `agenra bench verify`: every property of `agenra verify` at `K = 5` on
//! a generated policy of 50 grants, 20 flow rules and 10 path rules. The
//! last line is one JSON object:
//! `{"bound":5,"properties":[{"name","result","seconds"}, ...]}`.

use agenra_smt::verify::{verify, Options, Property};
use serde_json::json;

/// The generated policy's source: 10 tools over 4 sinks (one bound to the
/// resource argument, one tool with a sanitizer), 50 grants (5 per tool by
/// resource prefix and a numeric bound; one held by a delegate), 20 flow
/// rules (deny, pause and allow), 10 path rules (sequences, one with a
/// `reset on reads(...)`, and counts).
pub fn policy_source() -> String {
    let mut s = String::from(
        "policy \"bench-verify\";\nlevels public < internal < secret;\n\
         categories c0, c1, c2, c3, c4, c5;\nsinks s0, s1, s2, s3;\nfacts done;\n\
         sanitizer scrub removes {c0};\nagent helper from main;\n",
    );
    for t in 0..10 {
        let level = ["public", "internal", "secret"][t % 3];
        let trust = if t % 4 == 3 { "untrusted" } else { "trusted" };
        s.push_str(&format!(
            "tool t{t}(path: string, n: int) {{\n  resource path;\n  sink s{}{};\n  output <{level}, {{c{}}}, {trust}>;\n{}{}}}\n",
            t % 4,
            // One sink bound to the resource only, one sanitizer: the
            // non-leakage search has something to look at.
            if t == 0 { " on path" } else { "" },
            t % 6,
            if t == 9 { "  fact done;\n" } else { "" },
            if t == 8 { "  sanitizer scrub;\n" } else { "" }
        ));
    }
    s.push_str("resource prefix \"vault/\" label <secret, {c0}, trusted>;\n");
    for g in 0..49 {
        let t = g % 10;
        let quota = if g % 7 == 0 {
            "unlimited".to_string()
        } else {
            (3 + g % 5).to_string()
        };
        s.push_str(&format!(
            "grant g{g}: t{t} on prefix \"p{}/\" where n <= {} quota {quota}{};\n",
            g / 10,
            10 * (g / 10 + 1),
            if g % 11 == 5 { " approval" } else { "" }
        ));
    }
    // A delegate, attenuating `main`'s first grant of t9.
    s.push_str("grant g49: t9 on prefix \"p0/\" where n <= 10 quota 2 agent helper;\n");
    for r in 0..20 {
        let sink = r % 4;
        match r % 4 {
            0 => s.push_str(&format!(
                "deny flow f{r}: category c{} -> s{sink};\n",
                r % 6
            )),
            1 => s.push_str(&format!("deny flow f{r}: untrusted -> s{sink};\n")),
            2 => s.push_str(&format!(
                "pause flow f{r}: sensitivity >= internal -> s{sink} when n > {};\n",
                r
            )),
            _ => s.push_str(&format!(
                "allow flow f{r}: up to <internal, {{c{}}}, trusted> -> s{sink} when n <= {};\n",
                r % 6,
                r
            )),
        }
    }
    for r in 0..10 {
        if r % 2 == 0 {
            s.push_str(&format!(
                "deny path q{r}: call t{r} -> call t{}{};\n",
                (r + 1) % 10,
                if r == 0 {
                    " reset on reads(untrusted)"
                } else {
                    ""
                }
            ));
        } else {
            s.push_str(&format!(
                "pause count q{r}: at most {} call t{r};\n",
                2 + r % 3
            ));
        }
    }
    s
}

/// Runs the benchmark: one line per property, then the JSON summary.
/// With `AGENRA_BENCH_VERIFY_POLICY=FILE` in the environment the generated
/// policy is also written to `FILE` (to run `agenra verify` on it).
pub fn run_bench(json_lines: bool) -> Result<String, String> {
    let src = policy_source();
    if let Ok(path) = std::env::var("AGENRA_BENCH_VERIFY_POLICY") {
        std::fs::write(&path, &src).map_err(|e| format!("{path}: {e}"))?;
    }
    let compiled = agenra_policy::compile(&src, "bench-verify")
        .map_err(|e| e.render("bench-verify.agr", &src))?;
    let p = compiled.policy;
    let opts = Options {
        bound: 5,
        timeout_ms: 60_000,
    };
    let findings = verify(&p, &Property::ALL, &opts);
    let mut out = String::new();
    let mut props = Vec::new();
    for f in &findings {
        let o =
            json!({"name": f.property.name(), "result": f.result.as_str(), "seconds": f.seconds});
        if json_lines {
            out.push_str(&format!("{o}\n"));
        } else {
            out.push_str(&format!(
                "{:22} {:8} {:7.3} s\n",
                f.property.name(),
                f.result.as_str(),
                f.seconds
            ));
        }
        props.push(o);
    }
    out.push_str(&format!("{}\n", json!({"bound": 5, "properties": props})));
    Ok(out)
}
