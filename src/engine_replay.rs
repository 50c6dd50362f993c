//! `--engine smt|both` for `agenra replay` and `agenra monitor`
//! (docs/smt.md, "Engines in replay and monitor").
//!
//! The default engine (`native`) never comes here: `main.rs` runs the
//! native [`Stepper`](crate::replay::Stepper) exactly as before. Under
//! `smt` every call and every approval (a just-in-time re-authorization
//! of the paused call) is decided by the Z3 authorizer; under `both` the
//! native sessions ([`Sessions`], the same as `replay`'s) decide too, and
//! [`SmtSide`] compares the answers with the semantics of
//! [`EngineSession`](crate::engine::EngineSession): any difference is a
//! DENY with rule `engine-disagreement`, both answers are kept in the
//! record (and written to standard error), and that session stays failed
//! closed. Named sessions (`"session": "s1"`) each get their own SMT
//! session, as they get their own native one; as the native sessions of a
//! trace, the SMT sessions are one tenant's and share one tenant pool
//! (`quota N per tenant`).

use crate::cmd_authorize::load_policy;
use crate::engine::{Engine, EngineError, EngineOutput, NativeAnswer, NativeOutcome, SmtSide};
use crate::render;
use crate::replay::{apply, LineError, Record};
use crate::sessions::{SessionError, Sessions};
use crate::trace::parse_line;
use agenra_core::graph::NodeId;
use agenra_core::{Event, Policy, Verdict};
use agenra_smt::SmtDecision;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::Path;

/// One event under `--engine smt|both`: the record `replay --json` prints.
///
/// The flattened [`Record`] is the answer given: under `both`, the native
/// monitor's record when the engines agree (so the fields are those of a
/// native replay), or a DENY `engine-disagreement` when they differ; under
/// `smt`, the SMT engine's answer (`node` is the call's node in the SMT
/// session graph, as `agenra graph` numbers it; `path` is empty, the
/// counterexample is in `smt`; `ledger_hash` is `-`).
#[derive(Debug, Clone, Serialize)]
pub struct EngineRecord {
    /// The answer given.
    #[serde(flatten)]
    pub record: Record,
    /// The engine(s) asked.
    pub engine: Engine,
    /// The native engine's answer to a call or an approval, under `both`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub native: Option<NativeAnswer>,
    /// The SMT engine's answer to a call or an approval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub smt: Option<SmtDecision>,
    /// Under `both`: what differs, if anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disagreement: Option<String>,
}

