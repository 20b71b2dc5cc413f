//! Filling an [`Explanation`] from what the cycle computed: the filter statuses, the score
//! table and the selection. Called by `schedule_one` only when a recorder was passed.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::{
    Explanation, HOW_HIGHEST, HOW_ONLY_FEASIBLE, HOW_TIE, NodeScores, NodeVerdict, Outcome,
    PluginScore, Rejection, SKIPPED_NOMINATED, SKIPPED_PERCENTAGE, SKIPPED_PLACEMENT, ScorePlugin,
    Selection, Verdict,
};
use crate::cache::Snapshot;
use crate::framework::{Code, Diagnosis, ScoreDetail, ScoreTable, Status};
use crate::schedule_one::Decision;
use crate::types::{NodeInfo, PodInfo};

/// Which nodes the filters were asked about.
#[derive(Debug, Default)]
pub(crate) struct FilterScope {
    /// The nominated node was tried alone and fits: no other node was looked at.
    pub nominated_fast_path: bool,
    /// PreFilter narrowed the nodes to these; the others carry the diagnosis' absent status.
    pub narrowed: Option<HashSet<String>>,
    /// A pod group cycle evaluated one topology domain (label, value): nodes outside it
    /// were not candidates.
    pub placement: Option<(String, String)>,
}

impl Explanation {
    /// Every node's verdict from the filter outcome, in snapshot order.
    pub(crate) fn record_filter(
        &mut self,
        snapshot: &Snapshot,
        feasible: &[Arc<NodeInfo>],
        diagnosis: &Diagnosis,
        scope: &FilterScope,
    ) {
        self.num_all_nodes = snapshot.num_nodes();
        if let Some(msg) = &diagnosis.pre_filter_msg {
            let absent = diagnosis.node_to_status.absent();
            self.pre_filter_rejection = Some(Rejection {
                plugin: absent.and_then(Status::plugin).map(str::to_string),
                code: absent
                    .map_or("Unschedulable", |s| s.code().as_str())
                    .to_string(),
                reasons: vec![msg.clone()],
            });
        }
        let feasible: HashSet<&str> = feasible.iter().map(|n| n.name.as_str()).collect();
        let explicit: HashMap<&str, &Status> = diagnosis.node_to_status.iter().collect();
        let absent = diagnosis.node_to_status.absent();
        self.nodes = snapshot
            .node_infos()
            .iter()
            .map(|n| {
                let name = n.name.as_str();
                let outside = scope.placement.as_ref().filter(|(k, v)| {
                    n.labels
                        .get(k.as_str())
                        .is_none_or(|l| l.as_str() != v.as_str())
                });
                let verdict = if let Some((k, v)) = outside {
                    Verdict::Skipped {
                        reason: format!("{SKIPPED_PLACEMENT} ({k}={v})"),
                    }
                } else if feasible.contains(name) {
                    Verdict::Feasible
                } else if let Some(s) = explicit.get(name) {
                    Verdict::Rejected(Rejection::from_status(s))
                } else if scope.nominated_fast_path {
                    Verdict::Skipped {
                        reason: SKIPPED_NOMINATED.to_string(),
                    }
                } else if let Some(s) = absent.filter(|_| {
                    diagnosis.pre_filter_msg.is_some()
                        || scope.narrowed.as_ref().is_some_and(|k| !k.contains(name))
                }) {
                    Verdict::Rejected(Rejection::from_status(s))
                } else {
                    Verdict::Skipped {
                        reason: SKIPPED_PERCENTAGE.to_string(),
                    }
                };
                NodeVerdict {
                    node: n.name.clone(),
                    verdict,
                }
            })
            .collect();
    }

    /// Each scored node's raw, normalized and weighted score per plugin, from the very table
    /// the selection used.
    pub(crate) fn record_scores(
        &mut self,
        nodes: &[Arc<NodeInfo>],
        table: &ScoreTable,
        detail: &ScoreDetail,
    ) {
        let (k, count) = (table.plugins.len(), table.totals.len());
        self.score_plugins = table
            .plugins
            .iter()
            .zip(&detail.weights)
            .map(|(p, w)| ScorePlugin {
                name: p.to_string(),
                weight: *w,
            })
            .collect();
        self.scores = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| NodeScores {
                node: n.name.clone(),
                plugins: (0..k)
                    .map(|j| PluginScore {
                        plugin: table.plugins[j].to_string(),
                        raw: detail.raw.get(j * count + i).copied().unwrap_or(0),
                        normalized: detail.normalized.get(j * count + i).copied().unwrap_or(0),
                        weight: detail.weights.get(j).copied().unwrap_or(0),
                        weighted: table.at(i, j),
                    })
                    .collect(),
                total: table.totals[i],
            })
            .collect();
    }

    /// The chosen node among the scored ones, the runner-up, the margin and any tie.
    pub(crate) fn record_selection(
        &mut self,
        nodes: &[Arc<NodeInfo>],
        totals: &[i64],
        chosen: usize,
    ) {
        let best = totals[chosen];
        let tied: Vec<String> = nodes
            .iter()
            .zip(totals)
            .filter(|(_, t)| **t == best)
            .map(|(n, _)| n.name.clone())
            .collect();
        let runner = nodes
            .iter()
            .zip(totals)
            .enumerate()
            .filter(|(i, _)| *i != chosen)
            .max_by_key(|(i, (_, t))| (**t, std::cmp::Reverse(*i)))
            .map(|(_, (n, t))| (n.name.clone(), *t));
        self.selection = Some(Selection {
            chosen: nodes[chosen].name.clone(),
            chosen_total: Some(best),
            margin: runner.as_ref().map(|(_, t)| best - t),
            runner_up_total: runner.as_ref().map(|(_, t)| *t),
            runner_up: runner.map(|(n, _)| n),
            how: if tied.len() > 1 { HOW_TIE } else { HOW_HIGHEST }.to_string(),
            tied: if tied.len() > 1 { tied } else { Vec::new() },
        });
    }

    /// Scoring was skipped: one node passed the filters.
    pub(crate) fn record_only_feasible(&mut self, node: &str) {
        self.selection = Some(Selection {
            chosen: node.to_string(),
            chosen_total: None,
            runner_up: None,
            runner_up_total: None,
            margin: None,
            tied: Vec::new(),
            how: HOW_ONLY_FEASIBLE.to_string(),
        });
    }
}

impl Explanation {
    /// The outcome, from the decision the cycle returned; for an unschedulable pod also what
    /// would have to change.
    pub(crate) fn finish(&mut self, d: &Decision, pod: &PodInfo, snapshot: &Snapshot) {
        match d {
            Decision::Bind { node, .. } => {
                self.outcome = Outcome::Scheduled;
                self.node = Some(node.clone());
            }
            Decision::Unschedulable {
                message, diagnosis, ..
            } => {
                self.outcome = Outcome::Unschedulable;
                self.message = Some(message.clone());
                if self.selection.is_some() {
                    // A node was picked, then Reserve, Permit or PreBind turned it down.
                    let plugin = diagnosis
                        .as_ref()
                        .and_then(|d| d.unschedulable_plugins.iter().next())
                        .map(|p| p.to_string());
                    self.after_filter_rejection = Some(Rejection {
                        plugin,
                        code: Code::Unschedulable.as_str().to_string(),
                        reasons: vec![message.clone()],
                    });
                } else {
                    self.hints = super::hints(pod, snapshot, self);
                }
            }
            Decision::Error { message } => {
                self.outcome = Outcome::Error;
                self.message = Some(message.clone());
            }
        }
    }
}
