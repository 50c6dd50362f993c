//! Lines from the server: which call an answer settles, and how.

use super::*;

/// A line from the server: a response to a forwarded `tools/call` is
/// reported to the monitor (durably, before the caller forwards the line).
///
/// The client reads the line with its own parser, so a line the proxy
/// cannot parse exactly is still an answer it may act on: it is read again
/// leniently (invalid UTF-8 and lone surrogates replaced) to find which
/// call it answers, and that call is reported `unknown` (units kept, its
/// output label merged); when not even that finds its id, every call in
/// flight is reported `unknown`.
pub(super) fn from_server(proxy: &Proxy, line: &[u8]) -> Option<Vec<u8>> {
    let (message, exact) = match parse_line(line) {
        // A bare CR splits the line for a client reading universal newlines.
        Ok(m) => (m, !line.contains(&b'\r')),
        Err((_, why)) => {
            log(&format!(
                "server sent a line the proxy cannot parse exactly ({why}); forwarded"
            ));
            match lenient(line) {
                Some(m) => (m, false),
                None => {
                    // Other requests stay in flight: their ids stay taken.
                    let mut st = lock(&proxy.state);
                    let mut calls = Vec::new();
                    let mut tasks = Vec::new();
                    st.pending.retain(|_, f| match f {
                        Inflight::Call(call) | Inflight::Cancelled(call) => {
                            calls.push(std::mem::take(call));
                            false
                        }
                        // It may be the answer to a task's result, too.
                        Inflight::TaskResult(task) => {
                            tasks.push(std::mem::take(task));
                            false
                        }
                        _ => true,
                    });
                    for task in tasks {
                        if let Some(call) = st.tasks.remove(&task) {
                            calls.push(call);
                        }
                    }
                    calls.sort_by_key(|c| call_number(c));
                    for call in calls {
                        report_answer(proxy, &call, Outcome::Unknown, Value::Null, &why);
                    }
                    return None;
                }
            }
        }
    };
    match &message {
        // A batch of responses: whatever the client makes of it, the calls
        // it answers are reported `unknown`.
        Value::Array(items) => {
            for item in items {
                server_message(proxy, item, false);
            }
            None
        }
        other => server_message(proxy, other, exact),
    }
}

/// A message from the server (`exact`: parsed as the client parses it).
/// `Some`: the line to forward instead (a `tools/list` answer showing only
/// the tools the session may call).
pub(super) fn server_message(proxy: &Proxy, message: &Value, exact: bool) -> Option<Vec<u8>> {
    let obj = message.as_object()?;
    if obj.contains_key("method") {
        return None; // a request or notification from the server
    }
    let key = obj.get("id").and_then(id_key)?;
    let mut st = lock(&proxy.state);
    let call_id = match st.pending.remove(&key)? {
        Inflight::Call(call) => call,
        Inflight::Cancelled(call) => {
            report_answer(
                proxy,
                &call,
                Outcome::Unknown,
                Value::Null,
                "cancelled by the client while running (whatever the server answers)",
            );
            return None;
        }
        Inflight::TaskResult(task) => {
            let call = st.tasks.remove(&task)?;
            let (status, output, why) = if exact {
                classify(obj)
            } else {
                (Outcome::Unknown, Value::Null, UNPARSEABLE)
            };
            // An error to `tasks/result` may be about the task (expired,
            // unknown), not the tool: the call may have run.
            let (status, why) = match (status, obj.get("error")) {
                (Outcome::Failed, Some(_)) => (
                    Outcome::Unknown,
                    "the server answered the task's result with a JSON-RPC error",
                ),
                (status, _) => (status, why),
            };
            report_answer(proxy, &call, status, output, why);
            return None;
        }
        Inflight::TaskCancel(task) => {
            if let Some(call) = st.tasks.remove(&task) {
                report_answer(
                    proxy,
                    &call,
                    Outcome::Unknown,
                    Value::Null,
                    "its task was cancelled by the client",
                );
            }
            return None;
        }
        Inflight::ToolsList => return exact.then(|| visible_tools(proxy, message)).flatten(),
        Inflight::Abandoned | Inflight::Other => return None,
    };
    if exact {
        // A task handle (MCP 2025-11-25): the call runs on as a task; its
        // result comes with the client's `tasks/result`.
        if let Some(task) = task_handle(obj) {
            log(&format!(
                "call {call_id} runs as task `{task}`; its result is reported when the \
                 client fetches it (tasks/result)"
            ));
            st.tasks.insert(task, call_id);
            return None;
        }
    }
    let (status, output, why) = if exact {
        classify(obj)
    } else {
        (Outcome::Unknown, Value::Null, UNPARSEABLE)
    };
    report_answer(proxy, &call_id, status, output, why);
    drop(st);
    None
}

pub(super) const UNPARSEABLE: &str = "the server's answer cannot be parsed exactly";

