//! `agenra mcp-proxy --listen ADDR`: the client speaks MCP's streamable
//! HTTP transport (MCP 2025-06-18 / 2025-11-25, "Transports") to the proxy
//! at `http://ADDR/mcp`, instead of newline-delimited JSON-RPC on standard
//! input and output (docs/mcp-proxy.md, "Streamable HTTP").
//!
//! Each `POST` carries one JSON-RPC message. It goes through exactly the
//! stdio mode's path ([`from_client`]: exact parsing, id tracking, the
//! decision of a `tools/call`, PAUSE handling); only where its answer goes
//! differs: a request's answer (the proxy's own, or the server's, matched
//! by the id's JSON-RPC value) is the body of the `POST` that carried it
//! (`application/json`; a call held for approval is answered on a
//! `text/event-stream` when the client accepts one, with keep-alive
//! comments while it waits), a notification or response is answered `202`.
//! The server's own requests and notifications go to the client's `GET`
//! stream (`text/event-stream`) when one is open, and are dropped (logged)
//! otherwise.
//!
//! Refused before anything is parsed, and never forwarded: a `Host` that is
//! not a loopback name while listening on loopback, an `Origin` that is not
//! a localhost one or the proxy's own, or `Sec-Fetch-Site: cross-site` (a
//! browser page of another site, DNS rebinding): 403; a missing or wrong
//! bearer token when one is configured: 401; a body that is not
//! `application/json`: 415; over [`MAX_BODY`] bytes: 413; a wrong or
//! ended `Mcp-Session-Id`: 404; a missing one (but on `initialize`): 400;
//! an unknown `MCP-Protocol-Version`: 400; a batch: 400.
//!
//! One MCP session per proxy: the proxy has one server and one session of
//! the gateway (the agent's session), so the first `initialize` opens the
//! MCP session and a second one without its `Mcp-Session-Id` is refused.
//! `DELETE` ends it as a client closing standard input does in stdio mode
//! (the server's input is closed, waiting calls rejected, the server ended).

use super::*;
use axum::body::{Body, Bytes};
use axum::extract::State as Shared;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::Response;
use std::net::SocketAddr;
use tokio::sync::{mpsc, oneshot};

/// The endpoint's path.
pub const MCP_PATH: &str = "/mcp";
/// The largest `POST` body taken (4 MiB); a larger one is refused with 413.
pub const MAX_BODY: usize = 4 << 20;
/// How often an open event stream gets a comment, so that idle connections
/// are not cut by the client's or a middlebox's timeout.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// The MCP revisions whose `MCP-Protocol-Version` header the proxy takes.
const VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// The error code of a request the client cancelled, or the session ended
/// under (JSON-RPC's implementation-defined range; the client ignores it).
const CANCELLED: i64 = -32800;

/// `--listen` and `--http-token`, checked: the bound socket, its address,
/// and the token the client must present.
pub(super) struct Listen {
    listener: std::net::TcpListener,
    pub(super) addr: SocketAddr,
    token: Option<String>,
}

/// Errors of `--listen` and `--http-token`.
#[derive(Debug, thiserror::Error)]
pub(super) enum ListenError {
    #[error("--http-token {path}: {source}")]
    TokenFile {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "--http-token {path}: the token must be one line of at least 16 printable \
         characters without spaces"
    )]
    BadToken { path: String },
    #[error("--listen {listen}: {source}")]
    Bind {
        listen: String,
        source: std::io::Error,
    },
    #[error(
        "--listen {listen}: {addr} is not a loopback address: anyone who reaches it could \
         drive the agent's session, so it needs --http-token FILE"
    )]
    Exposed { listen: String, addr: SocketAddr },
    #[error("cannot make a session id: {0}")]
    Random(std::io::Error),
}

