//! `agenra bench serve`: loopback HTTP against `agenra serve`'s gateway on
//! the durable embedded store. Each client thread opens its own session
//! and keep-alive connection and sends consuming calls (one unit of a
//! limited grant each) back to back; every answer is durable before it is
//! sent, so concurrent clients share the store's group commits.
//!
//! With `--pg postgres://…` (or `AGENRA_BENCH_PG`) the store is PostgreSQL
//! instead (a fresh database `agenra_bench_…` is created on that server),
//! and `--replicas N` (or `AGENRA_BENCH_REPLICAS`; 1 to 8) runs N gateways
//! on it, each with its own connection and writer, the clients spread over
//! them (`docs/store.md`, "Several replicas"). `--sessions N` spreads the
//! calls over N sessions (default: one per client).

use agenra_gateway::auth::{Credentials, Role};
use agenra_gateway::client::Client;
use agenra_gateway::{Gateway, Perimeter, Server};
use std::sync::Arc;
use std::time::{Duration, Instant};

const POLICY: &str = r#"
tool pay.send(to: string, amount: int) { resource to; }
grant pay: pay.send on glob "*@example.com" quota 1000000000;
"#;

/// The figures of one run.
#[derive(serde::Serialize)]
pub struct Figures {
    pub clients: usize,
    pub decisions_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub decisions: usize,
    pub seconds: f64,
    pub commits: u64,
    pub records_per_commit: f64,
    /// `postgres` with `AGENRA_BENCH_PG` (absent: the embedded store).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<&'static str>,
    /// Gateways (sharing the PostgreSQL store; 1 on the embedded store).
    pub replicas: usize,
    /// Sessions the calls were spread over.
    pub sessions: usize,
    /// Time each decision's transaction waited for the store's head lock
    /// (summed over decisions, divided by decisions; 0 on the embedded
    /// store, whose one writer holds the file).
    pub lock_wait_ms: f64,
}

/// What to run (`agenra bench serve`'s flags).
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Client threads.
    pub clients: usize,
    /// Measured seconds.
    pub seconds: f64,
    /// Sessions (default: one per client).
    pub sessions: Option<usize>,
    /// A PostgreSQL server (default: `AGENRA_BENCH_PG`).
    pub pg: Option<String>,
    /// Replicas on it (default: `AGENRA_BENCH_REPLICAS`, else 1).
    pub replicas: Option<usize>,
    /// On PostgreSQL: the log partitioned by session (`--partitioned`).
    pub partitioned: bool,
}

/// The PostgreSQL server and replica count: the flags, else the
/// environment (`AGENRA_BENCH_PG`, `AGENRA_BENCH_REPLICAS`).
fn pg_setup(o: &Options) -> Result<Option<(String, usize)>, String> {
    let url = o.pg.clone().or_else(|| {
        std::env::var("AGENRA_BENCH_PG")
            .ok()
            .filter(|u| !u.is_empty())
    });
    let Some(url) = url else {
        if o.replicas.is_some_and(|n| n != 1) {
            return Err("--replicas needs --pg (replicas share a PostgreSQL store)".into());
        }
        return Ok(None);
    };
    let replicas = match (o.replicas, std::env::var("AGENRA_BENCH_REPLICAS")) {
        (Some(n), _) => Some(n)
            .filter(|n| (1..=8).contains(n))
            .ok_or_else(|| format!("--replicas {n}: give 1 to 8"))?,
        (None, Ok(n)) => n
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=8).contains(n))
            .ok_or_else(|| format!("AGENRA_BENCH_REPLICAS={n}: give 1 to 8"))?,
        (None, Err(_)) => 1,
    };
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let name = format!("agenra_bench_{}_{millis}", std::process::id());
    let db = agenra_store::create_database(&url, &name).map_err(|e| e.to_string())?;
    Ok(Some((db, replicas)))
}

/// Client `index` of `clients` sends its calls round-robin to the
/// sessions `index`, `index + clients`, … below `sessions` (or to session
/// `index % sessions` when there are fewer sessions than clients).
fn client_loop(
    addr: std::net::SocketAddr,
    token: &str,
    (index, clients, sessions): (usize, usize, usize),
    warmup_until: Instant,
    until: Instant,
) -> std::io::Result<Vec<Duration>> {
    let mut c = Client::connect(addr)?.with_token(token);
    let mine: Vec<String> = if sessions >= clients {
        (index..sessions)
            .step_by(clients)
            .map(|s| format!("bench-{s}"))
            .collect()
    } else {
        vec![format!("bench-{}", index % sessions)]
    };
    for session in &mine {
        let (status, body) = c.post(
            "/v1/sessions",
            &serde_json::json!({"session": session, "agent": "bench"}),
        )?;
        if status >= 300 {
            return Err(std::io::Error::other(format!(
                "opening a session: {status} {body}"
            )));
        }
    }
    let mut latencies = Vec::with_capacity(100_000);
    let mut n = 0u64;
    loop {
        let now = Instant::now();
        if now >= until {
            break;
        }
        n += 1;
        let session = &mine[(n as usize) % mine.len()];
        let body = format!(
            r#"{{"session":"{session}","call":{{"id":"c{index}-{n}","tool":"pay.send","args":{{"to":"bob@example.com","amount":{n}}}}}}}"#
        );
        let start = Instant::now();
        let (status, answer) = c.request("POST", "/v1/authorize", body.as_bytes())?;
        let took = start.elapsed();
        const ALLOW: &[u8] = b"\"decision\":\"ALLOW\"";
        if status != 200 || !answer.windows(ALLOW.len()).any(|w| w == ALLOW) {
            return Err(std::io::Error::other(format!(
                "call c{n}: {status} {}",
                String::from_utf8_lossy(&answer)
            )));
        }
        if start >= warmup_until {
            latencies.push(took);
        }
    }
    Ok(latencies)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)].as_secs_f64() * 1e3
}

