//! Coscheduling (kubernetes-sigs/scheduler-plugins, what Kubeflow's training operator pairs
//! with its `scheduling.x-k8s.io/v1alpha1` PodGroups), so a config written for
//! scheduler-plugins' image loads and runs unchanged: the plugin name, its args
//! (`CoschedulingArgs`) and its extension points.
//!
//! scheduler-plugins lets each pod of a group through its own cycle and holds the placed
//! pods at Permit until `minMember` are placed. ferrosched's pod group cycle (shared with
//! GangScheduling) places the group all or nothing at once, so no pod ever waits at Permit;
//! what scheduler-plugins checks for the group from its per-pod points is done once per
//! group cycle here, through the framework's group point ([`PodGroupPlugin`]):
//!
//! * **PreEnqueue:** a labelled pod waits until its group exists and has `minMember` pods
//!   (scheduler-plugins' messages, [`gang_scheduling::gate`]).
//! * **Before the group's cycle** (its PreFilter): a group backed off is turned away
//!   (`podGroup NS/NAME failed recently`), then `minResources` (with `pods` = `minMember`)
//!   must be free in the cluster as a whole ([`min_resources`]), unless a check passed
//!   within `permitWaitingTimeSeconds` (3 s at 0: its cache's default lifetime).
//!   Rejections leave every member untried and are never preempted for.
//! * **After a real cycle** (its PostFilter and Permit): a group not placed, unless its pods
//!   placed before are within `podGroupRejectPercentage` of `minMember`, is remembered as
//!   failed (queue order), loses its passed `minResources` check and, with
//!   `podGroupBackoffSeconds` and `minMember` pods, is backed off (a running back-off is
//!   not extended); a group placed is forgotten as failed.
//! * **QueueSort:** priority, then the group's last failure or else its creation time (a
//!   pod without a group: its first attempt), then `namespace/name`, so a group's pods
//!   queue together and a failing group does not block the ones behind it.
//!
//! What does not carry over: `permitWaitingTimeSeconds` and the PodGroup's
//! `scheduleTimeoutSeconds` bound, in scheduler-plugins, how long placed pods wait at
//! Permit for their siblings. No pod waits here: a group whose quorum (counting pods bound
//! before) cannot be placed at once keeps nothing, and one whose quorum is met binds at
//! once. So `scheduleTimeoutSeconds` is not read, and `permitWaitingTimeSeconds` only
//! bounds the passed `minResources` check. PostFilter, Permit and Reserve are accepted and
//! empty.
//!
//! The PodGroup status scheduler-plugins' controller keeps is computed in [`status`] and
//! written by `ferrosched run`.

pub mod min_resources;
pub mod status;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::cache::Snapshot;
use crate::config::{CoschedulingArgs, PluginArgs};
use crate::framework::{
    ClusterEvent, Code, CycleState, Plugin, PluginPoints, PostFilterContext, PostFilterPlugin,
    PostFilterResult, PreEnqueuePlugin, PreFilterPlugin, PreFilterResult, QueueSortPlugin,
    QueuedPodInfo, Registry, Status,
};
use crate::framework::{
    EventObjects, GroupCycleDone, GroupRejection, PermitPlugin, PodGroupPlugin, QueueingHint,
    ReservePlugin,
};
use crate::plugin_points;
use crate::pod_group_manager::PodGroupManager;
use crate::types::PodInfo;
use crate::types::pod_group::{GroupApi, PodGroupInfo, PodGroupKey};

use super::gang_scheduling::{self, GangScheduling};
use super::names::{COSCHEDULING, NODE_RESOURCES_FIT};

/// The wall clock in Unix nanoseconds (PodGroups' creation times are too): a closure, so
/// tests can move time by hand.
pub type WallClock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The system's wall clock.
pub fn system_clock() -> WallClock {
    Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
    })
}

const NANOS_PER_SECOND: i64 = 1_000_000_000;

/// scheduler-plugins keeps a passed `minResources` check in a cache whose entries given no
/// lifetime (`permitWaitingTimeSeconds: 0`) live for its default, 3 s.
const DEFAULT_PERMITTED_TTL: i64 = 3 * NANOS_PER_SECOND;

