#![warn(missing_docs)]
//! `agenra serve`: the HTTP decision API (`docs/http-api.md`).
//!
//! [`Gateway`] holds the sessions (per tenant), the pending approvals and
//! the durable log (`agenra-store`); [`http::router`] puts the JSON API in
//! front of it; [`Server`] runs it on a tokio runtime of its own.
//!
//! A call's answer is sent only once its audit record is durable, and the
//! sessions are recovered on start by replaying the log through the
//! monitor (`docs/store.md`).

pub mod api;
pub mod approvals;
pub mod auth;
pub mod client;
pub mod conn;
pub mod desk;
pub mod http;
pub mod metrics;
pub mod notify;
pub mod page;
pub mod perimeter;
mod reply;
mod request;
pub mod state;

pub use conn::Limits;
pub use perimeter::Perimeter;
pub use state::{Certification, Gateway, OpenError};

use agenra_core::{CompiledPolicy, Policy};
use agenra_store::Log;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What `agenra serve` runs.
#[derive(Clone)]
pub struct ServeConfig {
    /// The policy file (`.agr`, or compiled `.json`/`.cbor`).
    pub policy: PathBuf,
    /// The embedded store's file, or a PostgreSQL URL
    /// (`postgres://user@host:port/db`) for several replicas sharing one
    /// log (`docs/store.md`).
    pub store: PathBuf,
    /// Where to listen (`127.0.0.1:8080`; port 0 picks a free one).
    pub listen: String,
    /// Refuse a policy revision (at start or on reload) that `agenra
    /// certify` does not certify against the running one.
    pub require_certified: bool,
    /// The rule-side checker of `agenra certify` for revisions that change
    /// rules (`agenra_smt::rules::RuleChecker`; without one they are
    /// `unknown`, so refused under `require_certified`).
    pub rules: Option<&'static (dyn agenra_certify::RuleOracle + Send + Sync)>,
    /// Under `require_certified`: the policy file may widen what the last
    /// one allowed, at start and on SIGHUP (`--allow-widening`).
    pub allow_widening: bool,
    /// The credentials file (`--tokens`); `None` only with `insecure`.
    pub tokens: Option<PathBuf>,
    /// `--insecure-no-auth`: no credentials, every request has every role.
    pub insecure: bool,
    /// Where the approver's and admin's routes listen, apart from the
    /// agent's (`--control-listen`); `None`: on `listen` too.
    pub control_listen: Option<String>,
    /// Host names control requests may name besides IP addresses and
    /// `localhost` (`--allow-host`).
    pub allow_hosts: Vec<String>,
    /// Seconds a paused call waits before it expires (`--pause-timeout`).
    pub pause_timeout: u64,
    /// Seconds a client's claimed time may be off (`--max-clock-skew`).
    pub max_clock_skew: u64,
    /// Graph nodes each new session keeps in memory (`--compact-window`;
    /// 0: the whole graph).
    pub compact_window: u64,
    /// How long a session may stay idle before it leaves memory
    /// (`--evict-idle`; `None`: [`state::DEFAULT_EVICT_IDLE_SECS`] on the
    /// embedded store, never on a shared one; zero: never).
    pub evict_idle: Option<std::time::Duration>,
    /// Limits on connections and the time to read a request
    /// ([`conn`], `docs/http-api.md`).
    pub limits: Limits,
    /// Webhook notifications of pauses and settlements (`--notify-url`,
    /// `--notify-secret-file`; [`notify`]).
    pub notify: Option<notify::NotifyConfig>,
    /// Signed audit checkpoints (`--checkpoint-key`, `--checkpoint-every`,
    /// `--checkpoint-out`; `docs/store.md`).
    pub checkpoints: Option<agenra_store::Checkpoints>,
    /// `--partitioned-log`: on PostgreSQL, the log partitioned by session
    /// (`docs/store.md`, "A log partitioned by session").
    pub partitioned: bool,
    /// Events between two snapshots of a session (`--snapshot-every`; 0:
    /// never; `None`: [`state::DEFAULT_SNAPSHOT_EVERY`] on the single
    /// chain, none on the partitioned log, which refuses them).
    pub snapshot_every: Option<u64>,
}

