//! One module per subcommand.

pub mod bench;
pub mod config;
pub mod run;
pub mod simulate;
pub mod webhook;
