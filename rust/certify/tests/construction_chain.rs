//! The by-construction classes are proved (Lean `ConstructionOk`) for
//! delegation chains of at most four agents; `recognise` checks that side
//! condition instead of certifying on the class's name.

use agenra_certify::{certify, classes, recognise::recognise, Verdict};

/// `main` → a1 → … → a(depth-1): the last agent's chain has `depth` agents.
fn policy(depth: usize, quota: u32) -> agenra_core::Policy {
    let mut text = String::from("tool notes.read(id: string) { resource id; }\n");
    let mut parent = "main".to_string();
    for i in 1..depth {
        text.push_str(&format!("agent a{i} from {parent};\n"));
        parent = format!("a{i}");
    }
    // Every agent on the chain needs a grant for the call to be admitted.
    text.push_str(&format!("grant g0: notes.read quota {quota};\n"));
    for i in 1..depth {
        text.push_str(&format!("grant g{i}: notes.read quota 1 agent a{i};\n"));
    }
    agenra_policy::compile(&text, "p")
        .expect("the test policy compiles")
        .policy
}

#[test]
fn a_quota_increase_is_a_construction_up_to_four_agents_only() {
    for (depth, constructed) in [(4, true), (5, false)] {
        let (old, new) = (policy(depth, 1), policy(depth, 2));
        let abs = classes::enumerate(&old, &new).expect("the abstraction");
        let r = recognise(&old, &new, &abs);
        assert_eq!(r.is_ok(), constructed, "depth {depth}: {r:?}");
        if let Err(why) = r {
            assert!(why.contains("delegation chain of 5 agents"), "{why}");
        }
        let report = certify(&old, &new);
        let method = report.method.clone().unwrap_or_default();
        if constructed {
            assert_eq!(report.verdict, Verdict::Certified, "{:?}", report.reasons);
            assert!(method.starts_with("by construction"), "{method}");
        } else {
            // Beyond the proved shape it is never certified by construction.
            assert!(!method.starts_with("by construction"), "{method}");
            assert_ne!(report.verdict, Verdict::Certified, "{:?}", report.reasons);
        }
    }
}
