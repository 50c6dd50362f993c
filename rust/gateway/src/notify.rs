//! Webhook notifications of paused calls and their settlements
//! (`--notify-url URL --notify-secret-file FILE`, `docs/http-api.md`,
//! "Notifications").
//!
//! Each new PAUSE, and each approval or rejection of one (the server's
//! expiry included), is queued as it is applied, in the order the log holds
//! them, and POSTed as JSON by a background thread: never on a request's
//! path, so a slow or failing receiver never delays a decision. The body is
//! signed, `X-Agenra-Signature: sha256=<hex HMAC-SHA256 of the body under
//! the secret>`; a delivery that is refused (no connection, or a status
//! other than 2xx) is retried with exponential back-off, then given up (and
//! counted). Delivery is at least once: each notification has an `id` for
//! the receiver to drop repeats. Failures show in `GET /health` (field
//! `notify`, never a 503: notifications decide nothing) and `/metrics`.
//!
//! Plain `http://` only (no TLS client here): for an `https://` receiver,
//! relay through a local proxy.

use crate::api::{Outcome, PendingCall};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Notifications waiting to be sent beyond this are dropped (and counted):
/// the queue never grows without bound, and queueing never blocks.
pub const QUEUE: usize = 10_000;

/// Delivery attempts of one notification before it is given up.
pub const ATTEMPTS: u32 = 8;

/// A notification configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    /// `--notify-url` is not `http://HOST:PORT/PATH`.
    #[error("--notify-url `{url}`: {why}")]
    Url {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        why: String,
    },
    /// The secret file cannot be read, or holds no secret.
    #[error("--notify-secret-file {path}: {why}")]
    Secret {
        /// The file.
        path: String,
        /// What is wrong.
        why: String,
    },
    /// The sending thread cannot start.
    #[error("cannot start the notification thread: {0}")]
    Thread(std::io::Error),
}

/// Where and how notifications go.
#[derive(Clone)]
pub struct NotifyConfig {
    /// `http://HOST:PORT/PATH`.
    pub url: String,
    /// The HMAC key.
    pub secret: Vec<u8>,
    /// The first retry waits this long; each next one twice as long (at
    /// most a minute).
    pub backoff: Duration,
}

impl std::fmt::Debug for NotifyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotifyConfig")
            .field("url", &self.url)
            .field("secret", &"(hidden)")
            .field("backoff", &self.backoff)
            .finish()
    }
}

impl NotifyConfig {
    /// `--notify-url` with the secret read from `--notify-secret-file`
    /// (its bytes, without a trailing newline; at least 16).
    pub fn new(url: &str, secret_file: &Path) -> Result<NotifyConfig, NotifyError> {
        Target::parse(url)?;
        let secret_err = |why: String| NotifyError::Secret {
            path: secret_file.display().to_string(),
            why,
        };
        let mut secret = std::fs::read(secret_file).map_err(|e| secret_err(e.to_string()))?;
        while secret.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            secret.pop();
        }
        if secret.len() < 16 {
            return Err(secret_err(format!(
                "the secret is {} bytes; at least 16 are needed",
                secret.len()
            )));
        }
        Ok(NotifyConfig {
            url: url.to_string(),
            secret,
            backoff: Duration::from_millis(500),
        })
    }
}

/// The receiver's address, as parsed from the URL.
#[derive(Clone, Debug)]
struct Target {
    host: String,
    port: u16,
    path: String,
}

impl Target {
    fn parse(url: &str) -> Result<Target, NotifyError> {
        let bad = |why: &str| NotifyError::Url {
            url: url.to_string(),
            why: why.to_string(),
        };
        if url.starts_with("https://") {
            return Err(bad(
                "https is not supported (no TLS client in the server): relay through a local http receiver",
            ));
        }
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| bad("must start with http://"))?;
        if rest.chars().any(|c| c.is_control() || c == ' ') {
            return Err(bad("contains a space or a control character"));
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.contains('@') {
            return Err(bad("credentials in the URL are not supported"));
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !p.contains(']') => (
                h,
                p.parse::<u16>()
                    .map_err(|_| bad("the port is not a number from 1 to 65535"))?,
            ),
            _ => (authority, 80),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() || port == 0 {
            return Err(bad("no host or port"));
        }
        Ok(Target {
            host: host.to_string(),
            port,
            path: path.to_string(),
        })
    }
}

/// HMAC-SHA256 (RFC 2104) of `message` under `key`.
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(k.map(|b| b ^ 0x36));
    inner.update(message);
    let inner = inner.finalize();
    let mut outer = Sha256::new();
    outer.update(k.map(|b| b ^ 0x5c));
    outer.update(inner);
    outer.finalize().into()
}

