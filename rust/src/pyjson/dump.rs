//! The encoder: the text `json.dumps(value, ensure_ascii=False, ...)` produces.

use std::fmt::Write as _;

use super::scan::find_special;
use super::value::Value;

/// Formatting choices of `json.dumps` that the reward and the parsers use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DumpOptions {
    /// `separators=(",", ":")` when true; Python's default `(", ", ": ")` when false.
    pub compact: bool,
    /// `sort_keys=True`: object keys in code point order.
    pub sort_keys: bool,
}

impl DumpOptions {
    /// `json.dumps(v, ensure_ascii=False, separators=(",", ":"))`: the text of a canonical
    /// tool call.
    pub const fn compact() -> Self {
        DumpOptions {
            compact: true,
            sort_keys: false,
        }
    }

    /// `json.dumps(v, ensure_ascii=False)` with Python's default separators.
    pub const fn python_default() -> Self {
        DumpOptions {
            compact: false,
            sort_keys: false,
        }
    }
}

impl Default for DumpOptions {
    fn default() -> Self {
        Self::compact()
    }
}

/// An object's entries in the order they are written.
enum Entries<'a> {
    /// Insertion order (no copy of the entry list).
    InOrder(std::slice::Iter<'a, (String, Value)>),
    Sorted(std::vec::IntoIter<&'a (String, Value)>),
}

impl<'a> Iterator for Entries<'a> {
    type Item = &'a (String, Value);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Entries::InOrder(it) => it.next(),
            Entries::Sorted(it) => it.next(),
        }
    }
}

/// A container whose remaining children are still to be written.
enum Pending<'a> {
    Array(std::slice::Iter<'a, Value>),
    Object(Entries<'a>),
}

impl Value {
    /// Compact JSON: `json.dumps(v, ensure_ascii=False, separators=(",", ":"))`.
    pub fn to_json_string(&self) -> String {
        self.to_json_string_with(&DumpOptions::compact())
    }

    /// JSON text exactly as `json.dumps(v, ensure_ascii=False, ...)` writes it with these
    /// options (non-finite floats as `NaN`/`Infinity`, as Python's default `allow_nan`).
    pub fn to_json_string_with(&self, opts: &DumpOptions) -> String {
        let mut out = String::new();
        self.write_json(&mut out, opts);
        out
    }

    /// Appends the text of [`Value::to_json_string_with`] to `out`.
    pub fn write_json(&self, out: &mut String, opts: &DumpOptions) {
        let (item_sep, key_sep) = if opts.compact {
            (",", ":")
        } else {
            (", ", ": ")
        };
        let mut stack: Vec<Pending<'_>> = Vec::new();
        let mut next: Option<&Value> = Some(self);
        loop {
            if let Some(value) = next.take() {
                match value {
                    Value::Array(items) => {
                        out.push('[');
                        stack.push(Pending::Array(items.iter()));
                        // The first child is written without a separator.
                        match stack.last_mut() {
                            Some(Pending::Array(it)) => next = it.next(),
                            _ => next = None,
                        }
                        if next.is_none() {
                            stack.pop();
                            out.push(']');
                        }
                    }
                    Value::Object(obj) => {
                        out.push('{');
                        let mut it = if opts.sort_keys {
                            let mut entries: Vec<&(String, Value)> = obj.iter().collect();
                            entries.sort_by(|a, b| a.0.cmp(&b.0));
                            Entries::Sorted(entries.into_iter())
                        } else {
                            Entries::InOrder(obj.iter())
                        };
                        match it.next() {
                            Some((k, v)) => {
                                write_str(out, k);
                                out.push_str(key_sep);
                                next = Some(v);
                                stack.push(Pending::Object(it));
                            }
                            None => out.push('}'),
                        }
                    }
                    scalar => write_scalar(out, scalar),
                }
                continue;
            }
            // The current value is written: move to the next sibling or close containers.
            match stack.last_mut() {
                None => return,
                Some(Pending::Array(it)) => match it.next() {
                    Some(v) => {
                        out.push_str(item_sep);
                        next = Some(v);
                    }
                    None => {
                        out.push(']');
                        stack.pop();
                    }
                },
                Some(Pending::Object(it)) => match it.next() {
                    Some((k, v)) => {
                        out.push_str(item_sep);
                        write_str(out, k);
                        out.push_str(key_sep);
                        next = Some(v);
                    }
                    None => {
                        out.push('}');
                        stack.pop();
                    }
                },
            }
        }
    }
}

fn write_scalar(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Int(i) => write_int(out, *i),
        Value::BigInt(digits) => out.push_str(digits),
        Value::Float(f) => write_float(out, *f),
        Value::Str(s) => write_str(out, s),
        // Containers are handled by the caller's stack.
        Value::Array(_) | Value::Object(_) => {}
    }
}

