//! The `function_call` reward for Python: records or JSON lines in, float64 buffers out.
//!
//! Records are converted while holding the GIL (a task shared by the rows of one prompt is
//! converted once), then scored with the GIL released on the reward's thread pool.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyList, PyString};

use super::error::{in_record, internal_error, type_error, value_error};
use super::json::value_from_py;
use super::message::format_set;
use super::reward::config_from_py;
use crate::funcall::{self, FunctionCallTask, Row, Settings, DETAIL_KEYS, TERM_KEYS};
use crate::message::FormatSet;
use crate::pyjson::Value;
use crate::reward::parallel;

const WIDTH: usize = DETAIL_KEYS.len();

fn settings(
    config: Option<&Bound<'_, PyDict>>,
    formats: Option<Vec<String>>,
) -> PyResult<Settings> {
    Ok(Settings::new(
        &config_from_py(config)?,
        format_set(formats)?,
    ))
}

fn details_buffer<'py>(
    py: Python<'py>,
    rows: &[funcall::Details],
) -> PyResult<Bound<'py, PyByteArray>> {
    const F64: usize = std::mem::size_of::<f64>();
    PyByteArray::new_with(py, rows.len() * WIDTH * F64, |bytes| {
        for (row_bytes, row) in bytes.chunks_exact_mut(WIDTH * F64).zip(rows) {
            for (slot, value) in row_bytes.chunks_exact_mut(F64).zip(row.values()) {
                slot.copy_from_slice(&value.to_ne_bytes());
            }
        }
        Ok(())
    })
}

fn field<'py>(dict: &Bound<'py, PyDict>, name: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
    Ok(dict.get_item(name)?.filter(|v| !v.is_none()))
}

/// Tasks already converted, by the identity of their `tools` and `ground_truth` objects
/// (kept alive so that their addresses stay unique).
#[derive(Default)]
struct Tasks<'py> {
    by_objects: HashMap<(usize, usize), Arc<FunctionCallTask>>,
    keep_alive: Vec<Bound<'py, PyAny>>,
}

fn row_from_py<'py>(
    record: &Bound<'py, PyAny>,
    tasks: &mut Tasks<'py>,
    formats: FormatSet,
) -> PyResult<Row> {
    let dict = record.cast::<PyDict>().map_err(|_| {
        type_error(format!(
            "expected a dict with \"tools\", \"ground_truth\" and \"completion\", got {}",
            record
                .get_type()
                .name()
                .map_or_else(|_| "?".to_string(), |n| n.to_string())
        ))
    })?;
    let completion = match field(dict, "completion")? {
        Some(text) => text
            .cast::<PyString>()
            .map_err(|_| type_error("field \"completion\": expected a string"))?
            .to_cow()?
            .into_owned(),
        None => return Err(value_error("field \"completion\": missing")),
    };
    let tools = field(dict, "tools")?;
    let Some(truth) = field(dict, "ground_truth")? else {
        return Err(value_error(
            "field \"ground_truth\": missing (expected a list of {function name: {argument: \
             [acceptable values]}}, [] for no call)",
        ));
    };
    let key = (
        tools.as_ref().map_or(0, |t| t.as_ptr() as usize),
        truth.as_ptr() as usize,
    );
    if let Some(task) = tasks.by_objects.get(&key) {
        return Ok(Row {
            task: Arc::clone(task),
            completion,
        });
    }
    let tools_value = match &tools {
        Some(t) => value_from_py(t)?,
        None => Value::Null,
    };
    let truth_value = value_from_py(&truth)?;
    let task = Arc::new(FunctionCallTask::new(&tools_value, &truth_value, formats)?);
    tasks.by_objects.insert(key, Arc::clone(&task));
    tasks.keep_alive.extend(tools);
    tasks.keep_alive.push(truth);
    Ok(Row { task, completion })
}

