//! The pod group cycle (upstream's `scheduleOnePodGroup`): the popped pod's waiting
//! siblings join it, all are tried against the cache with the state held, workload-aware
//! preemption runs for a gang that did not fit, and then each member goes through the same
//! parts as a single pod: the binding hand-off for those placed (quorum met), the failure
//! handler for the others. The lock is held for the whole cycle, so no informer event
//! changes the cluster between two members' placements.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use scheduler_core::cache::Snapshot;
use scheduler_core::explain::group::GroupRecord;
use scheduler_core::explain::{Explanation, Outcome, simulator};
use scheduler_core::framework::{Framework, NominatedPods, QueuedPodInfo};
use scheduler_core::group_preemption::{self, GroupPreemption};
use scheduler_core::outcome::{GroupResult, group_result};
use scheduler_core::schedule_group::{self, GroupOutcome};
use scheduler_core::schedule_tree;
use scheduler_core::types::composite_pod_group::CompositeKey;
use scheduler_core::types::pod_group::{PodGroupInfo, PodGroupKey};
use scheduler_core::types::{PodInfo, PodKey};

use super::binding_handoff::{Assume, HandOff, hand_off_to_binding};
use super::failure::{Handled, handle_failure, start_preemption};
use super::{Attempt, SchedulingLoop};
use crate::binding::executor::Action;
use crate::binding::pod_group_status::ConditionWrite;
use crate::binding::podref::PodRef;
use crate::state::State;

impl SchedulingLoop {
    /// One attempt for the gang of `q` (just popped and routed to `group`).
    pub(super) fn schedule_gang(
        &mut self,
        fw: &Framework,
        q: QueuedPodInfo,
        group: &PodGroupInfo,
        attempt: &Attempt,
        snapshot: &mut Snapshot,
    ) {
        let shared = Arc::clone(&self.shared);
        let mut st = shared.lock();
        let siblings = queued_siblings(&st, &q, [&group.key]);
        let members = pop_members(&mut st, fw, q, siblings);
        let tried = members.len();
        let before = schedule_group::scheduled_members(&st.groups.read(), &group.key, &st.cache);
        let nominated = st.queue.nominated_pods().clone();
        let mut actions = Vec::with_capacity(tried + 1);
        let outcome = if self.explain.records(&attempt.scheduler_name) {
            let pods: Vec<Arc<PodInfo>> = members.iter().map(|q| Arc::clone(&q.pod)).collect();
            let total = st.groups.read().all_pods_count(&group.key);
            let wants = |_: &str| true;
            let mut rec = GroupRecord::new(&wants);
            rec.total = Some(total);
            let outcome = schedule_group::schedule_group_recorded(
                fw,
                &mut self.alg,
                group,
                &before,
                members,
                &mut st.cache,
                snapshot,
                &nominated,
                &mut rec,
            );
            let explained = rec.explanations(fw, group, &outcome);
            actions.extend(self.keep_explanations(&mut st, &pods, explained, attempt));
            outcome
        } else {
            schedule_group::schedule_group(
                fw,
                &mut self.alg,
                group,
                &before,
                members,
                &mut st.cache,
                snapshot,
                &nominated,
            )
        };
        schedule_group::cycle_done(fw, &st.groups, group, before.len(), &outcome);
        let condition = self.group_condition(group, &outcome);
        let preemption = self.preempt(fw, group, &before, &outcome, &mut st, snapshot, &nominated);
        let result = group_result(outcome, preemption, fw.has_post_filter_plugins());
        tracing::debug!(group = %group.key, tried, placed = result.placed.len(), "pod group cycle");
        actions.extend(condition);
        let handled = hand_off_group(&mut st, fw, result, attempt, &mut actions);
        drop(st);
        self.finish_attempt(attempt, actions, handled);
    }

