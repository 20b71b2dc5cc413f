//! What every known plugin is, independent of whether ferrosched has built it yet:
//! its extension points and the kind of its args. Config validation reads this table;
//! the framework checks each built plugin against it (see the `catalog_matches_built_plugins` test).

use crate::framework::ExtensionPoint::{self, *};

use super::names::*;

/// Static facts about one plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PluginSpec {
    pub name: &'static str,
    /// Points the plugin implements; `multiPoint` expands to exactly these.
    pub points: &'static [ExtensionPoint],
    /// The `kind` of its args in `pluginConfig` (`NodeResourcesFitArgs`), if it takes any.
    pub args_kind: Option<&'static str>,
    /// Where it comes from; ferrosched's own plugins are not upstream's.
    pub origin: Origin,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Upstream,
    Ferrosched,
    /// kubernetes-sigs/scheduler-plugins.
    SchedulerPlugins,
}

const fn spec(
    name: &'static str,
    points: &'static [ExtensionPoint],
    args_kind: Option<&'static str>,
) -> PluginSpec {
    PluginSpec {
        name,
        points,
        args_kind,
        origin: Origin::Upstream,
    }
}

/// Every plugin a profile may name, in upstream's default order.
pub const PLUGINS: &[PluginSpec] = &[
    spec(SCHEDULING_GATES, &[PreEnqueue], None),
    spec(GANG_SCHEDULING, &[PreEnqueue], None),
    spec(PRIORITY_SORT, &[QueueSort], None),
    spec(NODE_UNSCHEDULABLE, &[Filter], None),
    spec(NODE_NAME, &[Filter], None),
    spec(NODE_DECLARED_FEATURES, &[PreFilter, Filter], None),
    spec(TAINT_TOLERATION, &[Filter, PreScore, Score], None),
    spec(
        NODE_AFFINITY,
        &[PreFilter, Filter, PreScore, Score],
        Some("NodeAffinityArgs"),
    ),
    PluginSpec {
        name: RUNTIME_CLASS,
        points: &[PreFilter, Filter],
        args_kind: None,
        origin: Origin::Ferrosched,
    },
    spec(NODE_PORTS, &[PreFilter, Filter], None),
    spec(
        NODE_RESOURCES_FIT,
        &[PreFilter, Filter, PreScore, Score, PlacementScore],
        Some("NodeResourcesFitArgs"),
    ),
    spec(VOLUME_RESTRICTIONS, &[PreFilter, Filter], None),
    spec(NODE_VOLUME_LIMITS, &[PreFilter, Filter], None),
    spec(
        VOLUME_BINDING,
        &[PreFilter, Filter, Reserve, PreBind, PreScore, Score],
        Some("VolumeBindingArgs"),
    ),
    spec(VOLUME_ZONE, &[PreFilter, Filter], None),
    spec(
        POD_TOPOLOGY_SPREAD,
        &[PreFilter, Filter, PreScore, Score],
        Some("PodTopologySpreadArgs"),
    ),
    spec(
        INTER_POD_AFFINITY,
        &[PreFilter, Filter, PreScore, Score],
        Some("InterPodAffinityArgs"),
    ),
    spec(
        DYNAMIC_RESOURCES,
        &[
            PreEnqueue, PreFilter, Filter, PostFilter, Score, Reserve, PreBind,
        ],
        Some("DynamicResourcesArgs"),
    ),
    spec(
        DEFAULT_PREEMPTION,
        &[PostFilter],
        Some("DefaultPreemptionArgs"),
    ),
    spec(
        NODE_RESOURCES_BALANCED_ALLOCATION,
        &[PreScore, Score],
        Some("NodeResourcesBalancedAllocationArgs"),
    ),
    spec(IMAGE_LOCALITY, &[Score], None),
    spec(DEFAULT_BINDER, &[Bind], None),
    spec(TOPOLOGY_PLACEMENT_GENERATOR, &[PlacementGenerate], None),
    spec(POD_GROUP_PODS_COUNT, &[PlacementScore], None),
    PluginSpec {
        name: COSCHEDULING,
        points: &[
            PreEnqueue, QueueSort, PreFilter, PostFilter, Reserve, Permit,
        ],
        args_kind: Some("CoschedulingArgs"),
        origin: Origin::SchedulerPlugins,
    },
    PluginSpec {
        name: SCHEDULING_POLICY,
        points: &[PreEnqueue],
        args_kind: None,
        origin: Origin::Ferrosched,
    },
];

/// Looks a plugin up by its exact name.
pub fn lookup(name: &str) -> Option<&'static PluginSpec> {
    PLUGINS.iter().find(|p| p.name == name)
}

/// Why a name that is not in [`PLUGINS`] is still not a typo, if it is one of upstream's.
pub fn known_but_unsupported(name: &str) -> Option<&'static str> {
    if REMOVED_UPSTREAM.contains(&name) {
        return Some("this plugin was removed from kube-scheduler; drop it from the config");
    }
    None
}