/// The `X-Agenra-Signature` value of `body`: `sha256=` and 64 hex digits.
pub fn signature(secret: &[u8], body: &[u8]) -> String {
    let mac = hmac_sha256(secret, body);
    let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// What the notifier has done (for `/health` and `/metrics`).
#[derive(Default)]
pub struct NotifyStats {
    /// Notifications delivered.
    pub sent: AtomicU64,
    /// Delivery attempts that failed.
    pub failures: AtomicU64,
    /// Notifications given up (out of attempts) or dropped (queue full).
    pub dropped: AtomicU64,
    /// Notifications queued and not yet delivered or given up.
    pub queued: AtomicU64,
    /// The last attempt failed.
    pub failing: AtomicBool,
    /// Why the last failed attempt failed.
    pub last_error: Mutex<Option<String>>,
}

/// The `notify` field of `GET /health`.
#[derive(Clone, Debug, Serialize)]
pub struct NotifyHealth {
    /// `ok`, or `failing` while deliveries fail (the gateway still decides).
    /// (`/health` is open: the receiver's address is not shown.)
    pub status: &'static str,
    /// Delivered.
    pub sent: u64,
    /// Failed attempts.
    pub failures: u64,
    /// Given up or dropped.
    pub dropped: u64,
    /// Waiting to be delivered.
    pub queued: u64,
    /// Why the last failed attempt failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// The queue and its sending thread.
pub struct Notifier {
    tx: Mutex<Option<SyncSender<Vec<u8>>>>,
    stats: Arc<NotifyStats>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// One notification (the body of a delivery).
#[derive(Serialize)]
struct Note<'a> {
    /// Stable per event: the receiver drops repeats by it.
    id: String,
    /// `pause` or `settled`.
    event: &'static str,
    tenant: &'a str,
    session: &'a str,
    call: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    args: Option<&'a serde_json::Value>,
    /// For a pause: the rule that paused it; for a settlement, the rule of
    /// the re-check (a DENY's rule).
    #[serde(skip_serializing_if = "Option::is_none")]
    rule: Option<&'a str>,
    reason: &'a str,
    /// `approve` or `reject` (a settlement).
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    /// ALLOW or DENY (an approval's re-check).
    #[serde(skip_serializing_if = "Option::is_none")]
    decision: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    digest: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires: Option<u64>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    path: &'a [String],
    /// Who settled it (`approver:NAME`, `server:pause-timeout`).
    #[serde(skip_serializing_if = "Option::is_none")]
    actor: Option<&'a str>,
    /// The approver's reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<&'a str>,
    policy_hash: &'a str,
    /// Milliseconds (the server's clock) when it was queued.
    time_ms: u64,
}

impl Notifier {
    /// Starts the sending thread.
    pub fn spawn(config: NotifyConfig) -> Result<Arc<Notifier>, NotifyError> {
        let target = Target::parse(&config.url)?;
        let (tx, rx) = sync_channel::<Vec<u8>>(QUEUE);
        let stats = Arc::new(NotifyStats::default());
        let s2 = Arc::clone(&stats);
        let t2 = target;
        let thread = std::thread::Builder::new()
            .name("agenra-notify".into())
            .spawn(move || deliver_all(rx, t2, config.secret, config.backoff, s2))
            .map_err(NotifyError::Thread)?;
        Ok(Arc::new(Notifier {
            tx: Mutex::new(Some(tx)),
            stats,
            thread: Mutex::new(Some(thread)),
        }))
    }

    /// Its counters.
    pub fn stats(&self) -> &NotifyStats {
        &self.stats
    }

    /// The `notify` field of `GET /health`.
    pub fn health(&self) -> NotifyHealth {
        let s = &self.stats;
        NotifyHealth {
            status: if s.failing.load(Ordering::Relaxed) {
                "failing"
            } else {
                "ok"
            },
            sent: s.sent.load(Ordering::Relaxed),
            failures: s.failures.load(Ordering::Relaxed),
            dropped: s.dropped.load(Ordering::Relaxed),
            queued: s.queued.load(Ordering::Relaxed),
            last_error: s.last_error.lock().ok().and_then(|e| e.clone()),
        }
    }

    /// Queues the notification of an applied event, if it is one: a new
    /// PAUSE (`paused`: the call as the approvals list holds it), or the
    /// approval or rejection of a paused call. Never blocks.
    pub fn event(
        &self,
        outcome: &Outcome,
        paused: Option<&PendingCall>,
        actor: Option<&str>,
        note: Option<&str>,
    ) {
        let settled = matches!(outcome.kind, "approve" | "reject");
        if paused.is_none() && !settled {
            return;
        }
        let event = if settled { "settled" } else { "pause" };
        let id_text = format!(
            "{event}\u{0}{}\u{0}{}\u{0}{}",
            outcome.tenant, outcome.session, outcome.call
        );
        let id: String = Sha256::digest(id_text.as_bytes())
            .iter()
            .take(16)
            .map(|b| format!("{b:02x}"))
            .collect();
        let n = Note {
            id,
            event,
            tenant: &outcome.tenant,
            session: &outcome.session,
            call: &outcome.call,
            tool: paused.and_then(|p| p.tool.as_deref()),
            args: paused.map(|p| &p.args),
            rule: outcome.rule.as_deref(),
            reason: &outcome.reason,
            kind: settled.then_some(outcome.kind),
            decision: if settled { outcome.decision } else { None },
            digest: paused.map(|p| p.digest.as_str()),
            expires: paused.map(|p| p.expires),
            path: &outcome.path,
            actor: if settled { actor } else { None },
            note: if settled { note } else { None },
            policy_hash: &outcome.policy_hash,
            time_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
        };
        let Ok(body) = serde_json::to_vec(&n) else {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let Ok(tx) = self.tx.lock() else { return };
        let Some(tx) = tx.as_ref() else { return };
        match tx.try_send(body) {
            Ok(()) => {
                self.stats.queued.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.stats.dropped.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut e) = self.stats.last_error.lock() {
                    *e = Some(format!(
                        "the queue is full ({QUEUE} notifications): dropped one"
                    ));
                }
                self.stats.failing.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Stops taking notifications and waits for the queued ones to be
    /// delivered or given up.
    pub fn close(&self) {
        if let Ok(mut tx) = self.tx.lock() {
            tx.take();
        }
        if let Some(t) = self.thread.lock().ok().and_then(|mut t| t.take()) {
            let _ = t.join();
        }
    }
}

fn deliver_all(
    rx: Receiver<Vec<u8>>,
    target: Target,
    secret: Vec<u8>,
    backoff: Duration,
    stats: Arc<NotifyStats>,
) {
    while let Ok(body) = rx.recv() {
        let sig = signature(&secret, &body);
        let mut wait = backoff;
        let mut delivered = false;
        for attempt in 1..=ATTEMPTS {
            match post(&target, &body, &sig) {
                Ok(()) => {
                    stats.sent.fetch_add(1, Ordering::Relaxed);
                    stats.failing.store(false, Ordering::Relaxed);
                    delivered = true;
                    break;
                }
                Err(why) => {
                    stats.failures.fetch_add(1, Ordering::Relaxed);
                    stats.failing.store(true, Ordering::Relaxed);
                    if let Ok(mut e) = stats.last_error.lock() {
                        *e = Some(format!("attempt {attempt} of {ATTEMPTS}: {why}"));
                    }
                    if attempt < ATTEMPTS {
                        std::thread::sleep(wait);
                        wait = (wait * 2).min(Duration::from_secs(60));
                    }
                }
            }
        }
        if !delivered {
            stats.dropped.fetch_add(1, Ordering::Relaxed);
        }
        stats.queued.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One delivery: `Ok` for a 2xx answer.
fn post(t: &Target, body: &[u8], sig: &str) -> Result<(), String> {
    let addr = (t.host.as_str(), t.port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve the receiver's host: {e}"))?
        .next()
        .ok_or_else(|| "the receiver's host has no address".to_string())?;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| format!("cannot connect to the receiver: {e}"))?;
    let io = |e: std::io::Error| format!("the receiver: {e}");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(io)?;
    s.set_write_timeout(Some(Duration::from_secs(10)))
        .map_err(io)?;
    let host = if t.host.contains(':') && !t.host.starts_with('[') {
        format!("[{}]:{}", t.host, t.port)
    } else {
        format!("{}:{}", t.host, t.port)
    };
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: agenra-notify\r\nContent-Type: application/json\r\n\
X-Agenra-Signature: {sig}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        t.path,
        body.len()
    );
    s.write_all(head.as_bytes()).map_err(io)?;
    s.write_all(body).map_err(io)?;
    let mut line = String::new();
    BufReader::new(&mut s).read_line(&mut line).map_err(io)?;
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| "the receiver sent no HTTP status line".to_string())?;
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(format!("the receiver answered {status}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test case 1.
        assert_eq!(
            hex(&hmac_sha256(&[0x0b; 20], b"Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        // Test case 2.
        assert_eq!(
            hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // Test case 6: a key longer than the block.
        assert_eq!(
            hex(&hmac_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn secrets_are_checked() {
        let dir = std::env::temp_dir().join(format!("agenra-notify-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("secret");
        std::fs::write(&f, "short\n").unwrap();
        let e = NotifyConfig::new("http://127.0.0.1:9/", &f).unwrap_err();
        assert!(e.to_string().contains("at least 16"), "{e}");
        std::fs::write(&f, "0123456789abcdef0123\n").unwrap();
        let c = NotifyConfig::new("http://127.0.0.1:9/", &f).unwrap();
        assert_eq!(c.secret, b"0123456789abcdef0123");
        assert!(
            !format!("{c:?}").contains("0123"),
            "the secret is never printed"
        );
        let e = NotifyConfig::new("http://127.0.0.1:9/", &dir.join("none")).unwrap_err();
        assert!(e.to_string().contains("--notify-secret-file"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn urls_are_checked() {
        assert!(Target::parse("https://hooks.example/x").is_err());
        assert!(Target::parse("ftp://x").is_err());
        assert!(Target::parse("http://u:p@host/x").is_err());
        assert!(Target::parse("http://host:99999/").is_err());
        let t = Target::parse("http://127.0.0.1:9000/hook?t=1").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.path.as_str()),
            ("127.0.0.1", 9000, "/hook?t=1")
        );
        let t = Target::parse("http://localhost").unwrap();
        assert_eq!((t.port, t.path.as_str()), (80, "/"));
    }
}
