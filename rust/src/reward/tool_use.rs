//! How the tool calls of a trajectory line up with its task: which math calls were made, how
//! their expressions and results compare with the task's arithmetic, repeated calls, and
//! whether the answer uses a tool's result.

use std::borrow::Cow;
use std::collections::HashSet;

use crate::expr;
use crate::pychar::{is_space, lower as py_lower, strip as py_strip};
use crate::pyjson::Value;
use crate::reward::answer::num_close;
use crate::reward::pyvalue::{dumps_sorted, plain_number_of, py_equal, py_str, same_json};
use crate::reward::record::ToolEvent;
use crate::reward::task::TaskMath;

/// Tool names that count as arithmetic calls; the first is the preferred one.
pub const MATH_TOOLS: [&str; 3] = ["calculate_math", "calculator", "python_math"];
pub const PREFERRED_MATH_TOOL: &str = "calculate_math";

impl ToolEvent {
    /// The name when it is a string.
    pub fn name_str(&self) -> Option<&str> {
        self.name.as_ref().and_then(Value::as_str)
    }

    /// A call to one of the math tools (by name).
    pub fn is_math(&self) -> bool {
        self.name_str().is_some_and(|n| MATH_TOOLS.contains(&n))
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

/// 0.2 per tool call that repeats an earlier one (same name and arguments, compared as
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
    let expected: &[f64] = if !gt_numbers.is_empty() && gt_numbers.len() == math.values().len() {
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

/// The canonical text of a call's expression; text that canonicalisation would not change (ASCII
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pyjson::Object;

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
