//! Audit records and the hash chain.
//!
//! A record is stored as one line of JSON: the record's own fields (in the
//! fixed order of [`Record`]), then its hash as the last field:
//!
//! ```text
//! {"seq":7,"prev":"sha256:…","time_ms":…,"kind":"event",…,"hash":"sha256:…"}
//! ```
//!
//! The hash is the SHA-256 of the line with the `,"hash":"…"` field taken
//! out (the exact bytes, never a re-serialization), and `prev` is the hash
//! of the record before it ([`GENESIS`] for the first). Changing, removing,
//! inserting or reordering a record breaks the chain at that record.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The `prev` of the first record.
pub const GENESIS: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

const HASH_FIELD: &[u8] = b",\"hash\":\"";

/// What a record is about.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A policy revision the server started with or reloaded (its compiled
    /// model, its text, and the certificate that admitted it).
    Policy,
    /// A session was opened under a policy.
    Session,
    /// An event was applied to a session, with what the monitor answered.
    #[default]
    Event,
    /// A request the perimeter refused (no or a wrong credential, a role or
    /// tenant it does not hold, a cross-site request): who, what, why.
    /// Recovery skips it; nothing was decided.
    Refused,
    /// A signed checkpoint of the log before it (`docs/store.md`,
    /// "Signed checkpoints"). Recovery skips it; nothing was decided.
    Checkpoint,
    /// A session was closed (`DELETE /v1/sessions/{id}`): no event is
    /// applied to it afterwards; its units stay spent.
    Closed,
    /// A session's state after its latest event (`serve --snapshot-every`,
    /// `docs/store.md`, "Snapshots"): recovery restores it and replays
    /// only the session's later events. Nothing was decided.
    Snapshot,
}

/// One audit record. Fields that do not apply to a kind are absent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// 1-based position in the log (assigned when appended).
    #[serde(default)]
    pub seq: u64,
    /// The previous record's hash (assigned when appended).
    #[serde(default)]
    pub prev: String,
    /// Wall-clock time the server wrote the record (milliseconds since the
    /// Unix epoch). Events carry their own time as well.
    #[serde(default)]
    pub time_ms: u64,
    /// What the record is about.
    pub kind: Kind,
    /// The tenant the session belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The session's id, unique within its tenant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The agent the session was opened for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The policy's content hash (`sha256:…`).
    #[serde(default)]
    pub policy_hash: String,
    /// The monitor event as applied (`docs/events.md`), without its
    /// `session` field (the record names the session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<serde_json::Value>,
    /// `ALLOW`, `DENY` or `PAUSE` for calls and approvals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
    /// The rule or grant that decided (or that the event concerns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The reason, as a sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// For a DENY or PAUSE by a flow, path rule or obligation: the call (or
    /// task) ids along the violating path: `context` for what the session
    /// has read, `#N` for another node that is not a call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub path: Vec<String>,
    /// Grants whose units the event took (calls) or returned (results,
    /// rejections, failed re-checks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<String>,
    /// The session's ledger hash after the event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger_hash: Option<String>,
    /// For a policy record: the compiled policy (canonical JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<serde_json::Value>,
    /// For a policy record: where it came from (a file name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// For a policy revision: the `agenra certify` report against the
    /// policy it replaced (absent for the first policy, or when the reload
    /// did not ask for certification).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate: Option<serde_json::Value>,
    /// Who made the request, as `role:name` of its credential (approvals,
    /// rejections, policy revisions, refusals); `server:…` for what the
    /// server did by itself (an expired pause).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// The time the client claimed (seconds), when it sent one: recorded,
    /// never used to decide (the server's clock decides).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_time: Option<u64>,
    /// For an approval or rejection: the digest of the paused call the
    /// approver was shown (`docs/http-api.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// The approver's (or admin's) own words: why they approved, rejected
    /// or revised. For a policy revision also the hash it replaced, in
    /// `previous`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// For a policy revision: the policy hash it replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<String>,
    /// For a checkpoint: the heads it commits to and their signature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<Checkpoint>,
    /// For a session record: the window of graph nodes its session keeps
    /// in memory (a compact session, `serve --compact-window`); absent: the
    /// whole graph. Recovery rebuilds the session with the same window, so
    /// its decisions replay exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<u64>,
    /// In a log partitioned by session ([`crate::parts`]): the partition
    /// the record belongs to (absent in the `log` partition and in the
    /// single chain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// For a snapshot record: the session's encoded state (its
    /// `ledger_hash` and `policy_hash` are the record's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<Snapshot>,
}

/// A session's state in a snapshot record ([`Kind::Snapshot`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The session's events it covers: the state is the one after the
    /// session's `events`-th event record, which precedes it in the log.
    pub events: u64,
    /// The snapshot format (`agenra_core::monitor::SNAPSHOT_FORMAT`).
    pub format: u32,
    /// The state's bytes (CBOR), in lower-case hex.
    pub state: String,
    /// `sha256:` of the state's bytes.
    pub sha256: String,
}

