//! `parse_tool_calls`: the reward's strict parser, returning one dict per call.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use super::json::{py_str_lossy, value_to_py, without_gil_if_long};
use crate::toolcall::{self, ToolCall};

/// The dict for one call, with its key order: `name`, `arguments`,
/// [`parse_error`,] `canonical`.
fn call_to_dict<'py>(py: Python<'py>, call: &ToolCall) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("name", value_to_py(py, &call.name)?)?;
    dict.set_item("arguments", value_to_py(py, &call.arguments)?)?;
    if let Some(raw) = &call.parse_error {
        dict.set_item("parse_error", raw)?;
    }
    dict.set_item("canonical", call.canonical)?;
    Ok(dict)
}

/// Tool calls in a model's text, as the reward sees them (the input is converted with
/// `str()` first).
#[pyfunction]
fn parse_tool_calls<'py>(
    py: Python<'py>,
    text: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyList>> {
    let as_str = match text.cast::<PyString>() {
        Ok(s) => s.clone(),
        Err(_) => text.str()?,
    };
    let text = py_str_lossy(&as_str)?;
    let calls = without_gil_if_long(py, text.len(), || toolcall::parse_tool_calls(&text));
    let list = PyList::empty(py);
    for call in &calls {
        list.append(call_to_dict(py, call)?)?;
    }
    Ok(list)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(parse_tool_calls, m)?)?;
    // The JSON helpers and the lenient message parser live beside the parser they extend.
    super::json::register(m)?;
    super::message::register(m)?;
    Ok(())
}
