//! Formats whose calls are JSON behind a family's own tokens: Kimi-K2, Granite, InternLM,
//! Jamba, Phi-4-mini, and Llama 4's `<|python_start|>` around a pythonic list.
//!
//! Each parser reads its JSON by value boundaries inside its window (the next marker of
//! its own family), so a closing token inside a string argument is part of the argument.
//! A closing token that is missing after complete JSON is accepted, as for Hermes (the
//! model stopped there); JSON that is cut off or not a call is a refused block.

use super::common::{
    arguments_from, byte_at, call_from_object, calls_in, has_at, json_reason, json_value, skip_ws,
    Outcome, LENIENT,
};
use super::pythonic;
use crate::pychar::is_space;
use crate::pyjson::Value;

pub(super) const KIMI_CALL: &str = "<|tool_call_begin|>";
const KIMI_ARGS: &str = "<|tool_call_argument_begin|>";
const KIMI_CALL_END: &str = "<|tool_call_end|>";
/// Section tokens around Kimi-K2 calls (the singular spelling occurs in some releases).
pub(super) const KIMI_ENVELOPE: [&str; 4] = [
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_section_begin|>",
    "<|tool_call_section_end|>",
];

pub(super) const GRANITE: &str = "<|tool_call|>";
pub(super) const INTERNLM: &str = "<|action_start|>";
const INTERNLM_PLUGIN: &str = "<|plugin|>";
const INTERNLM_END: &str = "<|action_end|>";
pub(super) const JAMBA: &str = "<tool_calls>";
const JAMBA_END: &str = "</tool_calls>";
pub(super) const PHI4: &str = "functools[";
pub(super) const LLAMA4: &str = "<|python_start|>";
const LLAMA4_END: &str = "<|python_end|>";

/// Just past `token` when it follows at `at` (after whitespace), else `at`.
fn past(text: &str, at: usize, window: usize, token: &str) -> usize {
    let next = skip_ws(text, at, window);
    if has_at(text, next, window, token) {
        next + token.len()
    } else {
        at
    }
}

/// Where a refused block ends: just past the first `token` in `[at, window)`, else the
/// window. One forward search per block, so the scan stays linear.
fn refused_end(text: &str, at: usize, window: usize, token: &str) -> usize {
    text.get(at..window)
        .and_then(|s| s.find(token))
        .map_or(window, |i| at + i + token.len())
}

/// `<|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{...}<|tool_call_end|>`.
pub(super) fn kimi_call(text: &str, start: usize, window: usize) -> Outcome {
    let head = start + KIMI_CALL.len();
    let Some(args_at) = text.get(head..window).and_then(|s| s.find('<')) else {
        return Outcome::rejected(
            window,
            "missing <|tool_call_argument_begin|> after the call id",
        );
    };
    let args_at = head + args_at;
    if !has_at(text, args_at, window, KIMI_ARGS) {
        return Outcome::rejected(
            refused_end(text, head, window, KIMI_CALL_END),
            "missing <|tool_call_argument_begin|> after the call id",
        );
    }
    let id = text[head..args_at].trim_matches(is_space);
    let name = kimi_name(id);
    if name.is_empty() {
        return Outcome::rejected(
            refused_end(text, head, window, KIMI_CALL_END),
            "the tool name is empty",
        );
    }
    let at = skip_ws(text, args_at + KIMI_ARGS.len(), window);
    match json_value(text, at, window, &LENIENT) {
        Ok((value, after)) => Outcome::Block {
            end: past(text, after, window, KIMI_CALL_END),
            items: vec![arguments_from(value).map(|args| (name.to_owned(), args))],
        },
        Err(err) => Outcome::rejected(
            refused_end(text, at, window, KIMI_CALL_END),
            json_reason(&err),
        ),
    }
}

/// The tool name in a Kimi call id: `functions.get_weather:0` is `get_weather`.
fn kimi_name(id: &str) -> &str {
    let id = id.strip_prefix("functions.").unwrap_or(id);
    match id.rsplit_once(':') {
        Some((name, index)) if index.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => id,
    }
}

/// An envelope token of a Kimi section: no calls of its own, removed from the content.
pub(super) fn kimi_envelope(text: &str, start: usize, window: usize) -> Outcome {
    let len = KIMI_ENVELOPE
        .iter()
        .find(|t| has_at(text, start, window, t))
        .map_or(0, |t| t.len());
    Outcome::Block {
        end: start + len,
        items: Vec::new(),
    }
}