/// Runs the benchmark: `clients` threads for `seconds` (after a warm-up of
/// half a second).
pub fn measure(o: &Options) -> Result<Figures, String> {
    let (clients, seconds) = (o.clients.max(1), o.seconds);
    let sessions = o.sessions.unwrap_or(clients).max(1);
    let dir = std::env::temp_dir().join(format!("agenra-bench-serve-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let store = dir.join("store.redb");
    let result = (|| {
        let compiled = agenra::compile(POLICY, "bench").map_err(|e| e.to_string())?;
        let pg = pg_setup(o)?;
        // Authentication on, as in production: an agent credential.
        let tokens = dir.join("tokens.json");
        let mut creds = Credentials::load_or_empty(&tokens).map_err(|e| e.to_string())?;
        let token = creds
            .add("bench", Role::Agent, vec!["default".into()])
            .map_err(|e| e.to_string())?;
        creds.save(&tokens).map_err(|e| e.to_string())?;
        let perimeter = Arc::new(Perimeter::tokens(tokens, Vec::new()).map_err(|e| e.to_string())?);
        let mut servers = Vec::new();
        for _ in 0..pg.as_ref().map_or(1, |p| p.1) {
            let gateway = match &pg {
                Some((url, _)) if o.partitioned => Gateway::open_parts(
                    agenra_store::PartLog::open(Box::new(
                        agenra_store::PgParts::open(url).map_err(|e| e.to_string())?,
                    )),
                    compiled.policy.clone(),
                    "bench",
                    false,
                ),
                _ => {
                    let log = match &pg {
                        Some((url, _)) => agenra_store::Log::open_pg(url),
                        None => agenra_store::Log::open_redb(&store),
                    }
                    .map_err(|e| e.to_string())?;
                    Gateway::open(log, compiled.policy.clone(), "bench", false)
                }
            }
            .map_err(|e| e.to_string())?;
            let server = Server::spawn(Arc::new(gateway), Arc::clone(&perimeter), "127.0.0.1:0")
                .map_err(|e| e.to_string())?;
            servers.push(server);
        }
        let addrs: Vec<_> = servers.iter().map(Server::addr).collect();
        let stats = |servers: &[Server]| {
            servers.iter().fold((0, 0, 0), |(c, r, w), s| {
                let st = s.gateway().store_stats();
                (c + st.commits, r + st.records, w + st.lock_wait_ns)
            })
        };
        let start = Instant::now();
        let warmup_until = start + Duration::from_millis(500);
        let until = warmup_until + Duration::from_secs_f64(seconds);
        let before = stats(&servers);
        let threads: Vec<_> = (0..clients)
            .map(|i| {
                let addr = addrs[i % addrs.len()];
                let token = token.clone();
                std::thread::spawn(move || {
                    client_loop(addr, &token, (i, clients, sessions), warmup_until, until)
                })
            })
            .collect();
        let mut all = Vec::new();
        for t in threads {
            let l = t
                .join()
                .map_err(|_| "a client thread panicked".to_string())?
                .map_err(|e| format!("client: {e}"))?;
            all.extend(l);
        }
        let elapsed = (Instant::now().min(until + Duration::from_secs(1)) - warmup_until)
            .as_secs_f64()
            .max(seconds);
        let after = stats(&servers);
        for s in servers {
            s.stop();
        }
        all.sort();
        let commits = after.0 - before.0;
        let records = after.1 - before.1;
        Ok(Figures {
            clients,
            decisions_per_s: all.len() as f64 / elapsed,
            p50_ms: percentile(&all, 0.50),
            p99_ms: percentile(&all, 0.99),
            decisions: all.len(),
            seconds: elapsed,
            commits,
            records_per_commit: records as f64 / commits.max(1) as f64,
            store: pg.as_ref().map(|_| {
                if o.partitioned {
                    "postgres-partitioned"
                } else {
                    "postgres"
                }
            }),
            replicas: pg.as_ref().map_or(1, |p| p.1),
            sessions,
            lock_wait_ms: (after.2 - before.2) as f64 / 1e6 / records.max(1) as f64,
        })
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// `agenra bench serve`: the text to print (the JSON object on its last
/// line).
pub fn run(json: bool, o: &Options) -> Result<String, String> {
    let f = measure(o)?;
    let mut out = String::new();
    if !json {
        let store = match (f.store, f.replicas) {
            (Some(_), n) => format!(
                "PostgreSQL store, {n} replica{}",
                if n == 1 { "" } else { "s" }
            ),
            (None, _) => "durable redb store".to_string(),
        };
        out.push_str(&format!(
            "serve (loopback HTTP, {store}, {} clients, {} sessions, {:.1} s): {:.0} decisions/s, p50 {:.2} ms, p99 {:.2} ms; {} commits, {:.1} records per commit; {:.3} ms lock wait per decision\n",
            f.clients, f.sessions, f.seconds, f.decisions_per_s, f.p50_ms, f.p99_ms, f.commits, f.records_per_commit, f.lock_wait_ms
        ));
    }
    out.push_str(&serde_json::to_string(&f).map_err(|e| e.to_string())?);
    out.push('\n');
    Ok(out)
}
