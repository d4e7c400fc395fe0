//! What the reward measures in a trajectory besides the answer itself: the task's
//! arithmetic, the tool calls made for it, and repetition.

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::OnceLock;

use std::borrow::Cow;

use crate::answer::{find_tag, num_close};
use crate::expr;
use crate::pyjson::Value;
use crate::reward::pychar::{
    is_space, is_word, lower as py_lower, lower_char, strip as py_strip, token_class, TokenClass,
};
use crate::reward::pyvalue::{dumps_sorted, plain_number_of, py_equal, py_str, same_json};
use crate::reward::record::{ChatMessage, ToolEvent};

/// Tool names that count as arithmetic calls; the first is the preferred one.
pub const MATH_TOOLS: [&str; 3] = ["calculate_math", "calculator", "python_math"];
pub const PREFERRED_MATH_TOOL: &str = "calculate_math";

/// Most expressions taken from a task (the seed's limit for call counts and coverage).
const MAX_TASK_EXPRS: i64 = 16;

// ---------------------------------------------------------------- task text

/// The task as the seed reads it from chat messages: the user turns joined by newlines, or
/// system and user turns when the user turns are blank. Contents that are not strings are
/// printed with Python's `str()`; entries that are not dicts are ignored.
pub fn task_text_from_messages(messages: &[ChatMessage]) -> String {
    let user = join_contents(messages, &["user"]);
    if !py_strip(&user).is_empty() {
        return user;
    }
    join_contents(messages, &["system", "user"])
}

fn join_contents(messages: &[ChatMessage], roles: &[&str]) -> String {
    let mut out = String::new();
    let mut first = true;
    for message in messages {
        if !message.role.as_deref().is_some_and(|r| roles.contains(&r)) {
            continue;
        }
        if !first {
            out.push('\n');
        }
        first = false;
        if let Some(content) = &message.content {
            out.push_str(&py_str(content));
        }
    }
    out
}

const TOOLS_OPEN: &str = "<|tools|>";
const TOOLS_CLOSE: &str = "<|/tools|>";
const IM_START: &str = "<|im_start|>";
const IM_END: &str = "<|im_end|>";

/// The task as the seed reads it from a rendered chat prompt: tool lists removed, then the
/// user turns (or system and user turns) of the chat template, else the whole text.
pub fn task_text_from_prompt(prompt: &str) -> String {
    let raw = remove_tool_lists(prompt);
    let turns = chat_turns(&raw);
    if !turns.is_empty() {
        let pick = |roles: &[&str]| -> Vec<&str> {
            turns
                .iter()
                .filter(|(role, _)| roles.contains(role))
                .map(|(_, content)| py_strip(content))
                .filter(|content| !content.is_empty())
                .collect()
        };
        let user = pick(&["user"]);
        if !user.is_empty() {
            return user.join("\n");
        }
        let both = pick(&["system", "user"]);
        if !both.is_empty() {
            return both.join("\n");
        }
    }
    py_strip(&raw).to_string()
}

fn remove_tool_lists(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = find_tag(rest, TOOLS_OPEN) {
        let body = pos + TOOLS_OPEN.len();
        let Some(close) = find_tag(&rest[body..], TOOLS_CLOSE) else {
            break;
        };
        out.push_str(&rest[..pos]);
        rest = &rest[body + close + TOOLS_CLOSE.len()..];
    }
    out.push_str(rest);
    out
}

/// `(role, content)` of each `<|im_start|>ROLE\n...<|im_end|>` turn with a known role,
/// scanning like the seed's lazy `findall`.
fn chat_turns(text: &str) -> Vec<(&str, &str)> {
    const ROLES: [&str; 4] = ["system", "user", "assistant", "tool"];
    let mut turns = Vec::new();
    let mut pos = 0;
    while let Some(offset) = find_tag(&text[pos..], IM_START) {
        let header = pos + offset + IM_START.len();
        let role = ROLES.iter().find(|role| {
            text[header..].starts_with(**role)
                && text.as_bytes().get(header + role.len()) == Some(&b'\n')
        });
        let Some(role) = role else {
            pos = pos + offset + 1;
            continue;
        };
        let body = header + role.len() + 1;
        let Some(end) = find_tag(&text[body..], IM_END) else {
            break;
        };
        turns.push((*role, &text[body..body + end]));
        pos = body + end + IM_END.len();
    }
    turns
}

// ---------------------------------------------------------------- task arithmetic