/// `<|tool_call|>[{"name": .., "arguments": ..}, ...]` (Granite 3.x); one object is
/// accepted too.
pub(super) fn granite(text: &str, start: usize, window: usize) -> Outcome {
    let at = skip_ws(text, start + GRANITE.len(), window);
    if !matches!(byte_at(text, at, window), Some(b'[' | b'{')) {
        return Outcome::rejected(at, "<|tool_call|> is not followed by a JSON list of calls");
    }
    match json_value(text, at, window, &LENIENT) {
        Ok((value, after)) => Outcome::Block {
            end: after,
            items: calls_in(value),
        },
        Err(err) => Outcome::rejected(window, json_reason(&err)),
    }
}

/// `<|action_start|><|plugin|>{"name": .., "parameters": ..}<|action_end|>` (InternLM 2/2.5).
/// `<|action_start|><|interpreter|>` is code for InternLM's interpreter, not a function call.
pub(super) fn internlm(text: &str, start: usize, window: usize) -> Outcome {
    let mut at = skip_ws(text, start + INTERNLM.len(), window);
    if !has_at(text, at, window, INTERNLM_PLUGIN) {
        return Outcome::rejected(
            refused_end(text, at, window, INTERNLM_END),
            "<|action_start|> is not followed by <|plugin|> and a JSON call",
        );
    }
    at = skip_ws(text, at + INTERNLM_PLUGIN.len(), window);
    match json_value(text, at, window, &LENIENT) {
        Ok((Value::Object(obj), after)) => Outcome::Block {
            end: past(text, after, window, INTERNLM_END),
            items: vec![call_from_object(obj)],
        },
        Ok((other, _)) => Outcome::rejected(
            refused_end(text, at, window, INTERNLM_END),
            format!("expected a JSON object, not {}", other.type_name()),
        ),
        Err(err) => Outcome::rejected(
            refused_end(text, at, window, INTERNLM_END),
            json_reason(&err),
        ),
    }
}

/// `<tool_calls>[{"name": .., "arguments": ..}]</tool_calls>` (Jamba). The tag in prose
/// (not followed by JSON) is left as text.
pub(super) fn jamba(text: &str, start: usize, window: usize) -> Outcome {
    let at = skip_ws(text, start + JAMBA.len(), window);
    if !matches!(byte_at(text, at, window), Some(b'[' | b'{')) {
        return Outcome::NotABlock;
    }
    match json_value(text, at, window, &LENIENT) {
        Ok((value, after)) => Outcome::Block {
            end: past(text, after, window, JAMBA_END),
            items: calls_in(value),
        },
        Err(err) => Outcome::rejected(refused_end(text, at, window, JAMBA_END), json_reason(&err)),
    }
}

/// `functools[{"name": .., "arguments": ..}, ...]` (Phi-4-mini).
pub(super) fn phi4(text: &str, start: usize, window: usize) -> Outcome {
    let at = start + PHI4.len() - 1;
    match json_value(text, at, window, &LENIENT) {
        Ok((value, after)) => Outcome::Block {
            end: after,
            items: calls_in(value),
        },
        Err(err) => Outcome::rejected(window, json_reason(&err)),
    }
}

/// `<|python_start|>[f(a=1), g(b='x')]<|python_end|>` (Llama 4); JSON calls between the
/// same tokens are accepted too.
pub(super) fn llama4(text: &str, start: usize, window: usize) -> Outcome {
    let at = skip_ws(text, start + LLAMA4.len(), window);
    let refused =
        |reason: String| Outcome::rejected(refused_end(text, at, window, LLAMA4_END), reason);
    // `[f(...)]` is a pythonic list, `[{...}]` or `{...}` JSON calls.
    let pythonic = byte_at(text, at, window) == Some(b'[')
        && byte_at(text, skip_ws(text, at + 1, window), window) != Some(b'{');
    match byte_at(text, at, window) {
        Some(b'[') if pythonic => match pythonic::read_list(text, at, window) {
            Ok((after, items)) => Outcome::Block {
                end: past(text, after, window, LLAMA4_END),
                items,
            },
            Err(reason) => refused(reason),
        },
        Some(b'[' | b'{') => match json_value(text, at, window, &LENIENT) {
            Ok((value, after)) => Outcome::Block {
                end: past(text, after, window, LLAMA4_END),
                items: calls_in(value),
            },
            Err(err) => refused(json_reason(&err)),
        },
        _ => refused("<|python_start|> is not followed by a list of calls".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kimi_ids_name_the_function() {
        assert_eq!(kimi_name("functions.get_weather:0"), "get_weather");
        assert_eq!(kimi_name("get_weather:12"), "get_weather");
        assert_eq!(kimi_name("functions.a.b:1"), "a.b");
        assert_eq!(kimi_name("functions.x:y"), "x:y");
    }
}