/// What the plugin remembers of one group between its cycles (scheduler-plugins'
/// `backedOffPG`, `lastFailedSchedulePG` and `permittedPG`). Times are [`WallClock`]'s.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Memory {
    /// `podGroupBackoffSeconds`: the group's pods are turned away until then...
    backed_off_until: Option<i64>,
    /// ...and retried meanwhile on the events of these plugins (those of its failure).
    backoff_wait_for: BTreeSet<&'static str>,
    /// When the group last failed: it orders the group in the queue instead of its creation
    /// time, until it is placed.
    last_failure: Option<i64>,
    /// The group passed its `minResources` check: not checked again until then.
    permitted_until: Option<i64>,
}

impl Memory {
    fn is_empty(&self, now: i64) -> bool {
        self.last_failure.is_none()
            && self.backed_off_until.is_none_or(|t| t <= now)
            && self.permitted_until.is_none_or(|t| t <= now)
    }
}

pub struct Coscheduling {
    groups: Arc<PodGroupManager>,
    /// Its args, as loaded (`config print`).
    pub args: CoschedulingArgs,
    now: WallClock,
    memory: Mutex<HashMap<PodGroupKey, Memory>>,
}

impl Coscheduling {
    pub fn new(groups: Arc<PodGroupManager>, args: Option<&PluginArgs>) -> Result<Self, String> {
        Self::with_clock(groups, args, system_clock())
    }

    /// [`Coscheduling::new`] reading time from `now`.
    pub fn with_clock(
        groups: Arc<PodGroupManager>,
        args: Option<&PluginArgs>,
        now: WallClock,
    ) -> Result<Self, String> {
        let args = match args {
            Some(PluginArgs::Coscheduling(a)) => a.clone(),
            Some(other) => return Err(format!("want CoschedulingArgs, got {}", other.kind())),
            None => CoschedulingArgs {
                permit_waiting_time_seconds: crate::config::DEFAULT_PERMIT_WAITING_TIME_SECONDS,
                pod_group_backoff_seconds: 0,
                pod_group_reject_percentage: crate::config::DEFAULT_POD_GROUP_REJECT_PERCENTAGE,
            },
        };
        Ok(Coscheduling {
            groups,
            args,
            now,
            memory: Mutex::default(),
        })
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, HashMap<PodGroupKey, Memory>> {
        self.memory.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The time that orders `q`: its group's last failure, else the group's creation, else
    /// the pod's first attempt (scheduler-plugins' `GetCreationTimestamp`).
    fn order_time(&self, q: &QueuedPodInfo) -> u64 {
        let key = q
            .pod
            .pod_group
            .as_deref()
            .filter(|k| k.api == GroupApi::Coscheduling);
        let failed = key.and_then(|k| self.memory().get(k).and_then(|m| m.last_failure));
        let group = failed.or_else(|| {
            key.and_then(|k| self.groups.read().get(k).and_then(|g| g.creation_timestamp))
        });
        match group {
            Some(t) => u64::try_from(t).unwrap_or(0),
            None => q.initial_attempt_timestamp.unwrap_or(q.timestamp),
        }
    }

    /// How long a passed `minResources` check holds.
    fn permitted_ttl(&self) -> i64 {
        match self.args.permit_waiting_time_seconds {
            0 => DEFAULT_PERMITTED_TTL,
            s => s.saturating_mul(NANOS_PER_SECOND),
        }
    }

    /// scheduler-plugins' PostFilter on a group that was not placed: unless `minMember` is
    /// (nearly) reached by pods placed before, the failure is remembered (queue order), a
    /// passed `minResources` check forgotten, and with `podGroupBackoffSeconds` the group
    /// held back (when it has `minMember` pods; a running back-off is not extended).
    fn failed(&self, group: &PodGroupInfo, done: &GroupCycleDone, now: i64) {
        let min = i64::from(group.min_count_as_set());
        let assigned = done.scheduled_before as i64;
        if assigned >= min {
            return;
        }
        // (min - assigned) / min <= percentage / 100, in integers.
        if (min - assigned) * 100 <= i64::from(self.args.pod_group_reject_percentage) * min {
            return;
        }
        let mut memory = self.memory();
        let m = memory.entry(group.key.clone()).or_default();
        let backoff = self.args.pod_group_backoff_seconds;
        if backoff > 0 && done.all_pods as i64 >= min && m.backed_off_until.is_none_or(|t| t <= now)
        {
            m.backed_off_until = Some(now.saturating_add(backoff.saturating_mul(NANOS_PER_SECOND)));
            m.backoff_wait_for = done.unschedulable_plugins.clone();
            m.backoff_wait_for.remove(COSCHEDULING);
        }
        m.permitted_until = None;
        m.last_failure = Some(now);
    }

    /// A group placed: no longer penalised in the queue; a passed `minResources` check
    /// holds for [`Self::permitted_ttl`] from now (unless one already holds).
    fn placed(&self, group: &PodGroupInfo, now: i64) {
        let mut memory = self.memory();
        let m = memory.entry(group.key.clone()).or_default();
        m.last_failure = None;
        if group.min_resources.is_some() && m.permitted_until.is_none_or(|t| t <= now) {
            m.permitted_until = Some(now.saturating_add(self.permitted_ttl()));
        }
    }

    /// Forgets groups with nothing left to remember, and groups that are gone.
    fn prune(&self, now: i64) {
        let groups = self.groups.read();
        self.memory()
            .retain(|k, m| !m.is_empty(now) && groups.get(k).is_some());
    }
}

/// Replaces the in-tree factory with one whose plugins read `groups`.
pub fn register(registry: &mut Registry, groups: Arc<PodGroupManager>) {
    register_with_clock(registry, groups, system_clock());
}

/// [`register`], the plugins reading time from `now` (tests).
pub fn register_with_clock(registry: &mut Registry, groups: Arc<PodGroupManager>, now: WallClock) {
    registry.register_shared(
        COSCHEDULING,
        Arc::new(move |args| {
            Ok(Arc::new(Coscheduling::with_clock(
                Arc::clone(&groups),
                args,
                Arc::clone(&now),
            )?))
        }),
    );
}

impl Plugin for Coscheduling {
    fn name(&self) -> &'static str {
        COSCHEDULING
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => pre_enqueue, queue_sort, pre_filter, post_filter, reserve, permit, pod_group)
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        gang_scheduling::group_events()
    }
    fn queueing_hint(
        &self,
        pod: &PodInfo,
        event: &ClusterEvent,
        objects: &EventObjects<'_>,
    ) -> QueueingHint {
        // A change of the group's minResources may let it through (scheduler-plugins
        // retries on every update of a PodGroup).
        if let EventObjects::PodGroup {
            old: Some(old),
            new,
        } = objects
            && pod.pod_group.as_deref() == Some(&new.key)
            && old.min_resources != new.min_resources
        {
            return QueueingHint::Queue;
        }
        GangScheduling::new(Arc::clone(&self.groups)).queueing_hint(pod, event, objects)
    }
}

