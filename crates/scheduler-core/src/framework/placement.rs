//! The PodGroup placement points (upstream's TopologyAwareWorkloadScheduling): a
//! topology-constrained group's cycle asks the PlacementGenerate plugins for candidate
//! placements, evaluates the group inside each, and keeps the feasible one the
//! PlacementScore plugins rate best. The evaluation itself lives with the group cycle
//! (`schedule_group`, `schedule_tree`); this module is the plugins' side and the arithmetic
//! the cycle and `explain` share.

use crate::cache::Snapshot;
use crate::types::NodeInfo;

use super::{Framework, MAX_NODE_SCORE};

/// One candidate placement: the nodes of one value of a topology label.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The label value (upstream names a placement after it).
    pub value: String,
    /// Positions of its nodes in the snapshot's node list.
    pub nodes: Vec<usize>,
}

/// What a PlacementGenerate plugin is asked.
pub struct PlacementRequest<'a> {
    /// The group's topology label.
    pub key: &'a str,
    /// Nodes that already hold pods of the group (placed before this cycle).
    pub scheduled_nodes: &'a [String],
    pub snapshot: &'a Snapshot,
    /// The enclosing placement (a parent CompositePodGroup's domain): only its nodes count.
    pub parent: &'a dyn Fn(&NodeInfo) -> bool,
}

/// Upstream `PlacementGeneratePlugin`: a topology-constrained group's candidate placements.
pub trait PlacementGeneratePlugin: Send + Sync {
    /// The placements, or why there are none to evaluate (the group waits with it).
    fn generate(&self, req: &PlacementRequest<'_>) -> Result<Vec<Placement>, String>;
}

/// One feasible placement as it was evaluated: the group's pods in it (placed before and
/// proposed now, assumed in the snapshot) and its nodes.
pub struct PlacementAssignment<'a> {
    pub pods: usize,
    pub nodes: &'a [&'a NodeInfo],
}

/// Upstream `PlacementScorePlugin` (with its optional `PlacementScoreExtensions`).
pub trait PlacementScorePlugin: Send + Sync {
    /// The placement's raw score.
    fn score_placement(&self, a: &PlacementAssignment<'_>) -> Result<i64, String>;

    /// Rescales the raw scores of every feasible placement to 0-100, when the raw scores
    /// are not already on that range.
    fn normalize_placement_scores(&self, _scores: &mut [i64]) -> Result<(), String> {
        Ok(())
    }
}

/// Each feasible placement's score, per PlacementScore plugin (normalized, weighted) and in
/// total.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlacementScores {
    /// The scoring plugins, in call order.
    pub plugins: Vec<&'static str>,
    /// Per placement: each plugin's normalized score times its weight.
    pub weighted: Vec<Vec<i64>>,
    /// Per placement: the sum of its weighted scores.
    pub totals: Vec<i64>,
}

impl PlacementScores {
    /// The placement to keep: the highest total; ties go to the first evaluated (upstream
    /// breaks them at random).
    pub fn best(&self) -> Option<usize> {
        let mut best: Option<usize> = None;
        for (i, t) in self.totals.iter().enumerate() {
            if best.is_none_or(|b| *t > self.totals[b]) {
                best = Some(i);
            }
        }
        best
    }
}

/// Upstream's adaptive share of placements to evaluate: 100% down to 10% as the nodes of all
/// candidate placements add up from 0 to 5,000, linearly, and never under 5%.
pub fn adaptive_placement_percentage(total_nodes: usize) -> usize {
    const FULL_AT: usize = 0;
    const TEN_PERCENT_AT: usize = 5_000;
    let drop = (total_nodes.saturating_sub(FULL_AT)).saturating_mul(90) / TEN_PERCENT_AT;
    100usize.saturating_sub(drop).max(5)
}

impl Framework {
    /// Whether a PlacementGenerate plugin runs: without one, a topology constraint cannot be
    /// honoured and the group waits.
    pub fn generates_placements(&self) -> bool {
        !self.placement_generate.is_empty()
    }

    /// Every PlacementGenerate plugin's placements, in plugin order. The first error stops.
    pub fn generate_placements(
        &self,
        req: &PlacementRequest<'_>,
    ) -> Result<Vec<Placement>, String> {
        let mut out = Vec::new();
        for p in &self.placement_generate {
            out.extend(p.plugin.generate(req)?);
        }
        Ok(out)
    }

    /// How many feasible placements to find before picking one (upstream
    /// `percentageOfPlacementsToScore`): all of them at 100%; one when nothing scores them
    /// (any feasible one is as good); otherwise the share of `placements`, at least one.
    /// `total_nodes`: the nodes of all candidate placements together.
    pub fn num_placements_to_find(&self, placements: usize, total_nodes: usize) -> usize {
        if self.placement_score.is_empty() {
            return placements.min(1);
        }
        let pct = match self.percentage_of_placements_to_score {
            Some(p) if p > 0 => p as usize,
            _ => adaptive_placement_percentage(total_nodes),
        };
        if pct >= 100 {
            return placements;
        }
        (placements * pct / 100).max(1).min(placements)
    }

    /// Each PlacementScore plugin's raw score of one feasible placement, in plugin order.
    pub fn score_placement(&self, a: &PlacementAssignment<'_>) -> Result<Vec<i64>, String> {
        self.placement_score
            .iter()
            .map(|(p, _)| p.plugin.score_placement(a))
            .collect()
    }

    /// Normalizes and weighs the raw scores of every feasible placement (`raw[i]` from
    /// [`Self::score_placement`]).
    pub fn weigh_placements(&self, raw: &[Vec<i64>]) -> Result<PlacementScores, String> {
        let plugins: Vec<&'static str> = self.placement_score.iter().map(|(p, _)| p.name).collect();
        if raw.is_empty() {
            return Ok(PlacementScores {
                plugins,
                ..PlacementScores::default()
            });
        }
        let mut weighted = vec![vec![0; plugins.len()]; raw.len()];
        for (j, (p, weight)) in self.placement_score.iter().enumerate() {
            let mut column: Vec<i64> = raw.iter().map(|r| r.get(j).copied().unwrap_or(0)).collect();
            p.plugin.normalize_placement_scores(&mut column)?;
            for (i, s) in column.into_iter().enumerate() {
                if !(0..=MAX_NODE_SCORE).contains(&s) {
                    return Err(format!(
                        "plugin {:?} returns an invalid placement score {s}, it should be in the range of [0, {MAX_NODE_SCORE}] after normalizing",
                        p.name
                    ));
                }
                weighted[i][j] = s * weight;
            }
        }
        let totals = weighted.iter().map(|w| w.iter().sum()).collect();
        Ok(PlacementScores {
            plugins,
            weighted,
            totals,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_adaptive_share_falls_from_all_to_ten_percent_at_5000_nodes_and_stops_at_five() {
        assert_eq!(adaptive_placement_percentage(0), 100);
        assert_eq!(adaptive_placement_percentage(2_500), 55);
        assert_eq!(adaptive_placement_percentage(5_000), 10);
        assert_eq!(adaptive_placement_percentage(5_200), 7);
        assert_eq!(adaptive_placement_percentage(5_300), 5);
        assert_eq!(adaptive_placement_percentage(130_000), 5);
    }

    #[test]
    fn ties_go_to_the_first_placement() {
        let s = PlacementScores {
            plugins: vec!["a"],
            weighted: vec![vec![3], vec![5], vec![5]],
            totals: vec![3, 5, 5],
        };
        assert_eq!(s.best(), Some(1));
        assert_eq!(PlacementScores::default().best(), None);
    }
}
