//! NodeAffinity: the pod's `nodeSelector` and required node affinity must match the node
//! (Filter), preferred terms add their weights (Score). A profile may also enforce its own
//! `addedAffinity` (NodeAffinityArgs) on every pod, checked before the pod's own rules.

use crate::framework::Signing;
use crate::plugins::helper::sign;
use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1 as k8s;

use crate::cache::Snapshot;
use crate::config::{NodeAffinityArgs, PluginArgs};
use crate::framework::FeasibleNodes;
use crate::framework::{ActionType, ClusterEvent, EventObjects, EventResource, QueueingHint};
use crate::framework::{
    CycleState, FilterPlugin, MAX_NODE_SCORE, NodeScore, Plugin, PluginPoints, PreFilterPlugin,
    PreFilterResult, PreScorePlugin, ScorePlugin, Status,
};
use crate::plugin_points;
use crate::plugins::helper::hint_if_node_now_passes;
use crate::types::node_selector::FIELD_METADATA_NAME;
use crate::types::{NodeInfo, NodeSelector, NodeSelectorTerm, PodInfo, PreferredSchedulingTerm};

use super::helper::{default_normalize_score, default_normalize_values};
use super::names::NODE_AFFINITY;

/// Upstream `ErrReasonPod`: the pod's nodeSelector or required node affinity does not match.
pub const ERR_REASON_POD: &str = "node(s) didn't match Pod's node affinity/selector";
/// Upstream `errReasonEnforced`: the profile's `addedAffinity` does not match.
pub const ERR_REASON_ENFORCED: &str = "node(s) didn't match scheduler-enforced node affinity";
/// Upstream `errReasonConflict`: every required term pins `metadata.name` and together they
/// leave no node.
pub const ERR_REASON_CONFLICT: &str = "pod affinity terms conflict";
/// Appended to [`ERR_REASON_POD`] when the pod's required node affinity has terms that failed
/// to parse: like upstream those terms match nothing (the others still count), and we say so.
pub const INVALID_TERMS_NOTE: &str =
    "the pod's required node affinity has invalid terms, which match no node";

pub struct NodeAffinity {
    /// `addedAffinity.requiredDuringSchedulingIgnoredDuringExecution`.
    added_required: Option<NodeSelector>,
    /// `addedAffinity.preferredDuringSchedulingIgnoredDuringExecution`, without zero-weight
    /// and empty terms (they never count).
    added_preferred: Vec<PreferredSchedulingTerm>,
}

impl NodeAffinity {
    pub fn new(args: &NodeAffinityArgs) -> Result<Self, String> {
        let Some(added) = &args.added_affinity else {
            return Ok(NodeAffinity {
                added_required: None,
                added_preferred: Vec::new(),
            });
        };
        let added_required = match &added.required_during_scheduling_ignored_during_execution {
            None => None,
            Some(sel) => {
                let compiled = NodeSelector::from_k8s(sel);
                let problems = compiled.problems();
                if !problems.is_empty() {
                    return Err(format!(
                        "parsing addedAffinity.requiredDuringSchedulingIgnoredDuringExecution: {}",
                        problems.join("; ")
                    ));
                }
                Some(compiled)
            }
        };
        let mut added_preferred = Vec::new();
        let mut problems = Vec::new();
        for (i, t) in added
            .preferred_during_scheduling_ignored_during_execution
            .iter()
            .flatten()
            .enumerate()
        {
            let raw = &t.preference;
            let raw_empty = raw.match_expressions.as_ref().is_none_or(Vec::is_empty)
                && raw.match_fields.as_ref().is_none_or(Vec::is_empty);
            if t.weight == 0 || raw_empty {
                continue;
            }
            let term = NodeSelectorTerm::from_k8s(raw);
            if term.errors.is_empty() {
                added_preferred.push(PreferredSchedulingTerm {
                    weight: t.weight,
                    term,
                });
            } else {
                problems.extend(term.errors.iter().map(|e| format!("[{i}].{e}")));
            }
        }
        if !problems.is_empty() {
            return Err(format!(
                "parsing addedAffinity.preferredDuringSchedulingIgnoredDuringExecution: {}",
                problems.join("; ")
            ));
        }
        Ok(NodeAffinity {
            added_required,
            added_preferred,
        })
    }

    /// The registry factory: args absent means no added affinity.
    pub fn from_args(args: Option<&PluginArgs>) -> Result<Self, String> {
        match args {
            None => Self::new(&NodeAffinityArgs::default()),
            Some(PluginArgs::NodeAffinity(a)) => Self::new(a),
            Some(other) => Err(format!(
                "args are not of type NodeAffinityArgs, got {}",
                other.kind()
            )),
        }
    }
}

impl Plugin for NodeAffinity {
    /// Signature for opportunistic batching (upstream `SignPod`).
    fn sign_pod(&self, pod: &PodInfo) -> Option<Signing> {
        sign::with(vec![
            (
                "v1.Pod.Spec.Affinity.NodeSelector",
                format!("{:?}", pod.node_selector),
            ),
            (
                "v1.Pod.Spec.Affinity.NodeAffinity",
                format!(
                    "{:?}",
                    pod.affinity.as_ref().and_then(|a| a.node_affinity.as_ref())
                ),
            ),
        ])
    }
    fn name(&self) -> &'static str {
        NODE_AFFINITY
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => pre_filter, filter, pre_score, score)
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![ClusterEvent::new(
            EventResource::Node,
            ActionType::ADD | ActionType::UPDATE_NODE_LABEL,
        )]
    }

    /// Upstream's hint: only a node that now matches (the added affinity and the pod's own
    /// rules) may help, and not one that already matched before the update.
    fn queueing_hint(
        &self,
        pod: &PodInfo,
        _event: &ClusterEvent,
        objects: &EventObjects<'_>,
    ) -> QueueingHint {
        hint_if_node_now_passes(objects, |n| {
            self.added_required
                .as_ref()
                .is_none_or(|a| a.matches_labels(&n.name, &n.labels))
                && pod_matches_node(pod, n)
        })
    }
}

