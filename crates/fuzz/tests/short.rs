//! The short run inside `cargo test --workspace`: a few thousand inputs across the four
//! targets, deterministic (seed 1 unless `FERROSCHED_FUZZ_SEED`), with a generous per-input
//! time limit. A failure names the input, saved under `target/fuzz/failures/`, and the
//! command that replays it. The long run is `ferrosched-fuzz` (docs/fuzzing.md).

use ferrosched_fuzz::{Options, Target, campaign};

/// Inputs per target: sized so all four together take well under a minute in a debug
/// build on 2 cores. Configs and dumps get fewer: an alias bomb runs the YAML budget to its
/// limit (about a second each in debug) and a dump that loads runs the whole scheduler.
/// `FERROSCHED_FUZZ_SHORT_SCALE` multiplies them (e.g. 10 for a longer debug run).
fn short_run(target: Target, inputs: u64) {
    let scale = std::env::var("FERROSCHED_FUZZ_SHORT_SCALE")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(1);
    let mut opts = Options::new(inputs * scale);
    opts.targets = vec![target];
    // Smaller inputs than the long run's 1 MiB: a debug build is ~20x slower.
    opts.max_input = 64 * 1024;
    match campaign(&opts) {
        Ok(summary) => eprintln!("{summary}"),
        Err(failure) => panic!("{failure}"),
    }
}

#[test]
fn config() {
    short_run(Target::Config, 400);
}

#[test]
fn dump() {
    short_run(Target::Dump, 200);
}

#[test]
fn cel() {
    short_run(Target::Cel, 1000);
}

#[test]
fn admission() {
    short_run(Target::Admission, 1500);
}