/// The arithmetic a task asks for: what the tool calls are compared against.
#[derive(Debug, Clone, Default)]
pub struct TaskMath {
    /// Expressions found in the task, in order (at most 16).
    pub exprs: Vec<String>,
    /// Their canonical forms (what a tool call's expression must equal).
    pub canonical: Vec<String>,
    /// Their values, evaluated on first use: most rows compare tool results with numeric
    /// ground truth instead (see [`tool_value_metrics`]).
    values: OnceLock<Vec<f64>>,
}

impl TaskMath {
    pub fn from_task(task: &str) -> Self {
        let exprs = expr::extract_expressions(task, MAX_TASK_EXPRS);
        let canonical = exprs.iter().map(|e| expr::canonicalize(e)).collect();
        TaskMath {
            exprs,
            canonical,
            values: OnceLock::new(),
        }
    }

    /// A task is a math task when it contains at least one arithmetic expression.
    pub fn is_math(&self) -> bool {
        !self.exprs.is_empty()
    }

    /// The expressions' values.
    pub fn values(&self) -> &[f64] {
        self.values.get_or_init(|| {
            self.exprs
                .iter()
                .filter_map(|e| expr::safe_eval(e).ok())
                .collect()
        })
    }

    /// How many values there are, without evaluating: extraction keeps only expressions
    /// that evaluate, so every expression has one (as in the seed, which re-evaluates the
    /// expressions it extracted).
    pub fn value_count(&self) -> usize {
        self.exprs.len()
    }
}

// ---------------------------------------------------------------- tool events

impl ToolEvent {
    /// The name when it is a string.
    pub fn name_str(&self) -> Option<&str> {
        self.name.as_ref().and_then(Value::as_str)
    }

    /// A call to one of the math tools (by name).
    pub fn is_math(&self) -> bool {
        self.name_str().is_some_and(|n| MATH_TOOLS.contains(&n))
    }

    /// A call to the preferred math tool.
    pub fn is_preferred_math(&self) -> bool {
        self.name_str() == Some(PREFERRED_MATH_TOOL)
    }

    /// The expression argument: `(args or {}).get("expression", args.get("query", ""))`.
    pub fn expression(&self) -> Option<&Value> {
        let args = self.args.as_ref().filter(|a| a.is_truthy())?.as_object()?;
        args.get("expression").or_else(|| args.get("query"))
    }
}

/// Whether any successful tool result (any scalar inside it) appears in the answer, as
/// text or as a number close to one of the answer's numbers.
pub fn answer_refs_tool_result(answer: &str, answer_numbers: &[f64], events: &[ToolEvent]) -> bool {
    let mut lowered: Option<String> = None;
    let mut float_shaped: Option<bool> = None;
    for event in events {
        if !event.ok {
            continue;
        }
        let Some(result) = &event.result else {
            continue;
        };
        let mut found = false;
        for_each_scalar(result, |scalar| {
            // The number check is cheaper than printing the scalar, and either one counts.
            let close = plain_number_of(scalar)
                .is_some_and(|target| answer_numbers.iter().any(|&n| num_close(n, target)));
            if close {
                found = true;
                return true;
            }
            let lowered = lowered.get_or_insert_with(|| py_lower(answer));
            if let Value::Float(x) = scalar {
                // Printing a float is costly; an answer without the shape of any finite
                // float's text cannot contain it.
                let shaped = *float_shaped.get_or_insert_with(|| has_float_shape(lowered));
                if x.is_finite() && !shaped {
                    return false;
                }
            }
            let text = py_str(scalar);
            let text = py_strip(&text);
            if text.is_empty() {
                return false;
            }
            found = lowered.contains(lower_cow(text).as_ref());
            found
        });
        if found {
            return true;
        }
    }
    false
}

/// Whether `text` could contain Python's `repr` of a finite float, which is either
/// `DIGITS.DIGITS` (ASCII digits, possibly signed) or has an exponent `e+DIGITS` /
/// `e-DIGITS`.
fn has_float_shape(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.windows(3).any(|w| {
        (w[0].is_ascii_digit() && w[1] == b'.' && w[2].is_ascii_digit())
            || (w[0] == b'e' && matches!(w[1], b'+' | b'-'))
    })
}

/// `py_lower` without copying text that is already lower-case ASCII.
fn lower_cow(text: &str) -> Cow<'_, str> {
    if text
        .bytes()
        .all(|b| b.is_ascii() && !b.is_ascii_uppercase())
    {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(py_lower(text))
    }
}

