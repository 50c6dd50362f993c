//! 1,100 half-sent requests from one client address (partial heads, and
//! bodies announced and never finished) while another client, from the same
//! address and from another, gets `/health`, a session and an authorize
//! answered within a second each.
//!
//! The process runs under a budget of 2,048 open files (the flood's 1,100
//! client sockets share it with the server): a server that took every
//! connection would need 2,200 and stop accepting, as `agenra serve` did
//! under the common 1,024 limit. In its own test binary, since the limit is
//! per process.

mod conn_support;

use agenra_gateway::Limits;
use conn_support::*;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const FLOOD: usize = 1_100;
const FILES: u64 = 2_048;

/// Sets the soft open-file limit to `FILES`; false when the hard limit is
/// lower.
fn file_budget() -> bool {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read/write the struct passed.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return false;
    }
    if lim.rlim_max != libc::RLIM_INFINITY && lim.rlim_max < FILES {
        eprintln!(
            "SKIPPED: the hard open-file limit is {}; this test needs {FILES}",
            lim.rlim_max
        );
        return false;
    }
    lim.rlim_cur = FILES;
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0 }
}

#[test]
fn half_sent_requests_do_not_starve_other_clients() {
    if !file_budget() {
        return;
    }
    // Long timeouts: the flood must still be held when the other client
    // asks (checked at the end), not have timed out.
    let served = serve(
        "flood",
        Limits {
            header_timeout: Duration::from_secs(60),
            body_timeout: Duration::from_secs(60),
            ..Limits::default()
        },
    );
    let addr = served.addr;

    let mut flood: Vec<(usize, TcpStream)> = Vec::with_capacity(FLOOD);
    for i in 0..FLOOD {
        let Ok(mut s) = TcpStream::connect(addr) else {
            continue;
        };
        // Writes to a connection the server refused may fail: ignored.
        let _ = match i % 3 {
            // A head that never ends.
            0 => s.write_all(b"POST /v1/authorize HTTP/1.1\r\nHost: agenra\r\nX-Slow: 1"),
            // A body announced and never finished (under the 1 MiB limit).
            1 => s
                .write_all(b"POST /v1/authorize HTTP/1.1\r\nHost: agenra\r\nContent-Length: 1000000\r\n\r\n")
                .and_then(|_| s.write_all(&[b' '; 1024])),
            // 100 MB announced, 1 KiB sent.
            _ => s
                .write_all(b"POST /v1/authorize HTTP/1.1\r\nHost: agenra\r\nContent-Length: 100000000\r\n\r\n")
                .and_then(|_| s.write_all(&[b' '; 1024])),
        };
        flood.push((i, s));
    }
    assert!(flood.len() >= FLOOD - 10, "only {} connected", flood.len());

    // Another client on a fresh connection, from the flood's address (it
    // takes the place of the flood's longest-waiting connection), then
    // from another address.
    let within = Duration::from_secs(1);
    for (from, session) in [("127.0.0.1", "s1"), ("127.0.0.2", "s2")] {
        let started = Instant::now();
        let mut c = connect_from(from, addr).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let a = exchange(&mut c, &request("GET", "/health", "")).expect("/health answers");
        let took = started.elapsed();
        assert_eq!(a.status, 200, "from {from}: {a:?}");
        assert!(took < within, "from {from}: /health took {took:?}");

        let started = Instant::now();
        let open = format!(r#"{{"tenant":"t","session":"{session}"}}"#);
        let a = exchange(&mut c, &request("POST", "/v1/sessions", &open)).expect("a session");
        let took = started.elapsed();
        assert!(a.status == 201 || a.status == 200, "from {from}: {a:?}");
        assert!(took < within, "from {from}: the session took {took:?}");

        let started = Instant::now();
        let body = format!(
            r#"{{"tenant":"t","session":"{session}","call":{{"id":"c1","tool":"pay.send","args":{{"to":"a@example.com","amount":1}}}}}}"#
        );
        let a = exchange(&mut c, &request("POST", "/v1/authorize", &body)).expect("authorize");
        let took = started.elapsed();
        assert_eq!(a.status, 200, "from {from}: {a:?}");
        assert_eq!(a.body["decision"], "ALLOW", "from {from}: {a:?}");
        assert!(took < within, "from {from}: authorize took {took:?}");
    }

    // The flood's newest half-sent head is still held open: nothing timed
    // out, the other client was served while the flood stood.
    let newest = flood
        .iter_mut()
        .rev()
        .find(|(i, _)| i % 3 == 0)
        .map(|(_, s)| s)
        .unwrap();
    newest.set_nonblocking(true).unwrap();
    let mut b = [0u8; 64];
    match newest.read(&mut b) {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!("the newest flood connection was answered or closed: {other:?}"),
    }
    drop(flood);
    drop(served);
}
