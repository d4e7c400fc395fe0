//! The one place where failures become Python exceptions.
//!
//! Errors of the Rust core convert with `?` through the `From` impls below; binding code
//! that refuses an argument itself (wrong type, out of range) calls [`type_error`] or
//! [`value_error`]. Which Python class each failure raises is decided here and nowhere else.

use std::fmt::Display;

use pyo3::create_exception;
use pyo3::exceptions::{
    PyKeyboardInterrupt, PyOSError, PyOverflowError, PyRuntimeError, PyTypeError, PyValueError,
};
use pyo3::prelude::*;

use crate::expr::EvalError;
use crate::funcall::TaskError;
use crate::numfmt::FormatError;
use crate::reward::{BatchError, ConfigError, RecordError};
use crate::scorefile::ScoreFileError;

create_exception!(
    _core,
    SafeEvalError,
    PyValueError,
    "An expression the safe evaluator rejects (syntax, unknown name, domain, overflow, ...)."
);

/// Adds the module's own exception classes.
pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("SafeEvalError", m.py().get_type::<SafeEvalError>())
}

/// `TypeError`: an argument or field of the wrong Python type.
pub(super) fn type_error(message: impl Display) -> PyErr {
    PyTypeError::new_err(message.to_string())
}

/// `ValueError`: an argument or field of the right type with a value that cannot be used.
pub(super) fn value_error(message: impl Display) -> PyErr {
    PyValueError::new_err(message.to_string())
}

/// `SafeEvalError` for text the evaluator cannot read at all.
pub(super) fn safe_eval_error(message: impl Display) -> PyErr {
    SafeEvalError::new_err(message.to_string())
}

/// `ValueError` for a panic caught at the boundary: the core is written not to panic, and
/// should it ever, Python sees an ordinary exception instead of a `PanicException`.
pub(super) fn internal_error(what: &str) -> PyErr {
    value_error(format!("internal error in {what} on this input"))
}

/// `RuntimeError` for a chunk of rows whose scoring job ended without a result.
pub(super) fn unscored_chunk() -> PyErr {
    PyRuntimeError::new_err("a chunk of rows was not scored")
}

/// The error of one record of a batch, its message prefixed with the record's index; a
/// `TypeError` stays a `TypeError`, anything else becomes a `ValueError`.
pub(super) fn in_record(py: Python<'_>, index: usize, error: &PyErr) -> PyErr {
    let message = format!("record {index}: {}", error.value(py));
    if error.is_instance_of::<PyTypeError>(py) {
        type_error(message)
    } else {
        value_error(message)
    }
}

impl From<EvalError> for PyErr {
    fn from(error: EvalError) -> Self {
        safe_eval_error(error)
    }
}

/// Python's `round()` raises `OverflowError` for infinities and `ValueError` for NaN.
impl From<FormatError> for PyErr {
    fn from(error: FormatError) -> Self {
        match error {
            FormatError::Infinite => PyOverflowError::new_err(error.to_string()),
            FormatError::NotANumber => value_error(error),
        }
    }
}

impl From<BatchError> for PyErr {
    fn from(error: BatchError) -> Self {
        value_error(error)
    }
}

/// `ValueError` for a batch given as JSON lines, naming the record as `score_batch` does.
pub(super) fn in_line(error: BatchError) -> PyErr {
    value_error(format!("record {}: {}", error.row, error.error))
}

/// A file that cannot be read or written is an `OSError` naming it; a run stopped by a
/// signal is a `KeyboardInterrupt`; a scoring job that ended without a result is a
/// `RuntimeError`.
impl From<ScoreFileError> for PyErr {
    fn from(error: ScoreFileError) -> Self {
        match error {
            // `OSError(errno, message)` when the system gave a code, so that Python tells a
            // missing path (ENOENT) from a full disk (ENOSPC); a damaged input has none.
            ScoreFileError::Io { error: ref io, .. } => match io.raw_os_error() {
                Some(code) => PyOSError::new_err((code, error.to_string())),
                None => PyOSError::new_err(error.to_string()),
            },
            ScoreFileError::Stopped => PyKeyboardInterrupt::new_err(error.to_string()),
            ScoreFileError::Internal(_) => PyRuntimeError::new_err(error.to_string()),
        }
    }
}

impl From<ConfigError> for PyErr {
    fn from(error: ConfigError) -> Self {
        value_error(error)
    }
}

impl From<TaskError> for PyErr {
    fn from(error: TaskError) -> Self {
        value_error(error)
    }
}

impl From<RecordError> for PyErr {
    fn from(error: RecordError) -> Self {
        value_error(error)
    }
}
