//! Kubernetes resource quantities (`100m`, `1.5Gi`, `1e3`, ...), parsed exactly.
//!
//! Upstream keeps arbitrary-precision decimals but rounds every parsed value up (away from
//! zero) to nano precision, so an `i128` count of nano-units holds every value a real cluster
//! sends without loss. Sums stay exact; [`Quantity::value`] and [`Quantity::milli_value`]
//! round up only at the end, as upstream's `Value()`/`MilliValue()` do.

use std::fmt;

const NANOS_PER_UNIT: i128 = 1_000_000_000;
const NANOS_PER_MILLI: i128 = 1_000_000;

/// Why a quantity string was rejected (upstream's ErrFormatWrong / ErrSuffix / ErrNumeric).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    Format,
    #[error("unable to parse quantity's suffix")]
    Suffix,
}

/// An exact quantity in nano-units (1 = 10^-9 of the base unit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Quantity {
    nanos: i128,
}

impl Quantity {
    pub const ZERO: Quantity = Quantity { nanos: 0 };

    pub const fn from_nanos(nanos: i128) -> Self {
        Quantity { nanos }
    }
    pub const fn from_milli(milli: i64) -> Self {
        Quantity {
            nanos: milli as i128 * NANOS_PER_MILLI,
        }
    }
    pub const fn from_value(value: i64) -> Self {
        Quantity {
            nanos: value as i128 * NANOS_PER_UNIT,
        }
    }
    pub const fn nanos(self) -> i128 {
        self.nanos
    }
    /// Integer value, rounded away from zero (upstream `Value()`), saturating at i64 bounds.
    pub fn value(self) -> i64 {
        clamp_i64(div_away_from_zero(self.nanos, NANOS_PER_UNIT))
    }
    /// Value in thousandths, rounded away from zero (upstream `MilliValue()`).
    pub fn milli_value(self) -> i64 {
        clamp_i64(div_away_from_zero(self.nanos, NANOS_PER_MILLI))
    }
    pub fn is_zero(self) -> bool {
        self.nanos == 0
    }
    pub fn saturating_add(self, other: Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_add(other.nanos),
        }
    }
}

impl std::ops::Add for Quantity {
    type Output = Quantity;
    fn add(self, rhs: Quantity) -> Quantity {
        self.saturating_add(rhs)
    }
}

impl std::ops::AddAssign for Quantity {
    fn add_assign(&mut self, rhs: Quantity) {
        *self = self.saturating_add(rhs);
    }
}

impl fmt::Display for Quantity {
    /// Debug-friendly rendering in nano precision (not upstream's canonical form).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.nanos < 0 { "-" } else { "" };
        let abs = self.nanos.unsigned_abs();
        let whole = abs / NANOS_PER_UNIT as u128;
        let frac = abs % NANOS_PER_UNIT as u128;
        if frac == 0 {
            write!(f, "{sign}{whole}")
        } else {
            let frac = format!("{frac:09}");
            write!(f, "{sign}{whole}.{}", frac.trim_end_matches('0'))
        }
    }
}

impl std::str::FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_quantity(s)
    }
}

