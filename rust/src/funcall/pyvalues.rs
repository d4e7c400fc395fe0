//! Argument values as the checker sees them: Python's types, Python's `==`, and the string
//! standardisation that makes `"April 1, 2024"` and `"april 1 2024"` the same answer.

use crate::pychar::lower as py_lower;
use crate::pyjson::Value;

/// The Python type of a decoded JSON value (`type(value)`), for the checker's exact type
/// comparisons: `bool` is not `int`, `int` is not `float`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PyType {
    None,
    Bool,
    Int,
    Float,
    Str,
    List,
    Dict,
}

pub fn py_type(value: &Value) -> PyType {
    match value {
        Value::Null => PyType::None,
        Value::Bool(_) => PyType::Bool,
        Value::Int(_) | Value::BigInt(_) => PyType::Int,
        Value::Float(_) => PyType::Float,
        Value::Str(_) => PyType::Str,
        Value::Array(_) => PyType::List,
        Value::Object(_) => PyType::Dict,
    }
}

/// Is `value` the empty string, the marker of an argument that may be left out?
pub fn is_omit_marker(value: &Value) -> bool {
    matches!(value, Value::Str(s) if s.is_empty())
}

/// Python's `a == b` for JSON values: numbers compare by value across `bool`, `int` and
/// `float` (`True == 1 == 1.0`), lists item by item, dicts by key set and values.
pub fn py_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| py_eq(v, w)))
        }
        _ => match (number(a), number(b)) {
            (Some(x), Some(y)) => numbers_equal(&x, &y),
            _ => false,
        },
    }
}

/// A number for comparison: an exact integer, or a float.
enum Number<'a> {
    Int(i64),
    Big(&'a str),
    Float(f64),
}

fn number(value: &Value) -> Option<Number<'_>> {
    match value {
        Value::Bool(b) => Some(Number::Int(i64::from(*b))),
        Value::Int(i) => Some(Number::Int(*i)),
        Value::BigInt(text) => Some(Number::Big(text)),
        Value::Float(f) => Some(Number::Float(*f)),
        _ => None,
    }
}

/// Python compares an `int` with a `float` exactly (no rounding of the integer).
fn numbers_equal(a: &Number<'_>, b: &Number<'_>) -> bool {
    match (a, b) {
        (Number::Int(x), Number::Int(y)) => x == y,
        (Number::Big(x), Number::Big(y)) => x == y,
        (Number::Int(_), Number::Big(_)) | (Number::Big(_), Number::Int(_)) => false,
        (Number::Float(x), Number::Float(y)) => x == y,
        (Number::Float(f), Number::Int(i)) | (Number::Int(i), Number::Float(f)) => {
            float_equals_int(*f, *i)
        }
        (Number::Float(f), Number::Big(text)) | (Number::Big(text), Number::Float(f)) => {
            // An integral float prints exactly with no decimals; a big integer's text has
            // no leading zeros or `+`, so equal values print the same.
            f.is_finite() && f.fract() == 0.0 && format!("{f:.0}") == *text
        }
    }
}

fn float_equals_int(f: f64, i: i64) -> bool {
    if !f.is_finite() || f.fract() != 0.0 || f.abs() >= 9.3e18 {
        return false;
    }
    // `f` is integral and within i128, so the conversion is exact.
    f as i128 == i128::from(i)
}

/// `x in items` with Python's `==`.
pub fn contains(items: &[Value], x: &Value) -> bool {
    items.iter().any(|item| py_eq(item, x))
}

/// The checker's string standardisation: drop spaces and `,./-_*^`, lower-case (Python's
/// `str.lower`), then turn single quotes into double quotes.
pub fn standardize(text: &str) -> String {
    if text.is_ascii() {
        // One pass: ASCII lower-casing maps no character onto a dropped one or a quote.
        let mut out = String::with_capacity(text.len());
        for c in text.chars() {
            match c {
                ' ' | ',' | '.' | '/' | '-' | '_' | '*' | '^' => {}
                '\'' => out.push('"'),
                c => out.push(c.to_ascii_lowercase()),
            }
        }
        return out;
    }
    let kept: String = text
        .chars()
        .filter(|c| !matches!(c, ' ' | ',' | '.' | '/' | '-' | '_' | '*' | '^'))
        .collect();
    py_lower(&kept).replace('\'', "\"")
}

/// A string standardised, any other value as it is.
pub fn standardized(value: &Value) -> Value {
    match value {
        Value::Str(s) => Value::Str(standardize(s)),
        other => other.clone(),
    }
}

/// Python's `len()` of a value the checker iterates by index, with the items that
/// iteration yields (a string yields its characters); `None` where Python would raise.
pub fn indexable_items(value: &Value) -> Option<Vec<Value>> {
    match value {
        Value::Array(items) => Some(items.clone()),
        Value::Str(s) => Some(s.chars().map(|c| Value::Str(c.to_string())).collect()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pyjson::{parse, ParseOptions};

    fn v(text: &str) -> Value {
        parse(text, &ParseOptions::python()).unwrap_or(Value::Null)
    }

    #[test]
    fn numbers_compare_across_bool_int_and_float_as_python_does() {
        assert!(py_eq(&v("1"), &v("1.0")));
        assert!(py_eq(&v("true"), &v("1")));
        assert!(py_eq(&v("false"), &v("0.0")));
        assert!(!py_eq(&v("1"), &v("1.5")));
        assert!(!py_eq(&v("1"), &v("\"1\"")));
        assert!(py_eq(&v("1e20"), &v("100000000000000000000")));
        assert!(!py_eq(&v("9007199254740993"), &v("9007199254740992.0")));
    }

    #[test]
    fn containers_compare_item_by_item_and_dicts_ignore_key_order() {
        assert!(py_eq(&v("[1, [2.0, \"a\"]]"), &v("[1.0, [2, \"a\"]]")));
        assert!(!py_eq(&v("[1, 2]"), &v("[2, 1]")));
        assert!(py_eq(
            &v("{\"a\": 1, \"b\": 2}"),
            &v("{\"b\": 2, \"a\": 1.0}")
        ));
        assert!(!py_eq(&v("{\"a\": 1}"), &v("{\"a\": 1, \"b\": 2}")));
    }

    #[test]
    fn standardisation_drops_spaces_and_punctuation_and_lowercases() {
        assert_eq!(standardize("April 1, 2024"), "april12024");
        assert_eq!(standardize("New_York-City./*^"), "newyorkcity");
        assert_eq!(standardize("It's"), "it\"s");
        // Only the ASCII space goes; a tab stays.
        assert_eq!(standardize("a\tb"), "a\tb");
        assert_eq!(standardize("ÄÖ"), "äö");
    }

    #[test]
    fn a_string_is_indexed_by_its_characters() {
        assert_eq!(
            indexable_items(&v("\"ab\"")),
            Some(vec![v("\"a\""), v("\"b\"")])
        );
        assert_eq!(indexable_items(&v("3")), None);
    }
}
