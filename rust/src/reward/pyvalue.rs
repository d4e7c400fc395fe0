//! Python's view of JSON values where the reward looks at them: `str()`, `repr()`,
//! `float()`, `dict.get` and `json.dumps(sort_keys=True)`.
//!
//! The reward reads ground-truth items, message contents and tool arguments as `str(x)`
//! whatever their type, so these conversions decide what text the scorer sees. Containers
//! print as Python's `repr`, written here without recursion so any nesting is safe.

use std::borrow::Cow;
use std::fmt::Write as _;

use crate::pychar::{digit_value, is_printable, is_space, strip as py_strip};
use crate::pyjson::{DumpOptions, Value};

/// `d.get(key)` when `value` is a dict; `None` for a missing key or a non-dict.
pub fn get<'a>(value: &'a Value, key: &str) -> Option<&'a Value> {
    value.as_object().and_then(|obj| obj.get(key))
}

/// Python `repr(x)` (also `str(x)`) of a float: shortest round-trip digits, `inf`, `nan`.
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        "nan".to_string()
    } else if x.is_infinite() {
        if x > 0.0 { "inf" } else { "-inf" }.to_string()
    } else {
        // json.dumps writes finite floats with float.__repr__.
        Value::Float(x).to_json_string()
    }
}

/// Python `str(x)`: strings as they are, scalars as Python prints them, containers as
/// their `repr`.
pub fn py_str(value: &Value) -> Cow<'_, str> {
    match value {
        Value::Str(s) => Cow::Borrowed(s),
        Value::Null => Cow::Borrowed("None"),
        Value::Bool(true) => Cow::Borrowed("True"),
        Value::Bool(false) => Cow::Borrowed("False"),
        Value::Int(i) => Cow::Owned(i.to_string()),
        Value::BigInt(text) => Cow::Borrowed(text),
        Value::Float(x) => Cow::Owned(float_repr(*x)),
        Value::Array(_) | Value::Object(_) => Cow::Owned(py_repr(value)),
    }
}

/// A container still being written by [`py_repr`].
enum Open<'a> {
    List(std::slice::Iter<'a, Value>, bool),
    Dict(std::slice::Iter<'a, (String, Value)>, bool),
}

/// Python `repr(x)`, iteratively.
pub fn py_repr(value: &Value) -> String {
    let mut out = String::new();
    let mut stack: Vec<Open<'_>> = Vec::new();
    let mut next = Some(value);
    loop {
        if let Some(v) = next.take() {
            match v {
                Value::Array(items) => {
                    out.push('[');
                    stack.push(Open::List(items.iter(), true));
                }
                Value::Object(obj) => {
                    out.push('{');
                    stack.push(Open::Dict(obj.iter(), true));
                }
                Value::Str(s) => write_str_repr(&mut out, s),
                scalar => out.push_str(&py_str(scalar)),
            }
        }
        let Some(top) = stack.last_mut() else {
            return out;
        };
        match top {
            Open::List(items, first) => match items.next() {
                Some(item) => {
                    if !*first {
                        out.push_str(", ");
                    }
                    *first = false;
                    next = Some(item);
                }
                None => {
                    out.push(']');
                    stack.pop();
                }
            },
            Open::Dict(entries, first) => match entries.next() {
                Some((key, item)) => {
                    if !*first {
                        out.push_str(", ");
                    }
                    *first = false;
                    write_str_repr(&mut out, key);
                    out.push_str(": ");
                    next = Some(item);
                }
                None => {
                    out.push('}');
                    stack.pop();
                }
            },
        }
    }
}

/// Python `repr(s)` of a string: single quotes unless the text has a single quote and no
/// double quote; backslash escapes for quotes, `\\`, `\t\n\r` and unprintable characters.
pub fn write_str_repr(out: &mut String, s: &str) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if is_printable(c) => out.push(c),
            c => {
                let cp = c as u32;
                // Writing to a String cannot fail.
                let _ = if cp < 0x100 {
                    write!(out, "\\x{cp:02x}")
                } else if cp < 0x10000 {
                    write!(out, "\\u{cp:04x}")
                } else {
                    write!(out, "\\U{cp:08x}")
                };
            }
        }
    }
    out.push(quote);
}

/// The text `json.dumps(value, sort_keys=True, ensure_ascii=False)` gives, by which repeated
/// tool calls are recognised.
pub fn dumps_sorted(value: &Value) -> String {
    value.to_json_string_with(&DumpOptions {
        compact: false,
        sort_keys: true,
    })
}

