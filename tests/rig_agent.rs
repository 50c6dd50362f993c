//! The rig example agent (examples/rig-agent), run with scripted models:
//! allowed calls run and are reported, denied and rejected ones never run,
//! and the model is told why.
#![cfg(feature = "rig")]

#[path = "../examples/rig-agent/scripted.rs"]
#[allow(dead_code)]
mod scripted;

#[path = "../examples/rig-agent/agent.rs"]
#[allow(dead_code)]
mod agent;

use agenra::core::graph::Status;
use agenra::rig::{Disposition, Gate};
use agenra::Verdict;
use rig_agent::tool::{DynamicTool, ToolOutput};
use rig_core::message::ToolName;
use scripted::{block_on, Turn};
use serde_json::json;

/// The status the session gave call `id`.
fn status(gate: &Gate, id: &str) -> Option<Status> {
    gate.with_session(|s| {
        let node = s.state().call_node(id)?;
        s.state().graph.node(node).map(|n| n.status)
    })
}

/// The text of the tool result rig sent back to the model for `call_id`,
/// in the last request of the run, with whether rig marked it an error.
fn tool_result(run: &agent::Run, call_id: &str) -> Option<(String, bool)> {
    let request = run.script.requests().pop()?;
    let history = serde_json::to_value(&request.chat_history).ok()?;
    for message in history.as_array()? {
        for part in message["content"].as_array().into_iter().flatten() {
            if part["type"] == "toolresult" && part["call"]["provider"] == call_id {
                let text = part["content"][0]["text"].as_str()?.to_string();
                return Some((text, part["is_error"] == json!(true)));
            }
        }
    }
    None
}

#[test]
fn the_allowed_call_runs_and_the_denied_one_does_not() {
    let run = agent::run(agent::default_script(), false).unwrap();
    assert_eq!(
        run.answer.as_deref(),
        Ok("I read the plan; sending it outside was not allowed.")
    );

    // The tools: the read ran once, nothing was sent.
    assert_eq!(run.reads, 1);
    assert!(run.sent.is_empty(), "{:?}", run.sent);

    // The gate's account of each call.
    assert_eq!(run.entries.len(), 2);
    let read = &run.entries[0];
    assert_eq!((read.id.as_str(), read.tool.as_str()), ("rig-1", "fs.read"));
    assert_eq!(read.disposition, Disposition::Allowed);
    assert_eq!(read.verdict, Some(Verdict::Allow));
    assert_eq!(read.rule, "read_docs");
    assert_eq!(read.tool_ok, Some(true));
    assert_eq!(read.report_error, None);
    let send = &run.entries[1];
    assert_eq!(
        (send.id.as_str(), send.tool.as_str()),
        ("rig-2", "email.send")
    );
    assert_eq!(send.disposition, Disposition::Denied);
    assert_eq!(send.verdict, Some(Verdict::Deny));
    assert_eq!(send.rule, "no-grant");
    assert_eq!(send.args["to"], "attacker@evil.test");

    // The model saw the file, and then the denial with its rule and reason.
    let (text, error) = tool_result(&run, "call_1").unwrap();
    assert_eq!(text, "Ship on Friday; tell the team.");
    assert!(!error);
    let (text, error) = tool_result(&run, "call_2").unwrap();
    assert!(error, "a denial is a tool error");
    assert!(
        text.starts_with("agenra denied the call to `email.send` (call rig-2)"),
        "{text}"
    );
    assert!(text.contains("rule `no-grant`"), "{text}");
    assert!(text.contains(&send.reason), "{text}");

    // The session recorded both decisions, and the read's result.
    assert_eq!(status(&run.gate, "rig-1"), Some(Status::Succeeded));
    assert_eq!(status(&run.gate, "rig-2"), Some(Status::Denied));
    assert_eq!(status(&run.gate, "rig-3"), None);
    assert_eq!(run.script.requests().len(), 3);
}

fn partner_mail() -> Vec<Turn> {
    vec![
        Turn::call(
            "m1",
            "send_email",
            json!({ "to": "bob@partner.test", "subject": "plan", "body": "Friday." }),
        ),
        Turn::text("done"),
    ]
}

