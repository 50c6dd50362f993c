//! `agenra mcp-init -- SERVER`: a starting policy from the server's
//! `tools/list`, which `agenra check` accepts; against
//! `tests/mcp/list_server.py` (the schemas of `tests/mcp/tools.json`, two
//! pages) and, when `.ci/run` installed it, the npm filesystem server. The
//! policy, with a grant added, then drives the proxy.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_agenra");

fn mcp_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp")
}

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("agenra-mcp-init-{}-{name}", std::process::id()))
}

/// `agenra mcp-init --out FILE -- SERVER...`: the policy's text.
fn init(name: &str, server: &[&str]) -> (PathBuf, String) {
    let out = temp(name);
    let status = Command::new(BIN)
        .arg("mcp-init")
        .arg("--out")
        .arg(&out)
        .arg("--")
        .args(server)
        .stderr(Stdio::null())
        .status()
        .expect("run agenra mcp-init");
    assert!(status.success(), "mcp-init failed: {status}");
    let text = std::fs::read_to_string(&out).expect("the written policy");
    (out, text)
}

fn check(path: &Path) {
    let out = Command::new(BIN)
        .arg("check")
        .arg(path)
        .output()
        .expect("run agenra check");
    assert!(
        out.status.success(),
        "agenra check failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_policy_from_the_servers_schemas_passes_check() {
    let server = mcp_dir().join("list_server.py");
    let (path, text) = init("fixture", &["python3", server.to_str().unwrap()]);
    check(&path);
    // Both pages, every tool, names with `-` quoted.
    for decl in [
        "tool echo(message: string) {",
        "tool `get-tiny-image`() {",
        "tool `annotated-message`(`include-image`?: bool, messageType: string) {",
        "tool add(a: decimal, b: decimal) {",
        "tool `long-running-operation`(duration?: int, steps?: int) {",
        // An array of objects is a list of an object type; the items'
        // schema requires nothing, so both fields are optional.
        "tool edit_file(dryRun?: bool, edits: list<{newText?: string, oldText?: string}>, path: string) {",
        "tool read_multiple_files(paths: list<string>) {",
        "tool `send-mail`(body: string, cc?: list<string>, to: string) {",
    ] {
        assert!(text.contains(decl), "no `{decl}` in:\n{text}");
    }
    assert!(
        text.contains("policy \"example-servers/everything-policy\";"),
        "{text}"
    );
    // The resource: `path` where there is one, else the first required string.
    assert!(text.contains("resource path;"), "{text}");
    assert!(text.contains("resource message;"), "{text}");
    // What a schema cannot say is a TODO.
    assert!(!text.contains("// TODO: parameter edits"), "{text}");
    assert!(
        text.contains("// TODO: if it returns outside data: output"),
        "{text}"
    );
    assert!(
        text.contains("// TODO: if it sends data out: sink"),
        "{text}"
    );
    assert!(text.contains("// TODO: grants."), "{text}");
    assert!(!text.contains("\ngrant "), "it grants nothing: {text}");

    // With a grant added, the proxy admits that tool and denies the rest.
    let granted = temp("fixture-granted.agr");
    std::fs::write(
        &granted,
        format!("{text}\ngrant say: echo quota unlimited;\n"),
    )
    .unwrap();
    check(&granted);
    let mut proxy = Command::new(BIN)
        .arg("mcp-proxy")
        .arg("--policy")
        .arg(&granted)
        .arg("--")
        .arg("python3")
        .arg(&server)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start agenra mcp-proxy");
    {
        let mut stdin = proxy.stdin.take().unwrap();
        for (id, tool, args) in [
            (1, "echo", json!({"message": "hi"})),
            (2, "send-mail", json!({"to": "a@b", "body": "x"})),
        ] {
            let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                             "params": {"name": tool, "arguments": args}});
            writeln!(stdin, "{msg}").unwrap();
        }
    }
    let lines: Vec<Value> = BufReader::new(proxy.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str(&l).ok())
        .collect();
    let _ = proxy.wait();
    let answer = |id: i64| {
        lines
            .iter()
            .find(|l| l["id"] == json!(id))
            .cloned()
            .unwrap_or_else(|| panic!("no answer {id}: {lines:?}"))
    };
    assert_eq!(answer(1)["result"]["content"][0]["text"], json!("ok"));
    assert_eq!(answer(2)["result"]["isError"], json!(true), "{}", answer(2));
    for f in [path, granted] {
        let _ = std::fs::remove_file(f);
    }
}

#[test]
fn a_policy_from_the_npm_filesystem_server_passes_check() {
    let Ok(server) = std::env::var("AGENRA_MCP_FS_SERVER") else {
        eprintln!("SKIPPED: AGENRA_MCP_FS_SERVER is not set (.ci/run sets it)");
        return;
    };
    let root = temp("fs-root");
    std::fs::create_dir_all(&root).unwrap();
    let (path, text) = init("fs", &[&server, root.to_str().unwrap()]);
    check(&path);
    for tool in [
        "read_text_file",
        "write_file",
        "edit_file",
        "list_directory",
        "move_file",
    ] {
        assert!(
            text.contains(&format!("tool {tool}(")),
            "no {tool}:\n{text}"
        );
    }
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn a_server_that_cannot_start_is_an_error() {
    let out = Command::new(BIN)
        .args(["mcp-init", "--", "/nonexistent/agenra-mcp-server"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot start `/nonexistent/agenra-mcp-server`"),
        "{err}"
    );
    // A server that exits before answering: an error, never a policy.
    // Whichever comes first: its input closed (writing fails) or its
    // output closed (no answer).
    let out = Command::new(BIN)
        .args(["mcp-init", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("closed its output before answering initialize")
            || err.contains("mcp-init: writing to the server"),
        "{err}"
    );
}
