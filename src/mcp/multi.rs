//! `agenra mcp-proxy --servers FILE`: one agent session across several MCP
//! servers (docs/mcp-proxy.md, "Several servers, one session").
//!
//! The proxy starts every server of the file, and the client sees one MCP
//! server whose tools are the servers' tools named `SERVER.TOOL`. Every
//! request the proxy sends a server carries an id of the proxy's own (a
//! number counted per server), and every answer goes back to the client
//! under the client's id exactly as the client sent it. `initialize` and
//! `tools/list` go to every server and their answers are merged; `ping` is
//! answered by the proxy; a `tools/call` is decided in the one session and
//! routed to the server its name names; everything else (resources,
//! prompts, completion, logging, tasks, server-to-client requests) is
//! refused with a JSON-RPC error rather than guessed at. One session, so
//! facts, flows and quotas span the servers.

use super::*;
use std::collections::BTreeMap;
use std::sync::mpsc;

/// The most servers a `--servers` file may name.
pub const MAX_SERVERS: usize = 64;
/// The most `tools/list` pages the proxy follows (`nextCursor`) per server.
const MAX_PAGES: u32 = 100;

/// Why a `--servers` file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ServersError {
    #[error("--servers {path}: cannot read it: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("--servers {path}: line {line}, column {column}: {message}")]
    Json {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("--servers {path}: {field}: {message}")]
    Field {
        path: String,
        field: String,
        message: String,
    },
}

/// The `--servers` file: `{"servers": {"NAME": {"command": [PROGRAM, ARGS...]}}}`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ServersFile {
    servers: BTreeMap<String, ServerEntry>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerEntry {
    command: Vec<String>,
}

/// One server of the file: its name (the tools' prefix) and command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerSpec {
    pub name: String,
    pub command: Vec<String>,
}

