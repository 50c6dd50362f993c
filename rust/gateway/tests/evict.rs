//! Idle-session eviction (issue #28, `serve --evict-idle`): an evicted
//! session leaves memory, and its next request reloads it from its own
//! records and is decided exactly as if it had never left; paused sessions
//! and sessions on tenant pools stay; concurrent requests never fork it.

use agenra_core::CompiledPolicy;
use agenra_gateway::api::{Authorize, Outcome, ReportIn};
use agenra_gateway::state::parse_idle;
use agenra_gateway::Gateway;
use agenra_store::Log;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

const POLICY: &str = "levels public < internal;\n\
    sinks network;\n\
    tool fs.read(path: string) { resource path; output <internal, {}, trusted>; }\n\
    tool mail.send(to: string, body: string) { resource to; sink network on body; }\n\
    tool pay.send(to: string) { resource to; }\n\
    grant read: fs.read quota unlimited;\n\
    grant mail: mail.send quota 4;\n\
    grant pay: pay.send quota 2 approval;\n";

/// A policy with a tenant pool (`per tenant`).
const POOLED: &str = "tool wire.send(to: string) { resource to; }\n\
    grant wire: wire.send quota 5 per tenant;\n";

fn store(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agenra-evict-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("store.redb")
}

fn open(path: &Path) -> Gateway {
    open_with(path, POLICY)
}

fn open_with(path: &Path, policy: &str) -> Gateway {
    let compiled = agenra_policy::compile(policy, "evict").unwrap();
    let policy = CompiledPolicy::new(compiled.policy).unwrap();
    let gw = Gateway::open(Log::open_redb(path).unwrap(), policy, "evict.agr", false).unwrap();
    // Idle for an hour: only `evict_all_idle` (the test hook) evicts.
    gw.set_evict_idle(Duration::from_secs(3600)).unwrap();
    gw
}

fn session(gw: &Gateway, s: &str) {
    gw.create_session(None, Some(s.into()), None)
        .unwrap()
        .wait()
        .unwrap();
}

fn call(gw: &Gateway, s: &str, id: &str, tool: &str, from: &str) -> Result<Outcome, u16> {
    let (args, lineage) = match tool {
        "fs.read" => (json!({"path": "/a"}), json!({})),
        "mail.send" if !from.is_empty() => {
            (json!({"to": "bob", "body": "hi"}), json!({"body": [from]}))
        }
        "mail.send" => (json!({"to": "bob", "body": "hi"}), json!({})),
        _ => (json!({"to": "bob"}), json!({})),
    };
    let req: Authorize = serde_json::from_value(json!({
        "session": s, "call": {"id": id, "tool": tool, "args": args, "lineage": lineage}
    }))
    .unwrap();
    gw.authorize(req)
        .and_then(|p| p.wait())
        .map(|(o, _)| o)
        .map_err(|e| e.status)
}

fn report(gw: &Gateway, s: &str, id: &str) {
    let done: ReportIn =
        serde_json::from_value(json!({"session": s, "call": id, "status": "succeeded"})).unwrap();
    gw.report(done).unwrap().wait().unwrap();
}

/// What must not change across an eviction: the decision, why, and the
/// ledger it leaves.
fn shown(o: &Result<Outcome, u16>) -> String {
    match o {
        Ok(o) => format!("{:?} {} {}", o.decision, o.reason, o.ledger_hash),
        Err(status) => format!("error {status}"),
    }
}

/// A script of calls: reads, mails (some from a read's output, denied by
/// the flow rule), more mails than the quota allows, reused ids.
fn script() -> Vec<(&'static str, &'static str, &'static str)> {
    vec![
        ("r1", "fs.read", ""),
        ("m1", "mail.send", ""),
        ("m2", "mail.send", "r1"),
        ("m3", "mail.send", ""),
        ("r2", "fs.read", ""),
        ("m4", "mail.send", ""),
        ("m5", "mail.send", ""),
        ("m6", "mail.send", ""),
        ("m1", "mail.send", ""),
        ("r1", "fs.read", ""),
    ]
}

