//! PodTopologySpread: spread matching pods evenly over topology domains (zones, nodes, ...).
//!
//! PreFilter counts, once per cycle, the pods matching each `DoNotSchedule` constraint per
//! topology value over the nodes the pod could be placed on, and keeps the two smallest
//! counts per constraint; Filter is then a few lookups per node. PreScore does the same for
//! `ScheduleAnyway` constraints and Score turns the counts into a weighted penalty that
//! NormalizeScore inverts. Pods without constraints get the profile's default constraints,
//! with a selector built from the Services and controllers that select them.
//!
//! Upstream's file split: this file has the plugin and its constraints, `common` what both
//! halves share, `filtering` PreFilter/Filter and `scoring` PreScore/Score/NormalizeScore.

mod common;
mod filtering;
mod hints;
mod scoring;
#[cfg(test)]
mod tests;

use crate::framework::Signing;
use crate::plugins::helper::sign;
use std::sync::Arc;

use k8s_openapi::api::core::v1::TopologySpreadConstraint;

use super::names::POD_TOPOLOGY_SPREAD;
use crate::cache::Snapshot;
use crate::config::{PluginArgs, PodTopologySpreadArgs, PodTopologySpreadConstraintsDefaulting};
use crate::framework::{
    ActionType, ClusterEvent, EventObjects, EventResource, Plugin, PluginPoints, QueueingHint,
};
use crate::plugin_points;
use crate::types::topology_spread::{LABEL_HOSTNAME, LABEL_TOPOLOGY_ZONE};
use crate::types::{PodInfo, SpreadConstraint, WhenUnsatisfiable};

pub use filtering::{ERR_REASON_CONSTRAINTS_NOT_MATCH, ERR_REASON_NODE_LABEL_NOT_MATCH};

/// Kubernetes' built-in defaults (`defaultingType: System`): spread softly over nodes
/// (maxSkew 3) and zones (maxSkew 5).
pub fn system_default_constraints() -> Vec<TopologySpreadConstraint> {
    [(LABEL_HOSTNAME, 3), (LABEL_TOPOLOGY_ZONE, 5)]
        .into_iter()
        .map(|(key, skew)| TopologySpreadConstraint {
            topology_key: key.to_string(),
            when_unsatisfiable: "ScheduleAnyway".to_string(),
            max_skew: skew,
            ..Default::default()
        })
        .collect()
}

pub struct PodTopologySpread {
    /// Applied to pods without constraints of their own; selectors are filled per pod.
    default_constraints: Vec<SpreadConstraint>,
    /// Defaults are the system ones: nodes missing a topology key still get scored.
    system_defaulted: bool,
}

impl PodTopologySpread {
    pub fn new(args: &PodTopologySpreadArgs) -> Self {
        let system = args.defaulting_type == PodTopologySpreadConstraintsDefaulting::System;
        let raw = if system {
            system_default_constraints()
        } else {
            args.default_constraints.clone()
        };
        PodTopologySpread {
            default_constraints: raw
                .iter()
                .map(|c| SpreadConstraint::compile(c, None))
                .collect(),
            system_defaulted: system,
        }
    }

    /// The registry factory; no args means the v1 defaults (system defaulting).
    pub fn factory(args: Option<&PluginArgs>) -> Result<Arc<dyn Plugin>, String> {
        let args = match args {
            None => PodTopologySpreadArgs {
                default_constraints: Vec::new(),
                defaulting_type: PodTopologySpreadConstraintsDefaulting::System,
            },
            Some(PluginArgs::PodTopologySpread(a)) => a.clone(),
            Some(other) => {
                return Err(format!(
                    "want args to be of type PodTopologySpreadArgs, got {}",
                    other.kind()
                ));
            }
        };
        Ok(Arc::new(PodTopologySpread::new(&args)))
    }

    /// The constraints for `action`: the pod's own if it has any (of any action), else the
    /// defaults with the selector of the workloads that select the pod (none without one).
    fn constraints_for(
        &self,
        pod: &PodInfo,
        snapshot: &Snapshot,
        action: WhenUnsatisfiable,
    ) -> Result<Vec<SpreadConstraint>, String> {
        let (hard, soft) = ("hard", "soft");
        let which = if action == WhenUnsatisfiable::DoNotSchedule {
            hard
        } else {
            soft
        };
        if !pod.spread.constraints.is_empty() {
            let mut out = Vec::new();
            for c in pod
                .spread
                .constraints
                .iter()
                .filter(|c| c.when_unsatisfiable == action)
            {
                if let Some(e) = &c.selector_error {
                    return Err(format!(
                        "obtaining pod's {which} topology spread constraints: {e}"
                    ));
                }
                out.push(c.clone());
            }
            return Ok(out);
        }
        let mut out: Vec<SpreadConstraint> = self
            .default_constraints
            .iter()
            .filter(|c| c.when_unsatisfiable == action)
            .cloned()
            .collect();
        if out.is_empty() {
            return Ok(out);
        }
        let Some(selector) = snapshot.workload_selectors().default_selector(pod) else {
            return Ok(Vec::new());
        };
        for c in &mut out {
            c.selector = selector.clone();
        }
        Ok(out)
    }
}

impl Plugin for PodTopologySpread {
    /// Signature for opportunistic batching (upstream `SignPod`).
    fn sign_pod(&self, pod: &PodInfo) -> Option<Signing> {
        // Spreading depends on other nodes' pods: never signable with constraints, the
        // profile's defaults included.
        if !pod.spread.constraints.is_empty() || !pod.topology_spread_constraints.is_empty() {
            return Some(Signing::Unsignable(
                "pods with topology constraints are not signable",
            ));
        }
        if !self.default_constraints.is_empty() {
            return Some(Signing::Unsignable(
                "pods with default topology constraints are not signable",
            ));
        }
        sign::with(Vec::new())
    }
    fn name(&self) -> &'static str {
        POD_TOPOLOGY_SPREAD
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => pre_filter, filter, pre_score, score)
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        vec![
            ClusterEvent::new(
                EventResource::Pod,
                // A toleration may help when a constraint honours taints (with hints, upstream).
                ActionType::ADD
                    | ActionType::UPDATE_POD_LABEL
                    | ActionType::UPDATE_POD_TOLERATION
                    | ActionType::DELETE,
            ),
            ClusterEvent::new(
                EventResource::Node,
                ActionType::ADD
                    | ActionType::DELETE
                    | ActionType::UPDATE_NODE_LABEL
                    | ActionType::UPDATE_NODE_TAINT,
            ),
        ]
    }

    /// Upstream's hints: a bound pod of the namespace whose labels (added, changed, gone)
    /// change what a hard constraint selects, the pod itself tolerating more when a
    /// constraint honours taints, or a node gaining, losing or changing a topology key.
    fn queueing_hint(
        &self,
        pod: &PodInfo,
        event: &ClusterEvent,
        objects: &EventObjects<'_>,
    ) -> QueueingHint {
        self.hint(pod, event, objects)
    }
}
