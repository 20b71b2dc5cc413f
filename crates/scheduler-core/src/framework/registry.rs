//! Plugin factories by name (upstream: `runtime.Registry`).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::Plugin;
use crate::config::PluginArgs;

/// Builds a plugin from its (already defaulted and validated) args.
pub type PluginFactory = fn(args: Option<&PluginArgs>) -> Result<Arc<dyn Plugin>, String>;

/// A factory that may hold state: the controller builds the SchedulingPolicy plugin around
/// the policy store it keeps current.
pub type SharedFactory =
    Arc<dyn Fn(Option<&PluginArgs>) -> Result<Arc<dyn Plugin>, String> + Send + Sync>;

/// Maps plugin names to factories. `Registry::in_tree()` holds every plugin ferrosched has
/// built; tests add fakes with [`Registry::register`].
#[derive(Clone, Default)]
pub struct Registry {
    factories: BTreeMap<String, SharedFactory>,
}

impl Registry {
    pub fn new() -> Self {
        Self::default()
    }

    /// The plugins shipped with ferrosched.
    pub fn in_tree() -> Self {
        let mut r = Registry::new();
        for (name, factory) in crate::plugins::in_tree_factories() {
            r.register(*name, *factory);
        }
        r
    }

    /// Adds or replaces a factory.
    pub fn register(&mut self, name: impl Into<String>, factory: PluginFactory) {
        self.factories.insert(name.into(), Arc::new(factory));
    }

    /// Adds or replaces a factory that holds state.
    pub fn register_shared(&mut self, name: impl Into<String>, factory: SharedFactory) {
        self.factories.insert(name.into(), factory);
    }

    pub fn get(&self, name: &str) -> Option<SharedFactory> {
        self.factories.get(name).cloned()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.factories.keys().map(String::as_str)
    }
}
