//! The approvals page (`/desk`, docs/http-api.md "The approvals page") on
//! `agenra mcp-proxy --on-pause wait`'s approvals address: the proxy gets
//! it through its `ApprovalDesk`, with the same credentials. An approver
//! sees the waiting call there and approves it (the call then runs); an
//! agent's or another tenant's credential is refused. Needs `python3`.

#[path = "mcp/harness.rs"]
mod harness;

use harness::{is_error, text, wait_for_approvals, Proxy};
use serde_json::json;

#[test]
fn the_proxy_serves_the_approvals_page_over_its_desk() {
    let (mut p, mut http, creds) = Proxy::start_waiting_with("desk-page", "30");
    // A call before the paused one: the page lists it among the session's
    // recent calls (the proxy's desk hands the page its session's calls).
    p.send_call(7, "read_file", json!({"path": "docs/notes.md"}));
    let read = p.recv();
    assert_eq!(read["id"], json!(7), "{read}");
    assert!(!is_error(&read), "{read}");
    p.send_call(1, "deploy", json!({"target": "prod"}));
    wait_for_approvals(&mut http, 1);
    // The harness reads the address once: connect again to it.
    let addr = http.addr();
    let client = || agenra_gateway::client::Client::connect(addr).unwrap();
    let mut page = client().with_token(&creds.approver);
    let (status, body) = page.request("GET", "/desk", b"").unwrap();
    assert_eq!(status, 200);
    assert!(String::from_utf8_lossy(&body).contains("Signed in as <strong>alice</strong>"));
    let (status, list) = page.get("/desk/api/approvals").unwrap();
    assert_eq!(status, 200, "{list}");
    let card = list["approvals"][0].clone();
    assert_eq!(card["call"], json!("mcp-2:1"), "{list}");
    assert_eq!(card["tool"], json!("deploy"));
    let html = card["html"].as_str().unwrap();
    assert!(html.contains("prod"), "{card}");
    let recent = &html[html.find("recent calls").expect("a recent-calls section")..];
    assert!(recent.contains("read_file"), "{recent}");
    assert!(!recent.contains("(none known)"), "{recent}");
    // An agent's credential, and another tenant's approver, are refused.
    for token in [&creds.agent, &creds.admin] {
        let mut c = client().with_token(token);
        let (status, out) = c.get("/desk/api/approvals").unwrap();
        assert_eq!(status, 403, "{out}");
        let (status, _) = c.request("GET", "/desk", b"").unwrap();
        assert_eq!(status, 403);
    }
    let mut bob = client().with_token(&creds.other_approver);
    let (status, out) = bob.get("/desk/api/approvals").unwrap();
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["approvals"], json!([]), "{out}");
    // Approved from the page, bound to the digest it showed: the call runs.
    let (status, out) = page
        .post(
            "/desk/api/approvals/mcp-2:1/approve",
            &json!({"tenant": card["tenant"], "session": card["session"],
                    "digest": card["digest"], "reason": "prod deploy reviewed"}),
        )
        .unwrap();
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["decision"], json!("ALLOW"), "{out}");
    let answer = p.recv();
    assert_eq!(answer["id"], json!(1), "{answer}");
    assert!(!is_error(&answer), "{answer}");
    assert_eq!(text(&answer), r#"deploy ok: {"target": "prod"}"#);
    assert_eq!(p.finish(), 0);
}
