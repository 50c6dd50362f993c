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

/// The proxy in front of the published filesystem server, over pipes, with
/// a policy of its own over a fresh temp dir (`docs/note.txt`, `out/`).
struct Fs {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
    root: PathBuf,
}

impl Fs {
    /// `None` (the test says SKIPPED) without `AGENRA_MCP_FS_SERVER`.
    /// `policy` gets `{docs}` and `{out}` replaced by the directories.
    fn start(test: &str, policy: &str) -> Option<Fs> {
        Fs::start_with(test, policy, &[])
    }

    /// `start` with extra flags for the proxy.
    fn start_with(test: &str, policy: &str, flags: &[&str]) -> Option<Fs> {
        let Ok(server) = std::env::var("AGENRA_MCP_FS_SERVER") else {
            eprintln!("SKIPPED: AGENRA_MCP_FS_SERVER is not set (.ci/run sets it)");
            return None;
        };
        let root =
            std::env::temp_dir().join(format!("agenra-mcp-fs-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("docs")).expect("a temp dir");
        std::fs::create_dir_all(root.join("out")).expect("a temp dir");
        std::fs::write(root.join("docs/note.txt"), "the secret\n").expect("a file");
        let root = root.canonicalize().expect("the temp dir");
        let policy_file = root.join("policy.agr");
        let text = policy
            .replace("{docs}", &root.join("docs").display().to_string())
            .replace("{out}", &root.join("out").display().to_string());
        std::fs::write(&policy_file, text).expect("the policy");
        let mut child = Command::new(env!("CARGO_BIN_EXE_agenra"))
            .arg("mcp-proxy")
            .arg("--policy")
            .arg(&policy_file)
            .args(flags)
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
        let mut fs = Fs {
            child,
            stdin,
            lines,
            root,
        };
        fs.send(br#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"agenra-test","version":"1"}}}"#);
        let init = fs.recv();
        assert!(init["result"]["serverInfo"]["name"].is_string(), "{init}");
        fs.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        Some(fs)
    }

    /// One line (a newline is added), bytes as given.
    fn send(&mut self, line: &[u8]) {
        self.stdin.write_all(line).expect("write to the proxy");
        self.stdin.write_all(b"\n").expect("write to the proxy");
        self.stdin.flush().expect("flush");
    }

    fn recv(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(30))
            .expect("an answer within 30 s");
        serde_json::from_str(&line).expect("JSON-RPC")
    }

    fn path(&self, rel: &str) -> String {
        self.root.join(rel).display().to_string()
    }
}

impl Drop for Fs {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// What was read from `docs/` is untrusted and never written to `out/`.
const FLOW_POLICY: &str = concat!(
    "policy \"mcp-filesystem-flow\";\n",
    "levels public < internal;\ncategories web;\nsinks disk;\n",
    "tool read_text_file(path: string, head?: int, tail?: int) {\n",
    "  resource path;\n  output <public, {web}, untrusted>;\n}\n",
    "tool write_file(path: string, content: string) { resource path; sink disk; }\n",
    "grant docs: read_text_file on prefix \"{docs}/\" quota 1;\n",
    "grant out: write_file on prefix \"{out}/\" quota unlimited;\n",
    "deny flow no_untrusted_write: untrusted -> disk;\n",
);

/// Issue 25, finding 1: lines the Node server reads but serde_json alone
/// rejects (a lone surrogate, as the TypeScript SDK client sends it; an
/// extra argument nested 200 deep, as the Python SDK client sends it;
/// invalid or overlong UTF-8; `1e400`) are refused `-32700` by the proxy,
/// and the denied write (outside `out/`) never runs.
#[test]
fn lines_the_filesystem_server_would_read_are_refused() {
    let Some(mut fs) = Fs::start("lenient", FLOW_POLICY) else {
        return;
    };
    let target = fs.path("leaked.txt");
    let call = |extra: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"write_file","arguments":{{"path":{},"content":"the secret"{extra}}}}}}}"#,
            json!(target)
        )
        .into_bytes()
    };
    let deep = format!(",\"x\":{}1{}", "[".repeat(200), "]".repeat(200));
    // Raw bytes put in the content, before `the secret`.
    let with_bytes = |bytes: &[u8]| {
        let mut line = call("");
        let at = line
            .windows(10)
            .position(|w| w == b"the secret")
            .unwrap_or(0);
        line.splice(at..at, bytes.iter().copied());
        line
    };
    let lines: Vec<(&str, Vec<u8>)> = vec![
        ("a lone surrogate", call(r#","note":"\ud800""#)),
        ("nesting 200 deep", call(&deep)),
        ("invalid UTF-8", with_bytes(b"\xff")),
        ("overlong UTF-8", with_bytes(b"\xc0\xaf")),
        ("1e400", call(r#","n":1e400"#)),
    ];
    for (what, line) in &lines {
        fs.send(line);
        let answer = fs.recv();
        assert_eq!(answer["error"]["code"], json!(-32700), "{what}: {answer}");
        assert!(
            !std::path::Path::new(&target).exists(),
            "{what}: a denied write reached the server"
        );
    }
}

/// Issue 25, finding 2: the Node server answers id `1.0` as `1`; the read
/// is still recorded (its untrusted label stops the write) and finished.
#[test]
fn a_float_id_is_matched_against_the_filesystem_servers_answer() {
    let Some(mut fs) = Fs::start("float-id", FLOW_POLICY) else {
        return;
    };
    let note = fs.path("docs/note.txt");
    let read = format!(
        r#"{{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{{"name":"read_text_file","arguments":{{"path":{}}}}}}}"#,
        json!(note)
    );
    fs.send(read.as_bytes());
    let a = fs.recv();
    assert_eq!(a["id"], json!(1), "{a}");
    assert_eq!(
        a["result"]["content"][0]["text"],
        json!("the secret\n"),
        "{a}"
    );
    let out = fs.path("out/copy.txt");
    let write = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "write_file", "arguments": {"path": out, "content": "the secret"}}});
    fs.send(write.to_string().as_bytes());
    let a = fs.recv();
    assert_eq!(a["result"]["isError"], json!(true), "{a}");
    assert!(
        a["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("no_untrusted_write")),
        "{a}"
    );
    assert!(!std::path::Path::new(&out).exists(), "the write ran");
}

/// Issue 25, finding 4: a `ping` with the id of a running read is refused
/// (the id is live), so the server's `{}` for it is never taken as the
/// read's result: the read fails as the server says and its unit (`quota
/// 1`) comes back.
#[test]
fn a_ping_with_a_running_calls_id_is_refused_before_the_filesystem_server() {
    let Some(mut fs) = Fs::start("live-id", FLOW_POLICY) else {
        return;
    };
    let missing = fs.path("docs/missing.txt");
    let read = |id: u32, path: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "read_text_file", "arguments": {"path": path}}})
        .to_string()
    };
    fs.send(read(5, &missing).as_bytes());
    fs.send(br#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#);
    let (a, b) = (fs.recv(), fs.recv());
    let (refusal, result) = if a.get("error").is_some() {
        (a, b)
    } else {
        (b, a)
    };
    assert_eq!(refusal["id"], json!(5), "{refusal}");
    assert_eq!(refusal["error"]["code"], json!(-32600), "{refusal}");
    assert_eq!(result["id"], json!(5), "{result}");
    assert_eq!(result["result"]["isError"], json!(true), "{result}");
    // The failed read gave its unit back: the next read runs.
    let note = fs.path("docs/note.txt");
    fs.send(read(6, &note).as_bytes());
    let a = fs.recv();
    assert_eq!(
        a["result"]["content"][0]["text"],
        json!("the secret\n"),
        "{a}"
    );
}