impl ServeConfig {
    /// A configuration with the defaults of `agenra serve`'s flags, and
    /// neither credentials nor `insecure` (it then refuses to start).
    pub fn new(policy: PathBuf, store: PathBuf, listen: String) -> ServeConfig {
        ServeConfig {
            policy,
            store,
            listen,
            require_certified: false,
            rules: None,
            allow_widening: false,
            tokens: None,
            insecure: false,
            control_listen: None,
            allow_hosts: Vec::new(),
            pause_timeout: state::DEFAULT_PAUSE_TIMEOUT,
            max_clock_skew: state::DEFAULT_MAX_SKEW,
            compact_window: state::DEFAULT_COMPACT_WINDOW as u64,
            evict_idle: None,
            limits: Limits::default(),
            notify: None,
            checkpoints: None,
            partitioned: false,
            snapshot_every: None,
        }
    }

    /// The perimeter its flags describe: credentials from `tokens`, or
    /// `insecure`; neither is an error (the server never starts open by
    /// default).
    pub fn perimeter(&self) -> Result<Perimeter, ServeError> {
        match (&self.tokens, self.insecure) {
            (Some(_), true) => Err(ServeError::Auth(
                "--tokens and --insecure-no-auth exclude each other".into(),
            )),
            (Some(path), false) => Perimeter::tokens(path.clone(), self.allow_hosts.clone())
                .map_err(|e| ServeError::Auth(e.to_string())),
            (None, true) => Ok(Perimeter::insecure(self.allow_hosts.clone())),
            (None, false) => Err(ServeError::Auth(
                "no credentials: pass --tokens FILE (create it with `agenra token add --file FILE \
                 --role admin NAME`), or --insecure-no-auth for a local experiment"
                    .into(),
            )),
        }
    }
}

