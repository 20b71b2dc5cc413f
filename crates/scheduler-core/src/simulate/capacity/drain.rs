//! `simulate --drain`: what a `kubectl drain` of some nodes would do to their pods.
//!
//! ```text
//! dump --simulate--> settled dump (its pending pods bound where simulate put them)
//!        --cordon the nodes, unbind their evictable pods--> simulate again
//!        --> where each evicted pod lands (or its FailedScheduling text),
//!            and the PodDisruptionBudgets the evictions exceed
//! ```
//!
//! The evicted pods are the same pods, unbound (as their controllers would recreate them):
//! same spec, labels, owner references and priority, scheduled by the same queue, with
//! preemption as `simulate` does it (the pods it pushes out are reported). DaemonSet pods
//! and mirror (static) pods stay; pods in a terminal phase are simply gone.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;

use super::{NodesBeforeAfter, PendingSummary};
use crate::config::Loaded;
use crate::framework::{Extender, FrameworkError};
use crate::simulate::{ClusterObjects, PodResult, Report, run_with_extenders};
use crate::types::dra::PodClaimSource;
use crate::types::label_selector::LabelSelector;

/// The annotation the kubelet puts on the API copy of a static pod.
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// Which nodes to drain: by name, or by a label selector (`kubectl drain -l`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeChoice {
    Names(Vec<String>),
    Selector(String),
}

/// The answer to `--drain`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainReport {
    /// The drained (cordoned) nodes.
    pub nodes: Vec<String>,
    /// The dump's own pending pods, simulated (and bound) before the drain.
    pub pending: PendingSummary,
    /// Every evicted pod, in eviction order, with where it lands.
    pub evicted: Vec<EvictedPod>,
    /// Pods a drain leaves where they are (DaemonSet and mirror pods).
    pub staying: Vec<StayingPod>,
    /// Pods the API server refuses to evict (more than one PodDisruptionBudget covers
    /// them): they stay on their cordoned node and the drain does not finish.
    pub not_evictable: Vec<NotEvictable>,
    /// Evicted pods placed elsewhere.
    pub placed: usize,
    /// Evicted pods that fit nowhere (or failed otherwise).
    pub not_placed: usize,
    /// Running pods the evicted ones preempted: they would be pending after the drain.
    pub preempted: Vec<String>,
    /// PodDisruptionBudgets the evictions exceed.
    pub pdb_violations: Vec<PdbViolation>,
    /// Per-node usage once the dump's pending pods are placed, and after the drain.
    #[serde(skip)]
    pub usage: NodesBeforeAfter,
}

/// One evicted pod and what became of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EvictedPod {
    pub pod: String,
    /// The node it was evicted from.
    pub from: String,
    pub priority: i32,
    #[serde(flatten)]
    pub result: PodResult,
    /// What `kubectl drain` would need or lose for this pod (no controller, emptyDir), and
    /// a shared ResourceClaim that pins it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The devices its ResourceClaims hold where it lands.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<crate::simulate::PodDevice>,
}

/// A pod a drain does not evict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StayingPod {
    pub pod: String,
    pub node: String,
    /// `DaemonSet` or `mirror pod`.
    pub reason: String,
}

/// A pod whose eviction the API server refuses whatever the budgets allow.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NotEvictable {
    pub pod: String,
    pub node: String,
    /// The PodDisruptionBudgets (`namespace/name`) that cover it.
    pub pdbs: Vec<String>,
    pub reason: String,
}

/// A PodDisruptionBudget that the evictions exceed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PdbViolation {
    /// `namespace/name`.
    pub pdb: String,
    /// `minAvailable: X` or `maxUnavailable: X`, as written.
    pub budget: String,
    /// The pods the budget counts (controllers' replicas where the dump holds them).
    pub expected_pods: i32,
    /// Matching pods running and ready now.
    pub current_healthy: i32,
    /// How many must stay healthy.
    pub desired_healthy: i32,
    /// `currentHealthy - desiredHealthy`, at least 0.
    pub disruptions_allowed: i32,
    /// The healthy pods it covers that the drain evicts, in eviction order.
    pub evicted: Vec<String>,
    /// The evictions past the budget: the API server would refuse these (429).
    pub exceeding: Vec<String>,
}