/// Whether two values print the same under `json.dumps(..., sort_keys=True)`: structural
/// equality where dict key order is ignored, floats compare by their `repr` (all NaNs
/// alike, `-0.0` apart from `0.0`) and `1`, `1.0` and `true` all differ. Iterative.
pub fn same_json(a: &Value, b: &Value) -> bool {
    let mut stack: Vec<(&Value, &Value)> = vec![(a, b)];
    while let Some(pair) = stack.pop() {
        match pair {
            (Value::Null, Value::Null) => {}
            (Value::Bool(x), Value::Bool(y)) if x == y => {}
            (Value::Int(x), Value::Int(y)) if x == y => {}
            (Value::BigInt(x), Value::BigInt(y)) if x == y => {}
            (Value::Float(x), Value::Float(y))
                if x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()) => {}
            (Value::Str(x), Value::Str(y)) if x == y => {}
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                stack.extend(x.iter().zip(y));
            }
            (Value::Object(x), Value::Object(y)) if x.len() == y.len() => {
                // Key lookups are linear; large objects compare by their sorted text.
                if x.len() > 16 {
                    if dumps_sorted(pair.0) != dumps_sorted(pair.1) {
                        return false;
                    }
                    continue;
                }
                for (key, xv) in x {
                    match y.get(key) {
                        Some(yv) => stack.push((xv, yv)),
                        None => return false,
                    }
                }
            }
            _ => return false,
        }
    }
    true
}

/// A number as Python's `==` sees it, for comparing values of different numeric types.
enum Number<'a> {
    Small(i128),
    Big(&'a str),
    Float(f64),
}

fn as_number(value: &Value) -> Option<Number<'_>> {
    match value {
        Value::Bool(b) => Some(Number::Small(i128::from(*b))),
        Value::Int(i) => Some(Number::Small(i128::from(*i))),
        Value::BigInt(text) => Some(Number::Big(text)),
        Value::Float(x) => Some(Number::Float(*x)),
        _ => None,
    }
}

/// Python `a == b` for JSON scalars (`1 == 1.0 == True`, NaN never equal); containers
/// compare as [`same_json`].
pub fn py_equal(a: &Value, b: &Value) -> bool {
    if let (Some(x), Some(y)) = (as_number(a), as_number(b)) {
        let float_equals_int = |f: f64, int_text: &dyn Fn() -> String| {
            f.is_finite() && f.fract() == 0.0 && format!("{f:.0}") == int_text()
        };
        return match (x, y) {
            (Number::Small(p), Number::Small(q)) => p == q,
            (Number::Big(p), Number::Big(q)) => p == q,
            (Number::Float(p), Number::Float(q)) => p == q,
            (Number::Small(i), Number::Float(f)) | (Number::Float(f), Number::Small(i)) => {
                float_equals_int(f, &|| i.to_string())
            }
            (Number::Big(t), Number::Float(f)) | (Number::Float(f), Number::Big(t)) => {
                float_equals_int(f, &|| t.to_string())
            }
            (Number::Small(_), Number::Big(_)) | (Number::Big(_), Number::Small(_)) => false,
        };
    }
    match (a, b) {
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::Null, Value::Null) => true,
        (Value::Array(_), Value::Array(_)) | (Value::Object(_), Value::Object(_)) => {
            same_json(a, b)
        }
        _ => false,
    }
}

/// Python's `float(str(x))` for a value whose text is a plain decimal
/// (`[-+]?\d+(\.\d+)?` after stripping and dropping commas), else `None`; without
/// printing numbers. A float prints plainly exactly when it is finite and zero or of
/// magnitude in [1e-4, 1e16), and then reads back as itself.
pub fn plain_number_of(value: &Value) -> Option<f64> {
    match value {
        Value::Str(s) => crate::reward::answer::parse_plain_number(s),
        Value::Int(i) => Some(*i as f64),
        Value::BigInt(text) => text.parse::<f64>().ok(),
        Value::Float(x) => {
            let magnitude = x.abs();
            let plain = *x == 0.0 || (1e-4..1e16).contains(&magnitude);
            (x.is_finite() && plain).then_some(*x)
        }
        Value::Null | Value::Bool(_) | Value::Array(_) | Value::Object(_) => None,
    }
}

/// Python `float(x)` for a JSON value, or the error message Python would give.
pub fn py_float(value: &Value) -> Result<f64, String> {
    match value {
        Value::Float(x) => Ok(*x),
        Value::Int(i) => Ok(*i as f64),
        Value::Bool(b) => Ok(if *b { 1.0 } else { 0.0 }),
        Value::BigInt(text) => match text.parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(x),
            _ => Err("int too large to convert to float".to_string()),
        },
        Value::Str(s) => float_from_text(s).ok_or_else(|| {
            let mut shown = String::new();
            write_str_repr(&mut shown, s);
            format!("could not convert string to float: {shown}")
        }),
        other => Err(format!(
            "float() argument must be a string or a real number, not '{}'",
            other.type_name()
        )),
    }
}

