//! A realistic policy using every construct compiles to the expected model.

use agenra_core::policy::{
    Agent, FactRule, FlowEffect, Grant, OutputTest, PathKind, Quota, RuleEffect, SinkUse,
    StepPattern,
};
use agenra_core::{
    ArgOp, CategorySet, Cond, Decimal, Label, LabelPattern, ParamType, Pattern, Quant, Value,
};

const SOURCE: &str = include_str!("data/coding_agent.agr");

fn compiled() -> agenra_policy::Compiled {
    match agenra_policy::compile(SOURCE, "fallback") {
        Ok(c) => c,
        Err(e) => panic!("{}", e.render("coding_agent.agr", SOURCE)),
    }
}

#[test]
fn declarations() {
    let c = compiled();
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let p = &c.policy;
    assert_eq!(p.name, "coding-agent");
    assert_eq!(p.levels, ["public", "internal", "confidential", "secret"]);
    assert_eq!(p.categories, ["credential", "pii", "source_code", "web"]);
    assert_eq!(p.sinks, ["network", "shell", "email"]);
    assert_eq!(p.sets, ["contacts"]);
    assert_eq!(p.facts, ["tests_passed"]);
    assert_eq!(
        p.resources
            .iter()
            .map(|r| (&r.pattern, r.label))
            .collect::<Vec<_>>(),
        vec![
            (
                &Pattern::Glob("*/.ssh/*".into()),
                Label::new(3, CategorySet::single(0), true)
            ),
            (
                &Pattern::Prefix("hr/".into()),
                Label::new(2, CategorySet::single(1), true)
            ),
            (&Pattern::Exact("README.md".into()), Label::BOTTOM),
        ]
    );
    let redact = &p.sanitizers[0];
    assert_eq!(redact.name, "redact");
    assert_eq!(redact.removes, CategorySet::from_indexes([0, 1]));
    assert_eq!(redact.max_sensitivity, Some(1));
    assert!(redact.trusts);
}

#[test]
fn tools() {
    let p = compiled().policy;
    let names: Vec<&str> = p.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "fs.read",
            "fs.write",
            "web.fetch",
            "email.send",
            "contacts.list",
            "tests.run"
        ]
    );
    let read = &p.tools[0];
    assert_eq!(read.resource, Some(0));
    assert_eq!(read.output, Label::new(1, CategorySet::single(2), true));
    assert!(read.sinks.is_empty() && read.sanitizer.is_none());
    // `web_page` is an alias of an alias.
    let fetch = &p.tools[2];
    assert_eq!(fetch.output, Label::new(0, CategorySet::single(3), false));
    assert_eq!(
        fetch.sinks,
        [SinkUse {
            sink: 0,
            params: None
        }]
    );
    let mail = &p.tools[3];
    assert_eq!(mail.params[2].ty, ParamType::Bool);
    assert_eq!(mail.resource, Some(0));
    assert_eq!(
        mail.sinks,
        [
            SinkUse {
                sink: 2,
                params: None
            },
            SinkUse {
                sink: 0,
                params: None
            }
        ]
    );
    assert_eq!(mail.sanitizer, Some(0));
    let list = &p.tools[4];
    assert!(list.params.is_empty() && list.resource.is_none());
    assert_eq!(list.output, Label::BOTTOM);
    assert_eq!(
        p.tools[5].facts,
        [FactRule {
            fact: 0,
            when: Some(OutputTest {
                pointer: "/exit_code".into(),
                quant: Quant::All,
                op: ArgOp::Eq(Value::Int(0)),
            }),
        }]
    );
}

#[test]
fn agents_scopes_and_grants() {
    let p = compiled().policy;
    assert_eq!(p.scopes[0].tools, ["fs.read", "web.*"]);
    assert_eq!(
        p.agents,
        [
            Agent {
                name: "main".into(),
                parent: None,
                scope: None,
                own_context: false
            },
            Agent {
                name: "researcher".into(),
                parent: Some(0),
                scope: Some(0),
                own_context: false
            },
            Agent {
                name: "helper".into(),
                parent: Some(1),
                scope: None,
                own_context: false
            },
        ]
    );
    assert_eq!(p.grants.len(), 9);
    assert_eq!(
        p.grants[1],
        Grant {
            name: "write_src".into(),
            agent: 0,
            tool: 1,
            resource: Some(Pattern::Glob("src/*.rs".into())),
            args: vec![Cond::Test {
                param: 1,
                quant: Quant::All,
                op: ArgOp::Ne(Value::Str(String::new()))
            }],
            quota: Quota::Limited(20),
            approval: true,
            expires_at: Some(86400),
            discovers: None,
        }
    );
    assert_eq!(p.grants[0].quota, Quota::Unlimited);
    assert_eq!(p.grants[3].discovers, Some(0));
    assert_eq!(
        p.grants[4].args,
        [
            Cond::Test {
                param: 0,
                quant: Quant::All,
                op: ArgOp::InSet(0)
            },
            Cond::Test {
                param: 2,
                quant: Quant::All,
                op: ArgOp::Eq(Value::Bool(false))
            },
        ]
    );
    assert_eq!(
        p.grants[5].args,
        [
            Cond::Test {
                param: 0,
                quant: Quant::All,
                op: ArgOp::Le(Decimal::from(600))
            },
            Cond::Test {
                param: 0,
                quant: Quant::All,
                op: ArgOp::Gt(Decimal::from(0))
            }
        ]
    );
    assert_eq!((p.grants[6].agent, p.grants[8].agent), (1, 2));
    assert_eq!(
        p.grants[7].resource,
        Some(Pattern::Exact("https://docs.rs/serde".into()))
    );
}

