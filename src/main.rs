//! The `agenra` command line.

mod cmd_audit;
mod cmd_ir;
mod cmd_serve;
mod cmd_token;
mod mcp;
mod mcp_init;
use agenra::replay::{Record, ReplayError, Stepper};
use agenra::stream;
use agenra::trace::{parse_trace, read_trace, TraceEvent};
use agenra::Sessions;
use agenra_cli::render;
use agenra_core::hash::{content_hash, to_cbor, to_json};
use clap::{Parser, Subcommand, ValueEnum};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// mimalloc, as `agenra-bench` (whose figures must describe this binary)
/// uses it under its counting wrapper.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Writes to standard output; when the reader has gone away
/// (`agenra replay ... | head -1`) the process ends quietly instead of
/// panicking like `print!` does.
fn out(args: std::fmt::Arguments) {
    use std::io::Write;
    if let Err(e) = std::io::stdout().lock().write_fmt(args) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("agenra: error: cannot write to standard output: {e}");
        std::process::exit(1);
    }
}

macro_rules! print {
    ($($t:tt)*) => { out(format_args!($($t)*)) };
}

macro_rules! println {
    ($($t:tt)*) => { out(format_args!("{}\n", format_args!($($t)*))) };
}

#[derive(Parser)]
#[command(
    name = "agenra",
    version,
    about = "Authorization for LLM agents: check policies, replay traces, explain decisions"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check policy files: exit 0 when all are valid, 1 with diagnostics otherwise.
    Check {
        /// Policy files: `.agr`, or compiled policies (`.json`, `.cbor`).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Treat warnings as errors.
        #[arg(long)]
        deny_warnings: bool,
    },
    /// Rewrite policy files in the canonical format.
    Fmt {
        /// `.agr` files; each is handled even when another does not parse.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Change nothing; exit 1 if a file is not formatted.
        #[arg(long)]
        check: bool,
        /// Print the formatted policy instead of rewriting the file.
        #[arg(long, conflicts_with = "check")]
        stdout: bool,
    },
    /// Print the compiled policy (JSON, or CBOR bytes) and its content hash.
    Compile {
        /// The `.agr` file.
        file: PathBuf,
        /// The encoding: canonical JSON, or CBOR (what the content hash is of).
        #[arg(long, value_enum, default_value_t = Format::Json)]
        format: Format,
        /// Write to this file instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Run a trace of events (docs/events.md) through the monitor.
    Replay {
        /// The policy: a `.agr` file, or a compiled policy (`.json`, `.cbor`).
        #[arg(long)]
        policy: PathBuf,
        /// A trace: one JSON event per line (docs/events.md).
        trace: PathBuf,
        /// One JSON object per event.
        #[arg(long)]
        json: bool,
        /// native, smt, or both (cross-checked: any difference is a DENY
        /// `engine-disagreement`); docs/smt.md.
        #[arg(long, default_value = "native")]
        engine: agenra::engine::Engine,
    },
    /// Streaming sidecar: events as JSON lines on stdin, one JSON answer per
    /// event on stdout, flushed at once; bad events get an error object.
    Monitor {
        /// The policy: a `.agr` file, or a compiled policy (`.json`, `.cbor`).
        #[arg(long)]
        policy: PathBuf,
        /// Append each applied event's line to this file (a replayable trace).
        #[arg(long)]
        trace_out: Option<PathBuf>,
        /// native, smt, or both (cross-checked: any difference is a DENY
        /// `engine-disagreement`); docs/smt.md.
        #[arg(long, default_value = "native")]
        engine: agenra::engine::Engine,
    },
    /// Why event N of a trace got its decision.
    Explain {
        /// The policy: a `.agr` file, or a compiled policy (`.json`, `.cbor`).
        #[arg(long)]
        policy: PathBuf,
        /// A trace: one JSON event per line (docs/events.md).
        trace: PathBuf,
        /// The event's 1-based position in the trace (as `replay` numbers it).
        #[arg(long)]
        seq: u64,
    },
    /// Benchmarks (`agenra bench --help`; docs/performance.md): runs the
    /// `agenra-bench` binary installed next to this one.
    #[command(disable_help_flag = true)]
    Bench {
        /// `monitor`, `embed`, `scale`, `serve`, `authorizer`, `verify` or
        /// `certify`, and their flags.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// Does NEW preserve every workflow OLD admits? Exit 0 certified, 2 not
    /// preserved, 3 unknown (docs/certify.md).
    Certify {
        /// The deployed policy (`.agr`, or compiled `.json`/`.cbor`).
        old: PathBuf,
        /// The revision.
        new: PathBuf,
        /// One JSON object.
        #[arg(long)]
        json: bool,
        /// Write the certificate here (CBOR if the name ends in `.cbor`, else JSON).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Write the certificate as a Lean file that `lake build` checks (docs/lean.md).
        #[arg(long = "emit-lean")]
        emit_lean: Option<PathBuf>,
    },
    /// The HTTP decision API on the durable store (docs/http-api.md).
    Serve(cmd_serve::ServeArgs),
    /// Credentials for `serve` and `mcp-proxy`: agent, approver, admin (docs/http-api.md).
    Token {
        #[command(subcommand)]
        which: cmd_token::TokenCmd,
    },
    /// Stdio MCP proxy: decides every `tools/call` before the server sees it (docs/mcp-proxy.md).
    McpProxy {
        /// The policy (`.agr`, or compiled `.json`/`.cbor`).
        #[arg(long)]
        policy: PathBuf,
        /// What a PAUSE does: `error` answers it at once with a tool error
        /// asking for approval; `wait` holds the call until it is approved
        /// or rejected through the approval endpoints, or times out.
        #[arg(long, value_enum, default_value = "error")]
        on_pause: mcp::OnPause,
        /// Where `--on-pause wait` serves the approval endpoints of the HTTP
        /// API (`127.0.0.1:8080`; port 0 picks a free one).
        #[arg(long, value_name = "ADDR")]
        approvals_listen: Option<String>,
        /// Seconds a paused call waits before the proxy rejects it
        /// (`--on-pause wait`; default 300).
        #[arg(long, value_name = "SECS")]
        pause_timeout: Option<u64>,
        /// The credentials file (`agenra token add`) for `--on-pause wait`: approving or
        /// rejecting needs an approver's token for `--tenant` (the agent can reach a loopback
        /// port, so the endpoints are never open by default).
        #[arg(long, value_name = "FILE")]
        tokens: Option<PathBuf>,
        /// With `--on-pause wait`: serve the approval endpoints without credentials (anyone who
        /// reaches the port, the agent included, may approve). Local experiments only.
        #[arg(long)]
        insecure_no_auth: bool,
        /// Keep the session durable, as `agenra serve` does: the embedded store's file
        /// (created if missing) or `postgres://user@host:port/db`. A proxy restarted on
        /// the same store resumes its session: units spent stay spent; calls its last run
        /// left running are reported `unknown`, calls left waiting for approval are
        /// rejected (docs/mcp-proxy.md). Without it the session lives in memory.
        #[arg(long, value_name = "PATH|URL")]
        store: Option<PathBuf>,
        /// The session's tenant (its `quota N per tenant` pools are shared with the
        /// tenant's other sessions in the store).
        #[arg(long, default_value = mcp::DEFAULT_TENANT)]
        tenant: String,
        /// The session's id: a proxy restarted with the same store and id resumes it.
        /// One proxy at a time per session; give each concurrent proxy its own.
        #[arg(long, default_value = mcp::DEFAULT_SESSION)]
        session: String,
        /// Seconds a call the client cancelled (`notifications/cancelled`) waits for the
        /// server's answer before it is reported `unknown` (default 30; its units stay
        /// spent either way).
        #[arg(long, value_name = "SECS")]
        cancel_timeout: Option<u64>,
        /// Forward `tools/list` answers unchanged (by default they list only the tools the
        /// policy grants).
        #[arg(long)]
        show_all_tools: bool,
        /// Front several MCP servers for one session: a JSON file
        /// `{"servers": {"NAME": {"command": [PROGRAM, ARGS...]}}}`; the client sees their
        /// tools as `NAME.TOOL` (docs/mcp-proxy.md, "Several servers, one session").
        #[arg(long, value_name = "FILE", conflicts_with = "server")]
        servers: Option<PathBuf>,
        /// Serve the client MCP's streamable HTTP transport at `http://ADDR/mcp` instead of
        /// stdio (docs/mcp-proxy.md, "Streamable HTTP"); a non-loopback ADDR needs --http-token.
        #[arg(long, value_name = "ADDR", conflicts_with = "servers")]
        listen: Option<String>,
        /// With --listen: a file holding the bearer token every HTTP request must carry.
        #[arg(long, value_name = "FILE")]
        http_token: Option<PathBuf>,
        /// Reach the MCP server over streamable HTTP at this URL (`http://HOST:PORT/mcp`)
        /// instead of starting it (no server command then).
        #[arg(long, value_name = "URL", conflicts_with_all = ["servers", "server"])]
        upstream: Option<String>,
        /// The MCP server's command and its arguments, after `--`.
        #[arg(last = true, required_unless_present_any = ["servers", "upstream"])]
        server: Vec<String>,
    },
    /// A starting policy for an MCP server: `tool` declarations from its `tools/list`
    /// input schemas, with TODOs for labels, sinks and grants (docs/mcp-proxy.md).
    McpInit {
        /// Write the policy here instead of standard output.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// The MCP server's command and its arguments, after `--`.
        #[arg(last = true, required = true)]
        server: Vec<String>,
    },
    /// The hash-chained audit log: verify, export, report (docs/store.md).
    Audit {
        #[command(subcommand)]
        which: cmd_audit::AuditCmd,
    },
    /// The Permission IR of a task: validate, produce, lower (docs/permission-ir.md).
    Ir {
        #[command(subcommand)]
        which: cmd_ir::IrCommand,
    },
    /// Re-check a certificate written by `certify --out` (exit 0 when it holds).
    CheckCert {
        old: PathBuf,
        new: PathBuf,
        cert: PathBuf,
    },
    /// Bounded SMT checks of one policy (docs/verification.md). Exit 0 when
    /// every property holds, 2 violated, 3 unknown.
    Verify {
        /// The policy (`.agr`, or compiled `.json`/`.cbor`).
        policy: PathBuf,
        /// The number of calls in a bounded trace.
        #[arg(long, default_value_t = 5)]
        bound: usize,
        /// Check only this property (repeatable; default: all seven).
        #[arg(long)]
        property: Vec<String>,
        /// Per Z3 query, in milliseconds.
        #[arg(long, default_value_t = 10_000)]
        timeout_ms: u32,
        /// Write each counterexample trace here.
        #[arg(long)]
        witness_dir: Option<PathBuf>,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Decide the last call of a trace with the native engine, the Z3
    /// authorizer or both (docs/smt.md): the decision with the granted
    /// capabilities or the counterexample.
    Authorize {
        /// The policy (`.agr`, or compiled `.json`/`.cbor`).
        #[arg(long)]
        policy: PathBuf,
        /// A Permission IR (docs/permission-ir.md): the session runs under
        /// the policy narrowed by the task, its task event first.
        #[arg(long)]
        ir: Option<PathBuf>,
        /// A trace (docs/events.md) whose last event is the call to decide.
        trace: PathBuf,
        /// native, smt, or both (cross-checked: any difference is a DENY).
        #[arg(long, default_value = "smt")]
        engine: agenra::engine::Engine,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Draw the session graph of a trace (Graphviz DOT or JSON), with the
    /// violating path of a denied call highlighted.
    Graph {
        /// The policy (`.agr`, or compiled `.json`/`.cbor`).
        #[arg(long)]
        policy: PathBuf,
        /// A Permission IR (docs/permission-ir.md): the graph under the
        /// policy narrowed by the task, its task event first.
        #[arg(long)]
        ir: Option<PathBuf>,
        /// A trace (docs/events.md).
        trace: PathBuf,
        /// Draw the graph as of event N (1-based; default: the last event).
        #[arg(long)]
        seq: Option<usize>,
        /// dot or json.
        #[arg(long, value_enum, default_value_t = GraphFormat::Dot)]
        format: GraphFormat,
    },
    /// Compare two policies: equivalent, more or less permissive, or
    /// incomparable, with witnesses. Exit 0 equivalent, 2 differ, 3 unknown.
    Diff {
        old: PathBuf,
        new: PathBuf,
        /// Longest witness, in calls.
        #[arg(long, default_value_t = 5)]
        bound: usize,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum GraphFormat {
    Dot,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Json,
    Cbor,
}

/// An error already shown to the user; carries the exit code.
struct Failed(u8);

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => cmd_serve::run(args),
        Command::Token { which } => cmd_token::run(which),
        Command::McpProxy {
            policy,
            on_pause,
            approvals_listen,
            pause_timeout,
            tokens,
            insecure_no_auth,
            store,
            tenant,
            session,
            cancel_timeout,
            show_all_tools,
            servers,
            listen,
            http_token,
            upstream,
            server,
        } => {
            let pause = mcp::PauseOptions {
                on_pause,
                approvals_listen,
                pause_timeout,
                tokens,
                insecure_no_auth,
            };
            let store = mcp::StoreOptions {
                store,
                tenant,
                session,
            };
            let options = mcp::ProxyOptions {
                cancel_timeout,
                show_all_tools,
                listen,
                http_token,
                upstream,
            };
            match servers {
                Some(file) => mcp::run_multi(&policy, &file, &pause, &store, &options),
                None => mcp::run(&policy, &server, &pause, &store, &options),
            }
        }
        Command::McpInit { out, server } => mcp_init::run(&server, out.as_deref()),
        Command::Audit { which } => cmd_audit::run(which),
        Command::Ir { which } => cmd_ir::run(which),
        Command::Bench { args } => run_bench(&args),
        Command::Check {
            files,
            deny_warnings,
        } => check(&files, deny_warnings),
        Command::Fmt {
            files,
            check,
            stdout,
        } => fmt(&files, check, stdout),
        Command::Compile {
            file,
            format,
            output,
        } => compile(&file, format, output.as_deref()),
        Command::Replay {
            policy,
            trace,
            json,
            engine: agenra::engine::Engine::Native,
        } => replay_cmd(&policy, &trace, json),
        Command::Replay {
            policy,
            trace,
            json,
            engine,
        } => agenra_cli::engine_replay::run_replay(&policy, &trace, engine, json).map_err(fail),
        Command::Monitor {
            policy,
            trace_out,
            engine: agenra::engine::Engine::Native,
        } => monitor(&policy, trace_out.as_deref()),
        Command::Monitor {
            policy,
            trace_out,
            engine,
        } => agenra_cli::engine_replay::run_monitor(&policy, trace_out.as_deref(), engine)
            .map_err(fail),
        Command::Explain { policy, trace, seq } => explain(&policy, &trace, seq),
        Command::Certify {
            old,
            new,
            json,
            out,
            emit_lean,
        } => certify_cmd(&old, &new, json, out.as_deref(), emit_lean.as_deref()),
        Command::CheckCert { old, new, cert } => {
            agenra_cli::certify::run_check_cert(&old, &new, &cert)
                .map(|line| print!("{line}"))
                .map_err(|e| {
                    eprintln!("agenra: error: {}", e.trim_end());
                    Failed(1)
                })
        }
        Command::Verify {
            policy,
            bound,
            property,
            timeout_ms,
            witness_dir,
            json,
        } => coded(agenra_cli::cmd_verify::run_verify(
            &policy,
            bound,
            &property,
            timeout_ms,
            witness_dir.as_deref(),
            json,
        )),
        Command::Authorize {
            policy,
            ir,
            trace,
            engine,
            json,
        } => coded(
            agenra_cli::cmd_authorize::run_authorize(&policy, ir.as_deref(), &trace, engine, json)
                .map(|t| (t, 0)),
        ),
        Command::Graph {
            policy,
            ir,
            trace,
            seq,
            format,
        } => coded(
            agenra_cli::cmd_authorize::run_graph(
                &policy,
                ir.as_deref(),
                &trace,
                seq,
                matches!(format, GraphFormat::Dot),
            )
            .map(|t| (t, 0)),
        ),
        Command::Diff {
            old,
            new,
            bound,
            json,
        } => coded(agenra_cli::cmd_verify::run_diff(&old, &new, bound, json)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failed(code)) => ExitCode::from(code),
    }
}

/// Prints one error line; control characters in it (from events or file
/// names) are escaped.
fn fail(message: impl std::fmt::Display) -> Failed {
    let message = agenra::trace::shorten(&message.to_string());
    eprintln!("agenra: error: {}", render::escape(&message));
    Failed(1)
}

fn read(path: &Path) -> Result<String, Failed> {
    std::fs::read_to_string(path).map_err(|e| fail(format!("{}: cannot read: {e}", path.display())))
}

/// Reads a compiled policy (`agenra compile` output: `.json` or `.cbor`)
/// and checks every reference in it, as `Monitor::new` does.
fn load_compiled(path: &Path, cbor: bool) -> Result<agenra_core::Policy, Failed> {
    let decoded = if cbor {
        let bytes = std::fs::read(path)
            .map_err(|e| fail(format!("{}: cannot read: {e}", path.display())))?;
        agenra_core::hash::from_cbor::<agenra_core::Policy>(&bytes)
    } else {
        agenra_core::hash::from_json::<agenra_core::Policy>(&read(path)?)
    };
    let policy =
        decoded.map_err(|e| fail(format!("{}: not a compiled policy: {e}", path.display())))?;
    agenra_core::validate::validate(&policy)
        .map_err(|e| fail(format!("{}: invalid compiled policy: {e}", path.display())))?;
    Ok(policy)
}

/// Compiles a policy file, printing warnings; errors are printed in full.
/// A `.json` or `.cbor` file is read as a compiled policy.
fn load_policy(path: &Path, quiet_warnings: bool) -> Result<(agenra_core::Policy, usize), Failed> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("json") => return load_compiled(path, false).map(|p| (p, 0)),
        Some("cbor") => return load_compiled(path, true).map(|p| (p, 0)),
        _ => {}
    }
    let source = read(path)?;
    let name = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("policy");
    let file = path.display().to_string();
    match agenra_policy::compile(&source, name) {
        Ok(compiled) => {
            if !quiet_warnings {
                let lines = agenra_policy::diagnostic::Lines::new(&source);
                for w in &compiled.warnings {
                    eprint!("{}", w.render_with(&file, &source, &lines));
                }
            }
            Ok((compiled.policy, compiled.warnings.len()))
        }
        Err(e) => {
            eprint!("{}", e.render(&file, &source));
            Err(Failed(1))
        }
    }
}

fn sessions_for(path: &Path) -> Result<Sessions, Failed> {
    let (policy, _) = load_policy(path, true)?;
    Sessions::new(policy).map_err(|e| fail(format!("{}: {e}", path.display())))
}

fn check(files: &[PathBuf], deny_warnings: bool) -> Result<(), Failed> {
    let mut failed = false;
    for f in files {
        match load_policy(f, false) {
            Ok((_, warnings)) if deny_warnings && warnings > 0 => failed = true,
            Ok((policy, warnings)) => println!(
                "{}: ok ({} tools, {} grants{}, {} rules{})",
                f.display(),
                policy.tools.len(),
                policy.grants.len(),
                match policy.shared_grants.len() {
                    0 => String::new(),
                    n => format!(" ({n} shared by the tenant)"),
                },
                policy.flow_rules.len()
                    + policy.path_rules.len()
                    + policy.obligations.len()
                    + policy.call_rules.len()
                    + policy.receive_rules.len(),
                if warnings > 0 {
                    format!(", {warnings} warnings")
                } else {
                    String::new()
                }
            ),
            Err(_) => failed = true,
        }
    }
    if failed {
        Err(Failed(1))
    } else {
        Ok(())
    }
}

fn fmt(files: &[PathBuf], check: bool, stdout: bool) -> Result<(), Failed> {
    // Every file is handled; a file that cannot be read or parsed is
    // reported and the others still are.
    let mut unformatted = false;
    let mut broken = false;
    for f in files {
        let Ok(source) = read(f) else {
            broken = true;
            continue;
        };
        let formatted = match agenra_policy::format(&source) {
            Ok(text) => text,
            Err(e) => {
                eprint!("{}", e.render(&f.display().to_string(), &source));
                broken = true;
                continue;
            }
        };
        if stdout {
            print!("{formatted}");
        } else if check {
            if formatted != source {
                eprintln!(
                    "{}: not formatted (run `agenra fmt {}`)",
                    f.display(),
                    f.display()
                );
                unformatted = true;
            }
        } else if formatted != source {
            match std::fs::write(f, &formatted) {
                Ok(()) => eprintln!("formatted {}", f.display()),
                Err(e) => {
                    fail(format!("{}: cannot write: {e}", f.display()));
                    broken = true;
                }
            }
        }
    }
    if unformatted || broken {
        Err(Failed(1))
    } else {
        Ok(())
    }
}

fn compile(file: &Path, format: Format, output: Option<&Path>) -> Result<(), Failed> {
    let (policy, _) = load_policy(file, false)?;
    let hash = content_hash(&policy).map_err(fail)?;
    let bytes = match format {
        Format::Json => {
            let mut text = to_json(&policy).map_err(fail)?;
            text.push('\n');
            text.into_bytes()
        }
        Format::Cbor => to_cbor(&policy).map_err(fail)?,
    };
    match output {
        Some(out) => {
            std::fs::write(out, &bytes)
                .map_err(|e| fail(format!("{}: cannot write: {e}", out.display())))?;
            eprintln!("{}: {hash}", out.display());
        }
        None => {
            use std::io::Write;
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(&bytes)
                .map_err(|e| fail(format!("cannot write: {e}")))?;
            eprintln!("{hash}");
        }
    }
    Ok(())
}

/// `replay --json` streams: each line is read, decided and printed before
/// the next is read, so memory does not grow with the trace (beyond the
/// session itself).
/// Runs a trace file line by line, handing each record to `sink` as it is
/// produced; stops at the first bad event. Nothing holds the whole trace.
fn replay_streaming(
    stepper: &mut Stepper,
    trace: &Path,
    mut sink: impl FnMut(&Stepper, Record) -> Result<(), Failed>,
) -> Result<(), Failed> {
    use std::io::BufRead;
    let file = std::fs::File::open(trace)
        .map_err(|e| fail(format!("{}: cannot read: {e}", trace.display())))?;
    let reader = std::io::BufReader::new(file);
    for (i, line) in reader.lines().enumerate() {
        let line = line.map_err(|e| fail(format!("{}: cannot read: {e}", trace.display())))?;
        // A byte order mark before the first event is not part of it.
        let text = if i == 0 {
            line.trim_start_matches('\u{feff}')
        } else {
            &line
        };
        match stepper.step_line(text) {
            None => {}
            Some(Ok(record)) => sink(stepper, record)?,
            Some(Err(source)) => {
                return Err(fail(ReplayError {
                    path: trace.to_path_buf(),
                    line: i + 1,
                    applied: stepper.applied() as usize,
                    source,
                }))
            }
        }
    }
    Ok(())
}

/// Records per block of the human table (its columns are sized per block).
const TABLE_BLOCK: usize = 4096;

fn replay_cmd(policy: &Path, trace: &Path, json: bool) -> Result<(), Failed> {
    let mut stepper = Stepper::new(sessions_for(policy)?);
    if json {
        return replay_streaming(&mut stepper, trace, |_, record| {
            println!("{}", serde_json::to_string(&record).map_err(fail)?);
            Ok(())
        });
    }
    let default = stepper
        .sessions()
        .get(None)
        .ok_or_else(|| fail("no default session"))?;
    println!("{}", render::policy_line(default));
    let mut table = render::Table::default();
    let mut tally = render::Tally::default();
    let mut block = Vec::with_capacity(TABLE_BLOCK);
    let outcome = replay_streaming(&mut stepper, trace, |stepper, record| {
        tally.add(&record);
        block.push(record);
        if block.len() == TABLE_BLOCK {
            print!("{}", table.block(stepper.sessions(), &block));
            block.clear();
        }
        Ok(())
    });
    print!("{}", table.block(stepper.sessions(), &block));
    println!("{}", tally.line());
    outcome
}

fn monitor(policy: &Path, trace_out: Option<&Path>) -> Result<(), Failed> {
    let mut stepper = Stepper::new(sessions_for(policy)?);
    let mut file = match trace_out {
        Some(path) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| fail(format!("{}: cannot open: {e}", path.display())))?,
        ),
        None => None,
    };
    let input = std::io::stdin().lock();
    let output = std::io::stdout().lock();
    let trace_out = file.as_mut().map(|f| f as &mut dyn std::io::Write);
    stream::run(&mut stepper, input, output, trace_out).map_err(fail)?;
    Ok(())
}

