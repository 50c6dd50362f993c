//! The standard synthetic workload of `agenra bench monitor`: 50 grants,
//! 20 flow rules, 10 path rules, a session already holding 1,000 events,
//! then random calls. Deterministic (a fixed-seed generator), so runs
//! compare.

use agenra_core::label::{CategorySet, Label, LabelPattern};
use agenra_core::policy::{
    FlowEffect, FlowRule, Grant, Param, PathKind, PathRule, Policy, Quota, ResourceLabel,
    RuleEffect, SinkUse, StepPattern, Tool,
};
use agenra_core::{ArgOp, Call, Cond, Decimal, Event, Monitor, ParamType, Pattern, Quant, Report};
use serde::Serialize;
use std::time::Instant;

pub const GRANTS: usize = 50;
pub const FLOW_RULES: usize = 20;
pub const PATH_RULES: usize = 10;
pub const PRELOADED_EVENTS: usize = 1_000;
const TOOLS: usize = 10;
const SINKS: usize = 4;

/// xorshift64*: small, fast, deterministic.
pub struct Rng(u64);
impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// The workload's policy, built directly in the core model.
pub fn workload_policy() -> Policy {
    let mut p = Policy::empty("bench");
    p.levels = ["public", "internal", "confidential", "secret"]
        .map(String::from)
        .to_vec();
    p.categories = (0..8).map(|i| format!("cat{i}")).collect();
    p.sinks = (0..SINKS).map(|i| format!("sink{i}")).collect();
    p.sets = vec!["found".into()];
    for t in 0..TOOLS {
        p.tools.push(Tool {
            name: format!("tool{t}.op"),
            params: vec![
                Param {
                    name: "target".into(),
                    ty: ParamType::Str,
                    list: false,
                    optional: false,
                },
                Param {
                    name: "n".into(),
                    ty: ParamType::Int,
                    list: false,
                    optional: false,
                },
            ],
            resource: Some(0),
            // Tools 6..9 write to sinks; 0..5 read labeled data.
            sinks: if t >= 6 {
                vec![SinkUse {
                    sink: t % SINKS,
                    params: None,
                }]
            } else {
                vec![]
            },
            output: if t < 6 {
                Label::new((t % 3) as u8, CategorySet::single(t % 8), t % 2 == 0)
            } else {
                Label::BOTTOM
            },
            sanitizer: None,
            facts: vec![],
        });
    }
    p.resources.push(ResourceLabel {
        pattern: Pattern::Glob("/secret/*".into()),
        label: Label::new(3, CategorySet::single(7), true),
    });
    for g in 0..GRANTS {
        let tool = g % TOOLS;
        p.grants.push(Grant {
            name: format!("g{g}"),
            agent: 0,
            tool,
            resource: Some(Pattern::Prefix(format!("/data/{}/", g % 5))),
            args: vec![Cond::Test {
                param: 1,
                quant: Quant::All,
                op: ArgOp::Le(Decimal::from(1_000 + g as i64)),
            }],
            quota: if g % 3 == 0 {
                Quota::Limited(1_000_000)
            } else {
                Quota::Unlimited
            },
            approval: false,
            expires_at: None,
            discovers: None,
        });
    }
    for r in 0..FLOW_RULES {
        let sink = r % SINKS;
        let effect = if r % 4 == 3 {
            FlowEffect::Allow(Label::new(1, CategorySet::single(r % 8), false))
        } else {
            FlowEffect::Deny(LabelPattern {
                min_sensitivity: Some(3),
                any_category: CategorySet::single((r + 5) % 8),
                untrusted: r % 2 == 0,
            })
        };
        p.flow_rules.push(FlowRule {
            name: format!("flow{r}"),
            sink,
            effect,
            when: Cond::Test {
                param: "n".into(),
                quant: Quant::All,
                op: ArgOp::Ge(Decimal::from(0)),
            },
        });
    }
    for r in 0..PATH_RULES {
        let kind = if r % 2 == 0 {
            PathKind::Sequence(vec![
                StepPattern {
                    tool: Some(format!("tool{}.*", r % 6)),
                    sink: None,
                    reads: Some(LabelPattern {
                        min_sensitivity: Some(3),
                        ..LabelPattern::ANY
                    }),
                    when: None,
                },
                StepPattern {
                    tool: None,
                    sink: Some(r % SINKS),
                    reads: None,
                    when: None,
                },
            ])
        } else {
            PathKind::AtMost {
                max: 1_000_000,
                step: StepPattern {
                    tool: Some(format!("tool{}.op", r % TOOLS)),
                    sink: None,
                    reads: None,
                    when: None,
                },
            }
        };
        p.path_rules.push(PathRule {
            name: format!("path{r}"),
            effect: RuleEffect::Deny,
            kind,
            reset: None,
        });
    }
    p
}

