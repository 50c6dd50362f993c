//! Where the authorizer's time goes: `cargo run --release -p agenra-smt --example latency`.
use agenra_core::Event;
use agenra_smt::SmtSession;
use std::time::Instant;

fn main() {
    let policy_text =
        std::fs::read_to_string("examples/email-assistant/policy.agr").expect("policy");
    let policy = agenra_policy::compile(&policy_text, "p")
        .expect("compiles")
        .policy;
    let trace = std::fs::read_to_string("examples/email-assistant/attack.jsonl").expect("trace");
    let events: Vec<Event> = trace
        .lines()
        .map(|l| serde_json::from_str(l).expect("event"))
        .collect();
    for upto in [1usize, 3, 7, 8, 12] {
        let mut s = SmtSession::new(&policy).expect("supported");
        for e in &events[..upto - 1] {
            s.apply(e).expect("applies");
        }
        let Event::Call(c) = &events[upto - 1] else {
            continue;
        };
        let mut times = Vec::new();
        let mut v = String::new();
        for _ in 0..50 {
            let t = Instant::now();
            let d = s.decide(c).expect("decides");
            times.push(t.elapsed().as_secs_f64() * 1e3);
            v = format!("{} {}", d.verdict.as_str(), d.rule_name);
        }
        let mut sorted = times.clone();
        sorted.sort_by(f64::total_cmp);
        println!(
            "event {upto} {v}: first {:.3} median {:.3} p95 {:.3} max {:.3} ms; first 8 {:?}",
            times[0],
            sorted[25],
            sorted[47],
            sorted[49],
            times
                .iter()
                .take(8)
                .map(|x| (x * 1000.0).round() / 1000.0)
                .collect::<Vec<_>>()
        );
    }
}