impl std::fmt::Debug for ServeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeConfig")
            .field("policy", &self.policy)
            .field(
                "store",
                &agenra_store::redact(&self.store.display().to_string()),
            )
            .field("listen", &self.listen)
            .field("require_certified", &self.require_certified)
            .field("rules", &self.rules.map(|_| "rule oracle"))
            .field("allow_widening", &self.allow_widening)
            .field("tokens", &self.tokens)
            .field("insecure", &self.insecure)
            .field("control_listen", &self.control_listen)
            .field("allow_hosts", &self.allow_hosts)
            .field("pause_timeout", &self.pause_timeout)
            .field("max_clock_skew", &self.max_clock_skew)
            .field("compact_window", &self.compact_window)
            .field("evict_idle", &self.evict_idle)
            .field("limits", &self.limits)
            .field("notify", &self.notify)
            .field("checkpoints", &self.checkpoints)
            .field("snapshot_every", &self.snapshot_every)
            .finish()
    }
}

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The policy file.
    #[error("{0}")]
    Policy(String),
    /// The credentials (`--tokens`, `--insecure-no-auth`).
    #[error("{0}")]
    Auth(String),
    /// Opening or recovering the store.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The webhook (`--notify-url`, `--notify-secret-file`).
    #[error(transparent)]
    Notify(#[from] notify::NotifyError),
    /// `--evict-idle` on a store it cannot serve (a shared one).
    #[error("{0}")]
    Evict(String),
    /// `--snapshot-every` on a log that cannot hold snapshots.
    #[error("{0}")]
    Snapshot(String),
    /// Sockets, the runtime.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

/// Reads a policy file: `.agr` text (compiled), or a compiled policy
/// (`.json`, `.cbor`, as `agenra compile` writes them). Errors are rendered
/// with their line and column.
pub fn load_policy_file(path: &Path) -> Result<Policy, String> {
    let show = path.display().to_string();
    let ext = path.extension().and_then(|e| e.to_str());
    if ext == Some("cbor") {
        let bytes = std::fs::read(path).map_err(|e| format!("{show}: cannot read: {e}"))?;
        return agenra_core::hash::from_cbor::<Policy>(&bytes)
            .map_err(|e| format!("{show}: not a compiled policy: {e}"));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{show}: cannot read: {e}"))?;
    if ext == Some("json") {
        return agenra_core::hash::from_json::<Policy>(&text)
            .map_err(|e| format!("{show}: not a compiled policy: {e}"));
    }
    let name = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("policy");
    agenra_policy::compile(&text, name)
        .map(|c| c.policy)
        .map_err(|e| e.render(&show, &text).trim_end().to_string())
}

/// A running server: its address, and how to stop it.
pub struct Server {
    addr: SocketAddr,
    control: Option<(SocketAddr, Serving)>,
    gateway: Arc<Gateway>,
    perimeter: Arc<Perimeter>,
    serving: Serving,
}

/// A server's runtime thread and the signal that stops it: stopping (or
/// dropping) signals, then waits for the requests in flight.
pub(crate) struct Serving {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Serving {
    /// Serves `app` on `listen` (port 0 picks a free one) from a runtime on
    /// its own thread, `agenra-NAME`, with the default [`Limits`]; the
    /// address it listens on.
    pub(crate) fn spawn(
        app: axum::Router,
        listen: &str,
        name: &str,
    ) -> Result<(SocketAddr, Serving), ServeError> {
        Serving::spawn_with(app, listen, name, Limits::default())
    }

    /// [`Serving::spawn`] under `limits` ([`conn`]).
    pub(crate) fn spawn_with(
        app: axum::Router,
        listen: &str,
        name: &str,
        limits: Limits,
    ) -> Result<(SocketAddr, Serving), ServeError> {
        limits.check().map_err(|e| ServeError::Io {
            what: format!("cannot serve on {listen}"),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, e),
        })?;
        let runtime = runtime()?;
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind(listen))
            .map_err(|source| ServeError::Io {
                what: format!("cannot listen on {listen}"),
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| ServeError::Io {
            what: "no local address".into(),
            source,
        })?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("agenra-{name}"))
            .spawn(move || {
                runtime.block_on(conn::serve(listener, app, limits, async {
                    let _ = stopped.await;
                }));
            })
            .map_err(|source| ServeError::Io {
                what: format!("cannot start the {name} thread"),
                source,
            })?;
        Ok((
            addr,
            Serving {
                stop: Some(stop),
                thread: Some(thread),
            },
        ))
    }

    pub(crate) fn shutdown(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl Server {
    /// Serves `gateway` behind `perimeter` on `listen` (every route) from a
    /// runtime on its own threads.
    pub fn spawn(
        gateway: Arc<Gateway>,
        perimeter: Arc<Perimeter>,
        listen: &str,
    ) -> Result<Server, ServeError> {
        Server::spawn_split(gateway, perimeter, listen, None, Limits::default())
    }

    /// Like [`Server::spawn`], under `limits`; with `control`, the
    /// approver's and admin's routes listen there, and `listen` serves the
    /// agent's alone.
    pub fn spawn_split(
        gateway: Arc<Gateway>,
        perimeter: Arc<Perimeter>,
        listen: &str,
        control: Option<&str>,
        limits: Limits,
    ) -> Result<Server, ServeError> {
        let routes = if control.is_some() {
            http::Routes::Agent
        } else {
            http::Routes::All
        };
        let app = http::router(Arc::clone(&gateway), Arc::clone(&perimeter), routes);
        let (addr, serving) = Serving::spawn_with(app, listen, "serve", limits)?;
        let control = match control {
            Some(c) => {
                let app = http::router(
                    Arc::clone(&gateway),
                    Arc::clone(&perimeter),
                    http::Routes::Control,
                );
                Some(Serving::spawn_with(app, c, "control", limits)?)
            }
            None => None,
        };
        Ok(Server {
            addr,
            control,
            gateway,
            perimeter,
            serving,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where the approver's and admin's routes listen, when apart.
    pub fn control_addr(&self) -> Option<SocketAddr> {
        self.control.as_ref().map(|(a, _)| *a)
    }

    /// The perimeter in front of it.
    pub fn perimeter(&self) -> &Arc<Perimeter> {
        &self.perimeter
    }

    /// The gateway it serves.
    pub fn gateway(&self) -> &Arc<Gateway> {
        &self.gateway
    }

    /// Stops accepting, finishes the requests in flight, and returns.
    pub fn stop(mut self) {
        if let Some((_, mut c)) = self.control.take() {
            c.shutdown();
        }
        self.serving.shutdown();
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, ServeError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_io()
        .enable_time()
        .thread_name("agenra-http")
        .build()
        .map_err(|source| ServeError::Io {
            what: "cannot start the runtime".into(),
            source,
        })
}

/// Opens the store and recovers the sessions.
pub fn open(config: &ServeConfig) -> Result<Gateway, ServeError> {
    let policy = load_policy_file(&config.policy).map_err(ServeError::Policy)?;
    let compiled = CompiledPolicy::new(policy)
        .map_err(|e| ServeError::Policy(format!("{}: {e}", config.policy.display())))?;
    if config.partitioned {
        return open_partitioned(config, compiled);
    }
    let log = match config.store.to_str() {
        Some(url) if agenra_store::is_postgres_url(url) => Log::open_pg(url),
        _ => Log::open_redb(&config.store),
    }
    .map_err(OpenError::from)?;
    let log = match &config.checkpoints {
        Some(c) => log.with_checkpoints(c.clone()),
        None => log,
    };
    // A log that does not reach the checkpoint kept apart is not extended.
    log.check_kept_checkpoint().map_err(OpenError::from)?;
    Ok(Gateway::open(
        log,
        compiled,
        &config.policy.display().to_string(),
        Certification {
            required: config.require_certified,
            rules: config.rules,
            allow_widening: config.allow_widening,
        },
    )?)
}

/// [`open`] with `--partitioned-log`: the PostgreSQL log partitioned by
/// session.
fn open_partitioned(config: &ServeConfig, compiled: CompiledPolicy) -> Result<Gateway, ServeError> {
    let refuse = |why: &str| {
        ServeError::Open(OpenError::Store(agenra_store::StoreError::Engine {
            path: agenra_store::redact(&config.store.display().to_string()),
            message: format!("--partitioned-log: {why}"),
        }))
    };
    let url = match config.store.to_str() {
        Some(url) if agenra_store::is_postgres_url(url) => url,
        _ => return Err(refuse("it needs a PostgreSQL store (postgres://…)")),
    };
    let mut log = agenra_store::PartLog::open(Box::new(
        agenra_store::PgParts::open(url).map_err(OpenError::from)?,
    ));
    if let Some(c) = &config.checkpoints {
        log = log.with_checkpoints(c.clone());
    }
    Ok(Gateway::open_parts(
        log,
        compiled,
        &config.policy.display().to_string(),
        Certification {
            required: config.require_certified,
            rules: config.rules,
            allow_widening: config.allow_widening,
        },
    )?)
}

/// `agenra serve`: opens the store, recovers, listens, calls `ready` with
/// the address, and serves until SIGINT or SIGTERM. SIGHUP reloads the
/// policy file (refused, with the reason on standard error, when it does
/// not compile or, with `require_certified`, does not certify).
pub fn run(
    config: &ServeConfig,
    ready: impl FnOnce(SocketAddr, &Gateway),
) -> Result<(), ServeError> {
    // Refuses to start without credentials (or an explicit
    // --insecure-no-auth), before anything is opened.
    let perimeter = Arc::new(config.perimeter()?);
    let gateway = Arc::new(open(config)?);
    gateway.set_pause_timeout(config.pause_timeout);
    gateway.set_max_clock_skew(config.max_clock_skew);
    gateway.set_compact_window(config.compact_window);
    match config.evict_idle {
        Some(idle) => gateway.set_evict_idle(idle).map_err(ServeError::Evict)?,
        // The default where it applies: the embedded store.
        None if !gateway.is_replicated() => {
            let idle = std::time::Duration::from_secs(state::DEFAULT_EVICT_IDLE_SECS);
            gateway.set_evict_idle(idle).map_err(ServeError::Evict)?;
        }
        None => {}
    }
    match config.snapshot_every {
        Some(n) => gateway
            .set_snapshot_every(n)
            .map_err(ServeError::Snapshot)?,
        // The default where snapshots can be written.
        None => {
            let _ = gateway.set_snapshot_every(state::DEFAULT_SNAPSHOT_EVERY);
        }
    }
    if let Some(n) = &config.notify {
        gateway.set_notifier(notify::Notifier::spawn(n.clone())?);
    }
    let server = Server::spawn_split(
        Arc::clone(&gateway),
        Arc::clone(&perimeter),
        &config.listen,
        config.control_listen.as_deref(),
        config.limits,
    )?;
    if perimeter.is_insecure() {
        eprintln!(
            "agenra serve: WARNING: --insecure-no-auth: every request may approve, reload the policy \
             and act for any tenant; never expose this server"
        );
    }
    ready(server.addr(), &gateway);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|source| ServeError::Io {
            what: "cannot start the signal runtime".into(),
            source,
        })?;
    let policy_path = config.policy.clone();
    rt.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        let io = |source| ServeError::Io {
            what: "cannot install signal handlers".into(),
            source,
        };
        let mut hup = signal(SignalKind::hangup()).map_err(io)?;
        let mut term = signal(SignalKind::terminate()).map_err(io)?;
        let mut int = signal(SignalKind::interrupt()).map_err(io)?;
        // Expired pauses are rejected (their units return) within a second.
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                _ = hup.recv() => {
                    reload_file(&gateway, &policy_path).await;
                    match perimeter.reload() {
                        Ok(n) if !perimeter.is_insecure() => {
                            eprintln!("agenra serve: SIGHUP: {n} credential(s) loaded")
                        }
                        Ok(_) => {}
                        Err(e) => eprintln!("agenra serve: SIGHUP: credentials kept: {e}"),
                    }
                }
                _ = tick.tick() => {
                    let gw = Arc::clone(&gateway);
                    // Idle sessions leave memory within a second too.
                    let _ = tokio::task::spawn_blocking(move || {
                        gw.expire_pauses();
                        gw.evict_idle();
                    })
                    .await;
                }
                _ = term.recv() => break,
                _ = int.recv() => break,
            }
        }
        Ok::<(), ServeError>(())
    })?;
    server.stop();
    Ok(())
}

async fn reload_file(gateway: &Arc<Gateway>, path: &Path) {
    let policy = match load_policy_file(path) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("agenra serve: SIGHUP: reload refused: {e}");
            return;
        }
    };
    let gw = Arc::clone(gateway);
    let source = path.display().to_string();
    let widen = gw.allow_widening();
    let pending =
        tokio::task::spawn_blocking(move || gw.reload(policy, &source, "operator:SIGHUP", widen))
            .await;
    match pending {
        Ok(Ok(p)) => match p.durable().await {
            Ok((r, _)) if r.changed => eprintln!(
                "agenra serve: SIGHUP: new sessions now run {} (was {})",
                r.policy_hash, r.previous
            ),
            Ok(_) => eprintln!("agenra serve: SIGHUP: the policy did not change"),
            Err(e) => eprintln!("agenra serve: SIGHUP: reload failed: {}", e.error),
        },
        Ok(Err(e)) => eprintln!("agenra serve: SIGHUP: reload refused: {}", e.error),
        Err(e) => eprintln!("agenra serve: SIGHUP: reload failed: {e}"),
    }
}
