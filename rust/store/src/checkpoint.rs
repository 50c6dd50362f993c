//! Signed checkpoints (`docs/store.md`, "Signed checkpoints").
//!
//! A checkpoint is a record of kind `checkpoint` that commits to the log
//! as it is just before it: a list of (partition, head seq, head hash)
//! (today one entry, partition `log`: the whole chain), signed with an
//! Ed25519 key the operator holds. `agenra audit verify --public-key`
//! checks every checkpoint's signature and that it commits to the chain at
//! its place; with the last checkpoint the operator kept elsewhere
//! (`--checkpoint FILE`) it also catches a log truncated together with its
//! head.
//!
//! The signed bytes are [`DOMAIN`] followed by the JSON of
//! `{"version":1,"time_ms":…,"heads":[{"partition":…,"seq":…,"hash":…},…]}`
//! (fields in that order).

use crate::record::{split_line, Kind, Record, VerifyError};
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What every signed message starts with (so that a checkpoint signature
/// is never valid for anything else the key might sign).
pub const DOMAIN: &[u8] = b"agenra-checkpoint-v1\n";

/// The partition name of today's single chain.
pub const LOG_PARTITION: &str = "log";

pub use crate::record::{Checkpoint, PartitionHead};

#[derive(Serialize)]
struct Signed<'a> {
    version: u32,
    time_ms: u64,
    heads: &'a [PartitionHead],
}

/// The bytes a checkpoint's signature covers.
pub fn message(time_ms: u64, heads: &[PartitionHead]) -> Result<Vec<u8>, serde_json::Error> {
    let mut m = DOMAIN.to_vec();
    m.extend(serde_json::to_vec(&Signed {
        version: 1,
        time_ms,
        heads,
    })?);
    Ok(m)
}

/// Why a key could not be made, read or parsed.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The key file could not be read, written or parsed.
    #[error("checkpoint key {path}: {reason}")]
    File {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A public key that is not 64 hex digits of an Ed25519 point.
    #[error("public key `{text}`: {reason}")]
    Public {
        /// What was given (shortened).
        text: String,
        /// What is wrong.
        reason: String,
    },
}

fn to_hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(2 * bytes.len());
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

fn from_hex<const N: usize>(text: &str) -> Result<[u8; N], String> {
    let text = text.trim();
    if text.len() != 2 * N {
        return Err(format!(
            "expected {} hex digits, found {} characters",
            2 * N,
            text.len()
        ));
    }
    let mut out = [0u8; N];
    for (i, pair) in text.as_bytes().chunks(2).enumerate() {
        let s = std::str::from_utf8(pair).map_err(|_| "not hex".to_string())?;
        out[i] = u8::from_str_radix(s, 16)
            .map_err(|_| format!("`{s}` at digit {} is not hex", 2 * i + 1))?;
    }
    Ok(out)
}

/// The operator's signing key.
#[derive(Clone)]
pub struct CheckpointSigner {
    key: SigningKey,
}

impl std::fmt::Debug for CheckpointSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CheckpointSigner({})", self.public_key())
    }
}

impl CheckpointSigner {
    /// The signer of a 32-byte seed.
    pub fn from_seed(seed: [u8; 32]) -> CheckpointSigner {
        CheckpointSigner {
            key: SigningKey::from_bytes(&seed),
        }
    }

    /// Reads a key file (64 hex digits of the seed, as `agenra audit
    /// keygen` writes it). On Unix the file must not be readable by group
    /// or others.
    pub fn from_file(path: &Path) -> Result<CheckpointSigner, KeyError> {
        let err = |reason: String| KeyError::File {
            path: path.display().to_string(),
            reason,
        };
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let meta = std::fs::metadata(path).map_err(|e| err(format!("cannot read: {e}")))?;
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(err(format!(
                    "its mode is {mode:o}: a signing key must not be readable by group or others \
                     (chmod 600)"
                )));
            }
        }
        let text = std::fs::read_to_string(path).map_err(|e| err(format!("cannot read: {e}")))?;
        let seed = from_hex::<32>(&text).map_err(|e| err(format!("not a key file: {e}")))?;
        Ok(CheckpointSigner::from_seed(seed))
    }

    /// The public key, 64 hex digits.
    pub fn public_key(&self) -> String {
        to_hex(self.key.verifying_key().as_bytes())
    }

    /// Signs `heads` at `time_ms`.
    pub fn sign(
        &self,
        time_ms: u64,
        heads: Vec<PartitionHead>,
    ) -> Result<Checkpoint, serde_json::Error> {
        let m = message(time_ms, &heads)?;
        let signature = self.key.sign(&m);
        Ok(Checkpoint {
            time_ms,
            heads,
            public_key: self.public_key(),
            signature: to_hex(&signature.to_bytes()),
        })
    }
}

