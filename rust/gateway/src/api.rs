//! Request and response bodies of the HTTP API (`docs/http-api.md`).

use agenra_core::event::{Outcome as Status, TaskScope};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `POST /v1/sessions`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewSession {
    /// The tenant (default `default`).
    #[serde(default)]
    pub tenant: Option<String>,
    /// The session's id (default: one is made up).
    #[serde(default)]
    pub session: Option<String>,
    /// The agent the session serves (recorded; calls must not name another).
    #[serde(default)]
    pub agent: Option<String>,
}

/// A call as the API takes it: an event `call` (`docs/events.md`); its
/// time is the server's clock (a `time` the client sends is recorded).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallIn {
    /// Unique within the session.
    pub id: String,
    /// Recorded, never used to decide: the server's clock gives the call's
    /// time; a time far from it is a 422.
    #[serde(default)]
    pub time: Option<u64>,
    /// The calling agent of the policy (default `main`).
    #[serde(default)]
    pub agent: Option<String>,
    /// The tool's name.
    pub tool: String,
    /// Arguments by parameter name.
    #[serde(default, deserialize_with = "agenra_core::strict::object")]
    pub args: serde_json::Map<String, serde_json::Value>,
    /// Observed lineage per argument.
    #[serde(default, deserialize_with = "agenra_core::strict::lists")]
    pub lineage: BTreeMap<String, Vec<String>>,
    /// Inferred lineage (audit only).
    #[serde(default, deserialize_with = "agenra_core::strict::lists")]
    pub inferred: BTreeMap<String, Vec<String>>,
}

/// `POST /v1/authorize`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Authorize {
    /// The tenant (default `default`).
    #[serde(default)]
    pub tenant: Option<String>,
    /// The session, opened with `POST /v1/sessions`.
    pub session: String,
    /// The call.
    pub call: CallIn,
}

/// `POST /v1/report`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportIn {
    /// The tenant (default `default`).
    #[serde(default)]
    pub tenant: Option<String>,
    /// The session.
    pub session: String,
    /// The admitted call this is the result of.
    pub call: String,
    /// Recorded, never used to decide (the server's clock decides); a
    /// time far from the server's clock is a 422.
    #[serde(default)]
    pub time: Option<u64>,
    /// `succeeded`, `failed` or `unknown`.
    pub status: Status,
    /// The tool's output.
    #[serde(default, deserialize_with = "agenra_core::strict::value")]
    pub output: serde_json::Value,
    /// Resources the result discovered.
    #[serde(default)]
    pub discovered: Vec<String>,
}

/// `POST /v1/tasks`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskIn {
    /// The tenant (default `default`).
    #[serde(default)]
    pub tenant: Option<String>,
    /// The session.
    pub session: String,
    /// Unique within the session, like call ids.
    pub id: String,
    /// Recorded, never used to decide (the server's clock decides); a
    /// time far from the server's clock is a 422.
    #[serde(default)]
    pub time: Option<u64>,
    /// What the user asked.
    pub text: String,
    /// Values for seedable discovered sets.
    #[serde(default, deserialize_with = "agenra_core::strict::lists")]
    pub sets: BTreeMap<String, Vec<String>>,
    /// What the task may use.
    #[serde(default)]
    pub scope: Option<TaskScope>,
}

/// `POST /v1/approvals/{call}/approve` and `/reject`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResolveIn {
    /// The tenant (default `default`).
    #[serde(default)]
    pub tenant: Option<String>,
    /// The session (default: the one session of the tenant where the call
    /// is paused).
    #[serde(default)]
    pub session: Option<String>,
    /// Recorded, never used to decide (the server's clock decides); a
    /// time far from the server's clock is a 422.
    #[serde(default)]
    pub time: Option<u64>,
    /// The digest of the paused call as `GET /v1/approvals` showed it:
    /// required to approve (the approval is bound to exactly that call);
    /// checked when a rejection names it.
    #[serde(default)]
    pub digest: Option<String>,
    /// Why: required to approve, optional to reject; recorded.
    #[serde(default)]
    pub reason: Option<String>,
}

