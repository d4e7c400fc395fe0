//! The strict record check of `agentrl score`: every field the reward reads must have the
//! type the golden reward file gives it, so that a record written wrongly is reported
//! instead of silently scoring as if a field were empty.
//!
//! `score_batch` stays lenient (Python's truthiness, any value printed with `str()`), as the
//! reward itself is; this check only guards files read from outside.

use crate::pyjson::{Object, Value};

const ANSWER: &str = "a string or a finite number";

fn got(value: &Value) -> &'static str {
    value.type_name()
}

fn field_error(field: &str, message: impl std::fmt::Display) -> String {
    format!("field {field:?}: {message}")
}

/// Checks a decoded line; the error names the field and says what was expected.
pub fn check_record(value: &Value) -> Result<(), String> {
    let Value::Object(record) = value else {
        return Err(format!("expected a JSON object, got {}", got(value)));
    };
    match record.get("completion") {
        None => return Err(field_error("completion", "missing (expected a string)")),
        Some(Value::Str(_)) => {}
        Some(other) => {
            return Err(field_error(
                "completion",
                format!("expected a string, got {}", got(other)),
            ))
        }
    }
    check_task(record)?;
    check_gt(record.get("gt"))?;
    if let Some(events) = present(record, "tool_events") {
        check_events(events)?;
    }
    if let Some(flag) = present(record, "unfinished") {
        if !matches!(flag, Value::Bool(_)) {
            let message = format!("expected true or false, got {}", got(flag));
            return Err(field_error("unfinished", message));
        }
    }
    if let Some(tools) = present(record, "tools") {
        check_list_of_objects("tools", tools, "tool specs")?;
    }
    if let Some(config) = present(record, "config") {
        if !config.is_object() {
            let message = format!("expected an object of reward settings, got {}", got(config));
            return Err(field_error("config", message));
        }
    }
    Ok(())
}

/// The field's value unless it is missing or `null` (both mean "not given").
fn present<'a>(record: &'a Object, key: &str) -> Option<&'a Value> {
    record.get(key).filter(|v| **v != Value::Null)
}

/// The task: `messages` (chat messages) or `prompt`/`task` text.
fn check_task(record: &Object) -> Result<(), String> {
    let messages = present(record, "messages");
    let mut has_text = false;
    for key in ["prompt", "task"] {
        if let Some(text) = present(record, key) {
            if !matches!(text, Value::Str(_)) {
                return Err(field_error(
                    key,
                    format!("expected a string, got {}", got(text)),
                ));
            }
            has_text = true;
        }
    }
    let Some(messages) = messages else {
        return if has_text {
            Ok(())
        } else {
            Err(field_error(
                "messages",
                "missing (expected a list of chat messages, or \"prompt\"/\"task\" text)",
            ))
        };
    };
    let Value::Array(items) = messages else {
        let message = format!("expected a list of chat messages, got {}", got(messages));
        return Err(field_error("messages", message));
    };
    for (i, item) in items.iter().enumerate() {
        let Value::Object(message) = item else {
            return Err(field_error(
                "messages",
                format!(
                    "item {i}: expected an object with \"role\" and \"content\", got {}",
                    got(item)
                ),
            ));
        };
        match message.get("role") {
            Some(Value::Str(_)) => {}
            Some(other) => {
                let text = format!("item {i}: \"role\" must be a string, got {}", got(other));
                return Err(field_error("messages", text));
            }
            None => {
                return Err(field_error(
                    "messages",
                    format!("item {i}: \"role\" missing"),
                ))
            }
        }
        match message.get("content") {
            Some(Value::Str(_) | Value::Null) | None => {}
            Some(other) => {
                let text = format!(
                    "item {i}: \"content\" must be a string or null, got {}",
                    got(other)
                );
                return Err(field_error("messages", text));
            }
        }
    }
    Ok(())
}

/// `gt`: a list of answers, each a string or a finite number (one answer alone is read as
/// a one-item list).
fn check_gt(gt: Option<&Value>) -> Result<(), String> {
    let expected = format!("a list of answers ({ANSWER} each)");
    let items: &[Value] = match gt {
        None => return Err(field_error("gt", format!("missing (expected {expected})"))),
        Some(Value::Array(items)) => items,
        Some(single @ (Value::Str(_) | Value::Int(_) | Value::BigInt(_) | Value::Float(_))) => {
            std::slice::from_ref(single)
        }
        Some(other) => {
            return Err(field_error(
                "gt",
                format!("expected {expected}, got {}", got(other)),
            ))
        }
    };
    for (i, item) in items.iter().enumerate() {
        match item {
            Value::Str(_) | Value::Int(_) | Value::BigInt(_) => {}
            Value::Float(x) if x.is_finite() => {}
            Value::Float(x) => {
                let text = format!("item {i} is {x}, not finite (expected {ANSWER})");
                return Err(field_error("gt", text.replace("NaN", "nan")));
            }
            other => {
                let text = format!("item {i}: expected {ANSWER}, got {}", got(other));
                return Err(field_error("gt", text));
            }
        }
    }
    Ok(())
}

