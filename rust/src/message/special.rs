//! Formats introduced by special tokens: Llama 3 `<|python_tag|>`, Mistral `[TOOL_CALLS]`,
//! DeepSeek-V3 tool-call tokens; and Llama 3's plain JSON message.

use super::common::{
    arguments_from, byte_at, calls_in, has_at, json_reason, json_value, skip_fence_line, skip_ws,
    Found, Outcome, LENIENT,
};
use crate::pychar::is_space;

pub(super) const PYTHON_TAG: &str = "<|python_tag|>";
const LLAMA_END_TOKENS: [&str; 2] = ["<|eom_id|>", "<|eot_id|>"];

pub(super) const TOOL_CALLS: &str = "[TOOL_CALLS]";
const MISTRAL_ARGS: &str = "[ARGS]";
const MISTRAL_CALL_ID: &str = "[CALL_ID]";

/// DeepSeek-V3 tokens use U+FF5C (fullwidth vertical line) and U+2581; some renderings
/// use an ASCII `|`. Both spellings are accepted.
pub(super) const DEEPSEEK_CALL_BEGIN: [&str; 2] = ["<｜tool▁call▁begin｜>", "<|tool▁call▁begin|>"];
pub(super) const DEEPSEEK_ENVELOPE: [&str; 4] = [
    "<｜tool▁calls▁begin｜>",
    "<|tool▁calls▁begin|>",
    "<｜tool▁calls▁end｜>",
    "<|tool▁calls▁end|>",
];
const DEEPSEEK_SEP: [&str; 2] = ["<｜tool▁sep｜>", "<|tool▁sep|>"];
const DEEPSEEK_CALL_END: [&str; 2] = ["<｜tool▁call▁end｜>", "<|tool▁call▁end|>"];

/// `<|python_tag|>` then call objects (`parameters` or `arguments`) separated by `;`,
/// optionally ended by `<|eom_id|>` / `<|eot_id|>`.
pub(super) fn llama_python_tag(text: &str, start: usize, window: usize) -> Outcome {
    let mut at = skip_ws(text, start + PYTHON_TAG.len(), window);
    if !matches!(byte_at(text, at, window), Some(b'{' | b'[')) {
        return Outcome::rejected(
            end_token_or(text, at, window),
            "<|python_tag|> is not followed by a JSON tool call",
        );
    }
    let mut items: Vec<Found> = Vec::new();
    loop {
        match json_value(text, at, window, &LENIENT) {
            Ok((value, after)) => {
                items.extend(calls_in(value));
                at = skip_ws(text, after, window);
            }
            Err(err) => {
                items.push(Err(json_reason(&err)));
                return Outcome::Block {
                    end: end_token_or(text, at, window),
                    items,
                };
            }
        }
        if byte_at(text, at, window) != Some(b';') {
            break;
        }
        at = skip_ws(text, at + 1, window);
        if byte_at(text, at, window) != Some(b'{') {
            break;
        }
    }
    if let Some(token) = LLAMA_END_TOKENS
        .iter()
        .find(|t| has_at(text, at, window, t))
    {
        at += token.len();
    }
    Outcome::Block { end: at, items }
}

/// Just past the first Llama end token in `[at, window)`, else `window`.
fn end_token_or(text: &str, at: usize, window: usize) -> usize {
    let rest = text.get(at..window).unwrap_or_default();
    LLAMA_END_TOKENS
        .iter()
        .filter_map(|t| rest.find(t).map(|i| at + i + t.len()))
        .min()
        .unwrap_or(window)
}

