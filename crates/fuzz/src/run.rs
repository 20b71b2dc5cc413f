//! Running inputs: each target on a worker thread of its own (with the target's
//! production stack size), fed one input at a time and watched with a per-input time
//! limit. A panic (caught) or an input over the limit stops the run; the input is saved
//! under the output directory with the seed and index that make it again. A stack overflow
//! aborts the process, which nothing in-process can catch: the input in flight is recorded
//! before it runs (`in-flight-<job>.txt`), so `--index` can make and save it.

use std::cell::RefCell;
use std::fmt;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

use crate::Target;
use crate::targets::Outcome;

/// What a run does.
#[derive(Clone, Debug)]
pub struct Options {
    /// Seeds the generator: the same seed makes the same inputs.
    pub seed: u64,
    /// Inputs in all, given to the targets in turn.
    pub iterations: u64,
    pub targets: Vec<Target>,
    /// The most one input may take.
    pub timeout: Duration,
    /// The largest input made, in bytes.
    pub max_input: usize,
    /// Threads running inputs side by side (each with its own workers).
    pub jobs: usize,
    /// Where failures and the in-flight records go.
    pub out_dir: PathBuf,
    /// Print a progress line this often (None: quiet).
    pub progress: Option<Duration>,
}

/// The default largest input: 1 MiB. Bigger inputs find little more and cost memory and
/// time in every target (a dump's objects, the webhook's parsed pod).
pub const MAX_INPUT: usize = 1 << 20;

impl Options {
    /// Every target, defaults from the environment: `FERROSCHED_FUZZ_SEED`,
    /// `FERROSCHED_FUZZ_TIMEOUT_SECS`, `FERROSCHED_FUZZ_OUT`.
    pub fn new(iterations: u64) -> Options {
        let env_u64 = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
        // Generous: the slowest inputs seen take well under a second in release; a debug
        // build on a loaded machine is ~20x slower.
        let default_timeout = if cfg!(debug_assertions) { 60 } else { 10 };
        Options {
            seed: env_u64("FERROSCHED_FUZZ_SEED").unwrap_or(1),
            iterations,
            targets: Target::ALL.to_vec(),
            timeout: Duration::from_secs(
                env_u64("FERROSCHED_FUZZ_TIMEOUT_SECS").unwrap_or(default_timeout),
            ),
            max_input: MAX_INPUT,
            jobs: 1,
            out_dir: default_out_dir(),
            progress: None,
        }
    }
}

/// `$FERROSCHED_FUZZ_OUT`, else `fuzz/` in cargo's target directory.
pub fn default_out_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("FERROSCHED_FUZZ_OUT") {
        return PathBuf::from(d);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("fuzz")
}

/// Why an input failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// The target panicked: message and place.
    Panic(String),
    /// It ran past the time limit (it may still be running).
    Timeout(Duration),
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FailureKind::Panic(m) => write!(f, "panicked: {m}"),
            FailureKind::Timeout(t) => write!(f, "took over {:.1}s", t.as_secs_f64()),
        }
    }
}

/// A failed input, and where it was saved.
#[derive(Clone, Debug)]
pub struct Failure {
    pub target: Target,
    pub seed: u64,
    pub index: u64,
    pub kind: FailureKind,
    pub saved: Option<PathBuf>,
    pub input_len: usize,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "fuzz target {} {} on input {} of seed {} ({} bytes)",
            self.target.name(),
            self.kind,
            self.index,
            self.seed,
            self.input_len
        )?;
        match &self.saved {
            Some(p) => write!(
                f,
                "\nsaved to {}\nreplay: cargo run --release -p ferrosched-fuzz -- --replay {} {}",
                p.display(),
                self.target.name(),
                p.display()
            ),
            None => write!(
                f,
                "\nmake it again: cargo run --release -p ferrosched-fuzz -- --seed {} --target {} --index {}",
                self.seed,
                self.target.name(),
                self.index
            ),
        }
    }
}

/// Per-target counts of a run.
#[derive(Clone, Debug, Default)]
pub struct TargetStats {
    pub inputs: u64,
    pub accepted: u64,
    pub refused: u64,
    pub busy: Duration,
    /// The slowest input: its index and time.
    pub slowest: (u64, Duration),
    pub largest_input: usize,
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub seed: u64,
    pub per_target: Vec<(Target, TargetStats)>,
    pub elapsed: Duration,
    /// Panics the code under test caught itself (the CEL parser's, by design), and the first.
    pub caught_panics: u64,
    pub first_caught_panic: Option<String>,
}

