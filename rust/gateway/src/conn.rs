//! The connection layer under the HTTP API: the accept loop, its limits and
//! timeouts (`docs/http-api.md`, "Connections").
//!
//! * At most [`Limits::max_connections`] connections are served at once, and
//!   at most [`Limits::max_connections_per_ip`] from one peer address (an
//!   IPv6 peer's /64). A connection beyond either takes the place of the
//!   connection that has waited longest on its client (for a request's head,
//!   between requests, or for a body), among its own address's when that
//!   address is over its share, else among all: that one is closed. A
//!   connection whose request is complete (being answered) never makes room;
//!   when no connection can, the new one is answered `503` with a JSON
//!   error and `Connection: close`, and closed. So half-sent requests from
//!   one address cannot keep a prompt client out, from that address or any
//!   other: its connection is the newest, and what it sends completes before
//!   it is the longest waiting. The accept loop keeps draining the kernel's
//!   queue, so no client waits there.
//! * A request's head must arrive within [`Limits::header_timeout`], counted
//!   from the moment the server waits for it (the connection was accepted, or
//!   the previous answer was sent): an idle keep-alive connection is closed
//!   after that long too. A late head closes the connection without an
//!   answer (HTTP/1 has no way to answer a request it has not read).
//! * A request's body must arrive within [`Limits::body_timeout`] of its head:
//!   a late body gets `408` (JSON) and the connection is closed.
//! * An answer the client does not read is dropped, with the connection, once
//!   no byte of it could be written for [`Limits::idle_timeout`].
//! * A head whose URI is over [`MAX_URI`] bytes gets `414`; one with more than
//!   [`MAX_HEADERS`] headers or over [`MAX_HEADER_BYTES`] of them gets `431`
//!   (JSON, `field` `uri` / `headers`). Heads the HTTP library itself cannot
//!   take (over [`MAX_HEAD_BUFFER`] bytes, over 100 headers, or malformed)
//!   are answered by it `400`/`414`/`431` with an empty body: hyper 1.x
//!   builds those answers itself and offers no hook for their body.
//! * Stopping stops accepting, asks every connection to close once its
//!   request in flight is answered (idle ones close at once), and waits for
//!   them.

use crate::api::ApiError;
use crate::reply::json;
use axum::body::{Body, Bytes};
use axum::response::Response;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::Request;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore};
use tokio::time::Sleep;

/// The longest request URI answered (8 KiB); longer ones get `414`.
pub const MAX_URI: usize = 8 << 10;
/// The most request headers answered (64); more get `431`.
pub const MAX_HEADERS: usize = 64;
/// The largest sum of header names and values answered (16 KiB, counting
/// 4 bytes per header for `: ` and the line end); more gets `431`.
pub const MAX_HEADER_BYTES: usize = 16 << 10;
/// The read buffer of a connection (64 KiB): a request head that does not
/// fit is refused by the HTTP library (`431`, empty body).
pub const MAX_HEAD_BUFFER: usize = 64 << 10;
/// Refused connections drained at once before closing (so that the client
/// reads the `503` instead of a reset); beyond this many, a refused
/// connection is closed without draining.
const MAX_DRAINING: usize = 64;
/// How long a refused connection is drained.
const DRAIN: Duration = Duration::from_secs(1);

/// Limits on the connections a server takes (`agenra serve --max-connections`
/// and the other flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once; a newer one closes the one waiting
    /// longest on its client, or gets `503` when all are being answered.
    pub max_connections: usize,
    /// Connections served at once from one peer IP address (an IPv6 /64);
    /// a newer one closes that address's connection waiting longest.
    pub max_connections_per_ip: usize,
    /// Time to receive a request's head, from the moment the server waits
    /// for it (also the idle limit of a keep-alive connection).
    pub header_timeout: Duration,
    /// Time to receive a request's body, from its head; a late body gets
    /// `408`.
    pub body_timeout: Duration,
    /// Time an answer may wait for the client to read it.
    pub idle_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: 1024,
            max_connections_per_ip: 256,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