/// Why a what-if question could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum WhatIfError {
    #[error(transparent)]
    Framework(#[from] FrameworkError),
    #[error("--drain: no node named {} in the dump; its nodes are: {}", .unknown.join(", "), .known)]
    UnknownNodes { unknown: Vec<String>, known: String },
    #[error(
        "--drain-selector {selector:?}: {message}; write it as kubectl does, e.g. `pool=batch,zone in (a,b),!gpu`"
    )]
    BadSelector { selector: String, message: String },
    #[error("--drain-selector {0:?}: no node of the dump has matching labels; nothing to drain")]
    NoNodeMatches(String),
    #[error("{file}: node template: {field}: {message}; {fix}")]
    NodeTemplate {
        file: String,
        field: String,
        message: String,
        fix: String,
    },
}

/// Drains `choice` from the dump: cordons the nodes, evicts their pods and reschedules
/// them on the rest. `seed` breaks score ties as in [`crate::simulate::run`].
pub fn drain(
    objects: &ClusterObjects,
    loaded: &Loaded,
    seed: u64,
    choice: &NodeChoice,
    extenders: &[Arc<dyn Extender>],
) -> Result<DrainReport, WhatIfError> {
    let nodes = select_nodes(objects, choice)?;
    let (settled, before) = settle(objects, loaded, seed, extenders)?;
    let drained: BTreeSet<&str> = nodes.iter().map(String::as_str).collect();
    let plan = evict(&settled, &drained, false);
    let after = run_with_extenders(&plan.objects, loaded, seed, None, extenders)?;
    let evicted = outcomes(&plan, &after);
    let placed = evicted
        .iter()
        .filter(|e| matches!(e.result, PodResult::Scheduled { .. }))
        .count();
    let keys: Vec<&str> = plan.evicted.iter().map(|e| e.key.as_str()).collect();
    Ok(DrainReport {
        nodes,
        pending: PendingSummary {
            scheduled: before.scheduled(),
            total: before.outcomes.len(),
        },
        not_placed: evicted.len() - placed,
        placed,
        preempted: preempted_by(&evicted),
        evicted,
        staying: plan.staying,
        not_evictable: plan.not_evictable,
        pdb_violations: pdb_violations(objects, &keys),
        usage: NodesBeforeAfter {
            before: before.nodes,
            after: after.nodes,
        },
    })
}

/// Why a pod was not placed (its FailedScheduling text, or what kept it from a cycle);
/// `None` when it was.
pub fn why_not_placed(r: &PodResult) -> Option<String> {
    match r {
        PodResult::Scheduled { .. } => None,
        PodResult::Unschedulable { message } => Some(message.clone()),
        PodResult::Gated { message } => Some(format!("gated: {message}")),
        PodResult::Ignored { reason } => Some(format!("not scheduled by this config: {reason}")),
        PodResult::Rejected { reason } => Some(format!("admission would reject it: {reason}")),
        PodResult::Error { message } => Some(format!("error: {message}")),
    }
}

/// The pods `evicted` pushed out, in order.
pub(super) fn preempted_by(evicted: &[EvictedPod]) -> Vec<String> {
    evicted
        .iter()
        .flat_map(|e| match &e.result {
            PodResult::Scheduled { preempted, .. } => preempted.clone(),
            _ => Vec::new(),
        })
        .collect()
}

/// The nodes `choice` names, in the dump's order; unknown names (all of them) are an error.
pub fn select_nodes(
    objects: &ClusterObjects,
    choice: &NodeChoice,
) -> Result<Vec<String>, WhatIfError> {
    let names = || objects.nodes.iter().filter_map(|n| n.metadata.name.clone());
    match choice {
        NodeChoice::Names(wanted) => {
            let known: BTreeSet<String> = names().collect();
            let unknown: Vec<String> = wanted
                .iter()
                .filter(|w| !known.contains(*w))
                .cloned()
                .collect();
            if !unknown.is_empty() {
                let mut list: Vec<String> = known.into_iter().take(20).collect();
                if objects.nodes.len() > list.len() {
                    list.push(format!("... ({} in all)", objects.nodes.len()));
                }
                return Err(WhatIfError::UnknownNodes {
                    unknown,
                    known: if list.is_empty() {
                        "none".into()
                    } else {
                        list.join(", ")
                    },
                });
            }
            let wanted: BTreeSet<&String> = wanted.iter().collect();
            Ok(names().filter(|n| wanted.contains(n)).collect())
        }
        NodeChoice::Selector(text) => {
            let bad = |message: String| WhatIfError::BadSelector {
                selector: text.clone(),
                message,
            };
            let raw = parse_selector(text).map_err(bad)?;
            let selector = LabelSelector::from_k8s(Some(&raw)).map_err(bad)?;
            let empty = BTreeMap::new();
            let chosen: Vec<String> = objects
                .nodes
                .iter()
                .filter(|n| selector.matches(n.metadata.labels.as_ref().unwrap_or(&empty)))
                .filter_map(|n| n.metadata.name.clone())
                .collect();
            if chosen.is_empty() {
                return Err(WhatIfError::NoNodeMatches(text.clone()));
            }
            Ok(chosen)
        }
    }
}

