//! Every plugin name ferrosched knows, in one list (upstream: `plugins/names/names.go`).

pub const SCHEDULING_GATES: &str = "SchedulingGates";
pub const PRIORITY_SORT: &str = "PrioritySort";
pub const NODE_UNSCHEDULABLE: &str = "NodeUnschedulable";
pub const NODE_NAME: &str = "NodeName";
pub const NODE_DECLARED_FEATURES: &str = "NodeDeclaredFeatures";
pub const TAINT_TOLERATION: &str = "TaintToleration";
pub const NODE_AFFINITY: &str = "NodeAffinity";
pub const NODE_PORTS: &str = "NodePorts";
pub const NODE_RESOURCES_FIT: &str = "NodeResourcesFit";
pub const NODE_RESOURCES_BALANCED_ALLOCATION: &str = "NodeResourcesBalancedAllocation";
pub const VOLUME_RESTRICTIONS: &str = "VolumeRestrictions";
pub const NODE_VOLUME_LIMITS: &str = "NodeVolumeLimits";
pub const VOLUME_BINDING: &str = "VolumeBinding";
pub const VOLUME_ZONE: &str = "VolumeZone";
pub const POD_TOPOLOGY_SPREAD: &str = "PodTopologySpread";
pub const INTER_POD_AFFINITY: &str = "InterPodAffinity";
pub const DEFAULT_PREEMPTION: &str = "DefaultPreemption";
pub const IMAGE_LOCALITY: &str = "ImageLocality";
pub const DEFAULT_BINDER: &str = "DefaultBinder";
/// Workload-aware scheduling (1.35+): a gang's PodGroup quorum before queueing.
pub const GANG_SCHEDULING: &str = "GangScheduling";
/// Topology-aware workload scheduling (1.36+): a topology-constrained PodGroup's candidate
/// placements, one per domain.
pub const TOPOLOGY_PLACEMENT_GENERATOR: &str = "TopologyPlacementGenerator";
/// Scores a group's placements by how many of its pods each one holds.
pub const POD_GROUP_PODS_COUNT: &str = "PodGroupPodsCount";
/// kubernetes-sigs/scheduler-plugins' Coscheduling (its PodGroups, its config).
pub const COSCHEDULING: &str = "Coscheduling";

/// ferrosched's own: the RuntimeClass predicate from the RuntimeClass scheduling KEP.
pub const RUNTIME_CLASS: &str = "RuntimeClass";
/// ferrosched's own: admin SchedulingPolicy enforced before queueing.
pub const SCHEDULING_POLICY: &str = "SchedulingPolicy";

/// Upstream in-tree plugins ferrosched recognises but does not run. Configs naming them
/// get an error that says so instead of "unknown plugin".
pub const DYNAMIC_RESOURCES: &str = "DynamicResources";
/// Removed upstream in v1.31 (folded into NodeVolumeLimits); old configs still disable them.
pub const REMOVED_UPSTREAM: &[&str] = &[
    "EBSLimits",
    "GCEPDLimits",
    "AzureDiskLimits",
    "CinderLimits",
    "SelectorSpread",
    "ServiceAffinity",
    "NodeLabel",
    "NodePreferAvoidPods",
    "NodeResourcesLeastAllocated",
    "NodeResourcesMostAllocated",
    "RequestedToCapacityRatio",
];
