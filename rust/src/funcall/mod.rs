//! The `function_call` reward: is the completion the call (or calls, or no call) that
//! answers a function-calling task, with the semantics of BFCL's AST checker?
//!
//! A row holds the offered functions (`tools`), the acceptable answers (`ground_truth`,
//! BFCL's possible-answer form, see [`task`]) and the model's `completion`. The calls are read
//! from the completion by the same multi-format parser the rollout executes calls with
//! ([`crate::message`]), in the run's tool formats. Each row gets:
//!
//! - `valid`: the checker's verdict, 0 or 1 ([`check`]);
//! - `names`, `arg_names`, `values`: graded terms in `[0, 1]` ([`graded`]);
//! - `format`: the share of call blocks that were read and name an offered function (1
//!   without any block). A refused block costs its share, not the whole term: three calls
//!   with one botched earn a third of the weight less than two calls that leave it out, not
//!   the whole weight (which taught RL to cut parallel answers short);
//! - `reward`: the weighted sum of those five (`function_call_*_weight` settings);
//! - `calls` (how many calls were read) and `no_call_expected` (1 when the answer is no call).
//!
//! Rows are scored in parallel; the work per row is linear in its completion.

mod check;
mod graded;
mod pyvalues;
pub(crate) mod task;

use std::sync::Arc;

use crate::message::{parse_message, FormatSet};
use crate::pyjson::{DumpOptions, Object, Value};
use crate::reward::json_lines::parse_line;
use crate::reward::{parallel, RewardConfig};

pub use check::{is_valid, ModelCall};
pub use task::{FunctionCallTask, TaskError};

/// The columns of a scored row, in order.
pub const DETAIL_KEYS: [&str; 8] = [
    "reward",
    "valid",
    "names",
    "arg_names",
    "values",
    "format",
    "calls",
    "no_call_expected",
];

/// The weighted terms, in the order of [`Details::terms`].
pub const TERM_KEYS: [&str; 5] = ["valid", "names", "arg_names", "values", "format"];

/// One scored row.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Details {
    pub reward: f64,
    pub valid: f64,
    pub names: f64,
    pub arg_names: f64,
    pub values: f64,
    pub format: f64,
    pub calls: f64,
    pub no_call_expected: f64,
}

impl Details {
    pub fn values(&self) -> [f64; 8] {
        [
            self.reward,
            self.valid,
            self.names,
            self.arg_names,
            self.values,
            self.format,
            self.calls,
            self.no_call_expected,
        ]
    }

    pub fn terms(&self) -> [f64; 5] {
        [
            self.valid,
            self.names,
            self.arg_names,
            self.values,
            self.format,
        ]
    }
}

/// What scoring needs besides the rows: the weights, and the call formats to read (which
/// tasks are built with, see [`FunctionCallTask::new`]).
#[derive(Debug, Clone)]
pub struct Settings {
    pub weights: [f64; 5],
    pub dots_to_underscores: bool,
    pub formats: FormatSet,
}

impl Settings {
    pub fn new(config: &RewardConfig, formats: FormatSet) -> Settings {
        Settings {
            weights: [
                config.function_call_valid_weight,
                config.function_call_names_weight,
                config.function_call_arg_names_weight,
                config.function_call_values_weight,
                config.function_call_format_weight,
            ],
            dots_to_underscores: config.function_call_dots_to_underscores,
            formats,
        }
    }
}

/// A row to score: its task (shared by the rows of one prompt) and the model's text.
#[derive(Debug, Clone)]
pub struct Row {
    pub task: Arc<FunctionCallTask>,
    pub completion: String,
}

/// The calls of a completion, and its `format` term.
fn read_calls(task: &FunctionCallTask, completion: &str) -> (Vec<ModelCall>, f64) {
    let parsed = parse_message(completion, &task.parse_options);
    let known = parsed.calls.iter().filter(|c| !c.unknown_tool).count();
    let blocks = parsed.calls.len() + parsed.refused;
    let format = if blocks == 0 {
        1.0
    } else {
        known as f64 / blocks as f64
    };
    let calls = parsed
        .calls
        .into_iter()
        .map(|c| ModelCall {
            name: c.name,
            args: c.arguments,
        })
        .collect();
    (calls, format)
}

