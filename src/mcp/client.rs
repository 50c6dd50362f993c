//! Lines from the client: exact parsing, request ids, and the decision of
//! each `tools/call`.

use super::*;

/// A `tools/call` request from the client: its id, tool name and arguments.
pub(super) struct ToolCall<'a> {
    pub(super) id: &'a Value,
    pub(super) name: &'a str,
    pub(super) arguments: Map<String, Value>,
}

/// Recognizes a `tools/call` request (a notification, without an id, is
/// not one: there is nobody to answer). `Err` holds why a `tools/call`
/// request is malformed.
pub(super) fn tool_call(message: &Value) -> Option<Result<ToolCall<'_>, String>> {
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

/// What becomes of a line from the client.
pub(super) enum Action {
    /// The proxy answers it itself and does not forward it.
    Answer(String),
    /// Not forwarded, not answered (a `tools/call` notification; a call now
    /// waiting for approval, answered once settled; a cancellation of one).
    Drop,
    /// Forwarded as the client sent it.
    Forward,
    /// Forwarded as the proxy parsed it (re-serialized): what the server
    /// parses is then what was decided, byte for byte.
    ForwardParsed(Vec<u8>),
}

/// Parses a line of JSON as the proxy decides on it: well-formed UTF-8 (no
/// invalid or overlong sequences), no lone surrogate in an escape, numbers
/// that are finite `f64`s (`1e400`, `NaN`, `Infinity` are not JSON numbers
/// here), no key twice in an object, and at most serde_json's 128 levels of
/// nesting. `Err`: the JSON-RPC error code (`-32700` for what is not JSON by
/// these rules, `-32600` for a duplicated key) and why.
pub(super) fn parse_line(line: &[u8]) -> Result<Value, (i64, String)> {
    match serde_json::from_slice::<agenra_core::strict::StrictValue>(line) {
        Ok(v) => Ok(v.0),
        Err(e) if e.classify() == serde_json::error::Category::Data => {
            Err((-32600, format!("ambiguous message: {e}")))
        }
        Err(e) => Err((-32700, format!("parse error: {e}"))),
    }
}

/// A JSON-RPC id as the peers compare it: strings by their text, numbers by
/// their value as a double (`1`, `1.0` and `1e0` are one id, as they are to
/// a JavaScript peer, which answers `1.0` as `1`); `None` for anything else
/// (`null`, booleans, arrays, objects are no request ids).
pub(super) fn id_key(id: &Value) -> Option<String> {
    match id {
        Value::String(s) => Some(format!("s{s}")),
        Value::Number(n) => {
            let f = n.as_f64()?;
            // -0 is 0.
            let f = if f == 0.0 { 0.0 } else { f };
            Some(format!("n{f:?}"))
        }
        _ => None,
    }
}

/// The JSON-RPC error for a client line the proxy cannot parse exactly
/// (never forwarded), under its id when a lenient reading finds one (a
/// duplicated key), logged; both modes answer with it.
pub(super) fn refuse_unparsed(line: &[u8], code: i64, why: &str) -> String {
    let id = serde_json::from_slice::<Value>(line)
        .ok()
        .and_then(|m| m.get("id").cloned())
        .filter(|id| id_key(id).is_some())
        .unwrap_or(Value::Null);
    log(&format!(
        "client sent a line the proxy cannot parse exactly ({why}); refused, not forwarded"
    ));
    rpc_error(&id, code, &format!("agenra: {why}"))
}