/// Issue 25: `tools/list` through the proxy shows only the tools the
/// policy grants (here `read_text_file`; `write_file` is declared but
/// granted by nothing, the server's other tools are not declared), and
/// all of them with `--show-all-tools`. A tool the policy does not
/// declare is answered with MCP's unknown-tool error, `-32602`.
#[test]
fn tools_list_through_the_proxy_shows_only_what_the_policy_grants() {
    let policy = concat!(
        "policy \"mcp-filesystem-list\";\n",
        "tool read_text_file(path: string, head?: int, tail?: int) { resource path; }\n",
        "tool write_file(path: string, content: string) { resource path; }\n",
        "grant docs: read_text_file on prefix \"{docs}/\" quota unlimited;\n",
    );
    let names = |answer: &Value| -> Vec<String> {
        answer["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("no tools: {answer}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let list = br#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}"#;
    let Some(mut fs) = Fs::start("list", policy) else {
        return;
    };
    fs.send(list);
    let a = fs.recv();
    assert_eq!(names(&a), ["read_text_file"], "{a}");
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "list_directory", "arguments": {"path": fs.path("docs")}}});
    fs.send(call.to_string().as_bytes());
    let a = fs.recv();
    assert_eq!(a["error"]["code"], json!(-32602), "{a}");
    drop(fs);

    let Some(mut fs) = Fs::start_with("list-all", policy, &["--show-all-tools"]) else {
        return;
    };
    fs.send(list);
    let all = names(&fs.recv());
    for tool in [
        "read_text_file",
        "write_file",
        "list_directory",
        "move_file",
    ] {
        assert!(all.iter().any(|n| n == tool), "{tool} missing: {all:?}");
    }
}

/// The processes `pid` started (Linux; empty when the kernel does not
/// list them).
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Whether process `pid` runs (and is not a zombie).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
        .unwrap_or(false)
}

/// Issue 25, finding 5: SIGTERM to the proxy ends the filesystem server
/// too (the proxy exits with 143), and the client's output ends.
#[test]
fn sigterm_to_the_proxy_ends_the_filesystem_server() {
    let Some(mut fs) = Fs::start("sigterm", FLOW_POLICY) else {
        return;
    };
    let proxy = fs.child.id();
    let servers = children(proxy);
    let listed = std::path::Path::new(&format!("/proc/{proxy}/task/{proxy}/children")).exists();
    assert!(!listed || !servers.is_empty(), "the proxy runs no server");
    let status = Command::new("kill")
        .arg("-TERM")
        .arg(proxy.to_string())
        .status()
        .expect("kill(1)");
    assert!(status.success());
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let code = loop {
        if let Some(status) = fs.child.try_wait().expect("the proxy's status") {
            break status.code();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the proxy did not exit on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(code, Some(143));
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while servers.iter().any(|&p| alive(p)) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for server in servers {
        assert!(!alive(server), "the server (pid {server}) still runs");
    }
    assert!(
        matches!(
            fs.lines.recv_timeout(Duration::from_secs(5)),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected)
        ),
        "the client's output is still open"
    );
}
