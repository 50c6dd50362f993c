//! `agenra mcp-proxy`: a stdio MCP proxy (docs/mcp-proxy.md).
//!
//! The agent (the MCP client) talks to the proxy on its standard input and
//! output; the proxy spawns the real MCP server and talks to it on the
//! child's standard input and output. Messages are newline-delimited
//! JSON-RPC 2.0. Every client line is parsed exactly (strict UTF-8, no lone
//! surrogates, finite numbers, no duplicated keys, bounded nesting) or
//! refused (`-32700`/`-32600`, never forwarded): a line the proxy cannot
//! read might be a `tools/call` a lenient server would run. Parsed lines are
//! forwarded unchanged, except `tools/call` requests: each is decided by
//! the monitor first. An ALLOWed call goes to the server as the proxy
//! parsed it (re-serialized, so the server parses what was decided) and its
//! response, matched by the id's JSON-RPC value, is reported to the monitor
//! (a JSON-RPC error or `isError: true` is a failed call: its unit comes
//! back; an answer that is not a tools/call result, or that the proxy cannot
//! parse exactly, is `unknown`); a DENY or PAUSE is answered by the proxy
//! itself with a tool result carrying `isError: true`. Every client request
//! is tracked by id until answered: one reusing a live id is refused.
//!
//! A PAUSE is answered the same way by default (`--on-pause error`). With
//! `--on-pause wait` the paused call is held instead: the proxy serves the
//! approval endpoints of the HTTP API (`agenra_gateway::desk`) for its
//! session, and the call is settled by an approval (re-checked, then
//! forwarded like an ALLOW, or denied), a rejection, the client's
//! cancellation or the timeout. Nothing blocks while a call waits: its
//! answer is sent whenever it is settled.
//!
//! The session is the gateway's (`agenra_gateway::Gateway`), the same
//! code `agenra serve` runs: with `--store` every decision, result,
//! approval and rejection is a hash-chained audit record, durable before
//! the proxy acts on it, and a proxy restarted on the same store resumes
//! the same session (`--tenant`, `--session`) with what it had spent.
//! Without `--store` the log is in memory and ends with the proxy.
//!
//! Threads: one reads the client and writes the server, the main thread
//! reads the server and writes the client; in wait mode an HTTP runtime
//! and one timer per paused call settle calls too. Malformed lines never
//! stop the proxy: they are logged to standard error, and refused (from the
//! client) or forwarded (from the server).

use crate::{fail, load_policy, Failed};
use agenra_core::event::Outcome;
use agenra_core::graph::Status;
use agenra_core::{CompiledPolicy, Verdict};
use agenra_gateway::api::{
    check_name, ApiError, Authorize, CallIn, Outcome as ApiOutcome, ReportIn, ResolveIn,
};
use agenra_gateway::desk::{ApprovalDesk, DeskServer};
use agenra_gateway::http::Health;
use agenra_gateway::state::{Pending, PendingCall};
use agenra_gateway::Gateway;
use agenra_store::{Log, MemoryBackend};
use serde_json::{json, Map, Value};
use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The tenant of the proxy's session by default (`--tenant`).
pub const DEFAULT_TENANT: &str = "default";
/// The proxy's session by default (`--session`).
pub const DEFAULT_SESSION: &str = "mcp-proxy";
/// The longest request id (as JSON text) the proxy takes: the call id
/// `mcp-N:ID` must fit the monitor's 1,024 bytes.
pub const MAX_ID_BYTES: usize = 960;
/// How long a cancelled call's answer is waited for by default
/// (`--cancel-timeout`).
pub const DEFAULT_CANCEL_TIMEOUT: u64 = 30;
/// How many fresh call ids the proxy tries when the ones it makes up are
/// taken already (another proxy driving the same session).
const ID_ATTEMPTS: u32 = 16;
/// How long a paused call waits by default (`--pause-timeout`).
pub const DEFAULT_PAUSE_TIMEOUT: u64 = 300;

/// What a PAUSE does (`--on-pause`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OnPause {
    /// Answer at once with a tool error asking for approval; the paused
    /// call is withdrawn (its units come back).
    Error,
    /// Hold the call until it is approved or rejected through the approval
    /// endpoints (`--approvals-listen`), or times out.
    Wait,
}

/// The PAUSE flags of `agenra mcp-proxy`.
#[derive(Clone, Debug)]
pub struct PauseOptions {
    /// `--on-pause`.
    pub on_pause: OnPause,
    /// `--approvals-listen`: where the approval endpoints listen.
    pub approvals_listen: Option<String>,
    /// `--pause-timeout`: seconds a paused call waits.
    pub pause_timeout: Option<u64>,
    /// `--tokens`: the credentials file; approvers need a token of theirs.
    pub tokens: Option<PathBuf>,
    /// `--insecure-no-auth`: the approval endpoints take any request.
    pub insecure_no_auth: bool,
}

/// Other flags of `agenra mcp-proxy`.
#[derive(Clone, Debug, Default)]
pub struct ProxyOptions {
    /// `--cancel-timeout`: seconds a cancelled call's answer is waited for
    /// before the call is reported `unknown`.
    pub cancel_timeout: Option<u64>,
    /// `--show-all-tools`: `tools/list` answers are forwarded unchanged.
    pub show_all_tools: bool,
}

/// The tools a session of `policy` may ever call: declared, and named by a
/// grant (with or without approval).
fn callable_tools(policy: &agenra_core::policy::Policy) -> HashSet<String> {
    policy
        .grants
        .iter()
        .filter_map(|g| policy.tools.get(g.tool))
        .map(|t| t.name.clone())
        .collect()
}

/// Where the proxy keeps its session: `--store`, `--tenant`, `--session`.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// `--store`: the embedded store's file or a `postgres://` URL, as for
    /// `agenra serve`; `None`: a log in memory that ends with the proxy.
    pub store: Option<PathBuf>,
    /// `--tenant`: the session's tenant.
    pub tenant: String,
    /// `--session`: the session's id, resumed when the store has it.
    pub session: String,
}

/// Wait mode, validated: where to listen, how long to wait, and who may
/// approve.
struct WaitMode {
    listen: String,
    timeout: u64,
    perimeter: Arc<agenra_gateway::Perimeter>,
}

impl PauseOptions {
    /// Checks the combination of flags: `None` for error mode.
    fn validate(&self) -> Result<Option<WaitMode>, String> {
        match self.on_pause {
            OnPause::Error => {
                if self.approvals_listen.is_some() {
                    return Err("--approvals-listen is only used with --on-pause wait \
                                (error mode answers a PAUSE at once)"
                        .into());
                }
                if self.pause_timeout.is_some() {
                    return Err("--pause-timeout is only used with --on-pause wait \
                                (error mode answers a PAUSE at once)"
                        .into());
                }
                if self.tokens.is_some() || self.insecure_no_auth {
                    return Err(
                        "--tokens and --insecure-no-auth are only used with --on-pause wait \
                                (error mode serves no approval endpoints)"
                            .into(),
                    );
                }
                Ok(None)
            }
            OnPause::Wait => {
                let Some(listen) = self.approvals_listen.clone() else {
                    return Err("--on-pause wait needs --approvals-listen ADDR \
                                (e.g. 127.0.0.1:8080), where paused calls are approved"
                        .into());
                };
                let timeout = self.pause_timeout.unwrap_or(DEFAULT_PAUSE_TIMEOUT);
                if timeout == 0 {
                    return Err("--pause-timeout must be at least 1 second".into());
                }
                // The agent can reach a loopback port: approvals need an
                // approver's credential.
                let mut config = agenra_gateway::ServeConfig::new(
                    PathBuf::new(),
                    PathBuf::new(),
                    listen.clone(),
                );
                config.tokens = self.tokens.clone();
                config.insecure = self.insecure_no_auth;
                let perimeter = Arc::new(
                    config
                        .perimeter()
                        .map_err(|e| format!("--on-pause wait serves approvals: {e}"))?,
                );
                Ok(Some(WaitMode {
                    listen,
                    timeout,
                    perimeter,
                }))
            }
        }
    }
}

