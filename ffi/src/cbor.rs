//! The CBOR subset of the wire format (`docs/lean-ffi.md`): integers
//! (bignums only beyond 64 bits), text, arrays, booleans and `null`,
//! definite lengths, shortest heads. `lean/Agenra/Cbor.lean` is the same
//! codec in Lean.

use std::fmt;

/// A value of the CBOR subset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cbor {
    /// An integer: major type 0 or 1, or a tag-2/3 bignum when its magnitude
    /// is at least `2^64`.
    Int(i128),
    /// A UTF-8 text string (major type 3).
    Text(String),
    /// An array (major type 4).
    Array(Vec<Cbor>),
    /// `false` (`0xf4`) or `true` (`0xf5`).
    Bool(bool),
    /// `null` (`0xf6`).
    Null,
}

/// Why bytes are not a value of the subset.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input ends inside a value.
    #[error("byte {at}: the input ends inside a value")]
    Truncated {
        /// Offset of the value's first byte.
        at: usize,
    },
    /// A major type, tag or simple value outside the subset.
    #[error("byte {at}: initial byte {byte:#04x} is outside the subset (only integers, bignums, text, arrays, booleans and null)")]
    Unsupported {
        /// Offset of the byte.
        at: usize,
        /// The byte.
        byte: u8,
    },
    /// A head argument not written in its shortest form.
    #[error("byte {at}: a length or integer is not in its shortest form")]
    NotShortest {
        /// Offset of the head.
        at: usize,
    },
    /// A bignum whose magnitude does not fit the decoder, or is below `2^64`
    /// (it must then be a plain integer), or has a leading zero byte.
    #[error("byte {at}: bignum out of range or not minimal")]
    Bignum {
        /// Offset of the tag.
        at: usize,
    },
    /// Text that is not UTF-8.
    #[error("byte {at}: text is not valid UTF-8")]
    Utf8 {
        /// Offset of the text's head.
        at: usize,
    },
    /// Arrays nested deeper than [`MAX_DEPTH`].
    #[error("byte {at}: arrays nested deeper than {MAX_DEPTH}")]
    TooDeep {
        /// Offset of the array that is too deep.
        at: usize,
    },
    /// Bytes after the value.
    #[error("byte {at}: {extra} bytes after the value")]
    Trailing {
        /// Offset of the first extra byte.
        at: usize,
        /// How many bytes are left.
        extra: usize,
    },
}

/// Arrays may nest this deep (the decoder recurses).
pub const MAX_DEPTH: usize = 256;

const TWO_64: i128 = 1 << 64;

impl Cbor {
    /// A non-negative integer.
    pub fn uint(n: u64) -> Cbor {
        Cbor::Int(i128::from(n))
    }

    /// A text string.
    pub fn text(s: &str) -> Cbor {
        Cbor::Text(s.to_string())
    }

    /// The encoding of `self`.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_into(&mut out);
        out
    }

    /// Appends the encoding of `self` to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        match self {
            Cbor::Int(n) if *n >= 0 && *n < TWO_64 => head(out, 0, *n as u64),
            Cbor::Int(n) if *n < 0 && -1 - *n < TWO_64 => head(out, 1, (-1 - *n) as u64),
            Cbor::Int(n) => {
                let (tag, magnitude) = if *n >= 0 {
                    (0xc2, *n as u128)
                } else {
                    (0xc3, (-1 - *n) as u128)
                };
                out.push(tag);
                let bytes = magnitude.to_be_bytes();
                let first = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len());
                head(out, 2, (bytes.len() - first) as u64);
                out.extend_from_slice(&bytes[first..]);
            }
            Cbor::Text(s) => {
                head(out, 3, s.len() as u64);
                out.extend_from_slice(s.as_bytes());
            }
            Cbor::Array(items) => {
                head(out, 4, items.len() as u64);
                for item in items {
                    item.encode_into(out);
                }
            }
            Cbor::Bool(false) => out.push(0xf4),
            Cbor::Bool(true) => out.push(0xf5),
            Cbor::Null => out.push(0xf6),
        }
    }

    /// Decodes exactly one value that fills `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<Cbor, DecodeError> {
        let mut d = Decoder { bytes, at: 0 };
        let value = d.value(0)?;
        if d.at < bytes.len() {
            return Err(DecodeError::Trailing {
                at: d.at,
                extra: bytes.len() - d.at,
            });
        }
        Ok(value)
    }
}

