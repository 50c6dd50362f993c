//! The answer a session keeps for each recent or open call, so that a
//! retried call gets exactly the answer it was given (issue #28, bounded
//! memory).
//!
//! Kept compactly: a session holds 8 to 12 of them at all times, and an
//! [`Outcome`] clone was about 700 heap bytes (a 350-byte struct, the
//! ledger hash as 71 characters of text, and seven small strings and
//! vectors). What the session or the table's key already knows (tenant,
//! session, policy hash, call id) is not kept; the ledger hash is its 32
//! bytes; names are boxed strings in a boxed slice, without spare
//! capacity. [`Answer::outcome`] gives back the same `Outcome`, field for
//! field (`tests::an_answer_gives_back_the_outcome_it_kept`).

use crate::api::Outcome;

/// Names (rules, grants, path steps) without spare capacity.
type Names = Box<[Box<str>]>;

/// The ledger hash of an answer: the digest itself when the text is the
/// `sha256:<64 lower-case hex digits>` that `Hash`'s `Display` prints
/// (always, for answers the monitor gave), else the text as recorded.
enum LedgerHash {
    Sha256([u8; 32]),
    Text(Box<str>),
}

const PREFIX: &str = "sha256:";

impl LedgerHash {
    fn new(text: &str) -> LedgerHash {
        match parse_sha256(text) {
            Some(bytes) => LedgerHash::Sha256(bytes),
            None => LedgerHash::Text(text.into()),
        }
    }

    fn text(&self) -> String {
        match self {
            LedgerHash::Sha256(bytes) => agenra_core::Hash(*bytes).to_string(),
            LedgerHash::Text(t) => t.to_string(),
        }
    }
}

/// The digest of `sha256:<hex>` when printing it back gives `text` again
/// (64 lower-case hex digits), so that no text is ever changed.
fn parse_sha256(text: &str) -> Option<[u8; 32]> {
    let hex = text.strip_prefix(PREFIX)?.as_bytes();
    if hex.len() != 64 {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut bytes = [0u8; 32];
    for (b, pair) in bytes.iter_mut().zip(hex.chunks_exact(2)) {
        *b = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(bytes)
}

fn names(v: &[String]) -> Names {
    v.iter().map(|s| Box::from(s.as_str())).collect()
}

fn strings(v: &Names) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A call's answer as a session keeps it (see the module doc).
pub(super) struct Answer {
    /// The call as it was asked (a retry must ask the same).
    pub(super) fingerprint: [u8; 16],
    decision: Option<&'static str>,
    rule: Option<Box<str>>,
    reason: Box<str>,
    path: Names,
    grants: Names,
    refunded: Names,
    left: Option<u64>,
    ledger_hash: LedgerHash,
}

impl Answer {
    /// Keeps `outcome`, the answer to a call asked as `fingerprint`.
    pub(super) fn new(fingerprint: [u8; 16], outcome: &Outcome) -> Answer {
        Answer {
            fingerprint,
            decision: outcome.decision,
            rule: outcome.rule.as_deref().map(Box::from),
            reason: outcome.reason.as_str().into(),
            path: names(&outcome.path),
            grants: names(&outcome.grants),
            refunded: names(&outcome.refunded),
            left: outcome.left,
            ledger_hash: LedgerHash::new(&outcome.ledger_hash),
        }
    }

    /// `ALLOW`, `DENY` or `PAUSE`.
    pub(super) fn decision(&self) -> Option<&'static str> {
        self.decision
    }

    /// The answer as it was given to call `call` of `session` (of
    /// `tenant`, under the policy `policy_hash`): an answer is kept only
    /// for a call, and before its audit record has a position.
    pub(super) fn outcome(
        &self,
        tenant: &str,
        session: &str,
        call: &str,
        policy_hash: String,
    ) -> Outcome {
        Outcome {
            tenant: tenant.to_string(),
            session: session.to_string(),
            kind: "call",
            call: call.to_string(),
            decision: self.decision,
            rule: self.rule.as_deref().map(str::to_string),
            reason: self.reason.to_string(),
            path: strings(&self.path),
            grants: strings(&self.grants),
            refunded: strings(&self.refunded),
            left: self.left,
            policy_hash,
            ledger_hash: self.ledger_hash.text(),
            audit_seq: None,
            replayed: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(ledger_hash: String) -> Outcome {
        Outcome {
            tenant: "t".into(),
            session: "s".into(),
            kind: "call",
            call: "c1".into(),
            decision: Some("DENY"),
            rule: Some("no-exfil".into()),
            reason: "a flow from `read` reaches `send`".into(),
            path: vec!["c0".into(), "context".into(), "c1".into()],
            grants: vec!["pay".into()],
            refunded: vec!["refund".into(), "other".into()],
            left: Some(7),
            policy_hash: "sha256:00".into(),
            ledger_hash,
            audit_seq: None,
            replayed: false,
        }
    }

    fn same(a: &Outcome, b: &Outcome) -> bool {
        serde_json::to_value(a).ok() == serde_json::to_value(b).ok() && a.kind == b.kind
    }

    #[test]
    fn an_answer_gives_back_the_outcome_it_kept() {
        let hash = agenra_core::Hash::of_bytes(b"ledger").to_string();
        for ledger in [
            hash.clone(),
            hash.to_uppercase(),
            "sha256:abc".into(),
            String::new(),
        ] {
            let given = outcome(ledger.clone());
            let kept = Answer::new([1; 16], &given);
            let back = kept.outcome("t", "s", "c1", "sha256:00".into());
            assert!(same(&given, &back), "{ledger}: {back:?}");
            assert_eq!(back.ledger_hash, ledger);
            assert_eq!(kept.decision(), Some("DENY"));
        }
        let kept = Answer::new([1; 16], &outcome(hash.clone()));
        assert!(matches!(kept.ledger_hash, LedgerHash::Sha256(_)));
        let empty = Outcome {
            rule: None,
            path: vec![],
            left: None,
            decision: None,
            ..outcome(hash)
        };
        let back = Answer::new([0; 16], &empty).outcome("t", "s", "c1", "sha256:00".into());
        assert!(same(&empty, &back), "{back:?}");
    }

    #[test]
    fn only_printed_digests_are_parsed() {
        let hash = agenra_core::Hash::of_bytes(b"x");
        assert_eq!(parse_sha256(&hash.to_string()), Some(hash.0));
        for text in [
            hash.to_string().to_uppercase(),
            hash.hex(),
            format!("{hash}0"),
            format!("sha256:{}", &hash.hex()[..63]),
            format!("sha256:{}g", &hash.hex()[..63]),
        ] {
            assert_eq!(parse_sha256(&text), None, "{text}");
        }
    }

    #[test]
    fn an_answer_is_smaller_than_the_outcome() {
        assert!(
            std::mem::size_of::<Answer>() <= 200,
            "{}",
            std::mem::size_of::<Answer>()
        );
        assert!(std::mem::size_of::<Answer>() < std::mem::size_of::<Outcome>());
    }
}
