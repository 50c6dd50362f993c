//! `agenra bench mcp`: the latency `agenra mcp-proxy` adds to a
//! `tools/call`. A minimal echo server (the bench binary, `agenra-bench mcp
//! --echo-server`) is asked directly, then through the proxy (the `agenra`
//! binary installed next to it, its session
//! in memory, a policy granting the echo tool); each call is sent after the
//! previous answer came back. The figures are the proxied round trip, the
//! direct one, and the difference of their medians (what the proxy adds:
//! parsing, the decision, the result's report, two more pipe hops).

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

const POLICY: &str = r#"policy "bench-mcp";
tool echo(text: string) { resource text; }
grant echo_any: echo quota unlimited;
"#;

/// Calls before the measured ones (start-up, caches).
const WARM_UP: usize = 200;

/// The figures of one run (the JSON line).
#[derive(serde::Serialize)]
struct Figures {
    bench: &'static str,
    samples: usize,
    /// Through the proxy.
    p50_ms: f64,
    p99_ms: f64,
    /// The echo server asked directly.
    direct_p50_ms: f64,
    direct_p99_ms: f64,
    /// `p50_ms - direct_p50_ms`.
    added_p50_ms: f64,
}

/// `agenra-bench mcp --echo-server`: answers every request on standard
/// input with an echo of its arguments as a tool result, until the input
/// ends.
pub fn echo_server() -> Result<(), String> {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line.map_err(|e| format!("bench mcp echo server: {e}"))?;
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(id) = msg.get("id").filter(|id| !id.is_null()) else {
            continue;
        };
        let text = msg["params"]["arguments"]["text"]
            .as_str()
            .unwrap_or_default();
        let answer = json!({"jsonrpc": "2.0", "id": id,
            "result": {"content": [{"type": "text", "text": text}]}});
        writeln!(out, "{answer}")
            .and_then(|()| out.flush())
            .map_err(|e| format!("bench mcp echo server: {e}"))?;
    }
    Ok(())
}

/// A peer on pipes: the child, its input and its output.
struct Peer {
    child: Child,
    input: Option<ChildStdin>,
    output: BufReader<ChildStdout>,
}

impl Peer {
    fn start(command: &mut Command) -> Result<Peer, String> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("bench mcp: cannot start a peer: {e}"))?;
        let (Some(input), Some(output)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("bench mcp: a peer's pipes are missing".to_string());
        };
        Ok(Peer {
            child,
            input: Some(input),
            output: BufReader::new(output),
        })
    }

    /// Round trips of `n` calls, in milliseconds, one after the other.
    fn round_trips(&mut self, first_id: usize, n: usize) -> Result<Vec<f64>, String> {
        let mut times = Vec::with_capacity(n);
        let mut line = String::new();
        for id in first_id..first_id + n {
            let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": format!("call {id}")}}});
            let started = Instant::now();
            let input = self
                .input
                .as_mut()
                .ok_or_else(|| "bench mcp: input closed".to_string())?;
            writeln!(input, "{call}")
                .and_then(|()| input.flush())
                .map_err(|e| format!("bench mcp: writing call {id}: {e}"))?;
            line.clear();
            let read = self
                .output
                .read_line(&mut line)
                .map_err(|e| format!("bench mcp: reading answer {id}: {e}"))?;
            times.push(started.elapsed().as_secs_f64() * 1e3);
            let answer: Value = serde_json::from_str(line.trim_end()).map_err(|e| {
                format!(
                    "bench mcp: answer {id} is not JSON ({e}): {}",
                    line.trim_end()
                )
            })?;
            if read == 0
                || answer["id"] != json!(id)
                || answer["result"]["isError"] == json!(true)
                || answer.get("error").is_some()
            {
                return Err(format!(
                    "bench mcp: call {id} was not answered by the echo server: {answer}"
                ));
            }
        }
        Ok(times)
    }

    fn finish(mut self) {
        drop(self.input.take());
        let _ = self.child.wait();
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Runs the bench: `samples` measured calls each way. `agenra` is the CLI
/// binary (the proxy), `bench` this one (the echo server). The text to
/// print: the JSON object on its last line.
pub fn run(agenra: &Path, bench: &Path, json_only: bool, samples: usize) -> Result<String, String> {
    let dir = std::env::temp_dir().join(format!("agenra-bench-mcp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("bench mcp: {e}"))?;
    let policy = dir.join("policy.agr");
    std::fs::write(&policy, POLICY).map_err(|e| format!("bench mcp: {e}"))?;

    let mut direct = Peer::start(Command::new(bench).args(["mcp", "--echo-server"]))?;
    direct.round_trips(0, WARM_UP)?;
    let mut direct_ms = direct.round_trips(WARM_UP, samples)?;
    direct.finish();

    let mut proxied = Peer::start(
        Command::new(agenra)
            .arg("mcp-proxy")
            .arg("--policy")
            .arg(&policy)
            .arg("--")
            .arg(bench)
            .args(["mcp", "--echo-server"]),
    )?;
    let result = proxied
        .round_trips(0, WARM_UP)
        .and_then(|_| proxied.round_trips(WARM_UP, samples));
    proxied.finish();
    let _ = std::fs::remove_dir_all(&dir);
    let mut proxied_ms = result?;

    direct_ms.sort_by(f64::total_cmp);
    proxied_ms.sort_by(f64::total_cmp);
    let figures = Figures {
        bench: "mcp",
        samples,
        p50_ms: round3(percentile(&proxied_ms, 0.5)),
        p99_ms: round3(percentile(&proxied_ms, 0.99)),
        direct_p50_ms: round3(percentile(&direct_ms, 0.5)),
        direct_p99_ms: round3(percentile(&direct_ms, 0.99)),
        added_p50_ms: round3(percentile(&proxied_ms, 0.5) - percentile(&direct_ms, 0.5)),
    };
    let mut out = String::new();
    if !json_only {
        out.push_str(&format!(
            "mcp-proxy: {samples} tools/call round trips: p50 {:.3} ms, p99 {:.3} ms \
             (direct to the echo server: p50 {:.3} ms); the proxy adds {:.3} ms at p50\n",
            figures.p50_ms, figures.p99_ms, figures.direct_p50_ms, figures.added_p50_ms
        ));
    }
    out.push_str(&serde_json::to_string(&figures).map_err(|e| format!("bench mcp: {e}"))?);
    out.push('\n');
    Ok(out)
}
