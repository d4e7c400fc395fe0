//! How the reward and the tools print a number (`format_number`), and an exact reader for
//! the short decimals most numbers are (`short_decimal`).
//!
//! A value within 1e-9 of an integer prints as that integer's exact decimal digits (after
//! Python's round-half-even), so `1e300` prints all of its 301 digits. Anything else prints
//! with 10 decimals, trailing zeros and a trailing dot removed. Rust's `{:.N}` formatting is
//! exact and rounds ties to even, like CPython's `PyOS_double_to_string`.

use std::fmt;

/// Why a value has no text form as a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormatError {
    /// `round(inf)` raises OverflowError in Python.
    Infinite,
    /// `round(nan)` raises ValueError in Python.
    NotANumber,
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::Infinite => write!(f, "cannot format an infinite value as a number"),
            FormatError::NotANumber => write!(f, "cannot format NaN as a number"),
        }
    }
}

impl std::error::Error for FormatError {}

/// Python's `round(x)` for floats: nearest integer, ties to even, returned as a float.
///
/// Python returns an `int`, so a negative zero result becomes `0.0`.
pub fn round_half_even(x: f64) -> f64 {
    let nearest = x.round();
    let rounded = if (x - nearest).abs() == 0.5 {
        2.0 * (x / 2.0).round()
    } else {
        nearest
    };
    if rounded == 0.0 {
        0.0
    } else {
        rounded
    }
}

/// The number's text: exact integer digits within 1e-9 of an integer, else at most 10
/// decimals; an error for NaN and infinities, which Python's `round()` refuses.
pub fn format_number(value: f64) -> Result<String, FormatError> {
    if value.is_nan() {
        return Err(FormatError::NotANumber);
    }
    if value.is_infinite() {
        return Err(FormatError::Infinite);
    }
    let rounded = round_half_even(value);
    if (value - rounded).abs() < 1e-9 {
        // `rounded` is integral: below 2^63 it converts to i64 exactly, and above that
        // `{:.0}` prints its exact digits with nothing to round.
        if rounded.abs() < 9.2e18 {
            return Ok((rounded as i64).to_string());
        }
        return Ok(format!("{rounded:.0}"));
    }
    let fixed = format!("{value:.10}");
    let trimmed = fixed.trim_end_matches('0');
    Ok(trimmed.strip_suffix('.').unwrap_or(trimmed).to_string())
}

/// Powers of ten that are exact as floats, up to the most fraction digits
/// [`short_decimal`] takes.
const EXACT_POWERS_OF_TEN: [f64; 16] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
];