/// Reads the token file and binds `listen` (before the server starts, so
/// that a bad address starts nothing).
pub(super) fn bind(listen: &str, token_file: Option<&Path>) -> Result<Listen, ListenError> {
    let token = match token_file {
        None => None,
        Some(path) => {
            let shown = path.display().to_string();
            let text = std::fs::read_to_string(path).map_err(|source| ListenError::TokenFile {
                path: shown.clone(),
                source,
            })?;
            let token = text.trim();
            if token.len() < 16 || !token.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(ListenError::BadToken { path: shown });
            }
            Some(token.to_string())
        }
    };
    let bind = |source| ListenError::Bind {
        listen: listen.to_string(),
        source,
    };
    let listener = std::net::TcpListener::bind(listen).map_err(bind)?;
    let addr = listener.local_addr().map_err(bind)?;
    if token.is_none() && !addr.ip().is_loopback() {
        return Err(ListenError::Exposed {
            listen: listen.to_string(),
            addr,
        });
    }
    listener.set_nonblocking(true).map_err(bind)?;
    Ok(Listen {
        listener,
        addr,
        token,
    })
}

/// A fresh session id: 128 random bits, in hex.
fn session_id() -> Result<String, ListenError> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(ListenError::Random)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Where the client's answers go: the HTTP requests waiting for them (by
/// their id's [`id_key`]) and the client's `GET` stream.
pub(super) struct Routes {
    inner: Mutex<Inner>,
    /// The MCP session's id (`Mcp-Session-Id`), handed out with the answer
    /// to `initialize`.
    session: String,
    token: Option<String>,
    /// Whether the proxy listens on a loopback address (then `Host` must
    /// be a loopback name: DNS rebinding).
    loopback: bool,
}

#[derive(Default)]
struct Inner {
    /// The requests waiting for their answer: id key, (ticket, where to).
    waiters: HashMap<String, (u64, oneshot::Sender<Vec<u8>>)>,
    tickets: u64,
    /// The client's open `GET` stream.
    stream: Option<mpsc::UnboundedSender<Vec<u8>>>,
    /// `initialize` was taken: the session exists.
    initialized: bool,
    /// The client ended the session (`DELETE`), or the server is gone.
    ended: bool,
}

impl Routes {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends a message for the client where it belongs: an answer to the
    /// request waiting for its id, anything else to the `GET` stream.
    pub(super) fn deliver(&self, line: &[u8]) {
        let message = serde_json::from_slice::<Value>(line)
            .ok()
            .or_else(|| lenient(line));
        let key = message
            .as_ref()
            .and_then(Value::as_object)
            .filter(|m| !m.contains_key("method"))
            .and_then(|m| m.get("id"))
            .and_then(id_key);
        let mut inner = self.lock();
        if let Some(key) = key {
            if let Some((_, to)) = inner.waiters.remove(&key) {
                let _ = to.send(line.to_vec());
                return;
            }
        }
        if let Some(stream) = &inner.stream {
            if stream.send(line.to_vec()).is_ok() {
                return;
            }
            inner.stream = None;
        }
        drop(inner);
        log(
            "a message for the client has no HTTP request waiting for it and no GET stream \
             is open; dropped",
        );
    }

    /// Ends the session: every waiting request is answered that it ended,
    /// the `GET` stream closes, and later requests get 404.
    pub(super) fn close(&self) {
        let mut inner = self.lock();
        inner.ended = true;
        inner.waiters.clear();
        inner.stream = None;
    }

    /// Forgets the waiter `ticket` of `key` (its request was answered
    /// otherwise, or its client went away).
    fn forget(&self, key: &str, ticket: u64) {
        let mut inner = self.lock();
        if inner.waiters.get(key).is_some_and(|(t, _)| *t == ticket) {
            inner.waiters.remove(key);
        }
    }

