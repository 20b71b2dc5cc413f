//! One pod explained against a cluster as it is now (`ferrosched explain`): every other
//! pod stays where it is, nothing is bound, and the pod goes through its profile's cycle
//! once, explained. A pod of a gang goes through its group's cycle, with every pending pod
//! of its group, as the scheduler would try them; one its group keeps waiting at PreEnqueue
//! is explained by that wait.

use std::sync::Arc;

use super::{ClusterObjects, admit, cluster_cache, is_terminal, missing_from_dump};
use crate::cache::Snapshot;
use crate::config::Loaded;
use crate::explain::{Explanation, GroupRecord, group};
use crate::framework::{NominatedPods, ProfileRegistry, QueuedPodInfo, Registry};
use crate::schedule_group::{Route, route, schedule_group_recorded, scheduled_members};
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
    // The dump's PodGroups and their members, for GangScheduling's gate and the group
    // cycle; the pod explained counts as pending.
    let members: Vec<PodInfo> = objects
        .pods
        .iter()
        .filter(|p| !is_terminal(p))
        .map(|p| {
            let mut info = PodInfo::from_pod(p);
            if std::ptr::eq(p, raw) {
                info.node_name = None;
            }
            info
        })
        .collect();
    let mut registry = Registry::in_tree();
    let groups = super::pod_groups_of(objects, members.iter());
    crate::plugins::register_group_plugins(&mut registry, Arc::clone(&groups));
    let profiles = ProfileRegistry::new(&loaded.profiles, &registry).map_err(|e| e.to_string())?;
    let fw = profiles
        .for_scheduler_name(&pod.scheduler_name)
        .ok_or_else(|| {
            format!(
                "pod {key} has schedulerName {:?}, which is not one of this config's profiles",
                pod.scheduler_name
            )
        })?;

    let mut cache = cluster_cache(objects);
    super::dra::generate_group_claims(objects, &mut cache);
    // The pods of the explained pod's group waiting with it (for a gang's cycle).
    let mut siblings: Vec<QueuedPodInfo> = Vec::new();
    for (i, other) in objects.pods.iter().enumerate() {
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
        } else if pod.pod_group.is_some()
            && p.pod_group == pod.pod_group
            && p.scheduler_name == pod.scheduler_name
            && fw.run_pre_enqueue(&p).is_success()
        {
            siblings.push(QueuedPodInfo::new(p, i as u64));
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
    let missing = missing_from_dump(&pending, objects);
    let waiting = |gate| {
        group::waiting(fw, &pending, &groups.read(), gate, cache.node_count())
            .map(|explanation| ExplainedPod {
                explanation,
                bound_to: bound_to.clone(),
                missing: missing.clone(),
            })
            .ok_or_else(|| {
                format!(
                    "pod {key} never reaches a scheduling cycle: {}",
                    gate.message()
                )
            })
    };
    let gate = fw.run_pre_enqueue(&pending);
    if !gate.is_success() {
        return waiting(&gate);
    }
    let gang = match route(fw, &groups, &pending) {
        Route::Alone => None,
        Route::Gang(g) => Some(g),
        Route::Wait(s) => return waiting(&s),
        Route::Tree(root) => {
            return Err(format!(
                "pod {key} is scheduled with the tree of composite pod group {:?}, which explain does not trace yet; `simulate` shows where the tree's pods go and why",
                root.name
            ));
        }
    };

    let mut snapshot = Snapshot::new();
    cache.update_snapshot(&mut snapshot);
    let pct = loaded.config.percentage_of_nodes_to_score.unwrap_or(0);
    let mut alg = SchedulingAlgorithm::new(pct, seed);
    let nominated = NominatedPods::new();
    let explanation = match gang {
        None => {
            let mut e = Explanation::new(key, fw.profile_name());
            schedule_one_explained(fw, &mut alg, &pending, &snapshot, &nominated, &mut e);
            // A pod of a basic group (or of a profile without gangs) is scheduled alone.
            e.group = group::pod_by_pod(fw, &pending, &groups.read());
            e
        }
        Some(g) => {
            // The group's cycle, its pending pods in queue order, as the scheduler pops them.
            let mut members = siblings;
            let at = objects
                .pods
                .iter()
                .position(|p| std::ptr::eq(p, raw))
                .unwrap_or(0);
            members.push(QueuedPodInfo::new(Arc::clone(&pending), at as u64));
            members.sort_by(|a, b| {
                if fw.queue_sort_less(a, b) {
                    std::cmp::Ordering::Less
                } else if fw.queue_sort_less(b, a) {
                    std::cmp::Ordering::Greater
                } else {
                    a.timestamp.cmp(&b.timestamp)
                }
            });
            let (before, total) = {
                let gs = groups.read();
                let before = scheduled_members(&gs, &g.key, &cache);
                (before, gs.all_pods_count(&g.key))
            };
            let wants = |k: &str| k == key;
            let mut rec = GroupRecord::new(&wants);
            rec.total = Some(total);
            let outcome = schedule_group_recorded(
                fw,
                &mut alg,
                &g,
                &before,
                members,
                &mut cache,
                &mut snapshot,
                &nominated,
                &mut rec,
            );
            rec.explanations(fw, &g, &outcome)
                .pop()
                .ok_or_else(|| format!("pod {key} was not among its group's pods"))?
        }
    };
    Ok(ExplainedPod {
        missing,
        explanation,
        bound_to,
    })
}