/// The client's requests forwarded to the server whose response has not
/// come back yet (by the JSON-RPC id's [`id_key`]), in wait mode the paused
/// calls waiting for a human (by call id), and the last call number used.
/// Held while the gateway decides, so that events reach the session in
/// the order the proxy saw them.
struct State {
    pending: HashMap<String, Inflight>,
    waiting: HashMap<String, Waiting>,
    /// The waiting calls by their JSON-RPC id's key (so that checking an id
    /// does not walk every waiting call).
    waiting_keys: HashMap<String, String>,
    /// Task-augmented calls (MCP 2025-11-25) whose server answered with a
    /// task handle: the task id and the proxy's call id, reported once the
    /// client fetches the task's result (`tasks/result`).
    tasks: HashMap<String, String>,
    seq: u64,
}

/// A client request the server has not answered yet.
enum Inflight {
    /// An allowed `tools/call`: the proxy's call id.
    Call(String),
    /// An allowed `tools/call` the client cancelled: whatever the server
    /// answers, or nothing within `--cancel-timeout`, is reported `unknown`.
    Cancelled(String),
    /// A cancelled call already reported `unknown` (no answer in time): the
    /// id stays taken until the server answers it, so a late answer can
    /// never pass for another request's.
    Abandoned,
    /// `tasks/result` for a task a call became: its answer is the call's.
    TaskResult(String),
    /// `tasks/cancel` for such a task: its call is reported `unknown`.
    TaskCancel(String),
    /// `tools/list`: its answer lists only the tools the session may call
    /// (unless `--show-all-tools`).
    ToolsList,
    /// Any other request (its id is live until the server answers it).
    Other,
}

impl State {
    /// Whether a request with this id key is in flight (forwarded and
    /// unanswered, or a call waiting for approval).
    fn live(&self, key: &str) -> bool {
        self.pending.contains_key(key) || self.waiting_keys.contains_key(key)
    }
}

/// What the timer thread does when a deadline passes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    /// Rejects the paused call (call id) if it still waits (seconds waited).
    Pause(String, u64),
    /// Reports the cancelled call with this id key `unknown` if the server
    /// has not answered it yet.
    Cancel(String),
}

/// The deadlines of waiting and cancelled calls, in one heap served by one
/// thread (not a thread per call).
#[derive(Default)]
struct Timers {
    heap: Mutex<BinaryHeap<Reverse<(Instant, Timer)>>>,
    wake: Condvar,
}

impl Timers {
    fn add(&self, after: Duration, timer: Timer) {
        let at = Instant::now() + after;
        self.heap
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Reverse((at, timer)));
        self.wake.notify_one();
    }
}

/// The timer thread: fires each deadline once it passes.
fn run_timers(proxy: &Proxy) {
    let timers = &proxy.timers;
    let mut heap = timers.heap.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let now = Instant::now();
        let next = heap.peek().map(|Reverse((at, _))| *at);
        match next {
            Some(at) if at <= now => {
                let Some(Reverse((_, timer))) = heap.pop() else {
                    continue;
                };
                drop(heap);
                fire(proxy, timer);
                heap = timers.heap.lock().unwrap_or_else(|e| e.into_inner());
            }
            Some(at) => {
                heap = timers
                    .wake
                    .wait_timeout(heap, at - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            None => heap = timers.wake.wait(heap).unwrap_or_else(|e| e.into_inner()),
        }
    }
}

fn fire(proxy: &Proxy, timer: Timer) {
    match timer {
        Timer::Pause(call, secs) => {
            // Settled meanwhile: nothing to do (and nothing listed).
            if !lock(&proxy.state).waiting.contains_key(&call) {
                return;
            }
            let by = By::proxy("no approval came in time");
            let _ = settle(proxy, &call, Settle::Reject(Why::TimedOut(secs)), &by);
        }
        Timer::Cancel(key) => {
            let mut st = lock(&proxy.state);
            let Some(Inflight::Cancelled(call)) = st.pending.get(&key) else {
                return;
            };
            let call = call.clone();
            st.pending.insert(key, Inflight::Abandoned);
            report_answer(
                proxy,
                &call,
                Outcome::Unknown,
                Value::Null,
                &format!(
                    "cancelled by the client, and the server did not answer within {} s",
                    proxy.cancel_timeout
                ),
            );
        }
    }
}

/// A paused `tools/call` held until it is settled.
struct Waiting {
    /// Orders the approvals list.
    seq: u64,
    /// The JSON-RPC id, and its [`id_key`].
    id: Value,
    key: String,
    /// The request as the proxy parsed it (re-serialized), forwarded once
    /// approved.
    line: Vec<u8>,
    tool: String,
    rule: String,
    reason: String,
}

/// Why a paused call is rejected.
#[derive(Clone, Copy, Debug)]
enum Why {
    /// `POST /v1/approvals/{call}/reject`.
    Human,
    /// No answer within the timeout (seconds).
    TimedOut(u64),
    /// The client's `notifications/cancelled`.
    Cancelled,
    /// The client closed its input.
    ClientGone,
}

/// What the threads share.
struct Proxy {
    /// The sessions and their log (in memory without `--store`).
    gateway: Gateway,
    /// The proxy's session: its tenant, id and policy hash.
    tenant: String,
    session: String,
    policy_hash: String,
    state: Mutex<State>,
    /// The server's standard input; `None` once the client closed its side
    /// (dropping it closes the server's input). Written without holding
    /// `state`, so a slow server never stalls decisions.
    server_in: Mutex<Option<ChildStdin>>,
    /// Wait mode's timeout in seconds; `None` in error mode.
    wait: Option<u64>,
    /// `--cancel-timeout`: seconds a cancelled call's answer is waited for.
    cancel_timeout: u64,
    /// Deadlines of paused and cancelled calls.
    timers: Timers,
    /// The tools `tools/list` answers show (declared and named by a grant
    /// of the session's policy); `None` with `--show-all-tools`.
    callable: Option<HashSet<String>>,
    /// The server process.
    child: ChildState,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panic elsewhere must not take the proxy down with it.
    state.lock().unwrap_or_else(|e| e.into_inner())
}

/// Writes one line (with its newline) to the client and flushes it.
fn to_client(line: &[u8]) {
    let mut out = std::io::stdout().lock();
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line);
    buf.push(b'\n');
    if out.write_all(&buf).and_then(|()| out.flush()).is_err() {
        log("cannot write to the client (standard output closed)");
    }
}

fn log(message: &str) {
    eprintln!("agenra mcp-proxy: {}", crate::render::escape(message));
}

/// An answer of the gateway once its record is durable, with its place in
/// the audit log.
fn durable(pending: Result<Pending<ApiOutcome>, ApiError>) -> Result<ApiOutcome, ApiError> {
    let (mut outcome, seq) = pending?.wait()?;
    outcome.audit_seq = seq;
    Ok(outcome)
}

impl Proxy {
    /// Decides the call `id` (the gateway's clock gives its time).
    fn authorize(
        &self,
        id: &str,
        tool: &str,
        args: Map<String, Value>,
    ) -> Result<ApiOutcome, ApiError> {
        durable(self.gateway.authorize(Authorize {
            tenant: Some(self.tenant.clone()),
            session: self.session.clone(),
            call: CallIn {
                id: id.to_string(),
                time: None,
                agent: None,
                tool: tool.to_string(),
                args,
                lineage: Default::default(),
                inferred: Default::default(),
            },
        }))
    }

    /// Reports the result of the running call `call`.
    fn report(&self, call: &str, status: Outcome, output: Value) -> Result<ApiOutcome, ApiError> {
        durable(self.gateway.report(ReportIn {
            tenant: Some(self.tenant.clone()),
            session: self.session.clone(),
            call: call.to_string(),
            time: None,
            status,
            output,
            discovered: Vec::new(),
        }))
    }

    /// Approves (re-checks) or rejects the paused call `call`.
    fn resolve(&self, call: &str, by: &By, approve: bool) -> Result<ApiOutcome, ApiError> {
        durable(self.gateway.resolve(
            call.to_string(),
            ResolveIn {
                tenant: Some(self.tenant.clone()),
                session: Some(self.session.clone()),
                time: by.time,
                digest: by.digest.clone(),
                reason: by.reason.clone(),
            },
            approve,
            &by.actor,
        ))
    }

    /// The calls of the proxy's session and their status.
    fn calls(&self) -> Result<Vec<(String, Status)>, ApiError> {
        self.gateway.calls(Some(self.tenant.clone()), &self.session)
    }
}

