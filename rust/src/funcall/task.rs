//! A function-calling task as the checker reads it: the offered functions (`tools`) and the
//! acceptable answers (`ground_truth`), checked once per task with errors that name the place.
//!
//! `tools` is a list of OpenAI tool specs (`{"type": "function", "function": {...}}`) or of
//! bare function descriptions (`{"name", "description", "parameters"}`, BFCL's form).
//! `ground_truth` is BFCL's possible-answer form: a list of `{name: {arg: [acceptable
//! values]}}`, one entry per expected call; `""` among the values means the argument may be
//! left out, and an empty list means the right answer is no call at all.

use std::collections::HashMap;
use std::fmt;

use crate::message::{FormatSet, MessageOptions, ParamTypes};
use crate::pyjson::{Object, Value};

use super::pyvalues::is_omit_marker;

/// The Python type a schema's `type` names, as the checker maps it (`any` is a string,
/// `tuple` a list); JSON-schema spellings (`object`, `number`) map like their BFCL
/// equivalents (`dict`, `float`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaType {
    Str,
    Int,
    Float,
    Bool,
    List,
    Dict,
}

impl SchemaType {
    fn from_name(name: &str) -> Option<SchemaType> {
        Some(match name {
            "string" | "any" => SchemaType::Str,
            "integer" => SchemaType::Int,
            "float" | "number" => SchemaType::Float,
            "boolean" => SchemaType::Bool,
            "array" | "tuple" => SchemaType::List,
            "dict" | "object" => SchemaType::Dict,
            _ => return None,
        })
    }

    /// The JSON-schema name the call parser knows, for formats whose values are text.
    pub fn json_schema_name(self) -> &'static str {
        match self {
            SchemaType::Str => "string",
            SchemaType::Int => "integer",
            SchemaType::Float => "number",
            SchemaType::Bool => "boolean",
            SchemaType::List => "array",
            SchemaType::Dict => "object",
        }
    }
}

/// One parameter's declared type: the outer type (`None`: not given or not known, so not
/// checked), whether the schema spelled it `float`/`number` (an `int` is then accepted),
/// and the item type of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ParamType {
    pub outer: Option<SchemaType>,
    pub float: bool,
    pub items: Option<SchemaType>,
}

/// One offered function.
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionSpec {
    pub name: String,
    /// Declared parameters in declaration order.
    pub params: Vec<(String, ParamType)>,
    pub required: Vec<String>,
}

impl FunctionSpec {
    pub fn param(&self, name: &str) -> Option<&ParamType> {
        self.params.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }
}

/// One expected call: the function's name and, per argument, its acceptable values.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpectedCall {
    pub name: String,
    pub args: Vec<(String, Vec<Value>)>,
}

impl ExpectedCall {
    pub fn accepted(&self, arg: &str) -> Option<&[Value]> {
        self.args
            .iter()
            .find(|(n, _)| n == arg)
            .map(|(_, v)| v.as_slice())
    }

    /// Must the argument be given (no `""` among its acceptable values)?
    pub fn needs(values: &[Value]) -> bool {
        !values.iter().any(is_omit_marker)
    }
}

/// A task ready for checking.
#[derive(Debug, Clone, Default)]
pub struct FunctionCallTask {
    pub functions: Vec<FunctionSpec>,
    pub expected: Vec<ExpectedCall>,
    by_name: HashMap<String, usize>,
    /// How the completions of this task are parsed: the offered names, their parameter
    /// types, the formats to read (prepared once for all the task's rows).
    pub parse_options: MessageOptions,
}

impl FunctionCallTask {
    /// The first offered function called `name`.
    pub fn function(&self, name: &str) -> Option<&FunctionSpec> {
        self.by_name.get(name).map(|&i| &self.functions[i])
    }
}

/// A field of a row that is not what the reward reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskError {
    pub field: &'static str,
    pub message: String,
}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "field {:?}: {}", self.field, self.message)
    }
}

impl std::error::Error for TaskError {}

fn tools_error(message: String) -> TaskError {
    TaskError {
        field: "tools",
        message,
    }
}

fn truth_error(message: String) -> TaskError {
    TaskError {
        field: "ground_truth",
        message,
    }
}

