//! `simulate --compress`: how many of the emptiest nodes could go with every pod still
//! placed (cluster-autoscaler's scale-down question, in a simple form).
//!
//! Candidates are the nodes no rule keeps, emptiest first (requested CPU fraction plus
//! requested memory fraction, ties by name). The first k candidates are removed together:
//! their evictable pods are rescheduled on the rest (DaemonSet pods go with their node),
//! and k works when every evicted pod is placed without preempting anything and no
//! PodDisruptionBudget is exceeded. k is doubled (1, 2, 4, ...) while it works, then
//! bisected, so that the answer k is verified to work and k + 1 verified to fail; the
//! (k + 1)-th candidate is the node that could not go, with why. Each k is one
//! simulation of the settled dump: about 2 log2(k) of them instead of k.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;

use super::drain::{
    EvictedPod, PdbViolation, WhatIfError, budgets_refusing_eviction, controller_of, evict,
    is_terminal, multiple_budgets_reason, outcomes, pdb_violations, pod_key, preempted_by, settle,
    stays, why_not_placed,
};
use super::{NodesBeforeAfter, PendingSummary};
use crate::config::Loaded;
use crate::framework::Extender;
use crate::simulate::{ClusterObjects, NodeUsage, run_with_extenders};
use crate::types::label_selector::LabelSelector;

/// A node annotated with this (`"true"`) is never a candidate.
pub const SCALE_DOWN_DISABLED: &str = "cluster-autoscaler.kubernetes.io/scale-down-disabled";
/// A pod annotated with this: `"false"` keeps its node, `"true"` lets it move whatever
/// else would keep it.
pub const SAFE_TO_EVICT: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict";

/// The answer to `--compress`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompressionReport {
    /// The dump's own pending pods, simulated (and bound) first.
    pub pending: PendingSummary,
    /// Nodes that could go, in the order they were taken (emptiest first).
    pub removable: Vec<String>,
    /// Where the pods of the removable nodes land.
    pub moves: Vec<EvictedPod>,
    /// The candidate that could not go, and why; none when every candidate can go.
    pub stopped_by: Option<CompressionStop>,
    /// Every count of candidates simulated, in order.
    pub tried: Vec<Step>,
    /// Every candidate, emptiest first.
    pub candidates: Vec<Candidate>,
    /// Nodes that are not candidates, with the rule that keeps each.
    pub kept: Vec<KeptNode>,
    /// Per-node usage once the dump's pending pods are placed, and after the removable
    /// nodes are gone (they are missing from `after`).
    #[serde(skip)]
    pub usage: NodesBeforeAfter,
}

/// One simulation: the first `nodes` candidates removed together, and whether every
/// evicted pod was placed without preemption or a budget exceeded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    pub nodes: usize,
    pub ok: bool,
}

/// A node that may be removed, with how full it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Candidate {
    pub node: String,
    /// Requested CPU, percent of allocatable.
    pub cpu_percent: i64,
    /// Requested memory, percent of allocatable.
    pub memory_percent: i64,
}

/// A node no compression removes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeptNode {
    pub node: String,
    pub reason: String,
}

/// Why the next candidate could not go.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompressionStop {
    pub node: String,
    /// Evicted pods (of this node or of the ones before it) that were not placed, with
    /// their FailedScheduling text.
    pub not_placed: Vec<NotPlaced>,
    /// Running pods that would have been preempted to place them.
    pub preempted: Vec<String>,
    /// Budgets the evictions would exceed.
    pub pdb_violations: Vec<PdbViolation>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NotPlaced {
    pub pod: String,
    pub message: String,
}

