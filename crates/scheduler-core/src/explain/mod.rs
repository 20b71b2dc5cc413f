//! Why a pod went where it went, or why it went nowhere: filled in by the same
//! [`schedule_one`](crate::schedule_one) run that decides, when the caller passes a recorder
//! (see [`schedule_one_explained`](crate::schedule_one::schedule_one_explained)). Without one
//! nothing is recorded and the cycle is unchanged.
//!
//! The types serialize to the stable schema documented in `docs/explain.md`
//! (`schema: ferrosched.io/explain/v1`): fields may be added, never renamed or removed.

mod compact;
pub mod group;
#[cfg(test)]
mod group_tests;
mod hints;
mod record;
pub mod render;
pub mod simulator;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::framework::Status;

pub use compact::Record;
pub use group::{GroupExplanation, GroupRecord};
pub use hints::hints;
pub(crate) use record::FilterScope;

/// The schema tag every explanation carries.
pub const SCHEMA: &str = "ferrosched.io/explain/v1";

/// One scheduling attempt of one pod, explained.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    pub schema: &'static str,
    /// `namespace/name`.
    pub pod: String,
    pub profile: String,
    pub outcome: Outcome,
    /// The node chosen, when the pod was placed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The FailedScheduling message (or the error), when the pod was not placed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The pod's group and its group cycle, for a pod of a PodGroup.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<GroupExplanation>,
    pub num_all_nodes: usize,
    /// Filter plugins in the order they run; the first that rejects a node decides.
    pub filter_plugins: Vec<String>,
    /// A PreFilter plugin that turned the pod away for every node at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pre_filter_rejection: Option<Rejection>,
    /// Every node of the snapshot, in snapshot order.
    pub nodes: Vec<NodeVerdict>,
    /// Score plugins that ran this cycle, with their weights, in order.
    pub score_plugins: Vec<ScorePlugin>,
    /// Each scored node's per-plugin scores, in scoring order (empty when scoring was
    /// skipped because one node was feasible).
    pub scores: Vec<NodeScores>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selection: Option<Selection>,
    /// A Reserve, Permit, PreBind or Bind plugin that turned the chosen node down.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_filter_rejection: Option<Rejection>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preemption: Option<Preemption>,
    /// What would have to change for a node to fit, per rejecting plugin.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hints: Vec<Hint>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    Scheduled,
    Unschedulable,
    Error,
}

/// A plugin's rejection: the plugin, upstream's code and the reasons.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rejection {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    pub code: String,
    pub reasons: Vec<String>,
}

