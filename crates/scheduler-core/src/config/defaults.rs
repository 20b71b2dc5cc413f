//! Upstream v1 defaulting (`SetDefaults_*`, `getDefaultPlugins`, `mergePlugins`), with
//! ferrosched's documented differences in the default plugin list.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use crate::plugins::{catalog, names};

use super::spec::{ArgsSpec, ConfigSpec, LeaderElectionSpec, ProfileSpec};
use super::types::*;

pub const DEFAULT_PARALLELISM: i32 = 16;
/// 0 = adaptive percentage (upstream `DefaultPercentageOfNodesToScore`).
pub const DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE: i32 = 0;
pub const DEFAULT_POD_INITIAL_BACKOFF_SECONDS: i64 = 1;
pub const DEFAULT_POD_MAX_BACKOFF_SECONDS: i64 = 10;
pub const DEFAULT_RESOURCE_LOCK: &str = "leases";
pub const DEFAULT_LOCK_NAMESPACE: &str = "kube-system";
pub const DEFAULT_LOCK_NAME: &str = "kube-scheduler";
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);
pub const DEFAULT_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";
pub const DEFAULT_QPS: f32 = 50.0;
pub const DEFAULT_BURST: i32 = 100;
pub const DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE: i32 = 10;
/// scheduler-plugins' Coscheduling default (`permitWaitingTimeSeconds`).
pub const DEFAULT_PERMIT_WAITING_TIME_SECONDS: i64 = 60;
/// scheduler-plugins' Coscheduling default (`podGroupRejectPercentage`).
pub const DEFAULT_POD_GROUP_REJECT_PERCENTAGE: i32 = 10;
pub const DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE: i32 = 100;
pub const DEFAULT_HARD_POD_AFFINITY_WEIGHT: i32 = 1;
pub const DEFAULT_BIND_TIMEOUT_SECONDS: i64 = 600;
pub const DEFAULT_DRA_FILTER_TIMEOUT: Duration = Duration::from_secs(10);
pub const DEFAULT_DRA_BINDING_TIMEOUT: Duration = Duration::from_secs(600);

/// VolumeBinding's default capacity shape (StorageCapacityScoring on, as upstream since
/// 1.37): the emptier a node's storage would stay, the higher it scores.
pub fn default_volume_binding_shape() -> Vec<UtilizationShapePoint> {
    vec![
        UtilizationShapePoint {
            utilization: 0,
            score: 10,
        },
        UtilizationShapePoint {
            utilization: 100,
            score: 0,
        },
    ]
}

/// The default `multiPoint` list: upstream's current list (1.34+) with ferrosched's
/// RuntimeClass right after NodeAffinity and GangScheduling at the end. DynamicResources sits before DefaultPreemption as
/// upstream's, so its rejections skip preemption.
pub const DEFAULT_MULTI_POINT: &[(&str, Option<i32>)] = &[
    (names::SCHEDULING_GATES, None),
    (names::PRIORITY_SORT, None),
    (names::NODE_UNSCHEDULABLE, None),
    (names::NODE_NAME, None),
    (names::NODE_DECLARED_FEATURES, None),
    (names::TAINT_TOLERATION, Some(3)),
    (names::NODE_AFFINITY, Some(2)),
    (names::RUNTIME_CLASS, None),
    (names::NODE_PORTS, None),
    (names::NODE_RESOURCES_FIT, Some(1)),
    (names::VOLUME_RESTRICTIONS, None),
    (names::NODE_VOLUME_LIMITS, None),
    (names::VOLUME_BINDING, None),
    (names::VOLUME_ZONE, None),
    (names::POD_TOPOLOGY_SPREAD, Some(2)),
    (names::INTER_POD_AFFINITY, Some(2)),
    (names::DYNAMIC_RESOURCES, None),
    (names::DEFAULT_PREEMPTION, None),
    (names::NODE_RESOURCES_BALANCED_ALLOCATION, Some(1)),
    (names::IMAGE_LOCALITY, Some(1)),
    (names::DEFAULT_BINDER, None),
    // Upstream appends it when GenericWorkload is on (beta, off by default in 1.37): pods
    // can only name a PodGroup on clusters that turned the API on, so ferrosched always runs it.
    (names::GANG_SCHEDULING, None),
    // Upstream appends these two with TopologyAwareWorkloadScheduling: a PodGroup can only
    // carry a topology constraint where the cluster has that API, so ferrosched always
    // runs them. NodeResourcesFit (above) is a placement scorer too, with its weight.
    (names::TOPOLOGY_PLACEMENT_GENERATOR, None),
    (names::POD_GROUP_PODS_COUNT, Some(1)),
];

