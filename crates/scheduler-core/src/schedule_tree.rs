//! One cycle for a tree of groups (upstream: `compositePodGroupSchedulingDefaultAlgorithm`,
//! CompositePodGroup gate): every waiting pod under the root, against one cluster state.
//!
//! Each CompositePodGroup tries its children in order (oldest first): a PodGroup with the
//! ordinary group cycle ([`schedule_group`], all or nothing for its `minCount`), a
//! CompositePodGroup by recursion. After each child the level's quorum is checked as a gang's
//! is, counting children instead of pods (`minGroupCount`, one for basic), with the same
//! words (`minCount (2) cannot be satisfied: ...`). A level that cannot reach its quorum
//! undoes everything placed below it; a level that can keeps placing its remaining children
//! (greedy, no backtracking). A PodGroup whose pods were all placed in earlier cycles counts
//! as a placed child. Nothing is bound unless the root succeeds, and then only the pods of
//! the PodGroups that succeeded; the others wait with their reason.
//!
//! A CompositePodGroup with `schedulingConstraints.topology` places its whole subtree in
//! one domain of the label, chosen as a PodGroup's placement is ([`Tree::placements`]);
//! placements nest (a child's domain lies inside its parent's). Preemption for a tree is
//! `group_preemption::preempt_for_tree`.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use crate::cache::{Cache, Snapshot};
use crate::framework::{Diagnosis, Framework, NominatedPods, QueuedPodInfo};
use crate::plugins::gang_scheduling::min_count_feasible;
use crate::plugins::names::GANG_SCHEDULING;
use crate::pod_group_manager::{PodGroupManager, PodGroups};
use crate::pod_group_tree::{self, TreeNode};
use crate::schedule_group::{
    GroupOutcome, WaitingMember, group_failure_message, schedule_group, scheduled_members,
    undo_placed,
};
use crate::schedule_one::SchedulingAlgorithm;
use crate::schedule_placements::{candidates, raw_scores};
use crate::types::composite_pod_group::CompositeKey;
use crate::types::pod_group::{GroupCondition, GroupPolicy, PodGroupInfo, PodGroupKey};

/// What one PodGroup of the tree got from the cycle.
#[derive(Debug)]
pub struct LeafOutcome {
    pub group: Arc<PodGroupInfo>,
    /// Its pods placed before the cycle (bound or assumed).
    pub scheduled_before: usize,
    pub outcome: GroupOutcome,
}

/// Runs the cycle for the tree under `root` with its waiting pods `members` (any order).
/// Returns one outcome per PodGroup of the tree that had waiting pods or was placed, in
/// tree order; `Placed` ones hold assumed pods to bind.
#[allow(clippy::too_many_arguments)]
pub fn schedule_tree(
    fw: &Framework,
    alg: &mut SchedulingAlgorithm,
    groups: &PodGroups,
    root: &CompositeKey,
    members: Vec<QueuedPodInfo>,
    cache: &mut Cache,
    snapshot: &mut Snapshot,
    nominated: &NominatedPods,
) -> Vec<LeafOutcome> {
    let mut by_leaf: HashMap<PodGroupKey, Vec<QueuedPodInfo>> = HashMap::new();
    for q in members {
        if let Some(k) = q.pod.pod_group.as_deref() {
            by_leaf.entry(k.clone()).or_default().push(q);
        }
    }
    let mut tree = Tree {
        fw,
        alg,
        groups,
        cache,
        snapshot,
        nominated,
        by_leaf,
        results: BTreeMap::new(),
        order: Vec::new(),
    };
    let node = TreeNode::Composite(root.clone());
    if let Err(reason) = inconsistent_priority(groups, root) {
        tree.error(&node, &reason);
    } else if let Err(reason) = tree.composite(root) {
        tree.fail(&node, root, &reason);
    }
    tree.finish(root)
}

