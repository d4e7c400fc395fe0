//! The final answer of a completion and how it is compared with the ground truth.
//!
//! Everything here matches like Python regular expressions would (Unicode
//! `\d` and `\s`, lazy `.*?` across lines, case-insensitive `<answer>` tags in which `ſ`
//! matches `s`), but each function is a single left-to-right scan: no backtracking, linear
//! time in the input however it is shaped.

use std::borrow::Cow;

use crate::numfmt::short_decimal;
use crate::pychar::{digit_value, is_space, lower as py_lower, strip as py_strip};

const IM_START: &str = "<|im_start|>";
const IM_END: &str = "<|im_end|>";
const THINK_END: &str = "</think>";
const TOOL_CALL: (&str, &str) = ("<tool_call>", "</tool_call>");
const TOOL_RESPONSE: (&str, &str) = ("<tool_response>", "</tool_response>");

/// `hay.find(tag)` for a tag that starts with `<`: hops between `<` bytes, which beats a
/// general substring search on the short texts completions usually are.
pub fn find_tag(hay: &str, tag: &str) -> Option<usize> {
    let bytes = hay.as_bytes();
    let mut pos = 0;
    while let Some(offset) = find_lt(&bytes[pos..]) {
        let at = pos + offset;
        if bytes[at..].starts_with(tag.as_bytes()) {
            return Some(at);
        }
        pos = at + 1;
    }
    None
}

/// The offset of the first `<` byte, eight bytes at a time: little set-up per call (tags
/// are close together in completions) and quick over long stretches without tags.
#[inline]
fn find_lt(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    const LTS: u64 = ONES * b'<' as u64;
    let mut chunks = bytes.chunks_exact(8);
    let mut base = 0;
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word) ^ LTS;
        // Non-zero exactly when some byte of `x` is zero, i.e. some byte is `<`.
        if x.wrapping_sub(ONES) & !x & HIGHS != 0 {
            return chunk.iter().position(|&b| b == b'<').map(|i| base + i);
        }
        base += 8;
    }
    let rest = chunks.remainder();
    rest.iter().position(|&b| b == b'<').map(|i| base + i)
}

/// Which markers the cleaning steps act on occur in a text, found in one pass over its
/// `<` characters, so that steps with nothing to do cost nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Markers {
    /// Python `text.count("<tool_call>")`.
    pub tool_call_opens: usize,
    /// Python `text.count("</tool_call>")`.
    pub tool_call_closes: usize,
    pub tool_response: bool,
    pub im_start: bool,
    pub im_end: bool,
    pub think_end: bool,
}

/// Takes a census of the markers in `text`.
pub fn markers(text: &str) -> Markers {
    let bytes = text.as_bytes();
    let mut found = Markers::default();
    let mut pos = 0;
    while let Some(offset) = find_lt(&bytes[pos..]) {
        let at = pos + offset;
        let rest = &bytes[at..];
        pos = at + 1;
        // Dispatch on the byte after '<' so that most '<' cost one comparison.
        match rest.get(1) {
            Some(b't') => {
                if rest.starts_with(TOOL_CALL.0.as_bytes()) {
                    found.tool_call_opens += 1;
                    pos = at + TOOL_CALL.0.len();
                } else if rest.starts_with(TOOL_RESPONSE.0.as_bytes()) {
                    found.tool_response = true;
                }
            }
            Some(b'/') => {
                if rest.starts_with(TOOL_CALL.1.as_bytes()) {
                    found.tool_call_closes += 1;
                    pos = at + TOOL_CALL.1.len();
                } else if rest.starts_with(THINK_END.as_bytes()) {
                    found.think_end = true;
                }
            }
            Some(b'|') => {
                if rest.starts_with(IM_START.as_bytes()) {
                    found.im_start = true;
                } else if rest.starts_with(IM_END.as_bytes()) {
                    found.im_end = true;
                }
            }
            _ => {}
        }
    }
    found
}