/// Scores one completion against its task.
pub fn score(settings: &Settings, task: &FunctionCallTask, completion: &str) -> Details {
    let (calls, format) = read_calls(task, completion);
    let valid = if is_valid(task, &calls, settings.dots_to_underscores) {
        1.0
    } else {
        0.0
    };
    // A valid answer pairs every expected call with a call that passes it, so it earns
    // every graded term in full (a pair scores 1 on both exactly when the call passes).
    let g = if valid == 1.0 {
        graded::Graded {
            names: 1.0,
            arg_names: 1.0,
            values: 1.0,
        }
    } else {
        graded::graded(task, &calls, settings.dots_to_underscores)
    };
    let mut details = Details {
        reward: 0.0,
        valid,
        names: g.names,
        arg_names: g.arg_names,
        values: g.values,
        format,
        calls: calls.len() as f64,
        no_call_expected: if task.expected.is_empty() { 1.0 } else { 0.0 },
    };
    details.reward = details
        .terms()
        .iter()
        .zip(settings.weights)
        .map(|(term, weight)| term * weight)
        .sum();
    details
}

/// Scores rows on up to `threads` threads, in order.
pub fn score_rows(settings: &Settings, rows: &[Row], threads: usize) -> Vec<Details> {
    parallel::map_indices(rows.len(), threads, |i| {
        score(settings, &rows[i].task, &rows[i].completion)
    })
}

/// A JSON line read as a row: `tools`, `ground_truth` and `completion`.
pub fn row_of_record(record: &Object, formats: FormatSet) -> Result<Row, String> {
    let completion = match record.get("completion") {
        Some(Value::Str(text)) => text.clone(),
        Some(other) => {
            return Err(format!(
                "field \"completion\": expected a string, got {}",
                other.type_name()
            ))
        }
        None => return Err("field \"completion\": missing (expected a string)".to_string()),
    };
    let Some(truth) = record.get("ground_truth") else {
        return Err("field \"ground_truth\": missing (expected a list of {function name: {argument: [acceptable values]}}, [] for no call)".to_string());
    };
    let tools = record.get("tools").unwrap_or(&Value::Null);
    let task = FunctionCallTask::new(tools, truth, formats).map_err(|e| e.to_string())?;
    Ok(Row {
        task: Arc::new(task),
        completion,
    })
}

/// One JSON line scored: the record's text with `reward` and `details` added (as
/// `json.dumps(record, ensure_ascii=False)` writes it) and its details; or why the line
/// cannot be scored. `None` for a blank line.
pub type LineOutcome = Option<Result<(String, Details), String>>;

fn score_line(settings: &Settings, line: &[u8], render: bool) -> LineOutcome {
    let value = match parse_line(line) {
        Ok(Some(value)) => value,
        Ok(None) => return None,
        Err(message) => return Some(Err(message)),
    };
    let Value::Object(mut record) = value else {
        return Some(Err(format!(
            "expected a JSON object, got {}",
            value.type_name()
        )));
    };
    let row = match row_of_record(&record, settings.formats) {
        Ok(row) => row,
        Err(message) => return Some(Err(message)),
    };
    let details = score(settings, &row.task, &row.completion);
    if !render {
        return Some(Ok((String::new(), details)));
    }
    record.insert("reward".to_string(), Value::Float(details.reward));
    let detail_object = Object::from_pairs(
        DETAIL_KEYS
            .iter()
            .zip(details.values())
            .skip(1)
            .map(|(k, v)| (k.to_string(), Value::Float(v)))
            .collect(),
    );
    record.insert("details".to_string(), Value::Object(detail_object));
    let text = Value::Object(record).to_json_string_with(&DumpOptions::python_default());
    Some(Ok((text, details)))
}