/// A position in the log: the last record's sequence number and hash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    /// Records in the log (the last one's `seq`).
    pub seq: u64,
    /// The last record's hash ([`GENESIS`] for an empty log).
    pub hash: String,
}

impl Default for Head {
    fn default() -> Head {
        Head {
            seq: 0,
            hash: GENESIS.to_string(),
        }
    }
}

/// A broken chain: the first record that does not check, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("audit record {seq}: {reason}")]
pub struct VerifyError {
    /// The record's position (1-based; for a file, its line number when the
    /// record's own `seq` cannot be read).
    pub seq: u64,
    /// What is wrong with it.
    pub reason: String,
}

/// `sha256:` and the digest in lower-case hex (a table, not `write!`:
/// recovery formats one per record).
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(7 + 2 * bytes.len());
    s.push_str("sha256:");
    for &b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    s
}

/// The stored line of `record` (whose `seq` and `prev` are set) and its
/// hash.
pub fn chain_line(record: &Record) -> Result<(Vec<u8>, String), serde_json::Error> {
    let mut line = serde_json::to_vec(record)?;
    let hash = hex(&Sha256::digest(&line));
    // `{…}` becomes `{…,"hash":"sha256:…"}`.
    line.pop();
    line.extend_from_slice(HASH_FIELD);
    line.extend_from_slice(hash.as_bytes());
    line.extend_from_slice(b"\"}");
    Ok((line, hash))
}

/// Splits a stored line into the hash it claims and the hash its bytes
/// have. `None` when the line does not end in a `"hash"` field.
pub fn split_line(line: &[u8]) -> Option<(&str, String)> {
    let (claimed, digest) = line_digest(line)?;
    Some((claimed, hex(&digest)))
}

/// [`split_line`] with the hash the bytes have as its 32 bytes.
pub(crate) fn line_digest(line: &[u8]) -> Option<(&str, [u8; 32])> {
    let (claimed, body) = split_claimed(line)?;
    let mut hasher = Sha256::new();
    hasher.update(body);
    hasher.update(b"}");
    Some((claimed, hasher.finalize().into()))
}

/// The hash a line claims.
fn claimed_hash(line: &[u8]) -> Option<&str> {
    split_claimed(line).map(|(claimed, _)| claimed)
}

/// The hash a line claims, and its bytes before the `"hash"` field.
fn split_claimed(line: &[u8]) -> Option<(&str, &[u8])> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let body = line.strip_suffix(b"\"}")?;
    let at = body
        .windows(HASH_FIELD.len())
        .rposition(|w| w == HASH_FIELD)?;
    let claimed = std::str::from_utf8(&body[at + HASH_FIELD.len()..]).ok()?;
    Some((claimed, &body[..at]))
}

/// The fields the chain check reads.
#[derive(Deserialize)]
struct Link<'a> {
    seq: u64,
    #[serde(borrow)]
    prev: std::borrow::Cow<'a, str>,
}

/// Checks records one at a time.
#[derive(Default)]
pub(crate) struct Verifier {
    head: Option<Head>,
}

impl Verifier {
    /// A verifier that continues a chain whose last record is `head`.
    pub fn after(head: Head) -> Verifier {
        Verifier { head: Some(head) }
    }

    /// The last checked record (or the empty log's head).
    pub fn head(&self) -> Head {
        self.head.clone().unwrap_or_default()
    }

    /// Checks the record stored under key `at` (its 1-based position:
    /// the next one, or it is an error naming the key), then that its own
    /// `seq` is that key, that its `prev` is the hash of the record before,
    /// and that its contents hash to the hash it claims.
    pub fn push(&mut self, at: u64, line: &[u8]) -> Result<(), VerifyError> {
        self.push_digest(at, line).map(|_| ())
    }

    /// The key the next record must be stored under.
    pub fn next_seq(&self) -> u64 {
        self.head.as_ref().map_or(0, |h| h.seq) + 1
    }

    /// [`Verifier::push`], returning the 32 bytes of the record's hash.
    pub fn push_digest(&mut self, at: u64, line: &[u8]) -> Result<[u8; 32], VerifyError> {
        let digest = line_digest(line).map(|(_, d)| d);
        self.push_digested(at, line, digest)
    }

    /// [`Verifier::push_digest`] with the line's hash computed already
    /// (`digest`: what [`line_digest`] gives for `line`).
    pub fn push_digested(
        &mut self,
        at: u64,
        line: &[u8],
        digest: Option<[u8; 32]>,
    ) -> Result<[u8; 32], VerifyError> {
        let head = self.head.take().unwrap_or_default();
        match check_link(&head, at, line, digest) {
            Ok((next, digest)) => {
                self.head = Some(next);
                Ok(digest)
            }
            Err(e) => {
                self.head = Some(head);
                Err(e)
            }
        }
    }
}

