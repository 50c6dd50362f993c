//! `agenra bench embed`: the embedding API on the 18-parameter workload.
//!
//! * p50/p99 per decision through typed calls (handles resolved once,
//!   arguments moved in, nothing looked up by name);
//! * the cost of a new session from a shared compiled policy;
//! * live heap bytes per call of a compact session over 10^4 and 10^6
//!   calls (flat memory: the figure falls as the session grows), next to
//!   a full session over 10^4 calls.

use crate::bench::{params18_call, params18_policy, Rng};
use agenra_core::event::{Call, Outcome, Report};
use agenra_core::{
    CompiledPolicy, MonitorError, ParamHandle, Session, SessionOptions, ToolHandle, TypedCall,
    Value, Verdict,
};
use serde::Serialize;
use std::collections::HashMap;
use std::time::Instant;

/// Calls in the session before the timed ones.
const PRELOADED: usize = 10_000;
/// The compact sessions' window (nodes kept in memory).
pub const COMPACT_WINDOW: usize = 1_024;

/// Why the benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum EmbedBenchError {
    #[error(transparent)]
    Monitor(#[from] MonitorError),
    #[error(transparent)]
    Lookup(#[from] agenra_core::LookupError),
}

#[derive(Debug, Serialize)]
pub struct EmbedReport {
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub session_new_ns: f64,
    pub compact_bytes_per_call_1e4: f64,
    pub compact_bytes_per_call_1e6: f64,
    /// For comparison: a full session over 10^4 calls.
    pub full_bytes_per_call_1e4: f64,
    pub samples: usize,
    pub compact_window: usize,
}

/// Handles of every tool and parameter, resolved once.
struct Handles {
    tools: HashMap<String, (ToolHandle, HashMap<String, ParamHandle>)>,
}

impl Handles {
    fn new(policy: &CompiledPolicy) -> Result<Handles, agenra_core::LookupError> {
        let mut tools = HashMap::new();
        for tool in &policy.policy().tools {
            let handle = policy.tool(&tool.name)?;
            let mut params = HashMap::new();
            for p in &tool.params {
                params.insert(p.name.clone(), policy.param(handle, &p.name)?);
            }
            tools.insert(tool.name.clone(), (handle, params));
        }
        Ok(Handles { tools })
    }

    /// The typed form of a workload call (built outside the timed region,
    /// as an embedder builds its calls).
    fn typed(&self, call: &Call) -> Option<TypedCall> {
        let (tool, params) = self.tools.get(&call.tool)?;
        let mut typed = TypedCall::new(*tool, call.id.clone(), call.time);
        for (name, value) in &call.args {
            typed = typed.arg(*params.get(name)?, Value::from_json(value)?);
        }
        for (name, ids) in &call.lineage {
            typed = typed.lineage(*params.get(name)?, ids.iter().cloned());
        }
        Some(typed)
    }
}

/// One workload call, typed, and its result reported when it is allowed.
fn step(session: &mut Session, handles: &Handles, rng: &mut Rng, id: usize) {
    let call = params18_call(rng, id, id as u64);
    let Some(typed) = handles.typed(&call) else {
        return;
    };
    if let Ok(d) = session.authorize(typed) {
        if d.verdict == Verdict::Allow {
            let _ = session.report(&Report {
                session: None,
                call: call.id,
                time: None,
                status: Outcome::Succeeded,
                output: serde_json::Value::Null,
                discovered: vec![],
            });
        }
    }
}

/// Live heap bytes per call of a session grown by `calls` calls.
fn bytes_per_call(
    policy: &CompiledPolicy,
    handles: &Handles,
    options: SessionOptions,
    calls: usize,
    allocated: &dyn Fn() -> usize,
) -> f64 {
    let mut rng = Rng::new(7);
    let before = allocated();
    let mut session = policy.session_with(options);
    for id in 0..calls {
        step(&mut session, handles, &mut rng, id);
    }
    let after = allocated();
    drop(session);
    after.saturating_sub(before) as f64 / calls.max(1) as f64
}

/// Runs the benchmark; `allocated` reads the live heap bytes (`None`:
/// memory figures are NaN).
pub fn run(
    samples: usize,
    allocated: Option<&dyn Fn() -> usize>,
) -> Result<EmbedReport, EmbedBenchError> {
    let samples = samples.max(1);
    let policy = CompiledPolicy::new(params18_policy())?;
    let handles = Handles::new(&policy)?;

    // Decisions after a preload, through typed calls moved in.
    let mut rng = Rng::new(0x5eed);
    let mut session = policy.session();
    for id in 0..PRELOADED {
        step(&mut session, &handles, &mut rng, id);
    }
    // Each call is built just before it is decided, outside the timed
    // region, as an embedder's loop builds it: the allocator then hands
    // the decision the memory state of such a loop (its argument strings
    // freshly allocated), not that of 20,000 calls built in advance, whose
    // frees inside the timed region would all miss the allocator's
    // thread cache. The timed region is `authorize` alone: resolving,
    // deciding, recording, and dropping what the call moved in. Building
    // the call and dropping the returned decision are the caller's.
    let mut times = Vec::with_capacity(samples);
    for i in 0..samples {
        let id = PRELOADED + i;
        let Some(call) = handles.typed(&params18_call(&mut rng, id, id as u64)) else {
            continue;
        };
        let start = Instant::now();
        let d = session.authorize(std::hint::black_box(call));
        let elapsed = start.elapsed();
        std::hint::black_box(&d);
        drop(d);
        times.push(elapsed.as_nanos() as u64);
    }
    times.sort_unstable();
    let pct = |p: f64| times[((times.len() as f64 * p) as usize).min(times.len() - 1)];

    // New sessions: the median of 20 batches of 10,000 (creation and drop).
    let mut batches = Vec::new();
    for _ in 0..20 {
        let start = Instant::now();
        for _ in 0..10_000 {
            std::hint::black_box(policy.session());
        }
        batches.push(start.elapsed().as_nanos() as f64 / 10_000.0);
    }
    batches.sort_by(f64::total_cmp);
    let session_new_ns = batches[batches.len() / 2];

    let (compact_1e4, compact_1e6, full_1e4) = match allocated {
        Some(read) => (
            bytes_per_call(
                &policy,
                &handles,
                SessionOptions::compact(COMPACT_WINDOW),
                10_000,
                read,
            ),
            bytes_per_call(
                &policy,
                &handles,
                SessionOptions::compact(COMPACT_WINDOW),
                1_000_000,
                read,
            ),
            bytes_per_call(&policy, &handles, SessionOptions::default(), 10_000, read),
        ),
        None => (f64::NAN, f64::NAN, f64::NAN),
    };
    Ok(EmbedReport {
        p50_ns: pct(0.50),
        p99_ns: pct(0.99),
        session_new_ns,
        compact_bytes_per_call_1e4: compact_1e4,
        compact_bytes_per_call_1e6: compact_1e6,
        full_bytes_per_call_1e4: full_1e4,
        samples: times.len(),
        compact_window: COMPACT_WINDOW,
    })
}
