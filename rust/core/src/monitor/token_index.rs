//! Token provenance inside text (`docs/semantics.md`): the typed tokens of
//! every task text and output, canonicalised and indexed once when the
//! task or result is reported, so judging an argument's token is one hash
//! probe. Kept only for policies with token tests.

use crate::fields::OutputLabels;
use crate::tokens::{
    labelled_output_tokens, output_tokens, text_tokens_with, Token, TokenJudge, TokenOrigin,
    TokenShape, MAX_OUTPUT_TOKENS,
};
// Tokens come from untrusted text: SipHash with a random key, not FxHash.
use std::collections::{HashMap, HashSet};

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct TokenIndex {
    /// Tokens of task texts.
    task: HashSet<Token>,
    /// Tokens of outputs: whether some untrusted output holds it.
    outputs: HashMap<Token, bool>,
    /// An untrusted output had more than `MAX_OUTPUT_TOKENS` tokens.
    overflow: bool,
    /// The policy's declared token shapes (texts are cut with them too).
    shapes: Vec<TokenShape>,
}

impl TokenIndex {
    /// An empty index that also finds the tokens of `shapes`.
    pub fn new(shapes: &[TokenShape]) -> TokenIndex {
        TokenIndex {
            shapes: shapes.to_vec(),
            ..TokenIndex::default()
        }
    }

    pub fn add_task(&mut self, text: &str) {
        let mut ts = Vec::new();
        text_tokens_with(text, &self.shapes, &mut ts);
        self.task.extend(ts);
    }

    /// Indexes an output's tokens, each judged by its field's label
    /// (`docs/semantics.md`, "Per-field output labels").
    pub fn add_output(&mut self, labels: &OutputLabels, output: &serde_json::Value) {
        // Most tools declare no fields: every token has the output's label.
        if labels.fields.is_empty() {
            let untrusted = !labels.whole.trusted;
            let mut ts = Vec::new();
            output_tokens(output, &self.shapes, &mut ts);
            if ts.len() > MAX_OUTPUT_TOKENS {
                self.overflow |= untrusted;
                ts.truncate(MAX_OUTPUT_TOKENS);
            }
            for t in ts {
                *self.outputs.entry(t).or_insert(false) |= untrusted;
            }
            return;
        }
        let mut ts = Vec::new();
        labelled_output_tokens(output, labels, &self.shapes, &mut ts);
        if ts.len() > MAX_OUTPUT_TOKENS {
            self.overflow |= ts.iter().any(|(_, trusted)| !trusted);
            ts.truncate(MAX_OUTPUT_TOKENS);
        }
        for (t, trusted) in ts {
            *self.outputs.entry(t).or_insert(false) |= !trusted;
        }
    }
}

impl TokenJudge for TokenIndex {
    fn origin(&self, token: &Token) -> TokenOrigin {
        if self.task.contains(token) {
            TokenOrigin::Task
        } else if !self.overflow && self.outputs.get(token) == Some(&false) {
            TokenOrigin::TrustedOutput
        } else {
            TokenOrigin::Elsewhere
        }
    }

    fn shapes(&self) -> &[TokenShape] {
        &self.shapes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::label::{CategorySet, Label};
    use serde_json::json;

    const TRUSTED: Label = Label::BOTTOM;

    fn untrusted() -> Label {
        Label::new(0, CategorySet::EMPTY, false)
    }

    fn token(text: &str) -> Token {
        let mut ts = Vec::new();
        crate::tokens::text_tokens(text, &mut ts);
        assert_eq!(ts.len(), 1, "{text}");
        ts.remove(0)
    }

    /// `n` distinct e-mail tokens in one string.
    fn emails(n: usize) -> serde_json::Value {
        json!((0..n)
            .map(|i| format!("u{i}@x.example"))
            .collect::<Vec<_>>()
            .join(" "))
    }

    #[test]
    fn origins_from_tasks_trusted_and_untrusted_outputs() {
        let mut ix = TokenIndex::default();
        ix.add_task("mail bob@x.example");
        ix.add_output(
            &OutputLabels::whole(TRUSTED),
            &json!("ann@x.example and eve@x.example"),
        );
        ix.add_output(&OutputLabels::whole(untrusted()), &json!("eve@x.example"));
        assert_eq!(ix.origin(&token("bob@x.example")), TokenOrigin::Task);
        assert_eq!(
            ix.origin(&token("ann@x.example")),
            TokenOrigin::TrustedOutput
        );
        // Also in an untrusted output, whatever the order.
        assert_eq!(ix.origin(&token("eve@x.example")), TokenOrigin::Elsewhere);
        ix.add_output(&OutputLabels::whole(TRUSTED), &json!("eve@x.example"));
        assert_eq!(ix.origin(&token("eve@x.example")), TokenOrigin::Elsewhere);
        assert_eq!(ix.origin(&token("zed@x.example")), TokenOrigin::Elsewhere);
    }

    #[test]
    fn field_labels_judge_each_token() {
        let mut ix = TokenIndex::default();
        let labels = OutputLabels {
            whole: untrusted(),
            fields: vec![(vec!["iban".into()], TRUSTED)],
        };
        let out = json!({"iban": "ann@x.example", "subject": "eve@x.example"});
        ix.add_output(&labels, &out);
        assert_eq!(
            ix.origin(&token("ann@x.example")),
            TokenOrigin::TrustedOutput
        );
        assert_eq!(ix.origin(&token("eve@x.example")), TokenOrigin::Elsewhere);
    }

    /// An untrusted output over the bound makes every output token
    /// `Elsewhere` (its tail was not indexed); at the bound, nothing
    /// changes; a trusted one over it is only truncated.
    #[test]
    fn an_untrusted_output_over_the_bound_trusts_no_output_token() {
        for fields in [false, true] {
            let labels = |l: Label| OutputLabels {
                whole: l,
                fields: if fields {
                    vec![(vec!["none".into()], TRUSTED)]
                } else {
                    vec![]
                },
            };
            let mut ix = TokenIndex::default();
            ix.add_output(&labels(TRUSTED), &json!("ann@x.example"));
            ix.add_output(&labels(untrusted()), &emails(MAX_OUTPUT_TOKENS));
            ix.add_output(&labels(TRUSTED), &emails(MAX_OUTPUT_TOKENS + 1));
            assert_eq!(
                ix.origin(&token("ann@x.example")),
                TokenOrigin::TrustedOutput
            );
            ix.add_output(&labels(untrusted()), &emails(MAX_OUTPUT_TOKENS + 1));
            assert_eq!(
                ix.origin(&token("ann@x.example")),
                TokenOrigin::Elsewhere,
                "{fields}"
            );
        }
    }
}
