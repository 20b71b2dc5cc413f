//! What a bench run measures: when each pod was first seen bound (a pod watch), the
//! throughput computed from that, per measured PodGroup the time from its last pod's
//! creation to its last pod's binding, and the scheduler process's CPU time and peak RSS
//! from /proc. Creates nothing in the cluster.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};

use super::{GroupLatency, PHASE_LABEL, Throughput};

/// scheduler_perf's throughput: bindings per 1 s window from the first measured binding
/// (a last partial window counts, scaled, when it is at least half a second; a run shorter
/// than a second gives one sample), then average and percentiles the way its collector
/// picks them (`sorted[ceil(n*p/100)-1]`).
pub fn throughput(bound_at: &[Duration]) -> Throughput {
    let mut t: Vec<Duration> = bound_at.to_vec();
    t.sort_unstable();
    let (Some(first), Some(last)) = (t.first(), t.last()) else {
        return Throughput::default();
    };
    let span = (*last - *first).as_secs_f64();
    let mut samples = Vec::new();
    if span < 1.0 {
        samples.push(t.len() as f64 / span.max(1e-3));
    } else {
        let full = span.floor() as usize;
        let mut counts = vec![0usize; full + 1];
        for d in &t {
            let w = ((*d - *first).as_secs_f64().floor() as usize).min(full);
            counts[w] += 1;
        }
        for c in &counts[..full] {
            samples.push(*c as f64);
        }
        let rest = span - full as f64;
        if rest >= 0.5 {
            samples.push(counts[full] as f64 / rest);
        } else if let Some(s) = samples.last_mut() {
            // Too short to be a sample of its own: the stragglers join the last window.
            *s += counts[full] as f64;
        }
    }
    samples.sort_by(f64::total_cmp);
    let n = samples.len();
    let pick = |p: usize| samples[(n * p).div_ceil(100).max(1) - 1];
    Throughput {
        samples: n,
        average: samples.iter().sum::<f64>() / n as f64,
        perc50: pick(50),
        perc90: pick(90),
        perc99: pick(99),
    }
}

/// [`GroupLatency`] of groups given as (last pod seen created, last pod seen bound): the
/// groups not wholly bound (`None`) are left out.
pub fn group_latency(groups: &[(Instant, Option<Instant>)]) -> GroupLatency {
    let mut ms: Vec<f64> = groups
        .iter()
        .filter_map(|(created, bound)| {
            Some(
                bound
                    .as_ref()?
                    .saturating_duration_since(*created)
                    .as_secs_f64()
                    * 1e3,
            )
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    let n = ms.len();
    if n == 0 {
        return GroupLatency::default();
    }
    let pick = |p: usize| ms[(n * p).div_ceil(100).max(1) - 1];
    GroupLatency {
        groups: n,
        p50_ms: pick(50),
        p99_ms: pick(99),
        max_ms: ms[n - 1],
    }
}

/// CPU seconds (utime + stime) of a process from `/proc/<pid>/stat`; None off Linux.
pub fn process_cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may contain spaces) start at field 3.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    // USER_HZ: 100 on every Linux architecture we build for.
    Some((utime + stime) / 100.0)
}

/// Peak resident set size (VmHWM) of a process in MiB; None off Linux.
pub fn process_peak_rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// When each pod of the run was first seen bound, and the measured pods' groups.
#[derive(Default)]
pub(super) struct Tracker {
    pub(super) synced: bool,
    bound: HashMap<String, Instant>,
    pub(super) init_bound: usize,
    pub(super) measured_bound: Vec<Instant>,
    pub(super) last_binding: Option<Instant>,
    /// Measured pods in a PodGroup seen so far.
    seen: std::collections::HashSet<String>,
    /// Per measured PodGroup: pods seen, pods seen bound, the last first sight of a pod,
    /// the last first sight of a binding.
    groups: HashMap<String, GroupTimes>,
}

struct GroupTimes {
    pods: usize,
    bound: usize,
    last_created: Instant,
    last_bound: Option<Instant>,
}

impl Tracker {
    /// Per measured group: (its last pod seen created, its last pod seen bound when all its
    /// pods seen are bound).
    pub(super) fn measured_groups(&self) -> Vec<(Instant, Option<Instant>)> {
        self.groups
            .values()
            .map(|g| {
                let done = g.bound == g.pods;
                (g.last_created, g.last_bound.filter(|_| done))
            })
            .collect()
    }

