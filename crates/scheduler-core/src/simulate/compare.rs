//! `simulate --compare-config`: the same dump under two configs (issue 34, step 4).
//!
//! Each config gets a simulation of its own from the same dump (and, with a pod template,
//! the same copies placed after it); nothing is shared between the two runs. The answer
//! lists the pods that one config placed and the other did not, the pods placed on
//! different nodes, each node's usage under both, the nodes left empty and a
//! fragmentation figure (defined on [`Fragmentation`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use super::capacity::{self, CapacityError, CapacityReport, PodTemplate};
use super::{ClusterObjects, NodeUsage, PodResult, Report, admit};
use crate::config::Loaded;
use crate::framework::Extender;
use crate::types::PodInfo;

/// One side of the comparison: a name for it (the config's file) and the config.
pub struct Side<'a> {
    pub name: String,
    pub loaded: &'a Loaded,
}

/// The two runs and their differences.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Comparison {
    /// The first (`--config`) and second (`--compare-config`) run.
    pub configs: Vec<ConfigRun>,
    /// Pods (and copies) placed under the first config and not under the second.
    pub placed_only_by_first: Vec<String>,
    /// Pods (and copies) placed under the second config and not under the first.
    pub placed_only_by_second: Vec<String>,
    /// Pods placed under both, on different nodes.
    pub moved: Vec<MovedPod>,
    /// Pods placed on the same node under both.
    pub same_node: usize,
    /// The pod whose fit defines fragmentation: the template, else the dump's largest
    /// pending pod (by CPU, then memory request); `None` when there is neither.
    pub reference_pod: Option<ReferencePod>,
}

/// What one config did with the dump.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigRun {
    pub name: String,
    /// The dump's pending pods placed, and how many there were.
    pub scheduled: usize,
    pub pending: usize,
    /// With a pod template: how many copies fit after the pending pods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copies: Option<CapacityReport>,
    /// Pending pods left unplaced, with the reason (FailedScheduling text or why not tried).
    pub not_placed: Vec<NotPlaced>,
    /// Nodes with no pod at all once everything is placed.
    pub empty_nodes: Vec<String>,
    pub fragmentation: Option<Fragmentation>,
    /// Per node, sorted by name, once everything is placed.
    pub nodes: Vec<NodeUsage>,
    /// `pod -> node` of everything placed (the dump's pending pods and the copies).
    #[serde(skip)]
    pub placements: BTreeMap<String, String>,
}

/// A pending pod this config did not place.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NotPlaced {
    pub pod: String,
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MovedPod {
    pub pod: String,
    pub first: String,
    pub second: String,
}

/// The pod fragmentation is measured against, with its requests.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReferencePod {
    pub pod: String,
    pub cpu_milli: i64,
    pub memory: i64,
}

/// Free capacity that is stranded: the share of the cluster's free CPU (and, apart, of its
/// free memory) that sits on nodes where the reference pod no longer fits by resources
/// (its CPU or memory request exceeds what is free there, or the node's pod slots are
/// used up). Taints, affinity and the like are not considered. 0 % means every free core
/// could still take the reference pod; 100 % means none could.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fragmentation {
    pub cpu_percent: f64,
    pub memory_percent: f64,
    /// Free CPU (millicores) and memory (bytes), in the whole cluster and stranded.
    pub free_cpu_milli: i64,
    pub stranded_cpu_milli: i64,
    pub free_memory: i64,
    pub stranded_memory: i64,
    /// Nodes the reference pod still fits on by resources.
    pub nodes_fitting: usize,
}

/// Why a comparison could not be made: which config failed, and how.
#[derive(Debug, thiserror::Error)]
#[error("{config}: {source}")]
pub struct CompareError {
    pub config: String,
    /// Boxed: the error is rare and large.
    #[source]
    pub source: Box<CapacityError>,
}

