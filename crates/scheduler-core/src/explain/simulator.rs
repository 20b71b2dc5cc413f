//! An [`Explanation`] as kube-scheduler-simulator's result annotations, so its web UI can
//! show ferrosched's decisions. Keys and shapes as the simulator's debuggable scheduler
//! writes them: each value is a JSON object serialized to a string, node name -> plugin
//! name -> a string ("passed" or the rejection message for filters; the score as decimal
//! text for scores).

use std::collections::BTreeMap;

use super::{Explanation, Verdict};

/// Per node, each filter plugin that ran: "passed" or why it rejected the node.
pub const FILTER_RESULT: &str = "scheduler-simulator/filter-result";
/// Per scored node, each score plugin's score as Score returned it.
pub const SCORE_RESULT: &str = "scheduler-simulator/score-result";
/// Per scored node, each score plugin's normalized score times its weight.
pub const FINAL_SCORE_RESULT: &str = "scheduler-simulator/finalscore-result";
/// The node chosen (written only when one was).
pub const SELECTED_NODE: &str = "scheduler-simulator/selected-node";
/// What the simulator writes for a filter plugin that let a node through.
pub const PASSED: &str = "passed";

type Table = BTreeMap<String, BTreeMap<String, String>>;

/// The annotations the simulator would have written for this attempt. Nodes a filter never
/// saw (skipped by `percentageOfNodesToScore`, or left out by PreFilter) are absent, as in
/// the simulator, and so are the plugins after the one that rejected a node.
pub fn simulator_annotations(e: &Explanation) -> BTreeMap<String, String> {
    let mut filter = Table::new();
    for n in &e.nodes {
        let stop = match &n.verdict {
            Verdict::Feasible => None,
            Verdict::Rejected(r) => match r.plugin.as_deref() {
                Some(p) if e.filter_plugins.iter().any(|f| f == p) => Some((p, r)),
                _ => continue,
            },
            Verdict::Skipped { .. } => continue,
        };
        let row = filter.entry(n.node.clone()).or_default();
        for p in &e.filter_plugins {
            match stop {
                Some((rejecting, r)) if rejecting == p => {
                    row.insert(p.clone(), r.reasons.join(", "));
                    break;
                }
                _ => {
                    row.insert(p.clone(), PASSED.to_string());
                }
            }
        }
    }
    let mut score = Table::new();
    let mut final_score = Table::new();
    for n in &e.scores {
        let raw = score.entry(n.node.clone()).or_default();
        let fin = final_score.entry(n.node.clone()).or_default();
        for p in &n.plugins {
            raw.insert(p.plugin.clone(), p.raw.to_string());
            fin.insert(p.plugin.clone(), p.weighted.to_string());
        }
    }
    let json = |t: &Table| serde_json::to_string(t).unwrap_or_else(|_| "{}".to_string());
    let mut out = BTreeMap::new();
    out.insert(FILTER_RESULT.to_string(), json(&filter));
    out.insert(SCORE_RESULT.to_string(), json(&score));
    out.insert(FINAL_SCORE_RESULT.to_string(), json(&final_score));
    if let Some(node) = &e.node {
        out.insert(SELECTED_NODE.to_string(), node.clone());
    }
    out
}
