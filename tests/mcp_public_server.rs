//! `agenra mcp-proxy` in front of a published MCP server: the reference
//! filesystem server from npm (`@modelcontextprotocol/server-filesystem`),
//! driven over pipes as an MCP client would. `.ci/run` installs it and sets
//! `AGENRA_MCP_FS_SERVER` to its executable; without it the test says
//! SKIPPED on stderr (it needs the npm registry).

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc::channel;
use std::time::Duration;

#[test]
fn the_proxy_guards_the_published_filesystem_server() {
    let Ok(server) = std::env::var("AGENRA_MCP_FS_SERVER") else {
        eprintln!(
            "SKIPPED: AGENRA_MCP_FS_SERVER is not set (.ci/run installs \
             @modelcontextprotocol/server-filesystem from npm and sets it)"
        );
        return;
    };
    let root: PathBuf = std::env::temp_dir().join(format!("agenra-mcp-fs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("docs")).expect("a temp dir");
    std::fs::write(root.join("docs/note.txt"), "hello from the file\n").expect("a file");
    std::fs::write(root.join("secret.txt"), "not for the agent\n").expect("a file");
    let root = root.canonicalize().expect("the temp dir");
    let docs = root.join("docs");
    let policy = root.join("policy.agr");
    std::fs::write(
        &policy,
        format!(
            concat!(
                "policy \"mcp-filesystem\";\n",
                "tool read_text_file(path: string, head?: int, tail?: int) {{ resource path; }}\n",
                "tool write_file(path: string, content: string) {{ resource path; }}\n",
                "grant docs: read_text_file on prefix \"{docs}/\" quota unlimited;\n",
            ),
            docs = docs.display()
        ),
    )
    .expect("the policy");
    let mut child = Command::new(env!("CARGO_BIN_EXE_agenra"))
        .arg("mcp-proxy")
        .arg("--policy")
        .arg(&policy)
        .arg("--")
        .arg(&server)
        .arg(&root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start agenra mcp-proxy");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut stdin = child.stdin.take().expect("stdin");
    let mut ask = move |msg: Value| -> Value {
        writeln!(stdin, "{msg}").expect("write to the proxy");
        stdin.flush().expect("flush");
        if msg.get("id").is_none() {
            return Value::Null; // a notification has no answer
        }
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("an answer within 30 s");
        serde_json::from_str(&line).expect("JSON-RPC")
    };
    let init = ask(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "agenra-test", "version": "1"}}}),
    );
    assert!(init["result"]["serverInfo"]["name"].is_string(), "{init}");
    ask(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let call = |id: i64, name: &str, args: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": name, "arguments": args}})
    };
    let text = |answer: &Value| {
        answer["result"]["content"][0]["text"]
            .as_str()
            .map(str::to_string)
    };
    let is_error = |answer: &Value| answer["result"]["isError"] == json!(true);

    // Allowed: the server reads the file.
    let path = docs.join("note.txt");
    let a = ask(call(2, "read_text_file", json!({"path": path})));
    assert!(!is_error(&a), "{a}");
    assert_eq!(text(&a).as_deref(), Some("hello from the file\n"), "{a}");
    // Outside the granted prefix: denied by the proxy.
    let a = ask(call(
        3,
        "read_text_file",
        json!({"path": root.join("secret.txt")}),
    ));
    assert!(is_error(&a), "{a}");
    assert!(text(&a).is_some_and(|t| t.contains("DENY")), "{a}");
    // No grant at all: denied, and the server never wrote the file.
    let target = docs.join("written.txt");
    let a = ask(call(
        4,
        "write_file",
        json!({"path": target, "content": "x"}),
    ));
    assert!(is_error(&a), "{a}");
    assert!(!target.exists(), "a denied write reached the server");
    drop(ask);
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&root);
}
