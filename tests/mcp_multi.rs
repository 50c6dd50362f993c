//! `agenra mcp-proxy --servers FILE`: one agent session across two MCP
//! servers (`tests/mcp/multi_server.py fs` and `... tests`, which need
//! `python3`), under `tests/mcp/multi_policy.agr`. Every read has a
//! timeout, so a hang fails the test instead of blocking it.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_agenra");
const TIMEOUT: Duration = Duration::from_secs(20);

fn mcp_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp")
}

/// A scratch directory of the test, made empty.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agenra-mcp-multi-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The `--servers` file of the two fixture servers, in `dir`.
fn servers_file(dir: &Path) -> PathBuf {
    let server = |role: &str| json!({"command": ["python3", mcp_dir().join("multi_server.py").display().to_string(), role]});
    let path = dir.join("servers.json");
    let text = json!({"servers": {"fs": server("fs"), "tests": server("tests")}});
    std::fs::write(&path, text.to_string()).unwrap();
    path
}

fn line_channel(from: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

struct Multi {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Receiver<String>,
    log: PathBuf,
}

impl Multi {
    /// The proxy over both fixture servers, with `flags`.
    fn start(dir: &Path, flags: &[&str]) -> Multi {
        let log = dir.join("calls.log");
        let mut child = Command::new(BIN)
            .arg("mcp-proxy")
            .arg("--policy")
            .arg(mcp_dir().join("multi_policy.agr"))
            .arg("--servers")
            .arg(servers_file(dir))
            .args(flags)
            .env("MCP_MULTI_LOG", &log)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start agenra mcp-proxy");
        let lines = line_channel(child.stdout.take().unwrap());
        let stderr = line_channel(child.stderr.take().unwrap());
        Multi {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
            log,
        }
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(format!("{message}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    fn recv(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(TIMEOUT)
            .expect("no line from the proxy in time");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// A request and its answer, which must carry exactly the id sent.
    fn request(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let answer = self.recv();
        assert_eq!(answer["id"], id, "{answer}");
        answer
    }

    fn call(&mut self, id: Value, tool: &str, arguments: Value) -> Value {
        self.request(
            id,
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
        )
    }

    fn initialize(&mut self) -> Value {
        let answer = self.request(
            json!(0),
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {"sampling": {}},
                   "clientInfo": {"name": "test", "version": "1"}}),
        );
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        answer
    }

    fn stderr_line(&self, needle: &str) -> String {
        let deadline = Instant::now() + TIMEOUT;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.stderr.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(_) => break,
            }
        }
        panic!("the proxy wrote no line containing {needle:?} in time");
    }

    /// What the servers logged: `(server, id, params)` of each call, and
    /// the servers' pids.
    fn server_log(&self) -> (Vec<(String, Value, Value)>, Vec<u32>) {
        server_log(&self.log)
    }

    /// Closes the proxy's input and waits for it to exit.
    fn finish(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        wait(&mut self.child)
    }
}

/// What the servers logged in `log`: `(server, id, params)` of each call,
/// and the servers' pids.
fn server_log(log: &Path) -> (Vec<(String, Value, Value)>, Vec<u32>) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut calls = Vec::new();
    let mut pids = Vec::new();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        match v.get("pid").and_then(Value::as_u64) {
            Some(pid) => pids.push(u32::try_from(pid).unwrap()),
            None => calls.push((
                v["server"].as_str().unwrap().to_string(),
                v["id"].clone(),
                v["params"].clone(),
            )),
        }
    }
    (calls, pids)
}

fn wait(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "the proxy did not exit in time");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn is_error(answer: &Value) -> bool {
    answer["result"]["isError"] == json!(true)
}

