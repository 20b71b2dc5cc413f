//! NodeResourcesFit: rejects nodes without room for the pod's requests and scores the rest
//! with the configured strategy (upstream `noderesources/fit.go`).
//!
//! PreFilter turns the pod's requests into the short list of checks Filter has to make
//! (zero and ignored requests dropped), so Filter is a handful of comparisons per node and
//! allocates only when it rejects. PreScore does the same for scoring.

use crate::framework::Signing;
use crate::plugins::helper::sign;
use std::collections::HashSet;
use std::sync::Arc;

use crate::cache::Snapshot;
use crate::config::{NodeResourcesFitArgs, PluginArgs, ScoringStrategyType};
use crate::framework::{ActionType, ClusterEvent, EventObjects, EventResource, QueueingHint};
use crate::framework::{
    Code, CycleState, FilterPlugin, Plugin, PluginPoints, PreFilterPlugin, PreFilterResult,
    PreScorePlugin, ScorePlugin, Status,
};
use crate::framework::{FeasibleNodes, FeasibleSummaries};
use crate::plugin_points;
use crate::types::{
    NodeInfo, PodInfo, RESOURCE_CPU, RESOURCE_EPHEMERAL_STORAGE, RESOURCE_MEMORY, RESOURCE_PODS,
    Resource, ResourceName, Room, SummaryRule, is_extended_resource_name,
};

use super::dynamic_resources::extended::dra_handles_extended_resources;
use super::dynamic_resources::extended_score::extended_resource_devices;
use super::names::NODE_RESOURCES_FIT;
use super::resource_allocation::{DraDevices, ResourceAllocationScorer, Strategy, WithDraDevices};
use crate::types::dra::extended::is_dra_extended_resource_name;

/// The node already runs as many pods as its `pods` allocatable allows.
pub const TOO_MANY_PODS: &str = "Too many pods";
pub const INSUFFICIENT_CPU: &str = "Insufficient cpu";
pub const INSUFFICIENT_MEMORY: &str = "Insufficient memory";
pub const INSUFFICIENT_EPHEMERAL_STORAGE: &str = "Insufficient ephemeral-storage";
/// Prefix of the reason for any other resource: `Insufficient nvidia.com/gpu`.
pub const INSUFFICIENT_PREFIX: &str = "Insufficient ";

/// Name of the PreFilter state, as upstream names it in its "missing state" error.
const PRE_FILTER_STATE_KEY: &str = "PreFilterNodeResourcesFit";

/// One resource the node lacks for the pod (upstream `InsufficientResource`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InsufficientResource {
    pub resource_name: String,
    pub reason: String,
    pub requested: i64,
    pub used: i64,
    pub capacity: i64,
    /// The request exceeds the node's whole allocatable: evicting pods cannot help.
    pub unresolvable: bool,
}

/// What Filter checks, computed once per cycle from the pod's requests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct PreFilterState {
    milli_cpu: i64,
    memory: i64,
    ephemeral_storage: i64,
    /// Non-zero scalar requests that are not ignored, sorted by name.
    scalars: Vec<(ResourceName, i64)>,
    /// Extended resources a DeviceClass backs: on a node that advertises none of it
    /// (allocatable 0) DynamicResources allocates devices instead, so it is not checked here.
    dra_backed: Vec<ResourceName>,
}

/// The amounts the fixed checks compare: pods and their limit, (used, allocatable) of cpu,
/// memory and ephemeral storage of a node.
struct Fixed {
    pods: i64,
    allowed_pods: i64,
    cpu: (i64, i64),
    memory: (i64, i64),
    ephemeral_storage: (i64, i64),
}

impl Fixed {
    fn of_node(node: &NodeInfo) -> Self {
        let (alloc, used) = (&node.allocatable, &node.requested);
        Fixed {
            pods: node.pods.len() as i64,
            allowed_pods: alloc.allowed_pod_number,
            cpu: (used.milli_cpu, alloc.milli_cpu),
            memory: (used.memory, alloc.memory),
            ephemeral_storage: (used.ephemeral_storage, alloc.ephemeral_storage),
        }
    }
}

