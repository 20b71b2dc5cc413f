//! PodTopologySpread: spread matching pods evenly over topology domains (zones, nodes, ...).
//!
//! PreFilter counts, once per cycle, the pods matching each `DoNotSchedule` constraint per
//! topology value over the nodes the pod could be placed on, and keeps the two smallest
//! counts per constraint; Filter is then a few lookups per node. PreScore does the same for
//! `ScheduleAnyway` constraints and Score turns the counts into a weighted penalty that
//! NormalizeScore inverts. Pods without constraints get the profile's default constraints,
//! with a selector built from the Services and controllers that select them.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::TopologySpreadConstraint;
use rayon::prelude::*;

use super::names::POD_TOPOLOGY_SPREAD;
use crate::cache::Snapshot;
use crate::config::{PluginArgs, PodTopologySpreadArgs, PodTopologySpreadConstraintsDefaulting};
use crate::framework::{
    CycleState, FilterPlugin, MAX_NODE_SCORE, NodeScore, Plugin, PluginPoints, PreFilterPlugin,
    PreFilterResult, PreScorePlugin, ScorePlugin, Status,
};
use crate::plugin_points;
use crate::types::topology_spread::{LABEL_HOSTNAME, LABEL_TOPOLOGY_ZONE};
use crate::types::{
    LabelSelector, NodeInclusionPolicy, NodeInfo, PodInfo, SpreadConstraint, TaintEffect,
    WhenUnsatisfiable, find_untolerated_taint,
};

/// Filter rejection when the skew would exceed `maxSkew`.
pub const ERR_REASON_CONSTRAINTS_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints";
/// Filter rejection when the node lacks a constraint's topology key.
pub const ERR_REASON_NODE_LABEL_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

/// Upstream's state keys, only used in error messages.
const PRE_FILTER_STATE_KEY: &str = "PreFilterPodTopologySpread";
const PRE_SCORE_STATE_KEY: &str = "PreScorePodTopologySpread";

/// Below this many nodes the counting loop runs on the calling thread.
const PARALLEL_NODES: usize = 512;
/// Smallest chunk of nodes one rayon task counts, so partial maps stay few.
const MIN_NODES_PER_TASK: usize = 256;

/// Kubernetes' built-in defaults (`defaultingType: System`): spread softly over nodes
/// (maxSkew 3) and zones (maxSkew 5).
pub fn system_default_constraints() -> Vec<TopologySpreadConstraint> {
    [(LABEL_HOSTNAME, 3), (LABEL_TOPOLOGY_ZONE, 5)]
        .into_iter()
        .map(|(key, skew)| TopologySpreadConstraint {
            topology_key: key.to_string(),
            when_unsatisfiable: "ScheduleAnyway".to_string(),
            max_skew: skew,
            ..Default::default()
        })
        .collect()
}

pub struct PodTopologySpread {
    /// Applied to pods without constraints of their own; selectors are filled per pod.
    default_constraints: Vec<SpreadConstraint>,
    /// Defaults are the system ones: nodes missing a topology key still get scored.
    system_defaulted: bool,
}

impl PodTopologySpread {
    pub fn new(args: &PodTopologySpreadArgs) -> Self {
        let system = args.defaulting_type == PodTopologySpreadConstraintsDefaulting::System;
        let raw = if system {
            system_default_constraints()
        } else {
            args.default_constraints.clone()
        };
        PodTopologySpread {
            default_constraints: raw
                .iter()
                .map(|c| SpreadConstraint::compile(c, None))
                .collect(),
            system_defaulted: system,
        }
    }

    /// The registry factory; no args means the v1 defaults (system defaulting).
    pub fn factory(args: Option<&PluginArgs>) -> Result<Arc<dyn Plugin>, String> {
        let args = match args {
            None => PodTopologySpreadArgs {
                default_constraints: Vec::new(),
                defaulting_type: PodTopologySpreadConstraintsDefaulting::System,
            },
            Some(PluginArgs::PodTopologySpread(a)) => a.clone(),
            Some(other) => {
                return Err(format!(
                    "want args to be of type PodTopologySpreadArgs, got {}",
                    other.kind()
                ));
            }
        };
        Ok(Arc::new(PodTopologySpread::new(&args)))
    }