/// Scores JSON lines on up to `threads` threads, in order; without `render`, the output
/// texts are left empty.
pub fn score_lines<L: AsRef<[u8]> + Sync>(
    settings: &Settings,
    lines: &[L],
    threads: usize,
    render: bool,
) -> Vec<LineOutcome> {
    parallel::map_indices(lines.len(), threads, |i| {
        score_line(settings, lines[i].as_ref(), render)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pyjson::{parse, ParseOptions};

    fn v(text: &str) -> Value {
        parse(text, &ParseOptions::python()).unwrap_or(Value::Null)
    }

    fn settings() -> Settings {
        Settings::new(&RewardConfig::default(), FormatSet::all())
    }

    const TOOLS: &str = r#"[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}}}]"#;

    fn task(truth: &str) -> FunctionCallTask {
        FunctionCallTask::new(&v(TOOLS), &v(truth), FormatSet::all()).unwrap_or_default()
    }

    #[test]
    fn a_right_hermes_call_is_valid_and_earns_every_term() {
        let t = task(r#"[{"get_weather":{"city":["Paris"],"days":[3,""]}}]"#);
        let d = score(
            &settings(),
            &t,
            "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"paris\"}}</tool_call>",
        );
        assert_eq!(d.valid, 1.0);
        assert_eq!(
            (d.names, d.arg_names, d.values, d.format, d.calls),
            (1.0, 1.0, 1.0, 1.0, 1.0)
        );
        assert!((d.reward - 2.0).abs() < 1e-12);
    }

    #[test]
    fn calls_are_read_in_other_families_formats() {
        let t = task(r#"[{"get_weather":{"city":["Paris"]}}]"#);
        for text in [
            "[get_weather(city='Paris')]",
            "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]",
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
        ] {
            assert_eq!(score(&settings(), &t, text).valid, 1.0, "{text}");
        }
        let hermes_only = FunctionCallTask::new(
            &v(TOOLS),
            &v(r#"[{"get_weather":{"city":["Paris"]}}]"#),
            [crate::message::Format::Hermes].into_iter().collect(),
        )
        .unwrap_or_default();
        let pythonic = score(&settings(), &hermes_only, "[get_weather(city='Paris')]");
        assert_eq!(pythonic.calls, 0.0);
    }

    #[test]
    fn a_refused_block_costs_its_share_of_the_format_term() {
        let t = task(r#"[{"get_weather":{"city":["Paris"]}}]"#);
        let d = score(
            &settings(),
            &t,
            "<tool_call>{\"name\": \"get_weather\", </tool_call>",
        );
        assert_eq!((d.valid, d.format), (0.0, 0.0));
        let good = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>";
        let d = score(
            &settings(),
            &t,
            &format!("{good}{good}<tool_call>{{</tool_call>"),
        );
        assert_eq!((d.calls, d.format), (2.0, 2.0 / 3.0));
        // Three calls asked for, the third botched: a third of the format weight below
        // leaving the third out, no more.
        let three = task(
            r#"[{"get_weather":{"city":["Paris"]}},{"get_weather":{"city":["Rome"]}},{"get_weather":{"city":["Oslo"]}}]"#,
        );
        let rome = good.replace("Paris", "Rome");
        let left_out = score(&settings(), &three, &format!("{good}{rome}"));
        let botched = score(
            &settings(),
            &three,
            &format!("{good}{rome}<tool_call>{{\"name\"</tool_call>"),
        );
        let share = settings().weights[4] / 3.0;
        assert!(
            (left_out.reward - botched.reward - share).abs() < 1e-9,
            "{botched:?} {left_out:?}"
        );
    }

    #[test]
    fn no_call_is_the_right_answer_when_none_is_expected() {
        let t = task("[]");
        let d = score(&settings(), &t, "I cannot help with that.");
        assert_eq!((d.valid, d.no_call_expected, d.calls), (1.0, 1.0, 0.0));
        let d = score(
            &settings(),
            &t,
            "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"x\"}}</tool_call>",
        );
        assert_eq!((d.valid, d.calls), (0.0, 1.0));
    }

    #[test]
    fn weights_come_from_the_settings() {
        let config = RewardConfig {
            function_call_valid_weight: 0.0,
            function_call_format_weight: 0.0,
            ..RewardConfig::default()
        };
        let s = Settings::new(&config, FormatSet::all());
        let t = task(r#"[{"get_weather":{"city":["Paris"]}}]"#);
        let d = score(&s, &t, "[get_weather(city='Rome')]");
        assert!((d.reward - (0.2 + 0.2 + 0.0)).abs() < 1e-12, "{}", d.reward);
    }

    #[test]
    fn lines_are_scored_or_refused_with_a_reason() {
        let lines = [
            format!(
                r#"{{"tools":{TOOLS},"ground_truth":[{{"get_weather":{{"city":["Paris"]}}}}],"completion":"[get_weather(city='Paris')]","id":7}}"#
            ),
            "   ".to_string(),
            r#"{"tools":[],"completion":"x"}"#.to_string(),
            "{not json".to_string(),
            r#"{"tools":[],"ground_truth":[],"completion":3}"#.to_string(),
        ];
        let out = score_lines(&settings(), &lines, 2, true);
        let Some(Ok((text, details))) = &out[0] else {
            panic!("line 0 not scored: {:?}", out[0]);
        };
        assert_eq!(details.valid, 1.0);
        assert!(
            text.starts_with("{\"tools\": [") && text.contains("\"id\": 7, \"reward\": "),
            "{text}"
        );
        assert!(text.ends_with("\"no_call_expected\": 0.0}}"));
        assert!(out[1].is_none());
        let reasons: Vec<String> = out[2..]
            .iter()
            .map(|o| match o {
                Some(Err(reason)) => reason.clone(),
                _ => String::new(),
            })
            .collect();
        assert!(reasons[0].contains("ground_truth"));
        assert!(reasons[1].contains("invalid JSON"));
        assert!(reasons[2].contains("completion"));
    }

    #[test]
    fn a_megabyte_of_calls_scores_in_linear_time() {
        let t = task(r#"[{"get_weather":{"city":["Paris"]}},{"get_weather":{"city":["Rome"]}}]"#);
        let one = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>";
        let d = score(&settings(), &t, &one.repeat(1_000_000 / one.len()));
        assert_eq!(d.valid, 0.0);
        assert!(d.calls > 10_000.0);
        crate::linear::assert_linear("calls", 3_000, |n| {
            score(&settings(), &t, &one.repeat(n));
        });
    }

    #[test]
    fn a_megabyte_argument_or_argument_list_scores_in_linear_time() {
        let t = FunctionCallTask::new(
            &v(r#"[{"name":"f","parameters":{"properties":{"l":{"type":"array","items":{"type":"string"}}}}}]"#),
            &v(r#"[{"f":{"l":[["a","b"],""]}}]"#),
            FormatSet::all(),
        )
        .unwrap_or_default();
        let long_list = |n: usize| {
            let items = vec!["\"A b\""; n].join(",");
            format!(
                "<tool_call>{{\"name\": \"f\", \"arguments\": {{\"l\": [{items}]}}}}</tool_call>"
            )
        };
        let many_args = |n: usize| {
            let args: Vec<String> = (0..n).map(|i| format!("\"a{i}\": {i}")).collect();
            format!(
                "<tool_call>{{\"name\": \"f\", \"arguments\": {{{}}}}}</tool_call>",
                args.join(", ")
            )
        };
        for (what, text) in [
            ("a long list", &long_list as &dyn Fn(usize) -> String),
            ("many arguments", &many_args),
        ] {
            let d = score(&settings(), &t, &text(60_000));
            assert_eq!((d.valid, d.calls), (0.0, 1.0));
            crate::linear::assert_linear(what, 20_000, |n| {
                score(&settings(), &t, &text(n));
            });
        }
    }
}