impl Limits {
    /// Checks that every limit admits something: a zero count or duration
    /// would refuse every request.
    pub fn check(&self) -> Result<(), String> {
        if self.max_connections == 0 {
            return Err("max_connections: must be at least 1".into());
        }
        if self.max_connections_per_ip == 0 {
            return Err("max_connections_per_ip: must be at least 1".into());
        }
        for (name, d) in [
            ("header_timeout", self.header_timeout),
            ("body_timeout", self.body_timeout),
            ("idle_timeout", self.idle_timeout),
        ] {
            if d.is_zero() {
                return Err(format!("{name}: must be longer than zero"));
            }
        }
        Ok(())
    }
}

/// A request body that did not arrive within [`Limits::body_timeout`].
#[derive(Debug, thiserror::Error)]
#[error("the body did not arrive within {} ms", .0.as_millis())]
pub struct BodyTimeout(pub Duration);

/// The address a connection counts against: an IPv4 address (also when
/// mapped into IPv6), or an IPv6 address's /64 network (one host commonly
/// holds a whole /64, so counting single IPv6 addresses would let it open
/// any number of connections).
fn peer_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(bits.into())
        }
        v4 => v4,
    }
}

/// Waiting for a request's head (also between requests).
const HEAD: u8 = 0;
/// Waiting for a request's body.
const BODY: u8 = 1;
/// The request is complete: the server is answering it.
const BUSY: u8 = 2;
/// Closed to make room for a newer connection.
const EVICTED: u8 = 3;

/// What a connection is doing, for eviction: a connection waiting on its
/// client (`HEAD`, `BODY`) may be closed to make room; one being answered
/// (`BUSY`) never is, and one closed (`EVICTED`) runs no handler.
struct ConnState {
    phase: AtomicU8,
    /// Since when it has been in its phase (ms since the table's epoch).
    since: AtomicU64,
    kill: Notify,
}

impl ConnState {
    /// Moves from a waiting phase to `to`; false once evicted (or busy).
    fn advance(&self, to: u8, now: u64) -> bool {
        let mut cur = self.phase.load(Ordering::Acquire);
        loop {
            if cur != HEAD && cur != BODY && !(cur == BUSY && to == HEAD) {
                return false;
            }
            match self
                .phase
                .compare_exchange(cur, to, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    self.since.store(now, Ordering::Release);
                    return true;
                }
                Err(actual) => cur = actual,
            }
        }
    }
}

/// The connections served: counted in all and per peer address.
struct Table {
    epoch: Instant,
    inner: Mutex<TableInner>,
}

#[derive(Default)]
struct TableInner {
    next: u64,
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
    conns: HashMap<u64, (IpAddr, Arc<ConnState>)>,
}

impl TableInner {
    fn forget(&mut self, id: u64) -> Option<Arc<ConnState>> {
        let (ip, state) = self.conns.remove(&id)?;
        self.total = self.total.saturating_sub(1);
        if let Some(n) = self.per_ip.get_mut(&ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_ip.remove(&ip);
            }
        }
        Some(state)
    }
}

/// A connection's place in the table; given back on drop.
struct Slot {
    table: Arc<Table>,
    id: u64,
    state: Arc<ConnState>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut t = self.table.inner.lock().unwrap_or_else(|p| p.into_inner());
        t.forget(self.id);
    }
}

