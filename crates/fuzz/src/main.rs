//! `ferrosched-fuzz`: the long run, and replays. See `docs/fuzzing.md`.
//!
//! ```text
//! ferrosched-fuzz [--iterations N] [--seed S] [--targets config,dump,cel,admission]
//!                 [--jobs J] [--timeout SECS] [--max-input BYTES] [--progress SECS]
//! ferrosched-fuzz --seed S --target T --index I     make input I again, save it, run it
//! ferrosched-fuzz --replay T FILE                    run a saved input
//! ```
//!
//! `--iterations` defaults to `$FERROSCHED_FUZZ_ITERATIONS`, else 1,000,000.

use std::process::ExitCode;
use std::time::Duration;

use ferrosched_fuzz::{Options, Target, campaign, input_for, replay, run};

fn usage() -> ExitCode {
    eprintln!(
        "usage: ferrosched-fuzz [--iterations N] [--seed S] [--targets config,dump,cel,admission] \
         [--jobs J] [--timeout SECS] [--max-input BYTES] [--progress SECS]\n       \
         ferrosched-fuzz --seed S --target T --index I\n       \
         ferrosched-fuzz --replay TARGET FILE"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let iterations = std::env::var("FERROSCHED_FUZZ_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let mut opts = Options::new(iterations);
    opts.progress = Some(Duration::from_secs(30));
    let mut index: Option<u64> = None;
    let mut replay_of: Option<(Target, String)> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next();
        let ok = match a.as_str() {
            "--iterations" => value()
                .and_then(|v| v.parse().ok())
                .map(|v| opts.iterations = v),
            "--seed" => value().and_then(|v| v.parse().ok()).map(|v| opts.seed = v),
            "--targets" | "--target" => value().and_then(|v| {
                v.split(',')
                    .map(Target::from_name)
                    .collect::<Option<Vec<_>>>()
                    .map(|t| opts.targets = t)
            }),
            "--jobs" => value()
                .and_then(|v| v.parse().ok())
                .map(|v: usize| opts.jobs = v.max(1)),
            "--timeout" => value()
                .and_then(|v| v.parse().ok())
                .map(|v| opts.timeout = Duration::from_secs(v)),
            "--max-input" => value()
                .and_then(|v| v.parse().ok())
                .map(|v| opts.max_input = v),
            "--progress" => value()
                .and_then(|v| v.parse().ok())
                .map(|v| opts.progress = (v > 0).then(|| Duration::from_secs(v))),
            "--index" => value()
                .and_then(|v| v.parse().ok())
                .map(|v| index = Some(v)),
            "--replay" => match (value().as_deref().and_then(Target::from_name), value()) {
                (Some(t), Some(f)) => {
                    replay_of = Some((t, f));
                    Some(())
                }
                _ => None,
            },
            _ => None,
        };
        if ok.is_none() {
            return usage();
        }
    }

    if let Some((target, file)) = replay_of {
        let input = match std::fs::read(&file) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("cannot read {file}: {e}");
                return ExitCode::from(2);
            }
        };
        return report_one(target, input, opts.timeout);
    }
    if let Some(index) = index {
        let [target] = opts.targets[..] else {
            eprintln!("--index needs exactly one --target");
            return ExitCode::from(2);
        };
        let input = input_for(target, opts.seed, index, opts.max_input);
        if let Some(p) = run::save_failure(&opts.out_dir, target, opts.seed, index, &input) {
            eprintln!("input saved to {}", p.display());
        }
        return report_one(target, input, opts.timeout);
    }

    eprintln!(
        "fuzzing {} inputs over {} with seed {}, {} job(s), {}s per input, inputs up to {} bytes; failures go to {}",
        opts.iterations,
        opts.targets
            .iter()
            .map(|t| t.name())
            .collect::<Vec<_>>()
            .join(","),
        opts.seed,
        opts.jobs,
        opts.timeout.as_secs(),
        opts.max_input,
        opts.out_dir.display()
    );
    let result = campaign(&opts);
    let rss = run::peak_rss_kib().map_or("?".into(), |k| format!("{} MiB", k / 1024));
    match result {
        Ok(summary) => {
            println!("{summary}\npeak RSS {rss}");
            ExitCode::SUCCESS
        }
        Err(f) => {
            eprintln!("{f}\npeak RSS {rss}");
            // A worker may still be stuck on a hanging input: leave without waiting.
            std::process::exit(1);
        }
    }
}

fn report_one(target: Target, input: Vec<u8>, timeout: Duration) -> ExitCode {
    let len = input.len();
    match replay(target, input, timeout) {
        Ok((outcome, took)) => {
            println!(
                "{}: {outcome:?} in {:.3}s ({len} bytes)",
                target.name(),
                took.as_secs_f64()
            );
            ExitCode::SUCCESS
        }
        Err(kind) => {
            eprintln!("{}: {kind} ({len} bytes)", target.name());
            std::process::exit(1);
        }
    }
}
