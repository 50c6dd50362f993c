//! Token provenance inside text (`docs/semantics.md`): the typed tokens of
//! every task text and output, canonicalised and indexed once when the
//! task or result is reported, so judging an argument's token is one hash
//! probe. Kept only for policies with token tests.

use crate::fields::OutputLabels;
use crate::tokens::{
    labelled_output_tokens, output_tokens, text_tokens, Token, TokenJudge, TokenOrigin,
    MAX_OUTPUT_TOKENS,
};
// Tokens come from untrusted text: SipHash with a random key, not FxHash.
use std::collections::{HashMap, HashSet};

#[derive(Clone, Debug, Default)]
pub(crate) struct TokenIndex {
    /// Tokens of task texts.
    task: HashSet<Token>,
    /// Tokens of outputs: whether some untrusted output holds it.
    outputs: HashMap<Token, bool>,
    /// An untrusted output had more than `MAX_OUTPUT_TOKENS` tokens.
    overflow: bool,
}

impl TokenIndex {
    pub fn add_task(&mut self, text: &str) {
        let mut ts = Vec::new();
        text_tokens(text, &mut ts);
        self.task.extend(ts);
    }

    /// Indexes an output's tokens, each judged by its field's label
    /// (`docs/semantics.md`, "Per-field output labels").
    pub fn add_output(&mut self, labels: &OutputLabels, output: &serde_json::Value) {
        // Most tools declare no fields: every token has the output's label.
        if labels.fields.is_empty() {
            let untrusted = !labels.whole.trusted;
            let mut ts = Vec::new();
            output_tokens(output, &mut ts);
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
        labelled_output_tokens(output, labels, &mut ts);
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
}