/// Whether `name` may name a server: `[A-Za-z][A-Za-z0-9_-]*`, at most 64
/// characters (no `.`, so `SERVER.TOOL` splits at its first dot).
fn server_name_ok(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 64
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Reads a `--servers` file (strictly: a key twice is an error), servers
/// in the order of their names.
pub fn load_servers(path: &Path) -> Result<Vec<ServerSpec>, ServersError> {
    let shown = path.display().to_string();
    let text = std::fs::read(path).map_err(|source| ServersError::Read {
        path: shown.clone(),
        source,
    })?;
    let json_error = |e: serde_json::Error| ServersError::Json {
        path: shown.clone(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    };
    let value = serde_json::from_slice::<agenra_core::strict::StrictValue>(&text)
        .map_err(json_error)?
        .0;
    let file: ServersFile = serde_json::from_value(value).map_err(json_error)?;
    let field = |field: String, message: String| ServersError::Field {
        path: shown.clone(),
        field,
        message,
    };
    if file.servers.is_empty() {
        return Err(field(
            "servers".into(),
            "names no server (give at least one)".into(),
        ));
    }
    if file.servers.len() > MAX_SERVERS {
        return Err(field(
            "servers".into(),
            format!(
                "names {} servers (at most {MAX_SERVERS})",
                file.servers.len()
            ),
        ));
    }
    let mut specs = Vec::new();
    for (name, entry) in file.servers {
        if !server_name_ok(&name) {
            return Err(field(
                format!("servers.{}", crate::render::escape(&name)),
                "a server's name is a letter, then letters, digits, `_` or `-` \
                 (at most 64; no `.`: tools are named SERVER.TOOL)"
                    .into(),
            ));
        }
        if entry.command.first().is_none_or(String::is_empty) {
            return Err(field(
                format!("servers.{name}.command"),
                "is empty (give the program and its arguments: [\"npx\", \"...\"])".into(),
            ));
        }
        specs.push(ServerSpec {
            name,
            command: entry.command,
        });
    }
    Ok(specs)
}

/// A server the proxy fronts.
struct Server {
    name: String,
    /// Its standard input; `None` once closed.
    input: Mutex<Option<ChildStdin>>,
    child: ChildState,
}

/// Where a client request in flight went.
enum Live {
    /// A `tools/call` forwarded to a server under the id key `sid`.
    Call(usize, String),
    /// An `initialize` or `tools/list` sent to every server.
    Gather,
}

/// What a server's answer to the proxy's id answers.
enum Route {
    /// An allowed `tools/call`: the proxy's call id, the client's id (as
    /// the client sent it) and its key.
    Call {
        call: String,
        id: Value,
        key: String,
    },
    /// A call the client cancelled or whose answer was already given: the
    /// server's answer is dropped.
    Dropped,
    /// A part of a gathered `initialize` or `tools/list`.
    Part(u64),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Initialize,
    ToolsList,
}

/// An `initialize` or `tools/list` sent to every server, until each has
/// answered.
struct Gather {
    kind: Kind,
    id: Value,
    key: String,
    /// Each server's answer: its `result`, or why there is none.
    parts: Vec<Option<Result<Value, String>>>,
    /// The tools each server listed so far (pages followed).
    tools: Vec<Vec<Value>>,
    pages: Vec<u32>,
}

struct MState {
    /// The last call number used (`mcp-N:ID`).
    seq: u64,
    /// The client's requests in flight, by their id's key.
    live: HashMap<String, Live>,
    /// Per server: the proxy's ids in flight (by key) and what they answer.
    routes: Vec<HashMap<String, Route>>,
    next_sid: Vec<u64>,
    gathers: HashMap<u64, Gather>,
    next_gather: u64,
}

impl MState {
    /// A fresh id for a request to server `s`, routed to `route`.
    fn send_id(&mut self, s: usize, route: Route) -> Value {
        self.next_sid[s] += 1;
        let id = json!(self.next_sid[s]);
        if let Some(key) = id_key(&id) {
            self.routes[s].insert(key, route);
        }
        id
    }
}

/// What the threads share in multi-server mode.
struct Multi {
    /// The session (its gateway, tenant and id); its `child` and
    /// `server_in` are unused.
    proxy: Proxy,
    servers: Vec<Server>,
    state: Mutex<MState>,
}

/// A line to send once the state lock is released.
enum Out {
    Client(Vec<u8>),
    Server(usize, Vec<u8>),
}

fn mlock(state: &Mutex<MState>) -> MutexGuard<'_, MState> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

fn send(m: &Multi, outs: Vec<Out>) {
    for out in outs {
        match out {
            Out::Client(line) => to_client(&line),
            Out::Server(s, line) => {
                if !write_server(&m.servers[s], &line) {
                    log(&format!(
                        "cannot write to server `{}` (its input is closed)",
                        m.servers[s].name
                    ));
                }
            }
        }
    }
}

fn write_server(server: &Server, line: &[u8]) -> bool {
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line);
    buf.push(b'\n');
    let mut input = server.input.lock().unwrap_or_else(|e| e.into_inner());
    let Some(w) = input.as_mut() else {
        return false;
    };
    if w.write_all(&buf).and_then(|()| w.flush()).is_err() {
        *input = None;
        return false;
    }
    true
}

fn close_inputs(m: &Multi) {
    for s in &m.servers {
        drop(s.input.lock().unwrap_or_else(|e| e.into_inner()).take());
    }
}

/// A message with its `id` replaced.
fn with_id(message: &Value, id: &Value) -> Vec<u8> {
    let mut message = message.clone();
    if let Some(obj) = message.as_object_mut() {
        obj.insert("id".into(), id.clone());
    }
    message.to_string().into_bytes()
}

fn request(id: &Value, method: &str, params: Option<Value>) -> Vec<u8> {
    let mut message = json!({"jsonrpc": "2.0", "id": id, "method": method});
    if let (Some(params), Some(obj)) = (params, message.as_object_mut()) {
        obj.insert("params".into(), params);
    }
    message.to_string().into_bytes()
}

/// A line from the client in multi-server mode: what to send where.
fn from_client_multi(m: &Multi, line: &[u8]) -> Vec<Out> {
    let answer = |s: String| vec![Out::Client(s.into_bytes())];
    let message = match parse_line(line) {
        Ok(message) => message,
        Err((code, why)) => return answer(refuse_unparsed(line, code, &why)),
    };
    if message.is_array() {
        log("client sent a batch; refused (not supported with --servers)");
        return answer(rpc_error(
            &Value::Null,
            -32600,
            "agenra: batches are not supported with --servers: send each message alone",
        ));
    }
    let Some(method) = message.get("method") else {
        // An answer to a server's request: the proxy relays none to the
        // client, so there is nothing it could answer.
        log("client sent a response to no request of the proxy; dropped");
        return Vec::new();
    };
    let method = method.as_str().unwrap_or_default().to_string();
    let id = match message.get("id") {
        None | Some(Value::Null) => return client_notification(m, &method, &message),
        Some(id) => id,
    };
    let Some(key) = id_key(id) else {
        log("client sent a request whose id is not a string or a number; refused");
        return answer(rpc_error(
            &Value::Null,
            -32600,
            "agenra: a request id must be a string or a number",
        ));
    };
    let shown_id = id.to_string();
    if shown_id.len() > MAX_ID_BYTES {
        log(&format!(
            "client sent a request whose id is {} bytes long (at most {MAX_ID_BYTES}); refused",
            shown_id.len()
        ));
        return answer(rpc_error(
            id,
            -32600,
            &format!(
                "agenra: a request id may be at most {MAX_ID_BYTES} bytes of JSON \
                 (this one is {})",
                shown_id.len()
            ),
        ));
    }
    let mut st = mlock(&m.state);
    if st.live.contains_key(&key) {
        log(&format!(
            "client reused the id {id} of a request still in flight; refused"
        ));
        return answer(rpc_error(
            id,
            -32600,
            "agenra: a request with this id is still in flight",
        ));
    }
    match method.as_str() {
        "ping" => answer(json!({"jsonrpc": "2.0", "id": id, "result": {}}).to_string()),
        "initialize" | "tools/list" => {
            let kind = if method == "initialize" {
                Kind::Initialize
            } else {
                Kind::ToolsList
            };
            let params = message.get("params").cloned().unwrap_or(json!({}));
            if kind == Kind::ToolsList && params.get("cursor").is_some_and(|c| !c.is_null()) {
                // The proxy's answer lists every server's tools at once
                // and never gives a cursor.
                return answer(rpc_error(
                    id,
                    -32602,
                    "agenra: invalid cursor (this proxy lists every tool in one page)",
                ));
            }
            let params = match kind {
                // The servers are told the client has no capabilities: the
                // proxy relays no server-to-client requests (sampling,
                // roots, elicitation) with --servers.
                Kind::Initialize => {
                    let mut params = params;
                    if let Some(obj) = params.as_object_mut() {
                        obj.insert("capabilities".into(), json!({}));
                    }
                    Some(params)
                }
                Kind::ToolsList => None,
            };
            st.next_gather += 1;
            let g = st.next_gather;
            let n = m.servers.len();
            st.gathers.insert(
                g,
                Gather {
                    kind,
                    id: id.clone(),
                    key: key.clone(),
                    parts: vec![None; n],
                    tools: vec![Vec::new(); n],
                    pages: vec![0; n],
                },
            );
            st.live.insert(key, Live::Gather);
            (0..n)
                .map(|s| {
                    let sid = st.send_id(s, Route::Part(g));
                    Out::Server(s, request(&sid, &method, params.clone()))
                })
                .collect()
        }
        "tools/call" => tools_call(m, &mut st, &message, id, key),
        other => {
            log(&format!(
                "client sent `{}`; refused (not supported with --servers)",
                crate::render::escape(other)
            ));
            answer(rpc_error(
                id,
                -32601,
                &format!(
                    "agenra: method `{other}` is not supported by mcp-proxy with --servers \
                     (only initialize, ping, tools/list and tools/call)"
                ),
            ))
        }
    }
}

/// A notification from the client.
fn client_notification(m: &Multi, method: &str, message: &Value) -> Vec<Out> {
    match method {
        "tools/call" => {
            log("client sent tools/call as a notification (no id); dropped");
            Vec::new()
        }
        "notifications/initialized" => {
            let line = message.to_string().into_bytes();
            (0..m.servers.len())
                .map(|s| Out::Server(s, line.clone()))
                .collect()
        }
        "notifications/cancelled" => {
            let Some(key) = message
                .get("params")
                .and_then(|p| p.get("requestId"))
                .and_then(id_key)
            else {
                return Vec::new();
            };
            let mut st = mlock(&m.state);
            let Some(Live::Call(s, sid)) = st.live.get(&key) else {
                return Vec::new();
            };
            let (s, sid) = (*s, sid.clone());
            st.live.remove(&key);
            let Some(Route::Call { call, .. }) = st.routes[s].insert(sid.clone(), Route::Dropped)
            else {
                return Vec::new();
            };
            // The server may have run it in part: `unknown` now (units
            // kept, its output counted as read), whatever it answers.
            report_answer(
                &m.proxy,
                &call,
                Outcome::Unknown,
                Value::Null,
                "cancelled by the client while running",
            );
            drop(st);
            let mut params = json!({"requestId": number_of(&sid)});
            if let Some(reason) = message.get("params").and_then(|p| p.get("reason")) {
                params["reason"] = reason.clone();
            }
            let line = json!({"jsonrpc": "2.0", "method": method, "params": params});
            vec![Out::Server(s, line.to_string().into_bytes())]
        }
        other => {
            log(&format!(
                "client sent the notification `{}`; not relayed with --servers",
                crate::render::escape(other)
            ));
            Vec::new()
        }
    }
}

/// The proxy's own id back from its key (`n5.0` is `5`).
fn number_of(key: &str) -> Value {
    key.strip_prefix('n')
        .and_then(|n| n.parse::<f64>().ok())
        .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 9.0e15)
        .map_or(Value::Null, |f| json!(f as u64))
}

