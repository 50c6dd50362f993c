//! `agenra audit report --format html` for a reviewer (issue 29): the
//! data paths drawn (inline SVG, as the approvals page draws them), who
//! approved or rejected what and when, and every policy revision with its
//! certificate verdict; every text escaped. Compared with a golden file
//! (regenerate with `UPDATE_GOLDEN=1 cargo test --test audit_report_html`).

use agenra_store::{chain_line, Kind, Record, GENESIS};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_agenra");
const T0: u64 = 1_796_086_800_000; // 2026-12-01 01:00:00 UTC

fn audit_file(name: &str, records: Vec<Record>) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agenra-report-html-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut prev = GENESIS.to_string();
    let mut text = Vec::new();
    for (i, mut r) in records.into_iter().enumerate() {
        r.seq = i as u64 + 1;
        r.prev = prev;
        let (line, hash) = chain_line(&r).unwrap();
        text.extend_from_slice(&line);
        text.push(b'\n');
        prev = hash;
    }
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn event(
    secs: u64,
    ev: serde_json::Value,
    verdict: Option<&str>,
    rule: &str,
    reason: &str,
    path: &[&str],
) -> Record {
    Record {
        kind: Kind::Event,
        time_ms: T0 + secs * 1000,
        tenant: Some("acme".into()),
        session: Some("s".into()),
        policy_hash: "sha256:p2".into(),
        event: Some(ev),
        verdict: verdict.map(str::to_string),
        rule: Some(rule.into()),
        reason: Some(reason.into()),
        path: path.iter().map(|p| p.to_string()).collect(),
        ledger_hash: Some("sha256:0123456789abcdef".into()),
        ..Record::default()
    }
}

fn log() -> PathBuf {
    let p1 = Record {
        kind: Kind::Policy,
        time_ms: T0,
        policy_hash: "sha256:p1".into(),
        source: Some("policy.agr".into()),
        ..Record::default()
    };
    let p2 = Record {
        kind: Kind::Policy,
        time_ms: T0 + 1000,
        policy_hash: "sha256:p2".into(),
        source: Some("api".into()),
        actor: Some("admin:ops".into()),
        certificate: Some(
            json!({"verdict": "certified", "method": "smt", "old_hash": "sha256:p1"}),
        ),
        ..Record::default()
    };
    let session = Record {
        kind: Kind::Session,
        time_ms: T0 + 2000,
        tenant: Some("acme".into()),
        session: Some("s".into()),
        agent: Some("bot".into()),
        policy_hash: "sha256:p2".into(),
        ..Record::default()
    };
    let call = |id: &str, tool: &str| json!({"kind": "call", "id": id, "tool": tool, "args": {}});
    let settle = |kind: &str, id: &str| json!({"kind": kind, "call": id});
    let mut approve = event(
        7,
        settle("approve", "p1"),
        Some("ALLOW"),
        "p",
        "approved by a human: re-checked and admitted",
        &[],
    );
    approve.actor = Some("approver:alice".into());
    approve.note = Some("the <notes> may go out".into());
    let mut reject = event(8, settle("reject", "p2"), None, "", "rejected", &[]);
    reject.actor = Some("approver:bob".into());
    let mut recheck = event(
        12,
        settle("approve", "p3"),
        Some("DENY"),
        "secrets_out",
        "re-checked at approval time: denied",
        &["k1", "context", "p3"],
    );
    recheck.actor = Some("approver:alice".into());
    recheck.note = Some("fine".into());
    audit_file(
        "session.jsonl",
        vec![
            p1,
            p2,
            session,
            event(3, call("r1", "read"), Some("ALLOW"), "r", "granted", &[]),
            event(
                4,
                json!({"kind": "result", "call": "r1", "status": "succeeded"}),
                None,
                "",
                "merged",
                &[],
            ),
            event(
                5,
                call("p1", "post"),
                Some("PAUSE"),
                "ask",
                "needs a human",
                &["r1", "context", "p1"],
            ),
            event(
                6,
                call("p2", "post<script>"),
                Some("PAUSE"),
                "ask",
                "needs a human",
                &["r1", "context", "p2"],
            ),
            approve,
            reject,
            event(
                9,
                call("p3", "post"),
                Some("PAUSE"),
                "ask",
                "needs a human",
                &["r1", "context", "p3"],
            ),
            event(10, call("k1", "peek"), Some("ALLOW"), "k", "granted", &[]),
            event(
                11,
                json!({"kind": "result", "call": "k1", "status": "succeeded"}),
                None,
                "",
                "merged",
                &[],
            ),
            recheck,
        ],
    )
}

fn report(file: &Path) -> String {
    let out = Command::new(BIN)
        .args(["audit", "report", file.to_str().unwrap()])
        .args(["--tenant", "acme", "--session", "s", "--format", "html"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .replace(file.to_str().unwrap(), "LOG")
}

#[test]
fn the_html_report_draws_paths_and_says_who_settled_what_when() {
    let html = report(&log());
    // The paths, drawn: the pauses' and the re-check's.
    assert_eq!(html.matches("<svg class=\"path\"").count(), 4, "{html}");
    assert!(html.contains("r1 (read) → context → p1 (post)"), "{html}");
    assert!(html.contains("k1 (peek) → context → p3 (post)"), "{html}");
    assert!(
        html.contains("record 13: approve <code>p3</code>: <span class=\"DENY\">DENY</span>"),
        "{html}"
    );
    // Who approved what, and when.
    assert!(
        html.contains("approved by approver:alice at 2026-12-01 01:00:07 (record 8, because &quot;the &lt;notes&gt; may go out&quot;), re-checked: ALLOW"),
        "{html}"
    );
    assert!(
        html.contains("rejected by approver:bob at 2026-12-01 01:00:08 (record 9)"),
        "{html}"
    );
    // Every revision, with its certificate verdict and who ran it.
    assert!(
        html.contains("the store&#39;s first policy") || html.contains("the store's first policy"),
        "{html}"
    );
    assert!(
        html.contains("certify: certified (smt) against sha256:p1; run by admin:ops"),
        "{html}"
    );
    // Escaped.
    assert!(!html.contains("<script"), "{html}");
    // Golden.
    let golden =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/audit-report-session.html");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &html).unwrap();
    }
    let want = std::fs::read_to_string(&golden).unwrap_or_default();
    assert_eq!(
        html,
        want,
        "differs from {} (UPDATE_GOLDEN=1 to regenerate)",
        golden.display()
    );
}
