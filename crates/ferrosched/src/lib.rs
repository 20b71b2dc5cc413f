//! The testable half of the `ferrosched` binary: command-line pieces that tests reach
//! without running the process (`src/main.rs` and `src/cmd/` hold the rest).
#![forbid(unsafe_code)]

pub mod flags;
