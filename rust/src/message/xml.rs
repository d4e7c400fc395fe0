//! Formats that write arguments as tagged text instead of JSON: Qwen3-Coder
//! (`<function=NAME><parameter=K>V</parameter></function>`), GLM-4.5/4.6
//! (`NAME<arg_key>K</arg_key><arg_value>V</arg_value>`) and DeepSeek-V3.2's DSML
//! (`<｜DSML｜invoke name="NAME"><｜DSML｜parameter name="K" string="true">V</｜DSML｜parameter>`).
//!
//! A value is raw text, so its type comes from the tool's schema when the episode declared
//! one (`string` keeps the text, `integer`/`number`/`boolean`/`object`/`array` decode it);
//! without a schema type a value that is exactly one JSON literal is decoded and anything
//! else stays text. DSML says itself: `string="true"` is text, `string="false"` is JSON.
//! Every tag is found by a forward scan from where the last one ended, so a block costs
//! time linear in its length; a block whose closing tags never come is refused as cut off.

use std::collections::HashMap;

use super::common::{has_at, skip_ws, Found, Outcome};
use super::hermes;
use crate::pychar::is_space;
use crate::pyjson::{self, Object, ParseOptions, Value};

/// Declared parameter types: tool name -> parameter name -> JSON-schema type.
pub type ParamTypes = HashMap<String, HashMap<String, String>>;

pub(super) const FUNCTION: &str = "<function=";
const FUNCTION_END: &str = "</function>";
const PARAMETER: &str = "<parameter=";
const PARAMETER_END: &str = "</parameter>";
const ARG_KEY: &str = "<arg_key>";
const ARG_KEY_END: &str = "</arg_key>";
const ARG_VALUE: &str = "<arg_value>";
const ARG_VALUE_END: &str = "</arg_value>";

/// DSML tags are spelled with U+FF5C; an ASCII `|` rendering is accepted too.
pub(super) const DSML_CALLS: [&str; 2] = ["<｜DSML｜function_calls>", "<|DSML|function_calls>"];
const DSML_CALLS_END: [&str; 2] = ["</｜DSML｜function_calls>", "</|DSML|function_calls>"];
const DSML_INVOKE: [&str; 2] = ["<｜DSML｜invoke", "<|DSML|invoke"];
const DSML_INVOKE_END: [&str; 2] = ["</｜DSML｜invoke>", "</|DSML|invoke>"];
const DSML_PARAMETER: [&str; 2] = ["<｜DSML｜parameter", "<|DSML|parameter"];
const DSML_PARAMETER_END: [&str; 2] = ["</｜DSML｜parameter>", "</|DSML|parameter>"];

/// A JSON literal as a whole value: strict JSON, no NaN or infinities.
const LITERAL: ParseOptions = ParseOptions {
    nonfinite: false,
    ..ParseOptions::python()
};

/// Lenient JSON for values declared as objects or arrays.
const STRUCTURED: ParseOptions = ParseOptions {
    nonfinite: false,
    ..ParseOptions::lenient()
};

/// What follows `<tool_call>`: Qwen3-Coder XML, a GLM call, or (anything else) JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Body {
    Json,
    Coder,
    Glm,
}

/// How the block opened by `<tool_call>` at `at` is written.
pub(super) fn body_kind(text: &str, at: usize, end: usize) -> Body {
    let body = at + hermes::OPEN.len();
    let first = skip_ws(text, body, end);
    if has_at(text, first, end, FUNCTION) {
        return Body::Coder;
    }
    // GLM writes the name right after the tag; `<tool_call> and </tool_call>` is prose.
    let bytes = text.as_bytes();
    let mut stop = body;
    while stop < end && is_name_byte(bytes[stop]) {
        stop += 1;
    }
    if stop > body {
        let after = skip_ws(text, stop, end);
        if has_at(text, after, end, ARG_KEY) || has_at(text, after, end, hermes::CLOSE) {
            return Body::Glm;
        }
    }
    Body::Json
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.') || b >= 0x80
}