    /// A measured pod of `group` seen at `now`, bound or not.
    fn see_group_member(&mut self, name: &str, group: &str, bound_now: bool, now: Instant) {
        if self.seen.insert(name.to_string()) {
            let g = self
                .groups
                .entry(group.to_string())
                .or_insert_with(|| GroupTimes {
                    pods: 0,
                    bound: 0,
                    last_created: now,
                    last_bound: None,
                });
            g.pods += 1;
            g.last_created = g.last_created.max(now);
        }
        if bound_now && let Some(g) = self.groups.get_mut(group) {
            g.bound += 1;
            g.last_bound = Some(g.last_bound.map_or(now, |b| b.max(now)));
        }
    }
}

pub(super) async fn track(api: Api<Pod>, selector: String, tracker: Arc<Mutex<Tracker>>) {
    let stream = watcher(api, watcher::Config::default().labels(&selector)).default_backoff();
    futures::pin_mut!(stream);
    while let Some(event) = stream.next().await {
        let now = Instant::now();
        let pod = match event {
            Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => p,
            Ok(watcher::Event::InitDone) => {
                tracker.lock().unwrap().synced = true;
                continue;
            }
            Ok(_) => continue,
            Err(e) => {
                tracing::warn!(error = %e, "bench pod watch failed; retrying");
                continue;
            }
        };
        let bound = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty());
        let Some(name) = pod.metadata.name.clone() else {
            continue;
        };
        let measured = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(PHASE_LABEL))
            .is_some_and(|p| p == "measured");
        let group = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduling_group.as_ref()?.pod_group_name.as_deref())
            .filter(|_| measured);
        let mut t = tracker.lock().unwrap();
        let bound_now = bound && !t.bound.contains_key(&name);
        if let Some(group) = group {
            t.see_group_member(&name, group, bound_now, now);
        }
        if bound_now {
            t.bound.insert(name, now);
            if measured {
                t.measured_bound.push(now);
            } else {
                t.init_bound += 1;
            }
            t.last_binding = Some(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throughput_samples_per_second_like_scheduler_perf() {
        let ms = Duration::from_millis;
        // 3 in the first second, 1 in the second, 2 in a final 0.6 s window.
        let t = throughput(&[ms(0), ms(100), ms(900), ms(1500), ms(2200), ms(2600)]);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
        assert_eq!(t.samples, 3);
        assert!(close(t.perc50, 3.0), "{t:?}");
        assert!(close(t.perc90, 2.0 / 0.6), "{t:?}");
        assert!(close(t.perc99, 2.0 / 0.6), "{t:?}");
        assert!(close(t.average, (3.0 + 1.0 + 2.0 / 0.6) / 3.0), "{t:?}");
        // Shorter than a second: one sample.
        let t = throughput(&[ms(0), ms(500)]);
        assert_eq!((t.samples, t.average), (1, 4.0));
        assert_eq!(throughput(&[]), Throughput::default());
    }

    #[test]
    fn group_latency_leaves_out_groups_not_wholly_bound() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut t = Tracker::default();
        // Group a: created at 0 and 10, bound at 30 and 50: 40 ms. Group b: bound at 5 ms
        // after its only pod. Group c: one of two pods bound.
        t.see_group_member("a0", "a", false, ms(0));
        t.see_group_member("a1", "a", false, ms(10));
        t.see_group_member("a0", "a", true, ms(30));
        t.see_group_member("a1", "a", true, ms(50));
        t.see_group_member("b0", "b", true, ms(20));
        t.see_group_member("b0", "b", false, ms(25));
        t.see_group_member("c0", "c", true, ms(0));
        t.see_group_member("c1", "c", false, ms(0));
        let l = group_latency(&t.measured_groups());
        assert_eq!(l.groups, 2, "{l:?}");
        assert_eq!((l.p50_ms, l.p99_ms, l.max_ms), (0.0, 40.0, 40.0), "{l:?}");
        assert_eq!(group_latency(&[]), GroupLatency::default());
    }

    #[test]
    fn reads_this_process_cpu_and_rss() {
        if cfg!(target_os = "linux") {
            let pid = std::process::id();
            assert!(process_cpu_seconds(pid).is_some());
            assert!(process_peak_rss_mib(pid).unwrap() > 0.0);
        }
    }
}