/// A label selector as kubectl reads `-l`: comma-separated `key=value`, `key==value`,
/// `key!=value`, `key`, `!key`, `key in (a,b)`, `key notin (a,b)`.
pub fn parse_selector(text: &str) -> Result<meta::LabelSelector, String> {
    let mut terms = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&text[start..]);
    let mut exprs = Vec::new();
    let expr = |key: &str, op: &str, values: Option<Vec<String>>| {
        let key = key.trim();
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(format!("{key:?} is not a label key"));
        }
        Ok(meta::LabelSelectorRequirement {
            key: key.to_string(),
            operator: op.to_string(),
            values,
        })
    };
    for term in terms.iter().map(|t| t.trim()) {
        if term.is_empty() {
            if text.trim().is_empty() {
                return Err("empty selector".into());
            }
            return Err("an empty term between commas".into());
        }
        let set = |rest: &str| -> Result<Vec<String>, String> {
            let inner = rest
                .trim()
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(|| format!("{term:?}: the values must be in parentheses"))?;
            let values: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
            if values.iter().any(String::is_empty) {
                return Err(format!("{term:?}: an empty value in the set"));
            }
            Ok(values)
        };
        let e = if let Some(key) = term.strip_prefix('!') {
            expr(key, "DoesNotExist", None)?
        } else if let Some((k, v)) = term.split_once("!=") {
            expr(k, "NotIn", Some(vec![v.trim().to_string()]))?
        } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
            expr(k, "In", Some(vec![v.trim().to_string()]))?
        } else if let Some((k, rest)) = term.split_once(" notin ") {
            expr(k, "NotIn", Some(set(rest)?))?
        } else if let Some((k, rest)) = term.split_once(" in ") {
            expr(k, "In", Some(set(rest)?))?
        } else {
            expr(term, "Exists", None)?
        };
        exprs.push(e);
    }
    Ok(meta::LabelSelector {
        match_expressions: Some(exprs),
        match_labels: None,
    })
}

/// Runs `simulate` on the dump and returns the dump as it would then be: every pod the
/// simulation placed bound to its node, its victims gone, and the pending pods it could
/// not place left out (they would stay pending whatever is drained).
pub(super) fn settle(
    objects: &ClusterObjects,
    loaded: &Loaded,
    seed: u64,
    extenders: &[Arc<dyn Extender>],
) -> Result<(ClusterObjects, Report), FrameworkError> {
    let report = run_with_extenders(objects, loaded, seed, None, extenders)?;
    let mut settled = objects.clone();
    let victims: BTreeSet<&str> = report
        .outcomes
        .iter()
        .flat_map(|o| match &o.result {
            PodResult::Scheduled { preempted, .. } => preempted.as_slice(),
            _ => &[],
        })
        .map(String::as_str)
        .collect();
    let outcomes: BTreeMap<&str, &PodResult> = report
        .outcomes
        .iter()
        .map(|o| (o.pod.as_str(), &o.result))
        .collect();
    settled.pods.retain_mut(|p| {
        let key = pod_key(p);
        if victims.contains(key.as_str()) {
            return false;
        }
        match outcomes.get(key.as_str()) {
            Some(PodResult::Scheduled { node, .. }) => {
                p.spec.get_or_insert_with(Default::default).node_name = Some(node.clone());
                true
            }
            // Pending pods that stay pending, and pods of another scheduler.
            Some(_) => false,
            None => true,
        }
    });
    Ok((settled, report))
}

/// `namespace/name`.
pub(super) fn pod_key(p: &Pod) -> String {
    format!(
        "{}/{}",
        p.metadata.namespace.as_deref().unwrap_or("default"),
        p.metadata.name.as_deref().unwrap_or("")
    )
}