/// `POST /v1/policy`: a policy revision to run from now on.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyIn {
    /// The policy text (`.agr`).
    pub source: String,
    /// A name for it in the audit log (default `api`).
    #[serde(default)]
    pub name: Option<String>,
    /// Under `--require-certified`: run the revision even if it may allow
    /// what the running policy did not (an explicit, recorded admin act).
    #[serde(default)]
    pub allow_widening: bool,
}

/// What the server answers to an event (a call, a result, an approval, a
/// rejection, a task). Also what a retried call gets back.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    /// The tenant.
    pub tenant: String,
    /// The session.
    pub session: String,
    /// `call`, `approve`, `result`, `reject` or `task`.
    pub kind: &'static str,
    /// The call (or task) the event is about.
    pub call: String,
    /// `ALLOW`, `DENY` or `PAUSE` (calls and approvals).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<&'static str>,
    /// The rule or grant that decided.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Why, as a sentence.
    pub reason: String,
    /// The violating path: call or task ids, `context` for what the session
    /// has read (`#N` for another node).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub path: Vec<String>,
    /// Grants whose units were taken.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<String>,
    /// Grants whose units came back.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refunded: Vec<String>,
    /// Units of the serving grant left (ALLOW of a limited grant).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub left: Option<u64>,
    /// The session's policy.
    pub policy_hash: String,
    /// The session's ledger hash after the event.
    pub ledger_hash: String,
    /// The audit record's position (absent on a retried call's answer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit_seq: Option<u64>,
    /// True when the call had already been decided: this is the recorded
    /// answer, and nothing was taken again.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub replayed: bool,
}

/// An error answer: `{"error": "...", "field": "call.time"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ApiError {
    /// The HTTP status (4xx: the request; 5xx: the server).
    #[serde(skip)]
    pub status: u16,
    /// What is wrong.
    pub error: String,
    /// The request field at fault, as a path (`call.args.to`), when one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

impl ApiError {
    /// An error with a status and no field.
    pub fn new(status: u16, error: impl Into<String>) -> ApiError {
        ApiError {
            status,
            error: error.into(),
            field: None,
        }
    }

    /// An error about `field`.
    pub fn field(status: u16, field: &str, error: impl Into<String>) -> ApiError {
        ApiError {
            status,
            error: error.into(),
            field: Some(field.to_string()),
        }
    }
}

/// Parses a JSON body into `T`; the error names the field at fault.
pub fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::field(
            400,
            "body",
            "the body is empty; a JSON object is expected",
        ));
    }
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') && serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok() {
        // serde would take an array for a struct's fields in order.
        return Err(ApiError::field(
            422,
            "body",
            "the body must be a JSON object",
        ));
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let inner = e.inner();
        let mut path = e.path().to_string();
        if path == "." || path == "?" {
            path.clear();
        }
        let message = inner.to_string();
        // "missing field `tool`" names the field inside the path.
        if let Some(rest) = message.strip_prefix("missing field `") {
            if let Some(name) = rest.split('`').next() {
                path = if path.is_empty() {
                    name.to_string()
                } else {
                    format!("{path}.{name}")
                };
            }
        }
        let status = if inner.is_syntax() || inner.is_eof() {
            400
        } else {
            422
        };
        let field = if path.is_empty() {
            "body".to_string()
        } else {
            path
        };
        ApiError::field(status, &field, format!("{field}: {message}"))
    })?;
    de.end().map_err(|e| {
        ApiError::field(
            400,
            "body",
            format!("trailing characters after the JSON object: {e}"),
        )
    })?;
    Ok(value)
}

/// Checks a tenant, session or agent name: 1 to 128 characters from
/// `A-Z a-z 0-9 . _ - : @`.
pub fn check_name(field: &str, name: &str) -> Result<(), ApiError> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-_:@".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(ApiError::field(
            422,
            field,
            format!("{field} must be 1 to 128 characters of A-Z a-z 0-9 . _ - : @, got {name:?}"),
        ))
    }
}

/// Checks the ids and names of an event made from a request
/// (`agenra_core::ident`): a control, bidirectional or invisible character
/// is refused with 422, naming the request field (`call.id`,
/// `call.lineage.body[0]`; `call` and `id` for results, approvals and tasks).
pub fn check_identifiers(event: &agenra_core::Event) -> Result<(), ApiError> {
    use agenra_core::Event;
    let checked = match event {
        Event::Call(c) => c.check_identifiers("call"),
        Event::Result(r) => r.check_identifiers(""),
        Event::Approve(r) | Event::Reject(r) => r.check_identifiers(""),
        Event::Task(t) => t.check_identifiers(""),
    };
    checked.map_err(|e| ApiError::field(422, &e.field, e.to_string()))
}

