//! The timed part of `agenra bench embed` alone, for profilers: a session
//! preloaded with 10^4 calls of the 18-parameter workload, then typed
//! decisions, each in a call of `decide_all` (a function of its own, so that
//! `valgrind --tool=callgrind --toggle-collect='*decide_all*'` counts only
//! them). Builds without the CLI:
//!
//! ```text
//! cargo build --release -p agenra-bench --example embed_profile
//! valgrind --tool=callgrind --toggle-collect='*decide_all*' \
//!     target/release/examples/embed_profile 20000
//! ```
//!
//! Prints the p50 and the decisions' verdict counts.

use agenra::core::event::{Call, Outcome, Report};
use agenra::core::{CompiledPolicy, ParamHandle, Session, ToolHandle, TypedCall, Value, Verdict};
use agenra_bench::bench::{params18_call, params18_policy, Rng};
use std::collections::HashMap;
use std::time::Instant;

struct Handles {
    tools: HashMap<String, (ToolHandle, HashMap<String, ParamHandle>)>,
}

impl Handles {
    fn new(policy: &CompiledPolicy) -> Handles {
        let mut tools = HashMap::new();
        for tool in &policy.policy().tools {
            let handle = policy.tool(&tool.name).expect("tool");
            let mut params = HashMap::new();
            for p in &tool.params {
                params.insert(
                    p.name.clone(),
                    policy.param(handle, &p.name).expect("param"),
                );
            }
            tools.insert(tool.name.clone(), (handle, params));
        }
        Handles { tools }
    }

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

/// One timed decision: the call moved in, its decision dropped after its
/// time is taken (as `bench embed` does, which builds each call just
/// before it is decided, outside the timed region).
#[inline(never)]
fn decide_all(session: &mut Session, call: TypedCall) -> (u64, Option<Verdict>) {
    let start = Instant::now();
    let d = session.authorize(call);
    let elapsed = start.elapsed();
    let verdict = std::hint::black_box(&d).as_ref().ok().map(|d| d.verdict);
    (elapsed.as_nanos() as u64, verdict)
}

fn main() {
    let samples: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000);
    let policy = CompiledPolicy::new(params18_policy()).expect("policy");
    let handles = Handles::new(&policy);
    let mut rng = Rng::new(0x5eed);
    let mut session = policy.session();
    for id in 0..10_000 {
        let call = params18_call(&mut rng, id, id as u64);
        let Some(typed) = handles.typed(&call) else {
            continue;
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
    let mut times = Vec::with_capacity(samples);
    let mut verdicts = [0usize; 3];
    for i in 0..samples {
        let id = 10_000 + i;
        let Some(call) = handles.typed(&params18_call(&mut rng, id, id as u64)) else {
            continue;
        };
        let (t, verdict) = decide_all(&mut session, call);
        if let Some(v) = verdict {
            verdicts[v as usize] += 1;
        }
        times.push(t);
    }
    let n = times.len();
    times.sort_unstable();
    println!(
        "decisions {n}  p50 {} ns  p99 {} ns  allow/deny/pause {:?}",
        times[n / 2],
        times[(n * 99 / 100).min(n - 1)],
        verdicts
    );
}
