//! The decoder: one iterative pass with an explicit stack of open containers.

use std::fmt;

use super::scan::find_special;
use super::value::{Object, Value};

/// Deepest nesting of arrays/objects accepted in Python mode.
///
/// CPython's decoder recurses once per container and fails with `RecursionError` when the
/// interpreter's frame count (limit 1000) runs out, so the accepted depth depends on how deep
/// the caller already is: measured on CPython 3.11, `json.loads` inside a Python
/// `parse_tool_calls` accepts `999 - f` nested containers, where `f` is the number of Python
/// frames on the stack including `parse_tool_calls`, `loads`, `decode` and `raw_decode`. In a
/// rollout worker thread (`Thread._bootstrap` ... the rollout function) `f` is 10, so 989
/// levels decode and 990 fail; called from a script's top level `f` is 5 (994 decode).
/// We use the training path's value.
pub const PYTHON_MAX_DEPTH: usize = 989;

/// CPython refuses to convert integer literals with more digits than this
/// (`sys.get_int_max_str_digits()`), so `json.loads` raises on them.
pub const PYTHON_MAX_INT_DIGITS: usize = 4300;

/// What the decoder accepts beyond strict JSON, and its limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseOptions {
    /// Deepest nesting of arrays/objects; deeper input is an error.
    pub max_depth: usize,
    /// Longest integer literal in digits (0: no limit).
    pub max_int_digits: usize,
    /// `NaN`, `Infinity`, `-Infinity` as numbers (Python's `json` accepts them).
    pub nonfinite: bool,
    /// Strings in single quotes, where `\'` is also an escape.
    pub single_quotes: bool,
    /// `True`, `False`, `None` as `true`, `false`, `null`.
    pub python_literals: bool,
    /// A comma before `]` or `}`.
    pub trailing_commas: bool,
    /// Raw control characters (U+0000..U+001F) inside strings (`json.loads(strict=False)`).
    pub control_chars: bool,
    /// `true`, `false`, `null` (off to read Python literals, where they are plain names).
    pub json_literals: bool,
}

impl ParseOptions {
    /// Exactly what `json.loads` accepts (with the limits documented on the constants).
    pub const fn python() -> Self {
        ParseOptions {
            max_depth: PYTHON_MAX_DEPTH,
            max_int_digits: PYTHON_MAX_INT_DIGITS,
            nonfinite: true,
            single_quotes: false,
            python_literals: false,
            trailing_commas: false,
            control_chars: false,
            json_literals: true,
        }
    }

    /// For model output: `json.loads` plus single quotes, Python literals, trailing commas
    /// and raw control characters in strings (models write literal newlines in code).
    pub const fn lenient() -> Self {
        ParseOptions {
            single_quotes: true,
            python_literals: true,
            trailing_commas: true,
            control_chars: true,
            ..Self::python()
        }
    }
}

impl Default for ParseOptions {
    fn default() -> Self {
        Self::python()
    }
}

/// Why decoding failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The input ended inside a value (truncated JSON).
    UnexpectedEnd,
    ExpectedValue,
    ExpectedKey,
    ExpectedColon,
    ExpectedCommaOrBracket,
    ExpectedCommaOrBrace,
    InvalidEscape,
    InvalidUnicodeEscape,
    ControlCharacter,
    /// Nesting deeper than the limit (the limit is attached).
    TooDeep(usize),
    /// An integer literal with more digits than the limit (the limit is attached).
    IntegerTooLong(usize),
    /// Something other than whitespace after a complete value.
    TrailingData,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::UnexpectedEnd => write!(f, "unexpected end of input"),
            ErrorKind::ExpectedValue => write!(f, "expecting a value"),
            ErrorKind::ExpectedKey => write!(f, "expecting a property name in quotes"),
            ErrorKind::ExpectedColon => write!(f, "expecting ':' after a property name"),
            ErrorKind::ExpectedCommaOrBracket => write!(f, "expecting ',' or ']'"),
            ErrorKind::ExpectedCommaOrBrace => write!(f, "expecting ',' or '}}'"),
            ErrorKind::InvalidEscape => write!(f, "invalid backslash escape"),
            ErrorKind::InvalidUnicodeEscape => write!(f, "invalid \\uXXXX escape"),
            ErrorKind::ControlCharacter => write!(f, "raw control character in a string"),
            ErrorKind::TooDeep(limit) => write!(f, "nesting deeper than {limit} levels"),
            ErrorKind::IntegerTooLong(limit) => {
                write!(f, "integer literal longer than {limit} digits")
            }
            ErrorKind::TrailingData => write!(f, "extra data after the value"),
        }
    }
}

