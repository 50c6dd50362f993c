//! A store that cannot be written admits nothing: the event that could not
//! be recorded is a 503 (its answer is never sent), and so is everything
//! after it until a restart recovers from the log (`docs/failure-modes.md`).

use agenra_core::CompiledPolicy;
use agenra_gateway::api::{Authorize, CallIn};
use agenra_gateway::Gateway;
use agenra_store::{Backend, Head, Log, MemoryBackend, StoreError, Visit};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A log in memory whose writes fail once `broken` is set.
struct Breakable {
    inner: MemoryBackend,
    broken: Arc<AtomicBool>,
}

impl Backend for Breakable {
    fn append(&mut self, first: u64, lines: &[Vec<u8>], head: &Head) -> Result<(), StoreError> {
        if self.broken.load(Ordering::SeqCst) {
            return Err(StoreError::Engine {
                path: "breakable".into(),
                message: "the disk is full".into(),
            });
        }
        self.inner.append(first, lines, head)
    }
    fn scan(&self, from: u64, f: Visit<'_>) -> Result<(), StoreError> {
        self.inner.scan(from, f)
    }
    fn head(&self) -> Result<Head, StoreError> {
        self.inner.head()
    }
}

fn call(id: &str) -> Authorize {
    Authorize {
        tenant: None,
        session: "s".into(),
        call: CallIn {
            id: id.into(),
            time: None,
            agent: None,
            tool: "pay.send".into(),
            args: serde_json::from_str(r#"{"to":"a@example.com"}"#).unwrap(),
            lineage: Default::default(),
            inferred: Default::default(),
        },
    }
}

#[test]
fn a_write_that_fails_is_a_503_and_nothing_is_admitted_after_it() {
    let text = "tool pay.send(to: string) { resource to; }\ngrant pay: pay.send quota 5;\n";
    let policy = CompiledPolicy::new(agenra_policy::compile(text, "p").unwrap().policy).unwrap();
    let broken = Arc::new(AtomicBool::new(false));
    let backend = Breakable {
        inner: MemoryBackend::default(),
        broken: Arc::clone(&broken),
    };
    let gw = Gateway::open(Log::open(Box::new(backend)).unwrap(), policy, "p", false).unwrap();
    gw.create_session(None, Some("s".into()), None)
        .unwrap()
        .wait()
        .unwrap();
    let (ok, _) = gw.authorize(call("c1")).unwrap().wait().unwrap();
    assert_eq!(ok.decision, Some("ALLOW"));
    broken.store(true, Ordering::SeqCst);
    let e = gw.authorize(call("c2")).unwrap().wait().unwrap_err();
    assert_eq!(e.status, 503, "{e:?}");
    assert!(e.error.contains("not recorded"), "{e:?}");
    assert!(gw.is_failed());
    // Even once the disk is back, nothing is decided until a restart.
    broken.store(false, Ordering::SeqCst);
    let e = match gw.authorize(call("c3")) {
        Err(e) => e,
        Ok(p) => p.wait().unwrap_err(),
    };
    assert_eq!(e.status, 503, "{e:?}");
}
