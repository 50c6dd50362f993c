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

/// A flood of refusals cannot fill the disk: at most
/// `REFUSALS_PER_SECOND` records a second, and the next record counts the
/// ones left out, so none goes unaccounted.
#[test]
fn refusal_records_are_rate_limited_and_count_what_they_leave_out() {
    use agenra_gateway::perimeter::Refusal;
    use agenra_gateway::state::REFUSALS_PER_SECOND;
    let dir = std::env::temp_dir().join(format!("agenra-refusals-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let store = dir.join("store.redb");
    let text = "tool pay.send(to: string) { resource to; }\ngrant pay: pay.send quota 5;\n";
    let policy = CompiledPolicy::new(agenra_policy::compile(text, "p").unwrap().policy).unwrap();
    let gw = Gateway::open(Log::open_redb(&store).unwrap(), policy, "p", false).unwrap();
    let refuse = || Refusal {
        actor: None,
        tenant: None,
        request: "POST /v1/policy".into(),
        status: 401,
        why: "no credential".into(),
    };
    for _ in 0..200 {
        gw.record_refusal(refuse());
    }
    std::thread::sleep(std::time::Duration::from_millis(1100));
    gw.record_refusal(refuse());
    // A barrier: once a session's record is durable, so are the refusals.
    gw.create_session(None, Some("s".into()), None)
        .unwrap()
        .wait()
        .unwrap();
    drop(gw);
    let log = Log::open_redb(&store).unwrap();
    let mut refusals = Vec::new();
    log.scan(1, &mut |_, line| {
        let r: serde_json::Value = serde_json::from_slice(line).unwrap();
        if r["kind"] == "refused" {
            refusals.push(r["reason"].as_str().unwrap().to_string());
        }
        Ok(())
    })
    .unwrap();
    // 200 in well under two seconds, then one more.
    assert!(
        refusals.len() <= 2 * REFUSALS_PER_SECOND as usize + 1,
        "{}",
        refusals.len()
    );
    let left_out: usize = refusals
        .iter()
        .filter_map(|r| {
            let (_, rest) = r.split_once(" (")?;
            rest.split(' ').next()?.parse::<usize>().ok()
        })
        .sum();
    assert_eq!(refusals.len() + left_out, 201, "{refusals:?}");
    assert!(
        refusals.last().unwrap().contains("not recorded"),
        "{refusals:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
