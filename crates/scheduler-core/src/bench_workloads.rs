//! In-memory workloads like upstream's scheduler_perf, and a runner that schedules them
//! through the real framework. Used by `ferrosched bench` and the criterion benchmarks.
//!
//! Shapes follow scheduler_perf's templates: nodes with 4 CPU, 32Gi and 110 pods spread over
//! three zones; pods requesting 100m CPU and 500Mi. Bound pods, if any, are loaded from
//! lists ([`run_from_lists`]: start-up timed, no scheduling), then the init pods are
//! scheduled (not measured), then the measured pods. The workload-scheduling workloads
//! ([`GROUP_WORKLOADS`]) put the pods in PodGroups; a gang is one attempt (one pod group
//! cycle).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::resource::v1 as dra;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

use crate::cache::{Cache, Snapshot};
use crate::config::{self, Loaded};
use crate::explain::{Explanation, Record};
use crate::framework::CycleState;
use crate::framework::{NominatedPods, ProfileRegistry, QueuedPodInfo, Registry};
use crate::group_preemption::{GroupPreemption, preempt_for_group};
use crate::pod_group_manager::PodGroupManager;
use crate::schedule_group::{
    GroupOutcome, Route, route, schedule_group_and_bind, scheduled_members,
};
use crate::schedule_one::{
    Decision, SchedulingAlgorithm, assume_decision, schedule_one, schedule_one_recorded,
};
use crate::types::PodInfo;
use crate::types::dra::template;
use crate::types::pod_group::PodGroupInfo;
use crate::types::pod_group::PodGroupKey;

mod churn;
mod groups;
mod heartbeats;
pub use churn::*;
pub use groups::*;
pub use heartbeats::Heartbeats;

/// The workloads `ferrosched bench` knows.
pub const WORKLOADS: &[&str] = &[
    "SchedulingBasic",
    "NodeAffinity",
    "PodAntiAffinity",
    "PodAffinity",
    "TopologySpreading",
    "PreemptionBasic",
    "MixedProfiles",
    DRA_WORKLOAD,
];

/// scheduler_perf's `SchedulingWithResourceClaimTemplate`: every node has a DRA driver's
/// devices, every pod one claim from a ResourceClaimTemplate.
pub const DRA_WORKLOAD: &str = "SchedulingWithResourceClaimTemplate";
/// The bench's DRA driver (upstream's test driver name).
pub const DRA_DRIVER: &str = "test-driver.cdi.k8s.io";
/// Devices the driver publishes per node.
pub const DRA_DEVICES_PER_NODE: usize = 8;

/// A generated workload.
pub struct Workload {
    pub name: String,
    pub nodes: Vec<core::Node>,
    pub init_pods: Vec<core::Pod>,
    pub measured_pods: Vec<core::Pod>,
    pub config: Loaded,
    /// DeviceClasses, ResourceSlices and the claims made from templates (DRA workloads).
    pub dra: DraWorkload,
    /// The PodGroups the pods name ([`GROUP_WORKLOADS`]), as their views.
    pub pod_groups: Vec<PodGroupInfo>,
    /// Pods per group, for the workloads whose pods are in groups.
    pub pods_per_group: Option<usize>,
}

/// The DRA objects of a workload: they exist before the pods are scheduled, the claims
/// made as the resourceclaim controller makes them (named in each pod's status).
#[derive(Default, Clone)]
pub struct DraWorkload {
    pub classes: Vec<dra::DeviceClass>,
    pub slices: Vec<dra::ResourceSlice>,
    pub templates: Vec<dra::ResourceClaimTemplate>,
    pub claims: Vec<dra::ResourceClaim>,
}

impl DraWorkload {
    fn is_empty(&self) -> bool {
        self.classes.is_empty() && self.slices.is_empty() && self.claims.is_empty()
    }
}

pub const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];

fn quantities(kv: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    kv.iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect()
}

