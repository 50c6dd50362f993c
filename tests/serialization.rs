//! The compiled policy's encodings: deterministic, decodable, and hashed
//! stably; and the monitor refuses corrupt compiled policies.

use agenra::core::hash::{content_hash, from_cbor, from_json, to_cbor, to_json};
use agenra::{Monitor, Policy};

fn example(name: &str) -> Policy {
    let path = format!("{}/examples/{name}/policy.agr", env!("CARGO_MANIFEST_DIR"));
    let (compiled, _) =
        agenra::policy::load(std::path::Path::new(&path)).expect("example compiles");
    compiled.policy
}

#[test]
fn json_and_cbor_round_trip_to_the_same_policy() {
    for name in ["coding-agent", "email-assistant", "research-agent"] {
        let p = example(name);
        let json = to_json(&p).expect("encodes");
        assert_eq!(from_json::<Policy>(&json).expect("decodes"), p);
        let cbor = to_cbor(&p).expect("encodes");
        assert_eq!(from_cbor::<Policy>(&cbor).expect("decodes"), p);
        // Deterministic: encoding again gives the same bytes.
        assert_eq!(to_cbor(&from_cbor::<Policy>(&cbor).unwrap()).unwrap(), cbor);
    }
}

#[test]
fn the_content_hash_is_stable_across_formatting_and_compilation() {
    let path = format!(
        "{}/examples/coding-agent/policy.agr",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(path).expect("read");
    let a = agenra::compile_policy(&text, "x").expect("compiles");
    // Comments and layout do not change the compiled policy.
    let messy = text.replace("\n\n", "\n// noise\n\n").replace("; ", " ;  ");
    let b = agenra::compile_policy(&messy, "x").expect("compiles");
    assert_eq!(content_hash(&a).unwrap(), content_hash(&b).unwrap());
    // And it is the hash the golden replay files were made with.
    assert_eq!(
        content_hash(&a).unwrap().to_string(),
        "sha256:3e6b905edb0f4bd63e8a69c1a54e16c424d5bccdcd16430e26d0a91b03a869fe"
    );
}

#[test]
fn any_change_changes_the_hash() {
    let mut p = example("email-assistant");
    let before = content_hash(&p).unwrap();
    p.grants[4].quota = agenra::core::policy::Quota::Limited(4);
    assert_ne!(content_hash(&p).unwrap(), before);
}

#[test]
fn corrupt_compiled_policies_are_refused_not_indexed() {
    let mut p = example("research-agent");
    p.grants[0].tool = 99;
    let err = Monitor::new(p).unwrap_err().to_string();
    assert!(err.contains("grants[0].tool"), "{err}");

    let mut p = example("research-agent");
    p.agents[1].parent = Some(1);
    let err = Monitor::new(p).unwrap_err().to_string();
    assert!(err.contains("agents[1].parent"), "{err}");

    let bytes = b"\xa1\x64name\x01";
    assert!(from_cbor::<Policy>(bytes).is_err());
}

#[test]
fn compiled_policies_with_duplicate_names_are_rejected() {
    let base = example("email-assistant");
    let mut dup_tool = base.clone();
    dup_tool.tools.push(dup_tool.tools[0].clone());
    let err = agenra::Monitor::new(dup_tool).unwrap_err().to_string();
    assert!(err.contains("is declared twice"), "{err}");
    let mut dup_param = base.clone();
    let p = dup_param.tools[0].params[0].clone();
    dup_param.tools[0].params.push(p);
    let err = agenra::Monitor::new(dup_param).unwrap_err().to_string();
    assert!(err.contains("parameter"), "{err}");
    let mut dup_agent = base;
    let mut a = dup_agent.agents[0].clone();
    a.parent = Some(0);
    dup_agent.agents.push(a);
    let err = agenra::Monitor::new(dup_agent).unwrap_err().to_string();
    assert!(err.contains("agent `main` is declared twice"), "{err}");
}
