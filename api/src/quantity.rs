//! Kubernetes resource quantities (`100m`, `1.5`, `2Gi`, `1e3`).
//!
//! A [`Quantity`] keeps the text it was parsed from (that is what objects store and what messages
//! quote) and its value in nano-units, Kubernetes' finest precision: anything finer is rounded up,
//! as `resource.Quantity` does.

use std::cmp::Ordering;
use std::fmt;

use serde_json::Value;

/// The pattern Kubernetes quotes when a quantity does not parse.
const QUANTITY_PATTERN: &str = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$";

/// Nano-units per unit.
const NANOS_PER_UNIT: i128 = 1_000_000_000;
/// Nano-units per milli-unit.
const NANOS_PER_MILLI: i128 = 1_000_000;

/// Why a quantity could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The text is not of the quantity grammar.
    #[error("invalid quantity {input:?}: quantities must match the regular expression '{QUANTITY_PATTERN}'")]
    Format { input: String },
    /// The JSON value is neither a string nor a number.
    #[error("invalid quantity {value}: must be a string or a number")]
    NotAQuantity { value: String },
}

impl QuantityError {
    /// Kubernetes' own wording (without the input), used in validation causes.
    pub fn detail(&self) -> String {
        match self {
            QuantityError::Format { .. } => {
                format!("quantities must match the regular expression '{QUANTITY_PATTERN}'")
            }
            QuantityError::NotAQuantity { .. } => "must be a string or a number".to_string(),
        }
    }
}

/// A parsed quantity: the original text and its exact value in nano-units (saturating on the
/// absurdly large).
#[derive(Debug, Clone)]
pub struct Quantity {
    text: String,
    nanos: i128,
    /// Written with a binary suffix (`Ki`…`Ei`): sums and canonical forms keep that style.
    binary: bool,
}

/// Parses a quantity; shorthand for [`Quantity::parse`].
pub fn parse(s: &str) -> Result<Quantity, QuantityError> {
    Quantity::parse(s)
}

impl Quantity {
    /// Parses `<sign?><digits[.digits]><suffix>` where the suffix is a binary SI suffix
    /// (`Ki`…`Ei`), a decimal SI suffix (`n u m "" k M G T P E`) or a decimal exponent (`e3`, `E-2`).
    pub fn parse(s: &str) -> Result<Quantity, QuantityError> {
        let err = || QuantityError::Format {
            input: s.to_string(),
        };
        let bytes = s.as_bytes();
        let mut pos = 0;
        let negative = match bytes.first() {
            Some(b'+') => {
                pos = 1;
                false
            }
            Some(b'-') => {
                pos = 1;
                true
            }
            _ => false,
        };
        let number_start = pos;
        while pos < bytes.len() && (bytes[pos].is_ascii_digit() || bytes[pos] == b'.') {
            pos += 1;
        }
        let number = &s[number_start..pos];
        let (int_part, frac_part) = match number.split_once('.') {
            Some((i, f)) => (i, f),
            None => (number, ""),
        };
        if frac_part.contains('.') || (int_part.is_empty() && frac_part.is_empty()) {
            return Err(err());
        }
        let (decimal_exp, binary_exp) = parse_suffix(&s[pos..]).ok_or_else(err)?;

        // value = digits * 10^(decimal_exp - frac_len) * 1024^binary_exp, in nano-units.
        let digits = format!("{int_part}{frac_part}");
        let significant = digits.trim_start_matches('0');
        // Every character is a digit here, so a failed parse can only be an overflow.
        let mantissa = if significant.is_empty() {
            0
        } else {
            significant.parse::<i128>().unwrap_or(i128::MAX)
        };
        let scale = decimal_exp
            .saturating_add(9)
            .saturating_sub(frac_part.len() as i64);
        let mut nanos = mantissa;
        for _ in 0..binary_exp {
            nanos = nanos.saturating_mul(1024);
        }
        nanos = if scale >= 0 {
            nanos.saturating_mul(pow10(scale))
        } else {
            let divisor = pow10(-scale);
            // Round up (away from zero for the magnitude), like Kubernetes.
            div_ceil(nanos, divisor)
        };
        Ok(Quantity {
            text: s.to_string(),
            nanos: if negative { -nanos } else { nanos },
            binary: binary_exp > 0,
        })
    }

    /// Reads a quantity from JSON: a string, or a number (as YAML manifests give `cpu: 1`).
    pub fn from_value(value: &Value) -> Result<Quantity, QuantityError> {
        match value {
            Value::String(s) => Quantity::parse(s),
            Value::Number(n) => Quantity::parse(&n.to_string()),
            other => Err(QuantityError::NotAQuantity {
                value: other.to_string(),
            }),
        }
    }

