//! `agenra bench memory`: what a decided call costs in gateway memory, and
//! how long a restart takes.
//!
//! The gateway library runs in this process on an embedded store (in a
//! temporary directory): `sessions` sessions are opened, then `decisions`
//! calls are decided round-robin over them, each followed by its result
//! (`succeeded`), as an agent reports it. Memory is measured twice: live
//! heap bytes (the bench binary's counting allocator, exact) and the
//! resident set (`VmRSS`, what an operator sees). Then the gateway is
//! dropped and reopened on the same store: the restart's time, and the
//! memory the recovered gateway holds.

use agenra_core::CompiledPolicy;
use agenra_gateway::Gateway;
use agenra_store::Log;
use serde::Serialize;
use std::time::Instant;

/// The policy of `bench serve`: one grant whose quota never runs out.
const POLICY: &str = r#"
tool pay.send(to: string, amount: int) { resource to; }
grant pay: pay.send on glob "*@example.com" quota 1000000000;
"#;

/// Calls whose answers are awaited together (the store commits them as
/// one group; waiting for each alone would measure fsync, not memory).
const BATCH: usize = 512;

/// The figures of one run.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub sessions: u64,
    pub decisions: u64,
    /// Graph nodes each session keeps (`serve --compact-window`; 0: all).
    pub window: u64,
    /// Live heap bytes per open session before any call.
    pub heap_bytes_per_session: f64,
    /// Records in the log (policy, sessions, calls and results).
    pub records: u64,
    pub decide_seconds: f64,
    /// Live heap bytes the gateway gained, per decided call.
    pub heap_bytes_per_call: f64,
    /// Resident set gained, per decided call.
    pub rss_bytes_per_call: f64,
    /// Live heap bytes per call of the monitor's sessions alone (the same
    /// events on `CompiledPolicy::session`s, no gateway): the session
    /// graphs; the rest of `heap_bytes_per_call` is the gateway's own.
    pub monitor_heap_bytes_per_call: f64,
    /// Live heap bytes per call of the gateway recovered by a restart.
    pub restart_heap_bytes_per_call: f64,
    /// Live heap bytes per session that evicting every session (`serve
    /// --evict-idle`) frees, right after the calls.
    pub evicting_frees_bytes_per_session: f64,
    /// Heap bytes of the index eviction keeps (each session's record
    /// numbers), per record.
    pub evict_index_bytes_per_record: f64,
    /// Live heap bytes per session that closing every session
    /// (`DELETE /v1/sessions/{id}`, on the restarted gateway) frees.
    pub closing_frees_bytes_per_session: f64,
    /// Live heap bytes per session the restarted gateway held (sessions
    /// and the store's cache): what closing could free at most.
    pub restart_heap_bytes_per_session: f64,
    /// Seconds to reopen the store and recover every session.
    pub restart_seconds: f64,
    /// Microseconds of restart per record.
    pub restart_us_per_record: f64,
    /// Events between two snapshots of a session (`serve
    /// --snapshot-every`; 0: none).
    pub snapshot_every: u64,
    /// Sessions the restart restored from a snapshot.
    pub restored_sessions: u64,
    /// Event records the restart did not replay (snapshots covered them).
    pub skipped_records: u64,
}

/// The resident set of this process (Linux `VmRSS`), in bytes.
fn rss_bytes() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb * 1024.0)
}

fn api(e: agenra_gateway::api::ApiError) -> String {
    format!("{}: {}", e.status, e.error)
}

fn open(path: &std::path::Path) -> Result<Gateway, String> {
    let policy = agenra::compile_policy(POLICY, "memory").map_err(|e| e.to_string())?;
    let compiled = CompiledPolicy::new(policy).map_err(|e| e.to_string())?;
    let log = Log::open_redb(path).map_err(|e| e.to_string())?;
    Gateway::open(log, compiled, "memory.agr", false).map_err(|e| e.to_string())
}

