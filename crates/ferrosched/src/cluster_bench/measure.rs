//! What a bench run measures: when each pod was first seen bound (a pod watch), the
//! throughput computed from that, and the scheduler process's CPU time and peak RSS from
//! /proc. Creates nothing in the cluster.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};

use super::{PHASE_LABEL, Throughput};

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

/// When each pod of the run was first seen bound.
#[derive(Default)]
pub(super) struct Tracker {
    pub(super) synced: bool,
    bound: HashMap<String, Instant>,
    pub(super) init_bound: usize,
    pub(super) measured_bound: Vec<Instant>,
    pub(super) last_binding: Option<Instant>,
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
        let Some(name) = pod.metadata.name.clone().filter(|_| bound) else {
            continue;
        };
        let measured = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(PHASE_LABEL))
            .is_some_and(|p| p == "measured");
        let mut t = tracker.lock().unwrap();
        if t.bound.insert(name, now).is_none() {
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
    fn reads_this_process_cpu_and_rss() {
        if cfg!(target_os = "linux") {
            let pid = std::process::id();
            assert!(process_cpu_seconds(pid).is_some());
            assert!(process_peak_rss_mib(pid).unwrap() > 0.0);
        }
    }
}
