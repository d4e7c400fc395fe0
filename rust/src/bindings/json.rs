//! Conversions between `pyjson::Value` and Python objects, and `json_dumps`.
//!
//! Both directions walk containers with an explicit stack, so nesting depth never turns
//! into Rust recursion; Python objects deeper than the limit (or cyclic) are refused.

use std::borrow::Cow;

use pyo3::marker::Ungil;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use super::error::{type_error, value_error};
use crate::pyjson::{DumpOptions, Object, Value, PYTHON_MAX_DEPTH};

/// Below this many bytes of input, parsing is quicker than releasing and re-taking the GIL.
const DETACH_MIN_BYTES: usize = 8192;

/// Runs `work` on `len` bytes of input, without the GIL when the input is large enough for
/// other Python threads to gain from it.
pub(crate) fn without_gil_if_long<T, F>(py: Python<'_>, len: usize, work: F) -> T
where
    F: Ungil + FnOnce() -> T,
    T: Ungil,
{
    if len >= DETACH_MIN_BYTES {
        py.detach(work)
    } else {
        work()
    }
}

/// A Python `str` as Rust text. Lone surrogates, which Rust strings cannot hold, become
/// U+FFFD (one per surrogate, so character counts stay the same).
pub(crate) fn py_str_lossy<'a>(s: &'a Bound<'_, PyString>) -> PyResult<Cow<'a, str>> {
    if let Ok(text) = s.to_cow() {
        return Ok(text);
    }
    let encoded = s.call_method1("encode", ("utf-8", "surrogatepass"))?;
    let bytes: Vec<u8> = encoded.extract()?;
    let mut out = String::with_capacity(bytes.len());
    let mut rest = bytes.as_slice();
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(valid) => {
                out.push_str(valid);
                break;
            }
            Err(err) => {
                let (valid, bad) = rest.split_at(err.valid_up_to());
                out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                out.push('\u{FFFD}');
                // A surrogate encoded with "surrogatepass" is three bytes: ED A0..BF xx.
                let skip = match bad {
                    [0xED, 0xA0..=0xBF, _, ..] => 3,
                    _ => err.error_len().unwrap_or(bad.len()),
                };
                rest = &bad[skip.min(bad.len())..];
            }
        }
    }
    Ok(Cow::Owned(out))
}

/// The Python object `json.loads` would have produced for this value (dicts keep key
/// order; big integers become exact `int`s).
pub(crate) fn value_to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    enum Filling<'a, 'py> {
        List(Bound<'py, PyList>, std::slice::Iter<'a, Value>),
        Dict(Bound<'py, PyDict>, std::slice::Iter<'a, (String, Value)>),
    }

    /// The Python object for `v`; for a container, an empty one plus what fills it.
    fn start<'a, 'py>(
        py: Python<'py>,
        v: &'a Value,
    ) -> PyResult<(Bound<'py, PyAny>, Option<Filling<'a, 'py>>)> {
        Ok(match v {
            Value::Null => (py.None().into_bound(py), None),
            Value::Bool(b) => (PyBool::new(py, *b).to_owned().into_any(), None),
            Value::Int(i) => (i.into_pyobject(py)?.into_any(), None),
            Value::BigInt(digits) => (py.get_type::<PyInt>().call1((digits.as_str(),))?, None),
            Value::Float(f) => (PyFloat::new(py, *f).into_any(), None),
            Value::Str(s) => (PyString::new(py, s).into_any(), None),
            Value::Array(items) => {
                let list = PyList::empty(py);
                (
                    list.clone().into_any(),
                    Some(Filling::List(list, items.iter())),
                )
            }
            Value::Object(obj) => {
                let dict = PyDict::new(py);
                (
                    dict.clone().into_any(),
                    Some(Filling::Dict(dict, obj.iter())),
                )
            }
        })
    }

    let (root, filling) = start(py, value)?;
    let mut stack: Vec<Filling<'_, 'py>> = filling.into_iter().collect();
    while let Some(top) = stack.last_mut() {
        let child = match top {
            Filling::List(list, items) => match items.next() {
                Some(v) => {
                    let (obj, filling) = start(py, v)?;
                    list.append(obj)?;
                    filling
                }
                None => {
                    stack.pop();
                    continue;
                }
            },
            Filling::Dict(dict, entries) => match entries.next() {
                Some((k, v)) => {
                    let (obj, filling) = start(py, v)?;
                    dict.set_item(k, obj)?;
                    filling
                }
                None => {
                    stack.pop();
                    continue;
                }
            },
        };
        stack.extend(child);
    }
    Ok(root)
}