/// A `tools/call` request: routed by its name's server, decided in the
/// session, forwarded on ALLOW under an id of the proxy's.
fn tools_call(m: &Multi, st: &mut MState, message: &Value, id: &Value, key: String) -> Vec<Out> {
    let answer = |s: String| vec![Out::Client(s.into_bytes())];
    let call = match tool_call(message) {
        Some(Ok(call)) => call,
        Some(Err(why)) => {
            log(&format!("malformed tools/call: {why}"));
            return answer(rpc_error(id, -32602, &format!("agenra: {why}")));
        }
        None => return Vec::new(),
    };
    let routed = call.name.split_once('.').and_then(|(server, tool)| {
        let s = m.servers.iter().position(|x| x.name == server)?;
        (!tool.is_empty()).then_some((s, tool))
    });
    let Some((s, tool)) = routed else {
        log(&format!(
            "tools/call of `{}`: no server of --servers has it; refused",
            call.name
        ));
        return answer(rpc_error(
            id,
            -32602,
            &format!(
                "Unknown tool: {} (agenra: tools are named SERVER.TOOL, and no server of \
                 --servers is called so)",
                call.name
            ),
        ));
    };
    let (call_id, decision) =
        match decide(&m.proxy, &mut st.seq, call.id, call.name, &call.arguments) {
            Ok(decided) => decided,
            Err(refused) => return answer(refused),
        };
    let rule = decision.rule.clone().unwrap_or_else(|| "?".into());
    let reason = decision.reason.clone();
    match decision.decision {
        Some(v) if v == Verdict::Allow.as_str() => {
            let sid = st.send_id(
                s,
                Route::Call {
                    call: call_id,
                    id: id.clone(),
                    key: key.clone(),
                },
            );
            if let Some(sid_key) = id_key(&sid) {
                st.live.insert(key, Live::Call(s, sid_key));
            }
            // The request as the proxy parsed it, under the server's own
            // tool name and the proxy's id: the server parses exactly the
            // arguments that were decided.
            let mut params = message.get("params").cloned().unwrap_or(json!({}));
            if let Some(obj) = params.as_object_mut() {
                obj.insert("name".into(), json!(tool));
                obj.insert("arguments".into(), Value::Object(call.arguments.clone()));
            }
            vec![Out::Server(s, request(&sid, "tools/call", Some(params)))]
        }
        Some(v) if v == Verdict::Pause.as_str() => {
            log(&format!("PAUSE {} by `{rule}`: {reason}", call.name));
            let by = By::proxy("--on-pause error: nobody approves through the proxy");
            if let Err(e) = m.proxy.resolve(&call_id, &by, false) {
                log(&format!(
                    "call {call_id}: cannot withdraw the paused call: {}",
                    e.error
                ));
            }
            answer(tool_error(
                call.id,
                &format!(
                    "agenra: PAUSE by rule `{rule}`: {reason}; this call needs a human's approval, \
                     which this MCP proxy does not wait for (--on-pause error), so it was not run"
                ),
            ))
        }
        _ if rule == "well-formed" && reason == format!("unknown tool `{}`", call.name) => {
            log(&format!("DENY {} by `{rule}`: {reason}", call.name));
            answer(rpc_error(
                call.id,
                -32602,
                &format!(
                    "Unknown tool: {} (agenra: DENY by rule `{rule}`: {reason})",
                    call.name
                ),
            ))
        }
        _ => {
            log(&format!("DENY {} by `{rule}`: {reason}", call.name));
            answer(tool_error(
                call.id,
                &format!("agenra: DENY by rule `{rule}`: {reason}"),
            ))
        }
    }
}

