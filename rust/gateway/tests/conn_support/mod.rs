//! Shared by the connection tests: a gateway served in-process under given
//! limits, and raw HTTP/1.1 over a socket (so that a test can send half a
//! request, or connect from another loopback address).

#![allow(dead_code)]

use agenra_core::CompiledPolicy;
use agenra_gateway::{Gateway, Limits, Server};
use agenra_store::Log;
use serde_json::Value;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub const POLICY: &str = "tool pay.send(to: string, amount: int) { resource to; }\n\
                          grant pay: pay.send on glob \"*@example.com\" quota unlimited;\n";

/// A server and its store's directory (removed on drop).
pub struct Served {
    pub server: Option<Server>,
    pub addr: SocketAddr,
    dir: PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.stop();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn serve(name: &str, limits: Limits) -> Served {
    let dir = std::env::temp_dir().join(format!("agenra-conn-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let compiled = agenra_policy::compile(POLICY, "conn").unwrap();
    let policy = CompiledPolicy::new(compiled.policy).unwrap();
    let log = Log::open_redb(&dir.join("store.redb")).unwrap();
    let gateway = Gateway::open(log, policy, "conn.agr", false).unwrap();
    // These tests are about connections, not credentials: every request
    // has every role (tests/serve_perimeter.rs covers the credentials).
    let perimeter = Arc::new(agenra_gateway::Perimeter::insecure(Vec::new()));
    let server =
        Server::spawn_split(Arc::new(gateway), perimeter, "127.0.0.1:0", None, limits).unwrap();
    let addr = server.addr();
    Served {
        server: Some(server),
        addr,
        dir,
    }
}

/// Connects to `addr` from the loopback address `from` (`127.0.0.2`: another
/// client than `127.0.0.1`).
pub fn connect_from(from: &str, addr: SocketAddr) -> io::Result<TcpStream> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    let stream = rt.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(format!("{from}:0").parse().map_err(io::Error::other)?)?;
        let stream = socket.connect(addr).await?;
        stream.into_std()
    })?;
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(20)))?;
    Ok(stream)
}

/// A request with a JSON body (`Content-Length` set).
pub fn request(method: &str, path: &str, body: &str) -> Vec<u8> {
    format!(
        "{method} {path} HTTP/1.1\r\nHost: agenra\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// An answer: status, head (lowercased), body as JSON (`Null` when empty,
/// a string when not JSON).
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: Value,
    pub raw_body: Vec<u8>,
}

/// Reads one answer; `Err` when the connection closed first.
pub fn read_answer(stream: &mut TcpStream) -> io::Result<Answer> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("closed after {} bytes", buf.len()),
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
    let status: u16 = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::other(format!("no status in {head:?}")))?;
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < len {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "body cut"));
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(len);
    let json = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into()))
    };
    Ok(Answer {
        status,
        head,
        body: json,
        raw_body: body,
    })
}

/// Sends a request and reads its answer.
pub fn exchange(stream: &mut TcpStream, req: &[u8]) -> io::Result<Answer> {
    stream.write_all(req)?;
    read_answer(stream)
}

/// Whether the server closed `stream` (EOF or reset), waiting at most
/// `within`; any bytes it sends first are skipped.
pub fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let _ = stream.set_read_timeout(Some(within));
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

/// Asserts a JSON error answer: its status, `field`, and an `error` text.
pub fn assert_json_error(a: &Answer, status: u16, field: Option<&str>) {
    assert_eq!(a.status, status, "{a:?}");
    assert!(a.head.contains("content-type: application/json"), "{a:?}");
    assert!(
        a.body["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{a:?}"
    );
    match field {
        Some(f) => assert_eq!(a.body["field"], f, "{a:?}"),
        None => assert!(a.body.get("field").is_none(), "{a:?}"),
    }
}