impl PreFilterState {
    fn new(requests: &Resource, ignored: impl Fn(&str) -> bool) -> Self {
        PreFilterState {
            milli_cpu: requests.milli_cpu,
            memory: requests.memory,
            ephemeral_storage: requests.ephemeral_storage,
            scalars: requests
                .scalar
                .iter()
                .filter(|(name, q)| *q != 0 && !ignored(name))
                .cloned()
                .collect(),
            dra_backed: Vec::new(),
        }
    }

    /// Marks the requests DRA backs (upstream: NodeResourcesFit leaves an extended resource
    /// with a DeviceClass mapping and no allocatable to the DynamicResources plugin). Only
    /// when the profile runs DynamicResources (see [`dra_handles_extended_resources`]).
    fn with_dra_backed(mut self, pod: &PodInfo, snapshot: &Snapshot) -> Self {
        if !pod.extended_requests.is_set() || !snapshot.dra_api_served() {
            return self;
        }
        self.dra_backed = self
            .scalars
            .iter()
            .filter(|(n, _)| {
                is_dra_extended_resource_name(n)
                    && snapshot.dra().class_for_extended_resource(n).is_some()
            })
            .map(|(n, _)| n.clone())
            .collect();
        self
    }

    /// The rule of a summary that passes: a free pod slot and room for cpu, memory and
    /// ephemeral storage, as [`check_fixed`](Self::check_fixed) counts them; only when the
    /// pod asks for no scalar resource (a summary has none).
    fn summary_rule(&self) -> Option<SummaryRule> {
        self.scalars.is_empty().then_some(SummaryRule {
            room: Some(Room {
                milli_cpu: self.milli_cpu,
                memory: self.memory,
                ephemeral_storage: self.ephemeral_storage,
            }),
            ..SummaryRule::ANY
        })
    }

    /// Calls `fail` for every resource `node` lacks, in upstream's order: pod count, cpu,
    /// memory, ephemeral storage, then scalar resources (by name). Returns the failure count.
    fn check(&self, node: &NodeInfo, mut fail: impl FnMut(Lack<'_>)) -> usize {
        let mut n = self.check_fixed(&Fixed::of_node(node), &mut fail);
        let mut report = |lack: Lack<'_>| {
            n += 1;
            fail(lack);
        };
        let alloc = &node.allocatable;
        let used = &node.requested;
        for (name, requested) in &self.scalars {
            let capacity = alloc.scalar_value(name);
            if capacity == 0 && self.dra_backed.contains(name) {
                continue;
            }
            let used = used.scalar_value(name);
            if *requested > capacity.wrapping_sub(used) {
                report(Lack {
                    resource: LackOf::Scalar(name),
                    requested: *requested,
                    used,
                    capacity,
                });
            }
        }
        n
    }

    /// [`check`](Self::check)'s pod count, cpu, memory and ephemeral storage part.
    fn check_fixed(&self, node: &Fixed, fail: &mut impl FnMut(Lack<'_>)) -> usize {
        let mut n = 0;
        let mut report = |lack: Lack<'_>| {
            n += 1;
            fail(lack);
        };
        if node.pods + 1 > node.allowed_pods {
            report(Lack {
                resource: LackOf::Pods,
                requested: 1,
                used: node.pods,
                capacity: node.allowed_pods,
            });
        }
        let fixed = [
            (LackOf::Cpu, self.milli_cpu, node.cpu),
            (LackOf::Memory, self.memory, node.memory),
            (
                LackOf::EphemeralStorage,
                self.ephemeral_storage,
                node.ephemeral_storage,
            ),
        ];
        for (resource, requested, (used, capacity)) in fixed {
            if requested > 0 && requested > capacity.wrapping_sub(used) {
                report(Lack {
                    resource,
                    requested,
                    used,
                    capacity,
                });
            }
        }
        n
    }

    fn insufficient(&self, node: &NodeInfo) -> Vec<InsufficientResource> {
        let mut out = Vec::new();
        self.check(node, |l| out.push(l.describe()));
        out
    }
}

#[derive(Clone, Copy)]
enum LackOf<'a> {
    Pods,
    Cpu,
    Memory,
    EphemeralStorage,
    Scalar(&'a str),
}

struct Lack<'a> {
    resource: LackOf<'a>,
    requested: i64,
    used: i64,
    capacity: i64,
}

