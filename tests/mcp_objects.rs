//! Issue 25, point 6 (the object type): `agenra mcp-proxy` in front of the
//! published filesystem server (`@modelcontextprotocol/server-filesystem`,
//! `AGENRA_MCP_FS_SERVER`; SKIPPED without it) decides `edit_file`, whose
//! `edits` argument is a list of `{oldText, newText}` objects: an edit under
//! the allowed root is admitted and the file changes; an element with an
//! extra or mistyped field is denied naming the field, and the file stays;
//! an edit made after a credential was read (its label reaches the `disk`
//! sink through `edits`) is denied by the flow rule.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

const POLICY: &str = concat!(
    "policy \"mcp-edit\";\n",
    "levels public < secret;\ncategories credential;\nsinks disk;\n",
    "tool read_text_file(path: string, head?: int, tail?: int) {\n",
    "  resource path;\n  output <secret, {credential}, trusted>;\n}\n",
    "tool edit_file(path: string, edits: {oldText: string, newText: string}[], dryRun?: bool) {\n",
    "  resource path;\n  sink disk on edits;\n}\n",
    "grant keys: read_text_file on prefix \"{keys}/\" quota unlimited;\n",
    "grant edit: edit_file on prefix \"{src}/\" where all edits.newText != \"\" quota unlimited;\n",
    "deny flow no_credential_edit: category credential -> disk;\n",
);

struct Proxy {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: Receiver<String>,
    root: PathBuf,
    next: u64,
}

impl Proxy {
    fn start() -> Option<Proxy> {
        let Ok(server) = std::env::var("AGENRA_MCP_FS_SERVER") else {
            eprintln!("SKIPPED: AGENRA_MCP_FS_SERVER is not set (.ci/run sets it)");
            return None;
        };
        let root = std::env::temp_dir().join(format!("agenra-mcp-objects-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("src")).expect("a temp dir");
        std::fs::create_dir_all(root.join("keys")).expect("a temp dir");
        std::fs::write(root.join("src/main.rs"), "fn main() {\n    old();\n}\n").expect("a file");
        std::fs::write(root.join("keys/api.key"), "sk-live-123\n").expect("a file");
        let root = root.canonicalize().expect("the temp dir");
        let policy = root.join("policy.agr");
        let text = POLICY
            .replace("{src}", &root.join("src").display().to_string())
            .replace("{keys}", &root.join("keys").display().to_string());
        std::fs::write(&policy, text).expect("the policy");
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
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take().expect("stdin");
        let mut p = Proxy {
            child,
            stdin,
            lines,
            root,
            next: 10,
        };
        let init = p.ask(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "agenra-test", "version": "1"}}}),
        );
        assert!(init["result"]["serverInfo"]["name"].is_string(), "{init}");
        p.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        Some(p)
    }

    fn send(&mut self, msg: &Value) {
        writeln!(self.stdin, "{msg}").expect("write to the proxy");
        self.stdin.flush().expect("flush");
    }

    fn ask(&mut self, msg: Value) -> Value {
        self.send(&msg);
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(30))
            .expect("an answer within 30 s");
        serde_json::from_str(&line).expect("JSON-RPC")
    }

    fn call(&mut self, tool: &str, args: Value) -> Value {
        self.next += 1;
        let id = self.next;
        self.ask(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": args}}))
    }

    fn path(&self, rel: &str) -> String {
        self.root.join(rel).display().to_string()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn text(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn denied(answer: &Value) -> bool {
    answer["result"]["isError"] == json!(true) && text(answer).contains("DENY")
}

#[test]
fn edit_file_with_a_list_of_objects_through_the_proxy() {
    let Some(mut p) = Proxy::start() else {
        return;
    };
    let main = p.path("src/main.rs");
    let read = |p: &Proxy| std::fs::read_to_string(p.path("src/main.rs")).expect("the file");

    // Allowed: the edits match the declared shape and the grant's field test.
    let a = p.call(
        "edit_file",
        json!({"path": main, "edits": [
            {"oldText": "old();", "newText": "new();"},
            {"oldText": "fn main()", "newText": "pub fn main()"}]}),
    );
    assert_ne!(a["result"]["isError"], json!(true), "{a}");
    assert_eq!(read(&p), "pub fn main() {\n    new();\n}\n", "{a}");

    // An element with an extra field, or a field of the wrong type, or a
    // missing field: denied naming the field; the file stays as it was.
    for (edits, field) in [
        (
            json!([{"oldText": "new();", "newText": "x();", "replaceAll": true}]),
            "edits[0].replaceAll",
        ),
        (
            json!([{"oldText": "new();", "newText": "x();"}, {"oldText": "pub", "newText": 7}]),
            "edits[1].newText",
        ),
        (json!([{"oldText": "new();"}]), "edits[0].newText"),
    ] {
        let a = p.call("edit_file", json!({"path": main, "edits": edits}));
        assert!(denied(&a), "{edits}: {a}");
        assert!(text(&a).contains(field), "{edits}: {a}");
        assert_eq!(read(&p), "pub fn main() {\n    new();\n}\n", "{edits}");
    }
    // The grant's field test: an empty newText is not granted.
    let a = p.call(
        "edit_file",
        json!({"path": main, "edits": [{"oldText": "new();", "newText": ""}]}),
    );
    assert!(denied(&a), "{a}");
    assert_eq!(read(&p), "pub fn main() {\n    new();\n}\n");

    // After a credential is read, an edit (whose newText may hold it) is
    // denied by the flow rule: the label reaches `disk` through `edits`.
    let key = p.path("keys/api.key");
    let a = p.call("read_text_file", json!({"path": key}));
    assert_eq!(text(&a), "sk-live-123\n", "{a}");
    let a = p.call(
        "edit_file",
        json!({"path": main, "edits": [{"oldText": "new();", "newText": "let k = \"sk-live-123\";"}]}),
    );
    assert!(denied(&a), "{a}");
    assert!(text(&a).contains("no_credential_edit"), "{a}");
    assert_eq!(read(&p), "pub fn main() {\n    new();\n}\n");
}