/// The task id of a task handle (`{"result": {"task": {"taskId": ...}}}`,
/// MCP 2025-11-25's `CreateTaskResult`).
pub(super) fn task_handle(obj: &Map<String, Value>) -> Option<String> {
    let result = obj.get("result")?.as_object()?;
    if result.contains_key("content") {
        return None;
    }
    let id = result.get("task")?.get("taskId")?.as_str()?;
    (!id.is_empty() && id.len() <= MAX_ID_BYTES).then(|| id.to_string())
}

/// What an answer to a `tools/call` (or its task's `tasks/result`) reports.
pub(super) fn classify(obj: &Map<String, Value>) -> (Outcome, Value, &'static str) {
    match (obj.get("result"), obj.get("error")) {
        (Some(Value::Object(result)), None) => {
            let content = matches!(result.get("content"), Some(Value::Array(_)));
            match result.get("isError") {
                _ if !content => (
                    Outcome::Unknown,
                    Value::Null,
                    "the server's answer is not a tools/call result (no `content` list)",
                ),
                None | Some(Value::Bool(false)) => {
                    (Outcome::Succeeded, Value::Object(result.clone()), "")
                }
                Some(Value::Bool(true)) => (Outcome::Failed, Value::Null, ""),
                Some(_) => (
                    Outcome::Unknown,
                    Value::Null,
                    "the server's answer has an `isError` that is not a boolean",
                ),
            }
        }
        (None, Some(Value::Object(_))) => (Outcome::Failed, Value::Null, ""),
        _ => (
            Outcome::Unknown,
            Value::Null,
            "the server's answer is not a JSON-RPC result or error",
        ),
    }
}

/// A `tools/list` answer showing only the tools the session may call;
/// `None` (forwarded unchanged) when it lists no tools.
pub(super) fn visible_tools(proxy: &Proxy, message: &Value) -> Option<Vec<u8>> {
    let callable = proxy.callable.as_ref()?;
    let mut message = message.clone();
    let tools = message
        .get_mut("result")?
        .get_mut("tools")?
        .as_array_mut()?;
    let before = tools.len();
    tools.retain(|t| {
        t.get("name")
            .and_then(Value::as_str)
            .is_some_and(|n| callable.contains(n))
    });
    if tools.len() == before {
        return None; // nothing hidden: forwarded byte for byte
    }
    {
        log(&format!(
            "tools/list: {} of {before} tool(s) hidden (the policy grants them never; \
             --show-all-tools shows them)",
            before - tools.len()
        ));
    }
    Some(message.to_string().into_bytes())
}

/// Reports the result of `call` (`why` says why an answer was not taken).
pub(super) fn report_answer(proxy: &Proxy, call: &str, status: Outcome, output: Value, why: &str) {
    if status == Outcome::Unknown {
        log(&format!(
            "call {call}: {why}; reported `unknown` (its units stay spent, its output \
             counts as read)"
        ));
    }
    if let Err(e) = proxy.report(call, status, output) {
        log(&format!(
            "call {call}: cannot report its result: {}",
            e.error
        ));
    }
}

/// A line read leniently, only to find which call it answers: invalid
/// UTF-8 and lone surrogate escapes become U+FFFD.
pub(super) fn lenient(line: &[u8]) -> Option<Value> {
    let text = String::from_utf8_lossy(line);
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if !in_string {
            in_string = c == '"';
            out.push(c);
            continue;
        }
        match c {
            '"' => {
                in_string = false;
                out.push(c);
            }
            '\\' => match chars.next() {
                Some('u') => {
                    let hex: String = chars.by_ref().take(4).collect();
                    let unit = u16::from_str_radix(&hex, 16).ok()?;
                    if (0xD800..0xDC00).contains(&unit) {
                        // A high surrogate: kept only with its low one.
                        let mut rest = chars.clone();
                        let low = (rest.next() == Some('\\') && rest.next() == Some('u'))
                            .then(|| rest.by_ref().take(4).collect::<String>())
                            .and_then(|h| u16::from_str_radix(&h, 16).ok())
                            .filter(|l| (0xDC00..0xE000).contains(l));
                        match low {
                            Some(low) => {
                                out.push_str(&format!("\\u{unit:04x}\\u{low:04x}"));
                                chars = rest;
                            }
                            None => out.push_str("\\ufffd"),
                        }
                    } else if (0xDC00..0xE000).contains(&unit) {
                        out.push_str("\\ufffd");
                    } else {
                        out.push_str("\\u");
                        out.push_str(&hex);
                    }
                }
                Some(e) => {
                    out.push('\\');
                    out.push(e);
                }
                None => out.push('\\'),
            },
            c => out.push(c),
        }
    }
    serde_json::from_str(&out).ok()
}

/// A `tools/call` answer with `isError: true` and one text item.
pub(super) fn tool_error(id: &Value, text: &str) -> String {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": {"content": [{"type": "text", "text": text}], "isError": true},
    })
    .to_string()
}

/// A JSON-RPC error response.
pub(super) fn rpc_error(id: &Value, code: i64, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string()
}