/// Makes a new key file at `path` (refusing to overwrite one; mode 0600)
/// from 32 bytes of `/dev/urandom`, and returns its public key.
pub fn generate_key_file(path: &Path) -> Result<String, KeyError> {
    use std::io::{Read, Write};
    let err = |reason: String| KeyError::File {
        path: path.display().to_string(),
        reason,
    };
    let mut seed = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut seed))
        .map_err(|e| err(format!("cannot read random bytes from /dev/urandom: {e}")))?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut f = options.open(path).map_err(|e| {
        err(format!(
            "cannot create (an existing key is never replaced): {e}"
        ))
    })?;
    f.write_all(format!("{}\n", to_hex(&seed)).as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| err(format!("cannot write: {e}")))?;
    Ok(CheckpointSigner::from_seed(seed).public_key())
}

/// A public key that checks checkpoint signatures.
#[derive(Clone, Debug)]
pub struct PublicKey(VerifyingKey);

impl PublicKey {
    /// Parses 64 hex digits.
    pub fn parse(text: &str) -> Result<PublicKey, KeyError> {
        let err = |reason: String| KeyError::Public {
            text: text.trim().chars().take(80).collect(),
            reason,
        };
        let bytes = from_hex::<32>(text).map_err(err)?;
        VerifyingKey::from_bytes(&bytes)
            .map(PublicKey)
            .map_err(|e| err(format!("not an Ed25519 public key: {e}")))
    }

    /// The key as 64 hex digits.
    pub fn hex(&self) -> String {
        to_hex(self.0.as_bytes())
    }

    /// Whether `cp` is signed by this key (and its signature checks).
    pub(crate) fn check(&self, cp: &Checkpoint) -> Result<(), String> {
        if cp.public_key != self.hex() {
            return Err(format!(
                "it is signed with another key ({}), not the one given ({})",
                cp.public_key,
                self.hex()
            ));
        }
        let sig = from_hex::<64>(&cp.signature)
            .map_err(|e| format!("its signature is unreadable: {e}"))?;
        let m = message(cp.time_ms, &cp.heads).map_err(|e| e.to_string())?;
        self.0
            .verify_strict(&m, &Signature::from_bytes(&sig))
            .map_err(|_| {
                "its signature does not check (the checkpoint was forged or changed)".to_string()
            })
    }
}

/// How often `agenra serve` writes a checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Every {
    /// After this many records (at the end of the batch that reaches it).
    Records(u64),
    /// When this much time has passed and records were appended since.
    Time(Duration),
}

impl std::str::FromStr for Every {
    type Err = String;
    /// `N` (records) or `Ns` (seconds), both over 0.
    fn from_str(s: &str) -> Result<Every, String> {
        let (digits, secs) = match s.strip_suffix('s') {
            Some(d) => (d, true),
            None => (s, false),
        };
        let n: u64 = digits.parse().map_err(|_| {
            format!("`{s}`: give a number of records (`1000`) or of seconds (`60s`)")
        })?;
        if n == 0 {
            return Err(format!("`{s}`: must be over 0"));
        }
        Ok(if secs {
            Every::Time(Duration::from_secs(n))
        } else {
            Every::Records(n)
        })
    }
}

/// What `agenra serve --checkpoint-key` sets up.
#[derive(Clone, Debug)]
pub struct Checkpoints {
    /// The signing key.
    pub signer: CheckpointSigner,
    /// How often.
    pub every: Every,
    /// Where each checkpoint's stored line is also written (atomically).
    pub out: Option<PathBuf>,
}

