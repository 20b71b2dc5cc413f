//! multiPoint expansion as pure data: the plugins each extension point of a profile runs,
//! in order, with score weights (upstream `expandMultiPointPlugins`, `updatePluginList`,
//! `getScoreWeights`).

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::framework::ExtensionPoint;
use crate::plugins::catalog;

use super::error::ConfigError;
use super::messages as msg;
use super::spans::index;
use super::types::{PluginArgs, Profile};

/// Upper bound of one plugin's normalized node score (upstream `MaxNodeScore`).
pub const MAX_NODE_SCORE: i64 = 100;
/// Upper bound of the weighted total (upstream `MaxTotalScore`).
pub const MAX_TOTAL_SCORE: i64 = i64::MAX;

/// Upstream's order of `getExtensionPoints`; only changes which error comes first.
const EXPANSION_ORDER: [ExtensionPoint; 14] = [
    ExtensionPoint::PreFilter,
    ExtensionPoint::Filter,
    ExtensionPoint::PostFilter,
    ExtensionPoint::Reserve,
    ExtensionPoint::PreScore,
    ExtensionPoint::Score,
    ExtensionPoint::PreBind,
    ExtensionPoint::Bind,
    ExtensionPoint::PostBind,
    ExtensionPoint::Permit,
    ExtensionPoint::PreEnqueue,
    ExtensionPoint::QueueSort,
    ExtensionPoint::PlacementGenerate,
    ExtensionPoint::PlacementScore,
];

/// What one profile runs, after multiPoint expansion.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ExpandedProfile {
    pub scheduler_name: String,
    pub percentage_of_nodes_to_score: Option<i32>,
    /// Every extension point (empty ones included), plugins in call order.
    pub points: BTreeMap<ExtensionPoint, Vec<String>>,
    /// Weight of each Score plugin, in Score call order.
    pub score_weights: Vec<(String, i32)>,
    /// Weight of each PlacementScore plugin, in call order (weights as Score's: the
    /// point's own entry, else multiPoint's, else 1).
    pub placement_score_weights: Vec<(String, i32)>,
    /// The profile's `percentageOfPlacementsToScore`, or the global one.
    pub percentage_of_placements_to_score: Option<i32>,
    /// Args of every plugin that runs anywhere (`None` for plugins without args).
    pub plugin_args: BTreeMap<String, Option<PluginArgs>>,
}

impl ExpandedProfile {
    pub fn plugins_at(&self, point: ExtensionPoint) -> &[String] {
        self.points.get(&point).map_or(&[], Vec::as_slice)
    }

    pub fn weight(&self, plugin: &str) -> Option<i32> {
        self.score_weights
            .iter()
            .find(|(n, _)| n == plugin)
            .map(|(_, w)| *w)
    }

    pub fn placement_weight(&self, plugin: &str) -> Option<i32> {
        self.placement_score_weights
            .iter()
            .find(|(n, _)| n == plugin)
            .map(|(_, w)| *w)
    }
}

/// A problem found while expanding, with a path relative to the profile.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Issue {
    pub path: String,
    pub message: String,
    pub fix: Option<String>,
}

fn issue(path: String, message: String) -> Issue {
    Issue {
        path,
        message,
        fix: None,
    }
}

fn implements(name: &str, p: ExtensionPoint) -> bool {
    catalog::lookup(name).is_some_and(|s| s.points.contains(&p))
}

/// Expands `profile`. Errors carry paths relative to the profile (`plugins.score...`).
pub fn expand(profile: &Profile) -> Result<ExpandedProfile, Vec<ConfigError>> {
    let (expanded, issues) = expand_profile(profile);
    if issues.is_empty() {
        return Ok(expanded);
    }
    let source = format!("profile {:?}", profile.scheduler_name);
    Err(issues
        .into_iter()
        .map(|i| {
            let mut e = ConfigError::new(&source, None, &i.path, i.message);
            e.fix = i.fix;
            e
        })
        .collect())
}

