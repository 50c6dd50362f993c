//! Policy revisions in memory (finding 7 of the perimeter issue: every
//! accepted revision stayed in memory for good). A revision is freed once
//! it is not the running one and no session uses it; one a session still
//! uses stays until then, and a restart recovers every session.

use agenra_core::CompiledPolicy;
use agenra_gateway::api::NewSession;
use agenra_gateway::Gateway;
use agenra_store::Log;

fn policy(quota: u32) -> (agenra_core::Policy, String) {
    let text = format!(
        "tool pay.send(to: string) {{ resource to; }}\ngrant pay: pay.send quota {quota};\n"
    );
    (agenra_policy::compile(&text, "p").unwrap().policy, text)
}

#[test]
fn revisions_no_session_uses_are_freed() {
    let dir = std::env::temp_dir().join(format!("agenra-revisions-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let store = dir.join("store.redb");
    let (p, _) = policy(1);
    let gw = Gateway::open(
        Log::open_redb(&store).unwrap(),
        CompiledPolicy::new(p).unwrap(),
        "p1",
        false,
    )
    .unwrap();
    assert_eq!(gw.policies_held(), 1);
    // A session under revision 1 keeps it alive.
    let req = NewSession {
        tenant: None,
        session: Some("s1".into()),
        agent: None,
    };
    gw.create_session(req.tenant, req.session, req.agent)
        .unwrap()
        .wait()
        .unwrap();
    for q in 2..=6 {
        let (p, _) = policy(q);
        gw.reload(p, "rev", "admin:ops", false)
            .unwrap()
            .wait()
            .unwrap();
    }
    // Revision 1 (session s1) and 6 (running); 2 to 5 are freed.
    assert_eq!(gw.policies_held(), 2);
    gw.create_session(None, Some("s6".into()), None)
        .unwrap()
        .wait()
        .unwrap();
    drop(gw);

    // Recovery rebuilds both sessions, each under its own revision.
    let (p, _) = policy(6);
    let gw = Gateway::open(
        Log::open_redb(&store).unwrap(),
        CompiledPolicy::new(p).unwrap(),
        "p6",
        false,
    )
    .unwrap();
    assert_eq!(gw.session_count(), 2);
    assert_eq!(gw.policies_held(), 2);
    let s1 = gw.session_view(None, "s1").unwrap();
    let s6 = gw.session_view(None, "s6").unwrap();
    assert_eq!(s1.ledger["pay"], Some(1));
    assert_eq!(s6.ledger["pay"], Some(6));
    drop(gw);
    let _ = std::fs::remove_dir_all(&dir);
}
