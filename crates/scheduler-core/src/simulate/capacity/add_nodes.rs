//! `simulate --add-nodes`: how many nodes of one shape the dump's pending pods need.
//!
//! Copies of a Node template are added to the dump (named `<name>-0`, `<name>-1`, ...,
//! each with its own `kubernetes.io/hostname` label and the template's other labels,
//! taints and allocatable) and the whole dump is simulated again, so the copies go through
//! the same loader and node view as the dump's own nodes. With `--count N` exactly N are
//! added; otherwise the smallest N that places every pending pod is searched for: N is
//! doubled until it places them all (up to `--max-nodes`), then bisected, so that N is
//! verified to place every pod and N - 1 verified to leave at least one pending.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use serde::Serialize;

use super::NodesBeforeAfter;
use super::drain::{WhatIfError, why_not_placed};
use crate::config::Loaded;
use crate::framework::Extender;
use crate::simulate::{ClusterObjects, PodResult, Report, load_str, run_with_extenders};

/// The label every node carries with its own name.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// `--max-nodes` when not given.
pub const DEFAULT_MAX_NODES: usize = 1000;

/// The node every copy is made from.
#[derive(Clone, Debug)]
pub struct NodeTemplate {
    /// The file it was read from (for messages).
    pub source: String,
    /// Its `metadata.name`; copies are named `<name>-<i>`.
    pub name: String,
    pub node: Node,
}

/// The answer to `--add-nodes`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AddNodesReport {
    /// The template's name.
    pub template: String,
    /// `--count`, when given.
    pub count: Option<usize>,
    /// The cap of the search (`--max-nodes`); `null` with `--count`.
    pub max_nodes: Option<usize>,
    /// Nodes added in the answer.
    pub nodes_added: usize,
    /// Whether every pending pod is placed with them.
    pub all_placed: bool,
    /// The dump's pending pods this is about (pods no profile schedules, gated pods and
    /// pods the API server would reject are left out: no node places them).
    pub pending: usize,
    /// How many of them are placed.
    pub placed: usize,
    /// Pods still pending (or pushed out by preemption), with why.
    pub left_over: Vec<LeftOver>,
    /// Pods placed on each added node (nodes that got none included).
    pub new_nodes: Vec<NewNode>,
    /// When searching: the same question with one node fewer, to show the answer is the
    /// smallest (`null` when the answer is 0 or the cap was reached).
    pub one_fewer: Option<Trial>,
    /// Every count simulated while searching, in order.
    pub tried: Vec<Trial>,
    /// Pending pods no added node can help (gated, another scheduler's, rejected).
    pub not_counted: Vec<LeftOver>,
    /// Per-node usage of the dump's bound pods, and after the pending pods are simulated
    /// with the answer's nodes added (the added nodes appear only in `after`).
    #[serde(skip)]
    pub usage: NodesBeforeAfter,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeftOver {
    pub pod: String,
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewNode {
    pub node: String,
    pub pods: usize,
}

/// One count simulated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Trial {
    pub nodes: usize,
    /// Pods left over with that many nodes.
    pub left_over: usize,
}

/// Reads the node template in `path`.
pub fn load_node_template(path: &Path) -> Result<NodeTemplate, WhatIfError> {
    let source = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| WhatIfError::NodeTemplate {
        file: source.clone(),
        field: "file".into(),
        message: format!("cannot read: {e}"),
        fix: "give the path of a YAML or JSON file holding one Node (`kubectl get node NAME -o yaml`)".into(),
    })?;
    read_node_template(&text, &source)
}

/// Reads a node template from YAML or JSON `text`; `source` names it in errors.
pub fn read_node_template(text: &str, source: &str) -> Result<NodeTemplate, WhatIfError> {
    let err = |field: &str, message: String, fix: &str| WhatIfError::NodeTemplate {
        file: source.to_string(),
        field: field.to_string(),
        message,
        fix: fix.to_string(),
    };
    let objects = load_str(text, source).map_err(|e| {
        err(
            "file",
            crate::simulate::describe_errors(&e),
            "fix the file as the errors say",
        )
    })?;
    let others = objects.origins.len() - objects.nodes.len();
    let [node] = objects.nodes.as_slice() else {
        return Err(err(
            "kind",
            format!(
                "the file holds {} Node(s) and {others} other object(s)",
                objects.nodes.len()
            ),
            "give exactly one Node (e.g. `kubectl get node NAME -o yaml` of a node of the shape to add)",
        ));
    };
    if others > 0 {
        return Err(err(
            "kind",
            format!("the file holds {others} object(s) besides the Node"),
            "give the Node alone",
        ));
    }
    let name = node.metadata.name.clone().unwrap_or_default();
    let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    if allocatable.is_none_or(|a| !a.contains_key("cpu") && !a.contains_key("memory")) {
        return Err(err(
            "status.allocatable",
            "missing: the copies would have no CPU or memory to offer".into(),
            "give status.allocatable with cpu, memory and pods (e.g. {cpu: '4', memory: 16Gi, pods: '110'})",
        ));
    }
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        return Err(err(
            "spec.unschedulable",
            "true: the copies would be cordoned and take no pod".into(),
            "remove spec.unschedulable from the template",
        ));
    }
    Ok(NodeTemplate {
        source: source.to_string(),
        name,
        node: node.clone(),
    })
}

