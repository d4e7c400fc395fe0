//! The checker's verdict on a list of calls, with the rules of BFCL's AST checker for
//! Python (`ast_checker.py` in berkeley-function-call-leaderboard):
//!
//! - no expected call: valid iff no call was made (irrelevance);
//! - otherwise as many calls as expected; each expected call, in order, takes the first
//!   not-yet-taken call that passes it (greedy, as BFCL's parallel checker does, not an
//!   optimal matching); one expected call is checked against the one call;
//! - a call passes when its name is the function's (dots as underscores when asked), every
//!   required parameter is given, every given argument is a declared parameter and in the
//!   answer, has the declared type (an `int` for a `float`; a value of the answer's own type
//!   counts as a "variable") and an acceptable value, and every argument left out may be;
//! - values: strings standardised (see [`standardize`]), lists item by item with their
//!   strings standardised, dicts key by key, lists of dicts dict by dict, anything else by
//!   Python's `==`.
//!
//! Where BFCL would raise (an unknown type name, an expected function no schema describes),
//! the type is not checked or the call does not pass.

use std::borrow::Cow;

use crate::pyjson::{Object, Value};

use super::pyvalues::{
    contains, indexable_items, is_omit_marker, py_eq, py_type, standardize, standardized, PyType,
};
use super::task::{ExpectedCall, FunctionCallTask, FunctionSpec, ParamType, SchemaType};

/// One call the model made, by name with its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCall {
    pub name: String,
    pub args: Object,
}

/// BFCL's verdict on `calls`.
pub fn is_valid(task: &FunctionCallTask, calls: &[ModelCall], dots_to_underscores: bool) -> bool {
    let expected = &task.expected;
    if expected.is_empty() {
        return calls.is_empty();
    }
    if calls.len() != expected.len() {
        return false;
    }
    if let [only] = expected.as_slice() {
        // One function offered (BFCL's simple categories): its schema, whatever the answer
        // names; several: the one the answer names.
        let spec = task
            .function(&only.name)
            .or_else(|| task.functions.first().filter(|_| task.functions.len() == 1));
        return spec.is_some_and(|spec| call_passes(spec, &calls[0], only, dots_to_underscores));
    }
    let mut taken = vec![false; calls.len()];
    for answer in expected {
        let Some(spec) = task.function(&answer.name) else {
            return false;
        };
        let found = (0..calls.len())
            .find(|&j| !taken[j] && call_passes(spec, &calls[j], answer, dots_to_underscores));
        match found {
            Some(j) => taken[j] = true,
            None => return false,
        }
    }
    true
}

/// The name a call must have for `spec`.
pub fn expected_name(spec_name: &str, dots_to_underscores: bool) -> Cow<'_, str> {
    if dots_to_underscores && spec_name.contains('.') {
        Cow::Owned(spec_name.replace('.', "_"))
    } else {
        Cow::Borrowed(spec_name)
    }
}

/// Does `call` pass `answer` for the function `spec`?
pub fn call_passes(
    spec: &FunctionSpec,
    call: &ModelCall,
    answer: &ExpectedCall,
    dots_to_underscores: bool,
) -> bool {
    if call.name != expected_name(&spec.name, dots_to_underscores) {
        return false;
    }
    if !spec.required.iter().all(|r| call.args.contains_key(r)) {
        return false;
    }
    for (param, value) in call.args.iter() {
        let (Some(declared), Some(accepted)) = (spec.param(param), answer.accepted(param)) else {
            return false;
        };
        if !value_passes(declared, value, accepted) {
            return false;
        }
    }
    answer
        .args
        .iter()
        .all(|(param, accepted)| call.args.contains_key(param) || !ExpectedCall::needs(accepted))
}

/// The Python type a schema type is compared with.
fn python_type(t: SchemaType) -> PyType {
    match t {
        SchemaType::Str => PyType::Str,
        SchemaType::Int => PyType::Int,
        SchemaType::Float => PyType::Float,
        SchemaType::Bool => PyType::Bool,
        SchemaType::List => PyType::List,
        SchemaType::Dict => PyType::Dict,
    }
}