fn clamp_i64(v: i128) -> i64 {
    v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

fn div_away_from_zero(n: i128, d: i128) -> i128 {
    let q = n / d;
    if n % d == 0 {
        q
    } else if n > 0 {
        q + 1
    } else {
        q - 1
    }
}

/// Parses a k8s-openapi quantity (a thin wrapper over the same string).
pub fn parse_k8s_quantity(
    q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity,
) -> Result<Quantity, QuantityError> {
    parse_quantity(&q.0)
}

#[derive(Clone, Copy)]
enum Base {
    Decimal(i64),
    Binary(u32),
}

/// Parses a Kubernetes quantity string with upstream's grammar and rounding.
pub fn parse_quantity(s: &str) -> Result<Quantity, QuantityError> {
    if s.is_empty() {
        return Err(QuantityError::Format);
    }
    let b = s.as_bytes();
    let mut pos = 0;
    let mut negative = false;
    match b[0] {
        b'-' => {
            negative = true;
            pos = 1;
        }
        b'+' => pos = 1,
        _ => {}
    }
    while pos < b.len() && b[pos] == b'0' {
        pos += 1;
    }
    // Upstream treats a string of only sign/zeros as 0.
    if pos >= b.len() {
        return Ok(Quantity::ZERO);
    }
    let int_start = pos;
    while pos < b.len() && b[pos].is_ascii_digit() {
        pos += 1;
    }
    let int_digits = &s[int_start..pos];
    let mut frac_digits = "";
    if pos < b.len() && b[pos] == b'.' {
        pos += 1;
        let frac_start = pos;
        while pos < b.len() && b[pos].is_ascii_digit() {
            pos += 1;
        }
        frac_digits = &s[frac_start..pos];
    }
    // Suffix: letters from the suffix alphabet, an optional sign, then digits only.
    let suffix_start = pos;
    while pos < b.len() && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < b.len() && (b[pos] == b'-' || b[pos] == b'+') {
        pos += 1;
    }
    while pos < b.len() && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos != b.len() {
        return Err(QuantityError::Format);
    }
    let base = interpret_suffix(&s[suffix_start..])?;
    // Beyond i128 nanos (~1.7e29 units) saturate; no real request comes close.
    let nanos = to_nanos(int_digits, frac_digits, base).unwrap_or(i128::MAX);
    // Upstream caps binary-SI quantities at the largest int64.
    let nanos = match base {
        Base::Binary(_) => nanos.min(i64::MAX as i128 * NANOS_PER_UNIT),
        Base::Decimal(_) => nanos,
    };
    Ok(Quantity {
        nanos: if negative { -nanos } else { nanos },
    })
}

fn interpret_suffix(suffix: &str) -> Result<Base, QuantityError> {
    let base = match suffix {
        "n" => Base::Decimal(-9),
        "u" => Base::Decimal(-6),
        "m" => Base::Decimal(-3),
        "" => Base::Decimal(0),
        "k" => Base::Decimal(3),
        "M" => Base::Decimal(6),
        "G" => Base::Decimal(9),
        "T" => Base::Decimal(12),
        "P" => Base::Decimal(15),
        "E" => Base::Decimal(18),
        "Ki" => Base::Binary(10),
        "Mi" => Base::Binary(20),
        "Gi" => Base::Binary(30),
        "Ti" => Base::Binary(40),
        "Pi" => Base::Binary(50),
        "Ei" => Base::Binary(60),
        _ => {
            let rest = suffix
                .strip_prefix('e')
                .or_else(|| suffix.strip_prefix('E'))
                .filter(|r| !r.is_empty())
                .ok_or(QuantityError::Suffix)?;
            let exp: i64 = rest.parse().map_err(|_| QuantityError::Suffix)?;
            Base::Decimal(exp)
        }
    };
    Ok(base)
}

/// Magnitude in nanos, rounded up; `None` when it overflows i128 (caller saturates).
fn to_nanos(int_digits: &str, frac_digits: &str, base: Base) -> Option<i128> {
    let frac_digits = frac_digits.trim_end_matches('0');
    let digits: String = [int_digits, frac_digits].concat();
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return Some(0);
    }
    let (exp10, exp2) = match base {
        Base::Decimal(e) => (
            e.saturating_sub(frac_digits.len() as i64).saturating_add(9),
            0u32,
        ),
        Base::Binary(e) => (9 - frac_digits.len() as i64, e),
    };
    if exp2 == 0 {
        if exp10 >= 0 {
            let n: i128 = digits.parse().ok()?;
            let scale = 10i128.checked_pow(u32::try_from(exp10).ok()?)?;
            return n.checked_mul(scale);
        }
        // Drop the digits below nano precision and round up if any of them was non-zero.
        let drop = usize::try_from(exp10.unsigned_abs()).unwrap_or(usize::MAX);
        if drop >= digits.len() {
            return Some(1);
        }
        let (keep, dropped) = digits.split_at(digits.len() - drop);
        let n: i128 = keep.parse().ok()?;
        let round = dropped.bytes().any(|c| c != b'0');
        return n.checked_add(round as i128);
    }
    let n: i128 = digits.parse().ok()?;
    let n = n.checked_mul(1i128.checked_shl(exp2)?)?;
    if exp10 >= 0 {
        return n.checked_mul(10i128.checked_pow(exp10 as u32)?);
    }
    match 10i128.checked_pow(exp10.unsigned_abs() as u32) {
        Some(d) => Some(div_away_from_zero(n, d)),
        // Divisor beyond i128: the (positive, < i128::MAX) value is below one nano.
        None => Some(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        // (input, value(), milli_value())
        let cases: &[(&str, i64, i64)] = &[
            ("0", 0, 0),
            ("100m", 1, 100),
            ("1.5", 2, 1500),
            ("2Gi", 2 << 30, (2i64 << 30) * 1000),
            ("500Mi", 500 << 20, (500i64 << 20) * 1000),
            ("1e3", 1000, 1_000_000),
            ("1E3", 1000, 1_000_000),
            ("1E", 1_000_000_000_000_000_000, i64::MAX),
            ("0.1", 1, 100),
            ("1k", 1000, 1_000_000),
            ("1Ki", 1024, 1_024_000),
            ("1Ei", 1 << 60, i64::MAX),
            ("12n", 1, 1),
            ("+1", 1, 1000),
            ("-1", -1, -1000),
            ("-1.5", -2, -1500),
            ("1.", 1, 1000),
            (".5", 1, 500),
            ("1.5Gi", 1_610_612_736, 1_610_612_736_000),
            ("0.5Ki", 512, 512_000),
            ("1e-3", 1, 1),
            ("1e+3", 1000, 1_000_000),
            ("2.5m", 1, 3),
            ("1u", 1, 1),
            ("1M", 1_000_000, 1_000_000_000),
            ("1T", 1_000_000_000_000, 1_000_000_000_000_000),
            ("1P", 1_000_000_000_000_000, 1_000_000_000_000_000_000),
            ("007", 7, 7000),
            ("0.0000000001", 1, 1),
            ("16Ei", i64::MAX, i64::MAX),
            ("1e30", i64::MAX, i64::MAX),
            ("1.000000000000000000000000000000000000000001", 2, 1001),
            // Upstream quirk: a bare suffix or sign has an empty numerator, read as 0.
            ("Gi", 0, 0),
            ("-", 0, 0),
        ];
        for (input, value, milli) in cases {
            let q = parse_quantity(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(q.value(), *value, "value of {input}");
            assert_eq!(q.milli_value(), *milli, "milli of {input}");
        }
    }

    #[test]
    fn sub_nano_rounds_up_at_parse() {
        assert_eq!(parse_quantity("0.1n").unwrap().nanos(), 1);
        assert_eq!(parse_quantity("1.1n").unwrap().nanos(), 2);
        assert_eq!(parse_quantity("0.5m").unwrap().nanos(), 500_000);
    }

    #[test]
    fn sums_stay_exact_before_rounding() {
        let half = parse_quantity("0.5m").unwrap();
        assert_eq!((half + half).milli_value(), 1);
        assert_eq!(half.milli_value() + half.milli_value(), 2);
    }

    #[test]
    fn rejects_bad_input() {
        for bad in [
            "", " 1", "1 ", "abc", "1.1.1", "1Gb", "1K", "1i", "0.1mi", "1e", "1e1.5", "1ee3",
            "1m3", "--1", "1+1", ".5i", "-3.01e-", "1e3x",
        ] {
            assert!(parse_quantity(bad).is_err(), "{bad:?} should fail");
        }
    }
}
