//! One attempt for a gang (upstream: `schedule_one_podgroup.go`, `algorithm_podgroup.go`):
//! the group's waiting pods are tried one after another against the same cluster state,
//! each placement assumed so the next pod sees it, and the group's quorum is checked after
//! every pod. Only when `minCount` of the group's pods are placed (counting those bound
//! before) is anything kept; otherwise every assumption is undone and no pod is bound.
//!
//! Pure like [`crate::schedule_one`]: the caller pops the members from its queue, holds the
//! cache while the cycle runs, and then binds the placed pods or requeues every member.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::cache::{Cache, Snapshot};
use crate::explain::group::{DomainEval, GroupRecord, Trial};
use crate::explain::{Explanation, Record};
use crate::framework::{
    CycleState, Diagnosis, Framework, GroupCycleDone, GroupRejection, NominatedPods, Placement,
    QueuedPodInfo, Status,
};
use crate::plugins::gang_scheduling::min_count_feasible;
use crate::plugins::names::{COSCHEDULING, GANG_SCHEDULING};
use crate::pod_group_manager::{PodGroupManager, PodGroups};
use crate::schedule_one::{
    Decision, SchedulingAlgorithm, assume_decision, forget_decision, schedule_group_member,
    schedule_group_member_recorded,
};
use crate::schedule_placements::{candidates, raw_scores};
use crate::types::PodInfo;
use crate::types::composite_pod_group::CompositeKey;
use crate::types::pod_group::{GroupApi, GroupCondition, PodGroupInfo, PodGroupKey};

/// How a popped pod is scheduled.
#[derive(Debug)]
pub enum Route {
    /// On its own: no group, a basic group, or a profile without GangScheduling.
    Alone,
    /// In a group cycle with the rest of its gang.
    Gang(Arc<PodGroupInfo>),
    /// In one cycle with every waiting pod of the tree under this root (CompositePodGroup
    /// gate; see [`crate::schedule_tree`]).
    Tree(CompositeKey),
    /// Not at all now: its group went away (or lost its quorum) after the pod was queued.
    /// Requeue it with this status, as if PreEnqueue had kept it out.
    Wait(Status),
}

/// Decides how `pod`, just popped, is scheduled. A pod of a gang is never scheduled alone:
/// if its group disappeared since PreEnqueue let it in, it waits again.
pub fn route(fw: &Framework, groups: &PodGroupManager, pod: &PodInfo) -> Route {
    let Some(key) = pod.pod_group.as_deref() else {
        return Route::Alone;
    };
    let handled = fw.has_pre_enqueue_plugin(GANG_SCHEDULING)
        || (key.api == GroupApi::Coscheduling && fw.has_pre_enqueue_plugin(COSCHEDULING));
    if !handled {
        return Route::Alone;
    }
    let gate = fw.run_pre_enqueue(pod);
    if !gate.is_success() {
        return Route::Wait(gate);
    }
    let groups = groups.read();
    let Some(g) = groups.get(key) else {
        return Route::Alone;
    };
    if let Ok(Some(root)) = crate::pod_group_tree::root_of(&groups, g) {
        return Route::Tree(root);
    }
    if g.is_gang() {
        Route::Gang(Arc::clone(g))
    } else {
        Route::Alone
    }
}

/// The nodes of the group's pods that are already placed: bound, or assumed while their
/// binding is under way (both are in the cache); `""` for a bound pod the cache lacks.
pub fn scheduled_members(groups: &PodGroups, key: &PodGroupKey, cache: &Cache) -> Vec<String> {
    groups
        .members(key)
        .filter_map(|(k, bound)| match cache.get_pod(k) {
            Some(p) => Some(p.node_name.clone().unwrap_or_default()),
            None => bound.then(String::new),
        })
        .collect()
}

/// A member placed by a successful group cycle: assumed in the cache, to be bound.
#[derive(Debug)]
pub struct PlacedMember {
    pub queued: QueuedPodInfo,
    /// The effective pod the plugins saw (as in [`Decision::Bind`]).
    pub pod: Arc<PodInfo>,
    pub node: String,
    pub state: CycleState,
}

/// A member that is not bound this time, and why.
#[derive(Debug)]
pub struct WaitingMember {
    pub queued: QueuedPodInfo,
    /// The FailedScheduling text.
    pub message: String,
    /// Which plugins' events may help, for the queue; `None` for an error (backoff).
    pub diagnosis: Option<Diagnosis>,
}

/// The outcome of one group cycle.
#[derive(Debug)]
pub enum GroupOutcome {
    /// The quorum is met: bind every placed member (each in its own binding cycle). The
    /// members that did not fit wait, as pods of an already scheduled gang.
    Placed {
        placed: Vec<PlacedMember>,
        waiting: Vec<WaitingMember>,
    },
    /// The quorum cannot be met now: nothing was kept; every member waits. `reason` is the
    /// group's (upstream's fit error text); `error` when an attempt failed with an error.
    Unschedulable {
        reason: String,
        error: bool,
        waiting: Vec<WaitingMember>,
    },
}

/// The condition the scheduler writes on a Workload API PodGroup after a cycle
/// (`PodGroupInitiallyScheduled`): True/`Scheduled` once placed, False/`Unschedulable` with
/// the group's reason, False/`SchedulerError` on an error. `None` when nothing changes: the
/// same condition is already there, the group was already scheduled once (a True condition
/// never turns False), or the group is scheduler-plugins' (which has its own status).
pub fn scheduled_condition(group: &PodGroupInfo, outcome: &GroupOutcome) -> Option<GroupCondition> {
    if group.key.api != GroupApi::Workload {
        return None;
    }
    let new = match outcome {
        GroupOutcome::Placed { .. } => GroupCondition {
            status: true,
            reason: "Scheduled".into(),
            message: String::new(),
        },
        GroupOutcome::Unschedulable { reason, error, .. } => GroupCondition {
            status: false,
            reason: if *error {
                "SchedulerError".into()
            } else {
                "Unschedulable".into()
            },
            message: reason.clone(),
        },
    };
    match &group.scheduled_condition {
        Some(c) if c.status || *c == new => None,
        _ => Some(new),
    }
}