/// `hay.replace(tag, "")` for a tag that starts with `<`.
fn remove_tag<'a>(hay: &'a str, tag: &str) -> Cow<'a, str> {
    let Some(first) = find_tag(hay, tag) else {
        return Cow::Borrowed(hay);
    };
    let mut out = String::with_capacity(hay.len());
    out.push_str(&hay[..first]);
    let mut rest = &hay[first + tag.len()..];
    while let Some(pos) = find_tag(rest, tag) {
        out.push_str(&rest[..pos]);
        rest = &rest[pos + tag.len()..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// Removes chat-template role headers and end markers, keeps only what follows the first
/// `</think>`, and strips surrounding whitespace.
pub fn strip_answer(text: &str) -> Cow<'_, str> {
    strip_with(Cow::Borrowed(text), markers(text))
}

/// [`strip_answer`] for a text whose markers are known. Each step runs on the previous
/// step's output (a removal can join pieces into a new marker), as a chain of `re.sub`
/// calls would.
fn strip_with(text: Cow<'_, str>, found: Markers) -> Cow<'_, str> {
    let mut text = text;
    let mut found = found;
    if found.im_start {
        let removed = remove_role_headers(&text).into_owned();
        text = Cow::Owned(removed);
        found = markers(&text);
    }
    if found.im_end {
        let removed = remove_tag(&text, IM_END).into_owned();
        text = Cow::Owned(removed);
        found = markers(&text);
    }
    let start = if found.think_end {
        find_tag(&text, THINK_END).map_or(0, |pos| pos + THINK_END.len())
    } else {
        0
    };
    match text {
        Cow::Borrowed(t) => Cow::Borrowed(py_strip(&t[start..])),
        Cow::Owned(t) => {
            let kept = py_strip(&t[start..]);
            if kept.len() == t.len() {
                Cow::Owned(t)
            } else {
                Cow::Owned(kept.to_string())
            }
        }
    }
}

/// Each `<|im_start|>` is removed together with the rest of its line and the newline.
fn remove_role_headers(text: &str) -> Cow<'_, str> {
    if find_tag(text, IM_START).is_none() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = find_tag(rest, IM_START) {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + IM_START.len()..];
        rest = match after.find('\n') {
            Some(nl) => &after[nl + 1..],
            None => "",
        };
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// Removes every `open ... close` block, pairing each opener with the nearest closer after
/// it. An opener without a closer (and everything after it) is left alone.
fn remove_blocks<'a>(text: &'a str, (open, close): (&str, &str)) -> Cow<'a, str> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut removed = false;
    while let Some(pos) = find_tag(rest, open) {
        let body_start = pos + open.len();
        let Some(close_pos) = find_tag(&rest[body_start..], close) else {
            break;
        };
        out.push_str(&rest[..pos]);
        rest = &rest[body_start + close_pos + close.len()..];
        removed = true;
    }
    if !removed {
        return Cow::Borrowed(text);
    }
    out.push_str(rest);
    Cow::Owned(out)
}

fn clean_completion(text: &str, found: Markers) -> Cow<'_, str> {
    let mut current = Cow::Borrowed(text);
    let mut found = found;
    if found.tool_call_opens > 0 && found.tool_call_closes > 0 {
        let removed = match remove_blocks(&current, TOOL_CALL) {
            Cow::Owned(s) => Some(s),
            Cow::Borrowed(_) => None,
        };
        if let Some(s) = removed {
            current = Cow::Owned(s);
            found = markers(&current);
        }
    }
    if found.tool_response {
        let removed = match remove_blocks(&current, TOOL_RESPONSE) {
            Cow::Owned(s) => Some(s),
            Cow::Borrowed(_) => None,
        };
        if let Some(s) = removed {
            current = Cow::Owned(s);
            found = markers(&current);
        }
    }
    strip_with(current, found)
}