/// `tool_events`: executed calls, each an object whose `ok`/`canonical` are booleans and
/// whose `name` is a string.
fn check_events(events: &Value) -> Result<(), String> {
    let Value::Array(items) = events else {
        let message = format!("expected a list of tool events, got {}", got(events));
        return Err(field_error("tool_events", message));
    };
    for (i, item) in items.iter().enumerate() {
        let Value::Object(event) = item else {
            let message = format!("item {i}: expected an object, got {}", got(item));
            return Err(field_error("tool_events", message));
        };
        for key in ["ok", "canonical"] {
            if let Some(flag) = present(event, key) {
                if !matches!(flag, Value::Bool(_)) {
                    let message =
                        format!("item {i}: {key:?} must be true or false, got {}", got(flag));
                    return Err(field_error("tool_events", message));
                }
            }
        }
        if let Some(name) = present(event, "name") {
            if !matches!(name, Value::Str(_)) {
                let message = format!("item {i}: \"name\" must be a string, got {}", got(name));
                return Err(field_error("tool_events", message));
            }
        }
    }
    Ok(())
}

fn check_list_of_objects(field: &str, value: &Value, what: &str) -> Result<(), String> {
    let Value::Array(items) = value else {
        return Err(field_error(
            field,
            format!("expected a list of {what}, got {}", got(value)),
        ));
    };
    match items.iter().position(|item| !item.is_object()) {
        Some(i) => Err(field_error(
            field,
            format!("item {i}: expected an object, got {}", got(&items[i])),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pyjson::{parse, ParseOptions};

    fn check(text: &str) -> Result<(), String> {
        check_record(&parse(text, &ParseOptions::python()).unwrap_or(Value::Null))
    }

    const GOOD: &str = r#"{"messages":[{"role":"user","content":"1+1"}],"gt":["2"],
        "completion":"<answer>2</answer>","tool_events":[{"ok":true,"name":"calculate_math",
        "args":{},"result":{},"canonical":false}],"unfinished":false,"config":{}}"#;

    #[test]
    fn the_golden_schema_passes() {
        assert_eq!(check(GOOD), Ok(()));
        assert_eq!(check(r#"{"task":"1+1","gt":2,"completion":""}"#), Ok(()));
        assert_eq!(
            check(r#"{"prompt":"x","gt":[],"completion":"","tools":null}"#),
            Ok(())
        );
    }

    #[test]
    fn each_wrong_field_says_what_was_expected() {
        let cases = [
            ("[1]", "expected a JSON object, got list"),
            (
                r#"{"task":"x","gt":[]}"#,
                "\"completion\": missing (expected a string)",
            ),
            (
                r#"{"task":"x","gt":[],"completion":5}"#,
                "expected a string, got int",
            ),
            (r#"{"gt":[],"completion":""}"#, "\"messages\": missing"),
            (
                r#"{"messages":{},"gt":[],"completion":""}"#,
                "list of chat messages, got dict",
            ),
            (
                r#"{"messages":["hi"],"gt":[],"completion":""}"#,
                "item 0: expected an object",
            ),
            (
                r#"{"messages":[{"content":"hi"}],"gt":[],"completion":""}"#,
                "\"role\" missing",
            ),
            (
                r#"{"task":"x","gt":{"a":1},"completion":""}"#,
                "\"gt\": expected a list of answers",
            ),
            (
                r#"{"task":"x","gt":[NaN],"completion":""}"#,
                "item 0 is nan, not finite",
            ),
            (
                r#"{"task":"x","gt":["1",-Infinity],"completion":""}"#,
                "item 1 is -inf",
            ),
            (r#"{"task":"x","gt":[true],"completion":""}"#, "got bool"),
            (r#"{"task":"x","completion":""}"#, "\"gt\": missing"),
            (
                r#"{"task":"x","gt":[],"completion":"","tool_events":{}}"#,
                "tool events, got dict",
            ),
            (
                r#"{"task":"x","gt":[],"completion":"","tool_events":[{"ok":1}]}"#,
                "\"ok\" must",
            ),
            (
                r#"{"task":"x","gt":[],"completion":"","unfinished":1}"#,
                "true or false, got int",
            ),
            (
                r#"{"task":"x","gt":[],"completion":"","config":[]}"#,
                "reward settings, got list",
            ),
            (
                r#"{"task":3,"gt":[],"completion":""}"#,
                "\"task\": expected a string",
            ),
        ];
        for (line, want) in cases {
            let message = check(line).err().unwrap_or_default();
            assert!(message.contains(want), "{line}: {message}");
        }
    }
}
