//! PyO3 bindings: one file per concept, type conversion only.

mod error;
mod expr;
mod funcall;
mod json;
mod message;
mod reward;
mod scorefile;
mod toolcall;

use pyo3::prelude::*;

/// The `agentrl._core` extension module.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    error::register(m)?;
    expr::register(m)?;
    funcall::register(m)?;
    toolcall::register(m)?;
    reward::register(m)?;
    scorefile::register(m)?;
    Ok(())
}
