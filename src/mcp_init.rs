//! `agenra mcp-init -- SERVER_CMD...`: writes a starting policy for an MCP
//! server (docs/mcp-proxy.md, "Writing the policy").
//!
//! Starts the server, sends `initialize` and `tools/list` (following
//! `nextCursor`), and writes one `tool` declaration per listed tool from its
//! input schema: `string`, `integer`, `boolean` and `number` properties (and
//! arrays of them) become `string`, `int`, `bool` and `decimal` parameters
//! (`list<...>`), objects with properties become object types
//! `{NAME[?]: TYPE, ...}` (arrays of them `list<{...}>`), optional unless the
//! schema requires them; names the
//! language cannot write bare are quoted (`` `get-tiny-image` ``). What a
//! schema alone cannot tell is left as `// TODO` comments: the output label
//! of a tool that reads outside data, the sink of one that sends data out,
//! the resource parameter to confirm, the parameters the language cannot
//! type (mixed types, objects without declared properties), and the grants. The result passes `agenra check`;
//! it grants nothing, so the proxy admits nothing until grants are written.

use crate::{fail, Failed};
use agenra_policy::write_name;
use serde_json::{json, Map, Value};
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long the server gets to answer each request.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);
/// At most this many `tools/list` pages are followed.
const MAX_PAGES: usize = 100;
/// Parameter names taken for the resource (the argument grants match on),
/// in this order of preference.
const RESOURCE_NAMES: &[&str] = &[
    "path",
    "uri",
    "url",
    "file",
    "filename",
    "file_path",
    "filepath",
    "repo_path",
    "source",
    "target",
    "to",
    "name",
];

/// Runs `agenra mcp-init`: the policy goes to `out`, or standard output.
pub fn run(server: &[String], out: Option<&Path>) -> Result<(), Failed> {
    let (program, args) = server
        .split_first()
        .ok_or_else(|| fail("mcp-init: no server command given (after `--`)"))?;
    let (info, tools) = list_tools(program, args)?;
    let text = policy_text(&info, &tools);
    match out {
        Some(path) => std::fs::write(path, &text)
            .map_err(|e| fail(format!("mcp-init: --out {}: {e}", path.display())))?,
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(text.as_bytes())
                .and_then(|()| stdout.flush())
                .map_err(|e| fail(format!("mcp-init: writing the policy: {e}")))?;
        }
    }
    Ok(())
}

/// The server's `serverInfo` and its tools, asked over stdio.
fn list_tools(program: &str, args: &[String]) -> Result<(Value, Vec<Value>), Failed> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| fail(format!("mcp-init: cannot start `{program}`: {e}")))?;
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(fail("mcp-init: the server's pipes are missing"));
    };
    let (tx, lines) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let result = (|| {
        let mut send = |msg: Value| -> Result<(), Failed> {
            writeln!(stdin, "{msg}")
                .and_then(|()| stdin.flush())
                .map_err(|e| fail(format!("mcp-init: writing to the server: {e}")))
        };
        send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "agenra-mcp-init", "version": env!("CARGO_PKG_VERSION")}}}),
        )?;
        let init = answer(&lines, 1, "initialize")?;
        let info = init.get("serverInfo").cloned().unwrap_or(Value::Null);
        send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        let mut tools = Vec::new();
        let mut cursor: Option<Value> = None;
        for page in 0..MAX_PAGES {
            let id = 2 + page as u64;
            let mut params = Map::new();
            if let Some(c) = cursor.take() {
                params.insert("cursor".into(), c);
            }
            send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params}))?;
            let result = answer(&lines, id, "tools/list")?;
            let Some(listed) = result.get("tools").and_then(Value::as_array) else {
                return Err(fail(format!(
                    "mcp-init: the server's tools/list answer has no `tools` list: {result}"
                )));
            };
            tools.extend(listed.iter().cloned());
            match result.get("nextCursor") {
                Some(c) if !c.is_null() => cursor = Some(c.clone()),
                _ => return Ok((info, tools)),
            }
        }
        Err(fail(format!(
            "mcp-init: the server's tools/list has more than {MAX_PAGES} pages"
        )))
    })();
    // Closing its input asks the server to exit; one that does not is
    // killed.
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return result;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    result
}

