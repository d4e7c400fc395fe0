//! Hermes / Qwen `<tool_call>` blocks.
//!
//! `<tool_call>` then JSON: one call object, a list of them, or several objects in a row
//! (separated by whitespace, `,` or `;`), optionally inside a code fence, then
//! `</tool_call>`. The JSON is read by value boundaries, so a `</tool_call>` or braces inside
//! a string argument are part of the argument. The closing tag may be missing when the JSON
//! is complete (the model stopped there or went on to the next call).

use super::common::{
    byte_at, calls_in, first_at_or_after, has_at, json_reason, json_value, skip_fence_line,
    skip_ws, Found, Outcome, LENIENT,
};

pub(super) const OPEN: &str = "<tool_call>";
pub(super) const CLOSE: &str = "</tool_call>";

/// Whether the opening tag at `at` starts a block: JSON or a code fence must follow.
/// Anything else (`use the <tool_call> tag`) is prose that mentions the tag.
pub(super) fn starts_block(text: &str, at: usize, end: usize) -> bool {
    let body = skip_ws(text, at + OPEN.len(), end);
    matches!(byte_at(text, body, end), Some(b'{' | b'['))
        || has_at(text, body, end, "```")
        || body >= end
}

/// Parses the block whose opening tag is at `start`; `window` is where the next block
/// starts (JSON cannot run past it) and `closes` the sorted offsets of closing tags.
pub(super) fn parse(text: &str, start: usize, window: usize, closes: &[usize]) -> Outcome {
    let body = start + OPEN.len();
    // Where a rejected block ends: after its closing tag if it has one before the next
    // block, else at the next block.
    let rejected_end = || match first_at_or_after(closes, body) {
        Some(close) if close < window => close + CLOSE.len(),
        _ => window,
    };
    let mut at = skip_ws(text, body, window);
    if at >= window {
        return Outcome::rejected(rejected_end(), "the block holds no JSON");
    }
    let fenced = has_at(text, at, window, "```");
    if fenced {
        at = skip_ws(text, skip_fence_line(text, at, window), window);
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
                    end: rejected_end(),
                    items,
                };
            }
        }
        if matches!(byte_at(text, at, window), Some(b',' | b';')) {
            at = skip_ws(text, at + 1, window);
        }
        if !matches!(byte_at(text, at, window), Some(b'{' | b'[')) {
            break;
        }
    }
    if fenced && has_at(text, at, window, "```") {
        at = skip_ws(text, at + 3, window);
    }
    // No closing tag right after the JSON but one later (before the next block): something
    // unexpected sits between, so refuse rather than guess. No closing tag at all: it is
    // just missing, and the text after the JSON is ordinary content.
    match first_at_or_after(closes, at) {
        Some(close) if close == at => Outcome::Block {
            end: at + CLOSE.len(),
            items,
        },
        Some(close) if close < window => Outcome::rejected(
            close + CLOSE.len(),
            "unexpected text between the JSON and </tool_call>",
        ),
        _ => Outcome::Block { end: at, items },
    }
}
