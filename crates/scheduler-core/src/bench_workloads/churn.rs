//! The in-memory churn and identical-pods workloads: scheduling under cluster events
//! (attempts per pod, queueing hints) and opportunistic batching.

use super::*;

/// The churn workloads: nodes and pods come and go while pods wait in the queue. Reported
/// as attempts per scheduled pod; `ChurnWithoutHints` replays the same run with every
/// queueing hint answering Queue (ferrosched's requeue before hints), and
/// `ChurnWithoutOldNode` with hints that see only the updated node, not the node before.
pub const CHURN_WORKLOADS: &[&str] = &["Churn", "ChurnWithoutOldNode", "ChurnWithoutHints"];

/// What the churn run's events give the queueing hints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChurnHints {
    /// No objects: every hint answers Queue.
    Off,
    /// Node updates carry the new node only.
    NewNodeOnly,
    /// Node updates carry the node before and after (as the controller does).
    OldAndNew,
}

impl ChurnHints {
    /// The mode a churn workload name selects.
    pub fn of_workload(name: &str) -> Self {
        match name {
            "ChurnWithoutHints" => ChurnHints::Off,
            "ChurnWithoutOldNode" => ChurnHints::NewNodeOnly,
            _ => ChurnHints::OldAndNew,
        }
    }
}

/// What a churn run measured.
#[derive(Clone, Debug)]
pub struct ChurnStats {
    pub pods: usize,
    pub scheduled: usize,
    /// Scheduling attempts (pops), successful or not.
    pub attempts: usize,
    pub nodes_added: usize,
    pub elapsed: Duration,
    /// Attempts that took opportunistic batching's hinted node.
    pub batched: usize,
}