/// The largest number of emptiest candidates that can go together, and the next one's
/// reason not to.
pub fn compress(
    objects: &ClusterObjects,
    loaded: &Loaded,
    seed: u64,
    extenders: &[Arc<dyn Extender>],
) -> Result<CompressionReport, WhatIfError> {
    let (settled, before) = settle(objects, loaded, seed, extenders)?;
    let (candidates, kept) = candidates(&settled, &before.nodes);
    let mut tried = Vec::new();
    // Removes the first k candidates together: their evicted pods, and what went wrong.
    type Trial = (Vec<EvictedPod>, Vec<NodeUsage>, Option<CompressionStop>);
    let mut trial = |k: usize| -> Result<Trial, WhatIfError> {
        let trying: BTreeSet<&str> = candidates[..k].iter().map(|c| c.node.as_str()).collect();
        let plan = evict(&settled, &trying, true);
        let after = run_with_extenders(&plan.objects, loaded, seed, None, extenders)?;
        let evicted = outcomes(&plan, &after);
        let keys: Vec<&str> = plan.evicted.iter().map(|e| e.key.as_str()).collect();
        let violations = pdb_violations(objects, &keys);
        let preempted = preempted_by(&evicted);
        let not_placed: Vec<NotPlaced> = evicted
            .iter()
            .filter_map(|e| {
                why_not_placed(&e.result).map(|message| NotPlaced {
                    pod: e.pod.clone(),
                    message,
                })
            })
            .collect();
        let stop = (!not_placed.is_empty() || !preempted.is_empty() || !violations.is_empty())
            .then(|| CompressionStop {
                node: candidates[k - 1].node.clone(),
                not_placed,
                preempted,
                pdb_violations: violations,
            });
        tried.push(Step {
            nodes: k,
            ok: stop.is_none(),
        });
        Ok((evicted, after.nodes, stop))
    };
    // Double k while the first k candidates can go, then bisect between the last k that
    // worked and the first that did not: k is verified to work and k + 1 to fail.
    let n = candidates.len();
    let (mut lo, mut moves, mut after) = (0, Vec::new(), before.nodes.clone());
    let mut failed: Option<(usize, CompressionStop)> = None;
    let mut k = 1;
    while k <= n {
        let (evicted, nodes, stop) = trial(k)?;
        match stop {
            None => (lo, moves, after) = (k, evicted, nodes),
            Some(s) => {
                failed = Some((k, s));
                break;
            }
        }
        if k == n {
            break;
        }
        k = (k * 2).min(n);
    }
    if let Some((mut hi, mut stop)) = failed.take() {
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            let (evicted, nodes, s) = trial(mid)?;
            match s {
                None => (lo, moves, after) = (mid, evicted, nodes),
                Some(s) => (hi, stop) = (mid, s),
            }
        }
        failed = Some((hi, stop));
    }
    Ok(CompressionReport {
        pending: PendingSummary {
            scheduled: before.scheduled(),
            total: before.outcomes.len(),
        },
        removable: candidates[..lo].iter().map(|c| c.node.clone()).collect(),
        moves,
        stopped_by: failed.map(|(_, s)| s),
        tried,
        candidates,
        kept,
        usage: NodesBeforeAfter {
            before: before.nodes,
            after,
        },
    })
}