/// A decoding error and where it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonError {
    pub kind: ErrorKind,
    /// Character (code point) offset in the decoded text.
    pub offset: usize,
    /// Byte offset in the decoded text.
    pub byte_offset: usize,
}

impl JsonError {
    /// True when the text ended in the middle of a value, i.e. it looks cut off.
    pub fn is_truncation(&self) -> bool {
        self.kind == ErrorKind::UnexpectedEnd
    }
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at character {}", self.kind, self.offset)
    }
}

impl std::error::Error for JsonError {}

/// Decodes a whole text as `json.loads` does: one value, optionally surrounded by JSON
/// whitespace (space, tab, newline, carriage return) and nothing else.
pub fn parse(text: &str, opts: &ParseOptions) -> Result<Value, JsonError> {
    let mut p = Parser::new(text, opts);
    p.skip_ws();
    let value = p.value()?;
    p.skip_ws();
    if p.pos != p.bytes.len() {
        return Err(p.error(ErrorKind::TrailingData));
    }
    Ok(value)
}

/// Decodes one value at the very start of `text` (no whitespace skipped) and returns it with
/// the byte offset just past it, like `JSONDecoder.raw_decode`. What follows is not examined.
pub fn parse_prefix(text: &str, opts: &ParseOptions) -> Result<(Value, usize), JsonError> {
    let mut p = Parser::new(text, opts);
    let value = p.value()?;
    Ok((value, p.pos))
}

/// A container being filled.
enum Open {
    Array(Vec<Value>),
    /// The pairs so far and the key whose value is being decoded.
    Object(Vec<(String, Value)>, String),
}

/// The raw length of a string's remaining text from `at` (a backslash) to its closing quote
/// (or to where the text ends or a control character stops it).
fn escaped_len(bytes: &[u8], at: usize, quote: u8, controls: bool) -> usize {
    let mut i = at;
    while bytes.get(i) == Some(&b'\\') {
        i = find_special(bytes, i + 2, quote, controls);
    }
    i.min(bytes.len()) - at
}

struct Parser<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    opts: &'a ParseOptions,
}

impl<'a> Parser<'a> {
    fn new(src: &'a str, opts: &'a ParseOptions) -> Self {
        Parser {
            src,
            bytes: src.as_bytes(),
            pos: 0,
            opts,
        }
    }

    fn error_at(&self, kind: ErrorKind, byte: usize) -> JsonError {
        let byte = byte.min(self.bytes.len());
        // Every error position is at an ASCII byte or the end, so it is a char boundary;
        // `get` keeps this total even if that ever changed.
        let offset = self
            .src
            .get(..byte)
            .map_or(byte, |prefix| prefix.chars().count());
        JsonError {
            kind,
            offset,
            byte_offset: byte,
        }
    }

