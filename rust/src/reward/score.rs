//! The reward of one trajectory, term by term.
//!
//! Terms are added in a fixed order with fixed floating-point operations, so rewards agree
//! to the last bit with the golden files (see `tests/test_reward_parity.py`). Each term's contribution is also kept (see [`Contributions`]) so
//! that `agentrl score --explain` can say why a completion scored what it did.

use crate::pyjson::Value;
use crate::reward::answer::{
    answer_tags, count_ground_truth_matches, normalize_text, numeric_candidates, ordered_numbers,
    GroundTruthItem,
};
use crate::reward::config::{FormatEnforceMode, RewardConfig};
use crate::reward::pyvalue::py_str;
use crate::reward::record::{Task, ToolEvent, Trajectory};
use crate::reward::repetition::repetition_penalty;
use crate::reward::task::{task_text_from_messages, task_text_from_prompt, TaskMath};
use crate::reward::tool_use::{
    answer_refs_tool_result, repeated_call_penalty, tool_expr_metrics, tool_value_metrics,
    ExprMetrics, ValueMetrics, MATH_TOOLS, PREFERRED_MATH_TOOL,
};

/// The reward is clipped to this magnitude.
pub const REWARD_CLIP: f64 = 12.0;

/// Declares a struct of named `f64` fields with its field names as a constant list, in
/// declaration order (which is the column order of the details).
macro_rules! named_floats {
    ($(#[$meta:meta])* $name:ident, $keys:ident, $count:ident { $($field:ident),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, Default, PartialEq)]
        pub struct $name { $(pub $field: f64,)* }

        /// Field names in order.
        pub const $keys: &[&str] = &[$(stringify!($field)),*];
        /// Number of fields.
        pub const $count: usize = $keys.len();

        impl $name {
            /// Field values in the order of the names.
            pub fn values(&self) -> [f64; $count] {
                [$(self.$field),*]
            }
        }
    };
}

named_floats!(
    /// The detail dict of one trajectory (all values as floats).
    Details, DETAIL_KEYS, DETAIL_COUNT {
        reward, raw_reward, clipped, answer_cov, unordered_answer_cov, exact_match,
        strict_exact_match, matched_count, ordered_match_count, extra_numbers, missing_numbers,
        order_ok, tool_calls, expected_math_calls, math_tool_calls, preferred_math_tool_calls,
        alias_math_tool_calls, non_math_tool_calls, tool_success_calls, tool_failed_calls,
        tool_success_rate, math_call_coverage, tool_expr_order_cov, tool_expr_set_cov,
        tool_expr_exact, tool_expr_order_match_count, tool_value_order_cov, tool_value_set_cov,
        tool_value_exact, tool_value_order_match_count, tool_over_calls, tool_under_calls,
        preferred_math_rate, correct_tool_choice, tool_count_exact, canonical_tool_rate,
        final_refs_tool, answer_tag, exact_answer_tag, answer_tag_nonempty, malformed_tags,
        answer_len, unfinished, rep_penalty, repeat_tool_penalty, format_strength,
    }
);

named_floats!(
    /// How much each term added to (or, negative, took from) the reward. Caps and the final
    /// clip appear as the amount they removed. The contributions sum to the reward up to
    /// floating-point rounding.
    Contributions, TERM_KEYS, TERM_COUNT {
        base, answer_cov, exact_match, tool_success, math_call_cov, tool_expr_order,
        tool_expr_set, tool_expr_exact, tool_value_order, tool_value_set, tool_value_exact,
        preferred_math_tool, correct_tool_choice, tool_count_exact, canonical_tool,
        final_refs_tool, tool_fail, wrong_tool, tool_over_call, tool_under_call, no_tool,
        alias_only, answer_tag, exact_answer_tag, missing_format, no_answer_tag_cap,
        hard_format_cap, tag_balance, answer_length, extra_numbers, missing_numbers,
        order_mismatch, repeated_tool_calls, unfinished, repetition, non_exact_cap,
        zero_answer_cov_cap, clip,
    }
);

/// The running reward and where each part of it came from.
struct Ledger {
    total: f64,
    parts: Contributions,
}

impl Ledger {
    fn add(&mut self, part: fn(&mut Contributions) -> &mut f64, amount: f64) {
        self.total += amount;
        *part(&mut self.parts) += amount;
    }

    fn sub(&mut self, part: fn(&mut Contributions) -> &mut f64, amount: f64) {
        self.total -= amount;
        *part(&mut self.parts) -= amount;
    }

    /// `reward = min(reward, limit)`, with Python's `min` (a NaN reward stays NaN).
    fn cap(&mut self, part: fn(&mut Contributions) -> &mut f64, limit: f64) {
        if limit < self.total {
            *part(&mut self.parts) += limit - self.total;
            self.total = limit;
        }
    }
}

/// Python's `min(x, bound)` for floats.
fn py_min(x: f64, bound: f64) -> f64 {
    if bound < x {
        bound
    } else {
        x
    }
}

fn flag(b: bool) -> f64 {
    if b {
        1.0
    } else {
        0.0
    }
}

/// Tallies over a trajectory's tool events, in one pass.
#[derive(Debug, Clone, Copy, Default)]
struct EventCounts {
    ok: usize,
    canonical: usize,
    math: usize,
    preferred: usize,
    ok_math: usize,
    ok_preferred: usize,
}

impl EventCounts {
    fn of(events: &[ToolEvent]) -> Self {
        let mut counts = EventCounts::default();
        for event in events {
            let ok = event.ok;
            let name = event.name_str();
            let math = name.is_some_and(|n| MATH_TOOLS.contains(&n));
            let preferred = name == Some(PREFERRED_MATH_TOOL);
            counts.ok += usize::from(ok);
            counts.canonical += usize::from(event.canonical);
            counts.math += usize::from(math);
            counts.preferred += usize::from(preferred);
            counts.ok_math += usize::from(ok && math);
            counts.ok_preferred += usize::from(ok && preferred);
        }
        counts
    }
}

/// The task text that tool calls are compared with.
pub fn task_text(task: &Task) -> String {
    if task.messages.is_empty() {
        task_text_from_prompt(&task.prompt)
    } else {
        task_text_from_messages(&task.messages)
    }
}

/// The ground truth as the reward reads it, prepared once per task.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GroundTruth {
    /// Each item's normalised text and plain number (from its Python `str()`).
    pub items: Vec<GroundTruthItem>,
    /// Every item as a number, or empty when any item is not a plain number.
    pub numbers: Vec<f64>,
}

