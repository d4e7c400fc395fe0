//! The built-in tools, run on a completion's own tool calls so that a raw completion can be
//! scored without a rollout: the same events the trainer's tool environment records.
//!
//! `calculate_math` (and its aliases `calculator`, `python_math`) evaluates with the safe
//! evaluator; `unit_converter` knows km/miles, kg/pounds, meters/feet and
//! Celsius/Fahrenheit; `get_current_time` answers from a fixed table, so scoring is
//! deterministic.

use crate::expr;
use crate::numfmt::format_number;
use crate::pychar::{lower as py_lower, strip as py_strip};
use crate::pyjson::{parse, Object, ParseOptions, Value};
use crate::reward::pyvalue::{get, py_float, py_str, write_str_repr};
use crate::reward::record::ToolEvent;
use crate::toolcall::{parse_tool_calls, ToolCall};

/// The tools offered when a row names none.
pub const DEFAULT_TOOLS: [&str; 3] = ["calculate_math", "unit_converter", "get_current_time"];

/// Allowed when the offered specs carry no usable names (the environment's own list).
const FALLBACK_TOOLS: [&str; 4] = [
    "calculate_math",
    "unit_converter",
    "get_current_time",
    "python_math",
];

const FIXED_TIMES: [(&str, &str); 6] = [
    ("Asia/Shanghai", "2025-03-07 14:30:00"),
    ("America/New_York", "2025-03-07 01:30:00"),
    ("Europe/London", "2025-03-07 06:30:00"),
    ("Asia/Tokyo", "2025-03-07 15:30:00"),
    ("Europe/Paris", "2025-03-07 07:30:00"),
    ("Australia/Sydney", "2025-03-07 17:30:00"),
];
const DEFAULT_TIMEZONE: &str = "Asia/Shanghai";

const UNIT_FACTORS: [(&str, f64); 6] = [
    ("km_miles", 0.621371),
    ("miles_km", 1.60934),
    ("kg_pounds", 2.20462),
    ("pounds_kg", 0.453592),
    ("meters_feet", 3.28084),
    ("feet_meters", 0.3048),
];

/// How many characters of an exception message the environment keeps.
const ERROR_CHARS: usize = 200;

/// The names a row's tool specs allow: each spec's `function.name` (or `name`, or the spec
/// itself when it is a string). No specs means the default tools.
pub fn allowed_names(tools: Option<&[Value]>) -> Vec<String> {
    let Some(specs) = tools.filter(|t| !t.is_empty()) else {
        return DEFAULT_TOOLS.iter().map(|s| s.to_string()).collect();
    };
    let names: Vec<String> = specs
        .iter()
        .filter_map(|spec| match spec {
            Value::Str(name) => Some(name.as_str()),
            Value::Object(_) => match get(spec, "function") {
                Some(function @ Value::Object(_)) => get(function, "name").and_then(Value::as_str),
                _ => get(spec, "name").and_then(Value::as_str),
            },
            _ => None,
        })
        .filter(|name| !name.is_empty())
        .map(str::to_string)
        .collect();
    if names.is_empty() {
        FALLBACK_TOOLS.iter().map(|s| s.to_string()).collect()
    } else {
        names
    }
}

/// Parses the completion's tool calls and runs each one, returning the tool events.
pub fn run_completion_tools(completion: &str, allowed: &[String]) -> Vec<ToolEvent> {
    parse_tool_calls(completion)
        .into_iter()
        .map(|call| execute_call(call, allowed))
        .collect()
}

/// Runs one parsed call: `{ok, name, args, result, canonical}` as the environment records
/// it, with `{"error": ...}` as the result of a call that failed.
pub fn execute_call(call: ToolCall, allowed: &[String]) -> ToolEvent {
    let name = if call.name.is_truthy() {
        call.name
    } else {
        Value::Str(String::new())
    };
    let args = match call.arguments {
        Value::Str(text) => match parse(&text, &ParseOptions::python()) {
            Ok(obj @ Value::Object(_)) => obj,
            Ok(_) => Value::Object(Object::new()),
            Err(_) => object(vec![("expression", Value::Str(text))]),
        },
        obj @ Value::Object(_) => obj,
        _ => Value::Object(Object::new()),
    };
    let outcome = if !name.is_truthy() {
        Err("bad tool call".to_string())
    } else {
        match name.as_str().filter(|n| allowed.iter().any(|a| a == n)) {
            None => Err(format!("tool not allowed: {}", py_str(&name))),
            Some(tool) => run_tool(tool, &args).map_err(|e| e.chars().take(ERROR_CHARS).collect()),
        }
    };
    let (ok, result) = match outcome {
        Ok(result) => (true, result),
        Err(message) => (false, object(vec![("error", Value::Str(message))])),
    };
    ToolEvent {
        ok,
        canonical: call.canonical,
        name: Some(name),
        args: Some(args),
        result: Some(result),
    }
}

