//! The benchmarks are a binary of their own: `agenra` carries no counting
//! allocator (issue #31), and `agenra bench ARGS` runs `agenra-bench ARGS`
//! with the same JSON keys as before the split.

use std::process::Command;

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn only_the_bench_binary_links_the_bench_crate() {
    // Symbol names of a crate's items carry its name; the bench binary is
    // the control that shows the search finds it where it is linked.
    let agenra = std::fs::read(env!("CARGO_BIN_EXE_agenra")).expect("the agenra binary");
    let bench = std::fs::read(env!("CARGO_BIN_EXE_agenra-bench")).expect("the bench binary");
    assert!(
        contains(&bench, b"agenra_bench"),
        "control: agenra-bench links agenra_bench"
    );
    assert!(
        !contains(&agenra, b"agenra_bench"),
        "the production binary links the bench crate (and its counting allocator)"
    );
}

#[test]
fn agenra_bench_runs_the_bench_binary_with_the_same_keys() {
    let out = Command::new(env!("CARGO_BIN_EXE_agenra"))
        .args(["bench", "embed", "--json", "--samples", "50"])
        .output()
        .expect("run agenra bench");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let last: serde_json::Value =
        serde_json::from_str(text.lines().last().expect("a last line")).expect("JSON");
    for key in [
        "p50_ns",
        "p99_ns",
        "session_new_ns",
        "compact_bytes_per_call_1e4",
        "compact_bytes_per_call_1e6",
    ] {
        assert!(last.get(key).is_some(), "{key} missing in {last}");
    }
}

#[test]
fn a_bad_bench_argument_keeps_its_exit_code() {
    let out = Command::new(env!("CARGO_BIN_EXE_agenra"))
        .args(["bench", "no-such-bench"])
        .output()
        .expect("run agenra bench");
    assert_eq!(
        out.status.code(),
        Some(2),
        "clap's usage error, passed through"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-bench"));
}

#[test]
fn bench_memory_measures_the_gateway_and_its_restart() {
    let out = Command::new(env!("CARGO_BIN_EXE_agenra-bench"))
        .args(["memory", "--json", "--sessions", "3", "--decisions", "30"])
        .output()
        .expect("run agenra-bench memory");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let f: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    // A policy record, 3 session records, then a call and a result each.
    assert_eq!(f["records"], 1 + 3 + 2 * 30, "{f}");
    for key in [
        "heap_bytes_per_call",
        "monitor_heap_bytes_per_call",
        "rss_bytes_per_call",
        "restart_seconds",
        "closing_frees_bytes_per_session",
        "evicting_frees_bytes_per_session",
        "evict_index_bytes_per_record",
    ] {
        assert!(f[key].is_number(), "{key} in {f}");
    }
    assert!(f["heap_bytes_per_call"].as_f64().unwrap() > 0.0, "{f}");
    // Evicting the three idle sessions gives their memory back.
    assert!(
        f["evicting_frees_bytes_per_session"].as_f64().unwrap() > 1000.0,
        "{f}"
    );
}
