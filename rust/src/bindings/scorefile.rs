//! `reward_score_file`: a path or a Python file object in, a path or a file object out,
//! scored by `scorefile` with the GIL released. Python streams are read and written through
//! small adapters that take the GIL only for each `read`/`write` call; the GIL is also
//! taken between chunks to run signal handlers, so that Ctrl-C stops a long run.
//!
//! When a Python call made during the run raises (a stream's `read`, a signal handler),
//! that exception is kept and raised in the end instead of a generic error.

use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyString};

use super::json::py_str_lossy;
use super::reward::config_from_py;
use crate::reward::parallel;
use crate::scorefile::histogram::histogram;
use crate::scorefile::{
    open_input, score_into_path, score_stream, FileSummary, LineEnds, ScoreFileError,
    ScoreFileOptions,
};

/// The first Python exception raised during a run, to be raised when it ends.
#[derive(Clone, Default)]
struct Raised(Arc<Mutex<Option<PyErr>>>);

impl Raised {
    /// Keeps `error` (unless an earlier one is kept) and turns it into an I/O error.
    fn keep(&self, error: PyErr) -> io::Error {
        let message = error.to_string();
        if let Ok(mut slot) = self.0.lock() {
            slot.get_or_insert(error);
        }
        io::Error::other(message)
    }

    fn take(&self) -> Option<PyErr> {
        self.0.lock().ok().and_then(|mut slot| slot.take())
    }
}

/// A Python file object as a byte source: `read(n)` may return `bytes` or `str` (encoded
/// as UTF-8).
struct PyReader {
    stream: Py<PyAny>,
    raised: Raised,
    /// Encoded text beyond what the last `read` asked for.
    pending: Vec<u8>,
}

impl Read for PyReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pending.is_empty() {
            self.pending = Python::attach(|py| -> PyResult<Vec<u8>> {
                let data = self.stream.bind(py).call_method1("read", (buf.len(),))?;
                if let Ok(bytes) = data.cast::<PyBytes>() {
                    return Ok(bytes.as_bytes().to_vec());
                }
                if let Ok(text) = data.cast::<PyString>() {
                    return Ok(py_str_lossy(text)?.as_bytes().to_vec());
                }
                let kind = data.get_type().name()?;
                Err(pyo3::exceptions::PyTypeError::new_err(format!(
                    "read() returned {kind}, not bytes or str"
                )))
            })
            .map_err(|e| self.raised.keep(e))?;
        }
        let n = self.pending.len().min(buf.len());
        buf[..n].copy_from_slice(&self.pending[..n]);
        self.pending.drain(..n);
        Ok(n)
    }
}

/// A Python file object as a byte sink; text streams get `str` (the scorer writes whole
/// lines, so every write is valid UTF-8).
struct PyWriter {
    stream: Py<PyAny>,
    text: bool,
    raised: Raised,
}

impl Write for PyWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Python::attach(|py| -> PyResult<()> {
            let stream = self.stream.bind(py);
            if self.text {
                stream.call_method1("write", (String::from_utf8_lossy(buf),))?;
            } else {
                stream.call_method1("write", (PyBytes::new(py, buf),))?;
            }
            Ok(())
        })
        .map_err(|e| self.raised.keep(e))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Python::attach(|py| self.stream.bind(py).call_method0("flush").map(drop))
            .map_err(|e| self.raised.keep(e))
    }
}

enum Source {
    Path(PathBuf),
    Stream(PyReader),
}

enum Sink {
    Path(PathBuf),
    Stream(PyWriter),
}

fn is_text_stream(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    let text_base = obj.py().import("io")?.getattr("TextIOBase")?;
    obj.is_instance(&text_base)
}

fn run(
    source: Source,
    sink: Sink,
    mut options: ScoreFileOptions,
) -> Result<FileSummary, ScoreFileError> {
    let (input, name): (Box<dyn Read + Send>, String) = match source {
        Source::Path(path) => (Box::new(open_input(&path)?), path.display().to_string()),
        Source::Stream(reader) => {
            // Streams end lines at "\n" only, as Python's sys.stdin does.
            options.line_ends = LineEnds::Newline;
            (Box::new(reader), "the input stream".to_string())
        }
    };
    match sink {
        Sink::Path(path) => score_into_path(input, &path, &options, &name),
        Sink::Stream(mut writer) => {
            score_stream(input, &mut writer, &options, &name, "the output stream")
        }
    }
}