impl GroundTruth {
    pub fn new(gt: &[Value]) -> Self {
        let items: Vec<GroundTruthItem> = gt
            .iter()
            .map(|g| GroundTruthItem::new(&py_str(g)))
            .collect();
        let numbers = items
            .iter()
            .map(|item| item.number)
            .collect::<Option<Vec<f64>>>()
            .unwrap_or_default();
        GroundTruth { items, numbers }
    }
}

/// Scores one trajectory whose tool events are `events`.
pub fn score_trajectory(
    config: &RewardConfig,
    row: &Trajectory,
    events: &[ToolEvent],
) -> (Details, Contributions) {
    let math = TaskMath::from_task(&task_text(&row.task));
    let truth = GroundTruth::new(&row.task.gt);
    score_with_task(config, row, events, &math, &truth)
}

/// Scores one trajectory given what its task's rows share: the task's arithmetic and the
/// prepared ground truth.
pub fn score_with_task(
    config: &RewardConfig,
    row: &Trajectory,
    events: &[ToolEvent],
    math: &TaskMath,
    truth: &GroundTruth,
) -> (Details, Contributions) {
    let completion = row.completion.as_str();
    let gt_count = truth.items.len();
    let has_gt = gt_count > 0;

    // The answer against the ground truth.
    let tags = answer_tags(completion);
    let answer: &str = tags.content();
    let predicted = numeric_candidates(answer);
    // Only items that are not plain numbers are looked up in the normalised text.
    let needs_text = truth
        .items
        .iter()
        .any(|item| item.number.is_none() && !item.normalized.is_empty());
    let normalized = if needs_text {
        normalize_text(answer)
    } else {
        String::new()
    };
    let matched_count = count_ground_truth_matches(&predicted, &normalized, &truth.items);
    let unordered_cov = if has_gt {
        matched_count as f64 / gt_count as f64
    } else {
        0.0
    };
    let gt_numbers = &truth.numbers;
    let numbers = ordered_numbers(&predicted, gt_numbers);
    let numeric_gt = !gt_numbers.is_empty();
    let mut answer_cov = if numeric_gt && config.strict_order_reward {
        numbers.ordered_cov
    } else {
        unordered_cov
    };
    let mut exact_match = if numeric_gt && config.strict_exact_reward {
        flag(numbers.strict_exact)
    } else {
        flag(has_gt && unordered_cov >= 1.0)
    };

    // Tool use.
    let total_calls = events.len();
    let counts = EventCounts::of(events);
    let success_calls = counts.ok;
    let failed_calls = total_calls - success_calls;
    let tool_success_rate = if total_calls > 0 {
        success_calls as f64 / total_calls as f64
    } else {
        0.0
    };
    let refs_tool = flag(answer_refs_tool_result(answer, &predicted, events));
    let answer_tag = flag(tags.has_answer);
    let exact_answer_tag = flag(tags.exactly_one);
    let (call_opens, call_closes) = tags.tool_call_tags;
    let call_tag_balance = call_opens.abs_diff(call_closes);
    let malformed_tags = call_tag_balance as f64 + tags.malformed as f64;

    let is_math = math.is_math();
    let expected_math_calls = if is_math {
        math.expression_count().max(gt_count).max(1)
    } else {
        0
    };
    let preferred_calls = counts.preferred;
    let math_calls = counts.math;
    let alias_calls = math_calls - preferred_calls;
    let non_math_calls = if is_math { total_calls - math_calls } else { 0 };
    let ok_math = counts.ok_math;
    let ok_preferred = counts.ok_preferred;
    let math_call_coverage = if is_math {
        (ok_math as f64 / expected_math_calls.max(1) as f64).min(1.0)
    } else {
        0.0
    };
    let preferred_math_rate = if is_math && ok_math > 0 {
        ok_preferred as f64 / ok_math as f64
    } else {
        0.0
    };
    let correct_tool_choice =
        flag(!is_math || (total_calls > 0 && non_math_calls == 0 && preferred_calls > 0));
    let tool_count_exact =
        flag(!is_math || (math_calls == expected_math_calls && non_math_calls == 0));
    let canonical_tool_rate = if total_calls > 0 {
        counts.canonical as f64 / total_calls as f64
    } else {
        0.0
    };
    let (values, exprs) = if is_math {
        (
            tool_value_metrics(math, gt_numbers, events),
            tool_expr_metrics(math, events),
        )
    } else {
        (ValueMetrics::default(), ExprMetrics::default())
    };
    let answer_len = answer.chars().count();
    let rep = repetition_penalty(&tags.clean);
    let repeat_tool_pen = repeated_call_penalty(events);

    // The reward, term by term, in the golden files' order.
    let c = config;
    let mut r = Ledger {
        total: 0.0,
        parts: Contributions::default(),
    };
    r.add(|p| &mut p.base, c.reward_base);
    r.add(
        |p| &mut p.answer_cov,
        c.reward_answer_cov_weight * answer_cov,
    );
    r.add(
        |p| &mut p.exact_match,
        c.reward_exact_match_weight * exact_match,
    );

    if is_math {
        if total_calls > 0 {
            r.add(
                |p| &mut p.tool_success,
                c.reward_tool_success_weight * tool_success_rate,
            );
            r.add(
                |p| &mut p.math_call_cov,
                c.reward_math_call_cov_weight * math_call_coverage,
            );
            r.add(
                |p| &mut p.tool_expr_order,
                c.reward_tool_expr_order_weight * exprs.order_cov,
            );
            r.add(
                |p| &mut p.tool_expr_set,
                c.reward_tool_expr_set_weight * exprs.set_cov,
            );
            r.add(
                |p| &mut p.tool_expr_exact,
                c.reward_tool_expr_exact_weight * flag(exprs.exact),
            );
            r.add(
                |p| &mut p.tool_value_order,
                c.reward_tool_value_order_weight * values.order_cov,
            );
            r.add(
                |p| &mut p.tool_value_set,
                c.reward_tool_value_set_weight * values.set_cov,
            );
            r.add(
                |p| &mut p.tool_value_exact,
                c.reward_tool_value_exact_weight * flag(values.exact),
            );
            r.add(
                |p| &mut p.preferred_math_tool,
                c.reward_preferred_math_tool_weight * preferred_math_rate,
            );
            r.add(
                |p| &mut p.correct_tool_choice,
                c.reward_correct_tool_choice_weight * correct_tool_choice,
            );
            r.add(
                |p| &mut p.tool_count_exact,
                c.reward_tool_count_exact_weight * tool_count_exact,
            );
            r.add(
                |p| &mut p.canonical_tool,
                c.reward_canonical_tool_weight * canonical_tool_rate,
            );
            if answer_cov > 0.0 {
                r.add(
                    |p| &mut p.final_refs_tool,
                    c.reward_final_refs_tool_weight * refs_tool,
                );
            }
            r.sub(
                |p| &mut p.tool_fail,
                c.reward_tool_fail_penalty * failed_calls.min(4) as f64,
            );
            r.sub(
                |p| &mut p.wrong_tool,
                c.reward_wrong_tool_penalty * non_math_calls.min(4) as f64,
            );
            r.sub(
                |p| &mut p.tool_over_call,
                c.reward_tool_over_call_penalty * py_min(values.over_calls as f64, 6.0),
            );
            r.sub(
                |p| &mut p.tool_under_call,
                c.reward_tool_under_call_penalty * py_min(values.under_calls as f64, 6.0),
            );
        } else {
            r.sub(|p| &mut p.no_tool, c.reward_no_tool_penalty);
        }
        if alias_calls > 0 && preferred_calls == 0 {
            r.sub(|p| &mut p.alias_only, c.reward_alias_only_penalty);
        }
    }

    let strength = c.format_strength();
    let missing_format_penalty = c.missing_format_penalty(strength);
    r.add(
        |p| &mut p.answer_tag,
        c.reward_answer_tag_weight * answer_tag,
    );
    r.add(
        |p| &mut p.exact_answer_tag,
        c.reward_exact_answer_tag_weight * exact_answer_tag,
    );
    if answer_tag <= 0.0 && is_math {
        r.sub(|p| &mut p.missing_format, missing_format_penalty);
        if matches!(
            c.format_enforce_mode,
            FormatEnforceMode::SemiHard | FormatEnforceMode::Hard
        ) {
            r.cap(|p| &mut p.no_answer_tag_cap, c.no_answer_tag_reward_cap);
        }
        if c.format_enforce_mode == FormatEnforceMode::Hard && strength >= 1.0 {
            answer_cov = 0.0;
            exact_match = 0.0;
            r.cap(|p| &mut p.hard_format_cap, 0.0);
        }
    }
    if malformed_tags == 0.0 {
        r.add(|p| &mut p.tag_balance, 0.10);
    } else {
        r.add(|p| &mut p.tag_balance, -0.50 * malformed_tags);
    }
    let len_ok = answer_len >= 1
        && i64::try_from(answer_len).is_ok_and(|len| len <= c.max_reward_answer_len);
    r.add(|p| &mut p.answer_length, if len_ok { 0.10 } else { -0.30 });

    let (extra_numbers, missing_numbers, order_ok) = if numeric_gt {
        (
            numbers.extra as f64,
            numbers.missing as f64,
            flag(numbers.order_ok),
        )
    } else {
        (0.0, 0.0, exact_match)
    };
    if numeric_gt {
        r.sub(
            |p| &mut p.extra_numbers,
            c.extra_number_penalty * py_min(extra_numbers, 6.0),
        );
        r.sub(
            |p| &mut p.missing_numbers,
            c.missing_number_penalty * py_min(missing_numbers, 6.0),
        );
        if order_ok <= 0.0 && unordered_cov > 0.0 {
            r.sub(|p| &mut p.order_mismatch, c.order_mismatch_penalty);
        }
    }
    r.sub(|p| &mut p.repeated_tool_calls, repeat_tool_pen);
    r.sub(
        |p| &mut p.unfinished,
        if row.unfinished { 0.80 } else { 0.0 },
    );
    r.sub(|p| &mut p.repetition, rep);

    if has_gt && exact_match < 1.0 {
        r.cap(|p| &mut p.non_exact_cap, c.non_exact_cap());
    }
    if has_gt && answer_cov <= 0.0 {
        r.cap(|p| &mut p.zero_answer_cov_cap, c.zero_cov_cap());
    }
    let raw_reward = r.total;
    let reward = clip(raw_reward);
    r.parts.clip = reward - raw_reward;
    if r.parts.clip == 0.0 || reward.is_nan() {
        r.parts.clip = 0.0;
    }

    let details = Details {
        reward,
        raw_reward,
        clipped: flag((raw_reward - reward).abs() > 1e-6),
        answer_cov,
        unordered_answer_cov: unordered_cov,
        exact_match,
        strict_exact_match: if numeric_gt {
            flag(numbers.strict_exact)
        } else {
            exact_match
        },
        matched_count: matched_count as f64,
        ordered_match_count: numbers.ordered_match_count as f64,
        extra_numbers,
        missing_numbers,
        order_ok,
        tool_calls: total_calls as f64,
        expected_math_calls: expected_math_calls as f64,
        math_tool_calls: math_calls as f64,
        preferred_math_tool_calls: preferred_calls as f64,
        alias_math_tool_calls: alias_calls as f64,
        non_math_tool_calls: non_math_calls as f64,
        tool_success_calls: success_calls as f64,
        tool_failed_calls: failed_calls as f64,
        tool_success_rate,
        math_call_coverage,
        tool_expr_order_cov: exprs.order_cov,
        tool_expr_set_cov: exprs.set_cov,
        tool_expr_exact: flag(exprs.exact),
        tool_expr_order_match_count: exprs.order_match_count as f64,
        tool_value_order_cov: values.order_cov,
        tool_value_set_cov: values.set_cov,
        tool_value_exact: flag(values.exact),
        tool_value_order_match_count: values.order_match_count as f64,
        tool_over_calls: values.over_calls as f64,
        tool_under_calls: values.under_calls as f64,
        preferred_math_rate,
        correct_tool_choice,
        tool_count_exact,
        canonical_tool_rate,
        final_refs_tool: refs_tool,
        answer_tag,
        exact_answer_tag,
        answer_tag_nonempty: flag(tags.nonempty),
        malformed_tags,
        answer_len: answer_len as f64,
        unfinished: flag(row.unfinished),
        rep_penalty: rep,
        repeat_tool_penalty: repeat_tool_pen,
        format_strength: strength,
    };
    (details, r.parts)
}

