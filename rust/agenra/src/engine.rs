//! Engine choice (feature `smt`): decide calls and approvals with the
//! native monitor, the Z3 authorizer (`agenra-smt`), or both.
//!
//! An approval is a just-in-time re-authorization of the paused call
//! (DESIGN §2 step 5), so both engines decide it as they decide a call.
//! With [`Engine::Both`] every call and every approval is decided by both
//! engines and the answers are compared (verdict, deciding rule, grants
//! taken). Any difference fails closed: the call (or approval) is DENIED
//! with rule `engine-disagreement`, both answers are kept in the decision
//! (and written to standard error by the CLI), and the session stays
//! failed closed: every later call and approval is denied the same way,
//! since the two engines no longer share a state to compare against.

use agenra_core::decision::{Decision, StepOutput};
use agenra_core::{Event, Monitor, Policy, Verdict};
use agenra_smt::{SmtDecision, SmtError, SmtSession};
use serde::Serialize;

/// Which engine decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// The native monitor (the hot path).
    Native,
    /// The Z3 authorizer.
    Smt,
    /// Both, cross-checked; any difference is a DENY.
    Both,
}

impl std::str::FromStr for Engine {
    type Err = String;
    fn from_str(s: &str) -> Result<Engine, String> {
        match s {
            "native" => Ok(Engine::Native),
            "smt" => Ok(Engine::Smt),
            "both" => Ok(Engine::Both),
            _ => Err(format!("unknown engine {s:?} (native, smt or both)")),
        }
    }
}

/// Why an event could not be decided or applied.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The native monitor refused the policy or the event.
    #[error("native: {0}")]
    Native(String),
    /// The SMT engine refused the policy or the event.
    #[error("smt: {0}")]
    Smt(#[from] SmtError),
}

/// The native answer, in the terms both engines share.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NativeAnswer {
    /// ALLOW, DENY or PAUSE.
    pub verdict: Verdict,
    /// The deciding rule's name.
    pub rule_name: String,
    /// Grants whose units were taken, by index.
    pub grants: Vec<usize>,
    /// The DENY's path (native node ids).
    pub path: Vec<u32>,
    /// The reason, rendered.
    pub reason: String,
}

impl NativeAnswer {
    /// `d`, which `session` just made (its path is built now, when read).
    fn of(policy: &Policy, session: &Monitor, d: &Decision) -> NativeAnswer {
        NativeAnswer {
            verdict: d.verdict,
            rule_name: d.rule.name(policy),
            grants: d.grants.clone(),
            path: session
                .path(d)
                .unwrap_or_default()
                .iter()
                .map(|n| n.0)
                .collect(),
            reason: d.reason_text(policy),
        }
    }
}

/// A decision of the chosen engine(s).
#[derive(Clone, Debug, Serialize)]
pub struct EngineDecision {
    /// The engine(s) that decided.
    pub engine: Engine,
    /// The verdict returned.
    pub verdict: Verdict,
    /// The deciding rule's name (`engine-disagreement` when both engines
    /// were asked and differ).
    pub rule: String,
    /// Names of the grants whose units were taken.
    pub granted: Vec<String>,
    /// The native engine's answer, if it was asked.
    pub native: Option<NativeAnswer>,
    /// The SMT engine's answer, if it was asked.
    pub smt: Option<SmtDecision>,
    /// With `both`: what differs, if anything.
    pub disagreement: Option<String>,
}

/// What a step gives.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum EngineOutput {
    /// A call or an approval was decided.
    Decision(Box<EngineDecision>),
    /// Another event was applied.
    Applied,
}

/// A session decided by the chosen engine(s).
pub struct EngineSession {
    policy: Policy,
    native: Option<Monitor>,
    smt: Option<SmtSide>,
}

impl EngineSession {
    /// A new session of `policy` (each engine's with a private tenant
    /// pool); fails when the policy is not internally consistent.
    pub fn new(policy: &Policy, engine: Engine) -> Result<EngineSession, EngineError> {
        let native = match engine {
            Engine::Smt => None,
            _ => {
                Some(Monitor::new(policy.clone()).map_err(|e| EngineError::Native(e.to_string()))?)
            }
        };
        let smt = match engine {
            Engine::Native => None,
            _ => Some(SmtSide::new(policy, engine)?),
        };
        Ok(EngineSession {
            policy: policy.clone(),
            native,
            smt,
        })
    }

    /// The SMT session, if the engine uses it (for drawing its graph).
    pub fn smt(&self) -> Option<&SmtSession> {
        self.smt.as_ref().map(SmtSide::session)
    }