/// Upstream's check before a tree's cycle: every group of it has the root's priority (unset
/// counts as 0). A tree that fails it is not tried; its pods back off with the error.
fn inconsistent_priority(groups: &PodGroups, root: &CompositeKey) -> Result<(), String> {
    let want = groups.composite(root).and_then(|c| c.priority).unwrap_or(0);
    let composites = pod_group_tree::composites_under(groups, root);
    let found = composites
        .iter()
        .filter_map(|k| groups.composite(k))
        .map(|c| (c.priority.unwrap_or(0), c.key.to_string()))
        .chain(
            pod_group_tree::leaves(groups, &TreeNode::Composite(root.clone()))
                .iter()
                .filter_map(|k| groups.get(k))
                .map(|g| (g.priority.unwrap_or(0), g.key.to_string())),
        )
        .find(|(p, _)| *p != want);
    match found {
        None => Ok(()),
        Some((p, name)) => Err(format!(
            "all pod groups in a hierarchy should have the same priority as the root pod group's priority, got {want} ({root}) and {p} ({name})"
        )),
    }
}

struct Tree<'a> {
    fw: &'a Framework,
    alg: &'a mut SchedulingAlgorithm,
    groups: &'a PodGroups,
    cache: &'a mut Cache,
    snapshot: &'a mut Snapshot,
    nominated: &'a NominatedPods,
    /// Waiting pods of the PodGroups not evaluated yet.
    by_leaf: HashMap<PodGroupKey, Vec<QueuedPodInfo>>,
    results: BTreeMap<PodGroupKey, LeafOutcome>,
    /// PodGroups in the order they were evaluated or failed.
    order: Vec<PodGroupKey>,
}