/// `n` copies of the template, named after it and skipping names the dump's nodes have.
pub fn node_copies(template: &NodeTemplate, n: usize, objects: &ClusterObjects) -> Vec<Node> {
    let taken: BTreeSet<&str> = objects
        .nodes
        .iter()
        .filter_map(|n| n.metadata.name.as_deref())
        .collect();
    let mut out = Vec::with_capacity(n);
    let mut i = 0;
    while out.len() < n {
        let name = format!("{}-{i}", template.name);
        i += 1;
        if taken.contains(name.as_str()) {
            continue;
        }
        let mut node = template.node.clone();
        node.metadata.uid = None;
        node.metadata.resource_version = None;
        node.metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(HOSTNAME_LABEL.to_string(), name.clone());
        node.metadata.name = Some(name);
        if let Some(spec) = node.spec.as_mut() {
            spec.provider_id = None;
        }
        out.push(node);
    }
    out
}

/// Adds `count` copies of the template, or searches the smallest count that places every
/// pending pod (at most `max_nodes`).
pub fn add_nodes(
    objects: &ClusterObjects,
    loaded: &Loaded,
    seed: u64,
    template: &NodeTemplate,
    count: Option<usize>,
    max_nodes: usize,
    extenders: &[Arc<dyn Extender>],
) -> Result<AddNodesReport, WhatIfError> {
    let mut tried = Vec::new();
    let mut trial = |n: usize| -> Result<Outcome, WhatIfError> {
        let mut with = objects.clone();
        let copies = node_copies(template, n, objects);
        let names: Vec<String> = copies
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        with.nodes.extend(copies);
        let report = run_with_extenders(&with, loaded, seed, None, extenders)?;
        let o = Outcome::of(report, names);
        tried.push(Trial {
            nodes: n,
            left_over: o.left_over.len(),
        });
        Ok(o)
    };
    let (answer, one_fewer) = match count {
        Some(n) => (trial(n)?, None),
        None => {
            let zero = trial(0)?;
            if zero.left_over.is_empty() {
                (zero, None)
            } else {
                // Double until everything is placed (or the cap), then bisect between the
                // last count that failed and the first that did not.
                let (mut lo, mut lo_outcome) = (0, zero);
                let mut hi = None;
                let mut n = 1;
                loop {
                    let o = trial(n)?;
                    if o.left_over.is_empty() {
                        hi = Some((n, o));
                        break;
                    }
                    (lo, lo_outcome) = (n, o);
                    if n >= max_nodes {
                        break;
                    }
                    n = (n * 2).min(max_nodes);
                }
                match hi {
                    None => (lo_outcome, None),
                    Some((mut hi, mut hi_outcome)) => {
                        while hi - lo > 1 {
                            let mid = lo + (hi - lo) / 2;
                            let o = trial(mid)?;
                            if o.left_over.is_empty() {
                                (hi, hi_outcome) = (mid, o);
                            } else {
                                (lo, lo_outcome) = (mid, o);
                            }
                        }
                        let fewer = Trial {
                            nodes: lo,
                            left_over: lo_outcome.left_over.len(),
                        };
                        (hi_outcome, Some(fewer))
                    }
                }
            }
        }
    };
    Ok(AddNodesReport {
        template: template.name.clone(),
        count,
        max_nodes: count.is_none().then_some(max_nodes),
        nodes_added: answer.new_nodes.len(),
        all_placed: answer.left_over.is_empty(),
        pending: answer.pending,
        placed: answer.placed,
        left_over: answer.left_over,
        new_nodes: answer.new_nodes,
        one_fewer,
        tried,
        not_counted: answer.not_counted,
        usage: NodesBeforeAfter {
            before: crate::simulate::usage_before(objects),
            after: answer.nodes_after,
        },
    })
}

/// What one simulation with added nodes did to the pending pods.
struct Outcome {
    pending: usize,
    placed: usize,
    left_over: Vec<LeftOver>,
    not_counted: Vec<LeftOver>,
    new_nodes: Vec<NewNode>,
    nodes_after: Vec<crate::simulate::NodeUsage>,
}

impl Outcome {
    fn of(report: Report, names: Vec<String>) -> Self {
        let mut per_node: BTreeMap<String, usize> = names.iter().map(|n| (n.clone(), 0)).collect();
        let mut left_over = Vec::new();
        let mut not_counted = Vec::new();
        let mut pending = 0;
        let mut placed = 0;
        for o in &report.outcomes {
            match &o.result {
                PodResult::Gated { .. }
                | PodResult::Ignored { .. }
                | PodResult::Rejected { .. } => {
                    not_counted.push(LeftOver {
                        pod: o.pod.clone(),
                        reason: why_not_placed(&o.result).unwrap_or_default(),
                    });
                    continue;
                }
                PodResult::Scheduled { node, preempted } => {
                    placed += 1;
                    if let Some(c) = per_node.get_mut(node) {
                        *c += 1;
                    }
                    left_over.extend(preempted.iter().map(|v| LeftOver {
                        pod: v.clone(),
                        reason: format!("preempted by {} (it would be pending)", o.pod),
                    }));
                }
                PodResult::Unschedulable { .. } | PodResult::Error { .. } => {
                    left_over.push(LeftOver {
                        pod: o.pod.clone(),
                        reason: why_not_placed(&o.result).unwrap_or_default(),
                    });
                }
            }
            pending += 1;
        }
        Outcome {
            nodes_after: report.nodes,
            pending,
            placed,
            left_over,
            not_counted,
            new_nodes: names
                .into_iter()
                .map(|n| NewNode {
                    pods: per_node[&n],
                    node: n,
                })
                .collect(),
        }
    }
}
