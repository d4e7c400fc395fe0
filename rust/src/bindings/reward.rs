//! Reward scoring for Python: records and settings in, flat float64 buffers out.
//!
//! A batch is converted to Rust data while holding the GIL, scored with the GIL released,
//! and returned as `bytearray`s of native-endian float64 in column-major order (one
//! contiguous column per detail key), which `numpy.frombuffer` views without copying.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyDict, PyFloat, PyInt, PyString};

use super::json::value_from_py;
use crate::pyjson::{Object, Value};
use crate::reward::config::FieldKind;
use crate::reward::{
    parallel, score_batch, ConfigValue, RewardConfig, Trajectory, DETAIL_COUNT, DETAIL_KEYS,
    TERM_COUNT, TERM_KEYS,
};

/// The record keys the scorer reads; others (a previous `reward`, ids) are not converted.
const RECORD_KEYS: [&str; 9] = [
    "messages",
    "prompt",
    "task",
    "gt",
    "completion",
    "tool_events",
    "unfinished",
    "tools",
    "config",
];

fn record_from_py(index: usize, obj: &Bound<'_, PyAny>) -> PyResult<Trajectory> {
    let dict = obj.cast::<PyDict>().map_err(|_| {
        PyTypeError::new_err(format!(
            "record {index}: expected a dict, got {}",
            obj.get_type()
                .name()
                .map_or_else(|_| "?".to_string(), |n| n.to_string())
        ))
    })?;
    let mut pairs = Vec::with_capacity(RECORD_KEYS.len());
    for key in RECORD_KEYS {
        if let Some(value) = dict.get_item(key)? {
            let value = value_from_py(&value).map_err(|e| {
                PyValueError::new_err(format!("record {index}: field {key:?}: {e}"))
            })?;
            pairs.push((key.to_string(), value));
        }
    }
    Trajectory::from_value(Value::Object(Object::from_pairs(pairs)))
        .map_err(|e| PyValueError::new_err(format!("record {index}: {e}")))
}

fn config_value_from_py(name: &str, obj: &Bound<'_, PyAny>) -> PyResult<ConfigValue> {
    if obj.is_none() {
        Ok(ConfigValue::None)
    } else if let Ok(b) = obj.cast::<PyBool>() {
        Ok(ConfigValue::Bool(b.is_true()))
    } else if obj.is_instance_of::<PyInt>() {
        let i: i64 = obj.extract().map_err(|_| {
            PyValueError::new_err(format!("reward setting {name:?}: integer out of range"))
        })?;
        Ok(ConfigValue::Int(i))
    } else if let Ok(f) = obj.cast::<PyFloat>() {
        Ok(ConfigValue::Float(f.value()))
    } else if let Ok(s) = obj.cast::<PyString>() {
        Ok(ConfigValue::Str(s.to_cow()?.into_owned()))
    } else {
        Err(PyTypeError::new_err(format!(
            "reward setting {name:?} must be a number, a string or None, got {}",
            obj.get_type().name()?
        )))
    }
}

fn config_from_py(settings: Option<&Bound<'_, PyDict>>) -> PyResult<RewardConfig> {
    let mut config = RewardConfig::default();
    if let Some(settings) = settings {
        for (key, value) in settings.iter() {
            let name: String = key.extract().map_err(|_| {
                PyTypeError::new_err("reward setting names must be strings".to_string())
            })?;
            let value = config_value_from_py(&name, &value)?;
            config
                .set(&name, &value)
                .map_err(|e| PyValueError::new_err(e.to_string()))?;
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

/// Column-major float64 buffer: `columns` columns of `rows` values each.
fn column_buffer<'py, const N: usize>(
    py: Python<'py>,
    rows: &[[f64; N]],
) -> PyResult<Bound<'py, PyByteArray>> {
    const WIDTH: usize = std::mem::size_of::<f64>();
    let n = rows.len();
    PyByteArray::new_with(py, n * N * WIDTH, |bytes| {
        for (i, row) in rows.iter().enumerate() {
            for (j, value) in row.iter().enumerate() {
                let at = (j * n + i) * WIDTH;
                bytes[at..at + WIDTH].copy_from_slice(&value.to_ne_bytes());
            }
        }
        Ok(())
    })
}

/// Scores a batch of records. Returns `(n, details, contributions)`: `details` holds
/// `len(reward_detail_keys())` columns of `n` float64 values, `contributions` (only with
/// `explain`) one column per `reward_term_keys()` entry.
#[pyfunction]
#[pyo3(signature = (records, config = None, threads = None, explain = false))]
fn reward_score_batch<'py>(
    py: Python<'py>,
    records: &Bound<'py, PyAny>,
    config: Option<&Bound<'py, PyDict>>,
    threads: Option<usize>,
    explain: bool,
) -> PyResult<(
    usize,
    Bound<'py, PyByteArray>,
    Option<Bound<'py, PyByteArray>>,
)> {
    let config = config_from_py(config)?;
    let rows: Vec<Trajectory> = records
        .try_iter()?
        .enumerate()
        .map(|(i, item)| record_from_py(i, &item?))
        .collect::<PyResult<_>>()?;
    let threads = parallel::resolve_threads(threads);
    let scores = py
        .detach(|| score_batch(&config, &rows, threads))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let details: Vec<[f64; DETAIL_COUNT]> = scores.details.iter().map(|d| d.values()).collect();
    let details = column_buffer(py, &details)?;
    let contributions = if explain {
        let terms: Vec<[f64; TERM_COUNT]> =
            scores.contributions.iter().map(|c| c.values()).collect();
        Some(column_buffer(py, &terms)?)
    } else {
        None
    };
    Ok((rows.len(), details, contributions))
}

/// The detail keys, in the seed's order (the column order of `reward_score_batch`).
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

/// Checks settings as the scorer would and returns the full resolved configuration.
#[pyfunction]
#[pyo3(signature = (settings = None))]
fn reward_resolve_config<'py>(
    py: Python<'py>,
    settings: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let config = config_from_py(settings)?;
    let out = PyDict::new(py);
    for (name, value) in config.items() {
        out.set_item(name, config_value_to_py(py, &value)?)?;
    }
    Ok(out)
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
    m.add_function(wrap_pyfunction!(reward_detail_keys, m)?)?;
    m.add_function(wrap_pyfunction!(reward_term_keys, m)?)?;
    m.add_function(wrap_pyfunction!(reward_config_fields, m)?)?;
    m.add_function(wrap_pyfunction!(reward_resolve_config, m)?)?;
    m.add_function(wrap_pyfunction!(reward_resolve_threads, m)?)?;
    m.add_function(wrap_pyfunction!(reward_parallelism_disabled, m)?)?;
    Ok(())
}