/// A line from server `s`: what to send where. The server's answers go
/// back to the client under the client's ids; a line the proxy cannot
/// parse exactly is not forwarded (its id is the proxy's, not the
/// client's): the call it answers is reported `unknown` and the client
/// gets a JSON-RPC error for it.
fn from_server_multi(m: &Multi, s: usize, line: &[u8]) -> Vec<Out> {
    let name = &m.servers[s].name;
    let (message, exact) = match parse_line(line) {
        Ok(message) => (message, true),
        Err((_, why)) => {
            log(&format!(
                "server `{name}` sent a line the proxy cannot parse exactly ({why})"
            ));
            match lenient(line) {
                Some(message) => (message, false),
                None => return abandon_all(m, s, &why),
            }
        }
    };
    match &message {
        Value::Array(items) => items
            .iter()
            .flat_map(|item| server_message_multi(m, s, item, false))
            .collect(),
        other => server_message_multi(m, s, other, exact),
    }
}

/// Every request in flight on server `s` is answered with an error and its
/// server answer dropped; calls are reported `unknown` (a line nobody can
/// attribute may have been any of their answers).
fn abandon_all(m: &Multi, s: usize, why: &str) -> Vec<Out> {
    let name = &m.servers[s].name;
    let mut st = mlock(&m.state);
    let keys: Vec<String> = st.routes[s].keys().cloned().collect();
    let mut outs = Vec::new();
    let mut calls = Vec::new();
    for sid in keys {
        match st.routes[s].insert(sid, Route::Dropped) {
            Some(Route::Call { call, id, key }) => {
                st.live.remove(&key);
                calls.push((call, id));
            }
            Some(Route::Part(g)) => {
                let failed = Err(format!(
                    "server `{name}` sent a line the proxy cannot parse"
                ));
                outs.extend(part_done(m, &mut st, s, g, failed));
            }
            _ => {}
        }
    }
    calls.sort_by_key(|(call, _)| call_number(call));
    for (call, id) in calls {
        report_answer(&m.proxy, &call, Outcome::Unknown, Value::Null, why);
        outs.push(Out::Client(unparseable_answer(&id, name).into_bytes()));
    }
    outs
}

fn unparseable_answer(id: &Value, server: &str) -> String {
    rpc_error(
        id,
        -32603,
        &format!(
            "agenra: server `{server}` answered this call with a line the proxy cannot parse \
             exactly; the call may have run (its outcome is recorded as unknown)"
        ),
    )
}

