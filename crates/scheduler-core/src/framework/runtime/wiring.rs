//! Building a [`Framework`] from an expanded profile: each plugin is instantiated once and
//! wired into every extension point it is configured for, in config order.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use super::{Framework, Named};
use crate::config::ExpandedProfile;
use crate::framework::interface::*;
use crate::framework::{ExtensionPoint, PluginEvents, Registry};
use crate::plugins::catalog;

/// Why a framework could not be built; the config validation catches these first, so
/// seeing one means a bug or a plugin registered outside the catalog.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameworkError {
    pub profile: String,
    pub message: String,
}

impl fmt::Display for FrameworkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "profile {:?}: {}", self.profile, self.message)
    }
}

impl std::error::Error for FrameworkError {}

impl Framework {
    /// Instantiates every plugin the profile names, once, and wires it into each point.
    ///
    /// Plugins the catalog knows but ferrosched has not built yet are left out and listed in
    /// [`Framework::not_built`], so `config validate` can warn about them.
    pub fn new(spec: &ExpandedProfile, registry: &Registry) -> Result<Framework, FrameworkError> {
        let err = |message: String| FrameworkError {
            profile: spec.scheduler_name.clone(),
            message,
        };
        let mut instances: BTreeMap<&str, (Arc<dyn Plugin>, PluginPoints)> = BTreeMap::new();
        let mut not_built: Vec<String> = Vec::new();
        for name in spec.points.values().flatten() {
            if instances.contains_key(name.as_str()) || not_built.contains(name) {
                continue;
            }
            match registry.get(name) {
                Some(factory) => {
                    let plugin = factory(spec.plugin_args.get(name).and_then(Option::as_ref))
                        .map_err(|e| err(format!("initializing plugin {name:?}: {e}")))?;
                    if plugin.name() != name {
                        return Err(err(format!(
                            "factory for {name:?} built a plugin named {:?}",
                            plugin.name()
                        )));
                    }
                    let points = Arc::clone(&plugin).points();
                    instances.insert(name, (plugin, points));
                }
                None if catalog::lookup(name).is_some() => not_built.push(name.clone()),
                None => return Err(err(format!("plugin {name:?} does not exist"))),
            }
        }

        // Collects the trait objects of one point, in config order.
        macro_rules! wire {
            ($point:expr, $field:ident) => {{
                let mut out = Vec::new();
                for name in spec.points.get(&$point).into_iter().flatten() {
                    let Some((plugin, points)) = instances.get(name.as_str()) else {
                        continue;
                    };
                    match &points.$field {
                        Some(p) => out.push(Named {
                            name: plugin.name(),
                            plugin: Arc::clone(p),
                        }),
                        None => {
                            return Err(err(format!(
                                "plugin {name:?} does not extend {} plugin",
                                $point.display_name()
                            )));
                        }
                    }
                }
                out
            }};
        }

        let pre_enqueue = wire!(ExtensionPoint::PreEnqueue, pre_enqueue);
        let mut queue_sort = wire!(ExtensionPoint::QueueSort, queue_sort);
        let pre_filter = wire!(ExtensionPoint::PreFilter, pre_filter);
        let filter = wire!(ExtensionPoint::Filter, filter);
        let post_filter = wire!(ExtensionPoint::PostFilter, post_filter);
        let pre_score = wire!(ExtensionPoint::PreScore, pre_score);
        let score_plugins = wire!(ExtensionPoint::Score, score);
        let reserve = wire!(ExtensionPoint::Reserve, reserve);
        let permit = wire!(ExtensionPoint::Permit, permit);
        let pre_bind = wire!(ExtensionPoint::PreBind, pre_bind);
        let bind = wire!(ExtensionPoint::Bind, bind);
        let post_bind = wire!(ExtensionPoint::PostBind, post_bind);
        let placement_generate = wire!(ExtensionPoint::PlacementGenerate, placement_generate);
        let placement_score = wire!(ExtensionPoint::PlacementScore, placement_score)
            .into_iter()
            .map(|p| {
                let w = spec.placement_weight(p.name).map_or(1, i64::from).max(1);
                (p, w)
            })
            .collect();

        // Group plugins: the PreFilter plugins that look at a group as a whole too.
        let pod_group: Vec<Named<dyn PodGroupPlugin>> = spec
            .points
            .get(&ExtensionPoint::PreFilter)
            .into_iter()
            .flatten()
            .filter_map(|name| instances.get(name.as_str()))
            .filter_map(|(plugin, points)| {
                points.pod_group.as_ref().map(|p| Named {
                    name: plugin.name(),
                    plugin: Arc::clone(p),
                })
            })
            .collect();

        if queue_sort.len() != 1 {
            return Err(err(format!(
                "only one queue sort plugin required for profile with scheduler name {:?}, but got {}",
                spec.scheduler_name,
                queue_sort.len()
            )));
        }
        if bind.is_empty() {
            return Err(err(format!(
                "at least one bind plugin is needed for profile with scheduler name {:?}",
                spec.scheduler_name
            )));
        }
        for (point, n) in [
            (ExtensionPoint::PreFilter, pre_filter.len()),
            (ExtensionPoint::Filter, filter.len()),
            (ExtensionPoint::Score, score_plugins.len()),
        ] {
            if n > 64 {
                return Err(err(format!(
                    "more than 64 {} plugins are not supported",
                    point.display_name()
                )));
            }
        }
        let position =
            |names: &[&'static str], name: &'static str| names.iter().position(|n| *n == name);
        let filter_names: Vec<&'static str> = filter.iter().map(|p| p.name).collect();
        let score_names: Vec<&'static str> = score_plugins.iter().map(|p| p.name).collect();
        let pre_filter_to_filter = pre_filter
            .iter()
            .map(|p| position(&filter_names, p.name))
            .collect();
        let pre_score_to_score = pre_score
            .iter()
            .map(|p| position(&score_names, p.name))
            .collect();
        let score = score_plugins
            .into_iter()
            .map(|p| {
                let w = spec.weight(p.name).map_or(1, i64::from).max(1);
                (p, w)
            })
            .collect();
        // Every plugin whose answers a signature stands for, once each, in point order.
        let mut signers: Vec<Named<dyn Plugin>> = Vec::new();
        for point in [
            ExtensionPoint::PreFilter,
            ExtensionPoint::Filter,
            ExtensionPoint::PreScore,
            ExtensionPoint::Score,
        ] {
            for name in spec.points.get(&point).into_iter().flatten() {
                if let Some((plugin, _)) = instances.get(name.as_str())
                    && !signers.iter().any(|s| s.name == plugin.name())
                {
                    signers.push(Named {
                        name: plugin.name(),
                        plugin: Arc::clone(plugin),
                    });
                }
            }
        }
        // Upstream asks the enqueue extensions: plugins that can keep a pod unscheduled.
        let mut events = PluginEvents::new();
        let mut rejecting = Vec::new();
        for (name, (plugin, _)) in &instances {
            let rejects = [
                ExtensionPoint::PreEnqueue,
                ExtensionPoint::PreFilter,
                ExtensionPoint::Filter,
                ExtensionPoint::Reserve,
                ExtensionPoint::Permit,
            ]
            .iter()
            .any(|pt| {
                spec.points
                    .get(pt)
                    .is_some_and(|v| v.iter().any(|n| n == name))
            });
            if rejects {
                events.register(plugin.name(), plugin.events_to_register());
                rejecting.push(Named {
                    name: plugin.name(),
                    plugin: Arc::clone(plugin),
                });
            }
        }
        let resolves_runtime_class = filter
            .iter()
            .any(|p| p.name == crate::plugins::names::RUNTIME_CLASS);
        Ok(Framework {
            profile_name: spec.scheduler_name.clone(),
            percentage_of_nodes_to_score: spec.percentage_of_nodes_to_score,
            pre_enqueue,
            queue_sort: queue_sort.remove(0),
            pre_filter,
            filter,
            post_filter,
            pre_score,
            score,
            reserve,
            permit,
            pre_bind,
            bind,
            post_bind,
            pod_group,
            placement_generate,
            placement_score,
            percentage_of_placements_to_score: spec.percentage_of_placements_to_score,
            not_built,
            pre_filter_to_filter,
            pre_score_to_score,
            resolves_runtime_class,
            events,
            rejecting,
            signers,
            last_refusal: AtomicUsize::new(0),
            extenders: Vec::new(),
        })
    }
}