    /// Decides a call or an approval, or applies another event.
    pub fn step(&mut self, e: &Event) -> Result<EngineOutput, EngineError> {
        let policy = &self.policy;
        let native = self.native.as_mut().map(|m| match m.step(e) {
            Ok(StepOutput::Decision(d)) => Ok(Some(NativeAnswer::of(policy, m, &d))),
            Ok(StepOutput::Applied(_)) => Ok(None),
            Err(err) => Err(err.to_string()),
        });
        match self.smt.as_mut() {
            Some(side) => side.step(e, native),
            None => match native {
                Some(Ok(Some(n))) => Ok(native_only(policy, Engine::Native, n)),
                Some(Ok(None)) | None => Ok(EngineOutput::Applied),
                Some(Err(err)) => Err(EngineError::Native(err)),
            },
        }
    }
}

/// The decision of the native engine alone.
fn native_only(policy: &Policy, engine: Engine, n: NativeAnswer) -> EngineOutput {
    EngineOutput::Decision(Box::new(EngineDecision {
        engine,
        verdict: n.verdict,
        rule: n.rule_name.clone(),
        granted: grant_names(policy, &n.grants),
        native: Some(n),
        smt: None,
        disagreement: None,
    }))
}

fn grant_names(policy: &Policy, gs: &[usize]) -> Vec<String> {
    gs.iter()
        .filter_map(|&g| policy.grants.get(g).map(|x| x.name.clone()))
        .collect()
}

/// The SMT half of a session under `smt` or `both`, for callers that step
/// the native monitor themselves (`agenra replay` and `agenra monitor`
/// keep their native sessions in [`crate::Sessions`]): it decides each
/// call and each approval with the Z3 authorizer, applies every event to its session and,
/// under `both`, compares the answer with the native one it is handed. The
/// one place the `both` semantics live ([`EngineSession`] uses it too).
pub struct SmtSide {
    engine: Engine,
    policy: Policy,
    smt: SmtSession,
    failed_closed: Option<String>,
}

/// What the native engine made of an event, for [`SmtSide::step`]:
/// `Ok(Some(answer))` a decision, `Ok(None)` another event applied,
/// `Err(why)` the event refused.
pub type NativeOutcome = Result<Option<NativeAnswer>, String>;

impl SmtSide {
    /// The SMT side of a new session of `policy` under `engine` (`smt` or
    /// `both`), with a private tenant pool (as a native session given no
    /// pool).
    pub fn new(policy: &Policy, engine: Engine) -> Result<SmtSide, EngineError> {
        Ok(SmtSide {
            engine,
            policy: policy.clone(),
            smt: SmtSession::new(policy)?,
            failed_closed: None,
        })
    }

    /// [`SmtSide::new`], drawing shared grants (`quota N per tenant`) on
    /// the tenant's `pool`: give every SMT side of a tenant the same pool
    /// (and the native sessions a pool of their own with the same counts).
    pub fn with_pool(
        policy: &Policy,
        engine: Engine,
        pool: agenra_core::TenantPool,
    ) -> Result<SmtSide, EngineError> {
        Ok(SmtSide {
            engine,
            policy: policy.clone(),
            smt: SmtSession::with_pool(policy, pool)?,
            failed_closed: None,
        })
    }

    /// The SMT session (for drawing its graph).
    pub fn session(&self) -> &SmtSession {
        &self.smt
    }

    /// Whether an earlier disagreement closed the session (under `both`).
    pub fn failed_closed(&self) -> Option<&str> {
        self.failed_closed.as_deref()
    }

    /// Decides a call or an approval (or applies another event) with the
    /// SMT engine, and under `both` compares with `native`, the native engine's outcome of
    /// the same event (`None` when the native engine is not asked).
    pub fn step(
        &mut self,
        e: &Event,
        native: Option<NativeOutcome>,
    ) -> Result<EngineOutput, EngineError> {
        let smt = match e {
            Event::Call(c) => Some(self.smt.decide(c)),
            Event::Approve(a) => Some(self.smt.decide_approval(a)),
            _ => None,
        };
        // Keep the SMT session's state in step with the event.
        let applied = self.smt.apply(e);
        if self.engine == Engine::Smt {
            if let Some(Err(err)) = &smt {
                return Err(EngineError::Smt(err.clone()));
            }
            applied?;
        }
        let native = match native {
            None => None,
            Some(Ok(answer)) => answer,
            Some(Err(err)) => match self.engine {
                Engine::Both if matches!(smt, Some(Ok(_))) => {
                    return Ok(self.disagree(
                        None,
                        smt.and_then(Result::ok),
                        format!("native refused the event ({err}), smt decided it"),
                    ))
                }
                _ => return Err(EngineError::Native(err)),
            },
        };
        let smt = match smt {
            None => None,
            Some(Ok(d)) => Some(d),
            Some(Err(err)) => match self.engine {
                Engine::Both => {
                    return Ok(self.disagree(native, None, format!("smt: {err}")));
                }
                _ => return Err(EngineError::Smt(err)),
            },
        };
        Ok(match (native, smt) {
            (None, None) => EngineOutput::Applied,
            (Some(n), None) => native_only(&self.policy, self.engine, n),
            (None, Some(s)) => EngineOutput::Decision(Box::new(EngineDecision {
                engine: self.engine,
                verdict: s.verdict,
                rule: s.rule_name.clone(),
                granted: s.granted.clone(),
                native: None,
                smt: Some(s),
                disagreement: None,
            })),
            (Some(n), Some(s)) => self.cross_check(n, s),
        })
    }