/// The first of `tags` at or after `at` (and before `end`): its offset and which one.
/// Looks only at `<` bytes, so it is linear in the distance covered.
fn find_tag(text: &str, at: usize, end: usize, tags: &[&str]) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut pos = at;
    while pos < end {
        let next = bytes[pos..end].iter().position(|&b| b == b'<')?;
        pos += next;
        if let Some(which) = tags.iter().position(|t| has_at(text, pos, end, t)) {
            return Some((pos, which));
        }
        pos += 1;
    }
    None
}

/// Which of `spellings` is at `at`, as its length.
fn spelled(text: &str, at: usize, end: usize, spellings: &[&str]) -> Option<usize> {
    spellings
        .iter()
        .find(|t| has_at(text, at, end, t))
        .map(|t| t.len())
}

/// The name in `<function=NAME>` / `<parameter=NAME>` starting at `at`: the name and the
/// offset past `>`. The name ends at `>`; a newline or `<` before it means no name.
fn tag_name(text: &str, at: usize, end: usize) -> Option<(&str, usize)> {
    let bytes = text.as_bytes();
    let mut stop = at;
    while stop < end && !matches!(bytes[stop], b'>' | b'<' | b'\n') {
        stop += 1;
    }
    if stop >= end || bytes[stop] != b'>' {
        return None;
    }
    let name = text[at..stop].trim_matches(is_space);
    (!name.is_empty()).then_some((name, stop + 1))
}

/// A value's type as the schema declares it, lower-cased.
fn declared<'a>(types: &'a ParamTypes, tool: &str, param: &str) -> Option<&'a str> {
    types.get(tool)?.get(param).map(String::as_str)
}

/// A raw text value as its declared type (see the module docs).
fn convert(raw: &str, ty: Option<&str>) -> Value {
    let trimmed = raw.trim_matches(is_space);
    let ty = ty.map(str::to_ascii_lowercase);
    let parsed = |opts: &ParseOptions| pyjson::parse(trimmed, opts).ok();
    // `null` is None whatever the declared type, as vLLM and SGLang read it (an optional
    // argument the model leaves out explicitly).
    if trimmed.eq_ignore_ascii_case("null") && ty.is_some() {
        return Value::Null;
    }
    match ty.as_deref() {
        Some("string" | "str" | "text" | "enum" | "char" | "varchar") => Value::Str(raw.to_owned()),
        Some("integer" | "int") => match parsed(&LITERAL) {
            Some(v @ (Value::Int(_) | Value::BigInt(_))) => v,
            _ => Value::Str(raw.to_owned()),
        },
        Some("number" | "float" | "double") => match parsed(&ParseOptions::python()) {
            Some(v @ (Value::Int(_) | Value::BigInt(_) | Value::Float(_))) => v,
            _ => Value::Str(raw.to_owned()),
        },
        Some("boolean" | "bool") => match trimmed.to_ascii_lowercase().as_str() {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => Value::Str(raw.to_owned()),
        },
        Some("object" | "array" | "dict" | "list") => parsed(&STRUCTURED)
            .or_else(|| (trimmed == "null").then_some(Value::Null))
            .unwrap_or_else(|| Value::Str(raw.to_owned())),
        _ => parsed(&LITERAL).unwrap_or_else(|| Value::Str(raw.to_owned())),
    }
}

/// Adds `key = value` to a call's arguments, refusing a repeated key.
fn put(args: &mut Object, name: &str, key: &str, value: Value) -> Result<(), String> {
    if args.contains_key(key) {
        return Err(format!("{name}: parameter {key} repeated"));
    }
    args.insert(key.to_owned(), value);
    Ok(())
}

/// Drops the one newline the Qwen3-Coder template writes on each side of a value.
fn coder_value(raw: &str) -> &str {
    let raw = raw.strip_prefix('\n').unwrap_or(raw);
    raw.strip_suffix('\n').unwrap_or(raw)
}

