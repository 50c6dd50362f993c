//! The differential test of `agenra mcp-proxy` (issue 25): random JSON-RPC
//! lines (valid ones, escapes of every kind, lone surrogates, invalid and
//! overlong UTF-8, deep nesting, odd numbers, duplicated keys, batches, bare
//! carriage returns) go through the proxy to `tests/mcp/fake_server.py`,
//! which parses as leniently as the MCP SDKs do (Python's `json`) and logs
//! every `tools/call` it receives. Every call that reaches the server must
//! be one the policy (`tests/mcp/policy.agr`) allows on the arguments the
//! server parsed (`read_file` with only a `path` under `docs/`), and those
//! arguments must be exactly what the proxy's own parse of the line gives
//! (serde_json, strict), so the monitor decided on what the server ran.

#[path = "mcp/harness.rs"]
mod harness;

use harness::Proxy;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{json, Value};
use std::cell::RefCell;

/// Bytes inside a JSON string literal: plain text, escapes, and what a
/// strict parser refuses but a lenient one reads.
fn piece() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        12 => "[a-z0-9/._ -]{0,6}".prop_map(String::into_bytes),
        1 => prop::sample::select(vec![
            &br"\ud800"[..], br"\udc00", br"\ud83d\ude00", br"\u0064", br"\u002e\u002e",
            br"\/", br#"\""#, br"\\", br"\n", br"\u0000", b"\xff", b"\xc0\xaf",
            b"\xed\xa0\x80", "é".as_bytes(), "\u{202e}".as_bytes(), b"\t", b"\r",
        ])
        .prop_map(<[u8]>::to_vec),
    ]
}

fn string(pieces: impl Strategy<Value = Vec<Vec<u8>>>) -> impl Strategy<Value = Vec<u8>> {
    pieces.prop_map(|ps| {
        let mut s = b"\"".to_vec();
        ps.into_iter().for_each(|p| s.extend(p));
        s.push(b'"');
        s
    })
}

fn path() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(vec![
            &b"docs/"[..],
            b"docs/",
            b"docs/",
            b"docs/",
            br"\u0064ocs/",
            br"docs\/",
            b"/etc/",
            b"",
            br"\ud800docs/",
        ]),
        prop::collection::vec(piece(), 0..3),
    )
        .prop_map(|(prefix, ps)| {
            let mut s = b"\"".to_vec();
            s.extend_from_slice(prefix);
            ps.into_iter().for_each(|p| s.extend(p));
            s.push(b'"');
            s
        })
}

fn number() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string().into_bytes()),
        prop::sample::select(vec![
            "1",
            "1.0",
            "1e0",
            "-0",
            "0.1",
            "1e400",
            "-1e400",
            "1e-400",
            "NaN",
            "Infinity",
            "-Infinity",
            "123456789012345678901234567890",
            "18446744073709551616",
            "01",
            "1.",
        ])
        .prop_map(|s| s.as_bytes().to_vec()),
    ]
}

/// An extra argument: nested up to 300 deep, a string or a number.
fn extra() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (0usize..300, number()).prop_map(|(d, n)| {
            let mut s = b"[".repeat(d);
            s.extend(n);
            s.extend(b"]".repeat(d));
            s
        }),
        string(prop::collection::vec(piece(), 0..3)),
        number(),
    ]
}

fn id() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![
        3 => (0u32..1000).prop_map(|n| Some(n.to_string().into_bytes())),
        1 => prop::sample::select(vec!["1.0", "null", "[1]", "true", "1e400", "NaN"])
            .prop_map(|s| Some(s.as_bytes().to_vec())),
        1 => string(prop::collection::vec(piece(), 0..2)).prop_map(Some),
        1 => Just(None),
    ]
}