    /// The constraints for `action`: the pod's own if it has any (of any action), else the
    /// defaults with the selector of the workloads that select the pod (none without one).
    fn constraints_for(
        &self,
        pod: &PodInfo,
        snapshot: &Snapshot,
        action: WhenUnsatisfiable,
    ) -> Result<Vec<SpreadConstraint>, String> {
        let (hard, soft) = ("hard", "soft");
        let which = if action == WhenUnsatisfiable::DoNotSchedule {
            hard
        } else {
            soft
        };
        if !pod.spread.constraints.is_empty() {
            let mut out = Vec::new();
            for c in pod
                .spread
                .constraints
                .iter()
                .filter(|c| c.when_unsatisfiable == action)
            {
                if let Some(e) = &c.selector_error {
                    return Err(format!(
                        "obtaining pod's {which} topology spread constraints: {e}"
                    ));
                }
                out.push(c.clone());
            }
            return Ok(out);
        }
        let mut out: Vec<SpreadConstraint> = self
            .default_constraints
            .iter()
            .filter(|c| c.when_unsatisfiable == action)
            .cloned()
            .collect();
        if out.is_empty() {
            return Ok(out);
        }
        let Some(selector) = snapshot.workload_selectors().default_selector(pod) else {
            return Ok(Vec::new());
        };
        for c in &mut out {
            c.selector = selector.clone();
        }
        Ok(out)
    }
}

impl Plugin for PodTopologySpread {
    fn name(&self) -> &'static str {
        POD_TOPOLOGY_SPREAD
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => pre_filter, filter, pre_score, score)
    }
}

// ---- helpers shared by filtering and scoring ----

fn has_all_topology_keys(node: &NodeInfo, constraints: &[SpreadConstraint]) -> bool {
    constraints
        .iter()
        .all(|c| node.labels.contains_key(&c.topology_key))
}

/// The pod's nodeSelector and required node affinity, as upstream `GetRequiredNodeAffinity`.
fn matches_required_node_affinity(pod: &PodInfo, node: &NodeInfo) -> bool {
    pod.node_selector
        .iter()
        .all(|(k, v)| node.labels.get(k) == Some(v))
        && pod
            .required_node_affinity
            .as_ref()
            .is_none_or(|a| a.matches(&node.name, &node.labels))
}

fn has_untolerated_hard_taint(pod: &PodInfo, node: &NodeInfo) -> bool {
    find_untolerated_taint(&node.taints, &pod.tolerations, |t| {
        matches!(t.effect, TaintEffect::NoSchedule | TaintEffect::NoExecute)
    })
    .is_some()
}

/// Evaluates a node's inclusion for each constraint, computing the affinity and taint
/// checks at most once per node and only when some constraint honours them.
struct Inclusion<'a> {
    pod: &'a PodInfo,
    node: &'a NodeInfo,
    affinity: Option<bool>,
    taints: Option<bool>,
}

impl<'a> Inclusion<'a> {
    fn new(pod: &'a PodInfo, node: &'a NodeInfo) -> Self {
        Inclusion {
            pod,
            node,
            affinity: None,
            taints: None,
        }
    }

    fn includes(&mut self, c: &SpreadConstraint) -> bool {
        if c.node_affinity_policy == NodeInclusionPolicy::Honor
            && !*self
                .affinity
                .get_or_insert_with(|| matches_required_node_affinity(self.pod, self.node))
        {
            return false;
        }
        if c.node_taints_policy == NodeInclusionPolicy::Honor
            && *self
                .taints
                .get_or_insert_with(|| has_untolerated_hard_taint(self.pod, self.node))
        {
            return false;
        }
        true
    }
}

/// Pods on a node that count for a constraint: same namespace, not terminating, labels
/// selected. Like upstream (through v1.37), a selector with no requirements at all
/// (`labelSelector: {}`) counts no existing pods, and a missing one none either.
fn count_matching(pods: &[Arc<PodInfo>], selector: &LabelSelector, namespace: &str) -> i64 {
    if selector.is_nothing() || selector.is_everything() {
        return 0;
    }
    pods.iter()
        .filter(|p| !p.is_terminating && p.namespace() == namespace && selector.matches(&p.labels))
        .count() as i64
}

