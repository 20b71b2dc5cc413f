//! The part of upstream's placement algorithm that a PodGroup's cycle and a
//! CompositePodGroup level share: which placements to evaluate, in which order, how many
//! feasible ones to find, and how a feasible one is scored. The evaluation itself (the group
//! or the level inside one placement) stays with each caller.

use crate::cache::Snapshot;
use crate::framework::{Framework, Placement, PlacementAssignment, PlacementRequest};
use crate::schedule_one::SchedulingAlgorithm;
use crate::types::NodeInfo;

/// The placements a cycle evaluates.
pub(crate) struct Candidates {
    pub placements: Vec<Placement>,
    /// Indices into `placements`, in evaluation order: generator order when every placement
    /// is evaluated anyway, shuffled when only some may be.
    pub order: Vec<usize>,
    /// Stop once this many feasible placements are found ([`Framework::num_placements_to_find`]).
    pub to_find: usize,
}

/// Why a profile cannot honour a group's topology constraint at all.
pub(crate) fn no_generator(fw: &Framework, key: &str) -> String {
    format!(
        "the pod group has a topology constraint on {key:?}, but profile {:?} runs no PlacementGenerate plugin (enable TopologyPlacementGenerator)",
        fw.profile_name()
    )
}

/// The candidate placements for a constraint on `key`, among the nodes the enclosing
/// placements of `alg` allow; `scheduled`: nodes already holding pods of the group (or
/// subtree). `Err`: why none can be evaluated (the group waits with it).
pub(crate) fn candidates(
    fw: &Framework,
    alg: &mut SchedulingAlgorithm,
    snapshot: &Snapshot,
    key: &str,
    scheduled: &[String],
) -> Result<Candidates, String> {
    if !fw.generates_placements() {
        return Err(no_generator(fw, key));
    }
    let placements = {
        let outer = &*alg;
        let parent = |n: &NodeInfo| outer.in_outer(n);
        fw.generate_placements(&PlacementRequest {
            key,
            scheduled_nodes: scheduled,
            snapshot,
            parent: &parent,
        })?
    };
    if placements.is_empty() {
        return Err(format!(
            "0/0 placements are available: no node has the label {key:?}"
        ));
    }
    let total_nodes = placements.iter().map(|p| p.nodes.len()).sum();
    let to_find = fw.num_placements_to_find(placements.len(), total_nodes);
    let order = if to_find < placements.len() {
        alg.shuffled(placements.len())
    } else {
        (0..placements.len()).collect()
    };
    Ok(Candidates {
        placements,
        order,
        to_find,
    })
}

/// The PlacementScore plugins' raw scores of the placement `alg` is evaluating now, with
/// `pods` of the group in it (its proposed pods assumed in `snapshot`).
pub(crate) fn raw_scores(
    fw: &Framework,
    alg: &SchedulingAlgorithm,
    snapshot: &Snapshot,
    pods: usize,
) -> Result<Vec<i64>, String> {
    let nodes = alg.candidates(snapshot);
    let nodes: Vec<&NodeInfo> = nodes.iter().map(|n| &**n).collect();
    fw.score_placement(&PlacementAssignment {
        pods,
        nodes: &nodes,
    })
}
