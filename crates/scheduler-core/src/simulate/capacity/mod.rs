//! `simulate --pod-template`: how many more copies of a pod fit (kubernetes-sigs/
//! cluster-capacity's question, answered with ferrosched's decisions).
//!
//! ```text
//! dump + config --simulate--> cache with the pending pods placed
//!                                  |
//!     template --copy i--> schedule_one (no PostFilter) --Bind--> assume, next copy
//!                                  |
//!                                  +--Unschedulable--> stop: its FailedScheduling text
//! ```
//!
//! The dump's own pending pods are simulated first, exactly as `simulate` does; then copies
//! of the template are placed one after another, each a fresh pod (`<name>-<i>`, its own
//! uid) in the profile its schedulerName selects, on the same cache, snapshot and
//! framework (only the nodes a copy changed are copied into the snapshot; identical copies
//! reuse the previous one's scored node list through opportunistic batching). Copies never
//! preempt: like cluster-capacity, the answer is what fits beside what runs now.

pub mod add_nodes;
pub mod compression;
pub mod drain;
mod template;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod whatif_tests;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;

use super::{AfterSimulation, ClusterObjects, NAMESPACE_NAME_LABEL, admit, dra};
use crate::cache::Cache;
use crate::config::Loaded;
use crate::framework::{Extender, Framework, FrameworkError, Registry};
use crate::schedule_one::{Decision, assume_decision, schedule_one_without_preemption};
use crate::types::PodInfo;
use crate::types::pod_group::PodGroupInfo;

pub use template::{PodTemplate, TEMPLATE_KINDS, TemplateError, load_template, read_template};

/// The answer: how many copies were placed, where, and what stopped the next one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReport {
    pub template: TemplateSummary,
    /// With a gang template: the PodGroup copied and how many pods each copy has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gang: Option<GangSummary>,
    /// With a gang template: each gang placed, with where its pods went.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gangs: Vec<GangCopy>,
    /// Copies placed (whole gangs, with a gang template).
    pub placed: usize,
    /// `--max`, when given.
    pub max: Option<usize>,
    /// Why no further copy was placed.
    pub stopped_by: Stop,
    /// Nodes that got at least one copy, by name, with how many.
    pub nodes: Vec<NodeCopies>,
    /// The dump's own pending pods, simulated before the first copy.
    pub pending: PendingSummary,
}

/// Which pod was copied and by which profile it was scheduled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateSummary {
    pub kind: String,
    pub name: String,
    pub namespace: String,
    pub profile: String,
}

/// What stopped the copies.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "reason")]
pub enum Stop {
    /// The next copy fits nowhere; `message` is its FailedScheduling text
    /// (`0/N nodes are available: ...`).
    Unschedulable { message: String },
    /// `--max` copies were placed; more might fit.
    MaxReached,
    /// A PreEnqueue plugin keeps the copies out of the queue (e.g. scheduling gates).
    Gated { message: String },
    /// A plugin failed on the next copy (kube-scheduler would retry it).
    Error { message: String },
}

/// The gang a template copies.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GangSummary {
    /// The template's PodGroup name; copies are `<name>-0`, `<name>-1`, ...
    pub pod_group: String,
    /// Pods per copy: the gang's `minCount`.
    pub min_count: u32,
}

/// One whole gang placed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GangCopy {
    /// The copy's PodGroup (`namespace/name`).
    pub pod_group: String,
    /// `(pod, node)` for each of its pods.
    pub members: Vec<(String, String)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeCopies {
    pub node: String,
    pub copies: usize,
}

/// Requested vs allocatable per node before and after a what-if answer, for reports
/// (`-o html`); not part of the JSON answer. Both lists are sorted by node name. A node
/// removed by the question (compression) is missing from `after`; a node it added is
/// missing from `before`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodesBeforeAfter {
    pub before: Vec<super::NodeUsage>,
    pub after: Vec<super::NodeUsage>,
}

/// What became of the dump's pending pods before the copies.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingSummary {
    pub scheduled: usize,
    pub total: usize,
}