impl Summary {
    pub fn inputs(&self) -> u64 {
        self.per_target.iter().map(|(_, s)| s.inputs).sum()
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.elapsed.as_secs_f64();
        writeln!(
            f,
            "seed {}: {} inputs in {:.1}s ({:.0}/s)",
            self.seed,
            self.inputs(),
            secs,
            self.inputs() as f64 / secs.max(1e-9)
        )?;
        for (t, s) in &self.per_target {
            writeln!(
                f,
                "  {:<9} {:>9} inputs  {:>9} accepted  {:>9} refused  {:>8.0}/s busy  slowest #{} {:.3}s  largest {} B",
                t.name(),
                s.inputs,
                s.accepted,
                s.refused,
                s.inputs as f64 / s.busy.as_secs_f64().max(1e-9),
                s.slowest.0,
                s.slowest.1.as_secs_f64(),
                s.largest_input
            )?;
        }
        write!(
            f,
            "  panics caught by the code under test: {}",
            self.caught_panics
        )?;
        if let Some(p) = &self.first_caught_panic {
            write!(f, " (first: {p})")?;
        }
        Ok(())
    }
}

// ---- panics ----

thread_local! {
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}
static CAUGHT: AtomicU64 = AtomicU64::new(0);
static FIRST_CAUGHT: Mutex<Option<String>> = Mutex::new(None);

/// Panics on the workers (and on the CEL parser's thread, whose panics it catches) are
/// recorded, not printed: the runner reports them with the input. Other threads keep the
/// previous hook.
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let name = std::thread::current().name().unwrap_or("").to_string();
            if !name.starts_with("fuzz-") && name != "cel-parse" {
                return previous(info);
            }
            let msg = if let Some(s) = info.payload().downcast_ref::<&str>() {
                (*s).to_string()
            } else if let Some(s) = info.payload().downcast_ref::<String>() {
                s.clone()
            } else {
                "(non-string payload)".to_string()
            };
            let at = info
                .location()
                .map(|l| format!(" at {}:{}:{}", l.file(), l.line(), l.column()))
                .unwrap_or_default();
            let text = format!("{msg}{at} (thread {name})");
            if name.starts_with("fuzz-") {
                LAST_PANIC.with(|p| *p.borrow_mut() = Some(text.clone()));
            }
            CAUGHT.fetch_add(1, Ordering::Relaxed);
            let mut first = FIRST_CAUGHT.lock().unwrap_or_else(|e| e.into_inner());
            if first.is_none() {
                *first = Some(text);
            }
        }));
    });
}

// ---- workers ----

struct Worker {
    tx: Sender<Vec<u8>>,
    rx: Receiver<Result<Outcome, String>>,
}

