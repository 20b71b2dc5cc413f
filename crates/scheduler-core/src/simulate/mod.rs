//! `ferrosched simulate`: schedule a cluster dump through the real framework, offline.
//!
//! Nodes and bound pods fill the cache; pending pods are admitted as the API server would
//! (priority from their PriorityClass), routed to a profile by `spec.schedulerName`, gated by
//! PreEnqueue, ordered by the profiles' QueueSort, and scheduled one at a time with
//! [`schedule_one`]. Each placement is assumed in the cache before the next pod, exactly as
//! the controller does, so later pods see earlier ones.

pub mod capacity;
pub mod compare;
#[cfg(test)]
mod composite_tests;
mod dra;
mod explain_pod;
#[cfg(test)]
mod gang_tests;
pub mod load;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;

use crate::cache::{Cache, Snapshot, workload_selectors};
use crate::config::Loaded;
use crate::explain::{Explanation, GroupRecord, group};
use crate::framework::{
    BindAction, Framework, FrameworkError, NominatedPods, PostFilterResult, ProfileRegistry,
    QueuedPodInfo, Registry,
};
use crate::group_preemption::{GroupPreemption, preempt_for_group, preempt_for_tree};
use crate::plugins;
use crate::pod_group_manager::PodGroupManager;
use crate::schedule_group::{
    GroupOutcome, PlacedMember, Route, route, schedule_group_and_bind,
    schedule_group_and_bind_recorded, scheduled_members,
};
use crate::schedule_one::{
    Decision, SchedulingAlgorithm, assume_decision, schedule_one, schedule_one_explained,
};
use crate::schedule_tree::schedule_tree_and_bind;
use crate::types::dra::taint_rules::DeviceTaintRuleInfo;
use crate::types::{PodInfo, PodKey, RESOURCE_CPU, RESOURCE_MEMORY};

pub use dra::PodDevice;
pub use explain_pod::{ExplainedPod, explain_pod};
pub use load::{
    COMPOSITE_POD_GROUPS_DUMP_COMMAND, ClusterObjects, DUMP_COMMAND, KINDS_READ, LoadError,
    POD_GROUPS_DUMP_COMMAND, TAINT_RULES_DUMP_COMMAND, describe_errors, load_paths, load_str,
};

/// How many times one pod is tried; only preemption (victims deleted) can change the
/// outcome of a retry in a static snapshot.
const MAX_ATTEMPTS: u32 = 3;

/// What happened to one pending pod.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodOutcome {
    pub pod: String,
    pub profile: Option<String>,
    pub priority: i32,
    #[serde(flatten)]
    pub result: PodResult,
    /// Objects the pod needs that the dump lacks (for pods that were not placed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing_from_dump: Vec<String>,
    /// Devices the pod's claims hold once it is placed (DRA), claim by claim.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<PodDevice>,
    /// The last attempt, explained (only for the pods asked about).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explanation: Option<Explanation>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "camelCase")]
pub enum PodResult {
    /// Bound to `node`, after evicting `preempted` (if any) from it.
    Scheduled {
        node: String,
        preempted: Vec<String>,
    },
    /// No node fits; `message` is the FailedScheduling event text.
    Unschedulable { message: String },
    /// Kept out of the queue by a PreEnqueue plugin (e.g. scheduling gates).
    Gated { message: String },
    /// Not ours: no profile has the pod's schedulerName.
    Ignored { reason: String },
    /// The API server would have rejected the pod (e.g. unknown PriorityClass).
    Rejected { reason: String },
    /// A plugin failed; kube-scheduler would retry with backoff.
    Error { message: String },
}

/// Requested vs allocatable per node after the simulation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeUsage {
    pub node: String,
    pub pods: i64,
    pub max_pods: i64,
    pub cpu_milli: i64,
    pub cpu_allocatable_milli: i64,
    pub memory: i64,
    pub memory_allocatable: i64,
    /// Extended resources (e.g. nvidia.com/gpu): name -> (requested, allocatable).
    pub extended: BTreeMap<String, (i64, i64)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub outcomes: Vec<PodOutcome>,
    pub nodes: Vec<NodeUsage>,
    /// Kinds in the input that play no part in scheduling.
    pub skipped_kinds: BTreeMap<String, usize>,
}

impl Report {
    pub fn scheduled(&self) -> usize {
        self.outcomes
            .iter()
            .filter(|o| matches!(o.result, PodResult::Scheduled { .. }))
            .count()
    }

