//! Ids and names with control, bidirectional or invisible characters are
//! refused with 422 naming the request field (`docs/http-api.md`), and
//! nothing is recorded; a log recorded before ids were checked still
//! recovers (its records are decided and hash-chained).

use agenra_core::CompiledPolicy;
use agenra_gateway::client::Client;
use agenra_gateway::{Gateway, Server};
use agenra_store::{Log, Record};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn serve(store: &Path) -> Server {
    let text = "tool t(a: string);\ngrant g: t quota unlimited;\n";
    let compiled = agenra_policy::compile(text, "ids").unwrap();
    let policy = CompiledPolicy::new(compiled.policy).unwrap();
    let gateway = Gateway::open(Log::open_redb(store).unwrap(), policy, "ids.agr", false).unwrap();
    Server::spawn(
        Arc::new(gateway),
        Arc::new(agenra_gateway::Perimeter::insecure(Vec::new())),
        "127.0.0.1:0",
    )
    .unwrap()
}

fn store(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agenra-ids-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("store.redb")
}

#[test]
fn ids_with_control_or_bidi_characters_are_refused_with_the_field() {
    let path = store("refused");
    let server = serve(&path);
    let mut c = Client::connect(server.addr()).unwrap();
    let (status, _) = c.post("/v1/sessions", &json!({"session": "s"})).unwrap();
    assert_eq!(status, 201);
    let call = |id: &str, tool: &str| json!({"session": "s", "call": {"id": id, "tool": tool, "args": {"a": "x"}}});
    let cases = [
        (
            "/v1/authorize",
            call("c4\u{202e}gnp.exe", "t"),
            "call.id",
            "call.id contains U+202E (RIGHT-TO-LEFT OVERRIDE) at byte 2",
        ),
        (
            "/v1/authorize",
            call("c\u{0}", "t"),
            "call.id",
            "U+0000 (NULL) at byte 1",
        ),
        (
            "/v1/authorize",
            call("c\n", "t"),
            "call.id",
            "U+000A (LINE FEED) at byte 1",
        ),
        (
            "/v1/authorize",
            call("c1", "t\u{200b}"),
            "call.tool",
            "U+200B (ZERO WIDTH SPACE)",
        ),
        (
            "/v1/authorize",
            json!({"session": "s", "call": {"id": "c1", "tool": "t", "agent": "m\u{2067}", "args": {"a": "x"}}}),
            "call.agent",
            "U+2067",
        ),
        (
            "/v1/authorize",
            json!({"session": "s", "call": {"id": "c1", "tool": "t", "args": {"a": "x"}, "lineage": {"a": ["c\u{1b}"]}}}),
            "call.lineage.a[0]",
            "U+001B (ESCAPE)",
        ),
        (
            "/v1/report",
            json!({"session": "s", "call": "c\u{202e}", "status": "succeeded"}),
            "call",
            "U+202E",
        ),
        (
            "/v1/tasks",
            json!({"session": "s", "id": "t\u{feff}", "text": "x"}),
            "id",
            "U+FEFF (ZERO WIDTH NO-BREAK SPACE)",
        ),
    ];
    for (path, body, field, message) in cases {
        let (status, answer) = c.post(path, &body).unwrap();
        assert_eq!(status, 422, "{body}: {answer}");
        assert_eq!(answer["field"], field, "{answer}");
        assert!(
            answer["error"].as_str().unwrap().contains(message),
            "{answer} should say {message}"
        );
    }
    // Nothing was applied; values stay free-form data.
    let (status, answer) = c
        .post(
            "/v1/authorize",
            &json!({"session": "s", "call": {"id": "c1", "tool": "t", "args": {"a": "x\n\u{202e}\u{0}"}}}),
        )
        .unwrap();
    assert_eq!(
        (status, answer["decision"].as_str()),
        (200, Some("ALLOW")),
        "{answer}"
    );
    let (_, view) = c.get("/v1/sessions/s").unwrap();
    assert_eq!(view["events"], 1, "{view}");
    drop(c);
    server.stop();
}

#[test]
fn a_log_recorded_before_ids_were_checked_still_recovers() {
    let path = store("recorded");
    let server = serve(&path);
    let mut c = Client::connect(server.addr()).unwrap();
    c.post("/v1/sessions", &json!({"session": "s"})).unwrap();
    let (status, _) = c
        .post(
            "/v1/authorize",
            &json!({"session": "s", "call": {"id": "c1", "tool": "t", "args": {"a": "x"}}}),
        )
        .unwrap();
    assert_eq!(status, 200);
    drop(c);
    server.stop();

    // What an older server accepted: the same call again under an id with a
    // right-to-left override (the grant is unlimited, so the decision and
    // the ledger hash are the same).
    let mut log = Log::open_redb(&path).unwrap();
    let mut last = None;
    log.scan(1, &mut |_, line| {
        last = Some(line.to_vec());
        Ok(())
    })
    .unwrap();
    let mut old: Record = serde_json::from_slice(&last.unwrap()).unwrap();
    old.event.as_mut().unwrap()["id"] = json!("c4\u{202e}gnp.exe");
    log.append(&mut [old]).unwrap();
    drop(log);

    let server = serve(&path);
    let mut c = Client::connect(server.addr()).unwrap();
    let (status, view) = c.get("/v1/sessions/s").unwrap();
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["events"], 2, "{view}");
    // New input with such an id is still refused.
    let (status, answer) = c
        .post(
            "/v1/authorize",
            &json!({"session": "s", "call": {"id": "c5\u{202e}", "tool": "t", "args": {"a": "x"}}}),
        )
        .unwrap();
    assert_eq!(
        (status, answer["field"].as_str()),
        (422, Some("call.id")),
        "{answer}"
    );
    drop(c);
    server.stop();
}