pub fn default_plugins() -> Plugins {
    Plugins {
        multi_point: PluginSet {
            enabled: DEFAULT_MULTI_POINT
                .iter()
                .map(|(n, w)| PluginRef::new(n, *w))
                .collect(),
            disabled: Vec::new(),
        },
        ..Plugins::default()
    }
}

/// Merges a profile's plugins into the defaults, point by point.
pub fn merge_plugins(defaults: &Plugins, custom: &Plugins) -> Plugins {
    let mut out = Plugins {
        multi_point: merge_plugin_set(&defaults.multi_point, &custom.multi_point),
        ..Plugins::default()
    };
    for p in crate::framework::ExtensionPoint::ALL {
        *out.point_mut(p) = merge_plugin_set(defaults.point(p), custom.point(p));
    }
    out
}

/// Disabled names (custom first, then the defaults' own) remove default plugins (`*`: all);
/// a default plugin that is also enabled in `custom` is replaced in place, keeping its
/// position; the other custom plugins follow in their order, duplicates included (they are
/// reported later as double registrations).
pub fn merge_plugin_set(default: &PluginSet, custom: &PluginSet) -> PluginSet {
    let disabled: Vec<String> = custom
        .disabled
        .iter()
        .chain(default.disabled.iter())
        .cloned()
        .collect();
    let disabled_set: HashSet<&str> = disabled.iter().map(String::as_str).collect();
    // Last occurrence wins, as with a Go map filled in order.
    let custom_index: HashMap<&str, usize> = custom
        .enabled
        .iter()
        .enumerate()
        .map(|(i, p)| (p.name.as_str(), i))
        .collect();
    let mut replaced = HashSet::new();
    let mut enabled = Vec::new();
    if !disabled_set.contains("*") {
        for d in &default.enabled {
            if disabled_set.contains(d.name.as_str()) {
                continue;
            }
            match custom_index.get(d.name.as_str()) {
                Some(&i) => {
                    replaced.insert(i);
                    enabled.push(custom.enabled[i].clone());
                }
                None => enabled.push(d.clone()),
            }
        }
    }
    for (i, p) in custom.enabled.iter().enumerate() {
        if !replaced.contains(&i) {
            enabled.push(p.clone());
        }
    }
    PluginSet { enabled, disabled }
}

fn default_resources() -> Vec<ResourceSpec> {
    vec![ResourceSpec::new("cpu", 1), ResourceSpec::new("memory", 1)]
}

fn weights_zero_to_one(resources: &mut [ResourceSpec]) {
    for r in resources {
        if r.weight == 0 {
            r.weight = 1;
        }
    }
}