/// The type of the first acceptable value that is not the omission marker.
fn answer_type(accepted: &[Value]) -> Option<PyType> {
    accepted.iter().find(|v| !is_omit_marker(v)).map(py_type)
}

/// Does one argument's value pass: its type, then its value?
pub fn value_passes(declared: &ParamType, value: &Value, accepted: &[Value]) -> bool {
    // An int where the schema says float is read as that float.
    let converted;
    let value = match value {
        Value::Int(i) if declared.float => {
            converted = Value::Float(*i as f64);
            &converted
        }
        Value::BigInt(text) if declared.float => {
            converted = Value::Float(text.parse::<f64>().unwrap_or(f64::INFINITY));
            &converted
        }
        other => other,
    };
    let Some(outer) = declared.outer else {
        return contains(accepted, value);
    };
    let Some(is_variable) = type_passes(outer, declared.items, value, accepted) else {
        return false;
    };
    if !is_variable {
        match (outer, declared.items) {
            (SchemaType::Dict, _) => return dict_passes(value, accepted),
            (SchemaType::List, Some(SchemaType::Dict)) => {
                return list_of_dicts_passes(value, accepted)
            }
            (SchemaType::Str, _) => return string_passes(value, accepted),
            (SchemaType::List, _) => return list_passes(value, accepted),
            _ => {}
        }
    }
    contains(accepted, value)
}

/// The type check: `None` when it fails, else whether the value is a "variable" (its type
/// is the answer's, not the schema's).
fn type_passes(
    outer: SchemaType,
    items: Option<SchemaType>,
    value: &Value,
    accepted: &[Value],
) -> Option<bool> {
    let expected = python_type(outer);
    let answer = answer_type(accepted);
    let is_variable = answer.is_some_and(|t| t != expected);
    let actual = py_type(value);
    if actual == expected {
        let Some(inner) = items else {
            return Some(is_variable);
        };
        let inner = python_type(inner);
        let values: &[Value] = match value {
            Value::Array(values) => values,
            _ => &[],
        };
        // Each acceptable value that is a list must type every item; any other acceptable
        // value (the omission marker, a variable name) passes outright.
        let passes = accepted.iter().any(|candidate| match candidate {
            Value::Array(options) => values.iter().all(|item| {
                let t = py_type(item);
                t == inner || answer_type(options) == Some(t)
            }),
            _ => true,
        });
        return passes.then_some(is_variable);
    }
    (answer == Some(actual)).then_some(true)
}

fn string_passes(value: &Value, accepted: &[Value]) -> bool {
    let Value::Str(text) = value else {
        return false;
    };
    let mine = standardize(text);
    accepted
        .iter()
        .any(|a| matches!(a, Value::Str(s) if standardize(s) == mine))
}

fn list_passes(value: &Value, accepted: &[Value]) -> bool {
    let Value::Array(items) = value else {
        return false;
    };
    let mine: Vec<Value> = items.iter().map(standardized).collect();
    accepted.iter().any(|candidate| {
        indexable_items(candidate).is_some_and(|options| {
            options.len() == mine.len()
                && options
                    .iter()
                    .zip(&mine)
                    .all(|(o, m)| py_eq(&standardized(o), m))
        })
    })
}

/// A dict against acceptable dicts (each `{key: [acceptable values]}`); the omission marker
/// is skipped.
fn dict_passes(value: &Value, accepted: &[Value]) -> bool {
    let Value::Object(given) = value else {
        return false;
    };
    accepted
        .iter()
        .filter(|a| !is_omit_marker(a))
        .any(|candidate| one_dict_passes(given, candidate))
}

fn one_dict_passes(given: &Object, candidate: &Value) -> bool {
    let Value::Object(answer) = candidate else {
        return false;
    };
    for (key, value) in given.iter() {
        let Some(options) = answer.get(key).and_then(indexable_items) else {
            return false;
        };
        let mine = standardized(value);
        if !options.iter().any(|o| py_eq(&standardized(o), &mine)) {
            return false;
        }
    }
    answer.iter().all(|(key, options)| {
        given.contains_key(key)
            || match options {
                Value::Array(options) => options.iter().any(is_omit_marker),
                // `"" in text` holds for any text.
                Value::Str(_) => true,
                _ => false,
            }
    })
}