    /// One attempt for the tree of groups under `root` (CompositePodGroup gate), `q` just
    /// popped and routed to it: every waiting pod of the tree for the same profile is tried
    /// in one cycle, preemption runs for the root when nothing of it fitted, and then each
    /// PodGroup of the tree is handed off as a gang's is.
    pub(super) fn schedule_tree(
        &mut self,
        fw: &Framework,
        q: QueuedPodInfo,
        root: &CompositeKey,
        attempt: &Attempt,
        snapshot: &mut Snapshot,
    ) {
        let shared = Arc::clone(&self.shared);
        let mut st = shared.lock();
        let groups = Arc::clone(&st.groups);
        let leaves = schedule_tree::tree_leaves(&groups.read(), root);
        let siblings = queued_siblings(&st, &q, &leaves);
        let members = pop_members(&mut st, fw, q, siblings);
        let tried = members.len();
        let nominated = st.queue.nominated_pods().clone();
        let outcomes = schedule_tree::schedule_tree(
            fw,
            &mut self.alg,
            &groups.read(),
            root,
            members,
            &mut st.cache,
            snapshot,
            &nominated,
        );
        tracing::debug!(root = %root, tried, groups = outcomes.len(), "composite pod group cycle");
        let mut actions = Vec::new();
        for leaf in &outcomes {
            actions.extend(self.group_condition(&leaf.group, &leaf.outcome));
        }
        let preemption = self.preempt_tree(fw, root, &outcomes, &mut st, snapshot, &nominated);
        let post_filter = fw.has_post_filter_plugins();
        let mut handled = Vec::new();
        let mut evicting = false;
        for leaf in outcomes {
            let mut result = group_result(leaf.outcome, preemption.clone(), post_filter);
            // One eviction for the tree: the first PodGroup with a nominated member carries it.
            if result.eviction.is_some() && std::mem::replace(&mut evicting, true) {
                result.eviction = None;
            }
            handled.extend(hand_off_group(&mut st, fw, result, attempt, &mut actions));
        }
        drop(st);
        self.finish_attempt(attempt, actions, handled);
    }

    /// Keeps the members' explanations of a recorded group cycle as a single pod's are kept
    /// (`cycle.rs`, `explain_attempt`): each pending member's for /debug/explain, and every
    /// member's simulator annotations for the profiles that want them (returned, to send once
    /// the lock is released). `pods` are the members the cycle had.
    fn keep_explanations(
        &self,
        st: &mut State,
        pods: &[Arc<PodInfo>],
        explained: Vec<Explanation>,
        attempt: &Attempt,
    ) -> Vec<Action> {
        let annotate = self.explain.annotates(&attempt.scheduler_name);
        let by_name: HashMap<String, &Arc<PodInfo>> =
            pods.iter().map(|p| (p.key().to_string(), p)).collect();
        let mut actions = Vec::new();
        for e in explained {
            let Some(pod) = by_name.get(&e.pod) else {
                continue;
            };
            if annotate {
                actions.push(Action::Annotate {
                    pod: PodRef::of(pod),
                    annotations: simulator::simulator_annotations(&e),
                });
            }
            if e.outcome != Outcome::Scheduled {
                st.explain.put(pod.key().clone(), Arc::new(e));
            }
        }
        actions
    }

    /// The Workload API PodGroup's condition after the cycle, if it changes.
    fn group_condition(&self, group: &PodGroupInfo, outcome: &GroupOutcome) -> Option<Action> {
        let condition = schedule_group::scheduled_condition(group, outcome)?;
        let version = self.pod_group_version?;
        Some(Action::PodGroupCondition(ConditionWrite {
            group: group.key.clone(),
            version,
            generation: group.generation,
            transition: group
                .scheduled_condition
                .as_ref()
                .is_none_or(|c| c.status != condition.status),
            condition,
        }))
    }

    /// Logs and counts a preemption that chose victims (for a group or a tree's root).
    fn count_preemption(&self, preemptor: &str, decision: &GroupPreemption) {
        if let GroupPreemption::Preempt {
            victims, message, ..
        } = decision
        {
            tracing::debug!(preemptor, %message, "pod group preemption");
            self.shared.metrics.preemption_attempt();
            self.shared.metrics.preemption_victims(victims.len());
        }
    }