/// Whether a drain leaves the pod where it is, and why.
pub(super) fn stays(p: &Pod) -> Option<&'static str> {
    if p.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_POD_ANNOTATION))
    {
        return Some("mirror pod");
    }
    if controller_of(p).is_some_and(|o| o.kind == "DaemonSet") {
        return Some("DaemonSet");
    }
    None
}

/// The owner reference with `controller: true`.
pub(super) fn controller_of(p: &Pod) -> Option<&meta::OwnerReference> {
    p.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}

/// Whether the pod has an emptyDir volume (its data goes with the node).
pub(super) fn has_empty_dir(p: &Pod) -> bool {
    p.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .any(|v| v.empty_dir.is_some())
}

pub(super) fn is_terminal(p: &Pod) -> bool {
    matches!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// An evicted pod and where it was.
pub(super) struct Eviction {
    pub key: String,
    pub from: String,
    pub priority: i32,
    pub notes: Vec<String>,
}

/// The dump after the drain, with what was evicted and what stayed.
pub(super) struct DrainPlan {
    pub objects: ClusterObjects,
    pub evicted: Vec<Eviction>,
    pub staying: Vec<StayingPod>,
    pub not_evictable: Vec<NotEvictable>,
}

/// `settled` with `drained` cordoned (or, with `remove`, gone with the pods that stay on
/// them) and their evictable pods unbound: pending copies of themselves, no status. Pods
/// in a terminal phase are dropped. Evictions are in node order, then the dump's order.
/// What became of each pod `plan` evicted, in the simulation `after` it.
pub(super) fn outcomes(plan: &DrainPlan, after: &Report) -> Vec<EvictedPod> {
    plan.evicted
        .iter()
        .map(|e| {
            let o = after.outcomes.iter().find(|o| o.pod == e.key);
            EvictedPod {
                pod: e.key.clone(),
                from: e.from.clone(),
                priority: e.priority,
                result: o.map(|o| o.result.clone()).unwrap_or(PodResult::Error {
                    message: "the simulation did not attempt it".into(),
                }),
                notes: e.notes.clone(),
                devices: o.map(|o| o.devices.clone()).unwrap_or_default(),
            }
        })
        .collect()
}

pub(super) fn evict(settled: &ClusterObjects, drained: &BTreeSet<&str>, remove: bool) -> DrainPlan {
    let mut objects = settled.clone();
    if remove {
        objects
            .nodes
            .retain(|n| !drained.contains(n.metadata.name.as_deref().unwrap_or("")));
    } else {
        for n in &mut objects.nodes {
            if drained.contains(n.metadata.name.as_deref().unwrap_or("")) {
                n.spec.get_or_insert_with(Default::default).unschedulable = Some(true);
            }
        }
    }
    let node_of = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .filter(|n| drained.contains(n.as_str()))
    };
    let order: BTreeMap<&str, usize> = settled
        .nodes
        .iter()
        .enumerate()
        .filter_map(|(i, n)| n.metadata.name.as_deref().map(|name| (name, i)))
        .collect();
    let mut staying = Vec::new();
    let mut not_evictable = Vec::new();
    // (namespace, claim) -> the evicted pods using it: (key, uid, name).
    let mut claims: ClaimUsers = BTreeMap::new();
    let mut evicted = Vec::new();
    let mut pods = Vec::with_capacity(objects.pods.len());
    for p in std::mem::take(&mut objects.pods) {
        let Some(node) = node_of(&p) else {
            pods.push(p);
            continue;
        };
        if is_terminal(&p) {
            continue;
        }
        if let Some(reason) = stays(&p) {
            staying.push(StayingPod {
                pod: pod_key(&p),
                node: node.clone(),
                reason: reason.into(),
            });
            if !remove {
                pods.push(p);
            }
            continue;
        }
        if let Some(pdbs) = budgets_refusing_eviction(&p, &settled.pdbs) {
            not_evictable.push(NotEvictable {
                pod: pod_key(&p),
                node: node.clone(),
                reason: multiple_budgets_reason(&pdbs),
                pdbs,
            });
            if !remove {
                pods.push(p);
            }
            continue;
        }
        let mut notes = Vec::new();
        if controller_of(&p).is_none() {
            notes.push(
                "no controller: kubectl drain needs --force, and nothing recreates the pod".into(),
            );
        }
        if has_empty_dir(&p) {
            notes.push("emptyDir data is lost (kubectl drain needs --delete-emptydir-data)".into());
        }
        let key = pod_key(&p);
        for claim in crate::types::dra::pod_claims(&p) {
            let name = match claim.source {
                PodClaimSource::Claim(n) | PodClaimSource::Generated(Some(n)) => n,
                _ => continue,
            };
            let ns = p
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into());
            claims.entry((ns, name)).or_default().push((
                key.clone(),
                p.metadata.uid.clone().unwrap_or_default(),
                p.metadata.name.clone().unwrap_or_default(),
            ));
        }
        let mut copy = p;
        if let Some(s) = copy.spec.as_mut() {
            s.node_name = None;
        }
        // The pod's claims stay named as they were (a claim only it used is made again,
        // unallocated, below).
        copy.status = copy
            .status
            .take()
            .and_then(|s| s.resource_claim_statuses)
            .map(|statuses| k8s_openapi::api::core::v1::PodStatus {
                resource_claim_statuses: Some(statuses),
                ..Default::default()
            });
        evicted.push(Eviction {
            key: pod_key(&copy),
            from: node,
            priority: copy.spec.as_ref().and_then(|s| s.priority).unwrap_or(0),
            notes,
        });
        pods.push(copy);
    }
    objects.pods = pods;
    let pins = release_claims(&mut objects, &claims);
    for e in &mut evicted {
        if let Some(notes) = pins.get(&e.key) {
            e.notes.extend(notes.iter().cloned());
        }
    }
    evicted.sort_by_key(|e| order.get(e.from.as_str()).copied().unwrap_or(usize::MAX));
    staying.sort_by_key(|s| order.get(s.node.as_str()).copied().unwrap_or(usize::MAX));
    not_evictable.sort_by_key(|s| order.get(s.node.as_str()).copied().unwrap_or(usize::MAX));
    DrainPlan {
        objects,
        evicted,
        staying,
        not_evictable,
    }
}

