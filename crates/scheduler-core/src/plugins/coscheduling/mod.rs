//! Coscheduling (kubernetes-sigs/scheduler-plugins, what Kubeflow's training operator pairs
//! with its `scheduling.x-k8s.io/v1alpha1` PodGroups), so a config written for
//! scheduler-plugins' image loads and runs unchanged: the plugin name, its args
//! (`CoschedulingArgs`) and its extension points.
//!
//! The work is ferrosched's pod group cycle's, shared with GangScheduling: PreEnqueue keeps a
//! labelled pod out until its group exists and has `minMember` pods (scheduler-plugins'
//! messages, [`gang_scheduling::gate`]); the cycle then places the group all or nothing,
//! which is what scheduler-plugins reaches with pods waiting at Permit. So PreFilter,
//! PostFilter, Permit and Reserve add nothing here (no pod ever waits at Permit, and a group
//! that does not fit is rejected as a whole by the cycle), and `permitWaitingTimeSeconds`
//! has nothing to bound. QueueSort is scheduler-plugins': priority, then the group's creation
//! time (a pod without a group: its first attempt), then `namespace/name`, so a group's
//! pods queue together.

pub mod min_resources;

use std::sync::Arc;
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
use crate::types::pod_group::{GroupApi, PodGroupInfo};

use super::gang_scheduling::{self, GangScheduling};
use super::names::{COSCHEDULING, NODE_RESOURCES_FIT};

pub struct Coscheduling {
    groups: Arc<PodGroupManager>,
    /// Its args, kept for `config print` and documentation: nothing waits at Permit.
    pub args: CoschedulingArgs,
}

impl Coscheduling {
    pub fn new(groups: Arc<PodGroupManager>, args: Option<&PluginArgs>) -> Result<Self, String> {
        let args = match args {
            Some(PluginArgs::Coscheduling(a)) => a.clone(),
            Some(other) => return Err(format!("want CoschedulingArgs, got {}", other.kind())),
            None => CoschedulingArgs {
                permit_waiting_time_seconds: crate::config::DEFAULT_PERMIT_WAITING_TIME_SECONDS,
                pod_group_backoff_seconds: 0,
            },
        };
        Ok(Coscheduling { groups, args })
    }

    /// The creation time that orders `q`: its group's, else its first attempt's.
    fn order_time(&self, q: &QueuedPodInfo) -> u64 {
        let group = q
            .pod
            .pod_group
            .as_deref()
            .filter(|k| k.api == GroupApi::Coscheduling)
            .and_then(|k| self.groups.read().get(k).and_then(|g| g.creation_timestamp));
        match group {
            Some(t) => u64::try_from(t).unwrap_or(0),
            None => q.initial_attempt_timestamp.unwrap_or(q.timestamp),
        }
    }
}

/// Replaces the in-tree factory with one whose plugins read `groups`.
pub fn register(registry: &mut Registry, groups: Arc<PodGroupManager>) {
    registry.register_shared(
        COSCHEDULING,
        Arc::new(move |args| Ok(Arc::new(Coscheduling::new(Arc::clone(&groups), args)?))),
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
/// its cycle: `minResources` against the cluster's free resources.
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

    fn group_done(&self, _group: &PodGroupInfo, _done: &GroupCycleDone) {}
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
