//! Pieces shared by the format parsers: whitespace, windowed JSON values, call objects.

use crate::pychar::is_space;
use crate::pyjson::{self, JsonError, Object, ParseOptions, Value};

/// JSON as models write it: `json.loads` plus single quotes, `True`/`False`/`None`,
/// trailing commas and raw newlines inside strings.
pub(super) const LENIENT: ParseOptions = ParseOptions::lenient();

/// A call as a format parser found it, before the tool list is consulted.
pub(super) type Found = Result<(String, Object), String>;

/// What a parser made of a candidate position.
pub(super) enum Outcome {
    /// Not a call block after all (prose that mentions a marker): left in the content.
    NotABlock,
    /// A call block ending at byte `end`, with one entry per call or per rejected part.
    Block { end: usize, items: Vec<Found> },
}

impl Outcome {
    pub(super) fn rejected(end: usize, reason: impl Into<String>) -> Self {
        Outcome::Block {
            end,
            items: vec![Err(reason.into())],
        }
    }
}

/// The first offset at or after `at` (and before `end`) that is not Python whitespace.
pub(super) fn skip_ws(text: &str, mut at: usize, end: usize) -> usize {
    while at < end {
        // `get`: an offset inside a character is never whitespace (and never a panic).
        match text.get(at..).and_then(|rest| rest.chars().next()) {
            Some(c) if is_space(c) => at += c.len_utf8(),
            _ => break,
        }
    }
    at
}

/// Whether `text[at..end]` starts with `prefix`.
pub(super) fn has_at(text: &str, at: usize, end: usize, prefix: &str) -> bool {
    text.get(at..end).is_some_and(|s| s.starts_with(prefix))
}

/// The byte at `at` if it is before `end`.
pub(super) fn byte_at(text: &str, at: usize, end: usize) -> Option<u8> {
    if at < end {
        text.as_bytes().get(at).copied()
    } else {
        None
    }
}

/// One JSON value starting at `at` and ending before `end`; returns it with its end offset.
pub(super) fn json_value(
    text: &str,
    at: usize,
    end: usize,
    opts: &ParseOptions,
) -> Result<(Value, usize), JsonError> {
    let window = text.get(at..end).unwrap_or_default();
    pyjson::parse_prefix(window, opts).map(|(value, len)| (value, at + len))
}

/// Why a block's JSON was refused, in words for the model and the logs.
pub(super) fn json_reason(err: &JsonError) -> String {
    if err.is_truncation() {
        "truncated JSON: the value is cut off and is not repaired".to_owned()
    } else {
        format!("invalid JSON: {err}")
    }
}

/// After a code fence's opening backticks at `at`: skips the info string (`json`) and the
/// rest of that line.
pub(super) fn skip_fence_line(text: &str, at: usize, end: usize) -> usize {
    let after = at + 3;
    match text.get(after..end).and_then(|s| s.find('\n')) {
        Some(nl) => after + nl + 1,
        None => end,
    }
}

/// The calls in a decoded block value: an object, or a list of objects.
pub(super) fn calls_in(value: Value) -> Vec<Found> {
    match value {
        Value::Object(obj) => vec![call_from_object(obj)],
        Value::Array(items) if items.is_empty() => vec![Err("empty list of calls".to_owned())],
        Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                Value::Object(obj) => call_from_object(obj),
                other => Err(format!(
                    "a call must be a JSON object, not {}",
                    other.type_name()
                )),
            })
            .collect(),
        other => vec![Err(format!(
            "expected a JSON object, not {}",
            other.type_name()
        ))],
    }
}

