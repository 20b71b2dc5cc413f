//! The testable half of the `ferrosched` binary: command-line pieces that tests reach
//! without running the process (`src/main.rs` and `src/cmd/` hold the rest), and the
//! cluster benchmark runner behind `ferrosched bench --kubeconfig`.
#![forbid(unsafe_code)]

pub mod cluster_bench;
pub mod flags;
pub mod hot_code;
pub mod logging;