#[test]
fn an_evicted_session_decides_as_if_never_evicted() {
    let (a, b) = (open(&store("diff-a")), open(&store("diff-b")));
    session(&a, "s");
    session(&b, "s");
    for (id, tool, from) in script() {
        // `a` evicts the session before every call.
        assert_eq!(a.evict_all_idle(), 1, "{id}: the session is idle");
        assert_eq!(a.session_count(), 0, "{id}: evicted sessions leave memory");
        let (got, want) = (call(&a, "s", id, tool, from), call(&b, "s", id, tool, from));
        assert_eq!(shown(&got), shown(&want), "call {id}");
        if matches!(&want, Ok(o) if o.decision == Some("ALLOW") && !o.replayed) {
            a.evict_all_idle();
            report(&a, "s", id);
            report(&b, "s", id);
        }
    }
    // Quotas were not spent again by the replays: the same ledger left.
    a.evict_all_idle();
    let (va, vb) = (
        a.session_view(None, "s").unwrap(),
        b.session_view(None, "s").unwrap(),
    );
    assert_eq!(va.ledger, vb.ledger);
    assert_eq!(va.ledger["mail"], Some(0));
    assert_eq!((va.events, &va.ledger_hash), (vb.events, &vb.ledger_hash));
    let stats = a.eviction_stats();
    assert!(stats.evictions >= 10 && stats.reloads >= 10, "{stats:?}");
}

#[test]
fn old_call_ids_stay_refused_after_a_reload() {
    let gw = open(&store("ids"));
    session(&gw, "s");
    // More calls than the answers kept: `r0`'s answer is gone, its id is
    // refused through the hashes of used ids.
    for i in 0..40 {
        let id = format!("r{i}");
        assert_eq!(
            call(&gw, "s", &id, "fs.read", "").unwrap().decision,
            Some("ALLOW")
        );
        report(&gw, "s", &id);
    }
    assert_eq!(gw.evict_all_idle(), 1);
    assert_eq!(call(&gw, "s", "r0", "fs.read", "").unwrap_err(), 409);
    gw.evict_all_idle();
    // A recent one is answered from its kept answer (a retry), not decided.
    let again = call(&gw, "s", "r39", "fs.read", "").unwrap();
    assert!(
        again.replayed,
        "the retry of a recent call gets its answer back"
    );
    gw.evict_all_idle();
    assert_eq!(
        call(&gw, "s", "r40", "fs.read", "").unwrap().decision,
        Some("ALLOW")
    );
}

#[test]
fn an_evicted_session_is_found_open_and_can_be_closed() {
    let gw = open(&store("close"));
    session(&gw, "s");
    call(&gw, "s", "m1", "mail.send", "").unwrap();
    report(&gw, "s", "m1");
    assert_eq!(gw.evict_all_idle(), 1);
    // Opening it again finds it (reloaded), never a second `session` record.
    let view = gw
        .create_session(None, Some("s".into()), None)
        .unwrap()
        .wait()
        .unwrap()
        .0;
    assert!(!view.created);
    assert_eq!(view.ledger["mail"], Some(3));
    assert_eq!(gw.evict_all_idle(), 1);
    let closed = gw
        .close_session(None, "s", "operator:test".into())
        .unwrap()
        .wait()
        .unwrap()
        .0;
    assert!(closed.newly);
    assert_eq!(closed.events, 2);
    assert_eq!(call(&gw, "s", "m2", "mail.send", "").unwrap_err(), 409);
    assert_eq!(gw.session_count(), 0);
    assert_eq!(gw.eviction_stats().evicted, 0);
}

#[test]
fn paused_open_and_pooled_sessions_stay_in_memory() {
    let gw = open(&store("stay"));
    for s in ["paused", "running", "idle"] {
        session(&gw, s);
    }
    assert_eq!(
        call(&gw, "paused", "p1", "pay.send", "").unwrap().decision,
        Some("PAUSE")
    );
    assert_eq!(
        call(&gw, "running", "r1", "fs.read", "").unwrap().decision,
        Some("ALLOW")
    );
    assert_eq!(gw.evict_all_idle(), 1, "only `idle` may leave");
    assert_eq!(gw.session_count(), 2);
    assert_eq!(gw.approvals(None).unwrap().len(), 1);
    // Sessions under a policy with tenant pools: replaying their events
    // would spend the pool again.
    let pooled = open_with(&store("pooled"), POOLED);
    session(&pooled, "s");
    assert_eq!(pooled.evict_all_idle(), 0);
    assert_eq!(pooled.session_count(), 1);
}