/// Applies the args defaults; `None` for entries without typed args.
pub(crate) fn default_args(spec: &ArgsSpec) -> Option<PluginArgs> {
    Some(match spec.clone() {
        ArgsSpec::Coscheduling {
            permit_waiting_time_seconds,
            pod_group_backoff_seconds,
            pod_group_reject_percentage,
        } => PluginArgs::Coscheduling(CoschedulingArgs {
            permit_waiting_time_seconds: permit_waiting_time_seconds
                .unwrap_or(DEFAULT_PERMIT_WAITING_TIME_SECONDS),
            pod_group_backoff_seconds: pod_group_backoff_seconds.unwrap_or(0),
            pod_group_reject_percentage: pod_group_reject_percentage
                .unwrap_or(DEFAULT_POD_GROUP_REJECT_PERCENTAGE),
        }),
        ArgsSpec::DefaultPreemption {
            min_candidate_nodes_percentage,
            min_candidate_nodes_absolute,
        } => PluginArgs::DefaultPreemption(DefaultPreemptionArgs {
            min_candidate_nodes_percentage: min_candidate_nodes_percentage
                .unwrap_or(DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE),
            min_candidate_nodes_absolute: min_candidate_nodes_absolute
                .unwrap_or(DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE),
        }),
        ArgsSpec::InterPodAffinity {
            hard_pod_affinity_weight,
            ignore_preferred_terms_of_existing_pods,
        } => PluginArgs::InterPodAffinity(InterPodAffinityArgs {
            hard_pod_affinity_weight: hard_pod_affinity_weight
                .unwrap_or(DEFAULT_HARD_POD_AFFINITY_WEIGHT),
            ignore_preferred_terms_of_existing_pods,
        }),
        ArgsSpec::NodeAffinity(a) => PluginArgs::NodeAffinity(a),
        ArgsSpec::NodeResourcesBalancedAllocation(mut a) => {
            if a.resources.is_empty() {
                a.resources = default_resources();
            }
            weights_zero_to_one(&mut a.resources);
            PluginArgs::NodeResourcesBalancedAllocation(a)
        }
        ArgsSpec::NodeResourcesFit(mut a) => {
            let s = a.scoring_strategy.get_or_insert_with(|| ScoringStrategy {
                type_: ScoringStrategyType::LeastAllocated,
                resources: default_resources(),
                requested_to_capacity_ratio: None,
            });
            if s.resources.is_empty() {
                s.resources = default_resources();
            }
            weights_zero_to_one(&mut s.resources);
            PluginArgs::NodeResourcesFit(a)
        }
        ArgsSpec::PodTopologySpread {
            default_constraints,
            defaulting_type,
        } => PluginArgs::PodTopologySpread(PodTopologySpreadArgs {
            default_constraints,
            defaulting_type: defaulting_type
                .unwrap_or(PodTopologySpreadConstraintsDefaulting::System),
        }),
        ArgsSpec::VolumeBinding {
            bind_timeout_seconds,
            shape,
        } => PluginArgs::VolumeBinding(VolumeBindingArgs {
            bind_timeout_seconds: bind_timeout_seconds.unwrap_or(DEFAULT_BIND_TIMEOUT_SECONDS),
            // An empty list is defaulted too, as upstream (`len(Shape) == 0`).
            shape: shape
                .filter(|s| !s.is_empty())
                .unwrap_or_else(default_volume_binding_shape),
        }),
        ArgsSpec::DynamicResources {
            filter_timeout,
            binding_timeout,
        } => PluginArgs::DynamicResources(DynamicResourcesArgs {
            filter_timeout: filter_timeout.unwrap_or(DEFAULT_DRA_FILTER_TIMEOUT),
            binding_timeout: binding_timeout.unwrap_or(DEFAULT_DRA_BINDING_TIMEOUT),
        }),
        ArgsSpec::Untyped { .. } => return None,
    })
}

/// Default args of the plugin named `plugin`, if it takes args.
pub fn default_args_for(plugin: &str) -> Option<PluginArgs> {
    let kind = catalog::lookup(plugin)?.args_kind?;
    default_args(&ArgsSpec::empty(kind)?)
}

fn default_profile(spec: &ProfileSpec, name: String) -> Profile {
    let plugins = merge_plugins(&default_plugins(), &spec.plugins);
    let mut plugin_config: Vec<PluginConfig> = spec
        .plugin_config
        .iter()
        .filter_map(|c| {
            default_args(&c.args).map(|args| PluginConfig {
                name: c.name.clone(),
                args,
            })
        })
        .collect();
    let existing: HashSet<&str> = spec.plugin_config.iter().map(|c| c.name.as_str()).collect();
    for name in plugins.enabled_names() {
        if existing.contains(name.as_str()) {
            continue;
        }
        if let Some(args) = default_args_for(&name) {
            plugin_config.push(PluginConfig { name, args });
        }
    }
    Profile {
        scheduler_name: name,
        percentage_of_nodes_to_score: spec.percentage_of_nodes_to_score,
        percentage_of_placements_to_score: spec.percentage_of_placements_to_score,
        plugins,
        plugin_config,
    }
}

fn default_leader_election(le: &LeaderElectionSpec) -> LeaderElectionConfiguration {
    let or = |d: Option<Duration>, default: Duration| d.filter(|d| !d.is_zero()).unwrap_or(default);
    let or_str = |s: &str, default: &str| {
        if s.is_empty() {
            default.to_string()
        } else {
            s.to_string()
        }
    };
    LeaderElectionConfiguration {
        leader_elect: le.leader_elect.unwrap_or(true),
        lease_duration: or(le.lease_duration, DEFAULT_LEASE_DURATION),
        renew_deadline: or(le.renew_deadline, DEFAULT_RENEW_DEADLINE),
        retry_period: or(le.retry_period, DEFAULT_RETRY_PERIOD),
        resource_lock: or_str(&le.resource_lock, DEFAULT_RESOURCE_LOCK),
        resource_name: or_str(&le.resource_name, DEFAULT_LOCK_NAME),
        resource_namespace: or_str(&le.resource_namespace, DEFAULT_LOCK_NAMESPACE),
    }
}

