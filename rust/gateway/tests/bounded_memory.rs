//! Bounded gateway memory (issue #28): sessions are compact by default
//! (`--compact-window`), each session's record says its window so a
//! restart rebuilds it exactly, and only the answers of open and recent
//! calls are kept, while a call id is never decided twice.

use agenra_core::CompiledPolicy;
use agenra_gateway::api::{Authorize, Outcome, ReportIn};
use agenra_gateway::Gateway;
use agenra_store::Log;
use serde_json::json;
use std::path::{Path, PathBuf};

const POLICY: &str = "levels public < internal;\n\
    sinks network;\n\
    tool fs.read(path: string) { resource path; output <internal, {}, trusted>; }\n\
    tool mail.send(to: string, body: string) { resource to; sink network on body; }\n\
    grant read: fs.read quota unlimited;\n\
    grant mail: mail.send quota 1000;\n";

fn store(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agenra-mem-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("store.redb")
}

fn open(path: &Path) -> Gateway {
    let compiled = agenra_policy::compile(POLICY, "mem").unwrap();
    let policy = CompiledPolicy::new(compiled.policy).unwrap();
    Gateway::open(Log::open_redb(path).unwrap(), policy, "mem.agr", false).unwrap()
}

fn session(gw: &Gateway, s: &str) {
    gw.create_session(None, Some(s.into()), None)
        .unwrap()
        .wait()
        .unwrap();
}

fn read(gw: &Gateway, s: &str, id: &str) -> Outcome {
    let req: Authorize = serde_json::from_value(json!({
        "session": s, "call": {"id": id, "tool": "fs.read", "args": {"path": "/a"}}
    }))
    .unwrap();
    let out = gw.authorize(req).unwrap().wait().unwrap().0;
    let done: ReportIn =
        serde_json::from_value(json!({"session": s, "call": id, "status": "succeeded"})).unwrap();
    gw.report(done).unwrap().wait().unwrap();
    out
}

/// A mail whose body comes from call `from` (`""`: no observed lineage).
fn mail_req(s: &str, id: &str, from: &str) -> Authorize {
    let lineage = if from.is_empty() {
        json!({})
    } else {
        json!({"body": [from]})
    };
    serde_json::from_value(json!({
        "session": s,
        "call": {"id": id, "tool": "mail.send", "args": {"to": "bob", "body": "hi"},
                 "lineage": lineage}
    }))
    .unwrap()
}

fn mail(gw: &Gateway, s: &str, id: &str, from: &str) -> Result<Outcome, u16> {
    let out = gw
        .authorize(mail_req(s, id, from))
        .and_then(|p| p.wait())
        .map_err(|e| e.status)?
        .0;
    if out.decision == Some("ALLOW") {
        let done: ReportIn =
            serde_json::from_value(json!({"session": s, "call": id, "status": "succeeded"}))
                .unwrap();
        gw.report(done).unwrap().wait().unwrap();
    }
    Ok(out)
}

/// Reads, then mails citing the read: 30 rounds (far past a window of 4).
fn rounds(gw: &Gateway, s: &str) -> Vec<(Option<&'static str>, String)> {
    (0..30)
        .map(|i| {
            read(gw, s, &format!("r{i}"));
            let out = mail(gw, s, &format!("m{i}"), &format!("r{i}")).unwrap();
            (out.decision, out.ledger_hash)
        })
        .collect()
}

#[test]
fn a_compact_session_decides_as_a_full_one_within_its_window_and_replays() {
    let (full_path, compact_path) = (store("full"), store("compact"));
    let (full, compact) = (open(&full_path), open(&compact_path));
    full.set_compact_window(0);
    compact.set_compact_window(4);
    session(&full, "s");
    session(&compact, "s");
    let a = rounds(&full, "s");
    assert_eq!(a, rounds(&compact, "s"));
    assert!(a.iter().all(|(d, _)| *d == Some("ALLOW")), "{a:?}");
    // The one difference, fail closed: lineage naming a call older than
    // the window is unknown to the compact session.
    assert_eq!(
        mail(&full, "s", "old", "r0").unwrap().decision,
        Some("ALLOW")
    );
    assert_eq!(
        mail(&compact, "s", "old", "r0").unwrap().decision,
        Some("DENY")
    );
    let views: Vec<_> = [&full, &compact]
        .iter()
        .map(|g| g.session_view(None, "s").unwrap().ledger_hash)
        .collect();
    drop((full, compact));
    // Each restart replays every recorded decision (recovery refuses a
    // log whose decisions no longer replay).
    for (path, before) in [(full_path, &views[0]), (compact_path, &views[1])] {
        let g = open(&path);
        assert_eq!(&g.session_view(None, "s").unwrap().ledger_hash, before);
    }
}

