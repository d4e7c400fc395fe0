//! agentrl's Rust core.
//!
//! The pure modules (`text`, `expr`, `numfmt`, `pyjson`, `toolcall`, ...) hold all the logic
//! and are tested with `cargo test`. `bindings` is the thin PyO3 layer that converts types
//! and turns errors into Python exceptions; it contains no logic of its own.

pub mod answer;
#[cfg(feature = "python")]
pub mod bindings;
pub mod expr;
pub mod message;
pub mod numfmt;
pub mod pyjson;
pub mod reward;
pub mod text;
pub mod toolcall;