/// The FailedScheduling message of a pod of a gang that did not fit as a whole, for a pod
/// that would have fitted or was not tried: the gang's reason, naming the group. (A pod that
/// did not fit keeps its own `0/N nodes are available: ...`, as upstream's.)
pub fn group_failure_message(group: &PodGroupInfo, reason: &str) -> String {
    format!("pod group {:?}: {reason}", group.key.name)
}

/// Runs the cycle for `members` (the group's pods waiting in the queue, in queue order) of
/// `group`, whose pods already placed (bound or assumed) are on `scheduled` (node names, see
/// [`scheduled_members`]). A group with a topology constraint is placed in one domain.
#[allow(clippy::too_many_arguments)]
pub fn schedule_group(
    fw: &Framework,
    alg: &mut SchedulingAlgorithm,
    group: &PodGroupInfo,
    scheduled: &[String],
    members: Vec<QueuedPodInfo>,
    cache: &mut Cache,
    snapshot: &mut Snapshot,
    nominated: &NominatedPods,
) -> GroupOutcome {
    let mut ctx = Ctx {
        fw,
        alg,
        group,
        cache,
        snapshot,
        nominated,
        rec: None,
    };
    ctx.run(scheduled, members)
}

/// [`schedule_group`], recording into `rec` what the group's explanation needs (see
/// [`GroupRecord`]): the same cycle and the same outcome.
#[allow(clippy::too_many_arguments)]
pub fn schedule_group_recorded(
    fw: &Framework,
    alg: &mut SchedulingAlgorithm,
    group: &PodGroupInfo,
    scheduled: &[String],
    members: Vec<QueuedPodInfo>,
    cache: &mut Cache,
    snapshot: &mut Snapshot,
    nominated: &NominatedPods,
    rec: &mut GroupRecord<'_>,
) -> GroupOutcome {
    cache.update_snapshot(snapshot);
    rec.begin(
        scheduled.len(),
        members.iter().map(|q| &*q.pod),
        snapshot.num_nodes(),
    );
    let mut ctx = Ctx {
        fw,
        alg,
        group,
        cache,
        snapshot,
        nominated,
        rec: Some(rec),
    };
    ctx.run(scheduled, members)
}

/// Undoes the assumptions of placed members, newest first: their pods, volumes and claims
/// leave the cache and their Reserve plugins unreserve.
pub(crate) fn undo_placed(fw: &Framework, cache: &mut Cache, placed: Vec<PlacedMember>) {
    for mut p in placed.into_iter().rev() {
        forget_decision(cache, &p.pod, &p.state);
        fw.run_unreserve(&mut p.state, &p.pod, &p.node);
    }
}

/// One group cycle for a caller that has no scheduling queue and binds at once (`simulate`,
/// the in-memory bench): `first`, just popped and routed to `group`, and the group's other
/// pods waiting in `queue` (taken out, in queue order) are tried together with
/// [`schedule_group`]; when the quorum is met every placed member is bound on the spot (the
/// binding taken as done: `finish_binding`, then PostBind). The controller does the same with
/// its queue and binding cycles (`scheduler_loop/gang.rs`).
#[allow(clippy::too_many_arguments)]
pub fn schedule_group_and_bind(
    fw: &Framework,
    alg: &mut SchedulingAlgorithm,
    groups: &PodGroupManager,
    group: &PodGroupInfo,
    first: QueuedPodInfo,
    queue: &mut VecDeque<QueuedPodInfo>,
    cache: &mut Cache,
    snapshot: &mut Snapshot,
    nominated: &NominatedPods,
) -> GroupOutcome {
    let ctx = (cache, snapshot, nominated);
    group_and_bind(fw, alg, groups, group, first, queue, ctx, None)
}

/// [`schedule_group_and_bind`], recording into `rec` (see [`schedule_group_recorded`]).
#[allow(clippy::too_many_arguments)]
pub fn schedule_group_and_bind_recorded(
    fw: &Framework,
    alg: &mut SchedulingAlgorithm,
    groups: &PodGroupManager,
    group: &PodGroupInfo,
    first: QueuedPodInfo,
    queue: &mut VecDeque<QueuedPodInfo>,
    cache: &mut Cache,
    snapshot: &mut Snapshot,
    nominated: &NominatedPods,
    rec: &mut GroupRecord<'_>,
) -> GroupOutcome {
    let ctx = (cache, snapshot, nominated);
    group_and_bind(fw, alg, groups, group, first, queue, ctx, Some(rec))
}

#[allow(clippy::too_many_arguments)]
fn group_and_bind(
    fw: &Framework,
    alg: &mut SchedulingAlgorithm,
    groups: &PodGroupManager,
    group: &PodGroupInfo,
    first: QueuedPodInfo,
    queue: &mut VecDeque<QueuedPodInfo>,
    (cache, snapshot, nominated): (&mut Cache, &mut Snapshot, &NominatedPods),
    rec: Option<&mut GroupRecord<'_>>,
) -> GroupOutcome {
    let (before, waiting_at_most, total) = {
        let g = groups.read();
        let before = scheduled_members(&g, &group.key, cache);
        let total = g.all_pods_count(&group.key);
        let waiting_at_most = total.saturating_sub(before.len());
        (before, waiting_at_most, total)
    };
    let mut members = vec![first];
    let mut i = 0;
    // Stops once every pod of the group that can be waiting is found: a queue holding the
    // gang's pods side by side is not scanned to its end for each gang.
    while i < queue.len() && members.len() < waiting_at_most {
        if queue[i].pod.pod_group == members[0].pod.pod_group {
            members.extend(queue.remove(i));
        } else {
            i += 1;
        }
    }
    let outcome = match rec {
        None => schedule_group(fw, alg, group, &before, members, cache, snapshot, nominated),
        Some(rec) => {
            rec.total = Some(total);
            schedule_group_recorded(
                fw, alg, group, &before, members, cache, snapshot, nominated, rec,
            )
        }
    };
    cycle_done(fw, groups, group, before.len(), &outcome);
    if let GroupOutcome::Placed { placed, .. } = &outcome {
        for p in placed {
            cache.finish_binding(p.pod.key());
            fw.run_post_bind(&p.state, &p.pod, &p.node);
        }
    }
    outcome
}

