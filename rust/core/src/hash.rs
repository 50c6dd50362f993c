//! Deterministic encodings and content hashes.
//!
//! The compiled model holds no hash maps, so serde emits fields and list
//! elements in one fixed order: the CBOR bytes of equal values are equal,
//! and the SHA-256 of those bytes is a stable content hash.

use serde::Serialize;
use sha2::{Digest, Sha256};
use std::fmt;

/// Why a value could not be serialized by [`to_cbor`], [`to_json`] or
/// [`content_hash`].
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    /// The CBOR encoder failed; carries its message.
    #[error("cannot encode as CBOR: {0}")]
    Cbor(String),
    /// The JSON encoder failed.
    #[error("cannot encode as JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// A SHA-256 digest, printed as `sha256:<hex>`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hash(pub [u8; 32]);

impl Hash {
    /// The SHA-256 digest of `bytes`.
    pub fn of_bytes(bytes: &[u8]) -> Hash {
        Hash(Sha256::digest(bytes).into())
    }
    /// The 64 lower-case hex digits of the digest, without the `sha256:`
    /// prefix that [`Display`](fmt::Display) adds.
    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
    /// The first 12 hex digits, for human output.
    pub fn short(&self) -> String {
        self.hex()[..12].to_string()
    }
}

impl fmt::Display for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}

impl fmt::Debug for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Serialize for Hash {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The canonical CBOR bytes of `value`: equal values give equal bytes
/// (see the module documentation), which is what [`content_hash`] hashes.
pub fn to_cbor<T: Serialize>(value: &T) -> Result<Vec<u8>, EncodeError> {
    cbor4ii::serde::to_vec(Vec::new(), value).map_err(|e| EncodeError::Cbor(e.to_string()))
}

/// `value` as pretty-printed JSON, for people and tools that read JSON.
pub fn to_json<T: Serialize>(value: &T) -> Result<String, EncodeError> {
    Ok(serde_json::to_string_pretty(value)?)
}

/// Why bytes or text could not be read back by [`from_cbor`] or
/// [`from_json`].
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The input is not valid CBOR for the expected type; carries the
    /// decoder's message.
    #[error("invalid CBOR: {0}")]
    Cbor(String),
    /// The input is not valid JSON for the expected type.
    #[error("invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// Reads a value from CBOR bytes. Decoding only checks the shape: a decoded
/// [`Policy`](crate::policy::Policy) must still pass
/// [`validate`](crate::validate::validate) before use.
pub fn from_cbor<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, DecodeError> {
    cbor4ii::serde::from_slice(bytes).map_err(|e| DecodeError::Cbor(e.to_string()))
}

/// Reads a value from JSON text. As with [`from_cbor`], a decoded policy
/// must still be validated before use.
pub fn from_json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, DecodeError> {
    Ok(serde_json::from_str(text)?)
}

/// SHA-256 of the canonical CBOR encoding.
pub fn content_hash<T: Serialize>(value: &T) -> Result<Hash, EncodeError> {
    Ok(Hash::of_bytes(&to_cbor(value)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ABC: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    #[test]
    fn hashes_print_as_sha256_hex() {
        let h = Hash::of_bytes(b"abc");
        assert_eq!(h.hex(), ABC);
        assert_eq!(h.short(), "ba7816bf8f01");
        assert_eq!(h.to_string(), format!("sha256:{ABC}"));
        assert_eq!(format!("{h:?}"), format!("sha256:{ABC}"));
        assert_eq!(
            serde_json::to_string(&h).unwrap(),
            format!("\"sha256:{ABC}\"")
        );
        assert_ne!(Hash::of_bytes(b""), h);
    }

    #[test]
    fn encodings_are_the_canonical_bytes_and_text() {
        assert_eq!(to_cbor(&"abc").unwrap(), vec![0x63, b'a', b'b', b'c']);
        assert_eq!(to_cbor(&vec![1u8, 2]).unwrap(), vec![0x82, 0x01, 0x02]);
        assert_eq!(to_json(&vec![1, 2]).unwrap(), "[\n  1,\n  2\n]");
        // The content hash is SHA-256 of the CBOR bytes `63 61 62 63`.
        assert_eq!(
            content_hash(&"abc").unwrap().hex(),
            "a6d89baf01ac02637da09835b28485b2db68576834d01869fc15e36b124c617c"
        );
        assert_ne!(content_hash(&"abc").unwrap(), content_hash(&"abd").unwrap());
    }

    #[test]
    fn decoders_read_back_and_reject_garbage() {
        let v: Vec<String> = from_cbor(&to_cbor(&vec!["x", "yz"]).unwrap()).unwrap();
        assert_eq!(v, vec!["x".to_string(), "yz".to_string()]);
        let v: Vec<u32> = from_json("[1, 2]").unwrap();
        assert_eq!(v, vec![1, 2]);
        assert!(matches!(
            from_cbor::<Vec<u32>>(&[0xff, 0x00]),
            Err(DecodeError::Cbor(_))
        ));
        assert!(matches!(
            from_json::<Vec<u32>>("[1,"),
            Err(DecodeError::Json(_))
        ));
    }
}
