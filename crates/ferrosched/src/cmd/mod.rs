//! One module per subcommand.

pub mod config;