impl FunctionCallTask {
    /// Reads `tools` and `ground_truth` (either may also be given as JSON text); calls
    /// will be read in `formats`.
    pub fn new(
        tools: &Value,
        ground_truth: &Value,
        formats: FormatSet,
    ) -> Result<FunctionCallTask, TaskError> {
        let functions = read_tools(tools)?;
        let expected = read_truth(ground_truth)?;
        let mut by_name = HashMap::new();
        for (i, f) in functions.iter().enumerate() {
            by_name.entry(f.name.clone()).or_insert(i);
        }
        let mut param_types = ParamTypes::new();
        for f in &functions {
            let types = f
                .params
                .iter()
                .filter_map(|(name, t)| {
                    t.outer
                        .map(|o| (name.clone(), o.json_schema_name().to_string()))
                })
                .collect();
            param_types.insert(f.name.clone(), types);
        }
        let parse_options = MessageOptions {
            tools: Some(functions.iter().map(|f| f.name.clone()).collect()),
            formats,
            param_types,
        };
        Ok(FunctionCallTask {
            functions,
            expected,
            by_name,
            parse_options,
        })
    }
}

fn text_json(value: &Value, error: fn(String) -> TaskError) -> Result<Option<Value>, TaskError> {
    let Value::Str(text) = value else {
        return Ok(None);
    };
    crate::pyjson::parse(text, &crate::pyjson::ParseOptions::python())
        .map(Some)
        .map_err(|e| {
            error(format!(
                "not valid JSON text: {} at offset {}",
                e.kind, e.offset
            ))
        })
}

fn read_tools(tools: &Value) -> Result<Vec<FunctionSpec>, TaskError> {
    if let Some(parsed) = text_json(tools, tools_error)? {
        return read_tools(&parsed);
    }
    let items: &[Value] = match tools {
        Value::Array(items) => items,
        Value::Null => &[],
        other => {
            return Err(tools_error(format!(
                "expected a list of function schemas, got {}",
                other.type_name()
            )))
        }
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| read_function(item).map_err(|m| tools_error(format!("item {i}: {m}"))))
        .collect()
}

fn read_function(item: &Value) -> Result<FunctionSpec, String> {
    let Value::Object(spec) = item else {
        return Err(format!(
            "expected a function schema, got {}",
            item.type_name()
        ));
    };
    let function = match spec.get("function") {
        Some(Value::Object(inner)) => inner,
        _ => spec,
    };
    let name = match function.get("name") {
        Some(Value::Str(name)) if !name.is_empty() => name.clone(),
        _ => return Err("\"name\" missing or not a non-empty string".to_string()),
    };
    let (params, required) = match function.get("parameters") {
        Some(Value::Object(parameters)) => read_parameters(parameters),
        Some(Value::Null) | None => (Vec::new(), Vec::new()),
        Some(other) => {
            return Err(format!(
                "function {name:?}: \"parameters\" must be an object, got {}",
                other.type_name()
            ))
        }
    };
    Ok(FunctionSpec {
        name,
        params,
        required,
    })
}