type DomainCounts<'n> = Vec<HashMap<&'n str, i64>>;

/// Folds `visit` over the nodes into one map per constraint, on rayon for large clusters.
/// Keys borrow the nodes' label values, so the loop allocates only when a map grows.
fn fold_nodes<'n, F>(nodes: &'n [Arc<NodeInfo>], width: usize, visit: F) -> DomainCounts<'n>
where
    F: Fn(&'n NodeInfo, &mut DomainCounts<'n>) + Sync,
{
    let empty = || vec![HashMap::new(); width];
    if nodes.len() < PARALLEL_NODES {
        let mut acc = empty();
        for n in nodes {
            visit(n, &mut acc);
        }
        return acc;
    }
    nodes
        .par_iter()
        .with_min_len(MIN_NODES_PER_TASK)
        .fold(empty, |mut acc, n| {
            visit(n, &mut acc);
            acc
        })
        .reduce(empty, |mut a, b| {
            for (into, from) in a.iter_mut().zip(b) {
                if into.len() < from.len() {
                    let small = std::mem::replace(into, from);
                    for (k, v) in small {
                        *into.entry(k).or_insert(0) += v;
                    }
                } else {
                    for (k, v) in from {
                        *into.entry(k).or_insert(0) += v;
                    }
                }
            }
            a
        })
}

// ---- filtering ----

/// Upstream keeps only the two smallest (value, count) pairs per constraint: enough for
/// Filter's global minimum and cheap to update for one pod added or removed.
#[derive(Clone, Debug, PartialEq, Eq)]
struct CriticalPaths([(String, i64); 2]);

impl CriticalPaths {
    fn new() -> Self {
        let unset = (String::new(), i64::from(i32::MAX));
        CriticalPaths([unset.clone(), unset])
    }

    fn min(&self) -> i64 {
        self.0[0].1
    }

    /// Same update rule as upstream, including its approximation: the second entry is not
    /// guaranteed to be the true second minimum after several updates.
    fn update(&mut self, value: &str, count: i64) {
        let p = &mut self.0;
        let known = if p[0].0 == value {
            Some(0)
        } else if p[1].0 == value {
            Some(1)
        } else {
            None
        };
        match known {
            Some(i) => {
                p[i].1 = count;
                if p[0].1 > p[1].1 {
                    p.swap(0, 1);
                }
            }
            None if count < p[0].1 => {
                p[1] = std::mem::replace(&mut p[0], (value.to_string(), count));
            }
            None if count < p[1].1 => p[1] = (value.to_string(), count),
            None => {}
        }
    }
}

/// Computed in PreFilter, read by Filter, adjusted by AddPod/RemovePod.
#[derive(Clone, Debug)]
struct PreFilterState {
    constraints: Arc<[SpreadConstraint]>,
    /// Whether the incoming pod itself matches each constraint's selector.
    self_match: Arc<[bool]>,
    /// Per constraint: topology value -> matching pods, for every eligible domain.
    /// Shared copy-on-write so cloning the state for nominated pods stays cheap.
    counts: Vec<Arc<HashMap<String, i64>>>,
    paths: Vec<CriticalPaths>,
}

impl PreFilterState {
    /// The global minimum used for skew: 0 while fewer than `minDomains` domains exist.
    fn min_match(&self, i: usize, min_domains: i32) -> i64 {
        if (self.counts[i].len() as i64) < i64::from(min_domains) {
            0
        } else {
            self.paths[i].min()
        }
    }

    fn update_with_pod(&mut self, pod: &PodInfo, other: &PodInfo, node: &NodeInfo, delta: i64) {
        if other.namespace() != pod.namespace() || !node.has_node() {
            return;
        }
        if !has_all_topology_keys(node, &self.constraints) {
            return;
        }
        let constraints = Arc::clone(&self.constraints);
        let mut inclusion = Inclusion::new(pod, node);
        for (i, c) in constraints.iter().enumerate() {
            if !c.selector.matches(&other.labels) || !inclusion.includes(c) {
                continue;
            }
            let value = &node.labels[&c.topology_key];
            let counts = Arc::make_mut(&mut self.counts[i]);
            let n = counts.entry(value.clone()).or_insert(0);
            *n += delta;
            let n = *n;
            self.paths[i].update(value, n);
        }
    }
}