/// Checks the record stored under key `at` after `head` (see
/// [`Verifier::push`]): its head, and its hash's bytes.
fn check_link(
    head: &Head,
    at: u64,
    line: &[u8],
    digest: Option<[u8; 32]>,
) -> Result<(Head, [u8; 32]), VerifyError> {
    let expected = head.seq + 1;
    if at != expected {
        return Err(VerifyError {
            seq: expected,
            reason: format!(
                "the next record is stored under key {at}, expected key {expected} \
                     (a record is missing or moved, or its key was changed)"
            ),
        });
    }
    let fail = |reason: String| VerifyError { seq: at, reason };
    let (Some(claimed), Some(digest)) = (claimed_hash(line), digest) else {
        return Err(fail("the line does not end with its \"hash\" field".into()));
    };
    let actual = hex(&digest);
    let link: Link =
        serde_json::from_slice(line).map_err(|e| fail(format!("not an audit record: {e}")))?;
    if link.seq != head.seq + 1 {
        return Err(fail(format!(
            "its seq is {}, expected {} (a record is missing, repeated or moved)",
            link.seq,
            head.seq + 1
        )));
    }
    if link.prev != head.hash {
        return Err(fail(format!(
            "its prev is {}, but the record before it hashes to {}",
            link.prev, head.hash
        )));
    }
    if claimed != actual {
        return Err(fail(format!(
            "its contents hash to {actual}, but it says {claimed} (the record was changed)"
        )));
    }
    Ok((
        Head {
            seq: link.seq,
            hash: actual,
        },
        digest,
    ))
}

/// Checks a chain of stored lines (an exported audit file: one record per
/// line; blank lines are skipped). Returns the head, or the first broken
/// record.
pub fn verify_lines<'a>(lines: impl IntoIterator<Item = &'a [u8]>) -> Result<Head, VerifyError> {
    let mut v = Verifier::default();
    let mut at = 0;
    for line in lines {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        at += 1;
        v.push(at, line)?;
    }
    Ok(v.head())
}

// A checkpoint record's body (`crate::checkpoint` signs and checks it).

/// One partition's head as a checkpoint commits to it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionHead {
    /// The partition (`log`: today's single chain).
    pub partition: String,
    /// Its last record's sequence number.
    pub seq: u64,
    /// Its last record's hash.
    pub hash: String,
}

/// The signed part of a checkpoint record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The server's clock when it signed (milliseconds since the epoch).
    pub time_ms: u64,
    /// The heads it commits to, sorted by partition.
    pub heads: Vec<PartitionHead>,
    /// The signer's Ed25519 public key (64 hex digits).
    pub public_key: String,
    /// The Ed25519 signature of [`message`](crate::checkpoint::message)
    /// (128 hex digits).
    pub signature: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(n: u64) -> Vec<Vec<u8>> {
        let mut head = Head::default();
        (1..=n)
            .map(|i| {
                let r = Record {
                    seq: i,
                    prev: head.hash.clone(),
                    kind: Kind::Event,
                    verdict: Some("ALLOW".into()),
                    reason: Some(format!("call {i}")),
                    ..Record::default()
                };
                let (line, hash) = chain_line(&r).unwrap();
                head = Head { seq: i, hash };
                line
            })
            .collect()
    }

    #[test]
    fn an_intact_chain_verifies_and_lines_are_json() {
        let lines = chain(5);
        let head = verify_lines(lines.iter().map(Vec::as_slice)).unwrap();
        assert_eq!(head.seq, 5);
        let v: serde_json::Value = serde_json::from_slice(&lines[4]).unwrap();
        assert_eq!(v["hash"], head.hash.as_str());
        assert_eq!(v["seq"], 5);
    }

    #[test]
    fn a_changed_record_is_named() {
        let mut lines = chain(5);
        let text = String::from_utf8(lines[2].clone()).unwrap();
        lines[2] = text.replace("ALLOW", "DENY").into_bytes();
        let e = verify_lines(lines.iter().map(Vec::as_slice)).unwrap_err();
        assert_eq!(e.seq, 3);
        assert!(e.reason.contains("was changed"), "{e}");
    }

    #[test]
    fn a_removed_or_swapped_record_is_named() {
        let mut lines = chain(5);
        lines.remove(1);
        let e = verify_lines(lines.iter().map(Vec::as_slice)).unwrap_err();
        assert_eq!(e.seq, 2);
        let mut lines = chain(5);
        lines.swap(3, 4);
        let e = verify_lines(lines.iter().map(Vec::as_slice)).unwrap_err();
        assert_eq!(e.seq, 4);
    }

    #[test]
    fn a_rehashed_forgery_breaks_the_next_link() {
        // Changing a record and recomputing its own hash is caught by the
        // next record's `prev`.
        let mut lines = chain(4);
        let mut r: Record = serde_json::from_slice(&lines[1]).unwrap();
        r.verdict = Some("DENY".into());
        lines[1] = chain_line(&r).unwrap().0;
        let e = verify_lines(lines.iter().map(Vec::as_slice)).unwrap_err();
        assert_eq!(e.seq, 3);
        assert!(e.reason.contains("prev"), "{e}");
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for bad in [&b"{"[..], b"", b"\"}", b"{\"hash\":\"x\"}", b"\xff\xfe\"}"] {
            let _ = verify_lines([bad]);
        }
        let e = verify_lines([&b"not json"[..]]).unwrap_err();
        assert_eq!(e.seq, 1);
    }
}
