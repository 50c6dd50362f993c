//! `quota N per tenant` through the `agenra` binary: the sessions of one
//! trace are one tenant's, so a second session finds a shared quota spent
//! (and gets back what a failed call returned), while a per-session quota
//! starts full in every session.

use std::path::PathBuf;
use std::process::{Command, Output};

fn agenra(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agenra"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the agenra binary runs")
}

fn temp(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agenra-quota-scope-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

const POLICY: &str = "tool pay(to: string);\ntool read(path: string);\n\
grant daily: pay quota 2 per tenant;\ngrant reads: read quota 1 per session;\n";

fn call(session: &str, id: &str, tool: &str) -> String {
    let arg = if tool == "pay" { "to" } else { "path" };
    format!(
        "{{\"kind\":\"call\",\"session\":\"{session}\",\"id\":\"{id}\",\"time\":1,\"tool\":\"{tool}\",\"args\":{{\"{arg}\":\"x\"}}}}\n"
    )
}

#[test]
fn a_second_session_finds_the_tenant_quota_spent() {
    let policy = temp("pay.agr", POLICY);
    let check = agenra(&["check", policy.to_str().unwrap()]);
    assert!(check.status.success());
    let shown = String::from_utf8_lossy(&check.stdout);
    assert!(
        shown.contains("2 grants (1 shared by the tenant)"),
        "{shown}"
    );

    let trace: String = [
        call("s1", "p1", "pay"),
        call("s1", "p2", "pay"),
        call("s1", "r1", "read"),
        call("s2", "p1", "pay"),
        call("s2", "r1", "read"),
        "{\"kind\":\"result\",\"session\":\"s1\",\"call\":\"p2\",\"status\":\"failed\",\"output\":null}\n".into(),
        call("s2", "p2", "pay"),
        call("s2", "p3", "pay"),
    ]
    .concat();
    let trace = temp("pay.jsonl", &trace);
    let out = agenra(&[
        "replay",
        "--policy",
        policy.to_str().unwrap(),
        trace.to_str().unwrap(),
        "--json",
    ]);
    let records: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let calls: Vec<(String, String, String)> = records
        .iter()
        .filter(|r| r["kind"] == "call")
        .map(|r| {
            (
                format!(
                    "{}/{}",
                    r["session"].as_str().unwrap(),
                    r["call"].as_str().unwrap()
                ),
                r["decision"].as_str().unwrap().to_string(),
                r["rule"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let c = |a: &str, b: &str, r: &str| (a.to_string(), b.to_string(), r.to_string());
    assert_eq!(
        calls,
        vec![
            c("s1/p1", "ALLOW", "daily"),
            c("s1/p2", "ALLOW", "daily"),
            c("s1/r1", "ALLOW", "reads"),
            // The tenant's two payments are spent: s2 is denied.
            c("s2/p1", "DENY", "no-grant"),
            // A per-session quota starts full in s2.
            c("s2/r1", "ALLOW", "reads"),
            // s1's failed payment gave its unit back to the tenant.
            c("s2/p2", "ALLOW", "daily"),
            c("s2/p3", "DENY", "no-grant"),
        ],
        "{records:#?}"
    );
    let denied = records
        .iter()
        .find(|r| r["session"] == "s2" && r["call"] == "p1")
        .unwrap();
    assert!(
        denied["reason"].as_str().unwrap().contains("daily"),
        "the reason names the spent grant: {denied}"
    );
}