/// Why the question could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum CapacityError {
    #[error(transparent)]
    Framework(#[from] FrameworkError),
    #[error(transparent)]
    Template(#[from] TemplateError),
}

/// Simulates the dump, then places copies of `template` until one does not fit or `max`
/// are placed. `seed` breaks score ties as in [`super::run`]. The template is checked
/// against the dump and the config first, so a mistake in it costs no simulation.
pub fn how_many_fit(
    objects: &ClusterObjects,
    loaded: &Loaded,
    seed: u64,
    template: &PodTemplate,
    max: Option<usize>,
    extenders: &[Arc<dyn Extender>],
) -> Result<CapacityReport, CapacityError> {
    how_many_fit_detailed(objects, loaded, seed, template, max, extenders).map(|(r, _)| r)
}

/// What [`how_many_fit_detailed`] also tells, for reports (`-o html`, `--compare-config`):
/// the dump's own simulation, every copy's node, and the nodes' usage after the copies.
#[derive(Clone, Debug)]
pub struct CapacityDetails {
    /// The plain `simulate` of the dump's pending pods, before any copy.
    pub simulation: super::Report,
    /// `(copy, node)` in the order the copies were placed.
    pub copies: Vec<(String, String)>,
    /// Requested vs allocatable per node once the copies are placed, sorted by name.
    pub nodes_after: Vec<super::NodeUsage>,
}

/// [`how_many_fit`], with the details behind the answer.
pub fn how_many_fit_detailed(
    objects: &ClusterObjects,
    loaded: &Loaded,
    seed: u64,
    template: &PodTemplate,
    max: Option<usize>,
    extenders: &[Arc<dyn Extender>],
) -> Result<(CapacityReport, CapacityDetails), CapacityError> {
    let (pod, base) = admit_template(objects, loaded, template)?;
    let (report, state) = super::simulate_keeping_state(
        objects,
        loaded,
        &Registry::in_tree(),
        seed,
        None,
        extenders,
    )?;
    let AfterSimulation {
        profiles,
        groups,
        mut alg,
        mut cache,
        mut snapshot,
        nominated,
    } = state;
    let fw = profiles
        .for_scheduler_name(&base.scheduler_name)
        .expect("admit_template checked the profile");
    add_namespace_if_missing(&mut cache, objects, &template.namespace);
    let mut copies = Copies {
        claims: &template.claim_templates,
        pod: &pod,
        base: &base,
        objects,
        taken: taken_names(objects, &template.namespace),
        next: 0,
    };
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    let mut placed = 0;
    let mut copy_nodes: Vec<(String, String)> = Vec::new();
    let mut gangs: Vec<GangCopy> = Vec::new();
    let gate = if template.gang.is_some() {
        crate::framework::Status::success()
    } else {
        fw.run_pre_enqueue(&base)
    };
    let stopped_by = if let Some(group) = &template.gang {
        let mut ctx = GangContext {
            fw,
            alg: &mut alg,
            groups: &groups,
            cache: &mut cache,
            snapshot: &mut snapshot,
            nominated: &nominated,
        };
        let mut names = GangNames::new(objects, group, &template.namespace);
        loop {
            if max.is_some_and(|m| placed >= m) {
                break Stop::MaxReached;
            }
            match place_gang(&mut ctx, &pod, group, &mut names, objects) {
                Ok(copy) => {
                    for (member, node) in &copy.members {
                        copy_nodes.push((member.clone(), node.clone()));
                        *per_node.entry(node.clone()).or_default() += 1;
                    }
                    gangs.push(copy);
                    placed += 1;
                }
                Err(stop) => break stop,
            }
        }
    } else if gate.is_success() {
        let mut place = |copy: &Arc<PodInfo>, cache: &mut Cache| {
            cache.update_snapshot(&mut snapshot);
            let decision =
                schedule_one_without_preemption(fw, &mut alg, copy, &snapshot, &nominated);
            bind_copy(fw, decision, cache)
        };
        loop {
            if max.is_some_and(|m| placed >= m) {
                break Stop::MaxReached;
            }
            let copy = Arc::new(copies.next(&mut cache));
            match place(&copy, &mut cache) {
                Ok(node) => {
                    copy_nodes.push((copy.key().to_string(), node.clone()));
                    *per_node.entry(node).or_default() += 1;
                    placed += 1;
                }
                Err(stop) => break stop,
            }
        }
    } else {
        Stop::Gated {
            message: gate.message(),
        }
    };
    cache.update_snapshot(&mut snapshot);
    let nodes_after = super::nodes_usage(&snapshot);
    let answer = CapacityReport {
        template: TemplateSummary {
            kind: template.kind.clone(),
            name: template.name.clone(),
            namespace: template.namespace.clone(),
            profile: fw.profile_name().to_string(),
        },
        gang: template.gang.as_ref().map(|g| GangSummary {
            pod_group: g.key.name.clone(),
            min_count: g.min_count(),
        }),
        gangs,
        placed,
        max,
        stopped_by,
        nodes: per_node
            .into_iter()
            .map(|(node, copies)| NodeCopies { node, copies })
            .collect(),
        pending: PendingSummary {
            scheduled: report.scheduled(),
            total: report.outcomes.len(),
        },
    };
    let details = CapacityDetails {
        simulation: report,
        copies: copy_nodes,
        nodes_after,
    };
    Ok((answer, details))
}

/// The template's pod as the API server would admit it (its PriorityClass resolved) and
/// its compact view; refused, naming the field, when no profile of the config would
/// schedule it, its PriorityClass is unknown, or it belongs to a gang.
fn admit_template(
    objects: &ClusterObjects,
    loaded: &Loaded,
    template: &PodTemplate,
) -> Result<(Pod, PodInfo), TemplateError> {
    let prefix = if template.kind == "Pod" {
        ""
    } else {
        "spec.template."
    };
    let error = |field: &str, message: String, fix: String| TemplateError {
        source: template.source.clone(),
        line: None,
        field: Some(format!("{prefix}{field}")),
        message,
        fix,
    };
    let pod = admit(&template.pod, objects).map_err(|reason| {
        error(
            "spec.priorityClassName",
            reason,
            "name a PriorityClass the dump holds (dump priorityclasses), or remove the field"
                .into(),
        )
    })?;
    let base = PodInfo::from_pod(&pod);
    let names: Vec<&str> = loaded
        .profiles
        .iter()
        .map(|p| p.scheduler_name.as_str())
        .collect();
    if !names.contains(&base.scheduler_name.as_str()) {
        return Err(error(
            "spec.schedulerName",
            format!(
                "{:?} is not one of this config's profiles; another scheduler would place the copies",
                base.scheduler_name
            ),
            format!("use one of {}", names.join(", ")),
        ));
    }
    if let Some(g) = base.pod_group.as_deref()
        && template.gang.is_none()
    {
        return Err(error(
            "spec.schedulingGroup.podGroupName",
            format!(
                "the pods name PodGroup {:?}, which the file does not hold",
                g.name
            ),
            "to count whole gangs, put that PodGroup in the same file (multi-document YAML: the PodGroup, then this template); to count single pods, remove spec.schedulingGroup".into(),
        ));
    }
    Ok((pod, base))
}

/// The template's namespace, as the API server would have it, when the dump lacks it
/// (namespace selectors of the cluster's pods may match it).
fn add_namespace_if_missing(cache: &mut Cache, objects: &ClusterObjects, namespace: &str) {
    if objects
        .namespaces
        .iter()
        .any(|n| n.metadata.name.as_deref() == Some(namespace))
    {
        return;
    }
    cache.add_namespace(&Namespace {
        metadata: ObjectMeta {
            name: Some(namespace.to_string()),
            labels: Some(BTreeMap::from([(
                NAMESPACE_NAME_LABEL.to_string(),
                namespace.to_string(),
            )])),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    });
}

/// The names the dump's pods have in `namespace`: copies skip them (the built-in example's
/// `web-1` is not a copy of a Deployment `web`).
fn taken_names<'a>(objects: &'a ClusterObjects, namespace: &str) -> BTreeSet<&'a str> {
    objects
        .pods
        .iter()
        .filter(|p| p.metadata.namespace.as_deref().unwrap_or("default") == namespace)
        .filter_map(|p| p.metadata.name.as_deref())
        .collect()
}