    fn error(&self, kind: ErrorKind) -> JsonError {
        self.error_at(kind, self.pos)
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// Decodes one value starting exactly at `self.pos`.
    fn value(&mut self) -> Result<Value, JsonError> {
        let mut stack: Vec<Open> = Vec::new();
        'value: loop {
            let mut done = match self.peek() {
                None => return Err(self.error(ErrorKind::UnexpectedEnd)),
                Some(open @ (b'{' | b'[')) => {
                    if stack.len() >= self.opts.max_depth {
                        return Err(self.error(ErrorKind::TooDeep(self.opts.max_depth)));
                    }
                    self.pos += 1;
                    self.skip_ws();
                    if open == b'[' {
                        if self.peek() == Some(b']') {
                            self.pos += 1;
                            Value::Array(Vec::new())
                        } else {
                            stack.push(Open::Array(Vec::new()));
                            continue 'value;
                        }
                    } else if self.peek() == Some(b'}') {
                        self.pos += 1;
                        Value::Object(Object::new())
                    } else {
                        let key = self.key()?;
                        stack.push(Open::Object(Vec::new(), key));
                        continue 'value;
                    }
                }
                Some(_) => self.scalar()?,
            };
            // Hand the finished value to its container; close containers that end here.
            loop {
                let Some(top) = stack.last_mut() else {
                    return Ok(done);
                };
                match top {
                    Open::Array(items) => {
                        items.push(done);
                        if !self.after_item(b']', ErrorKind::ExpectedCommaOrBracket)? {
                            continue 'value;
                        }
                        done = Value::Array(std::mem::take(items));
                    }
                    Open::Object(pairs, key) => {
                        pairs.push((std::mem::take(key), done));
                        if !self.after_item(b'}', ErrorKind::ExpectedCommaOrBrace)? {
                            *key = self.key()?;
                            continue 'value;
                        }
                        done = Value::Object(Object::from_pairs(std::mem::take(pairs)));
                    }
                }
                stack.pop();
            }
        }
    }