/// A log's checkpointing state.
pub(crate) struct Checkpointing {
    pub config: Checkpoints,
    /// Records appended (by this process) since the last checkpoint.
    pub since: u64,
    pub last: Instant,
    /// The line of a checkpoint appended in the open transaction, written
    /// out once it commits.
    pub unwritten: Option<Vec<u8>>,
}

/// A checkpoint kept apart from the log (`--checkpoint-out`), as read at
/// start: the file, its line (trimmed) and the key that must have signed it.
pub(crate) struct Kept<'a> {
    pub file: &'a std::path::Path,
    pub line: Vec<u8>,
    pub key: PublicKey,
}

/// The checkpoint kept in `--checkpoint-out`, if the log signs
/// checkpoints with that option and the file exists (a missing file is a
/// first start).
pub(crate) fn read_kept(c: Option<&Checkpointing>) -> Result<Option<Kept<'_>>, crate::StoreError> {
    let Some(c) = c else {
        return Ok(None);
    };
    c.read_kept()
}

impl Checkpointing {
    fn read_kept(&self) -> Result<Option<Kept<'_>>, crate::StoreError> {
        let Some(out) = &self.config.out else {
            return Ok(None);
        };
        let engine = |message: String| crate::StoreError::Engine {
            path: out.display().to_string(),
            message,
        };
        let bytes = match std::fs::read(out) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(engine(format!("cannot read the kept checkpoint: {e}"))),
        };
        let key = PublicKey::parse(&self.config.signer.public_key())
            .map_err(|e| engine(e.to_string()))?;
        Ok(Some(Kept {
            file: out,
            line: bytes.trim_ascii().to_vec(),
            key,
        }))
    }

    pub fn new(config: Checkpoints) -> Checkpointing {
        Checkpointing {
            config,
            since: 0,
            last: Instant::now(),
            unwritten: None,
        }
    }

    /// Whether appending `n` more records makes a checkpoint due
    /// (`force`: whenever anything was appended since the last one).
    pub fn due(&self, n: u64, force: bool) -> bool {
        let since = self.since + n;
        if since == 0 {
            return false;
        }
        force
            || match self.config.every {
                Every::Records(k) => since >= k,
                Every::Time(d) => self.last.elapsed() >= d,
            }
    }

    /// Writes `line` to the `out` file, atomically (a temporary file,
    /// synced, renamed over it).
    pub fn write_out(&self, line: &[u8]) -> Result<(), String> {
        use std::io::Write;
        let Some(out) = &self.config.out else {
            return Ok(());
        };
        let mut tmp = out.clone().into_os_string();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(line)?;
            f.write_all(b"\n")?;
            f.sync_all()?;
            std::fs::rename(&tmp, out)?;
            if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::File::open(dir)?.sync_all()?;
            }
            Ok(())
        };
        write().map_err(|e| format!("cannot write the checkpoint to {}: {e}", out.display()))
    }
}

/// What [`CheckpointVerifier`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckpointSummary {
    /// Checkpoint records in the log.
    pub count: u64,
    /// Of those, how many had their signature checked (all of them, with
    /// a key).
    pub signed: u64,
    /// The last checkpoint record's position.
    pub last: Option<u64>,
    /// Records in the log.
    pub records: u64,
    /// With a kept checkpoint: its position, which the log reaches.
    pub kept: Option<u64>,
}

/// Checks the checkpoints of a chain whose records are pushed in order
/// (after the chain check passed on each): that each commits to the chain
/// just before it and, with a key, that its signature checks.
pub struct CheckpointVerifier {
    key: Option<PublicKey>,
    /// A checkpoint kept elsewhere: its position and its record's hash.
    kept: Option<(u64, String)>,
    kept_seen: bool,
    summary: CheckpointSummary,
    /// The hash of the last pushed record.
    last_hash: String,
}

#[derive(Deserialize)]
struct CheckpointLink {
    seq: u64,
    prev: String,
    kind: Kind,
    #[serde(default)]
    checkpoint: Option<Checkpoint>,
}

