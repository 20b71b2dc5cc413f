//! In-tree plugins, one file each, named after the upstream plugin they implement.

use std::sync::Arc;

use crate::framework::PluginFactory;

pub mod catalog;
pub mod default_binder;
pub mod default_preemption;
pub mod names;
pub mod queue_sort;
pub mod runtime_class;

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
        (names::RUNTIME_CLASS, |_| {
            Ok(Arc::new(runtime_class::RuntimeClass))
        }),
        (names::DEFAULT_PREEMPTION, default_preemption::factory),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every built plugin implements exactly the points the catalog (and so config
    /// validation and multiPoint expansion) says it does.
    #[test]
    fn catalog_matches_built_plugins() {
        for (name, factory) in in_tree_factories() {
            let spec =
                catalog::lookup(name).unwrap_or_else(|| panic!("{name} is not in the catalog"));
            let plugin = factory(None).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(plugin.name(), *name);
            let implemented = Arc::clone(&plugin).points().implemented();
            let mut expected = spec.points.to_vec();
            expected.sort();
            assert_eq!(implemented, expected, "{name}");
        }
    }
}
