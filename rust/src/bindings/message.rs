//! `parse_message`: the lenient multi-format parser used to execute calls.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use super::error::{internal_error, value_error};
use super::json::{py_str_lossy, value_to_py, without_gil_if_long};
use crate::message::{self, Format, FormatSet, MessageOptions, ParamTypes};
use crate::pyjson::Value;

pub(super) fn format_set(names: Option<Vec<String>>) -> PyResult<FormatSet> {
    let Some(names) = names else {
        return Ok(FormatSet::all());
    };
    names
        .iter()
        .map(|name| {
            Format::from_name(name).ok_or_else(|| {
                let known: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
                value_error(format!(
                    "unknown call format {name:?}; known formats: {}",
                    known.join(", ")
                ))
            })
        })
        .collect()
}

/// `(content, reasoning, calls, errors)` for one model message; calls are
/// `{"name", "arguments"[, "unknown_tool": True]}`, errors `{"format", "reason", "offset",
/// "text"}`. `param_types` maps tool -> parameter -> JSON-schema type, for the formats
/// whose argument values are text.
#[pyfunction]
#[pyo3(signature = (text, tools = None, formats = None, param_types = None))]
fn parse_message<'py>(
    py: Python<'py>,
    text: &Bound<'py, PyString>,
    tools: Option<Vec<String>>,
    formats: Option<Vec<String>>,
    param_types: Option<ParamTypes>,
) -> PyResult<Bound<'py, PyTuple>> {
    let opts = MessageOptions {
        tools: tools.map(|names| names.into_iter().collect()),
        formats: format_set(formats)?,
        param_types: param_types.unwrap_or_default(),
    };
    let text = py_str_lossy(text)?;
    // The parser is written not to panic; should it ever, Python gets a ValueError naming
    // the function instead of a PanicException.
    let parsed = without_gil_if_long(py, text.len(), || {
        catch_unwind(AssertUnwindSafe(|| message::parse_message(&text, &opts)))
    })
    .map_err(|_| internal_error("parse_message"))?;
    let calls = PyList::empty(py);
    for call in parsed.calls {
        let dict = PyDict::new(py);
        dict.set_item("name", call.name)?;
        dict.set_item(
            "arguments",
            value_to_py(py, &Value::Object(call.arguments))?,
        )?;
        if call.unknown_tool {
            dict.set_item("unknown_tool", true)?;
        }
        calls.append(dict)?;
    }
    let errors = PyList::empty(py);
    for error in parsed.errors {
        let dict = PyDict::new(py);
        dict.set_item("format", error.format.name())?;
        dict.set_item("reason", error.reason)?;
        dict.set_item("offset", error.offset)?;
        dict.set_item("text", error.text)?;
        errors.append(dict)?;
    }
    (parsed.content, parsed.reasoning, calls, errors).into_pyobject(py)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(parse_message, m)?)?;
    Ok(())
}