/// The number `N` of a call id the proxy made up (`mcp-N:ID`).
fn call_number(id: &str) -> Option<u64> {
    let (n, _) = id.strip_prefix("mcp-")?.split_once(':')?;
    n.parse().ok()
}

/// Opens the log (`--store`, or one in memory) and recovers it.
fn open_gateway(
    store: Option<&Path>,
    policy: CompiledPolicy,
    policy_path: &Path,
) -> Result<Gateway, Failed> {
    let log = match store {
        None => Log::open(Box::new(MemoryBackend::default())),
        Some(path) => match path.to_str() {
            Some(url) if agenra_store::is_postgres_url(url) => Log::open_pg(url),
            _ => Log::open_redb(path),
        },
    };
    let shown =
        || agenra_store::redact(&store.map(|p| p.display().to_string()).unwrap_or_default());
    let log = log.map_err(|e| fail(format!("mcp-proxy: --store {}: {e}", shown())))?;
    Gateway::open(log, policy, &policy_path.display().to_string(), false)
        .map_err(|e| fail(format!("mcp-proxy: --store {}: {e}", shown())))
}

/// Opens the proxy's session, or resumes it from the store: a call the
/// previous run left running (forwarded, no response recorded) is
/// reported `unknown` (it may have run: its units stay spent and its
/// output counts as read), and a call it left waiting for approval is
/// rejected (the request it would answer died with that run). Returns the
/// session's policy hash and the last call number used in it.
fn resume(proxy: &Proxy, compiled: &CompiledPolicy, shown: &str) -> Result<(String, u64), Failed> {
    let view = proxy
        .gateway
        .create_session(
            Some(proxy.tenant.clone()),
            Some(proxy.session.clone()),
            None,
        )
        .and_then(Pending::wait)
        .map_err(|e| {
            fail(format!(
                "mcp-proxy: cannot open session `{}` of tenant `{}`: {}",
                proxy.session, proxy.tenant, e.error
            ))
        })?
        .0;
    let calls = proxy
        .calls()
        .map_err(|e| fail(format!("mcp-proxy: {}", e.error)))?;
    let last = calls
        .iter()
        .filter_map(|(id, _)| call_number(id))
        .max()
        .unwrap_or(0);
    if view.created {
        if !shown.is_empty() {
            log(&format!(
                "new session `{}` of tenant `{}` on store {shown}",
                proxy.session, proxy.tenant
            ));
        }
        return Ok((view.policy_hash, last));
    }
    let (mut unknown, mut rejected) = (0, 0);
    let mut open: Vec<&(String, Status)> = calls
        .iter()
        .filter(|(_, s)| matches!(s, Status::Running | Status::Paused))
        .collect();
    open.sort_by_key(|(id, _)| (call_number(id), id.clone()));
    for (call, status) in open {
        let settled = if *status == Status::Running {
            unknown += 1;
            proxy.report(call, Outcome::Unknown, Value::Null)
        } else {
            rejected += 1;
            proxy.resolve(
                call,
                &By::proxy("resumed: nobody was left to approve it"),
                false,
            )
        };
        settled.map_err(|e| {
            fail(format!(
                "mcp-proxy: resuming session `{}`: call {call}: {}",
                proxy.session, e.error
            ))
        })?;
    }
    log(&format!(
        "resumed session `{}` of tenant `{}` from store {shown} ({} events, {} calls); \
         {unknown} call(s) left running reported `unknown` (units stay spent), \
         {rejected} call(s) left waiting for approval rejected",
        proxy.session,
        proxy.tenant,
        view.events,
        calls.len()
    ));
    if view.policy_hash != compiled.hash().to_string() {
        log(&format!(
            "session `{}` keeps the policy it was opened with ({}); {} applies to new \
             sessions only (start one with --session NAME)",
            proxy.session,
            view.policy_hash,
            compiled.hash()
        ));
    }
    Ok((view.policy_hash, last))
}

/// Runs the proxy until the server exits; the exit code is the server's.
pub fn run(
    policy_path: &Path,
    server: &[String],
    pause: &PauseOptions,
    store: &StoreOptions,
    options: &ProxyOptions,
) -> Result<(), Failed> {
    let cancel_timeout = options.cancel_timeout.unwrap_or(DEFAULT_CANCEL_TIMEOUT);
    if cancel_timeout == 0 {
        return Err(fail(
            "mcp-proxy: --cancel-timeout must be at least 1 second",
        ));
    }
    let wait = pause
        .validate()
        .map_err(|e| fail(format!("mcp-proxy: {e}")))?;
    check_name("tenant", &store.tenant)
        .map_err(|e| fail(format!("mcp-proxy: --tenant: {}", e.error)))?;
    check_name("session", &store.session)
        .map_err(|e| fail(format!("mcp-proxy: --session: {}", e.error)))?;
    let (program, args) = server
        .split_first()
        .ok_or_else(|| fail("mcp-proxy: no server command given (after `--`)"))?;
    let (policy, _) = load_policy(policy_path, false)?;
    let compiled =
        CompiledPolicy::new(policy).map_err(|e| fail(format!("{}: {e}", policy_path.display())))?;
    let gateway = open_gateway(store.store.as_deref(), compiled.clone(), policy_path)?;
    if let Some(w) = &wait {
        // An approval after the proxy's timeout is refused by the gateway.
        gateway.set_pause_timeout(w.timeout);
    }
    let shown = store
        .store
        .as_ref()
        .map(|p| agenra_store::redact(&p.display().to_string()))
        .unwrap_or_default();
    let mut proxy = Proxy {
        gateway,
        tenant: store.tenant.clone(),
        session: store.session.clone(),
        policy_hash: String::new(),
        state: Mutex::new(State {
            pending: HashMap::new(),
            waiting: HashMap::new(),
            waiting_keys: HashMap::new(),
            tasks: HashMap::new(),
            seq: 0,
        }),
        server_in: Mutex::new(None),
        wait: wait.as_ref().map(|w| w.timeout),
        cancel_timeout,
        timers: Timers::default(),
        callable: (!options.show_all_tools).then(|| callable_tools(compiled.policy())),
        child: ChildState::default(),
    };
    let (policy_hash, last) = resume(&proxy, &compiled, &shown)?;
    proxy.policy_hash = policy_hash;
    proxy.state.get_mut().unwrap_or_else(|e| e.into_inner()).seq = last;
    let proxy = Arc::new(proxy);
    let timers = Arc::clone(&proxy);
    std::thread::Builder::new()
        .name("agenra-mcp-timers".into())
        .spawn(move || run_timers(&timers))
        .map_err(|e| fail(format!("mcp-proxy: cannot start the timer thread: {e}")))?;
    // Listen before the server starts, so a bad address starts nothing.
    let desk = match &wait {
        Some(w) => {
            let desk: Arc<dyn ApprovalDesk> = Arc::clone(&proxy) as Arc<dyn ApprovalDesk>;
            let server = DeskServer::spawn(desk, Arc::clone(&w.perimeter), &w.listen)
                .map_err(|e| fail(format!("mcp-proxy: --approvals-listen: {e}")))?;
            log(&format!(
                "approvals on http://{} (tenant `{}`, session `{}`); \
                 a paused call waits at most {} s",
                server.addr(),
                proxy.tenant,
                proxy.session,
                w.timeout
            ));
            Some(server)
        }
        None => None,
    };
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| fail(format!("mcp-proxy: cannot start `{program}`: {e}")))?;
    let (Some(server_in), Some(server_out)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(fail("mcp-proxy: the server's pipes are missing"));
    };
    *lock_in(&proxy) = Some(server_in);
    proxy.child.pid.store(child.id(), Ordering::SeqCst);
    watch_signals(&proxy)?;

    let client_proxy = Arc::clone(&proxy);
    std::thread::spawn(move || client_to_server(&client_proxy));

    let mut reader = BufReader::new(server_out);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                log(&format!("cannot read from the server: {e}"));
                break;
            }
        }
        let text = trim_newline(&line);
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match from_server(&proxy, text) {
            Some(instead) => to_client(&instead),
            None => to_client(text),
        }
    }
    // The server closed its output: the client's ends too (its reader sees
    // the end now, not when the server process is gone), and a server that
    // does not exit is ended (MCP's stdio shutdown: SIGTERM, then SIGKILL).
    close_client_output();
    let status = end_child(&proxy, &mut child)
        .map_err(|e| fail(format!("mcp-proxy: waiting for the server: {e}")))?;
    // The process exits now: approval requests in flight are cut rather
    // than waited for (an idle client connection could hold a graceful
    // shutdown open).
    std::mem::forget(desk);
    let signal = proxy.child.stopped_by.load(Ordering::SeqCst);
    if signal != 0 {
        return Err(Failed(u8::try_from(128 + signal).unwrap_or(1)));
    }
    match status.code() {
        Some(0) => Ok(()),
        Some(code) => Err(Failed(u8::try_from(code).unwrap_or(1))),
        None => Err(Failed(1)),
    }
}

