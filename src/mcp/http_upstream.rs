//! `agenra mcp-proxy --upstream http://HOST:PORT/mcp`: the proxy reaches
//! its server over MCP's streamable HTTP transport instead of starting it
//! as a child (docs/mcp-proxy.md, "Streamable HTTP").
//!
//! What the stdio mode writes to the child's input, one message a line, is
//! POSTed here, one message a request (on a thread of its own, so a slow
//! answer holds up nothing else). The server's answer, a JSON body or the
//! events of a `text/event-stream`, comes back to the proxy's main loop as
//! the child's output lines would, and goes through the same
//! [`from_server`] (an answer to a decided call reported before it is
//! forwarded). The server's `Mcp-Session-Id` and the negotiated
//! `MCP-Protocol-Version` are sent with every later request.
//!
//! A request the server does not answer (an HTTP error status, a refused
//! connection, an event stream that ends without the answer) is answered
//! to the client by the proxy with a JSON-RPC error; a `tools/call` among
//! them is reported `unknown` (its units stay spent, its output counts as
//! read): the server may have run it.

use super::*;
use std::io::Read;
use std::sync::mpsc;

/// The server's input when it is reached over HTTP: dropping it (the
/// client is gone) ends the server's session.
pub(super) struct UpstreamIn(pub(super) Arc<Upstream>);

