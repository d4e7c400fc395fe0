//! The reward's tool-call parser, in linear time.
//!
//! The reward scores exactly the calls `parse_tool_calls` returns, and the golden files fix
//! them call for call:
//!
//! 1. Every `<tool_call>...</tool_call>` span (shortest, non-overlapping, left to right) is
//!    one entry. Its content, stripped of Python whitespace, must decode (Python `json.loads`)
//!    to an object; the name is the first truthy of `name`, `tool_name` and `function.name`
//!    (a `function` that is not an object is an error when it is reached), the arguments are
//!    `arguments`, else `args`, else `{}`; string arguments are decoded as JSON once, or
//!    wrapped as `{"expression": ...}` when they do not decode; arguments that are not an
//!    object become `{}`. A block that fails any of this yields an entry with `parse_error`
//!    holding the first 512 characters of the stripped content.
//! 2. Only when there is no such span, calls written as functions are collected
//!    (`calculate_math("1+1")`, `calculator(expression="2*3")`), see [`function_style`].
//!
//! Written with regular expressions and a rescanning cursor, these rules are quadratic on
//! adversarial input (thousands of unclosed tags or open calls); everything here is a single
//! forward pass, or a bounded number of them.

mod function_style;
mod parens;

pub use function_style::{function_style_calls, FUNCTION_STYLE_NAMES};

use crate::pychar::strip as py_strip;
use crate::pyjson::{self, Object, ParseOptions, Value};

const OPEN_TAG: &str = "<tool_call>";
const CLOSE_TAG: &str = "</tool_call>";

/// How many characters of a bad block are kept in `parse_error`.
const PARSE_ERROR_CHARS: usize = 512;

/// One entry of the `parse_tool_calls` result.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// Usually a string; any truthy JSON value the model wrote as the name is kept as is,
    /// and a missing or falsy name is `""`.
    pub name: Value,
    /// Always a [`Value::Object`].
    pub arguments: Value,
    /// True for a decoded tagged block; false for a bad block and for function-style calls.
    pub canonical: bool,
    /// For a tagged block that could not be used: its stripped content, cut to 512
    /// characters.
    pub parse_error: Option<String>,
}

/// The tool calls in a model's text, by the rules in the module docs.
pub fn parse_tool_calls(text: &str) -> Vec<ToolCall> {
    let blocks = tagged_blocks(text);
    if !blocks.is_empty() {
        return blocks.into_iter().map(decode_block).collect();
    }
    function_style_calls(text, &FUNCTION_STYLE_NAMES)
        .into_iter()
        .map(|call| ToolCall {
            name: Value::from(call.name),
            arguments: Value::Object(Object::from_pairs(vec![(
                "expression".to_owned(),
                Value::from(call.expression),
            )])),
            canonical: false,
            parse_error: None,
        })
        .collect()
}

/// The contents of `<tool_call>(.*?)</tool_call>` matches (DOTALL), in order.
pub fn tagged_blocks(text: &str) -> Vec<&str> {
    let mut blocks = Vec::new();
    let mut cursor = 0;
    while let Some(found) = text[cursor..].find(OPEN_TAG) {
        let start = cursor + found + OPEN_TAG.len();
        // No closing tag after this opening one means none after any later one either.
        let Some(len) = text[start..].find(CLOSE_TAG) else {
            break;
        };
        blocks.push(&text[start..start + len]);
        cursor = start + len + CLOSE_TAG.len();
    }
    blocks
}

/// One tagged block, decoded (rule 1 of the module docs).
fn decode_block(content: &str) -> ToolCall {
    let raw = py_strip(content);
    let decoded = match pyjson::parse(raw, &ParseOptions::python()) {
        Ok(Value::Object(obj)) => call_from_object(obj),
        _ => None,
    };
    decoded.unwrap_or_else(|| ToolCall {
        name: Value::from(""),
        arguments: Value::Object(Object::new()),
        canonical: false,
        parse_error: Some(first_chars(raw, PARSE_ERROR_CHARS).to_owned()),
    })
}

/// Name and arguments of a decoded block; `None` where the block is unusable (a bad block).
fn call_from_object(obj: Object) -> Option<ToolCall> {
    let name = match [obj.get("name"), obj.get("tool_name")]
        .into_iter()
        .flatten()
        .find(|v| v.is_truthy())
    {
        Some(v) => v.clone(),
        // `obj.get("function", {}).get("name")`: a non-object `function` has no `.get`.
        None => match obj.get("function") {
            None => Value::Null,
            Some(Value::Object(function)) => function.get("name").cloned().unwrap_or(Value::Null),
            Some(_) => return None,
        },
    };
    let name = if name.is_truthy() {
        name
    } else {
        Value::from("")
    };
    let arguments = match obj.get("arguments").or_else(|| obj.get("args")) {
        None => Value::Object(Object::new()),
        Some(Value::Str(s)) => match pyjson::parse(s, &ParseOptions::python()) {
            Ok(decoded) => decoded,
            Err(_) => Value::Object(Object::from_pairs(vec![(
                "expression".to_owned(),
                Value::Str(s.clone()),
            )])),
        },
        Some(other) => other.clone(),
    };
    let arguments = if arguments.is_object() {
        arguments
    } else {
        Value::Object(Object::new())
    };
    Some(ToolCall {
        name,
        arguments,
        canonical: true,
        parse_error: None,
    })
}