/// The `result` of the server's answer with this id (other messages,
/// notifications or logs, are skipped).
fn answer(lines: &Receiver<String>, id: u64, what: &str) -> Result<Value, Failed> {
    let deadline = Instant::now() + ANSWER_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = match lines.recv_timeout(left) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => {
                return Err(fail(format!(
                    "mcp-init: the server did not answer {what} within {} s",
                    ANSWER_TIMEOUT.as_secs()
                )))
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(fail(format!(
                    "mcp-init: the server closed its output before answering {what}"
                )))
            }
        };
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue; // not JSON: a log line on the wrong stream
        };
        if message.get("method").is_some() || message.get("id") != Some(&json!(id)) {
            continue;
        }
        if let Some(error) = message.get("error") {
            return Err(fail(format!(
                "mcp-init: the server answered {what} with an error: {error}"
            )));
        }
        return message.get("result").cloned().ok_or_else(|| {
            fail(format!(
                "mcp-init: the server's answer to {what} has no result: {message}"
            ))
        });
    }
}

/// A parameter's type in the policy language, from its JSON schema; `None`
/// when the language cannot type it (mixed types, objects without declared
/// properties or nested deeper than the language allows, references).
fn param_type(schema: &Value) -> Option<(String, bool)> {
    type_at(schema, 0)
}

/// An object schema's type `{NAME[?]: TYPE, ...}` (fields not in
/// `required`, or nullable, are optional); `depth` objects enclose it.
fn object_type(schema: &Value, depth: usize) -> Option<String> {
    if depth >= agenra_core::object::MAX_DEPTH {
        return None;
    }
    let props = schema.get("properties")?.as_object()?;
    if props.is_empty() {
        return None;
    }
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut fields = Vec::new();
    for (name, prop) in props {
        if name.is_empty() || name.chars().any(agenra_core::ident::is_refused) {
            return None;
        }
        let (ty, nullable) = type_at(prop, depth + 1)?;
        let optional = nullable || !required.contains(&name.as_str());
        fields.push(format!(
            "{}{}: {ty}",
            write_name(name),
            if optional { "?" } else { "" }
        ));
    }
    Some(format!("{{{}}}", fields.join(", ")))
}

fn type_at(schema: &Value, depth: usize) -> Option<(String, bool)> {
    // `"type": ["string", "null"]` is a nullable string.
    let (ty, nullable) = match schema.get("type") {
        Some(Value::String(t)) => (t.as_str(), false),
        Some(Value::Array(ts)) => {
            let named: Vec<&str> = ts.iter().filter_map(Value::as_str).collect();
            let non_null: Vec<&str> = named.iter().copied().filter(|t| *t != "null").collect();
            match non_null.as_slice() {
                [t] => (*t, named.len() > non_null.len()),
                _ => return None,
            }
        }
        _ => return None,
    };
    let scalar = |t: &str| match t {
        "string" => Some("string"),
        "integer" => Some("int"),
        "boolean" => Some("bool"),
        "number" => Some("decimal"),
        _ => None,
    };
    match ty {
        "array" => {
            let items = schema.get("items")?;
            let item = items.get("type")?.as_str()?;
            let inner = match item {
                "object" => object_type(items, depth)?,
                t => scalar(t)?.to_string(),
            };
            Some((format!("list<{inner}>"), nullable))
        }
        "object" => Some((object_type(schema, depth)?, nullable)),
        t => Some((scalar(t)?.to_string(), nullable)),
    }
}

/// One line of text for a comment: control characters dropped, at most
/// 100 characters.
fn comment(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    let clean: String = line
        .chars()
        .filter(|c| !c.is_control() && !agenra_core::ident::is_refused(*c))
        .take(100)
        .collect();
    clean.trim().to_string()
}

