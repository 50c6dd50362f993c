//! `agenra mcp-proxy`: a stdio MCP proxy (docs/mcp-proxy.md).
//!
//! The agent (the MCP client) talks to the proxy on its standard input and
//! output; the proxy spawns the real MCP server and talks to it on the
//! child's standard input and output. Messages are newline-delimited
//! JSON-RPC 2.0. Everything is forwarded unchanged in both directions,
//! except `tools/call` requests from the client: each is decided by the
//! monitor first. An ALLOWed call goes to the server and its response is
//! reported to the monitor (a JSON-RPC error or `isError: true` is a failed
//! call: its unit comes back); a DENY or PAUSE is answered by the proxy
//! itself with a tool result carrying `isError: true`.
//!
//! Two threads: one reads the client and writes the server, the main thread
//! reads the server and writes the client. Malformed lines never stop the
//! proxy: they are logged to standard error and forwarded unchanged.

use crate::{fail, load_policy, Failed};
use agenra_core::event::{Call, Outcome, Report};
use agenra_core::{CompiledPolicy, Session, Verdict};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};

/// The monitor's session and the calls forwarded to the server whose
/// response has not come back yet (by the JSON-RPC id, as canonical JSON).
struct State {
    session: Session,
    pending: HashMap<String, String>,
    seq: u64,
    last_time: u64,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panic elsewhere must not take the proxy down with it.
    state.lock().unwrap_or_else(|e| e.into_inner())
}

/// Writes one line (with its newline) to the client and flushes it.
fn to_client(line: &[u8]) {
    let mut out = std::io::stdout().lock();
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line);
    buf.push(b'\n');
    if out.write_all(&buf).and_then(|()| out.flush()).is_err() {
        log("cannot write to the client (standard output closed)");
    }
}

fn log(message: &str) {
    eprintln!("agenra mcp-proxy: {}", crate::render::escape(message));
}

/// Runs the proxy until the server exits; the exit code is the server's.
pub fn run(policy_path: &Path, server: &[String]) -> Result<(), Failed> {
    let (policy, _) = load_policy(policy_path, false)?;
    let policy =
        CompiledPolicy::new(policy).map_err(|e| fail(format!("{}: {e}", policy_path.display())))?;
    let (program, args) = server
        .split_first()
        .ok_or_else(|| fail("mcp-proxy: no server command given (after `--`)"))?;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| fail(format!("mcp-proxy: cannot start `{program}`: {e}")))?;
    let (Some(server_in), Some(server_out)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(fail("mcp-proxy: the server's pipes are missing"));
    };
    let state = Arc::new(Mutex::new(State {
        session: policy.session(),
        pending: HashMap::new(),
        seq: 0,
        last_time: 0,
    }));

    let client_state = Arc::clone(&state);
    std::thread::spawn(move || client_to_server(&client_state, server_in));

    let mut reader = BufReader::new(server_out);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                log(&format!("cannot read from the server: {e}"));
                break;
            }
        }
        let text = trim_newline(&line);
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        from_server(&state, text);
        to_client(text);
    }
    let status = child
        .wait()
        .map_err(|e| fail(format!("mcp-proxy: waiting for the server: {e}")))?;
    match status.code() {
        Some(0) => Ok(()),
        Some(code) => Err(Failed(u8::try_from(code).unwrap_or(1))),
        None => Err(Failed(1)),
    }
}

fn trim_newline(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Reads the client until it closes its side, then closes the server's
/// input (which asks a well-behaved MCP server to exit).
fn client_to_server(state: &Mutex<State>, server_in: std::process::ChildStdin) {
    let mut server_in = server_in;
    let stdin = std::io::stdin();
    let mut reader = stdin.lock();
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                log(&format!("cannot read from the client: {e}"));
                break;
            }
        }
        let text = trim_newline(&line);
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if let Some(answer) = from_client(state, text) {
            if !answer.is_empty() {
                to_client(answer.as_bytes());
            }
            continue;
        }
        let mut buf = Vec::with_capacity(text.len() + 1);
        buf.extend_from_slice(text);
        buf.push(b'\n');
        if server_in
            .write_all(&buf)
            .and_then(|()| server_in.flush())
            .is_err()
        {
            log("cannot write to the server (its input is closed)");
            break;
        }
    }
    // Dropping `server_in` closes the server's standard input.
}

/// A `tools/call` request from the client: its id, tool name and arguments.
struct ToolCall<'a> {
    id: &'a Value,
    name: &'a str,
    arguments: Map<String, Value>,
}

/// Recognizes a `tools/call` request (a notification, without an id, is
/// not one: there is nobody to answer). `Err` holds why a `tools/call`
/// request is malformed.
fn tool_call(message: &Value) -> Option<Result<ToolCall<'_>, String>> {
    let obj = message.as_object()?;
    if obj.get("method")?.as_str()? != "tools/call" {
        return None;
    }
    let id = obj.get("id").filter(|id| !id.is_null())?;
    let params = obj.get("params").and_then(Value::as_object);
    let Some(name) = params.and_then(|p| p.get("name")).and_then(Value::as_str) else {
        return Some(Err("`params.name` is missing or not a string".into()));
    };
    let arguments = match params.and_then(|p| p.get("arguments")) {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Some(Err("`params.arguments` is not an object".into())),
    };
    Some(Ok(ToolCall {
        id,
        name,
        arguments,
    }))
}