    /// The checks of every request before its body is read: `Some` is the
    /// refusal.
    fn refuse(&self, method: &Method, headers: &HeaderMap) -> Option<Response> {
        if let Some(why) = foreign(headers, self.loopback) {
            log(&format!("HTTP {method} refused (403): {why}"));
            return Some(refusal(StatusCode::FORBIDDEN, &why));
        }
        if let Some(token) = &self.token {
            let given = headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .unwrap_or("");
            if !same(given.trim().as_bytes(), token.as_bytes()) {
                log(&format!(
                    "HTTP {method} refused (401): no valid bearer token"
                ));
                let mut r = refusal(
                    StatusCode::UNAUTHORIZED,
                    "this MCP endpoint needs `Authorization: Bearer TOKEN` (the token of \
                     --http-token)",
                );
                r.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    header::HeaderValue::from_static("Bearer"),
                );
                return Some(r);
            }
        }
        if let Some(v) = headers.get("mcp-protocol-version") {
            let v = v.to_str().unwrap_or("?");
            if !VERSIONS.contains(&v) {
                return Some(refusal(
                    StatusCode::BAD_REQUEST,
                    &format!(
                        "MCP-Protocol-Version `{v}` is not one this proxy knows ({})",
                        VERSIONS.join(", ")
                    ),
                ));
            }
        }
        None
    }

    /// The `Mcp-Session-Id` check: `initialize` may come without one, once.
    fn session_check(&self, headers: &HeaderMap, initialize: bool) -> Option<Response> {
        let given = headers
            .get("mcp-session-id")
            .map(|v| v.to_str().unwrap_or("?"));
        let mut inner = self.lock();
        match given {
            Some(id) => {
                if inner.ended
                    || !inner.initialized
                    || !same(id.as_bytes(), self.session.as_bytes())
                {
                    return Some(refusal(
                        StatusCode::NOT_FOUND,
                        "unknown or ended MCP session (Mcp-Session-Id)",
                    ));
                }
                None
            }
            None if initialize && !inner.initialized && !inner.ended => {
                inner.initialized = true;
                None
            }
            None if initialize => Some(refusal(
                StatusCode::BAD_REQUEST,
                "this proxy serves one MCP session (the agent's), and it was initialized \
                 already: send its Mcp-Session-Id",
            )),
            None => Some(refusal(
                StatusCode::BAD_REQUEST,
                "Mcp-Session-Id is missing (send `initialize` first)",
            )),
        }
    }
}

