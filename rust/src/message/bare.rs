//! Calls written as bare JSON at the start of a line, with no marker: Llama 3's call
//! objects (`{"name": .., "parameters": ..}`, several separated by `;` or on their own
//! lines, text after them is content) and xLAM's list of calls (`[{"name": .., "arguments":
//! ..}]`).
//!
//! Only JSON shaped like a call counts: an object with a string `name` and `parameters` or
//! `arguments` (or, for a list, a declared tool's name); any other JSON is prose. JSON that
//! starts like a call (`{"name"` / `[{"name"`) but does not parse is a refused block.

use std::collections::HashSet;

use super::common::{
    byte_at, calls_in, has_at, json_reason, json_value, skip_ws, Outcome, LENIENT,
};
use crate::pyjson::Value;

const LLAMA_END_TOKENS: [&str; 2] = ["<|eom_id|>", "<|eot_id|>"];

/// Whether the text at `at` opens an object whose first key is `name`.
pub(super) fn opens_with_name(text: &str, at: usize, end: usize) -> bool {
    if byte_at(text, at, end) != Some(b'{') {
        return false;
    }
    let key = skip_ws(text, at + 1, end);
    has_at(text, key, end, "\"name\"") || has_at(text, key, end, "'name'")
}

/// A call object: a string `name` and `parameters` or `arguments`, or the OpenAI shape.
fn call_shaped(value: &Value, tools: Option<&HashSet<String>>) -> bool {
    let Some(obj) = value.as_object() else {
        return false;
    };
    let obj = match obj.get("function").and_then(Value::as_object) {
        Some(function) if !obj.contains_key("name") => function,
        _ => obj,
    };
    let Some(name) = obj.get("name").and_then(Value::as_str) else {
        return false;
    };
    obj.contains_key("parameters")
        || obj.contains_key("arguments")
        || tools.is_some_and(|t| t.contains(name))
}

/// Llama 3 call objects from the `{` at `start`.
pub(super) fn llama_objects(text: &str, start: usize, window: usize) -> Outcome {
    let mut at = start;
    let mut items = Vec::new();
    loop {
        match json_value(text, at, window, &LENIENT) {
            Ok((value, after)) if call_shaped(&value, None) => {
                items.extend(calls_in(value));
                at = after;
            }
            Ok(_) if items.is_empty() => return Outcome::NotABlock,
            Ok(_) => break,
            Err(_) if items.is_empty() && !opens_with_name(text, at, window) => {
                return Outcome::NotABlock
            }
            Err(err) => {
                items.push(Err(json_reason(&err)));
                return Outcome::Block { end: window, items };
            }
        }
        let next = skip_ws(text, at, window);
        if byte_at(text, next, window) != Some(b';') {
            break;
        }
        at = next + 1;
        let object = skip_ws(text, at, window);
        if byte_at(text, object, window) != Some(b'{') {
            break;
        }
        at = object;
    }
    let next = skip_ws(text, at, window);
    if let Some(token) = LLAMA_END_TOKENS
        .iter()
        .find(|t| has_at(text, next, window, t))
    {
        at = next + token.len();
    }
    Outcome::Block { end: at, items }
}

/// Whether the `[` at `at` opens a list whose first item opens with `"name"`.
pub(super) fn list_start(text: &str, at: usize, end: usize) -> bool {
    byte_at(text, at, end) == Some(b'[') && {
        let first = skip_ws(text, at + 1, end);
        byte_at(text, first, end) == Some(b'{')
    }
}

/// An xLAM list of calls from the `[` at `start`.
pub(super) fn xlam_list(
    text: &str,
    start: usize,
    window: usize,
    tools: Option<&HashSet<String>>,
) -> Outcome {
    match json_value(text, start, window, &LENIENT) {
        Ok((value, after)) => {
            let shaped = match &value {
                Value::Array(items) => items.first().is_some_and(|v| call_shaped(v, tools)),
                _ => false,
            };
            if !shaped {
                return Outcome::NotABlock;
            }
            Outcome::Block {
                end: after,
                items: calls_in(value),
            }
        }
        Err(err) => {
            let first = skip_ws(text, start + 1, window);
            if opens_with_name(text, first, window) {
                Outcome::rejected(window, json_reason(&err))
            } else {
                Outcome::NotABlock
            }
        }
    }
}

/// Llama 3 call objects after other text on their line (`Here is the result: {"name": ..,
/// "parameters": ..} Would you like more?`), read as vLLM reads them, but only when the
/// name is a declared tool (without declared tools such JSON is taken for an example in
/// prose). The JSON may run to the end of the segment; what does not parse or is not a
/// call is prose. Returns the outcome and the offset
/// up to which no other inline candidate needs trying (the end of what the JSON reader
/// looked at), which keeps the scan linear.
pub(super) fn llama_inline(
    text: &str,
    start: usize,
    end: usize,
    tools: Option<&HashSet<String>>,
) -> (Outcome, usize) {
    match json_value(text, start, end, &LENIENT) {
        Ok((value, after)) => {
            let declared = |v: &Value| {
                let name = v
                    .as_object()
                    .and_then(|o| o.get("name"))
                    .and_then(Value::as_str);
                tools.is_none_or(|t| name.is_some_and(|n| t.contains(n)))
            };
            if !call_shaped(&value, None) || !declared(&value) {
                return (Outcome::NotABlock, after);
            }
            match llama_objects(text, start, end) {
                Outcome::Block { end: stop, items } => (Outcome::Block { end: stop, items }, stop),
                Outcome::NotABlock => (Outcome::NotABlock, after),
            }
        }
        Err(err) => (Outcome::NotABlock, start + err.byte_offset.max(1)),
    }
}