/// Qwen3-Coder: `<tool_call>` (`wrapped`) or a bare `<function=NAME>` at `start`, then
/// parameters, `</function>`, and for a wrapped block `</tool_call>` (which may be missing
/// after a complete call). A wrapped block may hold several functions.
pub(super) fn coder(
    text: &str,
    start: usize,
    window: usize,
    wrapped: bool,
    types: &ParamTypes,
) -> Outcome {
    let mut at = if wrapped {
        skip_ws(text, start + hermes::OPEN.len(), window)
    } else {
        // A bare `<function=NAME>` counts only when parameters or `</function>` follow;
        // `call <function=...> blocks` in prose is text.
        let opens_call = tag_name(text, start + FUNCTION.len(), window).is_some_and(|(_, at)| {
            let next = skip_ws(text, at, window);
            has_at(text, next, window, PARAMETER) || has_at(text, next, window, FUNCTION_END)
        });
        if !opens_call {
            return Outcome::NotABlock;
        }
        start
    };
    let refused = |at: usize, reason: String| {
        let stop = [hermes::CLOSE, FUNCTION_END];
        let end = find_tag(text, at, window, &stop).map_or(window, |(pos, which)| {
            let close_end = pos + stop[which].len();
            // A refused wrapped block takes its closing tag with it.
            match (wrapped, which) {
                (true, 1) => {
                    let after = skip_ws(text, close_end, window);
                    if has_at(text, after, window, hermes::CLOSE) {
                        after + hermes::CLOSE.len()
                    } else {
                        close_end
                    }
                }
                _ => close_end,
            }
        });
        Outcome::rejected(end, reason)
    };
    let mut items: Vec<Found> = Vec::new();
    loop {
        if !has_at(text, at, window, FUNCTION) {
            return refused(at, "expected <function=NAME> in the tool call".to_owned());
        }
        let Some((name, after)) = tag_name(text, at + FUNCTION.len(), window) else {
            return refused(at, "<function= is not followed by NAME>".to_owned());
        };
        at = after;
        let mut args = Object::new();
        loop {
            at = skip_ws(text, at, window);
            if has_at(text, at, window, FUNCTION_END) {
                at += FUNCTION_END.len();
                break;
            }
            if !has_at(text, at, window, PARAMETER) {
                let reason = if at >= window {
                    format!("{name}: the call is cut off before </function>")
                } else {
                    format!("{name}: unexpected text inside <function={name}>")
                };
                return refused(at, reason);
            }
            let Some((key, value_start)) = tag_name(text, at + PARAMETER.len(), window) else {
                return refused(at, format!("{name}: <parameter= is not followed by NAME>"));
            };
            let stops = [PARAMETER_END, PARAMETER, FUNCTION_END];
            let Some((value_end, which)) = find_tag(text, value_start, window, &stops) else {
                return refused(
                    at,
                    format!("{name}: the call is cut off inside parameter {key}"),
                );
            };
            let raw = coder_value(&text[value_start..value_end]);
            let value = convert(raw, declared(types, name, key));
            if let Err(reason) = put(&mut args, name, key, value) {
                return refused(at, reason);
            }
            at = if which == 0 {
                value_end + PARAMETER_END.len()
            } else {
                value_end
            };
        }
        items.push(Ok((name.to_owned(), args)));
        let next = skip_ws(text, at, window);
        if wrapped && has_at(text, next, window, FUNCTION) {
            at = next;
            continue;
        }
        break;
    }
    if wrapped {
        let next = skip_ws(text, at, window);
        if has_at(text, next, window, hermes::CLOSE) {
            at = next + hermes::CLOSE.len();
        }
    }
    Outcome::Block { end: at, items }
}