#[test]
fn a_session_keeps_the_window_it_was_opened_with_across_restarts() {
    let path = store("kept");
    let gw = open(&path);
    gw.set_compact_window(0);
    session(&gw, "whole");
    gw.set_compact_window(4);
    session(&gw, "small");
    for s in ["whole", "small"] {
        for i in 0..10 {
            read(&gw, s, &format!("r{i}"));
        }
    }
    assert_eq!(
        mail(&gw, "whole", "m", "r0").unwrap().decision,
        Some("ALLOW")
    );
    assert_eq!(
        mail(&gw, "small", "m", "r0").unwrap().decision,
        Some("DENY")
    );
    drop(gw);
    // Opened with the default window: each session gets its own back, so
    // both recorded decisions replay and both sessions go on as before.
    let gw = open(&path);
    assert_eq!(
        mail(&gw, "whole", "m2", "r1").unwrap().decision,
        Some("ALLOW")
    );
    assert_eq!(
        mail(&gw, "small", "m2", "r1").unwrap().decision,
        Some("DENY")
    );
}

#[test]
fn a_retry_of_an_old_call_is_refused_never_decided_twice() {
    let path = store("retry");
    let gw = open(&path);
    session(&gw, "s");
    let first = mail(&gw, "s", "m0", "").unwrap();
    assert_eq!(first.decision, Some("ALLOW"));
    let mut newest = None;
    for i in 0..80 {
        read(&gw, "s", &format!("r{i}"));
        newest = Some(mail(&gw, "s", &format!("m{}", i + 1), &format!("r{i}")).unwrap());
    }
    let left = gw.session_view(None, "s").unwrap().ledger["mail"];
    // Only open and recent calls keep their answers.
    let held = gw.calls(None, "s").unwrap().len();
    assert!(
        held <= 2 * agenra_gateway::state::RECENT_ANSWERS,
        "{held} answers held"
    );
    // The newest call's retry gets its answer, as given.
    let again = gw
        .authorize(mail_req("s", "m80", "r79"))
        .unwrap()
        .wait()
        .unwrap()
        .0;
    assert!(again.replayed);
    assert_eq!(
        (again.tenant.as_str(), again.session.as_str()),
        ("default", "s")
    );
    assert_eq!(again.policy_hash, first.policy_hash);
    assert_eq!(again.decision, Some("ALLOW"));
    // Field for field the answer it was given (kept compactly:
    // `state/answers.rs`), but for its audit position and `replayed`.
    let given = newest.expect("80 calls");
    assert_eq!(again.audit_seq, None);
    let given = agenra_gateway::api::Outcome {
        audit_seq: None,
        replayed: true,
        ..given
    };
    assert_eq!(
        serde_json::to_value(&again).unwrap(),
        serde_json::to_value(&given).unwrap()
    );
    assert_eq!(again.kind, "call");
    // The oldest call's retry, and a different call reusing its id: 409,
    // nothing spent, before and after a restart.
    assert_eq!(mail(&gw, "s", "m0", "").unwrap_err(), 409);
    assert_eq!(mail(&gw, "s", "m1", "r5").unwrap_err(), 409);
    drop(gw);
    let gw = open(&path);
    assert_eq!(mail(&gw, "s", "m0", "").unwrap_err(), 409);
    assert_eq!(gw.session_view(None, "s").unwrap().ledger["mail"], left);
}

#[test]
fn open_calls_keep_their_answers_however_many_there_are() {
    let path = store("open");
    let gw = open(&path);
    session(&gw, "s");
    let start = |id: &str| -> Authorize {
        serde_json::from_value(json!({
            "session": "s", "call": {"id": id, "tool": "fs.read", "args": {"path": "/a"}}
        }))
        .unwrap()
    };
    // 100 calls whose results never come, among finished ones.
    for i in 0..100 {
        gw.authorize(start(&format!("open{i}")))
            .unwrap()
            .wait()
            .unwrap();
        read(&gw, "s", &format!("done{i}"));
    }
    let calls = gw.calls(None, "s").unwrap();
    let open_ids = calls
        .iter()
        .filter(|(id, _)| id.starts_with("open"))
        .count();
    assert_eq!(open_ids, 100, "{calls:?}");
    // Finished ones are trimmed once the answers double (amortized).
    let bound = 2 * (100 + agenra_gateway::state::RECENT_ANSWERS);
    assert!(calls.len() <= bound, "{} answers held", calls.len());
    // The oldest open call's retry is answered, not refused.
    let again = gw.authorize(start("open0")).unwrap().wait().unwrap().0;
    assert!(again.replayed);
}