/// Whether the pod's own rules (nodeSelector AND required node affinity) accept the node.
pub fn pod_matches_node(pod: &PodInfo, node: &NodeInfo) -> bool {
    pod.node_selector.is_subset_of(&node.labels)
        && pod
            .required_node_affinity
            .as_ref()
            .is_none_or(|sel| sel.matches_labels(&node.name, &node.labels))
}

/// The Filter reason when the pod's own rules reject a node: upstream's, plus the parse
/// errors when some required terms are invalid (upstream ignores them silently).
fn pod_reason(pod: &PodInfo) -> String {
    let problems = pod
        .required_node_affinity
        .as_ref()
        .map(NodeSelector::problems)
        .unwrap_or_default();
    if problems.is_empty() {
        ERR_REASON_POD.to_string()
    } else {
        format!(
            "{ERR_REASON_POD} ({INVALID_TERMS_NOTE}: {})",
            problems.join("; ")
        )
    }
}

/// Nodes the required terms pin by `metadata.name` (operator In), as upstream computes them
/// from the raw terms: the requirements of one term intersect, the terms unite, and any term
/// without such a requirement allows every node (`None`).
fn pinned_node_names(sel: &k8s::NodeSelector) -> Option<BTreeSet<String>> {
    let mut all: Option<BTreeSet<String>> = None;
    for term in &sel.node_selector_terms {
        let mut in_term: Option<BTreeSet<String>> = None;
        let by_name = term
            .match_fields
            .iter()
            .flatten()
            .filter(|r| r.key == FIELD_METADATA_NAME && r.operator == "In");
        for r in by_name {
            let values: BTreeSet<String> = r.values.iter().flatten().cloned().collect();
            in_term = Some(match in_term {
                None => values,
                Some(prev) => prev.intersection(&values).cloned().collect(),
            });
        }
        all.get_or_insert_with(BTreeSet::new).extend(in_term?);
    }
    all
}

impl PreFilterPlugin for NodeAffinity {
    fn pre_filter(
        &self,
        _state: &mut CycleState,
        pod: &PodInfo,
        _snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let required = pod
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|na| {
                na.required_during_scheduling_ignored_during_execution
                    .as_ref()
            });
        if required.is_none() && self.added_required.is_none() && pod.node_selector.is_empty() {
            return (None, Status::skip());
        }
        let Some(required) = required else {
            return (None, Status::success());
        };
        match pinned_node_names(required) {
            None => (None, Status::success()),
            Some(names) if names.is_empty() => (None, Status::unresolvable(ERR_REASON_CONFLICT)),
            Some(names) => (Some(PreFilterResult::nodes(names)), Status::success()),
        }
    }
}

impl FilterPlugin for NodeAffinity {
    fn filter(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if let Some(added) = &self.added_required
            && !added.matches_labels(&node.name, &node.labels)
        {
            return Status::unresolvable(ERR_REASON_ENFORCED);
        }
        if pod_matches_node(pod, node) {
            Status::success()
        } else {
            Status::unresolvable(pod_reason(pod))
        }
    }
}

/// Upstream refuses to score with a preferred term it cannot parse: an internal error.
fn check_preferred_terms(pod: &PodInfo) -> Result<(), Status> {
    if pod
        .preferred_node_affinity
        .iter()
        .all(|t| t.term.errors.is_empty())
    {
        return Ok(());
    }
    let problems: Vec<String> = pod
        .problems
        .iter()
        .filter(|p| p.starts_with("preferred node affinity"))
        .cloned()
        .collect();
    Err(Status::error(format!(
        "invalid preferredDuringSchedulingIgnoredDuringExecution in pod {}: {}",
        pod.key(),
        problems.join("; ")
    )))
}

fn sum_matching_weights(terms: &[PreferredSchedulingTerm], node: &NodeInfo) -> i64 {
    terms
        .iter()
        .filter(|t| t.term.matches(&node.name, &node.labels))
        .map(|t| i64::from(t.weight))
        .sum()
}

impl PreScorePlugin for NodeAffinity {
    fn pre_score(
        &self,
        _state: &mut CycleState,
        pod: &PodInfo,
        _nodes: FeasibleNodes<'_>,
        _snapshot: &Snapshot,
    ) -> Status {
        if let Err(s) = check_preferred_terms(pod) {
            return s;
        }
        if pod.preferred_node_affinity.is_empty() && self.added_preferred.is_empty() {
            return Status::skip();
        }
        Status::success()
    }
}

impl ScorePlugin for NodeAffinity {
    /// The weights of the matching preferred terms, the profile's and the pod's. Reads the
    /// pod's compiled terms directly, so it also works when PreScore is disabled.
    fn score(&self, _state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        check_preferred_terms(pod)?;
        Ok(sum_matching_weights(&self.added_preferred, node)
            + sum_matching_weights(&pod.preferred_node_affinity, node))
    }

    fn has_score_extensions(&self) -> bool {
        true
    }

    fn normalize_score_values(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        scores: &mut [i64],
    ) -> Option<Status> {
        default_normalize_values(MAX_NODE_SCORE, false, scores);
        Some(Status::success())
    }

    fn normalize_scores(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        scores: &mut [NodeScore],
    ) -> Status {
        default_normalize_score(MAX_NODE_SCORE, false, scores);
        Status::success()
    }
}

#[cfg(test)]
mod tests;