fn lock_in(proxy: &Proxy) -> MutexGuard<'_, Option<ChildStdin>> {
    proxy.server_in.lock().unwrap_or_else(|e| e.into_inner())
}

fn trim_newline(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Writes one line (with its newline) to the server; false when its input
/// is closed.
fn to_server(proxy: &Proxy, line: &[u8]) -> bool {
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line);
    buf.push(b'\n');
    let mut server_in = lock_in(proxy);
    let Some(w) = server_in.as_mut() else {
        return false;
    };
    if w.write_all(&buf).and_then(|()| w.flush()).is_err() {
        *server_in = None;
        return false;
    }
    true
}

/// Reads the client until it closes its side, then closes the server's
/// input (which asks a well-behaved MCP server to exit) and rejects the
/// calls still waiting for approval (nobody is left to answer).
fn client_to_server(proxy: &Arc<Proxy>) {
    let stdin = std::io::stdin();
    let mut reader = stdin.lock();
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                log(&format!("cannot read from the client: {e}"));
                break;
            }
        }
        let text = trim_newline(&line);
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let forward = match from_client(proxy, text) {
            Action::Answer(answer) => {
                to_client(answer.as_bytes());
                continue;
            }
            Action::Drop => continue,
            Action::Forward => Cow::Borrowed(text),
            Action::ForwardParsed(line) => Cow::Owned(line),
        };
        if !to_server(proxy, &forward) {
            log("cannot write to the server (its input is closed)");
            break;
        }
    }
    // Dropping the server's input closes it.
    drop(lock_in(proxy).take());
    reject_waiting(proxy);
    // MCP's stdio shutdown: a server that does not exit once its input
    // closed is sent SIGTERM, then SIGKILL.
    stop_child(proxy, "the client closed its input");
}

/// Rejects the calls still waiting for approval (nobody is left to answer).
fn reject_waiting(proxy: &Proxy) {
    let waiting: Vec<String> = lock(&proxy.state).waiting.keys().cloned().collect();
    for call in waiting {
        let by = By::proxy("the client is gone");
        let _ = settle(proxy, &call, Settle::Reject(Why::ClientGone), &by);
    }
}

/// How long the server gets to exit after its input closed, and after
/// SIGTERM.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// The server process: its pid, and whether it was reaped (after which the
/// pid may belong to another process and is never signalled).
#[derive(Default)]
struct ChildState {
    pid: AtomicU32,
    reaped: AtomicBool,
    /// The signal that stopped the proxy (0: none): its exit code is then
    /// 128 + it, whatever the server's.
    stopped_by: AtomicI32,
}

/// Sends `signal` to the server unless it was reaped.
fn signal_child(proxy: &Proxy, signal: libc::c_int) {
    let pid = proxy.child.pid.load(Ordering::SeqCst);
    if pid == 0 || proxy.child.reaped.load(Ordering::SeqCst) {
        return;
    }
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) on the pid of our own child, not reaped yet (so the
    // pid is still its); no memory is shared.
    unsafe {
        libc::kill(pid, signal);
    }
}

/// Waits up to `grace` for the server to be reaped.
fn reaped_within(proxy: &Proxy, grace: Duration) -> bool {
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if proxy.child.reaped.load(Ordering::SeqCst) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    proxy.child.reaped.load(Ordering::SeqCst)
}

/// Ends the server if it does not exit by itself: waits `EXIT_GRACE`,
/// sends SIGTERM, waits again, sends SIGKILL (MCP's stdio shutdown).
fn stop_child(proxy: &Proxy, why: &str) {
    if reaped_within(proxy, EXIT_GRACE) {
        return;
    }
    log(&format!(
        "{why}, and the server has not exited: sending it SIGTERM"
    ));
    signal_child(proxy, libc::SIGTERM);
    if reaped_within(proxy, EXIT_GRACE) {
        return;
    }
    log("the server has not exited after SIGTERM: sending it SIGKILL");
    signal_child(proxy, libc::SIGKILL);
}

/// Waits for the server once its output closed: SIGTERM after
/// `EXIT_GRACE`, SIGKILL after another; marks it reaped.
fn end_child(
    proxy: &Proxy,
    child: &mut std::process::Child,
) -> std::io::Result<std::process::ExitStatus> {
    let mut signalled = 0;
    let mut deadline = Instant::now() + EXIT_GRACE;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() >= deadline {
            match signalled {
                0 => {
                    log("the server closed its output but has not exited: sending it SIGTERM");
                    signal_child(proxy, libc::SIGTERM);
                }
                1 => {
                    log("the server has not exited after SIGTERM: sending it SIGKILL");
                    signal_child(proxy, libc::SIGKILL);
                }
                _ => break child.wait()?,
            }
            signalled += 1;
            deadline = Instant::now() + EXIT_GRACE;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    proxy.child.reaped.store(true, Ordering::SeqCst);
    Ok(status)
}

/// Closes the client's end of the proxy's standard output: file
/// descriptor 1 is pointed at /dev/null (so it is never reused for another
/// file), which closes the pipe the client reads.
fn close_client_output() {
    let _ = std::io::stdout().lock().flush();
    // SAFETY: open/dup2/close on file descriptors this process owns; the
    // path is a NUL-terminated literal.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
        if null >= 0 {
            libc::dup2(null, 1);
            libc::close(null);
        }
    }
}

/// On SIGTERM, SIGINT or SIGHUP the proxy stops as a client closing its
/// input would have it (waiting calls rejected, the server's input
/// closed), ends the server (SIGTERM, then SIGKILL) and exits with 128 +
/// the signal's number.
fn watch_signals(proxy: &Arc<Proxy>) -> Result<(), Failed> {
    use tokio::signal::unix::{signal, SignalKind};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| fail(format!("mcp-proxy: cannot watch signals: {e}")))?;
    let (mut term, mut int, mut hup) = runtime
        .block_on(async {
            Ok::<_, std::io::Error>((
                signal(SignalKind::terminate())?,
                signal(SignalKind::interrupt())?,
                signal(SignalKind::hangup())?,
            ))
        })
        .map_err(|e| fail(format!("mcp-proxy: cannot watch signals: {e}")))?;
    let proxy = Arc::clone(proxy);
    std::thread::Builder::new()
        .name("agenra-mcp-signals".into())
        .spawn(move || {
            let (name, number) = runtime.block_on(async {
                tokio::select! {
                    _ = term.recv() => ("SIGTERM", libc::SIGTERM),
                    _ = int.recv() => ("SIGINT", libc::SIGINT),
                    _ = hup.recv() => ("SIGHUP", libc::SIGHUP),
                }
            });
            log(&format!("{name}: stopping, and ending the server"));
            proxy.child.stopped_by.store(number, Ordering::SeqCst);
            drop(lock_in(&proxy).take());
            reject_waiting(&proxy);
            signal_child(&proxy, libc::SIGTERM);
            if !reaped_within(&proxy, EXIT_GRACE) {
                signal_child(&proxy, libc::SIGKILL);
                reaped_within(&proxy, EXIT_GRACE);
            }
            std::process::exit(128 + number);
        })
        .map_err(|e| fail(format!("mcp-proxy: cannot watch signals: {e}")))?;
    Ok(())
}

/// A `tools/call` request from the client: its id, tool name and arguments.
struct ToolCall<'a> {
    id: &'a Value,
    name: &'a str,
    arguments: Map<String, Value>,
}