fn server_message_multi(m: &Multi, s: usize, message: &Value, exact: bool) -> Vec<Out> {
    let name = &m.servers[s].name;
    let Some(obj) = message.as_object() else {
        return Vec::new();
    };
    if let Some(method) = obj.get("method") {
        let method = method.as_str().unwrap_or_default();
        return match obj.get("id").filter(|id| !id.is_null()) {
            // A request of the server to the client: the proxy answers it.
            Some(id) if method == "ping" => vec![Out::Server(
                s,
                json!({"jsonrpc": "2.0", "id": id, "result": {}})
                    .to_string()
                    .into_bytes(),
            )],
            Some(id) => {
                log(&format!(
                    "server `{name}` sent the request `{}`; refused (not relayed with --servers)",
                    crate::render::escape(method)
                ));
                vec![Out::Server(
                    s,
                    rpc_error(
                        id,
                        -32601,
                        &format!(
                            "agenra mcp-proxy relays no server requests with --servers \
                             (`{method}`)"
                        ),
                    )
                    .into_bytes(),
                )]
            }
            None if exact
                && matches!(
                    method,
                    "notifications/tools/list_changed"
                        | "notifications/message"
                        | "notifications/progress"
                ) =>
            {
                vec![Out::Client(message.to_string().into_bytes())]
            }
            None => Vec::new(),
        };
    }
    let Some(sid) = obj.get("id").and_then(id_key) else {
        log(&format!(
            "server `{name}` sent a response with no id of the proxy's; dropped"
        ));
        return Vec::new();
    };
    let mut st = mlock(&m.state);
    match st.routes[s].remove(&sid) {
        None => {
            log(&format!(
                "server `{name}` answered an id the proxy never sent it; dropped"
            ));
            Vec::new()
        }
        Some(Route::Dropped) => Vec::new(),
        Some(Route::Call { call, id, key }) => {
            st.live.remove(&key);
            if !exact {
                report_answer(&m.proxy, &call, Outcome::Unknown, Value::Null, UNPARSEABLE);
                return vec![Out::Client(unparseable_answer(&id, name).into_bytes())];
            }
            let (status, output, why) = classify(obj);
            report_answer(&m.proxy, &call, status, output, why);
            vec![Out::Client(with_id(message, &id))]
        }
        Some(Route::Part(g)) => {
            let part = match (exact, obj.get("result"), obj.get("error")) {
                (false, _, _) => Err(format!(
                    "server `{name}` sent an answer the proxy cannot parse exactly"
                )),
                (true, Some(result), None) if result.is_object() => Ok(result.clone()),
                (true, _, Some(error)) => Err(format!(
                    "server `{name}` answered with an error: {}",
                    error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("(no message)")
                )),
                _ => Err(format!(
                    "server `{name}` sent an answer that is not a JSON-RPC result"
                )),
            };
            part_done(m, &mut st, s, g, part)
        }
    }
}

/// Server `s`'s answer to gather `g`; once every server answered, the
/// client's answer.
fn part_done(
    m: &Multi,
    st: &mut MState,
    s: usize,
    g: u64,
    part: Result<Value, String>,
) -> Vec<Out> {
    let Some(gather) = st.gathers.get_mut(&g) else {
        return Vec::new();
    };
    let mut follow = None;
    let part = match (gather.kind, part) {
        (Kind::ToolsList, Ok(result)) => match result.get("tools").and_then(Value::as_array) {
            Some(tools) => {
                gather.tools[s].extend(tools.iter().cloned());
                gather.pages[s] += 1;
                match result.get("nextCursor").and_then(Value::as_str) {
                    Some(cursor) if gather.pages[s] < MAX_PAGES => {
                        follow = Some(cursor.to_string());
                        Ok(Value::Null)
                    }
                    Some(_) => Err(format!(
                        "server `{}` lists more than {MAX_PAGES} pages of tools",
                        m.servers[s].name
                    )),
                    None => Ok(Value::Null),
                }
            }
            None => Err(format!(
                "server `{}` answered tools/list without a `tools` list",
                m.servers[s].name
            )),
        },
        (_, part) => part,
    };
    if let Some(cursor) = follow {
        let sid = st.send_id(s, Route::Part(g));
        return vec![Out::Server(
            s,
            request(&sid, "tools/list", Some(json!({"cursor": cursor}))),
        )];
    }
    gather.parts[s] = Some(part);
    if gather.parts.iter().any(Option::is_none) {
        return Vec::new();
    }
    let Some(gather) = st.gathers.remove(&g) else {
        return Vec::new();
    };
    st.live.remove(&gather.key);
    vec![Out::Client(merged(m, gather).into_bytes())]
}