/// What the `<answer>` tags of a completion say about its format, and the answer itself.
#[derive(Debug, Clone, PartialEq)]
pub struct AnswerTags<'a> {
    /// At least one complete `<answer>...</answer>` pair.
    pub has_answer: bool,
    /// Exactly one pair and no stray opening or closing tag.
    pub exactly_one: bool,
    /// The answer content is not blank.
    pub nonempty: bool,
    /// Count of unbalanced or unpaired answer tags.
    pub malformed: usize,
    /// The last answer's content (stripped), or the whole cleaned text when there is none;
    /// see [`AnswerTags::content`].
    content: Content,
    /// The completion without tool blocks, chat markers and reasoning.
    pub clean: Cow<'a, str>,
    /// `<tool_call>` and `</tool_call>` counts in the raw completion.
    pub tool_call_tags: (usize, usize),
}

/// Where the answer content is: a span of the cleaned text, or its own text when stripping
/// chat markers changed it.
#[derive(Debug, Clone, PartialEq)]
enum Content {
    Span(usize, usize),
    Text(String),
}

impl AnswerTags<'_> {
    /// The last answer's content (stripped), or the whole cleaned text when there is none.
    pub fn content(&self) -> &str {
        match &self.content {
            Content::Span(start, end) => self.clean.get(*start..*end).unwrap_or(""),
            Content::Text(text) => text,
        }
    }
}

/// Finds `<answer>`/`</answer>` tags (case-insensitive as Python's `re.IGNORECASE` is) and
/// takes the content of the last complete pair as the answer.
pub fn answer_tags(text: &str) -> AnswerTags<'_> {
    let found = markers(text);
    let clean = clean_completion(text, found);
    let scan = scan_answer_tags(&clean);
    let (pairs, last) = (scan.pairs, scan.last);

    let content = match last {
        Some((start, end)) => {
            let inner = &clean[start..end];
            match strip_answer(inner) {
                // A borrowed result is a sub-slice of `inner`: keep it as a span.
                Cow::Borrowed(kept) => {
                    let from = start + (kept.as_ptr() as usize - inner.as_ptr() as usize);
                    Content::Span(from, from + kept.len())
                }
                Cow::Owned(text) => Content::Text(text),
            }
        }
        None => Content::Span(0, clean.len()),
    };
    let content_text = match &content {
        Content::Span(start, end) => &clean[*start..*end],
        Content::Text(text) => text.as_str(),
    };
    let nonempty = !py_strip(content_text).is_empty();
    let (open_n, close_n) = (scan.opens, scan.closes);
    AnswerTags {
        has_answer: pairs > 0,
        exactly_one: pairs == 1 && open_n == 1 && close_n == 1,
        nonempty,
        malformed: open_n.abs_diff(close_n)
            + open_n.saturating_sub(pairs)
            + close_n.saturating_sub(pairs),
        content,
        clean,
        tool_call_tags: (found.tool_call_opens, found.tool_call_closes),
    }
}

/// The `<answer>` tags of a text: how many of each, and the complete pairs.
struct AnswerScan {
    opens: usize,
    closes: usize,
    pairs: usize,
    /// Byte span of the last pair's content.
    last: Option<(usize, usize)>,
}

/// Counts `<answer>` and `</answer>` tags and pairs them like the lazy regex
/// `<answer>(.*?)</answer>`: an opener waits for the first closer after it, openers seen
/// while one is waiting are inside its match, and closers with no waiting opener pair with
/// nothing. One pass, no allocation.
fn scan_answer_tags(text: &str) -> AnswerScan {
    let bytes = text.as_bytes();
    let mut scan = AnswerScan {
        opens: 0,
        closes: 0,
        pairs: 0,
        last: None,
    };
    let mut waiting: Option<usize> = None;
    let mut pos = 0;
    while let Some(offset) = find_lt(&bytes[pos..]) {
        let start = pos + offset;
        let closing = bytes.get(start + 1) == Some(&b'/');
        let name_start = if closing { start + 2 } else { start + 1 };
        let Some(end) = match_tag_name(bytes, name_start) else {
            pos = start + 1;
            continue;
        };
        if closing {
            scan.closes += 1;
            if let Some(content_start) = waiting.take() {
                scan.pairs += 1;
                scan.last = Some((content_start, start));
            }
        } else {
            scan.opens += 1;
            waiting.get_or_insert(end);
        }
        pos = end;
    }
    scan
}