impl ChurnStats {
    pub fn attempts_per_scheduled_pod(&self) -> f64 {
        self.attempts as f64 / self.scheduled.max(1) as f64
    }
    pub fn pods_per_second(&self) -> f64 {
        self.scheduled as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// A churn node: every 7th is a big (8 CPU) node, every 7th (offset 3) carries
/// `pool=gpu`, the rest are the standard 4 CPU nodes.
fn churn_node(i: usize) -> core::Node {
    let mut n = node(i);
    if i.is_multiple_of(7) {
        let big = quantities(&[("cpu", "8"), ("memory", "64Gi"), ("pods", "110")]);
        let status = n.status.as_mut().expect("node() sets status");
        status.allocatable = Some(big.clone());
        status.capacity = Some(big);
    } else if i % 7 == 3 {
        n.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert("pool".into(), "gpu".into());
    }
    n
}

/// A third of the pods need 6 CPU (only big nodes fit), a third `pool=gpu` and 3 CPU (one
/// per pool node), the rest are scheduler_perf's default pod.
fn churn_pod(i: usize) -> core::Pod {
    let p = pod("churn", &format!("p-{i}"), &[]);
    match i % 3 {
        0 => with_spec(p, |s| {
            s.containers[0].resources = Some(core::ResourceRequirements {
                requests: Some(quantities(&[("cpu", "6"), ("memory", "1Gi")])),
                ..Default::default()
            });
        }),
        1 => with_spec(p, |s| {
            s.node_selector = Some([("pool".to_string(), "gpu".to_string())].into());
            s.containers[0].resources = Some(core::ResourceRequirements {
                requests: Some(quantities(&[("cpu", "3"), ("memory", "1Gi")])),
                ..Default::default()
            });
        }),
        _ => p,
    }
}

/// The `k`-th (round robin) joined node in the `pool=gpu` pool: the nodes whose waiting
/// pods' selector already matched.
fn relabel_target(joined: &[core::Node], k: usize) -> Option<usize> {
    let gpu: Vec<usize> = (0..joined.len())
        .filter(|&i| {
            joined[i]
                .metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.get("pool").is_some_and(|p| p == "gpu"))
        })
        .collect();
    (!gpu.is_empty()).then(|| gpu[k % gpu.len()])
}

/// Runs the churn workload: `nodes` standard nodes and `pods` pods queued at once. The
/// scheduler tries pods until none is left to try, then one cluster event happens: a node
/// joins (see [`churn_node`]), or every 5th event a bound default pod finishes, or every
/// 5th (offset 2) a joined `pool=gpu` node gets a label no pod selects; and so on until
/// every pod is placed. With hints, events carry their objects so the plugins' queueing
/// hints can leave pods the event cannot help. Deterministic (fake clock).
pub fn run_churn(nodes: usize, pods: usize, mode: ChurnHints) -> ChurnStats {
    use crate::framework::{ActionType, ClusterEvent, EventObjects, EventResource};
    use crate::queue::{FakeClock, QueueConfig, SchedulingQueue};

    let config = config::from_flags(None, None).expect("default config is valid");
    let registry = Arc::new(
        ProfileRegistry::new(&config.profiles, &Registry::in_tree()).expect("config builds"),
    );
    let w = Workload {
        name: "Churn".into(),
        nodes: (1..=nodes).map(|i| node(i * 7 + 1)).collect(),
        init_pods: Vec::new(),
        measured_pods: Vec::new(),
        config,
        dra: DraWorkload::default(),
        pod_groups: Vec::new(),
        pods_per_group: None,
    };
    let mut r = Runner::new(&w);
    let clock = FakeClock::new();
    let mut q = SchedulingQueue::new(
        QueueConfig::default(),
        Arc::new(clock.clone()),
        registry.clone(),
    );
    for i in 0..pods {
        q.add(Arc::new(PodInfo::from_pod(&churn_pod(i))));
    }
    let mut bound_default: Vec<crate::types::PodKey> = Vec::new();
    let (mut attempts, mut scheduled) = (0, 0);
    let mut next_node = 0usize;
    let start = Instant::now();
    let max_events = pods * 20 + 1_000;
    let hints = mode != ChurnHints::Off;
    let mut joined: Vec<core::Node> = Vec::new();
    let mut add_node = |r: &mut Runner, q: &mut SchedulingQueue, joined: &mut Vec<core::Node>| {
        let n = churn_node(next_node);
        next_node += 1;
        let name = n.metadata.name.clone().unwrap_or_default();
        // Churn nodes get names of their own, apart from the initial ones.
        let mut n = n;
        n.metadata.name = Some(format!("churn-{name}"));
        r.cache.add_node(&n);
        joined.push(n);
        let event = ClusterEvent::new(EventResource::Node, ActionType::ADD);
        let info = r.cache.node_info(&format!("churn-{name}")).cloned();
        match (&info, hints) {
            (Some(new), true) => {
                q.move_all_with_objects(event, &EventObjects::Node { old: None, new }, None)
            }
            _ => q.move_all_to_active_or_backoff(event, None),
        };
    };
    // A label no pod selects changes on a joined node: it can help no waiting pod, but the
    // node passes NodeAffinity for the pods waiting for the pool.
    let relabel = |r: &mut Runner, q: &mut SchedulingQueue, n: &mut core::Node, rev: usize| {
        let name = n.metadata.name.clone().unwrap_or_default();
        n.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert("churn-rev".into(), rev.to_string());
        let before = r.cache.node_info(&name).cloned();
        r.cache.update_node(n);
        let after = r.cache.node_info(&name).cloned();
        let event = ClusterEvent::new(EventResource::Node, ActionType::UPDATE_NODE_LABEL);
        let old = before.as_deref().filter(|_| mode == ChurnHints::OldAndNew);
        match (&after, hints) {
            (Some(new), true) => {
                q.move_all_with_objects(event, &EventObjects::Node { old, new }, None)
            }
            _ => q.move_all_to_active_or_backoff(event, None),
        };
    };
    let attempt = |r: &mut Runner, q: &mut SchedulingQueue, bound: &mut Vec<_>| -> bool {
        let Some(info) = q.pop() else {
            return false;
        };
        let cycle = q.scheduling_cycle();
        let pod = Arc::clone(&info.pod);
        let fw = r
            .profiles
            .for_scheduler_name(&pod.scheduler_name)
            .expect("default profile");
        r.cache.update_snapshot(&mut r.snapshot);
        match schedule_one(fw, &mut r.alg, &pod, &r.snapshot, &r.nominated) {
            Decision::Bind {
                node, pod, state, ..
            } => {
                let key = pod.key().clone();
                let is_default = pod.node_selector.is_empty() && pod.requests.milli_cpu < 1000;
                if r.assume(pod, &node, &state) && is_default {
                    bound.insert(0, key);
                }
                q.done(&info.pod);
            }
            Decision::Unschedulable { diagnosis, .. } => {
                q.done(&info.pod);
                let _ = q.add_unschedulable_if_not_present(info, diagnosis.as_ref(), cycle);
            }
            Decision::Error { .. } => {
                q.done(&info.pod);
                let _ = q.add_unschedulable_if_not_present(info, None, cycle);
            }
        }
        true
    };
    // Between two cluster events the scheduler works until nothing is left to try.
    for event in 0..max_events {
        while attempt(&mut r, &mut q, &mut bound_default) {
            attempts += 1;
            clock.advance(Duration::from_millis(10));
        }
        scheduled = pods - q.pending_pods().unschedulable;
        if scheduled == pods {
            break;
        }
        if event % 5 == 4
            && let Some(key) = bound_default.pop()
            && let Some(gone) = r.cache.get_pod(&key).cloned()
        {
            let _ = r.cache.remove_pod(&key);
            let ev = ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE);
            let objects = EventObjects::Pod {
                old: Some(&gone),
                new: None,
            };
            if hints {
                q.move_all_with_objects(ev, &objects, None);
            } else {
                q.move_all_to_active_or_backoff(ev, None);
            }
        } else if let Some(i) = (event % 5 == 2)
            .then(|| relabel_target(&joined, event / 5))
            .flatten()
        {
            relabel(&mut r, &mut q, &mut joined[i], event);
        } else {
            add_node(&mut r, &mut q, &mut joined);
        }
    }
    let added = joined.len();
    ChurnStats {
        pods,
        scheduled,
        attempts,
        nodes_added: added,
        elapsed: start.elapsed(),
        batched: r.alg.batch_stats().hints_used() as usize,
    }
}

