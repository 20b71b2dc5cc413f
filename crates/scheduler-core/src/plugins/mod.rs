//! In-tree plugins, one file each, named after the upstream plugin they implement.

use std::sync::Arc;

use crate::framework::PluginFactory;

pub mod catalog;
pub mod default_binder;
pub mod names;
pub mod node_resources_balanced_allocation;
pub mod node_resources_fit;
pub mod queue_sort;
pub mod resource_allocation;

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
            names::NODE_RESOURCES_FIT,
            node_resources_fit::NodeResourcesFit::factory,
        ),
        (
            names::NODE_RESOURCES_BALANCED_ALLOCATION,
            node_resources_balanced_allocation::NodeResourcesBalancedAllocation::factory,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every built plugin implements exactly the points the catalog lists for it.
    #[test]
    fn catalog_matches_built_plugins() {
        for (name, factory) in in_tree_factories() {
            let spec = catalog::lookup(name).unwrap_or_else(|| panic!("{name} not in catalog"));
            let plugin = factory(None).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(plugin.name(), *name);
            let mut built = plugin.points().implemented();
            let mut listed = spec.points.to_vec();
            built.sort();
            listed.sort();
            assert_eq!(built, listed, "{name}");
        }
    }
}