impl Table {
    fn new() -> Arc<Table> {
        Arc::new(Table {
            epoch: Instant::now(),
            inner: Mutex::new(TableInner::default()),
        })
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// A place for a connection from `key`. Over a cap, the connection that
    /// has waited longest on its client (among `key`'s own when its share is
    /// full, else among all) is evicted to make room; `None` when every
    /// connection that would have to make room is being answered.
    fn admit(table: &Arc<Table>, key: IpAddr, limits: &Limits) -> Option<Slot> {
        let now = table.now();
        let mut t = table.inner.lock().unwrap_or_else(|p| p.into_inner());
        let ip_full = t.per_ip.get(&key).copied().unwrap_or(0) >= limits.max_connections_per_ip;
        if ip_full || t.total >= limits.max_connections {
            let mut waiting: Vec<(u64, u64)> = t
                .conns
                .iter()
                .filter(|(_, (ip, s))| {
                    (!ip_full || *ip == key) && s.phase.load(Ordering::Acquire) != BUSY
                })
                .map(|(id, (_, s))| (s.since.load(Ordering::Acquire), *id))
                .collect();
            waiting.sort_unstable();
            let victim = waiting.into_iter().find(|(_, id)| {
                t.conns.get(id).is_some_and(|(_, s)| {
                    let cur = s.phase.load(Ordering::Acquire);
                    (cur == HEAD || cur == BODY)
                        && s.phase
                            .compare_exchange(cur, EVICTED, Ordering::AcqRel, Ordering::Acquire)
                            .is_ok()
                })
            });
            let (_, id) = victim?;
            if let Some(state) = t.forget(id) {
                state.kill.notify_one();
            }
        }
        t.next += 1;
        let id = t.next;
        let state = Arc::new(ConnState {
            phase: AtomicU8::new(HEAD),
            since: AtomicU64::new(now),
            kill: Notify::new(),
        });
        t.total += 1;
        *t.per_ip.entry(key).or_insert(0) += 1;
        t.conns.insert(id, (key, Arc::clone(&state)));
        Some(Slot {
            table: Arc::clone(table),
            id,
            state,
        })
    }
}

/// Serves `app` on `listener` under `limits` until `stop` resolves, then
/// closes the connections once their requests in flight are answered.
pub(crate) async fn serve(
    listener: TcpListener,
    app: axum::Router,
    limits: Limits,
    stop: impl Future<Output = ()>,
) {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(MAX_HEAD_BUFFER)
        .keep_alive(true);
    let table = Table::new();
    let draining = Arc::new(Semaphore::new(MAX_DRAINING));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors or memory: the connection waits
                    // in the kernel's queue; try again shortly.
                    if !is_connection_error(&e) {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    continue;
                }
            },
        };
        let Some(slot) = Table::admit(&table, peer_key(peer.ip()), &limits) else {
            refuse(stream, peer, &draining);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(WriteTimeout::new(stream, limits.idle_timeout));
        let body_timeout = limits.body_timeout;
        let app = app.clone();
        let state = Arc::clone(&slot.state);
        let clock = Arc::clone(&table);
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            handle(
                app.clone(),
                req,
                body_timeout,
                Arc::clone(&state),
                Arc::clone(&clock),
            )
        });
        let conn = graceful.watch(builder.serve_connection(io, service));
        tokio::spawn(async move {
            tokio::select! {
                _ = conn => {}
                // Evicted: dropping the connection closes it.
                _ = slot.state.kill.notified() => {}
            }
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

async fn handle(
    mut app: axum::Router,
    req: Request<Incoming>,
    body_timeout: Duration,
    state: Arc<ConnState>,
    table: Arc<Table>,
) -> Result<Response, Infallible> {
    let next = if hyper::body::Body::is_end_stream(req.body()) {
        BUSY
    } else {
        BODY
    };
    if !state.advance(next, table.now()) {
        return Ok(evicted());
    }
    let answer = match check_head(&req) {
        Some(refused) => refused,
        None => {
            let req = req.map(|b| {
                Body::new(DeadlineBody::new(
                    b,
                    body_timeout,
                    Arc::clone(&state),
                    Arc::clone(&table),
                ))
            });
            match tower_service::Service::call(&mut app, req).await {
                Ok(r) => r,
                Err(never) => match never {},
            }
        }
    };
    // Waiting for the next request from now (the answer is being written).
    state.advance(HEAD, table.now());
    Ok(answer)
}

/// The answer to a request on a connection closed to make room (it is not
/// delivered when the connection is gone first).
fn evicted() -> Response {
    json(
        503,
        &ApiError::new(503, "the connection was closed to make room for others"),
    )
}

/// `414` / `431` for a head over this server's limits (which are below the
/// HTTP library's, so that these answers carry a JSON body).
fn check_head<B>(req: &Request<B>) -> Option<Response> {
    let uri = req.uri();
    let uri_len = uri.scheme_str().map_or(0, |s| s.len() + 3)
        + uri.authority().map_or(0, |a| a.as_str().len())
        + uri.path_and_query().map_or(0, |p| p.as_str().len());
    if uri_len > MAX_URI {
        return Some(json(
            414,
            &ApiError::field(
                414,
                "uri",
                format!("the URI is {uri_len} bytes; at most {MAX_URI} are accepted"),
            ),
        ));
    }
    let headers = req.headers();
    let count = headers.len();
    let bytes: usize = headers
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum();
    if count > MAX_HEADERS || bytes > MAX_HEADER_BYTES {
        return Some(json(
            431,
            &ApiError::field(
                431,
                "headers",
                format!(
                    "{count} headers of {bytes} bytes; at most {MAX_HEADERS} headers of \
                     {MAX_HEADER_BYTES} bytes are accepted"
                ),
            ),
        ));
    }
    None
}

/// Answers a connection over the limits `503` and closes it (draining what
/// the client sent for a moment first, so that it reads the answer rather
/// than a reset, unless too many are being drained already).
fn refuse(stream: TcpStream, peer: SocketAddr, draining: &Arc<Semaphore>) {
    let body = serde_json::to_vec(&ApiError::new(
        503,
        format!("too many connections (from {}); try again later", peer.ip()),
    ))
    .unwrap_or_default();
    let mut answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\nretry-after: 1\r\n\r\n",
        body.len()
    )
    .into_bytes();
    answer.extend_from_slice(&body);
    // A fresh socket's send buffer takes the few hundred bytes at once.
    let _ = stream.try_write(&answer);
    let Ok(permit) = Arc::clone(draining).try_acquire_owned() else {
        return;
    };
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = stream;
        let _ = tokio::time::timeout(DRAIN, async {
            let _ = stream.shutdown().await;
            let mut buf = [0u8; 4096];
            while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
        })
        .await;
        drop(permit);
    });
}

fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}

/// A request body that fails with [`BodyTimeout`] once its deadline passes.
/// Its end moves the connection to `BUSY` (or fails, if the connection was
/// evicted meanwhile, so that no handler acts on the request).
struct DeadlineBody {
    inner: Incoming,
    deadline: tokio::time::Instant,
    limit: Duration,
    sleep: Option<Pin<Box<Sleep>>>,
    state: Arc<ConnState>,
    table: Arc<Table>,
}

impl DeadlineBody {
    fn new(
        inner: Incoming,
        limit: Duration,
        state: Arc<ConnState>,
        table: Arc<Table>,
    ) -> DeadlineBody {
        DeadlineBody {
            inner,
            deadline: tokio::time::Instant::now() + limit,
            limit,
            sleep: None,
            state,
            table,
        }
    }
}

/// A request body cut because its connection was evicted.
#[derive(Debug, thiserror::Error)]
#[error("the connection was closed to make room for others")]
struct Evicted;

impl hyper::body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            let ends = match &frame {
                None => true,
                Some(Ok(_)) => this.inner.is_end_stream(),
                Some(Err(_)) => false,
            };
            if ends
                && this.state.phase.load(Ordering::Acquire) != BUSY
                && !this.state.advance(BUSY, this.table.now())
            {
                return Poll::Ready(Some(Err(Box::new(Evicted))));
            }
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let deadline = this.deadline;
        let sleep = this
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimeout(this.limit))))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A socket whose writes fail with `TimedOut` once no byte could be written
/// for `limit` (a client that does not read its answers).
struct WriteTimeout {
    inner: TcpStream,
    limit: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
}

impl WriteTimeout {
    fn new(inner: TcpStream, limit: Duration) -> WriteTimeout {
        WriteTimeout {
            inner,
            limit,
            stalled: None,
        }
    }