impl Worker {
    fn spawn(target: Target) -> Worker {
        let (tx, inputs) = mpsc::channel::<Vec<u8>>();
        let (results, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name(format!("fuzz-{}", target.name()))
            .stack_size(target.stack_size())
            .spawn(move || {
                for input in inputs {
                    LAST_PANIC.with(|p| p.borrow_mut().take());
                    let r = std::panic::catch_unwind(|| target.run(&input)).map_err(|_| {
                        // Not caught by the code under test: reported as a failure instead.
                        CAUGHT.fetch_sub(1, Ordering::Relaxed);
                        LAST_PANIC
                            .with(|p| p.borrow_mut().take())
                            .unwrap_or_else(|| "panicked".to_string())
                    });
                    // Free the input before answering: memory stays one input per worker.
                    drop(input);
                    if results.send(r).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn a fuzz worker");
        // Detached: a worker stuck on a hanging input must not hold up the report.
        Worker { tx, rx }
    }

    /// Runs one input: its outcome and time, or why it failed.
    fn run(&self, input: Vec<u8>, timeout: Duration) -> Result<(Outcome, Duration), FailureKind> {
        let started = Instant::now();
        if self.tx.send(input).is_err() {
            return Err(FailureKind::Panic("the worker is gone".into()));
        }
        match self.rx.recv_timeout(timeout) {
            Ok(Ok(o)) => Ok((o, started.elapsed())),
            Ok(Err(m)) => Err(FailureKind::Panic(m)),
            Err(RecvTimeoutError::Timeout) => Err(FailureKind::Timeout(timeout)),
            Err(RecvTimeoutError::Disconnected) => {
                Err(FailureKind::Panic("the worker died".into()))
            }
        }
    }
}

/// Runs one input (a replay): its outcome and time.
pub fn replay(
    target: Target,
    input: Vec<u8>,
    timeout: Duration,
) -> Result<(Outcome, Duration), FailureKind> {
    install_panic_hook();
    Worker::spawn(target).run(input, timeout)
}

/// Saves a failing input: `failures/<target>-seed<seed>-input<index>.<ext>`.
pub fn save_failure(
    out_dir: &Path,
    target: Target,
    seed: u64,
    index: u64,
    input: &[u8],
) -> Option<PathBuf> {
    let dir = out_dir.join("failures");
    std::fs::create_dir_all(&dir).ok()?;
    let path = dir.join(format!(
        "{}-seed{seed}-input{index}.{}",
        target.name(),
        target.extension()
    ));
    std::fs::write(&path, input).ok()?;
    Some(path)
}

/// The record of the input in flight, one fixed-size line rewritten in place.
struct InFlight(Option<File>);

impl InFlight {
    fn open(out_dir: &Path, job: usize) -> InFlight {
        let _ = std::fs::create_dir_all(out_dir);
        InFlight(File::create(out_dir.join(format!("in-flight-{job}.txt"))).ok())
    }

    fn record(&self, seed: u64, target: Target, index: u64) {
        if let Some(f) = &self.0 {
            let line = format!("--seed {seed} --target {} --index {index}", target.name());
            let _ = f.write_at(format!("{line:<95}\n").as_bytes(), 0);
        }
    }
}

/// Runs `opts.iterations` inputs: input `i` goes to `targets[i % targets.len()]`. Stops at the
/// first failure.
pub fn campaign(opts: &Options) -> Result<Summary, Box<Failure>> {
    assert!(!opts.targets.is_empty() && opts.jobs > 0);
    install_panic_hook();
    let started = Instant::now();
    let caught_before = CAUGHT.load(Ordering::Relaxed);
    let stop = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    let failure: Mutex<Option<Failure>> = Mutex::new(None);
    let stats: Mutex<Vec<TargetStats>> = Mutex::new(vec![TargetStats::default(); 4]);

    std::thread::scope(|s| {
        for job in 0..opts.jobs {
            let (stop, done, failure, stats) = (&stop, &done, &failure, &stats);
            s.spawn(move || {
                let workers: Vec<Worker> = Target::ALL.iter().map(|t| Worker::spawn(*t)).collect();
                let in_flight = InFlight::open(&opts.out_dir, job);
                let mut mine = vec![TargetStats::default(); 4];
                let mut i = job as u64;
                while i < opts.iterations && !stop.load(Ordering::Relaxed) {
                    let target = opts.targets[(i % opts.targets.len() as u64) as usize];
                    let index = i / opts.targets.len() as u64;
                    let input = crate::input_for(target, opts.seed, index, opts.max_input);
                    let len = input.len();
                    in_flight.record(opts.seed, target, index);
                    let keep = input.clone();
                    match workers[target as usize].run(input, opts.timeout) {
                        Ok((outcome, took)) => {
                            let st = &mut mine[target as usize];
                            st.inputs += 1;
                            match outcome {
                                Outcome::Accepted => st.accepted += 1,
                                Outcome::Refused => st.refused += 1,
                            }
                            st.busy += took;
                            if took > st.slowest.1 {
                                st.slowest = (index, took);
                            }
                            st.largest_input = st.largest_input.max(len);
                        }
                        Err(kind) => {
                            stop.store(true, Ordering::Relaxed);
                            let saved =
                                save_failure(&opts.out_dir, target, opts.seed, index, &keep);
                            let mut f = failure.lock().unwrap_or_else(|e| e.into_inner());
                            if f.is_none() {
                                *f = Some(Failure {
                                    target,
                                    seed: opts.seed,
                                    index,
                                    kind,
                                    saved,
                                    input_len: len,
                                });
                            }
                            break;
                        }
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                    i += opts.jobs as u64;
                }
                let mut all = stats.lock().unwrap_or_else(|e| e.into_inner());
                for (a, m) in all.iter_mut().zip(mine) {
                    a.inputs += m.inputs;
                    a.accepted += m.accepted;
                    a.refused += m.refused;
                    a.busy += m.busy;
                    if m.slowest.1 > a.slowest.1 {
                        a.slowest = m.slowest;
                    }
                    a.largest_input = a.largest_input.max(m.largest_input);
                }
            });
        }
        if let Some(every) = opts.progress {
            let mut last = 0;
            while !stop.load(Ordering::Relaxed) && done.load(Ordering::Relaxed) < opts.iterations {
                std::thread::sleep(Duration::from_millis(200));
                let secs = started.elapsed().as_secs();
                if secs >= last + every.as_secs().max(1) {
                    last = secs;
                    let n = done.load(Ordering::Relaxed);
                    eprintln!(
                        "[{secs:>6}s] {n} / {} inputs ({:.0}/s), peak RSS {} MiB",
                        opts.iterations,
                        n as f64 / started.elapsed().as_secs_f64(),
                        peak_rss_kib().unwrap_or(0) / 1024
                    );
                }
            }
        }
    });

    if let Some(f) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(Box::new(f));
    }
    let stats = stats.into_inner().unwrap_or_else(|e| e.into_inner());
    Ok(Summary {
        seed: opts.seed,
        per_target: Target::ALL
            .iter()
            .filter(|t| opts.targets.contains(t))
            .map(|t| (*t, stats[*t as usize].clone()))
            .collect(),
        elapsed: started.elapsed(),
        caught_panics: CAUGHT.load(Ordering::Relaxed) - caught_before,
        first_caught_panic: FIRST_CAUGHT
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone(),
    })
}

/// The process's peak resident set (VmHWM), in KiB.
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}