/// Assumes a copy the cycle placed, as `simulate` does a pending pod: its node, or what
/// stops the copies.
fn bind_copy(fw: &Framework, decision: Decision, cache: &mut Cache) -> Result<String, Stop> {
    match decision {
        Decision::Bind {
            node, pod, state, ..
        } => {
            assume_decision(cache, Arc::clone(&pod), &node, &state).map_err(|e| Stop::Error {
                message: e.to_string(),
            })?;
            cache.finish_binding(pod.key());
            fw.run_post_bind(&state, &pod, &node);
            Ok(node)
        }
        Decision::Unschedulable { message, .. } => Err(Stop::Unschedulable { message }),
        Decision::Error { message } => Err(Stop::Error { message }),
    }
}

/// Makes the copies, one after another.
struct Copies<'a> {
    /// A StatefulSet's volumeClaimTemplates.
    claims: &'a [k8s_openapi::api::core::v1::PersistentVolumeClaim],
    /// The admitted template.
    pod: &'a Pod,
    base: &'a PodInfo,
    objects: &'a ClusterObjects,
    taken: BTreeSet<&'a str>,
    next: usize,
}

impl Copies<'_> {
    /// The next copy, `<name>-<i>` with the lowest `i` not used yet and not a dump pod's.
    fn next(&mut self, cache: &mut Cache) -> PodInfo {
        loop {
            let i = self.next;
            self.next += 1;
            let name = format!("{}-{i}", self.base.name());
            if self.taken.contains(name.as_str()) {
                continue;
            }
            if self.claims.is_empty() {
                return copy_of(self.pod, self.base, name, self.objects, cache, false);
            }
            let mut pod = self.pod.clone();
            add_claims(&mut pod, self.claims, &name, self.objects, cache);
            return copy_of(&pod, self.base, name, self.objects, cache, true);
        }
    }
}

