//! One module per subcommand.

pub mod bench;
pub mod config;
pub mod explain;
pub mod output;
pub mod report;
pub mod run;
pub mod simulate;
pub mod simulate_add_nodes;
pub mod simulate_capacity;
pub mod simulate_drain;
pub mod webhook;

/// How many threads a subcommand's async runtime gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Threads {
    /// Everything on the calling thread: `run` (its scheduling loop has a thread of its
    /// own; the runtime only moves bytes and applies watch events). Against a real
    /// kube-apiserver this took ~7% off the CPU per pod and ~4 MiB off the peak RSS
    /// compared with two workers: no wake-ups across threads, one allocator heap fewer
    /// (benches/reports/2026-11-25b-real-apiserver.md).
    One,
    /// Two workers: the bench driver and the webhook, which serve or create many
    /// objects at once.
    Two,
}

/// The async runtime of the subcommands that talk to an API server. `Err` has already
/// been reported on stderr.
pub fn runtime(threads: Threads) -> Result<tokio::runtime::Runtime, std::process::ExitCode> {
    let mut builder = match threads {
        Threads::One => tokio::runtime::Builder::new_current_thread(),
        Threads::Two => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(2);
            b
        }
    };
    builder.enable_all().build().map_err(|e| {
        eprintln!("error: cannot start the async runtime: {e}");
        std::process::ExitCode::FAILURE
    })
}
