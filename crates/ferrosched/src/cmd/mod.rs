//! One module per subcommand.

pub mod bench;
pub mod config;
pub mod explain;
pub mod output;
pub mod run;
pub mod simulate;
pub mod webhook;

/// The async runtime of the subcommands that talk to an API server: two workers (the
/// scheduling loop runs on its own thread). `Err` has already been reported on stderr.
pub fn runtime() -> Result<tokio::runtime::Runtime, std::process::ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::ExitCode::FAILURE
        })
}
