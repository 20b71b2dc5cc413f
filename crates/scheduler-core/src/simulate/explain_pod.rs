//! One pod explained against a cluster as it is now (`ferrosched explain`): every other
//! pod stays where it is, nothing is bound, and the pod goes through its profile's cycle
//! once, explained.

use std::sync::Arc;

use super::{ClusterObjects, admit, cluster_cache, is_terminal, missing_from_dump};
use crate::cache::Snapshot;
use crate::config::Loaded;
use crate::explain::Explanation;
use crate::framework::{NominatedPods, ProfileRegistry, Registry};
use crate::schedule_one::{SchedulingAlgorithm, schedule_one_explained};
use crate::types::PodInfo;

/// The explanation of one pod, and what the caller should say around it.
#[derive(Debug)]
pub struct ExplainedPod {
    pub explanation: Explanation,
    /// The node the pod is bound to, when it already was: the explanation is of the
    /// placement as of now, and the cluster may have changed since the decision.
    pub bound_to: Option<String>,
    /// Objects the pod needs that were not found.
    pub missing: Vec<String>,
}

/// Explains `key` (`namespace/name`) against `objects` with `loaded`'s profiles.
pub fn explain_pod(
    objects: &ClusterObjects,
    loaded: &Loaded,
    key: &str,
    seed: u64,
) -> Result<ExplainedPod, String> {
    let raw = objects
        .pods
        .iter()
        .find(|p| {
            format!(
                "{}/{}",
                p.metadata.namespace.as_deref().unwrap_or("default"),
                p.metadata.name.as_deref().unwrap_or("")
            ) == key
        })
        .ok_or_else(|| format!("pod {key} not found"))?;
    if is_terminal(raw) {
        return Err(format!("pod {key} has finished (Succeeded or Failed)"));
    }
    let pod = Arc::new(PodInfo::from_pod(&admit(raw, objects)?));
    // The dump's PodGroups and their members, for GangScheduling's gate.
    let members: Vec<PodInfo> = objects
        .pods
        .iter()
        .filter(|p| !is_terminal(p))
        .map(PodInfo::from_pod)
        .collect();
    let mut registry = Registry::in_tree();
    let groups = super::pod_groups_of(objects, members.iter());
    crate::plugins::register_group_plugins(&mut registry, groups);
    let profiles = ProfileRegistry::new(&loaded.profiles, &registry).map_err(|e| e.to_string())?;
    let fw = profiles
        .for_scheduler_name(&pod.scheduler_name)
        .ok_or_else(|| {
            format!(
                "pod {key} has schedulerName {:?}, which is not one of this config's profiles",
                pod.scheduler_name
            )
        })?;
    let gate = fw.run_pre_enqueue(&pod);
    if !gate.is_success() {
        return Err(format!(
            "pod {key} never reaches a scheduling cycle: {}",
            gate.message()
        ));
    }

    let mut cache = cluster_cache(objects);
    for other in &objects.pods {
        if std::ptr::eq(other, raw) || is_terminal(other) {
            continue;
        }
        let Ok(p) = admit(other, objects) else {
            continue;
        };
        let p = Arc::new(PodInfo::from_pod(&p));
        if p.node_name.is_some() {
            // A pod the cache refuses (say, on a node that is gone) cannot be counted.
            let _ = cache.add_pod(p);
        }
    }
    let bound_to = pod.node_name.clone();
    // Explained as if it were pending now: the same pod, unbound.
    let pending = if bound_to.is_some() {
        let mut p = PodInfo::clone(&pod);
        p.node_name = None;
        Arc::new(p)
    } else {
        pod
    };
    let mut snapshot = Snapshot::new();
    cache.update_snapshot(&mut snapshot);
    let pct = loaded.config.percentage_of_nodes_to_score.unwrap_or(0);
    let mut alg = SchedulingAlgorithm::new(pct, seed);
    let mut explanation = Explanation::new(key, fw.profile_name());
    schedule_one_explained(
        fw,
        &mut alg,
        &pending,
        &snapshot,
        &NominatedPods::new(),
        &mut explanation,
    );
    Ok(ExplainedPod {
        missing: missing_from_dump(&pending, objects),
        explanation,
        bound_to,
    })
}