/// Tells the profile's group plugins how a group cycle that really happened ended (not an
/// explanation, not a preemption trial): for Coscheduling's back-off and queue order.
/// `scheduled_before`: the group's pods placed before the cycle.
pub fn cycle_done(
    fw: &Framework,
    groups: &PodGroupManager,
    group: &PodGroupInfo,
    scheduled_before: usize,
    outcome: &GroupOutcome,
) {
    if !fw.has_pod_group_plugins() {
        return;
    }
    let (placed, error, waiting) = match outcome {
        GroupOutcome::Placed { waiting, .. } => (true, false, waiting),
        GroupOutcome::Unschedulable { error, waiting, .. } => (false, *error, waiting),
    };
    let done = GroupCycleDone {
        placed,
        error,
        scheduled_before,
        all_pods: groups.read().all_pods_count(&group.key),
        unschedulable_plugins: waiting
            .iter()
            .filter_map(|w| w.diagnosis.as_ref())
            .flat_map(|d| d.unschedulable_plugins.iter().copied())
            .collect(),
    };
    fw.run_group_done(group, &done);
}

/// One member's cycle, recorded: explained in full when `rec` wants the pod, rendered at
/// once against the snapshot it ran on (the next member's cycle sees another).
fn member_recorded(
    fw: &Framework,
    alg: &mut SchedulingAlgorithm,
    pod: &Arc<PodInfo>,
    snapshot: &Snapshot,
    nominated: &NominatedPods,
    rec: &mut GroupRecord<'_>,
) -> Decision {
    if !rec.wants(pod) {
        return schedule_group_member(fw, alg, pod, snapshot, nominated);
    }
    let mut record = Record::new();
    let d = schedule_group_member_recorded(fw, alg, pod, snapshot, nominated, &mut record);
    let e: Explanation = record.render(fw, pod, snapshot, &d);
    rec.explained(pod, e);
    d
}

/// What one group cycle works with.
struct Ctx<'a, 'r> {
    fw: &'a Framework,
    alg: &'a mut SchedulingAlgorithm,
    group: &'a PodGroupInfo,
    cache: &'a mut Cache,
    snapshot: &'a mut Snapshot,
    nominated: &'a NominatedPods,
    /// The explanation's recorder, when one is wanted.
    rec: Option<&'a mut GroupRecord<'r>>,
}

impl Ctx<'_, '_> {
    fn run(&mut self, scheduled: &[String], members: Vec<QueuedPodInfo>) -> GroupOutcome {
        if self.fw.has_pod_group_plugins() {
            self.cache.update_snapshot(self.snapshot);
            if let Err((plugin, rejection)) =
                self.fw
                    .run_pre_filter_group(self.group, self.snapshot, scheduled.len())
            {
                return self.rejected(members, plugin, rejection);
            }
        }
        match &self.group.topology_key {
            None => self.default_algorithm(scheduled.len(), members),
            Some(key) => self.placement_algorithm(key, scheduled, members),
        }
    }

    /// Upstream's placement algorithm for a group with a topology constraint: the
    /// PlacementGenerate plugins' candidates (one per value of the label, only the domain of
    /// pods already placed when there are any), each evaluated with the default algorithm
    /// restricted to its nodes and undone until enough feasible ones are found
    /// (`percentageOfPlacementsToScore`), then the best by the PlacementScore plugins
    /// evaluated again and kept.
    fn placement_algorithm(
        &mut self,
        key: &str,
        scheduled: &[String],
        members: Vec<QueuedPodInfo>,
    ) -> GroupOutcome {
        self.cache.update_snapshot(self.snapshot);
        let c = match candidates(self.fw, self.alg, self.snapshot, key, scheduled) {
            Ok(c) => c,
            Err(reason) => return self.all_wait(members, reason),
        };
        if let Some(r) = self.rec.as_deref_mut()
            && !scheduled.is_empty()
        {
            r.pinned();
        }
        let placement = |alg: &mut SchedulingAlgorithm, snapshot: &Snapshot, p: &Placement| {
            alg.set_placement_nodes(
                (key.to_string(), p.value.clone()),
                snapshot,
                p.nodes.clone(),
            );
        };
        // (placement index, raw PlacementScore scores) of the feasible ones.
        let mut feasible: Vec<(usize, Vec<i64>)> = Vec::new();
        let mut first_failure = None;
        for &i in &c.order {
            let p = &c.placements[i];
            placement(self.alg, self.snapshot, p);
            let out = self.default_algorithm(scheduled.len(), members.clone());
            let mut scored = None;
            if let GroupOutcome::Placed { placed, .. } = &out {
                self.cache.update_snapshot(self.snapshot);
                let pods = scheduled.len() + placed.len();
                scored = Some(raw_scores(self.fw, self.alg, self.snapshot, pods));
            }
            self.alg.set_placement(None);
            if let Some(r) = self.rec.as_deref_mut() {
                let result = match (&out, &scored) {
                    (_, Some(Ok(raw))) => DomainEval::Feasible { raw: raw.clone() },
                    (_, Some(Err(_))) | (GroupOutcome::Unschedulable { error: true, .. }, _) => {
                        DomainEval::Error
                    }
                    _ => DomainEval::Rejected,
                };
                r.domain_evaluated(p.value.clone(), p.nodes.len(), result);
            }
            match out {
                GroupOutcome::Placed { placed, .. } => {
                    self.undo(placed);
                    match scored.expect("a placed evaluation is scored") {
                        Ok(raw) => feasible.push((i, raw)),
                        Err(e) => return self.all_fail(members, e),
                    }
                    if feasible.len() >= c.to_find {
                        break;
                    }
                }
                GroupOutcome::Unschedulable { error: true, .. } => {
                    if let Some(r) = self.rec.as_deref_mut() {
                        r.outcome_of_domain(false);
                    }
                    return out;
                }
                out => {
                    first_failure.get_or_insert(out);
                }
            }
        }
        let raws: Vec<Vec<i64>> = feasible.iter().map(|(_, r)| r.clone()).collect();
        let scores = match self.fw.weigh_placements(&raws) {
            Ok(s) => s,
            Err(e) => return self.all_fail(members, e),
        };
        let Some(best) = scores.best().map(|b| feasible[b].0) else {
            if let Some(r) = self.rec.as_deref_mut() {
                r.outcome_of_domain(true);
            }
            let Some(GroupOutcome::Unschedulable {
                reason, waiting, ..
            }) = first_failure
            else {
                unreachable!("every placement was evaluated and none was feasible");
            };
            let reason = format!(
                "0/{} placements are available, first placement status: {reason}",
                c.placements.len()
            );
            let group_message = group_failure_message(self.group, "");
            let waiting = waiting
                .into_iter()
                .map(|mut w| {
                    if w.message.starts_with(&group_message) {
                        w.message = group_failure_message(self.group, &reason);
                    }
                    w
                })
                .collect();
            return GroupOutcome::Unschedulable {
                reason,
                error: false,
                waiting,
            };
        };
        let best = &c.placements[best];
        if let Some(r) = self.rec.as_deref_mut() {
            r.chosen(best.value.clone());
        }
        placement(self.alg, self.snapshot, best);
        let out = self.default_algorithm(scheduled.len(), members);
        self.alg.set_placement(None);
        out
    }