/// Why an event line gave no record.
#[derive(Debug, thiserror::Error)]
pub enum EngineLineError {
    /// The line is not an event, or the native monitor refused it.
    #[error(transparent)]
    Line(#[from] LineError),
    /// The SMT engine refused the event (under `smt`), or the policy.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// Sessions decided by the SMT engine, or by both engines, fed one event
/// (line) at a time.
pub struct EngineStepper {
    engine: Engine,
    policy: Policy,
    policy_hash: String,
    /// Under `both`: the native sessions. Under `smt`: an untouched
    /// session set (the table renderer wants one; SMT records have no
    /// native path to draw).
    native: Sessions,
    smt: BTreeMap<Option<String>, SmtSide>,
    /// The SMT sessions' tenant pool (the native sessions have their own).
    pool: agenra_core::TenantPool,
    applied: u64,
    decided: u64,
    /// Approvals decided (re-authorizations of paused calls).
    approvals: u64,
    disagreements: u64,
}

impl EngineStepper {
    /// Sessions of `policy` under `engine` (`smt` or `both`; `native` is
    /// refused: the native engine runs on [`crate::replay::Stepper`]).
    /// Fails when the policy is not internally consistent.
    pub fn new(policy: Policy, engine: Engine) -> Result<EngineStepper, EngineError> {
        if engine == Engine::Native {
            return Err(EngineError::Native(
                "the native engine runs without an EngineStepper".into(),
            ));
        }
        let pool = agenra_core::TenantPool::new();
        let default = SmtSide::with_pool(&policy, engine, pool.clone())?;
        let native =
            Sessions::new(policy.clone()).map_err(|e| EngineError::Native(e.to_string()))?;
        let policy_hash = native
            .get(None)
            .map(|m| m.policy_hash().to_string())
            .unwrap_or_default();
        Ok(EngineStepper {
            engine,
            policy,
            policy_hash,
            native,
            smt: BTreeMap::from([(None, default)]),
            pool,
            applied: 0,
            decided: 0,
            approvals: 0,
            disagreements: 0,
        })
    }

    /// The native sessions (under `both`, those that decided).
    pub fn sessions(&self) -> &Sessions {
        &self.native
    }

    /// How many events have been applied.
    pub fn applied(&self) -> u64 {
        self.applied
    }

    /// The `seq` the next applied event gets.
    pub fn next_seq(&self) -> u64 {
        self.applied + 1
    }

    /// `engine both: N calls decided, D disagreements`, or, when the
    /// trace had approvals, `engine both: N calls and A approvals decided,
    /// D disagreements`.
    pub fn summary_line(&self) -> String {
        let approvals = match self.approvals {
            0 => String::new(),
            a => format!(" and {a} approvals"),
        };
        format!(
            "engine {}: {} calls{approvals} decided, {} disagreements",
            engine_name(self.engine),
            self.decided,
            self.disagreements
        )
    }

    /// Parses one trace line and applies it. `None` for a blank or `//`
    /// line.
    pub fn step_line(&mut self, line: &str) -> Option<Result<EngineRecord, EngineLineError>> {
        match parse_line(line) {
            Ok(None) => None,
            Ok(Some(event)) => Some(self.step_event(&event)),
            Err(e) => Some(Err(LineError::from(e).into())),
        }
    }

    /// Applies one parsed event.
    pub fn step_event(&mut self, event: &Event) -> Result<EngineRecord, EngineLineError> {
        self.step_event_with(event, |_| {})
    }

    /// [`EngineStepper::step_event`], with the native outcome passed
    /// through `tamper` before the comparison (the unit tests force a
    /// disagreement with it).
    fn step_event_with(
        &mut self,
        event: &Event,
        tamper: impl FnOnce(&mut NativeOutcome),
    ) -> Result<EngineRecord, EngineLineError> {
        let seq = self.next_seq();
        let key = event.session().map(str::to_string);
        if !self.smt.contains_key(&key) {
            if !matches!(event, Event::Call(_) | Event::Task(_)) {
                let name = key.clone().unwrap_or_default();
                return Err(LineError::Apply(SessionError::UnknownSession(name)).into());
            }
            let side = SmtSide::with_pool(&self.policy, self.engine, self.pool.clone())?;
            self.smt.insert(key.clone(), side);
        }
        let (native_record, native) = match self.engine {
            Engine::Both => match apply(&mut self.native, seq, event) {
                Ok(r) => {
                    let outcome = Ok(native_answer(&self.policy, &r));
                    (Some(r), Some(outcome))
                }
                Err(e) => (None, Some(Err(e.to_string()))),
            },
            _ => (None, None),
        };
        let mut native = native;
        if let Some(n) = native.as_mut() {
            tamper(n);
        }
        let native_error = match &native {
            Some(Err(e)) => Some(e.clone()),
            _ => None,
        };
        let side = self
            .smt
            .get_mut(&key)
            .ok_or_else(|| EngineError::Native("no SMT session".into()))?;
        let out = match side.step(event, native) {
            Ok(out) => out,
            // The native monitor's own refusal keeps its own words.
            Err(EngineError::Native(_)) if native_error.is_some() => {
                return Err(match apply_error(&mut self.native, event) {
                    Some(e) => LineError::Apply(e).into(),
                    None => EngineError::Native(native_error.unwrap_or_default()).into(),
                })
            }
            Err(e) => return Err(e.into()),
        };
        let record = match out {
            EngineOutput::Applied => {
                let record = native_record.unwrap_or_else(|| self.smt_record(seq, event, None));
                EngineRecord {
                    record,
                    engine: self.engine,
                    native: None,
                    smt: None,
                    disagreement: None,
                }
            }
            EngineOutput::Decision(d) => {
                self.decided += u64::from(matches!(event, Event::Call(_)));
                self.approvals += u64::from(matches!(event, Event::Approve(_)));
                let mut record = match native_record {
                    Some(r) if self.engine == Engine::Both => r,
                    _ => self.smt_record(seq, event, d.smt.as_ref()),
                };
                if let Some(why) = &d.disagreement {
                    self.disagreements += 1;
                    record.decision = Some(Verdict::Deny);
                    record.rule = Some(d.rule.clone());
                    record.reason = format!("engines disagree: {why}");
                    record.path.clear();
                    record.grants.clear();
                }
                EngineRecord {
                    record,
                    engine: self.engine,
                    native: d.native.clone(),
                    smt: d.smt.clone(),
                    disagreement: d.disagreement.clone(),
                }
            }
        };
        self.applied += 1;
        Ok(record)
    }

    /// The record of an event as the SMT session sees it.
    fn smt_record(&self, seq: u64, event: &Event, d: Option<&SmtDecision>) -> Record {
        let key = event.session().map(str::to_string);
        let call = call_of(event).to_string();
        let graph = self.smt.get(&key).map(|s| s.session().graph());
        let node = graph.and_then(|g| g.nodes.iter().rposition(|n| n.name == call));
        let tool = match event {
            Event::Call(c) => Some(c.tool.clone()),
            _ => node
                .and_then(|i| graph.and_then(|g| g.nodes[i].tool))
                .and_then(|t| self.policy.tools.get(t))
                .map(|t| t.name.clone()),
        };
        Record {
            seq,
            session: key,
            kind: event.kind(),
            call,
            tool,
            decision: d.map(|d| d.verdict),
            rule: d.map(|d| d.rule_name.clone()),
            reason: match (event, d) {
                (_, None) => "applied (smt)".to_string(),
                (Event::Approve(_), Some(d)) => format!("approval re-checked: {}", smt_reason(d)),
                (_, Some(d)) => smt_reason(d),
            },
            path: vec![],
            // Units taken, or (an approval that DENYs) given back, as in
            // a native record.
            grants: match d {
                Some(d) if !d.refunded.is_empty() => d
                    .refunded
                    .iter()
                    .filter_map(|&g| self.policy.grants.get(g).map(|x| x.name.clone()))
                    .collect(),
                Some(d) => d.granted.clone(),
                None => vec![],
            },
            node: NodeId(node.unwrap_or(0) as u32),
            policy_hash: self.policy_hash.clone(),
            ledger_hash: "-".into(),
        }
    }
}

/// The native monitor's error for an event it refuses (the sessions are
/// unchanged by a refused event, so asking again gives the same error).
fn apply_error(sessions: &mut Sessions, event: &Event) -> Option<SessionError> {
    sessions.step(event).err()
}

fn call_of(event: &Event) -> &str {
    match event {
        Event::Call(c) => &c.id,
        Event::Result(r) => &r.call,
        Event::Approve(a) | Event::Reject(a) => &a.call,
        Event::Task(t) => &t.id,
    }
}

fn engine_name(e: Engine) -> &'static str {
    match e {
        Engine::Native => "native",
        Engine::Smt => "smt",
        Engine::Both => "both",
    }
}

/// The native record's answer, in the terms both engines share (grants by
/// index: grant names are unique in a policy). A DENY takes no units: the
/// grants of a denied approval's record are the units it gave back.
fn native_answer(policy: &Policy, r: &Record) -> Option<NativeAnswer> {
    let verdict = r.decision?;
    Some(NativeAnswer {
        verdict,
        rule_name: r.rule.clone().unwrap_or_default(),
        grants: match verdict {
            Verdict::Deny => vec![],
            _ => r
                .grants
                .iter()
                .filter_map(|g| policy.grants.iter().position(|x| &x.name == g))
                .collect(),
        },
        path: r.path.iter().map(|n| n.0).collect(),
        reason: r.reason.clone(),
    })
}

/// One line for the table's reason column: the grants taken, or the
/// counterexample.
pub fn smt_reason(d: &SmtDecision) -> String {
    let mut out = match d.verdict {
        Verdict::Deny => format!("denied by {}", d.rule_name),
        Verdict::Allow => format!("granted: {}", d.granted.join(", ")),
        Verdict::Pause => format!(
            "paused by {}; granted: {}",
            d.rule_name,
            d.granted.join(", ")
        ),
    };
    if let Some(cx) = &d.counterexample {
        if let Some(sink) = &cx.sink {
            out += &format!(" at {sink}");
        }
        if let Some(label) = &cx.label {
            out += &format!(", label {label}");
        }
        for p in &cx.paths {
            let steps: Vec<&str> = p.path.iter().map(|s| s.node.as_str()).collect();
            out += &format!("; {}: {}", p.label, steps.join(" -> "));
        }
        if !cx.history.is_empty() {
            out += &format!("; history: {}", cx.history.join(" -> "));
        }
    }
    out
}

/// Lines of the human table per block (as `replay`'s).
const TABLE_BLOCK: usize = 4096;

/// `agenra replay --engine smt|both`: streams the trace, stopping at the
/// first bad event (exit 1, as `replay`). Human output: `replay`'s table
/// (under `both`, identical to a native replay while the engines agree),
/// its summary line, then the engines' line.
pub fn run_replay(policy: &Path, trace: &Path, engine: Engine, json: bool) -> Result<(), String> {
    let policy = load_policy(policy)?;
    let name = policy.name.clone();
    let mut stepper = EngineStepper::new(policy, engine).map_err(|e| e.to_string())?;
    let file =
        std::fs::File::open(trace).map_err(|e| format!("{}: cannot read: {e}", trace.display()))?;
    let reader = std::io::BufReader::new(file);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let write = |out: &mut std::io::StdoutLock, s: &str| -> Result<(), String> {
        out.write_all(s.as_bytes())
            .map_err(|e| format!("cannot write: {e}"))
    };
    if !json {
        write(
            &mut out,
            &format!("policy {} {}\n", render::escape(&name), stepper.policy_hash),
        )?;
    }
    let mut table = render::Table::default();
    let mut tally = render::Tally::default();
    let mut block: Vec<Record> = Vec::new();
    let mut failure = None;
    for (i, line) in reader.lines().enumerate() {
        let line = line.map_err(|e| format!("{}: cannot read: {e}", trace.display()))?;
        let text = if i == 0 {
            line.trim_start_matches('\u{feff}')
        } else {
            &line
        };
        match stepper.step_line(text) {
            None => {}
            Some(Ok(r)) => {
                if let Some(why) = &r.disagreement {
                    eprintln!("agenra: engines disagree at event {}: {why}", r.record.seq);
                }
                if json {
                    let s = serde_json::to_string(&r).map_err(|e| e.to_string())?;
                    write(&mut out, &(s + "\n"))?;
                } else {
                    tally.add(&r.record);
                    block.push(r.record);
                    if block.len() == TABLE_BLOCK {
                        write(&mut out, &table.block(stepper.sessions(), &block))?;
                        block.clear();
                    }
                }
            }
            Some(Err(e)) => {
                failure = Some(line_error(trace, i + 1, &e));
                break;
            }
        }
    }
    if !json {
        write(&mut out, &table.block(stepper.sessions(), &block))?;
        write(&mut out, &format!("{}\n", tally.line()))?;
        write(&mut out, &format!("{}\n", stepper.summary_line()))?;
    }
    match failure {
        Some(f) => Err(f),
        None => Ok(()),
    }
}

/// `path:line[:column]: message`, as `replay` reports a bad event.
fn line_error(trace: &Path, line: usize, e: &EngineLineError) -> String {
    match e {
        EngineLineError::Line(LineError::Parse(p)) => {
            format!("{}:{line}:{}: {}", trace.display(), p.column, p.message)
        }
        other => format!("{}:{line}: {other}", trace.display()),
    }
}

impl crate::stream::LineStep for EngineStepper {
    type Record = EngineRecord;
    type Error = EngineLineError;
    fn next_seq(&self) -> u64 {
        EngineStepper::next_seq(self)
    }
    fn step_line(&mut self, line: &str) -> Option<Result<EngineRecord, EngineLineError>> {
        let out = EngineStepper::step_line(self, line);
        if let Some(Ok(r)) = &out {
            if let Some(why) = &r.disagreement {
                eprintln!("agenra: engines disagree at event {}: {why}", r.record.seq);
            }
        }
        out
    }
}

/// `agenra monitor --engine smt|both`: the streaming sidecar of
/// [`crate::stream::run`], each answer an [`EngineRecord`].
pub fn run_monitor(policy: &Path, trace_out: Option<&Path>, engine: Engine) -> Result<(), String> {
    let policy = load_policy(policy)?;
    let mut stepper = EngineStepper::new(policy, engine).map_err(|e| e.to_string())?;
    let mut file = match trace_out {
        Some(path) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("{}: cannot open: {e}", path.display()))?,
        ),
        None => None,
    };
    let input = std::io::stdin().lock();
    let output = std::io::stdout().lock();
    let trace_out = file.as_mut().map(|f| f as &mut dyn Write);
    crate::stream::run(&mut stepper, input, output, trace_out).map_err(|e| e.to_string())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str = r#"
        levels public < secret;
        categories pii;
        sinks network;
        tool db.read(key: string) { resource key; output <secret, {pii}, trusted>; }
        tool http.post(url: string, body?: string) { sink network; }
        grant read: db.read quota 5;
        grant post: http.post quota 5;
        deny flow secrets_out: sensitivity >= secret -> network;
    "#;

    fn stepper(engine: Engine) -> EngineStepper {
        let policy = agenra_policy::compile(POLICY, "p")
            .expect("compiles")
            .policy;
        EngineStepper::new(policy, engine).expect("supported")
    }

    fn call(id: &str, time: u64, tool: &str, args: &str) -> String {
        format!(r#"{{"kind":"call","id":"{id}","time":{time},"tool":"{tool}","args":{args}}}"#)
    }

    fn step(s: &mut EngineStepper, line: &str) -> EngineRecord {
        s.step_line(line).expect("an event").expect("applies")
    }

    #[test]
    fn both_agrees_and_keeps_the_native_record() {
        let mut s = stepper(Engine::Both);
        let r = step(&mut s, &call("c1", 1, "db.read", r#"{"key":"k"}"#));
        assert_eq!(r.record.decision, Some(Verdict::Allow));
        assert_eq!(r.record.rule.as_deref(), Some("read"));
        assert!(r.disagreement.is_none());
        assert_eq!(r.smt.as_ref().map(|d| d.verdict), Some(Verdict::Allow));
        let r = step(
            &mut s,
            r#"{"kind":"result","call":"c1","time":2,"status":"succeeded","output":"x"}"#,
        );
        assert_eq!(r.record.decision, None);
        let r = step(&mut s, &call("c2", 3, "http.post", r#"{"url":"u"}"#));
        assert_eq!(r.record.decision, Some(Verdict::Deny));
        assert_eq!(r.record.rule.as_deref(), Some("secrets_out"));
        // The native path, and the SMT counterexample.
        assert!(!r.record.path.is_empty());
        let cx = r.smt.as_ref().and_then(|d| d.counterexample.clone());
        assert_eq!(cx.and_then(|c| c.sink), Some("sink network".into()));
        assert_eq!(
            s.summary_line(),
            "engine both: 2 calls decided, 0 disagreements"
        );
    }

    #[test]
    fn smt_alone_decides_with_its_counterexample() {
        let mut s = stepper(Engine::Smt);
        step(&mut s, &call("c1", 1, "db.read", r#"{"key":"k"}"#));
        step(
            &mut s,
            r#"{"kind":"result","call":"c1","time":2,"status":"succeeded","output":"x"}"#,
        );
        let r = step(&mut s, &call("c2", 3, "http.post", r#"{"url":"u"}"#));
        assert_eq!(r.record.decision, Some(Verdict::Deny));
        assert!(r.native.is_none());
        assert!(r.record.reason.contains("c1 -> "), "{}", r.record.reason);
        assert_eq!(r.record.ledger_hash, "-");
    }

    #[test]
    fn a_forced_disagreement_denies_and_the_session_stays_closed() {
        let mut s = stepper(Engine::Both);
        let flip = |n: &mut NativeOutcome| {
            if let Ok(Some(a)) = n {
                a.verdict = Verdict::Deny;
                a.rule_name = "no-grant".into();
                a.grants.clear();
            }
        };
        let e: Event =
            serde_json::from_str(&call("c1", 1, "db.read", r#"{"key":"k"}"#)).expect("event");
        let r = s.step_event_with(&e, flip).expect("applies");
        assert_eq!(r.record.decision, Some(Verdict::Deny));
        assert_eq!(r.record.rule.as_deref(), Some("engine-disagreement"));
        assert!(r.record.grants.is_empty());
        let why = r.disagreement.clone().expect("why");
        assert!(why.contains("native DENY no-grant"), "{why}");
        assert!(why.contains("smt ALLOW read"), "{why}");
        assert_eq!(r.native.as_ref().map(|n| n.verdict), Some(Verdict::Deny));
        assert_eq!(r.smt.as_ref().map(|d| d.verdict), Some(Verdict::Allow));
        let json = serde_json::to_value(&r).expect("json");
        assert_eq!(json["rule"], "engine-disagreement");
        assert_eq!(json["native"]["verdict"], "DENY");
        assert_eq!(json["smt"]["verdict"], "ALLOW");
        // Later calls that both engines allow are still denied.
        let r = step(&mut s, &call("c2", 2, "db.read", r#"{"key":"j"}"#));
        assert_eq!(r.record.rule.as_deref(), Some("engine-disagreement"));
        assert!(r
            .disagreement
            .expect("why")
            .starts_with("an earlier disagreement"));
        // Another session is not affected.
        let line = r#"{"kind":"call","session":"s2","id":"c1","time":3,"tool":"db.read","args":{"key":"k"}}"#;
        let r = step(&mut s, line);
        assert_eq!(r.record.decision, Some(Verdict::Allow));
        assert_eq!(
            s.summary_line(),
            "engine both: 3 calls decided, 2 disagreements"
        );
    }

    #[test]
    fn approvals_are_decided_by_both_engines_and_cross_checked() {
        let policy = agenra_policy::compile(
            r#"
            levels public < secret;
            sinks network;
            tool db.read(key: string) { resource key; output <secret, {}, trusted>; }
            tool http.post(url: string) { sink network; }
            grant read: db.read quota 5;
            grant post: http.post quota 5 approval;
            deny flow secrets_out: sensitivity >= secret -> network;
            "#,
            "p",
        )
        .expect("compiles")
        .policy;
        let approve =
            |id: &str, time: u64| format!(r#"{{"kind":"approve","call":"{id}","time":{time}}}"#);
        for engine in [Engine::Both, Engine::Smt] {
            let mut s = EngineStepper::new(policy.clone(), engine).expect("supported");
            let r = step(&mut s, &call("c1", 1, "http.post", r#"{"url":"u"}"#));
            assert_eq!(r.record.decision, Some(Verdict::Pause));
            let r = step(&mut s, &approve("c1", 2));
            assert_eq!(r.record.decision, Some(Verdict::Allow), "{engine:?}");
            assert_eq!(r.record.grants, ["post"]);
            assert_eq!(r.smt.as_ref().map(|d| d.verdict), Some(Verdict::Allow));
            step(&mut s, &call("c2", 3, "http.post", r#"{"url":"v"}"#));
            step(&mut s, &call("c3", 4, "db.read", r#"{"key":"k"}"#));
            step(
                &mut s,
                r#"{"kind":"result","call":"c3","time":5,"status":"succeeded","output":"x"}"#,
            );
            // The secret read since the pause: the re-check denies.
            let r = step(&mut s, &approve("c2", 6));
            assert_eq!(r.record.decision, Some(Verdict::Deny), "{engine:?}");
            assert_eq!(
                r.record.rule.as_deref(),
                Some("secrets_out"),
                "{:?}",
                r.disagreement
            );
            // The units given back, as a native record lists them.
            assert_eq!(r.record.grants, ["post"], "{engine:?}");
            assert!(r.disagreement.is_none());
            let cx = r.smt.as_ref().and_then(|d| d.counterexample.clone());
            assert_eq!(cx.map(|c| c.node), Some("c2".to_string()));
            assert_eq!(r.native.is_some(), engine == Engine::Both);
            assert!(
                s.summary_line()
                    .ends_with(": 3 calls and 2 approvals decided, 0 disagreements"),
                "{}",
                s.summary_line()
            );
        }
        // A native answer to an approval that differs: DENY, closed.
        let mut s = EngineStepper::new(policy, Engine::Both).expect("supported");
        step(&mut s, &call("c1", 1, "http.post", r#"{"url":"u"}"#));
        let e: Event = serde_json::from_str(&approve("c1", 2)).expect("event");
        let r = s
            .step_event_with(&e, |n| {
                if let Ok(Some(a)) = n {
                    a.grants.clear();
                }
            })
            .expect("applies");
        assert_eq!(r.record.decision, Some(Verdict::Deny));
        assert_eq!(r.record.rule.as_deref(), Some("engine-disagreement"));
        assert!(r.disagreement.expect("why").contains("smt ALLOW post"));
    }

    #[test]
    fn refused_events_keep_the_native_error_and_change_nothing() {
        for engine in [Engine::Both, Engine::Smt] {
            let mut s = stepper(engine);
            step(&mut s, &call("c1", 1, "db.read", r#"{"key":"k"}"#));
            let err = s
                .step_line(&call("c1", 2, "db.read", r#"{"key":"k"}"#))
                .expect("an event")
                .expect_err("a reused id");
            assert!(!err.to_string().is_empty());
            let err = s
                .step_line(
                    r#"{"kind":"result","session":"nope","call":"c1","time":3,"status":"failed"}"#,
                )
                .expect("an event")
                .expect_err("unknown session");
            assert!(err.to_string().contains("unknown session"), "{err}");
            assert_eq!(s.next_seq(), 2);
            let r = step(&mut s, &call("c3", 4, "db.read", r#"{"key":"k"}"#));
            assert_eq!(r.record.seq, 2);
            assert_eq!(r.record.decision, Some(Verdict::Allow));
        }
    }
}
