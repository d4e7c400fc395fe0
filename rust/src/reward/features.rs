//! What the reward measures in a trajectory besides the answer itself: the task's
//! arithmetic, the tool calls made for it, and repetition.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use crate::answer::{num_close, parse_plain_number};
use crate::expr;
use crate::pyjson::Value;
use crate::reward::pychar::{is_space, is_word, lower as py_lower, strip as py_strip};
use crate::reward::pyvalue::{dumps_sorted, get, py_str};

/// Tool names that count as arithmetic calls; the first is the preferred one.
pub const MATH_TOOLS: [&str; 3] = ["calculate_math", "calculator", "python_math"];
pub const PREFERRED_MATH_TOOL: &str = "calculate_math";

/// Most expressions taken from a task (the seed's limit for call counts and coverage).
const MAX_TASK_EXPRS: i64 = 16;

// ---------------------------------------------------------------- task text

/// The task as the seed reads it from chat messages: the user turns joined by newlines, or
/// system and user turns when the user turns are blank. Contents that are not strings are
/// printed with Python's `str()`; entries that are not dicts are ignored.
pub fn task_text_from_messages(messages: &[Value]) -> String {
    let user = join_contents(messages, &["user"]);
    if !py_strip(&user).is_empty() {
        return user;
    }
    join_contents(messages, &["system", "user"])
}

fn join_contents(messages: &[Value], roles: &[&str]) -> String {
    let mut out = String::new();
    let mut first = true;
    for message in messages {
        let Some(obj) = message.as_object() else {
            continue;
        };
        let role = obj.get("role").and_then(Value::as_str);
        if !role.is_some_and(|r| roles.contains(&r)) {
            continue;
        }
        if !first {
            out.push('\n');
        }
        first = false;
        if let Some(content) = obj.get("content") {
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
    while let Some(pos) = rest.find(TOOLS_OPEN) {
        let body = pos + TOOLS_OPEN.len();
        let Some(close) = rest[body..].find(TOOLS_CLOSE) else {
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
    while let Some(offset) = text[pos..].find(IM_START) {
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
        let Some(end) = text[body..].find(IM_END) else {
            break;
        };
        turns.push((*role, &text[body..body + end]));
        pos = body + end + IM_END.len();
    }
    turns
}

// ---------------------------------------------------------------- task arithmetic

/// The arithmetic a task asks for: what the tool calls are compared against.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskMath {
    /// Expressions found in the task, in order (at most 16).
    pub exprs: Vec<String>,
    /// Their canonical forms (what a tool call's expression must equal).
    pub canonical: Vec<String>,
    /// Their values.
    pub values: Vec<f64>,
}

impl TaskMath {
    pub fn from_task(task: &str) -> Self {
        let exprs = expr::extract_expressions(task, MAX_TASK_EXPRS);
        let canonical = exprs.iter().map(|e| expr::canonicalize(e)).collect();
        let values = exprs
            .iter()
            .filter_map(|e| expr::safe_eval(e).ok())
            .collect();
        TaskMath {
            exprs,
            canonical,
            values,
        }
    }

    /// A task is a math task when it contains at least one arithmetic expression.
    pub fn is_math(&self) -> bool {
        !self.exprs.is_empty()
    }
}

// ---------------------------------------------------------------- tool events

/// Read access to one tool event (`{ok, name, args, result, canonical}`) with Python's
/// `dict.get` semantics; an event that is not a dict reads as empty.
#[derive(Debug, Clone, Copy)]
pub struct Event<'a>(pub &'a Value);

impl<'a> Event<'a> {
    pub fn ok(&self) -> bool {
        get(self.0, "ok").is_some_and(Value::is_truthy)
    }

    pub fn canonical(&self) -> bool {
        get(self.0, "canonical").is_some_and(Value::is_truthy)
    }

    pub fn name(&self) -> Option<&'a str> {
        get(self.0, "name").and_then(Value::as_str)
    }

    pub fn is_math(&self) -> bool {
        self.name().is_some_and(|n| MATH_TOOLS.contains(&n))
    }

    pub fn is_preferred_math(&self) -> bool {
        self.name() == Some(PREFERRED_MATH_TOOL)
    }

    /// `event.get("result", {}) or {}` and `event.get("args", {}) or {}`.
    fn field_or_empty(&self, key: &str) -> Option<&'a Value> {
        get(self.0, key).filter(|v| v.is_truthy())
    }

    /// The expression argument: `args.get("expression", args.get("query", ""))`.
    pub fn expression(&self) -> Option<&'a Value> {
        let args = self.field_or_empty("args")?;
        let obj = args.as_object()?;
        obj.get("expression").or_else(|| obj.get("query"))
    }
}