/// Matches `answer>` case-insensitively at `at`, returning the end of the `>`. Under
/// Python's Unicode case folding `ſ` (U+017F, long s) also matches `s`.
fn match_tag_name(bytes: &[u8], at: usize) -> Option<usize> {
    let mut i = at;
    for expected in *b"answer" {
        let b = *bytes.get(i)?;
        if b.to_ascii_lowercase() == expected {
            i += 1;
        } else if expected == b's' && b == 0xC5 && bytes.get(i + 1) == Some(&0xBF) {
            i += 2;
        } else {
            return None;
        }
    }
    (bytes.get(i) == Some(&b'>')).then_some(i + 1)
}

/// Every number in the text, as Python's `float()` reads matches of the pattern
/// `[-+]?\d+(?:,\d{3})*(?:\.\d+)?` (thousands separators dropped, Unicode digits allowed).
pub fn numeric_candidates(text: &str) -> Vec<f64> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some((c, next)) = char_at(text, pos) {
        // Only a sign or a digit can start a number.
        let may_start = match c {
            '-' | '+' => true,
            _ if c.is_ascii() => c.is_ascii_digit(),
            _ => digit_value(c).is_some(),
        };
        if !may_start {
            pos = next;
            continue;
        }
        match scan_number(text, pos) {
            Some((end, plain)) => {
                let matched = &text[pos..end];
                let value = if plain {
                    // A plain match is ASCII.
                    match short_decimal(matched.bytes().map(char::from)) {
                        Some(value) => Ok(value),
                        None => matched.parse::<f64>(),
                    }
                } else {
                    ascii_number(matched).parse::<f64>()
                };
                if let Ok(value) = value {
                    out.push(value);
                }
                pos = end;
            }
            None => pos = next,
        }
    }
    out
}

/// The char at byte offset `pos` (a char boundary) and the offset after it.
#[inline]
fn char_at(text: &str, pos: usize) -> Option<(char, usize)> {
    let byte = *text.as_bytes().get(pos)?;
    if byte < 0x80 {
        return Some((char::from(byte), pos + 1));
    }
    let c = text.get(pos..)?.chars().next()?;
    Some((c, pos + c.len_utf8()))
}

/// The end of a run of digits starting at `pos`, and whether they were all ASCII.
fn digit_run(text: &str, mut pos: usize) -> (usize, bool) {
    let mut ascii = true;
    while let Some((c, next)) = char_at(text, pos) {
        if c.is_ascii_digit() {
            pos = next;
        } else if !c.is_ascii() && digit_value(c).is_some() {
            ascii = false;
            pos = next;
        } else {
            break;
        }
    }
    (pos, ascii)
}

/// Matches the number pattern at byte offset `start`: the end offset, and whether
/// the match is already what `float()` reads (ASCII digits, no thousands separators).
fn scan_number(text: &str, start: usize) -> Option<(usize, bool)> {
    let mut pos = start;
    if let Some(('-' | '+', next)) = char_at(text, pos) {
        pos = next;
    }
    let (end, mut plain) = digit_run(text, pos);
    if end == pos {
        return None;
    }
    pos = end;
    // Thousands groups: a comma and exactly three digits, as many times as they follow.
    while let Some((',', after_comma)) = char_at(text, pos) {
        let mut cursor = after_comma;
        let mut complete = true;
        for _ in 0..3 {
            match char_at(text, cursor) {
                Some((c, next)) if digit_value(c).is_some() => cursor = next,
                _ => {
                    complete = false;
                    break;
                }
            }
        }
        if !complete {
            break;
        }
        plain = false;
        pos = cursor;
    }
    if let Some(('.', after_dot)) = char_at(text, pos) {
        let (end, ascii) = digit_run(text, after_dot);
        if end > after_dot {
            plain &= ascii;
            pos = end;
        }
    }
    Some((pos, plain))
}

