//! Scheduler extenders as the scheduling cycle sees them (upstream's `framework.Extender`):
//! services configured under `extenders:` that filter the feasible nodes after Filter, add
//! scores after Score, may veto or shrink preemption's victims and may bind the pods they
//! are interested in. The calls themselves (HTTP, JSON, TLS) are the caller's: scheduler-core
//! only sees this trait, so it stays free of I/O. In `schedule_one` a call blocks the cycle
//! until it answers or its `httpTimeout` passes, as upstream's cycle does;
//! `schedule_extenders` cuts the cycle around the filter and prioritize calls so that a
//! caller can make them elsewhere (the controller, off its scheduling loop).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::config;
use crate::types::{NodeInfo, PodInfo};

use super::{Diagnosis, FeasibleNodes, ScoreDetail, ScoreTable, Status};

/// Upstream's `MaxExtenderPriority`: extenders score nodes from 0 to 10.
pub const MAX_EXTENDER_PRIORITY: i64 = 10;
/// Upstream's `MaxNodeScore`: plugins score from 0 to 100; extender scores are scaled into it.
pub const MAX_NODE_SCORE: i64 = 100;

/// What an extender's filter call answered, by node name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExtenderFilterResult {
    /// The nodes that passed (each one of the nodes sent).
    pub node_names: Vec<String>,
    /// Nodes that failed, with why; preemption may still help them.
    pub failed: BTreeMap<String, String>,
    /// Nodes that failed where preemption cannot help.
    pub failed_and_unresolvable: BTreeMap<String, String>,
}

/// One node's score from an extender (upstream `HostPriority`), 0..=10.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostPriority {
    pub host: String,
    pub score: i64,
}

/// The victims preemption chose on one node (upstream `extenderv1.Victims`).
#[derive(Clone, Debug, Default)]
pub struct ExtenderVictims {
    pub pods: Vec<Arc<PodInfo>>,
    pub num_pdb_violations: i64,
}

/// An extender's answer to a preemption: per node, the victims it keeps (by pod UID) and
/// their PDB violations. A node left out is vetoed.
pub type PreemptionAnswer = BTreeMap<String, (Vec<String>, i64)>;

/// One configured extender. Implementations make the calls; `config()` says which calls
/// it makes (an empty verb means the call is not made, as upstream's HTTPExtender).
pub trait Extender: Send + Sync + fmt::Debug {
    /// The config entry this extender was built from (defaulted).
    fn config(&self) -> &config::Extender;

    /// Its name in scores and explanations (upstream: the URL prefix), kept for the process.
    fn name(&self) -> &'static str;

    /// The filter call on `nodes`. Only made when `filterVerb` is set.
    fn filter(
        &self,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> Result<ExtenderFilterResult, String>;

    /// The prioritize call on `nodes`. Only made when `prioritizeVerb` is set.
    fn prioritize(
        &self,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> Result<Vec<HostPriority>, String>;

    /// The preempt call. Only made when `preemptVerb` is set.
    fn process_preemption(
        &self,
        pod: &PodInfo,
        victims: &BTreeMap<String, ExtenderVictims>,
    ) -> Result<PreemptionAnswer, String>;
}

/// Upstream `IsInterested`: an extender without managed resources wants every pod; one with
/// them only pods whose containers or init containers request one of them. ferrosched's pod
/// view keeps the pod's summed requests (limits of an extended resource are its requests,
/// as the API server requires them to be equal).
pub fn is_interested(cfg: &config::Extender, pod: &PodInfo) -> bool {
    cfg.managed_resources.is_empty()
        || pod
            .requests
            .scalar
            .iter()
            .any(|(name, _)| cfg.manages(name.as_ref()))
}

/// The binder extender interested in `pod`, if any (upstream `extendersBinding`): it binds
/// the pod instead of the Bind plugins.
pub fn binder_for<'a>(
    extenders: &'a [Arc<dyn Extender>],
    pod: &PodInfo,
) -> Option<&'a Arc<dyn Extender>> {
    extenders
        .iter()
        .find(|e| !e.config().bind_verb.is_empty() && is_interested(e.config(), pod))
}

/// The error a failing extender fails the attempt with (upstream wraps nothing: the call's
/// error is the message).
fn call_error(message: String) -> Status {
    Status::error(message)
}