    /// Where a pod went, for tests and tools: `Some(node)` when scheduled.
    pub fn node_of(&self, pod: &str) -> Option<&str> {
        self.outcomes
            .iter()
            .find(|o| o.pod == pod)
            .and_then(|o| match &o.result {
                PodResult::Scheduled { node, .. } => Some(node.as_str()),
                _ => None,
            })
    }

    pub fn outcome_of(&self, pod: &str) -> Option<&PodResult> {
        self.outcomes
            .iter()
            .find(|o| o.pod == pod)
            .map(|o| &o.result)
    }
}

/// Runs the simulation. `seed` makes score ties reproducible.
pub fn run(objects: &ClusterObjects, loaded: &Loaded, seed: u64) -> Result<Report, FrameworkError> {
    run_with_registry(objects, loaded, &Registry::in_tree(), seed)
}

/// [`run`], with each attempt of the pods `explain` selects (by `namespace/name`) explained
/// by the cycle that decides it; the last attempt's explanation goes with the outcome.
pub fn run_explained(
    objects: &ClusterObjects,
    loaded: &Loaded,
    seed: u64,
    explain: &dyn Fn(&str) -> bool,
) -> Result<Report, FrameworkError> {
    simulate(
        objects,
        loaded,
        &Registry::in_tree(),
        seed,
        Some(explain),
        &[],
    )
}

/// [`run`] (or [`run_explained`] with `explain`) calling `extenders` after Filter, after
/// Score and in preemption, as `run` would. Binding stays in memory: a binder extender is
/// never asked to bind (it would bind the real pod).
pub fn run_with_extenders(
    objects: &ClusterObjects,
    loaded: &Loaded,
    seed: u64,
    explain: Option<&dyn Fn(&str) -> bool>,
    extenders: &[Arc<dyn crate::framework::Extender>],
) -> Result<Report, FrameworkError> {
    simulate(
        objects,
        loaded,
        &Registry::in_tree(),
        seed,
        explain,
        extenders,
    )
}

/// [`run`] with a custom plugin registry (out-of-tree or stand-in plugins).
pub fn run_with_registry(
    objects: &ClusterObjects,
    loaded: &Loaded,
    registry: &Registry,
    seed: u64,
) -> Result<Report, FrameworkError> {
    simulate(objects, loaded, registry, seed, None, &[])
}

/// Schedules the dump; with `explain`, the attempts of the pods it selects are explained
/// (a pod of a gang by its group cycle, whose recording is off without it).
fn simulate(
    objects: &ClusterObjects,
    loaded: &Loaded,
    registry: &Registry,
    seed: u64,
    explain: Option<&dyn Fn(&str) -> bool>,
    extenders: &[Arc<dyn crate::framework::Extender>],
) -> Result<Report, FrameworkError> {
    simulate_keeping_state(objects, loaded, registry, seed, explain, extenders).map(|(r, _)| r)
}

/// What a simulation leaves behind for questions asked after it (`capacity`): the
/// frameworks, the cache with every placement assumed, the snapshot and the nominations.
pub(crate) struct AfterSimulation {
    pub profiles: ProfileRegistry,
    /// The PodGroups and their members, as the group plugins see them.
    pub groups: Arc<PodGroupManager>,
    pub alg: SchedulingAlgorithm,
    pub cache: Cache,
    pub snapshot: Snapshot,
    pub nominated: NominatedPods,
}