impl Drop for UpstreamIn {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// The largest answer taken from the server (a JSON body or one event):
/// 64 MiB; a larger one ends its request as a failed transport.
const MAX_ANSWER: u64 = 64 << 20;
/// How long a message waits for the `initialize` before it.
const INIT_WAIT: Duration = Duration::from_secs(30);
/// How long connecting to the server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What the requests to the server hand the proxy's main loop.
pub(super) enum Upstreamed {
    /// A message of the server, as the child's output line would be.
    Message(Vec<u8>),
    /// The request with this id got no answer (`why`).
    Failed { id: Value, why: String },
}

/// The server's endpoint and its session.
pub(super) struct Upstream {
    url: String,
    agent: ureq::Agent,
    /// `Mcp-Session-Id` the server gave with its answer to `initialize`.
    session: Mutex<Option<String>>,
    /// The `protocolVersion` of its answer to `initialize`.
    version: Mutex<Option<String>>,
    /// To the main loop; `None` once the proxy's side closed (the loop
    /// ends when the last request in flight is done).
    to_proxy: Mutex<Option<mpsc::Sender<Upstreamed>>>,
    /// An `initialize` is on its way: later messages wait for its answer's
    /// headers (the session id they must carry).
    initializing: (Mutex<bool>, Condvar),
}

/// Errors of `--upstream`.
#[derive(Debug, thiserror::Error)]
pub(super) enum UpstreamError {
    #[error("--upstream {0}: only http:// URLs are taken (no TLS in this build; put a TLS proxy on loopback in front)")]
    NotHttp(String),
    #[error("--upstream and a server command after `--` exclude each other: give one")]
    Both,
}

/// Locks `m`, whatever a panicking thread left behind.
fn held<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Upstream {
    /// The endpoint at `url`, and the receiving end of its messages.
    pub(super) fn new(
        url: &str,
    ) -> Result<(Arc<Upstream>, mpsc::Receiver<Upstreamed>), UpstreamError> {
        url.strip_prefix("http://")
            .filter(|r| !r.is_empty() && !r.starts_with('/'))
            .ok_or_else(|| UpstreamError::NotHttp(url.to_string()))?;
        let (tx, rx) = mpsc::channel();
        let upstream = Upstream {
            url: url.to_string(),
            agent: ureq::AgentBuilder::new()
                .timeout_connect(CONNECT_TIMEOUT)
                .build(),
            session: Mutex::new(None),
            version: Mutex::new(None),
            to_proxy: Mutex::new(Some(tx)),
            initializing: (Mutex::new(false), Condvar::new()),
        };
        Ok((Arc::new(upstream), rx))
    }

    /// POSTs one message (on a thread of its own); false once closed.
    pub(super) fn send(self: &Arc<Self>, line: &[u8]) -> bool {
        let Some(to) = held(&self.to_proxy).clone() else {
            return false;
        };
        let initialize = serde_json::from_slice::<Value>(line)
            .ok()
            .is_some_and(|m| m.get("method").and_then(Value::as_str) == Some("initialize"));
        if initialize {
            *held(&self.initializing.0) = true;
        }
        let me = Arc::clone(self);
        let line = line.to_vec();
        std::thread::Builder::new()
            .name("agenra-mcp-upstream".into())
            .spawn(move || {
                if !initialize {
                    me.after_initialize();
                }
                me.post(&line, &to);
                if initialize {
                    me.initialized();
                }
            })
            .is_ok()
    }

    /// Waits (at most [`INIT_WAIT`]) for an `initialize` on its way.
    fn after_initialize(&self) {
        let (flag, done) = &self.initializing;
        let guard = held(flag);
        let _ = done
            .wait_timeout_while(guard, INIT_WAIT, |busy| *busy)
            .map_err(|e| e.into_inner());
    }

    /// The `initialize` is through (answered or failed).
    fn initialized(&self) {
        *held(&self.initializing.0) = false;
        self.initializing.1.notify_all();
    }

    fn request(&self, method: &str) -> ureq::Request {
        let mut req = self.agent.request(method, &self.url);
        if let Some(s) = held(&self.session).as_deref() {
            req = req.set("Mcp-Session-Id", s);
        }
        if let Some(v) = held(&self.version).as_deref() {
            req = req.set("MCP-Protocol-Version", v);
        }
        req
    }

    /// One message to the server, and what it answers.
    fn post(&self, line: &[u8], to: &mpsc::Sender<Upstreamed>) {
        let message = serde_json::from_slice::<Value>(line).unwrap_or(Value::Null);
        let method = message.get("method").and_then(Value::as_str);
        let initialize = method == Some("initialize");
        // A request (a method and an id) waits for its answer.
        let request_id = method
            .and(message.get("id"))
            .filter(|id| !id.is_null())
            .cloned();
        let fail = |why: String| {
            log(&format!("--upstream {}: {why}", self.url));
            if let Some(id) = &request_id {
                let _ = to.send(Upstreamed::Failed {
                    id: id.clone(),
                    why,
                });
            }
        };
        let resp = match self
            .request("POST")
            .set("Content-Type", "application/json")
            .set("Accept", "application/json, text/event-stream")
            .send_bytes(line)
        {
            Ok(r) => r,
            Err(ureq::Error::Status(code, r)) => {
                let mut body = String::new();
                let _ = r.into_reader().take(300).read_to_string(&mut body);
                return fail(format!(
                    "the server answered HTTP {code} ({})",
                    crate::render::escape(body.trim())
                ));
            }
            Err(e) => return fail(format!("cannot reach the server: {e}")),
        };
        if initialize {
            if let Some(s) = resp.header("mcp-session-id") {
                *held(&self.session) = Some(s.to_string());
            }
            self.initialized();
        }
        let kind = resp
            .header("content-type")
            .unwrap_or("")
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        let key = request_id.as_ref().and_then(id_key);
        let mut answered = false;
        let mut each = |data: Vec<u8>| {
            let data = one_line(data);
            if data.iter().all(u8::is_ascii_whitespace) {
                return;
            }
            if key.is_some() && answers(&data) == key {
                answered = true;
                if initialize {
                    self.negotiated(&data);
                }
            }
            let _ = to.send(Upstreamed::Message(data));
        };
        let reader = resp.into_reader();
        if kind == "text/event-stream" {
            read_events(reader, &mut each);
        } else {
            let mut body = Vec::new();
            match reader.take(MAX_ANSWER + 1).read_to_end(&mut body) {
                Ok(n) if n as u64 > MAX_ANSWER => {
                    return fail(format!("the answer is over {MAX_ANSWER} bytes"));
                }
                Ok(_) => each(body),
                Err(e) => return fail(format!("cannot read the answer: {e}")),
            }
        }
        if key.is_some() && !answered {
            fail("the server's answer to this request did not come (its HTTP answer ended without it)".into());
        }
    }

    /// Keeps the protocol version the server's `initialize` answer gave.
    fn negotiated(&self, data: &[u8]) {
        let version = serde_json::from_slice::<Value>(data)
            .ok()
            .and_then(|m| m["result"]["protocolVersion"].as_str().map(str::to_string))
            .filter(|v| v.len() <= 32 && v.bytes().all(|b| b.is_ascii_graphic()));
        if let Some(v) = version {
            *held(&self.version) = Some(v);
        }
    }

    /// The proxy's side closed (the client is gone): no more messages
    /// go out, the server's session is ended (`DELETE`), and the main loop
    /// ends once the requests in flight are done.
    pub(super) fn close(&self) {
        if held(&self.session).is_some() {
            // Before the main loop can end (and the process with it).
            if let Err(e) = self.request("DELETE").timeout(CONNECT_TIMEOUT).call() {
                log(&format!("--upstream {}: ending the session: {e}", self.url));
            }
        }
        drop(held(&self.to_proxy).take());
    }
}

/// The id key of the response `data` is (none for a request or
/// notification of the server, or what has no id).
fn answers(data: &[u8]) -> Option<String> {
    let message = serde_json::from_slice::<Value>(data)
        .ok()
        .or_else(|| lenient(data))?;
    let obj = message.as_object()?;
    if obj.contains_key("method") {
        return None;
    }
    obj.get("id").and_then(id_key)
}

/// A message as one line: a JSON text spread over lines is re-serialized
/// as it parses exactly; otherwise line breaks become spaces (outside
/// strings they are whitespace, and raw inside a string they are not JSON).
fn one_line(data: Vec<u8>) -> Vec<u8> {
    if !data.contains(&b'\n') && !data.contains(&b'\r') {
        return data;
    }
    match parse_line(&data) {
        Ok(v) => v.to_string().into_bytes(),
        Err(_) => data
            .into_iter()
            .map(|b| if b == b'\n' || b == b'\r' { b' ' } else { b })
            .collect(),
    }
}

/// Reads an event stream, handing the data of each `message` event (its
/// `data:` lines joined with newlines) to `each`, until it ends. An event
/// over [`MAX_ANSWER`] bytes ends the stream.
fn read_events(reader: impl Read, each: &mut impl FnMut(Vec<u8>)) {
    let mut reader = BufReader::new(reader);
    let mut data: Vec<u8> = Vec::new();
    let mut kind = Vec::new();
    let mut has_data = false;
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader).take(MAX_ANSWER).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let text = trim_newline(&line);
        if text.is_empty() {
            if has_data && (kind.is_empty() || kind == b"message") {
                each(std::mem::take(&mut data));
            }
            data.clear();
            kind.clear();
            has_data = false;
            continue;
        }
        if text.starts_with(b":") {
            continue; // a comment (keep-alive)
        }
        let (field, value) = match text.iter().position(|&b| b == b':') {
            Some(at) => {
                let value = &text[at + 1..];
                (&text[..at], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (text, &b""[..]),
        };
        match field {
            b"data" => {
                if has_data {
                    data.push(b'\n');
                }
                data.extend_from_slice(value);
                has_data = true;
                if data.len() as u64 > MAX_ANSWER {
                    log("an event of the server is too large; its stream is ended");
                    return;
                }
            }
            b"event" => kind = value.to_vec(),
            _ => {} // id, retry: not used (no resuming)
        }
    }
    if has_data && (kind.is_empty() || kind == b"message") {
        each(data);
    }
}

/// A request the server did not answer: a `tools/call` among them (or a
/// `tasks/result` or `tasks/cancel` of one) is reported `unknown`, and the
/// client gets a JSON-RPC error for it.
pub(super) fn unanswered(proxy: &Proxy, id: &Value, why: &str) -> Vec<u8> {
    if let Some(key) = id_key(id) {
        let mut st = lock(&proxy.state);
        let call = match st.pending.remove(&key) {
            Some(Inflight::Call(call) | Inflight::Cancelled(call)) => Some(call),
            Some(Inflight::TaskResult(task) | Inflight::TaskCancel(task)) => st.tasks.remove(&task),
            _ => None,
        };
        if let Some(call) = call {
            report_answer(proxy, &call, Outcome::Unknown, Value::Null, why);
            return rpc_error(
                id,
                -32603,
                &format!(
                    "agenra: the MCP server did not answer: {why}; the call may have run \
                     (its outcome is recorded as unknown)"
                ),
            )
            .into_bytes();
        }
    }
    rpc_error(
        id,
        -32603,
        &format!("agenra: the MCP server did not answer: {why}"),
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_read_as_sse_has_them() {
        let stream = b": hi\n\nevent: message\ndata: {\"a\":\ndata: 1}\n\nevent: other\ndata: x\n\ndata: {\"b\":2}\r\n\r\nid: 7\ndata:{\"c\":3}";
        let mut got = Vec::new();
        read_events(&stream[..], &mut |d| {
            got.push(String::from_utf8_lossy(&d).into_owned())
        });
        assert_eq!(got, vec!["{\"a\":\n1}", "{\"b\":2}", "{\"c\":3}"]);
        assert_eq!(one_line(b"{\"a\":\n1}".to_vec()), b"{\"a\":1}".to_vec());
        assert_eq!(
            one_line(b"{\"a\":\"x\ny\"}".to_vec()),
            b"{\"a\":\"x y\"}".to_vec()
        );
    }
}
