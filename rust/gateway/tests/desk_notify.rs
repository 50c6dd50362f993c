//! Webhook notifications (`--notify-url`, docs/http-api.md
//! "Notifications"): a local receiver checks the signature, the order
//! (a pause before its settlement), and the retry after a refused
//! delivery; a receiver that is down shows in `/health` (not a 503) and
//! `/metrics`, and decisions go on.

mod desk_support;

use agenra_gateway::notify::{hmac_sha256, signature, Notifier, NotifyConfig};
use desk_support::{http, Desk};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SECRET: &[u8] = b"a webhook secret of some length";

/// One delivery the receiver saw: its signature header, its body, and the
/// status it answered.
#[derive(Clone, Debug)]
struct Delivery {
    signature: String,
    body: Vec<u8>,
    status: u16,
}

/// A receiver that refuses (503) the deliveries whose 1-based number is
/// in `refuse`, and accepts the others.
fn receiver(refuse: &'static [usize]) -> (String, Arc<Mutex<Vec<Delivery>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hooks/agenra?k=1", l.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = Arc::clone(&seen);
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut c) = conn else { continue };
            let mut r = BufReader::new(c.try_clone().unwrap());
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            assert!(line.starts_with("POST /hooks/agenra?k=1 "), "{line}");
            let (mut len, mut sig) = (0usize, String::new());
            loop {
                let mut h = String::new();
                r.read_line(&mut h).unwrap();
                let h = h.trim_end();
                if h.is_empty() {
                    break;
                }
                let (k, v) = h.split_once(':').unwrap();
                match k.to_ascii_lowercase().as_str() {
                    "content-length" => len = v.trim().parse().unwrap(),
                    "x-agenra-signature" => sig = v.trim().to_string(),
                    _ => {}
                }
            }
            let mut body = vec![0; len];
            r.read_exact(&mut body).unwrap();
            let n = s2.lock().unwrap().len() + 1;
            let status = if refuse.contains(&n) { 503 } else { 200 };
            s2.lock().unwrap().push(Delivery {
                signature: sig,
                body,
                status,
            });
            let _ = write!(
                c,
                "HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
    });
    (url, seen)
}