/// A line from the client: parsed as the proxy decides on it (a line it
/// cannot parse is refused, since it might hold a `tools/call` a more
/// lenient server would run), then forwarded, answered or dropped.
pub(super) fn from_client(proxy: &Arc<Proxy>, line: &[u8]) -> Action {
    let message = match parse_line(line) {
        Ok(m) => m,
        Err((code, why)) => return Action::Answer(refuse_unparsed(line, code, &why)),
    };
    // A Python server reads lines with universal newlines, so a bare CR
    // inside a line would split it there; a re-serialized line has none.
    let as_sent = || {
        if line.contains(&b'\r') {
            Action::ForwardParsed(message.to_string().into_bytes())
        } else {
            Action::Forward
        }
    };
    // A batch would carry its tools/call past the monitor: refuse it whole
    // (MCP since 2025-06-18 has no batches), and one reusing a live id.
    if let Value::Array(items) = &message {
        if items
            .iter()
            .any(|m| m.get("method").and_then(Value::as_str) == Some("tools/call"))
        {
            log("client sent a batch with a tools/call; refused, not forwarded");
            return Action::Answer(rpc_error(
                &Value::Null,
                -32600,
                "agenra: a batch may not contain tools/call: send each call alone",
            ));
        }
        let st = lock(&proxy.state);
        if items
            .iter()
            .filter_map(|m| m.get("id").and_then(id_key))
            .any(|key| st.live(&key))
        {
            log("client sent a batch reusing the id of a request in flight; refused");
            return Action::Answer(rpc_error(
                &Value::Null,
                -32600,
                "agenra: a batch reuses the id of a request still in flight",
            ));
        }
        return as_sent();
    }
    let Some(method) = message.get("method") else {
        // A response to a server's request, or not a message at all.
        return as_sent();
    };
    let is_call = method.as_str() == Some("tools/call");
    let id = match message.get("id") {
        None | Some(Value::Null) => {
            // A tools/call notification has nobody to answer: dropped,
            // never run.
            if is_call {
                log("client sent tools/call as a notification (no id); dropped");
                return Action::Drop;
            }
            // The client gives up on a call waiting for approval: it is
            // rejected, and (as MCP asks of a cancelled request) not
            // answered. The server never saw the call, so the notification
            // stops here.
            if let Some(call) = cancelled_waiting(&proxy.state, &message) {
                log(&format!(
                    "call {call} cancelled by the client while waiting"
                ));
                let by = By::proxy("cancelled by the client");
                let _ = settle(proxy, &call, Settle::Reject(Why::Cancelled), &by);
                return Action::Drop;
            }
            // The client gives up on a running call: the notification goes
            // on to the server (which may stop it), and the call's outcome
            // is `unknown` whatever the server answers (a cancelled call
            // may have run in part; the client ignores the answer), or when
            // nothing comes within `--cancel-timeout`.
            if let Some(key) = cancelled_running(&proxy.state, &message) {
                proxy.timers.add(
                    Duration::from_secs(proxy.cancel_timeout),
                    Timer::Cancel(key),
                );
            }
            return as_sent();
        }
        Some(id) => id,
    };
    let Some(key) = id_key(id) else {
        log("client sent a request whose id is not a string or a number; refused");
        return Action::Answer(rpc_error(
            &Value::Null,
            -32600,
            "agenra: a request id must be a string or a number",
        ));
    };
    // The call id `mcp-N:ID` must fit the monitor's 1,024 bytes: a longer
    // id is refused (any request, so the rule is one), never forwarded.
    let shown_id = id.to_string();
    if shown_id.len() > MAX_ID_BYTES {
        log(&format!(
            "client sent a request whose id is {} bytes long (at most {MAX_ID_BYTES}); refused",
            shown_id.len()
        ));
        return Action::Answer(rpc_error(
            id,
            -32600,
            &format!(
                "agenra: a request id may be at most {MAX_ID_BYTES} bytes of JSON \
                 (this one is {})",
                shown_id.len()
            ),
        ));
    }
    let mut st = lock(&proxy.state);
    // A request reusing the id of one in flight would make its answer look
    // like the other's (a `ping`'s `{}` taken for a call's result).
    if st.live(&key) {
        log(&format!(
            "client reused the id {id} of a request still in flight; refused"
        ));
        return Action::Answer(rpc_error(
            id,
            -32600,
            "agenra: a request with this id is still in flight",
        ));
    }
    if !is_call {
        let task = || {
            message
                .get("params")
                .and_then(|p| p.get("taskId"))
                .and_then(Value::as_str)
                .filter(|t| st.tasks.contains_key(*t))
                .map(str::to_string)
        };
        let inflight = match method.as_str() {
            Some("tools/list") if proxy.callable.is_some() => Inflight::ToolsList,
            Some("tasks/result") => task().map_or(Inflight::Other, Inflight::TaskResult),
            Some("tasks/cancel") => task().map_or(Inflight::Other, Inflight::TaskCancel),
            _ => Inflight::Other,
        };
        st.pending.insert(key, inflight);
        return as_sent();
    }
    let call = match tool_call(&message) {
        Some(Ok(call)) => call,
        Some(Err(why)) => {
            log(&format!("malformed tools/call: {why}"));
            return Action::Answer(rpc_error(id, -32602, &format!("agenra: {why}")));
        }
        None => return Action::Drop, // not reached: checked above
    };
    let forward = message.to_string().into_bytes();
    let (call_id, decision) = match decide(proxy, &mut st.seq, call.id, call.name, &call.arguments)
    {
        Ok(decided) => decided,
        Err(answer) => return Action::Answer(answer),
    };
    let rule = decision.rule.clone().unwrap_or_else(|| "?".into());
    let reason = decision.reason.clone();
    let verdict = decision.decision;
    match verdict {
        Some(v) if v == Verdict::Allow.as_str() => {
            st.pending.insert(key, Inflight::Call(call_id));
            Action::ForwardParsed(forward)
        }
        Some(v) if v == Verdict::Pause.as_str() && proxy.wait.is_some() => {
            let timeout = proxy.wait.unwrap_or(DEFAULT_PAUSE_TIMEOUT);
            log(&format!(
                "PAUSE {} by `{rule}`: {reason}; call {call_id} waits for approval \
                 (POST /v1/approvals/{call_id}/approve or /reject) for {timeout} s",
                call.name
            ));
            let seq = st.seq;
            st.waiting_keys.insert(key.clone(), call_id.clone());
            st.waiting.insert(
                call_id.clone(),
                Waiting {
                    seq,
                    id: call.id.clone(),
                    key,
                    line: forward,
                    tool: call.name.to_string(),
                    rule,
                    reason,
                },
            );
            drop(st);
            // One timer thread serves every deadline.
            proxy
                .timers
                .add(Duration::from_secs(timeout), Timer::Pause(call_id, timeout));
            Action::Drop
        }
        Some(v) if v == Verdict::Pause.as_str() => {
            log(&format!("PAUSE {} by `{rule}`: {reason}", call.name));
            // Error mode: nobody approves through the proxy, the units go back.
            let by = By::proxy("--on-pause error: nobody approves through the proxy");
            if let Err(e) = proxy.resolve(&call_id, &by, false) {
                log(&format!(
                    "call {call_id}: cannot withdraw the paused call: {}",
                    e.error
                ));
            }
            Action::Answer(tool_error(
                call.id,
                &format!(
                    "agenra: PAUSE by rule `{rule}`: {reason}; this call needs a human's approval, \
                     which this MCP proxy does not wait for (--on-pause error), so it was not run"
                ),
            ))
        }
        _ if rule == "well-formed" && reason == format!("unknown tool `{}`", call.name) => {
            // A tool the policy does not declare: the JSON-RPC error MCP
            // gives for an unknown tool (as the server would answer it).
            log(&format!("DENY {} by `{rule}`: {reason}", call.name));
            Action::Answer(rpc_error(
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
            Action::Answer(tool_error(
                call.id,
                &format!("agenra: DENY by rule `{rule}`: {reason}"),
            ))
        }
    }
}

/// The call id of the waiting call a `notifications/cancelled` names.
pub(super) fn cancelled_waiting(state: &Mutex<State>, message: &Value) -> Option<String> {
    if message.get("method").and_then(Value::as_str) != Some("notifications/cancelled") {
        return None;
    }
    let request = id_key(message.get("params")?.get("requestId")?)?;
    lock(state).waiting_keys.get(&request).cloned()
}

/// The id key of the running call a `notifications/cancelled` names, now
/// marked cancelled.
pub(super) fn cancelled_running(state: &Mutex<State>, message: &Value) -> Option<String> {
    if message.get("method").and_then(Value::as_str) != Some("notifications/cancelled") {
        return None;
    }
    let request = id_key(message.get("params")?.get("requestId")?)?;
    let mut st = lock(state);
    let entry = st.pending.get_mut(&request)?;
    let Inflight::Call(call) = entry else {
        return None;
    };
    log(&format!(
        "call {call} cancelled by the client while running; its outcome will be `unknown`"
    ));
    *entry = Inflight::Cancelled(std::mem::take(call));
    Some(request)
}

/// Decides the call `name(arguments)` with JSON-RPC id `id` under a fresh
/// call id `mcp-N:ID`, N past every call of the session (a resumed one
/// included; `seq` is the last N used). An id another proxy on the same
/// session took already is answered with its record (`replayed`) or
/// refused (409): the proxy then takes the next N, never that answer.
/// `Err`: the tool error to answer the client with (nothing was decided).
pub(super) fn decide(
    proxy: &Proxy,
    seq: &mut u64,
    id: &Value,
    name: &str,
    arguments: &Map<String, Value>,
) -> Result<(String, ApiOutcome), String> {
    let mut attempts = 0;
    loop {
        *seq += 1;
        let call_id = format!("mcp-{}:{}", seq, id);
        let taken = match proxy.authorize(&call_id, name, arguments.clone()) {
            Ok(d) if !d.replayed => return Ok((call_id, d)),
            Ok(_) => String::from("it was decided already"),
            Err(e) if e.status == 409 && e.field.as_deref() == Some("call.id") => e.error,
            Err(e) => {
                log(&format!("call {call_id} ({name}): {}", e.error));
                return Err(tool_error(
                    id,
                    &format!(
                        "agenra: the monitor could not decide this call: {}",
                        e.error
                    ),
                ));
            }
        };
        attempts += 1;
        log(&format!(
            "call id {call_id} is taken in session `{}` ({taken}); trying the next one",
            proxy.session
        ));
        if attempts >= ID_ATTEMPTS {
            return Err(tool_error(
                id,
                "agenra: the monitor could not decide this call: no free call id \
                 (is another proxy driving this session?)",
            ));
        }
    }
}
