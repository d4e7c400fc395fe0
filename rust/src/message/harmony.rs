//! gpt-oss Harmony messages: `<|channel|>analysis<|message|>...<|end|>` (reasoning),
//! `<|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>
//! {...}<|call|>` (a call), `<|channel|>final<|message|>...<|return|>` (the answer).
//!
//! The header of each message (role, channel, `to=` recipient, constraint) may put the
//! recipient before or after the channel. A commentary message without a recipient is a
//! preamble shown to the user: content. The special tokens are located in one pass, so the
//! parse is linear in the text length.

use super::common::{arguments_from, json_reason, json_value, skip_ws, Found, LENIENT};
use crate::pychar::is_space;

pub(super) const CHANNEL: &str = "<|channel|>";
const START: &str = "<|start|>";
const MESSAGE: &str = "<|message|>";
const CONSTRAIN: &str = "<|constrain|>";
const ENDS: [&str; 3] = ["<|end|>", "<|call|>", "<|return|>"];

/// One piece of a Harmony message sequence, in text order.
pub(super) enum Piece {
    Content(usize, usize),
    Reasoning(usize, usize),
    /// A call message (or a refused one): its byte range and what it held.
    Call(usize, usize, Found),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Token {
    Start,
    Channel,
    Message,
    Constrain,
    End,
}

/// Every Harmony token in the text, in order: offset, kind, length.
fn tokens(text: &str) -> Vec<(usize, Token, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(found) = text[at..].find("<|") {
        let pos = at + found;
        let rest = &text[pos..];
        let hit = [
            (START, Token::Start),
            (CHANNEL, Token::Channel),
            (MESSAGE, Token::Message),
            (CONSTRAIN, Token::Constrain),
        ]
        .into_iter()
        .chain(ENDS.iter().map(|e| (*e, Token::End)))
        .find(|(t, _)| rest.starts_with(t));
        match hit {
            Some((t, kind)) => {
                out.push((pos, kind, t.len()));
                at = pos + t.len();
            }
            None => at = pos + 2,
        }
    }
    out
}

/// The messages of a Harmony completion.
pub(super) fn parse(text: &str) -> Vec<Piece> {
    let toks = tokens(text);
    let mut pieces = Vec::new();
    let mut i = 0;
    // Text before the first header is plain content (a server that dropped the tokens).
    if let Some(&(first, _, _)) = toks.first() {
        if first > 0 {
            pieces.push(Piece::Content(0, first));
        }
    }
    while i < toks.len() {
        let (pos, kind, _) = toks[i];
        if !matches!(kind, Token::Start | Token::Channel) {
            // A stray end or message token outside a header: skip it.
            i += 1;
            continue;
        }
        // The header runs to <|message|>; collect its words.
        let header_start = pos;
        let mut header = String::new();
        let mut channel: Option<String> = None;
        let mut j = i;
        let mut body_start = None;
        while j < toks.len() {
            let (p, k, l) = toks[j];
            let next = toks.get(j + 1).map_or(text.len(), |t| t.0);
            let words = &text[p + l..next];
            match k {
                Token::Channel if channel.is_none() => {
                    let trimmed = words.trim_matches(is_space);
                    let (first, rest) = trimmed.split_once(' ').unwrap_or((trimmed, ""));
                    channel = Some(first.to_owned());
                    header.push(' ');
                    header.push_str(rest);
                }
                Token::Message => {
                    body_start = Some(p + l);
                    break;
                }
                Token::End => break,
                Token::Start if j > i => break,
                _ => {
                    header.push(' ');
                    header.push_str(words);
                }
            }
            j += 1;
        }
        let Some(body) = body_start else {
            // A header without a message: cut off, or not Harmony after all.
            let end = toks.get(j).map_or(text.len(), |t| t.0);
            if header.contains("to=functions.") {
                pieces.push(Piece::Call(
                    header_start,
                    end,
                    Err("the call is cut off before <|message|>".to_owned()),
                ));
            }
            i = j.max(i + 1);
            continue;
        };
        // The body runs to the next end, start or channel token.
        let mut k = j + 1;
        while k < toks.len() && !matches!(toks[k].1, Token::End | Token::Start | Token::Channel) {
            k += 1;
        }
        let (body_end, end) = match toks.get(k) {
            Some(&(p, Token::End, l)) => (p, p + l),
            Some(&(p, _, _)) => (p, p),
            None => (text.len(), text.len()),
        };
        let recipient = header
            .split(is_space)
            .find_map(|w| w.strip_prefix("to="))
            .map(str::to_owned);
        match (recipient, channel.as_deref()) {
            (Some(to), _) => pieces.push(Piece::Call(
                header_start,
                end,
                call(text, &to, body, body_end),
            )),
            (None, Some("analysis")) => pieces.push(Piece::Reasoning(body, body_end)),
            (None, _) => pieces.push(Piece::Content(body, body_end)),
        }
        i = if matches!(toks.get(k), Some(&(_, Token::End, _))) {
            k + 1
        } else {
            k
        };
    }
    pieces
}

/// The call a message to `to` makes with the JSON body in `[start, end)`.
fn call(text: &str, to: &str, start: usize, end: usize) -> Found {
    // Other recipients (`browser.search`, `python`) are gpt-oss's built-in tools, which
    // are not function calls.
    let Some(name) = to.strip_prefix("functions.").filter(|n| !n.is_empty()) else {
        return Err(format!(
            "the recipient {to:?} is not a function: write to=functions.NAME"
        ));
    };
    let at = skip_ws(text, start, end);
    if at >= end {
        return Ok((name.to_owned(), Default::default()));
    }
    let (value, after) = json_value(text, at, end, &LENIENT).map_err(|e| json_reason(&e))?;
    if skip_ws(text, after, end) < end {
        return Err(format!("{name}: unexpected text after the JSON arguments"));
    }
    arguments_from(value).map(|args| (name.to_owned(), args))
}
