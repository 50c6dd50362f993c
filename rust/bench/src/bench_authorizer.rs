//! `agenra bench authorizer`: the Z3 authorizer's latency on generated
//! session graphs of 1 to 50 nodes, against the native monitor on the same
//! graphs (docs/smt.md).
//!
//! A fixed policy with every kind of rule (flows with allow, deny and pause
//! rules, a sanitizer, resource labels, a path rule, a count, an
//! obligation, limited grants and one needing approval) and seeded random
//! traces: reads, fetches, summaries, posts, mails and commits, with
//! results and lineage to earlier calls. The trace's last call is decided
//! 5 times by each engine (the session, with its Z3 solver, is built once
//! per trace and not timed). Both engines must agree on every decision.

use agenra_core::label::{CategorySet, Label, LabelPattern, Sanitizer};
use agenra_core::policy::{
    FactRule, FlowEffect, FlowRule, Grant, Obligation, Param, PathKind, PathRule, Policy, Quota,
    ResourceLabel, RuleEffect, SinkUse, StepPattern, Tool,
};
use agenra_core::{Call, Event, Monitor, NamedCond, ParamType, Pattern, Report};
use agenra_smt::SmtSession;
use std::collections::BTreeMap;
use std::time::Instant;

/// Size buckets (graph nodes, inclusive).
const BUCKETS: [(usize, usize); 4] = [(1, 2), (3, 5), (6, 10), (11, 50)];
/// Traces per bucket.
const PER_BUCKET: usize = 40;
/// Decisions per trace and engine.
const REPEAT: usize = 5;

fn param(name: &str) -> Param {
    Param {
        name: name.into(),
        ty: ParamType::Str,
        list: false,
        optional: false,
        fields: Vec::new(),
    }
}

fn tool(name: &str, params: &[&str]) -> Tool {
    Tool {
        name: name.into(),
        params: params.iter().map(|p| param(p)).collect(),
        resource: None,
        sinks: vec![],
        output: Label::BOTTOM,
        sanitizer: None,
        facts: vec![],
    }
}

fn grant(name: &str, tool: usize, quota: Quota) -> Grant {
    Grant {
        name: name.into(),
        agent: 0,
        tool,
        resource: None,
        args: vec![],
        quota,
        approval: false,
        expires_at: None,
        discovers: None,
    }
}

fn step(tool: Option<&str>, sink: Option<usize>, reads: Option<LabelPattern>) -> StepPattern {
    StepPattern {
        tool: tool.map(Into::into),
        sink,
        reads,
        when: None,
    }
}