fn notifier(url: &str) -> Arc<Notifier> {
    Notifier::spawn(NotifyConfig {
        url: url.to_string(),
        secret: SECRET.to_vec(),
        backoff: Duration::from_millis(50),
    })
    .unwrap()
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn health(d: &Desk) -> (u16, Value) {
    let a = http(d.control(), "GET", "/health", &[], "");
    (a.status, a.json())
}

#[test]
fn pauses_and_settlements_are_posted_signed_in_order_and_retried() {
    // The first delivery is refused: it must come again.
    let (url, seen) = receiver(&[1]);
    let d = Desk::start("notify", true);
    assert!(d.gateway().set_notifier(notifier(&url)));
    d.open_session("s");
    d.call("s", "r1", "read", json!({"key": "notes"}));
    d.succeed("s", "r1");
    let out = d.call("s", "p1", "post", json!({"body": "hello"}));
    assert_eq!(out["decision"], "PAUSE", "{out}");
    let out = d.call("s", "p2", "post", json!({"body": "again"}));
    assert_eq!(out["decision"], "PAUSE", "{out}");
    // Settle both with the approver's API.
    let (_, list) = agenra_gateway::client::Client::connect(d.control())
        .unwrap()
        .with_token(&d.approver)
        .get("/v1/approvals")
        .unwrap();
    let card = |call: &str| {
        list["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["call"] == call)
            .cloned()
            .unwrap()
    };
    let mut c = agenra_gateway::client::Client::connect(d.control())
        .unwrap()
        .with_token(&d.approver);
    let p1 = card("p1");
    let (st, out) = c
        .post(
            "/v1/approvals/p1/approve",
            &json!({"session": "s", "digest": p1["digest"], "reason": "fine by me"}),
        )
        .unwrap();
    assert_eq!(st, 200, "{out}");
    let (st, out) = c
        .post(
            "/v1/approvals/p2/reject",
            &json!({"session": "s", "reason": "no"}),
        )
        .unwrap();
    assert_eq!(st, 200, "{out}");

    wait_until("four deliveries accepted", || {
        seen.lock()
            .unwrap()
            .iter()
            .filter(|d| d.status == 200)
            .count()
            == 4
    });
    let all = seen.lock().unwrap().clone();
    // Every delivery is signed over its exact body.
    for del in &all {
        assert_eq!(del.signature, signature(SECRET, &del.body));
        let mac = hmac_sha256(SECRET, &del.body);
        assert!(del.signature.ends_with(&format!("{:02x}", mac[31])));
    }
    // The refused one came again, the same notification.
    assert_eq!(all[0].status, 503);
    assert_eq!(all[1].status, 200);
    assert_eq!(all[0].body, all[1].body);
    // In the log's order: each pause before its settlement.
    let notes: Vec<Value> = all
        .iter()
        .filter(|d| d.status == 200)
        .map(|d| serde_json::from_slice(&d.body).unwrap())
        .collect();
    let order: Vec<(String, String)> = notes
        .iter()
        .map(|n| {
            (
                n["event"].as_str().unwrap().into(),
                n["call"].as_str().unwrap().into(),
            )
        })
        .collect();
    let pair = |e: &str, c: &str| (e.to_string(), c.to_string());
    assert_eq!(
        order,
        [
            pair("pause", "p1"),
            pair("pause", "p2"),
            pair("settled", "p1"),
            pair("settled", "p2")
        ]
    );
    assert_eq!(notes[0]["digest"], p1["digest"], "{}", notes[0]);
    assert_eq!(notes[0]["tool"], "post");
    assert_eq!(notes[0]["rule"], "ask");
    assert_eq!(notes[0]["path"][0], "r1");
    assert_eq!(notes[2]["kind"], "approve");
    assert_eq!(notes[2]["decision"], "ALLOW");
    assert_eq!(notes[2]["actor"], "approver:alice");
    assert_eq!(notes[2]["note"], "fine by me");
    assert_eq!(notes[3]["kind"], "reject");
    // Delivered now: /health says ok, and counts the failed attempt.
    let (st, h) = health(&d);
    assert_eq!(st, 200, "{h}");
    assert_eq!(h["notify"]["status"], "ok", "{h}");
    assert_eq!(h["notify"]["sent"], 4, "{h}");
    assert_eq!(h["notify"]["failures"], 1, "{h}");
    assert!(
        h["notify"].get("url").is_none(),
        "/health is open: no address"
    );
}

#[test]
fn a_receiver_that_is_down_shows_in_health_and_metrics_and_decides_nothing() {
    // A port nobody listens on.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let d = Desk::start("notify-down", true);
    assert!(d
        .gateway()
        .set_notifier(notifier(&format!("http://127.0.0.1:{port}/x"))));
    d.open_session("s");
    d.call("s", "r1", "read", json!({"key": "notes"}));
    d.succeed("s", "r1");
    let out = d.call("s", "p1", "post", json!({"body": "hello"}));
    assert_eq!(out["decision"], "PAUSE", "decisions go on: {out}");
    wait_until("a failed attempt", || {
        health(&d).1["notify"]["failures"].as_u64().unwrap_or(0) >= 2
    });
    let (st, h) = health(&d);
    assert_eq!(st, 200, "a failing webhook is no 503: {h}");
    assert_eq!(h["status"], "ok", "{h}");
    assert_eq!(h["notify"]["status"], "failing", "{h}");
    assert!(
        h["notify"]["last_error"]
            .as_str()
            .unwrap_or("")
            .contains("cannot connect"),
        "{h}"
    );
    let a = http(
        d.control(),
        "GET",
        "/metrics",
        &[("Authorization", &format!("Bearer {}", d.admin))],
        "",
    );
    assert_eq!(a.status, 200);
    assert!(a.body.contains("agenra_notify_failing 1"), "{}", a.body);
    assert!(a.body.contains("agenra_notify_failures "), "{}", a.body);
    // The agent is still served.
    let out = d.call("s", "r2", "read", json!({"key": "more"}));
    assert_eq!(out["decision"], "ALLOW", "{out}");
}