    /// Both engines answered: the same verdict, rule and grants, or a DENY
    /// `engine-disagreement` (and the session fails closed from then on).
    fn cross_check(&mut self, n: NativeAnswer, s: SmtDecision) -> EngineOutput {
        if let Some(why) = self.failed_closed.clone() {
            return self.disagree(Some(n), Some(s), why);
        }
        let names = grant_names(&self.policy, &n.grants);
        if (n.verdict, &n.rule_name, &n.grants) != (s.verdict, &s.rule_name, &s.grants) {
            let why = format!(
                "native {} {} {:?}, smt {} {} {:?}",
                n.verdict.as_str(),
                n.rule_name,
                names,
                s.verdict.as_str(),
                s.rule_name,
                s.granted
            );
            return self.disagree(Some(n), Some(s), why);
        }
        EngineOutput::Decision(Box::new(EngineDecision {
            engine: self.engine,
            verdict: n.verdict,
            rule: n.rule_name.clone(),
            granted: names,
            native: Some(n),
            smt: Some(s),
            disagreement: None,
        }))
    }

    /// DENY `engine-disagreement`; the session stays failed closed.
    fn disagree(
        &mut self,
        native: Option<NativeAnswer>,
        smt: Option<SmtDecision>,
        why: String,
    ) -> EngineOutput {
        if self.failed_closed.is_none() {
            self.failed_closed = Some(format!("an earlier disagreement: {why}"));
        }
        EngineOutput::Decision(Box::new(EngineDecision {
            engine: self.engine,
            verdict: Verdict::Deny,
            rule: "engine-disagreement".into(),
            granted: vec![],
            native,
            smt,
            disagreement: Some(why),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agenra_core::decision::Rule;

    fn native(verdict: Verdict, rule: &str, grants: Vec<usize>) -> NativeAnswer {
        NativeAnswer {
            verdict,
            rule_name: rule.into(),
            grants,
            path: vec![],
            reason: String::new(),
        }
    }

    fn smt(verdict: Verdict, rule: &str, grants: Vec<usize>) -> SmtDecision {
        SmtDecision {
            verdict,
            rule: Rule::NoGrant,
            rule_name: rule.into(),
            granted: grants.iter().map(|g| format!("g{g}")).collect(),
            grants,
            counterexample: None,
            inferred: vec![],
            solved: true,
            refunded: vec![],
        }
    }

    fn decision(o: EngineOutput) -> EngineDecision {
        match o {
            EngineOutput::Decision(d) => *d,
            EngineOutput::Applied => panic!("a decision"),
        }
    }

    #[test]
    fn any_difference_is_a_deny_and_the_session_stays_closed() {
        let mut p = Policy::empty("p");
        p.tools = vec![agenra_core::policy::Tool {
            name: "t".into(),
            params: vec![],
            resource: None,
            sinks: vec![],
            output: agenra_core::Label::BOTTOM,
            sanitizer: None,
            facts: vec![],
        }];
        let mut s = SmtSide::new(&p, Engine::Both).expect("supported");
        // Agreement: the shared answer.
        let d = decision(s.cross_check(
            native(Verdict::Allow, "g0", vec![0]),
            smt(Verdict::Allow, "g0", vec![0]),
        ));
        assert_eq!((d.verdict, d.rule.as_str()), (Verdict::Allow, "g0"));
        assert!(d.disagreement.is_none());
        // Same verdict, other grants: a difference.
        let d = decision(s.cross_check(
            native(Verdict::Allow, "g0", vec![0]),
            smt(Verdict::Allow, "g0", vec![1]),
        ));
        assert_eq!(
            (d.verdict, d.rule.as_str()),
            (Verdict::Deny, "engine-disagreement")
        );
        assert_eq!(d.native.expect("kept").grants, [0]);
        assert_eq!(d.smt.expect("kept").grants, [1]);
        assert!(d.disagreement.expect("why").contains("smt ALLOW g0"));
        // Afterwards even agreeing answers are denied.
        let d = decision(s.cross_check(
            native(Verdict::Allow, "g0", vec![0]),
            smt(Verdict::Allow, "g0", vec![0]),
        ));
        assert_eq!(d.rule, "engine-disagreement");
        assert!(d
            .disagreement
            .expect("why")
            .starts_with("an earlier disagreement"));
    }
}
