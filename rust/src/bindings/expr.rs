//! Python bindings of the arithmetic core: type conversion and error mapping only.

use std::borrow::Cow;
use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyFloat, PyString};

use super::error::{internal_error, safe_eval_error};
use crate::expr;
use crate::numfmt;

/// Inputs at least this long (in bytes) are processed with the GIL released.
const DETACH_BYTES: usize = 16 * 1024;

/// The text of an argument as Python's `str(obj)` gives it, and whether it could be
/// read without replacing lone surrogates by U+FFFD.
fn text_of<'a>(obj: &'a Bound<'_, PyAny>) -> PyResult<(Cow<'a, str>, bool)> {
    let owned;
    let s = match obj.cast::<PyString>() {
        Ok(s) => s,
        Err(_) => {
            owned = obj.str()?;
            return Ok(match owned.to_cow() {
                Ok(text) => (Cow::Owned(text.into_owned()), true),
                Err(_) => (Cow::Owned(owned.to_string_lossy().into_owned()), false),
            });
        }
    };
    Ok(match s.to_cow() {
        Ok(text) => (text, true),
        Err(_) => (s.to_string_lossy(), false),
    })
}

/// Run `f` on `text`, releasing the GIL when the text is large. A panic (the core is written
/// not to panic) becomes [`internal_error`] instead of crossing into Python.
fn with_text<T: Send>(
    py: Python<'_>,
    what: &str,
    text: &str,
    f: impl FnOnce(&str) -> T + Send,
) -> PyResult<T> {
    let guarded = || catch_unwind(AssertUnwindSafe(|| f(text)));
    let outcome = if text.len() >= DETACH_BYTES {
        py.detach(guarded)
    } else {
        guarded()
    };
    outcome.map_err(|_| internal_error(what))
}

/// Full-width characters to ASCII, `^` to `**`, whitespace removed.
#[pyfunction]
fn canonicalize_expression<'py>(
    py: Python<'py>,
    text: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let (as_text, lossless) = text_of(text)?;
    if lossless {
        let canonical = with_text(py, "canonicalize_expression", &as_text, expr::canonicalize)?;
        return Ok(PyString::new(py, &canonical).into_any());
    }
    // Lone surrogates have no UTF-8 form: go through UTF-32, which keeps every code point.
    let as_str = match text.cast::<PyString>() {
        Ok(s) => s.clone(),
        Err(_) => text.str()?,
    };
    let encoded = as_str.call_method1("encode", ("utf-32-le", "surrogatepass"))?;
    let bytes: &[u8] = encoded.extract()?;
    let code_points: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let out: Vec<u8> = expr::canonicalize_code_points(&code_points)
        .into_iter()
        .flat_map(u32::to_le_bytes)
        .collect();
    PyBytes::new(py, &out).call_method1("decode", ("utf-32-le", "surrogatepass"))
}

/// Evaluate an arithmetic expression with Python float semantics (never `eval`).
#[pyfunction]
fn safe_eval(py: Python<'_>, expr: &Bound<'_, PyAny>) -> PyResult<f64> {
    let (text, lossless) = text_of(expr)?;
    if !lossless {
        return Err(safe_eval_error("expression contains a lone surrogate"));
    }
    Ok(with_text(py, "safe_eval", &text, expr::safe_eval)??)
}

/// A number's text: exact integer digits, else at most 10 decimals.
#[pyfunction]
fn format_number(value: &Bound<'_, PyAny>) -> PyResult<String> {
    let number = match value.cast::<PyFloat>() {
        Ok(f) => f.value(),
        // Read like `float(value)`, which also accepts ints and numeric strings.
        Err(_) => value
            .py()
            .get_type::<PyFloat>()
            .call1((value,))?
            .extract::<f64>()?,
    };
    Ok(numfmt::format_number(number)?)
}

/// Arithmetic expressions found in mixed Chinese/English text, each validated.
#[pyfunction]
#[pyo3(signature = (text, max_exprs = 8))]
fn extract_expressions(
    py: Python<'_>,
    text: &Bound<'_, PyAny>,
    max_exprs: i64,
) -> PyResult<Vec<String>> {
    // Lone surrogates cannot be part of a valid expression and play no role in where
    // matches start or end, so reading them as U+FFFD changes nothing.
    let (text, _) = text_of(text)?;
    with_text(py, "extract_expressions", &text, |t| {
        expr::extract_expressions(t, max_exprs)
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(canonicalize_expression, m)?)?;
    m.add_function(wrap_pyfunction!(safe_eval, m)?)?;
    m.add_function(wrap_pyfunction!(format_number, m)?)?;
    m.add_function(wrap_pyfunction!(extract_expressions, m)?)?;
    Ok(())
}
