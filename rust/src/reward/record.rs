//! One row to score, read from a JSON object in the schema of the golden reward file:
//! `messages` (or `prompt`/`task` text), `gt`, `completion`, optional `tool_events`,
//! `unfinished`, `tools` and `config`.

use std::fmt;
use std::sync::Arc;

use crate::pyjson::Value;
use crate::reward::config::ConfigValue;

/// One chat message, as far as the reward reads it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatMessage {
    /// The role when it is a string (other roles match nothing).
    pub role: Option<String>,
    /// The content; `None` when the key is missing. Printed with Python's `str()`.
    pub content: Option<Value>,
}

impl ChatMessage {
    /// From a JSON value; a message that is not an object reads as empty (no role).
    pub fn from_value(value: Value) -> Self {
        let Value::Object(obj) = value else {
            return ChatMessage::default();
        };
        let mut message = ChatMessage::default();
        for (key, value) in obj.into_pairs() {
            match key.as_str() {
                "role" => {
                    if let Value::Str(role) = value {
                        message.role = Some(role);
                    }
                }
                "content" => message.content = Some(value),
                _ => {}
            }
        }
        message
    }
}

/// One executed tool call: `{ok, name, args, result, canonical}`. A missing key is `None`;
/// `ok` and `canonical` hold Python truthiness. An event that is not an object reads as
/// empty.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolEvent {
    pub ok: bool,
    pub canonical: bool,
    pub name: Option<Value>,
    pub args: Option<Value>,
    pub result: Option<Value>,
}

impl ToolEvent {
    pub fn from_value(value: Value) -> Self {
        let Value::Object(obj) = value else {
            return ToolEvent::default();
        };
        let mut event = ToolEvent::default();
        for (key, value) in obj.into_pairs() {
            match key.as_str() {
                "ok" => event.ok = value.is_truthy(),
                "canonical" => event.canonical = value.is_truthy(),
                "name" => event.name = Some(value),
                "args" => event.args = Some(value),
                "result" => event.result = Some(value),
                _ => {}
            }
        }
        event
    }
}

/// What a row shares with the other completions of its prompt: the task, its expected
/// answers and the tools offered. Rows of one GRPO group can hold the same `Task`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Task {
    /// The task's chat messages.
    pub messages: Vec<ChatMessage>,
    /// A rendered prompt or plain task text, used when `messages` is empty.
    pub prompt: String,
    /// Expected answers. A scalar `gt` becomes a one-item list, `null` an empty one, as the
    /// prompt pool normalises it.
    pub gt: Vec<Value>,
    /// Tool specs offered to the model; they decide which calls the standalone path allows.
    pub tools: Option<Vec<Value>>,
}

/// A trajectory to score.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trajectory {
    pub task: Arc<Task>,
    /// The whole assistant text of the episode.
    pub completion: String,
    /// The executed tool calls; `None` means "parse and run the completion's calls".
    pub tool_events: Option<Vec<ToolEvent>>,
    /// The episode ran out of turns while still calling tools.
    pub unfinished: bool,
    /// Per-row overrides of the batch's reward settings.
    pub config: Vec<(String, ConfigValue)>,
}

/// Why a row could not be read; the field is named.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordError {
    pub field: &'static str,
    pub message: String,
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "field {:?}: {}", self.field, self.message)
    }
}

impl std::error::Error for RecordError {}

fn wrong_type(field: &'static str, expected: &str, got: &Value) -> RecordError {
    RecordError {
        field,
        message: format!("expected {expected}, got {}", got.type_name()),
    }
}

/// Takes a list field out of its value; `null` reads as missing.
fn list(field: &'static str, value: Value) -> Result<Option<Vec<Value>>, RecordError> {
    match value {
        Value::Null => Ok(None),
        Value::Array(items) => Ok(Some(items)),
        other => Err(wrong_type(field, "a list", &other)),
    }
}

fn text(field: &'static str, value: Value) -> Result<String, RecordError> {
    match value {
        Value::Null => Ok(String::new()),
        Value::Str(s) => Ok(s),
        other => Err(wrong_type(field, "a string", &other)),
    }
}

/// A JSON value as a config setting (integers beyond i64 are rejected).
pub fn config_value(value: &Value) -> Option<ConfigValue> {
    match value {
        Value::Null => Some(ConfigValue::None),
        Value::Bool(b) => Some(ConfigValue::Bool(*b)),
        Value::Int(i) => Some(ConfigValue::Int(*i)),
        Value::Float(x) => Some(ConfigValue::Float(*x)),
        Value::Str(s) => Some(ConfigValue::Str(s.clone())),
        Value::BigInt(_) | Value::Array(_) | Value::Object(_) => None,
    }
}

impl Trajectory {
    /// Reads a row from a JSON object as `score_batch` reads a dict. Unknown keys (such as a
    /// previous `reward`) are ignored; a known key with the wrong type is an error;
    /// `completion` is required. The task text is `prompt` unless it is missing or null,
    /// else `task`.
    pub fn from_value(value: Value) -> Result<Trajectory, RecordError> {
        let Value::Object(obj) = value else {
            return Err(wrong_type("<row>", "a JSON object", &value));
        };
        let mut row = Trajectory::default();
        let mut has_completion = false;
        let mut prompt = None;
        let mut task = None;
        for (key, value) in obj.into_pairs() {
            match key.as_str() {
                "prompt" => prompt = Some(value),
                "task" => task = Some(value),
                _ => {
                    has_completion |= key == "completion";
                    row.set_field(&key, value)?;
                }
            }
        }
        if !has_completion {
            return Err(RecordError {
                field: "completion",
                message: "missing".to_string(),
            });
        }
        if let Some(text) = prompt.filter(|p| *p != Value::Null).or(task) {
            Arc::make_mut(&mut row.task).set_field("prompt", text)?;
        }
        Ok(row)
    }