/// [`simulate`], also returning the state it ended in.
fn simulate_keeping_state(
    objects: &ClusterObjects,
    loaded: &Loaded,
    registry: &Registry,
    seed: u64,
    explain: Option<&dyn Fn(&str) -> bool>,
    extenders: &[Arc<dyn crate::framework::Extender>],
) -> Result<(Report, AfterSimulation), FrameworkError> {
    let explains = |key: &str| explain.is_some_and(|f| f(key));
    // GangScheduling reads the dump's PodGroups and pods.
    let groups = Arc::new(PodGroupManager::new());
    let mut registry = registry.clone();
    plugins::register_group_plugins(&mut registry, Arc::clone(&groups));
    let mut profiles = ProfileRegistry::new(&loaded.profiles, &registry)?;
    profiles.set_extenders(extenders);
    let global_pct = loaded.config.percentage_of_nodes_to_score.unwrap_or(0);
    let mut alg = SchedulingAlgorithm::new(global_pct, seed);

    let mut cache = cluster_cache(objects);
    dra::generate_group_claims(objects, &mut cache);

    let mut outcomes = Vec::new();
    let mut admitted: Vec<(usize, Arc<PodInfo>)> = Vec::new();
    for (i, raw) in objects.pods.iter().enumerate() {
        if is_terminal(raw) {
            continue;
        }
        match admit(raw, objects) {
            Ok(mut p) => {
                dra::generate_claims(&mut p, objects, &mut cache);
                admitted.push((i, Arc::new(PodInfo::from_pod(&p))));
            }
            Err(reason) => {
                outcomes.push(outcome(
                    &PodInfo::from_pod(raw),
                    None,
                    PodResult::Rejected { reason },
                ));
            }
        }
    }
    // Every group and every member first: a gang's quorum counts all of its pods.
    fill_pod_groups(&groups, objects, admitted.iter().map(|(_, p)| &**p));
    let mut pending: Vec<QueuedPodInfo> = Vec::new();
    let mut explanations: BTreeMap<String, Explanation> = BTreeMap::new();
    for (i, pod) in admitted {
        if pod.node_name.is_some() {
            if let Err(e) = cache.add_pod(Arc::clone(&pod)) {
                outcomes.push(outcome(
                    &pod,
                    None,
                    PodResult::Rejected {
                        reason: e.to_string(),
                    },
                ));
            }
            continue;
        }
        let Some(fw) = profiles.for_scheduler_name(&pod.scheduler_name) else {
            let reason = format!(
                "schedulerName {:?} is not one of this config's profiles; another scheduler owns the pod",
                pod.scheduler_name
            );
            outcomes.push(outcome(&pod, None, PodResult::Ignored { reason }));
            continue;
        };
        let gate = fw.run_pre_enqueue(&pod);
        if !gate.is_success() {
            let key = pod.key().to_string();
            if explains(&key)
                && let Some(e) = group::waiting(fw, &pod, &groups.read(), &gate, cache.node_count())
            {
                explanations.insert(key, e);
            }
            let message = gate.message();
            outcomes.push(outcome(
                &pod,
                Some(fw.profile_name()),
                PodResult::Gated { message },
            ));
            continue;
        }
        pending.push(QueuedPodInfo::new(pod, i as u64));
    }

    // All profiles share one QueueSort (validated), so any framework orders the queue.
    if let Some((_, fw)) = profiles.iter().next() {
        pending.sort_by(|a, b| {
            if fw.queue_sort_less(a, b) {
                std::cmp::Ordering::Less
            } else if fw.queue_sort_less(b, a) {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        });
    }

    let mut queue: VecDeque<QueuedPodInfo> = pending.into();
    let mut snapshot = Snapshot::new();
    let mut nominated = NominatedPods::new();
    let mut unschedulable: Vec<(QueuedPodInfo, String)> = Vec::new();
    // Pods each preemptor evicted, reported with its placement.
    let mut victims_of: BTreeMap<PodKey, Vec<String>> = BTreeMap::new();
    while let Some(mut q) = queue.pop_front() {
        q.attempts += 1;
        let fw = profiles
            .for_scheduler_name(&q.pod.scheduler_name)
            .expect("routed above");
        let group = match route(fw, &groups, &q.pod) {
            Route::Alone => None,
            Route::Gang(g) => Some(g),
            Route::Tree(root) => {
                let leaves = schedule_tree_and_bind(
                    fw,
                    &mut alg,
                    &groups,
                    &root,
                    q,
                    &mut queue,
                    &mut cache,
                    &mut snapshot,
                    &nominated,
                );
                // Nothing placed (and no error): preemption for the whole tree.
                let failed = leaves
                    .iter()
                    .all(|l| matches!(l.outcome, GroupOutcome::Unschedulable { error: false, .. }));
                let members: Vec<QueuedPodInfo> = leaves
                    .iter()
                    .flat_map(|l| match &l.outcome {
                        GroupOutcome::Unschedulable { waiting, .. } => waiting.as_slice(),
                        GroupOutcome::Placed { .. } => &[],
                    })
                    .map(|w| w.queued.clone())
                    .collect();
                let decision = (failed
                    && fw.has_post_filter_plugins()
                    && members.iter().all(|m| m.attempts < MAX_ATTEMPTS))
                .then(|| {
                    preempt_for_tree(
                        fw,
                        &mut alg,
                        &root,
                        &members,
                        &groups.read(),
                        &mut cache,
                        &mut snapshot,
                        &nominated,
                    )
                });
                if let Some(decision) = &decision
                    && requeue_after_preemption(
                        decision,
                        members,
                        (&mut cache, &groups, &mut nominated),
                        &mut victims_of,
                        &mut queue,
                        &mut unschedulable,
                    )
                {
                    continue;
                }
                for leaf in leaves {
                    match leaf.outcome {
                        GroupOutcome::Placed { placed, waiting } => {
                            for p in placed {
                                nominated.remove(p.pod.key());
                                outcomes.push(member_bound(fw, p, &mut victims_of, &mut cache));
                            }
                            unschedulable
                                .extend(waiting.into_iter().map(|w| (w.queued, w.message)));
                        }
                        GroupOutcome::Unschedulable { waiting, .. } => {
                            unschedulable
                                .extend(waiting.into_iter().map(|w| (w.queued, w.message)));
                        }
                    }
                }
                continue;
            }
            Route::Wait(s) => {
                let key = q.pod.key().to_string();
                if explains(&key)
                    && let Some(e) =
                        group::waiting(fw, &q.pod, &groups.read(), &s, cache.node_count())
                {
                    explanations.insert(key, e);
                }
                unschedulable.push((q, s.message()));
                continue;
            }
        };
        if let Some(group) = group {
            let outcome_of = match explain {
                None => schedule_group_and_bind(
                    fw,
                    &mut alg,
                    &groups,
                    &group,
                    q,
                    &mut queue,
                    &mut cache,
                    &mut snapshot,
                    &nominated,
                ),
                Some(explain) => {
                    let mut rec = GroupRecord::new(explain);
                    let outcome = schedule_group_and_bind_recorded(
                        fw,
                        &mut alg,
                        &groups,
                        &group,
                        q,
                        &mut queue,
                        &mut cache,
                        &mut snapshot,
                        &nominated,
                        &mut rec,
                    );
                    for e in rec.explanations(fw, &group, &outcome) {
                        explanations.insert(e.pod.clone(), e);
                    }
                    outcome
                }
            };
            let waiting = match outcome_of {
                GroupOutcome::Placed { placed, waiting } => {
                    for p in placed {
                        nominated.remove(p.pod.key());
                        outcomes.push(member_bound(fw, p, &mut victims_of, &mut cache));
                    }
                    waiting
                }
                GroupOutcome::Unschedulable {
                    waiting,
                    error: false,
                    ..
                } if fw.has_post_filter_plugins()
                    && waiting.iter().all(|w| w.queued.attempts < MAX_ATTEMPTS) =>
                {
                    // Workload-aware preemption: evict for the whole gang or not at all.
                    let members: Vec<QueuedPodInfo> =
                        waiting.iter().map(|w| w.queued.clone()).collect();
                    let before = scheduled_members(&groups.read(), &group.key, &cache);
                    let decision = preempt_for_group(
                        fw,
                        &mut alg,
                        &group,
                        &before,
                        &members,
                        &groups.read(),
                        &mut cache,
                        &mut snapshot,
                        &nominated,
                    );
                    if !requeue_after_preemption(
                        &decision,
                        members,
                        (&mut cache, &groups, &mut nominated),
                        &mut victims_of,
                        &mut queue,
                        &mut unschedulable,
                    ) {
                        unschedulable.extend(waiting.into_iter().map(|w| (w.queued, w.message)));
                    }
                    continue;
                }
                GroupOutcome::Unschedulable { waiting, .. } => waiting,
            };
            unschedulable.extend(waiting.into_iter().map(|w| (w.queued, w.message)));
            continue;
        }
        cache.update_snapshot(&mut snapshot);
        let key = q.pod.key().to_string();
        let decision = if explains(&key) {
            let mut e = Explanation::new(&key, fw.profile_name());
            let d = schedule_one_explained(fw, &mut alg, &q.pod, &snapshot, &nominated, &mut e);
            // A pod of a basic group (or of a profile without gangs) is scheduled alone.
            e.group = group::pod_by_pod(fw, &q.pod, &groups.read());
            explanations.insert(key, e);
            d
        } else {
            schedule_one(fw, &mut alg, &q.pod, &snapshot, &nominated)
        };
        match decision {
            Decision::Bind {
                node,
                pod,
                action,
                state,
                ..
            } => {
                let BindAction::Binding { .. } = action;
                nominated.remove(pod.key());
                if let Err(e) = assume_decision(&mut cache, Arc::clone(&pod), &node, &state) {
                    outcomes.push(outcome(
                        &pod,
                        Some(fw.profile_name()),
                        PodResult::Error {
                            message: e.to_string(),
                        },
                    ));
                    continue;
                }
                cache.finish_binding(pod.key());
                fw.run_post_bind(&state, &pod, &node);
                let mut o = outcome(
                    &pod,
                    Some(fw.profile_name()),
                    PodResult::Scheduled {
                        node,
                        preempted: victims_of.remove(pod.key()).unwrap_or_default(),
                    },
                );
                o.devices = dra::pod_devices(&pod, &state, cache.dra_mut());
                outcomes.push(o);
            }
            Decision::Unschedulable {
                message,
                nomination,
                ..
            } => {
                let Some(nomination) = nomination else {
                    unschedulable.push((q, message));
                    continue;
                };
                let PostFilterResult {
                    nominated_node_name,
                    victims,
                    nominations_to_clear,
                } = nomination;
                let Some(node) = nominated_node_name else {
                    // Preemption found nothing: the pod loses any earlier nomination.
                    nominated.remove(q.pod.key());
                    let mut q = q;
                    clear_nomination(&mut q);
                    unschedulable.push((q, message));
                    continue;
                };
                if q.attempts < MAX_ATTEMPTS {
                    for v in &victims {
                        let _ = cache.remove_pod(v);
                    }
                    // Lower-priority pods nominated to that node may not fit any more.
                    for key in &nominations_to_clear {
                        nominated.remove(key);
                        let entries = queue
                            .iter_mut()
                            .chain(unschedulable.iter_mut().map(|(u, _)| u));
                        for e in entries.filter(|e| e.pod.key() == key) {
                            clear_nomination(e);
                        }
                    }
                    victims_of
                        .entry(q.pod.key().clone())
                        .or_default()
                        .extend(victims.iter().map(|v| v.to_string()));
                    let mut retry = q.clone();
                    let mut p = PodInfo::clone(&retry.pod);
                    p.nominated_node_name = Some(node.clone());
                    retry.pod = Arc::new(p);
                    nominated.add(Arc::clone(&retry.pod), &node);
                    queue.push_front(retry);
                    // Deleting pods can make earlier failures fit: requeue them, as pod-delete
                    // events do upstream.
                    for (u, _) in unschedulable.drain(..) {
                        queue.push_back(u);
                    }
                    continue;
                }
                unschedulable.push((q, message));
            }
            Decision::Error { message } => {
                let pod = Arc::clone(&q.pod);
                outcomes.push(outcome(
                    &pod,
                    Some(fw.profile_name()),
                    PodResult::Error { message },
                ));
            }
        }
    }
    for (q, message) in unschedulable {
        let fw = profiles
            .for_scheduler_name(&q.pod.scheduler_name)
            .map(|f| f.profile_name().to_string());
        outcomes.push(PodOutcome {
            pod: q.pod.key().to_string(),
            profile: fw,
            priority: q.pod.priority,
            result: PodResult::Unschedulable { message },
            missing_from_dump: Vec::new(),
            devices: Vec::new(),
            explanation: None,
        });
    }
    for o in &mut outcomes {
        o.explanation = explanations.remove(&o.pod);
        if matches!(
            o.result,
            PodResult::Unschedulable { .. } | PodResult::Error { .. } | PodResult::Gated { .. }
        ) && let Some(raw) = objects.pods.iter().find(|p| {
            format!(
                "{}/{}",
                p.metadata.namespace.as_deref().unwrap_or("default"),
                p.metadata.name.as_deref().unwrap_or("")
            ) == o.pod
        }) {
            o.missing_from_dump = missing_from_dump(&PodInfo::from_pod(raw), objects);
        }
    }

    cache.update_snapshot(&mut snapshot);
    let nodes = nodes_usage(&snapshot);
    let report = Report {
        outcomes,
        nodes,
        skipped_kinds: objects.skipped_kinds.clone(),
    };
    let state = AfterSimulation {
        profiles,
        groups,
        alg,
        cache,
        snapshot,
        nominated,
    };
    Ok((report, state))
}

/// The dump's PodGroups and `pods` as their members, for the group plugins.
pub(crate) fn pod_groups_of<'a>(
    objects: &ClusterObjects,
    pods: impl Iterator<Item = &'a PodInfo>,
) -> Arc<PodGroupManager> {
    let groups = Arc::new(PodGroupManager::new());
    fill_pod_groups(&groups, objects, pods);
    groups
}