impl PreEnqueuePlugin for Coscheduling {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        if pod
            .pod_group
            .as_deref()
            .is_some_and(|k| k.api == GroupApi::Coscheduling)
        {
            gang_scheduling::gate(&self.groups, pod)
        } else {
            Status::success()
        }
    }
}

impl QueueSortPlugin for Coscheduling {
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        let (pa, pb) = (a.pod.priority, b.pod.priority);
        if pa != pb {
            return pa > pb;
        }
        let (ta, tb) = (self.order_time(a), self.order_time(b));
        if ta != tb {
            return ta < tb;
        }
        (a.pod.namespace(), a.pod.name()) < (b.pod.namespace(), b.pod.name())
    }
}

impl PreFilterPlugin for Coscheduling {
    fn pre_filter(
        &self,
        _state: &mut CycleState,
        _pod: &PodInfo,
        _snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        (None, Status::success())
    }
}

/// scheduler-plugins' PreFilter checks that concern the group as a whole, run once before
/// its cycle: a group that failed recently is turned away while backed off, then
/// `minResources` is checked against the cluster's free resources (unless a check passed
/// within `permitWaitingTimeSeconds`). After a real cycle, its PostFilter's and Permit's
/// bookkeeping.
impl PodGroupPlugin for Coscheduling {
    fn pre_filter_group(
        &self,
        group: &PodGroupInfo,
        snapshot: &Snapshot,
        _scheduled_before: usize,
    ) -> Result<(), GroupRejection> {
        if group.key.api != GroupApi::Coscheduling {
            return Ok(());
        }
        let now = (self.now)();
        let memory = self.memory().get(&group.key).cloned().unwrap_or_default();
        if memory.backed_off_until.is_some_and(|t| t > now) {
            return Err(GroupRejection {
                message: backed_off(group),
                wait_for: memory.backoff_wait_for,
            });
        }
        if memory.permitted_until.is_some_and(|t| t > now) {
            return Ok(());
        }
        match min_resources::resource_gap(group, snapshot) {
            None => Ok(()),
            Some(gap) => {
                let mut r = GroupRejection::new(min_resources::gap_message(&gap));
                // Room freed or added on any node may close the gap.
                r.wait_for.insert(NODE_RESOURCES_FIT);
                Err(r)
            }
        }
    }