/// The client's answer to a gathered request.
fn merged(m: &Multi, gather: Gather) -> String {
    let mut results = Vec::new();
    for part in gather.parts.into_iter().flatten() {
        match part {
            Ok(result) => results.push(result),
            Err(why) => {
                log(&why);
                return rpc_error(&gather.id, -32603, &format!("agenra: {why}"));
            }
        }
    }
    match gather.kind {
        Kind::Initialize => {
            let versions: Vec<&str> = results
                .iter()
                .map(|r| {
                    r.get("protocolVersion")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                })
                .collect();
            if versions.iter().any(|v| v.is_empty() || *v != versions[0]) {
                let named: Vec<String> = m
                    .servers
                    .iter()
                    .zip(&versions)
                    .map(|(s, v)| format!("{}: `{v}`", s.name))
                    .collect();
                let why = format!(
                    "the servers answered initialize with different protocol versions ({})",
                    named.join(", ")
                );
                log(&why);
                return rpc_error(&gather.id, -32603, &format!("agenra: {why}"));
            }
            let list_changed = results
                .iter()
                .any(|r| r.pointer("/capabilities/tools/listChanged") == Some(&Value::Bool(true)));
            let instructions: Vec<String> = m
                .servers
                .iter()
                .zip(&results)
                .filter_map(|(s, r)| {
                    let text = r.get("instructions")?.as_str()?;
                    Some(format!(
                        "Server `{}` (tools `{}.*`): {text}",
                        s.name, s.name
                    ))
                })
                .collect();
            let mut result = json!({
                "protocolVersion": versions[0],
                "capabilities": {"tools": {"listChanged": list_changed}},
                "serverInfo": {"name": "agenra-mcp-proxy", "version": env!("CARGO_PKG_VERSION")},
            });
            if !instructions.is_empty() {
                result["instructions"] = json!(instructions.join("\n\n"));
            }
            json!({"jsonrpc": "2.0", "id": gather.id, "result": result}).to_string()
        }
        Kind::ToolsList => {
            let mut tools = Vec::new();
            let mut hidden = 0;
            for (server, listed) in m.servers.iter().zip(gather.tools) {
                for mut tool in listed {
                    let Some(name) = tool.get("name").and_then(Value::as_str) else {
                        continue;
                    };
                    let name = format!("{}.{name}", server.name);
                    if let Some(callable) = &m.proxy.callable {
                        if !callable.contains(&name) {
                            hidden += 1;
                            continue;
                        }
                    }
                    tool["name"] = json!(name);
                    tools.push(tool);
                }
            }
            if hidden > 0 {
                log(&format!(
                    "tools/list: {hidden} tool(s) hidden (the policy grants them never; \
                     --show-all-tools shows them)"
                ));
            }
            json!({"jsonrpc": "2.0", "id": gather.id, "result": {"tools": tools}}).to_string()
        }
    }
}

/// What ends the proxy.
enum End {
    /// Server `s` closed its output.
    ServerGone(usize),
    /// The client closed its input.
    ClientGone,
}