fn explain(policy: &Path, trace: &Path, seq: u64) -> Result<(), Failed> {
    let mut stepper = Stepper::new(sessions_for(policy)?);
    let events = parse_trace(trace, &read_trace(trace).map_err(fail)?).map_err(fail)?;
    if seq == 0 || seq as usize > events.len() {
        return Err(fail(format!(
            "--seq {seq} is out of range: {} has {} events (numbered from 1)",
            trace.display(),
            events.len()
        )));
    }
    let (before_events, target) = events.split_at(seq as usize - 1);
    let step = |stepper: &mut Stepper, te: &TraceEvent| {
        let applied = stepper.applied() as usize;
        stepper.step_event(&te.event).map_err(|source| {
            fail(ReplayError {
                path: trace.to_path_buf(),
                line: te.line,
                applied,
                source,
            })
        })
    };
    for te in before_events {
        step(&mut stepper, te)?;
    }
    let target = &target[0];
    // A session's first call starts it: its ledger before is the initial one.
    let fresh;
    let before_monitor = match stepper.sessions().get(target.event.session()) {
        Some(m) => m,
        None => {
            fresh = stepper
                .sessions()
                .get(None)
                .ok_or_else(|| fail("no default session"))?
                .new_session();
            &fresh
        }
    };
    let before = before_monitor.state().ledger.to_ledger();
    let before_hash = before_monitor.state().ledger_hash().to_string();
    let record = step(&mut stepper, target)?;
    let monitor = stepper
        .sessions()
        .get(target.event.session())
        .ok_or_else(|| fail("the event's session does not exist"))?;
    print!(
        "{}",
        render::explanation(monitor, &record, target.line, &before, &before_hash)
    );
    Ok(())
}