/// A paused call waiting for a human.
#[derive(Clone, Debug, Serialize)]
pub struct PendingCall {
    /// The tenant.
    pub tenant: String,
    /// The session.
    pub session: String,
    /// The call's id.
    pub call: String,
    /// The call's tool.
    pub tool: Option<String>,
    /// The rule or grant that paused it.
    pub rule: Option<String>,
    /// Why it paused.
    pub reason: String,
    /// The call's time (seconds, the server's clock).
    pub time: u64,
    /// The call's arguments, as the monitor decided on them.
    pub args: serde_json::Value,
    /// The session's policy.
    pub policy_hash: String,
    /// What an approval must name: the SHA-256 of the call as shown here
    /// (tenant, session, call, tool, canonical arguments, policy hash;
    /// [`call_digest`](crate::state::call_digest)).
    pub digest: String,
    /// When the pause expires (seconds): an approval after it is refused
    /// and the call is rejected, its units returned.
    pub expires: u64,
    /// The data path that paused it, from the labelled source to this call
    /// (call ids, `context`), as the decision named it; empty when no flow
    /// paused it (an approval grant). Not part of the digest.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub path: Vec<String>,
}

/// One call of a session, as the approvals page lists the session's recent
/// calls.
#[derive(Clone, Debug, Serialize)]
pub struct RecentCall {
    /// The call's id.
    pub call: String,
    /// Its tool, when the policy declares it.
    pub tool: Option<String>,
    /// The decision it got.
    pub decision: Option<&'static str>,
    /// Where it stands now.
    pub status: Option<agenra_core::graph::Status>,
    /// Its time (seconds).
    pub time: u64,
}

/// `GET /health`.
#[derive(Clone, Debug, Serialize)]
pub struct Health {
    /// `ok`, or `failed` after a store failure (then with status 503).
    pub status: &'static str,
    /// The running policy's hash.
    pub policy_hash: String,
    /// Open sessions.
    pub sessions: usize,
    /// Calls paused for a human.
    pub pending_approvals: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_checked_with_the_request_field() {
        use agenra_core::{Call, Event, Report};
        let e =
            check_identifiers(&Event::Call(Call::new("c4\u{202e}gnp.exe", "t", 1))).unwrap_err();
        assert_eq!((e.status, e.field.as_deref()), (422, Some("call.id")));
        assert!(
            e.error
                .starts_with("call.id contains U+202E (RIGHT-TO-LEFT OVERRIDE) at byte 2"),
            "{e:?}"
        );
        let e = check_identifiers(&Event::Result(Report::succeeded("c\0"))).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("call"));
        assert!(check_identifiers(&Event::Call(Call::new("c1", "t", 1))).is_ok());
    }

    #[test]
    fn errors_name_the_field() {
        let e = parse::<Authorize>(br#"{"session":"s","call":{"id":"c","tool":"t","time":"x"}}"#)
            .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("call.time"));
        assert_eq!(e.status, 422);
        let e = parse::<Authorize>(br#"{"session":"s","call":{"id":"c"}}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("call.tool"));
        let e = parse::<Authorize>(br#"{"session":"s","call":{"id":"c","tool":"t","bogus":1}}"#)
            .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("call.bogus"));
        let e = parse::<Authorize>(br#"{"session":"s","#).unwrap_err();
        assert_eq!((e.status, e.field.as_deref()), (400, Some("body")));
        let e = parse::<Authorize>(
            br#"{"session":"s","call":{"id":"c","tool":"t","args":{"a":1,"a":2}}}"#,
        )
        .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("call.args"), "{e:?}");
        let e =
            parse::<Authorize>(br#"{"session":"s","session":"t","call":{"id":"c","tool":"t"}}"#)
                .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("body"), "{e:?}");
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("tenant", "acme-1").is_ok());
        assert!(check_name("tenant", "").is_err());
        assert!(check_name("tenant", "a/b").is_err());
        assert!(check_name("tenant", &"x".repeat(129)).is_err());
    }
}
