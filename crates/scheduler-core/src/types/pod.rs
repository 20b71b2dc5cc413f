//! The compact, immutable scheduling view of a Pod.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::labels::Labels;
use super::node_selector::{NodeSelector, NodeSelectorTerm, PreferredSchedulingTerm};
use super::pod_affinity::PodAffinityTerms;
use super::quantity::{Quantity, parse_quantity};
use super::rare::Rare;
use super::resource::{
    CpuMemory, DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, HUGEPAGES_PREFIX, RESOURCE_CPU,
    RESOURCE_MEMORY, Resource,
};
use super::symbol::Sym;
use super::taint::Toleration;

pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";
pub const DEFAULT_BIND_ALL_HOST_IP: &str = "0.0.0.0";

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodKey {
    pub namespace: String,
    pub name: String,
}

impl PodKey {
    pub fn new(namespace: &str, name: &str) -> Self {
        PodKey {
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }
    pub fn of(pod: &k8s::Pod) -> Self {
        PodKey {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
        }
    }
}

impl fmt::Display for PodKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
    Other(String),
}

impl Protocol {
    /// Empty means TCP, as API defaulting and upstream `HostPortInfo` do.
    pub fn parse(s: &str) -> Self {
        match s {
            "" | "TCP" => Protocol::Tcp,
            "UDP" => Protocol::Udp,
            "SCTP" => Protocol::Sctp,
            other => Protocol::Other(other.to_string()),
        }
    }
    pub fn as_str(&self) -> &str {
        match self {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
            Protocol::Sctp => "SCTP",
            Protocol::Other(s) => s,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    pub protocol: Protocol,
    /// Never empty: an unset host IP is stored as `0.0.0.0`.
    pub host_ip: String,
    pub port: i32,
}

impl HostPort {
    pub fn new(port: i32, protocol: &str, host_ip: &str) -> Self {
        HostPort {
            protocol: Protocol::parse(protocol),
            host_ip: if host_ip.is_empty() {
                DEFAULT_BIND_ALL_HOST_IP.to_string()
            } else {
                host_ip.to_string()
            },
            port,
        }
    }
}

/// Scheduling view of one pod, built once per pod change and shared as `Arc<PodInfo>`.
#[derive(Debug, Clone, Default)]
pub struct PodInfo {
    pub uid: String,
    pub key: PodKey,
    pub labels: Labels,
    pub annotations_len: usize,
    pub scheduler_name: String,
    /// `spec.serviceAccountName` ("default" when unset): whose RBAC decides which
    /// SchedulingPolicies apply.
    pub service_account_name: String,
    pub priority: i32,
    pub priority_class_name: Option<String>,
    pub preemption_policy_never: bool,
    pub node_name: Option<String>,
    pub nominated_node_name: Option<String>,
    /// Unix nanoseconds.
    pub creation_timestamp: Option<i64>,
    /// Unix nanoseconds.
    pub start_time: Option<i64>,
    /// Upstream `PodRequests`: containers, sidecars, init containers, pod-level and overhead.
    pub requests: Resource,
    /// Only `milli_cpu` and `memory` are set: like `requests`, but a container without a cpu or
    /// memory request counts 100m / 200Mi.
    pub non_zero_requests: CpuMemory,
    pub host_ports: Vec<HostPort>,
    /// Interned like node labels: Filter matches it against every node by pointer.
    pub node_selector: Labels,
    pub required_node_affinity: Option<NodeSelector>,
    pub preferred_node_affinity: Vec<PreferredSchedulingTerm>,
    pub tolerations: Vec<Toleration>,
    pub runtime_class_name: Option<String>,
    pub has_overhead: bool,
    pub scheduling_gates: Vec<String>,
    /// The pod group it belongs to (`spec.schedulingGroup`, or scheduler-plugins' label):
    /// its pods are scheduled together (`types::pod_group`). Boxed: most pods have none.
    pub pod_group: Option<Box<super::pod_group::PodGroupKey>>,
    /// `spec.resourceClaims` entries (DRA), resolved against `status.resourceClaimStatuses`.
    /// Such a pod must never be bound unless each claim is allocated and reserved for it.
    pub resource_claims: Vec<super::dra::PodClaimRef>,
    /// Containers' requests for extended resources a DeviceClass may back (DRA-backed
    /// extended resources); most pods have none.
    pub extended_requests: Rare<super::dra::extended::ExtendedRequests>,
    /// Init container images then container images, normalized like ImageLocality does.
    /// Interned: a deployment's pods and the nodes' image lists share each name.
    pub images: Vec<Sym>,
    /// Init containers plus regular containers; ImageLocality scales its upper size threshold
    /// by it (a container without an image still counts).
    pub num_containers: usize,
    /// Node features the spec needs (`types::declared_features`), in registry order.
    pub required_node_features: Vec<&'static str>,
    /// Boxed: most pods have none, and inline it would add 144 bytes to every PodInfo.
    pub affinity: Option<Box<k8s::Affinity>>,
    pub topology_spread_constraints: Vec<k8s::TopologySpreadConstraint>,
    pub pvc_names: Vec<String>,
    /// Claims (incl. generic ephemeral) and in-tree disks, for the volume plugins.
    /// Behind [`Rare`] (one word; most pods have none), like the compiled terms below.
    pub volumes: Rare<super::volume::PodVolumeSources>,
    pub is_terminating: bool,
    /// Terminating because scheduler preemption evicted it: deletion started and the
    /// `DisruptionTarget` condition is True with reason `PreemptionByScheduler`.
    pub terminating_by_preemption: bool,
    /// Pod (anti-)affinity present: the pod goes into `NodeInfo::pods_with_affinity`.
    pub has_pod_affinity: bool,
    pub has_required_pod_anti_affinity: bool,
    /// Compiled pod (anti-)affinity terms (see [`PodAffinityTerms`]).
    pub affinity_terms: Rare<PodAffinityTerms>,
    /// Topology spread constraints compiled (matchLabelKeys merged) and the controller ref.
    pub spread: Rare<super::topology_spread::PodSpreadInfo>,
    /// Malformed input found while converting (bad quantities, invalid selectors).
    pub problems: Vec<String>,
}

impl PodInfo {
    pub fn namespace(&self) -> &str {
        &self.key.namespace
    }
    pub fn name(&self) -> &str {
        &self.key.name
    }
    pub fn key(&self) -> &PodKey {
        &self.key
    }

    /// Converts an API pod. Never panics: absent fields take their defaults and malformed
    /// values land in [`PodInfo::problems`].
    pub fn from_pod(pod: &k8s::Pod) -> PodInfo {
        let meta = &pod.metadata;
        let default_spec = k8s::PodSpec::default();
        let spec = pod.spec.as_ref().unwrap_or(&default_spec);
        let status = pod.status.as_ref();
        let mut problems = Vec::new();

        let (requests, non_zero_requests) = compute_requests(pod, spec, &mut problems);

        let init_containers = spec.init_containers.as_deref().unwrap_or_default();
        let mut host_ports = Vec::new();
        let sidecars = init_containers
            .iter()
            .filter(|c| is_restartable_init_container(c));
        for c in sidecars.chain(spec.containers.iter()) {
            for p in c.ports.iter().flatten() {
                let port = p.host_port.unwrap_or(0);
                if port > 0 {
                    host_ports.push(HostPort::new(
                        port,
                        p.protocol.as_deref().unwrap_or(""),
                        p.host_ip.as_deref().unwrap_or(""),
                    ));
                }
            }
        }

        let node_affinity = spec
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref());
        let required_node_affinity = node_affinity
            .and_then(|na| {
                na.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .map(NodeSelector::from_k8s);
        if let Some(sel) = &required_node_affinity {
            problems.extend(
                sel.problems()
                    .into_iter()
                    .map(|p| format!("required node affinity: {p}")),
            );
        }
        let mut preferred_node_affinity = Vec::new();
        for (i, t) in node_affinity
            .and_then(|na| {
                na.preferred_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .into_iter()
            .flatten()
            .enumerate()
        {
            // Upstream skips zero-weight terms entirely.
            if t.weight == 0 {
                continue;
            }
            let term = NodeSelectorTerm::from_k8s(&t.preference);
            problems.extend(
                term.errors
                    .iter()
                    .map(|e| format!("preferred node affinity [{i}]: {e}")),
            );
            preferred_node_affinity.push(PreferredSchedulingTerm {
                weight: t.weight,
                term,
            });
        }

        let (has_pod_affinity, has_required_pod_anti_affinity) = match &spec.affinity {
            Some(a) => (
                a.pod_affinity.is_some() || a.pod_anti_affinity.is_some(),
                a.pod_anti_affinity
                    .as_ref()
                    .and_then(|aa| {
                        aa.required_during_scheduling_ignored_during_execution
                            .as_ref()
                    })
                    .is_some_and(|terms| !terms.is_empty()),
            ),
            None => (false, false),
        };

        let images = init_containers
            .iter()
            .chain(spec.containers.iter())
            .filter_map(|c| c.image.as_deref())
            .map(|name| Sym::new(&normalized_image_name(name)))
            .collect();

        let mut info = PodInfo {
            uid: meta.uid.clone().unwrap_or_default(),
            key: PodKey::of(pod),
            labels: Labels::from(meta.labels.as_ref()),
            annotations_len: meta.annotations.as_ref().map_or(0, |a| a.len()),
            scheduler_name: spec
                .scheduler_name
                .clone()
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| DEFAULT_SCHEDULER_NAME.to_string()),
            service_account_name: spec
                .service_account_name
                .clone()
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "default".to_string()),
            priority: spec.priority.unwrap_or(0),
            priority_class_name: spec.priority_class_name.clone().filter(|s| !s.is_empty()),
            preemption_policy_never: spec.preemption_policy.as_deref() == Some("Never"),
            node_name: spec.node_name.clone().filter(|s| !s.is_empty()),
            nominated_node_name: status
                .and_then(|s| s.nominated_node_name.clone())
                .filter(|s| !s.is_empty()),
            creation_timestamp: meta.creation_timestamp.as_ref().map(time_nanos),
            start_time: status.and_then(|s| s.start_time.as_ref()).map(time_nanos),
            requests,
            non_zero_requests,
            host_ports,
            node_selector: Labels::from(spec.node_selector.as_ref()),
            required_node_affinity,
            preferred_node_affinity,
            tolerations: spec
                .tolerations
                .iter()
                .flatten()
                .map(Toleration::from_k8s)
                .collect(),
            runtime_class_name: spec.runtime_class_name.clone().filter(|s| !s.is_empty()),
            has_overhead: spec.overhead.as_ref().is_some_and(|o| !o.is_empty()),
            scheduling_gates: spec
                .scheduling_gates
                .iter()
                .flatten()
                .map(|g| g.name.clone())
                .collect(),
            pod_group: super::pod_group::pod_group_of(pod).map(Box::new),
            resource_claims: super::dra::pod_claims(pod),
            extended_requests: Rare::new(super::dra::extended::ExtendedRequests::from_spec(spec)),
            images,
            num_containers: init_containers.len() + spec.containers.len(),
            required_node_features: super::declared_features::required_features(spec),
            affinity: spec.affinity.clone().map(Box::new),
            topology_spread_constraints: spec
                .topology_spread_constraints
                .clone()
                .unwrap_or_default(),
            pvc_names: spec
                .volumes
                .iter()
                .flatten()
                .filter_map(|v| {
                    v.persistent_volume_claim
                        .as_ref()
                        .map(|c| c.claim_name.clone())
                })
                .collect(),
            volumes: Rare::new(super::volume::PodVolumeSources::from_pod(pod)),
            is_terminating: meta.deletion_timestamp.is_some(),
            terminating_by_preemption: meta.deletion_timestamp.is_some()
                && evicted_by_scheduler_preemption(status),
            has_pod_affinity,
            has_required_pod_anti_affinity,
            affinity_terms: Rare::new(PodAffinityTerms::from_pod(pod, &mut problems)),
            spread: Rare::new(super::topology_spread::PodSpreadInfo::from_pod(
                pod,
                &mut problems,
            )),
            problems,
        };
        info.shrink();
        info
    }

    /// Drops the spare capacity of vectors collected from filtered iterators (a one-element
    /// `collect` reserves four): the view is built once and kept for the pod's life.
    fn shrink(&mut self) {
        self.host_ports.shrink_to_fit();
        self.images.shrink_to_fit();
        self.scheduling_gates.shrink_to_fit();
        self.pvc_names.shrink_to_fit();
        self.required_node_features.shrink_to_fit();
        self.preferred_node_affinity.shrink_to_fit();
        self.problems.shrink_to_fit();
    }

    /// A copy that accounts for a RuntimeClass overhead the API server has not set yet.
    /// A pod that already carries `spec.overhead` is returned unchanged: it is counted once.
    pub fn with_overhead(&self, overhead: &Resource) -> PodInfo {
        let mut p = self.clone();
        if p.has_overhead || overhead.is_zero() {
            return p;
        }
        p.requests.add(overhead);
        p.non_zero_requests.milli_cpu += overhead.milli_cpu;
        p.non_zero_requests.memory += overhead.memory;
        p.has_overhead = true;
        p
    }

    /// A copy with `extra` tolerations appended, skipping exact duplicates (as RuntimeClass
    /// admission merges them).
    pub fn with_extra_tolerations(&self, extra: &[Toleration]) -> PodInfo {
        let mut p = self.clone();
        for t in extra {
            if !p.tolerations.contains(t) {
                p.tolerations.push(t.clone());
            }
        }
        p
    }

    /// A copy bound to `node` (used when assuming a pod).
    pub fn with_node_name(&self, node: &str) -> PodInfo {
        let mut p = self.clone();
        p.node_name = Some(node.to_string());
        p
    }
}

/// The first `DisruptionTarget` condition decides, as upstream reads it.
fn evicted_by_scheduler_preemption(status: Option<&k8s::PodStatus>) -> bool {
    status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "DisruptionTarget"))
        .is_some_and(|c| c.status == "True" && c.reason.as_deref() == Some("PreemptionByScheduler"))
}

fn time_nanos(t: &Time) -> i64 {
    let n = t.0.as_nanosecond();
    n.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// Upstream ImageLocality `normalizedImageName`: append `:latest` when the last path segment
/// has no tag. A digest reference (`repo@sha256:...`) already contains a colon and is kept.
pub fn normalized_image_name(name: &str) -> String {
    let last_colon = name.rfind(':');
    let last_slash = name.rfind('/');
    // Go compares LastIndex values with -1 for "absent"; Option's ordering puts None first too.
    if last_colon <= last_slash {
        format!("{name}:latest")
    } else {
        name.to_string()
    }
}

fn is_restartable_init_container(c: &k8s::Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

type ResourceList = BTreeMap<String, Quantity>;

fn parse_list(
    list: Option<&BTreeMap<String, K8sQuantity>>,
    what: &str,
    problems: &mut Vec<String>,
) -> ResourceList {
    let mut out = ResourceList::new();
    for (name, q) in list.into_iter().flatten() {
        match parse_quantity(&q.0) {
            Ok(v) => {
                out.insert(name.clone(), v);
            }
            Err(e) => problems.push(format!("invalid resource {what} {name}={:?}: {e}", q.0)),
        }
    }
    out
}

fn add_list(into: &mut ResourceList, from: &ResourceList) {
    for (k, v) in from {
        *into.entry(k.clone()).or_default() += *v;
    }
}

fn max_list(into: &mut ResourceList, from: &ResourceList) {
    for (k, v) in from {
        match into.get_mut(k) {
            Some(cur) if *cur >= *v => {}
            Some(cur) => *cur = *v,
            None => {
                into.insert(k.clone(), *v);
            }
        }
    }
}

/// Per-container request lists, parsed once and reused by every aggregation pass.
struct ContainerRequests {
    restartable: bool,
    spec: ResourceList,
    /// `status.containerStatuses[].allocatedResources`
    allocated: Option<ResourceList>,
    /// `status.containerStatuses[].resources.requests`
    actuated: Option<ResourceList>,
}

impl ContainerRequests {
    fn new(
        c: &k8s::Container,
        status: Option<&k8s::ContainerStatus>,
        problems: &mut Vec<String>,
    ) -> Self {
        let res = c.resources.as_ref();
        let mut spec = parse_list(
            res.and_then(|r| r.requests.as_ref()),
            &format!("request of container {:?}", c.name),
            problems,
        );
        // API defaulting copies a limit into an unset request; do the same for objects that
        // never went through the API server.
        for (k, v) in parse_list(
            res.and_then(|r| r.limits.as_ref()),
            &format!("limit of container {:?}", c.name),
            problems,
        ) {
            spec.entry(k).or_insert(v);
        }
        let allocated = status
            .and_then(|s| s.allocated_resources.as_ref())
            .map(|l| parse_list(Some(l), "allocatedResources", problems));
        let actuated = status
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .map(|l| parse_list(Some(l), "status resources", problems));
        ContainerRequests {
            restartable: is_restartable_init_container(c),
            spec,
            allocated,
            actuated,
        }
    }

    /// What upstream reads for each of its three views of a container's requests.
    fn view(&self, which: View, resize_infeasible: bool) -> Option<&ResourceList> {
        match which {
            View::Spec => Some(&self.spec),
            View::Allocated => match &self.allocated {
                Some(a) => Some(a),
                None if resize_infeasible => None,
                None => Some(&self.spec),
            },
            View::Actuated => match (&self.actuated, &self.allocated) {
                (Some(a), _) | (None, Some(a)) => Some(a),
                (None, None) if resize_infeasible => None,
                (None, None) => Some(&self.spec),
            },
        }
    }
}

#[derive(Clone, Copy)]
enum View {
    Spec,
    Allocated,
    Actuated,
}

/// Sidecar-aware aggregation (KEP-753): regular containers and sidecars run together; each
/// regular init container runs beside the sidecars declared before it.
fn aggregate(
    containers: &[ContainerRequests],
    init_containers: &[ContainerRequests],
    which: View,
    resize_infeasible: bool,
    non_missing: &ResourceList,
) -> ResourceList {
    let with_defaults = |l: Option<&ResourceList>| -> ResourceList {
        let mut out = l.cloned().unwrap_or_default();
        for (k, v) in non_missing {
            out.entry(k.clone()).or_insert(*v);
        }
        out
    };
    let mut total = ResourceList::new();
    for c in containers {
        add_list(&mut total, &with_defaults(c.view(which, resize_infeasible)));
    }
    let mut sidecars = ResourceList::new();
    let mut init_peak = ResourceList::new();
    for c in init_containers {
        let reqs = with_defaults(c.view(which, resize_infeasible));
        if c.restartable {
            add_list(&mut total, &reqs);
            add_list(&mut sidecars, &reqs);
            max_list(&mut init_peak, &sidecars);
        } else {
            let mut running = reqs;
            add_list(&mut running, &sidecars);
            max_list(&mut init_peak, &running);
        }
    }
    max_list(&mut total, &init_peak);
    total
}

/// Upstream `subtractResourceList`: only names already in `into`, floored at zero.
fn subtract_list(into: &mut ResourceList, from: &ResourceList) {
    for (k, v) in from {
        if let Some(cur) = into.get_mut(k) {
            *cur = Quantity::from_nanos((cur.nanos() - v.nanos()).max(0));
        }
    }
}

fn is_pod_level_resource(name: &str) -> bool {
    name == RESOURCE_CPU || name == RESOURCE_MEMORY || name.starts_with(HUGEPAGES_PREFIX)
}

/// Returns (requests, non-zero requests) like upstream `PodInfo.calculateResource` with
/// InPlacePodVerticalScaling and PodLevelResources honoured when the pod uses them.
fn compute_requests(
    pod: &k8s::Pod,
    spec: &k8s::PodSpec,
    problems: &mut Vec<String>,
) -> (Resource, CpuMemory) {
    let status = pod.status.as_ref();
    let find_status = |name: &str| {
        let statuses = status
            .and_then(|s| s.container_statuses.as_ref())
            .into_iter()
            .flatten();
        let init_statuses = status
            .and_then(|s| s.init_container_statuses.as_ref())
            .into_iter()
            .flatten();
        statuses.chain(init_statuses).find(|cs| cs.name == name)
    };
    let resize_infeasible = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodResizePending"))
        .is_some_and(|c| c.reason.as_deref() == Some("Infeasible"));
    let containers: Vec<ContainerRequests> = spec
        .containers
        .iter()
        .map(|c| ContainerRequests::new(c, find_status(&c.name), problems))
        .collect();
    let init_containers: Vec<ContainerRequests> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| ContainerRequests::new(c, find_status(&c.name), problems))
        .collect();
    let has_status = containers
        .iter()
        .chain(&init_containers)
        .any(|c| c.allocated.is_some() || c.actuated.is_some());
    // Pod-level status (InPlacePodLevelResourcesVerticalScaling, on since 1.36): absent on
    // older servers, where the container statuses above are all there is.
    let pod_allocated = status
        .and_then(|s| s.allocated_resources.as_ref())
        .map(|l| parse_list(Some(l), "pod allocatedResources", problems));
    let pod_status_resources = status.and_then(|s| s.resources.as_ref());
    let pod_actuated = pod_status_resources
        .and_then(|r| r.requests.as_ref())
        .map(|l| parse_list(Some(l), "pod status resources", problems));
    // When both are reported they already aggregate every container.
    let pod_status_aggregates = pod_allocated.is_some() && pod_actuated.is_some();

    let pod_level: ResourceList = parse_list(
        spec.resources.as_ref().and_then(|r| r.requests.as_ref()),
        "pod-level request",
        problems,
    )
    .into_iter()
    .filter(|(k, _)| is_pod_level_resource(k))
    .collect();
    let overhead = parse_list(spec.overhead.as_ref(), "overhead", problems);
    // What pod-level requests count while a resize is in flight: the max of the spec (unless
    // the resize is infeasible) and what the status reports, overhead taken out.
    let pod_level_effective =
        if !pod_level.is_empty() && (pod_status_resources.is_some() || pod_allocated.is_some()) {
            let mut m = if resize_infeasible {
                ResourceList::new()
            } else {
                pod_level.clone()
            };
            for reported in [&pod_actuated, &pod_allocated].into_iter().flatten() {
                let mut l = reported.clone();
                subtract_list(&mut l, &overhead);
                max_list(&mut m, &l);
            }
            m.retain(|k, _| is_pod_level_resource(k));
            m
        } else {
            pod_level.clone()
        };

    let total = |non_missing: &ResourceList| -> ResourceList {
        let spec_view = aggregate(
            &containers,
            &init_containers,
            View::Spec,
            resize_infeasible,
            non_missing,
        );
        // Resized pods count the max of desired, allocated and actuated requests.
        let mut reqs = if has_status || resize_infeasible || pod_status_aggregates {
            let (allocated, actuated) = match (&pod_allocated, &pod_actuated) {
                (Some(al), Some(ac)) => (al.clone(), ac.clone()),
                _ => (
                    aggregate(
                        &containers,
                        &init_containers,
                        View::Allocated,
                        resize_infeasible,
                        non_missing,
                    ),
                    aggregate(
                        &containers,
                        &init_containers,
                        View::Actuated,
                        resize_infeasible,
                        non_missing,
                    ),
                ),
            };
            let mut m = if resize_infeasible {
                ResourceList::new()
            } else {
                spec_view
            };
            max_list(&mut m, &actuated);
            max_list(&mut m, &allocated);
            m
        } else {
            spec_view
        };
        for (k, v) in &pod_level_effective {
            reqs.insert(k.clone(), *v);
        }
        add_list(&mut reqs, &overhead);
        reqs
    };

    let reqs = total(&ResourceList::new());
    let mut non_missing = ResourceList::new();
    let defaults = [
        (
            RESOURCE_CPU,
            Quantity::from_milli(DEFAULT_MILLI_CPU_REQUEST),
        ),
        (
            RESOURCE_MEMORY,
            Quantity::from_value(DEFAULT_MEMORY_REQUEST),
        ),
    ];
    for (name, q) in defaults {
        // With pod-level requests, defaults apply only to what neither level requests.
        if pod_level.is_empty() || !reqs.contains_key(name) {
            non_missing.insert(name.to_string(), q);
        }
    }
    let non_zero_list = if non_missing.is_empty() {
        reqs.clone()
    } else {
        total(&non_missing)
    };

    let mut requests = Resource::default();
    for (k, v) in &reqs {
        requests.add_quantity(k, *v);
    }
    let non_zero = CpuMemory {
        milli_cpu: non_zero_list
            .get(RESOURCE_CPU)
            .map_or(0, |q| q.milli_value()),
        memory: non_zero_list.get(RESOURCE_MEMORY).map_or(0, |q| q.value()),
    };
    (requests, non_zero)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_names() {
        assert_eq!(normalized_image_name("nginx"), "nginx:latest");
        assert_eq!(normalized_image_name("nginx:1.25"), "nginx:1.25");
        assert_eq!(
            normalized_image_name("localhost:5000/nginx"),
            "localhost:5000/nginx:latest"
        );
        assert_eq!(
            normalized_image_name("localhost:5000/nginx:v1"),
            "localhost:5000/nginx:v1"
        );
        assert_eq!(
            normalized_image_name("gcr.io/a/b@sha256:abc"),
            "gcr.io/a/b@sha256:abc"
        );
    }

    #[test]
    fn empty_pod_never_panics() {
        let p = PodInfo::from_pod(&k8s::Pod::default());
        assert_eq!(p.scheduler_name, DEFAULT_SCHEDULER_NAME);
        assert!(p.requests.is_zero());
        assert!(p.non_zero_requests.is_zero());
        assert!(p.problems.is_empty());
    }
}
