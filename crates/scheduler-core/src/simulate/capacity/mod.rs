//! `simulate --pod-template`: how many more copies of a pod fit (kubernetes-sigs/
//! cluster-capacity's question, answered with ferrosched's decisions).
//!
//! ```text
//! dump + config --simulate--> cache with the pending pods placed
//!                                  |
//!     template --copy i--> schedule_one (no PostFilter) --Bind--> assume, next copy
//!                                  |
//!                                  +--Unschedulable--> stop: its FailedScheduling text
//! ```
//!
//! The dump's own pending pods are simulated first, exactly as `simulate` does; then copies
//! of the template are placed one after another, each a fresh pod (`<name>-<i>`, its own
//! uid) in the profile its schedulerName selects, on the same cache, snapshot and
//! framework (only the nodes a copy changed are copied into the snapshot; identical copies
//! reuse the previous one's scored node list through opportunistic batching). Copies never
//! preempt: like cluster-capacity, the answer is what fits beside what runs now.

mod template;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;

use super::{AfterSimulation, ClusterObjects, NAMESPACE_NAME_LABEL, Report, admit, dra};
use crate::config::Loaded;
use crate::framework::{Extender, FrameworkError, Registry};
use crate::schedule_one::{Decision, assume_decision, schedule_one_without_preemption};
use crate::types::PodInfo;

pub use template::{PodTemplate, TEMPLATE_KINDS, TemplateError, load_template, read_template};

/// The answer: how many copies were placed, where, and what stopped the next one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReport {
    pub template: TemplateSummary,
    /// Copies placed.
    pub placed: usize,
    /// `--max`, when given.
    pub max: Option<usize>,
    /// Why no further copy was placed.
    pub stopped_by: Stop,
    /// Nodes that got at least one copy, by name, with how many.
    pub nodes: Vec<NodeCopies>,
    /// The dump's own pending pods, simulated before the first copy.
    pub pending: PendingSummary,
}

/// Which pod was copied and by which profile it was scheduled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateSummary {
    pub kind: String,
    pub name: String,
    pub namespace: String,
    pub profile: String,
}

/// What stopped the copies.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "reason")]
pub enum Stop {
    /// The next copy fits nowhere; `message` is its FailedScheduling text
    /// (`0/N nodes are available: ...`).
    Unschedulable { message: String },
    /// `--max` copies were placed; more might fit.
    MaxReached,
    /// A PreEnqueue plugin keeps the copies out of the queue (e.g. scheduling gates).
    Gated { message: String },
    /// A plugin failed on the next copy (kube-scheduler would retry it).
    Error { message: String },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeCopies {
    pub node: String,
    pub copies: usize,
}

/// What became of the dump's pending pods before the copies.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingSummary {
    pub scheduled: usize,
    pub total: usize,
}

