//! Reward scoring for Python: records and settings in, flat float64 buffers out.
//!
//! A batch is converted to Rust data while holding the GIL, scored with the GIL released,
//! and returned as `bytearray`s of native-endian float64, one row of values per record,
//! which `numpy.frombuffer` views without copying.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyIterator, PyList, PyString, PyTuple,
};

use super::error::{in_line, in_record, type_error, unscored_chunk, value_error};
use super::json::{py_str_lossy, value_from_py};
use crate::pyjson::{Object, Value};
use crate::reward::config::FieldKind;
use crate::reward::fast_hash::FastHash;
use crate::reward::record::{ChatMessage, Task, ToolEvent};
use crate::reward::{
    parallel, score_json_lines, score_rows_in_chunks, BatchScores, ConfigValue, RewardConfig,
    RowSource, ScoringContext, Trajectory, DETAIL_KEYS, TERM_KEYS,
};

/// Dicts up to this size take the fast path (insertion checks keys linearly).
const SMALL_DICT: usize = 8;

// Part of the stable ABI since Python 3.10, the oldest Python agentrl supports (see
// `requires-python` in pyproject.toml); pyo3 leaves it out only because the crate's abi3
// floor is 3.9. It hands out the string's own UTF-8 text (cached in the object for
// non-ASCII strings), where pyo3's abi3 `to_cow` builds a `bytes` object per string.
extern "C" {
    fn PyUnicode_AsUTF8AndSize(
        unicode: *mut pyo3::ffi::PyObject,
        size: *mut pyo3::ffi::Py_ssize_t,
    ) -> *const std::os::raw::c_char;
}

/// A Python `str` as Rust text, borrowed from the string object when it is valid UTF-8;
/// strings with lone surrogates take [`py_str_lossy`]'s path (U+FFFD for each).
fn py_text<'a>(s: &'a Bound<'_, PyString>) -> PyResult<Cow<'a, str>> {
    let mut size: pyo3::ffi::Py_ssize_t = 0;
    // SAFETY: `s` is a live `str` object and the GIL is held. On success the pointer is
    // the object's UTF-8 buffer of `size` bytes, which lives (unchanged: strings are
    // immutable) as long as the object, and `s` keeps the object alive for `'a`.
    let data = unsafe { PyUnicode_AsUTF8AndSize(s.as_ptr(), &mut size) };
    if data.is_null() {
        // The encoding error (a lone surrogate) is dropped; the lossy path handles it.
        drop(PyErr::take(s.py()));
        return py_str_lossy(s);
    }
    let len = usize::try_from(size).unwrap_or(0);
    // SAFETY: see above. The text was encoded with the strict error handler (it fails on
    // lone surrogates, handled above), so the bytes are valid UTF-8.
    let text = unsafe {
        std::str::from_utf8_unchecked(std::slice::from_raw_parts(data.cast::<u8>(), len))
    };
    Ok(Cow::Borrowed(text))
}

/// A JSON value from a Python object, with fast paths for the flat shapes records are
/// made of (strings, numbers, dicts and lists of scalars); anything else goes through the
/// general converter, which bounds nesting and rejects what JSON cannot hold.
fn fast_value(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    if let Some(scalar) = fast_scalar(obj)? {
        return Ok(scalar);
    }
    if let Ok(dict) = obj.cast::<PyDict>() {
        if dict.len() > SMALL_DICT {
            return value_from_py(obj);
        }
        // The keys of a Python dict are distinct, so they are inserted without rebuilding.
        let mut object = Object::new();
        for (key, item) in dict.iter() {
            let Ok(key) = key.cast::<PyString>() else {
                // Non-string keys are converted as json.dumps does, by the general path.
                return value_from_py(obj);
            };
            let item = match fast_scalar(&item)? {
                Some(v) => v,
                None => value_from_py(&item)?,
            };
            object.insert(py_text(key)?.into_owned(), item);
        }
        return Ok(Value::Object(object));
    }
    if let Ok(list) = obj.cast::<PyList>() {
        let mut items = Vec::with_capacity(list.len());
        for item in list.iter() {
            items.push(match fast_scalar(&item)? {
                Some(v) => v,
                None => value_from_py(&item)?,
            });
        }
        return Ok(Value::Array(items));
    }
    value_from_py(obj)
}