/// Python's `float(text)` for the short decimals most numbers are, without building a
/// string: an optional sign, then at most 15 ASCII digits with at most one dot among them
/// (`48`, `-6.25`, `.5`, `5.`). The digits as an integer and the power of ten are both
/// exact floats, so one division rounds correctly, as `float()` does. `None` for anything
/// else (no digit, an exponent, underscores, more digits): callers read those the general way.
pub fn short_decimal(text: impl IntoIterator<Item = char>) -> Option<f64> {
    let mut chars = text.into_iter().peekable();
    let negative = chars.next_if(|&c| c == '-' || c == '+') == Some('-');
    let mut digits: u64 = 0;
    let mut count = 0;
    let mut fraction: Option<usize> = None;
    for c in chars {
        match c {
            '0'..='9' => {
                digits = digits * 10 + u64::from(c) - u64::from('0');
                count += 1;
                if let Some(places) = fraction.as_mut() {
                    *places += 1;
                }
            }
            '.' if fraction.is_none() => fraction = Some(0),
            _ => return None,
        }
        if count > 15 {
            return None;
        }
    }
    if count == 0 {
        return None;
    }
    let magnitude = digits as f64 / EXACT_POWERS_OF_TEN[fraction.unwrap_or(0)];
    Some(if negative { -magnitude } else { magnitude })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_decimals_read_like_the_general_parser() {
        let mut texts: Vec<String> = [
            "0",
            "-0",
            "+7",
            "-249",
            "6956",
            ".5",
            "-.5",
            "5.",
            "01.5",
            "0.1",
            "91.402637848",
            "-999999999999999",
            "0.00000000000001",
            "123456789.012345",
        ]
        .map(String::from)
        .to_vec();
        // Fractions whose digits do not fit a float exactly, with 1 to 15 digits in all.
        for k in 0..3000u64 {
            let digits = (k * 7_919_113 + 3) % 10u64.pow((k % 15) as u32 + 1);
            let text = digits.to_string();
            let point = (k % 7) as usize % (text.len() + 1);
            let sign = ["", "-", "+"][(k % 3) as usize];
            texts.push(format!("{sign}{}.{}", &text[..point], &text[point..]));
        }
        for text in &texts {
            let general: f64 = text.parse().unwrap_or(f64::NAN);
            let short = short_decimal(text.chars()).map(f64::to_bits);
            assert_eq!(short, Some(general.to_bits()), "{text}");
        }
        for other in [
            "",
            "-",
            ".",
            "1e5",
            "1_0",
            "1.2.3",
            "--1",
            " 1",
            "1234567890123456",
            "0.000000000000001",
            "٣",
        ] {
            assert_eq!(short_decimal(other.chars()), None, "{other}");
        }
    }

    fn fmt(v: f64) -> String {
        format_number(v).unwrap_or_else(|e| format!("error: {e}"))
    }

    #[test]
    fn integral_values_print_as_integers() {
        assert_eq!(fmt(3.0), "3");
        assert_eq!(fmt(-4.0), "-4");
        assert_eq!(fmt(1024.0), "1024");
        assert_eq!(fmt(2.0000000000001), "2");
        assert_eq!(fmt(1.2345678901234568e29), "123456789012345677877719597056");
        assert_eq!(fmt(1.633123935319537e16), "16331239353195370");
        assert_eq!(fmt(9.2e18), "9200000000000000000");
        assert_eq!(fmt(-9.3e18), "-9300000000000000000");
        assert_eq!(fmt(-4503599627370497.0), "-4503599627370497");
    }

    #[test]
    fn huge_integral_values_print_every_digit() {
        let s = fmt(1e300);
        assert_eq!(s.len(), 301);
        assert!(s.starts_with("1000000000000000052504760255204420248704468581108159154915"));
        assert!(s.ends_with("459400540160"));
    }

    #[test]
    fn negative_zero_and_tiny_values_print_zero() {
        assert_eq!(fmt(-0.0), "0");
        assert_eq!(fmt(-1e-11), "0");
        assert_eq!(fmt(4e-10), "0");
        assert_eq!(fmt(-0.4999999999), "-0.4999999999");
    }

    #[test]
    fn fractions_use_ten_decimals_without_trailing_zeros() {
        assert_eq!(fmt(0.30000000000000004), "0.3");
        assert_eq!(fmt(1.0 / 3.0), "0.3333333333");
        assert_eq!(fmt(std::f64::consts::PI), "3.1415926536");
        assert_eq!(fmt(-0.8178819121159085), "-0.8178819121");
        assert_eq!(fmt(1e-9), "0.000000001");
        assert_eq!(fmt(-1e-9), "-0.000000001");
        assert_eq!(fmt(1000000000000000.5), "1000000000000000.5");
        assert_eq!(fmt(4503599627370495.5), "4503599627370495.5");
    }

    #[test]
    fn ties_at_the_tenth_decimal_round_to_even() {
        // 1/2048 = 0.00048828125 exactly: the 11th decimal is a tie.
        assert_eq!(fmt(1.0 / 2048.0), "0.0004882812");
        assert_eq!(fmt(3.0 / 2048.0), "0.0014648438");
    }

    #[test]
    fn round_half_even_matches_python() {
        assert_eq!(round_half_even(2.5), 2.0);
        assert_eq!(round_half_even(3.5), 4.0);
        assert_eq!(round_half_even(-0.5), 0.0);
        assert!(round_half_even(-0.5).is_sign_positive());
        assert_eq!(round_half_even(-1.5), -2.0);
        assert_eq!(round_half_even(0.49999999999999994), 0.0);
        assert_eq!(round_half_even(4503599627370497.0), 4503599627370497.0);
    }

    #[test]
    fn non_finite_values_are_errors() {
        assert_eq!(format_number(f64::INFINITY), Err(FormatError::Infinite));
        assert_eq!(format_number(f64::NEG_INFINITY), Err(FormatError::Infinite));
        assert_eq!(format_number(f64::NAN), Err(FormatError::NotANumber));
    }
}