/// Recognizes a `tools/call` request (a notification, without an id, is
/// not one: there is nobody to answer). `Err` holds why a `tools/call`
/// request is malformed.
fn tool_call(message: &Value) -> Option<Result<ToolCall<'_>, String>> {
    let obj = message.as_object()?;
    if obj.get("method")?.as_str()? != "tools/call" {
        return None;
    }
    let id = obj.get("id").filter(|id| !id.is_null())?;
    let params = obj.get("params").and_then(Value::as_object);
    let Some(name) = params.and_then(|p| p.get("name")).and_then(Value::as_str) else {
        return Some(Err("`params.name` is missing or not a string".into()));
    };
    let arguments = match params.and_then(|p| p.get("arguments")) {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Some(Err("`params.arguments` is not an object".into())),
    };
    Some(Ok(ToolCall {
        id,
        name,
        arguments,
    }))
}

/// What becomes of a line from the client.
enum Action {
    /// The proxy answers it itself and does not forward it.
    Answer(String),
    /// Not forwarded, not answered (a `tools/call` notification; a call now
    /// waiting for approval, answered once settled; a cancellation of one).
    Drop,
    /// Forwarded as the client sent it.
    Forward,
    /// Forwarded as the proxy parsed it (re-serialized): what the server
    /// parses is then what was decided, byte for byte.
    ForwardParsed(Vec<u8>),
}

/// Parses a line of JSON as the proxy decides on it: well-formed UTF-8 (no
/// invalid or overlong sequences), no lone surrogate in an escape, numbers
/// that are finite `f64`s (`1e400`, `NaN`, `Infinity` are not JSON numbers
/// here), no key twice in an object, and at most serde_json's 128 levels of
/// nesting. `Err`: the JSON-RPC error code (`-32700` for what is not JSON by
/// these rules, `-32600` for a duplicated key) and why.
fn parse_line(line: &[u8]) -> Result<Value, (i64, String)> {
    match serde_json::from_slice::<agenra_core::strict::StrictValue>(line) {
        Ok(v) => Ok(v.0),
        Err(e) if e.classify() == serde_json::error::Category::Data => {
            Err((-32600, format!("ambiguous message: {e}")))
        }
        Err(e) => Err((-32700, format!("parse error: {e}"))),
    }
}

/// A JSON-RPC id as the peers compare it: strings by their text, numbers by
/// their value as a double (`1`, `1.0` and `1e0` are one id, as they are to
/// a JavaScript peer, which answers `1.0` as `1`); `None` for anything else
/// (`null`, booleans, arrays, objects are no request ids).
fn id_key(id: &Value) -> Option<String> {
    match id {
        Value::String(s) => Some(format!("s{s}")),
        Value::Number(n) => {
            let f = n.as_f64()?;
            // -0 is 0.
            let f = if f == 0.0 { 0.0 } else { f };
            Some(format!("n{f:?}"))
        }
        _ => None,
    }
}

/// A line from the client: parsed as the proxy decides on it (a line it
/// cannot parse is refused, since it might hold a `tools/call` a more
/// lenient server would run), then forwarded, answered or dropped.
fn from_client(proxy: &Arc<Proxy>, line: &[u8]) -> Action {
    let message = match parse_line(line) {
        Ok(m) => m,
        Err((code, why)) => {
            // The id, when a lenient reading finds one (a duplicated key).
            let id = serde_json::from_slice::<Value>(line)
                .ok()
                .and_then(|m| m.get("id").cloned())
                .filter(|id| id_key(id).is_some())
                .unwrap_or(Value::Null);
            log(&format!(
                "client sent a line the proxy cannot parse exactly ({why}); refused, \
                 not forwarded"
            ));
            return Action::Answer(rpc_error(&id, code, &format!("agenra: {why}")));
        }
    };
    // A Python server reads lines with universal newlines, so a bare CR
    // inside a line would split it there; a re-serialized line has none.
    let as_sent = || {
        if line.contains(&b'\r') {
            Action::ForwardParsed(message.to_string().into_bytes())
        } else {
            Action::Forward
        }
    };
    // A batch would carry its tools/call past the monitor: refuse it whole
    // (MCP since 2025-06-18 has no batches), and one reusing a live id.
    if let Value::Array(items) = &message {
        if items
            .iter()
            .any(|m| m.get("method").and_then(Value::as_str) == Some("tools/call"))
        {
            log("client sent a batch with a tools/call; refused, not forwarded");
            return Action::Answer(rpc_error(
                &Value::Null,
                -32600,
                "agenra: a batch may not contain tools/call: send each call alone",
            ));
        }
        let st = lock(&proxy.state);
        if items
            .iter()
            .filter_map(|m| m.get("id").and_then(id_key))
            .any(|key| st.live(&key))
        {
            log("client sent a batch reusing the id of a request in flight; refused");
            return Action::Answer(rpc_error(
                &Value::Null,
                -32600,
                "agenra: a batch reuses the id of a request still in flight",
            ));
        }
        return as_sent();
    }
    let Some(method) = message.get("method") else {
        // A response to a server's request, or not a message at all.
        return as_sent();
    };
    let is_call = method.as_str() == Some("tools/call");
    let id = match message.get("id") {
        None | Some(Value::Null) => {
            // A tools/call notification has nobody to answer: dropped,
            // never run.
            if is_call {
                log("client sent tools/call as a notification (no id); dropped");
                return Action::Drop;
            }
            // The client gives up on a call waiting for approval: it is
            // rejected, and (as MCP asks of a cancelled request) not
            // answered. The server never saw the call, so the notification
            // stops here.
            if let Some(call) = cancelled_waiting(&proxy.state, &message) {
                log(&format!(
                    "call {call} cancelled by the client while waiting"
                ));
                let by = By::proxy("cancelled by the client");
                let _ = settle(proxy, &call, Settle::Reject(Why::Cancelled), &by);
                return Action::Drop;
            }
            // The client gives up on a running call: the notification goes
            // on to the server (which may stop it), and the call's outcome
            // is `unknown` whatever the server answers (a cancelled call
            // may have run in part; the client ignores the answer), or when
            // nothing comes within `--cancel-timeout`.
            if let Some(key) = cancelled_running(&proxy.state, &message) {
                proxy.timers.add(
                    Duration::from_secs(proxy.cancel_timeout),
                    Timer::Cancel(key),
                );
            }
            return as_sent();
        }
        Some(id) => id,
    };
    let Some(key) = id_key(id) else {
        log("client sent a request whose id is not a string or a number; refused");
        return Action::Answer(rpc_error(
            &Value::Null,
            -32600,
            "agenra: a request id must be a string or a number",
        ));
    };
    // The call id `mcp-N:ID` must fit the monitor's 1,024 bytes: a longer
    // id is refused (any request, so the rule is one), never forwarded.
    let shown_id = id.to_string();
    if shown_id.len() > MAX_ID_BYTES {
        log(&format!(
            "client sent a request whose id is {} bytes long (at most {MAX_ID_BYTES}); refused",
            shown_id.len()
        ));
        return Action::Answer(rpc_error(
            id,
            -32600,
            &format!(
                "agenra: a request id may be at most {MAX_ID_BYTES} bytes of JSON \
                 (this one is {})",
                shown_id.len()
            ),
        ));
    }
    let mut st = lock(&proxy.state);
    // A request reusing the id of one in flight would make its answer look
    // like the other's (a `ping`'s `{}` taken for a call's result).
    if st.live(&key) {
        log(&format!(
            "client reused the id {id} of a request still in flight; refused"
        ));
        return Action::Answer(rpc_error(
            id,
            -32600,
            "agenra: a request with this id is still in flight",
        ));
    }
    if !is_call {
        let task = || {
            message
                .get("params")
                .and_then(|p| p.get("taskId"))
                .and_then(Value::as_str)
                .filter(|t| st.tasks.contains_key(*t))
                .map(str::to_string)
        };
        let inflight = match method.as_str() {
            Some("tools/list") if proxy.callable.is_some() => Inflight::ToolsList,
            Some("tasks/result") => task().map_or(Inflight::Other, Inflight::TaskResult),
            Some("tasks/cancel") => task().map_or(Inflight::Other, Inflight::TaskCancel),
            _ => Inflight::Other,
        };
        st.pending.insert(key, inflight);
        return as_sent();
    }
    let call = match tool_call(&message) {
        Some(Ok(call)) => call,
        Some(Err(why)) => {
            log(&format!("malformed tools/call: {why}"));
            return Action::Answer(rpc_error(id, -32602, &format!("agenra: {why}")));
        }
        None => return Action::Drop, // not reached: checked above
    };
    let forward = message.to_string().into_bytes();
    // The call id `mcp-N:ID`, N past every call of the session (a resumed
    // one included). An id another proxy on the same session took already
    // is answered with its record (`replayed`) or refused (409): the
    // proxy then takes the next N, never that answer.
    let mut attempts = 0;
    let (call_id, decision) = loop {
        st.seq += 1;
        let call_id = format!("mcp-{}:{}", st.seq, call.id);
        let taken = match proxy.authorize(&call_id, call.name, call.arguments.clone()) {
            Ok(d) if !d.replayed => break (call_id, d),
            Ok(_) => String::from("it was decided already"),
            Err(e) if e.status == 409 && e.field.as_deref() == Some("call.id") => e.error,
            Err(e) => {
                log(&format!("call {call_id} ({}): {}", call.name, e.error));
                return Action::Answer(tool_error(
                    call.id,
                    &format!(
                        "agenra: the monitor could not decide this call: {}",
                        e.error
                    ),
                ));
            }
        };
        attempts += 1;
        log(&format!(
            "call id {call_id} is taken in session `{}` ({taken}); trying the next one",
            proxy.session
        ));
        if attempts >= ID_ATTEMPTS {
            return Action::Answer(tool_error(
                call.id,
                "agenra: the monitor could not decide this call: no free call id \
                 (is another proxy driving this session?)",
            ));
        }
    };
    let rule = decision.rule.clone().unwrap_or_else(|| "?".into());
    let reason = decision.reason.clone();
    let verdict = decision.decision;
    match verdict {
        Some(v) if v == Verdict::Allow.as_str() => {
            st.pending.insert(key, Inflight::Call(call_id));
            Action::ForwardParsed(forward)
        }
        Some(v) if v == Verdict::Pause.as_str() && proxy.wait.is_some() => {
            let timeout = proxy.wait.unwrap_or(DEFAULT_PAUSE_TIMEOUT);
            log(&format!(
                "PAUSE {} by `{rule}`: {reason}; call {call_id} waits for approval \
                 (POST /v1/approvals/{call_id}/approve or /reject) for {timeout} s",
                call.name
            ));
            let seq = st.seq;
            st.waiting_keys.insert(key.clone(), call_id.clone());
            st.waiting.insert(
                call_id.clone(),
                Waiting {
                    seq,
                    id: call.id.clone(),
                    key,
                    line: forward,
                    tool: call.name.to_string(),
                    rule,
                    reason,
                },
            );
            drop(st);
            // One timer thread serves every deadline.
            proxy
                .timers
                .add(Duration::from_secs(timeout), Timer::Pause(call_id, timeout));
            Action::Drop
        }
        Some(v) if v == Verdict::Pause.as_str() => {
            log(&format!("PAUSE {} by `{rule}`: {reason}", call.name));
            // Error mode: nobody approves through the proxy, the units go back.
            let by = By::proxy("--on-pause error: nobody approves through the proxy");
            if let Err(e) = proxy.resolve(&call_id, &by, false) {
                log(&format!(
                    "call {call_id}: cannot withdraw the paused call: {}",
                    e.error
                ));
            }
            Action::Answer(tool_error(
                call.id,
                &format!(
                    "agenra: PAUSE by rule `{rule}`: {reason}; this call needs a human's approval, \
                     which this MCP proxy does not wait for (--on-pause error), so it was not run"
                ),
            ))
        }
        _ if rule == "well-formed" && reason == format!("unknown tool `{}`", call.name) => {
            // A tool the policy does not declare: the JSON-RPC error MCP
            // gives for an unknown tool (as the server would answer it).
            log(&format!("DENY {} by `{rule}`: {reason}", call.name));
            Action::Answer(rpc_error(
                call.id,
                -32602,
                &format!(
                    "Unknown tool: {} (agenra: DENY by rule `{rule}`: {reason})",
                    call.name
                ),
            ))
        }
        _ => {
            log(&format!("DENY {} by `{rule}`: {reason}", call.name));
            Action::Answer(tool_error(
                call.id,
                &format!("agenra: DENY by rule `{rule}`: {reason}"),
            ))
        }
    }
}