impl Tree<'_> {
    /// One CompositePodGroup level: `Err` with the level's reason when its quorum fails
    /// (everything below it then undone by the caller through [`Self::fail`]).
    fn composite(&mut self, key: &CompositeKey) -> Result<(), String> {
        let Some(info) = self.groups.composite(key).cloned() else {
            return Err(pod_group_tree::RootError::Missing(key.clone()).to_string());
        };
        match &info.topology_key {
            None => self.level(key, info.quorum()),
            Some(t) => self.placements(key, info.quorum(), t),
        }
    }

    /// A CompositePodGroup with a topology constraint (upstream's placement algorithm, one
    /// level up): the PlacementGenerate plugins' candidates among the nodes the levels above
    /// allow (pods of the subtree placed before pin the domain); the level is evaluated
    /// inside each and undone until enough feasible ones are found, and the best by the
    /// PlacementScore plugins (pods of the subtree it holds, NodeResourcesFit over its
    /// nodes, as a PodGroup's placements are scored) is evaluated again and kept.
    fn placements(&mut self, key: &CompositeKey, quorum: u32, label: &str) -> Result<(), String> {
        let node = TreeNode::Composite(key.clone());
        let leaves = pod_group_tree::leaves(self.groups, &node);
        self.cache.update_snapshot(self.snapshot);
        let scheduled: Vec<String> = leaves
            .iter()
            .flat_map(|l| scheduled_members(self.groups, l, self.cache))
            .collect();
        let c = candidates(self.fw, self.alg, self.snapshot, label, &scheduled)?;
        let saved: Vec<(PodGroupKey, Vec<QueuedPodInfo>)> = leaves
            .iter()
            .filter_map(|l| self.by_leaf.get(l).map(|m| (l.clone(), m.clone())))
            .collect();
        // (placement index, raw PlacementScore scores) of the feasible ones.
        let mut feasible: Vec<(usize, Vec<i64>)> = Vec::new();
        let mut first_failure = None;
        let mut failed = None;
        for &i in &c.order {
            let value = c.placements[i].value.clone();
            self.alg.push_outer((label.to_string(), value));
            match self.level(key, quorum) {
                Ok(()) => {
                    self.cache.update_snapshot(self.snapshot);
                    let pods = self.placed_under(&leaves);
                    match raw_scores(self.fw, self.alg, self.snapshot, pods) {
                        Ok(raw) => feasible.push((i, raw)),
                        Err(e) => failed = Some(e),
                    }
                }
                Err(reason) => {
                    first_failure.get_or_insert(reason);
                }
            }
            self.revert(&leaves, &saved);
            self.alg.pop_outer();
            if let Some(e) = failed {
                return Err(e);
            }
            if feasible.len() >= c.to_find {
                break;
            }
        }
        let raws: Vec<Vec<i64>> = feasible.iter().map(|(_, r)| r.clone()).collect();
        let scores = self.fw.weigh_placements(&raws)?;
        let Some(best) = scores.best().map(|b| feasible[b].0) else {
            return Err(format!(
                "0/{} placements are available, first placement status: {}",
                c.placements.len(),
                first_failure.unwrap_or_default()
            ));
        };
        self.alg
            .push_outer((label.to_string(), c.placements[best].value.clone()));
        let kept = self.level(key, quorum);
        self.alg.pop_outer();
        kept
    }

    /// Pods placed by this cycle (and before) in the PodGroups `leaves`.
    fn placed_under(&self, leaves: &[PodGroupKey]) -> usize {
        leaves
            .iter()
            .filter_map(|l| self.results.get(l))
            .map(|r| match &r.outcome {
                GroupOutcome::Placed { placed, .. } => r.scheduled_before + placed.len(),
                GroupOutcome::Unschedulable { .. } => 0,
            })
            .sum()
    }

    /// Undoes an evaluated placement: every PodGroup of `leaves` back to untried, its
    /// waiting pods as `saved`.
    fn revert(&mut self, leaves: &[PodGroupKey], saved: &[(PodGroupKey, Vec<QueuedPodInfo>)]) {
        for leaf in leaves {
            if let Some(r) = self.results.remove(leaf)
                && let GroupOutcome::Placed { placed, .. } = r.outcome
            {
                undo_placed(self.fw, self.cache, placed);
            }
            self.order.retain(|k| k != leaf);
        }
        for (leaf, members) in saved {
            self.by_leaf.insert(leaf.clone(), members.clone());
        }
    }

    /// One level's quorum over its children (see the module's comment).
    fn level(&mut self, key: &CompositeKey, quorum: u32) -> Result<(), String> {
        let children = pod_group_tree::children(self.groups, key);
        let mut remaining = children.len();
        let mut scheduled = 0;
        min_count_feasible(quorum, 0, remaining)?;
        for child in &children {
            remaining -= 1;
            let result = match child {
                TreeNode::Group(k) => self.leaf(k),
                TreeNode::Composite(k) => {
                    let r = self.composite(k);
                    if let Err(reason) = &r {
                        self.fail(child, k, reason);
                    }
                    r
                }
            };
            if result.is_ok() {
                scheduled += 1;
            }
            min_count_feasible(quorum, scheduled, remaining)?;
        }
        match min_count_feasible(quorum, scheduled, 0)? {
            true => Ok(()),
            false => Err(format!(
                "minCount ({quorum}) is not yet satisfied: {scheduled} scheduled, 0 remaining"
            )),
        }
    }

    /// A PodGroup of the tree: its own group cycle over its waiting pods; one whose pods
    /// are all placed already succeeds without a cycle.
    fn leaf(&mut self, key: &PodGroupKey) -> Result<(), String> {
        let Some(group) = self.groups.get(key).cloned() else {
            return Err(format!("pod group {:?} not found", key.name));
        };
        let before = scheduled_members(self.groups, key, self.cache);
        let members = self.by_leaf.remove(key).unwrap_or_default();
        let outcome = if members.is_empty() {
            match min_count_feasible(group.min_count(), before.len(), 0) {
                Ok(true) => return Ok(()),
                Ok(false) | Err(_) => {
                    let reason = format!(
                        "minCount ({}) cannot be satisfied: {} scheduled, 0 remaining",
                        group.min_count(),
                        before.len()
                    );
                    GroupOutcome::Unschedulable {
                        reason,
                        error: false,
                        waiting: Vec::new(),
                    }
                }
            }
        } else {
            schedule_group(
                self.fw,
                self.alg,
                &group,
                &before,
                members,
                self.cache,
                self.snapshot,
                self.nominated,
            )
        };
        let result = match &outcome {
            GroupOutcome::Placed { .. } => Ok(()),
            GroupOutcome::Unschedulable { reason, .. } => Err(reason.clone()),
        };
        self.order.push(key.clone());
        self.results.insert(
            key.clone(),
            LeafOutcome {
                group,
                scheduled_before: before.len(),
                outcome,
            },
        );
        result
    }

    /// `node` (under the CompositePodGroup `level`) failed with `reason`: every PodGroup
    /// below it that was placed is undone, and its pods, and those not tried, wait with the
    /// level's reason. PodGroups that failed on their own keep their own reasons.
    fn fail(&mut self, node: &TreeNode, level: &CompositeKey, reason: &str) {
        let reason = format!("composite pod group {:?}: {reason}", level.name);
        for leaf in pod_group_tree::leaves(self.groups, node) {
            let untried = self.by_leaf.remove(&leaf).unwrap_or_default();
            let result = self.results.remove(&leaf);
            let group = result
                .as_ref()
                .map(|r| Arc::clone(&r.group))
                .unwrap_or_else(|| self.group_or_gone(&leaf));
            let before = result.as_ref().map_or(0, |r| r.scheduled_before);
            let mut waiting = Vec::new();
            let outcome = match result.map(|r| r.outcome) {
                Some(GroupOutcome::Placed {
                    placed,
                    waiting: rest,
                }) => {
                    waiting.extend(placed.iter().map(|p| p.queued.clone()));
                    undo_placed(self.fw, self.cache, placed);
                    let mut w = self.waiting(&group, &reason, waiting);
                    w.extend(rest);
                    GroupOutcome::Unschedulable {
                        reason: reason.clone(),
                        error: false,
                        waiting: w,
                    }
                }
                Some(failed @ GroupOutcome::Unschedulable { .. }) => failed,
                None if untried.is_empty() => continue,
                None => GroupOutcome::Unschedulable {
                    reason: reason.clone(),
                    error: false,
                    waiting: self.waiting(&group, &reason, untried),
                },
            };
            if !self.order.contains(&leaf) {
                self.order.push(leaf.clone());
            }
            self.results.insert(
                leaf,
                LeafOutcome {
                    group,
                    scheduled_before: before,
                    outcome,
                },
            );
        }
    }

    /// The group's view; for a group deleted while its pods were queued, a stand-in whose
    /// condition counts as written (there is no object to write it on), so its pods still
    /// get their outcome and are retried.
    fn group_or_gone(&self, key: &PodGroupKey) -> Arc<PodGroupInfo> {
        self.groups.get(key).cloned().unwrap_or_else(|| {
            let mut g = PodGroupInfo::new(key.clone(), GroupPolicy::Basic);
            g.scheduled_condition = Some(GroupCondition {
                status: true,
                reason: String::new(),
                message: String::new(),
            });
            Arc::new(g)
        })
    }

    /// The tree cannot be tried (an inconsistency): every waiting pod under `node` goes
    /// through backoff with `reason`, and each PodGroup's condition says SchedulerError.
    fn error(&mut self, node: &TreeNode, reason: &str) {
        for leaf in pod_group_tree::leaves(self.groups, node) {
            let pods = self.by_leaf.remove(&leaf).unwrap_or_default();
            if pods.is_empty() {
                continue;
            }
            let group = self.group_or_gone(&leaf);
            let waiting = pods
                .into_iter()
                .map(|queued| WaitingMember {
                    message: reason.to_string(),
                    queued,
                    diagnosis: None,
                })
                .collect();
            self.order.push(leaf.clone());
            self.results.insert(
                leaf,
                LeafOutcome {
                    group,
                    scheduled_before: 0,
                    outcome: GroupOutcome::Unschedulable {
                        reason: reason.to_string(),
                        error: true,
                        waiting,
                    },
                },
            );
        }
    }

    fn waiting(
        &self,
        group: &PodGroupInfo,
        reason: &str,
        pods: Vec<QueuedPodInfo>,
    ) -> Vec<WaitingMember> {
        let mut diagnosis = Diagnosis::default();
        diagnosis.unschedulable_plugins.insert(GANG_SCHEDULING);
        pods.into_iter()
            .map(|queued| WaitingMember {
                message: group_failure_message(group, reason),
                queued,
                diagnosis: Some(diagnosis.clone()),
            })
            .collect()
    }

    /// The outcomes in order; pods of groups no longer under the root (changed since they
    /// were queued) wait and are tried again.
    fn finish(mut self, root: &CompositeKey) -> Vec<LeafOutcome> {
        let strays: Vec<PodGroupKey> = self.by_leaf.keys().cloned().collect();
        for k in strays {
            let pods = self.by_leaf.remove(&k).unwrap_or_default();
            let group = self.group_or_gone(&k);
            let reason = format!("pod group {:?} is no longer under {:?}", k.name, root.name);
            self.order.push(k.clone());
            let waiting = self.waiting(&group, &reason, pods);
            self.results.insert(
                k,
                LeafOutcome {
                    group,
                    scheduled_before: 0,
                    outcome: GroupOutcome::Unschedulable {
                        reason,
                        error: false,
                        waiting,
                    },
                },
            );
        }
        let mut out = Vec::with_capacity(self.order.len());
        for k in &self.order {
            if let Some(r) = self.results.remove(k) {
                out.push(r);
            }
        }
        out
    }
}