fn object(pairs: Vec<(&str, Value)>) -> Value {
    Value::Object(Object::from_pairs(
        pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
    ))
}

/// Runs a built-in tool; the error is the message of the exception the tool would raise.
pub fn run_tool(name: &str, args: &Value) -> Result<Value, String> {
    match name {
        "calculate_math" | "calculator" | "python_math" => calculate(args),
        "unit_converter" => convert_units(args),
        "get_current_time" => Ok(current_time(args)),
        other => Err(format!("unknown tool: {other}")),
    }
}

fn calculate(args: &Value) -> Result<Value, String> {
    let expression = get(args, "expression").or_else(|| get(args, "query"));
    let text = expression.map(py_str).unwrap_or_default();
    let text = py_strip(&text);
    if text.is_empty() {
        return Err("missing expression".to_string());
    }
    let value = expr::safe_eval(text).map_err(|e| e.to_string())?;
    let shown = format_number(value).map_err(|e| e.to_string())?;
    Ok(object(vec![
        ("value", Value::Float(value)),
        ("result", Value::Str(shown)),
    ]))
}

/// `args[key]`, or the message of Python's `KeyError`.
fn required<'a>(args: &'a Value, key: &str) -> Result<&'a Value, String> {
    get(args, key).ok_or_else(|| {
        let mut shown = String::new();
        write_str_repr(&mut shown, key);
        shown
    })
}

fn convert_units(args: &Value) -> Result<Value, String> {
    let value = py_float(required(args, "value")?)?;
    let from_unit = py_strip(&py_lower(&py_str(required(args, "from_unit")?))).to_string();
    let to_unit = py_strip(&py_lower(&py_str(required(args, "to_unit")?))).to_string();
    let key = format!("{from_unit}_{to_unit}");
    let converted = match key.as_str() {
        "celsius_fahrenheit" => value * 1.8 + 32.0,
        "fahrenheit_celsius" => (value - 32.0) / 1.8,
        _ => match UNIT_FACTORS.iter().find(|(k, _)| *k == key) {
            Some((_, factor)) => value * factor,
            None => return Err(format!("unsupported conversion: {key}")),
        },
    };
    let shown = format_number(round_to(converted, 6)).map_err(|e| e.to_string())?;
    Ok(object(vec![
        ("value", Value::Float(value)),
        ("from_unit", Value::Str(from_unit)),
        ("to_unit", Value::Str(to_unit)),
        ("result", Value::Str(shown)),
    ]))
}

/// Python's `round(x, digits)` for a float: correctly rounded, ties to even on the exact
/// binary value; infinities and NaN unchanged.
pub fn round_to(x: f64, digits: usize) -> f64 {
    if !x.is_finite() {
        return x;
    }
    format!("{x:.digits$}").parse::<f64>().unwrap_or(x)
}

