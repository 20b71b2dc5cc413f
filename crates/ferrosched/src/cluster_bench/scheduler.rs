//! The scheduler under test as a child process (`ferrosched run`): stopping it with
//! SIGTERM (sent through rustix, no `kill` process), noticing an early exit, and the end of
//! its stderr log for reports. Knows nothing of the cluster.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

/// The scheduler child, its stderr log and config.
pub(super) struct Scheduler {
    pub(super) child: Option<Child>,
    pub(super) stderr: PathBuf,
}

impl Scheduler {
    /// Ends the child: SIGTERM (a clean shutdown), then SIGKILL after 5 s.
    pub(super) fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        terminate(&child);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// `Some(status)` when the child has exited.
    pub(super) fn exited(&mut self) -> Option<String> {
        let child = self.child.as_mut()?;
        match child.try_wait() {
            Ok(Some(s)) => Some(s.to_string()),
            _ => None,
        }
    }

    pub(super) fn stderr_tail(&self) -> String {
        tail(&self.stderr, 4096)
    }
}

/// SIGTERM; errors are ignored (the child may have exited), SIGKILL follows anyway.
#[cfg(unix)]
fn terminate(child: &Child) {
    use rustix::process::{Pid, Signal, kill_process};
    let _ = kill_process(Pid::from_child(child), Signal::TERM);
}

/// No SIGTERM off Unix: the caller's SIGKILL after the grace period ends the child.
#[cfg(not(unix))]
fn terminate(_: &Child) {}

fn tail(path: &Path, bytes: u64) -> String {
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map_or(0, |m| m.len());
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(bytes)));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}