/// The value of a `str`, `float`, `bool`, `None` or machine-size `int`; `None` otherwise.
fn fast_scalar(obj: &Bound<'_, PyAny>) -> PyResult<Option<Value>> {
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Some(Value::Str(py_text(s)?.into_owned())));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Ok(Some(Value::Float(f.value())));
    }
    if obj.is_none() {
        return Ok(Some(Value::Null));
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Some(Value::Bool(b.is_true())));
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Some(Value::Int(i)));
        }
    }
    Ok(None)
}

/// Dicts up to this size are read in one pass over their items; larger ones by lookups.
const SCAN_FIELDS_MAX: usize = 16;

/// `[d.get(name) for name in names]`, for the few keys records, messages and events have:
/// one pass over the items, comparing each key's text with the names, costs less than a
/// lookup per name. Only string keys match. Nothing runs Python code during the pass, so
/// the dict cannot change under it.
fn dict_fields<'py, const N: usize>(
    dict: &Bound<'py, PyDict>,
    names: [&'static str; N],
) -> PyResult<[Option<Bound<'py, PyAny>>; N]> {
    let mut found: [Option<Bound<'py, PyAny>>; N] = std::array::from_fn(|_| None);
    if dict.len() > SCAN_FIELDS_MAX {
        for (slot, name) in found.iter_mut().zip(names) {
            *slot = dict.get_item(name)?;
        }
        return Ok(found);
    }
    for (key, value) in dict.iter() {
        let Ok(key) = key.cast::<PyString>() else {
            continue;
        };
        let key = py_text(key)?;
        if let Some(k) = names.iter().position(|name| *name == key.as_ref()) {
            found[k] = Some(value);
        }
    }
    Ok(found)
}

fn message_from_py(obj: &Bound<'_, PyAny>) -> PyResult<ChatMessage> {
    let Ok(dict) = obj.cast::<PyDict>() else {
        return Ok(ChatMessage::from_value(fast_value(obj)?));
    };
    let [role, content] = dict_fields(dict, ["role", "content"])?;
    let role = match role {
        Some(role) => match role.cast::<PyString>() {
            Ok(text) => Some(py_text(text)?.into_owned()),
            Err(_) => None,
        },
        None => None,
    };
    let content = content.map(|c| fast_value(&c)).transpose()?;
    Ok(ChatMessage { role, content })
}

fn event_from_py(obj: &Bound<'_, PyAny>) -> PyResult<ToolEvent> {
    let Ok(dict) = obj.cast::<PyDict>() else {
        return Ok(ToolEvent::from_value(fast_value(obj)?));
    };
    let [ok, canonical, name, args, result] =
        dict_fields(dict, ["ok", "canonical", "name", "args", "result"])?;
    let truthy =
        |v: Option<Bound<'_, PyAny>>| -> PyResult<bool> { v.map_or(Ok(false), |v| v.is_truthy()) };
    let value = |v: Option<Bound<'_, PyAny>>| -> PyResult<Option<Value>> {
        v.map(|v| fast_value(&v)).transpose()
    };
    Ok(ToolEvent {
        ok: truthy(ok)?,
        canonical: truthy(canonical)?,
        name: value(name)?,
        args: value(args)?,
        result: value(result)?,
    })
}

/// `None` for a missing or `None` field, else `convert` of each item of a list or tuple,
/// straight into a list of the right size.
fn convert_items<'py, T>(
    field: &str,
    obj: Option<Bound<'py, PyAny>>,
    convert: impl Fn(&Bound<'py, PyAny>) -> PyResult<T>,
) -> PyResult<Option<Vec<T>>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(None);
    };
    if let Ok(list) = obj.cast::<PyList>() {
        let mut out = Vec::with_capacity(list.len());
        for item in list.iter() {
            out.push(convert(&item)?);
        }
        return Ok(Some(out));
    }
    if let Ok(tuple) = obj.cast::<PyTuple>() {
        let mut out = Vec::with_capacity(tuple.len());
        for item in tuple.iter() {
            out.push(convert(&item)?);
        }
        return Ok(Some(out));
    }
    Err(type_error(format!(
        "field {field:?}: expected a list, got {}",
        obj.get_type().name()?
    )))
}

/// Tasks already converted in this batch, by the identity of their field objects: the rows
/// of one prompt usually hold the very same `messages` and `gt` objects, which are then
/// converted once. The objects are kept alive so that their addresses stay unique.
#[derive(Default)]
struct TaskCache<'py> {
    tasks: HashMap<[usize; 4], Arc<Task>, FastHash>,
    keep_alive: Vec<Bound<'py, PyAny>>,
}