/// The call id of the waiting call a `notifications/cancelled` names.
fn cancelled_waiting(state: &Mutex<State>, message: &Value) -> Option<String> {
    if message.get("method").and_then(Value::as_str) != Some("notifications/cancelled") {
        return None;
    }
    let request = id_key(message.get("params")?.get("requestId")?)?;
    lock(state).waiting_keys.get(&request).cloned()
}

/// The id key of the running call a `notifications/cancelled` names, now
/// marked cancelled.
fn cancelled_running(state: &Mutex<State>, message: &Value) -> Option<String> {
    if message.get("method").and_then(Value::as_str) != Some("notifications/cancelled") {
        return None;
    }
    let request = id_key(message.get("params")?.get("requestId")?)?;
    let mut st = lock(state);
    let entry = st.pending.get_mut(&request)?;
    let Inflight::Call(call) = entry else {
        return None;
    };
    log(&format!(
        "call {call} cancelled by the client while running; its outcome will be `unknown`"
    ));
    *entry = Inflight::Cancelled(std::mem::take(call));
    Some(request)
}

/// How a waiting call is settled.
#[derive(Clone, Copy, Debug)]
enum Settle {
    /// A human approved it: the monitor re-checks it.
    Approve,
    /// It is rejected: its units come back.
    Reject(Why),
}

/// Who settles a waiting call, with what they were shown and why.
struct By {
    /// `role:name` of the approver's credential, or `server:mcp-proxy`.
    actor: String,
    digest: Option<String>,
    reason: Option<String>,
    /// The time the approver's client claimed (recorded only).
    time: Option<u64>,
}

impl By {
    /// The proxy itself (a timeout, a cancellation, a resumed session).
    fn proxy(reason: &str) -> By {
        By {
            actor: "server:mcp-proxy".into(),
            digest: None,
            reason: Some(reason.into()),
            time: None,
        }
    }
}

/// Settles the waiting call `call` (the gateway's clock gives the time):
/// the approval or rejection goes to the monitor, then the client gets
/// its answer (an approved call admitted at re-check is forwarded, and
/// answered by the server). `Err` (nothing changed) when the call is not
/// waiting, or the monitor refuses the event.
fn settle(proxy: &Proxy, call: &str, how: Settle, by: &By) -> Result<ApiOutcome, ApiError> {
    let mut st = lock(&proxy.state);
    if !st.waiting.contains_key(call) {
        // Listing the session's calls is not done under the state lock.
        drop(st);
        let known = proxy
            .calls()
            .is_ok_and(|calls| calls.iter().any(|(id, _)| id == call));
        return Err(if known {
            ApiError::field(
                409,
                "call",
                format!("call `{call}` does not wait for approval (it was settled already)"),
            )
        } else {
            ApiError::field(
                404,
                "call",
                format!(
                    "no call `{call}` of tenant `{}` waits for approval",
                    proxy.tenant
                ),
            )
        });
    }
    let outcome = proxy.resolve(call, by, matches!(how, Settle::Approve))?;
    // An approval that came after the pause expired was turned into a
    // rejection by the gateway.
    let how = match (how, outcome.kind) {
        (Settle::Approve, "reject") => Settle::Reject(Why::TimedOut(proxy.wait.unwrap_or(0))),
        (how, _) => how,
    };
    let Some(w) = st.waiting.remove(call) else {
        return Ok(outcome); // checked above, under the same lock
    };
    st.waiting_keys.remove(&w.key);
    let verdict = outcome.decision;
    let paused = format!("agenra: PAUSE by rule `{}`: {}", w.rule, w.reason);
    match (how, verdict) {
        (Settle::Approve, Some(v)) if v == Verdict::Allow.as_str() => {
            log(&format!("call {call} ({}) approved; forwarded", w.tool));
            st.pending
                .insert(w.key.clone(), Inflight::Call(call.to_string()));
            drop(st);
            if !to_server(proxy, &w.line) {
                // The server is gone: the call never ran, its unit returns.
                let mut st = lock(&proxy.state);
                st.pending.remove(&w.key);
                if let Err(e) = proxy.report(call, Outcome::Failed, Value::Null) {
                    log(&format!(
                        "call {call}: cannot report its result: {}",
                        e.error
                    ));
                }
                drop(st);
                log(&format!(
                    "call {call}: approved, but the server's input is closed"
                ));
                to_client(
                    tool_error(
                        &w.id,
                        "agenra: approved, but the MCP server's input is closed, so it was not run",
                    )
                    .as_bytes(),
                );
            }
        }
        (Settle::Approve, Some(v)) if v == Verdict::Pause.as_str() => {
            // Not expected (an approval admits or denies); keep waiting.
            st.waiting_keys.insert(w.key.clone(), call.to_string());
            st.waiting.insert(call.to_string(), w);
        }
        (Settle::Approve, _) => {
            drop(st);
            log(&format!(
                "call {call} ({}) approved, but DENY at re-check by `{}`: {}",
                w.tool,
                outcome.rule.as_deref().unwrap_or("?"),
                outcome.reason
            ));
            to_client(
                tool_error(
                    &w.id,
                    &format!(
                        "agenra: DENY by rule `{}` (approved by a human, then re-checked): {}",
                        outcome.rule.as_deref().unwrap_or("?"),
                        outcome.reason
                    ),
                )
                .as_bytes(),
            );
        }
        (Settle::Reject(why), _) => {
            drop(st);
            let text = match why {
                Why::Human => format!(
                    "{paused}; a human rejected it (POST /v1/approvals/{call}/reject), \
                     so it was not run"
                ),
                Why::TimedOut(secs) => format!(
                    "{paused}; no approval came within {secs} s, so it timed out and \
                     was rejected; it was not run"
                ),
                Why::Cancelled | Why::ClientGone => String::new(),
            };
            log(&format!("call {call} ({}) rejected: {why:?}", w.tool));
            // A cancelled request gets no answer (MCP); a gone client neither.
            if !text.is_empty() {
                to_client(tool_error(&w.id, &text).as_bytes());
            }
        }
    }
    Ok(outcome)
}

