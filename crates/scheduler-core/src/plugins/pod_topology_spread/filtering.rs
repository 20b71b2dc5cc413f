//! PreFilter and Filter (upstream `filtering.go`): counts matching pods per topology value
//! once per cycle for the `DoNotSchedule` constraints, then checks each node's skew.

use std::sync::Arc;

use rustc_hash::{FxBuildHasher, FxHashMap};

use super::PodTopologySpread;
use super::common::{Inclusion, count_matching, fold_nodes, has_all_topology_keys, missing_state};
use crate::cache::Snapshot;
use crate::framework::{CycleState, FilterPlugin, PreFilterPlugin, PreFilterResult, Status};
use crate::plugins::helper::{PodDelta, apply_pod_delta};
use crate::types::{NodeInfo, PodInfo, SpreadConstraint, WhenUnsatisfiable};

/// Filter rejection when the skew would exceed `maxSkew`.
pub const ERR_REASON_CONSTRAINTS_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints";
/// Filter rejection when the node lacks a constraint's topology key.
pub const ERR_REASON_NODE_LABEL_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

/// Upstream's state key, only used in error messages.
const PRE_FILTER_STATE_KEY: &str = "PreFilterPodTopologySpread";

/// Upstream keeps only the two smallest (value, count) pairs per constraint: enough for
/// Filter's global minimum and cheap to update for one pod added or removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct CriticalPaths(pub(super) [(String, i64); 2]);

impl CriticalPaths {
    pub(super) fn new() -> Self {
        let unset = (String::new(), i64::from(i32::MAX));
        CriticalPaths([unset.clone(), unset])
    }

    pub(super) fn min(&self) -> i64 {
        self.0[0].1
    }

    /// Same update rule as upstream, including its approximation: the second entry is not
    /// guaranteed to be the true second minimum after several updates.
    pub(super) fn update(&mut self, value: &str, count: i64) {
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
pub(super) struct PreFilterState {
    constraints: Arc<[SpreadConstraint]>,
    /// Whether the incoming pod itself matches each constraint's selector.
    self_match: Arc<[bool]>,
    /// Per constraint: topology value -> matching pods, for every eligible domain.
    /// Shared copy-on-write so cloning the state for nominated pods stays cheap.
    pub(super) counts: Vec<Arc<FxHashMap<String, i64>>>,
    pub(super) paths: Vec<CriticalPaths>,
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
}

impl PodDelta for PreFilterState {
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

fn missing_pre_filter_state() -> Status {
    missing_state(PRE_FILTER_STATE_KEY)
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
            let mut owned = FxHashMap::with_capacity_and_hasher(per_value.len(), FxBuildHasher);
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
        apply_pod_delta::<PreFilterState>(state, pod, to_add, node, 1, missing_pre_filter_state)
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        to_remove: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        apply_pod_delta::<PreFilterState>(state, pod, to_remove, node, -1, missing_pre_filter_state)
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