impl Lack<'_> {
    fn reason(&self) -> String {
        match self.resource {
            LackOf::Pods => TOO_MANY_PODS.to_string(),
            LackOf::Cpu => INSUFFICIENT_CPU.to_string(),
            LackOf::Memory => INSUFFICIENT_MEMORY.to_string(),
            LackOf::EphemeralStorage => INSUFFICIENT_EPHEMERAL_STORAGE.to_string(),
            LackOf::Scalar(name) => format!("{INSUFFICIENT_PREFIX}{name}"),
        }
    }

    /// Upstream never marks the pod count unresolvable (pods can be evicted); any other
    /// resource is when the pod alone asks for more than the node has in total.
    fn unresolvable(&self) -> bool {
        !matches!(self.resource, LackOf::Pods) && self.requested > self.capacity
    }

    fn describe(&self) -> InsufficientResource {
        InsufficientResource {
            resource_name: match self.resource {
                LackOf::Pods => RESOURCE_PODS,
                LackOf::Cpu => RESOURCE_CPU,
                LackOf::Memory => RESOURCE_MEMORY,
                LackOf::EphemeralStorage => RESOURCE_EPHEMERAL_STORAGE,
                LackOf::Scalar(name) => name,
            }
            .to_string(),
            reason: self.reason(),
            requested: self.requested,
            used: self.used,
            capacity: self.capacity,
            unresolvable: self.unresolvable(),
        }
    }
}

/// Every resource `node` lacks for `pod`, without ignoring any (upstream `Fits`, used to
/// judge hypothetical nodes).
pub fn fits(pod: &PodInfo, node: &NodeInfo) -> Vec<InsufficientResource> {
    PreFilterState::new(&pod.requests, |_| false).insufficient(node)
}

/// The pod's scoring requests, written by PreScore.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PreScoreState {
    pod_requests: Vec<i64>,
    /// Extended resources backed by DRA the pod requests and the strategy scores: per node,
    /// (devices of the resource's DeviceClass it reaches, allocated ones).
    dra_devices: DraDevices,
}

pub struct NodeResourcesFit {
    ignored_resources: HashSet<String>,
    /// Prefixes (the part before `/`) of extended resources to ignore.
    ignored_resource_groups: HashSet<String>,
    scorer: ResourceAllocationScorer,
}

impl NodeResourcesFit {
    /// Builds the plugin from defaulted args; `None` means upstream's defaults (LeastAllocated
    /// on cpu and memory, weight 1 each, nothing ignored).
    pub fn new(args: Option<&PluginArgs>) -> Result<Self, String> {
        let defaults = || match crate::config::default_args_for(NODE_RESOURCES_FIT) {
            Some(PluginArgs::NodeResourcesFit(a)) => a,
            _ => NodeResourcesFitArgs::default(),
        };
        let owned;
        let args: &NodeResourcesFitArgs = match args {
            Some(PluginArgs::NodeResourcesFit(a)) => a,
            Some(other) => {
                return Err(format!(
                    "want args to be of type NodeResourcesFitArgs, got {}",
                    other.kind()
                ));
            }
            None => {
                owned = defaults();
                &owned
            }
        };
        let strategy = args
            .scoring_strategy
            .clone()
            .or_else(|| defaults().scoring_strategy)
            .ok_or("scoring strategy not specified")?;
        let formula = match strategy.type_ {
            ScoringStrategyType::LeastAllocated => Strategy::LeastAllocated,
            ScoringStrategyType::MostAllocated => Strategy::MostAllocated,
            ScoringStrategyType::RequestedToCapacityRatio => {
                let shape = strategy
                    .requested_to_capacity_ratio
                    .as_ref()
                    .map(|r| r.shape.as_slice())
                    .unwrap_or_default();
                Strategy::requested_to_capacity_ratio(shape)?
            }
        };
        Ok(NodeResourcesFit {
            ignored_resources: args.ignored_resources.iter().cloned().collect(),
            ignored_resource_groups: args.ignored_resource_groups.iter().cloned().collect(),
            scorer: ResourceAllocationScorer::new(&strategy.resources, false, formula),
        })
    }

    pub fn factory(args: Option<&PluginArgs>) -> Result<Arc<dyn Plugin>, String> {
        Ok(Arc::new(Self::new(args)?))
    }