/// A JSON string literal with `json.dumps(ensure_ascii=False)` escaping.
fn write_str(out: &mut String, s: &str) {
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    loop {
        let i = find_special(bytes, start, b'"', true);
        // Special bytes are ASCII, so `start` and `i` are char boundaries.
        out.push_str(&s[start..i]);
        let Some(&b) = bytes.get(i) else {
            break;
        };
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            _ => {
                let _ = write!(out, "\\u{b:04x}");
            }
        }
        start = i + 1;
    }
    out.push('"');
}

/// Appends the decimal digits of `n`, as `{n}` would, without the formatting machinery.
fn write_int(out: &mut String, n: i64) {
    if let Ok(digit @ 0..=9) = u8::try_from(n) {
        out.push(char::from(b'0' + digit));
        return;
    }
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = n.unsigned_abs();
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    if n < 0 {
        out.push('-');
    }
    // ASCII digits only.
    out.push_str(std::str::from_utf8(&digits[at..]).unwrap_or_default());
}

/// `float.__repr__` as `json.dumps` uses it, plus `NaN`/`Infinity`/`-Infinity`.
fn write_float(out: &mut String, f: f64) {
    if f.is_nan() {
        out.push_str("NaN");
        return;
    }
    if f.is_infinite() {
        out.push_str(if f > 0.0 { "Infinity" } else { "-Infinity" });
        return;
    }
    write_float_repr(out, f);
}

/// Appends Python's `repr(float)` of a finite value (see [`python_float_repr`]).
pub(crate) fn write_float_repr(out: &mut String, f: f64) {
    // Integral values below 1e16 print as their integer and ".0": the common case of
    // reward details (counts and flags), without the general digit search.
    if f.fract() == 0.0 && f.abs() < 1e16 && f != 0.0 {
        write_int(out, f as i64);
        out.push_str(".0");
        return;
    }
    REPR_CACHE.with(|cache| {
        let Ok(mut cache) = cache.try_borrow_mut() else {
            out.push_str(&python_float_repr(f));
            return;
        };
        if cache.is_empty() {
            cache.resize(REPR_SLOTS, (EMPTY_SLOT, String::new()));
        }
        let bits = f.to_bits();
        let slot = (bits.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54) as usize % REPR_SLOTS;
        let entry = &mut cache[slot];
        if entry.0 != bits {
            *entry = (bits, python_float_repr(f));
        }
        out.push_str(&entry.1);
    });
}

/// Slots of the per-thread cache of float reprs, by bit pattern: reward details repeat a
/// few fractions over and over, and the shortest-digit search is the costly part.
const REPR_SLOTS: usize = 1024;
/// A NaN pattern, never cached (only finite values are), marking an empty slot.
const EMPTY_SLOT: u64 = u64::MAX;