/// Python `float(text)` for a string: surrounding whitespace allowed, Unicode decimal
/// digits, `_` between digits, exponents, `inf`/`infinity`/`nan` in any case.
pub fn float_from_text(text: &str) -> Option<f64> {
    let s = py_strip(text);
    let mut ascii = String::with_capacity(s.len());
    for c in s.chars() {
        if let Some(d) = digit_value(c) {
            ascii.push(char::from_digit(d, 10)?);
        } else if c.is_ascii() && !is_space(c) {
            ascii.push(c);
        } else {
            return None;
        }
    }
    let (negative, body) = match ascii.as_bytes().first() {
        Some(b'-') => (true, &ascii[1..]),
        Some(b'+') => (false, &ascii[1..]),
        _ => (false, &ascii[..]),
    };
    let lower = body.to_ascii_lowercase();
    let magnitude = match lower.as_str() {
        "inf" | "infinity" => f64::INFINITY,
        "nan" => f64::NAN,
        _ => parse_decimal_literal(body)?,
    };
    Some(if negative { -magnitude } else { magnitude })
}

/// An unsigned decimal literal with Python's underscore rule (one `_` only between digits).
fn parse_decimal_literal(body: &str) -> Option<f64> {
    let bytes = body.as_bytes();
    let mut cleaned = String::with_capacity(body.len());
    let mut mantissa_digits = 0usize;
    let mut i = 0;
    // Digits (with underscores) of one run starting at i; returns the count of digits.
    let digit_run = |i: &mut usize, cleaned: &mut String| -> Option<usize> {
        let mut count = 0;
        while *i < bytes.len() {
            let b = bytes[*i];
            if b.is_ascii_digit() {
                cleaned.push(char::from(b));
                count += 1;
            } else if b == b'_' {
                let next_is_digit = bytes.get(*i + 1).is_some_and(u8::is_ascii_digit);
                if count == 0 || !next_is_digit {
                    return None;
                }
            } else {
                break;
            }
            *i += 1;
        }
        Some(count)
    };
    mantissa_digits += digit_run(&mut i, &mut cleaned)?;
    if bytes.get(i) == Some(&b'.') {
        cleaned.push('.');
        i += 1;
        mantissa_digits += digit_run(&mut i, &mut cleaned)?;
    }
    if mantissa_digits == 0 {
        return None;
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        cleaned.push('e');
        i += 1;
        if let Some(&sign @ (b'+' | b'-')) = bytes.get(i) {
            cleaned.push(char::from(sign));
            i += 1;
        }
        if digit_run(&mut i, &mut cleaned)? == 0 {
            return None;
        }
    }
    if i != bytes.len() {
        return None;
    }
    cleaned.parse::<f64>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pyjson::Object;

    fn obj(pairs: Vec<(&str, Value)>) -> Value {
        Value::Object(Object::from_pairs(
            pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        ))
    }

    #[test]
    fn str_of_scalars_is_python_str() {
        assert_eq!(py_str(&Value::Null), "None");
        assert_eq!(py_str(&Value::Bool(true)), "True");
        assert_eq!(py_str(&Value::Float(1e16)), "1e+16");
        assert_eq!(py_str(&Value::Float(-249.0)), "-249.0");
        assert_eq!(py_str(&Value::Float(0.0001)), "0.0001");
        assert_eq!(py_str(&Value::Float(f64::NAN)), "nan");
        assert_eq!(py_str(&Value::Float(f64::NEG_INFINITY)), "-inf");
        assert_eq!(py_str(&Value::Int(-3)), "-3");
    }

    #[test]
    fn float_repr_picks_the_nearest_of_equally_short_digits() {
        // Both ...62 and ...63 round-trip; Python prints the one nearer the value.
        assert_eq!(float_repr(244600618285743.63), "244600618285743.62");
    }

    #[test]
    fn str_of_containers_is_python_repr() {
        let v = obj(vec![
            (
                "a",
                Value::Array(vec![Value::Int(1), Value::Str("it's".into())]),
            ),
            ("b", Value::Null),
            ("c", Value::Str("tab\there \u{85}".into())),
        ]);
        assert_eq!(
            py_str(&v),
            "{'a': [1, \"it's\"], 'b': None, 'c': 'tab\\there \\x85'}"
        );
        assert_eq!(
            py_repr(&Value::Str("both ' and \"".into())),
            "'both \\' and \"'"
        );
        assert_eq!(py_repr(&Value::Array(vec![])), "[]");
        assert_eq!(py_repr(&obj(vec![])), "{}");
    }

    #[test]
    fn repr_of_deep_nesting_does_not_recurse() {
        let mut v = Value::Int(0);
        for _ in 0..100_000 {
            v = Value::Array(vec![v]);
        }
        let text = py_repr(&v);
        assert_eq!(text.len(), 200_001);
        // Drop iteratively too: a deep Value's recursive drop would overflow the stack.
        let mut current = v;
        while let Value::Array(mut items) = current {
            current = items.pop().unwrap_or(Value::Null);
        }
    }

    #[test]
    fn float_of_text_follows_python() {
        assert_eq!(float_from_text(" 1_000.5 "), Some(1000.5));
        assert_eq!(float_from_text("٣.٥"), Some(3.5));
        assert_eq!(float_from_text("-Infinity"), Some(f64::NEG_INFINITY));
        assert!(float_from_text("nan").is_some_and(f64::is_nan));
        assert_eq!(float_from_text("1e3"), Some(1000.0));
        assert_eq!(float_from_text(".5"), Some(0.5));
        assert_eq!(float_from_text("5."), Some(5.0));
        assert_eq!(float_from_text("1.e5"), Some(1e5));
        assert_eq!(float_from_text("1e1_0"), Some(1e10));
        for bad in [
            "", ".", "1__0", "_1", "1_", "1_.5", "1._5", "e5", "1e", "0x10", "1,5", "infx",
        ] {
            assert_eq!(float_from_text(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn float_of_values_follows_python() {
        assert_eq!(py_float(&Value::Bool(true)), Ok(1.0));
        assert_eq!(py_float(&Value::Str("2.5".into())), Ok(2.5));
        assert!(py_float(&Value::Null).is_err());
        assert!(py_float(&Value::BigInt("9".repeat(400))).is_err());
        let msg = py_float(&Value::Str("km".into())).unwrap_err();
        assert_eq!(msg, "could not convert string to float: 'km'");
    }

    #[test]
    fn json_sameness_matches_sorted_dumps() {
        let a = obj(vec![("b", Value::Int(1)), ("a", Value::Float(f64::NAN))]);
        let b = obj(vec![("a", Value::Float(f64::NAN)), ("b", Value::Int(1))]);
        assert!(same_json(&a, &b));
        assert_eq!(dumps_sorted(&a), dumps_sorted(&b));
        let pairs = [
            (Value::Int(1), Value::Float(1.0)),
            (Value::Int(1), Value::Bool(true)),
            (Value::Float(0.0), Value::Float(-0.0)),
            (Value::Str("1".into()), Value::Int(1)),
            (
                obj(vec![("a", Value::Int(1))]),
                obj(vec![("b", Value::Int(1))]),
            ),
        ];
        for (x, y) in &pairs {
            assert!(!same_json(x, y), "{x:?} {y:?}");
            assert_ne!(dumps_sorted(x), dumps_sorted(y));
        }
    }

    #[test]
    fn python_equality_of_scalars() {
        assert!(py_equal(&Value::Int(1), &Value::Float(1.0)));
        assert!(py_equal(&Value::Bool(true), &Value::Int(1)));
        assert!(!py_equal(&Value::Float(f64::NAN), &Value::Float(f64::NAN)));
        assert!(py_equal(
            &Value::BigInt("100000000000000000000".into()),
            &Value::Float(1e20)
        ));
        assert!(!py_equal(&Value::Str("1".into()), &Value::Int(1)));
        assert!(py_equal(&Value::Null, &Value::Null));
    }

    #[test]
    fn plain_numbers_read_like_float_of_str() {
        assert_eq!(plain_number_of(&Value::Float(-249.0)), Some(-249.0));
        assert_eq!(plain_number_of(&Value::Float(0.0001)), Some(0.0001));
        assert_eq!(plain_number_of(&Value::Float(0.00009)), None); // repr 9e-05
        assert_eq!(plain_number_of(&Value::Float(1e16)), None); // repr 1e+16
        assert_eq!(
            plain_number_of(&Value::Float(9999999999999998.0)),
            Some(9999999999999998.0)
        );
        assert_eq!(plain_number_of(&Value::Float(f64::INFINITY)), None);
        assert_eq!(plain_number_of(&Value::Int(-7)), Some(-7.0));
        assert_eq!(
            plain_number_of(&Value::Str(" 1,234.5 ".into())),
            Some(1234.5)
        );
        assert_eq!(plain_number_of(&Value::Bool(true)), None);
        for x in [1.5e-4, 0.1, 123456.789, -1e15, 5e-324, 1e-5, 2.5e16] {
            let via_text = crate::reward::answer::parse_plain_number(&float_repr(x));
            assert_eq!(plain_number_of(&Value::Float(x)), via_text, "{x}");
        }
    }

    #[test]
    fn sorted_dumps_ignore_key_order() {
        let a = obj(vec![("b", Value::Int(1)), ("a", Value::Float(2.0))]);
        let b = obj(vec![("a", Value::Float(2.0)), ("b", Value::Int(1))]);
        assert_eq!(dumps_sorted(&a), dumps_sorted(&b));
        assert_eq!(dumps_sorted(&a), "{\"a\": 2.0, \"b\": 1}");
    }
}