/// A whole line: usually a `tools/call`, with its parts drawn above.
fn line() -> impl Strategy<Value = Vec<u8>> {
    let method = prop::sample::select(vec![
        &br#""tools/call""#[..],
        br#""tools/call""#,
        br#""tools/call""#,
        br#""tools\/call""#,
        br#""tools\u002fcall""#,
        br#""tools/call\ud800""#,
        br#""ping""#,
    ]);
    let name = prop::sample::select(vec![
        &br#""read_file""#[..],
        br#""read_file""#,
        br#""read_file""#,
        br#""read\u005ffile""#,
        br#""read_file\ud800""#,
        br#""send_email""#,
        br#""deploy""#,
        br#""nope""#,
    ]);
    let extras = prop_oneof![
        3 => Just(Vec::new()),
        1 => prop::collection::vec(
            (
                prop::sample::select(vec![&b"\"x\""[..], b"\"path\"", br#""p\u0061th""#]),
                extra(),
            ),
            1..3,
        ),
    ];
    let wrap = prop::sample::select(vec![
        "",
        "",
        "",
        "",
        "",
        "",
        "batch",
        "cr",
        "trailing",
        "dup-method",
    ]);
    (id(), method, name, path(), extras, wrap).prop_map(|(id, method, name, path, extras, wrap)| {
        let mut l = b"{\"jsonrpc\":\"2.0\",".to_vec();
        if wrap == "cr" {
            l.extend_from_slice(b"\r");
        }
        if let Some(id) = id {
            l.extend_from_slice(b"\"id\":");
            l.extend(id);
            l.push(b',');
        }
        if wrap == "dup-method" {
            l.extend_from_slice(b"\"method\":\"ping\",");
        }
        l.extend_from_slice(b"\"method\":");
        l.extend_from_slice(method);
        l.extend_from_slice(b",\"params\":{\"name\":");
        l.extend_from_slice(name);
        l.extend_from_slice(b",\"arguments\":{\"path\":");
        l.extend(path);
        for (key, value) in extras {
            l.push(b',');
            l.extend_from_slice(key);
            l.push(b':');
            l.extend(value);
        }
        l.extend_from_slice(b"}}}");
        match wrap {
            "batch" => {
                let mut b = b"[".to_vec();
                b.extend(l);
                b.push(b']');
                b
            }
            "trailing" => {
                l.extend_from_slice(b" {}");
                l
            }
            _ => l,
        }
    })
}

/// The proxy's reading of a line (strict serde_json, as it parses), when it
/// is a single `tools/call` request: its `params`.
fn proxy_view(line: &[u8]) -> Option<Value> {
    let message = serde_json::from_slice::<agenra_core::strict::StrictValue>(line)
        .ok()?
        .0;
    let obj = message.as_object()?;
    if obj.get("method")? != "tools/call"
        || !matches!(obj.get("id")?, Value::Number(_) | Value::String(_))
    {
        return None;
    }
    obj.get("params").cloned()
}

#[test]
fn every_call_the_server_gets_was_allowed_on_what_it_parsed() {
    let proxy = RefCell::new(Proxy::start("differential"));
    let seen = RefCell::new(0usize); // server log entries checked so far
    let forwarded = RefCell::new(0usize);
    let sync = RefCell::new(0u64);
    let mut runner = TestRunner::new(Config {
        cases: 2000,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&line(), |line| {
        let mut p = proxy.borrow_mut();
        p.send_bytes(&line);
        p.send_bytes(b"\n");
        // A ping after it: once its answer is back, the line was handled.
        let n = {
            let mut s = sync.borrow_mut();
            *s += 1;
            *s
        };
        p.send_line(
            &json!({"jsonrpc": "2.0", "id": format!("sync-{n}"), "method": "ping"}).to_string(),
        );
        loop {
            let answer = p.recv_line();
            if answer.contains(&format!("\"sync-{n}\"")) {
                break;
            }
        }
        let calls: Vec<String> = std::fs::read_to_string(std::env::temp_dir().join(format!(
            "agenra-mcp-proxy-{}-differential.log",
            std::process::id()
        )))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
        let mut seen = seen.borrow_mut();
        let new = &calls[*seen..];
        *seen = calls.len();
        let shown = String::from_utf8_lossy(&line).into_owned();
        prop_assert!(new.len() <= 1, "one line, {} calls: {shown}", new.len());
        let Some(logged) = new.first() else {
            return Ok(());
        };
        *forwarded.borrow_mut() += 1;
        // The server's parse (Python's json, printed by it).
        let server: Value = serde_json::from_str(logged).map_err(|e| {
            TestCaseError::fail(format!(
                "the server got what the proxy cannot parse ({e}): {logged} from {shown}"
            ))
        })?;
        // What the proxy parsed is what the server parsed...
        let proxy_params = proxy_view(&line);
        prop_assert_eq!(
            Some(&server),
            proxy_params.as_ref(),
            "the server parsed other params than the proxy: {}",
            shown
        );
        // ...and the policy allows it.
        let args = server["arguments"].as_object().cloned().unwrap_or_default();
        prop_assert_eq!(&server["name"], &json!("read_file"), "{}", shown);
        prop_assert_eq!(args.len(), 1, "{}", shown);
        prop_assert!(
            args["path"]
                .as_str()
                .is_some_and(|p| p.starts_with("docs/")),
            "{}",
            shown
        );
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // The lines were not all refused: calls did reach the server.
    let forwarded = *forwarded.borrow();
    eprintln!("{forwarded} of 2000 lines reached the server as calls");
    assert!(
        forwarded >= 100,
        "only {forwarded} calls reached the server"
    );
    let p = proxy.into_inner();
    assert_eq!(p.finish(), 0);
}