fn list_of_dicts_passes(value: &Value, accepted: &[Value]) -> bool {
    let Value::Array(given) = value else {
        return false;
    };
    accepted.iter().any(|candidate| match candidate {
        Value::Array(answers) => {
            answers.len() == given.len()
                && given.iter().zip(answers).all(|(g, a)| match g {
                    Value::Object(g) => one_dict_passes(g, a),
                    _ => false,
                })
        }
        Value::Str(text) => given.is_empty() && text.is_empty(),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pyjson::{parse, ParseOptions};

    fn v(text: &str) -> Value {
        parse(text, &ParseOptions::python()).unwrap_or(Value::Null)
    }

    fn task(tools: &str, truth: &str) -> FunctionCallTask {
        FunctionCallTask::new(&v(tools), &v(truth), crate::message::FormatSet::all())
            .unwrap_or_default()
    }

    fn calls(text: &str) -> Vec<ModelCall> {
        let Value::Array(items) = v(text) else {
            return Vec::new();
        };
        items
            .into_iter()
            .filter_map(|item| match item {
                Value::Object(o) => o.into_pairs().into_iter().next(),
                _ => None,
            })
            .map(|(name, args)| ModelCall {
                name,
                args: match args {
                    Value::Object(o) => o,
                    _ => Object::new(),
                },
            })
            .collect()
    }

    const AREA: &str = r#"[{"name":"area","parameters":{"type":"dict","properties":{
        "base":{"type":"integer"},"height":{"type":"float"},"unit":{"type":"string"},
        "tags":{"type":"array","items":{"type":"string"}},"opts":{"type":"dict"}},
        "required":["base","height"]}}]"#;
    const AREA_TRUTH: &str = r#"[{"area":{"base":[10],"height":[5.0],"unit":["cm","",
        "centimeters"],"tags":[["A b","c"],""],"opts":[{"k":["v"],"j":["",1]},""]}}]"#;

    fn check(call: &str) -> bool {
        is_valid(&task(AREA, AREA_TRUTH), &calls(call), false)
    }

    #[test]
    fn required_optional_and_extra_arguments() {
        assert!(check(r#"[{"area":{"base":10,"height":5.0}}]"#));
        assert!(!check(r#"[{"area":{"base":10}}]"#));
        assert!(!check(
            r#"[{"area":{"base":10,"height":5.0,"color":"red"}}]"#
        ));
        assert!(!check(r#"[{"volume":{"base":10,"height":5.0}}]"#));
        assert!(!check(r#"[]"#));
    }

    #[test]
    fn int_passes_for_float_but_not_float_for_int() {
        assert!(check(r#"[{"area":{"base":10,"height":5}}]"#));
        assert!(!check(r#"[{"area":{"base":10.0,"height":5.0}}]"#));
        assert!(!check(r#"[{"area":{"base":true,"height":5.0}}]"#));
    }

    #[test]
    fn strings_lists_and_dicts_compare_as_the_checker_does() {
        assert!(check(r#"[{"area":{"base":10,"height":5,"unit":" C-M."}}]"#));
        assert!(!check(r#"[{"area":{"base":10,"height":5,"unit":"mm"}}]"#));
        assert!(check(
            r#"[{"area":{"base":10,"height":5,"tags":["a_B","C"]}}]"#
        ));
        assert!(!check(
            r#"[{"area":{"base":10,"height":5,"tags":["c","a b"]}}]"#
        ));
        assert!(check(
            r#"[{"area":{"base":10,"height":5,"opts":{"k":"V"}}}]"#
        ));
        assert!(check(
            r#"[{"area":{"base":10,"height":5,"opts":{"k":"v","j":1.0}}}]"#
        ));
        assert!(!check(
            r#"[{"area":{"base":10,"height":5,"opts":{"j":1}}}]"#
        ));
        assert!(!check(
            r#"[{"area":{"base":10,"height":5,"opts":{"k":"v","z":1}}}]"#
        ));
    }

    #[test]
    fn a_value_of_the_answers_type_is_a_variable_compared_exactly() {
        let t = task(
            r#"[{"name":"f","parameters":{"properties":{"n":{"type":"integer"}},"required":["n"]}}]"#,
            r#"[{"f":{"n":["count"]}}]"#,
        );
        assert!(is_valid(&t, &calls(r#"[{"f":{"n":"count"}}]"#), false));
        // A variable is not standardised.
        assert!(!is_valid(&t, &calls(r#"[{"f":{"n":"Count"}}]"#), false));
        assert!(!is_valid(&t, &calls(r#"[{"f":{"n":3}}]"#), false));
    }

    const PARALLEL: &str = r#"[{"name":"f","parameters":{"properties":{"x":{"type":"integer"}},"required":["x"]}},
        {"name":"g","parameters":{"properties":{"y":{"type":"string"}},"required":[]}}]"#;

    #[test]
    fn parallel_calls_match_in_any_order() {
        let t = task(
            PARALLEL,
            r#"[{"f":{"x":[1]}},{"f":{"x":[2]}},{"g":{"y":["a",""]}}]"#,
        );
        let ok = calls(r#"[{"g":{}},{"f":{"x":2}},{"f":{"x":1}}]"#);
        assert!(is_valid(&t, &ok, false));
        let dup = calls(r#"[{"g":{}},{"f":{"x":1}},{"f":{"x":1}}]"#);
        assert!(!is_valid(&t, &dup, false));
        assert!(!is_valid(&t, &ok[..2], false));
    }

    #[test]
    fn parallel_matching_is_greedy_like_the_checker() {
        // The first answer takes the first call it accepts even when a later answer needed
        // it: an optimal matching would pass, the checker does not.
        let t = task(PARALLEL, r#"[{"f":{"x":[1,2]}},{"f":{"x":[1]}}]"#);
        assert!(!is_valid(
            &t,
            &calls(r#"[{"f":{"x":1}},{"f":{"x":2}}]"#),
            false
        ));
        assert!(is_valid(
            &t,
            &calls(r#"[{"f":{"x":2}},{"f":{"x":1}}]"#),
            false
        ));
    }

    #[test]
    fn no_expected_call_is_valid_only_without_calls() {
        let t = task(PARALLEL, "[]");
        assert!(is_valid(&t, &[], false));
        assert!(!is_valid(&t, &calls(r#"[{"g":{}}]"#), false));
    }

    #[test]
    fn dotted_names_compare_in_underscore_form_when_asked() {
        let t = task(
            r#"[{"name":"math.hypot","parameters":{"properties":{}}}]"#,
            r#"[{"math.hypot":{}}]"#,
        );
        assert!(is_valid(&t, &calls(r#"[{"math.hypot":{}}]"#), false));
        assert!(!is_valid(&t, &calls(r#"[{"math_hypot":{}}]"#), false));
        assert!(is_valid(&t, &calls(r#"[{"math_hypot":{}}]"#), true));
        assert!(!is_valid(&t, &calls(r#"[{"math.hypot":{}}]"#), true));
    }

    #[test]
    fn lists_of_dicts_compare_dict_by_dict() {
        let t = task(
            r#"[{"name":"f","parameters":{"properties":{"l":{"type":"array","items":{"type":"dict"}}}}}]"#,
            r#"[{"f":{"l":[[{"a":["X"]},{"a":[1]}]]}}]"#,
        );
        assert!(is_valid(
            &t,
            &calls(r#"[{"f":{"l":[{"a":"x"},{"a":1}]}}]"#),
            false
        ));
        assert!(!is_valid(
            &t,
            &calls(r#"[{"f":{"l":[{"a":1},{"a":"x"}]}}]"#),
            false
        ));
    }
}