fn missing_state(key: &str) -> Status {
    Status::error(format!("reading {key:?} from cycleState: not found"))
}

impl PreFilterPlugin for PodTopologySpread {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let constraints =
            match self.constraints_for(pod, snapshot, WhenUnsatisfiable::DoNotSchedule) {
                Ok(c) => c,
                Err(e) => {
                    return (
                        None,
                        Status::error(format!("get constraints from pod: {e}")),
                    );
                }
            };
        if constraints.is_empty() {
            return (None, Status::skip());
        }
        let namespace = pod.namespace();
        let counted = fold_nodes(snapshot.node_infos(), constraints.len(), |node, acc| {
            if !node.has_node() || !has_all_topology_keys(node, &constraints) {
                return;
            }
            let mut inclusion = Inclusion::new(pod, node);
            for (i, c) in constraints.iter().enumerate() {
                if !inclusion.includes(c) {
                    continue;
                }
                let value = node.labels[&c.topology_key].as_str();
                let n = count_matching(&node.pods, &c.selector, namespace);
                *acc[i].entry(value).or_insert(0) += n;
            }
        });
        let mut counts = Vec::with_capacity(counted.len());
        let mut paths = Vec::with_capacity(counted.len());
        for per_value in counted {
            let mut p = CriticalPaths::new();
            let mut owned = HashMap::with_capacity(per_value.len());
            for (value, n) in per_value {
                p.update(value, n);
                owned.insert(value.to_string(), n);
            }
            counts.push(Arc::new(owned));
            paths.push(p);
        }
        let self_match = constraints
            .iter()
            .map(|c| c.selector.matches(&pod.labels))
            .collect();
        state.write(PreFilterState {
            constraints: constraints.into(),
            self_match,
            counts,
            paths,
        });
        (None, Status::success())
    }

    fn has_extensions(&self) -> bool {
        true
    }

    fn add_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        to_add: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        match state.read_mut::<PreFilterState>() {
            Some(s) => {
                s.update_with_pod(pod, to_add, node, 1);
                Status::success()
            }
            None => missing_state(PRE_FILTER_STATE_KEY),
        }
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        to_remove: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        match state.read_mut::<PreFilterState>() {
            Some(s) => {
                s.update_with_pod(pod, to_remove, node, -1);
                Status::success()
            }
            None => missing_state(PRE_FILTER_STATE_KEY),
        }
    }
}

impl FilterPlugin for PodTopologySpread {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(s) = state.read::<PreFilterState>() else {
            return missing_state(PRE_FILTER_STATE_KEY);
        };
        for (i, c) in s.constraints.iter().enumerate() {
            let Some(value) = node.labels.get(&c.topology_key) else {
                return Status::unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH);
            };
            let matched = s.counts[i].get(value.as_str()).copied().unwrap_or(0);
            let skew = matched + i64::from(s.self_match[i]) - s.min_match(i, c.min_domains);
            if skew > i64::from(c.max_skew) {
                return Status::unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH);
            }
        }
        Status::success()
    }
}

// ---- scoring ----

/// Computed in PreScore over the feasible nodes, read by Score and NormalizeScore.
#[derive(Clone, Debug)]
struct PreScoreState(Arc<PreScoreData>);

#[derive(Debug)]
struct PreScoreData {
    constraints: Vec<SpreadConstraint>,
    /// Feasible nodes missing a topology key; they score 0.
    ignored: HashSet<String>,
    /// Per non-hostname constraint: topology value of a feasible node -> matching pods
    /// over all eligible nodes. Hostname constraints are counted per node in Score.
    counts: Vec<HashMap<String, i64>>,
    /// `ln(domains + 2)`, so constraints with few domains are not watered down.
    weights: Vec<f64>,
}

fn topology_normalizing_weight(size: usize) -> f64 {
    ((size + 2) as f64).ln()
}

/// A node's penalty for one constraint: matching pods weighted, plus `maxSkew - 1` to
/// soften differences for tolerant constraints.
fn score_for_count(count: i64, max_skew: i32, weight: f64) -> f64 {
    count as f64 * weight + f64::from(max_skew - 1)
}