fn current_time(args: &Value) -> Value {
    let timezone = match get(args, "timezone") {
        Some(v) if v.is_truthy() => py_str(v).into_owned(),
        _ => DEFAULT_TIMEZONE.to_string(),
    };
    let datetime = FIXED_TIMES
        .iter()
        .find(|(zone, _)| *zone == timezone)
        .or_else(|| {
            FIXED_TIMES
                .iter()
                .find(|(zone, _)| *zone == DEFAULT_TIMEZONE)
        })
        .map_or("", |(_, time)| time);
    object(vec![
        ("timezone", Value::Str(timezone)),
        ("datetime", Value::Str(datetime.to_string())),
        ("mode", Value::Str("fixed".to_string())),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event_of(completion: &str) -> Vec<ToolEvent> {
        run_completion_tools(completion, &allowed_names(None))
    }

    fn field<'a>(event: &'a ToolEvent, key: &str) -> &'a Value {
        let value = match key {
            "name" => &event.name,
            "args" => &event.args,
            _ => &event.result,
        };
        value.as_ref().unwrap_or(&Value::Null)
    }

    #[test]
    fn calculate_math_returns_value_and_formatted_result() {
        let events = event_of(
            r#"<tool_call>{"name":"calculate_math","arguments":{"expression":"3*(4+5)"}}</tool_call>"#,
        );
        assert_eq!(events.len(), 1);
        assert!(events[0].ok);
        let result = field(&events[0], "result");
        assert_eq!(get(result, "value"), Some(&Value::Float(27.0)));
        assert_eq!(get(result, "result"), Some(&Value::Str("27".into())));
        assert!(events[0].canonical);
    }

    #[test]
    fn failures_become_error_events() {
        let events = event_of(concat!(
            r#"<tool_call>{"name":"calculate_math","arguments":{"expression":"1/0"}}</tool_call>"#,
            r#"<tool_call>{"name":"calculator","arguments":{"expression":"1+1"}}</tool_call>"#,
            r#"<tool_call>{"arguments":{}}</tool_call>"#,
            r#"<tool_call>{"name":"calculate_math","arguments":{"expression":"1e308*10"}}</tool_call>"#,
            r#"<tool_call>not json</tool_call>"#,
        ));
        assert_eq!(events.len(), 5);
        for event in &events {
            assert!(!event.ok);
            assert!(get(field(event, "result"), "error").is_some());
        }
        // The alias is not offered by default, so the environment refuses it.
        let error = get(field(&events[1], "result"), "error");
        assert_eq!(
            error,
            Some(&Value::Str("tool not allowed: calculator".into()))
        );
        assert_eq!(
            get(field(&events[2], "result"), "error"),
            Some(&Value::Str("bad tool call".into()))
        );
    }

    #[test]
    fn aliases_run_when_offered() {
        let allowed = allowed_names(Some(&[
            Value::Str("calculate_math".into()),
            Value::Str("calculator".into()),
        ]));
        let events = run_completion_tools("calculator(expression=\"2**10\")", &allowed);
        assert_eq!(events.len(), 1);
        assert!(events[0].ok);
        assert!(!events[0].canonical);
    }

    #[test]
    fn unit_converter_rounds_like_python() {
        let args = |v: Value, from: &str, to: &str| {
            object(vec![
                ("value", v),
                ("from_unit", Value::Str(from.into())),
                ("to_unit", Value::Str(to.into())),
            ])
        };
        let out = run_tool("unit_converter", &args(Value::Int(10), " KM ", "miles")).unwrap();
        assert_eq!(get(&out, "result"), Some(&Value::Str("6.21371".into())));
        assert_eq!(get(&out, "from_unit"), Some(&Value::Str("km".into())));
        let out = run_tool(
            "unit_converter",
            &args(Value::Str("100".into()), "celsius", "fahrenheit"),
        );
        assert_eq!(
            get(&out.unwrap(), "result"),
            Some(&Value::Str("212".into()))
        );
        let err = run_tool("unit_converter", &args(Value::Int(1), "km", "parsec")).unwrap_err();
        assert_eq!(err, "unsupported conversion: km_parsec");
        let err = run_tool("unit_converter", &object(vec![])).unwrap_err();
        assert_eq!(err, "'value'");
        assert_eq!(round_to(0.125, 2), 0.12);
        assert_eq!(round_to(2.5e-6, 6), 3e-6);
        assert!(round_to(f64::INFINITY, 6).is_infinite());
    }

    #[test]
    fn time_is_fixed() {
        let out = run_tool(
            "get_current_time",
            &object(vec![("timezone", Value::Str("Asia/Tokyo".into()))]),
        );
        assert_eq!(
            get(&out.unwrap(), "datetime"),
            Some(&Value::Str("2025-03-07 15:30:00".into()))
        );
        let out = run_tool("get_current_time", &object(vec![("timezone", Value::Null)])).unwrap();
        assert_eq!(
            get(&out, "timezone"),
            Some(&Value::Str("Asia/Shanghai".into()))
        );
        let out = run_tool(
            "get_current_time",
            &object(vec![("timezone", Value::Str("Mars".into()))]),
        )
        .unwrap();
        assert_eq!(
            get(&out, "datetime"),
            Some(&Value::Str("2025-03-07 14:30:00".into()))
        );
    }
}