/// The approval endpoints (`agenra_gateway::desk`) over the proxy's one
/// session (`--tenant`, `--session`; by default `default` and `mcp-proxy`).
impl ApprovalDesk for Proxy {
    fn health(&self) -> Health {
        let st = lock(&self.state);
        Health {
            status: if self.gateway.is_failed() {
                "failed"
            } else {
                "ok"
            },
            policy_hash: self.policy_hash.clone(),
            sessions: 1,
            pending_approvals: st.waiting.len(),
        }
    }

    fn approvals(&self, tenant: Option<String>) -> Result<Vec<PendingCall>, ApiError> {
        let tenant = tenant.unwrap_or_else(|| DEFAULT_TENANT.to_string());
        check_name("tenant", &tenant)?;
        if tenant != self.tenant {
            return Ok(Vec::new());
        }
        // The gateway's view (digest, expiry, arguments) of the calls this
        // proxy holds, listed without holding the state lock (which every
        // client line takes); the lock is then taken once to filter.
        let mut calls: Vec<PendingCall> = self
            .gateway
            .approvals(Some(tenant))?
            .into_iter()
            .filter(|p| p.session == self.session)
            .collect();
        let st = lock(&self.state);
        calls.retain(|p| st.waiting.contains_key(&p.call));
        calls.sort_by_key(|p| st.waiting.get(&p.call).map_or(0, |w| w.seq));
        Ok(calls)
    }

    fn refused(&self, r: agenra_gateway::perimeter::Refusal) {
        self.gateway.record_refusal(r);
    }

    fn resolve(
        &self,
        call: String,
        req: ResolveIn,
        approve: bool,
        actor: &str,
    ) -> Result<ApiOutcome, ApiError> {
        let tenant = req.tenant.unwrap_or_else(|| DEFAULT_TENANT.to_string());
        check_name("tenant", &tenant)?;
        if let Some(session) = &req.session {
            check_name("session", session)?;
            if tenant != self.tenant || *session != self.session {
                return Err(ApiError::field(
                    404,
                    "session",
                    format!(
                        "unknown session `{session}` of tenant `{tenant}` \
                         (this MCP proxy has only session `{}` of tenant `{}`)",
                        self.session, self.tenant
                    ),
                ));
            }
        }
        if tenant != self.tenant {
            return Err(ApiError::field(
                404,
                "call",
                format!("no call `{call}` of tenant `{tenant}` waits for approval"),
            ));
        }
        let how = if approve {
            Settle::Approve
        } else {
            Settle::Reject(Why::Human)
        };
        let by = By {
            actor: actor.to_string(),
            digest: req.digest,
            reason: req.reason,
            time: req.time,
        };
        settle(self, &call, how, &by)
    }
}

/// A line from the server: a response to a forwarded `tools/call` is
/// reported to the monitor (durably, before the caller forwards the line).
///
/// The client reads the line with its own parser, so a line the proxy
/// cannot parse exactly is still an answer it may act on: it is read again
/// leniently (invalid UTF-8 and lone surrogates replaced) to find which
/// call it answers, and that call is reported `unknown` (units kept, its
/// output label merged); when not even that finds its id, every call in
/// flight is reported `unknown`.
fn from_server(proxy: &Proxy, line: &[u8]) -> Option<Vec<u8>> {
    let (message, exact) = match parse_line(line) {
        // A bare CR splits the line for a client reading universal newlines.
        Ok(m) => (m, !line.contains(&b'\r')),
        Err((_, why)) => {
            log(&format!(
                "server sent a line the proxy cannot parse exactly ({why}); forwarded"
            ));
            match lenient(line) {
                Some(m) => (m, false),
                None => {
                    // Other requests stay in flight: their ids stay taken.
                    let mut st = lock(&proxy.state);
                    let mut calls = Vec::new();
                    st.pending.retain(|_, f| match f {
                        Inflight::Call(call) | Inflight::Cancelled(call) => {
                            calls.push(std::mem::take(call));
                            false
                        }
                        _ => true,
                    });
                    calls.sort_by_key(|c| call_number(c));
                    for call in calls {
                        report_answer(proxy, &call, Outcome::Unknown, Value::Null, &why);
                    }
                    return None;
                }
            }
        }
    };
    match &message {
        // A batch of responses: whatever the client makes of it, the calls
        // it answers are reported `unknown`.
        Value::Array(items) => {
            for item in items {
                server_message(proxy, item, false);
            }
            None
        }
        other => server_message(proxy, other, exact),
    }
}

/// A message from the server (`exact`: parsed as the client parses it).
/// `Some`: the line to forward instead (a `tools/list` answer showing only
/// the tools the session may call).
fn server_message(proxy: &Proxy, message: &Value, exact: bool) -> Option<Vec<u8>> {
    let obj = message.as_object()?;
    if obj.contains_key("method") {
        return None; // a request or notification from the server
    }
    let key = obj.get("id").and_then(id_key)?;
    let mut st = lock(&proxy.state);
    let call_id = match st.pending.remove(&key)? {
        Inflight::Call(call) => call,
        Inflight::Cancelled(call) => {
            report_answer(
                proxy,
                &call,
                Outcome::Unknown,
                Value::Null,
                "cancelled by the client while running (whatever the server answers)",
            );
            return None;
        }
        Inflight::TaskResult(task) => {
            let call = st.tasks.remove(&task)?;
            let (status, output, why) = if exact {
                classify(obj)
            } else {
                (Outcome::Unknown, Value::Null, UNPARSEABLE)
            };
            // An error to `tasks/result` may be about the task (expired,
            // unknown), not the tool: the call may have run.
            let (status, why) = match (status, obj.get("error")) {
                (Outcome::Failed, Some(_)) => (
                    Outcome::Unknown,
                    "the server answered the task's result with a JSON-RPC error",
                ),
                (status, _) => (status, why),
            };
            report_answer(proxy, &call, status, output, why);
            return None;
        }
        Inflight::TaskCancel(task) => {
            if let Some(call) = st.tasks.remove(&task) {
                report_answer(
                    proxy,
                    &call,
                    Outcome::Unknown,
                    Value::Null,
                    "its task was cancelled by the client",
                );
            }
            return None;
        }
        Inflight::ToolsList => return exact.then(|| visible_tools(proxy, message)).flatten(),
        Inflight::Abandoned | Inflight::Other => return None,
    };
    if exact {
        // A task handle (MCP 2025-11-25): the call runs on as a task; its
        // result comes with the client's `tasks/result`.
        if let Some(task) = task_handle(obj) {
            log(&format!(
                "call {call_id} runs as task `{task}`; its result is reported when the \
                 client fetches it (tasks/result)"
            ));
            st.tasks.insert(task, call_id);
            return None;
        }
    }
    let (status, output, why) = if exact {
        classify(obj)
    } else {
        (Outcome::Unknown, Value::Null, UNPARSEABLE)
    };
    report_answer(proxy, &call_id, status, output, why);
    drop(st);
    None
}

