//! Events from arbitrary bytes, then a step of a monitor: never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

fn monitor() -> &'static agenra_core::Monitor {
    static M: OnceLock<agenra_core::Monitor> = OnceLock::new();
    M.get_or_init(|| {
        let policy = agenra_policy::compile(
            r#"
            sets s; facts f; sinks net;
            provenance by value; task seeds s;
            tool t(a: string, b?: list<decimal>) { resource a; sink net on b; fact f when any output "/x" == 1; }
            grant g: t where a in s or b == null quota 2 approval discovers s;
            deny flow d: untrusted -> net;
            "#,
            "fuzz",
        )
        .expect("the fuzz policy compiles")
        .policy;
        agenra_core::Monitor::new(policy).expect("valid")
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut m = monitor().new_session();
    for line in text.lines() {
        if let Ok(event) = serde_json::from_str::<agenra_core::Event>(line) {
            let _ = m.step(&event);
        }
    }
});
