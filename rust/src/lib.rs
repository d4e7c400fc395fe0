//! agentrl's Rust core.
//!
//! The pure modules (`pychar`, `expr`, `numfmt`, `pyjson`, `toolcall`, `message`, `reward`,
//! `funcall`, `scorefile`)
//! hold all the logic and are tested with `cargo test`. `bindings` is the thin PyO3 layer
//! that converts types and, in `bindings::error`, turns errors into Python exceptions; it
//! contains no logic of its own.
//!
//! The Python extension is the crate's only consumer, so every module is private: with the
//! `python` feature on, the compiler reports any code the extension cannot reach. Without
//! it (plain `cargo test`/`cargo clippy`) nothing outside the tests calls the core, so dead
//! code is only reported in the `python` build.
#![cfg_attr(not(feature = "python"), allow(dead_code, unused_imports))]

#[cfg(feature = "python")]
mod bindings;
mod expr;
mod funcall;
#[cfg(test)]
mod linear;
mod message;
mod numfmt;
mod pychar;
mod pyjson;
mod reward;
mod scorefile;
mod toolcall;

/// The core allocates many short-lived small strings (each JSON record's fields, each
/// parsed tool call); mimalloc serves them several times faster than the system allocator
/// and does not serialise worker threads on one heap lock.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