    /// Sets one field from its JSON value (unknown keys are ignored). Task fields are
    /// written to this row's own copy of the task.
    pub fn set_field(&mut self, key: &str, value: Value) -> Result<(), RecordError> {
        match key {
            "messages" | "prompt" | "task" | "gt" | "tools" => {
                Arc::make_mut(&mut self.task).set_field(key, value)?;
            }
            "completion" => self.completion = text("completion", value)?,
            "tool_events" => {
                self.tool_events = list("tool_events", value)?
                    .map(|events| events.into_iter().map(ToolEvent::from_value).collect());
            }
            "unfinished" => self.unfinished = value.is_truthy(),
            "config" => self.config = config_pairs(value)?,
            _ => {}
        }
        Ok(())
    }
}

impl Task {
    /// Sets one task field (`messages`, `prompt`/`task`, `gt`, `tools`) from JSON.
    pub fn set_field(&mut self, key: &str, value: Value) -> Result<(), RecordError> {
        match key {
            "messages" => {
                self.messages = list("messages", value)?
                    .unwrap_or_default()
                    .into_iter()
                    .map(ChatMessage::from_value)
                    .collect();
            }
            "prompt" | "task" => {
                let prompt = text("prompt", value)?;
                if self.prompt.is_empty() {
                    self.prompt = prompt;
                }
            }
            "gt" => {
                self.gt = match value {
                    Value::Null => Vec::new(),
                    Value::Array(items) => items,
                    scalar => vec![scalar],
                }
            }
            "tools" => self.tools = list("tools", value)?,
            _ => {}
        }
        Ok(())
    }
}

/// A row's `config` object as setting pairs (checked against the settings later).
fn config_pairs(value: Value) -> Result<Vec<(String, ConfigValue)>, RecordError> {
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Object(cfg) => cfg
            .into_pairs()
            .into_iter()
            .map(|(name, v)| match config_value(&v) {
                Some(cv) => Ok((name, cv)),
                None => Err(RecordError {
                    field: "config",
                    message: format!(
                        "setting {name:?} has an unsupported value of type {}",
                        v.type_name()
                    ),
                }),
            })
            .collect(),
        other => Err(wrong_type("config", "an object", &other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pyjson::{parse, ParseOptions};

    fn row(text: &str) -> Result<Trajectory, RecordError> {
        Trajectory::from_value(parse(text, &ParseOptions::python()).unwrap())
    }

    #[test]
    fn reads_the_golden_schema() {
        let t = row(r#"{"messages":[{"role":"user","content":"1+1"}],"gt":["2"],
            "completion":"<answer>2</answer>","tool_events":[],"unfinished":true,
            "config":{"current_step":5},"reward":1.0}"#)
        .unwrap();
        assert_eq!(t.task.messages.len(), 1);
        assert_eq!(t.task.gt, vec![Value::Str("2".into())]);
        assert_eq!(t.tool_events, Some(vec![]));
        assert!(t.unfinished);
        assert_eq!(
            t.config,
            vec![("current_step".to_string(), ConfigValue::Int(5))]
        );
    }

    #[test]
    fn scalar_gt_becomes_a_list_and_missing_events_mean_standalone() {
        let t = row(r#"{"task":"1+1","gt":2,"completion":""}"#).unwrap();
        assert_eq!(t.task.gt, vec![Value::Int(2)]);
        assert_eq!(t.task.prompt, "1+1");
        assert_eq!(t.tool_events, None);
        let t = row(r#"{"gt":null,"completion":"x","tool_events":null}"#).unwrap();
        assert!(t.task.gt.is_empty() && t.tool_events.is_none());
    }

    #[test]
    fn prompt_wins_over_task_unless_null() {
        let t = row(r#"{"task":"A","prompt":"B","completion":""}"#).unwrap();
        assert_eq!(t.task.prompt, "B");
        let t = row(r#"{"task":"A","prompt":null,"completion":""}"#).unwrap();
        assert_eq!(t.task.prompt, "A");
        let t = row(r#"{"prompt":"","task":"A","completion":""}"#).unwrap();
        assert_eq!(t.task.prompt, "");
    }

    #[test]
    fn bad_fields_are_named() {
        let err = row(r#"{"completion": 5}"#).unwrap_err();
        assert_eq!(err.field, "completion");
        let err = row(r#"{"completion": "", "tool_events": {}}"#).unwrap_err();
        assert!(err.to_string().contains("tool_events"));
        let err = row(r#"{"gt": []}"#).unwrap_err();
        assert!(err.to_string().contains("missing"));
        let err = row("[1]").unwrap_err();
        assert!(err.to_string().contains("object"));
        let err = row(r#"{"completion":"","config":{"x":[1]}}"#).unwrap_err();
        assert!(err.to_string().contains("\"x\""));
    }
}