fn text(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn initialize_and_tools_list_are_merged_with_tools_named_server_dot_tool() {
    let dir = scratch("merged");
    let mut p = Multi::start(&dir, &[]);
    let init = p.initialize();
    assert_eq!(
        init["result"]["protocolVersion"],
        json!("2025-06-18"),
        "{init}"
    );
    assert_eq!(
        init["result"]["serverInfo"]["name"],
        json!("agenra-mcp-proxy")
    );
    assert_eq!(
        init["result"]["capabilities"],
        json!({"tools": {"listChanged": false}})
    );
    let instructions = init["result"]["instructions"].as_str().unwrap_or_default();
    assert!(
        instructions.contains("Server `fs` (tools `fs.*`): the fs server"),
        "{init}"
    );
    // Both servers list two pages each; `tests.exit` is granted by nothing.
    let list = p.request(json!("list"), "tools/list", json!({}));
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "fs.read_file",
            "fs.write_file",
            "fs.commit",
            "fs.exit",
            "tests.run_tests",
            "tests.post"
        ],
        "{list}"
    );
    p.stderr_line("1 tool(s) hidden");
    assert!(p.finish().success());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn commit_only_if_tests_passed_since_the_last_write_spans_two_servers() {
    let dir = scratch("obligation");
    let mut p = Multi::start(&dir, &[]);
    p.initialize();
    let write = p.call(
        json!("w1"),
        "fs.write_file",
        json!({"path": "a.rs", "text": "x"}),
    );
    assert!(!is_error(&write), "{write}");
    let commit = p.call(json!(2), "fs.commit", json!({"message": "one"}));
    assert!(
        text(&commit).contains("DENY by rule `tested_commit`"),
        "{commit}"
    );
    // Failing tests establish nothing.
    let failing = p.call(json!(3), "tests.run_tests", json!({"suite": "failing"}));
    assert!(is_error(&failing), "{failing}");
    let commit = p.call(json!(4), "fs.commit", json!({"message": "two"}));
    assert!(
        text(&commit).contains("DENY by rule `tested_commit`"),
        "{commit}"
    );
    let passing = p.call(json!(5.0), "tests.run_tests", json!({"suite": "unit"}));
    assert!(!is_error(&passing), "{passing}");
    assert_eq!(text(&passing), r#"tests run_tests ok: {"suite": "unit"}"#);
    let commit = p.call(json!("c"), "fs.commit", json!({"message": "three"}));
    assert!(!is_error(&commit), "{commit}");
    // A new write needs new tests before the next commit.
    let write = p.call(
        json!(7),
        "fs.write_file",
        json!({"path": "b.rs", "text": "y"}),
    );
    assert!(!is_error(&write), "{write}");
    let commit = p.call(json!(8), "fs.commit", json!({"message": "four"}));
    assert!(
        text(&commit).contains("DENY by rule `tested_commit`"),
        "{commit}"
    );
    let log = p.log.clone();
    assert!(p.finish().success());
    // What reached each server: its own tool names under the proxy's ids,
    // counted per server (`initialize` took 1), the arguments decided; the
    // denied commits never.
    let (calls, _) = server_log(&log);
    assert_eq!(
        calls[0].2,
        json!({"name": "write_file", "arguments": {"path": "a.rs", "text": "x"}})
    );
    let seen: Vec<(String, Value, String)> = calls
        .into_iter()
        .map(|(s, id, params)| (s, id, params["name"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(
        seen,
        [
            ("fs".to_string(), json!(2), "write_file".to_string()),
            ("tests".into(), json!(2), "run_tests".into()),
            ("tests".into(), json!(3), "run_tests".into()),
            ("fs".into(), json!(3), "commit".into()),
            ("fs".into(), json!(4), "write_file".into()),
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_secret_read_on_one_server_stops_a_send_on_the_other() {
    let dir = scratch("flow");
    let mut p = Multi::start(&dir, &[]);
    p.initialize();
    let post = p.call(json!(1), "tests.post", json!({"to": "ci", "body": "hello"}));
    assert!(!is_error(&post), "{post}");
    let read = p.call(json!(2), "fs.read_file", json!({"path": "secrets/key"}));
    assert!(!is_error(&read), "{read}");
    let post = p.call(
        json!(3),
        "tests.post",
        json!({"to": "ci", "body": "the key"}),
    );
    assert!(
        text(&post).contains("DENY by rule `no_secret_out`"),
        "{post}"
    );
    let log = p.log.clone();
    assert!(p.finish().success());
    let (calls, _) = server_log(&log);
    let posts = calls
        .iter()
        .filter(|(s, _, params)| s == "tests" && params["name"] == json!("post"))
        .count();
    assert_eq!(posts, 1, "{calls:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn other_requests_are_answered_by_the_proxy_or_refused() {
    let dir = scratch("routing");
    let mut p = Multi::start(&dir, &[]);
    p.initialize();
    let ping = p.request(json!("p"), "ping", json!({}));
    assert_eq!(ping["result"], json!({}), "{ping}");
    for method in [
        "resources/list",
        "resources/read",
        "prompts/list",
        "tasks/get",
    ] {
        let refused = p.request(json!(method), method, json!({}));
        assert_eq!(refused["error"]["code"], json!(-32601), "{refused}");
    }
    let cursor = p.request(json!("c"), "tools/list", json!({"cursor": "page-2"}));
    assert_eq!(cursor["error"]["code"], json!(-32602), "{cursor}");
    // A name no server has, and a name the policy does not declare.
    for tool in ["nope.read_file", "read_file", "fs.", "fs.shell"] {
        let unknown = p.call(json!(tool), tool, json!({}));
        assert_eq!(unknown["error"]["code"], json!(-32602), "{unknown}");
        let message = unknown["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with(&format!("Unknown tool: {tool} ")),
            "{unknown}"
        );
    }
    // Answers out of order, across servers: the held read is answered
    // after the next message the fs server gets, under the client's id.
    p.send(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                   "params": {"name": "fs.read_file", "arguments": {"path": "a-later"}}}));
    // Its id is in flight: a ping reusing it is refused.
    let reused = p.request(json!(5.0), "ping", json!({}));
    assert_eq!(reused["error"]["code"], json!(-32600), "{reused}");
    let tests = p.call(json!(6), "tests.run_tests", json!({"suite": "unit"}));
    assert!(!is_error(&tests), "{tests}");
    p.send(&json!({"jsonrpc": "2.0", "id": "w", "method": "tools/call",
                   "params": {"name": "fs.write_file", "arguments": {"path": "x", "text": "y"}}}));
    let mut answers = [p.recv(), p.recv()];
    answers.sort_by_key(|a| a["id"].is_string());
    assert_eq!(answers[0]["id"], json!(5), "{answers:?}");
    assert_eq!(text(&answers[0]), "contents of a-later");
    assert_eq!(answers[1]["id"], json!("w"), "{answers:?}");
    assert!(p.finish().success());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_answer_the_proxy_cannot_parse_is_an_unknown_outcome_and_an_error() {
    let dir = scratch("garbled");
    let mut p = Multi::start(&dir, &[]);
    p.initialize();
    let read = p.call(json!(1), "fs.read_file", json!({"path": "garbled"}));
    assert_eq!(read["error"]["code"], json!(-32603), "{read}");
    p.stderr_line("reported `unknown`");
    // The read may have reached the client: its secret label counts.
    let post = p.call(json!(2), "tests.post", json!({"to": "ci", "body": "x"}));
    assert!(
        text(&post).contains("DENY by rule `no_secret_out`"),
        "{post}"
    );
    assert!(p.finish().success());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_cancelled_call_is_unknown_at_once() {
    let dir = scratch("cancel");
    let mut p = Multi::start(&dir, &[]);
    p.initialize();
    p.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "fs.read_file", "arguments": {"path": "s-later"}}}));
    p.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": 1, "reason": "user"}}),
    );
    p.stderr_line("cancelled by the client while running; reported `unknown`");
    // Its secret label counts, its id is free again, and the server's late
    // answer (released by the next message) is not forwarded.
    let post = p.call(json!(1), "tests.post", json!({"to": "ci", "body": "x"}));
    assert!(
        text(&post).contains("DENY by rule `no_secret_out`"),
        "{post}"
    );
    let write = p.call(json!(2), "fs.write_file", json!({"path": "x", "text": "y"}));
    assert!(!is_error(&write), "{write}");
    let ping = p.request(json!(3), "ping", json!({}));
    assert_eq!(ping["result"], json!({}));
    assert!(p.finish().success());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_server_that_dies_ends_the_proxy_and_every_other_server() {
    let dir = scratch("dies");
    let mut p = Multi::start(&dir, &[]);
    p.initialize();
    p.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "fs.exit", "arguments": {}}}));
    p.stderr_line("server `fs` closed its output: ending the proxy and every server");
    let status = wait(&mut p.child);
    assert_eq!(status.code(), Some(3), "the dead server's exit code");
    // The client's output ends, and both servers are gone (reaped).
    assert!(p.lines.recv_timeout(TIMEOUT).is_err(), "stdout closed");
    let (_, pids) = p.server_log();
    assert_eq!(pids.len(), 2);
    for pid in pids {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "server {pid} is gone"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_durable_session_over_several_servers_resumes() {
    let dir = scratch("store");
    let store = dir.join("session.redb");
    let store = store.to_str().unwrap();
    let mut p = Multi::start(&dir, &["--store", store, "--session", "agent-1"]);
    p.stderr_line("new session `agent-1`");
    p.initialize();
    let post = p.call(json!(1), "tests.post", json!({"to": "ci", "body": "a"}));
    assert!(!is_error(&post), "{post}");
    // A secret read left running when the proxy is killed.
    p.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                   "params": {"name": "fs.read_file", "arguments": {"path": "k-later"}}}));
    let log = p.log.clone();
    let deadline = Instant::now() + TIMEOUT;
    while !server_log(&log)
        .0
        .iter()
        .any(|(_, _, c)| c["arguments"]["path"] == json!("k-later"))
    {
        assert!(
            Instant::now() < deadline,
            "the read never reached the server"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    p.child.kill().unwrap();
    wait(&mut p.child);
    let mut p = Multi::start(&dir, &["--store", store, "--session", "agent-1"]);
    p.stderr_line("1 call(s) left running reported `unknown`");
    p.initialize();
    // The read may have run: its label counts; the post's unit stays spent.
    let post = p.call(json!(1), "tests.post", json!({"to": "ci", "body": "b"}));
    assert!(
        text(&post).contains("DENY by rule `no_secret_out`"),
        "{post}"
    );
    assert!(p.finish().success());
    let verify = Command::new(BIN)
        .args(["audit", "verify", "--store", store])
        .output()
        .unwrap();
    assert!(verify.status.success(), "{verify:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_servers_files_and_flags_are_refused_before_any_server_starts() {
    let dir = scratch("flags");
    let policy = mcp_dir().join("multi_policy.agr");
    let run = |args: &[&str]| {
        Command::new(BIN)
            .arg("mcp-proxy")
            .arg("--policy")
            .arg(&policy)
            .args(args)
            .env("MCP_MULTI_LOG", dir.join("calls.log"))
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let servers = servers_file(&dir);
    let servers = servers.to_str().unwrap();
    let bad = dir.join("bad.json");
    let bad = bad.to_str().unwrap();
    std::fs::write(bad, r#"{"servers": {"f.s": {"command": ["x"]}}}"#).unwrap();
    let missing = dir.join("missing.json");
    let missing = missing.to_str().unwrap();
    let unstartable = dir.join("unstartable.json");
    std::fs::write(
        &unstartable,
        r#"{"servers": {"gone": {"command": ["/nonexistent/agenra-test-server"]}}}"#,
    )
    .unwrap();
    let unstartable = unstartable.to_str().unwrap();
    for (args, says) in [
        (vec!["--servers", bad], "servers.f.s"),
        (vec!["--servers", missing], "cannot read it"),
        (
            vec!["--servers", unstartable],
            "server `gone`: cannot start",
        ),
        (
            vec![
                "--servers",
                servers,
                "--on-pause",
                "wait",
                "--approvals-listen",
                "127.0.0.1:0",
                "--insecure-no-auth",
            ],
            "--on-pause wait is not supported with --servers",
        ),
        (
            vec!["--servers", servers, "--cancel-timeout", "5"],
            "--cancel-timeout is not used",
        ),
    ] {
        let out = run(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    // Both a server command and --servers: a usage error.
    let out = run(&["--servers", servers, "--", "python3"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    // The servers never started (they would have logged their pids).
    assert!(!dir.join("calls.log").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigterm_to_the_proxy_ends_every_server() {
    let dir = scratch("sigterm");
    let mut p = Multi::start(&dir, &[]);
    p.initialize();
    let (_, pids) = p.server_log();
    assert_eq!(pids.len(), 2);
    let pid = p.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let status = wait(&mut p.child);
    assert_eq!(status.code(), Some(143), "128 + SIGTERM");
    for pid in pids {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "server {pid} is gone"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_count_on_one_server_is_reset_by_the_other() {
    let dir = scratch("count");
    let mut p = Multi::start(&dir, &[]);
    p.initialize();
    for id in 1..=2 {
        let write = p.call(
            json!(id),
            "fs.write_file",
            json!({"path": "a", "text": "x"}),
        );
        assert!(!is_error(&write), "{write}");
    }
    let third = p.call(json!(3), "fs.write_file", json!({"path": "a", "text": "x"}));
    assert!(
        text(&third).contains("DENY by rule `untested_writes`"),
        "{third}"
    );
    let tests = p.call(json!(4), "tests.run_tests", json!({"suite": "unit"}));
    assert!(!is_error(&tests), "{tests}");
    let write = p.call(json!(5), "fs.write_file", json!({"path": "a", "text": "x"}));
    assert!(!is_error(&write), "{write}");
    // The second post of a `quota 2` grant is the last.
    for id in 6..=7 {
        let post = p.call(json!(id), "tests.post", json!({"to": "ci", "body": "x"}));
        assert!(!is_error(&post), "{post}");
    }
    let post = p.call(json!(8), "tests.post", json!({"to": "ci", "body": "x"}));
    assert!(is_error(&post), "{post}");
    assert!(p.finish().success());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn lines_the_proxy_cannot_parse_exactly_never_reach_a_server() {
    let dir = scratch("parse");
    let mut p = Multi::start(&dir, &[]);
    p.initialize();
    for (line, code) in [
        (
            &br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fs.write_file","arguments":{"path":"\ud800","text":"x"}}}"#[..],
            -32700,
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"fs.write_file\",\"arguments\":{\"path\":\"\xff\",\"text\":\"x\"}}}",
            -32700,
        ),
        (
            br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"fs.read_file","name":"fs.write_file","arguments":{"path":"a","text":"x"}}}"#,
            -32600,
        ),
        (
            br#"[{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"fs.write_file","arguments":{"path":"a","text":"x"}}}]"#,
            -32600,
        ),
    ] {
        let stdin = p.stdin.as_mut().unwrap();
        stdin.write_all(line).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
        let answer = p.recv();
        assert_eq!(answer["error"]["code"], json!(code), "{answer}");
    }
    let log = p.log.clone();
    assert!(p.finish().success());
    let (calls, _) = server_log(&log);
    assert!(calls.is_empty(), "{calls:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