/// Compares two secrets in time independent of where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// Whether `host` (a `Host` value or an origin's authority) names a
/// loopback interface: `localhost`, `127.x.y.z`, `[::1]`, with any port.
fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split_once(']').map_or(rest, |(ip, _)| ip),
        None => host.rsplit_once(':').map_or(host, |(n, _)| n),
    };
    let name = name.to_ascii_lowercase();
    name == "localhost"
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Why a request looks like a browser page of another site (or a DNS
/// rebinding): `None` when it does not.
fn foreign(headers: &HeaderMap, loopback: bool) -> Option<String> {
    let host = headers
        .get(header::HOST)
        .map(|h| h.to_str().unwrap_or("?"))
        .unwrap_or("");
    if loopback && !loopback_host(host) {
        return Some(format!(
            "Host `{host}` is not a loopback name (localhost, 127.0.0.1, [::1])"
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("?").to_ascii_lowercase();
        let authority = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"));
        let own = authority.is_some_and(|a| a.eq_ignore_ascii_case(host));
        if !own && !authority.is_some_and(loopback_host) {
            return Some(format!(
                "a request from another site (Origin `{origin}`, Host `{host}`)"
            ));
        }
    }
    if let Some(site) = headers.get("sec-fetch-site") {
        if site.to_str().unwrap_or("?") == "cross-site" {
            return Some("a request from another site (Sec-Fetch-Site `cross-site`)".into());
        }
    }
    None
}

/// A refusal: the status and a JSON-RPC error without an id saying why.
fn refusal(status: StatusCode, why: &str) -> Response {
    let code = if status == StatusCode::BAD_REQUEST {
        -32600
    } else {
        -32000
    };
    json_response(
        status,
        rpc_error(&Value::Null, code, &format!("agenra: {why}")).into_bytes(),
    )
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    r
}

fn empty(status: StatusCode) -> Response {
    let mut r = Response::new(Body::empty());
    *r.status_mut() = status;
    r
}

/// Whether the `Accept` header takes `mime` (absent: anything).
fn accepts(headers: &HeaderMap, mime: &str) -> bool {
    let Some(accept) = headers.get(header::ACCEPT) else {
        return true;
    };
    let (kind, _) = mime.split_once('/').unwrap_or((mime, ""));
    accept.to_str().unwrap_or("").split(',').any(|a| {
        let a = a
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        a == mime || a == "*/*" || a == format!("{kind}/*")
    })
}

/// One message as an SSE event. A bare CR would end the `data:` line (SSE
/// splits lines at CR too), so it becomes a space: outside strings it is
/// JSON whitespace, and a raw CR inside a string is not JSON anyway.
fn event(line: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(line.len() + 24);
    out.extend_from_slice(b"event: message\ndata: ");
    out.extend(line.iter().map(|&b| if b == b'\r' { b' ' } else { b }));
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// What an event stream carries: one answer, or the `GET` stream's many.
enum Source {
    One(oneshot::Receiver<Vec<u8>>),
    Many(mpsc::UnboundedReceiver<Vec<u8>>),
}

/// An event stream of `source`'s messages with keep-alive comments; it
/// ends after the one answer, or when its sender is gone. `guard` lives as
/// long as the stream (the waiter is forgotten when the client goes away).
fn event_stream(source: Source, guard: Option<Waiter>) -> Response {
    let stream = futures_util::stream::unfold(
        (source, guard, false),
        |(mut source, guard, done)| async move {
            if done {
                return None;
            }
            let next = match &mut source {
                Source::One(rx) => tokio::time::timeout(KEEP_ALIVE, rx).await.map(Result::ok),
                Source::Many(rx) => tokio::time::timeout(KEEP_ALIVE, rx.recv()).await,
            };
            match next {
                Err(_) => Some((
                    Ok::<_, std::convert::Infallible>(Bytes::from_static(b": keep-alive\n\n")),
                    (source, guard, false),
                )),
                Ok(Some(line)) => {
                    let one = matches!(source, Source::One(_));
                    Some((Ok(event(&line)), (source, guard, one)))
                }
                Ok(None) => None,
            }
        },
    );
    let mut r = Response::new(Body::from_stream(stream));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/event-stream"),
    );
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-cache"),
    );
    r
}

/// A request's place among the waiters, forgotten when dropped (its client
/// went away, or it was answered).
struct Waiter {
    routes: Arc<Routes>,
    key: String,
    ticket: u64,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.routes.forget(&self.key, self.ticket);
    }
}

/// What became of a `POST`ed message.
enum Posted {
    /// Answered at once by the proxy (`Some(id)`: the request's id).
    Answer(String, bool),
    /// A notification or response, taken (202).
    Accepted,
    /// A request whose answer comes later (`held`: waiting for approval).
    Wait {
        rx: oneshot::Receiver<Vec<u8>>,
        waiter: Waiter,
        held: bool,
    },
    /// The server's input is closed.
    ServerGone,
}

struct App {
    proxy: Arc<Proxy>,
    routes: Arc<Routes>,
}

/// The part of a `POST` that runs off the runtime (decisions write the
/// audit log; writing to the server may block): registers the request's
/// waiter before the message can be answered, runs the stdio mode's
/// [`from_client`], and forwards what it says to forward.
fn post_blocking(app: &App, line: &[u8], message: &Value) -> Posted {
    let request_id = message
        .get("method")
        .and(message.get("id"))
        .filter(|id| !id.is_null());
    let key = request_id.and_then(id_key);
    // Declared before the lock's guard, so that it is dropped after it
    // (its drop takes the lock).
    let mut waiting = None;
    let mut inner = app.routes.lock();
    if let (Some(id), Some(key)) = (request_id, &key) {
        // A request whose answer has not reached the client is in flight.
        if inner.waiters.contains_key(key) {
            drop(inner);
            log(&format!(
                "client reused the id {id} of a request still in flight; refused"
            ));
            return Posted::Answer(
                rpc_error(
                    id,
                    -32600,
                    "agenra: a request with this id is still in flight",
                ),
                true,
            );
        }
        let (tx, rx) = oneshot::channel();
        inner.tickets += 1;
        let ticket = inner.tickets;
        inner.waiters.insert(key.clone(), (ticket, tx));
        let waiter = Waiter {
            routes: Arc::clone(&app.routes),
            key: key.clone(),
            ticket,
        };
        waiting = Some((rx, waiter));
    }
    // Held across the decision: an answer (an approval's, say) cannot come
    // before the waiter is in place, and lines are decided in order.
    let action = from_client(&app.proxy, line);
    drop(inner);
    let forward = match action {
        Action::Answer(answer) => {
            drop(waiting); // its waiter is forgotten
            return Posted::Answer(answer, request_id.is_some());
        }
        Action::Drop => {
            return match waiting {
                Some((rx, waiter)) => Posted::Wait {
                    rx,
                    waiter,
                    held: true,
                },
                None => {
                    // A cancelled call that waited for approval: its request
                    // gets no answer (MCP), so its HTTP request ends.
                    if message.get("method").and_then(Value::as_str)
                        == Some("notifications/cancelled")
                    {
                        if let Some(key) = message
                            .get("params")
                            .and_then(|p| p.get("requestId"))
                            .and_then(id_key)
                        {
                            app.routes.lock().waiters.remove(&key);
                        }
                    }
                    Posted::Accepted
                }
            };
        }
        Action::Forward => Cow::Borrowed(line),
        Action::ForwardParsed(parsed) => Cow::Owned(parsed),
    };
    if !to_server(&app.proxy, &forward) {
        log("cannot write to the server (its input is closed)");
        return Posted::ServerGone;
    }
    match waiting {
        Some((rx, waiter)) => Posted::Wait {
            rx,
            waiter,
            held: false,
        },
        None => Posted::Accepted,
    }
}

async fn handle(
    Shared(app): Shared<Arc<App>>,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if let Some(refused) = app.routes.refuse(&method, &headers) {
        return unread(refused);
    }
    match method {
        Method::POST => post(app, headers, body).await,
        Method::GET => {
            if !accepts(&headers, "text/event-stream") {
                return refusal(
                    StatusCode::NOT_ACCEPTABLE,
                    "the GET stream is text/event-stream",
                );
            }
            if let Some(refused) = app.routes.session_check(&headers, false) {
                return refused;
            }
            let (tx, rx) = mpsc::unbounded_channel();
            // A new stream replaces the old one (which ends).
            app.routes.lock().stream = Some(tx);
            event_stream(Source::Many(rx), None)
        }
        Method::DELETE => {
            if let Some(refused) = app.routes.session_check(&headers, false) {
                return refused;
            }
            app.routes.close();
            log("the client ended the MCP session (HTTP DELETE)");
            let proxy = Arc::clone(&app.proxy);
            std::thread::spawn(move || end_session(&proxy));
            empty(StatusCode::OK)
        }
        _ => {
            let mut r = refusal(
                StatusCode::METHOD_NOT_ALLOWED,
                &format!("{MCP_PATH} takes POST, GET and DELETE"),
            );
            r.headers_mut().insert(
                header::ALLOW,
                header::HeaderValue::from_static("POST, GET, DELETE"),
            );
            unread(r)
        }
    }
}

/// As a client closing its input in stdio mode: the server's input closes,
/// the calls waiting for approval are rejected, the server is ended.
fn end_session(proxy: &Proxy) {
    drop(lock_in(proxy).take());
    reject_waiting(proxy);
    stop_child(proxy, "the client ended the MCP session");
}

/// A refusal answered before the request's body was read: the connection
/// cannot carry another request, so it says so (`Connection: close`); a
/// client that pooled it would otherwise find it closed under its next
/// request (a flaky EOF in tests/mcp_http.rs).
fn unread(mut refused: Response) -> Response {
    refused.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    refused
}

async fn post(app: Arc<App>, headers: HeaderMap, body: Body) -> Response {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"));
    if !json {
        return unread(refusal(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "a POST's body must be one JSON-RPC message as application/json",
        ));
    }
    if !accepts(&headers, "application/json") {
        return unread(refusal(
            StatusCode::NOT_ACCEPTABLE,
            "answers are application/json (Accept: application/json, text/event-stream)",
        ));
    }
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let too_big = || {
        unread(refusal(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("a POST's body may be at most {MAX_BODY} bytes"),
        ))
    };
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return too_big();
    }
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY).await else {
        return too_big();
    };
    // The stdio mode reads one message per line: the body is parsed as it
    // is, and one spread over lines goes on as the proxy parsed it.
    let parsed = parse_line(&bytes);
    let (line, message) = match parsed {
        // Refused as in stdio mode (`-32700`, or `-32600` for a key given
        // twice), never forwarded.
        Err((code, why)) => {
            let answer = refuse_unparsed(&bytes, code, &why);
            return json_response(StatusCode::BAD_REQUEST, answer.into_bytes());
        }
        Ok(message) if bytes.contains(&b'\n') || bytes.contains(&b'\r') => {
            (Bytes::from(message.to_string()), message)
        }
        Ok(message) => (bytes, message),
    };
    if message.is_array() {
        log("client sent a batch over HTTP; refused, not forwarded");
        return json_response(
            StatusCode::BAD_REQUEST,
            rpc_error(
                &Value::Null,
                -32600,
                "agenra: batches are not taken over HTTP (MCP 2025-06-18 has none): send \
                 one message per POST",
            )
            .into_bytes(),
        );
    }
    let initialize = message.get("method").and_then(Value::as_str) == Some("initialize");
    if let Some(refused) = app.routes.session_check(&headers, initialize) {
        return refused;
    }
    let sse = accepts(&headers, "text/event-stream")
        && headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.contains("text/event-stream"));
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let shared = Arc::clone(&app);
    let posted = tokio::task::spawn_blocking(move || post_blocking(&shared, &line, &message)).await;
    let mut response = match posted {
        Err(_) => refusal(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the proxy failed while taking this message; it was not forwarded",
        ),
        Ok(Posted::Answer(answer, request)) => {
            let status = if request && !id.is_null() {
                StatusCode::OK
            } else {
                StatusCode::BAD_REQUEST
            };
            json_response(status, answer.into_bytes())
        }
        Ok(Posted::Accepted) => empty(StatusCode::ACCEPTED),
        Ok(Posted::ServerGone) => json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            rpc_error(
                &id,
                -32603,
                "agenra: the MCP server's input is closed; the message was not forwarded",
            )
            .into_bytes(),
        ),
        Ok(Posted::Wait { rx, waiter, held }) if held && sse => {
            event_stream(Source::One(rx), Some(waiter))
        }
        Ok(Posted::Wait { rx, waiter, .. }) => {
            let answer = rx.await;
            drop(waiter);
            match answer {
                Ok(line) => json_response(StatusCode::OK, line),
                Err(_) => json_response(
                    StatusCode::OK,
                    rpc_error(
                        &id,
                        CANCELLED,
                        "agenra: the request was cancelled, or the session ended, before \
                         an answer came",
                    )
                    .into_bytes(),
                ),
            }
        }
    };
    if initialize {
        if let Ok(v) = header::HeaderValue::from_str(&app.routes.session) {
            response.headers_mut().insert("mcp-session-id", v);
        }
    }
    response
}

