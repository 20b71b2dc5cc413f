//! The document as written, before defaulting: fields whose absence matters upstream
//! (Go pointers) are `Option`s here, and list entries remember their index in the file.

use std::time::Duration;

use k8s_openapi::api::core::v1::TopologySpreadConstraint;

use super::types::{
    ClientConnectionConfiguration, Extender, NodeAffinityArgs, NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs, Plugins, PodTopologySpreadConstraintsDefaulting, UtilizationShapePoint,
};

#[derive(Debug, Clone, Default)]
pub(crate) struct ConfigSpec {
    pub parallelism: Option<i32>,
    pub leader_election: LeaderElectionSpec,
    pub client_connection: ClientConnectionConfiguration,
    pub enable_profiling: Option<bool>,
    pub enable_contention_profiling: Option<bool>,
    pub percentage_of_nodes_to_score: Option<i32>,
    pub percentage_of_placements_to_score: Option<i32>,
    pub pod_initial_backoff_seconds: Option<i64>,
    pub pod_max_backoff_seconds: Option<i64>,
    pub profiles: Vec<ProfileSpec>,
    pub extenders: Vec<Extender>,
    pub delay_cache_until_active: bool,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct LeaderElectionSpec {
    pub leader_elect: Option<bool>,
    pub lease_duration: Option<Duration>,
    pub renew_deadline: Option<Duration>,
    pub retry_period: Option<Duration>,
    pub resource_lock: String,
    pub resource_name: String,
    pub resource_namespace: String,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct ProfileSpec {
    pub scheduler_name: Option<String>,
    pub percentage_of_nodes_to_score: Option<i32>,
    pub percentage_of_placements_to_score: Option<i32>,
    pub plugins: Plugins,
    pub plugin_config: Vec<PluginConfigSpec>,
}

#[derive(Debug, Clone)]
pub(crate) struct PluginConfigSpec {
    /// Index in the file's `pluginConfig` list (entries without typed args are dropped).
    pub index: usize,
    pub name: String,
    pub args: ArgsSpec,
}

#[derive(Debug, Clone)]
pub(crate) enum ArgsSpec {
    Coscheduling {
        permit_waiting_time_seconds: Option<i64>,
        pod_group_backoff_seconds: Option<i64>,
        pod_group_reject_percentage: Option<i32>,
    },
    DefaultPreemption {
        min_candidate_nodes_percentage: Option<i32>,
        min_candidate_nodes_absolute: Option<i32>,
    },
    DynamicResources {
        filter_timeout: Option<Duration>,
        binding_timeout: Option<Duration>,
    },
    InterPodAffinity {
        hard_pod_affinity_weight: Option<i32>,
        ignore_preferred_terms_of_existing_pods: bool,
    },
    NodeAffinity(NodeAffinityArgs),
    NodeResourcesBalancedAllocation(NodeResourcesBalancedAllocationArgs),
    NodeResourcesFit(NodeResourcesFitArgs),
    PodTopologySpread {
        default_constraints: Vec<TopologySpreadConstraint>,
        defaulting_type: Option<PodTopologySpreadConstraintsDefaulting>,
    },
    VolumeBinding {
        bind_timeout_seconds: Option<i64>,
        /// `Some` as soon as the field is written, even as `[]`.
        shape: Option<Vec<UtilizationShapePoint>>,
    },
    /// A plugin without an args kind (or unknown): nothing to type; kept so validation can
    /// say why the entry has no effect.
    Untyped {
        has_args: bool,
    },
}

impl ArgsSpec {
    /// Empty args of the kind `kind`, as decoding an empty `args:` yields.
    pub fn empty(kind: &str) -> Option<ArgsSpec> {
        Some(match kind {
            "CoschedulingArgs" => ArgsSpec::Coscheduling {
                permit_waiting_time_seconds: None,
                pod_group_backoff_seconds: None,
                pod_group_reject_percentage: None,
            },
            "DefaultPreemptionArgs" => ArgsSpec::DefaultPreemption {
                min_candidate_nodes_percentage: None,
                min_candidate_nodes_absolute: None,
            },
            "DynamicResourcesArgs" => ArgsSpec::DynamicResources {
                filter_timeout: None,
                binding_timeout: None,
            },
            "InterPodAffinityArgs" => ArgsSpec::InterPodAffinity {
                hard_pod_affinity_weight: None,
                ignore_preferred_terms_of_existing_pods: false,
            },
            "NodeAffinityArgs" => ArgsSpec::NodeAffinity(NodeAffinityArgs::default()),
            "NodeResourcesBalancedAllocationArgs" => ArgsSpec::NodeResourcesBalancedAllocation(
                NodeResourcesBalancedAllocationArgs::default(),
            ),
            "NodeResourcesFitArgs" => ArgsSpec::NodeResourcesFit(NodeResourcesFitArgs::default()),
            "PodTopologySpreadArgs" => ArgsSpec::PodTopologySpread {
                default_constraints: Vec::new(),
                defaulting_type: None,
            },
            "VolumeBindingArgs" => ArgsSpec::VolumeBinding {
                bind_timeout_seconds: None,
                shape: None,
            },
            _ => return None,
        })
    }
}