fn read_parameters(parameters: &Object) -> (Vec<(String, ParamType)>, Vec<String>) {
    let params = match parameters.get("properties") {
        Some(Value::Object(props)) => props
            .iter()
            .map(|(k, v)| (k.clone(), param_type(v)))
            .collect(),
        _ => Vec::new(),
    };
    let required = match parameters.get("required") {
        Some(Value::Array(names)) => names
            .iter()
            .filter_map(|n| n.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    };
    (params, required)
}

/// A schema's type name: a string, or the first non-null name of a list.
fn type_name(schema: &Value) -> Option<&str> {
    match schema {
        Value::Object(o) => match o.get("type") {
            Some(Value::Str(name)) => Some(name.as_str()),
            Some(Value::Array(names)) => names
                .iter()
                .filter_map(Value::as_str)
                .find(|n| *n != "null"),
            _ => None,
        },
        _ => None,
    }
}

fn param_type(schema: &Value) -> ParamType {
    let name = type_name(schema);
    let outer = name.and_then(SchemaType::from_name);
    let items = match (outer, schema) {
        (Some(SchemaType::List), Value::Object(o)) => o
            .get("items")
            .and_then(type_name)
            .and_then(SchemaType::from_name),
        _ => None,
    };
    ParamType {
        outer,
        float: matches!(name, Some("float" | "number")),
        items,
    }
}

fn read_truth(truth: &Value) -> Result<Vec<ExpectedCall>, TaskError> {
    if let Some(parsed) = text_json(truth, truth_error)? {
        return read_truth(&parsed);
    }
    let items: &[Value] = match truth {
        Value::Array(items) => items,
        // One expected call given on its own.
        Value::Object(_) => std::slice::from_ref(truth),
        other => {
            return Err(truth_error(format!(
                "expected a list of {{function name: {{argument: [acceptable values]}}}}, got {}",
                other.type_name()
            )))
        }
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| read_call(item).map_err(|m| truth_error(format!("item {i}: {m}"))))
        .collect()
}

fn read_call(item: &Value) -> Result<ExpectedCall, String> {
    let call = match item {
        Value::Object(call) if call.len() == 1 => call,
        Value::Object(call) => {
            return Err(format!(
                "expected one function name as the only key, got {} keys",
                call.len()
            ))
        }
        other => return Err(format!("expected an object, got {}", other.type_name())),
    };
    let Some((name, args)) = call.iter().next() else {
        return Err("expected one function name as the only key, got none".to_string());
    };
    let Value::Object(args) = args else {
        return Err(format!(
            "{name:?}: expected an object of arguments, got {}",
            args.type_name()
        ));
    };
    let args = args
        .iter()
        .map(|(arg, values)| match values {
            Value::Array(values) => Ok((arg.clone(), values.clone())),
            other => Err(format!(
                "{name:?}, argument {arg:?}: expected a list of acceptable values, got {}",
                other.type_name()
            )),
        })
        .collect::<Result<_, _>>()?;
    Ok(ExpectedCall {
        name: name.clone(),
        args,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pyjson::{parse, ParseOptions};

    fn v(text: &str) -> Value {
        parse(text, &ParseOptions::python()).unwrap_or(Value::Null)
    }

    #[test]
    fn openai_and_bare_schemas_read_alike() {
        let bare = v(
            r#"[{"name":"f","parameters":{"type":"dict","properties":{"x":{"type":"float"},"l":{"type":"array","items":{"type":"integer"}}},"required":["x"]}}]"#,
        );
        let openai = v(
            r#"[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"x":{"type":"number"},"l":{"type":"array","items":{"type":"integer"}}},"required":["x"]}}}]"#,
        );
        let truth = v(r#"[{"f":{"x":[1.5]}}]"#);
        let a = FunctionCallTask::new(&bare, &truth, FormatSet::all()).unwrap_or_default();
        let b = FunctionCallTask::new(&openai, &truth, FormatSet::all()).unwrap_or_default();
        assert_eq!(a.functions, b.functions);
        let x = a.functions[0].param("x").copied().unwrap_or_default();
        assert_eq!(x.outer, Some(SchemaType::Float));
        assert!(x.float);
        let l = a.functions[0].param("l").copied().unwrap_or_default();
        assert_eq!(l.items, Some(SchemaType::Int));
        assert_eq!(a.functions[0].required, vec!["x".to_string()]);
    }

    #[test]
    fn bad_fields_are_errors_naming_the_place() {
        let tools = v(r#"[{"name":"f"}]"#);
        let err = FunctionCallTask::new(&tools, &v(r#"[{"f":{"x":1}}]"#), FormatSet::all()).err();
        let message = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("ground_truth") && message.contains("\"x\""));
        let err = FunctionCallTask::new(&v(r#"[{"nom":"f"}]"#), &v("[]"), FormatSet::all()).err();
        let message = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("tools") && message.contains("item 0"));
        let err = FunctionCallTask::new(&tools, &v("3"), FormatSet::all()).err();
        assert_eq!(err.map(|e| e.field), Some("ground_truth"));
    }

    #[test]
    fn fields_given_as_json_text_are_read() {
        let task = FunctionCallTask::new(
            &v(r#""[{\"name\":\"f\"}]""#),
            &v(r#""[{\"f\":{\"a\":[1,\"\"]}}]""#),
            FormatSet::all(),
        )
        .unwrap_or_default();
        assert_eq!(task.functions.len(), 1);
        assert!(!ExpectedCall::needs(task.expected[0].args[0].1.as_slice()));
    }
}