/// Upstream `findNodesThatPassExtenders`: each interested extender with a filter verb, in
/// order, narrows `feasible`; its rejections join the diagnosis (unresolvable ones take
/// precedence, reasons appended to a node's earlier ones). An ignorable extender's error is
/// skipped; any other fails the attempt.
pub fn find_nodes_that_pass_extenders(
    extenders: &[Arc<dyn Extender>],
    pod: &PodInfo,
    mut feasible: Vec<Arc<NodeInfo>>,
    diagnosis: &mut Diagnosis,
) -> Result<Vec<Arc<NodeInfo>>, Status> {
    for ext in extenders {
        if feasible.is_empty() {
            break;
        }
        let cfg = ext.config();
        if cfg.filter_verb.is_empty() || !is_interested(cfg, pod) {
            continue;
        }
        let result = match ext.filter(pod, &feasible) {
            Ok(r) => r,
            Err(e) if cfg.ignorable => {
                tracing::info!(extender = ext.name(), error = %e, "skipping ignorable extender that failed");
                continue;
            }
            Err(e) => return Err(call_error(e)),
        };
        let mut passed = Vec::with_capacity(result.node_names.len());
        for name in &result.node_names {
            match feasible.iter().find(|n| &n.name == name) {
                Some(n) => passed.push(Arc::clone(n)),
                None => {
                    let e = format!(
                        "extender {:?} claims a filtered node {name:?} which is not found in the input node list",
                        ext.name()
                    );
                    if cfg.ignorable {
                        continue;
                    }
                    return Err(call_error(e));
                }
            }
        }
        for (node, msg) in &result.failed_and_unresolvable {
            let mut reasons: Vec<String> = diagnosis
                .node_to_status
                .get(node)
                .filter(|_| diagnosis.node_to_status.iter().any(|(n, _)| n == node))
                .map(|s| s.reasons().iter().map(|r| r.to_string()).collect())
                .unwrap_or_default();
            reasons.push(msg.clone());
            // Named after the extender, so explanations show its verdict like a plugin's;
            // not among the diagnosis' plugins (the queue's), as upstream.
            diagnosis.node_to_status.set(
                node.clone(),
                Status::with_reasons(super::Code::UnschedulableAndUnresolvable, reasons)
                    .with_plugin(ext.name()),
            );
        }
        for (node, msg) in &result.failed {
            if result.failed_and_unresolvable.contains_key(node) {
                continue;
            }
            let earlier = diagnosis
                .node_to_status
                .iter()
                .find(|(n, _)| *n == node)
                .map(|(_, s)| s.clone());
            let status = match earlier {
                None => Status::unschedulable(msg.clone()).with_plugin(ext.name()),
                Some(s) => {
                    let mut reasons: Vec<String> =
                        s.reasons().iter().map(|r| r.to_string()).collect();
                    reasons.push(msg.clone());
                    let s2 = Status::with_reasons(s.code(), reasons);
                    match s.plugin() {
                        Some(p) => s2.with_plugin(p),
                        None => s2.with_plugin(ext.name()),
                    }
                }
            };
            diagnosis.node_to_status.set(node.clone(), status);
        }
        feasible = passed;
    }
    Ok(feasible)
}

/// Upstream's extender part of `prioritizeNodes`: every interested extender with a
/// prioritize verb scores `nodes`; each score times the extender's weight, scaled from
/// 0..10 to 0..100, is added to the node's total as a column named after the extender.
/// A failing prioritize call is ignored (the other scores decide), as upstream.
pub fn add_extender_scores(
    extenders: &[Arc<dyn Extender>],
    pod: &PodInfo,
    nodes: FeasibleNodes<'_>,
    table: &mut ScoreTable,
    detail: Option<&mut ScoreDetail>,
) {
    let answers = call_extender_priorities(extenders, pod, &nodes.to_vec());
    add_extender_priorities(extenders, &answers, nodes, table, detail);
}

/// The prioritize calls of [`add_extender_scores`], one entry per extender in `extenders`:
/// `None` for an extender not asked (no prioritize verb, not interested) or whose call
/// failed.
pub fn call_extender_priorities(
    extenders: &[Arc<dyn Extender>],
    pod: &PodInfo,
    nodes: &[Arc<NodeInfo>],
) -> Vec<Option<Vec<HostPriority>>> {
    extenders
        .iter()
        .map(|ext| {
            let cfg = ext.config();
            if cfg.prioritize_verb.is_empty() || !is_interested(cfg, pod) {
                return None;
            }
            ext.prioritize(pod, nodes)
                .inspect_err(|e| {
                    tracing::debug!(extender = ext.name(), error = %e, "extender prioritize failed; no score from it");
                })
                .ok()
        })
        .collect()
}