/// scheduler_perf's default node, in one of three zones.
pub fn node(i: usize) -> core::Node {
    let name = format!("node-{i}");
    core::Node {
        metadata: meta::ObjectMeta {
            name: Some(name.clone()),
            labels: Some(
                [
                    ("kubernetes.io/hostname".to_string(), name),
                    (
                        "topology.kubernetes.io/zone".to_string(),
                        ZONES[i % 3].to_string(),
                    ),
                    ("kubernetes.io/os".to_string(), "linux".to_string()),
                ]
                .into(),
            ),
            ..Default::default()
        },
        status: Some(core::NodeStatus {
            allocatable: Some(quantities(&[
                ("cpu", "4"),
                ("memory", "32Gi"),
                ("pods", "110"),
            ])),
            capacity: Some(quantities(&[
                ("cpu", "4"),
                ("memory", "32Gi"),
                ("pods", "110"),
            ])),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// scheduler_perf's default pod: one container requesting 100m CPU and 500Mi.
pub fn pod(namespace: &str, name: &str, labels: &[(&str, &str)]) -> core::Pod {
    core::Pod {
        metadata: meta::ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            uid: Some(format!("uid-{namespace}-{name}")),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        },
        spec: Some(core::PodSpec {
            containers: vec![core::Container {
                name: "pause".into(),
                image: Some("registry.k8s.io/pause:3.10".into()),
                resources: Some(core::ResourceRequirements {
                    requests: Some(quantities(&[("cpu", "100m"), ("memory", "500Mi")])),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn term(key: &str, value: &str, topology_key: &str) -> core::PodAffinityTerm {
    core::PodAffinityTerm {
        label_selector: Some(meta::LabelSelector {
            match_labels: Some([(key.to_string(), value.to_string())].into()),
            ..Default::default()
        }),
        topology_key: topology_key.into(),
        ..Default::default()
    }
}

fn with_spec(mut p: core::Pod, f: impl FnOnce(&mut core::PodSpec)) -> core::Pod {
    f(p.spec.as_mut().expect("pod() sets a spec"));
    p
}

fn pods(n: usize, prefix: &str, make: impl Fn(usize) -> core::Pod) -> Vec<core::Pod> {
    (0..n)
        .map(|i| {
            let mut p = make(i);
            p.metadata.name = Some(format!("{prefix}-{i}"));
            p.metadata.uid = Some(format!("uid-{prefix}-{i}"));
            p
        })
        .collect()
}

/// Bound pods per page when loading them as a list: the objects of one page exist at a
/// time, as the pod informer decodes a page and keeps only the views.
pub const LIST_PAGE: usize = 500;

/// Bound pod `i` as the pod informer's initial list has it: SchedulingBasic's pod (its own
/// name and uid) with `spec.nodeName` set to `node`.
pub fn bound_pod(i: usize, node: &str) -> core::Pod {
    let mut p = pod("bench", &format!("bound-{i}"), &[]);
    p.metadata.uid = Some(format!("uid-bound-{i}"));
    if let Some(s) = p.spec.as_mut() {
        s.node_name = Some(node.to_string());
    }
    p
}

/// scheduler_perf's `test-class`: every device of the test driver.
pub fn dra_device_class() -> dra::DeviceClass {
    dra::DeviceClass {
        metadata: meta::ObjectMeta {
            name: Some("test-class".into()),
            ..Default::default()
        },
        spec: Some(dra::DeviceClassSpec {
            selectors: Some(vec![dra::DeviceSelector {
                cel: Some(dra::CELDeviceSelector {
                    expression: format!("device.driver == \"{DRA_DRIVER}\""),
                }),
            }]),
            ..Default::default()
        }),
    }
}

/// The driver's slice for node `i`: one pool per node, [`DRA_DEVICES_PER_NODE`] devices.
pub fn dra_node_slice(i: usize) -> dra::ResourceSlice {
    let node = format!("node-{i}");
    dra::ResourceSlice {
        metadata: meta::ObjectMeta {
            name: Some(format!("{node}-{DRA_DRIVER}")),
            ..Default::default()
        },
        spec: dra::ResourceSliceSpec {
            driver: DRA_DRIVER.into(),
            node_name: Some(node.clone()),
            pool: dra::ResourcePool {
                name: node,
                generation: 1,
                resource_slice_count: 1,
            },
            devices: Some(
                (0..DRA_DEVICES_PER_NODE)
                    .map(|d| dra::Device {
                        name: format!("device-{d}"),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        },
    }
}

/// scheduler_perf's `test-claim-template`: one device of `test-class`.
pub fn dra_claim_template(namespace: &str) -> dra::ResourceClaimTemplate {
    dra::ResourceClaimTemplate {
        metadata: meta::ObjectMeta {
            name: Some("test-claim-template".into()),
            namespace: Some(namespace.into()),
            ..Default::default()
        },
        spec: Some(dra::ResourceClaimTemplateSpec {
            metadata: None,
            spec: Some(dra::ResourceClaimSpec {
                devices: Some(dra::DeviceClaim {
                    requests: Some(vec![dra::DeviceRequest {
                        name: "req-0".into(),
                        exactly: Some(dra::ExactDeviceRequest {
                            device_class_name: "test-class".into(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
            }),
        }),
    }
}

/// scheduler_perf's pod with one claim (`resource`) from `test-claim-template`, used by its
/// container.
pub fn pod_with_claim_template(namespace: &str) -> core::Pod {
    with_spec(pod(namespace, "x", &[]), |s| {
        s.resource_claims = Some(vec![core::PodResourceClaim {
            name: "resource".into(),
            resource_claim_template_name: Some("test-claim-template".into()),
            ..Default::default()
        }]);
        if let Some(r) = s.containers[0].resources.as_mut() {
            r.claims = Some(vec![core::ResourceClaim {
                name: "resource".into(),
                ..Default::default()
            }]);
        }
    })
}

/// Builds a workload by name (see [`WORKLOADS`]) with `nodes` nodes, `init` init pods and
/// `measured` measured pods.
pub fn build(name: &str, nodes: usize, init: usize, measured: usize) -> Option<Workload> {
    let default_config = || config::from_flags(None, None).expect("default config is valid");
    let ns = "bench";
    let basic = |i: usize| pod(ns, &format!("p-{i}"), &[]);
    let mut dra_objects = DraWorkload::default();
    let (init_pods, measured_pods, config) = match name {
        "SchedulingBasic" => (
            pods(init, "init", basic),
            pods(measured, "measured", basic),
            default_config(),
        ),
        "NodeAffinity" => {
            // Measured pods need zone-a or zone-b through required node affinity.
            let affine = |_i: usize| {
                with_spec(pod(ns, "x", &[]), |s| {
                    s.affinity = Some(core::Affinity {
                        node_affinity: Some(core::NodeAffinity {
                            required_during_scheduling_ignored_during_execution: Some(
                                core::NodeSelector {
                                    node_selector_terms: vec![core::NodeSelectorTerm {
                                        match_expressions: Some(vec![
                                            core::NodeSelectorRequirement {
                                                key: "topology.kubernetes.io/zone".into(),
                                                operator: "In".into(),
                                                values: Some(vec![
                                                    ZONES[0].into(),
                                                    ZONES[1].into(),
                                                ]),
                                            },
                                        ]),
                                        ..Default::default()
                                    }],
                                },
                            ),
                            ..Default::default()
                        }),
                        ..Default::default()
                    })
                })
            };
            (
                pods(init, "init", affine),
                pods(measured, "measured", affine),
                default_config(),
            )
        }
        "PodAntiAffinity" | "PodAffinity" => {
            let anti = name == "PodAntiAffinity";
            let make = move |i: usize| {
                // Anti-affinity: each pod repels its own group on the same host. Affinity: pods
                // of a group share a zone.
                let group = format!("g{}", i % 25);
                with_spec(pod(ns, "x", &[("group", &group)]), |s| {
                    let t = term(
                        "group",
                        &group,
                        if anti {
                            "kubernetes.io/hostname"
                        } else {
                            "topology.kubernetes.io/zone"
                        },
                    );
                    s.affinity = Some(if anti {
                        core::Affinity {
                            pod_anti_affinity: Some(core::PodAntiAffinity {
                                required_during_scheduling_ignored_during_execution: Some(vec![t]),
                                ..Default::default()
                            }),
                            ..Default::default()
                        }
                    } else {
                        core::Affinity {
                            pod_affinity: Some(core::PodAffinity {
                                required_during_scheduling_ignored_during_execution: Some(vec![t]),
                                ..Default::default()
                            }),
                            ..Default::default()
                        }
                    })
                })
            };
            (
                pods(init, "init", make),
                pods(measured, "measured", make),
                default_config(),
            )
        }
        "TopologySpreading" => {
            let spread = |_i: usize| {
                with_spec(pod(ns, "x", &[("app", "spread")]), |s| {
                    s.topology_spread_constraints = Some(vec![core::TopologySpreadConstraint {
                        max_skew: 1,
                        topology_key: "topology.kubernetes.io/zone".into(),
                        when_unsatisfiable: "DoNotSchedule".into(),
                        label_selector: Some(meta::LabelSelector {
                            match_labels: Some([("app".to_string(), "spread".to_string())].into()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }])
                })
            };
            (
                pods(init, "init", spread),
                pods(measured, "measured", spread),
                default_config(),
            )
        }
        "PreemptionBasic" => {
            // Init pods fill every node (low priority, 900m each); measured pods need room.
            let low = |_i: usize| {
                with_spec(pod(ns, "x", &[]), |s| {
                    s.priority = Some(0);
                    s.containers[0].resources = Some(core::ResourceRequirements {
                        requests: Some(quantities(&[("cpu", "900m"), ("memory", "500Mi")])),
                        ..Default::default()
                    });
                })
            };
            let high = |_i: usize| {
                with_spec(pod(ns, "x", &[]), |s| {
                    s.priority = Some(1000);
                    s.containers[0].resources = Some(core::ResourceRequirements {
                        requests: Some(quantities(&[("cpu", "900m"), ("memory", "500Mi")])),
                        ..Default::default()
                    });
                })
            };
            (
                pods(init.max(nodes * 4), "init", low),
                pods(measured, "measured", high),
                default_config(),
            )
        }
        "MixedProfiles" => {
            let text = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n- schedulerName: bin-packing\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: MostAllocated\n";
            let cfg = config::load_str(text, "<MixedProfiles>").expect("valid");
            let mixed = |i: usize| {
                with_spec(pod(ns, "x", &[]), |s| {
                    if i % 2 == 1 {
                        s.scheduler_name = Some("bin-packing".into());
                    }
                })
            };
            (
                pods(init, "init", mixed),
                pods(measured, "measured", mixed),
                cfg,
            )
        }
        DRA_WORKLOAD => {
            let template = dra_claim_template(ns);
            let mut claims = Vec::new();
            let mut make = |prefix: &str, n: usize| {
                let mut out = pods(n, prefix, |_| pod_with_claim_template(ns));
                for p in &mut out {
                    let claim = template::claim_from_template(p, "resource", &template, "bench");
                    let claim_name = claim.metadata.name.clone().unwrap_or_default();
                    template::name_generated_claim(p, "resource", &claim_name);
                    claims.push(claim);
                }
                out
            };
            let (init_pods, measured_pods) = (make("init", init), make("measured", measured));
            dra_objects = DraWorkload {
                classes: vec![dra_device_class()],
                slices: (0..nodes).map(dra_node_slice).collect(),
                templates: vec![template],
                claims,
            };
            (init_pods, measured_pods, default_config())
        }
        // One pod per node, batchable (no default spreading); the cluster bench turns
        // batching off for the second one with the OpportunisticBatching feature gate.
        "IdenticalPods" | "IdenticalPodsWithoutBatching" => (
            pods(init, "init", identical_pod),
            pods(measured, "measured", identical_pod),
            config::load_str(BATCHABLE_CONFIG, "identical-pods").expect("valid config"),
        ),
        _ => return None,
    };
    Some(Workload {
        name: name.to_string(),
        nodes: (0..nodes).map(node).collect(),
        init_pods,
        measured_pods,
        config,
        dra: dra_objects,
        pod_groups: Vec::new(),
        pods_per_group: None,
    })
}

/// What a run measured (measured pods only).
#[derive(Clone, Debug)]
pub struct RunStats {
    pub measured: usize,
    pub scheduled: usize,
    pub unschedulable: usize,
    pub elapsed: Duration,
    /// Every scheduling attempt's duration, sorted ascending: one per pod scheduled alone,
    /// one per pod group cycle for a gang (all its pods at once).
    pub attempt_latencies: Vec<Duration>,
    /// Start-up from lists: the nodes and bound pods loaded, the first snapshot taken.
    pub startup: Startup,
    /// `Cache::update_snapshot` calls of the measured attempts (pods scheduled alone) and
    /// their total time.
    pub snapshot_updates: u64,
    pub snapshot_update_time: Duration,
    /// Heartbeats applied between the measured attempts (`None`: not asked for).
    pub heartbeats: Option<HeartbeatStats>,
}

/// What the heartbeats between the measured attempts cost (their time is in `elapsed`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HeartbeatStats {
    pub per_pod: usize,
    pub applied: u64,
    /// Updates that changed the cache (0 when every heartbeat is dropped early).
    pub reached_cache: u64,
    pub micros_per_heartbeat: f64,
}

/// `bench --heartbeats-per-pod`: this many heartbeat-only node updates before each measured
/// attempt; `unfiltered`: every one reaches the cache (the path before they were dropped).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeartbeatLoad {
    pub per_pod: usize,
    pub unfiltered: bool,
}

/// What start-up from lists cost: the cache filled from the initial lists of nodes and
/// bound pods (views built, as the informers do), then the first snapshot taken. The API
/// objects are made outside the timed parts, the pods a page at a time ([`LIST_PAGE`]).
#[derive(Clone, Debug, Default)]
pub struct Startup {
    pub nodes: usize,
    pub bound_pods: usize,
    pub load_nodes: Duration,
    pub load_pods: Duration,
    pub first_snapshot: Duration,
    /// The caller's memory probe (e.g. resident bytes) before loading, after the nodes,
    /// after the bound pods and after the first snapshot.
    pub memory: [Option<u64>; 4],
}

impl Startup {
    /// Nodes, pods and the first snapshot.
    pub fn total(&self) -> Duration {
        self.load_nodes + self.load_pods + self.first_snapshot
    }

    /// Probe bytes the nodes added, per node.
    pub fn bytes_per_node(&self) -> Option<f64> {
        per(self.memory[0], self.memory[1], self.nodes)
    }

    /// Probe bytes the bound pods added, per pod.
    pub fn bytes_per_pod(&self) -> Option<f64> {
        per(self.memory[1], self.memory[2], self.bound_pods)
    }

    /// Probe bytes the first snapshot added.
    pub fn snapshot_bytes(&self) -> Option<u64> {
        Some(self.memory[3]?.saturating_sub(self.memory[2]?))
    }
}

fn per(before: Option<u64>, after: Option<u64>, n: usize) -> Option<f64> {
    (n > 0).then_some(())?;
    Some(after?.saturating_sub(before?) as f64 / n as f64)
}

impl RunStats {
    pub fn pods_per_second(&self) -> f64 {
        self.measured as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn percentile(&self, p: f64) -> Duration {
        if self.attempt_latencies.is_empty() {
            return Duration::ZERO;
        }
        let idx = ((self.attempt_latencies.len() as f64 - 1.0) * p).round() as usize;
        self.attempt_latencies[idx]
    }
}

/// A scheduler over a workload: cache, frameworks and the algorithm, as `simulate` wires them.
pub struct Runner {
    pub cache: Cache,
    pub snapshot: Snapshot,
    profiles: ProfileRegistry,
    /// The workload's PodGroups and their members, read by GangScheduling and the group cycle.
    groups: Arc<PodGroupManager>,
    alg: SchedulingAlgorithm,
    nominated: NominatedPods,
    /// Gangs already preempted for (once each: their retry then places them or not).
    preempted_for: std::collections::HashSet<PodGroupKey>,
    /// Placements not yet confirmed as bound ([`Runner::confirm_bindings`]).
    unconfirmed: Vec<(Arc<PodInfo>, String)>,
    explain: ExplainMode,
    record: Record,
    last: Option<Explanation>,
    /// `update_snapshot` calls in [`Runner::schedule`] and their total time.
    snapshot_updates: (u64, Duration),
    /// Heartbeats applied before each attempt of [`Runner::schedule_queue`].
    heartbeats: Option<Heartbeats>,
}

/// What a bench run pays for explanations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ExplainMode {
    #[default]
    Off,
    /// What `run` does with explanations on: every attempt recorded compactly, and only the
    /// attempts it keeps (the unschedulable ones) rendered.
    Run,
    /// Every attempt recorded and rendered, as `simulate --explain` does.
    Full,
}

impl Runner {
    pub fn new(w: &Workload) -> Self {
        let mut r = Self::without_nodes(w);
        r.load_nodes(&w.nodes);
        r
    }

    /// Adds nodes to the cache, as the node informer's list does.
    pub fn load_nodes(&mut self, nodes: &[core::Node]) {
        for n in nodes {
            self.cache.add_node(n);
        }
    }

    /// Adds bound pods to the cache, as the pod informer's list does (view, then cache).
    pub fn load_bound_pods(&mut self, pods: &[core::Pod]) {
        for p in pods {
            // Generated pods are bound and distinct: an error here is a bench bug.
            self.cache
                .add_pod(Arc::new(PodInfo::from_pod(p)))
                .expect("bound pod loads");
        }
    }

    /// [`Runner::new`] with an empty cache but for the workload's DRA objects.
    pub fn without_nodes(w: &Workload) -> Self {
        let groups = Arc::new(PodGroupManager::new());
        let mut registry = Registry::in_tree();
        crate::plugins::register_group_plugins(&mut registry, Arc::clone(&groups));
        let profiles =
            ProfileRegistry::new(&w.config.profiles, &registry).expect("workload config builds");
        for g in &w.pod_groups {
            groups.write().upsert(g.clone());
        }
        let mut cache = Cache::new();
        if !w.dra.is_empty() {
            cache.set_dra_api_served(true);
            let objects = cache.dra_mut();
            for c in &w.dra.classes {
                objects.update_class(c);
            }
            for s in &w.dra.slices {
                objects.update_slice(s);
            }
            for c in &w.dra.claims {
                objects.update_claim(c);
            }
        }
        let pct = w.config.config.percentage_of_nodes_to_score.unwrap_or(0);
        Runner {
            cache,
            snapshot: Snapshot::new(),
            profiles,
            groups,
            alg: SchedulingAlgorithm::new(pct, 1),
            nominated: NominatedPods::new(),
            preempted_for: Default::default(),
            unconfirmed: Vec::new(),
            explain: ExplainMode::Off,
            record: Record::new(),
            last: None,
            snapshot_updates: (0, Duration::ZERO),
            heartbeats: None,
        }
    }

    /// Assumes a placement as the controller does, with the binding taken as done.
    fn assume(&mut self, pod: Arc<PodInfo>, node: &str, state: &CycleState) -> bool {
        let key = pod.key().clone();
        self.unconfirmed.push((Arc::clone(&pod), node.to_string()));
        let ok = assume_decision(&mut self.cache, pod, node, state).is_ok();
        self.cache.finish_binding(&key);
        ok
    }

    /// Takes every placement so far as bound, as the pod informer's events do in the
    /// controller: assumed pods become bound ones, which preemption may choose as victims
    /// (it leaves assumed pods alone). Placements preempted meanwhile stay gone. The
    /// snapshot is brought up to date here, so the next (timed) attempt does not pay for
    /// every node changed.
    pub fn confirm_bindings(&mut self) {
        for (pod, node) in std::mem::take(&mut self.unconfirmed) {
            if !self.cache.is_assumed(pod.key()) {
                continue;
            }
            let mut bound = PodInfo::clone(&pod);
            bound.node_name = Some(node);
            let _ = self.cache.add_pod(Arc::new(bound));
        }
        self.cache.update_snapshot(&mut self.snapshot);
    }

    /// Explains attempts from now on, as `mode` says.
    pub fn set_explain(&mut self, mode: ExplainMode) {
        self.explain = mode;
    }

    /// The last rendered explanation, when explaining.
    pub fn last_explanation(&self) -> Option<&Explanation> {
        self.last.as_ref()
    }

    fn decide(&mut self, pod: &Arc<PodInfo>) -> Option<Decision> {
        let fw = self.profiles.for_scheduler_name(&pod.scheduler_name)?;
        let (alg, snap, nom) = (&mut self.alg, &self.snapshot, &self.nominated);
        Some(match self.explain {
            ExplainMode::Off => schedule_one(fw, alg, pod, snap, nom),
            mode => {
                let d = schedule_one_recorded(fw, alg, pod, snap, nom, &mut self.record);
                if mode == ExplainMode::Full || !matches!(d, Decision::Bind { .. }) {
                    self.last = Some(self.record.render(fw, pod, snap, &d));
                }
                d
            }
        })
    }

    /// Records the pods' PodGroup membership, as the pod informer does before the pods are
    /// scheduled (GangScheduling lets a gang's pods in once `minCount` of them exist).
    pub fn admit(&self, pods: &[Arc<PodInfo>]) {
        let mut groups = self.groups.write();
        for p in pods {
            groups.add_pod(p);
        }
    }

    /// Schedules `pods` as one queue, in order, the way `simulate` does: a pod of a gang takes
    /// its group's waiting pods out of the queue and they are placed in one pod group cycle,
    /// all or nothing, and bound ([`schedule_group_and_bind`]); any other pod is scheduled
    /// alone ([`schedule`](Self::schedule)). A pod whose gang is incomplete is not tried. A
    /// gang that does not fit gets workload-aware preemption once ([`preempt_for_group`]):
    /// the victims are removed at once and the gang, nominated, goes back to the front of
    /// the queue; its failed attempt's time includes the preemption.
    /// `attempt` gets each attempt's pod count and duration. Returns how many pods were
    /// placed. Pods of a group must be [`admit`](Self::admit)ted first.
    pub fn schedule_queue(
        &mut self,
        pods: &[Arc<PodInfo>],
        mut attempt: impl FnMut(usize, Duration),
    ) -> usize {
        let mut queue: VecDeque<QueuedPodInfo> = pods
            .iter()
            .enumerate()
            .map(|(i, p)| QueuedPodInfo::new(Arc::clone(p), i as u64))
            .collect();
        let mut placed = 0;
        while let Some(q) = queue.pop_front() {
            if let Some(h) = &mut self.heartbeats {
                h.before_attempt(&mut self.cache);
            }
            let t = Instant::now();
            let (tried, ok) = self.attempt(q, &mut queue);
            attempt(tried, t.elapsed());
            placed += ok;
        }
        placed
    }

    /// One attempt for `q`, just popped from `queue`: (pods tried, pods placed).
    fn attempt(&mut self, q: QueuedPodInfo, queue: &mut VecDeque<QueuedPodInfo>) -> (usize, usize) {
        let Some(fw) = self.profiles.for_scheduler_name(&q.pod.scheduler_name) else {
            return (1, 0);
        };
        let group = match route(fw, &self.groups, &q.pod) {
            Route::Alone => return (1, usize::from(self.schedule(&q.pod))),
            // The bench's workloads have no CompositePodGroups.
            Route::Wait(_) | Route::Tree(_) => return (1, 0),
            Route::Gang(g) => g,
        };
        let outcome = schedule_group_and_bind(
            fw,
            &mut self.alg,
            &self.groups,
            &group,
            q,
            queue,
            &mut self.cache,
            &mut self.snapshot,
            &self.nominated,
        );
        let waiting = match outcome {
            GroupOutcome::Placed { placed, waiting } => {
                for p in &placed {
                    self.nominated.remove(p.pod.key());
                    self.unconfirmed.push((Arc::clone(&p.pod), p.node.clone()));
                }
                return (placed.len() + waiting.len(), placed.len());
            }
            GroupOutcome::Unschedulable {
                waiting,
                error: false,
                ..
            } if fw.has_post_filter_plugins() && !self.preempted_for.contains(&group.key) => {
                waiting
            }
            GroupOutcome::Unschedulable { waiting, .. } => return (waiting.len(), 0),
        };
        // Workload-aware preemption, as `simulate` acts on it: for the whole gang or nothing.
        self.preempted_for.insert(group.key.clone());
        let members: Vec<QueuedPodInfo> = waiting.iter().map(|w| w.queued.clone()).collect();
        let before = scheduled_members(&self.groups.read(), &group.key, &self.cache);
        let decision = preempt_for_group(
            fw,
            &mut self.alg,
            &group,
            &before,
            &members,
            &self.groups.read(),
            &mut self.cache,
            &mut self.snapshot,
            &self.nominated,
        );
        if let GroupPreemption::Preempt {
            victims,
            nominations,
            ..
        } = decision
        {
            for v in &victims {
                if let Ok(gone) = self.cache.remove_pod(v) {
                    self.groups.write().remove_pod(&gone);
                }
            }
            for mut m in members.into_iter().rev() {
                if let Some((_, node)) = nominations.iter().find(|(k, _)| k == m.pod.key()) {
                    let mut p = PodInfo::clone(&m.pod);
                    p.nominated_node_name = Some(node.clone());
                    m.pod = Arc::new(p);
                    self.nominated.add(Arc::clone(&m.pod), node);
                }
                queue.push_front(m);
            }
        }
        (waiting.len(), 0)
    }

    /// One attempt: snapshot, schedule, assume. Returns whether the pod was placed.
    pub fn schedule(&mut self, pod: &Arc<PodInfo>) -> bool {
        let t = Instant::now();
        self.cache.update_snapshot(&mut self.snapshot);
        self.snapshot_updates.0 += 1;
        self.snapshot_updates.1 += t.elapsed();
        let Some(decision) = self.decide(pod) else {
            return false;
        };
        match decision {
            Decision::Bind {
                node,
                pod,
                state,
                result,
                ..
            } => {
                let placed = self.assume(pod, &node, &state);
                self.alg.recycle(result);
                placed
            }
            Decision::Unschedulable {
                nomination: Some(n),
                ..
            } if n.nominated_node_name.is_some() => {
                // Act on preemption as the controller would, then retry once.
                for v in &n.victims {
                    let _ = self.cache.remove_pod(v);
                }
                let mut p = PodInfo::clone(pod);
                p.nominated_node_name = n.nominated_node_name.clone();
                let p = Arc::new(p);
                self.cache.update_snapshot(&mut self.snapshot);
                match self.decide(&p) {
                    Some(Decision::Bind {
                        node, pod, state, ..
                    }) => self.assume(pod, &node, &state),
                    _ => false,
                }
            }
            _ => false,
        }
    }
}

/// Schedules the init pods (unmeasured), then the measured pods, timing each attempt.
pub fn run(w: &Workload) -> RunStats {
    run_with(w, ExplainMode::Off)
}

/// Views of `pods`, as the pod informer builds them.
pub fn views(pods: &[core::Pod]) -> Vec<Arc<PodInfo>> {
    pods.iter()
        .map(|p| Arc::new(PodInfo::from_pod(p)))
        .collect()
}

/// [`run`], explaining the measured attempts as `explain` says (pods scheduled alone; a pod
/// group cycle is not explained).
pub fn run_with(w: &Workload, explain: ExplainMode) -> RunStats {
    run_from_lists(w, 0, explain, &mut || None, &[], None)
}

/// [`run_with`], every profile calling `extenders` (`bench --extender-noop`: what extender
/// calls cost).
pub fn run_with_extenders(
    w: &Workload,
    explain: ExplainMode,
    extenders: &[Arc<dyn crate::framework::Extender>],
) -> RunStats {
    run_from_lists(w, 0, explain, &mut || None, extenders, None)
}

/// [`run_with`] on a cluster that already has `bound_pods` pods ([`bound_pod`], round robin
/// over the nodes), loaded from lists before the init pods are scheduled. `memory` is read
/// between the start-up steps ([`Startup::memory`]); every profile calls `extenders`.
pub fn run_from_lists(
    w: &Workload,
    bound_pods: usize,
    explain: ExplainMode,
    memory: &mut dyn FnMut() -> Option<u64>,
    extenders: &[Arc<dyn crate::framework::Extender>],
    heartbeats: Option<HeartbeatLoad>,
) -> RunStats {
    let mut r = Runner::without_nodes(w);
    r.profiles.set_extenders(extenders);
    let mut startup = Startup {
        nodes: w.nodes.len(),
        bound_pods,
        ..Startup::default()
    };
    startup.memory[0] = memory();
    let t = Instant::now();
    r.load_nodes(&w.nodes);
    startup.load_nodes = t.elapsed();
    startup.memory[1] = memory();
    let names: Vec<&str> = w
        .nodes
        .iter()
        .map(|n| n.metadata.name.as_deref().unwrap_or_default())
        .collect();
    let mut next = 0;
    while next < bound_pods && !names.is_empty() {
        let end = (next + LIST_PAGE).min(bound_pods);
        let page: Vec<core::Pod> = (next..end)
            .map(|i| bound_pod(i, names[i % names.len()]))
            .collect();
        let t = Instant::now();
        r.load_bound_pods(&page);
        startup.load_pods += t.elapsed();
        next = end;
    }
    startup.memory[2] = memory();
    let t = Instant::now();
    r.cache.update_snapshot(&mut r.snapshot);
    startup.first_snapshot = t.elapsed();
    startup.memory[3] = memory();
    // Views are built and the groups' members known before timing: in the controller the
    // informers do both.
    let init = views(&w.init_pods);
    let measured = views(&w.measured_pods);
    r.admit(&init);
    r.admit(&measured);
    r.schedule_queue(&init, |_, _| {});
    r.confirm_bindings();
    r.set_explain(explain);
    if let Some(load) = heartbeats {
        let h = Heartbeats::new(&mut r.cache, &w.nodes, load.per_pod);
        r.heartbeats = Some(if load.unfiltered { h.unfiltered() } else { h });
        // The nodes as kubelets report them, in the snapshot before timing.
        r.cache.update_snapshot(&mut r.snapshot);
    }
    r.snapshot_updates = (0, Duration::ZERO);
    let mut latencies = Vec::with_capacity(measured.len());
    let start = Instant::now();
    let scheduled = r.schedule_queue(&measured, |_, t| latencies.push(t));
    let elapsed = start.elapsed();
    latencies.sort_unstable();
    RunStats {
        measured: measured.len(),
        scheduled,
        unschedulable: measured.len() - scheduled,
        elapsed,
        attempt_latencies: latencies,
        startup,
        snapshot_updates: r.snapshot_updates.0,
        snapshot_update_time: r.snapshot_updates.1,
        heartbeats: r.heartbeats.as_ref().map(|h| HeartbeatStats {
            per_pod: heartbeats.map_or(0, |l| l.per_pod),
            applied: h.applied,
            reached_cache: h.reached_cache,
            micros_per_heartbeat: h.micros_per_heartbeat(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_workload_builds_and_schedules_on_a_small_cluster() {
        for name in WORKLOADS {
            let w = build(name, 20, 10, 10).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(w.nodes.len(), 20);
            assert_eq!(w.measured_pods.len(), 10);
            let stats = run(&w);
            assert_eq!(stats.measured, 10, "{name}");
            // Explained, the same pods are placed.
            for mode in [ExplainMode::Run, ExplainMode::Full] {
                let explained = run_with(&w, mode);
                assert_eq!(explained.scheduled, stats.scheduled, "{name} {mode:?}");
            }
            assert_eq!(stats.attempt_latencies.len(), 10);
            assert!(stats.scheduled > 0, "{name}: nothing scheduled");
        }
        assert!(build("Nope", 1, 1, 1).is_none());
    }

    /// Bound pods come from lists: spread round robin, every one in the cache before the
    /// first snapshot, and the workload's own pods scheduled beside them as before.
    #[test]
    fn bound_pods_are_loaded_from_lists_before_scheduling() {
        // 1,003 pods of 100m on 30 nodes of 4 CPU: 34 or 33 each, room left for the others.
        let w = build("SchedulingBasic", 30, 5, 6).unwrap();
        let mut probes = 0u64;
        let mut memory = || {
            probes += 1;
            Some(probes * 1000)
        };
        let stats = run_from_lists(
            &w,
            2 * LIST_PAGE + 3,
            ExplainMode::Off,
            &mut memory,
            &[],
            None,
        );
        assert_eq!((stats.measured, stats.scheduled), (6, 6));
        let st = &stats.startup;
        assert_eq!((st.nodes, st.bound_pods), (30, 2 * LIST_PAGE + 3));
        assert_eq!(st.memory, [Some(1000), Some(2000), Some(3000), Some(4000)]);
        assert_eq!(st.bytes_per_node(), Some(1000.0 / 30.0));
        assert_eq!(st.bytes_per_pod(), Some(1000.0 / 1003.0));
        assert_eq!(st.snapshot_bytes(), Some(1000));
        // One snapshot update per measured attempt.
        assert_eq!(stats.snapshot_updates, 6);

        let mut r = Runner::new(&w);
        let page: Vec<core::Pod> = (0..60)
            .map(|i| bound_pod(i, &format!("node-{}", i % 30)))
            .collect();
        r.load_bound_pods(&page);
        assert_eq!(r.cache.pod_count(), 60);
        r.cache.update_snapshot(&mut r.snapshot);
        for n in r.snapshot.node_infos() {
            assert_eq!(n.pods.len(), 2, "{}", n.name);
            assert_eq!(n.requested.milli_cpu, 200, "{}", n.name);
        }
    }

    /// The workload-scheduling workloads: every pod placed, a gang in one attempt (one pod
    /// group cycle), a basic group's pods one by one; the last group takes the remainder.
    #[test]
    fn every_group_workload_builds_and_schedules_on_a_small_cluster() {
        // The preemption workloads have tests of their own (their sizes are their own).
        for name in [GANG_SCHEDULING, BASIC_SCHEDULING, TOPOLOGY_AWARE_SCHEDULING] {
            for size in [1, 3, 10] {
                let w =
                    build_group(name, 20, 6, 10, Some(size)).unwrap_or_else(|| panic!("{name}"));
                assert_eq!((w.nodes.len(), w.measured_pods.len()), (20, 10));
                assert_eq!(
                    w.pod_groups.len(),
                    6usize.div_ceil(size) + 10usize.div_ceil(size)
                );
                let stats = run(&w);
                assert_eq!((stats.measured, stats.scheduled), (10, 10), "{name}/{size}");
                let attempts = if name == BASIC_SCHEDULING {
                    10
                } else {
                    10usize.div_ceil(size)
                };
                assert_eq!(stats.attempt_latencies.len(), attempts, "{name}/{size}");
            }
        }
        assert!(build_group("SchedulingBasic", 1, 1, 1, None).is_none());
        let w = build_group(GANG_SCHEDULING, 1, 0, 7, None).unwrap();
        assert_eq!(w.pods_per_group, Some(3));
    }

    /// Through the runner a gang is all or nothing: one node takes 40 of these pods; a gang of
    /// 30 fits, the next one of 30 does not and places none, a third of 10 still fits.
    #[test]
    fn a_gang_that_does_not_fit_places_none_of_its_pods() {
        let mut w = build_group(GANG_SCHEDULING, 1, 0, 60, Some(30)).unwrap();
        let (pods, groups) = groups_of_sizes(&[30, 30, 10]);
        (w.measured_pods, w.pod_groups) = (pods, groups);
        let stats = run(&w);
        assert_eq!(stats.scheduled, 40, "{stats:?}");
        assert_eq!(stats.attempt_latencies.len(), 3);
    }

    /// GangPreemptionPodGroups: five low-priority pods per node (600m each, gangs of 5 on
    /// different nodes), then high-priority gangs of 3500m pods: each gang is placed after one
    /// preemption, on nodes where no low-priority pod is left, one pod per node.
    #[test]
    fn high_priority_gangs_preempt_low_priority_gangs() {
        let w = build_group(GANG_PREEMPTION_POD_GROUPS, 20, 999, 15, Some(5)).unwrap();
        assert_eq!((w.init_pods.len(), w.measured_pods.len()), (100, 15));
        assert_eq!(w.pod_groups.len(), 20 + 3);
        assert!(w.pod_groups.iter().all(|g| g.min_count() == 5));
        let priorities: std::collections::BTreeSet<Option<i32>> =
            w.pod_groups.iter().map(|g| g.priority).collect();
        assert_eq!(
            priorities,
            [Some(LOW_GROUP_PRIORITY), Some(HIGH_GROUP_PRIORITY)].into()
        );

        let mut r = Runner::new(&w);
        let (init, measured) = (views(&w.init_pods), views(&w.measured_pods));
        r.admit(&init);
        r.admit(&measured);
        assert_eq!(r.schedule_queue(&init, |_, _| {}), 100);
        r.confirm_bindings();
        let mut attempts = 0;
        assert_eq!(r.schedule_queue(&measured, |_, _| attempts += 1), 15);
        // One failed cycle (with its preemption) and one placing cycle per gang.
        assert_eq!(attempts, 6);
        r.cache.update_snapshot(&mut r.snapshot);
        let mut high_nodes = 0;
        for n in r.snapshot.node_infos() {
            let high = n
                .pods
                .iter()
                .filter(|p| p.pod_group.as_ref().unwrap().name.starts_with("high-"))
                .count();
            assert!(high <= 1, "{}", n.name);
            if high == 1 {
                high_nodes += 1;
                assert_eq!(n.pods.len(), 1, "low-priority pods left on {}", n.name);
            }
        }
        assert_eq!(high_nodes, 15);
        // Explained runs place the same.
        assert_eq!(run_with(&w, ExplainMode::Run).scheduled, 15);

        assert!(check_group_sizes(GANG_PREEMPTION_POD_GROUPS, 20, 15, Some(5)).is_ok());
        let e = check_group_sizes(GANG_PREEMPTION_POD_GROUPS, 20, 21, Some(5)).unwrap_err();
        assert!(e.contains("21 measured pods need at least 21 nodes"), "{e}");
        let e = check_group_sizes(GANG_PREEMPTION_POD_GROUPS, 20, 20, Some(21)).unwrap_err();
        assert!(e.contains("21 pods per group"), "{e}");
        let e = check_group_sizes(GANG_PREEMPTION_POD_GROUPS, 20_000, 10, Some(1)).unwrap_err();
        assert!(e.contains("host port"), "{e}");
        assert!(check_group_sizes(GANG_SCHEDULING, 1, 100, Some(100)).is_ok());
    }

    /// Pods left on each node after a preemption workload: (preemptors, victims).
    fn survivors(r: &mut Runner) -> Vec<(usize, usize)> {
        r.cache.update_snapshot(&mut r.snapshot);
        r.snapshot
            .node_infos()
            .iter()
            .map(|n| {
                let high = n
                    .pods
                    .iter()
                    .filter(|p| p.priority == PREEMPTOR_PRIORITY)
                    .count();
                (high, n.pods.len() - high)
            })
            .collect()
    }

    /// GangPreemptionTopologySpreading: six nodes over three zones full of 300m victims;
    /// two gangs of three 3970m pods that spread one per zone: each pod lands on a node it
    /// emptied, and each gang covers the three zones.
    #[test]
    fn spreading_gangs_preempt_whole_nodes_one_per_zone() {
        let w = build_group(GANG_PREEMPTION_TOPOLOGY_SPREADING, 6, 0, 6, Some(3)).unwrap();
        assert_eq!((w.init_pods.len(), w.measured_pods.len()), (60, 6));
        let mut r = Runner::new(&w);
        let (init, measured) = (views(&w.init_pods), views(&w.measured_pods));
        r.admit(&init);
        r.admit(&measured);
        assert_eq!(r.schedule_queue(&init, |_, _| {}), 60);
        r.confirm_bindings();
        assert_eq!(r.schedule_queue(&measured, |_, _| {}), 6);
        r.confirm_bindings();
        for (high, low) in survivors(&mut r) {
            assert_eq!((high, low), (1, 0));
        }
        for g in ["gang-0", "gang-1"] {
            let zones: std::collections::BTreeSet<String> = r
                .snapshot
                .node_infos()
                .iter()
                .filter(|n| {
                    n.pods
                        .iter()
                        .any(|p| p.pod_group.as_ref().is_some_and(|k| k.name == g))
                })
                .map(|n| n.labels["topology.kubernetes.io/zone"].clone())
                .collect();
            assert_eq!(zones.len(), 3, "{g} in {zones:?}");
        }
    }

    /// PreemptionPodGroupDisruptionMode: each preemptor needs a whole node (ten victims).
    /// Victims alone or in `single` groups: only those ten go. In `all` groups, each victim's
    /// whole group goes wherever it runs, so more pods are evicted than the node held.
    #[test]
    fn disruption_modes_decide_how_many_pods_a_preemptor_evicts() {
        let evicted = |name: &str| {
            let w = build_group(name, 10, 0, 2, None).unwrap();
            let mut r = Runner::new(&w);
            let (init, measured) = (views(&w.init_pods), views(&w.measured_pods));
            r.admit(&init);
            assert_eq!(r.schedule_queue(&init, |_, _| {}), 100, "{name}");
            r.confirm_bindings();
            assert_eq!(r.schedule_queue(&measured, |_, _| {}), 2, "{name}");
            r.confirm_bindings();
            let left: usize = survivors(&mut r).iter().map(|(_, low)| low).sum();
            100 - left
        };
        assert_eq!(evicted(DISRUPTION_MODE_NO_POD_GROUP), 20);
        assert_eq!(evicted(DISRUPTION_MODE_SINGLE), 20);
        let all = evicted(DISRUPTION_MODE_ALL);
        assert!(all > 20 && all % 10 == 0, "{all}");
        assert!(check_group_sizes(DISRUPTION_MODE_ALL, 10, 11, None).is_err());
    }

    fn groups_of_sizes(sizes: &[usize]) -> (Vec<core::Pod>, Vec<PodGroupInfo>) {
        let mut pods = Vec::new();
        let mut groups = Vec::new();
        for (g, &n) in sizes.iter().enumerate() {
            let name = format!("gang-{g}");
            groups.push(pod_group("bench", &name, Some(n), None));
            for i in 0..n {
                let mut p = group_pod("bench", &name);
                p.metadata.name = Some(format!("{name}-{i}"));
                pods.push(p);
            }
        }
        (pods, groups)
    }

    /// Topology-aware gangs: each lands in one rack, never split across two.
    #[test]
    fn topology_aware_gangs_each_land_in_one_rack() {
        let w = build_group(
            TOPOLOGY_AWARE_SCHEDULING,
            3 * NODES_PER_RACK,
            0,
            24,
            Some(8),
        )
        .unwrap();
        let mut r = Runner::new(&w);
        let pods = views(&w.measured_pods);
        r.admit(&pods);
        assert_eq!(r.schedule_queue(&pods, |_, _| {}), 24);
        r.cache.update_snapshot(&mut r.snapshot);
        let mut racks: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
        for n in r.snapshot.node_infos() {
            let rack = n.labels.get(RACK_LABEL).unwrap().to_string();
            for p in n.pods.iter() {
                let group = p.pod_group.as_ref().unwrap().name.clone();
                racks.entry(group).or_default().insert(rack.clone());
            }
        }
        assert_eq!(racks.len(), 3, "{racks:?}");
        assert!(racks.values().all(|r| r.len() == 1), "{racks:?}");
    }

    /// The DRA workload: each pod's generated claim exists and is named in its status; the
    /// cluster takes exactly [`DRA_DEVICES_PER_NODE`] pods per node, never one device twice.
    #[test]
    fn dra_workload_fills_every_device_once() {
        let w = build(DRA_WORKLOAD, 2, 6, 12).unwrap();
        assert_eq!(w.dra.slices.len(), 2);
        assert_eq!(w.dra.claims.len(), 18);
        let stats = run(&w);
        // 16 devices: 6 init pods, then 10 of the 12 measured pods.
        assert_eq!(stats.scheduled, 10, "{stats:?}");
        assert_eq!(stats.unschedulable, 2);

        let mut r = Runner::new(&w);
        for p in w.init_pods.iter().chain(&w.measured_pods) {
            r.schedule(&Arc::new(PodInfo::from_pod(p)));
        }
        r.cache.update_snapshot(&mut r.snapshot);
        let allocated = r.snapshot.dra().allocated_devices();
        assert_eq!(allocated.len(), 2 * DRA_DEVICES_PER_NODE);
        assert!(allocated.values().all(|&n| n == 1), "{allocated:?}");
    }

    /// Both churn runs schedule every pod; hints only ever save attempts.
    #[test]
    fn churn_schedules_everything_with_fewer_attempts_with_hints() {
        let with = run_churn(10, 60, ChurnHints::OldAndNew);
        let new_only = run_churn(10, 60, ChurnHints::NewNodeOnly);
        let without = run_churn(10, 60, ChurnHints::Off);
        assert_eq!(with.scheduled, 60, "{with:?}");
        assert_eq!(new_only.scheduled, 60, "{new_only:?}");
        assert_eq!(without.scheduled, 60, "{without:?}");
        assert!(
            new_only.attempts < without.attempts,
            "hints {new_only:?} vs none {without:?}"
        );
        // The old node lets NodeAffinity leave pods a relabelled node already matched.
        assert!(
            with.attempts < new_only.attempts,
            "old and new {with:?} vs new only {new_only:?}"
        );
    }

    /// Batching places every identical pod, and most of them on the hinted node.
    #[test]
    fn identical_pods_are_batched() {
        let on = run_identical(150, 120, true);
        let off = run_identical(150, 120, false);
        assert_eq!((on.scheduled, off.scheduled), (120, 120));
        assert_eq!(off.batched, 0);
        assert!(on.batched > 100, "{on:?}");
    }
}