/// The outcome of a gang's (or a tree's) member bound by its group cycle, with the pods
/// preempted for it and the devices its claims got.
fn member_bound(
    fw: &Framework,
    p: PlacedMember,
    victims_of: &mut BTreeMap<PodKey, Vec<String>>,
    cache: &mut Cache,
) -> PodOutcome {
    let mut o = outcome(
        &p.pod,
        Some(fw.profile_name()),
        PodResult::Scheduled {
            node: p.node,
            preempted: victims_of.remove(p.pod.key()).unwrap_or_default(),
        },
    );
    o.devices = dra::pod_devices(&p.pod, &p.state, cache.dra_mut());
    o
}

/// Applies what workload-aware preemption decided for a gang or a tree, when it chose
/// victims (returns false otherwise, touching nothing): evicts them (reported with the
/// first member's placement), then queues the members again first, each nominated where
/// preemption placed it, and every earlier failure after them, as pod deletions do upstream.
fn requeue_after_preemption(
    decision: &GroupPreemption,
    members: Vec<QueuedPodInfo>,
    (cache, groups, nominated): (&mut Cache, &PodGroupManager, &mut NominatedPods),
    victims_of: &mut BTreeMap<PodKey, Vec<String>>,
    queue: &mut VecDeque<QueuedPodInfo>,
    unschedulable: &mut Vec<(QueuedPodInfo, String)>,
) -> bool {
    let GroupPreemption::Preempt {
        victims,
        nominations,
        ..
    } = decision
    else {
        return false;
    };
    for v in victims {
        if let Ok(gone) = cache.remove_pod(v) {
            groups.write().remove_pod(&gone);
        }
    }
    if let Some(first) = members.first() {
        victims_of
            .entry(first.pod.key().clone())
            .or_default()
            .extend(victims.iter().map(|v| v.to_string()));
    }
    for mut m in members.into_iter().rev() {
        if let Some((_, node)) = nominations.iter().find(|(k, _)| k == m.pod.key()) {
            let mut p = PodInfo::clone(&m.pod);
            p.nominated_node_name = Some(node.clone());
            m.pod = Arc::new(p);
            nominated.add(Arc::clone(&m.pod), node);
        }
        queue.push_front(m);
    }
    for (u, _) in unschedulable.drain(..) {
        queue.push_back(u);
    }
    true
}