/// `max(min(x, 12), -12)` with Python's `min`/`max` (NaN passes through).
fn clip(x: f64) -> f64 {
    let upper = py_min(x, REWARD_CLIP);
    if -REWARD_CLIP > upper {
        -REWARD_CLIP
    } else {
        upper
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pyjson::{parse, ParseOptions};
    use crate::reward::config::ConfigValue;

    fn row(json: &str) -> Trajectory {
        let value = parse(json, &ParseOptions::python()).unwrap_or(Value::Null);
        Trajectory::from_value(value).unwrap_or_default()
    }

    fn events(row: &Trajectory) -> &[ToolEvent] {
        row.tool_events.as_deref().unwrap_or(&[])
    }

    fn total(parts: &Contributions) -> f64 {
        parts.values().iter().sum()
    }

    #[test]
    fn hard_mode_takes_the_credit_of_an_untagged_math_answer() {
        let r = row(r#"{"task":"Compute 7*8","gt":["56"],"completion":"56","tool_events":[]}"#);
        let mut config = RewardConfig::default();
        config
            .set("format_enforce_mode", &ConfigValue::Str("hard".into()))
            .unwrap_or(());
        let (d, parts) = score_trajectory(&config, &r, events(&r));
        // 17.9 - no tool 1.5 - missing tag 1.5, capped at 2, then at 0 (hard mode);
        // + 0.1 + 0.1, then the zero-coverage cap (0).
        assert_eq!(d.reward, 0.0);
        assert_eq!((d.answer_cov, d.exact_match), (0.0, 0.0));
        assert_eq!(d.strict_exact_match, 1.0); // the numbers themselves did match
        assert!((total(&parts) - d.reward).abs() < 1e-12);
        assert!(parts.hard_format_cap < 0.0 && parts.zero_answer_cov_cap < 0.0);
    }

    #[test]
    fn semi_hard_caps_and_unfinished_costs() {
        let r = row(
            r#"{"task":"Compute 7*8","gt":["56"],"completion":"56","tool_events":[],"unfinished":true}"#,
        );
        let (d, parts) = score_trajectory(&RewardConfig::default(), &r, events(&r));
        // ... capped at 2.0, + 0.1 + 0.1 - unfinished 0.8.
        assert!((d.reward - 1.4).abs() < 1e-12, "{}", d.reward);
        assert_eq!(d.unfinished, 1.0);
        assert_eq!(parts.unfinished, -0.8);
        assert!((total(&parts) - d.reward).abs() < 1e-12);
    }

    #[test]
    fn clipping_is_reported() {
        let r =
            row(r#"{"task":"hi","gt":["1"],"completion":"<answer>1</answer>","tool_events":[]}"#);
        let (d, parts) = score_trajectory(&RewardConfig::default(), &r, events(&r));
        // -0.1 + 9 + 9 + 0.9 + 0.8 + 0.1 + 0.1 = 19.8
        assert!((d.raw_reward - 19.8).abs() < 1e-12);
        assert_eq!((d.reward, d.clipped), (REWARD_CLIP, 1.0));
        assert!((parts.clip + 7.8).abs() < 1e-12);
    }

    #[test]
    fn no_ground_truth_means_no_caps() {
        let r = row(r#"{"task":"hi","completion":"<answer>x</answer>","tool_events":[]}"#);
        let (d, _) = score_trajectory(&RewardConfig::default(), &r, events(&r));
        // -0.1 + 0 + 0 + 0.9 + 0.8 + 0.1 + 0.1
        assert!((d.reward - 1.8).abs() < 1e-12);
        assert_eq!(d.unordered_answer_cov, 0.0);
    }

    #[test]
    fn ground_truth_is_prepared_from_python_str() {
        let truth = GroundTruth::new(&[Value::Int(3), Value::Float(2.5)]);
        assert_eq!(truth.numbers, vec![3.0, 2.5]);
        let truth = GroundTruth::new(&[Value::Int(3), Value::Null]);
        assert!(truth.numbers.is_empty());
        assert_eq!(truth.items[1].normalized, "none");
    }
}
