//! Which token made a token test decide a call, so that a DENY or PAUSE
//! names it (`docs/semantics.md`, "Token provenance inside text"): the
//! kind, the token (truncated), the parameter it is in and its origin.
//!
//! Computed only after a rule with a token test stopped a call, never on
//! the hot path. A witness is a fact that makes one token test come out
//! the way that lets the rule's condition hold: a token of the test's kind
//! whose origin the test accepts (`any`, not negated) or refuses (`all`,
//! under `not`).

pub use crate::decision::{TokenEvidence, SHOWN_CHARS};

use crate::decision::Rule;
use crate::policy::{PathKind, Policy, ToolId};
use crate::tokens::{TokenJudge, TokenOrigin};
use crate::value::{ArgCond, Cond, Quant, Value};

/// The condition of `rule` that concerns the call to `tool`, resolved to
/// its parameters (`None`: the rule has no token test on this call).
fn deciding_cond(policy: &Policy, rule: Rule, tool: ToolId) -> Option<ArgCond> {
    let t = policy.tools.get(tool)?;
    let resolve = |c: &crate::value::NamedCond| c.resolve(&|n| t.param_index(n));
    let cond = match rule {
        Rule::Call(c) => policy.call_rules.get(c)?.when.clone(),
        Rule::Flow(f) => resolve(&policy.flow_rules.get(f)?.when),
        Rule::Receive(r) => resolve(&policy.receive_rules.get(r)?.when),
        Rule::Path(p) => {
            // The call being decided is the last step (or the counted one).
            let step = match &policy.path_rules.get(p)?.kind {
                PathKind::Sequence(steps) => steps.last()?,
                PathKind::AtMost { step, .. } => step,
            };
            resolve(step.when.as_ref()?)
        }
        _ => return None,
    };
    cond.has_tokens().then_some(cond)
}

/// The token that made `rule` stop a call to `tool` with `args`, judged
/// by `judge` as the decision was (`None` when no token test decided).
pub fn evidence(
    policy: &Policy,
    rule: Rule,
    tool: ToolId,
    args: &[Value],
    judge: &dyn TokenJudge,
) -> Option<Box<TokenEvidence>> {
    let cond = deciding_cond(policy, rule, tool)?;
    let (param, token, origin) = witness(&cond, true, args, judge)?;
    let name = policy.tools.get(tool)?.params.get(param)?.name.clone();
    Some(Box::new(TokenEvidence {
        kind: token.kind,
        text: shorten(&token.text),
        param: name,
        origin,
    }))
}

type Witness = (usize, crate::tokens::Token, TokenOrigin);

/// A witness in `c`, read with polarity `positive` (see the module doc).
fn witness(c: &ArgCond, positive: bool, args: &[Value], judge: &dyn TokenJudge) -> Option<Witness> {
    match c {
        Cond::Tokens {
            param,
            quant,
            kind,
            from,
        } => {
            // `any` holds through an accepted token; `all` fails through a
            // refused one (what `not all` needs).
            let want_accepted = match (quant, positive) {
                (Quant::Any, true) => true,
                (Quant::All, false) => false,
                _ => return None,
            };
            let tokens = args.get(*param)?.tokens_with(judge.shapes());
            tokens
                .into_iter()
                .filter(|t| kind.is_none_or(|k| t.kind == k))
                .map(|t| {
                    let o = judge.origin(&t);
                    (t, o)
                })
                .find(|(_, o)| from.contains(o) == want_accepted)
                .map(|(t, o)| (*param, t, o))
        }
        Cond::Not(inner) => witness(inner, !positive, args, judge),
        Cond::And(cs) | Cond::Or(cs) => cs.iter().find_map(|c| witness(c, positive, args, judge)),
        Cond::Test { .. } | Cond::Agent(_) | Cond::Each { .. } | Cond::Elem(_) => None,
    }
}

/// `text`, cut to [`SHOWN_CHARS`] characters with `…` when longer.
fn shorten(text: &str) -> String {
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::{NoSources, Token, TokenKind};

    /// Judges tokens of a task text as from the user, the rest elsewhere.
    struct Task(&'static str);
    impl TokenJudge for Task {
        fn origin(&self, t: &Token) -> TokenOrigin {
            if self.0.contains(t.text.as_str()) {
                TokenOrigin::Task
            } else {
                TokenOrigin::Elsewhere
            }
        }
    }

    fn test(quant: Quant, from: Vec<TokenOrigin>) -> ArgCond {
        Cond::Tokens {
            param: 0,
            quant,
            kind: Some(TokenKind::Url),
            from,
        }
    }

    #[test]
    fn the_witness_follows_the_polarity() {
        let args = [Value::Str(
            "see https://a.example and https://evil.example/x".into(),
        )];
        let judge = Task("https://a.example");
        let any_untrusted = test(Quant::Any, vec![TokenOrigin::Elsewhere]);
        let w = witness(&any_untrusted, true, &args, &judge).unwrap();
        assert_eq!(
            (w.1.text.as_str(), w.2),
            ("https://evil.example/x", TokenOrigin::Elsewhere)
        );
        // `not all url from user`: the refused one.
        let not_all_user = Cond::Not(Box::new(test(Quant::All, vec![TokenOrigin::Task])));
        let w = witness(&not_all_user, true, &args, &judge).unwrap();
        assert_eq!(w.1.text, "https://evil.example/x");
        // `any url from user` negated, or `all` positive: no single token decides.
        assert!(witness(
            &Cond::Not(Box::new(any_untrusted.clone())),
            true,
            &args,
            &judge
        )
        .is_none());
        assert!(witness(
            &test(Quant::All, vec![TokenOrigin::Elsewhere]),
            true,
            &args,
            &judge
        )
        .is_none());
        // Nothing accepted: no witness.
        assert!(witness(
            &test(Quant::Any, vec![TokenOrigin::TrustedOutput]),
            true,
            &args,
            &NoSources
        )
        .is_none());
    }

    #[test]
    fn long_tokens_are_shortened() {
        let long = format!("https://e.example/{}", "é".repeat(80));
        let s = shorten(&long);
        assert_eq!(s.chars().count(), SHOWN_CHARS + 1);
        assert!(s.ends_with('…') && long.starts_with(s.trim_end_matches('…')));
        assert_eq!(shorten("short"), "short");
    }
}