/// Runs the dump under both configs (with `template`, then as many copies as fit, up to
/// `max`) and compares the outcomes. `seed` breaks score ties the same way in both runs.
pub fn compare(
    objects: &ClusterObjects,
    sides: [Side<'_>; 2],
    seed: u64,
    template: Option<&PodTemplate>,
    max: Option<usize>,
    extenders: &[Arc<dyn Extender>],
) -> Result<Comparison, CompareError> {
    let reference = reference_pod(objects, template);
    let mut runs = Vec::with_capacity(2);
    for side in sides {
        let fail = |source: CapacityError| CompareError {
            config: side.name.clone(),
            source: Box::new(source),
        };
        let run = match template {
            Some(t) => {
                let (answer, details) =
                    capacity::how_many_fit_detailed(objects, side.loaded, seed, t, max, extenders)
                        .map_err(fail)?;
                config_run(
                    side.name.clone(),
                    &details.simulation,
                    details.nodes_after,
                    &details.copies,
                    Some(answer),
                    reference.as_ref(),
                )
            }
            None => {
                let report = super::run_with_extenders(objects, side.loaded, seed, None, extenders)
                    .map_err(|e| fail(e.into()))?;
                let nodes = report.nodes.clone();
                config_run(
                    side.name.clone(),
                    &report,
                    nodes,
                    &[],
                    None,
                    reference.as_ref(),
                )
            }
        };
        runs.push(run);
    }
    let (first, second) = (&runs[0].placements, &runs[1].placements);
    let mut moved = Vec::new();
    let mut same_node = 0;
    let mut placed_only_by_first = Vec::new();
    for (pod, a) in first {
        match second.get(pod) {
            None => placed_only_by_first.push(pod.clone()),
            Some(b) if a == b => same_node += 1,
            Some(b) => moved.push(MovedPod {
                pod: pod.clone(),
                first: a.clone(),
                second: b.clone(),
            }),
        }
    }
    let placed_only_by_second = second
        .keys()
        .filter(|p| !first.contains_key(*p))
        .cloned()
        .collect();
    Ok(Comparison {
        configs: runs,
        placed_only_by_first,
        placed_only_by_second,
        moved,
        same_node,
        reference_pod: reference,
    })
}

fn config_run(
    name: String,
    report: &Report,
    nodes: Vec<NodeUsage>,
    copies: &[(String, String)],
    answer: Option<CapacityReport>,
    reference: Option<&ReferencePod>,
) -> ConfigRun {
    let mut placements = BTreeMap::new();
    let mut not_placed = Vec::new();
    for o in &report.outcomes {
        let reason = match &o.result {
            PodResult::Scheduled { node, .. } => {
                placements.insert(o.pod.clone(), node.clone());
                continue;
            }
            PodResult::Unschedulable { message } => message.clone(),
            PodResult::Gated { message } => format!("gated: {message}"),
            PodResult::Ignored { reason } => format!("ignored: {reason}"),
            PodResult::Rejected { reason } => format!("rejected: {reason}"),
            PodResult::Error { message } => format!("error: {message}"),
        };
        not_placed.push(NotPlaced {
            pod: o.pod.clone(),
            reason,
        });
    }
    for (pod, node) in copies {
        placements.insert(pod.clone(), node.clone());
    }
    let empty_nodes = nodes
        .iter()
        .filter(|n| n.pods == 0)
        .map(|n| n.node.clone())
        .collect();
    ConfigRun {
        name,
        scheduled: report.scheduled(),
        pending: report.outcomes.len(),
        copies: answer,
        not_placed,
        empty_nodes,
        fragmentation: reference.map(|r| fragmentation(&nodes, r)),
        nodes,
        placements,
    }
}

/// The template's pod, else the dump's largest pending pod (by CPU, then memory request,
/// then name, so the choice is repeatable).
fn reference_pod(objects: &ClusterObjects, template: Option<&PodTemplate>) -> Option<ReferencePod> {
    let of = |info: &PodInfo| ReferencePod {
        pod: info.key().to_string(),
        cpu_milli: info.requests.milli_cpu,
        memory: info.requests.memory,
    };
    if let Some(t) = template {
        let mut r = of(&PodInfo::from_pod(&t.pod));
        r.pod = format!("{}/{}", t.namespace, t.name);
        return Some(r);
    }
    objects
        .pods
        .iter()
        .filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_none()))
        .filter(|p| !super::is_terminal(p))
        .map(|p| {
            of(&PodInfo::from_pod(
                &admit(p, objects).unwrap_or_else(|_| p.clone()),
            ))
        })
        .max_by(|a, b| {
            (a.cpu_milli, a.memory)
                .cmp(&(b.cpu_milli, b.memory))
                .then_with(|| b.pod.cmp(&a.pod))
        })
}

/// [`Fragmentation`] of `nodes` for the reference pod `r`.
pub fn fragmentation(nodes: &[NodeUsage], r: &ReferencePod) -> Fragmentation {
    let mut f = Fragmentation {
        cpu_percent: 0.0,
        memory_percent: 0.0,
        free_cpu_milli: 0,
        stranded_cpu_milli: 0,
        free_memory: 0,
        stranded_memory: 0,
        nodes_fitting: 0,
    };
    for n in nodes {
        let cpu = (n.cpu_allocatable_milli - n.cpu_milli).max(0);
        let mem = (n.memory_allocatable - n.memory).max(0);
        f.free_cpu_milli += cpu;
        f.free_memory += mem;
        let fits = cpu >= r.cpu_milli && mem >= r.memory && n.pods < n.max_pods;
        if fits {
            f.nodes_fitting += 1;
        } else {
            f.stranded_cpu_milli += cpu;
            f.stranded_memory += mem;
        }
    }
    let pct = |part: i64, whole: i64| {
        if whole <= 0 {
            0.0
        } else {
            (part as f64 * 1000.0 / whole as f64).round() / 10.0
        }
    };
    f.cpu_percent = pct(f.stranded_cpu_milli, f.free_cpu_milli);
    f.memory_percent = pct(f.stranded_memory, f.free_memory);
    f
}

#[cfg(test)]
mod tests;
