//! Bare JSON in a Markdown code fence, taken as a call only when it names a declared tool.
//!
//! ```` ```json\n{"name": "get_weather", "arguments": {...}}\n``` ```` is how some models
//! call tools without special tokens, but the same fence is also how they show JSON to the
//! user. So the fence is a call block only if its whole body is JSON (one call object or a
//! list of them) and some `name` in it is one of the episode's tools; otherwise it is
//! content. A body that opens like a call (`{"name"` / `[{"name"`) but is not valid JSON is
//! a refused call.

use std::collections::HashSet;

use super::common::{
    byte_at, calls_in, has_at, json_reason, json_value, skip_ws, Outcome, LENIENT,
};
use crate::pychar::is_space;
use crate::pyjson::Value;

/// The fence opened by the backticks at `open` and closed by those at `close`.
pub(super) fn parse(text: &str, open: usize, close: usize, tools: &HashSet<String>) -> Outcome {
    let Some(newline) = text[open + 3..close].find('\n') else {
        return Outcome::NotABlock;
    };
    let info = text[open + 3..open + 3 + newline].trim_matches(is_space);
    if !(info.is_empty() || info.eq_ignore_ascii_case("json")) {
        return Outcome::NotABlock;
    }
    let body = skip_ws(text, open + 3 + newline + 1, close);
    let (value, after) = match json_value(text, body, close, &LENIENT) {
        Ok(found) => found,
        // JSON that opens like a call (`{"name"` or `[{"name"`) but does not parse is a
        // refused call; other broken JSON in a fence is just text.
        Err(err) if opens_like_call(text, body, close) => {
            return Outcome::rejected(close + 3, json_reason(&err))
        }
        Err(_) => return Outcome::NotABlock,
    };
    if skip_ws(text, after, close) != close {
        return Outcome::NotABlock;
    }
    let declared = |obj: &Value| {
        let name = match obj.as_object() {
            Some(o) => o.get("name").or_else(|| {
                o.get("function")
                    .and_then(Value::as_object)
                    .and_then(|f| f.get("name"))
            }),
            None => None,
        };
        name.and_then(Value::as_str)
            .is_some_and(|n| tools.contains(n))
    };
    let names_a_tool = match &value {
        Value::Array(items) => items.iter().any(declared),
        other => declared(other),
    };
    if !names_a_tool {
        return Outcome::NotABlock;
    }
    Outcome::Block {
        end: close + 3,
        items: calls_in(value),
    }
}

/// Whether the fence body at `at` opens with `{"name"` or `[{"name"`.
fn opens_like_call(text: &str, at: usize, end: usize) -> bool {
    let mut at = at;
    if byte_at(text, at, end) == Some(b'[') {
        at = skip_ws(text, at + 1, end);
    }
    if byte_at(text, at, end) != Some(b'{') {
        return false;
    }
    let key = skip_ws(text, at + 1, end);
    has_at(text, key, end, "\"name\"") || has_at(text, key, end, "'name'")
}
