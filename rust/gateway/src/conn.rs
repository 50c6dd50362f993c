//! The connection layer under the HTTP API: the accept loop, its limits and
//! timeouts (`docs/http-api.md`, "Connections").
//!
//! * At most [`Limits::max_connections`] connections are served at once, and
//!   at most [`Limits::max_connections_per_ip`] from one peer address; a
//!   connection beyond either is accepted, answered `503` with a JSON error
//!   and `Connection: close`, and closed at once. The accept loop keeps
//!   draining the kernel's queue, so a client from another address is served
//!   while one peer holds its share of half-sent requests, and a refused
//!   client learns it at once instead of waiting in the queue.
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
use crate::http::json;
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
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::{Instant, Sleep};

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
    /// Connections served at once; more are answered `503` and closed.
    pub max_connections: usize,
    /// Connections served at once from one peer IP address.
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

/// Counts the connections of each peer address.
#[derive(Default)]
struct PerIp(Mutex<HashMap<IpAddr, usize>>);

/// One connection counted against its peer's share; uncounted on drop.
struct IpSlot {
    table: Arc<PerIp>,
    ip: IpAddr,
}

impl PerIp {
    fn take(table: &Arc<PerIp>, ip: IpAddr, max: usize) -> Option<IpSlot> {
        let mut map = table.0.lock().unwrap_or_else(|p| p.into_inner());
        let n = map.entry(ip).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(IpSlot {
            table: Arc::clone(table),
            ip,
        })
    }
}

impl Drop for IpSlot {
    fn drop(&mut self) {
        let mut map = self.table.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = map.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                map.remove(&self.ip);
            }
        }
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
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let draining = Arc::new(Semaphore::new(MAX_DRAINING));
    let per_ip = Arc::new(PerIp::default());
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
        let slot = Arc::clone(&slots).try_acquire_owned().ok();
        let ip_slot = PerIp::take(&per_ip, peer_key(peer.ip()), limits.max_connections_per_ip);
        let (Some(slot), Some(ip_slot)) = (slot, ip_slot) else {
            refuse(stream, peer, &draining);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(WriteTimeout::new(stream, limits.idle_timeout));
        let body_timeout = limits.body_timeout;
        let app = app.clone();
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            let app = app.clone();
            handle(app, req, body_timeout)
        });
        let conn = graceful.watch(builder.serve_connection(io, service));
        tokio::spawn(async move {
            let _ = conn.await;
            drop(slot);
            drop(ip_slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

async fn handle(
    mut app: axum::Router,
    req: Request<Incoming>,
    body_timeout: Duration,
) -> Result<Response, Infallible> {
    if let Some(refused) = check_head(&req) {
        return Ok(refused);
    }
    let req = req.map(|b| Body::new(DeadlineBody::new(b, body_timeout)));
    tower_service::Service::call(&mut app, req).await
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
struct DeadlineBody {
    inner: Incoming,
    deadline: Instant,
    limit: Duration,
    sleep: Option<Pin<Box<Sleep>>>,
}

impl DeadlineBody {
    fn new(inner: Incoming, limit: Duration) -> DeadlineBody {
        DeadlineBody {
            inner,
            deadline: Instant::now() + limit,
            limit,
            sleep: None,
        }
    }
}

impl hyper::body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
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

    #[test]
    fn a_peer_s_share_is_given_back_when_its_connections_close() {
        let table = Arc::new(PerIp::default());
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let a = PerIp::take(&table, ip, 2).unwrap();
        let b = PerIp::take(&table, ip, 2).unwrap();
        assert!(PerIp::take(&table, ip, 2).is_none());
        assert!(PerIp::take(&table, "10.0.0.2".parse().unwrap(), 2).is_some());
        drop(a);
        let c = PerIp::take(&table, ip, 2).unwrap();
        drop((b, c));
        assert!(table.0.lock().unwrap().is_empty());
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