/// Visits the non-null scalars inside `value` (dict values and list items, depth first, in
/// order) until `visit` returns true. Iterative, so any nesting depth is safe.
fn for_each_scalar(value: &Value, mut visit: impl FnMut(&Value) -> bool) {
    let mut stack: Vec<&Value> = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(items) => stack.extend(items.iter().rev()),
            Value::Object(obj) => stack.extend(obj.iter().rev().map(|(_, item)| item)),
            Value::Null => {}
            scalar => {
                if visit(scalar) {
                    return;
                }
            }
        }
    }
}

/// 0.2 per tool call that repeats an earlier one (same name and arguments, as the seed's
/// `(name, json.dumps(args, sort_keys=True))` keys), at most 0.8.
pub fn repeated_call_penalty(events: &[ToolEvent]) -> f64 {
    let n = events.len();
    if n == 0 {
        return 0.0;
    }
    let distinct = if n <= PAIRWISE_LIMIT {
        (0..n)
            .filter(|&i| !(0..i).any(|j| same_call(&events[j], &events[i])))
            .count()
    } else {
        let keys: HashSet<(String, String)> = events
            .iter()
            .enumerate()
            .map(|(i, event)| call_key(i, event))
            .collect();
        keys.len()
    };
    let repeats = (n - distinct) as f64;
    py_min(0.2 * repeats, 0.8)
}

/// Up to this many events, repeats are found by comparing pairs (no text is built).
const PAIRWISE_LIMIT: usize = 64;

fn py_min(x: f64, bound: f64) -> f64 {
    if bound < x {
        bound
    } else {
        x
    }
}

fn same_call(a: &ToolEvent, b: &ToolEvent) -> bool {
    // `e.get("name", "")`: a missing name reads as the empty string.
    let names_equal = match (a.name.as_ref(), b.name.as_ref()) {
        (None, None) => true,
        (Some(x), None) | (None, Some(x)) => x.as_str() == Some(""),
        (Some(x), Some(y)) => py_equal(x, y),
    };
    // `e.get("args", {})`: missing arguments read as an empty dict.
    let args_equal = match (a.args.as_ref(), b.args.as_ref()) {
        (None, None) => true,
        (Some(x), None) | (None, Some(x)) => x.as_object().is_some_and(|o| o.is_empty()),
        (Some(x), Some(y)) => same_json(x, y),
    };
    names_equal && args_equal
}

/// A hashable form of an event's `(name, sorted args text)` for long event lists, equal
/// exactly when [`same_call`] holds (a NaN name, never equal to anything, is made unique).
fn call_key(index: usize, event: &ToolEvent) -> (String, String) {
    let name = match event.name.as_ref() {
        None => "s:".to_string(),
        Some(Value::Str(s)) => format!("s:{s}"),
        Some(Value::Bool(b)) => format!("n:{}", i64::from(*b)),
        Some(Value::Int(i)) => format!("n:{i}"),
        Some(Value::BigInt(text)) => format!("n:{text}"),
        Some(Value::Float(x)) if x.is_nan() => format!("nan:{index}"),
        Some(Value::Float(x)) if x.is_finite() && x.fract() == 0.0 => format!("n:{x:.0}"),
        Some(other) => format!("v:{}", dumps_sorted(other)),
    };
    let args = event
        .args
        .as_ref()
        .map_or_else(|| "{}".to_string(), dumps_sorted);
    (name, args)
}

/// The number a successful math call produced: its `value`/`result` field when that is a
/// plain number, else the value of its expression argument.
pub fn tool_result_number(event: &ToolEvent) -> Option<f64> {
    if let Some(Value::Object(result)) = &event.result {
        for key in ["value", "result"] {
            if let Some(x) = result.get(key).and_then(plain_number_of) {
                return Some(x);
            }
        }
    }
    let expression = event.expression().filter(|v| v.is_truthy())?;
    expr::safe_eval(&py_str(expression)).ok()
}

/// How the math tool calls' results line up with the values the task needs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ValueMetrics {
    pub order_match_count: usize,
    pub order_cov: f64,
    pub set_cov: f64,
    pub exact: bool,
    pub over_calls: usize,
    pub under_calls: usize,
}

/// Compares the results of math calls with the expected values: the numeric ground truth
/// when it has one value per task expression, else the expressions' own values.
pub fn tool_value_metrics(
    math: &TaskMath,
    gt_numbers: &[f64],
    events: &[ToolEvent],
) -> ValueMetrics {
    let expected: &[f64] = if !gt_numbers.is_empty() && gt_numbers.len() == math.value_count() {
        gt_numbers
    } else {
        math.values()
    };
    let mut calls: usize = 0;
    let mut got: Vec<f64> = Vec::new();
    for event in events.iter().filter(|e| e.is_math()) {
        calls += 1;
        if event.ok {
            got.extend(tool_result_number(event));
        }
    }
    let order_match_count = ordered_matches(expected, &got, |g, e| num_close(*g, *e));
    let set_match = set_matches(expected, &got, |g, e| num_close(*g, *e));
    let n = expected.len();
    ValueMetrics {
        order_match_count,
        order_cov: ratio(order_match_count, n),
        set_cov: ratio(set_match, n),
        exact: n > 0 && got.len() == n && order_match_count == n,
        over_calls: if n > 0 {
            calls.saturating_sub(n)
        } else {
            calls
        },
        under_calls: n.saturating_sub(calls),
    }
}

