//! A session driven by JSON events, shared by the scenario tests.
#![allow(dead_code)]

use agenra::core::policy::Quota;
use agenra::{compile_policy, Decision, Event, Monitor, StepError, StepOutput, Verdict};

/// A session under `policy` that takes events as JSON lines.
pub struct Session {
    pub m: Monitor,
    pub time: u64,
}

impl Session {
    pub fn new(policy: &str) -> Session {
        let p = compile_policy(policy, "test").unwrap_or_else(|e| panic!("{e}"));
        Session {
            m: Monitor::new(p).expect("valid"),
            time: 0,
        }
    }

    pub fn event(&mut self, json: &str) -> Result<StepOutput, StepError> {
        let e: Event = serde_json::from_str(json).unwrap_or_else(|e| panic!("{json}: {e}"));
        self.m.step(&e)
    }

    /// Calls `tool` with `args` (a JSON object) and optional extra fields;
    /// the whole decision.
    pub fn decide(&mut self, id: &str, tool: &str, args: &str, extra: &str) -> Decision {
        self.time += 1;
        let json = format!(
            r#"{{"kind":"call","id":"{id}","time":{},"tool":"{tool}","args":{args}{extra}}}"#,
            self.time
        );
        match self.event(&json) {
            Ok(StepOutput::Decision(d)) => d,
            other => panic!("{json}: {other:?}"),
        }
    }

    /// Calls `tool` with `args` and optional extra fields: verdict and rule.
    pub fn call_with(
        &mut self,
        id: &str,
        tool: &str,
        args: &str,
        extra: &str,
    ) -> (Verdict, String) {
        let d = self.decide(id, tool, args, extra);
        (d.verdict, d.rule.name(self.m.policy()))
    }

    pub fn call(&mut self, id: &str, tool: &str, args: &str) -> (Verdict, String) {
        self.call_with(id, tool, args, "")
    }

    pub fn result(&mut self, id: &str, status: &str, extra: &str) {
        let json = format!(r#"{{"kind":"result","call":"{id}","status":"{status}"{extra}}}"#);
        self.event(&json).unwrap_or_else(|e| panic!("{json}: {e}"));
    }

    /// Approves a paused call: the re-authorization's decision.
    pub fn approve(&mut self, id: &str) -> Decision {
        let json = format!(r#"{{"kind":"approve","call":"{id}"}}"#);
        match self.event(&json) {
            Ok(StepOutput::Decision(d)) => d,
            other => panic!("{json}: {other:?}"),
        }
    }

    /// Sends a task event (`fields` without braces, e.g. `"text":"..."`).
    pub fn task(&mut self, id: &str, fields: &str) -> Result<StepOutput, StepError> {
        self.event(&format!(r#"{{"kind":"task","id":"{id}",{fields}}}"#))
    }

    pub fn remaining(&self, grant: &str) -> Quota {
        let g = self
            .m
            .policy()
            .grants
            .iter()
            .position(|g| g.name == grant)
            .expect("grant exists");
        self.m.state().ledger.remaining(g).expect("grant exists")
    }

    /// The decision's reason as a person reads it.
    pub fn reason(&self, d: &Decision) -> String {
        self.m.reason_text(d)
    }
}

pub fn v(verdict: Verdict, rule: &str) -> (Verdict, String) {
    (verdict, rule.to_string())
}
