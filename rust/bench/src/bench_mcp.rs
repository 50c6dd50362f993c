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
    /// How the client reaches the proxy: `stdio`, or `http` (`--http`:
    /// `mcp-proxy --listen`, one keep-alive loopback connection).
    transport: &'static str,
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

/// The proxy behind `--listen 127.0.0.1:0`, asked over one keep-alive
/// HTTP/1.1 connection (MCP's streamable HTTP: one `POST` a message).
struct HttpPeer {
    child: Child,
    stream: std::net::TcpStream,
    reader: BufReader<std::net::TcpStream>,
    host: String,
    session: Option<String>,
}

impl HttpPeer {
    fn start(command: &mut Command) -> Result<HttpPeer, String> {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("bench mcp: cannot start the proxy: {e}"))?;
        let err = child
            .stderr
            .take()
            .ok_or_else(|| "bench mcp: the proxy's stderr is missing".to_string())?;
        let mut err = BufReader::new(err);
        let mut line = String::new();
        let host = loop {
            line.clear();
            if err.read_line(&mut line).unwrap_or(0) == 0 {
                let _ = child.kill();
                return Err("bench mcp: the proxy did not say where it listens".into());
            }
            if let Some(rest) = line.split("MCP streamable HTTP on http://").nth(1) {
                break rest.split('/').next().unwrap_or_default().to_string();
            }
        };
        // Its later lines are drained, so that it never blocks on them.
        std::thread::spawn(move || {
            let mut sink = String::new();
            while err.read_line(&mut sink).unwrap_or(0) > 0 {
                sink.clear();
            }
        });
        let stream = std::net::TcpStream::connect(&host)
            .map_err(|e| format!("bench mcp: cannot connect to {host}: {e}"))?;
        let _ = stream.set_nodelay(true);
        let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(30)));
        let reader = BufReader::new(stream.try_clone().map_err(|e| format!("bench mcp: {e}"))?);
        let mut peer = HttpPeer {
            child,
            stream,
            reader,
            host,
            session: None,
        };
        peer.post(
            &json!({"jsonrpc": "2.0", "id": "init", "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "agenra-bench", "version": "1"}}}),
        )?;
        peer.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(peer)
    }

    /// One message; the answer's status and body.
    fn post(&mut self, message: &Value) -> Result<(u16, Vec<u8>), String> {
        let body = message.to_string();
        let session = self
            .session
            .as_ref()
            .map(|s| format!("Mcp-Session-Id: {s}\r\n"))
            .unwrap_or_default();
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\n{session}Content-Length: {}\r\n\r\n{body}",
            self.host,
            body.len()
        );
        let broken = |e: std::io::Error| format!("bench mcp: the HTTP connection: {e}");
        self.stream.write_all(request.as_bytes()).map_err(broken)?;
        let mut line = String::new();
        self.reader.read_line(&mut line).map_err(broken)?;
        let status = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse::<u16>().ok())
            .ok_or_else(|| format!("bench mcp: bad status line {line:?}"))?;
        let mut length = 0usize;
        loop {
            line.clear();
            if self.reader.read_line(&mut line).map_err(broken)? == 0 {
                return Err("bench mcp: the proxy closed the connection".into());
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap_or(0);
                } else if k.eq_ignore_ascii_case("mcp-session-id") {
                    self.session = Some(v.trim().to_string());
                }
            }
        }
        let mut body = vec![0u8; length];
        std::io::Read::read_exact(&mut self.reader, &mut body).map_err(broken)?;
        if status >= 400 {
            return Err(format!(
                "bench mcp: the proxy answered HTTP {status}: {}",
                String::from_utf8_lossy(&body)
            ));
        }
        Ok((status, body))
    }

    /// Round trips of `n` calls, in milliseconds, one after the other.
    fn round_trips(&mut self, first_id: usize, n: usize) -> Result<Vec<f64>, String> {
        let mut times = Vec::with_capacity(n);
        for id in first_id..first_id + n {
            let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": format!("call {id}")}}});
            let started = Instant::now();
            let (_, body) = self.post(&call)?;
            times.push(started.elapsed().as_secs_f64() * 1e3);
            let answer: Value = serde_json::from_slice(&body)
                .map_err(|e| format!("bench mcp: answer {id} is not JSON ({e})"))?;
            if answer["id"] != json!(id)
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
        let _ = self.child.kill();
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
    run_over(agenra, bench, json_only, samples, false)
}

/// [`run`], the client reaching the proxy over MCP's streamable HTTP
/// (`mcp-proxy --listen`) when `http`.
pub fn run_over(
    agenra: &Path,
    bench: &Path,
    json_only: bool,
    samples: usize,
    http: bool,
) -> Result<String, String> {
    let dir = std::env::temp_dir().join(format!("agenra-bench-mcp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("bench mcp: {e}"))?;
    let policy = dir.join("policy.agr");
    std::fs::write(&policy, POLICY).map_err(|e| format!("bench mcp: {e}"))?;

    let mut direct = Peer::start(Command::new(bench).args(["mcp", "--echo-server"]))?;
    direct.round_trips(0, WARM_UP)?;
    let mut direct_ms = direct.round_trips(WARM_UP, samples)?;
    direct.finish();

    let mut command = Command::new(agenra);
    command.arg("mcp-proxy").arg("--policy").arg(&policy);
    if http {
        command.args(["--listen", "127.0.0.1:0"]);
    }
    command.arg("--").arg(bench).args(["mcp", "--echo-server"]);
    let result = if http {
        let mut proxied = HttpPeer::start(&mut command)?;
        let result = proxied
            .round_trips(0, WARM_UP)
            .and_then(|_| proxied.round_trips(WARM_UP, samples));
        proxied.finish();
        result
    } else {
        let mut proxied = Peer::start(&mut command)?;
        let result = proxied
            .round_trips(0, WARM_UP)
            .and_then(|_| proxied.round_trips(WARM_UP, samples));
        proxied.finish();
        result
    };
    let _ = std::fs::remove_dir_all(&dir);
    let mut proxied_ms = result?;

    direct_ms.sort_by(f64::total_cmp);
    proxied_ms.sort_by(f64::total_cmp);
    let figures = Figures {
        bench: "mcp",
        transport: if http { "http" } else { "stdio" },
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
            "mcp-proxy ({}): {samples} tools/call round trips: p50 {:.3} ms, p99 {:.3} ms \
             (direct to the echo server: p50 {:.3} ms); the proxy adds {:.3} ms at p50\n",
            figures.transport,
            figures.p50_ms,
            figures.p99_ms,
            figures.direct_p50_ms,
            figures.added_p50_ms
        ));
    }
    out.push_str(&serde_json::to_string(&figures).map_err(|e| format!("bench mcp: {e}"))?);
    out.push('\n');
    Ok(out)
}