const UNPARSEABLE: &str = "the server's answer cannot be parsed exactly";

/// The task id of a task handle (`{"result": {"task": {"taskId": ...}}}`,
/// MCP 2025-11-25's `CreateTaskResult`).
fn task_handle(obj: &Map<String, Value>) -> Option<String> {
    let result = obj.get("result")?.as_object()?;
    if result.contains_key("content") {
        return None;
    }
    let id = result.get("task")?.get("taskId")?.as_str()?;
    (!id.is_empty() && id.len() <= MAX_ID_BYTES).then(|| id.to_string())
}

/// What an answer to a `tools/call` (or its task's `tasks/result`) reports.
fn classify(obj: &Map<String, Value>) -> (Outcome, Value, &'static str) {
    match (obj.get("result"), obj.get("error")) {
        (Some(Value::Object(result)), None) => {
            let content = matches!(result.get("content"), Some(Value::Array(_)));
            match result.get("isError") {
                _ if !content => (
                    Outcome::Unknown,
                    Value::Null,
                    "the server's answer is not a tools/call result (no `content` list)",
                ),
                None | Some(Value::Bool(false)) => {
                    (Outcome::Succeeded, Value::Object(result.clone()), "")
                }
                Some(Value::Bool(true)) => (Outcome::Failed, Value::Null, ""),
                Some(_) => (
                    Outcome::Unknown,
                    Value::Null,
                    "the server's answer has an `isError` that is not a boolean",
                ),
            }
        }
        (None, Some(Value::Object(_))) => (Outcome::Failed, Value::Null, ""),
        _ => (
            Outcome::Unknown,
            Value::Null,
            "the server's answer is not a JSON-RPC result or error",
        ),
    }
}

/// A `tools/list` answer showing only the tools the session may call;
/// `None` (forwarded unchanged) when it lists no tools.
fn visible_tools(proxy: &Proxy, message: &Value) -> Option<Vec<u8>> {
    let callable = proxy.callable.as_ref()?;
    let mut message = message.clone();
    let tools = message
        .get_mut("result")?
        .get_mut("tools")?
        .as_array_mut()?;
    let before = tools.len();
    tools.retain(|t| {
        t.get("name")
            .and_then(Value::as_str)
            .is_some_and(|n| callable.contains(n))
    });
    if tools.len() == before {
        return None; // nothing hidden: forwarded byte for byte
    }
    {
        log(&format!(
            "tools/list: {} of {before} tool(s) hidden (the policy grants them never; \
             --show-all-tools shows them)",
            before - tools.len()
        ));
    }
    Some(message.to_string().into_bytes())
}

/// Reports the result of `call` (`why` says why an answer was not taken).
fn report_answer(proxy: &Proxy, call: &str, status: Outcome, output: Value, why: &str) {
    if status == Outcome::Unknown {
        log(&format!(
            "call {call}: {why}; reported `unknown` (its units stay spent, its output \
             counts as read)"
        ));
    }
    if let Err(e) = proxy.report(call, status, output) {
        log(&format!(
            "call {call}: cannot report its result: {}",
            e.error
        ));
    }
}

/// A line read leniently, only to find which call it answers: invalid
/// UTF-8 and lone surrogate escapes become U+FFFD.
fn lenient(line: &[u8]) -> Option<Value> {
    let text = String::from_utf8_lossy(line);
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if !in_string {
            in_string = c == '"';
            out.push(c);
            continue;
        }
        match c {
            '"' => {
                in_string = false;
                out.push(c);
            }
            '\\' => match chars.next() {
                Some('u') => {
                    let hex: String = chars.by_ref().take(4).collect();
                    let unit = u16::from_str_radix(&hex, 16).ok()?;
                    if (0xD800..0xDC00).contains(&unit) {
                        // A high surrogate: kept only with its low one.
                        let mut rest = chars.clone();
                        let low = (rest.next() == Some('\\') && rest.next() == Some('u'))
                            .then(|| rest.by_ref().take(4).collect::<String>())
                            .and_then(|h| u16::from_str_radix(&h, 16).ok())
                            .filter(|l| (0xDC00..0xE000).contains(l));
                        match low {
                            Some(low) => {
                                out.push_str(&format!("\\u{unit:04x}\\u{low:04x}"));
                                chars = rest;
                            }
                            None => out.push_str("\\ufffd"),
                        }
                    } else if (0xDC00..0xE000).contains(&unit) {
                        out.push_str("\\ufffd");
                    } else {
                        out.push_str("\\u");
                        out.push_str(&hex);
                    }
                }
                Some(e) => {
                    out.push('\\');
                    out.push(e);
                }
                None => out.push('\\'),
            },
            c => out.push(c),
        }
    }
    serde_json::from_str(&out).ok()
}

/// A `tools/call` answer with `isError: true` and one text item.
fn tool_error(id: &Value, text: &str) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": {"content": [{"type": "text", "text": text}], "isError": true},
    })
    .to_string()
}

/// A JSON-RPC error response.
fn rpc_error(id: &Value, code: i64, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string()
}

#[cfg(test)]
mod tests {
    use super::{id_key, lenient, parse_line};
    use serde_json::{json, Value};

    #[test]
    fn ids_are_compared_as_values() {
        let key = |s: &str| id_key(&serde_json::from_str::<Value>(s).unwrap());
        assert_eq!(key("1"), key("1.0"));
        assert_eq!(key("1"), key("1e0"));
        assert_eq!(key("-0"), key("0"));
        assert_ne!(key("1"), key("\"1\""));
        assert_ne!(key("1"), key("2"));
        assert_eq!(key("\"a\""), key(r#""\u0061""#));
        // Beyond 2^53 as a JavaScript peer sees them.
        assert_eq!(key("18446744073709551615"), key("18446744073709552000"));
        for not_an_id in ["null", "true", "[1]", "{}"] {
            assert_eq!(key(not_an_id), None, "{not_an_id}");
        }
    }

    #[test]
    fn what_a_lenient_peer_reads_is_refused() {
        for (line, code) in [
            (&br#"{"a":"\ud800"}"#[..], -32700),
            (br#"{"a":"\udc00"}"#, -32700),
            (b"{\"a\":\"\xff\"}", -32700),
            (b"{\"a\":\"\xc0\xaf\"}", -32700),
            (br#"{"a":1e400}"#, -32700),
            (br#"{"a":NaN}"#, -32700),
            (br#"{"a":1} {}"#, -32700),
            (br#"{"a":1,"a":2}"#, -32600),
            (br#"{"b":{"a":1,"a":2}}"#, -32600),
        ] {
            let got = parse_line(line).map_err(|(c, _)| c);
            assert_eq!(got, Err(code), "{}", String::from_utf8_lossy(line));
        }
        let deep = |d: usize| format!("{}1{}", "[".repeat(d), "]".repeat(d));
        assert!(parse_line(deep(127).as_bytes()).is_ok());
        assert_eq!(
            parse_line(deep(128).as_bytes()).map_err(|(c, _)| c),
            Err(-32700)
        );
        assert_eq!(
            parse_line(br#"{"a":"\ud83d\ude00"}"#).ok(),
            Some(json!({"a": "\u{1f600}"}))
        );
    }

    #[test]
    fn a_lenient_reading_replaces_only_what_is_broken() {
        let read = |line: &[u8]| lenient(line);
        assert_eq!(
            read(br#"{"id":3,"t":"\ud800 x"}"#),
            Some(json!({"id": 3, "t": "\u{fffd} x"}))
        );
        assert_eq!(
            read(br#"{"id":3,"t":"\udc00\ud83d\ude00\ud83d"}"#),
            Some(json!({"id": 3, "t": "\u{fffd}\u{1f600}\u{fffd}"}))
        );
        assert_eq!(read(b"{\"id\":\"\xff\"}"), Some(json!({"id": "\u{fffd}"})));
        // An escaped backslash before `ud800` is text, not an escape.
        assert_eq!(read(br#"{"t":"\\ud800"}"#), Some(json!({"t": "\\ud800"})));
        assert_eq!(read(br#"{"id":1,"n":NaN}"#), None);
    }
}