/// `agenra bench ARGS`: the benchmarks are the `agenra-bench` binary
/// next to this one, so that its counting allocator stays out of this one.
fn run_bench(args: &[std::ffi::OsString]) -> Result<(), Failed> {
    let exe = std::env::current_exe().map_err(|e| fail(format!("cannot find myself: {e}")))?;
    let bench = exe.with_file_name(format!("agenra-bench{}", std::env::consts::EXE_SUFFIX));
    if !bench.is_file() {
        return Err(fail(format!(
            "the benchmarks are the binary `{}`, which is not installed (cargo install --path . installs both)",
            bench.display()
        )));
    }
    let status = std::process::Command::new(&bench)
        .args(args)
        .status()
        .map_err(|e| fail(format!("cannot run {}: {e}", bench.display())))?;
    match status.code() {
        Some(0) => Ok(()),
        Some(code) => Err(Failed(u8::try_from(code).unwrap_or(1))),
        None => Err(fail(format!("{} was stopped by a signal", bench.display()))),
    }
}

/// Prints a report; its exit code (or an error, exit 1).
fn coded(r: Result<(String, u8), String>) -> Result<(), Failed> {
    match r {
        Ok((text, code)) => {
            print!("{text}");
            if code == 0 {
                Ok(())
            } else {
                Err(Failed(code))
            }
        }
        Err(e) => {
            eprintln!("agenra: error: {}", e.trim_end());
            Err(Failed(1))
        }
    }
}

fn certify_cmd(
    old: &Path,
    new: &Path,
    json: bool,
    out: Option<&Path>,
    emit_lean: Option<&Path>,
) -> Result<(), Failed> {
    match agenra_cli::certify::run_certify(old, new, json, out, emit_lean) {
        Ok((text, 0)) => {
            print!("{text}");
            Ok(())
        }
        Ok((text, code)) => {
            print!("{text}");
            Err(Failed(code))
        }
        Err(e) => {
            eprintln!("agenra: error: {}", e.trim_end());
            Err(Failed(1))
        }
    }
}