/// Whether any successful tool result (any scalar inside it) appears in the answer, as
/// text or as a number close to one of the answer's numbers.
pub fn answer_refs_tool_result(answer: &str, answer_numbers: &[f64], events: &[Value]) -> bool {
    let lowered = py_lower(answer);
    for event in events.iter().map(Event) {
        if !event.ok() {
            continue;
        }
        let Some(result) = get(event.0, "result") else {
            continue;
        };
        let mut found = false;
        for_each_scalar(result, |scalar| {
            let text = py_str(scalar);
            let text = py_strip(&text);
            if text.is_empty() {
                return false;
            }
            if lowered.contains(&py_lower(text)) {
                found = true;
            } else if let Some(target) = parse_plain_number(text) {
                found = answer_numbers.iter().any(|&n| num_close(n, target));
            }
            found
        });
        if found {
            return true;
        }
    }
    false
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

/// 0.2 per tool call that repeats an earlier one (same name and arguments), at most 0.8.
pub fn repeated_call_penalty(events: &[Value]) -> f64 {
    if events.is_empty() {
        return 0.0;
    }
    let mut seen: HashSet<(String, String)> = HashSet::with_capacity(events.len());
    for event in events {
        let name_key = match get(event, "name") {
            None => "s:".to_string(),
            Some(Value::Str(s)) => format!("s:{s}"),
            Some(other) => format!("v:{}", name_identity(other)),
        };
        let args_key = match get(event, "args") {
            None => "{}".to_string(),
            Some(args) => dumps_sorted(args),
        };
        seen.insert((name_key, args_key));
    }
    let repeats = (events.len() - seen.len()) as f64;
    (0.2 * repeats).min(0.8)
}

/// A key under which non-string names compare as Python's `==` does (`1 == 1.0 == True`).
fn name_identity(value: &Value) -> String {
    match value {
        Value::Bool(b) => i64::from(*b).to_string(),
        Value::Int(i) => i.to_string(),
        Value::BigInt(text) => text.clone(),
        Value::Float(x) if x.is_finite() && x.fract() == 0.0 => format!("{x:.0}"),
        other => dumps_sorted(other),
    }
}

/// The number a successful math call produced: its `value`/`result` field when that is a
/// plain number, else the value of its expression argument.
pub fn tool_result_number(event: Event<'_>) -> Option<f64> {
    if let Some(Value::Object(result)) = event.field_or_empty("result") {
        for key in ["value", "result"] {
            if let Some(v) = result.get(key) {
                if let Some(x) = parse_plain_number(&py_str(v)) {
                    return Some(x);
                }
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
pub fn tool_value_metrics(math: &TaskMath, gt_numbers: &[f64], events: &[Value]) -> ValueMetrics {
    let expected: &[f64] = if !gt_numbers.is_empty() && gt_numbers.len() == math.values.len() {
        gt_numbers
    } else {
        &math.values
    };
    let math_events: Vec<Event<'_>> = events.iter().map(Event).filter(Event::is_math).collect();
    let got: Vec<f64> = math_events
        .iter()
        .filter(|e| e.ok())
        .filter_map(|&e| tool_result_number(e))
        .collect();
    let order_match_count = ordered_matches(expected, &got, |g, e| num_close(*g, *e));
    let set_match = set_matches(expected, &got, |g, e| num_close(*g, *e));
    let n = expected.len();
    let calls = math_events.len();
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
pub fn tool_expr_metrics(math: &TaskMath, events: &[Value]) -> ExprMetrics {
    let called: Vec<String> = events
        .iter()
        .map(Event)
        .filter(Event::is_math)
        .filter_map(|e| e.expression().filter(|v| v.is_truthy()))
        .map(|v| expr::canonicalize(&py_str(v)))
        .filter(|c| !c.is_empty())
        .collect();
    let expected = &math.canonical;
    let order_match_count = ordered_matches(expected, &called, |g, e| g == e);
    let set_match = set_matches(expected, &called, |g, e| g == e);
    let n = expected.len();
    ExprMetrics {
        order_match_count,
        order_cov: ratio(order_match_count, n),
        set_cov: ratio(set_match, n),
        exact: n > 0 && called.len() == n && order_match_count == n,
    }
}

/// Positions where `got[i]` matches `expected[i]`.
fn ordered_matches<E, G>(expected: &[E], got: &[G], same: impl Fn(&G, &E) -> bool) -> usize {
    expected.iter().zip(got).filter(|(e, g)| same(g, e)).count()
}

/// Expected items each matched greedily to the first unused matching `got` item.
fn set_matches<E, G>(expected: &[E], got: &[G], same: impl Fn(&G, &E) -> bool) -> usize {
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
    let lowered = py_lower(text);
    let spans = token_spans(&lowered);
    if spans.len() < 16 {
        return 0.0;
    }
    // Token ids by first occurrence (SipHash: the tokens are model output).
    let mut ids: HashMap<&str, u32> = HashMap::with_capacity(spans.len().min(1 << 16));
    let tokens: Vec<u32> = spans
        .iter()
        .map(|&(start, end)| {
            let next = ids.len() as u32;
            *ids.entry(&lowered[start..end]).or_insert(next)
        })
        .collect();
    let trigrams: HashSet<(u32, u32, u32), FastHash> =
        tokens.windows(3).map(|w| (w[0], w[1], w[2])).collect();
    let total = tokens.len() - 2;
    let repeat_rate = 1.0 - trigrams.len() as f64 / total as f64;
    let excess = repeat_rate - 0.25;
    let excess = if excess > 0.0 { excess } else { 0.0 };
    let penalty = excess * 2.0;
    if penalty < 0.8 {
        penalty
    } else {
        0.8
    }
}

/// Byte spans of the tokens of `\w+|[^\w\s]`: runs of word characters, and every other
/// non-space character on its own.
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

/// A fast hasher for small integer keys computed by this module (trigrams of token ids).
#[derive(Default, Clone, Copy)]
pub struct IdHasher {
    hash: u64,
}

const MIX: u64 = 0x9E37_79B9_7F4A_7C15;

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        // Spread the product's high bits into the low bits the table indexes with.
        let h = self.hash;
        h ^ (h >> 29) ^ (h >> 47)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.add(u64::from(b));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }
}

impl IdHasher {
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(23) ^ word).wrapping_mul(MIX);
    }
}

pub type FastHash = BuildHasherDefault<IdHasher>;