/// How the math tool calls' expressions line up with the task's expressions.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ExprMetrics {
    pub order_match_count: usize,
    pub order_cov: f64,
    pub set_cov: f64,
    pub exact: bool,
}

/// Compares the canonical expressions of all math calls (failed ones too) with the task's.
pub fn tool_expr_metrics(math: &TaskMath, events: &[ToolEvent]) -> ExprMetrics {
    let called: Vec<Cow<'_, str>> = events
        .iter()
        .filter(|e| e.is_math())
        .filter_map(|e| e.expression().filter(|v| v.is_truthy()))
        .map(|v| canonical_expression(py_str(v)))
        .filter(|c| !c.is_empty())
        .collect();
    let expected = &math.canonical;
    let order_match_count = ordered_matches(expected, &called, |g, e| g.as_ref() == e.as_str());
    let set_match = set_matches(expected, &called, |g, e| g.as_ref() == e.as_str());
    let n = expected.len();
    ExprMetrics {
        order_match_count,
        order_cov: ratio(order_match_count, n),
        set_cov: ratio(set_match, n),
        exact: n > 0 && called.len() == n && order_match_count == n,
    }
}

/// The seed's canonical expression text; text that canonicalisation would not change (ASCII
/// without whitespace or `^`) is kept as it is.
fn canonical_expression(text: Cow<'_, str>) -> Cow<'_, str> {
    let unchanged = text
        .bytes()
        .all(|b| b.is_ascii() && b != b'^' && !is_space(char::from(b)));
    if unchanged {
        text
    } else {
        Cow::Owned(expr::canonicalize(&text))
    }
}

/// Positions where `got[i]` matches `expected[i]`.
fn ordered_matches<E, G>(expected: &[E], got: &[G], same: impl Fn(&G, &E) -> bool) -> usize {
    expected.iter().zip(got).filter(|(e, g)| same(g, e)).count()
}

/// Expected items each matched greedily to the first unused matching `got` item.
fn set_matches<E, G>(expected: &[E], got: &[G], same: impl Fn(&G, &E) -> bool) -> usize {
    if got.len() <= 64 {
        // The usual handful of calls: the used items fit in one word.
        let mut used = 0u64;
        let mut count = 0;
        for e in expected {
            if let Some(j) = (0..got.len()).find(|&j| used & (1 << j) == 0 && same(&got[j], e)) {
                used |= 1 << j;
                count += 1;
            }
        }
        return count;
    }
    let mut used = vec![false; got.len()];
    let mut count = 0;
    for e in expected {
        if let Some(j) = (0..got.len()).find(|&j| !used[j] && same(&got[j], e)) {
            used[j] = true;
            count += 1;
        }
    }
    count
}

/// `part / whole`, or 0 when there is nothing to cover.
fn ratio(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

// ---------------------------------------------------------------- repetition

/// Penalty for repetitive text: the share of repeated word trigrams above 25%, doubled,
/// at most 0.8; texts under 16 tokens are never penalised. Tokens are Python's
/// `\w+|[^\w\s]` on the lower-cased text.
pub fn repetition_penalty(text: &str) -> f64 {
    if !has_tokens(text, 16) {
        return 0.0;
    }
    let lowered = py_lower(text);
    let tokens = tokens_of(&lowered);
    if tokens.len() < 16 {
        return 0.0;
    }
    let distinct = if tokens.len() <= SORT_LIMIT {
        distinct_trigrams_sorted(&tokens)
    } else {
        distinct_trigrams_hashed(&tokens)
    };
    let total = tokens.len() - 2;
    let repeat_rate = 1.0 - distinct as f64 / total as f64;
    let excess = repeat_rate - 0.25;
    let excess = if excess > 0.0 { excess } else { 0.0 };
    let penalty = excess * 2.0;
    if penalty < 0.8 {
        penalty
    } else {
        0.8
    }
}

/// Up to this many tokens, trigrams are counted by sorting (cheaper than hashing for the
/// short answers most completions have); beyond it, by hashing (linear time).
const SORT_LIMIT: usize = 2048;

/// Number of distinct token trigrams, by sorting: tokens get ids from their sorted order,
/// then the packed id triples are sorted and counted. Tokens of up to 7 bytes (nearly all
/// of them) sort by a packed integer key; longer ones sort as text after them.
fn distinct_trigrams_sorted(tokens: &[&str]) -> usize {
    let mut keyed: Vec<(u64, u32)> = tokens
        .iter()
        .enumerate()
        .map(|(i, token)| (short_token_key(token), i as u32))
        .collect();
    keyed.sort_unstable();
    let long_from = keyed.partition_point(|&(key, _)| key != LONG_TOKEN);
    keyed[long_from..].sort_unstable_by(|a, b| tokens[a.1 as usize].cmp(tokens[b.1 as usize]));
    let mut ids = vec![0u64; tokens.len()];
    let mut next = 0u64;
    for pair in keyed.windows(2) {
        let ((key_a, a), (key_b, b)) = (pair[0], pair[1]);
        let differ = if key_b == LONG_TOKEN {
            key_a != LONG_TOKEN || tokens[a as usize] != tokens[b as usize]
        } else {
            key_a != key_b
        };
        if differ {
            next += 1;
        }
        ids[b as usize] = next;
    }
    // Ids are below 2^11 here, so a triple packs into one integer.
    let mut packed: Vec<u64> = ids
        .windows(3)
        .map(|w| (w[0] << 42) | (w[1] << 21) | w[2])
        .collect();
    packed.sort_unstable();
    packed.dedup();
    packed.len()
}

/// The key of tokens longer than 7 bytes (no short token's key: their low byte is <= 7).
const LONG_TOKEN: u64 = u64::MAX;

/// A token of up to 7 bytes as one integer, equal for equal tokens only: its bytes from
/// the top, then its length in the low byte.
fn short_token_key(token: &str) -> u64 {
    let bytes = token.as_bytes();
    if bytes.len() > 7 {
        return LONG_TOKEN;
    }
    let mut key = 0u64;
    for (k, &b) in bytes.iter().enumerate() {
        key |= u64::from(b) << (56 - 8 * k);
    }
    key | bytes.len() as u64
}

/// Number of distinct token trigrams, by hashing token ids.
fn distinct_trigrams_hashed(tokens: &[&str]) -> usize {
    let mut ids: HashMap<&str, u32, FastHash> =
        HashMap::with_capacity_and_hasher(tokens.len().min(1 << 16), FastHash::default());
    let numbered: Vec<u32> = tokens
        .iter()
        .map(|&token| {
            let next = ids.len() as u32;
            *ids.entry(token).or_insert(next)
        })
        .collect();
    let trigrams: HashSet<(u32, u32, u32), FastHash> =
        numbered.windows(3).map(|w| (w[0], w[1], w[2])).collect();
    trigrams.len()
}

/// The token class of each ASCII character (lower-casing keeps it): letters, digits and
/// `_` are word characters, Python's ASCII whitespace is space, the rest are symbols.
const ASCII_TOKEN_CLASSES: [TokenClass; 128] = {
    let mut table = [TokenClass::Symbol; 128];
    let mut i = 0;
    while i < 128 {
        let b = i as u8;
        if b.is_ascii_alphanumeric() || b == b'_' {
            table[i] = TokenClass::Word;
        } else if matches!(b, b'\t'..=b'\r' | 0x1C..=b' ') {
            table[i] = TokenClass::Space;
        }
        i += 1;
    }
    table
};

/// Whether the lower-cased text has at least `wanted` tokens, counted without building it.
fn has_tokens(text: &str, wanted: usize) -> bool {
    let mut count = 0;
    let mut in_word = false;
    let mut step = |class: TokenClass, count: &mut usize| match class {
        TokenClass::Word => {
            *count += usize::from(!in_word);
            in_word = true;
        }
        TokenClass::Symbol => {
            *count += 1;
            in_word = false;
        }
        TokenClass::Space => in_word = false,
    };
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let byte = bytes[i];
        if byte.is_ascii() {
            // ASCII (most of a completion) is classified from its byte.
            step(ASCII_TOKEN_CLASSES[usize::from(byte)], &mut count);
            i += 1;
            if count >= wanted {
                return true;
            }
            continue;
        }
        let Some(c) = text.get(i..).and_then(|rest| rest.chars().next()) else {
            break;
        };
        i += c.len_utf8();
        match token_class(c) {
            Some(class) => step(class, &mut count),
            None => {
                for l in lower_char(c) {
                    let class = if is_word(l) {
                        TokenClass::Word
                    } else if is_space(l) {
                        TokenClass::Space
                    } else {
                        TokenClass::Symbol
                    };
                    step(class, &mut count);
                }
            }
        }
        if count >= wanted {
            return true;
        }
    }
    false
}

/// The tokens of `\w+|[^\w\s]` (see [`token_spans`]), with ASCII classified by byte.
fn tokens_of(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::with_capacity(64);
    let mut word_start: Option<usize> = None;
    let mut i = 0;
    while i < bytes.len() {
        let byte = bytes[i];
        let (class, len) = if byte.is_ascii() {
            (ASCII_TOKEN_CLASSES[usize::from(byte)], 1)
        } else {
            let Some(c) = text.get(i..).and_then(|rest| rest.chars().next()) else {
                break;
            };
            let class = if is_word(c) {
                TokenClass::Word
            } else if is_space(c) {
                TokenClass::Space
            } else {
                TokenClass::Symbol
            };
            (class, c.len_utf8())
        };
        if class == TokenClass::Word {
            word_start.get_or_insert(i);
        } else {
            if let Some(start) = word_start.take() {
                tokens.push(&text[start..i]);
            }
            if class == TokenClass::Symbol {
                tokens.push(&text[i..i + len]);
            }
        }
        i += len;
    }
    if let Some(start) = word_start {
        tokens.push(&text[start..]);
    }
    tokens
}

/// Byte spans of the tokens of `\w+|[^\w\s]`: runs of word characters, and every other
/// non-space character on its own.
#[cfg(test)]
fn token_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut word_start: Option<usize> = None;
    for (i, c) in text.char_indices() {
        if is_word(c) {
            word_start.get_or_insert(i);
            continue;
        }
        if let Some(start) = word_start.take() {
            spans.push((start, i));
        }
        if !is_space(c) {
            spans.push((i, i + c.len_utf8()));
        }
    }
    if let Some(start) = word_start {
        spans.push((start, text.len()));
    }
    spans
}

