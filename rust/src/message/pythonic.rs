//! The pythonic call list of Llama 3.2+/4: `[get_weather(city='Paris'), get_time(tz="UTC")]`.
//!
//! Only keyword arguments with literal values are accepted: strings, numbers (negative
//! too), `True`/`False`/`None`, and lists/dicts of those. Anything else (a name, a call, an
//! operator, a positional argument) rejects the block. Nothing is ever evaluated: the values
//! are read by the JSON reader in a Python-literal mode (single or double quotes, no
//! `true`/`null`/`NaN`, which are plain names in Python).

use super::common::{byte_at, identifier_end, json_value, skip_ws, Found, Outcome};
use std::collections::HashSet;

use crate::pychar::is_space;
use crate::pyjson::{Object, ParseOptions, Value};

const LITERALS: ParseOptions = ParseOptions {
    nonfinite: false,
    json_literals: false,
    control_chars: false,
    ..ParseOptions::lenient()
};

/// A list start at `at` (the `[`): `[`, whitespace, a name, whitespace, `(`. Returns the
/// first name.
pub(super) fn first_name(text: &str, at: usize, end: usize) -> Option<&str> {
    if byte_at(text, at, end) != Some(b'[') {
        return None;
    }
    let name_start = skip_ws(text, at + 1, end);
    let name_end = identifier_end(text, name_start, end)?;
    let paren = skip_ws(text, name_end, end);
    (byte_at(text, paren, end) == Some(b'(')).then(|| &text[name_start..name_end])
}

/// End of the line holding `at` (the offset of its `\n`), or `end`.
fn line_end(text: &str, at: usize, end: usize) -> usize {
    text.get(at..end)
        .and_then(|s| s.find('\n'))
        .map_or(end, |i| at + i)
}

/// Reads the list whose `[` is at `start`, bounded by `window`: the calls and the offset
/// just past the closing `]`, or why it is not a valid call list.
pub(super) fn read_list(
    text: &str,
    start: usize,
    window: usize,
) -> Result<(usize, Vec<Found>), String> {
    let mut items: Vec<Found> = Vec::new();
    let mut at = start + 1;
    loop {
        at = skip_ws(text, at, window);
        let Some(name_end) = identifier_end(text, at, window) else {
            return Err("expected a function call in the list".to_owned());
        };
        let name = text[at..name_end].to_owned();
        at = skip_ws(text, name_end, window);
        if byte_at(text, at, window) != Some(b'(') {
            return Err(format!("expected '(' after {name}"));
        }
        let mut arguments: Vec<(String, Value)> = Vec::new();
        let mut keywords: HashSet<String> = HashSet::new();
        at = skip_ws(text, at + 1, window);
        while byte_at(text, at, window) != Some(b')') {
            let keyword_end = identifier_end(text, at, window);
            let eq = keyword_end.map(|e| skip_ws(text, e, window));
            let is_keyword = eq.is_some_and(|eq| {
                byte_at(text, eq, window) == Some(b'=')
                    && byte_at(text, eq + 1, window) != Some(b'=')
            });
            let (Some(keyword_end), Some(eq), true) = (keyword_end, eq, is_keyword) else {
                return Err(format!(
                    "{name}: positional arguments are not accepted, only keyword=literal"
                ));
            };
            let keyword = text[at..keyword_end].to_owned();
            at = skip_ws(text, eq + 1, window);
            let value = match json_value(text, at, window, &LITERALS) {
                Ok((value, after)) => {
                    at = skip_ws(text, after, window);
                    value
                }
                Err(_) => return Err(format!("{name}: argument {keyword} is not a literal")),
            };
            match byte_at(text, at, window) {
                Some(b',') => at = skip_ws(text, at + 1, window),
                Some(b')') => {}
                _ => return Err(format!("{name}: argument {keyword} is not a literal")),
            }
            if !keywords.insert(keyword.clone()) {
                return Err(format!("{name}: keyword argument {keyword} repeated"));
            }
            arguments.push((keyword, value));
        }
        items.push(Ok((name, Object::from_pairs(arguments))));
        at = skip_ws(text, at + 1, window);
        match byte_at(text, at, window) {
            Some(b']') => return Ok((at + 1, items)),
            Some(b',') => {
                at = skip_ws(text, at + 1, window);
                if byte_at(text, at, window) == Some(b']') {
                    return Ok((at + 1, items));
                }
            }
            _ => return Err("expected ',' or ']' after a call".to_owned()),
        }
    }
}

/// Parses the list whose `[` is at `start`; `window` bounds it. `line_start`: the list
/// starts its line, so a list that does not parse is a refused block; a list after other
/// words on its line (`Let me check. [f(a=1)]`) counts only when it parses. Without
/// declared tools the list must also end its line (a list followed by more words is prose);
/// with them (`declared`: the first name is one of them) text may follow.
pub(super) fn parse(
    text: &str,
    start: usize,
    window: usize,
    line_start: bool,
    declared: bool,
) -> Outcome {
    let (at, items) = match read_list(text, start, window) {
        Ok(found) => found,
        Err(reason) if line_start => {
            return Outcome::rejected(line_end(text, start, window), reason)
        }
        Err(_) => return Outcome::NotABlock,
    };
    let eol = line_end(text, at, window);
    if !declared && !text[at..eol].chars().all(is_space) {
        return Outcome::NotABlock;
    }
    Outcome::Block { end: at, items }
}