fn check_place(seq: u64, prev: &str, cp: &Checkpoint) -> Result<(), String> {
    let want = PartitionHead {
        partition: LOG_PARTITION.into(),
        seq: seq.saturating_sub(1),
        hash: prev.to_string(),
    };
    if cp.heads != [want.clone()] {
        return Err(format!(
            "it commits to {}, but the chain before it ends at record {} with hash {}",
            serde_json::to_string(&cp.heads).unwrap_or_default(),
            want.seq,
            want.hash
        ));
    }
    Ok(())
}

impl CheckpointVerifier {
    /// A verifier; without `key` signatures are not checked (only counted).
    pub fn new(key: Option<PublicKey>) -> CheckpointVerifier {
        CheckpointVerifier {
            key,
            kept: None,
            kept_seen: false,
            summary: CheckpointSummary::default(),
            last_hash: String::new(),
        }
    }

    /// Also requires the log to reach `line`, a checkpoint's stored line
    /// kept elsewhere (`serve --checkpoint-out`): its record must check
    /// (hash, place, signature with the key) and the log must hold it.
    pub fn keep(&mut self, line: &[u8]) -> Result<(), VerifyError> {
        let fail = |reason: String| VerifyError {
            seq: 0,
            reason: format!("the kept checkpoint: {reason}"),
        };
        let Some(key) = &self.key else {
            return Err(fail("checking it needs the public key".into()));
        };
        let Some((claimed, actual)) = split_line(line) else {
            return Err(fail("not a stored audit record (no \"hash\" field)".into()));
        };
        if claimed != actual {
            return Err(fail(format!(
                "it hashes to {actual}, but says {claimed} (it was changed)"
            )));
        }
        let r: Record =
            serde_json::from_slice(line).map_err(|e| fail(format!("not an audit record: {e}")))?;
        let Some(cp) = r.checkpoint.filter(|_| r.kind == Kind::Checkpoint) else {
            return Err(fail("not a checkpoint record".into()));
        };
        check_place(r.seq, &r.prev, &cp).map_err(fail)?;
        key.check(&cp).map_err(fail)?;
        self.kept = Some((r.seq, actual));
        Ok(())
    }

    /// Checks the record `line` stored at `seq`.
    pub fn push(&mut self, seq: u64, line: &[u8]) -> Result<(), VerifyError> {
        let fail = |reason: String| VerifyError { seq, reason };
        let hash = split_line(line).map(|(_, h)| h).unwrap_or_default();
        self.summary.records = seq;
        if let Some((at, kept)) = &self.kept {
            if *at == seq {
                if *kept != hash {
                    return Err(fail(format!(
                        "it hashes to {hash}, but the kept checkpoint says record {seq} hashes to \
                         {kept} (the log was rewritten from here on)"
                    )));
                }
                self.kept_seen = true;
            }
        }
        self.last_hash = hash;
        // Every record is read (a checkpoint written with other spacing is
        // still one).
        let link: CheckpointLink =
            serde_json::from_slice(line).map_err(|e| fail(format!("not an audit record: {e}")))?;
        if link.kind != Kind::Checkpoint {
            return Ok(());
        }
        let cp = link
            .checkpoint
            .ok_or_else(|| fail("a checkpoint record without its signed checkpoint".into()))?;
        check_place(link.seq, &link.prev, &cp).map_err(fail)?;
        self.summary.count += 1;
        self.summary.last = Some(seq);
        if let Some(key) = &self.key {
            key.check(&cp).map_err(fail)?;
            self.summary.signed += 1;
        }
        Ok(())
    }

    /// Ends the check: with a key, the log must hold a checkpoint; with a
    /// kept checkpoint, the log must reach it.
    pub fn finish(mut self) -> Result<CheckpointSummary, VerifyError> {
        if let Some((at, _)) = &self.kept {
            if !self.kept_seen {
                return Err(VerifyError {
                    seq: self.summary.records + 1,
                    reason: format!(
                        "the log ends at record {}, but the kept checkpoint is record {at}: \
                         the log was truncated",
                        self.summary.records
                    ),
                });
            }
            self.summary.kept = Some(*at);
        }
        if self.key.is_some() && self.summary.count == 0 {
            return Err(VerifyError {
                seq: self.summary.records,
                reason: "no signed checkpoint in the log: nothing to check the key against \
                         (was `agenra serve` run with --checkpoint-key?)"
                    .into(),
            });
        }
        Ok(self.summary)
    }
}
