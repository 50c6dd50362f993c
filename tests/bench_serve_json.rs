//! `agenra bench serve --json --sessions N`: the last line is one JSON
//! object with `decisions_per_s`, `p50_ms`, `p99_ms`, `replicas`,
//! `sessions` and `lock_wait_ms` (issue 28); `--replicas` needs `--pg`.

use std::process::Command;

#[test]
fn bench_serve_reports_sessions_replicas_and_lock_wait() {
    let out = Command::new(env!("CARGO_BIN_EXE_agenra-bench"))
        .args([
            "serve",
            "--json",
            "--seconds",
            "0.3",
            "--clients",
            "2",
            "--sessions",
            "5",
        ])
        .env_remove("AGENRA_BENCH_PG")
        .env_remove("AGENRA_BENCH_REPLICAS")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = text.lines().last().unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(last).unwrap();
    for key in ["decisions_per_s", "p50_ms", "p99_ms", "lock_wait_ms"] {
        assert!(v[key].is_number(), "{key}: {v}");
    }
    assert_eq!(v["replicas"], 1, "{v}");
    assert_eq!(v["sessions"], 5, "{v}");
    // The embedded store has one writer: no lock to wait for.
    assert_eq!(v["lock_wait_ms"], 0.0, "{v}");
    assert!(v["decisions"].as_u64().unwrap() > 0, "{v}");

    let out = Command::new(env!("CARGO_BIN_EXE_agenra-bench"))
        .args(["serve", "--json", "--seconds", "0.1", "--replicas", "2"])
        .env_remove("AGENRA_BENCH_PG")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--replicas needs --pg"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