    /// Undoes the assumptions of placed members (an evaluation that is not kept).
    fn undo(&mut self, placed: Vec<PlacedMember>) {
        undo_placed(self.fw, self.cache, placed);
    }

    /// Every member waits with the group's error (the cycle stopped on it).
    fn all_fail(&self, members: Vec<QueuedPodInfo>, reason: String) -> GroupOutcome {
        match self.all_wait(members, reason) {
            GroupOutcome::Unschedulable {
                reason, waiting, ..
            } => GroupOutcome::Unschedulable {
                reason,
                error: true,
                waiting,
            },
            placed => placed,
        }
    }

    /// Every member waits with the group's reason (nothing was tried).
    fn all_wait(&self, members: Vec<QueuedPodInfo>, reason: String) -> GroupOutcome {
        let mut diagnosis = Diagnosis::default();
        diagnosis.unschedulable_plugins.insert(GANG_SCHEDULING);
        let waiting = members
            .into_iter()
            .map(|queued| WaitingMember {
                message: group_failure_message(self.group, &reason),
                queued,
                diagnosis: Some(diagnosis.clone()),
            })
            .collect();
        GroupOutcome::Unschedulable {
            reason,
            error: false,
            waiting,
        }
    }

    /// Every member waits, untried: a group plugin rejected the group before its cycle.
    /// Each member's message is the rejection as a PreFilter's reads (`0/N nodes are
    /// available: <message>.`); the group's reason is the plugin's message.
    fn rejected(
        &self,
        members: Vec<QueuedPodInfo>,
        plugin: &'static str,
        rejection: GroupRejection,
    ) -> GroupOutcome {
        let mut diagnosis = Diagnosis::default();
        diagnosis.unschedulable_plugins.insert(plugin);
        diagnosis.unschedulable_plugins.extend(rejection.wait_for);
        let message = format!(
            "0/{} nodes are available: {}.",
            self.snapshot.num_nodes(),
            rejection.message
        );
        let waiting = members
            .into_iter()
            .map(|queued| WaitingMember {
                message: message.clone(),
                queued,
                diagnosis: Some(diagnosis.clone()),
            })
            .collect();
        GroupOutcome::Unschedulable {
            reason: rejection.message,
            error: false,
            waiting,
        }
    }