/// `(namespace, claim)` -> the evicted pods using it: `(key, uid, name)`.
type ClaimUsers = BTreeMap<(String, String), Vec<(String, String, String)>>;

/// What the evictions do to the pods' ResourceClaims, as the resourceclaim controller
/// would: the evicted pods leave each claim's `reservedFor`. A claim no one else uses
/// then loses its allocation (a claim generated from a template is deleted with its pod
/// and made again for the replacement; here it is kept, unallocated, under its name), so
/// the pod's devices are allocated again wherever it lands. A claim shared with pods that
/// stay keeps its allocation, which pins the evicted pod to the nodes that can reach it:
/// the notes returned (pod key -> notes) say so.
fn release_claims(
    objects: &mut ClusterObjects,
    claims: &ClaimUsers,
) -> BTreeMap<String, Vec<String>> {
    let mut notes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for c in &mut objects.resource_claims {
        let ns = c
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let name = c.metadata.name.clone().unwrap_or_default();
        let Some(users) = claims.get(&(ns.clone(), name.clone())) else {
            continue;
        };
        let Some(status) = c.status.as_mut() else {
            continue;
        };
        let evicted = |r: &k8s_openapi::api::resource::v1::ResourceClaimConsumerReference| {
            r.resource == "pods"
                && r.api_group.as_deref().unwrap_or("").is_empty()
                && users.iter().any(|(_, uid, n)| {
                    if r.uid.is_empty() {
                        *n == r.name
                    } else {
                        *uid == r.uid
                    }
                })
        };
        let staying: Vec<_> = status
            .reserved_for
            .take()
            .into_iter()
            .flatten()
            .filter(|r| !evicted(r))
            .collect();
        if staying.is_empty() {
            status.allocation = None;
            status.devices = None;
            continue;
        }
        if let Some(a) = &status.allocation {
            let others: Vec<String> = staying
                .iter()
                .map(|r| format!("{} {}", r.resource, r.name))
                .collect();
            let place = allocated_on(a).map_or_else(
                || "its allocation's nodes".to_string(),
                |n| format!("node {n}"),
            );
            for (key, _, _) in users {
                notes.entry(key.clone()).or_default().push(format!(
                    "shares ResourceClaim {ns}/{name} with {}, which stay: its devices stay allocated on {place}, so the pod can only go where they are reachable",
                    others.join(", ")
                ));
            }
        }
        status.reserved_for = Some(staying);
    }
    notes
}

