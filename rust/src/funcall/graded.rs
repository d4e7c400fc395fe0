//! The graded terms: how close a wrong answer came, for a denser signal than the verdict.
//!
//! Each expected call, in order, is paired with the not-yet-paired call of its function
//! that scores best (ties: the earliest). With `n` = the larger of the expected and the
//! made call counts (so extra calls cost as missing ones do):
//!
//! - `names`: paired calls / `n`;
//! - `arg_names`: per pair, the given arguments the answer names over the union of the
//!   given and the needed ones (the schema's required plus the answer's not-omittable),
//!   summed over pairs / `n`;
//! - `values`: the same with only the given arguments whose value passes the checker.
//!
//! With no expected call, every term is 1 without calls and 0 with any. The work is one
//! pass over the calls per expected call: linear in the output.

use super::check::{expected_name, value_passes, ModelCall};
use super::task::{ExpectedCall, FunctionCallTask, FunctionSpec};

/// The graded terms of one row, each in `[0, 1]`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Graded {
    pub names: f64,
    pub arg_names: f64,
    pub values: f64,
}

pub fn graded(task: &FunctionCallTask, calls: &[ModelCall], dots_to_underscores: bool) -> Graded {
    let expected = &task.expected;
    if expected.is_empty() {
        let none = if calls.is_empty() { 1.0 } else { 0.0 };
        return Graded {
            names: none,
            arg_names: none,
            values: none,
        };
    }
    let n = expected.len().max(calls.len()) as f64;
    let mut taken = vec![false; calls.len()];
    let mut total = Graded::default();
    for answer in expected {
        let spec = task.function(&answer.name);
        let name = match spec {
            Some(spec) => expected_name(&spec.name, dots_to_underscores),
            None => std::borrow::Cow::Borrowed(answer.name.as_str()),
        };
        let mut best: Option<(usize, (f64, f64))> = None;
        for (j, call) in calls.iter().enumerate() {
            if taken[j] || call.name != name {
                continue;
            }
            let score = pair_scores(spec, call, answer);
            if best.is_none_or(|(_, b)| score.0 + score.1 > b.0 + b.1) {
                best = Some((j, score));
            }
        }
        if let Some((j, (arg_names, values))) = best {
            taken[j] = true;
            total.names += 1.0;
            total.arg_names += arg_names;
            total.values += values;
        }
    }
    Graded {
        names: total.names / n,
        arg_names: total.arg_names / n,
        values: total.values / n,
    }
}

/// `(arg_names, values)` of one call paired with one expected call.
fn pair_scores(spec: Option<&FunctionSpec>, call: &ModelCall, answer: &ExpectedCall) -> (f64, f64) {
    let mut named = 0usize;
    let mut right = 0usize;
    for (param, value) in call.args.iter() {
        let Some(accepted) = answer.accepted(param) else {
            continue;
        };
        named += 1;
        let declared = spec.and_then(|s| s.param(param));
        if declared.is_some_and(|d| value_passes(d, value, accepted)) {
            right += 1;
        }
    }
    let missing_required = spec.map_or(0, |s| {
        s.required
            .iter()
            .filter(|r| !call.args.contains_key(r) && answer.accepted(r).is_none())
            .count()
    });
    let missing_needed = answer
        .args
        .iter()
        .filter(|(param, accepted)| !call.args.contains_key(param) && ExpectedCall::needs(accepted))
        .count();
    let union = call.args.len() + missing_required + missing_needed;
    if union == 0 {
        return (1.0, 1.0);
    }
    (named as f64 / union as f64, right as f64 / union as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pyjson::{parse, Object, ParseOptions, Value};

    fn v(text: &str) -> Value {
        parse(text, &ParseOptions::python()).unwrap_or(Value::Null)
    }

    fn call(name: &str, args: &str) -> ModelCall {
        ModelCall {
            name: name.to_string(),
            args: match v(args) {
                Value::Object(o) => o,
                _ => Object::new(),
            },
        }
    }

    fn task() -> FunctionCallTask {
        FunctionCallTask::new(
            &v(
                r#"[{"name":"f","parameters":{"properties":{"a":{"type":"integer"},
                "b":{"type":"string"},"c":{"type":"string"}},"required":["a","b"]}},
                {"name":"g","parameters":{"properties":{}}}]"#,
            ),
            &v(r#"[{"f":{"a":[1],"b":["x"],"c":["y",""]}}]"#),
            crate::message::FormatSet::all(),
        )
        .unwrap_or_default()
    }

    #[test]
    fn a_right_call_scores_one_everywhere() {
        let g = graded(&task(), &[call("f", r#"{"a":1,"b":"x"}"#)], false);
        assert_eq!((g.names, g.arg_names, g.values), (1.0, 1.0, 1.0));
        // The scorer skips the graded pass for valid answers: that is only right if every
        // valid answer grades 1 everywhere.
        let optional = [call("f", r#"{"a":1,"b":"X","c":"y"}"#)];
        assert!(super::super::check::is_valid(&task(), &optional, false));
        let g = graded(&task(), &optional, false);
        assert_eq!((g.names, g.arg_names, g.values), (1.0, 1.0, 1.0));
    }

    #[test]
    fn a_wrong_value_keeps_the_names_and_loses_part_of_the_values() {
        let g = graded(&task(), &[call("f", r#"{"a":2,"b":"x"}"#)], false);
        assert_eq!((g.names, g.arg_names, g.values), (1.0, 1.0, 0.5));
    }

    #[test]
    fn missing_and_extra_arguments_cost_argument_names() {
        let g = graded(&task(), &[call("f", r#"{"a":1,"z":0}"#)], false);
        // given {a, z}, needed {a, b}: union 3, named 1, right 1.
        assert!((g.arg_names - 1.0 / 3.0).abs() < 1e-12);
        assert!((g.values - 1.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn extra_calls_and_wrong_functions_dilute_names() {
        let g = graded(
            &task(),
            &[call("g", "{}"), call("f", r#"{"a":1,"b":"x"}"#)],
            false,
        );
        assert_eq!((g.names, g.arg_names, g.values), (0.5, 0.5, 0.5));
        let g = graded(&task(), &[call("g", "{}")], false);
        assert_eq!((g.names, g.arg_names, g.values), (0.0, 0.0, 0.0));
    }

    #[test]
    fn no_call_expected_scores_all_or_nothing() {
        let none = FunctionCallTask::new(
            &v(r#"[{"name":"g"}]"#),
            &v("[]"),
            crate::message::FormatSet::all(),
        )
        .unwrap_or_default();
        assert_eq!(graded(&none, &[], false).values, 1.0);
        assert_eq!(graded(&none, &[call("g", "{}")], false).names, 0.0);
    }
}
