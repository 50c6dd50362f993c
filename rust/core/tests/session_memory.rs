//! A session's memory does not grow with the policy's grants (issue #6,
//! item 8): new sessions share the policy's tables and initial ledger, and
//! a session that takes units stores only the counts it changed.

use agenra_core::policy::{Grant, Param, Quota, Tool};
use agenra_core::{
    ArgOp, CompiledPolicy, Cond, Label, ParamType, Policy, Quant, TypedCall, Verdict,
};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Counts live heap bytes (the test reads a delta while the session lives).
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

/// One tool and `grants` limited grants on it, each for one value of `x`.
fn policy(grants: usize) -> CompiledPolicy {
    let mut p = Policy::empty("many-grants");
    p.tools.push(Tool {
        name: "pay".into(),
        params: vec![Param {
            name: "x".into(),
            ty: ParamType::Str,
            list: false,
            optional: false,
            fields: Vec::new(),
        }],
        resource: None,
        sinks: vec![],
        output: Label::BOTTOM,
        sanitizer: None,
        facts: vec![],
    });
    for i in 0..grants {
        p.grants.push(Grant {
            name: format!("g{i}"),
            agent: 0,
            tool: 0,
            resource: None,
            args: vec![Cond::Test {
                param: 0,
                quant: Quant::All,
                op: ArgOp::Eq(format!("v{i}").into()),
            }],
            quota: Quota::Limited(3),
            approval: false,
            expires_at: None,
            discovers: None,
        });
    }
    CompiledPolicy::new(p).expect("valid policy")
}

/// Live bytes held by a new session that then takes units of three grants.
fn session_bytes(grants: usize) -> usize {
    let policy = policy(grants);
    let pay = policy.tool("pay").expect("tool");
    let x = policy.param(pay, "x").expect("param");
    let before = LIVE.load(Ordering::Relaxed);
    let mut session = policy.session();
    for (n, g) in [0, grants / 2, grants - 1].into_iter().enumerate() {
        let call = TypedCall::new(pay, format!("c{n}"), 1).arg(x, format!("v{g}"));
        let d = session.authorize(call).expect("well-formed");
        assert_eq!(d.verdict, Verdict::Allow, "grant g{g}");
    }
    let bytes = LIVE.load(Ordering::Relaxed) - before;
    drop(session);
    bytes
}

#[test]
fn a_consuming_session_holds_the_same_memory_for_100_or_10000_grants() {
    let small = session_bytes(100);
    let large = session_bytes(10_000);
    eprintln!("live bytes: 100 grants {small}, 10,000 grants {large}");
    // Before the sparse ledger, the large session copied 10,000 counts and
    // a 157-block hash tree (about 170 KB). The tree's depth (one level more
    // for 10,000 grants) is the only thing allowed to differ.
    assert!(
        large <= small + 1024,
        "100 grants: {small} bytes, 10,000 grants: {large} bytes"
    );
}
