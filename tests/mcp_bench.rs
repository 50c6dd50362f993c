//! `agenra bench mcp --json`: one JSON line with the proxy's round-trip
//! figures (a short run; the numbers themselves are not asserted, a loaded
//! machine may make them anything).

use serde_json::Value;
use std::process::Command;

#[test]
fn bench_mcp_prints_one_json_line_with_its_figures() {
    let out = Command::new(env!("CARGO_BIN_EXE_agenra"))
        .args(["bench", "mcp", "--json", "--samples", "50"])
        .output()
        .expect("run agenra bench mcp");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    let v: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(v["bench"], "mcp");
    assert_eq!(v["samples"], 50);
    for key in [
        "p50_ms",
        "p99_ms",
        "direct_p50_ms",
        "direct_p99_ms",
        "added_p50_ms",
    ] {
        assert!(v[key].is_f64(), "{key}: {v}");
    }
    let (p50, p99) = (v["p50_ms"].as_f64().unwrap(), v["p99_ms"].as_f64().unwrap());
    assert!(p50 > 0.0 && p50 <= p99, "{v}");
}