/// A matched number with commas dropped and Unicode digits written as ASCII.
fn ascii_number(matched: &str) -> String {
    matched
        .chars()
        .filter(|&c| c != ',')
        .map(|c| match digit_value(c) {
            Some(d) => char::from_digit(d, 10).unwrap_or(c),
            None => c,
        })
        .collect()
}

/// Answer text normalisation: lower case, stripped, commas removed, whitespace runs
/// collapsed to one space.
pub fn normalize_text(text: &str) -> String {
    // ASCII text is lower-cased on the way (that changes no character's class); other text
    // is lower-cased first, as Python's `str.lower()` does it.
    let lowered = if text.is_ascii() {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(py_lower(text))
    };
    let stripped = py_strip(&lowered);
    let mut out = String::with_capacity(stripped.len());
    let mut in_space = false;
    for c in stripped.chars() {
        if c == ',' {
            continue;
        }
        if is_space(c) {
            if !in_space {
                out.push(' ');
                in_space = true;
            }
        } else {
            out.push(c.to_ascii_lowercase());
            in_space = false;
        }
    }
    out
}

/// A plain decimal number (`[-+]?\d+(?:\.\d+)?` after stripping and dropping commas), the
/// way ground-truth items and tool results are read as numbers; anything else is `None`.
pub fn parse_plain_number(text: &str) -> Option<f64> {
    let stripped = py_strip(text);
    // Commas dropped and Unicode digits written as ASCII; most numbers need neither.
    let ascii: Cow<'_, str> = if stripped.bytes().all(|b| b.is_ascii() && b != b',') {
        Cow::Borrowed(stripped)
    } else {
        Cow::Owned(
            stripped
                .chars()
                .filter(|&c| c != ',')
                .map(|c| {
                    digit_value(c)
                        .and_then(|d| char::from_digit(d, 10))
                        .unwrap_or(c)
                })
                .collect(),
        )
    };
    if !is_plain_decimal(ascii.as_bytes()) {
        return None;
    }
    short_decimal(ascii.bytes().map(char::from)).or_else(|| ascii.parse::<f64>().ok())
}

/// Whether the text is `[-+]?[0-9]+(?:\.[0-9]+)?`.
fn is_plain_decimal(text: &[u8]) -> bool {
    let digits = match text.first() {
        Some(b'-' | b'+') => &text[1..],
        _ => text,
    };
    let (int_part, fraction) = match digits.iter().position(|&b| b == b'.') {
        Some(dot) => (&digits[..dot], Some(&digits[dot + 1..])),
        None => (digits, None),
    };
    let all_digits = |part: &[u8]| !part.is_empty() && part.iter().all(u8::is_ascii_digit);
    all_digits(int_part) && fraction.is_none_or(all_digits)
}

/// Numeric answers match when equal within 1e-6 absolute or 1e-6 relative to `expected`.
/// NaN is never close to anything, nor infinity to itself.
pub fn num_close(got: f64, expected: f64) -> bool {
    let relative = expected.abs() * 1e-6;
    // Python's max(1e-6, x) keeps 1e-6 unless x compares greater (a NaN never does).
    let tolerance = if relative > 1e-6 { relative } else { 1e-6 };
    (got - expected).abs() <= tolerance
}

/// How the numbers in the answer line up, in order, with numeric ground truth.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct OrderedNumbers {
    pub ordered_match_count: usize,
    pub ordered_cov: f64,
    pub strict_exact: bool,
    pub order_ok: bool,
    pub extra: usize,
    pub missing: usize,
}

