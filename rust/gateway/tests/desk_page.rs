//! The approvals page (`/desk`, docs/http-api.md "The approvals page"):
//! who may reach it, how a browser signs in, and what it shows and
//! settles. The browser itself is driven in `desk_browser.rs`.

mod desk_support;

use desk_support::{http, sign_in, Desk};
use serde_json::{json, Value};

/// Every page and endpoint of the desk, with a body to send.
const ENDPOINTS: &[(&str, &str, &str)] = &[
    ("GET", "/desk", ""),
    ("GET", "/desk/", ""),
    ("GET", "/desk/desk.js", ""),
    ("GET", "/desk/desk.css", ""),
    ("GET", "/desk/api/approvals", ""),
    (
        "POST",
        "/desk/api/approvals/c1/approve",
        r#"{"digest":"sha256:00","reason":"ok"}"#,
    ),
    ("POST", "/desk/api/approvals/c1/reject", "{}"),
    ("POST", "/desk/logout", "{}"),
];

#[test]
fn agent_and_admin_credentials_get_403_on_every_page_and_endpoint_of_the_desk() {
    let d = Desk::start("forbidden", true);
    let control = d.control();
    for token in [&d.agent, &d.admin] {
        let bearer = format!("Bearer {token}");
        for (method, path, body) in ENDPOINTS {
            let a = http(control, method, path, &[("Authorization", &bearer)], body);
            assert_eq!(a.status, 403, "{method} {path}: {}", a.body);
            assert!(
                a.json()["error"]
                    .as_str()
                    .unwrap_or("")
                    .contains("approver"),
                "{}",
                a.body
            );
        }
        // Signing in with it is refused too (no session is made).
        let a = http(
            control,
            "POST",
            "/desk/login",
            &[],
            &json!({"token": token}).to_string(),
        );
        assert_eq!(a.status, 403, "{}", a.body);
        assert!(a.header("set-cookie").is_none());
    }
    // An approver is served.
    let bearer = format!("Bearer {}", d.approver);
    for (method, path, _) in &ENDPOINTS[..5] {
        let a = http(control, method, path, &[("Authorization", &bearer)], "");
        assert_eq!(a.status, 200, "{method} {path}: {}", a.body);
    }
    // The agent's listener does not serve the desk at all.
    for (method, path, body) in ENDPOINTS {
        let a = http(
            d.addr(),
            method,
            path,
            &[("Authorization", &format!("Bearer {}", d.agent))],
            body,
        );
        assert_eq!(
            a.status, 404,
            "{method} {path} on the agent's listener: {}",
            a.body
        );
    }
}

