//! The approvals page in a real browser: headless Chromium (Debian's
//! `chromium`), driven by `chromedriver` over WebDriver (a small client
//! here, over plain HTTP). An approver signs in with the keyboard, sees
//! paused calls appear without reloading, approves one (the agent's call
//! then runs and completes), rejects another (its unit returns) and sees a
//! re-check denial. Screenshots (PNG) go to the target directory
//! (`target/tmp/desk-screenshots/`).
//!
//! Without `chromium` and `chromedriver` it prints SKIPPED, except under
//! `CI=true`, where it fails (`.ci/run` installs them).

mod desk_support;

use desk_support::Desk;
use serde_json::{json, Value};
use std::io::{BufRead, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";
const TAB: &str = "\u{E004}";
const ENTER: &str = "\u{E007}";

fn find_program(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for n in names {
            let p = dir.join(n);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// One request to the driver: its JSON answer's `value` (a WebDriver error
/// panics, naming the command).
fn wd(addr: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> Value {
    let body = body.map(Value::to_string).unwrap_or_default();
    let mut s = TcpStream::connect(addr).expect("chromedriver reachable");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    // The driver may keep the connection open: read by Content-Length.
    let mut r = std::io::BufReader::new(s);
    let mut top = String::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap() == 0 {
            break;
        }
        if line.trim_end().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        top.push_str(&line);
    }
    let mut raw = vec![0; length];
    r.read_exact(&mut raw).unwrap();
    let rest = String::from_utf8_lossy(&raw);
    let v: Value = serde_json::from_str(&rest)
        .unwrap_or_else(|e| panic!("{method} {path}: not JSON ({e}): {top}\n{rest}"));
    let value = v["value"].clone();
    if value.get("error").is_some() {
        panic!("{method} {path}: {value}");
    }
    value
}

/// The driver process and the browser profile: stopped and removed when
/// dropped, also when the session could not be made.
struct Driver {
    child: Child,
    profile: PathBuf,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

struct Browser {
    addr: SocketAddr,
    session: String,
    shots: PathBuf,
    // Dropped last: after the session is closed.
    _driver: Driver,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = std::panic::catch_unwind(|| {
            wd(
                self.addr,
                "DELETE",
                &format!("/session/{}", self.session),
                None,
            )
        });
    }
}

impl Browser {
    fn start(chromium: &Path, chromedriver: &Path) -> Browser {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let profile =
            std::env::temp_dir().join(format!("agenra-desk-chromium-{}", std::process::id()));
        let driver = Driver {
            child: Command::new(chromedriver)
                .arg(format!("--port={port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("chromedriver starts"),
            profile: profile.clone(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(addr).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("desk-screenshots");
        std::fs::create_dir_all(&shots).unwrap();
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium.to_string_lossy(),
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1100,1400", "--no-first-run",
                         format!("--user-data-dir={}", profile.display())],
            }
        }}});
        let v = wd(addr, "POST", "/session", Some(&caps));
        let session = v["sessionId"].as_str().expect("a session id").to_string();
        Browser {
            addr,
            session,
            shots,
            _driver: driver,
        }
    }

    fn cmd(&self, method: &str, rest: &str, body: Option<Value>) -> Value {
        wd(
            self.addr,
            method,
            &format!("/session/{}{rest}", self.session),
            body.as_ref(),
        )
    }

    fn go(&self, url: &str) {
        self.cmd("POST", "/url", Some(json!({"url": url})));
    }

    fn find(&self, css: &str) -> Option<String> {
        let v = wd(
            self.addr,
            "POST",
            &format!("/session/{}/elements", self.session),
            Some(&json!({"using": "css selector", "value": css})),
        );
        v.as_array()?.first()?[ELEMENT].as_str().map(str::to_string)
    }

    /// Waits (up to 20 s) for an element matching `css`.
    fn wait_for(&self, css: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(e) = self.find(css) {
                return e;
            }
            assert!(Instant::now() < deadline, "no `{css}` appeared");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn text(&self, element: &str) -> String {
        self.cmd("GET", &format!("/element/{element}/text"), None)
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    /// Waits (up to 20 s) for the element's text to contain `want`.
    fn wait_text(&self, css: &str, want: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(e) = self.find(css) {
                let t = self.text(&e);
                if t.contains(want) {
                    return t;
                }
                assert!(
                    Instant::now() < deadline,
                    "`{css}` says {t:?}, not {want:?}"
                );
            }
            assert!(Instant::now() < deadline, "no `{css}` appeared");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Types into an element (it gets the focus).
    fn type_into(&self, element: &str, text: &str) {
        self.cmd(
            "POST",
            &format!("/element/{element}/value"),
            Some(json!({"text": text})),
        );
    }

    /// Presses keys wherever the focus is.
    fn keys(&self, keys: &[&str]) {
        let mut actions = Vec::new();
        for k in keys {
            actions.push(json!({"type": "keyDown", "value": k}));
            actions.push(json!({"type": "keyUp", "value": k}));
        }
        self.cmd(
            "POST",
            "/actions",
            Some(json!({"actions": [{"type": "key", "id": "keyboard", "actions": actions}]})),
        );
    }

    fn script(&self, js: &str) -> Value {
        self.cmd(
            "POST",
            "/execute/sync",
            Some(json!({"script": js, "args": []})),
        )
    }

    fn screenshot(&self, name: &str) -> PathBuf {
        let b64 = self.cmd("GET", "/screenshot", None);
        let png = base64(b64.as_str().unwrap_or(""));
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        let path = self.shots.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        path
    }
}

fn base64(s: &str) -> Vec<u8> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes().filter_map(val) {
        acc = (acc << 6) | c;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

#[test]
fn an_approver_settles_paused_calls_in_a_real_browser() {
    let chromium = find_program(&["chromium", "chromium-browser"]);
    let driver = find_program(&["chromedriver"]);
    let (chromium, driver) = match (chromium, driver) {
        (Some(c), Some(d)) => (c, d),
        _ => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("CI=true: chromium and chromedriver are needed (apt-get install chromium chromium-driver)");
            }
            println!("SKIPPED: chromium or chromedriver not installed (apt-get install chromium chromium-driver)");
            return;
        }
    };
    let d = Desk::start("browser", true);
    let b = Browser::start(&chromium, &driver);
    let base = format!("http://{}", d.control());

    // Sign in with the keyboard alone: type the token, press Enter.
    b.go(&format!("{base}/desk"));
    let token = b.wait_for("#token");
    b.type_into(&token, &d.approver);
    b.keys(&[ENTER]);
    b.wait_text("#status", "No call waits");
    b.screenshot("1-empty");
    // A mark that a reload would lose.
    b.script("window.agenraMark = 42;");

    // A paused call appears without a reload.
    d.open_session("s");
    d.call("s", "r1", "read", json!({"key": "release-notes"}));
    d.succeed("s", "r1");
    let out = d.call(
        "s",
        "p1",
        "post",
        json!({"body": format!("Release notes:\n<b>v2</b> ships today\u{202e}. {}", "Details. ".repeat(30))}),
    );
    assert_eq!(out["decision"], "PAUSE", "{out}");
    b.wait_for("article[data-call='p1']");
    assert_eq!(
        b.script("return window.agenraMark;"),
        json!(42),
        "the page was not reloaded"
    );
    let heading = b.wait_text("article[data-call='p1'] h2", "post");
    assert!(heading.contains("session s"), "{heading}");
    b.screenshot("2-paused");

    // Approve it with the keyboard: the reason, Tab to Approve, Enter.
    let reason = b.wait_for("article[data-call='p1'] textarea");
    b.type_into(&reason, "the release notes may go out");
    b.keys(&[TAB]);
    assert_eq!(
        b.script("return document.activeElement.textContent;"),
        json!("Approve"),
        "Tab goes from the reason to Approve"
    );
    b.keys(&[ENTER]);
    b.wait_text("article[data-call='p1'] .answer", "ALLOW");
    // The agent's call now runs, and completes.
    let s = d.session("s");
    assert_eq!(s["pending"], json!([]), "{s}");
    let done = d.succeed("s", "p1");
    assert_eq!(done["kind"], "result", "{done}");

    // Reject another: Tab twice from the reason reaches Reject.
    d.call("s", "p2", "post", json!({"body": "second post"}));
    let reason = b.wait_for("article[data-call='p2'] textarea");
    b.type_into(&reason, "not this one");
    b.keys(&[TAB, TAB]);
    assert_eq!(
        b.script("return document.activeElement.textContent;"),
        json!("Reject")
    );
    b.keys(&[ENTER]);
    let t = b.wait_text("article[data-call='p2'] .answer", "REJECTED");
    assert!(t.contains("units returned to p"), "{t}");
    assert_eq!(
        d.session("s")["ledger"]["p"],
        2,
        "the rejected call's unit came back"
    );

    // A call approved after a secret was read is denied at its re-check.
    d.call("s", "p3", "post", json!({"body": "third post"}));
    b.wait_for("article[data-call='p3']");
    d.call("s", "k1", "peek", json!({"key": "vault"}));
    d.succeed("s", "k1");
    let reason = b.wait_for("article[data-call='p3'] textarea");
    b.type_into(&reason, "fine");
    b.keys(&[TAB, ENTER]);
    let t = b.wait_text("article[data-call='p3'] .answer", "DENY");
    assert!(t.contains("re-check") && t.contains("secrets_out"), "{t}");
    let shot = b.screenshot("3-settled");
    println!("screenshots in {}", shot.parent().unwrap().display());
}
