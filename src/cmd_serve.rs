//! `agenra serve`: the HTTP decision API on the durable store
//! (`docs/http-api.md`, `docs/store.md`).

use crate::{fail, Failed};
use agenra_gateway::{Limits, ServeConfig};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// `agenra serve`'s limits on connections (docs/http-api.md, "Connections").
#[derive(Clone, Debug, clap::Args)]
pub struct LimitArgs {
    /// Connections served at once; more are answered 503 and closed. Keep it
    /// below the open-file limit (`ulimit -n`).
    #[arg(long, value_name = "N", default_value_t = 1024,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_connections: u64,
    /// Connections served at once from one client IP address.
    #[arg(long, value_name = "N", default_value_t = 256,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_connections_per_ip: u64,
    /// Seconds to receive a request's head, counted from when the server waits for it (also how
    /// long an idle keep-alive connection stays open).
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = seconds)]
    header_timeout: Duration,
    /// Seconds to receive a request's body after its head; a late body gets 408.
    #[arg(long, value_name = "SECS", default_value = "30", value_parser = seconds)]
    body_timeout: Duration,
    /// Seconds an answer may wait for the client to read it before the connection is closed.
    #[arg(long, value_name = "SECS", default_value = "60", value_parser = seconds)]
    idle_timeout: Duration,
}

impl LimitArgs {
    fn limits(&self) -> Limits {
        Limits {
            max_connections: usize::try_from(self.max_connections).unwrap_or(usize::MAX),
            max_connections_per_ip: usize::try_from(self.max_connections_per_ip)
                .unwrap_or(usize::MAX),
            header_timeout: self.header_timeout,
            body_timeout: self.body_timeout,
            idle_timeout: self.idle_timeout,
        }
    }
}

/// Seconds (a decimal number, over 0 and at most a day).
fn seconds(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !(v > 0.0 && v <= 86_400.0) {
        return Err(format!("`{s}`: must be over 0 and at most 86400 seconds"));
    }
    Ok(Duration::from_secs_f64(v))
}

