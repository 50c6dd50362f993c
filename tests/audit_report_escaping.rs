//! `agenra audit report` escapes everything it prints from the log: a
//! crafted id, tool, rule or reason adds no HTML, no Markdown markup, no
//! table cell or line, and a control or bidirectional character shows as an
//! escape. The log here holds what new input can no longer carry (a
//! right-to-left override, NUL, a line break in an id): a log recorded
//! before ids were checked still renders safely.

use agenra_store::{chain_line, Kind, Record, GENESIS};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_agenra");

/// Writes `records` as a hash-chained audit file (what `audit export` writes).
fn audit_file(name: &str, records: Vec<Record>) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agenra-report-{}", std::process::id()));
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

fn crafted_log() -> PathBuf {
    let policy = Record {
        kind: Kind::Policy,
        time_ms: 1_796_086_800_000,
        policy_hash: "sha256:p".into(),
        source: Some("<i>policy</i>.agr\u{202e}".into()),
        ..Record::default()
    };
    let session = Record {
        kind: Kind::Session,
        time_ms: 1_796_086_800_000,
        tenant: Some("t".into()),
        session: Some("s".into()),
        agent: Some("<img src=x onerror=alert(1)>".into()),
        policy_hash: "sha256:p".into(),
        ..Record::default()
    };
    let event =
        |id: &str, tool: &str, verdict: &str, rule: &str, reason: &str, path: &[&str]| Record {
            kind: Kind::Event,
            time_ms: 1_796_086_801_000,
            tenant: Some("t".into()),
            session: Some("s".into()),
            policy_hash: "sha256:p".into(),
            event: Some(json!({"kind": "call", "id": id, "time": 1, "tool": tool})),
            verdict: Some(verdict.into()),
            rule: Some(rule.into()),
            reason: Some(reason.into()),
            path: path.iter().map(|p| p.to_string()).collect(),
            ledger_hash: Some("sha256:l".into()),
            ..Record::default()
        };
    audit_file(
        "crafted.jsonl",
        vec![
            policy,
            session,
            event(
                "<script>alert(1)</script>",
                "fs.read",
                "ALLOW",
                "r|ule",
                "granted\n| forged | row |",
                &[],
            ),
            event(
                "c4\u{202e}gnp.exe",
                "fs.read\u{0}",
                "DENY",
                "<b>no_flow</b>",
                "a `code` *b* [l](http://x) & \u{1b}[31m \u{2066}",
                &["<script>", "c4\u{202e}gnp.exe"],
            ),
            event("x\nfake", "t", "PAUSE", "r", "why\r\n", &[]),
        ],
    )
}

fn report(file: &Path, format: &str) -> String {
    let out = Command::new(BIN)
        .args(["audit", "report", file.to_str().unwrap()])
        .args(["--tenant", "t", "--session", "s", "--format", format])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Any character of the refused set other than the line breaks the
/// document itself is made of.
fn raw_invisible(text: &str) -> Vec<char> {
    text.chars()
        .filter(|&c| c != '\n' && agenra_core::ident::is_refused(c))
        .collect()
}

#[test]
fn markdown_report_escapes_ids_names_and_reasons() {
    let md = report(&crafted_log(), "markdown");
    assert!(!md.contains('<') && !md.contains('>'), "{md}");
    assert!(md.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{md}");
    assert!(md.contains("&lt;img src=x onerror=alert(1)&gt;"), "{md}");
    assert_eq!(raw_invisible(&md), Vec::<char>::new(), "{md:?}");
    // The override and NUL show as escapes (backslash-escaped in Markdown).
    assert!(md.contains("c4\\\\u{202e}gnp.exe"), "{md}");
    assert!(md.contains("fs.read\\\\u{0}"), "{md}");
    // Markup characters are escaped, so the reason forges no cell or row.
    assert!(md.contains("r\\|ule"), "{md}");
    assert!(md.contains("granted\\\\n\\| forged \\| row \\|"), "{md}");
    assert!(!md.lines().any(|l| l.starts_with("| forged")), "{md}");
    assert!(!md.lines().any(|l| l.starts_with("fake")), "{md}");
    assert!(
        md.contains("a \\`code\\` \\*b\\* \\[l\\](http://x) &amp; \\\\u{1b}\\[31m \\\\u{2066}"),
        "{md}"
    );
    // Each table row has as many cells as its header: every `|` inside a
    // cell is escaped.
    let unescaped = |l: &str| {
        let b = l.as_bytes();
        (0..b.len())
            .filter(|&i| {
                b[i] == b'|' && b[..i].iter().rev().take_while(|&&c| c == b'\\').count() % 2 == 0
            })
            .count()
    };
    let events: Vec<&str> = md
        .split("## Events")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .unwrap()
        .lines()
        .filter(|l| l.starts_with('|'))
        .collect();
    assert_eq!(events.len(), 2 + 3, "{md}");
    for l in &events {
        assert_eq!(unescaped(l), 10, "{l}");
    }
}

#[test]
fn html_report_escapes_ids_names_and_reasons() {
    let html = report(&crafted_log(), "html");
    assert!(
        !html.contains("<script") && !html.contains("<img") && !html.contains("<b>no_flow"),
        "{html}"
    );
    assert!(
        html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{html}"
    );
    assert!(html.contains("&lt;b&gt;no_flow&lt;/b&gt;"), "{html}");
    assert_eq!(raw_invisible(&html), Vec::<char>::new(), "{html:?}");
    assert!(html.contains("c4\\u{202e}gnp.exe"), "{html}");
    assert!(html.contains("fs.read\\u{0}"), "{html}");
    assert!(html.contains("x\\nfake"), "{html}");
    assert!(
        html.contains("&lt;i&gt;policy&lt;/i&gt;.agr\\u{202e}"),
        "{html}"
    );
}