/// Scores the JSONL `src` (a path, or a file object to read) into `dst` (a path, written
/// atomically, or a file object). Returns a dict: `lines`, `rewards` (float64 bytes, one per
/// scored line), `skipped` (`(line, reason)` pairs), `skipped_count`, `term_sums` and, with
/// `explain`, `explained` (`(line, reward, raw_reward, terms)` per scored line).
#[pyfunction]
#[pyo3(signature = (src, dst, config = None, threads = None, explain = false))]
fn reward_score_file<'py>(
    py: Python<'py>,
    src: &Bound<'py, PyAny>,
    dst: &Bound<'py, PyAny>,
    config: Option<&Bound<'py, PyDict>>,
    threads: Option<usize>,
    explain: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let raised = Raised::default();
    let on_signal = raised.clone();
    let options = ScoreFileOptions {
        config: config_from_py(config)?,
        threads: parallel::resolve_threads(threads),
        explain,
        line_ends: LineEnds::Universal,
        stop: Some(Arc::new(move || {
            Python::attach(|py| py.check_signals())
                .map_err(|e| on_signal.keep(e))
                .is_err()
        })),
    };
    let source = match src.cast::<PyString>() {
        Ok(path) => Source::Path(PathBuf::from(path.to_cow()?.as_ref())),
        Err(_) => Source::Stream(PyReader {
            stream: src.clone().unbind(),
            raised: raised.clone(),
            pending: Vec::new(),
        }),
    };
    let sink = match dst.cast::<PyString>() {
        Ok(path) => Sink::Path(PathBuf::from(path.to_cow()?.as_ref())),
        Err(_) => Sink::Stream(PyWriter {
            stream: dst.clone().unbind(),
            text: is_text_stream(dst)?,
            raised: raised.clone(),
        }),
    };
    match py.detach(move || run(source, sink, options)) {
        Ok(summary) => summary_to_py(py, summary),
        Err(error) => Err(raised.take().unwrap_or_else(|| error.into())),
    }
}

fn summary_to_py(py: Python<'_>, summary: FileSummary) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("lines", summary.lines)?;
    let rewards = PyByteArray::new_with(py, summary.rewards.len() * 8, |bytes| {
        for (slot, value) in bytes.chunks_exact_mut(8).zip(&summary.rewards) {
            slot.copy_from_slice(&value.to_ne_bytes());
        }
        Ok(())
    })?;
    out.set_item("rewards", rewards)?;
    let skipped: Vec<(usize, String)> = summary
        .skipped
        .into_iter()
        .map(|s| (s.line, s.reason))
        .collect();
    out.set_item("skipped", skipped)?;
    out.set_item("skipped_count", summary.skipped_count)?;
    out.set_item("term_sums", summary.term_sums.to_vec())?;
    let explained: Vec<(usize, f64, f64, Vec<f64>)> = summary
        .explained
        .into_iter()
        .map(|e| (e.line, e.reward, e.raw_reward, e.terms.to_vec()))
        .collect();
    out.set_item("explained", explained)?;
    Ok(out)
}

/// The finite rewards in `rewards` (float64 bytes, as `reward_score_file` returns them)
/// summarised in `bins` equal-width bins: a dict of `finite`, `mean`, `min`, `max`, `edges`
/// and `counts`.
#[pyfunction]
fn reward_histogram<'py>(
    py: Python<'py>,
    rewards: &[u8],
    bins: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let values: Vec<f64> = rewards
        .chunks_exact(8)
        .map(|b| f64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
        .collect();
    let h = histogram(&values, bins);
    let out = PyDict::new(py);
    out.set_item("finite", h.finite)?;
    out.set_item("mean", h.mean)?;
    out.set_item("min", h.min)?;
    out.set_item("max", h.max)?;
    out.set_item("edges", h.edges)?;
    out.set_item("counts", h.counts)?;
    Ok(out)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(reward_score_file, m)?)?;
    m.add_function(wrap_pyfunction!(reward_histogram, m)?)?;
    Ok(())
}