/// `agenra serve`'s flags.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// The policy (`.agr`, or compiled `.json`/`.cbor`); SIGHUP reloads it.
    #[arg(long)]
    policy: PathBuf,
    /// The embedded store (created if missing; sessions are recovered from it), or
    /// `postgres://user@host:port/db`: one log shared by several replicas (docs/store.md).
    #[arg(long, default_value = "agenra.redb")]
    store: PathBuf,
    /// Address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: String,
    /// The credentials file (`agenra token add`): every route but /health needs a bearer
    /// token of the right role (agent, approver, admin). SIGHUP re-reads it.
    #[arg(long, value_name = "FILE")]
    tokens: Option<PathBuf>,
    /// Run with no credentials at all: every request may approve, reload the policy and act
    /// for any tenant. For a local experiment only; never the default.
    #[arg(long)]
    insecure_no_auth: bool,
    /// Serve the approver's and admin's routes (approvals, policy, metrics) on this address
    /// only, apart from the agent's (`--listen`).
    #[arg(long, value_name = "ADDR")]
    control_listen: Option<String>,
    /// A host name approvers and admins reach the server by (repeatable); IP addresses and
    /// `localhost` are always accepted. Other `Host` headers are refused on control routes.
    #[arg(long = "allow-host", value_name = "NAME")]
    allow_hosts: Vec<String>,
    /// Seconds a paused call waits for an approver; then it is rejected and its units return.
    #[arg(long, value_name = "SECS", default_value_t = agenra_gateway::state::DEFAULT_PAUSE_TIMEOUT,
          value_parser = clap::value_parser!(u64).range(1..))]
    pause_timeout: u64,
    /// Seconds a client's `time` may differ from the server's clock (the server's clock
    /// decides; a client time farther off is refused).
    #[arg(long, value_name = "SECS", default_value_t = agenra_gateway::state::DEFAULT_MAX_SKEW)]
    max_clock_skew: u64,
    /// Graph nodes each new session keeps in memory (it keeps between N and 2N, plus open
    /// calls, contexts and what later decisions read; 0: the whole graph). Lineage naming a
    /// call older than that is denied as unknown. Each session keeps the window it was opened
    /// with, across restarts (its record says it).
    #[arg(long, value_name = "N", default_value_t = agenra_gateway::state::DEFAULT_COMPACT_WINDOW as u64)]
    compact_window: u64,
    /// Drop a session from memory after this long with no event and no open call (`10m`,
    /// `90s`, `2h`; `0` or `off`: never); its next request reloads it from its records in
    /// the store. Default 10m on the embedded store; a shared (PostgreSQL) store does not
    /// evict. Paused sessions and sessions drawing on tenant pools are never evicted.
    #[arg(long, value_name = "DURATION", value_parser = agenra_gateway::state::parse_idle)]
    evict_idle: Option<std::time::Duration>,
    /// Refuse a policy revision that `agenra certify` does not certify against the running
    /// one, or that may allow what the running one did not (unless allowed, see below).
    #[arg(long)]
    require_certified: bool,
    /// With --require-certified: the policy file (at start and on SIGHUP) may widen what the
    /// last one allowed. API revisions say so with `allow_widening` in their body.
    #[arg(long)]
    allow_widening: bool,
    /// POST each new PAUSE and its settlement as JSON to this webhook
    /// (`http://HOST:PORT/PATH`), signed `X-Agenra-Signature: sha256=<HMAC>`,
    /// retried with back-off, never delaying a decision (docs/http-api.md).
    #[arg(long, value_name = "URL", requires = "notify_secret_file")]
    notify_url: Option<String>,
    /// The HMAC key of --notify-url (at least 16 bytes; a trailing newline
    /// is not part of it).
    #[arg(long, value_name = "FILE", requires = "notify_url")]
    notify_secret_file: Option<std::path::PathBuf>,
    /// Sign the audit log: append a checkpoint record signed with this Ed25519 key
    /// (`agenra audit keygen --out FILE`; mode 0600) as --checkpoint-every says, and when
    /// the server stops. `agenra audit verify --public-key` checks them (docs/store.md).
    #[arg(long, value_name = "FILE")]
    checkpoint_key: Option<PathBuf>,
    /// How often to checkpoint: after N records (`1000`), or every N seconds when records
    /// were appended since (`60s`).
    #[arg(
        long,
        value_name = "N|Ns",
        default_value = "1000",
        requires = "checkpoint_key"
    )]
    checkpoint_every: agenra_store::Every,
    /// Also write each checkpoint here (atomically): keep it apart from the store (another
    /// machine) and give it to `agenra audit verify --checkpoint` to catch a truncated log.
    #[arg(long, value_name = "FILE", requires = "checkpoint_key")]
    checkpoint_out: Option<PathBuf>,
    /// On a PostgreSQL store: the audit log partitioned by session, so that replicas
    /// deciding on different sessions never wait on one lock (docs/store.md). A database
    /// holds one layout: the single chain and the partitioned log refuse each other.
    #[arg(long)]
    partitioned_log: bool,
    /// Every N events of a session, record a snapshot of its state, so that a restart
    /// replays only the events after a session's last snapshot (0: never). Default 1000
    /// on the single chain; the partitioned log has none and refuses the flag.
    #[arg(long, value_name = "N")]
    snapshot_every: Option<u64>,
    #[command(flatten)]
    limits: LimitArgs,
}

/// Serves until SIGINT or SIGTERM; prints one line when it listens.
pub fn run(args: ServeArgs) -> Result<(), Failed> {
    let mut config = ServeConfig::new(args.policy, args.store, args.listen);
    config.require_certified = args.require_certified;
    config.allow_widening = args.allow_widening;
    // Revisions that change rules are certified with Z3, as `agenra
    // certify` does.
    config.rules = Some(&agenra_smt::rules::RuleChecker);
    config.tokens = args.tokens;
    config.insecure = args.insecure_no_auth;
    config.control_listen = args.control_listen;
    config.allow_hosts = args.allow_hosts;
    config.pause_timeout = args.pause_timeout;
    config.max_clock_skew = args.max_clock_skew;
    config.compact_window = args.compact_window;
    config.evict_idle = args.evict_idle;
    config.limits = args.limits.limits();
    config.partitioned = args.partitioned_log;
    config.snapshot_every = args.snapshot_every;
    if let (Some(url), Some(secret)) = (&args.notify_url, &args.notify_secret_file) {
        config.notify = Some(agenra_gateway::notify::NotifyConfig::new(url, secret).map_err(fail)?);
    }
    if let Some(key) = &args.checkpoint_key {
        config.checkpoints = Some(agenra_store::Checkpoints {
            signer: agenra_store::CheckpointSigner::from_file(key).map_err(fail)?,
            every: args.checkpoint_every,
            out: args.checkpoint_out,
        });
    }
    let control = config.control_listen.clone();
    agenra_gateway::run(&config, |addr, gateway| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "agenra serve: listening on http://{addr} (policy {}, store {}, {} sessions recovered)",
            gateway.current_policy().hash(),
            agenra_store::redact(&config.store.display().to_string()),
            gateway.session_count()
        );
        if let Some(c) = control {
            let _ = writeln!(out, "agenra serve: approvals and policy on {c}");
        }
        let _ = out.flush();
    })
    .map_err(fail)
}