/// The first `n` characters (code points) of `s`.
pub(crate) fn first_chars(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((end, _)) => &s[..end],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(pairs: &[(&str, Value)]) -> Value {
        Value::Object(Object::from_pairs(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        ))
    }

    fn call(name: &str, args: Value) -> ToolCall {
        ToolCall {
            name: Value::from(name),
            arguments: args,
            canonical: true,
            parse_error: None,
        }
    }

    fn bad(raw: &str) -> ToolCall {
        ToolCall {
            name: Value::from(""),
            arguments: obj(&[]),
            canonical: false,
            parse_error: Some(raw.to_owned()),
        }
    }

    fn expr(e: &str) -> Value {
        obj(&[("expression", Value::from(e))])
    }

    #[test]
    fn tagged_block_with_object_arguments() {
        let text = "<tool_call>\n{\"name\": \"calculate_math\", \"arguments\": {\"expression\": \"1+1\"}}\n</tool_call>";
        assert_eq!(
            parse_tool_calls(text),
            vec![call("calculate_math", expr("1+1"))]
        );
    }

    #[test]
    fn string_arguments_decode_or_wrap() {
        let text = "<tool_call>{\"name\":\"f\",\"arguments\":\"{\\\"a\\\": 1}\"}</tool_call>\
                    <tool_call>{\"name\":\"f\",\"arguments\":\"2*3\"}</tool_call>\
                    <tool_call>{\"name\":\"f\",\"arguments\":\"[1]\"}</tool_call>";
        assert_eq!(
            parse_tool_calls(text),
            vec![
                call("f", obj(&[("a", Value::Int(1))])),
                call("f", expr("2*3")),
                call("f", obj(&[])),
            ]
        );
    }

    #[test]
    fn name_falls_back_through_tool_name_and_function() {
        let text = "<tool_call>{\"name\":\"\",\"tool_name\":\"t\"}</tool_call>\
                    <tool_call>{\"name\":0,\"function\":{\"name\":\"g\"},\"args\":{\"x\":1}}</tool_call>\
                    <tool_call>{\"name\":null}</tool_call>\
                    <tool_call>{\"name\":\"n\",\"function\":\"not an object\"}</tool_call>\
                    <tool_call>{\"name\":[],\"function\":\"not an object\"}</tool_call>\
                    <tool_call>{\"name\":7}</tool_call>";
        assert_eq!(
            parse_tool_calls(text),
            vec![
                call("t", obj(&[])),
                call("g", obj(&[("x", Value::Int(1))])),
                call("", obj(&[])),
                call("n", obj(&[])),
                bad("{\"name\":[],\"function\":\"not an object\"}"),
                ToolCall {
                    name: Value::Int(7),
                    ..call("", obj(&[]))
                },
            ]
        );
    }

    #[test]
    fn arguments_key_wins_over_args_even_when_null() {
        let text = "<tool_call>{\"name\":\"f\",\"arguments\":null,\"args\":{\"a\":1}}</tool_call>";
        assert_eq!(parse_tool_calls(text), vec![call("f", obj(&[]))]);
    }

    #[test]
    fn bad_blocks_keep_512_characters_of_stripped_content() {
        let long = format!("  {}  ", "é".repeat(600));
        let text = format!("<tool_call>{long}</tool_call><tool_call>[1]</tool_call>");
        let calls = parse_tool_calls(&text);
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0], bad(&"é".repeat(512)));
        assert_eq!(calls[1], bad("[1]"));
    }

    #[test]
    fn unclosed_tags_are_not_blocks() {
        assert_eq!(parse_tool_calls("<tool_call>{\"name\":\"f\"}"), vec![]);
        let many = "<tool_call>".repeat(50_000);
        assert_eq!(parse_tool_calls(&many), vec![]);
        let text = format!("{many}{{\"name\":\"f\"}}</tool_call>");
        // The first opening tag starts the only span; the rest is its (bad) content.
        let calls = parse_tool_calls(&text);
        assert_eq!(calls.len(), 1);
        assert!(calls[0].parse_error.is_some());
    }

    #[test]
    fn tagged_blocks_suppress_function_style_calls() {
        let text = "calculate_math(\"1+1\") <tool_call>oops</tool_call>";
        assert_eq!(parse_tool_calls(text), vec![bad("oops")]);
    }

    #[test]
    fn function_style_fallback_builds_expression_calls() {
        let text = "I will call calculate_math(\"1+(2*3)\") and then calculator(\"4/2\")";
        let calls = parse_tool_calls(text);
        assert_eq!(
            calls,
            vec![
                ToolCall {
                    canonical: false,
                    ..call("calculate_math", expr("1+(2*3)"))
                },
                ToolCall {
                    canonical: false,
                    ..call("calculator", expr("4/2"))
                },
            ]
        );
    }
}
