//! The whole policy front end on arbitrary text: never a panic; `fmt` is
//! idempotent and keeps the compiled policy.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let compiled = agenra_policy::compile(src, "fuzz");
    if let Err(e) = &compiled {
        let _ = e.render("fuzz.agr", src);
    }
    if let Ok(formatted) = agenra_policy::format(src) {
        assert_eq!(agenra_policy::format(&formatted).ok(), Some(formatted.clone()));
        if let (Ok(a), Ok(b)) = (&compiled, agenra_policy::compile(&formatted, "fuzz")) {
            assert_eq!(a.policy, b.policy);
        }
    }
});