pub(crate) fn expand_profile(profile: &Profile) -> (ExpandedProfile, Vec<Issue>) {
    let plugins = &profile.plugins;
    let mut issues = Vec::new();
    let mut points: BTreeMap<ExtensionPoint, Vec<String>> = BTreeMap::new();

    let mp_path = "plugins.multiPoint.enabled";
    for (i, p) in plugins.multi_point.enabled.iter().enumerate() {
        if catalog::lookup(&p.name).is_none() {
            // Upstream names the first point it expands (PreFilter) in this message.
            issues.push(issue(
                index(mp_path, i),
                msg::plugin_does_not_exist(ExtensionPoint::PreFilter.display_name(), &p.name),
            ));
        }
    }

    for point in EXPANSION_ORDER {
        let set = plugins.point(point);
        let set_path = format!("plugins.{}.enabled", point.config_field());
        // The point's own list first (upstream `updatePluginList`).
        let mut specific: Vec<String> = Vec::new();
        for (i, p) in set.enabled.iter().enumerate() {
            let path = index(&set_path, i);
            if catalog::lookup(&p.name).is_none() {
                issues.push(issue(
                    path,
                    msg::plugin_does_not_exist(point.display_name(), &p.name),
                ));
                continue;
            }
            if !implements(&p.name, point) {
                issues.push(issue(
                    path,
                    msg::plugin_does_not_extend(&p.name, point.display_name()),
                ));
                continue;
            }
            if specific.contains(&p.name) {
                issues.push(issue(
                    path,
                    msg::plugin_already_registered(&p.name, point.display_name()),
                ));
                continue;
            }
            specific.push(p.name.clone());
        }

        let disabled: HashSet<&str> = set.disabled.iter().map(String::as_str).collect();
        if disabled.contains("*") {
            points.insert(point, specific);
            continue;
        }

        let mut overrides: HashSet<String> = HashSet::new();
        let mut from_multi: Vec<String> = Vec::new();
        for (i, p) in plugins.multi_point.enabled.iter().enumerate() {
            if !implements(&p.name, point) || disabled.contains(p.name.as_str()) {
                continue;
            }
            if specific.contains(&p.name) {
                // Also configured at this point: the point's entry (position, weight) wins.
                overrides.insert(p.name.clone());
                continue;
            }
            if from_multi.contains(&p.name) {
                issues.push(issue(
                    index(mp_path, i),
                    msg::plugin_already_registered(&p.name, point.display_name()),
                ));
                continue;
            }
            from_multi.push(p.name.clone());
        }

        // Overrides keep the point's order, then multiPoint-only plugins, then the rest.
        let mut ordered: Vec<String> = specific
            .iter()
            .filter(|n| overrides.contains(*n))
            .cloned()
            .collect();
        ordered.extend(from_multi);
        ordered.extend(specific.into_iter().filter(|n| !overrides.contains(n)));
        points.insert(point, ordered);
    }

    let queue_sort = points.get(&ExtensionPoint::QueueSort).map_or(0, Vec::len);
    if queue_sort != 1 {
        issues.push(Issue {
            path: "plugins.queueSort".to_string(),
            message: msg::queue_sort_count(&profile.scheduler_name, queue_sort),
            fix: Some("enable exactly one queueSort plugin (the default is PrioritySort)".into()),
        });
    }
    if points.get(&ExtensionPoint::Bind).is_none_or(Vec::is_empty) {
        issues.push(Issue {
            path: "plugins.bind".to_string(),
            message: msg::bind_required(&profile.scheduler_name),
            fix: Some("enable a bind plugin, e.g. DefaultBinder".into()),
        });
    }

    let score_weights = weights_of(plugins, &points, ExtensionPoint::Score, &mut issues);
    let placement_score_weights = weights_of(
        plugins,
        &points,
        ExtensionPoint::PlacementScore,
        &mut issues,
    );

    let mut plugin_args = BTreeMap::new();
    for names in points.values() {
        for n in names {
            plugin_args
                .entry(n.clone())
                .or_insert_with(|| profile.args(n).cloned());
        }
    }

    let expanded = ExpandedProfile {
        scheduler_name: profile.scheduler_name.clone(),
        percentage_of_nodes_to_score: profile.percentage_of_nodes_to_score,
        points,
        score_weights,
        placement_score_weights,
        percentage_of_placements_to_score: profile.percentage_of_placements_to_score,
        plugin_args,
    };
    (expanded, issues)
}

/// The weight of each plugin `points` runs at `point` (Score or PlacementScore), in call
/// order: the point's own entries first, then multiPoint's; first seen wins; 0 or unset is
/// 1. Negative weights and a possible overflow of the weighted total are reported.
fn weights_of(
    plugins: &super::types::Plugins,
    points: &BTreeMap<ExtensionPoint, Vec<String>>,
    point: ExtensionPoint,
    issues: &mut Vec<Issue>,
) -> Vec<(String, i32)> {
    let mp_path = "plugins.multiPoint.enabled";
    let own_path = format!("plugins.{}.enabled", point.config_field());
    let mut weights: HashMap<String, i32> = HashMap::new();
    let mut total: i64 = 0;
    let entries = plugins
        .point(point)
        .enabled
        .iter()
        .enumerate()
        .map(|(i, p)| (p, index(&own_path, i)))
        .chain(
            plugins
                .multi_point
                .enabled
                .iter()
                .enumerate()
                .map(|(i, p)| (p, index(mp_path, i))),
        );
    for (p, path) in entries {
        if !implements(&p.name, point) || weights.contains_key(&p.name) {
            continue;
        }
        let w = match p.weight {
            None | Some(0) => 1,
            Some(w) => w,
        };
        if w < 0 {
            issues.push(Issue {
                path: format!("{path}.weight"),
                message: msg::invalid(&w.to_string(), msg::NEGATIVE_WEIGHT),
                fix: Some(msg::NEGATIVE_WEIGHT_FIX.into()),
            });
            weights.insert(p.name.clone(), w);
            continue;
        }
        weights.insert(p.name.clone(), w);
        let add = i64::from(w) * MAX_NODE_SCORE;
        if add > MAX_TOTAL_SCORE - total {
            issues.push(issue(path, msg::SCORE_OVERFLOW.to_string()));
            break;
        }
        total += add;
    }
    points
        .get(&point)
        .map(|names| {
            names
                .iter()
                .map(|n| (n.clone(), weights.get(n).copied().unwrap_or(1)))
                .collect()
        })
        .unwrap_or_default()
}