/// Serves the endpoint on a runtime of its own threads; the proxy's other
/// threads run as in stdio mode.
pub(super) fn serve(listen: Listen, proxy: &Arc<Proxy>, routes: Arc<Routes>) -> Result<(), Failed> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("agenra-mcp-http")
        .enable_all()
        .build()
        .map_err(|e| {
            fail(format!(
                "mcp-proxy: --listen: cannot start the runtime: {e}"
            ))
        })?;
    let listener = {
        let _guard = runtime.enter();
        tokio::net::TcpListener::from_std(listen.listener)
            .map_err(|e| fail(format!("mcp-proxy: --listen: {e}")))?
    };
    let app = Arc::new(App {
        proxy: Arc::clone(proxy),
        routes,
    });
    let router = axum::Router::new()
        .route(MCP_PATH, axum::routing::any(handle))
        .fallback(|| async {
            unread(refusal(
                StatusCode::NOT_FOUND,
                &format!("the MCP endpoint is {MCP_PATH}"),
            ))
        })
        .with_state(app);
    std::thread::Builder::new()
        .name("agenra-mcp-http".into())
        .spawn(move || {
            runtime.block_on(async move {
                if let Err(e) = axum::serve(listener, router).await {
                    log(&format!("--listen: the HTTP server stopped: {e}"));
                }
            });
        })
        .map_err(|e| fail(format!("mcp-proxy: --listen: cannot start its thread: {e}")))?;
    Ok(())
}