/// GLM-4.5/4.6: `<tool_call>NAME` then `<arg_key>K</arg_key><arg_value>V</arg_value>` pairs
/// and `</tool_call>` (which may be missing only at the end of the text).
pub(super) fn glm(text: &str, start: usize, window: usize, types: &ParamTypes) -> Outcome {
    let body = start + hermes::OPEN.len();
    let bytes = text.as_bytes();
    let mut at = skip_ws(text, body, window);
    let name_start = at;
    while at < window && is_name_byte(bytes[at]) {
        at += 1;
    }
    let name = &text[name_start..at];
    let refused = |at: usize, reason: String| {
        let end = find_tag(text, at, window, &[hermes::CLOSE])
            .map_or(window, |(pos, _)| pos + hermes::CLOSE.len());
        Outcome::rejected(end, reason)
    };
    let mut args = Object::new();
    loop {
        at = skip_ws(text, at, window);
        if has_at(text, at, window, hermes::CLOSE) {
            at += hermes::CLOSE.len();
            break;
        }
        if at >= window {
            if window < text.len() {
                return refused(
                    at,
                    format!("{name}: the call is cut off before </tool_call>"),
                );
            }
            break;
        }
        if !has_at(text, at, window, ARG_KEY) {
            return refused(at, format!("{name}: expected <arg_key> or </tool_call>"));
        }
        let key_start = at + ARG_KEY.len();
        let Some((key_end, _)) = find_tag(text, key_start, window, &[ARG_KEY_END]) else {
            return refused(at, format!("{name}: <arg_key> is not closed"));
        };
        let key = text[key_start..key_end].trim_matches(is_space);
        at = skip_ws(text, key_end + ARG_KEY_END.len(), window);
        if !has_at(text, at, window, ARG_VALUE) {
            return refused(
                at,
                format!("{name}: <arg_key>{key}</arg_key> has no <arg_value>"),
            );
        }
        let value_start = at + ARG_VALUE.len();
        let Some((value_end, _)) = find_tag(text, value_start, window, &[ARG_VALUE_END]) else {
            return refused(at, format!("{name}: the value of {key} is cut off"));
        };
        let value = convert(&text[value_start..value_end], declared(types, name, key));
        if let Err(reason) = put(&mut args, name, key, value) {
            return refused(at, reason);
        }
        at = value_end + ARG_VALUE_END.len();
    }
    Outcome::Block {
        end: at,
        items: vec![Ok((name.to_owned(), args))],
    }
}

/// The value of attribute `attr="..."` in a tag's attribute text.
fn attribute<'a>(attrs: &'a str, attr: &str) -> Option<&'a str> {
    let mut rest = attrs;
    loop {
        let at = rest.find(attr)?;
        let before_ok = at == 0 || rest.as_bytes()[at - 1].is_ascii_whitespace();
        let after = &rest[at + attr.len()..];
        if before_ok {
            if let Some(quoted) = after.strip_prefix("=\"") {
                return quoted.find('"').map(|end| &quoted[..end]);
            }
        }
        rest = after;
    }
}

/// The attribute text of a tag whose name ends at `at`, and the offset past its `>`.
fn attributes(text: &str, at: usize, end: usize) -> Option<(&str, usize)> {
    let bytes = text.as_bytes();
    let mut stop = at;
    while stop < end && !matches!(bytes[stop], b'>' | b'<') {
        stop += 1;
    }
    (stop < end && bytes[stop] == b'>').then(|| (&text[at..stop], stop + 1))
}