    /// The value in milli-units (CPU style), rounded up; saturates at the i64 range.
    pub fn as_milli(&self) -> i64 {
        clamp(div_ceil(self.nanos, NANOS_PER_MILLI))
    }

    /// The value in units (bytes, counts), rounded up; saturates at the i64 range.
    pub fn as_units(&self) -> i64 {
        clamp(div_ceil(self.nanos, NANOS_PER_UNIT))
    }

    /// The text the quantity was parsed from.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// Zero, written `0`.
    pub fn zero() -> Quantity {
        Quantity::from_nanos(0, false)
    }

    /// A count (`pods=3`).
    pub fn from_count(count: i64) -> Quantity {
        Quantity::from_nanos(i128::from(count) * NANOS_PER_UNIT, false)
    }

    fn from_nanos(nanos: i128, binary: bool) -> Quantity {
        Quantity {
            text: canonical_text(nanos, binary),
            nanos,
            binary,
        }
    }

    /// The sum, in this quantity's style (or `other`'s when this one is zero), written
    /// canonically as Kubernetes prints quota usage.
    pub fn add(&self, other: &Quantity) -> Quantity {
        let binary = if self.nanos == 0 {
            other.binary
        } else {
            self.binary
        };
        Quantity::from_nanos(self.nanos.saturating_add(other.nanos), binary)
    }

    /// The difference, in this quantity's style.
    pub fn sub(&self, other: &Quantity) -> Quantity {
        Quantity::from_nanos(self.nanos.saturating_sub(other.nanos), self.binary)
    }

    /// The value divided by another's, as a float (limit/request ratios).
    pub fn ratio(&self, other: &Quantity) -> f64 {
        self.nanos as f64 / other.nanos as f64
    }

    /// Kubernetes' canonical form (`Quantity.String()`): `1000m` is `1`, `0.5` is `500m`,
    /// `1.5Gi` is `1536Mi`.
    pub fn canonical(&self) -> String {
        canonical_text(self.nanos, self.binary)
    }
}