/// `json.dumps`'s text for a dict key that is not a string (it converts these).
fn key_text(key: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(s) = key.cast::<PyString>() {
        return Ok(py_str_lossy(s)?.into_owned());
    }
    let scalar = scalar_from_py(key)?.filter(|v| !matches!(v, Value::Str(_)));
    match scalar {
        Some(Value::Null) => Ok("null".to_owned()),
        Some(Value::BigInt(digits)) => Ok(digits),
        Some(v) => Ok(v.to_json_string()),
        None => Err(type_error(format!(
            "keys must be str, int, float, bool or None, not {}",
            key.get_type().name()?
        ))),
    }
}

/// A non-container Python value, or `None` when `obj` is not one.
fn scalar_from_py(obj: &Bound<'_, PyAny>) -> PyResult<Option<Value>> {
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
        // `int.__repr__` gives plain digits even for int subclasses with their own `str`.
        let digits = obj
            .py()
            .get_type::<PyInt>()
            .call_method1("__repr__", (obj,))?;
        return Ok(Some(Value::BigInt(digits.extract()?)));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Ok(Some(Value::Float(f.value())));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Some(Value::Str(py_str_lossy(s)?.into_owned())));
    }
    Ok(None)
}

/// The JSON value of a Python object made of what `json.dumps` accepts: `None`, `bool`,
/// `int`, `float`, `str`, `list`, `tuple`, `dict` (keys converted as `json.dumps` does).
/// Anything else, or nesting deeper than the JSON depth limit (cycles included), raises.
pub(crate) fn value_from_py(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    enum Building<'py> {
        Array(Vec<Value>, std::vec::IntoIter<Bound<'py, PyAny>>),
        Object(
            Vec<(String, Value)>,
            std::vec::IntoIter<(String, Bound<'py, PyAny>)>,
            String,
        ),
    }

    let mut stack: Vec<Building<'_>> = Vec::new();
    let mut current = obj.clone();
    'value: loop {
        let mut done = match scalar_from_py(&current)? {
            Some(v) => v,
            None => {
                let children: Option<Vec<Bound<'_, PyAny>>> =
                    if let Ok(list) = current.cast::<PyList>() {
                        Some(list.iter().collect())
                    } else if let Ok(tuple) = current.cast::<PyTuple>() {
                        Some(tuple.iter().collect())
                    } else {
                        None
                    };
                let entries = match current.cast::<PyDict>() {
                    Ok(dict) => Some(
                        dict.iter()
                            .map(|(k, v)| Ok((key_text(&k)?, v)))
                            .collect::<PyResult<Vec<_>>>()?,
                    ),
                    Err(_) => None,
                };
                if children.is_none() && entries.is_none() {
                    return Err(type_error(format!(
                        "Object of type {} is not JSON serializable",
                        current.get_type().name()?
                    )));
                }
                if stack.len() >= PYTHON_MAX_DEPTH {
                    return Err(value_error(format!(
                        "value nested deeper than {PYTHON_MAX_DEPTH} levels (or circular)"
                    )));
                }
                if let Some(children) = children {
                    let mut todo = children.into_iter();
                    match todo.next() {
                        Some(first) => {
                            stack.push(Building::Array(Vec::new(), todo));
                            current = first;
                            continue 'value;
                        }
                        None => Value::Array(Vec::new()),
                    }
                } else {
                    let mut todo = entries.unwrap_or_default().into_iter();
                    match todo.next() {
                        Some((key, first)) => {
                            stack.push(Building::Object(Vec::new(), todo, key));
                            current = first;
                            continue 'value;
                        }
                        None => Value::Object(Object::new()),
                    }
                }
            }
        };
        loop {
            match stack.last_mut() {
                None => return Ok(done),
                Some(Building::Array(items, todo)) => {
                    items.push(done);
                    if let Some(next) = todo.next() {
                        current = next;
                        continue 'value;
                    }
                    done = Value::Array(std::mem::take(items));
                }
                Some(Building::Object(pairs, todo, key)) => {
                    pairs.push((std::mem::take(key), done));
                    if let Some((next_key, next)) = todo.next() {
                        *key = next_key;
                        current = next;
                        continue 'value;
                    }
                    done = Value::Object(Object::from_pairs(std::mem::take(pairs)));
                }
            }
            stack.pop();
        }
    }
}

/// `json.dumps(obj, ensure_ascii=False, sort_keys=..., separators=...)` in Rust; the text
/// of canonical calls (`compact=True`) and of the keys of repeated-call checks.
#[pyfunction]
#[pyo3(signature = (obj, *, sort_keys = false, compact = true))]
fn json_dumps(obj: &Bound<'_, PyAny>, sort_keys: bool, compact: bool) -> PyResult<String> {
    let value = value_from_py(obj)?;
    Ok(value.to_json_string_with(&DumpOptions { compact, sort_keys }))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(json_dumps, m)?)?;
    Ok(())
}