/// A line from the client. `Some(answer)`: the proxy answers it itself (a
/// denied or paused `tools/call`) and it is not forwarded; an empty answer
/// drops the line.
fn from_client(state: &Mutex<State>, line: &[u8]) -> Option<String> {
    let message: Value = match serde_json::from_slice(line) {
        Ok(m) => m,
        Err(e) => {
            log(&format!(
                "client sent a line that is not JSON ({e}); forwarded unchanged"
            ));
            return None;
        }
    };
    // A batch would carry its tools/call past the monitor: refuse it whole
    // (MCP since 2025-06-18 has no batches).
    if let Value::Array(items) = &message {
        if items
            .iter()
            .any(|m| m.get("method").and_then(Value::as_str) == Some("tools/call"))
        {
            log("client sent a batch with a tools/call; refused, not forwarded");
            return Some(rpc_error(
                &Value::Null,
                -32600,
                "agenra: a batch may not contain tools/call: send each call alone",
            ));
        }
    }
    // A tools/call notification has nobody to answer: dropped, never run.
    if message.get("method").and_then(Value::as_str) == Some("tools/call")
        && matches!(message.get("id"), None | Some(Value::Null))
    {
        log("client sent tools/call as a notification (no id); dropped");
        return Some(String::new());
    }
    // An ambiguous call is an error, never decided on one reading and run
    // on another: a server that keeps the first of two equal keys would
    // see other arguments than the monitor checked (issue #6).
    if message.get("method").and_then(Value::as_str) == Some("tools/call") {
        if let Err(e) = serde_json::from_slice::<agenra_core::strict::StrictValue>(line) {
            let id = message.get("id").cloned().unwrap_or(Value::Null);
            log(&format!("ambiguous tools/call refused: {e}"));
            return Some(rpc_error(
                &id,
                -32600,
                &format!("agenra: ambiguous tools/call: {e}"),
            ));
        }
    }
    let call = match tool_call(&message)? {
        Ok(call) => call,
        Err(why) => {
            let id = message.get("id").cloned().unwrap_or(Value::Null);
            log(&format!("malformed tools/call: {why}"));
            return Some(rpc_error(&id, -32602, &format!("agenra: {why}")));
        }
    };
    let key = call.id.to_string();
    let mut st = lock(state);
    if st.pending.contains_key(&key) {
        return Some(rpc_error(
            call.id,
            -32600,
            "agenra: a tools/call with this id is still running",
        ));
    }
    st.seq += 1;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let time = now.max(st.last_time);
    st.last_time = time;
    let call_id = format!("mcp-{}:{key}", st.seq);
    let event = Call {
        session: None,
        id: call_id.clone(),
        time,
        agent: None,
        tool: call.name.to_string(),
        args: call.arguments,
        lineage: Default::default(),
        inferred: Default::default(),
    };
    let decision = match st.session.authorize(&event) {
        Ok(d) => d,
        Err(e) => {
            log(&format!("call {call_id} ({}): {e}", call.name));
            return Some(tool_error(
                call.id,
                &format!("agenra: the monitor could not decide this call: {e}"),
            ));
        }
    };
    let policy = st.session.policy();
    let rule = decision.rule.name(policy);
    let reason = decision.reason_text(policy);
    match decision.verdict {
        Verdict::Allow => {
            st.pending.insert(key, call_id);
            None
        }
        Verdict::Deny => {
            log(&format!("DENY {} by `{rule}`: {reason}", call.name));
            Some(tool_error(
                call.id,
                &format!("agenra: DENY by rule `{rule}`: {reason}"),
            ))
        }
        Verdict::Pause => {
            log(&format!("PAUSE {} by `{rule}`: {reason}", call.name));
            // Nobody can approve through the proxy yet: the units go back.
            if let Err(e) = st.session.reject(&call_id) {
                log(&format!(
                    "call {call_id}: cannot withdraw the paused call: {e}"
                ));
            }
            Some(tool_error(
                call.id,
                &format!(
                    "agenra: PAUSE by rule `{rule}`: {reason}; this call needs a human's approval, \
                     which the MCP proxy cannot ask for yet, so it was not run"
                ),
            ))
        }
    }
}

/// A line from the server: a response to a forwarded `tools/call` is
/// reported to the monitor. The line itself is forwarded by the caller.
fn from_server(state: &Mutex<State>, line: &[u8]) {
    let message: Value = match serde_json::from_slice(line) {
        Ok(m) => m,
        Err(e) => {
            log(&format!(
                "server sent a line that is not JSON ({e}); forwarded unchanged"
            ));
            return;
        }
    };
    let Some(obj) = message.as_object() else {
        return;
    };
    if obj.contains_key("method") {
        return; // a request or notification from the server
    }
    let Some(id) = obj.get("id") else {
        return;
    };
    let mut st = lock(state);
    let Some(call_id) = st.pending.remove(&id.to_string()) else {
        return;
    };
    let result = obj.get("result");
    let failed = obj.contains_key("error")
        || result.is_none()
        || result
            .and_then(|r| r.get("isError"))
            .and_then(Value::as_bool)
            == Some(true);
    let (status, output) = if failed {
        (Outcome::Failed, Value::Null)
    } else {
        (Outcome::Succeeded, result.cloned().unwrap_or(Value::Null))
    };
    let report = Report {
        session: None,
        call: call_id.clone(),
        time: None,
        status,
        output,
        discovered: Vec::new(),
    };
    if let Err(e) = st.session.report(&report) {
        log(&format!("call {call_id}: cannot report its result: {e}"));
    }
}

/// A `tools/call` answer with `isError: true` and one text item.
fn tool_error(id: &Value, text: &str) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": {"content": [{"type": "text", "text": text}], "isError": true},
    })
    .to_string()
}

/// A JSON-RPC error response.
fn rpc_error(id: &Value, code: i64, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string()
}
