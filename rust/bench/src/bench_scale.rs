//! `agenra bench scale`: how costs grow with sessions and policies.
//!
//! Each measurement runs in a child process (`agenra bench scale --one
//! NAME --events N`), so that its peak RSS is its own. Events are generated
//! in memory with a fixed pattern, so runs compare.

use agenra::replay::Stepper;
use agenra::Sessions;
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// The coding-agent policy with unlimited quotas: a web read makes the
/// context untrusted, so a shell call is a flow DENY.
const POLICY: &str = r#"
levels public < internal < secret;
categories credential, source_code, web;
sinks network, shell;
facts tests_passed;
tool fs.read(path: string) { resource path; output <internal, {source_code}, trusted>; }
tool tests.run(suite: string) { fact tests_passed when output.exit_code == 0; }
tool shell.exec(cmd: string) { resource cmd; sink shell; }
tool http.get(url: string) { resource url; sink network; output <public, {web}, untrusted>; }
grant read_repo: fs.read quota unlimited;
grant run_tests: tests.run quota unlimited;
grant build: shell.exec quota unlimited;
grant docs: http.get quota unlimited;
deny flow no_web_in_shell: untrusted -> shell;
"#;

/// One measurement: seconds, microseconds per event, peak RSS.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Measure {
    pub name: String,
    pub events: u64,
    pub seconds: f64,
    pub us_per_event: f64,
    pub peak_rss_mb: f64,
}

/// The peak resident set of this process (Linux `VmHWM`), in MB.
fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn sessions(policy: &str) -> Result<Sessions, String> {
    let p = agenra::compile_policy(policy, "scale").map_err(|e| e.to_string())?;
    Sessions::new(p).map_err(|e| e.to_string())
}

/// Runs `lines` (trace lines) through a fresh stepper, returns the time.
fn run_lines(policy: &str, lines: impl Iterator<Item = String>) -> Result<(f64, u64), String> {
    let mut stepper = Stepper::new(sessions(policy)?);
    let start = Instant::now();
    let mut n = 0;
    for line in lines {
        match stepper.step_line(&line) {
            None | Some(Ok(_)) => n += 1,
            Some(Err(e)) => return Err(format!("event {n}: {e}")),
        }
    }
    Ok((start.elapsed().as_secs_f64(), n))
}

