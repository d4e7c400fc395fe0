//! JSON with the semantics of Python's `json` module.
//!
//! Tool calls are decoded as `json.loads` decodes them and canonical calls are written as
//! `json.dumps` writes them. Matching Python exactly needs behaviour that `serde_json` does
//! not have (or has differently), which is why this parser is hand-written:
//!
//! - `NaN`, `Infinity` and `-Infinity` are accepted as numbers;
//! - integers keep any size (Python ints); only the 4300-digit limit of CPython's
//!   int/str conversion applies, which makes `json.loads` raise on longer literals;
//! - floats are parsed as Python's `float()` does (`1e400` is `inf`, never an error);
//! - a duplicated key keeps the last value at the position of the first occurrence, like a
//!   Python dict built from the pairs;
//! - nesting is bounded by an explicit depth that stands in for Python's recursion limit
//!   (see [`PYTHON_MAX_DEPTH`]), and the parser itself never recurses;
//! - `json.dumps` output (float `repr`, `NaN`/`Infinity`, separators, `sort_keys`).
//!
//! One deviation is unavoidable: Python keeps lone surrogates (`"\ud800"`) in a `str`, which a
//! Rust `String` cannot hold; they become U+FFFD here.
//!
//! The same parser has a lenient mode for model output (single quotes, `True`/`False`/`None`,
//! trailing commas, raw control characters in strings), selected by [`ParseOptions`].

mod dump;
mod parse;
pub(crate) mod scan;
mod value;

pub(crate) use dump::write_float_repr;
pub use dump::DumpOptions;
pub use parse::{parse, parse_prefix, JsonError, ParseOptions, PYTHON_MAX_DEPTH};
pub use value::{Object, Value};