/// Position-by-position comparison of predicted and expected numbers.
pub fn ordered_numbers(predicted: &[f64], expected: &[f64]) -> OrderedNumbers {
    if expected.is_empty() {
        return OrderedNumbers {
            extra: predicted.len(),
            ..OrderedNumbers::default()
        };
    }
    let matched = expected
        .iter()
        .zip(predicted)
        .filter(|(&want, &got)| num_close(got, want))
        .count();
    OrderedNumbers {
        ordered_match_count: matched,
        ordered_cov: matched as f64 / expected.len() as f64,
        strict_exact: predicted.len() == expected.len() && matched == expected.len(),
        order_ok: matched == predicted.len().min(expected.len())
            && predicted.len() >= expected.len(),
        extra: predicted.len().saturating_sub(expected.len()),
        missing: expected.len().saturating_sub(predicted.len()),
    }
}

/// One ground-truth item as the matching reads it: its normalised text and, when it is a
/// plain decimal, its number. Prepared once per task.
#[derive(Debug, Clone, PartialEq)]
pub struct GroundTruthItem {
    pub normalized: String,
    pub number: Option<f64>,
}

impl GroundTruthItem {
    pub fn new(item: &str) -> Self {
        GroundTruthItem {
            normalized: normalize_text(item),
            number: parse_plain_number(item),
        }
    }
}

