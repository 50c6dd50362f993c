//! A filter in front of the provenance tables (`values.rs`): one bit per
//! key, set when the key is added, so that a key whose bit is clear is
//! known to be in no table and its SipHash probe is skipped. Most
//! arguments of a call occur in no task text and no output: they cost a
//! few multiplications instead of a keyed hash.
//!
//! The bit of a key is a fixed function of its bytes (no secret key).
//! That is safe: a false "maybe" only sends the lookup on to the keyed
//! table, so an attacker who chooses words to set every bit gains nothing
//! but the probe every lookup made before this filter. A clear bit is
//! never wrong: bits are only ever set, and every key a table holds was
//! added through [`KeyFilter::add_bytes`] (or re-added when the index is
//! read back from a snapshot).

/// 4,096 bits (512 bytes), allocated with the first key: a session that
/// records no task and no output pays nothing.
#[derive(Clone, Debug, Default)]
pub(crate) struct KeyFilter(Option<Box<[u64; WORDS]>>);

const WORDS: usize = 64;
const BITS: u32 = (WORDS * 64).trailing_zeros();

/// An odd constant with well-mixed bits (from the golden ratio).
const K: u64 = 0x9E37_79B9_7F4A_7C15;

impl KeyFilter {
    /// Adds a key given by its bytes and a domain tag (words, numbers and
    /// phrase words are told apart by the tag).
    pub fn add_bytes(&mut self, tag: u8, bytes: &[u8]) {
        let (word, bit) = slot(tag, bytes);
        let bits = self.0.get_or_insert_with(|| Box::new([0; WORDS]));
        bits[word] |= bit;
    }

    /// Whether a key may have been added (`false`: it certainly was not).
    #[inline]
    pub fn may_hold(&self, tag: u8, bytes: &[u8]) -> bool {
        match &self.0 {
            None => false,
            Some(bits) => {
                let (word, bit) = slot(tag, bytes);
                bits[word] & bit != 0
            }
        }
    }
}

/// The word and bit of a key: a multiply-xorshift hash of its first and
/// last 8 bytes (all of a key of up to 16 bytes), its length and its tag,
/// the top bits of which pick the bit. Longer keys that differ only in
/// their middle share a bit: a false "maybe", never a false "absent".
#[inline]
fn slot(tag: u8, bytes: &[u8]) -> (usize, u64) {
    let (first, last) = match (bytes.first_chunk::<8>(), bytes.last_chunk::<8>()) {
        (Some(f), Some(l)) => (u64::from_le_bytes(*f), u64::from_le_bytes(*l)),
        _ => {
            let mut short = [0u8; 8];
            short[..bytes.len()].copy_from_slice(bytes);
            (u64::from_le_bytes(short), 0)
        }
    };
    let mut h = (u64::from(tag) << 56 | bytes.len() as u64) ^ first.wrapping_mul(K);
    h = (h ^ last.rotate_left(32)).wrapping_mul(K);
    h ^= h >> 29;
    h = h.wrapping_mul(K);
    let index = (h >> (64 - BITS)) as usize;
    (index / 64, 1u64 << (index % 64))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key added is reported as maybe held, under its tag; an empty
    /// filter holds nothing.
    #[test]
    fn added_keys_are_always_held() {
        let mut f = KeyFilter::default();
        assert!(!f.may_hold(0, b"acct-0001"));
        let keys: Vec<String> = (0..2_000)
            .map(|i| format!("key-{i}-{}", "x".repeat(i % 23)))
            .collect();
        for k in &keys {
            f.add_bytes(1, k.as_bytes());
        }
        assert!(keys.iter().all(|k| f.may_hold(1, k.as_bytes())));
    }

    /// A sparse filter rejects most keys never added (the point of it).
    #[test]
    fn a_sparse_filter_rejects_most_other_keys() {
        let mut f = KeyFilter::default();
        for i in 0..100 {
            f.add_bytes(0, format!("acct-{i:04}").as_bytes());
        }
        let passed = (100..10_100)
            .filter(|i| f.may_hold(0, format!("acct-{i:04}").as_bytes()))
            .count();
        // 100 of 4,096 bits set: about 2.4 % pass; allow twice that.
        assert!(passed < 500, "{passed} of 10,000 passed");
        // Another tag is another key.
        let other = (0..100)
            .filter(|i| f.may_hold(1, format!("acct-{i:04}").as_bytes()))
            .count();
        assert!(other < 10, "{other}");
    }

    proptest::proptest! {
        /// No false "absent", for any keys and tags.
        #[test]
        fn no_key_added_is_ever_missed(
            keys in proptest::collection::vec((0u8..3, proptest::collection::vec(proptest::num::u8::ANY, 0..40)), 0..200)
        ) {
            let mut f = KeyFilter::default();
            for (tag, k) in &keys {
                f.add_bytes(*tag, k);
            }
            for (tag, k) in &keys {
                proptest::prop_assert!(f.may_hold(*tag, k));
            }
        }
    }
}
