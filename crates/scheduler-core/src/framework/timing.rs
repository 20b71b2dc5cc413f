//! Optional timing for the controller's metrics: how long each extension point took
//! (upstream `scheduler_framework_extension_point_duration_seconds`, every cycle) and, on a
//! sample of cycles, each plugin (`scheduler_plugin_execution_duration_seconds`).
//!
//! Off by default: `SchedulingAlgorithm::set_record_metrics` turns it on, and the framework
//! then only checks an `Option` per plugin call on unsampled cycles. The per-node points
//! (Filter, Score) are sampled ten times less often than the others, because timing every
//! plugin call on every node costs about as much as the calls themselves (two clock reads
//! and two atomic adds per call, measured: a timed 500-node cycle takes several times
//! longer); they add each call's time to one atomic counter per plugin and status, so the
//! parallel node loop takes no lock.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{Code, ExtensionPoint};

/// One extension point's run in a cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PointTiming {
    pub point: ExtensionPoint,
    pub code: Code,
    pub took: Duration,
}

/// One plugin's time at one extension point in a sampled cycle. For Filter and Score it is
/// the plugin's total over every node it ran on with that status (`calls` of them); for
/// the other points a single call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PluginTiming {
    pub plugin: &'static str,
    pub point: ExtensionPoint,
    pub code: Code,
    pub took: Duration,
    pub calls: u64,
}

/// What one cycle measured (see `SchedulingAlgorithm::take_cycle_timings`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CycleTimings {
    pub points: Vec<PointTiming>,
    /// Empty unless the cycle was sampled.
    pub plugins: Vec<PluginTiming>,
}

const CODES: usize = 7;

fn code_of(i: usize) -> Code {
    [
        Code::Success,
        Code::Error,
        Code::Unschedulable,
        Code::UnschedulableAndUnresolvable,
        Code::Wait,
        Code::Skip,
        Code::Pending,
    ][i]
}

/// Per-plugin, per-status nanoseconds and calls for a per-node point.
struct NodeLoopTotals {
    names: Vec<&'static str>,
    nanos: Vec<AtomicU64>,
    calls: Vec<AtomicU64>,
}

impl NodeLoopTotals {
    fn new(names: Vec<&'static str>) -> Self {
        let n = names.len() * CODES;
        NodeLoopTotals {
            names,
            nanos: (0..n).map(|_| AtomicU64::new(0)).collect(),
            calls: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn add(&self, plugin: usize, code: Code, took: Duration) {
        let i = plugin * CODES + code as usize;
        if let (Some(n), Some(c)) = (self.nanos.get(i), self.calls.get(i)) {
            n.fetch_add(
                u64::try_from(took.as_nanos()).unwrap_or(u64::MAX),
                Ordering::Relaxed,
            );
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn drain(&self, point: ExtensionPoint, out: &mut Vec<PluginTiming>) {
        for (p, name) in self.names.iter().enumerate() {
            for c in 0..CODES {
                let i = p * CODES + c;
                let calls = self.calls[i].load(Ordering::Relaxed);
                if calls > 0 {
                    out.push(PluginTiming {
                        plugin: name,
                        point,
                        code: code_of(c),
                        took: Duration::from_nanos(self.nanos[i].load(Ordering::Relaxed)),
                        calls,
                    });
                }
            }
        }
    }
}

/// Collects plugin timings during one sampled cycle; shared (via `Arc`) by the cycle state
/// and its copies.
pub struct PluginTimer {
    /// Whether Filter and Score calls are timed too.
    node_loops: bool,
    serial: Mutex<Vec<PluginTiming>>,
    filter: NodeLoopTotals,
    score: NodeLoopTotals,
}

impl std::fmt::Debug for PluginTimer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginTimer").finish_non_exhaustive()
    }
}

impl PluginTimer {
    /// `filter` and `score`: the profile's Filter and Score plugins, in framework order.
    /// `node_loops`: time their per-node calls too.
    pub fn new(filter: Vec<&'static str>, score: Vec<&'static str>, node_loops: bool) -> Self {
        PluginTimer {
            node_loops,
            serial: Mutex::new(Vec::new()),
            filter: NodeLoopTotals::new(filter),
            score: NodeLoopTotals::new(score),
        }
    }

    /// A call of a plugin at a point that runs once per cycle.
    pub fn record(&self, plugin: &'static str, point: ExtensionPoint, code: Code, start: Instant) {
        let t = PluginTiming {
            plugin,
            point,
            code,
            took: start.elapsed(),
            calls: 1,
        };
        self.serial
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(t);
    }

    /// Whether Filter and Score plugin calls are timed in this cycle.
    pub fn node_loops(&self) -> bool {
        self.node_loops
    }

    /// The `i`-th Filter plugin ran on one node.
    pub fn filter(&self, i: usize, code: Code, start: Instant) {
        self.filter.add(i, code, start.elapsed());
    }

    /// The `i`-th Score plugin (framework order) scored one node.
    pub fn score(&self, i: usize, code: Code, start: Instant) {
        self.score.add(i, code, start.elapsed());
    }

    /// Everything recorded, serial points first.
    pub fn finish(&self) -> Vec<PluginTiming> {
        let mut out = std::mem::take(&mut *self.serial.lock().unwrap_or_else(|e| e.into_inner()));
        self.filter.drain(ExtensionPoint::Filter, &mut out);
        self.score.drain(ExtensionPoint::Score, &mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_loop_totals_add_per_plugin_and_status() {
        let t = PluginTimer::new(vec!["A", "B"], vec!["S"], true);
        let start = Instant::now();
        t.filter(0, Code::Success, start);
        t.filter(0, Code::Success, start);
        t.filter(1, Code::Unschedulable, start);
        t.score(0, Code::Success, start);
        t.record("P", ExtensionPoint::PreFilter, Code::Success, start);
        // Out of range (a plugin list that changed): ignored, never a panic.
        t.filter(9, Code::Success, start);
        let got: Vec<(&str, ExtensionPoint, Code, u64)> = t
            .finish()
            .iter()
            .map(|p| (p.plugin, p.point, p.code, p.calls))
            .collect();
        assert_eq!(
            got,
            [
                ("P", ExtensionPoint::PreFilter, Code::Success, 1),
                ("A", ExtensionPoint::Filter, Code::Success, 2),
                ("B", ExtensionPoint::Filter, Code::Unschedulable, 1),
                ("S", ExtensionPoint::Score, Code::Success, 1),
            ]
        );
    }
}