fn authorize(
    session: &str,
    id: &str,
    amount: u64,
) -> Result<agenra_gateway::api::Authorize, String> {
    serde_json::from_value(serde_json::json!({
        "session": session,
        "call": {"id": id, "tool": "pay.send",
                 "args": {"to": "bob@example.com", "amount": amount}},
    }))
    .map_err(|e| e.to_string())
}

fn report(session: &str, id: &str) -> Result<agenra_gateway::api::ReportIn, String> {
    serde_json::from_value(serde_json::json!({
        "session": session, "call": id, "status": "succeeded",
    }))
    .map_err(|e| e.to_string())
}

/// Decides `decisions` calls over `sessions` sessions (see the module
/// doc); `live` gives live heap bytes (the counting allocator's).
pub fn measure(
    sessions: u64,
    decisions: u64,
    (window, snapshot_every): (Option<u64>, Option<u64>),
    live: &dyn Fn() -> usize,
) -> Result<Figures, String> {
    let dir = std::env::temp_dir().join(format!("agenra-bench-memory-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let path = dir.join("store.redb");
    let every = snapshot_every.unwrap_or(agenra_gateway::state::DEFAULT_SNAPSHOT_EVERY);
    let result = run(&path, (sessions.max(1), decisions), (window, every), live);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn run(
    path: &std::path::Path,
    (sessions, decisions): (u64, u64),
    (window, snapshot_every): (Option<u64>, u64),
    live: &dyn Fn() -> usize,
) -> Result<Figures, String> {
    let names: Vec<String> = (0..sessions).map(|s| format!("m-{s}")).collect();
    let gw = open(path)?;
    let window = window.unwrap_or(agenra_gateway::state::DEFAULT_COMPACT_WINDOW as u64);
    gw.set_compact_window(window);
    gw.set_snapshot_every(snapshot_every)?;
    let empty = live();
    for name in &names {
        gw.create_session(None, Some(name.clone()), None)
            .and_then(|p| p.wait())
            .map_err(api)?;
    }
    let (heap0, rss0) = (live(), rss_bytes());
    let heap_bytes_per_session = (heap0 as f64 - empty as f64) / sessions as f64;
    let start = Instant::now();
    let mut waiting = Vec::with_capacity(BATCH);
    let mut i = 0;
    while i < decisions {
        let end = (i + BATCH as u64).min(decisions);
        for n in i..end {
            let session = &names[(n % sessions) as usize];
            let id = format!("c{}", n / sessions);
            waiting.push(gw.authorize(authorize(session, &id, n)?).map_err(api)?);
        }
        for p in waiting.drain(..) {
            p.wait().map_err(api)?;
        }
        for n in i..end {
            let session = &names[(n % sessions) as usize];
            let id = format!("c{}", n / sessions);
            waiting.push(gw.report(report(session, &id)?).map_err(api)?);
        }
        for p in waiting.drain(..) {
            p.wait().map_err(api)?;
        }
        i = end;
    }
    let decide_seconds = start.elapsed().as_secs_f64();
    let (heap1, rss1) = (live(), rss_bytes());
    let records = gw.store_stats().records;
    let index_bytes = gw.eviction_stats().index_bytes;
    gw.set_evict_idle(std::time::Duration::from_secs(3600))?;
    gw.evict_all_idle();
    let evicting_frees_bytes_per_session = (heap1 as f64 - live() as f64) / sessions as f64;
    drop(gw);
    let heap_dropped = live();
    let start = Instant::now();
    let gw = open(path)?;
    let restart_seconds = start.elapsed().as_secs_f64();
    let recovery = gw.snapshot_recovery();
    let heap_restarted = live();
    for name in &names {
        gw.close_session(None, name, "operator:bench".into())
            .and_then(|p| p.wait())
            .map_err(api)?;
    }
    let closing_frees_bytes_per_session = (heap_restarted as f64 - live() as f64) / sessions as f64;
    let restart_heap_bytes_per_session =
        (heap_restarted as f64 - heap_dropped as f64) / sessions as f64;
    drop(gw);
    let per = |bytes: f64| bytes / decisions.max(1) as f64;
    let monitor = monitor_bytes(sessions, decisions, live)?;
    Ok(Figures {
        monitor_heap_bytes_per_call: per(monitor),
        sessions,
        decisions,
        window,
        heap_bytes_per_session,
        records,
        decide_seconds,
        heap_bytes_per_call: per(heap1 as f64 - heap0 as f64),
        rss_bytes_per_call: per(rss1 - rss0),
        restart_heap_bytes_per_call: per(heap_restarted as f64 - heap_dropped as f64),
        closing_frees_bytes_per_session,
        evicting_frees_bytes_per_session,
        evict_index_bytes_per_record: index_bytes as f64 / records.max(1) as f64,
        restart_heap_bytes_per_session,
        restart_seconds,
        restart_us_per_record: restart_seconds * 1e6 / records.max(1) as f64,
        snapshot_every,
        restored_sessions: recovery.restored,
        skipped_records: recovery.skipped,
    })
}

/// The live heap bytes the same events take on bare monitor sessions.
fn monitor_bytes(sessions: u64, decisions: u64, live: &dyn Fn() -> usize) -> Result<f64, String> {
    use agenra_core::event::{Event, Report};
    let policy = agenra::compile_policy(POLICY, "memory").map_err(|e| e.to_string())?;
    let compiled = CompiledPolicy::new(policy).map_err(|e| e.to_string())?;
    let mut all: Vec<agenra_core::Session> = (0..sessions).map(|_| compiled.session()).collect();
    let before = live();
    for n in 0..decisions {
        let s = &mut all[(n % sessions) as usize];
        let id = format!("c{}", n / sessions);
        let call: agenra_core::event::Call = serde_json::from_value(serde_json::json!({
            "id": id, "time": 0, "tool": "pay.send",
            "args": {"to": "bob@example.com", "amount": n}}))
        .map_err(|e| e.to_string())?;
        s.step(&Event::Call(call)).map_err(|e| e.to_string())?;
        let report: Report =
            serde_json::from_value(serde_json::json!({"call": id, "status": "succeeded"}))
                .map_err(|e| e.to_string())?;
        s.step(&Event::Result(report)).map_err(|e| e.to_string())?;
    }
    Ok(live() as f64 - before as f64)
}

/// `bench memory`'s text (or JSON) output.
pub fn run_bench(
    json: bool,
    (sessions, decisions): (u64, u64),
    options: (Option<u64>, Option<u64>),
    live: &dyn Fn() -> usize,
) -> Result<String, String> {
    let f = measure(sessions, decisions, options, live)?;
    let line = serde_json::to_string(&f).map_err(|e| e.to_string())? + "\n";
    if json {
        return Ok(line);
    }
    Ok(format!(
        "gateway memory: {} decided calls (each with its result) over {} sessions (window {}), {} records, {:.1} s\n\
         per open session: {:.0} heap bytes\n\
         per decided call: {:.0} heap bytes ({:.0} of them the monitor's sessions), {:.0} RSS bytes\n\
         restart: {:.2} s ({:.1} µs per record; snapshots every {} events: {} sessions restored, {} records not replayed), then {:.0} heap bytes per call\n\
         closing every session frees {:.0} of the {:.0} heap bytes per session it held\n\
         evicting every session frees {:.0} heap bytes per session; its index: {:.2} bytes per record\n{line}",
        f.decisions,
        f.sessions,
        f.window,
        f.records,
        f.decide_seconds,
        f.heap_bytes_per_session,
        f.heap_bytes_per_call,
        f.monitor_heap_bytes_per_call,
        f.rss_bytes_per_call,
        f.restart_seconds,
        f.restart_us_per_record,
        f.snapshot_every,
        f.restored_sessions,
        f.skipped_records,
        f.restart_heap_bytes_per_call,
        f.closing_frees_bytes_per_session,
        f.restart_heap_bytes_per_session,
        f.evicting_frees_bytes_per_session,
        f.evict_index_bytes_per_record,
    ))
}