/// The policy text for these tools.
fn policy_text(info: &Value, tools: &[Value]) -> String {
    let server = info
        .get("name")
        .and_then(Value::as_str)
        .map(comment)
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "mcp-server".to_string());
    let mut out = String::new();
    let _ = writeln!(
        out,
        "// Written by `agenra mcp-init` from the `tools/list` of `{server}`.\n\
         // It grants nothing yet: write grants (the TODO at the end), declare\n\
         // labels and sinks where the TODOs say, then `agenra check` it.\n\
         policy {};\n",
        json!(format!("{server}-policy"))
    );
    let mut seen = std::collections::HashSet::new();
    let mut names = Vec::new();
    for tool in tools {
        let Some(name) = tool.get("name").and_then(Value::as_str) else {
            let _ = writeln!(out, "// TODO: a listed tool without a name was left out\n");
            continue;
        };
        if name.is_empty() || name.chars().any(agenra_core::ident::is_refused) {
            let _ = writeln!(
                out,
                "// TODO: the tool {} has a name the policy language refuses; left out\n",
                json!(comment(name))
            );
            continue;
        }
        if !seen.insert(name.to_string()) {
            continue; // listed twice
        }
        names.push(name.to_string());
        tool_text(&mut out, name, tool);
    }
    let _ = writeln!(
        out,
        "// TODO: grants. Each tool above is denied until a grant admits it, e.g.\n\
         //   grant NAME: TOOL on prefix \"/allowed/\" quota unlimited;\n\
         //   grant NAME: TOOL quota 5 approval;   // a human approves each call"
    );
    for name in names {
        let _ = writeln!(out, "//   {}", write_name(&name));
    }
    out
}

/// One `tool` declaration, with its TODOs.
fn tool_text(out: &mut String, name: &str, tool: &Value) {
    if let Some(d) = tool.get("description").and_then(Value::as_str) {
        let d = comment(d);
        if !d.is_empty() {
            let _ = writeln!(out, "// {d}");
        }
    }
    let schema = tool.get("inputSchema").cloned().unwrap_or(Value::Null);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut params = Vec::new();
    let mut todos = Vec::new();
    let mut strings = Vec::new();
    if schema.get("properties").is_none() {
        todos.push(
            "the server's input schema lists no properties: declare the parameters its \
             calls pass (an undeclared argument denies the call)"
                .to_string(),
        );
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (param, prop) in props {
            if param.is_empty() || param.chars().any(agenra_core::ident::is_refused) {
                todos.push(format!(
                    "parameter {} has a name the policy language refuses; a call passing it is denied",
                    json!(comment(param))
                ));
                continue;
            }
            let is_required = required.contains(&param.as_str());
            match param_type(prop) {
                Some((ty, nullable)) => {
                    let optional = !is_required || nullable;
                    if ty == "string" && is_required && !nullable {
                        strings.push(param.clone());
                    }
                    params.push(format!(
                        "{}{}: {ty}",
                        write_name(param),
                        if optional { "?" } else { "" }
                    ));
                }
                None => todos.push(format!(
                    "parameter {} ({}) cannot be declared (mixed types, or an object without \
                     declared properties); a call passing it is denied{}",
                    write_name(param),
                    comment(&prop.get("type").map(Value::to_string).unwrap_or_default()),
                    if is_required {
                        ", and the schema requires it"
                    } else {
                        ""
                    }
                )),
            }
        }
    }
    let resource = RESOURCE_NAMES
        .iter()
        .find_map(|r| strings.iter().find(|s| s.as_str() == *r))
        .or_else(|| strings.first());
    let _ = writeln!(out, "tool {}({}) {{", write_name(name), params.join(", "));
    if let Some(r) = resource {
        let _ = writeln!(
            out,
            "  resource {};  // TODO: check that grants should match on this argument",
            write_name(r)
        );
    } else {
        let _ = writeln!(
            out,
            "  // TODO: no required string parameter: grants cannot match a resource"
        );
    }
    for todo in todos {
        let _ = writeln!(out, "  // TODO: {todo}");
    }
    let _ = writeln!(
        out,
        "  // TODO: if it returns outside data: output <LEVEL, {{CATEGORIES}}, untrusted>;\n  \
         // TODO: if it sends data out: sink SINK;  (declare `sinks SINK;` above)\n}}\n"
    );
}