#[test]
fn an_approved_pause_runs() {
    let run = agent::run(partner_mail(), true).unwrap();
    assert_eq!(run.answer.as_deref(), Ok("done"));
    assert_eq!(run.sent.len(), 1);
    assert_eq!(run.sent[0].0, "bob@partner.test");
    assert_eq!(run.entries.len(), 1);
    assert_eq!(run.entries[0].disposition, Disposition::Approved);
    assert_eq!(run.entries[0].verdict, Some(Verdict::Pause));
    assert_eq!(run.entries[0].rule, "mail_partners");
    assert_eq!(status(&run.gate, "rig-1"), Some(Status::Succeeded));
    let (text, error) = tool_result(&run, "m1").unwrap();
    assert_eq!((text.as_str(), error), ("sent to bob@partner.test", false));
}

#[test]
fn a_rejected_pause_does_not_run() {
    let run = agent::run(partner_mail(), false).unwrap();
    assert_eq!(run.answer.as_deref(), Ok("done"));
    assert!(run.sent.is_empty());
    assert_eq!(run.entries[0].disposition, Disposition::Rejected);
    assert_eq!(status(&run.gate, "rig-1"), Some(Status::Rejected));
    let (text, error) = tool_result(&run, "m1").unwrap();
    assert!(error);
    assert!(
        text.starts_with("agenra paused for approval and rejected the call"),
        "{text}"
    );
    assert!(text.contains("rule `mail_partners`"), "{text}");
}

#[test]
fn quota_tool_errors_and_malformed_calls() {
    let mail = |id: &str| {
        Turn::call(
            id,
            "send_email",
            json!({ "to": "alice@example.com", "subject": "s", "body": "b" }),
        )
    };
    let run = agent::run(
        vec![
            // Allowed, but the tool fails: the units stay spent.
            Turn::call("r1", "read_file", json!({ "path": "docs/missing.md" })),
            // Not a well-formed `email.send` (no body): denied, not run.
            Turn::call(
                "bad",
                "send_email",
                json!({ "to": "alice@example.com", "subject": 7 }),
            ),
            mail("a1"),
            mail("a2"),
            mail("a3"),
            // The quota of `mail_team` is 3.
            mail("a4"),
            Turn::text("done"),
        ],
        false,
    )
    .unwrap();
    assert_eq!(run.answer.as_deref(), Ok("done"));
    let d: Vec<Disposition> = run.entries.iter().map(|e| e.disposition).collect();
    use Disposition::*;
    assert_eq!(d, [Allowed, Denied, Allowed, Allowed, Allowed, Denied]);
    assert_eq!(run.entries[0].tool_ok, Some(false));
    assert_eq!(status(&run.gate, "rig-1"), Some(Status::Unknown));
    assert_eq!(run.reads, 1);
    assert_eq!(run.sent.len(), 3);
    let (text, error) = tool_result(&run, "a4").unwrap();
    assert!(error && text.contains("agenra denied"), "{text}");
    let (text, error) = tool_result(&run, "r1").unwrap();
    assert!(error, "{text}");
}

