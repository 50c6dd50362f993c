//! What an evicted session gives back (issue #28): the live heap bytes a
//! session with 100 decided calls holds, measured as what evicting it
//! frees, stay under the 200 bytes a call the issue allows (the counting
//! allocator below is exact), and the index kept for its reload is a few
//! bytes a record. One test in this binary: the allocator counts the
//! whole process.

use agenra_core::CompiledPolicy;
use agenra_gateway::api::{Authorize, ReportIn};
use agenra_gateway::Gateway;
use agenra_store::Log;
use serde_json::json;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// `bench memory`'s policy.
const POLICY: &str = "tool pay.send(to: string, amount: int) { resource to; }\n\
    grant pay: pay.send on glob \"*@example.com\" quota 1000000000;\n";

const SESSIONS: usize = 100;
const CALLS: usize = 100;

#[test]
fn evicting_a_session_frees_what_its_calls_held() {
    let dir = std::env::temp_dir().join(format!("agenra-evict-mem-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let compiled = agenra_policy::compile(POLICY, "memory").unwrap();
    let policy = CompiledPolicy::new(compiled.policy).unwrap();
    let log = Log::open_redb(&dir.join("store.redb")).unwrap();
    let gw = Gateway::open(log, policy, "memory.agr", false).unwrap();
    gw.set_evict_idle(std::time::Duration::from_secs(3600))
        .unwrap();
    let names: Vec<String> = (0..SESSIONS).map(|s| format!("m-{s}")).collect();
    for s in &names {
        gw.create_session(None, Some(s.clone()), None)
            .unwrap()
            .wait()
            .unwrap();
    }
    for c in 0..CALLS {
        let mut waiting = Vec::new();
        for s in &names {
            let req: Authorize = serde_json::from_value(json!({"session": s, "call": {
                "id": format!("c{c}"), "tool": "pay.send",
                "args": {"to": "bob@example.com", "amount": c}}}))
            .unwrap();
            waiting.push(gw.authorize(req).unwrap());
        }
        for p in waiting.drain(..) {
            assert_eq!(p.wait().unwrap().0.decision, Some("ALLOW"));
        }
        let mut waiting = Vec::new();
        for s in &names {
            let done: ReportIn = serde_json::from_value(
                json!({"session": s, "call": format!("c{c}"), "status": "succeeded"}),
            )
            .unwrap();
            waiting.push(gw.report(done).unwrap());
        }
        for p in waiting.drain(..) {
            p.wait().unwrap();
        }
    }
    let held = LIVE.load(Ordering::Relaxed);
    assert_eq!(gw.evict_all_idle(), SESSIONS);
    let freed = held as f64 - LIVE.load(Ordering::Relaxed) as f64;
    let per_call = freed / (SESSIONS * CALLS) as f64;
    let stats = gw.eviction_stats();
    let index_per_record = stats.index_bytes as f64 / (SESSIONS * (2 * CALLS + 1)) as f64;
    eprintln!(
        "a session of {CALLS} calls held {:.0} bytes ({per_call:.1} a call); \
         its reload index {index_per_record:.2} bytes a record",
        freed / SESSIONS as f64
    );
    assert_eq!(gw.session_count(), 0);
    assert!(
        per_call > 20.0,
        "evicting freed the sessions: {per_call:.1}"
    );
    assert!(per_call < 200.0, "{per_call:.1} bytes a call");
    assert!(index_per_record <= 4.0, "{index_per_record:.2}");
    drop(gw);
    let _ = std::fs::remove_dir_all(&dir);
}