#[test]
fn rules() {
    let p = compiled().policy;
    assert_eq!(p.flow_rules.len(), 3);
    assert_eq!(
        p.flow_rules[0].effect,
        FlowEffect::Deny(LabelPattern {
            min_sensitivity: Some(2),
            ..LabelPattern::ANY
        })
    );
    assert_eq!(
        p.flow_rules[1].effect,
        FlowEffect::Deny(LabelPattern {
            min_sensitivity: None,
            any_category: CategorySet::from_indexes([0, 1]),
            untrusted: true,
        })
    );
    assert_eq!(p.flow_rules[1].sink, 2);
    assert_eq!(
        p.flow_rules[1].when,
        Cond::Test {
            param: "to".to_string(),
            quant: Quant::All,
            op: ArgOp::Suffix("@example.com".into())
        }
    );
    assert_eq!(
        p.flow_rules[2].effect,
        FlowEffect::Allow(Label::new(1, CategorySet::EMPTY, true))
    );

    assert_eq!(p.path_rules.len(), 4);
    let exfil = &p.path_rules[0];
    assert_eq!(exfil.effect, RuleEffect::Deny);
    assert_eq!(
        exfil.kind,
        PathKind::Sequence(vec![
            StepPattern {
                reads: Some(LabelPattern {
                    any_category: CategorySet::single(0),
                    ..LabelPattern::ANY
                }),
                ..StepPattern::default()
            },
            StepPattern {
                tool: Some("web.fetch".into()),
                sink: Some(0),
                reads: None,
                when: None,
            },
        ])
    );
    assert_eq!(
        exfil.reset,
        Some(StepPattern {
            tool: Some("tests.run".into()),
            ..StepPattern::default()
        })
    );
    let web_then_shell = &p.path_rules[1];
    assert_eq!(web_then_shell.effect, RuleEffect::Pause);
    assert!(
        matches!(&web_then_shell.kind, PathKind::Sequence(s) if s.len() == 3 && s[1] == StepPattern::default())
    );
    assert_eq!(
        p.path_rules[3].kind,
        PathKind::AtMost {
            max: 5,
            step: StepPattern {
                tool: Some("fs.*".into()),
                sink: Some(1),
                reads: None,
                when: None,
            },
        }
    );
    assert_eq!(p.path_rules[3].effect, RuleEffect::Pause);

    let o = &p.obligations;
    assert_eq!(
        (o[0].fact, o[0].before.as_str(), o[0].since.as_deref()),
        (0, "email.send", Some("fs.write"))
    );
    assert_eq!(o[0].effect, RuleEffect::Deny);
    assert_eq!(
        (o[1].before.as_str(), o[1].since.as_deref(), o[1].effect),
        ("email.*", None, RuleEffect::Pause)
    );
}

#[test]
fn default_name_is_used_without_a_policy_statement() {
    let c = agenra_policy::compile("tool t();", "from-stem").unwrap();
    assert_eq!(c.policy.name, "from-stem");
    assert_eq!(c.policy.levels, ["public"]);
    assert_eq!(c.policy.agents.len(), 1);
}

#[test]
fn load_reads_a_file_and_uses_its_stem() {
    let dir = std::env::temp_dir().join(format!("agenra-policy-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("my_policy.agr");
    std::fs::write(&good, "tool t();\ngrant g: t quota 1;\n").unwrap();
    let (compiled, text) = agenra_policy::load(&good).unwrap();
    assert_eq!(compiled.policy.name, "my_policy");
    assert!(text.contains("grant g"));

    let bad = dir.join("bad.agr");
    std::fs::write(&bad, "grant g: nope quota 1;\n").unwrap();
    let err = agenra_policy::load(&bad).unwrap_err();
    assert!(matches!(err, agenra_policy::LoadError::Policy { .. }));
    assert!(
        err.to_string()
            .contains("bad.agr:1:10: error: unknown tool `nope`"),
        "{err}"
    );

    let missing = agenra_policy::load(&dir.join("missing.agr")).unwrap_err();
    assert!(matches!(missing, agenra_policy::LoadError::Io { .. }));
    std::fs::remove_dir_all(&dir).ok();
}