impl Rejection {
    pub fn from_status(s: &Status) -> Self {
        Rejection {
            plugin: s.plugin().map(str::to_string),
            code: s.code().as_str().to_string(),
            reasons: s.reasons().iter().map(|r| r.to_string()).collect(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeVerdict {
    pub node: String,
    #[serde(flatten)]
    pub verdict: Verdict,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "camelCase")]
pub enum Verdict {
    /// Passed every Filter plugin.
    Feasible,
    /// Turned away by a Filter plugin (or by PreFilter for every node at once).
    Rejected(Rejection),
    /// Never filtered; `reason` says why (percentageOfNodesToScore, nominated node).
    Skipped { reason: String },
}

/// Why a node was never filtered: enough feasible nodes were found first.
pub const SKIPPED_PERCENTAGE: &str =
    "not evaluated: percentageOfNodesToScore's share of feasible nodes was found first";
/// Why a node was never filtered: the pod's nominated node was tried first and fits.
pub const SKIPPED_NOMINATED: &str =
    "not evaluated: the pod's nominated node was tried first and fits";
/// Why a node was never filtered: a pod group cycle evaluated another topology domain (the
/// domain, `key=value`, follows in parentheses).
pub const SKIPPED_PLACEMENT: &str =
    "not evaluated: outside the topology domain the pod group cycle evaluated";

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScorePlugin {
    pub name: String,
    pub weight: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeScores {
    pub node: String,
    /// One entry per score plugin, in `scorePlugins` order.
    pub plugins: Vec<PluginScore>,
    pub total: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginScore {
    pub plugin: String,
    /// What Score returned.
    pub raw: i64,
    /// After NormalizeScore (0..=100).
    pub normalized: i64,
    pub weight: i64,
    /// `normalized * weight`, what the total adds up.
    pub weighted: i64,
}

/// How the node was picked among the feasible ones.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Selection {
    pub chosen: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chosen_total: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runner_up: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runner_up_total: Option<i64>,
    /// `chosen_total - runner_up_total`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub margin: Option<i64>,
    /// Every node with the best total (the chosen one included) when more than one had it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tied: Vec<String>,
    /// How the choice was made, in words.
    pub how: String,
}

pub const HOW_ONLY_FEASIBLE: &str = "the only feasible node: scoring skipped";
pub const HOW_HIGHEST: &str = "highest total score";
pub const HOW_TIE: &str =
    "highest total score, tied: one of the tied nodes picked uniformly at random (seeded)";

/// What PostFilter (preemption) found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Preemption {
    /// The node the pod was nominated to, when preemption succeeded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nominated_node: Option<String>,
    /// Why the pod may not preempt at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_eligible: Option<String>,
    /// PostFilter's message, as appended to the FailedScheduling message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// One entry per node, in snapshot order (empty when the pod was not eligible).
    pub nodes: Vec<PreemptionNode>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PreemptionNode {
    pub node: String,
    #[serde(flatten)]
    pub outcome: PreemptionOutcome,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "camelCase")]
pub enum PreemptionOutcome {
    /// Evicting `victims` makes room. `why_not_chosen` is empty for the chosen node.
    Candidate {
        victims: Vec<Victim>,
        pdb_violations: usize,
        chosen: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        why_not_chosen: Option<String>,
    },
    /// Tried, and no set of lower-priority victims makes room.
    NoCandidate { reason: String },
    /// Filtering said preemption cannot help here (UnschedulableAndUnresolvable).
    NotHelpful { reason: String },
    /// Not tried: enough candidates were found first.
    NotTried,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Victim {
    pub pod: String,
    pub priority: i32,
}

/// What would have to change for some node to fit, for one rejecting plugin.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hint {
    pub plugin: String,
    /// Nodes the change would help (0 for "no node has ...").
    pub nodes: usize,
    pub text: String,
}

impl Explanation {
    /// An empty explanation for `pod` in `profile`, for the cycle to fill in.
    pub fn new(pod: &str, profile: &str) -> Self {
        Explanation {
            schema: SCHEMA,
            pod: pod.to_string(),
            profile: profile.to_string(),
            outcome: Outcome::Error,
            node: None,
            message: None,
            group: None,
            num_all_nodes: 0,
            filter_plugins: Vec::new(),
            pre_filter_rejection: None,
            nodes: Vec::new(),
            score_plugins: Vec::new(),
            scores: Vec::new(),
            selection: None,
            after_filter_rejection: None,
            preemption: None,
            hints: Vec::new(),
        }
    }

    /// The FailedScheduling message rebuilt from the per-node verdicts alone (upstream's
    /// histogram of reasons), plus PostFilter's message. Equal to the decision's message,
    /// which the tests check.
    pub fn reasons_message(&self) -> String {
        // A pod group cycle evaluating one topology domain counts only its nodes.
        let outside = self
            .nodes
            .iter()
            .filter(|n| {
                matches!(&n.verdict, Verdict::Skipped { reason } if reason.starts_with(SKIPPED_PLACEMENT))
            })
            .count();
        let mut out = format!(
            "0/{} nodes are available:",
            self.num_all_nodes.saturating_sub(outside)
        );
        if let Some(r) = &self.pre_filter_rejection {
            out.push_str(&format!(" {}.", r.reasons.join(", ")));
        } else {
            let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
            for n in &self.nodes {
                if let Verdict::Rejected(r) = &n.verdict {
                    for reason in &r.reasons {
                        *counts.entry(reason).or_default() += 1;
                    }
                }
            }
            let mut parts: Vec<String> = counts
                .into_iter()
                .map(|(r, n)| format!("{n} {r}"))
                .collect();
            parts.sort();
            if !parts.is_empty() {
                out.push_str(&format!(" {}.", parts.join(", ")));
            }
        }
        if let Some(m) = self.preemption.as_ref().and_then(|p| p.message.as_ref()) {
            out.push_str(&format!(" {m}."));
        }
        out
    }

    /// The verdict of `node`.
    pub fn verdict(&self, node: &str) -> Option<&Verdict> {
        self.nodes
            .iter()
            .find(|n| n.node == node)
            .map(|n| &n.verdict)
    }

    /// The scores of `node`, when it was scored.
    pub fn scores_of(&self, node: &str) -> Option<&NodeScores> {
        self.scores.iter().find(|n| n.node == node)
    }
}