/// Why the question could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum CapacityError {
    #[error(transparent)]
    Framework(#[from] FrameworkError),
    #[error(transparent)]
    Template(#[from] TemplateError),
}

/// Simulates the dump, then places copies of `template` until one does not fit or `max`
/// are placed. `seed` breaks score ties as in [`super::run`].
pub fn how_many_fit(
    objects: &ClusterObjects,
    loaded: &Loaded,
    seed: u64,
    template: &PodTemplate,
    max: Option<usize>,
    extenders: &[Arc<dyn Extender>],
) -> Result<CapacityReport, CapacityError> {
    let (report, state) = super::simulate_keeping_state(
        objects,
        loaded,
        &Registry::in_tree(),
        seed,
        None,
        extenders,
    )?;
    place_copies(objects, template, max, &report, state)
}

fn place_copies(
    objects: &ClusterObjects,
    template: &PodTemplate,
    max: Option<usize>,
    report: &Report,
    state: AfterSimulation,
) -> Result<CapacityReport, CapacityError> {
    let AfterSimulation {
        profiles,
        mut alg,
        mut cache,
        mut snapshot,
        nominated,
    } = state;
    let template_error = |field: &str, message: String, fix: String| TemplateError {
        source: template.source.clone(),
        line: None,
        field: Some(field.to_string()),
        message,
        fix,
    };
    let prefix = if template.kind == "Pod" {
        ""
    } else {
        "spec.template."
    };
    let pod = admit(&template.pod, objects).map_err(|reason| {
        template_error(
            &format!("{prefix}spec.priorityClassName"),
            reason,
            "name a PriorityClass the dump holds (dump priorityclasses), or remove the field"
                .into(),
        )
    })?;
    let base = PodInfo::from_pod(&pod);
    let Some(fw) = profiles.for_scheduler_name(&base.scheduler_name) else {
        let names: Vec<&str> = profiles.iter().map(|(n, _)| n).collect();
        return Err(template_error(
            &format!("{prefix}spec.schedulerName"),
            format!(
                "{:?} is not one of this config's profiles; another scheduler would place the copies",
                base.scheduler_name
            ),
            format!("use one of {}", names.join(", ")),
        )
        .into());
    };
    if base.pod_group.is_some() {
        return Err(template_error(
            &format!("{prefix}spec.schedulingGroup"),
            "copies of a gang's pod cannot be counted yet".into(),
            "remove the PodGroup reference to count single pods".into(),
        )
        .into());
    }
    // The template's namespace, as the API server would have it, when the dump lacks it
    // (namespace selectors of the cluster's pods may match it).
    if !objects
        .namespaces
        .iter()
        .any(|n| n.metadata.name.as_deref() == Some(&template.namespace))
    {
        cache.add_namespace(&Namespace {
            metadata: ObjectMeta {
                name: Some(template.namespace.clone()),
                labels: Some(BTreeMap::from([(
                    NAMESPACE_NAME_LABEL.to_string(),
                    template.namespace.clone(),
                )])),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        });
    }
    let summary = TemplateSummary {
        kind: template.kind.clone(),
        name: template.name.clone(),
        namespace: template.namespace.clone(),
        profile: fw.profile_name().to_string(),
    };
    let pending = PendingSummary {
        scheduled: report.scheduled(),
        total: report.outcomes.len(),
    };
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    let mut placed = 0;
    // Names the dump's pods already have in the namespace are skipped (the built-in
    // example's `web-1` is not a copy of a Deployment `web`).
    let taken: BTreeSet<&str> = objects
        .pods
        .iter()
        .filter(|p| p.metadata.namespace.as_deref().unwrap_or("default") == template.namespace)
        .filter_map(|p| p.metadata.name.as_deref())
        .collect();
    let mut suffixes = (0..).filter(|i| !taken.contains(format!("{}-{i}", template.name).as_str()));
    let gate = fw.run_pre_enqueue(&base);
    let has_claims = pod
        .spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref())
        .is_some_and(|c| !c.is_empty());
    let stopped_by = if !gate.is_success() {
        Stop::Gated {
            message: gate.message(),
        }
    } else {
        loop {
            if max.is_some_and(|m| placed >= m) {
                break Stop::MaxReached;
            }
            let i = suffixes.next().expect("endless");
            let copy = Arc::new(copy_of(&pod, &base, i, has_claims, objects, &mut cache));
            cache.update_snapshot(&mut snapshot);
            match schedule_one_without_preemption(fw, &mut alg, &copy, &snapshot, &nominated) {
                Decision::Bind {
                    node, pod, state, ..
                } => {
                    if let Err(e) = assume_decision(&mut cache, Arc::clone(&pod), &node, &state) {
                        break Stop::Error {
                            message: e.to_string(),
                        };
                    }
                    cache.finish_binding(pod.key());
                    fw.run_post_bind(&state, &pod, &node);
                    *per_node.entry(node).or_default() += 1;
                    placed += 1;
                }
                Decision::Unschedulable { message, .. } => break Stop::Unschedulable { message },
                Decision::Error { message } => break Stop::Error { message },
            }
        }
    };
    Ok(CapacityReport {
        template: summary,
        placed,
        max,
        stopped_by,
        nodes: per_node
            .into_iter()
            .map(|(node, copies)| NodeCopies { node, copies })
            .collect(),
        pending,
    })
}

/// Copy `<name>-<i>`, with a uid of its own. A pod with DRA claims is made again from
/// the API object (each copy's claims are generated from their templates); any other is
/// the compact view cloned, renamed.
fn copy_of(
    pod: &Pod,
    base: &PodInfo,
    i: usize,
    has_claims: bool,
    objects: &ClusterObjects,
    cache: &mut crate::cache::Cache,
) -> PodInfo {
    let name = format!("{}-{i}", base.name());
    let uid = format!("ferrosched-capacity-{}-{name}", base.namespace());
    if has_claims {
        let mut p = pod.clone();
        p.metadata.name = Some(name);
        p.metadata.uid = Some(uid);
        dra::generate_claims(&mut p, objects, cache);
        return PodInfo::from_pod(&p);
    }
    let mut info = base.clone();
    info.key.name = name;
    info.uid = uid;
    info
}
