//! Session snapshots (`serve --snapshot-every N`, issue #28): a restart
//! restores each session from its last snapshot record and replays only
//! the events after it, deciding afterwards exactly as a gateway that
//! replayed everything; a snapshot whose state is bad (though well
//! chained) is reported and the session is replayed in full.

use agenra_core::CompiledPolicy;
use agenra_gateway::api::{Authorize, Outcome, ReportIn, ResolveIn};
use agenra_gateway::Gateway;
use agenra_store::{Kind, Log, Record};
use serde_json::json;
use std::path::{Path, PathBuf};

const POLICY: &str = "levels public < internal;\n\
    sinks network;\n\
    tool fs.read(path: string) { resource path; output <internal, {}, trusted>; }\n\
    tool mail.send(to: string, body: string) { resource to; sink network on body; }\n\
    tool pay.send(to: string) { resource to; }\n\
    grant read: fs.read quota unlimited;\n\
    grant mail: mail.send quota 1000;\n\
    grant pay: pay.send quota 5 approval;\n";

fn store(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agenra-snap-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("store.redb")
}

fn open(path: &Path, every: u64) -> Gateway {
    open_log(Log::open_redb(path).unwrap(), every)
}

fn open_log(log: Log, every: u64) -> Gateway {
    let compiled = agenra_policy::compile(POLICY, "snap").unwrap();
    let policy = CompiledPolicy::new(compiled.policy).unwrap();
    let gw = Gateway::open(log, policy, "snap.agr", false).unwrap();
    gw.set_compact_window(4);
    gw.set_snapshot_every(every).unwrap();
    gw
}

fn authorize(gw: &Gateway, s: &str, id: &str, tool: &str, args: serde_json::Value) -> Outcome {
    let req: Authorize = serde_json::from_value(json!({
        "session": s, "call": {"id": id, "tool": tool, "args": args}
    }))
    .unwrap();
    gw.authorize(req).unwrap().wait().unwrap().0
}

fn done(gw: &Gateway, s: &str, id: &str) {
    let r: ReportIn =
        serde_json::from_value(json!({"session": s, "call": id, "status": "succeeded"})).unwrap();
    gw.report(r).unwrap().wait().unwrap();
}

/// Round `i` of session `s`: a read, a mail (admitted while the quota
/// lasts), and on every third round a payment that pauses.
fn round(gw: &Gateway, s: &str, i: usize) -> Vec<String> {
    let mut out = vec![];
    let r = authorize(gw, s, &format!("r{i}"), "fs.read", json!({"path": "/a"}));
    done(gw, s, &format!("r{i}"));
    out.push(format!("{:?} {}", r.decision, r.ledger_hash));
    let m = authorize(
        gw,
        s,
        &format!("m{i}"),
        "mail.send",
        json!({"to": "bob", "body": "hi"}),
    );
    if m.decision == Some("ALLOW") {
        done(gw, s, &format!("m{i}"));
    }
    out.push(format!("{:?} {} {}", m.decision, m.reason, m.ledger_hash));
    if i.is_multiple_of(3) {
        let p = authorize(gw, s, &format!("p{i}"), "pay.send", json!({"to": "eve"}));
        out.push(format!("{:?} {}", p.decision, p.ledger_hash));
    }
    out
}

fn records(path: &Path) -> Vec<Record> {
    let log = Log::open_redb(path).unwrap();
    let mut out = vec![];
    log.scan(1, &mut |_, line| {
        out.push(serde_json::from_slice(line).unwrap());
        Ok(())
    })
    .unwrap();
    out
}

fn view(gw: &Gateway, s: &str) -> serde_json::Value {
    let v = gw.session_view(None, s).unwrap();
    json!({"ledger": v.ledger_hash, "events": v.events, "pending": v.pending})
}

