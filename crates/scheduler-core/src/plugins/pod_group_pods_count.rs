//! PodGroupPodsCount (upstream `podgrouppodscount`): prefers the placement that holds more of
//! the group's pods (placed before plus proposed now), normalized to 0-100 by the largest.

use std::sync::Arc;

use crate::framework::{
    MAX_NODE_SCORE, PlacementAssignment, PlacementScorePlugin, Plugin, PluginPoints,
};
use crate::plugin_points;

use super::names::POD_GROUP_PODS_COUNT;

pub struct PodGroupPodsCount;

impl Plugin for PodGroupPodsCount {
    fn name(&self) -> &'static str {
        POD_GROUP_PODS_COUNT
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => placement_score)
    }
}

impl PlacementScorePlugin for PodGroupPodsCount {
    fn score_placement(&self, a: &PlacementAssignment<'_>) -> Result<i64, String> {
        Ok(a.pods as i64)
    }

    fn normalize_placement_scores(&self, scores: &mut [i64]) -> Result<(), String> {
        let max = scores.iter().copied().max().unwrap_or(0);
        if max <= 0 {
            return Err(
                "no pods from pod group are assigned to any of the candidate placements".into(),
            );
        }
        for s in scores.iter_mut() {
            *s = *s * MAX_NODE_SCORE / max;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_scaled_by_the_largest() {
        let mut s = vec![2, 4, 3];
        PodGroupPodsCount
            .normalize_placement_scores(&mut s)
            .unwrap();
        assert_eq!(s, vec![50, 100, 75]);
        let mut none = vec![0, 0];
        assert!(
            PodGroupPodsCount
                .normalize_placement_scores(&mut none)
                .is_err()
        );
    }
}