/// The node an allocation is limited to, when its node selector names one node.
fn allocated_on(a: &k8s_openapi::api::resource::v1::AllocationResult) -> Option<String> {
    let terms = &a.node_selector.as_ref()?.node_selector_terms;
    let [term] = terms.as_slice() else {
        return None;
    };
    term.match_fields
        .iter()
        .flatten()
        .chain(term.match_expressions.iter().flatten())
        .find(|r| {
            (r.key == "metadata.name" || r.key == "kubernetes.io/hostname") && r.operator == "In"
        })
        .and_then(|r| match r.values.as_deref() {
            Some([one]) => Some(one.clone()),
            _ => None,
        })
}

/// The budgets (`namespace/name`) that make the eviction API refuse `p`: when more than
/// one covers it, the API server answers its eviction with an error (HTTP 500) instead of
/// checking them, so `kubectl drain` stops with an error for that pod. Budgets are matched
/// as the eviction API matches them: the pod's namespace, a selector that parses and is
/// not empty (an empty or missing one covers nothing there). A pod the API server deletes
/// without looking at budgets (phase Pending, Succeeded or Failed, or being deleted) is
/// never refused. `None` when the pod can be evicted.
pub(super) fn budgets_refusing_eviction(
    p: &Pod,
    pdbs: &[k8s_openapi::api::policy::v1::PodDisruptionBudget],
) -> Option<Vec<String>> {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Pending" | "Succeeded" | "Failed"))
        || p.metadata.deletion_timestamp.is_some()
    {
        return None;
    }
    let ns = p.metadata.namespace.as_deref().unwrap_or("default");
    let empty = BTreeMap::new();
    let labels = p.metadata.labels.as_ref().unwrap_or(&empty);
    let covering: Vec<String> = pdbs
        .iter()
        .filter(|b| b.metadata.namespace.as_deref().unwrap_or("default") == ns)
        .filter(|b| {
            LabelSelector::from_k8s(b.spec.as_ref().and_then(|s| s.selector.as_ref()))
                .is_ok_and(|s| !s.is_nothing() && !s.is_everything() && s.matches(labels))
        })
        .map(|b| format!("{ns}/{}", b.metadata.name.as_deref().unwrap_or("")))
        .collect();
    (covering.len() > 1).then_some(covering)
}

/// Why a pod covered by `pdbs` (more than one) cannot be evicted.
pub(super) fn multiple_budgets_reason(pdbs: &[String]) -> String {
    format!(
        "covered by {} PodDisruptionBudgets ({}): the API server refuses to evict a pod more than one budget covers (HTTP 500), so kubectl drain stops with an error; make the budgets' selectors disjoint",
        pdbs.len(),
        pdbs.join(", ")
    )
}

