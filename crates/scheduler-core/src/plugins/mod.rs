//! In-tree plugins, one file each, named after the upstream plugin they implement.

use std::sync::Arc;

use crate::framework::PluginFactory;

pub mod catalog;
pub mod default_binder;
pub mod names;
pub mod pod_topology_spread;
pub mod queue_sort;

/// Every plugin ferrosched has built, by name. Names in the catalog but not here are
/// "not built yet": profiles may name them and the framework skips them with a warning.
pub fn in_tree_factories() -> &'static [(&'static str, PluginFactory)] {
    &[
        (names::PRIORITY_SORT, |_| {
            Ok(Arc::new(queue_sort::PrioritySort))
        }),
        (names::DEFAULT_BINDER, |_| {
            Ok(Arc::new(default_binder::DefaultBinder))
        }),
        (
            names::POD_TOPOLOGY_SPREAD,
            pod_topology_spread::PodTopologySpread::factory,
        ),
    ]
}