    /// Ignoring applies to extended resources only: hugepages and `kubernetes.io/` names
    /// are always checked.
    fn is_ignored(&self, name: &str) -> bool {
        if self.ignored_resources.is_empty() && self.ignored_resource_groups.is_empty() {
            return false;
        }
        if !is_extended_resource_name(name) {
            return false;
        }
        let group = name.split('/').next().unwrap_or(name);
        self.ignored_resources.contains(name) || self.ignored_resource_groups.contains(group)
    }
}

impl Plugin for NodeResourcesFit {
    /// Signature for opportunistic batching (upstream `SignPod`).
    fn sign_pod(&self, pod: &PodInfo) -> Option<Signing> {
        sign::with(vec![sign::resources(pod)])
    }
    fn name(&self) -> &'static str {
        NODE_RESOURCES_FIT
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => pre_filter, filter, pre_score, score, placement_score)
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::new(
                EventResource::Pod,
                ActionType::DELETE | ActionType::UPDATE_POD_SCALE_DOWN,
            ),
            ClusterEvent::new(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_ALLOCATABLE,
            ),
            // A class naming an extended resource the pod asks for hands it to DRA (upstream
            // registers this with DRAExtendedResource; its hint is approximated by Queue).
            ClusterEvent::new(
                EventResource::DeviceClass,
                ActionType::ADD | ActionType::UPDATE,
            ),
        ]
    }

    /// Upstream's hints: a node helps only if its allocatable alone could hold the pod; a
    /// pod helps only if it was bound and, when it shrank, gave back something the pod asks
    /// for.
    fn queueing_hint(
        &self,
        pod: &PodInfo,
        _event: &ClusterEvent,
        objects: &EventObjects<'_>,
    ) -> QueueingHint {
        match objects {
            EventObjects::Node { new, .. } => {
                let empty = NodeInfo {
                    allocatable: new.allocatable.clone(),
                    ..NodeInfo::default()
                };
                if PreFilterState::new(&pod.requests, |n| self.is_ignored(n))
                    .insufficient(&empty)
                    .is_empty()
                {
                    QueueingHint::Queue
                } else {
                    QueueingHint::QueueSkip
                }
            }
            EventObjects::Pod { old, new } => match (old, new) {
                (Some(o), None) if o.node_name.is_none() => QueueingHint::QueueSkip,
                (Some(o), Some(n)) => {
                    if n.node_name.is_none() || !gave_back_any(&pod.requests, o, n) {
                        QueueingHint::QueueSkip
                    } else {
                        QueueingHint::Queue
                    }
                }
                _ => QueueingHint::Queue,
            },
            _ => QueueingHint::Queue,
        }
    }
}

/// Whether `new` requests less than `old` of some resource `wanted` asks for.
fn gave_back_any(wanted: &Resource, old: &PodInfo, new: &PodInfo) -> bool {
    let (o, n) = (&old.requests, &new.requests);
    let fixed = [
        (wanted.milli_cpu, o.milli_cpu, n.milli_cpu),
        (wanted.memory, o.memory, n.memory),
        (
            wanted.ephemeral_storage,
            o.ephemeral_storage,
            n.ephemeral_storage,
        ),
    ];
    fixed.iter().any(|&(w, o, n)| w > 0 && o > n)
        || wanted
            .scalar
            .iter()
            .any(|(name, w)| *w > 0 && o.scalar_value(name) > n.scalar_value(name))
}

impl PreFilterPlugin for NodeResourcesFit {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        // Never Skip: even a pod requesting nothing needs a free pod slot.
        let mut s = PreFilterState::new(&pod.requests, |n| self.is_ignored(n));
        if dra_handles_extended_resources(state) {
            s = s.with_dra_backed(pod, snapshot);
        }
        state.write(s);
        (None, Status::success())
    }
}

impl FilterPlugin for NodeResourcesFit {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(s) = state.read::<PreFilterState>() else {
            return Status::error(format!(
                "error reading {PRE_FILTER_STATE_KEY:?} from cycleState: not found"
            ));
        };
        if s.check(node, |_| {}) == 0 {
            return Status::success();
        }
        let mut code = Code::Unschedulable;
        let mut reasons = Vec::with_capacity(4);
        s.check(node, |l| {
            if l.unresolvable() {
                code = Code::UnschedulableAndUnresolvable;
            }
            reasons.push(l.reason());
        });
        Status::with_reasons(code, reasons)
    }

    fn summary_rule(&self, state: &CycleState, _pod: &PodInfo) -> Option<SummaryRule> {
        state.read::<PreFilterState>()?.summary_rule()
    }
}