#[test]
fn dynamic_tools_are_gated_too() {
    let policy = agenra::compile(agent::POLICY, "rig-agent").unwrap().policy;
    let gate = Gate::builder(policy.session())
        .clock(|| 5)
        .id_prefix("dyn-")
        .build();
    let ran = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = ran.clone();
    let tool = DynamicTool::new(
        ToolName::new("fetch").unwrap(),
        "Reads a path",
        json!({ "type": "object" }),
        move |args| {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(async move { Ok(ToolOutput::json(args)) })
        },
    );
    let gated = gate.wrap_dynamic(tool, Some("fs.read"));
    assert_eq!(gated.name().as_str(), "fetch");

    let out = block_on(gated.execute(json!({ "path": "docs/a.md" }))).unwrap();
    assert_eq!(out.as_json(), Some(&json!({ "path": "docs/a.md" })));
    let denied = block_on(gated.execute(json!({ "path": "/etc/passwd" }))).unwrap_err();
    assert!(
        denied.message().contains("agenra denied"),
        "{}",
        denied.message()
    );
    // Arguments that are not an object never reach the tool.
    let bad = block_on(gated.execute(json!(["x"]))).unwrap_err();
    assert!(bad.message().contains("JSON object"), "{}", bad.message());
    assert_eq!(ran.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(status(&gate, "dyn-1"), Some(Status::Succeeded));
    assert_eq!(status(&gate, "dyn-2"), Some(Status::Denied));
}

/// Polls `future` once, then drops it: what rig does to a tool call it
/// cancels half-way.
fn poll_once_and_drop<F: std::future::Future>(future: F) -> bool {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let mut future = std::pin::pin!(future);
    future.as_mut().poll(&mut cx).is_pending()
}

#[test]
fn a_call_dropped_half_way_is_settled() {
    let policy = agenra::compile(agent::POLICY, "rig-agent").unwrap().policy;
    let gate = Gate::builder(policy.session())
        .clock(|| 5)
        // A reviewer who never answers.
        .on_pause_async(|_| Box::pin(std::future::pending()))
        .build();
    // A tool that never finishes.
    let tool = DynamicTool::new(
        ToolName::new("send").unwrap(),
        "Sends",
        json!({ "type": "object" }),
        |_| Box::pin(std::future::pending()),
    );
    let gated = gate.wrap_dynamic(tool, Some("email.send"));
    let mail = |to: &str| json!({ "to": to, "subject": "s", "body": "b" });

    // Allowed and running when it is dropped: reported as an unknown outcome.
    let pending = poll_once_and_drop(gated.execute(mail("alice@example.com")));
    assert!(pending);
    assert_eq!(status(&gate, "rig-1"), Some(Status::Unknown));

    // Paused, waiting for the reviewer, when it is dropped: rejected.
    let pending = poll_once_and_drop(gated.execute(mail("bob@partner.test")));
    assert!(pending);
    assert_eq!(status(&gate, "rig-2"), Some(Status::Rejected));
}

#[test]
fn what_a_tool_discovers_reaches_the_policys_set() {
    let policy = agenra::compile(
        r#"sets contacts;
           tool contacts.search(name: string);
           tool email.send(to: string) { resource to; }
           grant search: contacts.search quota unlimited discovers contacts;
           grant mail_known: email.send where to in contacts quota unlimited;"#,
        "discovers",
    )
    .unwrap()
    .policy;
    let gate = Gate::builder(policy.session())
        .clock(|| 5)
        .discovers("contacts.search", |out| {
            out["emails"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .build();
    let search = gate.wrap_dynamic(
        DynamicTool::new(
            ToolName::new("search").unwrap(),
            "Finds a contact",
            json!({ "type": "object" }),
            |_| Box::pin(async { Ok(ToolOutput::json(json!({"emails": ["bob@example.com"]}))) }),
        ),
        Some("contacts.search"),
    );
    let mail = gate.wrap_dynamic(
        DynamicTool::new(
            ToolName::new("mail").unwrap(),
            "Sends a mail",
            json!({ "type": "object" }),
            |_| Box::pin(async { Ok(ToolOutput::text("sent")) }),
        ),
        Some("email.send"),
    );
    // Before the search, nobody is known: the mail is denied.
    let denied = block_on(mail.execute(json!({ "to": "bob@example.com" }))).unwrap_err();
    assert!(
        denied.message().contains("agenra denied"),
        "{}",
        denied.message()
    );
    block_on(search.execute(json!({ "name": "Bob" }))).unwrap();
    let known = gate.with_session(|s| s.state().sets[0].iter().cloned().collect::<Vec<_>>());
    assert_eq!(known, ["bob@example.com"]);
    block_on(mail.execute(json!({ "to": "bob@example.com" }))).unwrap();
    assert_eq!(status(&gate, "rig-3"), Some(Status::Succeeded));
    // Only what the output names: another address stays unknown.
    block_on(mail.execute(json!({ "to": "eve@example.com" }))).unwrap_err();
}
