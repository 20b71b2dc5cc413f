//! A fuzz harness for ferrosched's untrusted inputs, on stable Rust (no cargo-fuzz, no
//! nightly, no sanitizers): scheduler configs, cluster dumps, DRA CEL selectors and
//! AdmissionReviews (see `docs/fuzzing.md`).
//!
//! * [`seeds`]: the repository's examples each target starts from.
//! * [`mutate`]: a seeded mutator (byte flips, splices between seeds, duplicated lines,
//!   anchors and aliases, deep nesting, huge and negative numbers, long strings).
//! * [`targets`]: the four targets, each the production entry point for its input.
//! * [`run`]: runs inputs on worker threads with a per-input time limit; the first panic or
//!   hang stops the run and its input is saved for replay.
//!
//! Input `i` of a target under seed `s` depends on `(s, target, i)` only, so any input can
//! be made again (`--index`) without running the ones before it.

pub mod mutate;
pub mod run;
pub mod seeds;
pub mod targets;

pub use run::{Failure, FailureKind, Options, Summary, campaign, replay};

/// One kind of input and the code that reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// Scheduler config YAML -> `config::load_str`.
    Config,
    /// Cluster dump YAML/JSON -> `simulate::load_str`, then `simulate::run`.
    Dump,
    /// A DRA CEL selector -> compiled, then evaluated against a few devices.
    Cel,
    /// An AdmissionReview body -> the webhook's review handling.
    Admission,
}

impl Target {
    pub const ALL: [Target; 4] = [Target::Config, Target::Dump, Target::Cel, Target::Admission];

    pub fn name(self) -> &'static str {
        match self {
            Target::Config => "config",
            Target::Dump => "dump",
            Target::Cel => "cel",
            Target::Admission => "admission",
        }
    }

    pub fn from_name(name: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The saved input's file extension.
    pub fn extension(self) -> &'static str {
        match self {
            Target::Config | Target::Dump => "yaml",
            Target::Cel => "cel",
            Target::Admission => "json",
        }
    }

    /// The stack the target runs on: the smallest it gets in production. The webhook's
    /// handlers run on tokio's workers and selectors are evaluated on the scheduling thread
    /// and rayon's (2 MiB each); configs and dumps are read on the main thread (8 MiB).
    pub fn stack_size(self) -> usize {
        match self {
            Target::Config | Target::Dump => 8 << 20,
            Target::Cel | Target::Admission => 2 << 20,
        }
    }

    /// Runs one input. Text targets read the bytes as UTF-8 (invalid sequences replaced),
    /// as `std::fs::read_to_string` would refuse them and the API server never sends them.
    pub fn run(self, input: &[u8]) -> targets::Outcome {
        match self {
            Target::Config => targets::config(&String::from_utf8_lossy(input)),
            Target::Dump => targets::dump(&String::from_utf8_lossy(input)),
            Target::Cel => targets::cel(&String::from_utf8_lossy(input)),
            Target::Admission => targets::admission(input),
        }
    }
}

/// The target's seeds, built once.
pub fn seeds_of(t: Target) -> &'static [Vec<u8>] {
    static SEEDS: std::sync::OnceLock<Vec<Vec<Vec<u8>>>> = std::sync::OnceLock::new();
    let all = SEEDS.get_or_init(|| Target::ALL.iter().map(|t| seeds::for_target(*t)).collect());
    &all[t as usize]
}

/// Input `index` of `target` under `seed`, at most `max_len` bytes. Text targets get valid
/// UTF-8 (what the target reads, and what a failure saves).
pub fn input_for(target: Target, seed: u64, index: u64, max_len: usize) -> Vec<u8> {
    let mut rng = fastrand::Rng::with_seed(mix(&[seed, target as u64, index]));
    let bytes = mutate::input(&mut rng, target, seeds_of(target), max_len);
    match target {
        Target::Admission => bytes,
        _ => match String::from_utf8(bytes) {
            Ok(s) => s.into_bytes(),
            Err(e) => {
                let mut s = String::from_utf8_lossy(e.as_bytes()).into_owned();
                // A replacement character is 3 bytes: stay under the limit.
                while s.len() > max_len {
                    s.pop();
                }
                s.into_bytes()
            }
        },
    }
}

/// SplitMix64 over the words: independent streams per (seed, target, index).
fn mix(words: &[u64]) -> u64 {
    let mut h: u64 = 0x9E37_79B9_7F4A_7C15;
    for w in words {
        h ^= *w;
        h = h.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = h;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        h = z ^ (z >> 31);
    }
    h
}

/// A stable hash of bytes (FNV-1a then mixed), for per-input values a replay must find again.
pub fn hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    mix(&[h])
}