/// A record's fields, in [`RecordFields::read`]'s order.
struct RecordFields<'py> {
    messages: Option<Bound<'py, PyAny>>,
    gt: Option<Bound<'py, PyAny>>,
    prompt: Option<Bound<'py, PyAny>>,
    task: Option<Bound<'py, PyAny>>,
    tools: Option<Bound<'py, PyAny>>,
    completion: Option<Bound<'py, PyAny>>,
    tool_events: Option<Bound<'py, PyAny>>,
    unfinished: Option<Bound<'py, PyAny>>,
    config: Option<Bound<'py, PyAny>>,
}

impl<'py> RecordFields<'py> {
    fn read(dict: &Bound<'py, PyDict>) -> PyResult<Self> {
        let [messages, gt, prompt, task, tools, completion, tool_events, unfinished, config] =
            dict_fields(
                dict,
                [
                    "messages",
                    "gt",
                    "prompt",
                    "task",
                    "tools",
                    "completion",
                    "tool_events",
                    "unfinished",
                    "config",
                ],
            )?;
        Ok(RecordFields {
            messages,
            gt,
            prompt,
            task,
            tools,
            completion,
            tool_events,
            unfinished,
            config,
        })
    }
}

fn task_from_py<'py>(
    record: &mut RecordFields<'py>,
    cache: &mut TaskCache<'py>,
) -> PyResult<Arc<Task>> {
    let fields = [
        record.messages.take(),
        record.gt.take(),
        record
            .prompt
            .take()
            .filter(|p| !p.is_none())
            .or(record.task.take()),
        record.tools.take(),
    ];
    let key = fields
        .each_ref()
        .map(|f| f.as_ref().map_or(0, |o| o.as_ptr() as usize));
    if let Some(task) = cache.tasks.get(&key) {
        return Ok(Arc::clone(task));
    }
    let [messages, gt, prompt, tools] = fields;
    let mut task = Task::default();
    if let Some(items) = convert_items("messages", messages.clone(), message_from_py)? {
        task.messages = items;
    }
    if let Some(gt) = &gt {
        let value = match gt.cast::<PyList>() {
            Ok(list) => Value::Array(
                list.iter()
                    .map(|g| fast_value(&g))
                    .collect::<PyResult<_>>()?,
            ),
            Err(_) => fast_value(gt)?,
        };
        set_task(&mut task, "gt", value)?;
    }
    if let Some(prompt) = &prompt {
        set_task(&mut task, "prompt", fast_value(prompt)?)?;
    }
    if let Some(tools) = &tools {
        set_task(&mut task, "tools", fast_value(tools)?)?;
    }
    let task = Arc::new(task);
    cache.tasks.insert(key, Arc::clone(&task));
    cache
        .keep_alive
        .extend([messages, gt, prompt, tools].into_iter().flatten());
    Ok(task)
}

fn set_task(task: &mut Task, key: &str, value: Value) -> PyResult<()> {
    Ok(task.set_field(key, value)?)
}

fn record_from_py<'py>(
    obj: &Bound<'py, PyAny>,
    cache: &mut TaskCache<'py>,
) -> PyResult<Trajectory> {
    let dict = obj.cast::<PyDict>().map_err(|_| {
        type_error(format!(
            "expected a dict, got {}",
            obj.get_type()
                .name()
                .map_or_else(|_| "?".to_string(), |n| n.to_string())
        ))
    })?;
    let mut fields = RecordFields::read(dict)?;
    let mut row = Trajectory {
        task: task_from_py(&mut fields, cache)?,
        ..Trajectory::default()
    };
    let completion = fields
        .completion
        .ok_or_else(|| value_error("field \"completion\": missing"))?;
    if let Ok(text) = completion.cast::<PyString>() {
        row.completion = py_text(text)?.into_owned();
    } else {
        set(&mut row, "completion", fast_value(&completion)?)?;
    }
    row.tool_events = convert_items("tool_events", fields.tool_events, event_from_py)?;
    if let Some(flag) = fields.unfinished {
        row.unfinished = flag.is_truthy()?;
    }
    if let Some(value) = fields.config {
        set(&mut row, "config", fast_value(&value)?)?;
    }
    Ok(row)
}

fn set(row: &mut Trajectory, key: &str, value: Value) -> PyResult<()> {
    Ok(row.set_field(key, value)?)
}