/// Seven events: a web read and its result, tests and their result, a file
/// read and its result, then a shell call (a flow DENY) or, without
/// `deny`, another test run.
fn session_lines(events: u64, deny: bool) -> impl Iterator<Item = String> {
    (0..events).map(move |k| {
        let (i, j) = (k / 7, k % 7);
        match j {
            0 => format!(r#"{{"kind":"call","id":"g{i}","time":{i},"tool":"http.get","args":{{"url":"https://docs.rs/{i}"}}}}"#),
            1 => format!(r#"{{"kind":"result","call":"g{i}","status":"succeeded"}}"#),
            2 => format!(r#"{{"kind":"call","id":"t{i}","time":{i},"tool":"tests.run","args":{{"suite":"a"}}}}"#),
            3 => format!(r#"{{"kind":"result","call":"t{i}","status":"succeeded","output":{{"exit_code":0}}}}"#),
            4 => format!(r#"{{"kind":"call","id":"r{i}","time":{i},"tool":"fs.read","args":{{"path":"/repo/{i}"}}}}"#),
            5 => format!(r#"{{"kind":"result","call":"r{i}","status":"succeeded"}}"#),
            _ if deny => format!(r#"{{"kind":"call","id":"s{i}","time":{i},"tool":"shell.exec","args":{{"cmd":"cargo build"}}}}"#),
            _ => format!(r#"{{"kind":"call","id":"s{i}","time":{i},"tool":"tests.run","args":{{"suite":"b"}}}}"#),
        }
    })
}

/// Call ids that collide in an FxHash-style table (the kind the monitor
/// used for call ids before): 16 printable bytes whose second half undoes
/// the first, so every id hashes alike. Found by search; deterministic.
fn colliding_ids(count: usize) -> Vec<String> {
    const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
    const TARGET: u64 = 0x3a3a_3a3a_3a3a_3a3a;
    let printable = |w: u64| {
        w.to_le_bytes()
            .iter()
            .all(|b| (0x21..0x7f).contains(b) && *b != b'"' && *b != b'\\')
    };
    let mut out = Vec::with_capacity(count);
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    while out.len() < count {
        // xorshift for candidate first halves, mapped to printable bytes.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let w1 = u64::from_le_bytes(x.to_le_bytes().map(|b| 0x30 + b % 0x4a));
        let w2 = TARGET ^ (w1.wrapping_mul(K)).rotate_left(5);
        if printable(w1) && printable(w2) {
            let mut id = String::with_capacity(16);
            id.extend(w1.to_le_bytes().iter().map(|&b| b as char));
            id.extend(w2.to_le_bytes().iter().map(|&b| b as char));
            out.push(id);
        }
    }
    out
}

fn id_lines(ids: impl Iterator<Item = String>) -> impl Iterator<Item = String> {
    ids.enumerate().map(|(i, id)| {
        format!(
            r#"{{"kind":"call","id":"{id}","time":{i},"tool":"tests.run","args":{{"suite":"a"}}}}"#
        )
    })
}

fn grants_policy(grants: usize) -> String {
    (0..grants)
        .map(|i| format!("tool t{i}();\ngrant g{i}: t{i} quota 1000000;\n"))
        .collect()
}

fn grant_lines(events: u64, grants: u64) -> impl Iterator<Item = String> {
    (0..events).map(move |i| {
        format!(
            r#"{{"kind":"call","id":"c{i}","time":{i},"tool":"t{}"}}"#,
            i % grants
        )
    })
}

/// One measurement in this process (the child side of `--one`).
pub fn one(name: &str, events: u64) -> Result<Measure, String> {
    let (seconds, n) = match name {
        "allow" => run_lines(POLICY, session_lines(events, false))?,
        "deny" => run_lines(POLICY, session_lines(events, true))?,
        // Calls whose results never come: each stays running and holds its
        // units, the most a session keeps per event. The ids are made as
        // they are read, so the peak RSS is the session's.
        "running" => run_lines(
            POLICY,
            id_lines((0..events).map(|i| format!("call-{i:011}"))),
        )?,
        // Ids made up front, as for the colliding ones it compares with.
        "ids-normal" => run_lines(
            POLICY,
            id_lines(
                (0..events)
                    .map(|i| format!("call-{i:011}"))
                    .collect::<Vec<_>>()
                    .into_iter(),
            ),
        )?,
        "ids-colliding" => run_lines(POLICY, id_lines(colliding_ids(events as usize).into_iter()))?,
        "grants-3" => run_lines(&grants_policy(3), grant_lines(events, 3))?,
        "grants-1e4" => run_lines(&grants_policy(10_000), grant_lines(events, 10_000))?,
        "check" => {
            let text: String = (0..events)
                .map(|i| format!("grant g{i}: t on \"v{i}\" quota 1;\n"))
                .collect();
            let text = format!("tool t(x: string) {{ resource x; }}\n{text}");
            let start = Instant::now();
            agenra::compile_policy(&text, "scale").map_err(|e| e.to_string())?;
            (start.elapsed().as_secs_f64(), events)
        }
        other => return Err(format!("unknown measurement `{other}`")),
    };
    Ok(Measure {
        name: name.to_string(),
        events: n,
        seconds,
        us_per_event: seconds * 1e6 / n.max(1) as f64,
        peak_rss_mb: peak_rss_mb(),
    })
}

/// The summary line of `bench scale --json`.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub deny_over_allow_1e6: f64,
    pub collide_over_normal_4e4: f64,
    pub grants_1e4_over_3: f64,
    pub check_1e5_rules_s: f64,
    pub replay_1e6_rss_mb: f64,
}

/// The plan of `bench scale`: session sizes for allow/deny and for calls
/// left running (the largest give the summary's 1e6 figures), then the
/// fixed-size comparisons.
pub fn plan(max_events: u64) -> Vec<(&'static str, u64)> {
    let mut plan = Vec::new();
    let mut n = 1_000;
    while n <= max_events {
        plan.push(("allow", n));
        plan.push(("deny", n));
        plan.push(("running", n));
        n *= 10;
    }
    plan.extend([
        ("ids-normal", 40_000),
        ("ids-colliding", 40_000),
        ("grants-3", 100_000),
        ("grants-1e4", 100_000),
        ("check", 100_000),
    ]);
    plan
}

/// The summary from the measurements (the largest session size stands in
/// for 1e6 when the run was smaller; the JSON says which size it was in
/// the rows before it).
pub fn summarize(rows: &[Measure]) -> Summary {
    let largest = |name: &str| {
        rows.iter()
            .filter(|m| m.name == name)
            .max_by_key(|m| m.events)
            .cloned()
    };
    let seconds = |name: &str| largest(name).map_or(f64::NAN, |m| m.seconds);
    let ratio = |a: &str, b: &str| seconds(a) / seconds(b);
    Summary {
        deny_over_allow_1e6: ratio("deny", "allow"),
        collide_over_normal_4e4: ratio("ids-colliding", "ids-normal"),
        grants_1e4_over_3: ratio("grants-1e4", "grants-3"),
        check_1e5_rules_s: seconds("check"),
        replay_1e6_rss_mb: largest("deny")
            .into_iter()
            .chain(largest("allow"))
            .chain(largest("running"))
            .map(|m| m.peak_rss_mb)
            .fold(0.0, f64::max),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colliding_ids_are_printable_distinct_and_collide_in_an_fx_table() {
        use std::hash::{BuildHasher, BuildHasherDefault};
        let ids = colliding_ids(50);
        let distinct: std::collections::BTreeSet<&String> = ids.iter().collect();
        assert_eq!(distinct.len(), 50);
        assert!(ids
            .iter()
            .all(|s| s.len() == 16 && s.chars().all(|c| c.is_ascii_graphic())));
        #[derive(Default)]
        struct Fx(u64);
        impl std::hash::Hasher for Fx {
            fn write(&mut self, bytes: &[u8]) {
                for chunk in bytes.chunks(8) {
                    let mut word = [0u8; 8];
                    word[..chunk.len()].copy_from_slice(chunk);
                    self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word))
                        .wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
                }
            }
            fn finish(&self) -> u64 {
                self.0
            }
        }
        let build = BuildHasherDefault::<Fx>::default();
        let first = build.hash_one(&ids[0]);
        assert!(ids.iter().all(|id| build.hash_one(id) == first));
    }

    #[test]
    fn every_measurement_runs() {
        for (name, n) in [
            ("allow", 70),
            ("deny", 70),
            ("running", 20),
            ("ids-normal", 20),
            ("ids-colliding", 20),
            ("grants-3", 30),
            ("grants-1e4", 30),
            ("check", 30),
        ] {
            let m = one(name, n).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(m.events, n, "{name}");
        }
        assert!(one("nope", 1).is_err());
    }
}
