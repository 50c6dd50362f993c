//! `agenra serve`'s connection flags reach the server: a second connection
//! over `--max-connections-per-ip 1` takes the place of the first (idle)
//! one, and an idle connection is closed after `--header-timeout 0.3`; a
//! zero timeout is refused at start.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_agenra");

struct Server {
    child: Child,
    addr: SocketAddr,
    dir: std::path::PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn serve(name: &str, extra: &[&str]) -> Server {
    let dir = std::env::temp_dir().join(format!("agenra-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("policy.agr"),
        "tool t.run(x: string) { resource x; }\ngrant g: t.run quota unlimited;\n",
    )
    .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let child = Command::new(BIN)
        .arg("serve")
        .arg("--insecure-no-auth")
        .arg("--policy")
        .arg(dir.join("policy.agr"))
        .arg("--store")
        .arg(dir.join("store.redb"))
        .args(["--listen", &addr.to_string()])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = Server { child, addr, dir };
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(mut s) = TcpStream::connect(addr) {
            if get_health(&mut s).is_some_and(|a| a.starts_with("HTTP/1.1 200")) {
                return server;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("agenra serve did not come up");
}

/// `GET /health`; the whole answer (read until the body's length).
fn get_health(s: &mut TcpStream) -> Option<String> {
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(b"GET /health HTTP/1.1\r\nHost: agenra\r\n\r\n")
        .ok()?;
    read_answer(s)
}

fn read_answer(s: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&buf).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let len: usize = text[..end]
                .to_lowercase()
                .lines()
                .find_map(|l| {
                    l.strip_prefix("content-length:")
                        .map(|v| v.trim().to_string())
                })
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                return Some(text);
            }
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

#[test]
fn connection_flags_reach_the_server() {
    let server = serve(
        "serve-limits",
        &["--max-connections-per-ip", "1", "--header-timeout", "0.3"],
    );
    // The probe connections of `serve` are closed; wait until the server
    // has let go of them.
    let started = Instant::now();
    let mut held = loop {
        let mut s = TcpStream::connect(server.addr).unwrap();
        match get_health(&mut s) {
            Some(a) if a.starts_with("HTTP/1.1 200") => break s,
            _ => assert!(started.elapsed() < Duration::from_secs(10)),
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // A second connection from 127.0.0.1, while the first is open: the
    // first makes room.
    let mut second = TcpStream::connect(server.addr).unwrap();
    let a = get_health(&mut second).expect("an answer");
    assert!(a.starts_with("HTTP/1.1 200"), "{a}");
    held.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut b = [0u8; 16];
    assert!(
        matches!(held.read(&mut b), Ok(0)),
        "the first is still open"
    );

    // The second, idle, is closed after the header timeout.
    let started = Instant::now();
    assert!(matches!(second.read(&mut b), Ok(0)), "still open");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_zero_timeout_is_refused() {
    let out = Command::new(BIN)
        .args(["serve", "--policy", "p.agr", "--body-timeout", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--body-timeout"), "{err}");
}
