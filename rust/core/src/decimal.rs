//! Exact fixed-point decimals for amounts (`98.70`): never binary floats.
//!
//! A decimal is `mantissa / 10^scale`, kept normalized (no trailing zero
//! digits after the point), so `98.70` and `98.7` are the same value and
//! derived equality is numeric equality. At most 20 significant digits and
//! 18 after the point: comparisons then fit in `i128` without overflow.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

const MAX_SCALE: u8 = 18;
const MAX_DIGITS: usize = 20;

/// Zero by default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Decimal {
    mantissa: i128,
    scale: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
/// Why a text or number is not an exact decimal.
pub enum DecimalError {
    /// Not of the form `-?digits[.digits]`.
    #[error("not a decimal number (expected digits with an optional `-` and `.`)")]
    Syntax,
    /// More than 20 significant digits (leading and trailing zeros aside).
    #[error("more than {MAX_DIGITS} significant digits")]
    TooManyDigits,
    /// More than 18 digits after the point (trailing zeros do not count).
    #[error("more than {MAX_SCALE} digits after the point")]
    TooManyDecimals,
}

impl Decimal {
    /// How many digits its canonical text has (`13`: 2, `2.5`: 2, `0.05`:
    /// 3), without allocating.
    pub fn written_digits(self) -> u32 {
        let m = self.mantissa.unsigned_abs();
        let digits = if m == 0 { 1 } else { m.ilog10() + 1 };
        digits.max(u32::from(self.scale) + 1)
    }

    /// Whether `written_digits() <= 2`, without a logarithm: at most one
    /// digit after the point and a mantissa below 100.
    pub fn has_at_most_two_digits(self) -> bool {
        self.scale <= 1 && self.mantissa.unsigned_abs() < 100
    }

    #[inline]
    fn normalized(mut mantissa: i128, mut scale: u8) -> Decimal {
        while scale > 0 && mantissa % 10 == 0 {
            mantissa /= 10;
            scale -= 1;
        }
        if mantissa == 0 {
            scale = 0;
        }
        Decimal { mantissa, scale }
    }

    /// The mantissa scaled to `scale` digits after the point.
    fn scaled(self, scale: u8) -> i128 {
        self.mantissa * 10i128.pow(u32::from(scale - self.scale))
    }

    /// A JSON number that is not an `i64`: exact when its shortest decimal
    /// form (which is what a sender wrote, for up to 15 significant digits)
    /// has at most 15 significant digits; `None` otherwise, since the
    /// binary float may not be what the sender meant.
    pub fn from_json_number(n: &serde_json::Number) -> Option<Decimal> {
        if let Some(u) = n.as_u64() {
            return Some(Decimal::normalized(i128::from(u), 0));
        }
        let f = n.as_f64().filter(|f| f.is_finite())?;
        if let Some(d) = Decimal::of_short_float(f) {
            return Some(d);
        }
        Decimal::of_float_text(f)
    }

    /// The decimal `m / 10^s` with the fewest places `s <= 15` and `|m| <
    /// 10^15` that reads as `f`, found by arithmetic instead of printing
    /// (prices and rates, the common case). Such a decimal has at most 15
    /// significant digits, so it is the only one of that size that reads
    /// as `f`: the one the printed shortest form names. `None` when there
    /// is none (the printed form decides).
    #[inline]
    fn of_short_float(f: f64) -> Option<Decimal> {
        const LIMIT: f64 = 1e15;
        let mut scale = 1.0_f64;
        for s in 0..=15u8 {
            let m = (f * scale).round();
            if m.abs() >= LIMIT {
                return None;
            }
            // `m` and `scale` are exact (below 2^53 and 10^22): the
            // quotient is rounded once, as parsing the decimal text is.
            if m / scale == f {
                return Some(Decimal::normalized(m as i128, s));
            }
            scale *= 10.0;
        }
        None
    }