    /// After an item: consumes the `,` or the closing byte (and whitespace). Returns true when
    /// the container closed, false when another item follows.
    fn after_item(&mut self, close: u8, expected: ErrorKind) -> Result<bool, JsonError> {
        self.skip_ws();
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                self.skip_ws();
                if self.opts.trailing_commas && self.peek() == Some(close) {
                    self.pos += 1;
                    return Ok(true);
                }
                Ok(false)
            }
            Some(b) if b == close => {
                self.pos += 1;
                Ok(true)
            }
            Some(_) => Err(self.error(expected)),
            None => Err(self.error(ErrorKind::UnexpectedEnd)),
        }
    }

    /// An object key, the colon after it and the whitespace before the value.
    fn key(&mut self) -> Result<String, JsonError> {
        let key = match self.peek() {
            Some(b'"') => self.string(b'"')?,
            Some(b'\'') if self.opts.single_quotes => self.string(b'\'')?,
            None => return Err(self.error(ErrorKind::UnexpectedEnd)),
            Some(_) => return Err(self.error(ErrorKind::ExpectedKey)),
        };
        self.skip_ws();
        match self.peek() {
            Some(b':') => self.pos += 1,
            None => return Err(self.error(ErrorKind::UnexpectedEnd)),
            Some(_) => return Err(self.error(ErrorKind::ExpectedColon)),
        }
        self.skip_ws();
        Ok(key)
    }

    fn scalar(&mut self) -> Result<Value, JsonError> {
        let opts = self.opts;
        match self.peek() {
            Some(b'"') => return self.string(b'"').map(Value::Str),
            Some(b'\'') if opts.single_quotes => return self.string(b'\'').map(Value::Str),
            Some(b'-' | b'0'..=b'9') => {
                if opts.nonfinite && self.bytes[self.pos..].starts_with(b"-Infinity") {
                    self.pos += 9;
                    return Ok(Value::Float(f64::NEG_INFINITY));
                }
                return self.number();
            }
            _ => {}
        }
        let words: [(&[u8], bool, Value); 8] = [
            (b"null", opts.json_literals, Value::Null),
            (b"true", opts.json_literals, Value::Bool(true)),
            (b"false", opts.json_literals, Value::Bool(false)),
            (b"NaN", opts.nonfinite, Value::Float(f64::NAN)),
            (b"Infinity", opts.nonfinite, Value::Float(f64::INFINITY)),
            (b"None", opts.python_literals, Value::Null),
            (b"True", opts.python_literals, Value::Bool(true)),
            (b"False", opts.python_literals, Value::Bool(false)),
        ];
        let rest = &self.bytes[self.pos..];
        let mut truncated = false;
        for (word, enabled, value) in words {
            if !enabled {
                continue;
            }
            if rest.starts_with(word) {
                self.pos += word.len();
                return Ok(value);
            }
            truncated |= !rest.is_empty() && word.starts_with(rest);
        }
        if truncated {
            self.pos = self.bytes.len();
            return Err(self.error(ErrorKind::UnexpectedEnd));
        }
        Err(self.error(ErrorKind::ExpectedValue))
    }

    /// A number with Python's grammar: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?`.
    fn number(&mut self) -> Result<Value, JsonError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.skip_digits(),
            None => return Err(self.error(ErrorKind::UnexpectedEnd)),
            Some(_) => return Err(self.error_at(ErrorKind::ExpectedValue, start)),
        }
        let int_end = self.pos;
        let mut is_float = false;
        if self.peek() == Some(b'.') {
            match self.bytes.get(self.pos + 1) {
                Some(b'0'..=b'9') => {
                    self.pos += 1;
                    self.skip_digits();
                    is_float = true;
                }
                // "1." at the very end: the fraction was cut off.
                None => {
                    self.pos += 1;
                    return Err(self.error(ErrorKind::UnexpectedEnd));
                }
                Some(_) => {}
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            let mark = self.pos;
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            match self.peek() {
                Some(b'0'..=b'9') => {
                    self.skip_digits();
                    is_float = true;
                }
                None => return Err(self.error(ErrorKind::UnexpectedEnd)),
                // Not an exponent after all: the number ends before the 'e'.
                Some(_) => self.pos = mark,
            }
        }
        // The slice holds ASCII only, so it is valid UTF-8 on its own.
        let text = &self.src[start..self.pos];
        if is_float {
            return text
                .parse::<f64>()
                .map(Value::Float)
                .map_err(|_| self.error_at(ErrorKind::ExpectedValue, start));
        }
        let digits = int_end - start - usize::from(text.starts_with('-'));
        let limit = self.opts.max_int_digits;
        if limit > 0 && digits > limit {
            return Err(self.error_at(ErrorKind::IntegerTooLong(limit), start));
        }
        Ok(match text.parse::<i64>() {
            Ok(i) => Value::Int(i),
            Err(_) => Value::BigInt(text.to_owned()),
        })
    }

    fn skip_digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
    }

    /// A string delimited by `quote`; `self.pos` is at the opening quote.
    fn string(&mut self, quote: u8) -> Result<String, JsonError> {
        self.pos += 1;
        let controls = !self.opts.control_chars;
        let first_special = find_special(self.bytes, self.pos, quote, controls);
        let mut out = if self.bytes.get(first_special) == Some(&b'\\') {
            // Escapes ahead: size the text once (decoding only shortens it) instead of
            // growing it escape by escape.
            let plain = first_special - self.pos;
            String::with_capacity(plain + escaped_len(self.bytes, first_special, quote, controls))
        } else {
            String::new()
        };
        let mut next_special = Some(first_special);
        loop {
            let chunk = self.pos;
            self.pos = match next_special.take() {
                Some(found) => found,
                None => find_special(self.bytes, self.pos, quote, controls),
            };
            // The scan stops only at ASCII bytes or the end: both are char boundaries.
            out.push_str(self.src.get(chunk..self.pos).unwrap_or_default());
            match self.peek() {
                None => return Err(self.error(ErrorKind::UnexpectedEnd)),
                Some(b) if b == quote => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {}
                Some(_) => return Err(self.error(ErrorKind::ControlCharacter)),
            }
            let escape_at = self.pos;
            self.pos += 1;
            let decoded = match self.peek() {
                None => return Err(self.error(ErrorKind::UnexpectedEnd)),
                Some(b'"') => '"',
                Some(b'\\') => '\\',
                Some(b'/') => '/',
                Some(b'b') => '\u{8}',
                Some(b'f') => '\u{c}',
                Some(b'n') => '\n',
                Some(b'r') => '\r',
                Some(b't') => '\t',
                Some(b'\'') if self.opts.single_quotes => '\'',
                Some(b'u') => {
                    self.pos -= 1;
                    out.push(self.unicode_escape()?);
                    continue;
                }
                Some(_) => return Err(self.error_at(ErrorKind::InvalidEscape, escape_at)),
            };
            self.pos += 1;
            out.push(decoded);
        }
    }

    /// Four hex digits after `\u` at `at` (which points at the backslash).
    fn hex4(&self, at: usize) -> Result<u32, JsonError> {
        let Some(digits) = self.bytes.get(at + 2..at + 6) else {
            return Err(self.error_at(ErrorKind::UnexpectedEnd, self.bytes.len()));
        };
        let mut code = 0u32;
        for &d in digits {
            let v = match d {
                b'0'..=b'9' => d - b'0',
                b'a'..=b'f' => d - b'a' + 10,
                b'A'..=b'F' => d - b'A' + 10,
                _ => return Err(self.error_at(ErrorKind::InvalidUnicodeEscape, at)),
            };
            code = code * 16 + u32::from(v);
        }
        Ok(code)
    }

    /// `\uXXXX` at `self.pos` (the backslash), joining a surrogate pair when the next escape
    /// completes it. A lone surrogate becomes U+FFFD (Python would keep it in the str).
    fn unicode_escape(&mut self) -> Result<char, JsonError> {
        let at = self.pos;
        let code = self.hex4(at)?;
        self.pos = at + 6;
        if (0xD800..0xDC00).contains(&code) && self.bytes.get(at + 6..at + 8) == Some(b"\\u") {
            let low = self.hex4(at + 6)?;
            if (0xDC00..0xE000).contains(&low) {
                self.pos = at + 12;
                let joined = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                return Ok(char::from_u32(joined).unwrap_or('\u{FFFD}'));
            }
        }
        Ok(char::from_u32(code).unwrap_or('\u{FFFD}'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn py(text: &str) -> Result<Value, JsonError> {
        parse(text, &ParseOptions::python())
    }

    fn lenient(text: &str) -> Result<Value, JsonError> {
        parse(text, &ParseOptions::lenient())
    }

    fn obj(pairs: &[(&str, Value)]) -> Value {
        Value::Object(Object::from_pairs(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        ))
    }

    #[test]
    fn scalars_decode_like_python() {
        assert_eq!(py("null"), Ok(Value::Null));
        assert_eq!(py(" true "), Ok(Value::Bool(true)));
        assert_eq!(py("-0"), Ok(Value::Int(0)));
        assert_eq!(py("12"), Ok(Value::Int(12)));
        assert_eq!(py("1.5e2"), Ok(Value::Float(150.0)));
        assert_eq!(py("1E2"), Ok(Value::Float(100.0)));
        assert_eq!(py("1e400"), Ok(Value::Float(f64::INFINITY)));
        assert_eq!(py("-1e400"), Ok(Value::Float(f64::NEG_INFINITY)));
        assert_eq!(py("1e-400"), Ok(Value::Float(0.0)));
        assert_eq!(py("-Infinity"), Ok(Value::Float(f64::NEG_INFINITY)));
        assert!(matches!(py("NaN"), Ok(Value::Float(f)) if f.is_nan()));
        assert_eq!(py("\"a\\u00e9\\n\""), Ok(Value::Str("aé\n".into())));
    }

    #[test]
    fn big_integers_keep_their_digits() {
        assert_eq!(py("9223372036854775807"), Ok(Value::Int(i64::MAX)));
        assert_eq!(
            py("9223372036854775808"),
            Ok(Value::BigInt("9223372036854775808".into()))
        );
        assert_eq!(
            py("-123456789012345678901234567890"),
            Ok(Value::BigInt("-123456789012345678901234567890".into()))
        );
        let limit = "7".repeat(PYTHON_MAX_INT_DIGITS);
        assert!(py(&limit).is_ok());
        assert_eq!(
            py(&format!("-{limit}7")).map_err(|e| e.kind),
            Err(ErrorKind::IntegerTooLong(PYTHON_MAX_INT_DIGITS))
        );
        // The limit is on integers only; long floats are fine.
        assert!(py(&format!("{limit}7.5")).is_ok());
    }

    #[test]
    fn strict_mode_rejects_what_python_rejects() {
        for bad in [
            "",
            " ",
            "01",
            "1.",
            ".5",
            "+1",
            "1e",
            "-",
            "[1,]",
            "{\"a\":1,}",
            "{'a':1}",
            "'a'",
            "True",
            "None",
            "nul",
            "[1 2]",
            "{\"a\" 1}",
            "{1:2}",
            "\"a\nb\"",
            "\"\\x\"",
            "\"\\u12\"",
            "\"\\u12G4\"",
            "\u{feff}1",
            "1 2",
            "[",
            "{\"a\":",
            "\"abc",
            "-NaN",
            "\u{a0}1",
            "[1]\u{a0}",
            "infinity",
            "nan",
        ] {
            assert!(py(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn errors_name_the_character_offset() {
        let err = py("{\"é\": tru}").map(|_| ()).unwrap_err();
        assert_eq!(
            (err.kind, err.offset, err.byte_offset),
            (ErrorKind::ExpectedValue, 6, 7)
        );
        let err = py("[\"é\", x]").map(|_| ()).unwrap_err();
        assert_eq!(err.kind, ErrorKind::ExpectedValue);
        assert_eq!(err.offset, 6);
        assert_eq!(err.byte_offset, 7);
        assert_eq!(err.to_string(), "expecting a value at character 6");
    }

    #[test]
    fn truncated_input_is_reported_as_unexpected_end() {
        for cut in [
            "{\"a\": \"b",
            "{\"a\": [1, 2",
            "{\"a\": tr",
            "{\"a\": 1.",
            "[1e",
            "{\"a\"",
            "\"\\u00",
            "[-",
        ] {
            let err = py(cut).map(|_| ()).unwrap_err();
            assert!(err.is_truncation(), "{cut:?}: {err}");
        }
    }

    #[test]
    fn duplicate_keys_keep_first_position_last_value() {
        assert_eq!(
            py("{\"a\": 1, \"b\": 2, \"a\": 3}"),
            Ok(obj(&[("a", Value::Int(3)), ("b", Value::Int(2))]))
        );
    }

    #[test]
    fn surrogate_pairs_join_and_lone_surrogates_become_replacement() {
        assert_eq!(py("\"\\ud83d\\ude00\""), Ok(Value::Str("😀".into())));
        assert_eq!(py("\"\\ud83dx\""), Ok(Value::Str("\u{FFFD}x".into())));
        assert_eq!(py("\"\\ude00\""), Ok(Value::Str("\u{FFFD}".into())));
        assert_eq!(py("\"\\ud83d\\u0041\""), Ok(Value::Str("\u{FFFD}A".into())));
        assert!(py("\"\\ud83d\\uZZZZ\"").is_err());
    }

    #[test]
    fn depth_limit_matches_python_training_path() {
        let ok = format!(
            "{}{}",
            "[".repeat(PYTHON_MAX_DEPTH),
            "]".repeat(PYTHON_MAX_DEPTH)
        );
        assert!(py(&ok).is_ok());
        let deep = format!("[{ok}]");
        assert_eq!(
            py(&deep).map_err(|e| e.kind),
            Err(ErrorKind::TooDeep(PYTHON_MAX_DEPTH))
        );
        // A million open brackets fail fast without recursion.
        assert!(py(&"[".repeat(1_000_000)).is_err());
        assert!(py(&"{\"a\":".repeat(200_000)).is_err());
    }

    #[test]
    fn lenient_mode_accepts_python_style() {
        assert_eq!(
            lenient("{'a': True, 'b': [None, False,], \"c\": 'it\\'s',}"),
            Ok(obj(&[
                ("a", Value::Bool(true)),
                ("b", Value::Array(vec![Value::Null, Value::Bool(false)])),
                ("c", Value::Str("it's".into())),
            ]))
        );
        assert_eq!(lenient("\"a\nb\""), Ok(Value::Str("a\nb".into())));
        assert!(lenient("[,]").is_err());
        assert!(lenient("{,}").is_err());
        assert!(lenient("[1,,]").is_err());
        let python_only = ParseOptions {
            json_literals: false,
            nonfinite: false,
            ..ParseOptions::lenient()
        };
        assert_eq!(parse("None", &python_only), Ok(Value::Null));
        for name in ["null", "true", "NaN", "Infinity", "-Infinity"] {
            assert!(parse(name, &python_only).is_err(), "{name}");
        }
    }

    #[test]
    fn prefix_parse_reports_the_end_of_the_value() {
        let text = "{\"a\": \"</tool_call>\"} tail";
        let (value, end) = parse_prefix(text, &ParseOptions::python()).unwrap_or((Value::Null, 0));
        assert_eq!(end, 21);
        assert_eq!(value, obj(&[("a", Value::Str("</tool_call>".into()))]));
    }
}
