//! The connection layer's limits (`docs/http-api.md`, "Connections"), each
//! under short limits so that the tests take a second or so: a body that
//! stops arriving gets a JSON 408, a head that never ends is closed, heads
//! and bodies over the limits get JSON 413/414/431, over the connection
//! caps the connection that has waited longest on its client makes room.

mod conn_support;

use agenra_gateway::Limits;
use conn_support::*;
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

const SHORT: Duration = Duration::from_millis(400);

fn short_limits() -> Limits {
    Limits {
        header_timeout: SHORT,
        body_timeout: SHORT,
        idle_timeout: SHORT,
        ..Limits::default()
    }
}

fn connect(addr: std::net::SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

#[test]
fn a_body_that_stops_arriving_gets_a_json_408_and_the_connection_closes() {
    let served = serve("body-timeout", short_limits());
    let mut s = connect(served.addr);
    let started = Instant::now();
    s.write_all(
        b"POST /v1/authorize HTTP/1.1\r\nHost: agenra\r\nContent-Type: application/json\r\n\
          Content-Length: 1000\r\n\r\n{\"tenant\":",
    )
    .unwrap();
    let a = read_answer(&mut s).expect("an answer before the connection closes");
    let took = started.elapsed();
    assert_json_error(&a, 408, Some("body"));
    assert!(took >= SHORT, "answered after {took:?}, before the timeout");
    assert!(took < Duration::from_secs(10), "answered after {took:?}");
    assert!(closed_within(&mut s, Duration::from_secs(10)));
}

#[test]
fn a_head_that_never_ends_is_closed_after_the_header_timeout() {
    let served = serve("head-timeout", short_limits());
    let mut s = connect(served.addr);
    let started = Instant::now();
    s.write_all(b"GET /health HTTP/1.1\r\nHost: agenra\r\nX-Slow: ")
        .unwrap();
    assert!(
        closed_within(&mut s, Duration::from_secs(10)),
        "the half-sent head was held open"
    );
    let took = started.elapsed();
    assert!(took >= SHORT, "closed after {took:?}, before the timeout");

    // An idle keep-alive connection is closed after as long.
    let mut s = connect(served.addr);
    let a = exchange(&mut s, &request("GET", "/health", "")).unwrap();
    assert_eq!(a.status, 200, "{a:?}");
    let started = Instant::now();
    assert!(
        closed_within(&mut s, Duration::from_secs(10)),
        "the idle connection was held open"
    );
    assert!(started.elapsed() >= SHORT / 2);
}

#[test]
fn bodies_and_heads_over_the_limits_get_json_errors() {
    let served = serve("too-large", short_limits());

    // 100 MB announced: refused at once, none of it read.
    let mut s = connect(served.addr);
    let a = exchange(
        &mut s,
        b"POST /v1/authorize HTTP/1.1\r\nHost: agenra\r\nContent-Length: 100000000\r\n\r\n{",
    )
    .unwrap();
    assert_json_error(&a, 413, Some("body"));

    // A URI over 8 KiB.
    let mut s = connect(served.addr);
    let path = format!("/v1/sessions/{}", "a".repeat(9 << 10));
    let a = exchange(&mut s, &request("GET", &path, "")).unwrap();
    assert_json_error(&a, 414, Some("uri"));

    // More than 64 headers.
    let mut s = connect(served.addr);
    let mut req = String::from("GET /health HTTP/1.1\r\nHost: agenra\r\n");
    for i in 0..70 {
        req.push_str(&format!("X-H{i}: {i}\r\n"));
    }
    req.push_str("\r\n");
    let a = exchange(&mut s, req.as_bytes()).unwrap();
    assert_json_error(&a, 431, Some("headers"));

    // Headers over 16 KiB (but within the 64 KiB the server buffers).
    let mut s = connect(served.addr);
    let req = format!(
        "GET /health HTTP/1.1\r\nHost: agenra\r\nX-Big: {}\r\n\r\n",
        "b".repeat(20 << 10)
    );
    let a = exchange(&mut s, req.as_bytes()).unwrap();
    assert_json_error(&a, 431, Some("headers"));

    // The server still answers.
    let mut s = connect(served.addr);
    let a = exchange(&mut s, &request("GET", "/health", "")).unwrap();
    assert_eq!(a.status, 200, "{a:?}");
}

#[test]
fn heads_the_http_library_refuses_get_an_answer_and_a_close() {
    // Documented as the one place an error has no JSON body: hyper answers
    // these itself. The test pins what a client sees.
    let served = serve("malformed", short_limits());
    let mut s = connect(served.addr);
    let a = exchange(&mut s, b"GET /health HTTP/1.1\r\nHost agenra\r\n\r\n").unwrap();
    assert_eq!(a.status, 400, "{a:?}");
    assert!(a.raw_body.is_empty(), "{a:?}");
    assert!(closed_within(&mut s, Duration::from_secs(10)));

    let mut s = connect(served.addr);
    let req = format!(
        "GET /health HTTP/1.1\r\nHost: agenra\r\nX-Big: {}\r\n\r\n",
        "b".repeat(256 << 10)
    );
    // The server stops reading at its limit: written from a thread, so
    // that the answer is read whatever happens to the rest.
    let mut w = s.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = w.write_all(req.as_bytes());
    });
    let a = read_answer(&mut s).unwrap();
    let _ = writer.join();
    assert_eq!(a.status, 431, "{a:?}");
    assert!(a.raw_body.is_empty(), "{a:?}");
    assert!(closed_within(&mut s, Duration::from_secs(10)));
}