    /// Workload-aware preemption for a tree none of whose groups fitted (not an error), when
    /// the profile preempts: for the root's quorum, or nothing.
    fn preempt_tree(
        &mut self,
        fw: &Framework,
        root: &CompositeKey,
        outcomes: &[schedule_tree::LeafOutcome],
        st: &mut State,
        snapshot: &mut Snapshot,
        nominated: &NominatedPods,
    ) -> Option<GroupPreemption> {
        let mut members = Vec::new();
        for leaf in outcomes {
            match &leaf.outcome {
                GroupOutcome::Unschedulable {
                    waiting,
                    error: false,
                    ..
                } => members.extend(waiting.iter().map(|w| w.queued.clone())),
                _ => return None,
            }
        }
        if !fw.has_post_filter_plugins() || members.is_empty() {
            return None;
        }
        let groups = Arc::clone(&st.groups);
        let decision = group_preemption::preempt_for_tree(
            fw,
            &mut self.alg,
            root,
            &members,
            &groups.read(),
            &mut st.cache,
            snapshot,
            nominated,
        );
        self.count_preemption(&root.to_string(), &decision);
        Some(decision)
    }

    /// Workload-aware preemption for a gang that did not fit (not for an error), when the
    /// profile preempts: for the whole gang, or nothing.
    #[allow(clippy::too_many_arguments)]
    fn preempt(
        &mut self,
        fw: &Framework,
        group: &PodGroupInfo,
        before: &[String],
        outcome: &GroupOutcome,
        st: &mut State,
        snapshot: &mut Snapshot,
        nominated: &NominatedPods,
    ) -> Option<GroupPreemption> {
        let GroupOutcome::Unschedulable {
            waiting,
            error: false,
            ..
        } = outcome
        else {
            return None;
        };
        if !fw.has_post_filter_plugins() {
            return None;
        }
        let members: Vec<QueuedPodInfo> = waiting.iter().map(|w| w.queued.clone()).collect();
        let groups = Arc::clone(&st.groups);
        let decision = group_preemption::preempt_for_group(
            fw,
            &mut self.alg,
            group,
            before,
            &members,
            &groups.read(),
            &mut st.cache,
            snapshot,
            nominated,
        );
        self.count_preemption(&group.key.to_string(), &decision);
        Some(decision)
    }
}

/// The members of a group's cycle and where their results go: each placed member to the
/// binding hand-off (eviction started first when preemption chose victims), each other to
/// the failure handler. Returns the failures handled.
fn hand_off_group(
    st: &mut State,
    fw: &Framework,
    result: GroupResult,
    attempt: &Attempt,
    actions: &mut Vec<Action>,
) -> Vec<Handled> {
    let mut handled = Vec::with_capacity(result.failed.len());
    for (queued, placement) in result.placed {
        match hand_off_to_binding(st, fw, queued, placement, attempt, Assume::Done) {
            HandOff::Bind(bind) => actions.push(bind),
            HandOff::Failed(h) => handled.push(h),
        }
    }
    actions.extend(
        result
            .eviction
            .and_then(|e| start_preemption(st, e, &attempt.scheduler_name)),
    );
    for (queued, failure) in result.failed {
        handled.push(handle_failure(st, queued, failure, attempt));
    }
    handled
}

/// The pods of `groups` waiting in the queue for `q`'s profile, but `q`.
fn queued_siblings<'a>(
    st: &State,
    q: &QueuedPodInfo,
    in_cycle: impl IntoIterator<Item = &'a PodGroupKey>,
) -> Vec<PodKey> {
    let groups = st.groups.read();
    let mut keys: Vec<PodKey> = Vec::new();
    for key in in_cycle {
        for (k, _) in groups.members(key) {
            if k != q.pod.key()
                && st
                    .queue
                    .get(k)
                    .is_some_and(|w| w.pod.scheduler_name == q.pod.scheduler_name)
            {
                keys.push(k.clone());
            }
        }
    }
    keys
}

/// `q` and `siblings` (its group's or tree's other pods waiting in the queue for the same
/// profile: upstream schedules a group's pods of one profile together), popped, in queue
/// order with `q` first among equals: each is in flight in this cycle.
fn pop_members(
    st: &mut State,
    fw: &Framework,
    q: QueuedPodInfo,
    siblings: Vec<PodKey>,
) -> Vec<QueuedPodInfo> {
    let mut members = vec![q];
    members.extend(st.queue.pop_group_members(&siblings));
    members.sort_by(|a, b| {
        if fw.queue_sort_less(b, a) {
            Ordering::Greater
        } else if fw.queue_sort_less(a, b) {
            Ordering::Less
        } else {
            Ordering::Equal
        }
    });
    members
}