/// A random call of the workload (mostly covered by some grant; about one
/// in eight reads a secret resource, which later trips flow and path rules).
pub fn random_call(rng: &mut Rng, id: usize, time: u64) -> Call {
    let tool = rng.below(TOOLS);
    let target = if rng.below(8) == 0 {
        format!("/secret/{}", rng.below(100))
    } else {
        format!("/data/{}/{}", rng.below(5), rng.below(1000))
    };
    let mut args = serde_json::Map::new();
    args.insert("target".into(), target.into());
    args.insert("n".into(), (rng.below(1_100) as i64).into());
    Call {
        session: None,
        id: format!("c{id}"),
        time,
        agent: None,
        tool: format!("tool{tool}.op"),
        args,
        lineage: Default::default(),
        inferred: Default::default(),
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub p50_ns: u64,
    pub p95_ns: u64,
    pub p99_ns: u64,
    pub mean_ns: u64,
    pub samples: usize,
    pub bytes_per_event: f64,
    pub grants: usize,
    pub flow_rules: usize,
    pub path_rules: usize,
    pub preloaded_events: usize,
}

/// Plays `n` random events (calls, and a result for each admitted call)
/// into the monitor, starting at call id `first_id`.
fn play(monitor: &mut Monitor, rng: &mut Rng, first_id: usize, n: usize) -> usize {
    let mut played = 0;
    let mut id = first_id;
    while played < n {
        let call = random_call(rng, id, id as u64);
        id += 1;
        played += 1;
        let Ok(d) = monitor.authorize(&call) else {
            continue;
        };
        if d.verdict == agenra_core::Verdict::Allow && played < n {
            let report = Report {
                session: None,
                call: call.id.clone(),
                time: None,
                status: agenra_core::event::Outcome::Succeeded,
                output: serde_json::Value::Null,
                discovered: vec![],
            };
            if monitor.step(&Event::Result(report)).is_ok() {
                played += 1;
            }
        }
    }
    id
}

/// Runs the workload. `allocated` reads the process's live heap bytes
/// (the CLI passes a counting allocator; `None` skips the memory figure).
pub fn run(
    samples: usize,
    allocated: Option<&dyn Fn() -> usize>,
) -> Result<BenchReport, agenra_core::MonitorError> {
    let samples = samples.max(1);
    let mut rng = Rng::new(0x5eed);
    let mut monitor = Monitor::new(workload_policy())?;

    // Memory per session event: grow a separate session by 10,000 events.
    let bytes_per_event = match allocated {
        Some(read) => {
            let mut m = Monitor::new(workload_policy())?;
            let mut r = Rng::new(7);
            let before = read();
            play(&mut m, &mut r, 0, 10_000);
            let after = read();
            let events = m.session().seq.max(1);
            drop(m);
            after.saturating_sub(before) as f64 / events as f64
        }
        None => f64::NAN,
    };

    let mut next_id = play(&mut monitor, &mut rng, 0, PRELOADED_EVENTS);
    let calls: Vec<Call> = (0..samples)
        .map(|i| random_call(&mut rng, next_id + i, (next_id + i) as u64))
        .collect();
    next_id += samples;
    let _ = next_id;
    let mut times = Vec::with_capacity(samples);
    for call in &calls {
        let start = Instant::now();
        let d = monitor.authorize(call);
        let elapsed = start.elapsed();
        std::hint::black_box(&d);
        times.push(elapsed.as_nanos() as u64);
    }
    times.sort_unstable();
    let pct = |p: f64| times[((times.len() as f64 * p) as usize).min(times.len() - 1)];
    let mean = times.iter().sum::<u64>() / times.len().max(1) as u64;
    Ok(BenchReport {
        p50_ns: pct(0.50),
        p95_ns: pct(0.95),
        p99_ns: pct(0.99),
        mean_ns: mean,
        samples,
        bytes_per_event,
        grants: GRANTS,
        flow_rules: FLOW_RULES,
        path_rules: PATH_RULES,
        preloaded_events: PRELOADED_EVENTS,
    })
}