/// The candidates, emptiest first, and the nodes a rule keeps. The rules (a simple form
/// of cluster-autoscaler's): a node annotated `scale-down-disabled: "true"` stays, and so
/// does a node running a pod that cannot move: a mirror (static) pod, a pod annotated
/// `safe-to-evict: "false"`, and, unless annotated `safe-to-evict: "true"`, a pod without
/// a controller, a pod with local storage (emptyDir or hostPath) or a kube-system pod no
/// PodDisruptionBudget covers. DaemonSet pods never keep a node.
fn candidates(settled: &ClusterObjects, usage: &[NodeUsage]) -> (Vec<Candidate>, Vec<KeptNode>) {
    let mut on_node: BTreeMap<&str, Vec<&k8s_openapi::api::core::v1::Pod>> = BTreeMap::new();
    for p in &settled.pods {
        if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.as_deref())
            && !is_terminal(p)
        {
            on_node.entry(n).or_default().push(p);
        }
    }
    let usage: BTreeMap<&str, &NodeUsage> = usage.iter().map(|u| (u.node.as_str(), u)).collect();
    let mut candidates = Vec::new();
    let mut kept = Vec::new();
    for n in &settled.nodes {
        let name = n.metadata.name.clone().unwrap_or_default();
        let disabled = n
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SCALE_DOWN_DISABLED))
            .is_some_and(|v| v == "true");
        let reason = if disabled {
            Some(format!("annotated {SCALE_DOWN_DISABLED}: \"true\""))
        } else {
            on_node
                .get(name.as_str())
                .into_iter()
                .flatten()
                .find_map(|p| blocks(p, settled))
        };
        if let Some(reason) = reason {
            kept.push(KeptNode { node: name, reason });
            continue;
        }
        let pct = |a: i64, b: i64| if b <= 0 { 0 } else { a * 100 / b };
        let (cpu, mem, frac) = usage.get(name.as_str()).map_or((0, 0, 0.0), |u| {
            let f = |a: i64, b: i64| if b <= 0 { 0.0 } else { a as f64 / b as f64 };
            (
                pct(u.cpu_milli, u.cpu_allocatable_milli),
                pct(u.memory, u.memory_allocatable),
                f(u.cpu_milli, u.cpu_allocatable_milli) + f(u.memory, u.memory_allocatable),
            )
        });
        candidates.push((
            frac,
            Candidate {
                node: name,
                cpu_percent: cpu,
                memory_percent: mem,
            },
        ));
    }
    candidates.sort_by(|(a, x), (b, y)| a.total_cmp(b).then_with(|| x.node.cmp(&y.node)));
    (candidates.into_iter().map(|(_, c)| c).collect(), kept)
}

/// Why `p` keeps its node, if it does.
fn blocks(p: &k8s_openapi::api::core::v1::Pod, settled: &ClusterObjects) -> Option<String> {
    let key = pod_key(p);
    match stays(p) {
        Some("DaemonSet") => return None,
        Some(_) => return Some(format!("runs the static (mirror) pod {key}")),
        None => {}
    }
    // Whatever its annotations say, the eviction API refuses such a pod.
    if let Some(pdbs) = budgets_refusing_eviction(p, &settled.pdbs) {
        return Some(format!(
            "{key} cannot be evicted: {}",
            multiple_budgets_reason(&pdbs)
        ));
    }
    let safe = p
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SAFE_TO_EVICT))
        .map(String::as_str);
    match safe {
        Some("false") => return Some(format!("{key} is annotated {SAFE_TO_EVICT}: \"false\"")),
        Some("true") => return None,
        _ => {}
    }
    if controller_of(p).is_none() {
        return Some(format!(
            "{key} has no controller: nothing would recreate it elsewhere"
        ));
    }
    let local = p
        .spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .find(|v| v.empty_dir.is_some() || v.host_path.is_some());
    if let Some(v) = local {
        return Some(format!(
            "{key} has local storage (volume {:?}); annotate it {SAFE_TO_EVICT}: \"true\" if it may move",
            v.name
        ));
    }
    let ns = p.metadata.namespace.as_deref().unwrap_or("default");
    if ns == "kube-system" && !covered_by_pdb(p, settled) {
        return Some(format!(
            "{key} is a kube-system pod no PodDisruptionBudget covers"
        ));
    }
    None
}

fn covered_by_pdb(p: &k8s_openapi::api::core::v1::Pod, settled: &ClusterObjects) -> bool {
    let ns = p.metadata.namespace.as_deref().unwrap_or("default");
    let empty = BTreeMap::new();
    let labels = p.metadata.labels.as_ref().unwrap_or(&empty);
    settled.pdbs.iter().any(|b| {
        b.metadata.namespace.as_deref().unwrap_or("default") == ns
            && LabelSelector::from_k8s(b.spec.as_ref().and_then(|s| s.selector.as_ref()))
                .is_ok_and(|s| s.matches(labels))
    })
}