    /// [`Decimal::from_json_number`] by the float's shortest printed form.
    fn of_float_text(f: f64) -> Option<Decimal> {
        // The shortest form, on the stack (a float of over 64 characters,
        // such as 1e100 written out, is read from a `String` instead).
        let mut buf = StackText::default();
        let heap;
        let text = if std::fmt::Write::write_fmt(&mut buf, format_args!("{f}")).is_ok() {
            buf.as_str()?
        } else {
            heap = f.to_string();
            heap.as_str()
        };
        // Digits from the first non-zero one to the last non-zero one.
        let (mut seen, mut significant) = (0, 0);
        for &b in text.as_bytes().iter().filter(|b| b.is_ascii_digit()) {
            if seen > 0 || b != b'0' {
                seen += 1;
                if b != b'0' {
                    significant = seen;
                }
            }
        }
        if significant > 15 {
            return None;
        }
        text.parse().ok()
    }
}

impl Decimal {
    /// Whether the value is below zero.
    pub fn is_negative(self) -> bool {
        self.mantissa < 0
    }

    /// Exact `self + other`; `None` when the sum has more than 20
    /// significant digits (it could not be read back).
    pub fn checked_add(self, other: Decimal) -> Option<Decimal> {
        let scale = self.scale.max(other.scale);
        let sum = self.scaled(scale).checked_add(other.scaled(scale))?;
        Decimal::bounded(sum, scale)
    }

    /// Exact `self - other`; `None` when the difference has more than 20
    /// significant digits.
    pub fn checked_sub(self, other: Decimal) -> Option<Decimal> {
        let scale = self.scale.max(other.scale);
        let diff = self.scaled(scale).checked_sub(other.scaled(scale))?;
        Decimal::bounded(diff, scale)
    }

    /// `self - other`, never below zero (what is left of a budget of
    /// `self` when `other` is spent).
    pub fn saturating_sub(self, other: Decimal) -> Decimal {
        if other >= self {
            return Decimal::default();
        }
        self.checked_sub(other).unwrap_or_default()
    }

    /// The normalized value `mantissa / 10^scale`, if it has at most 20
    /// significant digits.
    fn bounded(mantissa: i128, scale: u8) -> Option<Decimal> {
        let d = Decimal::normalized(mantissa, scale);
        (d.mantissa.unsigned_abs() < 10u128.pow(MAX_DIGITS as u32)).then_some(d)
    }

    /// The normalized mantissa (16 bytes, little-endian) and the scale:
    /// equal values give equal bytes (the key of `monitor::key_filter`).
    #[inline]
    pub(crate) fn key_bytes(self) -> [u8; 17] {
        let mut out = [0u8; 17];
        out[..16].copy_from_slice(&self.mantissa.to_le_bytes());
        out[16] = self.scale;
        out
    }

    /// The hash encoding, 17 bytes: the normalized mantissa (16 bytes,
    /// big-endian two's complement) and the scale (1 byte). Normalized, so
    /// equal values encode alike (`98.70` and `98.7`).
    pub(crate) fn encode(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.mantissa.to_be_bytes());
        out.push(self.scale);
    }
}

impl From<i64> for Decimal {
    fn from(i: i64) -> Decimal {
        Decimal::normalized(i128::from(i), 0)
    }
}

impl FromStr for Decimal {
    type Err = DecimalError;

    fn from_str(s: &str) -> Result<Decimal, DecimalError> {
        let (negative, body) = match s.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, s),
        };
        let (int, frac) = match body.split_once('.') {
            Some((i, f)) => (i, f),
            None => (body, ""),
        };
        let all_digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
        if int.is_empty()
            || !all_digits(int)
            || !all_digits(frac)
            || (body.contains('.') && frac.is_empty())
        {
            return Err(DecimalError::Syntax);
        }
        let frac = frac.trim_end_matches('0');
        if frac.len() > MAX_SCALE as usize {
            return Err(DecimalError::TooManyDecimals);
        }
        // The significant digits: the integer part without leading zeros,
        // then the fraction without trailing ones (read in place: no copy).
        let int = int.trim_start_matches('0');
        if int.len() + frac.len() > MAX_DIGITS {
            return Err(DecimalError::TooManyDigits);
        }
        let mut mantissa: i128 = 0;
        for b in int.bytes().chain(frac.bytes()) {
            mantissa = mantissa * 10 + i128::from(b - b'0');
        }
        if negative {
            mantissa = -mantissa;
        }
        // `frac.len() <= MAX_SCALE`, checked above.
        Ok(Decimal::normalized(mantissa, frac.len() as u8))
    }
}