fn fill_pod_groups<'a>(
    groups: &PodGroupManager,
    objects: &ClusterObjects,
    pods: impl Iterator<Item = &'a PodInfo>,
) {
    let mut g = groups.write();
    // A dump holds parents only if its cluster turned CompositePodGroup on (the API server
    // drops the field otherwise), so trees are honoured whenever they are there.
    g.set_composite_enabled(true);
    for info in &objects.pod_groups {
        g.upsert(info.clone());
    }
    for info in &objects.composite_pod_groups {
        g.upsert_composite(info.clone());
    }
    for pod in pods {
        g.add_pod(pod);
    }
}

/// A cache holding every object of the dump but its pods.
fn cluster_cache(objects: &ClusterObjects) -> Cache {
    let mut cache = Cache::new();
    // Before any claim is resolved: a pod's entry matching its group's is the group's claim.
    for g in &objects.pod_groups {
        cache.dra_mut().update_pod_group(g);
    }
    for n in &objects.nodes {
        cache.add_node(n);
    }
    for ns in namespaces(objects) {
        cache.add_namespace(&ns);
    }
    let workloads = objects
        .services
        .iter()
        .map(workload_selectors::service_entry)
        .chain(
            objects
                .replica_sets
                .iter()
                .map(workload_selectors::replica_set_entry),
        )
        .chain(
            objects
                .stateful_sets
                .iter()
                .map(workload_selectors::stateful_set_entry),
        )
        .chain(
            objects
                .replication_controllers
                .iter()
                .map(workload_selectors::replication_controller_entry),
        );
    for w in workloads {
        cache.upsert_workload_selector(w.kind, &w.namespace, &w.name, w.selector);
    }
    for rc in &objects.runtime_classes {
        cache.add_runtime_class(rc);
    }
    for pdb in &objects.pdbs {
        cache.add_pdb(pdb);
    }
    objects.pvcs.iter().for_each(|o| cache.add_pvc(o));
    objects.pvs.iter().for_each(|o| cache.add_pv(o));
    objects
        .storage_classes
        .iter()
        .for_each(|o| cache.add_storage_class(o));
    objects.csi_nodes.iter().for_each(|o| cache.add_csi_node(o));
    objects
        .csi_drivers
        .iter()
        .for_each(|o| cache.add_csi_driver(o));
    objects
        .storage_capacities
        .iter()
        .for_each(|o| cache.add_storage_capacity(o));
    objects
        .volume_attachments
        .iter()
        .for_each(|o| cache.add_volume_attachment(o));
    // A dump is read as from a 1.34+ cluster: DRA is served (a pod's missing claims are
    // reported as missing from the dump).
    cache.set_dra_api_served(true);
    let dra = cache.dra_mut();
    objects
        .device_classes
        .iter()
        .for_each(|o| dra.update_class(o));
    objects
        .resource_slices
        .iter()
        .for_each(|o| dra.update_slice(o));
    objects
        .resource_claims
        .iter()
        .for_each(|o| dra.update_claim(o));
    for r in &objects.device_taint_rules {
        dra.update_taint_rule(DeviceTaintRuleInfo::from_v1(r));
    }
    cache
}

