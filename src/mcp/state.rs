//! What the proxy's threads share: requests in flight, waiting calls, the
//! timer thread that serves every deadline, and the gateway calls.

use super::*;

/// The client's requests forwarded to the server whose response has not
/// come back yet (by the JSON-RPC id's [`id_key`]), in wait mode the paused
/// calls waiting for a human (by call id), and the last call number used.
/// Held while the gateway decides, so that events reach the session in
/// the order the proxy saw them.
pub(super) struct State {
    pub(super) pending: HashMap<String, Inflight>,
    pub(super) waiting: HashMap<String, Waiting>,
    /// The waiting calls by their JSON-RPC id's key (so that checking an id
    /// does not walk every waiting call).
    pub(super) waiting_keys: HashMap<String, String>,
    /// Task-augmented calls (MCP 2025-11-25) whose server answered with a
    /// task handle: the task id and the proxy's call id, reported once the
    /// client fetches the task's result (`tasks/result`).
    pub(super) tasks: HashMap<String, String>,
    pub(super) seq: u64,
}

/// A client request the server has not answered yet.
pub(super) enum Inflight {
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
    pub(super) fn live(&self, key: &str) -> bool {
        self.pending.contains_key(key) || self.waiting_keys.contains_key(key)
    }
}

/// What the timer thread does when a deadline passes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Timer {
    /// Rejects the paused call (call id) if it still waits (seconds waited).
    Pause(String, u64),
    /// Reports the cancelled call with this id key `unknown` if the server
    /// has not answered it yet.
    Cancel(String),
}

/// The deadlines of waiting and cancelled calls, in one heap served by one
/// thread (not a thread per call).
#[derive(Default)]
pub(super) struct Timers {
    pub(super) heap: Mutex<BinaryHeap<Reverse<(Instant, Timer)>>>,
    pub(super) wake: Condvar,
}

impl Timers {
    pub(super) fn add(&self, after: Duration, timer: Timer) {
        let at = Instant::now() + after;
        self.heap
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Reverse((at, timer)));
        self.wake.notify_one();
    }
}

/// The timer thread: fires each deadline once it passes.
pub(super) fn run_timers(proxy: &Proxy) {
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

pub(super) fn fire(proxy: &Proxy, timer: Timer) {
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
pub(super) struct Waiting {
    /// Orders the approvals list.
    pub(super) seq: u64,
    /// The JSON-RPC id, and its [`id_key`].
    pub(super) id: Value,
    pub(super) key: String,
    /// The request as the proxy parsed it (re-serialized), forwarded once
    /// approved.
    pub(super) line: Vec<u8>,
    pub(super) tool: String,
    pub(super) rule: String,
    pub(super) reason: String,
}

/// Why a paused call is rejected.
#[derive(Clone, Copy, Debug)]
pub(super) enum Why {
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
pub(super) struct Proxy {
    /// The sessions and their log (in memory without `--store`).
    pub(super) gateway: Gateway,
    /// The proxy's session: its tenant, id and policy hash.
    pub(super) tenant: String,
    pub(super) session: String,
    pub(super) policy_hash: String,
    pub(super) state: Mutex<State>,
    /// The server's standard input; `None` once the client closed its side
    /// (dropping it closes the server's input). Written without holding
    /// `state`, so a slow server never stalls decisions.
    pub(super) server_in: Mutex<Option<ServerIn>>,
    /// Wait mode's timeout in seconds; `None` in error mode.
    pub(super) wait: Option<u64>,
    /// `--cancel-timeout`: seconds a cancelled call's answer is waited for.
    pub(super) cancel_timeout: u64,
    /// Deadlines of paused and cancelled calls.
    pub(super) timers: Timers,
    /// The tools `tools/list` answers show (declared and named by a grant
    /// of the session's policy); `None` with `--show-all-tools`.
    pub(super) callable: Option<HashSet<String>>,
    /// The server process.
    pub(super) child: ChildState,
    /// Where answers for the client go: standard output, or the HTTP
    /// requests waiting for them (`--listen`).
    pub(super) client: ClientSide,
}

/// Where messages for the server go.
pub(super) enum ServerIn {
    /// The child's standard input, one message a line.
    Child(ChildStdin),
    /// `--upstream`: POSTed to the server's endpoint.
    Http(super::http_upstream::UpstreamIn),
}

/// The client's side of the proxy.
pub(super) enum ClientSide {
    /// Newline-delimited JSON-RPC on standard input and output.
    Stdio,
    /// MCP's streamable HTTP transport (`--listen`): each answer goes to
    /// the HTTP request waiting for its id, other messages to the client's
    /// `GET` stream.
    Http(Arc<super::http_listen::Routes>),
}

impl Proxy {
    /// Sends one message (a line without its newline) to the client.
    pub(super) fn send_client(&self, line: &[u8]) {
        match &self.client {
            ClientSide::Stdio => to_client(line),
            ClientSide::Http(routes) => routes.deliver(line),
        }
    }
}

pub(super) fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panic elsewhere must not take the proxy down with it.
    state.lock().unwrap_or_else(|e| e.into_inner())
}

/// Writes one line (with its newline) to the client and flushes it.
pub(super) fn to_client(line: &[u8]) {
    let mut out = std::io::stdout().lock();
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line);
    buf.push(b'\n');
    if out.write_all(&buf).and_then(|()| out.flush()).is_err() {
        log("cannot write to the client (standard output closed)");
    }
}

pub(super) fn log(message: &str) {
    eprintln!("agenra mcp-proxy: {}", crate::render::escape(message));
}

/// An answer of the gateway once its record is durable, with its place in
/// the audit log.
pub(super) fn durable(
    pending: Result<Pending<ApiOutcome>, ApiError>,
) -> Result<ApiOutcome, ApiError> {
    let (mut outcome, seq) = pending?.wait()?;
    outcome.audit_seq = seq;
    Ok(outcome)
}

impl Proxy {
    /// Decides the call `id` (the gateway's clock gives its time).
    pub(super) fn authorize(
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
    pub(super) fn report(
        &self,
        call: &str,
        status: Outcome,
        output: Value,
    ) -> Result<ApiOutcome, ApiError> {
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
    pub(super) fn resolve(
        &self,
        call: &str,
        by: &By,
        approve: bool,
    ) -> Result<ApiOutcome, ApiError> {
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
    pub(super) fn calls(&self) -> Result<Vec<(String, Status)>, ApiError> {
        self.gateway.calls(Some(self.tenant.clone()), &self.session)
    }
}
