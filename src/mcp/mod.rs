//! `agenra mcp-proxy`: a stdio MCP proxy (docs/mcp-proxy.md).
//!
//! The agent (the MCP client) talks to the proxy on its standard input and
//! output; the proxy spawns the real MCP server and talks to it on the
//! child's standard input and output. Messages are newline-delimited
//! JSON-RPC 2.0. Every client line is parsed exactly (strict UTF-8, no lone
//! surrogates, finite numbers, no duplicated keys, bounded nesting) or
//! refused (`-32700`/`-32600`, never forwarded): a line the proxy cannot
//! read might be a `tools/call` a lenient server would run. Parsed lines are
//! forwarded unchanged, except `tools/call` requests: each is decided by
//! the monitor first. An ALLOWed call goes to the server as the proxy
//! parsed it (re-serialized, so the server parses what was decided) and its
//! response, matched by the id's JSON-RPC value, is reported to the monitor
//! (a JSON-RPC error or `isError: true` is a failed call: its unit comes
//! back; an answer that is not a tools/call result, or that the proxy cannot
//! parse exactly, is `unknown`); a DENY or PAUSE is answered by the proxy
//! itself with a tool result carrying `isError: true`. Every client request
//! is tracked by id until answered: one reusing a live id is refused.
//!
//! A PAUSE is answered the same way by default (`--on-pause error`). With
//! `--on-pause wait` the paused call is held instead: the proxy serves the
//! approval endpoints of the HTTP API (`agenra_gateway::desk`) for its
//! session, and the call is settled by an approval (re-checked, then
//! forwarded like an ALLOW, or denied), a rejection, the client's
//! cancellation or the timeout. Nothing blocks while a call waits: its
//! answer is sent whenever it is settled.
//!
//! The session is the gateway's (`agenra_gateway::Gateway`), the same
//! code `agenra serve` runs: with `--store` every decision, result,
//! approval and rejection is a hash-chained audit record, durable before
//! the proxy acts on it, and a proxy restarted on the same store resumes
//! the same session (`--tenant`, `--session`) with what it had spent.
//! Without `--store` the log is in memory and ends with the proxy.
//!
//! Threads: one reads the client and writes the server, the main thread
//! reads the server and writes the client, one timer thread serves every
//! deadline (paused calls, cancelled calls), one waits for signals; in
//! wait mode an HTTP runtime settles calls too. Malformed lines never
//! stop the proxy: they are logged to standard error, and refused (from the
//! client) or forwarded (from the server).

use crate::{fail, load_policy, Failed};
use agenra_core::event::Outcome;
use agenra_core::graph::Status;
use agenra_core::{CompiledPolicy, Verdict};
use agenra_gateway::api::{
    check_name, ApiError, Authorize, CallIn, Outcome as ApiOutcome, ReportIn, ResolveIn,
};
use agenra_gateway::desk::{ApprovalDesk, DeskServer};
use agenra_gateway::http::Health;
use agenra_gateway::state::{Pending, PendingCall};
use agenra_gateway::Gateway;
use agenra_store::{Log, MemoryBackend};
use serde_json::{json, Map, Value};
use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

mod client;
mod http_listen;
mod http_upstream;
mod lifecycle;
mod multi;
mod options;
mod run;
mod server;
mod settle;
mod state;

use client::*;
use lifecycle::*;
use options::*;
use server::*;
use settle::*;
use state::*;

pub use multi::run_multi;
pub use options::{OnPause, PauseOptions, ProxyOptions, StoreOptions};
pub use run::run;
use run::*;

/// The tenant of the proxy's session by default (`--tenant`).
pub const DEFAULT_TENANT: &str = "default";
/// The proxy's session by default (`--session`).
pub const DEFAULT_SESSION: &str = "mcp-proxy";
/// The longest request id (as JSON text) the proxy takes: the call id
/// `mcp-N:ID` must fit the monitor's 1,024 bytes.
pub const MAX_ID_BYTES: usize = 960;
/// How long a cancelled call's answer is waited for by default
/// (`--cancel-timeout`).
pub const DEFAULT_CANCEL_TIMEOUT: u64 = 30;
/// How many fresh call ids the proxy tries when the ones it makes up are
/// taken already (another proxy driving the same session).
const ID_ATTEMPTS: u32 = 16;
/// How long a paused call waits by default (`--pause-timeout`).
pub const DEFAULT_PAUSE_TIMEOUT: u64 = 300;

#[cfg(test)]
mod tests {
    use super::{id_key, lenient, parse_line};
    use serde_json::{json, Value};

    #[test]
    fn ids_are_compared_as_values() {
        let key = |s: &str| id_key(&serde_json::from_str::<Value>(s).unwrap());
        assert_eq!(key("1"), key("1.0"));
        assert_eq!(key("1"), key("1e0"));
        assert_eq!(key("-0"), key("0"));
        assert_ne!(key("1"), key("\"1\""));
        assert_ne!(key("1"), key("2"));
        assert_eq!(key("\"a\""), key(r#""\u0061""#));
        // Beyond 2^53 as a JavaScript peer sees them.
        assert_eq!(key("18446744073709551615"), key("18446744073709552000"));
        for not_an_id in ["null", "true", "[1]", "{}"] {
            assert_eq!(key(not_an_id), None, "{not_an_id}");
        }
    }

    #[test]
    fn what_a_lenient_peer_reads_is_refused() {
        for (line, code) in [
            (&br#"{"a":"\ud800"}"#[..], -32700),
            (br#"{"a":"\udc00"}"#, -32700),
            (b"{\"a\":\"\xff\"}", -32700),
            (b"{\"a\":\"\xc0\xaf\"}", -32700),
            (br#"{"a":1e400}"#, -32700),
            (br#"{"a":NaN}"#, -32700),
            (br#"{"a":1} {}"#, -32700),
            (br#"{"a":1,"a":2}"#, -32600),
            (br#"{"b":{"a":1,"a":2}}"#, -32600),
        ] {
            let got = parse_line(line).map_err(|(c, _)| c);
            assert_eq!(got, Err(code), "{}", String::from_utf8_lossy(line));
        }
        let deep = |d: usize| format!("{}1{}", "[".repeat(d), "]".repeat(d));
        assert!(parse_line(deep(127).as_bytes()).is_ok());
        assert_eq!(
            parse_line(deep(128).as_bytes()).map_err(|(c, _)| c),
            Err(-32700)
        );
        assert_eq!(
            parse_line(br#"{"a":"\ud83d\ude00"}"#).ok(),
            Some(json!({"a": "\u{1f600}"}))
        );
    }

    #[test]
    fn a_lenient_reading_replaces_only_what_is_broken() {
        let read = |line: &[u8]| lenient(line);
        assert_eq!(
            read(br#"{"id":3,"t":"\ud800 x"}"#),
            Some(json!({"id": 3, "t": "\u{fffd} x"}))
        );
        assert_eq!(
            read(br#"{"id":3,"t":"\udc00\ud83d\ude00\ud83d"}"#),
            Some(json!({"id": 3, "t": "\u{fffd}\u{1f600}\u{fffd}"}))
        );
        assert_eq!(read(b"{\"id\":\"\xff\"}"), Some(json!({"id": "\u{fffd}"})));
        // An escaped backslash before `ud800` is text, not an escape.
        assert_eq!(read(br#"{"t":"\\ud800"}"#), Some(json!({"t": "\\ud800"})));
        assert_eq!(read(br#"{"id":1,"n":NaN}"#), None);
    }
}
