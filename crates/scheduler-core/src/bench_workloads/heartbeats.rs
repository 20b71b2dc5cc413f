//! `bench --heartbeats-per-pod`: kubelet heartbeats between the measured attempts, applied
//! through the node update path the controller's node informer takes (fingerprint, then the
//! cache only when the fingerprint says something the scheduler keeps changed).

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::cache::Cache;
use crate::framework::NodeFingerprint;

/// Images a kubelet reports per node here (real nodes list tens).
const IMAGES_PER_NODE: usize = 20;

/// The node conditions a kubelet keeps, with the status a healthy node reports.
const CONDITIONS: [(&str, &str); 4] = [
    ("Ready", "True"),
    ("MemoryPressure", "False"),
    ("DiskPressure", "False"),
    ("PIDPressure", "False"),
];

/// Round-robin heartbeats over a run's nodes.
pub struct Heartbeats {
    /// Each node as its kubelet reports it, and what the informer kept of it.
    nodes: Vec<(core::Node, NodeFingerprint)>,
    per_attempt: usize,
    next: usize,
    /// Every update goes to the cache, as before heartbeats were dropped early (to
    /// measure what that path costs).
    unfiltered: bool,
    /// Heartbeats applied, updates that reached the cache, and their total time.
    pub applied: u64,
    pub reached_cache: u64,
    pub time: Duration,
}

impl Heartbeats {
    /// Gives each of `nodes` the conditions and images a kubelet reports, and applies that
    /// (untimed) to `cache`, which holds `nodes` already: the run then starts from nodes as
    /// a real cluster lists them.
    pub fn new(cache: &mut Cache, nodes: &[core::Node], per_attempt: usize) -> Self {
        let nodes = nodes
            .iter()
            .map(|n| {
                let node = kubelet_reported(n);
                let fp = NodeFingerprint::of(&node);
                cache.upsert_node(Arc::new(node.clone()));
                (node, fp)
            })
            .collect();
        Heartbeats {
            nodes,
            per_attempt,
            next: 0,
            unfiltered: false,
            applied: 0,
            reached_cache: 0,
            time: Duration::ZERO,
        }
    }

    /// Every heartbeat reaches the cache (the path before heartbeats were dropped early).
    pub fn unfiltered(mut self) -> Self {
        self.unfiltered = true;
        self
    }

    /// The heartbeats due before one attempt.
    pub fn before_attempt(&mut self, cache: &mut Cache) {
        let start = Instant::now();
        for _ in 0..self.per_attempt {
            self.beat(cache);
        }
        self.time += start.elapsed();
    }

    /// One heartbeat of the next node: its Ready condition's lastHeartbeatTime moves on,
    /// nothing else changes. The informer hands the handler a new object per event, so the
    /// update starts from a copy.
    pub fn beat(&mut self, cache: &mut Cache) {
        if self.nodes.is_empty() {
            return;
        }
        let i = self.next;
        self.next = (i + 1) % self.nodes.len();
        self.applied += 1;
        let (template, old) = &mut self.nodes[i];
        let mut node = template.clone();
        let at = k8s_openapi::jiff::Timestamp::UNIX_EPOCH
            + k8s_openapi::jiff::SignedDuration::from_secs(self.applied as i64);
        if let Some(ready) = node
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
            .and_then(|c| c.first_mut())
        {
            ready.last_heartbeat_time = Some(Time(at));
        }
        let fp = NodeFingerprint::of(&node);
        if self.unfiltered || !fp.keeps_view(Some(old)) {
            self.reached_cache += 1;
            cache.upsert_node(Arc::new(node));
        }
        *old = fp;
    }

    /// Mean time of one heartbeat (0 when none was applied).
    pub fn micros_per_heartbeat(&self) -> f64 {
        if self.applied == 0 {
            return 0.0;
        }
        self.time.as_secs_f64() * 1e6 / self.applied as f64
    }
}

/// `n` with a kubelet's conditions and [`IMAGES_PER_NODE`] images (names no bench pod
/// uses, so ImageLocality scores as before).
fn kubelet_reported(n: &core::Node) -> core::Node {
    let mut node = n.clone();
    let status = node.status.get_or_insert_with(Default::default);
    let since = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    status.conditions = Some(
        CONDITIONS
            .iter()
            .map(|(t, s)| core::NodeCondition {
                type_: t.to_string(),
                status: s.to_string(),
                last_heartbeat_time: Some(since.clone()),
                last_transition_time: Some(since.clone()),
                reason: Some(format!("Kubelet{t}")),
                message: Some(format!("kubelet reports {t}={s}")),
            })
            .collect(),
    );
    status.images = Some(
        (0..IMAGES_PER_NODE)
            .map(|i| core::ContainerImage {
                names: Some(vec![
                    format!("registry.example/heartbeat/app-{i}@sha256:{i:064x}"),
                    format!("registry.example/heartbeat/app-{i}:v1"),
                ]),
                size_bytes: Some(50_000_000 + i as i64),
            })
            .collect(),
    );
    node
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench_workloads::build;
    use crate::cache::Snapshot;

    /// Heartbeats go round robin, none reaches the cache or the snapshot; unfiltered,
    /// every one does and the snapshot copies the nodes again.
    #[test]
    fn heartbeats_reach_neither_cache_nor_snapshot() {
        let w = build("SchedulingBasic", 4, 0, 1).unwrap();
        let mut cache = Cache::new();
        for n in &w.nodes {
            cache.add_node(n);
        }
        let mut hb = Heartbeats::new(&mut cache, &w.nodes, 3);
        let mut snapshot = Snapshot::new();
        cache.update_snapshot(&mut snapshot);
        assert!(snapshot.node_infos().iter().all(|n| n.images.len() == 40));
        hb.before_attempt(&mut cache);
        hb.before_attempt(&mut cache);
        assert_eq!((hb.applied, hb.reached_cache, hb.next), (6, 0, 2));
        assert_eq!(cache.update_snapshot(&mut snapshot).changed_nodes, 0);

        let mut hb = hb.unfiltered();
        hb.before_attempt(&mut cache);
        assert_eq!(hb.reached_cache, 3);
        assert_eq!(cache.update_snapshot(&mut snapshot).changed_nodes, 3);
    }

    /// A run with heartbeats places the same pods; every heartbeat is applied (K before
    /// each measured attempt) and none reaches the cache.
    #[test]
    fn a_run_with_heartbeats_counts_them_and_places_the_same_pods() {
        use crate::bench_workloads::{ExplainMode, HeartbeatLoad, run_from_lists};
        let w = build("SchedulingBasic", 10, 5, 8).unwrap();
        let run = |per_pod| {
            let load = HeartbeatLoad {
                per_pod,
                unfiltered: false,
            };
            run_from_lists(&w, 0, ExplainMode::Off, &mut || None, &[], Some(load))
        };
        let (calm, storm) = (run(0), run(3));
        assert_eq!((calm.scheduled, storm.scheduled), (8, 8));
        let h = storm.heartbeats.unwrap();
        assert_eq!((h.per_pod, h.applied, h.reached_cache), (3, 24, 0));
        assert_eq!(calm.heartbeats.unwrap().applied, 0);
        let none = run_from_lists(&w, 0, ExplainMode::Off, &mut || None, &[], None);
        assert!(none.heartbeats.is_none());
    }
}