#[test]
fn a_session_reloads_under_the_policy_it_was_opened_with() {
    let path = store("policy");
    let gw = open(&path);
    session(&gw, "old");
    call(&gw, "old", "m1", "mail.send", "").unwrap();
    report(&gw, "old", "m1");
    let opened_with = gw.session_view(None, "old").unwrap().policy_hash;
    let narrower = "tool mail.send(to: string, body: string) { resource to; }\n\
                    grant mail: mail.send quota 1;\n";
    let p = agenra_policy::compile(narrower, "narrow").unwrap().policy;
    gw.reload(p, "narrow.agr", "operator:test", true)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(gw.evict_all_idle(), 1);
    // The old revision is held for the evicted session, and it reloads
    // under it: its quota of 4, not the new policy's 1.
    for id in ["m2", "m3"] {
        assert_eq!(
            call(&gw, "old", id, "mail.send", "").unwrap().decision,
            Some("ALLOW")
        );
        report(&gw, "old", id);
        gw.evict_all_idle();
    }
    assert_eq!(
        gw.session_view(None, "old").unwrap().policy_hash,
        opened_with
    );
}

#[test]
fn requests_racing_evictions_never_fork_a_session() {
    let path = store("race");
    let policy = "tool fs.read(path: string) { resource path; }\n\
                  tool mail.send(to: string) { resource to; }\n\
                  grant read: fs.read quota unlimited;\n\
                  grant mail: mail.send quota 50;\n";
    let compiled = agenra_policy::compile(policy, "race").unwrap().policy;
    let gw = Gateway::open(
        Log::open_redb(&path).unwrap(),
        CompiledPolicy::new(compiled.clone()).unwrap(),
        "race.agr",
        false,
    )
    .unwrap();
    gw.set_evict_idle(Duration::from_secs(3600)).unwrap();
    let gw = Arc::new(gw);
    session(&gw, "s");
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let evictor = {
        let (gw, stop) = (Arc::clone(&gw), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += gw.evict_all_idle();
                std::thread::yield_now();
            }
            n
        })
    };
    let workers: Vec<_> = (0..4)
        .map(|t| {
            let gw = Arc::clone(&gw);
            std::thread::spawn(move || {
                let mut allowed = 0;
                for i in 0..30 {
                    let id = format!("t{t}-{i}");
                    let req = || -> Authorize {
                        serde_json::from_value(json!({
                            "session": "s",
                            "call": {"id": id, "tool": "mail.send", "args": {"to": "x"}}
                        }))
                        .unwrap()
                    };
                    // A 503 (evicted while waiting) decided nothing: retry.
                    let out = loop {
                        match gw.authorize(req()).and_then(|p| p.wait()) {
                            Err(e) if e.status == 503 => continue,
                            other => break other.unwrap().0,
                        }
                    };
                    if out.decision == Some("ALLOW") {
                        allowed += 1;
                        let done = || -> ReportIn {
                            serde_json::from_value(
                                json!({"session": "s", "call": id, "status": "succeeded"}),
                            )
                            .unwrap()
                        };
                        loop {
                            match gw.report(done()).and_then(|p| p.wait()) {
                                Err(e) if e.status == 503 => continue,
                                other => break other.map(|_| ()).unwrap(),
                            }
                        }
                    }
                }
                allowed
            })
        })
        .collect();
    let allowed: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let evictions = evictor.join().unwrap();
    assert!(evictions > 0, "the sweep evicted the session meanwhile");
    // Exactly the quota, never more: one session, one ledger.
    assert_eq!(allowed, 50);
    let view = gw.session_view(None, "s").unwrap();
    assert_eq!(view.ledger["mail"], Some(0));
    // The log replays to the same session: nothing forked (recovery checks
    // every decision and ledger hash against its record).
    let live = (view.events, view.ledger_hash.clone());
    drop(gw);
    let again = Gateway::open(
        Log::open_redb(&path).unwrap(),
        CompiledPolicy::new(compiled).unwrap(),
        "race.agr",
        false,
    )
    .unwrap();
    let v = again.session_view(None, "s").unwrap();
    assert_eq!((v.events, v.ledger_hash), live);
}