/// Name and arguments of a call object: `{"name", "arguments" | "parameters"}`, or the
/// OpenAI shape `{"type": "function", "function": {...}}`.
pub(super) fn call_from_object(mut obj: Object) -> Found {
    if !obj.contains_key("name") {
        if let Some(Value::Object(function)) = obj.remove("function") {
            obj = function;
        }
    }
    let name = match obj.remove("name") {
        Some(Value::Str(name)) if !name.is_empty() => name,
        Some(Value::Str(_)) => return Err("the tool name is empty".to_owned()),
        Some(other) => {
            return Err(format!(
                "the tool name must be a string, not {}",
                other.type_name()
            ))
        }
        None => return Err("the call has no \"name\"".to_owned()),
    };
    let arguments = match obj.remove("arguments").or_else(|| obj.remove("parameters")) {
        None => Object::new(),
        Some(value) => arguments_from(value)?,
    };
    Ok((name, arguments))
}

/// Arguments as an object: an object as is, a string decoded once as JSON.
pub(super) fn arguments_from(value: Value) -> Result<Object, String> {
    match value {
        Value::Object(obj) => Ok(obj),
        Value::Str(text) => match pyjson::parse(&text, &LENIENT) {
            Ok(Value::Object(obj)) => Ok(obj),
            Ok(other) => Err(format!(
                "the arguments string holds a {}, not an object",
                other.type_name()
            )),
            Err(err) => Err(format!("the arguments string is not valid JSON ({err})")),
        },
        other => Err(format!(
            "arguments must be an object, not {}",
            other.type_name()
        )),
    }
}

/// A Python identifier in ASCII (`[A-Za-z_][A-Za-z0-9_]*`) at `at`: its end offset.
pub(super) fn identifier_end(text: &str, at: usize, end: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let first = byte_at(text, at, end)?;
    if !(first.is_ascii_alphabetic() || first == b'_') {
        return None;
    }
    let mut stop = at + 1;
    while stop < end && (bytes[stop].is_ascii_alphanumeric() || bytes[stop] == b'_') {
        stop += 1;
    }
    Some(stop)
}

/// The first offset in the sorted `positions` that is `>= at`.
pub(super) fn first_at_or_after(positions: &[usize], at: usize) -> Option<usize> {
    let i = positions.partition_point(|&p| p < at);
    positions.get(i).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Value {
        pyjson::parse(text, &LENIENT).unwrap_or(Value::Null)
    }

    #[test]
    fn call_objects_in_each_shape() {
        let Value::Object(o) = parse(r#"{"name": "f", "parameters": {"a": 1}}"#) else {
            panic!("not an object")
        };
        let (name, args) = call_from_object(o).unwrap_or_default();
        assert_eq!(name, "f");
        assert_eq!(args.get("a"), Some(&Value::Int(1)));
        let Value::Object(o) =
            parse(r#"{"type": "function", "function": {"name": "g", "arguments": "{\"b\": 2}"}}"#)
        else {
            panic!("not an object")
        };
        let (name, args) = call_from_object(o).unwrap_or_default();
        assert_eq!(name, "g");
        assert_eq!(args.get("b"), Some(&Value::Int(2)));
    }

    #[test]
    fn bad_call_objects_say_why() {
        for (text, reason) in [
            (r#"{"arguments": {}}"#, "no \"name\""),
            (r#"{"name": 3}"#, "must be a string"),
            (r#"{"name": "f", "arguments": [1]}"#, "must be an object"),
            (r#"{"name": "f", "arguments": "[1]"}"#, "holds a list"),
            (
                r#"{"name": "f", "arguments": "{\"a\": "}"#,
                "not valid JSON",
            ),
            (r#"{"name": "f", "arguments": "\"{}\""}"#, "holds a str"),
        ] {
            let Value::Object(o) = parse(text) else {
                panic!("not an object: {text}")
            };
            match call_from_object(o) {
                Err(msg) => assert!(msg.contains(reason), "{text}: {msg}"),
                Ok(_) => panic!("{text} accepted"),
            }
        }
    }

    #[test]
    fn windowed_values_stop_at_the_window() {
        let text = r#"{"a": "x"} rest"#;
        assert!(json_value(text, 0, 5, &LENIENT).is_err_and(|e| e.is_truncation()));
        assert_eq!(
            json_value(text, 0, text.len(), &LENIENT).map(|(_, end)| end),
            Ok(10)
        );
    }
}