/// `[TOOL_CALLS]` then a JSON list of calls (or one object), or the newer
/// `[TOOL_CALLS]name[ARGS]{...}` (optionally with `[CALL_ID]id` before `[ARGS]`).
pub(super) fn mistral(text: &str, start: usize, window: usize) -> Outcome {
    let mut at = skip_ws(text, start + TOOL_CALLS.len(), window);
    if matches!(byte_at(text, at, window), Some(b'[' | b'{')) {
        return match json_value(text, at, window, &LENIENT) {
            Ok((value, after)) => {
                let mut end = after;
                if has_at(text, end, window, "</s>") {
                    end += 4;
                }
                Outcome::Block {
                    end,
                    items: calls_in(value),
                }
            }
            Err(err) => Outcome::rejected(window, json_reason(&err)),
        };
    }
    let name_start = at;
    while let Some(b) = byte_at(text, at, window) {
        if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.') {
            at += 1;
        } else {
            break;
        }
    }
    if at == name_start {
        return Outcome::rejected(
            line_end(text, at, window),
            "[TOOL_CALLS] is not followed by a list of calls or name[ARGS]{...}",
        );
    }
    let name = text[name_start..at].to_owned();
    if has_at(text, at, window, MISTRAL_CALL_ID) {
        at += MISTRAL_CALL_ID.len();
        while byte_at(text, at, window).is_some_and(|b| b.is_ascii_alphanumeric()) {
            at += 1;
        }
    }
    // `name[ARGS]{...}`, or `name{...}` as a server that drops the [ARGS] token shows it;
    // anything else after the word (`[TOOL_CALLS] not json`) is no call at all.
    let after_name = skip_ws(text, at, window);
    if has_at(text, after_name, window, MISTRAL_ARGS) {
        at = skip_ws(text, after_name + MISTRAL_ARGS.len(), window);
    } else if byte_at(text, after_name, window) == Some(b'{') {
        at = after_name;
    } else {
        return Outcome::rejected(
            line_end(text, at, window),
            "[TOOL_CALLS] is not followed by a list of calls, name[ARGS]{...} or name{...}",
        );
    }
    match json_value(text, at, window, &LENIENT) {
        Ok((value, after)) => Outcome::Block {
            end: after,
            items: vec![arguments_from(value).map(|args| (name, args))],
        },
        Err(err) => Outcome::rejected(window, json_reason(&err)),
    }
}

/// The end of the line holding `at` (its `\n`), or `end`.
fn line_end(text: &str, at: usize, end: usize) -> usize {
    text.get(at..end)
        .and_then(|s| s.find('\n'))
        .map_or(end, |i| at + i)
}

/// The first of `tokens` found at `at`, with its length.
fn token_at(text: &str, at: usize, end: usize, tokens: &[&str]) -> Option<usize> {
    tokens
        .iter()
        .find(|t| has_at(text, at, end, t))
        .map(|t| t.len())
}

/// Offset and length of the first of `tokens` in `[at, end)`.
fn find_token(text: &str, at: usize, end: usize, tokens: &[&str]) -> Option<(usize, usize)> {
    let rest = text.get(at..end)?;
    tokens
        .iter()
        .filter_map(|t| rest.find(t).map(|i| (at + i, t.len())))
        .min()
}

/// One DeepSeek call: `<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```
/// <｜tool▁call▁end｜>` (V3) or `<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>`
/// (V3.1). The envelope tokens around the calls are handled as separate markers.
pub(super) fn deepseek_call(text: &str, start: usize, window: usize) -> Outcome {
    let begin_len = token_at(text, start, window, &DEEPSEEK_CALL_BEGIN).unwrap_or(0);
    let head = start + begin_len;
    let rejected_end = |from: usize| match find_token(text, from, window, &DEEPSEEK_CALL_END) {
        Some((at, len)) => at + len,
        None => window,
    };
    let Some((sep, sep_len)) = find_token(text, head, window, &DEEPSEEK_SEP) else {
        return Outcome::rejected(
            rejected_end(head),
            "missing <｜tool▁sep｜> after the call start",
        );
    };
    let before = text[head..sep].trim_matches(is_space);
    let mut at = sep + sep_len;
    let name = if before == "function" {
        let line_end = text[at..window].find('\n').map_or(window, |i| at + i);
        let name = text[at..line_end].trim_matches(is_space);
        at = line_end;
        name
    } else {
        before
    };
    if name.is_empty() {
        return Outcome::rejected(rejected_end(at), "the tool name is empty");
    }
    let name = name.to_owned();
    at = skip_ws(text, at, window);
    let fenced = has_at(text, at, window, "```");
    if fenced {
        at = skip_ws(text, skip_fence_line(text, at, window), window);
    }
    let (value, after) = match json_value(text, at, window, &LENIENT) {
        Ok(found) => found,
        Err(err) => return Outcome::rejected(rejected_end(at), json_reason(&err)),
    };
    at = skip_ws(text, after, window);
    if fenced && has_at(text, at, window, "```") {
        at = skip_ws(text, at + 3, window);
    }
    if let Some(len) = token_at(text, at, window, &DEEPSEEK_CALL_END) {
        at += len;
    }
    Outcome::Block {
        end: at,
        items: vec![arguments_from(value).map(|args| (name, args))],
    }
}

/// An envelope token (`<｜tool▁calls▁begin｜>` / `<｜tool▁calls▁end｜>`): no calls of its own,
/// removed from the content.
pub(super) fn deepseek_envelope(text: &str, start: usize, window: usize) -> Outcome {
    let len = token_at(text, start, window, &DEEPSEEK_ENVELOPE).unwrap_or(0);
    Outcome::Block {
        end: start + len,
        items: Vec::new(),
    }
}