/// How many ground-truth items the answer contains, in any order. Numeric items each take
/// one unused close number from `predicted`; other items must appear as a substring of the
/// normalised answer. Items that normalise to nothing are skipped.
pub fn count_ground_truth_matches(
    predicted: &[f64],
    normalized_answer: &str,
    items: &[GroundTruthItem],
) -> usize {
    let mut used = vec![false; predicted.len()];
    let mut matched = 0;
    for item in items {
        if item.normalized.is_empty() {
            continue;
        }
        let found = match item.number {
            Some(expected) => {
                let hit = predicted
                    .iter()
                    .enumerate()
                    .position(|(i, &got)| !used[i] && num_close(got, expected));
                if let Some(i) = hit {
                    used[i] = true;
                }
                hit.is_some()
            }
            None => normalized_answer.contains(item.normalized.as_str()),
        };
        if found {
            matched += 1;
        }
    }
    matched
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The completion without tool-call and tool-response blocks, chat markers and reasoning.
    fn remove_tool_blocks(text: &str) -> Cow<'_, str> {
        clean_completion(text, markers(text))
    }

    #[test]
    fn finding_the_next_tag_start_matches_a_byte_search() {
        let texts = [
            "",
            "<",
            "abc",
            "abcdefg<",
            "abcdefgh<",
            "abcdefghijklmnop<q",
            "计算<answer>",
            "\u{3c}x",
            "\u{bc}\u{13c}<",
            "no tags at all in this longer line of text....",
        ];
        for text in texts {
            for from in 0..=text.len() {
                let bytes = &text.as_bytes()[from..];
                assert_eq!(
                    find_lt(bytes),
                    bytes.iter().position(|&b| b == b'<'),
                    "{text:?} {from}"
                );
            }
        }
    }

    #[test]
    fn strip_answer_drops_chat_markers_and_reasoning() {
        assert_eq!(strip_answer("<|im_start|>assistant\n  hi <|im_end|>"), "hi");
        assert_eq!(strip_answer("plan </think> 42 </think> x"), "42 </think> x");
        // Removing one marker can join a new one, which the next step sees.
        assert_eq!(strip_answer("a</th<|im_end|>ink>b"), "b");
        assert_eq!(strip_answer("<|im_start|>no newline"), "");
        assert_eq!(strip_answer("\u{3000} x \u{85}"), "x");
    }

    #[test]
    fn tool_blocks_pair_each_opener_with_the_nearest_closer() {
        let text = "a<tool_call>1</tool_call>b<tool_call>2<tool_call>3</tool_call>c";
        assert_eq!(remove_tool_blocks(text), "abc");
        assert_eq!(
            remove_tool_blocks("x<tool_call>unclosed"),
            "x<tool_call>unclosed"
        );
        assert_eq!(
            remove_tool_blocks("<tool_call>{}</tool_call><tool_response>r</tool_response> ok"),
            "ok"
        );
        // Removing a call can form a response block out of the pieces around it.
        let joined = "<tool_<tool_call>x</tool_call>response>y</tool_response>z";
        assert_eq!(remove_tool_blocks(joined), "z");
    }

    #[test]
    fn answer_tags_follow_the_lazy_case_insensitive_regex() {
        let tags = answer_tags("<answer>1</answer> <ANSWER> 2 </Answer>");
        assert!(tags.has_answer && !tags.exactly_one);
        assert_eq!(tags.content(), "2");
        assert_eq!(tags.malformed, 0);

        let tags = answer_tags("<answer>1<answer>2</answer></answer>");
        // One pair (the inner opener is inside it) and a stray closer.
        assert_eq!(tags.content(), "1<answer>2");
        assert_eq!(tags.malformed, 2); // |2-2| + (2-1) + (2-1)

        let tags = answer_tags("<anſwer>ok</answer>"); // long s folds to s
        assert!(tags.exactly_one);
        assert_eq!(tags.content(), "ok");

        let tags = answer_tags("no tags <answer>");
        assert!(!tags.has_answer);
        assert_eq!(tags.content(), "no tags <answer>");
        assert_eq!(tags.malformed, 1 + 1);

        let tags = answer_tags("<tool_call>{}</tool_call><answer>\n</answer>");
        assert!(tags.has_answer && !tags.nonempty);
        assert_eq!(tags.tool_call_tags, (1, 1));
    }

    #[test]
    fn numbers_are_read_like_python_float() {
        assert_eq!(numeric_candidates("a -1,234.5 b +7"), vec![-1234.5, 7.0]);
        assert_eq!(numeric_candidates("1,2345"), vec![1234.0, 5.0]);
        assert_eq!(numeric_candidates("x1.y 3."), vec![1.0, 3.0]);
        assert_eq!(numeric_candidates("٣.٥ and ５"), vec![3.5, 5.0]);
        assert_eq!(numeric_candidates("--5"), vec![-5.0]);
        assert!(numeric_candidates("no digits, - +").is_empty());
        assert_eq!(numeric_candidates(&"9".repeat(400)), vec![f64::INFINITY]);
    }

    #[test]
    fn plain_numbers_and_normalisation() {
        assert_eq!(parse_plain_number(" -1,000.50 "), Some(-1000.5));
        assert_eq!(parse_plain_number("1e5"), None);
        assert_eq!(parse_plain_number("1."), None);
        assert_eq!(parse_plain_number(".5"), None);
        assert_eq!(parse_plain_number("+٣"), Some(3.0));
        assert_eq!(normalize_text("  Hello,\t World  "), "hello world");
        assert_eq!(normalize_text(", A"), " a");
    }

    #[test]
    fn closeness_is_absolute_or_relative() {
        assert!(num_close(1.0000005, 1.0));
        assert!(!num_close(1.00001, 1.0));
        assert!(num_close(1e9 + 100.0, 1e9));
        assert!(!num_close(f64::NAN, 1.0));
        assert!(!num_close(f64::INFINITY, f64::INFINITY));
    }

    #[test]
    fn ordered_numbers_and_matches() {
        let m = ordered_numbers(&[2.0, 1.0, 3.0], &[1.0, 2.0]);
        assert_eq!(m.ordered_match_count, 0);
        assert!(!m.strict_exact && !m.order_ok);
        assert_eq!((m.extra, m.missing), (1, 0));
        let m = ordered_numbers(&[1.0], &[1.0, 2.0]);
        assert_eq!(m.ordered_cov, 0.5);
        assert!(!m.order_ok && m.missing == 1);

        let items: Vec<GroundTruthItem> = ["2", "1", "Paris", ""]
            .iter()
            .map(|s| GroundTruthItem::new(s))
            .collect();
        let answer = normalize_text("1, 2 in paris");
        assert_eq!(count_ground_truth_matches(&[1.0, 2.0], &answer, &items), 3);
        // Each predicted number is used once.
        assert_eq!(count_ground_truth_matches(&[2.0], "", &items[..2]), 1);
    }
}