    /// Upstream's default algorithm: every member in turn, the quorum checked after each.
    fn default_algorithm(
        &mut self,
        scheduled_before: usize,
        members: Vec<QueuedPodInfo>,
    ) -> GroupOutcome {
        let Ctx {
            fw,
            alg,
            group,
            cache,
            snapshot,
            nominated,
            rec,
        } = self;
        let (fw, group, nominated) = (*fw, *group, *nominated);
        let mut rec = rec.as_deref_mut();
        if let Some(r) = rec.as_deref_mut() {
            r.begin_evaluation();
        }
        let min = group.min_count();
        let mut remaining = members.len();
        let mut placed: Vec<PlacedMember> = Vec::new();
        // Members that did not fit, with their own message and diagnosis.
        let mut rejected: Vec<(QueuedPodInfo, String, Option<Diagnosis>)> = Vec::new();
        let mut verdict = min_count_feasible(min, scheduled_before, remaining);
        let mut errored = false;
        let mut members = members.into_iter();
        if verdict.is_ok() {
            for q in members.by_ref() {
                cache.update_snapshot(snapshot);
                remaining -= 1;
                let decision = match rec.as_deref_mut() {
                    None => schedule_group_member(fw, alg, &q.pod, snapshot, nominated),
                    Some(r) => {
                        let d = member_recorded(fw, alg, &q.pod, snapshot, nominated, r);
                        r.trial(&q.pod, Trial::of(&d));
                        d
                    }
                };
                match decision {
                    Decision::Bind {
                        node,
                        pod,
                        mut state,
                        ..
                    } => match assume_decision(cache, Arc::clone(&pod), &node, &state) {
                        Ok(()) => placed.push(PlacedMember {
                            queued: q,
                            pod,
                            node,
                            state,
                        }),
                        Err(e) => {
                            fw.run_unreserve(&mut state, &pod, &node);
                            errored = true;
                            if let Some(r) = rec.as_deref_mut() {
                                r.trial(&q.pod, Trial::Error(e.to_string()));
                            }
                            rejected.push((q, e.to_string(), None));
                        }
                    },
                    Decision::Unschedulable {
                        message, diagnosis, ..
                    } => rejected.push((q, message, diagnosis)),
                    Decision::Error { message } => {
                        errored = true;
                        // Upstream stops at an error: the rest of the group is not evaluated.
                        verdict = Err(format!(
                            "failed to schedule other pod from a pod group: {message}"
                        ));
                        rejected.push((q, message, None));
                        break;
                    }
                }
                verdict = min_count_feasible(min, scheduled_before + placed.len(), remaining);
                if verdict.is_err() {
                    break;
                }
            }
        }
        let untried: Vec<QueuedPodInfo> = members.collect();

        // Upstream needs at least one pod placed by this cycle to call the group scheduled.
        if verdict == Ok(true) && placed.is_empty() {
            verdict = Err("no pods were schedulable".to_string());
        }
        if let Some(r) = rec {
            r.end_evaluation(match &verdict {
                Ok(true) => None,
                Err(reason) => Some(reason.clone()),
                Ok(false) => Some(format!(
                    "minCount ({min}) is not yet satisfied: {} scheduled, 0 remaining",
                    scheduled_before + placed.len()
                )),
            });
        }
        if verdict == Ok(true) {
            let waiting = rejected
                .into_iter()
                .map(|(queued, message, diagnosis)| WaitingMember {
                    queued,
                    message,
                    diagnosis,
                })
                .chain(untried.into_iter().map(|queued| WaitingMember {
                    queued,
                    message: group_failure_message(group, "not tried"),
                    diagnosis: None,
                }))
                .collect();
            return GroupOutcome::Placed { placed, waiting };
        }

        // Not enough: undo every assumption, newest first, and let the whole group wait for
        // whatever could help any of its pods (or for its missing pods).
        let reason = match &verdict {
            Err(reason) => reason.clone(),
            Ok(_) => format!(
                "minCount ({min}) is not yet satisfied: {} scheduled, 0 remaining",
                scheduled_before + placed.len()
            ),
        };
        let mut diagnosis = Diagnosis::default();
        diagnosis.unschedulable_plugins.insert(GANG_SCHEDULING);
        for (_, _, d) in &rejected {
            if let Some(d) = d {
                diagnosis
                    .unschedulable_plugins
                    .extend(d.unschedulable_plugins.iter().copied());
                diagnosis
                    .pending_plugins
                    .extend(d.pending_plugins.iter().copied());
            }
        }
        // An error sends every member through backoff, as for a single pod.
        let shared = (!errored).then_some(diagnosis);
        let mut waiting = Vec::new();
        for mut p in placed.into_iter().rev() {
            forget_decision(cache, &p.pod, &p.state);
            fw.run_unreserve(&mut p.state, &p.pod, &p.node);
            waiting.push(WaitingMember {
                message: group_failure_message(group, &reason),
                queued: p.queued,
                diagnosis: shared.clone(),
            });
        }
        for (queued, own, _) in rejected {
            waiting.push(WaitingMember {
                message: own,
                queued,
                diagnosis: shared.clone(),
            });
        }
        for queued in untried {
            waiting.push(WaitingMember {
                message: group_failure_message(group, &reason),
                queued,
                diagnosis: shared.clone(),
            });
        }
        GroupOutcome::Unschedulable {
            reason,
            error: errored,
            waiting,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::group::MemberResult;
    use crate::framework::{QueuedPodInfo, Registry};
    use crate::types::pod_group::{GroupApi, GroupPolicy, PodGroupKey};
    use crate::types::{NodeInfo, PodInfo};
    use k8s_openapi::api::core::v1 as k8s;

    fn framework() -> Framework {
        let loaded = crate::config::from_flags(None, None).unwrap();
        Framework::new(&loaded.profiles[0], &Registry::in_tree()).unwrap()
    }

    fn gpu_node(name: &str) -> k8s::Node {
        NodeInfo::test(name)
            .cpu("64")
            .memory("256Gi")
            .pods(110)
            .allocatable("nvidia.com/gpu", "8")
            .build_node()
    }

    fn member(name: &str, gpus: &str) -> QueuedPodInfo {
        let pod = PodInfo::test("ml", name)
            .request("nvidia.com/gpu", gpus)
            .edit(|p| {
                p.spec.as_mut().unwrap().scheduling_group = Some(k8s::PodSchedulingGroup {
                    pod_group_name: Some("train".into()),
                })
            })
            .build();
        QueuedPodInfo::new(Arc::new(pod), 0)
    }

    fn gang(min_count: u32) -> PodGroupInfo {
        PodGroupInfo::new(
            PodGroupKey::new(GroupApi::Workload, "ml", "train"),
            GroupPolicy::Gang { min_count },
        )
    }

    fn cache_with(nodes: &[&str]) -> Cache {
        let mut cache = Cache::new();
        for n in nodes {
            cache.add_node(&gpu_node(n));
        }
        cache
    }

    fn run(
        cache: &mut Cache,
        group: &PodGroupInfo,
        before: usize,
        members: Vec<QueuedPodInfo>,
    ) -> GroupOutcome {
        let fw = framework();
        let mut alg = SchedulingAlgorithm::new(0, 1);
        let mut snapshot = Snapshot::new();
        schedule_group(
            &fw,
            &mut alg,
            group,
            &vec![String::new(); before],
            members,
            cache,
            &mut snapshot,
            &NominatedPods::new(),
        )
    }

    #[test]
    fn a_gang_that_fits_is_placed_on_distinct_nodes() {
        let mut cache = cache_with(&["g1", "g2", "g3"]);
        let members = vec![member("w0", "8"), member("w1", "8"), member("w2", "8")];
        let GroupOutcome::Placed { placed, waiting } = run(&mut cache, &gang(3), 0, members) else {
            panic!("the gang fits");
        };
        assert!(waiting.is_empty());
        let mut nodes: Vec<_> = placed.iter().map(|p| p.node.clone()).collect();
        nodes.sort();
        assert_eq!(nodes, ["g1", "g2", "g3"]);
        // Kept: every member is assumed in the cache, ready to bind.
        assert!(placed.iter().all(|p| cache.is_assumed(p.pod.key())));
    }

    #[test]
    fn a_gang_short_of_room_keeps_nothing() {
        // Three 8-GPU pods, two free nodes: two would fit, the third cannot.
        let mut cache = cache_with(&["g1", "g2"]);
        let members = vec![member("w0", "8"), member("w1", "8"), member("w2", "8")];
        let GroupOutcome::Unschedulable { waiting, .. } = run(&mut cache, &gang(3), 0, members)
        else {
            panic!("the gang must not be placed");
        };
        assert_eq!(waiting.len(), 3);
        for w in &waiting {
            assert!(
                !cache.is_assumed(w.queued.pod.key()),
                "nothing stays assumed"
            );
            let d = w.diagnosis.as_ref().expect("unschedulable, not an error");
            assert!(d.unschedulable_plugins.contains(GANG_SCHEDULING));
            assert!(d.unschedulable_plugins.contains("NodeResourcesFit"));
        }
        // The pods that fitted name the gang's reason; the one that did not keeps its own.
        let mut messages: Vec<&str> = waiting.iter().map(|w| w.message.as_str()).collect();
        messages.sort();
        assert_eq!(
            messages,
            [
                "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.",
                "pod group \"train\": minCount (3) cannot be satisfied: 2 scheduled, 0 remaining",
                "pod group \"train\": minCount (3) cannot be satisfied: 2 scheduled, 0 remaining",
            ]
        );
        // The nodes are free again: a later pod sees all of their GPUs.
        let mut snapshot = Snapshot::new();
        cache.update_snapshot(&mut snapshot);
        assert!(
            snapshot
                .node_infos()
                .iter()
                .all(|n| n.requested.scalar_value("nvidia.com/gpu") == 0)
        );
    }

    #[test]
    fn min_count_below_the_group_size_places_what_fits() {
        // minCount 2 of 3 pods, room for 2: the two are placed, the third waits.
        let mut cache = cache_with(&["g1", "g2"]);
        let members = vec![member("w0", "8"), member("w1", "8"), member("w2", "8")];
        let GroupOutcome::Placed { placed, waiting } = run(&mut cache, &gang(2), 0, members) else {
            panic!("the quorum fits");
        };
        assert_eq!(placed.len(), 2);
        assert_eq!(waiting.len(), 1);
        assert!(waiting[0].message.contains("Insufficient nvidia.com/gpu"));
    }

    #[test]
    fn members_bound_before_count_toward_the_quorum() {
        // minCount 3: one member is already running, so two more suffice.
        let mut cache = cache_with(&["g1", "g2"]);
        let members = vec![member("w1", "8"), member("w2", "8")];
        assert!(matches!(
            run(&mut cache, &gang(3), 1, members),
            GroupOutcome::Placed { .. }
        ));
        // Without it, the same two pods cannot meet minCount 3 and nothing is tried.
        let mut cache = cache_with(&["g1", "g2"]);
        let members = vec![member("w1", "8"), member("w2", "8")];
        let GroupOutcome::Unschedulable { waiting, .. } = run(&mut cache, &gang(3), 0, members)
        else {
            panic!("two pods cannot meet minCount 3");
        };
        assert_eq!(
            waiting[0].message,
            "pod group \"train\": minCount (3) cannot be satisfied: 0 scheduled, 2 remaining"
        );
    }

    #[test]
    fn the_group_condition_follows_the_outcome_and_never_turns_false() {
        let group = gang(3);
        let placed = GroupOutcome::Placed {
            placed: Vec::new(),
            waiting: Vec::new(),
        };
        let rejected = GroupOutcome::Unschedulable {
            reason: "minCount (3) cannot be satisfied: 1 scheduled, 0 remaining".into(),
            error: false,
            waiting: Vec::new(),
        };
        let unschedulable = scheduled_condition(&group, &rejected).unwrap();
        assert!(!unschedulable.status);
        assert_eq!(unschedulable.reason, "Unschedulable");
        assert_eq!(
            unschedulable.message,
            "minCount (3) cannot be satisfied: 1 scheduled, 0 remaining"
        );
        // Written once: the same condition again changes nothing.
        let mut seen = group.clone();
        seen.scheduled_condition = Some(unschedulable);
        assert_eq!(scheduled_condition(&seen, &rejected), None);
        let scheduled = scheduled_condition(&seen, &placed).unwrap();
        assert!(scheduled.status);
        assert_eq!(scheduled.reason, "Scheduled");
        // Once True, a later failure (a member recreated, say) does not turn it False.
        seen.scheduled_condition = Some(scheduled);
        assert_eq!(scheduled_condition(&seen, &rejected), None);
        let error = GroupOutcome::Unschedulable {
            reason: "boom".into(),
            error: true,
            waiting: Vec::new(),
        };
        assert_eq!(
            scheduled_condition(&group, &error).unwrap().reason,
            "SchedulerError"
        );
        // scheduler-plugins' groups keep their own status.
        let mut cosched = group.clone();
        cosched.key.api = GroupApi::Coscheduling;
        assert_eq!(scheduled_condition(&cosched, &rejected), None);
    }

    #[test]
    fn a_cycle_that_places_nobody_is_not_a_scheduled_group() {
        // minCount 1 met by a running member, but the one pending member does not fit.
        let mut cache = cache_with(&["g1"]);
        let members = vec![member("w1", "16")];
        let GroupOutcome::Unschedulable {
            reason, waiting, ..
        } = run(&mut cache, &gang(1), 1, members)
        else {
            panic!("nothing was placed");
        };
        assert_eq!(reason, "no pods were schedulable");
        assert!(waiting[0].message.starts_with("0/1 nodes are available"));
    }

    /// (pod, node) or (pod, message) pairs.
    type Pairs = Vec<(String, String)>;

    /// What an outcome decided: each placed member's node, each waiting member's message.
    fn decided(out: &GroupOutcome) -> (Pairs, Pairs) {
        let waiting = |w: &[WaitingMember]| {
            w.iter()
                .map(|w| (w.queued.pod.key().to_string(), w.message.clone()))
                .collect()
        };
        match out {
            GroupOutcome::Placed { placed, waiting: w } => (
                placed
                    .iter()
                    .map(|p| (p.pod.key().to_string(), p.node.clone()))
                    .collect(),
                waiting(w),
            ),
            GroupOutcome::Unschedulable { waiting: w, .. } => (Vec::new(), waiting(w)),
        }
    }

    #[test]
    fn recording_changes_nothing_the_cycle_decides() {
        let gangs = || vec![member("w0", "8"), member("w1", "8"), member("w2", "8")];
        let zones = [
            ("a1", "a"),
            ("a2", "a"),
            ("b1", "b"),
            ("b2", "b"),
            ("b3", "b"),
        ];
        for (group, zoned, nodes) in [
            (gang(3), false, 2),
            (gang(2), false, 2),
            (gang(3), false, 3),
            (zonal(3), true, 5),
            (zonal(3), true, 4),
        ] {
            let cache = || {
                if zoned {
                    zoned_cache(&zones[..nodes])
                } else {
                    cache_with(&["g1", "g2", "g3"][..nodes])
                }
            };
            let plain = run(&mut cache(), &group, 0, gangs());
            let all: &dyn Fn(&str) -> bool = &|_| true;
            let none: &dyn Fn(&str) -> bool = &|_| false;
            for wants in [all, none] {
                let fw = framework();
                let mut rec = GroupRecord::new(wants);
                let recorded = schedule_group_recorded(
                    &fw,
                    &mut SchedulingAlgorithm::new(0, 1),
                    &group,
                    &[],
                    gangs(),
                    &mut cache(),
                    &mut Snapshot::new(),
                    &NominatedPods::new(),
                    &mut rec,
                );
                assert_eq!(decided(&recorded), decided(&plain), "{group:?}");
                let explained = rec.explanations(&fw, &group, &recorded);
                assert_eq!(explained.len(), if wants("") { 3 } else { 0 });
                // Each explained member's outcome is the one the group gave it.
                let (placed, waiting) = decided(&recorded);
                for e in explained {
                    match placed.iter().find(|(p, _)| *p == e.pod) {
                        Some((_, node)) => assert_eq!(e.node.as_ref(), Some(node)),
                        None => {
                            let (_, m) = waiting.iter().find(|(p, _)| *p == e.pod).unwrap();
                            assert_eq!(e.message.as_ref(), Some(m));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn members_the_cycle_never_reached_are_named_not_tried() {
        // The first member cannot fit anywhere: with minCount 3 the other two can no longer
        // meet the quorum, and the cycle stops before trying them.
        let mut cache = cache_with(&["g1", "g2", "g3"]);
        let members = vec![member("w0", "16"), member("w1", "8"), member("w2", "8")];
        let fw = framework();
        let wants = |p: &str| p == "ml/w2";
        let mut rec = GroupRecord::new(&wants);
        let group = gang(3);
        let out = schedule_group_recorded(
            &fw,
            &mut SchedulingAlgorithm::new(0, 1),
            &group,
            &[],
            members,
            &mut cache,
            &mut Snapshot::new(),
            &NominatedPods::new(),
            &mut rec,
        );
        let section = rec.section(&fw, &group, &out);
        let results: Vec<MemberResult> = section.members.iter().map(|m| m.result).collect();
        assert_eq!(
            results,
            [
                MemberResult::Unschedulable,
                MemberResult::NotTried,
                MemberResult::NotTried
            ]
        );
        let reason = "minCount (3) cannot be satisfied: 0 scheduled, 2 remaining";
        assert_eq!(section.message.as_deref(), Some(reason));
        let e = rec.explanations(&fw, &group, &out).pop().unwrap();
        assert_eq!(e.pod, "ml/w2");
        assert!(e.nodes.is_empty(), "never tried: no node was looked at");
        assert_eq!(e.num_all_nodes, 3);
        assert_eq!(e.message.unwrap(), format!("pod group \"train\": {reason}"));
    }

    fn zoned_cache(zones: &[(&str, &str)]) -> Cache {
        let mut cache = Cache::new();
        for (name, zone) in zones {
            let node = NodeInfo::test(name)
                .cpu("64")
                .memory("256Gi")
                .pods(110)
                .allocatable("nvidia.com/gpu", "8")
                .label("topology.kubernetes.io/zone", zone)
                .build_node();
            cache.add_node(&node);
        }
        cache
    }

    fn zonal(min_count: u32) -> PodGroupInfo {
        let mut g = gang(min_count);
        g.topology_key = Some("topology.kubernetes.io/zone".into());
        g
    }

    fn zone_of(cache: &Cache, node: &str) -> String {
        let mut snapshot = Snapshot::new();
        cache.update_snapshot(&mut snapshot);
        snapshot.get(node).unwrap().labels["topology.kubernetes.io/zone"].clone()
    }

    #[test]
    fn a_topology_constrained_gang_lands_in_one_domain() {
        // Zone a has two nodes, zone b three: a gang of three fits only in b, though the
        // nodes together would hold it across zones.
        let mut cache = zoned_cache(&[
            ("a1", "a"),
            ("a2", "a"),
            ("b1", "b"),
            ("b2", "b"),
            ("b3", "b"),
        ]);
        let members = vec![member("w0", "8"), member("w1", "8"), member("w2", "8")];
        let GroupOutcome::Placed { placed, waiting } = run(&mut cache, &zonal(3), 0, members)
        else {
            panic!("zone b holds the gang");
        };
        assert!(waiting.is_empty());
        for p in &placed {
            assert_eq!(
                zone_of(&cache, &p.node),
                "b",
                "{} on {}",
                p.pod.name(),
                p.node
            );
        }
        // Only the kept placement stays assumed: zone a is free.
        let mut snapshot = Snapshot::new();
        cache.update_snapshot(&mut snapshot);
        for n in ["a1", "a2"] {
            assert_eq!(
                snapshot
                    .get(n)
                    .unwrap()
                    .requested
                    .scalar_value("nvidia.com/gpu"),
                0
            );
        }
    }

    #[test]
    fn no_domain_big_enough_keeps_nothing_and_says_so() {
        let mut cache = zoned_cache(&[("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b")]);
        let members = vec![member("w0", "8"), member("w1", "8"), member("w2", "8")];
        let GroupOutcome::Unschedulable {
            reason, waiting, ..
        } = run(&mut cache, &zonal(3), 0, members)
        else {
            panic!("no zone holds three");
        };
        assert_eq!(
            reason,
            "0/2 placements are available, first placement status: minCount (3) cannot be satisfied: 2 scheduled, 0 remaining"
        );
        assert!(
            waiting
                .iter()
                .any(|w| w.message == format!("pod group \"train\": {reason}")),
            "{waiting:?}"
        );
        let mut snapshot = Snapshot::new();
        cache.update_snapshot(&mut snapshot);
        assert!(
            snapshot
                .node_infos()
                .iter()
                .all(|n| n.requested.scalar_value("nvidia.com/gpu") == 0)
        );
    }

    /// Like `run`, with the profile of `config` (the lines under a profile's list item)
    /// and the explanation's domains: (value, result) in evaluation order.
    fn run_with(
        config: &str,
        cache: &mut Cache,
        group: &PodGroupInfo,
        members: Vec<QueuedPodInfo>,
    ) -> (
        GroupOutcome,
        Vec<(String, crate::explain::group::DomainResult)>,
    ) {
        let text = format!(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n{config}"
        );
        let loaded = crate::config::load_str(&text, "t").unwrap_or_else(|e| panic!("{e}"));
        let fw = Framework::new(&loaded.profiles[0], &Registry::in_tree()).unwrap();
        let mut alg = SchedulingAlgorithm::new(0, 1);
        let mut snapshot = Snapshot::new();
        let nobody = |_: &str| false;
        let mut rec = GroupRecord::new(&nobody);
        let out = schedule_group_recorded(
            &fw,
            &mut alg,
            group,
            &[],
            members,
            cache,
            &mut snapshot,
            &NominatedPods::new(),
            &mut rec,
        );
        let domains = rec
            .section(&fw, group, &out)
            .domains
            .into_iter()
            .map(|d| (d.domain.rsplit('=').next().unwrap().to_string(), d.result))
            .collect();
        (out, domains)
    }

    /// Zone a's node already runs 48 of its 64 cpus; zone b's is empty.
    fn one_busy_zone() -> Cache {
        let mut cache = zoned_cache(&[("a1", "a"), ("b1", "b")]);
        let busy = PodInfo::test("ml", "busy").cpu("48").node("a1").build();
        cache.add_pod(Arc::new(busy)).unwrap();
        cache
    }

    fn zone_chosen(out: &GroupOutcome, cache: &Cache) -> String {
        let GroupOutcome::Placed { placed, .. } = out else {
            panic!("placed: {out:?}");
        };
        zone_of(cache, &placed[0].node)
    }

    #[test]
    fn the_placement_scorers_use_the_profiles_fit_strategy_and_weights() {
        // LeastAllocated (the default): the empty zone. MostAllocated: the busy one.
        let mut cache = one_busy_zone();
        let (out, _) = run_with("", &mut cache, &zonal(1), vec![member("w0", "1")]);
        assert_eq!(zone_chosen(&out, &cache), "b");
        let most = "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: MostAllocated\n";
        let mut cache = one_busy_zone();
        let (out, _) = run_with(most, &mut cache, &zonal(1), vec![member("w0", "1")]);
        assert_eq!(zone_chosen(&out, &cache), "a");
        // Without NodeResourcesFit at placementScore both zones score the same: the first
        // evaluated (by name) wins.
        let pods_only = "profiles:\n- plugins:\n    placementScore:\n      disabled:\n      - name: NodeResourcesFit\n";
        let mut cache = one_busy_zone();
        let (out, _) = run_with(pods_only, &mut cache, &zonal(1), vec![member("w0", "1")]);
        assert_eq!(zone_chosen(&out, &cache), "a");
    }

    #[test]
    fn without_a_placement_generator_a_topology_constraint_waits() {
        let off = "profiles:\n- plugins:\n    multiPoint:\n      disabled:\n      - name: TopologyPlacementGenerator\n";
        let mut cache = zoned_cache(&[("a1", "a"), ("b1", "b")]);
        let (out, _) = run_with(off, &mut cache, &zonal(1), vec![member("w0", "1")]);
        let GroupOutcome::Unschedulable { reason, error, .. } = out else {
            panic!("nothing can honour the constraint");
        };
        assert!(!error);
        assert_eq!(
            reason,
            "the pod group has a topology constraint on \"topology.kubernetes.io/zone\", but profile \"default-scheduler\" runs no PlacementGenerate plugin (enable TopologyPlacementGenerator)"
        );
    }

    #[test]
    fn the_share_of_placements_to_score_stops_the_search_early() {
        // Ten zones that all hold the gang. At 100% every one is evaluated; at 10% the search
        // stops at the first feasible one (the order is shuffled then).
        let zones: Vec<(String, String)> = (0..10)
            .map(|i| (format!("n{i}"), format!("z{i}")))
            .collect();
        let refs: Vec<(&str, &str)> = zones
            .iter()
            .map(|(n, z)| (n.as_str(), z.as_str()))
            .collect();
        let mut cache = zoned_cache(&refs);
        let (_, all) = run_with(
            "percentageOfPlacementsToScore: 100\n",
            &mut cache,
            &zonal(1),
            vec![member("w0", "1")],
        );
        assert_eq!(all.len(), 10);
        let mut cache = zoned_cache(&refs);
        let (out, some) = run_with(
            "percentageOfPlacementsToScore: 10\n",
            &mut cache,
            &zonal(1),
            vec![member("w0", "1")],
        );
        assert_eq!(some.len(), 1, "{some:?}");
        assert_eq!(some[0].1, crate::explain::group::DomainResult::Chosen);
        assert!(matches!(out, GroupOutcome::Placed { .. }));
        // Adaptive (unset): ten one-node placements are far under 5,000 nodes: all of them.
        let mut cache = zoned_cache(&refs);
        let (_, adaptive) = run_with("", &mut cache, &zonal(1), vec![member("w0", "1")]);
        assert_eq!(adaptive.len(), 10);
    }

    #[test]
    fn members_already_placed_pin_the_domain() {
        // One member runs in zone z; the rest must follow it there, though b would win
        // otherwise (the same scores, and first by name).
        let mut cache = zoned_cache(&[
            ("z1", "z"),
            ("z2", "z"),
            ("b1", "b"),
            ("b2", "b"),
            ("b3", "b"),
        ]);
        let fw = framework();
        let mut alg = SchedulingAlgorithm::new(0, 1);
        let mut snapshot = Snapshot::new();
        let members = vec![member("w1", "8")];
        let out = schedule_group(
            &fw,
            &mut alg,
            &zonal(2),
            &["z1".to_string()],
            members,
            &mut cache,
            &mut snapshot,
            &NominatedPods::new(),
        );
        let GroupOutcome::Placed { placed, .. } = out else {
            panic!("zone z has room for one more");
        };
        assert_eq!(zone_of(&cache, &placed[0].node), "z");
        // Unpinned, the same member goes to b.
        let members = vec![member("w2", "8")];
        let GroupOutcome::Placed { placed, .. } = run(&mut cache, &zonal(1), 0, members) else {
            panic!("fits");
        };
        assert_eq!(zone_of(&cache, &placed[0].node), "b");
    }
}