/// The budgets evicting the dump's pods `keys` (in this order) exceeds. Budgets are computed as the
/// disruption controller does, from the dump: matching pods in the budget's namespace
/// (`spec.selector`; an empty selector matches all of them), healthy when running and
/// Ready, `minAvailable`/`maxUnavailable` as numbers or percentages (rounded up) of the
/// expected pods. Evicting a pod that is not healthy spends nothing.
pub(super) fn pdb_violations(dump: &ClusterObjects, keys: &[&str]) -> Vec<PdbViolation> {
    let by_key: BTreeMap<String, &Pod> = dump.pods.iter().map(|p| (pod_key(p), p)).collect();
    let pods: Vec<&Pod> = keys
        .iter()
        .filter_map(|k| by_key.get(*k).copied())
        .collect();
    let mut out = Vec::new();
    for pdb in &dump.pdbs {
        let ns = pdb.metadata.namespace.as_deref().unwrap_or("default");
        let spec = pdb.spec.clone().unwrap_or_default();
        let Ok(selector) = LabelSelector::from_k8s(spec.selector.as_ref()) else {
            continue;
        };
        let empty = BTreeMap::new();
        let covers = |p: &Pod| {
            p.metadata.namespace.as_deref().unwrap_or("default") == ns
                && selector.matches(p.metadata.labels.as_ref().unwrap_or(&empty))
        };
        let matching: Vec<&Pod> = dump.pods.iter().filter(|p| covers(p)).collect();
        let evicted: Vec<String> = pods
            .iter()
            .filter(|p| covers(p) && is_healthy(p))
            .map(|p| pod_key(p))
            .collect();
        if evicted.is_empty() {
            continue;
        }
        let healthy = matching.iter().filter(|p| is_healthy(p)).count() as i32;
        let (budget, expected, desired) = match (&spec.max_unavailable, &spec.min_available) {
            (Some(max), _) => {
                let expected = expected_scale(dump, &matching);
                let max_n = scaled(max, expected);
                (
                    format!("maxUnavailable: {}", show(max)),
                    expected,
                    (expected - max_n).max(0),
                )
            }
            (None, Some(IntOrString::Int(n))) => {
                (format!("minAvailable: {n}"), matching.len() as i32, *n)
            }
            (None, Some(min)) => {
                let expected = expected_scale(dump, &matching);
                (
                    format!("minAvailable: {}", show(min)),
                    expected,
                    scaled(min, expected),
                )
            }
            // Neither: the disruption controller expects no pod, so allows nothing.
            (None, None) => ("neither minAvailable nor maxUnavailable".into(), 0, 0),
        };
        // No expected pod (e.g. none has a controller): nothing may be disrupted.
        let allowed = if expected <= 0 {
            0
        } else {
            (healthy - desired).max(0)
        };
        if evicted.len() as i32 <= allowed {
            continue;
        }
        out.push(PdbViolation {
            pdb: format!("{ns}/{}", pdb.metadata.name.as_deref().unwrap_or("")),
            budget,
            expected_pods: expected,
            current_healthy: healthy,
            desired_healthy: desired,
            disruptions_allowed: allowed,
            exceeding: evicted[allowed as usize..].to_vec(),
            evicted,
        });
    }
    out
}

fn show(v: &IntOrString) -> String {
    match v {
        IntOrString::Int(n) => n.to_string(),
        IntOrString::String(s) => s.clone(),
    }
}

/// A number, or a percentage of `total` rounded up.
fn scaled(v: &IntOrString, total: i32) -> i32 {
    match v {
        IntOrString::Int(n) => *n,
        IntOrString::String(s) => match s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) {
            Some(pct) => ((pct * i64::from(total) + 99) / 100) as i32,
            None => s.parse().unwrap_or(0),
        },
    }
}

/// How many pods the budget expects: the replicas of the pods' controllers where the dump
/// holds them (ReplicaSet, StatefulSet, ReplicationController), otherwise the controller's
/// pods the dump holds. Pods without a controller count for nothing (as upstream).
fn expected_scale(dump: &ClusterObjects, pods: &[&Pod]) -> i32 {
    let mut owners: BTreeMap<(String, String), i32> = BTreeMap::new();
    for p in pods {
        let ns = p.metadata.namespace.as_deref().unwrap_or("default");
        let Some(o) = controller_of(p) else {
            continue;
        };
        let same = |m: &meta::ObjectMeta| {
            m.name.as_deref() == Some(o.name.as_str())
                && m.namespace.as_deref().unwrap_or("default") == ns
        };
        let replicas = match o.kind.as_str() {
            "ReplicaSet" => dump
                .replica_sets
                .iter()
                .find(|r| same(&r.metadata))
                .map(|r| r.spec.replicas.unwrap_or(1)),
            "StatefulSet" => dump
                .stateful_sets
                .iter()
                .find(|r| same(&r.metadata))
                .map(|r| r.spec.replicas.unwrap_or(1)),
            "ReplicationController" => dump
                .replication_controllers
                .iter()
                .find(|r| same(&r.metadata))
                .map(|r| r.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)),
            _ => None,
        };
        let entry = owners.entry((o.kind.clone(), o.name.clone())).or_insert(0);
        match replicas {
            Some(r) => *entry = r,
            None => *entry += 1,
        }
    }
    owners.values().sum::<i32>()
}

/// Running, Ready (or reporting no Ready condition at all, as hand-written dumps often do)
/// and not being deleted.
pub(super) fn is_healthy(p: &Pod) -> bool {
    let Some(status) = p.status.as_ref() else {
        return false;
    };
    if p.metadata.deletion_timestamp.is_some() || status.phase.as_deref() != Some("Running") {
        return false;
    }
    status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .is_none_or(|c| c.status == "True")
}