/// Upstream `SetDefaults_KubeSchedulerConfiguration` and the profile/args defaulting it
/// triggers.
pub(crate) fn apply(spec: &ConfigSpec) -> KubeSchedulerConfiguration {
    let profile_specs: Vec<ProfileSpec> = if spec.profiles.is_empty() {
        vec![ProfileSpec::default()]
    } else {
        spec.profiles.clone()
    };
    let single = profile_specs.len() == 1;
    let profiles = profile_specs
        .iter()
        .map(|p| {
            // Only a lone profile gets the default name; validation reports the others.
            let name = match &p.scheduler_name {
                Some(n) => n.clone(),
                None if single => DEFAULT_SCHEDULER_NAME.to_string(),
                None => String::new(),
            };
            default_profile(p, name)
        })
        .collect();
    let cc = &spec.client_connection;
    let enable_profiling = spec.enable_profiling.unwrap_or(true);
    KubeSchedulerConfiguration {
        parallelism: spec.parallelism.unwrap_or(DEFAULT_PARALLELISM),
        leader_election: default_leader_election(&spec.leader_election),
        client_connection: ClientConnectionConfiguration {
            kubeconfig: cc.kubeconfig.clone(),
            accept_content_types: cc.accept_content_types.clone(),
            content_type: if cc.content_type.is_empty() {
                DEFAULT_CONTENT_TYPE.to_string()
            } else {
                cc.content_type.clone()
            },
            qps: if cc.qps == 0.0 { DEFAULT_QPS } else { cc.qps },
            burst: if cc.burst == 0 {
                DEFAULT_BURST
            } else {
                cc.burst
            },
        },
        enable_profiling,
        enable_contention_profiling: spec.enable_contention_profiling.unwrap_or(enable_profiling),
        percentage_of_nodes_to_score: Some(
            spec.percentage_of_nodes_to_score
                .unwrap_or(DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE),
        ),
        percentage_of_placements_to_score: spec.percentage_of_placements_to_score,
        pod_initial_backoff_seconds: spec
            .pod_initial_backoff_seconds
            .unwrap_or(DEFAULT_POD_INITIAL_BACKOFF_SECONDS),
        pod_max_backoff_seconds: spec
            .pod_max_backoff_seconds
            .unwrap_or(DEFAULT_POD_MAX_BACKOFF_SECONDS),
        profiles,
        extenders: spec
            .extenders
            .iter()
            .map(|e| {
                let mut e = e.clone();
                if e.http_timeout.is_zero() {
                    e.http_timeout = super::types::DEFAULT_EXTENDER_TIMEOUT;
                }
                e
            })
            .collect(),
        delay_cache_until_active: spec.delay_cache_until_active,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(enabled: &[(&str, Option<i32>)], disabled: &[&str]) -> PluginSet {
        PluginSet {
            enabled: enabled.iter().map(|(n, w)| PluginRef::new(n, *w)).collect(),
            disabled: disabled.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn merge_replaces_in_place_and_appends_custom() {
        let d = set(&[("A", None), ("B", Some(1)), ("C", None)], &[]);
        let c = set(&[("X", None), ("B", Some(5))], &["C"]);
        let m = merge_plugin_set(&d, &c);
        assert_eq!(m, set(&[("A", None), ("B", Some(5)), ("X", None)], &["C"]));
    }

    #[test]
    fn merge_star_drops_all_defaults() {
        let d = set(&[("A", None), ("B", None)], &[]);
        let c = set(&[("B", None), ("X", None)], &["*"]);
        assert_eq!(
            merge_plugin_set(&d, &c),
            set(&[("B", None), ("X", None)], &["*"])
        );
    }

    #[test]
    fn merge_keeps_duplicate_custom_entries() {
        let d = set(&[("A", None)], &[]);
        let c = set(&[("A", Some(1)), ("A", Some(2))], &[]);
        // The last duplicate replaces the default; the first is appended (and later
        // reported as a double registration).
        assert_eq!(
            merge_plugin_set(&d, &c),
            set(&[("A", Some(2)), ("A", Some(1))], &[])
        );
    }
}