fn config_value_from_py(name: &str, obj: &Bound<'_, PyAny>) -> PyResult<ConfigValue> {
    if obj.is_none() {
        Ok(ConfigValue::None)
    } else if let Ok(b) = obj.cast::<PyBool>() {
        Ok(ConfigValue::Bool(b.is_true()))
    } else if obj.is_instance_of::<PyInt>() {
        let i: i64 = obj
            .extract()
            .map_err(|_| value_error(format!("reward setting {name:?}: integer out of range")))?;
        Ok(ConfigValue::Int(i))
    } else if let Ok(f) = obj.cast::<PyFloat>() {
        Ok(ConfigValue::Float(f.value()))
    } else if let Ok(s) = obj.cast::<PyString>() {
        Ok(ConfigValue::Str(s.to_cow()?.into_owned()))
    } else {
        Err(type_error(format!(
            "reward setting {name:?} must be a number, a string or None, got {}",
            obj.get_type().name()?
        )))
    }
}

pub(super) fn config_from_py(settings: Option<&Bound<'_, PyDict>>) -> PyResult<RewardConfig> {
    let mut config = RewardConfig::default();
    if let Some(settings) = settings {
        for (key, value) in settings.iter() {
            let name: String = key
                .extract()
                .map_err(|_| type_error("reward setting names must be strings"))?;
            let value = config_value_from_py(&name, &value)?;
            config.set(&name, &value)?;
        }
    }
    Ok(config)
}

fn config_value_to_py<'py>(py: Python<'py>, value: &ConfigValue) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        ConfigValue::None => py.None().into_bound(py),
        ConfigValue::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        ConfigValue::Int(i) => i.into_pyobject(py)?.into_any(),
        ConfigValue::Float(x) => PyFloat::new(py, *x).into_any(),
        ConfigValue::Str(s) => PyString::new(py, s).into_any(),
    })
}

/// Row-major float64 buffer: one row of `N` values per scored row.
fn row_buffer<'py, const N: usize>(
    py: Python<'py>,
    rows: impl ExactSizeIterator<Item = [f64; N]>,
) -> PyResult<Bound<'py, PyByteArray>> {
    const WIDTH: usize = std::mem::size_of::<f64>();
    PyByteArray::new_with(py, rows.len() * N * WIDTH, |bytes| {
        for (row_bytes, row) in bytes.chunks_exact_mut(N * WIDTH).zip(rows) {
            for (slot, value) in row_bytes.chunks_exact_mut(WIDTH).zip(row) {
                slot.copy_from_slice(&value.to_ne_bytes());
            }
        }
        Ok(())
    })
}

/// Scores a batch of records. Returns `(n, details, contributions)`: `details` holds `n`
/// rows of `len(reward_detail_keys())` float64 values, `contributions` (only with
/// `explain`) `n` rows of one value per `reward_term_keys()` entry.
#[pyfunction]
#[pyo3(signature = (records, config = None, threads = None, explain = false))]
fn reward_score_batch<'py>(
    py: Python<'py>,
    records: &Bound<'py, PyAny>,
    config: Option<&Bound<'py, PyDict>>,
    threads: Option<usize>,
    explain: bool,
) -> PyResult<ScoredBuffers<'py>> {
    let config = config_from_py(config)?;
    let context = ScoringContext::new(config, parallel::resolve_threads(threads), explain);
    let mut records = Records {
        py,
        records: records.try_iter()?.enumerate(),
        cache: TaskCache::default(),
    };
    // Records are converted here a chunk at a time and scored without the GIL.
    let scores = score_rows_in_chunks(&context, &mut records)?;
    scored_buffers(py, &scores, explain)
}

/// Scores records given as JSON lines (`str` or `bytes`, one record each), decoded and
/// scored with the GIL released; no Python objects are built for them. Returns what
/// `reward_score_batch` returns.
#[pyfunction]
#[pyo3(signature = (lines, config = None, threads = None, explain = false))]
fn reward_score_lines<'py>(
    py: Python<'py>,
    lines: &Bound<'py, PyList>,
    config: Option<&Bound<'py, PyDict>>,
    threads: Option<usize>,
    explain: bool,
) -> PyResult<ScoredBuffers<'py>> {
    let config = config_from_py(config)?;
    let threads = parallel::resolve_threads(threads);
    let mut raw: Vec<Vec<u8>> = Vec::with_capacity(lines.len());
    for (i, item) in lines.iter().enumerate() {
        if let Ok(bytes) = item.cast::<PyBytes>() {
            raw.push(bytes.as_bytes().to_vec());
        } else if let Ok(text) = item.cast::<PyString>() {
            raw.push(py_text(text)?.as_bytes().to_vec());
        } else {
            return Err(type_error(format!(
                "record {i}: expected a JSON line (str or bytes), got {}",
                item.get_type().name()?
            )));
        }
    }
    let scores = py
        .detach(|| score_json_lines(&config, &raw, threads, explain))
        .map_err(in_line)?;
    scored_buffers(py, &scores, explain)
}

