//! Compiled policies from arbitrary JSON or CBOR: decoding and validation
//! never panic, and a policy that validates starts a session and decides a
//! call.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let decoded = match std::str::from_utf8(data) {
        Ok(text) => agenra_core::hash::from_json::<agenra_core::Policy>(text).ok(),
        Err(_) => agenra_core::hash::from_cbor::<agenra_core::Policy>(data).ok(),
    };
    let Some(policy) = decoded else {
        return;
    };
    let tool = policy.tools.first().map(|t| t.name.clone());
    if let Ok(mut m) = agenra_core::Monitor::new(policy) {
        if let Some(tool) = tool {
            let call = serde_json::json!({"kind":"call","id":"c","time":1,"tool":tool});
            if let Ok(e) = serde_json::from_value::<agenra_core::Event>(call) {
                let _ = m.step(&e);
            }
        }
    }
});