impl PreScorePlugin for NodeResourcesFit {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: FeasibleNodes<'_>,
        snapshot: &Snapshot,
    ) -> Status {
        let pod_requests = self.scorer.pod_requests(pod);
        // Upstream 1.37: a DRA-backed extended resource is scored on nodes without it in
        // their allocatable by the devices its DeviceClass offers there.
        let mut dra_devices = Vec::new();
        if dra_handles_extended_resources(state)
            && pod.extended_requests.is_set()
            && snapshot.dra_api_served()
        {
            for name in self.scorer.requested_scalars(&pod_requests) {
                if !is_dra_extended_resource_name(name) {
                    continue;
                }
                if let Some(m) = extended_resource_devices(snapshot.dra(), name, nodes) {
                    dra_devices.push((name.clone(), m));
                }
            }
        }
        state.write(PreScoreState {
            pod_requests,
            dra_devices,
        });
        Status::success()
    }
}

impl ScorePlugin for NodeResourcesFit {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        match state.read::<PreScoreState>() {
            Some(s) if !s.dra_devices.is_empty() => {
                let mut out = [0];
                let n = WithDraDevices {
                    node,
                    devices: &s.dra_devices,
                };
                self.scorer
                    .score_nodes(&s.pod_requests, [&n], &mut out)
                    .map(|()| out[0])
            }
            Some(s) => self.scorer.score(&s.pod_requests, node),
            // Like upstream, work without PreScore (slower: computed per node).
            None => self.scorer.score(&self.scorer.pod_requests(pod), node),
        }
    }

    fn score_nodes(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: FeasibleNodes<'_>,
        out: &mut [i64],
    ) -> Result<(), Status> {
        match state.read::<PreScoreState>() {
            Some(s) if !s.dra_devices.is_empty() => {
                let wrapped: Vec<WithDraDevices<'_>> = nodes
                    .iter()
                    .map(|n| WithDraDevices {
                        node: n,
                        devices: &s.dra_devices,
                    })
                    .collect();
                return self.scorer.score_nodes(&s.pod_requests, &wrapped, out);
            }
            _ => {}
        }
        let nodes = nodes.iter();
        match state.read::<PreScoreState>() {
            Some(s) => self.scorer.score_nodes(&s.pod_requests, nodes, out),
            None => self
                .scorer
                .score_nodes(&self.scorer.pod_requests(pod), nodes, out),
        }
    }

    fn score_summarized(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: FeasibleNodes<'_>,
        summaries: FeasibleSummaries<'_>,
        out: &mut [i64],
    ) -> Result<(), Status> {
        match state.read::<PreScoreState>() {
            Some(s) if s.dra_devices.is_empty() => {
                self.scorer
                    .score_summarized(&s.pod_requests, nodes, summaries, out)
            }
            _ => self.score_nodes(state, pod, nodes, out),
        }
    }
}

#[cfg(test)]
mod tests;

/// As a PlacementScore plugin (upstream's placement scorer of the Fit plugin): the
/// placement's nodes taken together, as one node whose allocatable and requested amounts
/// are their sums (the group's proposed pods already counted), scored with the profile's
/// scoring strategy, so a MostAllocated profile packs groups into fuller domains too.
impl crate::framework::PlacementScorePlugin for NodeResourcesFit {
    fn score_placement(
        &self,
        a: &crate::framework::PlacementAssignment<'_>,
    ) -> Result<i64, String> {
        let mut sum = NodeInfo::default();
        for n in a.nodes {
            sum.allocatable.saturating_add(&n.allocatable);
            sum.requested.saturating_add(&n.requested);
            sum.non_zero_requested.saturating_add(&n.non_zero_requested);
        }
        let nothing_more = vec![0; self.scorer.pod_requests_len()];
        self.scorer
            .score(&nothing_more, &sum)
            .map_err(|s| s.message())
    }
}