#[test]
fn a_restart_brings_evicted_sessions_back() {
    let path = store("restart");
    let gw = open(&path);
    session(&gw, "s");
    call(&gw, "s", "m1", "mail.send", "").unwrap();
    report(&gw, "s", "m1");
    assert_eq!(gw.evict_all_idle(), 1);
    drop(gw);
    let gw = open(&path);
    assert_eq!(gw.session_count(), 1);
    // A retry gets its recorded answer; the same id with other arguments
    // is a reuse (409).
    assert!(call(&gw, "s", "m1", "mail.send", "").unwrap().replayed);
    assert_eq!(call(&gw, "s", "m1", "fs.read", "").unwrap_err(), 409);
    assert_eq!(gw.evict_all_idle(), 1);
    assert_eq!(
        call(&gw, "s", "m2", "mail.send", "").unwrap().decision,
        Some("ALLOW")
    );
}

#[test]
fn idle_durations_parse_and_junk_is_refused() {
    assert_eq!(parse_idle("10m").unwrap(), Duration::from_secs(600));
    assert_eq!(parse_idle("90").unwrap(), Duration::from_secs(90));
    assert_eq!(parse_idle("90s").unwrap(), Duration::from_secs(90));
    assert_eq!(parse_idle("2h").unwrap(), Duration::from_secs(7200));
    assert_eq!(parse_idle("off").unwrap(), Duration::ZERO);
    assert_eq!(parse_idle("0").unwrap(), Duration::ZERO);
    for bad in ["", "m", "10d", "-1m", "1.5h", "99999999999999999999h"] {
        let e = parse_idle(bad).unwrap_err().to_string();
        assert!(e.contains("--evict-idle"), "{bad}: {e}");
    }
}

#[test]
fn metrics_count_evictions_and_reloads() {
    use agenra_gateway::client::Client;
    use agenra_gateway::{Perimeter, Server};
    let gw = Arc::new(open(&store("metrics")));
    session(&gw, "s");
    assert_eq!(gw.evict_all_idle(), 1);
    call(&gw, "s", "r1", "fs.read", "").unwrap();
    assert_eq!(gw.evict_all_idle(), 0, "r1 is running");
    report(&gw, "s", "r1");
    assert_eq!(gw.evict_all_idle(), 1);
    let server = Server::spawn(
        Arc::clone(&gw),
        Arc::new(Perimeter::insecure(vec![])),
        "127.0.0.1:0",
    )
    .unwrap();
    let mut c = Client::connect(server.addr()).unwrap();
    let (status, body) = c.request("GET", "/metrics", b"").unwrap();
    let text = String::from_utf8(body).unwrap();
    assert_eq!(status, 200);
    for line in [
        "agenra_sessions 0",
        "agenra_sessions_evicted 1",
        "agenra_session_evictions 2",
        "agenra_session_reloads 1",
    ] {
        assert!(text.lines().any(|l| l == line), "{line}: {text}");
    }
    assert!(text.contains("agenra_session_index_bytes "), "{text}");
}

#[test]
fn a_store_without_a_reader_refuses_eviction_but_not_zero() {
    // The partitioned log (as on PostgreSQL; here in memory): other
    // replicas' records are not indexed here.
    let log = agenra_store::PartLog::open(Box::new(agenra_store::MemoryParts::default()));
    let compiled = agenra_policy::compile(POLICY, "evict").unwrap();
    let policy = CompiledPolicy::new(compiled.policy).unwrap();
    let gw = Gateway::open_parts(log, policy, "evict.agr", false).unwrap();
    let e = gw.set_evict_idle(Duration::from_secs(60)).unwrap_err();
    assert!(e.contains("--evict-idle needs the embedded store"), "{e}");
    gw.set_evict_idle(Duration::ZERO).unwrap();
    session(&gw, "s");
    assert_eq!(gw.evict_all_idle(), 0);
    assert_eq!(gw.session_count(), 1);
}