#[cfg(test)]
mod tests {
    use super::{param_type, policy_text};
    use serde_json::json;

    #[test]
    fn schemas_become_parameter_types() {
        let t = |v| param_type(&v).map(|(t, n)| format!("{t}{}", if n { "?" } else { "" }));
        assert_eq!(t(json!({"type": "string"})).as_deref(), Some("string"));
        assert_eq!(t(json!({"type": "integer"})).as_deref(), Some("int"));
        assert_eq!(t(json!({"type": "number"})).as_deref(), Some("decimal"));
        assert_eq!(
            t(json!({"type": ["boolean", "null"]})).as_deref(),
            Some("bool?")
        );
        assert_eq!(
            t(json!({"type": "array", "items": {"type": "string"}})).as_deref(),
            Some("list<string>")
        );
        assert_eq!(
            t(json!({"type": "array", "items": {"type": "object"}})),
            None,
            "an object without properties cannot be typed"
        );
        assert_eq!(t(json!({"type": "object"})), None);
        assert_eq!(
            t(json!({"type": "array", "items": {"type": "object",
                "properties": {"oldText": {"type": "string"}, "newText": {"type": "string"}},
                "required": ["oldText", "newText"], "additionalProperties": false}}))
            .as_deref(),
            Some("list<{newText: string, oldText: string}>")
        );
        assert_eq!(
            t(json!({"type": ["object", "null"], "properties": {
                "mode": {"type": "string"}, "dry-run": {"type": ["boolean", "null"]},
                "inner": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}},
                "required": ["mode", "dry-run"]}))
            .as_deref(),
            Some("{`dry-run`?: bool, inner?: {n: int}, mode: string}?")
        );
        let mut deep = json!({"type": "string"});
        for _ in 0..20 {
            deep = json!({"type": "object", "properties": {"x": deep}});
        }
        assert_eq!(t(deep), None, "deeper than the language allows");
        assert_eq!(t(json!({"anyOf": []})), None);
    }

    #[test]
    fn names_with_a_dash_are_quoted_and_the_text_parses() {
        let tools = vec![
            json!({"name": "get-tiny-image", "description": "An image.\nSecond line",
                   "inputSchema": {"type": "object", "properties": {
                       "file-path": {"type": "string"}, "size": {"type": "integer"},
                       "edits": {"type": "array", "items": {"type": "object"}}},
                       "required": ["file-path", "edits"]}}),
            json!({"name": "echo", "inputSchema": {"type": "object"}}),
        ];
        let text = policy_text(&json!({"name": "everything"}), &tools);
        assert!(
            text.contains("tool `get-tiny-image`(`file-path`: string, size?: int) {"),
            "{text}"
        );
        assert!(text.contains("resource `file-path`;"), "{text}");
        assert!(text.contains("TODO: parameter edits"), "{text}");
        let edit = vec![
            json!({"name": "edit_file", "inputSchema": {"type": "object", "properties": {
            "path": {"type": "string"},
            "edits": {"type": "array", "items": {"type": "object", "properties": {
                "oldText": {"type": "string"}, "newText": {"type": "string"}},
                "required": ["oldText", "newText"], "additionalProperties": false}},
            "dryRun": {"type": "boolean", "default": false}},
            "required": ["path", "edits"]}}),
        ];
        let text = policy_text(&json!({"name": "fs"}), &edit);
        assert!(
            text.contains(
                "tool edit_file(dryRun?: bool, edits: list<{newText: string, oldText: string}>, path: string) {"
            ),
            "{text}"
        );
        assert!(!text.contains("TODO: parameter"), "{text}");
        agenra_policy::compile(&text, "init").unwrap_or_else(|e| panic!("{e:?}\n{text}"));
        agenra_policy::compile(&text, "init").unwrap_or_else(|e| panic!("{e:?}\n{text}"));
    }
}