/// The copy named `name`, with a uid of its own. A pod with DRA claims is made again from
/// the API object (each copy's claims are generated from their templates); any other is
/// the compact view cloned, renamed.
fn copy_of(
    pod: &Pod,
    base: &PodInfo,
    name: String,
    objects: &ClusterObjects,
    cache: &mut Cache,
    fresh: bool,
) -> PodInfo {
    let uid = format!("ferrosched-capacity-{}-{name}", base.namespace());
    if fresh || !base.resource_claims.is_empty() {
        let mut p = pod.clone();
        p.metadata.name = Some(name);
        p.metadata.uid = Some(uid);
        dra::generate_claims(&mut p, objects, cache);
        return PodInfo::from_pod(&p);
    }
    let mut info = base.clone();
    info.key.name = name;
    info.uid = uid;
    info
}

/// What a gang copy is scheduled with.
struct GangContext<'a> {
    fw: &'a Framework,
    alg: &'a mut crate::schedule_one::SchedulingAlgorithm,
    groups: &'a crate::pod_group_manager::PodGroupManager,
    cache: &'a mut Cache,
    snapshot: &'a mut crate::cache::Snapshot,
    nominated: &'a crate::framework::NominatedPods,
}

/// Names of the gang copies: `<group>-<i>` for the PodGroup, skipping the dump's PodGroups
/// and the names its pods have; its pods `<group>-<i>-<j>`.
struct GangNames<'a> {
    base: String,
    taken_groups: BTreeSet<&'a str>,
    taken_pods: BTreeSet<&'a str>,
    next: usize,
}

impl<'a> GangNames<'a> {
    fn new(objects: &'a ClusterObjects, group: &PodGroupInfo, namespace: &str) -> Self {
        GangNames {
            base: group.key.name.clone(),
            taken_groups: objects
                .pod_groups
                .iter()
                .filter(|g| g.key.namespace == namespace)
                .map(|g| g.key.name.as_str())
                .collect(),
            taken_pods: taken_names(objects, namespace),
            next: 0,
        }
    }

    /// The next group name, and its `n` pods' names.
    fn next(&mut self, n: u32) -> (String, Vec<String>) {
        loop {
            let group = format!("{}-{}", self.base, self.next);
            self.next += 1;
            let pods: Vec<String> = (0..n).map(|j| format!("{group}-{j}")).collect();
            if !self.taken_groups.contains(group.as_str())
                && !pods.iter().any(|p| self.taken_pods.contains(p.as_str()))
            {
                return (group, pods);
            }
        }
    }
}