#[test]
fn over_the_caps_the_longest_waiting_connection_makes_room() {
    let served = serve(
        "caps",
        Limits {
            max_connections: 3,
            max_connections_per_ip: 2,
            header_timeout: Duration::from_secs(30),
            ..Limits::default()
        },
    );
    let addr = served.addr;
    let health = |s: &mut TcpStream| exchange(s, &request("GET", "/health", "")).unwrap();
    // Two connections from 127.0.0.1, each served once, then idle.
    let mut first = connect(addr);
    assert_eq!(health(&mut first).status, 200);
    std::thread::sleep(Duration::from_millis(20));
    let mut second = connect(addr);
    assert_eq!(health(&mut second).status, 200);
    std::thread::sleep(Duration::from_millis(20));

    // A third from 127.0.0.1, over its address's share: the first (idle
    // longest) is closed and the third served.
    let mut third = connect(addr);
    assert_eq!(health(&mut third).status, 200);
    assert!(closed_within(&mut first, Duration::from_secs(10)));
    std::thread::sleep(Duration::from_millis(20));

    // Another address: the third connection overall, served; nothing closed.
    let mut other = connect_from("127.0.0.2", addr).unwrap();
    assert_eq!(health(&mut other).status, 200);
    assert!(!closed_within(&mut second, Duration::from_millis(100)));

    // A fourth overall, from a third address: over the server's cap, the
    // longest idle of all (the second) makes room.
    let mut fourth = connect_from("127.0.0.3", addr).unwrap();
    assert_eq!(health(&mut fourth).status, 200);
    assert!(closed_within(&mut second, Duration::from_secs(10)));
    for s in [&mut third, &mut other, &mut fourth] {
        assert_eq!(health(s).status, 200);
    }
}

#[test]
fn an_answer_the_client_does_not_read_is_dropped_after_the_idle_timeout() {
    // Long head and body timeouts: only the idle timeout can close it.
    let served = serve(
        "slow-reader",
        Limits {
            idle_timeout: SHORT,
            header_timeout: Duration::from_secs(60),
            body_timeout: Duration::from_secs(60),
            ..Limits::default()
        },
    );
    let mut s = connect(served.addr);
    // Pipelined requests, never read: the answers fill both socket buffers,
    // then the server's writes stall.
    let mut writer = s.try_clone().unwrap();
    writer
        .set_write_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let pusher = std::thread::spawn(move || {
        let req = request("GET", "/health", "");
        let batch: Vec<u8> = req.iter().copied().cycle().take(req.len() * 1000).collect();
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(5) {
            if writer.write_all(&batch).is_err() {
                return true;
            }
        }
        false
    });
    // The server gives up on the connection: the client's writes fail.
    assert!(
        pusher.join().unwrap(),
        "the server kept a connection whose answers were not read"
    );
    assert!(closed_within(&mut s, Duration::from_secs(10)));
}