/// The scoring half of [`add_extender_scores`], pure: the answers of
/// [`call_extender_priorities`] (made earlier, possibly elsewhere) added to `table` for
/// `nodes`, matched by node name. A node the answers do not name scores 0.
pub fn add_extender_priorities(
    extenders: &[Arc<dyn Extender>],
    answers: &[Option<Vec<HostPriority>>],
    nodes: FeasibleNodes<'_>,
    table: &mut ScoreTable,
    mut detail: Option<&mut ScoreDetail>,
) {
    let n = nodes.len();
    if table.totals.len() != n {
        table.totals = vec![0; n];
    }
    for (ext, list) in extenders.iter().zip(answers) {
        let Some(list) = list else { continue };
        let cfg = ext.config();
        let mut raw = vec![0i64; n];
        for hp in list {
            if let Some(i) = nodes.iter().position(|x| x.name == hp.host) {
                raw[i] = raw[i].saturating_add(hp.score);
            }
        }
        let scale = MAX_NODE_SCORE / MAX_EXTENDER_PRIORITY;
        table.plugins.push(ext.name());
        for (i, r) in raw.iter().enumerate() {
            let s = r.saturating_mul(cfg.weight).saturating_mul(scale);
            table.weighted.push(s);
            table.totals[i] = table.totals[i].saturating_add(s);
        }
        if let Some(d) = detail.as_deref_mut() {
            d.raw.extend_from_slice(&raw);
            d.normalized
                .extend(raw.iter().map(|r| r.saturating_mul(scale)));
            d.weights.push(cfg.weight);
        }
    }
}

/// Whether a cycle for `pod` calls an extender's filter or prioritize (an interested
/// extender with either verb): such a cycle can be split around its calls
/// (`schedule_extenders`).
pub fn calls_extenders(extenders: &[Arc<dyn Extender>], pod: &PodInfo) -> bool {
    extenders.iter().any(|e| {
        let cfg = e.config();
        (!cfg.filter_verb.is_empty() || !cfg.prioritize_verb.is_empty()) && is_interested(cfg, pod)
    })
}

/// Upstream's `callExtenders` in preemption: each interested extender that supports
/// preemption may drop nodes (veto) or shrink their victims; a node an extender keeps
/// with no victims is an error (dropped for an ignorable extender). Returns the surviving
/// candidates.
pub fn call_extenders_for_preemption(
    extenders: &[Arc<dyn Extender>],
    pod: &PodInfo,
    mut victims: BTreeMap<String, ExtenderVictims>,
) -> Result<BTreeMap<String, ExtenderVictims>, Status> {
    for ext in extenders {
        if victims.is_empty() {
            break;
        }
        let cfg = ext.config();
        if cfg.preempt_verb.is_empty() || !is_interested(cfg, pod) {
            continue;
        }
        let answer = match ext.process_preemption(pod, &victims) {
            Ok(a) => a,
            Err(e) if cfg.ignorable => {
                tracing::info!(extender = ext.name(), error = %e, "skipping ignorable extender that failed");
                continue;
            }
            Err(e) => return Err(call_error(e)),
        };
        let mut next = BTreeMap::new();
        for (node, (uids, pdb)) in answer {
            if uids.is_empty() {
                if cfg.ignorable {
                    continue;
                }
                return Err(call_error(format!(
                    "expected at least one victim pod on node {node:?}"
                )));
            }
            let Some(before) = victims.get(&node) else {
                return Err(call_error(format!(
                    "extender {:?} returned node {node:?}, which was not a candidate",
                    ext.name()
                )));
            };
            let mut pods = Vec::with_capacity(uids.len());
            for uid in &uids {
                match before.pods.iter().find(|p| &p.uid == uid) {
                    Some(p) => pods.push(Arc::clone(p)),
                    None => {
                        return Err(call_error(format!(
                            "extender {:?} returned victim {uid:?} on node {node:?}, which is not among the candidate victims",
                            ext.name()
                        )));
                    }
                }
            }
            next.insert(
                node,
                ExtenderVictims {
                    pods,
                    num_pdb_violations: pdb,
                },
            );
        }
        victims = next;
    }
    Ok(victims)
}

#[cfg(test)]
mod tests;