#[test]
fn a_restart_from_snapshots_decides_as_a_full_replay() {
    let (snap, full) = (store("with"), store("without"));
    {
        let (a, b) = (open(&snap, 7), open(&full, 0));
        for gw in [&a, &b] {
            for s in ["s1", "s2"] {
                gw.create_session(None, Some(s.into()), None)
                    .unwrap()
                    .wait()
                    .unwrap();
            }
        }
        for i in 0..20 {
            for s in ["s1", "s2"] {
                assert_eq!(round(&a, s, i), round(&b, s, i));
            }
        }
        // Durable before the next event's record (the log keeps order).
        round(&a, "s1", 20);
        round(&b, "s1", 20);
    }
    let kinds: Vec<Kind> = records(&snap).iter().map(|r| r.kind).collect();
    let snapshots = kinds.iter().filter(|k| **k == Kind::Snapshot).count();
    assert!(snapshots >= 8, "{snapshots} snapshot records");
    assert!(!records(&full).iter().any(|r| r.kind == Kind::Snapshot));

    let (a, b) = (open(&snap, 7), open(&full, 0));
    let rec = a.snapshot_recovery();
    assert_eq!(rec.restored, 2, "{rec:?}");
    assert!(rec.skipped > 80, "{rec:?}");
    assert_eq!(b.snapshot_recovery().restored, 0);
    for s in ["s1", "s2"] {
        assert_eq!(view(&a, s), view(&b, s));
    }
    // The paused payments before the snapshots are still waiting.
    let pending = |gw: &Gateway| {
        let mut p: Vec<String> = gw
            .approvals(None)
            .unwrap()
            .into_iter()
            .map(|p| format!("{}/{} {}", p.session, p.call, p.digest))
            .collect();
        p.sort();
        p
    };
    assert_eq!(pending(&a), pending(&b));
    assert!(pending(&a).len() >= 6);
    // Approving one that paused before the snapshot.
    let approve = |gw: &Gateway| {
        let p = gw
            .approvals(None)
            .unwrap()
            .into_iter()
            .find(|p| p.session == "s2" && p.call == "p0")
            .unwrap();
        let req: ResolveIn = serde_json::from_value(
            json!({"session": "s2", "digest": p.digest, "reason": "checked"}),
        )
        .unwrap();
        let out = gw
            .resolve("p0".into(), req, true, "test")
            .unwrap()
            .wait()
            .unwrap()
            .0;
        format!("{:?} {}", out.decision, out.ledger_hash)
    };
    assert_eq!(approve(&a), approve(&b));
    // A call id used before the snapshot is still refused.
    let again = |gw: &Gateway| {
        let req: Authorize = serde_json::from_value(json!({
            "session": "s1", "call": {"id": "m1", "tool": "mail.send",
                                       "args": {"to": "carol", "body": "x"}}
        }))
        .unwrap();
        gw.authorize(req)
            .and_then(|p| p.wait())
            .err()
            .map(|e| e.status)
    };
    assert_eq!(again(&a), Some(409));
    assert_eq!(again(&b), Some(409));
    for i in 21..40 {
        for s in ["s1", "s2"] {
            assert_eq!(round(&a, s, i), round(&b, s, i));
        }
    }
}

#[test]
fn a_bad_snapshot_falls_back_to_the_full_replay_of_its_session() {
    let path = store("bad");
    let before = {
        let gw = open(&path, 0);
        gw.create_session(None, Some("s".into()), None)
            .unwrap()
            .wait()
            .unwrap();
        for i in 0..6 {
            round(&gw, "s", i);
        }
        // Well chained, its bytes hash as the record says, but they are
        // not a state.
        gw.write_snapshot(
            "default",
            "s",
            Some(|b: &mut Vec<u8>| b.truncate(b.len() / 2)),
        )
        .unwrap()
        .wait()
        .unwrap();
        view(&gw, "s")
    };
    let gw = open(&path, 0);
    assert_eq!(gw.snapshot_recovery().restored, 0);
    assert_eq!(gw.snapshot_recovery().skipped, 0);
    assert_eq!(view(&gw, "s"), before);
    assert_eq!(round(&gw, "s", 6).len(), 3);

    // A good snapshot after it is used.
    gw.write_snapshot("default", "s", None)
        .unwrap()
        .wait()
        .unwrap();
    let before = view(&gw, "s");
    drop(gw);
    let gw = open(&path, 0);
    assert_eq!(gw.snapshot_recovery().restored, 1);
    assert_eq!(view(&gw, "s"), before);
}

/// On PostgreSQL's single chain (a replicated log) a snapshot is its own
/// transaction, decided inside it; a restart restores from it.
#[test]
fn snapshots_on_the_postgresql_single_chain() {
    let Some(url) = agenra_store::test_database("gw_snapshots") else {
        return;
    };
    let before = {
        let gw = open_log(Log::open_pg(&url).unwrap(), 5);
        assert!(gw.is_replicated());
        gw.create_session(None, Some("s".into()), None)
            .unwrap()
            .wait()
            .unwrap();
        for i in 0..13 {
            round(&gw, "s", i);
        }
        view(&gw, "s")
    };
    let log = Log::open_pg(&url).unwrap();
    let mut snapshots = 0;
    log.scan(1, &mut |_, line| {
        let r: Record = serde_json::from_slice(line).unwrap();
        snapshots += usize::from(r.kind == Kind::Snapshot);
        Ok(())
    })
    .unwrap();
    assert!(snapshots >= 3, "{snapshots} snapshot records");
    let gw = open_log(log, 5);
    assert_eq!(gw.snapshot_recovery().restored, 1);
    assert_eq!(view(&gw, "s"), before);
    assert_eq!(round(&gw, "s", 13).len(), 2);
}