    /// After a write attempt: progress clears the stall timer; `Pending`
    /// starts it, and fails the write once it has run out.
    fn watch<T>(
        &mut self,
        cx: &mut Context<'_>,
        r: Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        if r.is_ready() {
            self.stalled = None;
            return r;
        }
        let limit = self.limit;
        let timer = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("the client read nothing for {} ms", limit.as_millis()),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for WriteTimeout {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for WriteTimeout {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch(cx, r)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.watch(cx, r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_peers_count_per_64_and_mapped_ipv4_as_ipv4() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(peer_key(ip("127.0.0.1")), ip("127.0.0.1"));
        assert_eq!(peer_key(ip("::ffff:10.1.2.3")), ip("10.1.2.3"));
        assert_eq!(peer_key(ip("2001:db8:1:2:aaaa::1")), ip("2001:db8:1:2::"));
        assert_eq!(
            peer_key(ip("2001:db8:1:2:ffff:ffff:ffff:ffff")),
            peer_key(ip("2001:db8:1:2::7"))
        );
        assert_ne!(
            peer_key(ip("2001:db8:1:3::1")),
            peer_key(ip("2001:db8:1:2::1"))
        );
    }

    fn limits(total: usize, per_ip: usize) -> Limits {
        Limits {
            max_connections: total,
            max_connections_per_ip: per_ip,
            ..Limits::default()
        }
    }

    fn count(table: &Arc<Table>) -> (usize, usize) {
        let t = table.inner.lock().unwrap();
        (t.total, t.conns.len())
    }

    #[test]
    fn over_its_share_a_peer_evicts_its_own_longest_waiting_connection() {
        let table = Table::new();
        let l = limits(10, 2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let first = Table::admit(&table, a, &l).unwrap();
        let second = Table::admit(&table, a, &l).unwrap();
        let other = Table::admit(&table, b, &l).unwrap();
        // Make the order of waiting explicit (the clock has ms steps).
        first.state.since.store(1, Ordering::Release);
        second.state.since.store(2, Ordering::Release);
        other.state.since.store(0, Ordering::Release);
        let third = Table::admit(&table, a, &l).unwrap();
        assert_eq!(first.state.phase.load(Ordering::Acquire), EVICTED);
        assert_eq!(second.state.phase.load(Ordering::Acquire), HEAD);
        assert_eq!(other.state.phase.load(Ordering::Acquire), HEAD);
        assert_eq!(count(&table), (3, 3));
        // An evicted connection's place is not given back twice.
        drop(first);
        assert_eq!(count(&table), (3, 3));
        drop((second, third, other));
        assert_eq!(count(&table), (0, 0));
        assert!(table.inner.lock().unwrap().per_ip.is_empty());
    }

    #[test]
    fn a_connection_being_answered_is_never_evicted() {
        let table = Table::new();
        let l = limits(2, 2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let busy = Table::admit(&table, a, &l).unwrap();
        assert!(busy.state.advance(BUSY, 5));
        let waiting = Table::admit(&table, b, &l).unwrap();
        assert!(waiting.state.advance(BODY, 9));
        // Full: the one waiting for its body makes room, though it is newer.
        let c = Table::admit(&table, a, &l).unwrap();
        assert_eq!(waiting.state.phase.load(Ordering::Acquire), EVICTED);
        assert_eq!(busy.state.phase.load(Ordering::Acquire), BUSY);
        // An evicted connection cannot start a request.
        assert!(!waiting.state.advance(BUSY, 10));
        // Full of busy connections: refused.
        assert!(c.state.advance(BUSY, 11));
        assert!(Table::admit(&table, b, &l).is_none());
        // Answered, it waits again and may make room.
        assert!(c.state.advance(HEAD, 12));
        assert!(Table::admit(&table, b, &l).is_some());
        assert_eq!(c.state.phase.load(Ordering::Acquire), EVICTED);
    }

    #[test]
    fn a_refused_connection_reads_a_json_503() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            use tokio::io::AsyncReadExt;
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let mut client = TcpStream::connect(addr).await.unwrap();
            let (server, peer) = listener.accept().await.unwrap();
            refuse(server, peer, &Arc::new(Semaphore::new(1)));
            let mut text = String::new();
            client.read_to_string(&mut text).await.unwrap();
            let (head, body) = text.split_once("\r\n\r\n").unwrap();
            assert!(head.starts_with("HTTP/1.1 503 "), "{head}");
            assert!(head.contains("content-type: application/json"), "{head}");
            assert!(
                head.contains(&format!("content-length: {}", body.len())),
                "{head}"
            );
            let v: serde_json::Value = serde_json::from_str(body).unwrap();
            assert!(
                v["error"]
                    .as_str()
                    .unwrap()
                    .contains("too many connections"),
                "{v}"
            );
        });
    }

    #[test]
    fn limits_that_admit_nothing_are_refused() {
        assert!(Limits::default().check().is_ok());
        for bad in [
            Limits {
                max_connections: 0,
                ..Limits::default()
            },
            Limits {
                max_connections_per_ip: 0,
                ..Limits::default()
            },
            Limits {
                header_timeout: Duration::ZERO,
                ..Limits::default()
            },
            Limits {
                body_timeout: Duration::ZERO,
                ..Limits::default()
            },
            Limits {
                idle_timeout: Duration::ZERO,
                ..Limits::default()
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }
}
