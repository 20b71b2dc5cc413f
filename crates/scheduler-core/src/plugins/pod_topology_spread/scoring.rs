//! PreScore, Score and NormalizeScore (upstream `scoring.go`): counts matching pods per
//! topology value of the feasible nodes for the `ScheduleAnyway` constraints and turns the
//! counts into a weighted penalty, inverted so fewer matching pods score higher.

use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use super::PodTopologySpread;
use super::common::{Inclusion, count_matching, fold_nodes, has_all_topology_keys, missing_state};
use crate::cache::Snapshot;
use crate::framework::FeasibleNodes;
use crate::framework::{
    CycleState, MAX_NODE_SCORE, NodeScore, PreScorePlugin, ScorePlugin, Status,
};
use crate::types::{NodeInfo, PodInfo, SpreadConstraint, WhenUnsatisfiable};

/// Upstream's state key, only used in error messages.
const PRE_SCORE_STATE_KEY: &str = "PreScorePodTopologySpread";

/// Computed in PreScore over the feasible nodes, read by Score and NormalizeScore.
#[derive(Clone, Debug)]
pub(super) struct PreScoreState(pub(super) Arc<PreScoreData>);

#[derive(Debug)]
pub(super) struct PreScoreData {
    constraints: Vec<SpreadConstraint>,
    /// Feasible nodes missing a topology key; they score 0.
    pub(super) ignored: FxHashSet<String>,
    /// Per non-hostname constraint: topology value of a feasible node -> matching pods
    /// over all eligible nodes. Hostname constraints are counted per node in Score.
    pub(super) counts: Vec<FxHashMap<String, i64>>,
    /// `ln(domains + 2)`, so constraints with few domains are not watered down.
    pub(super) weights: Vec<f64>,
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
        nodes: FeasibleNodes<'_>,
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

        let mut ignored = FxHashSet::default();
        let mut domains: Vec<FxHashSet<&str>> = vec![FxHashSet::default(); constraints.len()];
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
        if !s.ignored.is_empty() && s.ignored.contains(&node.name) {
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

    fn has_score_extensions(&self) -> bool {
        true
    }

    /// Fewer matching pods is better: maps `s` to `MAX * (max + min - s) / max`, ignored
    /// nodes to 0, and everything to MAX when no node has any penalty.
    fn normalize_scores(
        &self,
        state: &CycleState,
        _pod: &PodInfo,
        scores: &mut [NodeScore<'_>],
    ) -> Status {
        let Some(s) = state.read::<PreScoreState>() else {
            return missing_state(PRE_SCORE_STATE_KEY);
        };
        let ignored = &s.0.ignored;
        let is_ignored = |name: &str| !ignored.is_empty() && ignored.contains(name);
        let mut min = i64::MAX;
        let mut max = 0i64;
        for ns in scores.iter().filter(|ns| !is_ignored(ns.name)) {
            min = min.min(ns.score);
            max = max.max(ns.score);
        }
        for ns in scores.iter_mut() {
            ns.score = if is_ignored(ns.name) {
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