impl PreScorePlugin for PodTopologySpread {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        snapshot: &Snapshot,
    ) -> Status {
        let all = snapshot.node_infos();
        if all.is_empty() {
            return Status::skip();
        }
        // Only the system defaults tolerate nodes without every topology key (so nodes
        // without a zone still get hostname spreading).
        let require_all = !pod.spread.constraints.is_empty() || !self.system_defaulted;
        let constraints =
            match self.constraints_for(pod, snapshot, WhenUnsatisfiable::ScheduleAnyway) {
                Ok(c) => c,
                Err(e) => return Status::error(format!("calculating preScoreState: {e}")),
            };
        if constraints.is_empty() {
            return Status::skip();
        }

        let mut ignored = HashSet::new();
        let mut domains: Vec<HashSet<&str>> = vec![HashSet::new(); constraints.len()];
        for node in nodes {
            if require_all && !has_all_topology_keys(node, &constraints) {
                ignored.insert(node.name.clone());
                continue;
            }
            for (i, c) in constraints.iter().enumerate() {
                if !c.is_hostname() {
                    let value = node.labels.get(&c.topology_key).map_or("", String::as_str);
                    domains[i].insert(value);
                }
            }
        }
        let weights = constraints
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let size = if c.is_hostname() {
                    nodes.len() - ignored.len()
                } else {
                    domains[i].len()
                };
                topology_normalizing_weight(size)
            })
            .collect();

        let namespace = pod.namespace();
        let counted = fold_nodes(all, constraints.len(), |node, acc| {
            if !node.has_node() || (require_all && !has_all_topology_keys(node, &constraints)) {
                return;
            }
            let mut inclusion = Inclusion::new(pod, node);
            for (i, c) in constraints.iter().enumerate() {
                let value = node.labels.get(&c.topology_key).map_or("", String::as_str);
                // Only domains of feasible nodes matter (hostname ones are counted in Score).
                if !domains[i].contains(value) || !inclusion.includes(c) {
                    continue;
                }
                let n = count_matching(&node.pods, &c.selector, namespace);
                *acc[i].entry(value).or_insert(0) += n;
            }
        });
        let counts = domains
            .iter()
            .zip(&counted)
            .map(|(d, c)| {
                d.iter()
                    .map(|v| (v.to_string(), c.get(v).copied().unwrap_or(0)))
                    .collect()
            })
            .collect();
        state.write(PreScoreState(Arc::new(PreScoreData {
            constraints,
            ignored,
            counts,
            weights,
        })));
        Status::success()
    }
}

impl ScorePlugin for PodTopologySpread {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let s = state
            .read::<PreScoreState>()
            .ok_or_else(|| missing_state(PRE_SCORE_STATE_KEY))?;
        let s = &s.0;
        if s.ignored.contains(&node.name) {
            return Ok(0);
        }
        let mut score = 0.0;
        for (i, c) in s.constraints.iter().enumerate() {
            let Some(value) = node.labels.get(&c.topology_key) else {
                continue;
            };
            let count = if c.is_hostname() {
                count_matching(&node.pods, &c.selector, pod.namespace())
            } else {
                s.counts[i].get(value.as_str()).copied().unwrap_or(0)
            };
            score += score_for_count(count, c.max_skew, s.weights[i]);
        }
        Ok(score.round() as i64)
    }

    /// Fewer matching pods is better: maps `s` to `MAX * (max + min - s) / max`, ignored
    /// nodes to 0, and everything to MAX when no node has any penalty.
    fn normalize_scores(
        &self,
        state: &CycleState,
        _pod: &PodInfo,
        scores: &mut [NodeScore],
    ) -> Status {
        let Some(s) = state.read::<PreScoreState>() else {
            return missing_state(PRE_SCORE_STATE_KEY);
        };
        let ignored = &s.0.ignored;
        let mut min = i64::MAX;
        let mut max = 0i64;
        for ns in scores.iter().filter(|ns| !ignored.contains(&ns.name)) {
            min = min.min(ns.score);
            max = max.max(ns.score);
        }
        for ns in scores.iter_mut() {
            ns.score = if ignored.contains(&ns.name) {
                0
            } else if max == 0 {
                MAX_NODE_SCORE
            } else {
                MAX_NODE_SCORE * (max + min - ns.score) / max
            };
        }
        Status::success()
    }
}