/// The dump's namespaces plus every namespace its objects name, each with the
/// `kubernetes.io/metadata.name` label the API server sets on every namespace (namespace
/// selectors match on it).
fn namespaces(objects: &ClusterObjects) -> Vec<Namespace> {
    let mut all: BTreeMap<String, Namespace> = BTreeMap::new();
    for ns in &objects.namespaces {
        let name = ns.metadata.name.clone().unwrap_or_default();
        all.insert(name, ns.clone());
    }
    let used = objects
        .pods
        .iter()
        .map(|p| &p.metadata)
        .chain(objects.pdbs.iter().map(|p| &p.metadata))
        .chain(objects.pvcs.iter().map(|p| &p.metadata))
        .chain(objects.services.iter().map(|p| &p.metadata))
        .chain(objects.replica_sets.iter().map(|p| &p.metadata))
        .chain(objects.stateful_sets.iter().map(|p| &p.metadata))
        .chain(objects.replication_controllers.iter().map(|p| &p.metadata))
        .map(|m| m.namespace.clone().unwrap_or_else(|| "default".to_string()));
    for name in used {
        all.entry(name.clone()).or_insert_with(|| Namespace {
            metadata: ObjectMeta {
                name: Some(name),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        });
    }
    for (name, ns) in &mut all {
        ns.metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(NAMESPACE_NAME_LABEL.to_string(), name.clone());
    }
    all.into_values().collect()
}

/// The label the API server puts on every namespace, with the namespace's name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// What the pod refers to that the dump does not hold, as `Kind namespace/name` with the
/// kubectl resource to add to the dump.
fn missing_from_dump(pod: &PodInfo, objects: &ClusterObjects) -> Vec<String> {
    let mut out = Vec::new();
    let ns = pod.namespace();
    for claim in &pod.pvc_names {
        let pvc = objects.pvcs.iter().find(|c| {
            c.metadata.name.as_deref() == Some(claim.as_str())
                && c.metadata.namespace.as_deref().unwrap_or("default") == ns
        });
        let Some(pvc) = pvc else {
            out.push(format!(
                "PersistentVolumeClaim {ns}/{claim} (dump persistentvolumeclaims)"
            ));
            continue;
        };
        let spec = pvc.spec.as_ref();
        if let Some(pv) = spec.and_then(|s| s.volume_name.as_deref())
            && !objects
                .pvs
                .iter()
                .any(|v| v.metadata.name.as_deref() == Some(pv))
        {
            out.push(format!("PersistentVolume {pv} (dump persistentvolumes)"));
        }
        if let Some(sc) = spec.and_then(|s| s.storage_class_name.as_deref())
            && !sc.is_empty()
            && !objects
                .storage_classes
                .iter()
                .any(|c| c.metadata.name.as_deref() == Some(sc))
        {
            out.push(format!("StorageClass {sc} (dump storageclasses)"));
        }
    }
    dra::missing_from_dump(pod, objects, &mut out);
    if let Some(rc) = pod.runtime_class_name.as_deref()
        && !objects
            .runtime_classes
            .iter()
            .any(|c| c.metadata.name.as_deref() == Some(rc))
    {
        out.push(format!("RuntimeClass {rc} (dump runtimeclasses)"));
    }
    out.dedup();
    out
}

fn clear_nomination(q: &mut QueuedPodInfo) {
    if q.pod.nominated_node_name.is_some() {
        let mut p = PodInfo::clone(&q.pod);
        p.nominated_node_name = None;
        q.pod = Arc::new(p);
    }
}

fn outcome(pod: &PodInfo, profile: Option<&str>, result: PodResult) -> PodOutcome {
    PodOutcome {
        pod: pod.key().to_string(),
        profile: profile.map(str::to_string),
        priority: pod.priority,
        result,
        missing_from_dump: Vec::new(),
        devices: Vec::new(),
        explanation: None,
    }
}

/// Every node's usage in `snapshot`, sorted by name.
pub(crate) fn nodes_usage(snapshot: &Snapshot) -> Vec<NodeUsage> {
    let mut nodes: Vec<NodeUsage> = snapshot
        .node_infos()
        .iter()
        .map(|n| node_usage(n))
        .collect();
    nodes.sort_by(|a, b| a.node.cmp(&b.node));
    nodes
}

/// Requested vs allocatable per node as the dump has it: only its bound pods, before
/// anything is scheduled (the "before" of a report).
pub fn usage_before(objects: &ClusterObjects) -> Vec<NodeUsage> {
    let mut cache = cluster_cache(objects);
    for raw in &objects.pods {
        let bound = raw.spec.as_ref().is_some_and(|s| s.node_name.is_some());
        if bound && !is_terminal(raw) {
            // A pod the dump holds twice, or on an absent node, is reported by `simulate`.
            let _ = cache.add_pod(Arc::new(PodInfo::from_pod(raw)));
        }
    }
    let mut snapshot = Snapshot::new();
    cache.update_snapshot(&mut snapshot);
    nodes_usage(&snapshot)
}

fn node_usage(n: &crate::types::NodeInfo) -> NodeUsage {
    let extended = n
        .allocatable
        .scalar
        .iter()
        .map(|(name, alloc)| (name.to_string(), (n.requested.get(name), *alloc)))
        .collect();
    NodeUsage {
        node: n.name.clone(),
        pods: n.pods.len() as i64,
        max_pods: n.allocatable.allowed_pod_number,
        cpu_milli: n.requested.get(RESOURCE_CPU),
        cpu_allocatable_milli: n.allocatable.get(RESOURCE_CPU),
        memory: n.requested.get(RESOURCE_MEMORY),
        memory_allocatable: n.allocatable.get(RESOURCE_MEMORY),
        extended,
    }
}

fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// What the API server's Priority admission does: resolve `priorityClassName` (or the global
/// default class) into `spec.priority` and `spec.preemptionPolicy`.
fn admit(pod: &Pod, objects: &ClusterObjects) -> Result<Pod, String> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(pod.clone());
    };
    if spec.priority.is_some() {
        return Ok(pod.clone());
    }
    let class = match spec.priority_class_name.as_deref() {
        Some(name) => Some(
            objects
                .priority_classes
                .iter()
                .find(|c| c.metadata.name.as_deref() == Some(name))
                .ok_or_else(|| format!("no PriorityClass with name {name} was found"))?,
        ),
        None => objects
            .priority_classes
            .iter()
            .find(|c| c.global_default == Some(true)),
    };
    let Some(class) = class else {
        return Ok(pod.clone());
    };
    let mut p = pod.clone();
    let s = p.spec.as_mut().expect("checked");
    s.priority = Some(class.value.unwrap_or(0));
    if s.preemption_policy.is_none() {
        s.preemption_policy.clone_from(&class.preemption_policy);
    }
    Ok(p)
}

/// The built-in example's cluster: the scheduler model's case study (9 CPU nodes, 6 GPU
/// nodes) with RuntimeClasses, as YAML.
pub const CASE_STUDY_CLUSTER: &str = include_str!("case_study/cluster.yaml");
/// The built-in example's scheduler config (default + bin-packing profiles).
pub const CASE_STUDY_CONFIG: &str = include_str!("case_study/config.yaml");

/// Loads the built-in example.
pub fn case_study() -> (ClusterObjects, Loaded) {
    let objects =
        load_str(CASE_STUDY_CLUSTER, "<built-in case study>").expect("built-in cluster loads");
    let loaded = crate::config::load_str(CASE_STUDY_CONFIG, "<built-in config>")
        .expect("built-in config loads");
    (objects, loaded)
}