/// Scores records (`tools`, `ground_truth`, `completion` each). Returns `(n, details)`:
/// `n` rows of `len(function_call_detail_keys())` float64 values. `formats`: the call
/// formats to read (None: every one).
#[pyfunction]
#[pyo3(signature = (records, config = None, formats = None, threads = None))]
fn function_call_score_batch<'py>(
    py: Python<'py>,
    records: &Bound<'py, PyAny>,
    config: Option<&Bound<'py, PyDict>>,
    formats: Option<Vec<String>>,
    threads: Option<usize>,
) -> PyResult<(usize, Bound<'py, PyByteArray>)> {
    let settings = settings(config, formats)?;
    let threads = parallel::resolve_threads(threads);
    let mut tasks = Tasks::default();
    let mut rows = Vec::new();
    for (i, record) in records.try_iter()?.enumerate() {
        let row = row_from_py(&record?, &mut tasks, settings.formats);
        rows.push(row.map_err(|e| in_record(py, i, &e))?);
    }
    let details = py
        .detach(|| {
            catch_unwind(AssertUnwindSafe(|| {
                funcall::score_rows(&settings, &rows, threads)
            }))
        })
        .map_err(|_| internal_error("function_call_score_batch"))?;
    Ok((details.len(), details_buffer(py, &details)?))
}

/// Scores JSON lines (`str` or `bytes`), decoded and scored with the GIL released. Returns
/// `(outputs, details, skipped)`: per line the record's JSON text with `reward` and
/// `details` added (None for a blank or skipped line; every entry None without `render`),
/// the scored lines' details as in `function_call_score_batch`, and `(index, reason)` for
/// every skipped line.
#[pyfunction]
#[pyo3(signature = (lines, config = None, formats = None, threads = None, render = true))]
#[allow(clippy::type_complexity)]
fn function_call_score_lines<'py>(
    py: Python<'py>,
    lines: &Bound<'py, PyList>,
    config: Option<&Bound<'py, PyDict>>,
    formats: Option<Vec<String>>,
    threads: Option<usize>,
    render: bool,
) -> PyResult<(
    Vec<Option<String>>,
    Bound<'py, PyByteArray>,
    Vec<(usize, String)>,
)> {
    let settings = settings(config, formats)?;
    let threads = parallel::resolve_threads(threads);
    let mut raw: Vec<Vec<u8>> = Vec::with_capacity(lines.len());
    for (i, item) in lines.iter().enumerate() {
        if let Ok(bytes) = item.cast::<PyBytes>() {
            raw.push(bytes.as_bytes().to_vec());
        } else if let Ok(text) = item.cast::<PyString>() {
            raw.push(text.to_cow()?.as_bytes().to_vec());
        } else {
            return Err(type_error(format!(
                "line {i}: expected a JSON line (str or bytes), got {}",
                item.get_type().name()?
            )));
        }
    }
    let outcomes = py
        .detach(|| {
            catch_unwind(AssertUnwindSafe(|| {
                funcall::score_lines(&settings, &raw, threads, render)
            }))
        })
        .map_err(|_| internal_error("function_call_score_lines"))?;
    let mut outputs = Vec::with_capacity(outcomes.len());
    let mut details = Vec::new();
    let mut skipped = Vec::new();
    for (i, outcome) in outcomes.into_iter().enumerate() {
        match outcome {
            None => outputs.push(None),
            Some(Ok((text, row))) => {
                outputs.push(render.then_some(text));
                details.push(row);
            }
            Some(Err(reason)) => {
                outputs.push(None);
                skipped.push((i, reason));
            }
        }
    }
    Ok((outputs, details_buffer(py, &details)?, skipped))
}

/// The detail keys, in the column order of the scorers.
#[pyfunction]
fn function_call_detail_keys() -> Vec<&'static str> {
    DETAIL_KEYS.to_vec()
}

/// The weighted terms, in the order of the `function_call_*_weight` settings.
#[pyfunction]
fn function_call_term_keys() -> Vec<&'static str> {
    TERM_KEYS.to_vec()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(function_call_score_batch, m)?)?;
    m.add_function(wrap_pyfunction!(function_call_score_lines, m)?)?;
    m.add_function(wrap_pyfunction!(function_call_detail_keys, m)?)?;
    m.add_function(wrap_pyfunction!(function_call_term_keys, m)?)?;
    Ok(())
}