thread_local! {
    static REPR_CACHE: std::cell::RefCell<Vec<(u64, String)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Python's `repr(float)` for a finite value: the shortest digits that round-trip, written
/// positionally when the decimal exponent is in -4..16 and in `1.5e+16` style otherwise.
pub(crate) fn python_float_repr(f: f64) -> String {
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.to_string();
    }
    // Rust's `{:e}` gives the shortest digits that round-trip ("-1.2345e-7"). When two
    // strings of that length round-trip, Python takes the one nearest the value (ties to
    // even), which Rust's correctly rounded fixed-precision formatting gives; it is used when
    // it still round-trips (at a power of two the nearer one may fall outside).
    let shortest = format!("{f:e}");
    let digits_len = shortest
        .split('e')
        .next()
        .map_or(1, |m| m.bytes().filter(u8::is_ascii_digit).count());
    let nearest = format!("{:.*e}", digits_len.saturating_sub(1), f);
    let sci = if nearest.parse::<f64>() == Ok(f) {
        nearest
    } else {
        shortest
    };
    let (negative, body) = match sci.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, sci.as_str()),
    };
    let (mantissa, exp) = body.split_once('e').unwrap_or((body, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    // Value = 0.DIGITS * 10^point.
    let point = exp + 1;
    let mut out = String::with_capacity(digits.len() + 8);
    if negative {
        out.push('-');
    }
    let n = digits.len() as i32;
    if -4 < point && point <= 16 {
        if point <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-point) as usize));
            out.push_str(&digits);
        } else if point >= n {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', (point - n) as usize));
            out.push_str(".0");
        } else {
            let (int_part, frac) = digits.split_at(point as usize);
            out.push_str(int_part);
            out.push('.');
            out.push_str(frac);
        }
    } else {
        let (first, rest) = digits.split_at(1);
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        let e = point - 1;
        let _ = write!(out, "e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pyjson::{parse, Object, ParseOptions};

    #[test]
    fn float_repr_matches_python() {
        let cases: &[(f64, &str)] = &[
            (1.0, "1.0"),
            (-0.0, "-0.0"),
            (0.1, "0.1"),
            (0.30000000000000004, "0.30000000000000004"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (1234567890123456.7, "1234567890123456.8"),
            (12345678901234567.0, "1.2345678901234568e+16"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (-2.5e300, "-2.5e+300"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (123.456, "123.456"),
            // 2**49 + 0.25: ".2" and ".3" both round-trip and are equally near; Python
            // takes the even digit.
            (562949953421312.2, "562949953421312.2"),
            (100.0, "100.0"),
        ];
        for (f, want) in cases {
            assert_eq!(python_float_repr(*f), *want, "{f:e}");
            // Twice: computed, then from the cache.
            for _ in 0..2 {
                let mut written = String::new();
                write_float_repr(&mut written, *f);
                assert_eq!(written, *want, "{f:e}");
            }
        }
    }

    #[test]
    fn strings_escape_like_json_dumps() {
        let v = Value::Str("a\"b\\c\n\u{1}\u{7f}é😀\u{2028}".into());
        assert_eq!(
            v.to_json_string(),
            "\"a\\\"b\\\\c\\n\\u0001\u{7f}é😀\u{2028}\""
        );
    }

    #[test]
    fn compact_and_default_separators() {
        let text = "{\"name\": \"f\", \"arguments\": {\"b\": [1, 2.5, null, true], \"a\": {}}}";
        let v = parse(text, &ParseOptions::python()).unwrap_or(Value::Null);
        assert_eq!(
            v.to_json_string(),
            "{\"name\":\"f\",\"arguments\":{\"b\":[1,2.5,null,true],\"a\":{}}}"
        );
        assert_eq!(v.to_json_string_with(&DumpOptions::python_default()), text);
        let sorted = DumpOptions {
            compact: false,
            sort_keys: true,
        };
        assert_eq!(
            v.to_json_string_with(&sorted),
            "{\"arguments\": {\"a\": {}, \"b\": [1, 2.5, null, true]}, \"name\": \"f\"}"
        );
    }

    #[test]
    fn integers_are_written_in_full() {
        for n in [0, 7, 9, -1, -7, 10, 1234567890, i64::MAX, i64::MIN] {
            let mut out = String::new();
            write_int(&mut out, n);
            assert_eq!(out, n.to_string());
        }
    }

    #[test]
    fn non_finite_and_big_numbers() {
        let v = Value::Array(vec![
            Value::Float(f64::NAN),
            Value::Float(f64::NEG_INFINITY),
            Value::BigInt("123456789012345678901234567890".into()),
            Value::Int(-7),
            Value::Array(vec![]),
            Value::Object(Object::new()),
        ]);
        assert_eq!(
            v.to_json_string(),
            "[NaN,-Infinity,123456789012345678901234567890,-7,[],{}]"
        );
    }

    #[test]
    fn deep_values_serialize_without_recursion() {
        let mut v = Value::Int(1);
        for _ in 0..100_000 {
            v = Value::Array(vec![v]);
        }
        let text = v.to_json_string();
        assert_eq!(text.len(), 200_001);
        // Drop iteratively too: unwrap the nesting level by level.
        while let Value::Array(mut items) = v {
            v = items.pop().unwrap_or(Value::Null);
        }
    }
}