/// DeepSeek-V3.2 DSML: `<｜DSML｜function_calls>`, invokes with their parameters,
/// `</｜DSML｜function_calls>` (which may be missing after complete invokes).
pub(super) fn dsml(text: &str, start: usize, window: usize) -> Outcome {
    let mut at = start + spelled(text, start, window, &DSML_CALLS).unwrap_or(0);
    let refused = |at: usize, reason: String| {
        let end = find_tag(text, at, window, &DSML_CALLS_END)
            .map_or(window, |(pos, which)| pos + DSML_CALLS_END[which].len());
        Outcome::rejected(end, reason)
    };
    let mut items: Vec<Found> = Vec::new();
    loop {
        at = skip_ws(text, at, window);
        if let Some(len) = spelled(text, at, window, &DSML_CALLS_END) {
            at += len;
            break;
        }
        if at >= window && !items.is_empty() {
            break;
        }
        let Some(len) = spelled(text, at, window, &DSML_INVOKE) else {
            let reason = if at >= window {
                "the function_calls block is cut off".to_owned()
            } else {
                "expected an invoke in the function_calls block".to_owned()
            };
            return refused(at, reason);
        };
        let Some((attrs, after)) = attributes(text, at + len, window) else {
            return refused(at, "the invoke tag is not closed".to_owned());
        };
        let Some(name) = attribute(attrs, "name").filter(|n| !n.is_empty()) else {
            return refused(at, "the invoke has no name=\"...\"".to_owned());
        };
        at = after;
        let mut args = Object::new();
        let mut bad: Option<String> = None;
        loop {
            at = skip_ws(text, at, window);
            if let Some(len) = spelled(text, at, window, &DSML_INVOKE_END) {
                at += len;
                break;
            }
            let Some(len) = spelled(text, at, window, &DSML_PARAMETER) else {
                return refused(
                    at,
                    format!("{name}: expected a parameter or the invoke's end"),
                );
            };
            let Some((attrs, value_start)) = attributes(text, at + len, window) else {
                return refused(at, format!("{name}: a parameter tag is not closed"));
            };
            let Some(key) = attribute(attrs, "name") else {
                return refused(at, format!("{name}: a parameter has no name=\"...\""));
            };
            let Some((value_end, which)) = find_tag(text, value_start, window, &DSML_PARAMETER_END)
            else {
                return refused(at, format!("{name}: the value of {key} is cut off"));
            };
            let raw = &text[value_start..value_end];
            let value = if attribute(attrs, "string") == Some("false") {
                match pyjson::parse(raw.trim_matches(is_space), &STRUCTURED) {
                    Ok(value) => value,
                    Err(err) => {
                        bad.get_or_insert(format!(
                            "{name}: parameter {key} is marked string=\"false\" but is not JSON \
                             ({err})"
                        ));
                        Value::Null
                    }
                }
            } else {
                Value::Str(raw.to_owned())
            };
            if let Err(reason) = put(&mut args, name, key, value) {
                bad.get_or_insert(reason);
            }
            at = value_end + DSML_PARAMETER_END[which].len();
        }
        items.push(match bad {
            Some(reason) => Err(reason),
            None => Ok((name.to_owned(), args)),
        });
    }
    Outcome::Block { end: at, items }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_follow_the_declared_type() {
        assert_eq!(convert("5", Some("string")), Value::Str("5".into()));
        assert_eq!(convert("null", Some("string")), Value::Null);
        assert_eq!(convert(" 5 ", Some("integer")), Value::Int(5));
        assert_eq!(convert("2.5", Some("number")), Value::Float(2.5));
        assert_eq!(convert("True", Some("boolean")), Value::Bool(true));
        assert_eq!(convert("Paris", None), Value::Str("Paris".into()));
        assert_eq!(convert("42", None), Value::Int(42));
        assert_eq!(convert("NaN", None), Value::Str("NaN".into()));
        assert_eq!(convert("abc", Some("integer")), Value::Str("abc".into()));
    }

    #[test]
    fn attributes_are_read_by_name() {
        assert_eq!(
            attribute(r#" name="x" string="true""#, "string"),
            Some("true")
        );
        assert_eq!(attribute(r#" rename="y" name="x""#, "name"), Some("x"));
        assert_eq!(attribute(r#" name=x"#, "name"), None);
    }

    #[test]
    fn tags_are_found_forward() {
        assert_eq!(find_tag("a<b</x>", 0, 7, &["</x>"]), Some((3, 0)));
        assert_eq!(find_tag("a<b</x>", 0, 5, &["</x>"]), None);
    }
}