/// Runs the proxy over every server of `servers_path` until one exits (or
/// the client leaves and they all do).
pub fn run_multi(
    policy_path: &Path,
    servers_path: &Path,
    pause: &PauseOptions,
    store: &StoreOptions,
    options: &ProxyOptions,
) -> Result<(), Failed> {
    if pause
        .validate()
        .map_err(|e| fail(format!("mcp-proxy: {e}")))?
        .is_some()
    {
        return Err(fail(
            "mcp-proxy: --on-pause wait is not supported with --servers yet \
             (a PAUSE is answered at once, as --on-pause error does)",
        ));
    }
    if options.cancel_timeout.is_some() {
        return Err(fail(
            "mcp-proxy: --cancel-timeout is not used with --servers \
             (a cancelled call is reported `unknown` at once)",
        ));
    }
    check_name("tenant", &store.tenant)
        .map_err(|e| fail(format!("mcp-proxy: --tenant: {}", e.error)))?;
    check_name("session", &store.session)
        .map_err(|e| fail(format!("mcp-proxy: --session: {}", e.error)))?;
    let specs = load_servers(servers_path).map_err(|e| fail(format!("mcp-proxy: {e}")))?;
    let (policy, _) = load_policy(policy_path, false)?;
    let compiled =
        CompiledPolicy::new(policy).map_err(|e| fail(format!("{}: {e}", policy_path.display())))?;
    let gateway = open_gateway(store.store.as_deref(), compiled.clone(), policy_path)?;
    let shown = store
        .store
        .as_ref()
        .map(|p| agenra_store::redact(&p.display().to_string()))
        .unwrap_or_default();
    let mut proxy = Proxy {
        gateway,
        tenant: store.tenant.clone(),
        session: store.session.clone(),
        policy_hash: String::new(),
        state: Mutex::new(State {
            pending: HashMap::new(),
            waiting: HashMap::new(),
            waiting_keys: HashMap::new(),
            tasks: HashMap::new(),
            seq: 0,
        }),
        server_in: Mutex::new(None),
        wait: None,
        cancel_timeout: DEFAULT_CANCEL_TIMEOUT,
        timers: Timers::default(),
        callable: (!options.show_all_tools).then(|| callable_tools(compiled.policy())),
        child: ChildState::default(),
        client: ClientSide::Stdio,
    };
    let (policy_hash, last) = resume(&proxy, &compiled, &shown)?;
    proxy.policy_hash = policy_hash;
    let n = specs.len();
    let mut children = Vec::new();
    let mut servers = Vec::new();
    let mut outputs = Vec::new();
    for spec in &specs {
        let started = Command::new(&spec.command[0])
            .args(&spec.command[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn();
        let mut child = match started {
            Ok(child) => child,
            Err(e) => {
                // The servers started already end with the proxy.
                let mut started: Vec<(Server, std::process::Child)> =
                    servers.into_iter().zip(children).collect();
                for (_, child) in &mut started {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                return Err(fail(format!(
                    "mcp-proxy: --servers: server `{}`: cannot start `{}`: {e}",
                    spec.name, spec.command[0]
                )));
            }
        };
        let input = child.stdin.take();
        let output = child.stdout.take();
        let state = ChildState::default();
        state.pid.store(child.id(), Ordering::SeqCst);
        servers.push(Server {
            name: spec.name.clone(),
            input: Mutex::new(input),
            child: state,
        });
        outputs.push(output);
        children.push(child);
    }
    let m = Arc::new(Multi {
        proxy,
        servers,
        state: Mutex::new(MState {
            seq: last,
            live: HashMap::new(),
            routes: (0..n).map(|_| HashMap::new()).collect(),
            next_sid: vec![0; n],
            gathers: HashMap::new(),
            next_gather: 0,
        }),
    });
    log(&format!(
        "fronting {n} server(s) in session `{}` of tenant `{}`: {}",
        m.proxy.session,
        m.proxy.tenant,
        specs
            .iter()
            .map(|s| format!("`{}`", s.name))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let stopper = Arc::clone(&m);
    on_signal(move |name, number| {
        log(&format!("{name}: stopping, and ending the servers"));
        stopper
            .proxy
            .child
            .stopped_by
            .store(number, Ordering::SeqCst);
        close_inputs(&stopper);
        for s in &stopper.servers {
            signal_child(&s.child, libc::SIGTERM);
        }
        // One grace period for all of them, then SIGKILL for the rest.
        let deadline = Instant::now() + EXIT_GRACE;
        while Instant::now() < deadline && !stopper.servers.iter().all(|s| reap(&s.child)) {
            std::thread::sleep(Duration::from_millis(20));
        }
        for s in &stopper.servers {
            if !reap(&s.child) {
                signal_child(&s.child, libc::SIGKILL);
            }
        }
        std::process::exit(128 + number);
    })?;

    let (tx, rx) = mpsc::channel();
    for (s, output) in outputs.into_iter().enumerate() {
        let Some(output) = output else {
            let _ = tx.send(End::ServerGone(s));
            continue;
        };
        let reader = Arc::clone(&m);
        let tx = tx.clone();
        std::thread::spawn(move || {
            let peer = format!("server `{}`", reader.servers[s].name);
            each_line(BufReader::new(output), &peer, |text| {
                let outs = from_server_multi(&reader, s, text);
                send(&reader, outs);
                true
            });
            let _ = tx.send(End::ServerGone(s));
        });
    }
    let client = Arc::clone(&m);
    let client_tx = tx.clone();
    std::thread::spawn(move || {
        each_line(std::io::stdin().lock(), "the client", |text| {
            let outs = from_client_multi(&client, text);
            send(&client, outs);
            true
        });
        let _ = client_tx.send(End::ClientGone);
    });
    drop(tx);

    let mut gone = vec![false; n];
    let first = rx.recv().unwrap_or(End::ClientGone);
    let died = match first {
        End::ServerGone(s) => {
            gone[s] = true;
            log(&format!(
                "server `{}` closed its output: ending the proxy and every server",
                m.servers[s].name
            ));
            Some(s)
        }
        End::ClientGone => None,
    };
    if died.is_some() {
        // Fail closed: the session's servers go together, and the client
        // sees the end at once.
        close_client_output();
    }
    close_inputs(&m);
    let statuses = end_children(&m, &mut children);
    if died.is_none() {
        // The client left: what the servers still said is forwarded
        // until they closed their outputs (they have exited).
        let deadline = Instant::now() + EXIT_GRACE;
        while gone.iter().any(|g| !g) {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(End::ServerGone(s)) => gone[s] = true,
                Ok(End::ClientGone) => {}
                Err(_) => break,
            }
        }
        close_client_output();
    }
    let code = |status: &std::io::Result<std::process::ExitStatus>| match status {
        Ok(status) => status.code().map_or(1, |c| u8::try_from(c).unwrap_or(1)),
        Err(_) => 1,
    };
    // A signal's exit code wins (the servers it ended may be seen to die
    // here first).
    let signal = m.proxy.child.stopped_by.load(Ordering::SeqCst);
    if signal != 0 {
        return Err(Failed(u8::try_from(128 + signal).unwrap_or(1)));
    }
    let exit = match died {
        Some(s) => code(&statuses[s]),
        None => statuses.iter().map(code).find(|c| *c != 0).unwrap_or(0),
    };
    if exit == 0 {
        Ok(())
    } else {
        Err(Failed(exit))
    }
}

/// Whether the server has exited (reaping it if so): only for a proxy
/// about to exit, since its `Child` is then never waited for.
fn reap(child: &ChildState) -> bool {
    if child.reaped.load(Ordering::SeqCst) {
        return true;
    }
    let Ok(pid) = libc::pid_t::try_from(child.pid.load(Ordering::SeqCst)) else {
        return true;
    };
    let mut status = 0;
    // SAFETY: waitpid(2) on the pid of our own child, not reaped yet, with
    // a pointer to a local; WNOHANG never blocks.
    let done = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } != 0;
    if done {
        child.reaped.store(true, Ordering::SeqCst);
    }
    done
}

/// Waits for every server once their inputs are closed: SIGTERM after
/// `EXIT_GRACE`, SIGKILL after another; each is marked reaped.
fn end_children(
    m: &Multi,
    children: &mut [std::process::Child],
) -> Vec<std::io::Result<std::process::ExitStatus>> {
    let mut statuses: Vec<Option<std::io::Result<std::process::ExitStatus>>> =
        children.iter().map(|_| None).collect();
    let mut signalled = 0;
    let mut deadline = Instant::now() + EXIT_GRACE;
    loop {
        for (i, child) in children.iter_mut().enumerate() {
            if statuses[i].is_some() {
                continue;
            }
            match child.try_wait() {
                Ok(Some(status)) => {
                    m.servers[i].child.reaped.store(true, Ordering::SeqCst);
                    statuses[i] = Some(Ok(status));
                }
                Ok(None) => {}
                Err(e) => statuses[i] = Some(Err(e)),
            }
        }
        if statuses.iter().all(Option::is_some) {
            break;
        }
        if Instant::now() >= deadline {
            let signal = if signalled == 0 {
                libc::SIGTERM
            } else {
                libc::SIGKILL
            };
            for (i, status) in statuses.iter().enumerate() {
                if status.is_none() {
                    log(&format!(
                        "server `{}` has not exited: sending it {}",
                        m.servers[i].name,
                        if signalled == 0 { "SIGTERM" } else { "SIGKILL" }
                    ));
                    signal_child(&m.servers[i].child, signal);
                }
            }
            if signalled >= 2 {
                for (i, child) in children.iter_mut().enumerate() {
                    if statuses[i].is_none() {
                        statuses[i] = Some(child.wait());
                        m.servers[i].child.reaped.store(true, Ordering::SeqCst);
                    }
                }
                break;
            }
            signalled += 1;
            deadline = Instant::now() + EXIT_GRACE;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    statuses
        .into_iter()
        .map(|s| s.unwrap_or_else(|| Err(std::io::Error::other("not waited for"))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Vec<ServerSpec>, String> {
        let dir = std::env::temp_dir().join(format!("agenra-servers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let path = dir.join(format!(
            "{:x}.json",
            text.len() * 31 + text.bytes().map(usize::from).sum::<usize>()
        ));
        std::fs::write(&path, text).map_err(|e| e.to_string())?;
        let got = load_servers(&path).map_err(|e| e.to_string());
        let _ = std::fs::remove_file(&path);
        got
    }

    #[test]
    fn a_servers_file_is_read_strictly() {
        let ok =
            load(r#"{"servers": {"tests": {"command": ["t"]}, "fs": {"command": ["f", "-x"]}}}"#);
        assert_eq!(
            ok,
            Ok(vec![
                ServerSpec {
                    name: "fs".into(),
                    command: vec!["f".into(), "-x".into()]
                },
                ServerSpec {
                    name: "tests".into(),
                    command: vec!["t".into()]
                },
            ])
        );
        for (text, says) in [
            (r#"{"servers": {}}"#, "names no server"),
            (r#"{"servers": {"a.b": {"command": ["x"]}}}"#, "servers.a.b"),
            (r#"{"servers": {"9a": {"command": ["x"]}}}"#, "a letter"),
            (
                r#"{"servers": {"a": {"command": []}}}"#,
                "servers.a.command",
            ),
            (r#"{"servers": {"a": {"command": [""]}}}"#, "is empty"),
            (
                r#"{"servers": {"a": {"command": ["x"], "env": {}}}}"#,
                "unknown field `env`",
            ),
            (
                r#"{"servers": {"a": {"command": ["x"]}, "a": {"command": ["y"]}}}"#,
                "line 1",
            ),
            (r#"{"server": {}}"#, "unknown field `server`"),
            ("{\"servers\":\n  [1]}", "invalid type"),
            ("{", "line 1, column 1"),
        ] {
            let got = load(text);
            assert!(
                got.as_ref().is_err_and(|e| e.contains(says)),
                "{text}: {got:?} should say {says}"
            );
        }
    }

    #[test]
    fn the_proxys_ids_come_back_from_their_keys() {
        for n in [1u64, 7, 123_456] {
            let key = id_key(&json!(n)).unwrap_or_default();
            assert_eq!(number_of(&key), json!(n));
        }
    }
}