/// What the StatefulSet controller does for a new pod `name`: a PVC `<claim>-<name>` per
/// claim template (unbound, so VolumeBinding binds or provisions it; one the dump already
/// holds is used as it is), mounted through the volume named after the template.
fn add_claims(
    pod: &mut Pod,
    claims: &[k8s_openapi::api::core::v1::PersistentVolumeClaim],
    name: &str,
    objects: &ClusterObjects,
    cache: &mut Cache,
) {
    use k8s_openapi::api::core::v1::{PersistentVolumeClaimVolumeSource, Volume};
    let ns = pod
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let spec = pod.spec.get_or_insert_with(Default::default);
    let volumes = spec.volumes.get_or_insert_with(Vec::new);
    for t in claims {
        let claim = t.metadata.name.clone().unwrap_or_default();
        let pvc_name = format!("{claim}-{name}");
        let exists = objects.pvcs.iter().any(|p| {
            p.metadata.name.as_deref() == Some(pvc_name.as_str())
                && p.metadata.namespace.as_deref().unwrap_or("default") == ns
        });
        if !exists {
            let mut pvc = t.clone();
            pvc.metadata.name = Some(pvc_name.clone());
            pvc.metadata.namespace = Some(ns.clone());
            pvc.metadata.uid = Some(format!("ferrosched-capacity-pvc-{ns}-{pvc_name}"));
            pvc.status = None;
            cache.add_pvc(&pvc);
        }
        volumes.retain(|v| v.name != claim);
        volumes.push(Volume {
            name: claim,
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: pvc_name,
                read_only: None,
            }),
            ..Volume::default()
        });
    }
}

/// Places one whole copy of the gang (a PodGroup of its own and `minCount` pods naming
/// it) through the group cycle, all or nothing; never preempts.
fn place_gang(
    ctx: &mut GangContext<'_>,
    pod: &Pod,
    group: &PodGroupInfo,
    names: &mut GangNames<'_>,
    objects: &ClusterObjects,
) -> Result<GangCopy, Stop> {
    use crate::schedule_group::{GroupOutcome, Route, route, schedule_group_and_bind};
    let (name, pod_names) = names.next(group.min_count());
    let mut copy = group.clone();
    copy.key.name = name.clone();
    copy.uid = format!("ferrosched-capacity-{}-{name}", copy.key.namespace);
    copy.scheduled_condition = None;
    copy.claim_statuses.clear();
    ctx.groups.write().upsert(copy.clone());
    ctx.cache.dra_mut().update_pod_group(&copy);
    let mut members = Vec::new();
    for (i, pod_name) in pod_names.into_iter().enumerate() {
        let mut p = pod.clone();
        p.spec
            .get_or_insert_with(Default::default)
            .scheduling_group
            .get_or_insert_with(Default::default)
            .pod_group_name = Some(name.clone());
        let base = PodInfo::from_pod(&p);
        let info = Arc::new(copy_of(&p, &base, pod_name, objects, ctx.cache, true));
        ctx.groups.write().add_pod(&info);
        members.push(crate::framework::QueuedPodInfo::new(info, i as u64));
    }
    let mut queue: std::collections::VecDeque<_> = members.into();
    let first = queue.pop_front().expect("a gang has at least one pod");
    let g = match route(ctx.fw, ctx.groups, &first.pod) {
        Route::Gang(g) => g,
        Route::Wait(status) => {
            return Err(Stop::Gated {
                message: status.message(),
            });
        }
        Route::Alone | Route::Tree(_) => {
            return Err(Stop::Error {
                message: format!(
                    "profile {} does not run GangScheduling: the gang's pods would be scheduled one by one; enable the GangScheduling plugin or count single pods",
                    ctx.fw.profile_name()
                ),
            });
        }
    };
    ctx.cache.update_snapshot(ctx.snapshot);
    let outcome = schedule_group_and_bind(
        ctx.fw,
        ctx.alg,
        ctx.groups,
        &g,
        first,
        &mut queue,
        ctx.cache,
        ctx.snapshot,
        ctx.nominated,
    );
    match outcome {
        GroupOutcome::Placed { placed, waiting } if waiting.is_empty() => Ok(GangCopy {
            pod_group: format!("{}/{name}", copy.key.namespace),
            members: placed
                .into_iter()
                .map(|p| (p.pod.key().to_string(), p.node))
                .collect(),
        }),
        GroupOutcome::Placed { waiting, .. } => Err(Stop::Unschedulable {
            message: waiting
                .first()
                .map(|w| w.message.clone())
                .unwrap_or_default(),
        }),
        GroupOutcome::Unschedulable { reason, error, .. } if error => {
            Err(Stop::Error { message: reason })
        }
        GroupOutcome::Unschedulable {
            reason, waiting, ..
        } => {
            // The group's reason, and the first pod's own FailedScheduling text that differs.
            let own = waiting
                .iter()
                .map(|w| w.message.as_str())
                .find(|m| !m.contains(reason.as_str()) && !m.is_empty());
            Err(Stop::Unschedulable {
                message: match own {
                    Some(m) => format!("{reason}; the pod that did not fit: {m}"),
                    None => reason,
                },
            })
        }
    }
}
