//! The answer a session keeps for each recent or open call, so that a
//! retried call gets exactly the answer it was given (issue #28, bounded
//! memory).
//!
//! Kept compactly: a session holds 8 to 12 of them at all times, and an
//! [`Outcome`] clone was about 430 heap bytes in eight blocks (a
//! 300-byte struct, the ledger hash as 71 characters of text, and small
//! strings and vectors, each block rounded up by the allocator). What
//! the session or the table's key already knows (tenant, session, policy
//! hash, call id) is not kept; the ledger hash is its 32 bytes; the texts
//! (rule, reason, path, grants) share one heap block: about 160 bytes in
//! two blocks. [`Answer::outcome`] gives back the same `Outcome`, field
//! for field (`tests::an_answer_gives_back_the_outcome_it_kept`).

use crate::api::Outcome;

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

/// The texts of an answer (rule, reason, path, grants, refunded), one
/// after another in a single block: each text is its length (LEB128) and
/// its bytes, each list its count and its texts. One heap block, not
/// seven: each block costs its allocator a header and rounding (at least
/// 32 bytes with glibc, for a 3-byte grant name).
struct Texts(Box<[u8]>);

fn put_len(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let low = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(low);
            return;
        }
        out.push(low | 0x80);
    }
}

fn put_text(out: &mut Vec<u8>, text: &str) {
    put_len(out, text.len());
    out.extend_from_slice(text.as_bytes());
}

fn put_list<'a>(out: &mut Vec<u8>, texts: impl ExactSizeIterator<Item = &'a str>) {
    put_len(out, texts.len());
    for t in texts {
        put_text(out, t);
    }
}

/// Reads what [`Texts::new`] wrote; `None` on anything else (never, for
/// texts it wrote).
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn len(&mut self) -> Option<usize> {
        let mut n = 0usize;
        for shift in (0..usize::BITS).step_by(7) {
            let (&b, rest) = self.0.split_first()?;
            self.0 = rest;
            n |= usize::from(b & 0x7f).checked_shl(shift)?;
            if b & 0x80 == 0 {
                return Some(n);
            }
        }
        None
    }

    fn text(&mut self) -> Option<String> {
        let n = self.len()?;
        let (bytes, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        String::from_utf8(bytes.to_vec()).ok()
    }

    fn list(&mut self) -> Option<Vec<String>> {
        let n = self.len()?;
        // Each text takes at least its length byte: no allocation for a
        // count larger than what is left.
        if n > self.0.len() {
            return None;
        }
        (0..n).map(|_| self.text()).collect()
    }
}

/// The texts of an answer, read back.
struct Read {
    rule: Option<String>,
    reason: String,
    path: Vec<String>,
    grants: Vec<String>,
    refunded: Vec<String>,
}

impl Texts {
    fn new(o: &Outcome) -> Texts {
        let mut out = Vec::new();
        put_list(&mut out, o.rule.iter().map(String::as_str));
        put_text(&mut out, &o.reason);
        for list in [&o.path, &o.grants, &o.refunded] {
            put_list(&mut out, list.iter().map(String::as_str));
        }
        Texts(out.into_boxed_slice())
    }

    fn read(&self) -> Option<Read> {
        let mut r = Reader(&self.0);
        let mut rule = r.list()?;
        if rule.len() > 1 {
            return None;
        }
        let read = Read {
            rule: rule.pop(),
            reason: r.text()?,
            path: r.list()?,
            grants: r.list()?,
            refunded: r.list()?,
        };
        r.0.is_empty().then_some(read)
    }
}

/// A call's answer as a session keeps it (see the module doc).
pub(super) struct Answer {
    /// The call as it was asked (a retry must ask the same).
    pub(super) fingerprint: [u8; 16],
    decision: Option<&'static str>,
    left: Option<u64>,
    ledger_hash: LedgerHash,
    texts: Texts,
}

impl Answer {
    /// Keeps `outcome`, the answer to a call asked as `fingerprint`.
    pub(super) fn new(fingerprint: [u8; 16], outcome: &Outcome) -> Answer {
        Answer {
            fingerprint,
            decision: outcome.decision,
            left: outcome.left,
            ledger_hash: LedgerHash::new(&outcome.ledger_hash),
            texts: Texts::new(outcome),
        }
    }

    /// `ALLOW`, `DENY` or `PAUSE`.
    pub(super) fn decision(&self) -> Option<&'static str> {
        self.decision
    }

    /// The answer as it was given to call `call` of `session` (of
    /// `tenant`, under the policy `policy_hash`): an answer is kept only
    /// for a call, and before its audit record has a position. `None`
    /// only if the kept texts do not read back (never: they are written
    /// here).
    pub(super) fn outcome(
        &self,
        tenant: &str,
        session: &str,
        call: &str,
        policy_hash: String,
    ) -> Option<Outcome> {
        let t = self.texts.read()?;
        Some(Outcome {
            tenant: tenant.to_string(),
            session: session.to_string(),
            kind: "call",
            call: call.to_string(),
            decision: self.decision,
            rule: t.rule,
            reason: t.reason,
            path: t.path,
            grants: t.grants,
            refunded: t.refunded,
            left: self.left,
            policy_hash,
            ledger_hash: self.ledger_hash.text(),
            audit_seq: None,
            replayed: false,
        })
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
            let back = kept.outcome("t", "s", "c1", "sha256:00".into()).unwrap();
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
        let back = Answer::new([0; 16], &empty)
            .outcome("t", "s", "c1", "sha256:00".into())
            .unwrap();
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
    fn long_and_unusual_texts_read_back() {
        let long = "é".repeat(300);
        let given = Outcome {
            reason: long.clone(),
            rule: Some(String::new()),
            path: vec![String::new(), long.clone(), "\u{0}".into()],
            grants: (0..200).map(|i| format!("g{i}")).collect(),
            ..outcome(String::new())
        };
        let back = Answer::new([2; 16], &given)
            .outcome("t", "s", "c1", "sha256:00".into())
            .unwrap();
        assert!(same(&given, &back), "{back:?}");
    }

    #[test]
    fn damaged_texts_do_not_read() {
        let texts = Texts::new(&outcome(String::new())).0;
        assert!(Texts(texts.clone()).read().is_some());
        // Cut short anywhere, or with a byte too many: nothing reads.
        for cut in 0..texts.len() {
            assert!(Texts(texts[..cut].into()).read().is_none(), "cut at {cut}");
        }
        let mut longer = texts.to_vec();
        longer.push(0);
        assert!(Texts(longer.into()).read().is_none());
        // A length that never ends, or overflows.
        assert!(Texts(vec![0x80; 20].into()).read().is_none());
        assert!(Texts(vec![0xff; 11].into()).read().is_none());
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
