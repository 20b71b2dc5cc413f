//! Typed plugin args (`pluginConfig[].args`), v1 fields, after defaulting.

use std::time::Duration;

use k8s_openapi::api::core::v1::{NodeAffinity, TopologySpreadConstraint};
use serde::{Serialize, Serializer};

/// Args of one in-tree plugin, selected by the plugin's name.
#[derive(Debug, Clone, PartialEq)]
pub enum PluginArgs {
    Coscheduling(CoschedulingArgs),
    DefaultPreemption(DefaultPreemptionArgs),
    DynamicResources(DynamicResourcesArgs),
    InterPodAffinity(InterPodAffinityArgs),
    NodeAffinity(NodeAffinityArgs),
    NodeResourcesBalancedAllocation(NodeResourcesBalancedAllocationArgs),
    NodeResourcesFit(NodeResourcesFitArgs),
    PodTopologySpread(PodTopologySpreadArgs),
    VolumeBinding(VolumeBindingArgs),
}

impl PluginArgs {
    /// The args `kind`, e.g. `NodeResourcesFitArgs`.
    pub fn kind(&self) -> &'static str {
        match self {
            PluginArgs::Coscheduling(_) => "CoschedulingArgs",
            PluginArgs::DefaultPreemption(_) => "DefaultPreemptionArgs",
            PluginArgs::DynamicResources(_) => "DynamicResourcesArgs",
            PluginArgs::InterPodAffinity(_) => "InterPodAffinityArgs",
            PluginArgs::NodeAffinity(_) => "NodeAffinityArgs",
            PluginArgs::NodeResourcesBalancedAllocation(_) => "NodeResourcesBalancedAllocationArgs",
            PluginArgs::NodeResourcesFit(_) => "NodeResourcesFitArgs",
            PluginArgs::PodTopologySpread(_) => "PodTopologySpreadArgs",
            PluginArgs::VolumeBinding(_) => "VolumeBindingArgs",
        }
    }
}

impl Serialize for PluginArgs {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Tagged<'a, T: Serialize> {
            api_version: &'static str,
            kind: &'static str,
            #[serde(flatten)]
            inner: &'a T,
        }
        fn tagged<T: Serialize, S: Serializer>(
            kind: &'static str,
            inner: &T,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            Tagged {
                api_version: super::types::API_VERSION,
                kind,
                inner,
            }
            .serialize(s)
        }
        let kind = self.kind();
        match self {
            PluginArgs::Coscheduling(a) => tagged(kind, a, s),
            PluginArgs::DefaultPreemption(a) => tagged(kind, a, s),
            PluginArgs::DynamicResources(a) => tagged(kind, a, s),
            PluginArgs::InterPodAffinity(a) => tagged(kind, a, s),
            PluginArgs::NodeAffinity(a) => tagged(kind, a, s),
            PluginArgs::NodeResourcesBalancedAllocation(a) => tagged(kind, a, s),
            PluginArgs::NodeResourcesFit(a) => tagged(kind, a, s),
            PluginArgs::PodTopologySpread(a) => tagged(kind, a, s),
            PluginArgs::VolumeBinding(a) => tagged(kind, a, s),
        }
    }
}

/// scheduler-plugins' Coscheduling args (its v1 config): how long the group's pods may wait
/// at Permit for their siblings (and a group that passed its `minResources` check is not
/// checked again), how long a group that failed is held back, and below what share of
/// `minMember` still unplaced a failure does not count against the group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CoschedulingArgs {
    pub permit_waiting_time_seconds: i64,
    pub pod_group_backoff_seconds: i64,
    pub pod_group_reject_percentage: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DefaultPreemptionArgs {
    pub min_candidate_nodes_percentage: i32,
    pub min_candidate_nodes_absolute: i32,
}

/// DynamicResources' args (upstream v1 since 1.34): `filterTimeout` limits Filter's search
/// per node; `bindingTimeout` limits the wait for device binding conditions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DynamicResourcesArgs {
    /// Per-node Filter time limit; zero turns the limit off.
    #[serde(serialize_with = "super::duration::serialize")]
    pub filter_timeout: Duration,
    /// How long PreBind waits for device binding conditions.
    #[serde(serialize_with = "super::duration::serialize")]
    pub binding_timeout: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InterPodAffinityArgs {
    pub hard_pod_affinity_weight: i32,
    pub ignore_preferred_terms_of_existing_pods: bool,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeAffinityArgs {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub added_affinity: Option<NodeAffinity>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeResourcesBalancedAllocationArgs {
    pub resources: Vec<ResourceSpec>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeResourcesFitArgs {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ignored_resources: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ignored_resource_groups: Vec<String>,
    /// Always set after defaulting (LeastAllocated on cpu and memory).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scoring_strategy: Option<ScoringStrategy>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ScoringStrategyType {
    LeastAllocated,
    MostAllocated,
    RequestedToCapacityRatio,
}

impl ScoringStrategyType {
    pub const ALL: [ScoringStrategyType; 3] = [
        Self::LeastAllocated,
        Self::MostAllocated,
        Self::RequestedToCapacityRatio,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::LeastAllocated => "LeastAllocated",
            Self::MostAllocated => "MostAllocated",
            Self::RequestedToCapacityRatio => "RequestedToCapacityRatio",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScoringStrategy {
    #[serde(rename = "type")]
    pub type_: ScoringStrategyType,
    pub resources: Vec<ResourceSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_to_capacity_ratio: Option<RequestedToCapacityRatioParam>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct RequestedToCapacityRatioParam {
    pub shape: Vec<UtilizationShapePoint>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct UtilizationShapePoint {
    pub utilization: i32,
    pub score: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceSpec {
    pub name: String,
    pub weight: i64,
}

impl ResourceSpec {
    pub fn new(name: &str, weight: i64) -> Self {
        ResourceSpec {
            name: name.to_string(),
            weight,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum PodTopologySpreadConstraintsDefaulting {
    /// Kubernetes' built-in constraints (spread over nodes and zones).
    System,
    /// The constraints in `defaultConstraints`.
    List,
}

impl PodTopologySpreadConstraintsDefaulting {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::System => "System",
            Self::List => "List",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodTopologySpreadArgs {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub default_constraints: Vec<TopologySpreadConstraint>,
    pub defaulting_type: PodTopologySpreadConstraintsDefaulting,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeBindingArgs {
    pub bind_timeout_seconds: i64,
    /// Storage-capacity scoring shape (StorageCapacityScoring, default on since 1.37):
    /// defaults to 10 at 0% utilisation falling to 0 at 100%.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shape: Vec<UtilizationShapePoint>,
}