/// The benchmark policy.
pub fn policy() -> Policy {
    let mut p = Policy::empty("bench-authorizer");
    p.levels = vec!["public".into(), "internal".into(), "secret".into()];
    p.categories = vec!["pii".into(), "creds".into()];
    p.sinks = vec!["net".into(), "mail".into()];
    p.facts = vec!["tested".into()];
    p.sanitizers = vec![Sanitizer {
        name: "redact".into(),
        removes: CategorySet::single(0),
        max_sensitivity: Some(1),
        trusts: false,
    }];
    let mut read = tool("fs.read", &["path"]);
    read.resource = Some(0);
    read.output = Label::new(1, CategorySet::EMPTY, true);
    let mut fetch = tool("web.fetch", &["url"]);
    fetch.resource = Some(0);
    fetch.output = Label::new(0, CategorySet::EMPTY, false);
    let mut summarize = tool("summarize", &["text"]);
    summarize.sanitizer = Some(0);
    let mut post = tool("http.post", &["url", "body"]);
    post.resource = Some(0);
    post.sinks = vec![SinkUse {
        sink: 0,
        params: None,
    }];
    let mut mail = tool("mail.send", &["to", "body"]);
    mail.sinks = vec![SinkUse {
        sink: 1,
        params: Some(vec![1]),
    }];
    let mut test = tool("test.run", &[]);
    test.facts = vec![FactRule {
        fact: 0,
        when: None,
    }];
    let commit = tool("git.commit", &["msg"]);
    p.tools = vec![read, fetch, summarize, post, mail, test, commit];
    p.resources = vec![
        ResourceLabel {
            pattern: Pattern::Prefix("/secret".into()),
            label: Label::new(2, CategorySet::single(1), true),
        },
        ResourceLabel {
            pattern: Pattern::Prefix("/home/pii".into()),
            label: Label::new(1, CategorySet::single(0), true),
        },
    ];
    let deny = |p: LabelPattern| FlowEffect::Deny(p);
    p.flow_rules = vec![
        FlowRule {
            name: "internal-to-partner".into(),
            sink: 0,
            effect: FlowEffect::Allow(Label::new(1, CategorySet::EMPTY, true)),
            when: NamedCond::TRUE,
        },
        FlowRule {
            name: "no-secrets-out".into(),
            sink: 0,
            effect: deny(LabelPattern {
                min_sensitivity: Some(1),
                ..LabelPattern::ANY
            }),
            when: NamedCond::TRUE,
        },
        FlowRule {
            name: "no-untrusted-mail".into(),
            sink: 1,
            effect: deny(LabelPattern {
                untrusted: true,
                ..LabelPattern::ANY
            }),
            when: NamedCond::TRUE,
        },
        FlowRule {
            name: "pii-mail-needs-ok".into(),
            sink: 1,
            effect: FlowEffect::Pause(LabelPattern {
                any_category: CategorySet::single(0),
                ..LabelPattern::ANY
            }),
            when: NamedCond::TRUE,
        },
    ];
    p.path_rules = vec![
        PathRule {
            name: "creds-then-net".into(),
            effect: RuleEffect::Deny,
            kind: PathKind::Sequence(vec![
                step(
                    Some("fs.read"),
                    None,
                    Some(LabelPattern {
                        any_category: CategorySet::single(1),
                        ..LabelPattern::ANY
                    }),
                ),
                step(None, Some(0), None),
            ]),
            reset: None,
        },
        PathRule {
            name: "few-mails".into(),
            effect: RuleEffect::Deny,
            kind: PathKind::AtMost {
                max: 3,
                step: step(Some("mail.send"), None, None),
            },
            reset: Some(step(Some("summarize"), None, None)),
        },
    ];
    p.obligations = vec![Obligation {
        name: "tests-before-commit".into(),
        effect: RuleEffect::Deny,
        fact: 0,
        before: "git.commit".into(),
        since: Some("summarize".into()),
    }];
    let mut partner = grant("post-partner", 3, Quota::Limited(2));
    partner.resource = Some(Pattern::Prefix("https://partner".into()));
    partner.approval = true;
    p.grants = vec![
        grant("read", 0, Quota::Unlimited),
        grant("fetch", 1, Quota::Unlimited),
        grant("summarize", 2, Quota::Unlimited),
        partner,
        grant("post", 3, Quota::Limited(3)),
        grant("mail", 4, Quota::Limited(4)),
        grant("test", 5, Quota::Unlimited),
        grant("commit", 6, Quota::Limited(2)),
    ];
    p
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A trace of `calls` calls (with results); the last event is a call.
fn trace(policy: &Policy, rng: &mut Rng, calls: usize) -> Vec<Event> {
    const PATHS: [&str; 4] = ["/src/a.rs", "/secret/key", "/home/pii/cv", "/docs/x"];
    const URLS: [&str; 3] = [
        "https://partner.example/u",
        "https://evil.example",
        "https://x.org",
    ];
    let mut out = Vec::new();
    let mut ids: Vec<String> = Vec::new();
    for i in 0..calls {
        let last = i + 1 == calls;
        let t = if last {
            [3, 4, 6][rng.below(3)]
        } else {
            rng.below(policy.tools.len())
        };
        let tool = &policy.tools[t];
        let mut args = serde_json::Map::new();
        for p in &tool.params {
            let v = match p.name.as_str() {
                "path" => PATHS[rng.below(PATHS.len())],
                "url" => URLS[rng.below(URLS.len())],
                "to" => "bob@corp.example",
                _ => "text",
            };
            args.insert(p.name.clone(), v.into());
        }
        let mut lineage = BTreeMap::new();
        if !ids.is_empty() && rng.below(2) == 0 {
            if let Some(p) = tool.params.last() {
                let from = ids[rng.below(ids.len())].clone();
                lineage.insert(p.name.clone(), vec![from]);
            }
        }
        let id = format!("c{i}");
        out.push(Event::Call(Call {
            session: None,
            id: id.clone(),
            time: i as u64,
            agent: None,
            tool: tool.name.clone(),
            args,
            lineage,
            inferred: BTreeMap::new(),
        }));
        if !last && rng.below(4) != 0 {
            out.push(Event::Result(Report {
                session: None,
                call: id.clone(),
                time: None,
                status: if rng.below(8) == 0 {
                    agenra_core::event::Outcome::Unknown
                } else {
                    agenra_core::event::Outcome::Succeeded
                },
                output: serde_json::Value::Null,
                discovered: vec![],
            }));
        }
        ids.push(id);
    }
    out
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Runs the benchmark; the text to print (the JSON object last).
pub fn run_bench(json: bool) -> Result<String, String> {
    let policy = policy();
    Monitor::new(policy.clone()).map_err(|e| format!("the bench policy: {e}"))?;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut smt_ms: Vec<Vec<f64>> = vec![Vec::new(); BUCKETS.len()];
    let mut native_small: Vec<f64> = Vec::new();
    let mut native_all: Vec<f64> = Vec::new();
    let mut verdicts: BTreeMap<String, usize> = BTreeMap::new();
    let mut disagreements = 0;
    let mut text = String::new();
    let mut attempts = 0;
    while smt_ms.iter().any(|b| b.len() < PER_BUCKET * REPEAT) && attempts < 20_000 {
        attempts += 1;
        let calls = 1 + rng.below(30);
        // Results for calls that were not admitted are dropped (the
        // native monitor refuses them).
        let events = {
            let mut m = Monitor::new(policy.clone()).map_err(|e| e.to_string())?;
            let all = trace(&policy, &mut rng, calls);
            let n = all.len();
            let mut kept = Vec::with_capacity(n);
            for (i, e) in all.into_iter().enumerate() {
                if i + 1 == n || m.step(&e).is_ok() {
                    kept.push(e);
                }
            }
            kept
        };
        let (last, prefix) = events.split_last().ok_or("empty trace")?;
        let Event::Call(call) = last else {
            return Err("the trace does not end with a call".into());
        };
        let mut smt = SmtSession::new(&policy).map_err(|e| e.to_string())?;
        let mut native = Monitor::new(policy.clone()).map_err(|e| e.to_string())?;
        for e in prefix {
            smt.apply(e).map_err(|e| e.to_string())?;
            let _ = native.step(e);
        }
        // Graph size: the nodes so far, the call, and a new context version
        // if it reads one.
        let d = smt.decide(call).map_err(|e| e.to_string())?;
        let nodes = {
            let mut s2 = SmtSession::new(&policy).map_err(|e| e.to_string())?;
            for e in &events {
                s2.apply(e).map_err(|e| e.to_string())?;
            }
            s2.graph().nodes.len()
        };
        let Some(b) = BUCKETS
            .iter()
            .position(|&(lo, hi)| lo <= nodes && nodes <= hi)
        else {
            continue;
        };
        if smt_ms[b].len() >= PER_BUCKET * REPEAT {
            continue;
        }
        for _ in 0..REPEAT {
            let t = Instant::now();
            let again = smt.decide(call).map_err(|e| e.to_string())?;
            smt_ms[b].push(t.elapsed().as_secs_f64() * 1e3);
            if again != d {
                return Err("the SMT authorizer is not deterministic".into());
            }
        }
        let mut native_verdict = None;
        for _ in 0..REPEAT {
            let t = Instant::now();
            let n = native.check(call).map_err(|e| e.to_string())?;
            let ms = t.elapsed().as_secs_f64() * 1e3;
            native_all.push(ms);
            if nodes <= 10 {
                native_small.push(ms);
            }
            native_verdict = Some((n.verdict, n.rule.name(&policy)));
        }
        if native_verdict != Some((d.verdict, d.rule_name.clone())) {
            disagreements += 1;
        }
        *verdicts
            .entry(format!("{} {}", d.verdict.as_str(), d.rule_name))
            .or_default() += 1;
    }
    let mut rows = Vec::new();
    let mut small: Vec<f64> = Vec::new();
    for (b, &(lo, hi)) in BUCKETS.iter().enumerate() {
        let mut v = smt_ms[b].clone();
        v.sort_by(f64::total_cmp);
        if hi <= 10 {
            small.extend(&v);
        }
        let row = serde_json::json!({
            "bucket": format!("{lo}-{hi}"),
            "count": v.len(),
            "median_ms": quantile(&v, 0.5),
            "p95_ms": quantile(&v, 0.95),
            "max_ms": v.last().copied().unwrap_or(0.0),
        });
        if !json {
            text += &format!(
                "{:>6} nodes: {:>4} decisions, median {:.3} ms, p95 {:.3} ms, max {:.3} ms\n",
                format!("{lo}-{hi}"),
                v.len(),
                quantile(&v, 0.5),
                quantile(&v, 0.95),
                v.last().copied().unwrap_or(0.0)
            );
        }
        rows.push(row);
    }
    small.sort_by(f64::total_cmp);
    native_small.sort_by(f64::total_cmp);
    native_all.sort_by(f64::total_cmp);
    let native_median = quantile(&native_small, 0.5);
    let smt_small = quantile(&small, 0.5);
    if !json {
        text += &format!(
            "native median {:.4} ms (graphs <= 10 nodes); smt median {:.3} ms: native {:.0}x faster\n",
            native_median,
            smt_small,
            smt_small / native_median.max(1e-9)
        );
        text += &format!("decisions: {verdicts:?}; engine disagreements: {disagreements}\n");
    }
    let summary = serde_json::json!({
        "rows": rows,
        "native_median_ms": native_median,
        "native_median_ms_all": quantile(&native_all, 0.5),
        "smt_median_ms_le10": smt_small,
        "smt_p95_ms_le10": quantile(&small, 0.95),
        "speedup_le10": smt_small / native_median.max(1e-9),
        "disagreements": disagreements,
        "repeat": REPEAT,
    });
    text += &summary.to_string();
    text.push('\n');
    if disagreements > 0 {
        return Err(format!("{disagreements} engine disagreements\n{text}"));
    }
    Ok(text)
}
