//! `agenra-bench`: the benchmark harnesses as a binary of their own, so
//! that the counting allocator the memory figures need never ships in the
//! `agenra` binary (`serve`, `monitor` and `mcp-proxy` run on the system
//! allocator). `agenra bench ARGS` runs this binary with ARGS; both are
//! installed together (`docs/performance.md` says what each measures).

use agenra_bench::alloc::{live_bytes, Counting};
use agenra_bench::{
    bench, bench_authorizer, bench_embed, bench_mcp, bench_memory, bench_scale, bench_serve,
    bench_verify,
};
use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;

/// The `agenra` binary's allocator (mimalloc), counted.
#[global_allocator]
static ALLOCATOR: Counting<mimalloc::MiMalloc> = Counting(mimalloc::MiMalloc);

#[derive(Parser)]
#[command(
    name = "agenra bench",
    bin_name = "agenra bench",
    version,
    about = "Benchmarks of Agenra (docs/performance.md)"
)]
struct Cli {
    #[command(subcommand)]
    which: BenchKind,
}

#[derive(Subcommand)]
enum BenchKind {
    /// The latency `agenra mcp-proxy` adds to a `tools/call` (a minimal echo server asked
    /// directly and through the proxy): one JSON line with `p50_ms`, `p99_ms`, `samples`.
    Mcp {
        /// Only the JSON line.
        #[arg(long)]
        json: bool,
        /// Measured calls each way (after 200 of warm-up).
        #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        samples: u64,
        /// Be the echo server (the bench starts itself with it).
        #[arg(long, hide = true)]
        echo_server: bool,
        /// Reach the proxy over MCP's streamable HTTP (`mcp-proxy --listen`), not stdio.
        #[arg(long)]
        http: bool,
    },
    /// `agenra serve` over loopback HTTP on the durable store: the JSON
    /// figures on the last line.
    Serve {
        /// Only the JSON object.
        #[arg(long)]
        json: bool,
        /// Concurrent client threads (one session and connection each).
        #[arg(long, default_value_t = 48, value_parser = clap::value_parser!(u64).range(1..=256))]
        clients: u64,
        /// Measured seconds (after half a second of warm-up).
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// Sessions the calls are spread over (default: one per client).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        sessions: Option<u64>,
        /// A PostgreSQL server to run on (a fresh database is created on it); default:
        /// `AGENRA_BENCH_PG`, else the embedded store.
        #[arg(long, value_name = "URL")]
        pg: Option<String>,
        /// Gateways sharing the PostgreSQL store (1 to 8); default: `AGENRA_BENCH_REPLICAS`,
        /// else 1.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=8))]
        replicas: Option<u64>,
        /// With --pg: the log partitioned by session (`serve --partitioned-log`).
        #[arg(long, requires = "pg")]
        partitioned: bool,
    },
    /// `agenra verify` on a generated policy (50 grants, 20 flow rules, 10
    /// path rules) at K = 5: the JSON summary on the last line.
    Verify {
        /// One JSON object per property, then the summary.
        #[arg(long)]
        json: bool,
    },
    /// The SMT authorizer on generated graphs of 1-50 nodes, each decided
    /// 5 times: per size bucket median/p95/max ms, and the native median,
    /// as one JSON object on the last line.
    Authorizer {
        /// Only the JSON object.
        #[arg(long)]
        json: bool,
    },
    /// The certify corpus (tests/certify-corpus): the summary object last.
    Certify {
        /// One JSON object per revision, then the summary.
        #[arg(long)]
        json: bool,
        /// The corpus directory (with `ground-truth.json`).
        #[arg(long)]
        corpus: Option<PathBuf>,
    },
    /// A synthetic monitor workload (p50/p95/p99 ns per authorize).
    Monitor {
        /// One JSON object with the figures (the same keys for every workload).
        #[arg(long)]
        json: bool,
        /// Timed authorize calls.
        #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
        samples: u64,
        /// `standard`: tools of 2 parameters (the figures' reference);
        /// `wide`: 18 parameters of mixed types, per-argument sinks and
        /// lineage, provenance by value.
        #[arg(long, value_enum, default_value_t = WorkloadArg::Standard)]
        workload: WorkloadArg,
    },
    /// The embedding API on the 18-parameter workload: p50/p99 per typed
    /// decision, session creation, bytes per call of a compact session.
    Embed {
        /// One JSON object with the figures on the last line.
        #[arg(long)]
        json: bool,
        /// Timed decisions.
        #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
        samples: u64,
    },
    /// The gateway library in this process on an embedded store: heap and
    /// RSS bytes per decided call (each followed by its result) over many
    /// sessions, and the time a restart takes to recover them.
    Memory {
        /// Only the JSON object.
        #[arg(long)]
        json: bool,
        /// Sessions the calls are spread over.
        #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
        sessions: u64,
        /// Decided calls.
        #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
        decisions: u64,
        /// Graph nodes each session keeps (`serve --compact-window`; 0:
        /// the whole graph). Default: serve's.
        #[arg(long)]
        window: Option<u64>,
        /// Events between two snapshots of a session (`serve
        /// --snapshot-every`; 0: none). Default: serve's.
        #[arg(long)]
        snapshot_every: Option<u64>,
    },
    /// How costs grow: µs per event and peak RSS for sessions of 10^3 to
    /// 10^5 events (10^6 with --full), with and without flow DENYs, with
    /// normal and colliding call ids, on 3 and 10^4 grants, and checking a
    /// 10^5-rule policy. Each measurement runs in its own process.
    Scale {
        /// One JSON object per measurement, then the summary on the last line.
        #[arg(long)]
        json: bool,
        /// Go up to sessions of 10^6 events.
        #[arg(long)]
        full: bool,
        /// Run one measurement in this process and print it (used by the
        /// parent run).
        #[arg(long, hide = true)]
        one: Option<String>,
        #[arg(long, hide = true, default_value_t = 1000)]
        events: u64,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum WorkloadArg {
    Standard,
    Wide,
    /// The minimal 18-parameter workload of the name-resolution figure.
    #[value(hide = true)]
    Params18,
    /// The standard workload with every grant on an amount budget.
    Budgets,
    /// The wide workload with token tests on message bodies and callback URLs.
    WideTokens,
}

impl From<WorkloadArg> for bench::Workload {
    fn from(w: WorkloadArg) -> bench::Workload {
        match w {
            WorkloadArg::Standard => bench::Workload::Standard,
            WorkloadArg::Wide => bench::Workload::Wide,
            WorkloadArg::Params18 => bench::Workload::Params18,
            WorkloadArg::Budgets => bench::Workload::Budgets,
            WorkloadArg::WideTokens => bench::Workload::WideTokens,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.which {
        BenchKind::Mcp {
            echo_server: true, ..
        } => bench_mcp::echo_server(),
        BenchKind::Mcp {
            json,
            samples,
            http,
            ..
        } => mcp(json, samples as usize, http),
        BenchKind::Serve {
            json,
            clients,
            seconds,
            sessions,
            pg,
            replicas,
            partitioned,
        } => bench_serve::run(
            json,
            &bench_serve::Options {
                clients: clients as usize,
                seconds,
                sessions: sessions.map(|n| n as usize),
                pg,
                replicas: replicas.map(|n| n as usize),
                partitioned,
            },
        )
        .map(print),
        BenchKind::Monitor {
            json,
            samples,
            workload,
        } => monitor(workload.into(), json, samples as usize),
        BenchKind::Embed { json, samples } => embed(json, samples as usize),
        BenchKind::Scale {
            json,
            full,
            one,
            events,
        } => scale(json, full, one.as_deref(), events),
        BenchKind::Memory {
            json,
            sessions,
            decisions,
            window,
            snapshot_every,
        } => bench_memory::run_bench(
            json,
            (sessions, decisions),
            (window, snapshot_every),
            &live_bytes,
        )
        .map(print),
        BenchKind::Authorizer { json } => bench_authorizer::run_bench(json).map(print),
        BenchKind::Verify { json } => bench_verify::run_bench(json).map(print),
        BenchKind::Certify { json, corpus } => {
            let dir = corpus.unwrap_or_else(agenra_cli::certify::default_corpus);
            agenra_cli::certify::run_bench(&dir, json).map(|(text, _)| print(text))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("agenra bench: error: {}", message.trim_end());
            ExitCode::from(1)
        }
    }
}

/// `bench mcp`: the proxy is the `agenra` binary installed next to this
/// one, the echo server this binary.
fn mcp(json: bool, samples: usize, http: bool) -> Result<(), String> {
    let me = std::env::current_exe().map_err(|e| format!("cannot find myself: {e}"))?;
    let agenra = me.with_file_name(format!("agenra{}", std::env::consts::EXE_SUFFIX));
    bench_mcp::run_over(&agenra, &me, json, samples, http).map(print)
}

/// Writes to standard output; a reader that has gone away ends the run
/// quietly.
fn print(text: String) {
    use std::io::Write;
    if std::io::stdout().lock().write_all(text.as_bytes()).is_err() {
        std::process::exit(0);
    }
}

fn monitor(workload: bench::Workload, json: bool, samples: usize) -> Result<(), String> {
    let report =
        bench::run_workload(workload, samples, Some(&live_bytes)).map_err(|e| e.to_string())?;
    if json {
        print(serde_json::to_string(&report).map_err(|e| e.to_string())? + "\n");
        return Ok(());
    }
    print(format!(
        "monitor workload `{}`: {} parameters per tool, {} grants, {} flow rules, {} path rules, session preloaded with {} events\n\
         authorize: p50 {} ns, p95 {} ns, p99 {} ns, mean {} ns ({} samples)\n\
         memory: {:.1} bytes per session event\n",
        report.workload,
        workload.params(),
        report.grants,
        report.flow_rules,
        report.path_rules,
        report.preloaded_events,
        report.p50_ns,
        report.p95_ns,
        report.p99_ns,
        report.mean_ns,
        report.samples,
        report.bytes_per_event
    ));
    if let (Some(standard), Some(ratio)) = (report.standard_p50_ns, report.p50_over_standard) {
        print(format!(
            "standard workload in the same run: p50 {standard} ns ({ratio:.2}x)\n"
        ));
    }
    Ok(())
}

fn embed(json: bool, samples: usize) -> Result<(), String> {
    let r = bench_embed::run(samples, Some(&live_bytes)).map_err(|e| e.to_string())?;
    if !json {
        print(format!(
            "typed decisions (18 parameters): p50 {} ns, p99 {} ns ({} samples)\n\
             new session: {:.0} ns\n\
             compact session (window {}): {:.1} bytes per call over 10^4 calls, {:.2} over 10^6; full session: {:.1} over 10^4\n",
            r.p50_ns,
            r.p99_ns,
            r.samples,
            r.session_new_ns,
            r.compact_window,
            r.compact_bytes_per_call_1e4,
            r.compact_bytes_per_call_1e6,
            r.full_bytes_per_call_1e4
        ));
    }
    let summary = serde_json::json!({
        "p50_ns": r.p50_ns,
        "p99_ns": r.p99_ns,
        "session_new_ns": r.session_new_ns,
        "compact_bytes_per_call_1e4": r.compact_bytes_per_call_1e4,
        "compact_bytes_per_call_1e6": r.compact_bytes_per_call_1e6,
    });
    print(format!("{summary}\n"));
    Ok(())
}

fn scale(json: bool, full: bool, one: Option<&str>, events: u64) -> Result<(), String> {
    if let Some(name) = one {
        let m = bench_scale::one(name, events)?;
        print(serde_json::to_string(&m).map_err(|e| e.to_string())? + "\n");
        return Ok(());
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find myself: {e}"))?;
    let mut rows = Vec::new();
    if !json {
        print(format!(
            "{:<14} {:>9} {:>10} {:>10} {:>9}\n",
            "measurement", "events", "seconds", "µs/event", "peak MB"
        ));
    }
    for (name, n) in bench_scale::plan(if full { 1_000_000 } else { 100_000 }) {
        let out = std::process::Command::new(&exe)
            .args(["scale", "--one", name, "--events", &n.to_string()])
            .output()
            .map_err(|e| format!("cannot run a measurement: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "measurement {name} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let m: bench_scale::Measure =
            serde_json::from_slice(&out.stdout).map_err(|e| format!("measurement {name}: {e}"))?;
        if json {
            print(serde_json::to_string(&m).map_err(|e| e.to_string())? + "\n");
        } else {
            print(format!(
                "{:<14} {:>9} {:>10.3} {:>10.2} {:>9.1}\n",
                m.name, m.events, m.seconds, m.us_per_event, m.peak_rss_mb
            ));
        }
        rows.push(m);
    }
    let summary = bench_scale::summarize(&rows);
    print(serde_json::to_string(&summary).map_err(|e| e.to_string())? + "\n");
    Ok(())
}