/// What both batch scorers return: `(n, details, contributions)`, the last only with
/// `explain`.
type ScoredBuffers<'py> = (
    usize,
    Bound<'py, PyByteArray>,
    Option<Bound<'py, PyByteArray>>,
);

fn scored_buffers<'py>(
    py: Python<'py>,
    scores: &BatchScores,
    explain: bool,
) -> PyResult<ScoredBuffers<'py>> {
    let details = row_buffer(py, scores.details.iter().map(|d| d.values()))?;
    let contributions = if explain {
        Some(row_buffer(
            py,
            scores.contributions.iter().map(|c| c.values()),
        )?)
    } else {
        None
    };
    Ok((scores.details.len(), details, contributions))
}

/// The records of a batch as rows, converted with the GIL a chunk at a time.
struct Records<'py> {
    py: Python<'py>,
    records: std::iter::Enumerate<Bound<'py, PyIterator>>,
    cache: TaskCache<'py>,
}

impl RowSource for Records<'_> {
    type Error = PyErr;

    fn next_rows(&mut self, limit: usize) -> PyResult<Option<Vec<Trajectory>>> {
        let mut rows = Vec::with_capacity(limit);
        for (i, record) in self.records.by_ref().take(limit) {
            let row = record_from_py(&record?, &mut self.cache);
            rows.push(row.map_err(|e| in_record(self.py, i, &e))?);
        }
        Ok((!rows.is_empty()).then_some(rows))
    }

    fn lost_chunk(&self) -> PyErr {
        unscored_chunk()
    }

    /// Scoring, and waiting for the pool, run with the GIL released.
    fn blocking<T: Send>(&mut self, run: impl FnOnce() -> T + Send) -> T {
        self.py.detach(run)
    }
}

/// The detail keys, in the column order of `reward_score_batch`.
#[pyfunction]
fn reward_detail_keys() -> Vec<&'static str> {
    DETAIL_KEYS.to_vec()
}

/// The names of the reward's terms (the column order of the contributions).
#[pyfunction]
fn reward_term_keys() -> Vec<&'static str> {
    TERM_KEYS.to_vec()
}

/// Every reward setting as `(name, kind, default)`; kind is `float`, `int`, `flag`,
/// `mode` or `step`.
#[pyfunction]
fn reward_config_fields<'py>(
    py: Python<'py>,
) -> PyResult<Vec<(&'static str, &'static str, Bound<'py, PyAny>)>> {
    RewardConfig::default()
        .items()
        .into_iter()
        .map(|(name, value)| {
            let kind = match RewardConfig::field_kind(name) {
                Some(FieldKind::Float) => "float",
                Some(FieldKind::Int) => "int",
                Some(FieldKind::Flag) => "flag",
                Some(FieldKind::Mode) => "mode",
                Some(FieldKind::Step) | None => "step",
            };
            Ok((name, kind, config_value_to_py(py, &value)?))
        })
        .collect()
}

/// The number of threads a batch would use for `threads` (None: environment or cores).
#[pyfunction]
#[pyo3(signature = (threads = None))]
fn reward_resolve_threads(threads: Option<usize>) -> usize {
    parallel::resolve_threads(threads)
}

/// True in a child process forked after parallel scoring (it scores on one thread).
#[pyfunction]
fn reward_parallelism_disabled() -> bool {
    parallel::parallelism_disabled()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    parallel::register_fork_handler();
    m.add_function(wrap_pyfunction!(reward_score_batch, m)?)?;
    m.add_function(wrap_pyfunction!(reward_score_lines, m)?)?;
    m.add_function(wrap_pyfunction!(reward_detail_keys, m)?)?;
    m.add_function(wrap_pyfunction!(reward_term_keys, m)?)?;
    m.add_function(wrap_pyfunction!(reward_config_fields, m)?)?;
    m.add_function(wrap_pyfunction!(reward_resolve_threads, m)?)?;
    m.add_function(wrap_pyfunction!(reward_parallelism_disabled, m)?)?;
    Ok(())
}