impl fmt::Display for Cbor {
    /// CBOR diagnostic notation (RFC 8949 §8), for error messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cbor::Int(n) => write!(f, "{n}"),
            Cbor::Text(s) => write!(f, "{s:?}"),
            Cbor::Array(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
            Cbor::Bool(b) => write!(f, "{b}"),
            Cbor::Null => f.write_str("null"),
        }
    }
}

/// Writes a head of major type `major` with argument `n`, shortest form.
fn head(out: &mut Vec<u8>, major: u8, n: u64) {
    let m = major << 5;
    if n < 24 {
        out.push(m | n as u8);
    } else if n <= u64::from(u8::MAX) {
        out.push(m | 24);
        out.push(n as u8);
    } else if n <= u64::from(u16::MAX) {
        out.push(m | 25);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else if n <= u64::from(u32::MAX) {
        out.push(m | 26);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(m | 27);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

struct Decoder<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Decoder<'_> {
    fn take(&mut self, n: usize, start: usize) -> Result<&[u8], DecodeError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|e| *e <= self.bytes.len())
            .ok_or(DecodeError::Truncated { at: start })?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    /// Reads a head: (major type, argument).
    fn head(&mut self) -> Result<(u8, u64), DecodeError> {
        let start = self.at;
        let b = self.take(1, start)?[0];
        let (major, info) = (b >> 5, b & 0x1f);
        if major == 7 {
            // Simple values are not heads with arguments; the caller
            // handles them through `info`.
            return Ok((7, u64::from(info)));
        }
        let (n, min) = match info {
            0..=23 => (u64::from(info), 0),
            24 => (u64::from(self.take(1, start)?[0]), 24),
            25 => {
                let s = self.take(2, start)?;
                (u64::from(u16::from_be_bytes([s[0], s[1]])), 1 << 8)
            }
            26 => {
                let s = self.take(4, start)?;
                (
                    u64::from(u32::from_be_bytes([s[0], s[1], s[2], s[3]])),
                    1 << 16,
                )
            }
            27 => {
                let s = self.take(8, start)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(s);
                (u64::from_be_bytes(a), 1 << 32)
            }
            _ => return Err(DecodeError::Unsupported { at: start, byte: b }),
        };
        if n < min {
            return Err(DecodeError::NotShortest { at: start });
        }
        Ok((major, n))
    }

    fn value(&mut self, depth: usize) -> Result<Cbor, DecodeError> {
        let start = self.at;
        let byte = *self
            .bytes
            .get(start)
            .ok_or(DecodeError::Truncated { at: start })?;
        let (major, n) = self.head()?;
        match major {
            0 => Ok(Cbor::Int(i128::from(n))),
            1 => Ok(Cbor::Int(-1 - i128::from(n))),
            3 => {
                let len = usize::try_from(n).map_err(|_| DecodeError::Truncated { at: start })?;
                let s = self.take(len, start)?;
                let s = std::str::from_utf8(s).map_err(|_| DecodeError::Utf8 { at: start })?;
                Ok(Cbor::Text(s.to_string()))
            }
            4 => {
                if depth >= MAX_DEPTH {
                    return Err(DecodeError::TooDeep { at: start });
                }
                // Every element takes at least one byte: bound the
                // allocation by what is left.
                let left = self.bytes.len() - self.at;
                if n > left as u64 {
                    return Err(DecodeError::Truncated { at: start });
                }
                let mut items = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    items.push(self.value(depth + 1)?);
                }
                Ok(Cbor::Array(items))
            }
            6 if n == 2 || n == 3 => {
                let inner = self.at;
                let (m, len) = self.head()?;
                if m != 2 {
                    return Err(DecodeError::Bignum { at: start });
                }
                let len = usize::try_from(len).map_err(|_| DecodeError::Bignum { at: start })?;
                let digits = self.take(len, inner)?;
                if digits.first() == Some(&0) || len > 16 {
                    return Err(DecodeError::Bignum { at: start });
                }
                let mut magnitude: u128 = 0;
                for d in digits {
                    magnitude = (magnitude << 8) | u128::from(*d);
                }
                // Below 2^64 it must be a plain integer; above i128, out of range.
                if magnitude < TWO_64 as u128 || magnitude > i128::MAX as u128 {
                    return Err(DecodeError::Bignum { at: start });
                }
                let m = magnitude as i128;
                Ok(Cbor::Int(if n == 2 { m } else { -1 - m }))
            }
            7 => match n {
                20 => Ok(Cbor::Bool(false)),
                21 => Ok(Cbor::Bool(true)),
                22 => Ok(Cbor::Null),
                _ => Err(DecodeError::Unsupported { at: start, byte }),
            },
            _ => Err(DecodeError::Unsupported { at: start, byte }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hex(s: &str) -> Vec<u8> {
        s.split_whitespace()
            .map(|b| u8::from_str_radix(b, 16).unwrap())
            .collect()
    }

    /// Examples from RFC 8949 Appendix A, written out by hand.
    #[test]
    fn rfc_8949_examples() {
        let cases: Vec<(Cbor, &str)> = vec![
            (Cbor::Int(0), "00"),
            (Cbor::Int(23), "17"),
            (Cbor::Int(24), "18 18"),
            (Cbor::Int(100), "18 64"),
            (Cbor::Int(1000), "19 03 e8"),
            (Cbor::Int(1_000_000), "1a 00 0f 42 40"),
            (
                Cbor::Int(1_000_000_000_000),
                "1b 00 00 00 e8 d4 a5 10 00",
            ),
            (
                Cbor::Int(18_446_744_073_709_551_615),
                "1b ff ff ff ff ff ff ff ff",
            ),
            (
                Cbor::Int(18_446_744_073_709_551_616),
                "c2 49 01 00 00 00 00 00 00 00 00",
            ),
            (
                Cbor::Int(-18_446_744_073_709_551_616),
                "3b ff ff ff ff ff ff ff ff",
            ),
            (
                Cbor::Int(-18_446_744_073_709_551_617),
                "c3 49 01 00 00 00 00 00 00 00 00",
            ),
            (Cbor::Int(-1), "20"),
            (Cbor::Int(-10), "29"),
            (Cbor::Int(-100), "38 63"),
            (Cbor::Int(-1000), "39 03 e7"),
            (Cbor::Bool(false), "f4"),
            (Cbor::Bool(true), "f5"),
            (Cbor::Null, "f6"),
            (Cbor::text(""), "60"),
            (Cbor::text("a"), "61 61"),
            (Cbor::text("IETF"), "64 49 45 54 46"),
            (Cbor::text("\u{00fc}"), "62 c3 bc"),
            (Cbor::text("\u{6c34}"), "63 e6 b0 b4"),
            (Cbor::Array(vec![]), "80"),
            (
                Cbor::Array(vec![
                    Cbor::Int(1),
                    Cbor::Array(vec![Cbor::Int(2), Cbor::Int(3)]),
                    Cbor::Array(vec![Cbor::Int(4), Cbor::Int(5)]),
                ]),
                "83 01 82 02 03 82 04 05",
            ),
            (
                Cbor::Array((1..=25).map(Cbor::Int).collect()),
                "98 19 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f 10 11 12 13 14 15 16 17 18 18 18 19",
            ),
        ];
        for (value, bytes) in cases {
            assert_eq!(value.encode(), hex(bytes), "encoding {value}");
            assert_eq!(Cbor::decode(&hex(bytes)), Ok(value), "decoding {bytes}");
        }
    }

    #[test]
    fn outside_the_subset_is_rejected_with_the_offset() {
        let bad = |s: &str| Cbor::decode(&hex(s)).unwrap_err();
        assert_eq!(bad("a0"), DecodeError::Unsupported { at: 0, byte: 0xa0 }); // map
        assert_eq!(bad("40"), DecodeError::Unsupported { at: 0, byte: 0x40 }); // bytes
        assert_eq!(
            bad("f9 3c 00"),
            DecodeError::Unsupported { at: 0, byte: 0xf9 }
        ); // float
        assert_eq!(bad("9f ff"), DecodeError::Unsupported { at: 0, byte: 0x9f }); // indefinite
        assert_eq!(
            bad("82 01 f7"),
            DecodeError::Unsupported { at: 2, byte: 0xf7 }
        ); // undefined
        assert_eq!(bad("c1 01"), DecodeError::Unsupported { at: 0, byte: 0xc1 }); // tag 1
        assert_eq!(bad("18 05"), DecodeError::NotShortest { at: 0 });
        assert_eq!(bad("19 00 ff"), DecodeError::NotShortest { at: 0 });
        assert_eq!(bad("c2 41 05"), DecodeError::Bignum { at: 0 }); // small bignum
        assert_eq!(
            bad("c2 49 00 01 00 00 00 00 00 00 00"),
            DecodeError::Bignum { at: 0 }
        );
        assert_eq!(bad("62 c3"), DecodeError::Truncated { at: 0 });
        assert_eq!(bad("83 01 02"), DecodeError::Truncated { at: 0 });
        assert_eq!(
            bad("9b ff ff ff ff ff ff ff ff"),
            DecodeError::Truncated { at: 0 }
        );
        assert_eq!(bad("62 c3 28"), DecodeError::Utf8 { at: 0 });
        assert_eq!(bad("01 02"), DecodeError::Trailing { at: 1, extra: 1 });
        assert_eq!(bad(""), DecodeError::Truncated { at: 0 });
        let deep = vec![0x81u8; MAX_DEPTH + 1];
        assert!(matches!(
            Cbor::decode(&deep),
            Err(DecodeError::TooDeep { .. })
        ));
    }

    fn any_cbor() -> impl Strategy<Value = Cbor> {
        let leaf = prop_oneof![
            any::<i128>().prop_map(Cbor::Int),
            any::<i64>().prop_map(|n| Cbor::Int(i128::from(n))),
            ".{0,12}".prop_map(Cbor::Text),
            any::<bool>().prop_map(Cbor::Bool),
            Just(Cbor::Null),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop::collection::vec(inner, 0..8).prop_map(Cbor::Array)
        })
    }

    fn to_cbor4ii(c: &Cbor) -> cbor4ii::core::Value {
        use cbor4ii::core::Value as V;
        match c {
            Cbor::Int(n) if *n >= TWO_64 || *n < -TWO_64 => {
                let (tag, m) = if *n >= 0 {
                    (2, *n as u128)
                } else {
                    (3, (-1 - *n) as u128)
                };
                let b = m.to_be_bytes();
                let first = b.iter().position(|x| *x != 0).unwrap_or(b.len());
                V::Tag(tag, Box::new(V::Bytes(b[first..].to_vec())))
            }
            Cbor::Int(n) => V::Integer(*n),
            Cbor::Text(s) => V::Text(s.clone()),
            Cbor::Array(items) => V::Array(items.iter().map(to_cbor4ii).collect()),
            Cbor::Bool(b) => V::Bool(*b),
            Cbor::Null => V::Null,
        }
    }

    proptest! {
        #[test]
        fn round_trip(c in any_cbor()) {
            prop_assert_eq!(Cbor::decode(&c.encode()), Ok(c));
        }

        /// An independent CBOR implementation reads our bytes as the same value.
        #[test]
        fn cbor4ii_reads_the_same_value(c in any_cbor()) {
            let bytes = c.encode();
            let mut reader = cbor4ii::core::utils::SliceReader::new(&bytes);
            let theirs: cbor4ii::core::Value =
                cbor4ii::core::dec::Decode::decode(&mut reader).expect("cbor4ii decodes");
            prop_assert_eq!(theirs, to_cbor4ii(&c));
        }

        /// Arbitrary bytes never panic the decoder.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = Cbor::decode(&bytes);
        }
    }
}