impl Ord for Decimal {
    fn cmp(&self, other: &Decimal) -> Ordering {
        if self.scale == other.scale {
            return self.mantissa.cmp(&other.mantissa);
        }
        let scale = self.scale.max(other.scale);
        self.scaled(scale).cmp(&other.scaled(scale))
    }
}

impl PartialOrd for Decimal {
    fn partial_cmp(&self, other: &Decimal) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Decimal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.mantissa < 0 { "-" } else { "" };
        let abs = self.mantissa.unsigned_abs();
        if self.scale == 0 {
            return write!(f, "{sign}{abs}");
        }
        let unit = 10u128.pow(u32::from(self.scale));
        write!(
            f,
            "{sign}{}.{:0width$}",
            abs / unit,
            abs % unit,
            width = self.scale as usize
        )
    }
}

impl Serialize for Decimal {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Decimal {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Decimal, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Up to 64 bytes of text, written with `write!` without allocating.
struct StackText {
    bytes: [u8; 64],
    len: usize,
}

impl Default for StackText {
    fn default() -> StackText {
        StackText {
            bytes: [0; 64],
            len: 0,
        }
    }
}

impl StackText {
    fn as_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.bytes[..self.len]).ok()
    }
}

impl std::fmt::Write for StackText {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        let dest = self.bytes.get_mut(self.len..end).ok_or(std::fmt::Error)?;
        dest.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    /// The parse of before commit "decimal: parse in place": the digits
    /// copied into a `String` first. The oracle of the property below.
    fn parse_by_copy(s: &str) -> Result<Decimal, DecimalError> {
        let (negative, body) = match s.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, s),
        };
        let (int, frac) = body.split_once('.').unwrap_or((body, ""));
        let all_digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
        if int.is_empty() || !all_digits(int) || !all_digits(frac) || body.ends_with('.') {
            return Err(DecimalError::Syntax);
        }
        let frac = frac.trim_end_matches('0');
        if frac.len() > MAX_SCALE as usize {
            return Err(DecimalError::TooManyDecimals);
        }
        let digits = format!("{}{frac}", int.trim_start_matches('0'));
        if digits.len() > MAX_DIGITS {
            return Err(DecimalError::TooManyDigits);
        }
        let mut mantissa: i128 = 0;
        for b in digits.bytes() {
            mantissa = mantissa * 10 + i128::from(b - b'0');
        }
        Ok(Decimal::normalized(
            if negative { -mantissa } else { mantissa },
            frac.len() as u8,
        ))
    }

    /// The two-digit test at its edges: 99 and 9.9 are short, 100, 0.05
    /// and 10.5 are not (a mutant `<= 100` survived the property alone).
    #[test]
    fn two_digits_at_the_edges() {
        for (text, short) in [
            ("99", true),
            ("-99", true),
            ("9.9", true),
            ("0.5", true),
            ("100", false),
            ("-100", false),
            ("0.05", false),
            ("10.5", false),
        ] {
            let v = d(text);
            assert_eq!(v.has_at_most_two_digits(), short, "{text}");
            assert_eq!(v.written_digits() <= 2, short, "{text}");
        }
    }

    proptest::proptest! {
        /// The two-digit test answers as counting the written digits.
        #[test]
        fn two_digits_as_counted(m in -100_000i64..100_000, s in 0u8..6) {
            let d = Decimal::normalized(i128::from(m), s);
            proptest::prop_assert_eq!(d.has_at_most_two_digits(), d.written_digits() <= 2, "{}", d);
        }
    }

    proptest::proptest! {
        /// Reading a float by arithmetic answers as reading its printed
        /// form: for any bits, and for prices and rates (`k / 10^s`).
        #[test]
        fn floats_read_by_arithmetic_as_by_their_printed_form(
            bits in proptest::num::u64::ANY,
            k in -10_000_000_000i64..10_000_000_000,
            s in 0u32..18,
        ) {
            for f in [f64::from_bits(bits), k as f64 / 10f64.powi(s as i32)] {
                if f.is_finite() {
                    if let Some(d) = Decimal::of_short_float(f) {
                        proptest::prop_assert_eq!(Some(d), Decimal::of_float_text(f), "{}", f);
                    }
                }
            }
        }
    }

    proptest::proptest! {
        /// Parsing in place answers as parsing a copy of the digits did,
        /// errors included (texts of digits, zeros, points and signs).
        #[test]
        fn parsing_in_place_matches_the_copying_parse(s in "-?[0-9]{0,24}(\\.[0-9]{0,22})?|[-0.]{0,4}[0-9]{0,3}") {
            proptest::prop_assert_eq!(s.parse::<Decimal>(), parse_by_copy(&s));
        }
    }

    #[test]
    fn parses_normalizes_and_prints() {
        assert_eq!(d("98.70"), d("98.7"));
        assert_eq!(d("98.70").to_string(), "98.7");
        assert_eq!(d("-0.050").to_string(), "-0.05");
        assert_eq!(d("-0.0").to_string(), "0");
        assert_eq!(d("007").to_string(), "7");
        for bad in ["", ".5", "5.", "1e3", "+1", "1.2.3", "--1", "0x10", " 1"] {
            assert_eq!(bad.parse::<Decimal>(), Err(DecimalError::Syntax), "{bad}");
        }
        assert_eq!(
            "0.0000000000000000001".parse::<Decimal>(),
            Err(DecimalError::TooManyDecimals)
        );
        assert_eq!(
            "123456789012345678901".parse::<Decimal>(),
            Err(DecimalError::TooManyDigits)
        );
    }

    #[test]
    fn adds_and_subtracts_exactly() {
        assert_eq!(d("0.1").checked_add(d("0.2")), Some(d("0.3")));
        assert_eq!(d("4999.99").checked_add(d("0.01")), Some(d("5000")));
        assert_eq!(d("5000").checked_sub(d("0.01")), Some(d("4999.99")));
        assert_eq!(d("1").checked_sub(d("2.5")), Some(d("-1.5")));
        assert_eq!(d("5").saturating_sub(d("7")), d("0"));
        assert_eq!(d("5").saturating_sub(d("1.25")), d("3.75"));
        let big = d("99999999999999999999");
        assert_eq!(big.checked_add(d("1")), None, "21 significant digits");
        assert_eq!(big.checked_add(d("0")), Some(big));
        assert!(d("-0.5").is_negative() && !d("0").is_negative());
        use crate::value::Value;
        assert_eq!(Decimal::of_value(&Value::Int(7)), Some(d("7")));
        assert_eq!(Decimal::of_value(&Value::Decimal(d("7.5"))), Some(d("7.5")));
        assert_eq!(Decimal::of_value(&Value::Null), None);
        assert_eq!(Decimal::of_value(&Value::Str("7".into())), None);
    }

    #[test]
    fn compares_exactly() {
        assert!(d("98.70") < d("98.71"));
        assert!(d("100") > d("99.999999999999999999"));
        assert!(d("-1.5") < d("-1.25"));
        assert_eq!(d("0.1").cmp(&d("0.10")), Ordering::Equal);
        assert!(Decimal::from(i64::MAX) > d("9223372036854775806.5"));
    }

    #[test]
    fn normalizing_strips_trailing_zeros_after_the_point_only() {
        // Parsing strips them before, so only a direct call reaches the loop.
        let n = Decimal::normalized;
        assert_eq!(
            n(9870, 2),
            Decimal {
                mantissa: 987,
                scale: 1
            }
        );
        assert_eq!(
            n(-500, 2),
            Decimal {
                mantissa: -5,
                scale: 0
            }
        );
        assert_eq!(
            n(1200, 3),
            Decimal {
                mantissa: 12,
                scale: 1
            }
        );
        assert_eq!(n(0, 4), Decimal::default());
        assert_eq!(
            n(-10, 1),
            Decimal {
                mantissa: -1,
                scale: 0
            }
        );
        // Zeros before the point stay: 100 is not 1.
        assert_eq!(
            n(100, 0),
            Decimal {
                mantissa: 100,
                scale: 0
            }
        );
        assert_eq!(
            n(1205, 2),
            Decimal {
                mantissa: 1205,
                scale: 2
            }
        );
        assert_eq!(n(9870, 2), d("98.7"));
        assert_eq!(n(9870, 2).to_string(), "98.7");
    }

    #[test]
    fn json_numbers_are_exact_or_refused() {
        let n = |t: &str| serde_json::from_str::<serde_json::Number>(t).unwrap();
        assert_eq!(Decimal::from_json_number(&n("98.70")), Some(d("98.7")));
        assert_eq!(Decimal::from_json_number(&n("0.1")), Some(d("0.1")));
        assert_eq!(Decimal::from_json_number(&n("1e2")), Some(d("100")));
        assert_eq!(Decimal::from_json_number(&n("0.12345678901234567")), None);
        // 15 significant digits are exact; 16 are not trusted.
        assert_eq!(
            Decimal::from_json_number(&n("0.123456789012345")),
            Some(d("0.123456789012345"))
        );
        assert_eq!(Decimal::from_json_number(&n("0.1234567890123456")), None);
        // Prices are read by arithmetic; a sum's rounding error is not.
        assert_eq!(Decimal::of_short_float(1234.56), Some(d("1234.56")));
        assert_eq!(Decimal::of_short_float(-0.05), Some(d("-0.05")));
        assert_eq!(Decimal::of_short_float(0.1 + 0.2), None);
        assert_eq!(Decimal::from_json_number(&n("0.30000000000000004")), None);
        // Serialized as a string, and read back.
        let json = serde_json::to_string(&d("98.70")).unwrap();
        assert_eq!(json, r#""98.7""#);
        assert_eq!(serde_json::from_str::<Decimal>(&json).unwrap(), d("98.7"));
        assert!(serde_json::from_str::<Decimal>(r#""1,5""#).is_err());
    }

    /// The stack-written form reads floats as the `String` form did,
    /// including those written out beyond the 64-byte buffer (`1e100`).
    #[test]
    fn json_floats_read_as_their_written_form() {
        let by_string = |f: f64| {
            let text = format!("{f}");
            let digits: String = text.chars().filter(char::is_ascii_digit).collect();
            let significant = digits.trim_start_matches('0').trim_end_matches('0').len();
            (significant <= 15)
                .then(|| text.parse::<Decimal>().ok())
                .flatten()
        };
        let mut floats = vec![0.5, -0.5, 98.7, 1e-7, 1.5e-300, 1e15, 1e100, -1e100, 1e300];
        floats.extend((1..2000).map(|i| f64::from(i) * 0.37 - 300.0));
        floats.extend((1..300).map(|e| 1.25 * 10f64.powi(e - 150)));
        for f in floats {
            let Some(n) = serde_json::Number::from_f64(f) else {
                continue;
            };
            if n.as_u64().is_some() || n.as_i64().is_some() {
                continue;
            }
            assert_eq!(Decimal::from_json_number(&n), by_string(f), "{f}");
        }
    }
}