/// [`schedule_tree`] for a caller with no scheduling queue that binds at once (`simulate`):
/// `first`, just popped and routed to `root`, and the tree's other pods of the same profile
/// waiting in `queue` (taken out, in queue order) are tried together; the pods of every
/// PodGroup that succeeded are bound on the spot (`finish_binding`, then PostBind).
#[allow(clippy::too_many_arguments)]
pub fn schedule_tree_and_bind(
    fw: &Framework,
    alg: &mut SchedulingAlgorithm,
    groups: &PodGroupManager,
    root: &CompositeKey,
    first: QueuedPodInfo,
    queue: &mut VecDeque<QueuedPodInfo>,
    cache: &mut Cache,
    snapshot: &mut Snapshot,
    nominated: &NominatedPods,
) -> Vec<LeafOutcome> {
    let groups = groups.read();
    let leaves = tree_leaves(&groups, root);
    let mut members = vec![first];
    let mut i = 0;
    while i < queue.len() {
        let q = &queue[i];
        let in_tree = q
            .pod
            .pod_group
            .as_deref()
            .is_some_and(|k| leaves.contains(k));
        if in_tree && q.pod.scheduler_name == members[0].pod.scheduler_name {
            members.extend(queue.remove(i));
        } else {
            i += 1;
        }
    }
    let out = schedule_tree(fw, alg, &groups, root, members, cache, snapshot, nominated);
    for leaf in &out {
        if let GroupOutcome::Placed { placed, .. } = &leaf.outcome {
            for p in placed {
                cache.finish_binding(p.pod.key());
                fw.run_post_bind(&p.state, &p.pod, &p.node);
            }
        }
    }
    out
}

/// The PodGroups under `root`, for finding the tree's waiting pods.
pub fn tree_leaves(groups: &PodGroups, root: &CompositeKey) -> HashSet<PodGroupKey> {
    pod_group_tree::leaves(groups, &TreeNode::Composite(root.clone()))
        .into_iter()
        .collect()
}