/// The routes of a proxy listening with `listen`.
pub(super) fn routes(listen: &Listen) -> Result<Arc<Routes>, Failed> {
    Ok(Arc::new(Routes {
        inner: Mutex::new(Inner::default()),
        session: session_id().map_err(|e| fail(format!("mcp-proxy: --listen: {e}")))?,
        token: listen.token.clone(),
        loopback: listen.addr.ip().is_loopback(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_names_and_own_origins_pass() {
        assert!(loopback_host("localhost:8080"));
        assert!(loopback_host("127.0.0.1:1"));
        assert!(loopback_host("[::1]:9"));
        assert!(loopback_host("LOCALHOST"));
        assert!(!loopback_host("evil.example:8080"));
        assert!(!loopback_host("10.0.0.1:80"));
        assert!(!loopback_host("localhost.evil.example"));
        let h = |pairs: &[(&'static str, &'static str)]| {
            let mut m = HeaderMap::new();
            for (k, v) in pairs {
                m.insert(*k, v.parse().unwrap());
            }
            m
        };
        assert!(foreign(&h(&[("host", "127.0.0.1:5")]), true).is_none());
        assert!(foreign(&h(&[("host", "rebound.example:5")]), true).is_some());
        assert!(foreign(&h(&[("host", "rebound.example:5")]), false).is_none());
        let evil = h(&[("host", "127.0.0.1:5"), ("origin", "http://evil.example")]);
        assert!(foreign(&evil, true).is_some());
        let local = h(&[("host", "127.0.0.1:5"), ("origin", "http://localhost:3000")]);
        assert!(foreign(&local, true).is_none());
        let null = h(&[("host", "127.0.0.1:5"), ("origin", "null")]);
        assert!(foreign(&null, true).is_some());
        let site = h(&[("host", "127.0.0.1:5"), ("sec-fetch-site", "cross-site")]);
        assert!(foreign(&site, true).is_some());
    }

    #[test]
    fn a_bare_cr_never_splits_an_event() {
        assert_eq!(
            &event(b"{\"a\":\r1}")[..],
            b"event: message\ndata: {\"a\": 1}\n\n"
        );
    }
}