/// A fast keyed hasher for the repetition count. The key is random per process, so model
/// output cannot be crafted to collide (the reason the standard library uses SipHash),
/// while hashing costs a multiply per 8 bytes.
#[derive(Clone, Copy)]
pub struct KeyedHasher {
    hash: u64,
}

const MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;

fn process_key() -> u64 {
    static KEY: OnceLock<u64> = OnceLock::new();
    *KEY.get_or_init(|| RandomState::new().hash_one(0x5EED_u64) | 1)
}

impl Default for KeyedHasher {
    fn default() -> Self {
        KeyedHasher {
            hash: process_key(),
        }
    }
}

/// The high and low halves of the full product, folded together.
fn folded_multiply(a: u64, b: u64) -> u64 {
    let product = u128::from(a) * u128::from(b);
    (product as u64) ^ ((product >> 64) as u64)
}

impl KeyedHasher {
    fn add(&mut self, word: u64) {
        self.hash = folded_multiply(self.hash ^ word, MULTIPLIER);
    }
}

impl Hasher for KeyedHasher {
    fn finish(&self) -> u64 {
        folded_multiply(self.hash, process_key())
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            // The length keeps "a" and "a\0" apart.
            self.add(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 59));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}

pub type FastHash = BuildHasherDefault<KeyedHasher>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pyjson::Object;

    #[test]
    fn repetition_penalty_counts_repeated_trigrams() {
        assert_eq!(repetition_penalty("a b c d e f g h i j k l m n o"), 0.0); // 15 tokens
        let looped = "the answer is 42 . ".repeat(10);
        // 50 tokens, 48 trigrams, 5 distinct: rate 1 - 5/48, penalty capped at 0.8.
        assert_eq!(repetition_penalty(&looped), 0.8);
        let text: String = (0..20).map(|i| format!("w{i} ")).collect::<String>() + "w0 w1 w2";
        // 23 tokens, 21 trigrams, 20 distinct: rate 1/21 < 0.25.
        assert_eq!(repetition_penalty(&text), 0.0);
        let mixed = "数 字 ".repeat(5) + "一 二 三 四 五 六 七 八";
        let tokens = 18.0;
        let distinct = 2.0 + 6.0 + 2.0; // looping pairs, then the fresh tail
        let expected = (1.0 - distinct / (tokens - 2.0) - 0.25) * 2.0;
        assert!((repetition_penalty(&mixed) - expected).abs() < 1e-12);
    }

    #[test]
    fn every_extracted_expression_has_a_value() {
        let tasks = [
            "请计算884+645*18，然后(289+532)*11是多少",
            "2^10 and 3**2 and sqrt(16)+1 and log(8, 2)*1",
            "1/0+1 or 2025-3-7 or 7//0+1 or 1e308*10+1",
            "round(2.5)+round(3.5) then abs(-3)-1, (-8)**3+0",
            "１２３＋４ 和 ３×４",
        ];
        for task in tasks {
            let math = TaskMath::from_task(task);
            assert!(math.is_math(), "{task}");
            assert_eq!(math.values().len(), math.value_count(), "{task}");
        }
    }

    #[test]
    fn sorted_and_hashed_trigram_counts_agree() {
        let words = [
            "a", "b", "a", "c", "a", "b", "a", "c", "d", "b", "a", "b", "z",
        ];
        let sorted = distinct_trigrams_sorted(&words);
        assert_eq!(sorted, distinct_trigrams_hashed(&words));
        assert_eq!(sorted, 9);
        let long: Vec<String> = (0..5000).map(|i| format!("t{}", i % 37)).collect();
        let refs: Vec<&str> = long.iter().map(String::as_str).collect();
        assert_eq!(distinct_trigrams_hashed(&refs), 37);
        assert_eq!(distinct_trigrams_sorted(&refs[..2000]), 37);
    }

    #[test]
    fn float_text_shape_holds_for_every_float_repr() {
        let floats = [
            0.5,
            -2.0,
            1e16,
            1.5e-5,
            123456.789,
            -0.0,
            5e-324,
            1.7976931348623157e308,
            0.0001,
        ];
        for x in floats {
            let text = crate::reward::pyvalue::float_repr(x);
            assert!(has_float_shape(&text), "{text}");
            assert!(has_float_shape(&format!("x {text} y")), "{text}");
        }
        for text in ["7", "1. 5", "e", "answer: 42", "1,5", ""] {
            assert!(!has_float_shape(text), "{text}");
        }
        // A float in the result is found in an answer that holds its text, and a float
        // whose text cannot be there is passed over without changing the outcome.
        let event = ToolEvent {
            ok: true,
            result: Some(Value::Float(2.5)),
            ..ToolEvent::default()
        };
        assert!(answer_refs_tool_result(
            "about 2.5 km",
            &[],
            std::slice::from_ref(&event)
        ));
        assert!(!answer_refs_tool_result(
            "about 3 km",
            &[],
            std::slice::from_ref(&event)
        ));
        assert!(answer_refs_tool_result("about 3 km", &[2.5], &[event]));
    }

    #[test]
    fn ascii_token_classes_agree_with_the_general_table() {
        for b in 0u8..128 {
            assert_eq!(
                Some(ASCII_TOKEN_CLASSES[usize::from(b)]),
                token_class(char::from(b)),
                "{b}"
            );
        }
        // Mixed ASCII and other text counts like the tokeniser.
        for text in ["计算 1+2 等于 3 吗？ OK_go!!", "ǅǅ x\u{85}y İ", "a b", ""] {
            for wanted in 1..12 {
                assert_eq!(
                    has_tokens(text, wanted),
                    token_spans(&py_lower(text)).len() >= wanted,
                    "{text} {wanted}"
                );
            }
        }
    }

    #[test]
    fn greedy_set_matching_counts_each_item_once_at_any_size() {
        let same = |g: &u32, e: &u32| g == e;
        assert_eq!(set_matches(&[1, 1, 2], &[1, 2, 3], same), 2);
        assert_eq!(set_matches(&[1, 1, 2], &[1, 1, 2], same), 3);
        assert_eq!(set_matches::<u32, u32>(&[1], &[], same), 0);
        // Past one word of used flags, the list of flags gives the same counts.
        for n in [63u32, 64, 65, 130] {
            let got: Vec<u32> = (0..n).map(|i| i % 7).collect();
            let expected: Vec<u32> = (0..n).map(|i| i % 5).collect();
            let want = (0..7)
                .map(|v| {
                    let have = got.iter().filter(|&&g| g == v).count();
                    let need = expected.iter().filter(|&&e| e == v).count();
                    have.min(need)
                })
                .sum::<usize>();
            assert_eq!(set_matches(&expected, &got, same), want, "{n}");
        }
    }

    #[test]
    fn byte_classified_tokens_equal_the_character_spans() {
        let texts = [
            "计算1+2=3, ok_go!",
            "ǅx İy \u{85}z\u{a0}w ٣٤ ok?!",
            "  lead and trail  ",
            "a\tb\u{1c}c\u{1f}d\u{b}e",
            "",
        ];
        for text in texts {
            let lowered = py_lower(text);
            let by_span: Vec<&str> = token_spans(&lowered)
                .iter()
                .map(|&(a, b)| &lowered[a..b])
                .collect();
            assert_eq!(tokens_of(&lowered), by_span, "{text}");
        }
    }

    #[test]
    fn short_and_long_tokens_keep_apart_in_the_sorted_count() {
        // Tokens that share a prefix, differ only by length or a NUL byte, and long tokens
        // equal up to their last byte.
        let words = [
            "a",
            "a\0",
            "ab",
            "abcdefg",
            "abcdefgh",
            "abcdefgi",
            "a",
            "a\0",
            "ab",
            "abcdefgh",
            "abcdefgi",
            "abcdefgh",
            "计算",
            "计算机",
            "计",
            "abcdefg",
            "a",
            "a\0",
            "ab",
        ];
        assert_eq!(
            distinct_trigrams_sorted(&words),
            distinct_trigrams_hashed(&words)
        );
        let distinct: HashSet<_> = words.windows(3).collect();
        assert_eq!(distinct_trigrams_sorted(&words), distinct.len());
        assert_ne!(short_token_key("a"), short_token_key("a\0"));
        assert_eq!(short_token_key("abcdefgh"), LONG_TOKEN);
    }

    #[test]
    fn chinese_and_punctuation_tokenise_like_python() {
        let spans = token_spans("计算1+2=3, ok_go!");
        let tokens: Vec<&str> = spans
            .iter()
            .map(|&(a, b)| &"计算1+2=3, ok_go!"[a..b])
            .collect();
        assert_eq!(tokens, ["计算1", "+", "2", "=", "3", ",", "ok_go", "!"]);
    }

    #[test]
    fn task_text_prefers_user_turns() {
        let msg = |role: &str, content: Value| {
            ChatMessage::from_value(Value::Object(Object::from_pairs(vec![
                ("role".to_string(), Value::Str(role.to_string())),
                ("content".to_string(), content),
            ])))
        };
        let messages = vec![
            msg("system", Value::Str("sys".into())),
            msg("user", Value::Str("12+3?".into())),
            ChatMessage::from_value(Value::Int(3)),
            msg("user", Value::Null),
        ];
        assert_eq!(task_text_from_messages(&messages), "12+3?\nNone");
        let blank = vec![
            msg("system", Value::Str("sys".into())),
            msg("user", Value::Str(" ".into())),
        ];
        assert_eq!(task_text_from_messages(&blank), "sys\n ");
        let prompt = "<|im_start|>system\nS<|im_end|><|tools|>[..]<|/tools|><|im_start|>user\n 7*6 <|im_end|>";
        assert_eq!(task_text_from_prompt(prompt), "7*6");
        assert_eq!(task_text_from_prompt("  plain 1+1 "), "plain 1+1");
        assert_eq!(
            task_text_from_prompt("<|im_start|>user\nno end"),
            "<|im_start|>user\nno end"
        );
    }

    #[test]
    fn repeated_calls_compare_names_and_sorted_arguments() {
        let ev = |name: Option<Value>, args: Option<Value>| ToolEvent {
            name,
            args,
            ..ToolEvent::default()
        };
        let args = |pairs: Vec<(&str, Value)>| {
            Value::Object(Object::from_pairs(
                pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            ))
        };
        let a = ev(
            Some(Value::Str("calc".into())),
            Some(args(vec![("x", Value::Int(1)), ("y", Value::Int(2))])),
        );
        let b = ev(
            Some(Value::Str("calc".into())),
            Some(args(vec![("y", Value::Int(2)), ("x", Value::Int(1))])),
        );
        let c = ev(
            Some(Value::Str("calc".into())),
            Some(args(vec![("y", Value::Int(2)), ("x", Value::Float(1.0))])),
        );
        assert_eq!(
            repeated_call_penalty(&[a.clone(), b.clone(), c.clone()]),
            0.2
        );
        // Missing name equals "", missing args equal {}.
        let d = ev(None, None);
        let e = ev(Some(Value::Str(String::new())), Some(args(vec![])));
        assert_eq!(repeated_call_penalty(&[d, e]), 0.2);
        // The long-list path agrees with the pairwise one.
        let many: Vec<ToolEvent> = (0..100)
            .map(|i| if i % 2 == 0 { a.clone() } else { c.clone() })
            .collect();
        assert_eq!(repeated_call_penalty(&many), 0.8);
        let few: Vec<ToolEvent> = vec![a.clone(), c.clone(), b];
        let keys: HashSet<(String, String)> = few
            .iter()
            .enumerate()
            .map(|(i, e)| call_key(i, e))
            .collect();
        assert_eq!(keys.len(), 2);
    }
}