/// The identical-pods workloads (opportunistic batching on and off), in memory only.
pub const IDENTICAL_WORKLOADS: &[&str] = &["IdenticalPods", "IdenticalPodsWithoutBatching"];

/// The default profile with no default spreading: upstream signs no pod while the
/// profile has default topology spread constraints, so batching needs them off.
pub(crate) const BATCHABLE_CONFIG: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: PodTopologySpread
    args:
      defaultingType: List
";

/// One identical pod: 3 of a node's 4 CPUs, so each node takes one (the case batching
/// serves: the node just chosen is full for the next pod).
pub fn identical_pod(i: usize) -> core::Pod {
    with_spec(pod("batch", &format!("p-{i}"), &[("app", "batch")]), |s| {
        s.containers[0].resources = Some(core::ResourceRequirements {
            requests: Some(quantities(&[("cpu", "3"), ("memory", "1Gi")])),
            ..Default::default()
        });
    })
}

/// Schedules `pods` identical pods on `nodes` standard nodes, one attempt each, with
/// opportunistic batching on or off. `attempts` counts every attempt; `batched` the
/// attempts that took the hinted node.
pub fn run_identical(nodes: usize, pods: usize, batching: bool) -> ChurnStats {
    let w = Workload {
        name: "IdenticalPods".into(),
        nodes: (1..=nodes).map(node).collect(),
        init_pods: Vec::new(),
        measured_pods: Vec::new(),
        config: config::load_str(BATCHABLE_CONFIG, "identical-pods").expect("valid config"),
        dra: DraWorkload::default(),
        pod_groups: Vec::new(),
        pods_per_group: None,
    };
    let mut r = Runner::new(&w);
    r.alg.set_opportunistic_batching(batching);
    let measured: Vec<Arc<PodInfo>> = (0..pods)
        .map(|i| Arc::new(PodInfo::from_pod(&identical_pod(i))))
        .collect();
    let start = Instant::now();
    let scheduled = measured.iter().filter(|p| r.schedule(p)).count();
    ChurnStats {
        pods,
        scheduled,
        attempts: pods,
        nodes_added: 0,
        elapsed: start.elapsed(),
        batched: r.alg.batch_stats().hints_used() as usize,
    }
}
