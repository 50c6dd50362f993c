//! The guard around tool functions: the tool runs only when allowed, its
//! result goes back to the session, a PAUSE goes to the approval callback.

use agenra::{compile, Admitted, CompiledPolicy, Guard, Guarded, TypedCall, Verdict};
use agenra_core::ledger::SessionLedger;
use agenra_core::policy::Quota;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

const POLICY: &str = r#"
    facts paid;
    tool email.send(to: string) { resource to; }
    tool pay(amount: int) { fact paid when output.ok == true; }
    grant mail: email.send on glob "*@corp.com" quota 2;
    grant big: pay quota 1 approval;
"#;

fn policy() -> CompiledPolicy {
    compile(POLICY, "guard").expect("policy compiles").policy
}

fn left(ledger: &SessionLedger, policy: &CompiledPolicy, grant: &str) -> Quota {
    let g = policy
        .policy()
        .grants
        .iter()
        .position(|g| g.name == grant)
        .expect("grant");
    ledger.remaining(g).expect("grant")
}

/// Runs a future to completion without any runtime (the guard needs none).
fn block_on<F: Future>(f: F) -> F::Output {
    struct Noop;
    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    let waker = Waker::from(Arc::new(Noop));
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

#[test]
fn a_denied_tool_never_runs_and_an_allowed_one_reports_back() {
    let policy = policy();
    let send = policy.tool("email.send").expect("tool");
    let to = policy.param(send, "to").expect("param");
    let mut session = policy.session();
    let mut ran = 0;
    let out = Guard::new(
        &mut session,
        TypedCall::new(send, "c1", 1).arg(to, "evil@attacker.example"),
    )
    .run(|| {
        ran += 1;
        Ok::<_, String>(())
    })
    .expect("decided");
    assert!(matches!(out, Guarded::Denied(ref d) if d.verdict == Verdict::Deny));
    assert_eq!(ran, 0);

    let out = Guard::new(
        &mut session,
        TypedCall::new(send, "c2", 2).arg(to, "bob@corp.com"),
    )
    .run(|| {
        ran += 1;
        Ok::<_, String>("sent")
    })
    .expect("decided");
    assert!(matches!(out, Guarded::Ran(Ok("sent"))));
    assert_eq!(ran, 1);
    // The result was reported: the call is no longer running.
    assert!(session.approve("c2").is_err());
    assert_eq!(
        left(&session.state().ledger, &policy, "mail"),
        Quota::Limited(1)
    );
}

#[test]
fn errors_keep_units_spent_unless_declared_without_effect() {
    let policy = policy();
    let send = policy.tool("email.send").expect("tool");
    let to = policy.param(send, "to").expect("param");
    let mut session = policy.session();
    let call = |id: &str, t| TypedCall::new(send, id, t).arg(to, "bob@corp.com");
    let out = Guard::new(&mut session, call("c1", 1))
        .run(|| Err::<(), _>("timeout"))
        .expect("decided");
    assert!(matches!(out, Guarded::Ran(Err("timeout"))));
    // Unknown outcome: the unit stays spent.
    assert_eq!(
        left(&session.state().ledger, &policy, "mail"),
        Quota::Limited(1)
    );
    let out = Guard::new(&mut session, call("c2", 2))
        .errors_refund()
        .run(|| Err::<(), _>("refused"))
        .expect("decided");
    assert!(matches!(out, Guarded::Ran(Err("refused"))));
    // Failed: the unit came back.
    assert_eq!(
        left(&session.state().ledger, &policy, "mail"),
        Quota::Limited(1)
    );
}

#[test]
fn a_pause_goes_to_the_approval_callback_sync_and_async() {
    let policy = policy();
    let pay = policy.tool("pay").expect("tool");
    let amount = policy.param(pay, "amount").expect("param");
    let mut session = policy.session();
    let mut asked = 0;
    let out = Guard::new(&mut session, TypedCall::new(pay, "p1", 1).arg(amount, 10))
        .on_pause(|d, session| {
            asked += 1;
            assert_eq!(d.verdict, Verdict::Pause);
            assert_eq!(
                session.reason_text(d),
                "grant `big` requires a human approval"
            );
            false
        })
        .run(|| -> Result<(), String> { panic!("a rejected call must not run") })
        .expect("decided");
    assert!(matches!(out, Guarded::Rejected(_)));
    assert_eq!(asked, 1);
    // Rejected: the reserved unit came back.
    assert_eq!(
        left(&session.state().ledger, &policy, "big"),
        Quota::Limited(1)
    );

    let out = block_on(
        Guard::new(&mut session, TypedCall::new(pay, "p2", 2).arg(amount, 10))
            .on_pause(|_, _| true)
            .run_async(|| async { Ok::<_, String>(serde_json::json!({"ok": true})) }),
    )
    .expect("decided");
    assert!(matches!(out, Guarded::Ran(Ok(_))));
    assert_eq!(
        left(&session.state().ledger, &policy, "big"),
        Quota::Limited(0)
    );
}

/// The two-step guard for shared sessions: admit (the session is released),
/// run the tool elsewhere, then finish the ticket.
#[test]
fn admit_then_finish_releases_the_session_while_the_tool_runs() {
    let policy = policy();
    let send = policy.tool("email.send").expect("tool");
    let to = policy.param(send, "to").expect("param");
    let session = std::sync::Mutex::new(policy.session());
    let call = TypedCall::new(send, "c1", 1).arg(to, "bob@corp.com");
    let admitted = Guard::new(&mut session.lock().expect("lock"), call)
        .admit()
        .expect("decided");
    let Admitted::Go(ticket) = admitted else {
        panic!("allowed: {admitted:?}")
    };
    assert_eq!(ticket.call(), "c1");
    // The tool runs without the lock; another call is decided meanwhile.
    let other = TypedCall::new(send, "c2", 2).arg(to, "eve@evil.example");
    let denied = Guard::new(&mut session.lock().expect("lock"), other)
        .admit()
        .expect("decided");
    assert!(matches!(denied, Admitted::Denied(_)));
    let result: Result<&str, String> = Ok("sent");
    let mut s = session.lock().expect("lock");
    assert_eq!(
        s.state().call_status("c1"),
        Some(agenra_core::graph::Status::Running)
    );
    ticket.finish(&mut s, &result).expect("reported");
    assert_eq!(
        s.state().call_status("c1"),
        Some(agenra_core::graph::Status::Succeeded)
    );
}