#[test]
fn a_browser_signs_in_with_a_cookie_and_cross_site_requests_are_refused() {
    let d = Desk::start("cookie", false);
    let addr = d.control();
    // Without a credential: the sign-in page, under the strict CSP.
    let a = http(addr, "GET", "/desk", &[], "");
    assert_eq!(a.status, 200);
    assert!(a.body.contains("id=\"login\""), "{}", a.body);
    let csp = a.header("content-security-policy").unwrap_or("");
    assert!(
        csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );
    assert!(!a.body.contains("<script>"), "no inline script");
    // Without a credential, no data.
    assert_eq!(
        http(addr, "GET", "/desk/api/approvals", &[], "").status,
        401
    );
    // A wrong token.
    let a = http(addr, "POST", "/desk/login", &[], r#"{"token":"agr_nope"}"#);
    assert_eq!(a.status, 401, "{}", a.body);
    // Sign-in from another site, or as a form, is refused.
    let body = json!({"token": d.approver}).to_string();
    let a = http(
        addr,
        "POST",
        "/desk/login",
        &[("Origin", "https://evil.example")],
        &body,
    );
    assert_eq!(a.status, 403, "{}", a.body);
    let a = http(
        addr,
        "POST",
        "/desk/login",
        &[("Sec-Fetch-Site", "cross-site")],
        &body,
    );
    assert_eq!(a.status, 403, "{}", a.body);
    let a = http(
        addr,
        "POST",
        "/desk/login",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        &format!("token={}", d.approver),
    );
    assert_eq!(a.status, 415, "{}", a.body);

    let cookie = sign_in(addr, &d.approver);
    let a = http(addr, "GET", "/desk", &[("Cookie", &cookie)], "");
    assert_eq!(a.status, 200);
    assert!(
        a.body.contains("Signed in as <strong>alice</strong>"),
        "{}",
        a.body
    );
    let a = http(
        addr,
        "GET",
        "/desk/api/approvals",
        &[("Cookie", &cookie)],
        "",
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.json()["approver"], "alice");
    // A settlement from another site, with the cookie, is refused.
    let a = http(
        addr,
        "POST",
        "/desk/api/approvals/c1/reject",
        &[("Cookie", &cookie), ("Origin", "https://evil.example")],
        "{}",
    );
    assert_eq!(a.status, 403, "{}", a.body);
    // Signing out ends the session.
    let a = http(addr, "POST", "/desk/logout", &[("Cookie", &cookie)], "{}");
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(
        http(
            addr,
            "GET",
            "/desk/api/approvals",
            &[("Cookie", &cookie)],
            ""
        )
        .status,
        401
    );

    // A revoked credential's session stops working at once.
    let cookie = sign_in(addr, &d.approver);
    let mut c = agenra_gateway::auth::Credentials::load(&d.tokens).unwrap();
    c.tokens.retain(|t| t.name != "alice");
    c.save(&d.tokens).unwrap();
    d.server.as_ref().unwrap().perimeter().reload().unwrap();
    let a = http(
        addr,
        "GET",
        "/desk/api/approvals",
        &[("Cookie", &cookie)],
        "",
    );
    assert_eq!(a.status, 401, "{}", a.body);
    // ... and the page offers the sign-in again.
    let a = http(addr, "GET", "/desk", &[("Cookie", &cookie)], "");
    assert!(a.body.contains("id=\"login\""), "{}", a.body);
}

fn approvals(addr: std::net::SocketAddr, cookie: &str) -> Vec<Value> {
    let a = http(
        addr,
        "GET",
        "/desk/api/approvals",
        &[("Cookie", cookie)],
        "",
    );
    assert_eq!(a.status, 200, "{}", a.body);
    a.json()["approvals"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn settle(
    addr: std::net::SocketAddr,
    cookie: &str,
    card: &Value,
    act: &str,
    reason: &str,
) -> (u16, Value) {
    let body = json!({
        "tenant": card["tenant"], "session": card["session"],
        "digest": card["digest"], "reason": reason,
    });
    let call = card["call"].as_str().unwrap();
    let a = http(
        addr,
        "POST",
        &format!("/desk/api/approvals/{call}/{act}"),
        &[("Cookie", cookie)],
        &body.to_string(),
    );
    (a.status, a.json())
}

#[test]
fn the_desk_shows_each_paused_call_and_settles_it_bound_to_its_digest() {
    let d = Desk::start("settle", true);
    let addr = d.control();
    d.open_session("s");
    let out = d.call("s", "r1", "read", json!({"key": "notes"}));
    assert_eq!(out["decision"], "ALLOW", "{out}");
    d.succeed("s", "r1");
    let evil = "<img src=x onerror=alert(1)>\u{202e}\n".to_string() + &"A".repeat(300);
    let out = d.call("s", "p1", "post", json!({"body": evil}));
    assert_eq!(out["decision"], "PAUSE", "{out}");
    let out = d.call("s", "p2", "post", json!({"body": "two"}));
    assert_eq!(out["decision"], "PAUSE", "{out}");

    let cookie = sign_in(addr, &d.approver);
    let cards = approvals(addr, &cookie);
    assert_eq!(cards.len(), 2, "{cards:?}");
    // Newest first.
    assert_eq!(cards[0]["call"], "p2");
    let p1 = &cards[1];
    let html = p1["html"].as_str().unwrap();
    // Escaped, control characters visible, folded, the path drawn.
    assert!(!html.contains("<img"), "{html}");
    assert!(
        html.contains("&lt;img src=x onerror=alert(1)&gt;⟨U+202E⟩⟨LF⟩"),
        "{html}"
    );
    assert!(html.contains("<details>"), "{html}");
    assert!(
        html.contains("<svg") && html.contains("r1 (read)"),
        "{html}"
    );
    assert!(html.contains("ask"), "the rule: {html}");
    assert!(html.contains("<ol class=\"recent\">"), "{html}");
    assert_eq!(p1["path"][0], "r1", "{p1}");

    // Another tenant's approver sees none of them and cannot settle them.
    let bob = sign_in(addr, &d.other_approver);
    assert!(approvals(addr, &bob).is_empty());
    let (st, out) = settle(addr, &bob, p1, "approve", "not mine");
    assert_eq!(st, 403, "{out}");

    // An approval needs a reason, and the digest of what was shown.
    let (st, out) = settle(addr, &cookie, p1, "approve", "");
    assert_eq!(st, 422, "{out}");
    let mut stale = p1.clone();
    stale["digest"] = json!(format!("sha256:{}", "0".repeat(64)));
    let (st, out) = settle(addr, &cookie, &stale, "approve", "looks fine");
    assert_eq!(st, 409, "{out}");

    let (st, out) = settle(addr, &cookie, p1, "approve", "the notes may go out");
    assert_eq!(st, 200, "{out}");
    assert_eq!(out["decision"], "ALLOW", "{out}");
    let (st, out) = settle(addr, &cookie, &cards[0], "reject", "not this one");
    assert_eq!(st, 200, "{out}");
    assert_eq!(out["kind"], "reject", "{out}");
    assert_eq!(out["refunded"], json!(["p"]), "{out}");
    assert!(approvals(addr, &cookie).is_empty());
    assert_eq!(
        d.session("s")["ledger"]["p"],
        2,
        "one unit taken, one returned"
    );

    // A call approved after a secret was read is denied at its re-check.
    let out = d.call("s", "p3", "post", json!({"body": "three"}));
    assert_eq!(out["decision"], "PAUSE", "{out}");
    d.call("s", "k1", "peek", json!({"key": "vault"}));
    d.succeed("s", "k1");
    let cards = approvals(addr, &cookie);
    let (st, out) = settle(addr, &cookie, &cards[0], "approve", "fine");
    assert_eq!(st, 200, "{out}");
    assert_eq!(out["decision"], "DENY", "{out}");
    assert_eq!(out["rule"], "secrets_out", "{out}");
}