    fn group_done(&self, group: &PodGroupInfo, done: &GroupCycleDone) {
        if group.key.api != GroupApi::Coscheduling {
            return;
        }
        let now = (self.now)();
        if done.placed {
            self.placed(group, now);
        } else if !done.error {
            self.failed(group, done, now);
        }
        self.prune(now);
    }
}

/// scheduler-plugins' rejection of a group held back after a failure.
pub fn backed_off(group: &PodGroupInfo) -> String {
    format!("podGroup {} failed recently", group.key)
}

impl PostFilterPlugin for Coscheduling {
    fn post_filter(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        _ctx: &PostFilterContext<'_>,
    ) -> (Option<PostFilterResult>, Status) {
        (
            None,
            Status::with_reasons(Code::Unschedulable, Vec::<String>::new()),
        )
    }
}

impl ReservePlugin for Coscheduling {
    fn reserve(&self, _state: &mut CycleState, _pod: &PodInfo, _node: &str) -> Status {
        Status::success()
    }
    fn unreserve(&self, _state: &mut CycleState, _pod: &PodInfo, _node: &str) {}
}

impl PermitPlugin for Coscheduling {
    fn permit(&self, _state: &CycleState, _pod: &PodInfo, _node: &str) -> (Status, Duration) {
        (Status::success(), Duration::ZERO)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::pod_group::{GroupPolicy, PodGroupInfo, PodGroupKey};

    fn labelled(name: &str, group: &str) -> PodInfo {
        PodInfo::test("ml", name)
            .label("scheduling.x-k8s.io/pod-group", group)
            .build()
    }

    #[test]
    fn groups_queue_together_in_creation_order() {
        let groups = Arc::new(PodGroupManager::new());
        for (name, created) in [("old", 100), ("new", 200)] {
            let mut g = PodGroupInfo::new(
                PodGroupKey::new(GroupApi::Coscheduling, "ml", name),
                GroupPolicy::Gang { min_count: 1 },
            );
            g.creation_timestamp = Some(created);
            groups.write().upsert(g);
        }
        let pl = Coscheduling::new(Arc::clone(&groups), None).unwrap();
        // A pod of the newer group queued first still sorts after the older group's.
        let new0 = QueuedPodInfo::new(Arc::new(labelled("a-new", "new")), 1);
        let old0 = QueuedPodInfo::new(Arc::new(labelled("z-old", "old")), 2);
        assert!(pl.less(&old0, &new0));
        assert!(!pl.less(&new0, &old0));
        // Same group: by name.
        let old1 = QueuedPodInfo::new(Arc::new(labelled("b-old", "old")), 3);
        assert!(pl.less(&old1, &old0));
        // Priority first.
        let mut urgent = labelled("urgent", "new");
        urgent.priority = 10;
        let urgent = QueuedPodInfo::new(Arc::new(urgent), 9);
        assert!(pl.less(&urgent, &old0));
    }

    #[test]
    fn only_coscheduling_pods_are_gated_with_scheduler_plugins_messages() {
        let groups = Arc::new(PodGroupManager::new());
        let pl = Coscheduling::new(Arc::clone(&groups), None).unwrap();
        assert_eq!(
            pl.pre_enqueue(&labelled("w", "tf")).message(),
            "PodGroup not found"
        );
        assert!(
            pl.pre_enqueue(&PodInfo::test("ml", "solo").build())
                .is_success()
        );
        let err = Coscheduling::new(
            groups,
            Some(&PluginArgs::DefaultPreemption(
                crate::config::DefaultPreemptionArgs {
                    min_candidate_nodes_percentage: 10,
                    min_candidate_nodes_absolute: 100,
                },
            )),
        );
        assert!(err.is_err());
    }
}

#[cfg(test)]
mod group_tests;
