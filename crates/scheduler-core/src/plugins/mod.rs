//! In-tree plugins, one file each, named after the upstream plugin they implement.

use std::sync::Arc;

use crate::framework::PluginFactory;

pub mod catalog;
pub mod default_binder;
pub mod helper;
pub mod image_locality;
pub mod names;
pub mod node_affinity;
pub mod node_name;
pub mod node_ports;
pub mod node_unschedulable;
pub mod queue_sort;
pub mod scheduling_gates;
pub mod taint_toleration;

/// Every plugin ferrosched has built, by name. Names in the catalog but not here are
/// "not built yet": profiles may name them and the framework skips them with a warning.
pub fn in_tree_factories() -> &'static [(&'static str, PluginFactory)] {
    &[
        (names::SCHEDULING_GATES, |_| {
            Ok(Arc::new(scheduling_gates::SchedulingGates))
        }),
        (names::PRIORITY_SORT, |_| {
            Ok(Arc::new(queue_sort::PrioritySort))
        }),
        (names::NODE_UNSCHEDULABLE, |_| {
            Ok(Arc::new(node_unschedulable::NodeUnschedulable))
        }),
        (names::NODE_NAME, |_| Ok(Arc::new(node_name::NodeName))),
        (names::TAINT_TOLERATION, |_| {
            Ok(Arc::new(taint_toleration::TaintToleration))
        }),
        (names::NODE_AFFINITY, |args| {
            Ok(Arc::new(node_affinity::NodeAffinity::from_args(args)?))
        }),
        (names::NODE_PORTS, |_| Ok(Arc::new(node_ports::NodePorts))),
        (names::IMAGE_LOCALITY, |_| {
            Ok(Arc::new(image_locality::ImageLocality))
        }),
        (names::DEFAULT_BINDER, |_| {
            Ok(Arc::new(default_binder::DefaultBinder))
        }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_matches_built_plugins() {
        for (name, factory) in in_tree_factories() {
            let spec = catalog::lookup(name).unwrap_or_else(|| panic!("{name} not in catalog"));
            let plugin = factory(None).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(plugin.name(), *name);
            let mut built = plugin.points().implemented();
            let mut want = spec.points.to_vec();
            built.sort();
            want.sort();
            assert_eq!(built, want, "{name}");
        }
    }
}