/// The canonical text of a value: binary suffixes when the value came with one and is a whole
/// number of bytes, else the largest decimal suffix that keeps the mantissa whole.
fn canonical_text(nanos: i128, binary: bool) -> String {
    if nanos == 0 {
        return "0".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let magnitude = nanos.unsigned_abs();
    let unit = NANOS_PER_UNIT as u128;
    if binary && magnitude.is_multiple_of(unit) {
        let mut units = magnitude / unit;
        let mut suffix = 0;
        while suffix < 6 && units.is_multiple_of(1024) {
            units /= 1024;
            suffix += 1;
        }
        let suffixes = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
        return format!("{sign}{units}{}", suffixes[suffix]);
    }
    // Decimal: exponents -9 (n) … 18 (E) in steps of 3.
    let suffixes = ["n", "u", "m", "", "k", "M", "G", "T", "P", "E"];
    let mut mantissa = magnitude;
    let mut index = 0;
    while index + 1 < suffixes.len() && mantissa.is_multiple_of(1000) {
        mantissa /= 1000;
        index += 1;
    }
    format!("{sign}{mantissa}{}", suffixes[index])
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Quantities compare by value: `1` == `1000m`.
impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

/// Returns (decimal exponent, binary exponent in powers of 1024) of a suffix.
fn parse_suffix(suffix: &str) -> Option<(i64, u32)> {
    let known = match suffix {
        "" => Some((0, 0)),
        "n" => Some((-9, 0)),
        "u" => Some((-6, 0)),
        "m" => Some((-3, 0)),
        "k" => Some((3, 0)),
        "M" => Some((6, 0)),
        "G" => Some((9, 0)),
        "T" => Some((12, 0)),
        "P" => Some((15, 0)),
        "E" => Some((18, 0)),
        "Ki" => Some((0, 1)),
        "Mi" => Some((0, 2)),
        "Gi" => Some((0, 3)),
        "Ti" => Some((0, 4)),
        "Pi" => Some((0, 5)),
        "Ei" => Some((0, 6)),
        _ => None,
    };
    if known.is_some() {
        return known;
    }
    let exponent = suffix
        .strip_prefix('e')
        .or_else(|| suffix.strip_prefix('E'))?;
    let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Huge exponents saturate rather than fail: the value is then "very large" or "tiny".
    let value = exponent
        .parse::<i64>()
        .unwrap_or(if exponent.starts_with('-') {
            -1000
        } else {
            1000
        });
    Some((value.clamp(-1000, 1000), 0))
}

/// 10^exp, saturating at i128::MAX.
fn pow10(exp: i64) -> i128 {
    let mut out: i128 = 1;
    for _ in 0..exp {
        out = out.saturating_mul(10);
        if out == i128::MAX {
            break;
        }
    }
    out
}

fn div_ceil(n: i128, d: i128) -> i128 {
    let q = n / d;
    if n % d > 0 {
        q + 1
    } else {
        q
    }
}

fn clamp(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn q(s: &str) -> Quantity {
        parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn cpu_style() {
        assert_eq!(q("100m").as_milli(), 100);
        assert_eq!(q("1").as_milli(), 1000);
        assert_eq!(q("1.5").as_milli(), 1500);
        assert_eq!(q("+1").as_milli(), 1000);
        assert_eq!(q("0.1").as_milli(), 100);
        assert_eq!(q(".5").as_milli(), 500);
        assert_eq!(q("1.").as_milli(), 1000);
        assert_eq!(q("100m").as_units(), 1, "rounded up");
        assert_eq!(q("1u").as_milli(), 1, "rounded up");
        assert_eq!(q("250n").as_milli(), 1);
        assert_eq!(q("0").as_milli(), 0);
        assert_eq!(q("-1").as_milli(), -1000);
        assert!(q("-1").is_negative());
    }

    #[test]
    fn byte_style() {
        assert_eq!(q("2Gi").as_units(), 2 * 1024 * 1024 * 1024);
        assert_eq!(q("500Mi").as_units(), 500 * 1024 * 1024);
        assert_eq!(q("1Ki").as_units(), 1024);
        assert_eq!(q("1k").as_units(), 1000);
        assert_eq!(q("1M").as_units(), 1_000_000);
        assert_eq!(q("1G").as_units(), 1_000_000_000);
        assert_eq!(q("1e3").as_units(), 1000);
        assert_eq!(q("1E3").as_units(), 1000);
        assert_eq!(q("1E").as_units(), 1_000_000_000_000_000_000);
        assert_eq!(q("5e-3").as_milli(), 5);
        assert_eq!(q("1.5Gi").as_units(), 1_610_612_736);
        assert_eq!(q("8Ei").as_units(), i64::MAX, "saturates");
    }

    #[test]
    fn compares_by_value() {
        assert_eq!(q("1"), q("1000m"));
        assert!(q("600m") > q("500m"));
        assert!(q("1Gi") > q("1G"));
        assert_eq!(q("1Gi").to_string(), "1Gi");
    }

    #[test]
    fn sums_print_canonically() {
        assert_eq!(q("100m").add(&q("200m")).to_string(), "300m");
        assert_eq!(q("500m").add(&q("500m")).to_string(), "1");
        assert_eq!(q("64Mi").add(&q("64Mi")).to_string(), "128Mi");
        assert_eq!(q("1.5Gi").canonical(), "1536Mi");
        assert_eq!(q("0.5").canonical(), "500m");
        assert_eq!(q("1000m").canonical(), "1");
        assert_eq!(q("2k").canonical(), "2k");
        assert_eq!(Quantity::zero().add(&q("1Gi")).to_string(), "1Gi");
        assert_eq!(q("1").sub(&q("250m")).to_string(), "750m");
        assert_eq!(Quantity::from_count(3).to_string(), "3");
        assert!((q("2").ratio(&q("500m")) - 4.0).abs() < 1e-9);
    }

    #[test]
    fn rejects_garbage_naming_the_input() {
        for bad in [
            "", "abc", "1x", "1.2.3", "Gi", "1 Gi", "--1", "1e", "1e+", "1Kb", ".", "+",
        ] {
            let err = parse(bad).expect_err(bad);
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
        assert!(parse("abc")
            .unwrap_err()
            .to_string()
            .contains("quantities must match the regular expression"));
    }

    #[test]
    fn from_json_values() {
        assert_eq!(
            Quantity::from_value(&json!("250m")).map(|q| q.as_milli()),
            Ok(250)
        );
        assert_eq!(Quantity::from_value(&json!(2)).map(|q| q.as_units()), Ok(2));
        assert_eq!(
            Quantity::from_value(&json!(0.5)).map(|q| q.as_milli()),
            Ok(500)
        );
        assert!(matches!(
            Quantity::from_value(&json!(true)),
            Err(QuantityError::NotAQuantity { .. })
        ));
    }
}
