//! GangScheduling (upstream `plugins/gangscheduling`): a pod of a gang stays out of the
//! active queue until its PodGroup exists and at least `minCount` of the group's pods do.
//! Placing the gang all or nothing is the pod group cycle's work (`schedule_group`); this
//! plugin is its gate, and [`min_count_feasible`] its PlacementFeasible check.
//!
//! It reads the groups from a shared [`PodGroupManager`]: `ferrosched run` feeds it from the
//! PodGroup and pod informers, `simulate` from the dump ([`register`]). Built from the plain
//! in-tree factory it sees no group at all, so every pod that names one waits: a pod of a
//! gang is never bound alone because nobody told the plugin about its group.
//!
//! Pods of scheduler-plugins' Coscheduling groups (label `scheduling.x-k8s.io/pod-group`)
//! are gated the same way, with scheduler-plugins' messages.

use std::sync::Arc;

use crate::framework::{
    ActionType, ClusterEvent, EventObjects, EventResource, Plugin, PluginPoints, PreEnqueuePlugin,
    QueueingHint, Registry, Status,
};
use crate::plugin_points;
use crate::pod_group_manager::PodGroupManager;
use crate::pod_group_tree::{self, TreeNode};
use crate::types::PodInfo;
use crate::types::pod_group::{GroupApi, GroupPolicy, PodGroupKey};

use super::names::GANG_SCHEDULING;

/// Upstream's message for a gang whose pods are fewer than `minCount`.
pub const WAITING_FOR_MIN_COUNT: &str =
    "waiting for minCount pods from a gang to appear in scheduling queue";

/// Upstream's message for a pod whose PodGroup does not exist (yet).
pub fn waiting_for_group(name: &str) -> String {
    format!("waiting for pod's pod group {name:?} to appear in scheduling queue")
}

/// scheduler-plugins' message for a coscheduling pod whose PodGroup does not exist.
pub const COSCHEDULING_GROUP_NOT_FOUND: &str = "PodGroup not found";

/// scheduler-plugins' message for a coscheduling group with fewer pods than `minMember`.
pub fn coscheduling_short(pod: &str, pods: usize, min_member: u32) -> String {
    format!(
        "pre-filter pod {pod} cannot find enough sibling pods, current pods number: {pods}, minMember of group: {min_member}"
    )
}

/// ferrosched's message for a pod naming a group of an API the cluster does not serve: its
/// group can never appear, so it waits until the API is turned on (or the pod is changed).
pub fn api_not_served(key: &PodGroupKey) -> String {
    format!(
        "pod group {:?} cannot be found: this cluster does not serve {} (turn the API on, or remove the pod's group)",
        key.name,
        key.api.resource()
    )
}

pub struct GangScheduling {
    groups: Arc<PodGroupManager>,
}

impl GangScheduling {
    pub fn new(groups: Arc<PodGroupManager>) -> Self {
        GangScheduling { groups }
    }
}

/// Replaces the in-tree factory with one whose plugins read `groups`.
pub fn register(registry: &mut Registry, groups: Arc<PodGroupManager>) {
    registry.register_shared(
        GANG_SCHEDULING,
        Arc::new(move |_| Ok(Arc::new(GangScheduling::new(Arc::clone(&groups))))),
    );
}

/// What may complete a group's quorum: a pod of the group appearing (pending or already
/// bound), the group appearing, or its minCount lowered (GangScheduling's and Coscheduling's).
pub fn group_events() -> Vec<ClusterEvent> {
    vec![
        ClusterEvent::new(EventResource::UnscheduledPod, ActionType::ADD),
        ClusterEvent::new(EventResource::AssignedPod, ActionType::ADD),
        ClusterEvent::new(
            EventResource::PodGroup,
            ActionType::ADD | ActionType::UPDATE,
        ),
    ]
}

/// The PlacementFeasible check of a gang after some of its pods were tried: `Ok(true)` once
/// `scheduled` (placed in this cycle or before) reaches `min_count`, `Ok(false)` while the
/// untried `remaining` pods could still get there, and the reason when they cannot.
pub fn min_count_feasible(
    min_count: u32,
    scheduled: usize,
    remaining: usize,
) -> Result<bool, String> {
    let min = min_count as usize;
    if scheduled + remaining < min {
        return Err(format!(
            "minCount ({min}) cannot be satisfied: {scheduled} scheduled, {remaining} remaining"
        ));
    }
    Ok(scheduled >= min)
}

impl Plugin for GangScheduling {
    fn name(&self) -> &'static str {
        GANG_SCHEDULING
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => pre_enqueue)
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        group_events()
    }
    fn queueing_hint(
        &self,
        pod: &PodInfo,
        _event: &ClusterEvent,
        objects: &EventObjects<'_>,
    ) -> QueueingHint {
        if matches!(objects, EventObjects::None) {
            return QueueingHint::Queue;
        }
        let Some(mine) = pod.pod_group.as_deref() else {
            return QueueingHint::QueueSkip;
        };
        let same_tree = |other: &PodGroupKey| {
            other == mine || pod_group_tree::same_root(&self.groups.read(), other, mine)
        };
        let helps = match objects {
            EventObjects::Pod { new: Some(p), .. } => p.pod_group.as_deref().is_some_and(same_tree),
            EventObjects::PodGroup { old: None, new } => same_tree(&new.key),
            EventObjects::PodGroup {
                old: Some(old),
                new,
            } => {
                same_tree(&new.key)
                    && match (old.policy, new.policy) {
                        (
                            GroupPolicy::Gang { min_count: o },
                            GroupPolicy::Gang { min_count: n },
                        ) => n < o,
                        // Basic -> gang gates more; gang -> basic lets every pod through.
                        (GroupPolicy::Gang { .. }, GroupPolicy::Basic) => true,
                        _ => false,
                    }
            }
            _ => true,
        };
        if helps {
            QueueingHint::Queue
        } else {
            QueueingHint::QueueSkip
        }
    }
}

impl PreEnqueuePlugin for GangScheduling {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        gate(&self.groups, pod)
    }
}

/// The quorum gate GangScheduling and Coscheduling share: a pod of a group waits until the
/// group exists (and its API is served) and has `minCount` pods.
pub fn gate(groups: &PodGroupManager, pod: &PodInfo) -> Status {
    let Some(key) = pod.pod_group.as_deref() else {
        return Status::success();
    };
    let groups = groups.read();
    if !groups.is_served(key.api) {
        return Status::unresolvable(api_not_served(key));
    }
    let Some(group) = groups.get(key) else {
        return Status::unresolvable(match key.api {
            GroupApi::Workload => waiting_for_group(&key.name),
            GroupApi::Coscheduling => COSCHEDULING_GROUP_NOT_FOUND.to_string(),
        });
    };
    // In a tree (CompositePodGroup gate), the whole tree's quorum counts, not the group's.
    match pod_group_tree::root_of(&groups, group) {
        Err(e) => return Status::unresolvable(e.to_string()),
        Ok(Some(root)) if pod_group_tree::ready(&groups, &TreeNode::Composite(root.clone())) => {
            return Status::success();
        }
        Ok(Some(root)) => return Status::unresolvable(pod_group_tree::waiting_for_tree(&root)),
        Ok(None) => {}
    }
    let GroupPolicy::Gang { min_count } = group.policy else {
        return Status::success();
    };
    let all = groups.all_pods_count(key);
    if all >= min_count as usize {
        return Status::success();
    }
    Status::unresolvable(match key.api {
        GroupApi::Workload => WAITING_FOR_MIN_COUNT.to_string(),
        GroupApi::Coscheduling => coscheduling_short(pod.name(), all, min_count),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework::Code;
    use crate::types::pod_group::PodGroupInfo;
    use k8s_openapi::api::core::v1 as k8s;

    fn pod(name: &str, group: &str) -> PodInfo {
        PodInfo::test("ml", name)
            .edit(|p| {
                p.spec.as_mut().unwrap().scheduling_group = Some(k8s::PodSchedulingGroup {
                    pod_group_name: Some(group.to_string()),
                })
            })
            .build()
    }

    fn gang(name: &str, min_count: u32) -> PodGroupInfo {
        PodGroupInfo::new(
            PodGroupKey::new(GroupApi::Workload, "ml", name),
            GroupPolicy::Gang { min_count },
        )
    }

    fn unresolvable(s: &Status, msg: &str) {
        assert_eq!(s.code(), Code::UnschedulableAndUnresolvable, "{s}");
        assert_eq!(s.message(), msg);
    }

    #[test]
    fn a_gang_waits_for_its_group_and_its_quorum() {
        let groups = Arc::new(PodGroupManager::new());
        let pl = GangScheduling::new(Arc::clone(&groups));
        let a = pod("a", "train");
        groups.write().add_pod(&a);

        // No group object yet.
        unresolvable(
            &pl.pre_enqueue(&a),
            "waiting for pod's pod group \"train\" to appear in scheduling queue",
        );
        // The group wants three; one pod exists.
        groups.write().upsert(gang("train", 3));
        unresolvable(&pl.pre_enqueue(&a), WAITING_FOR_MIN_COUNT);
        // A bound member counts toward the quorum as much as a pending one.
        groups.write().add_pod(&pod("b", "train"));
        groups
            .write()
            .add_pod(&PodInfo::clone(&pod("c", "train")).with_node_name("n1"));
        assert!(pl.pre_enqueue(&a).is_success());

        // Pods without a group, and pods of a basic group, pass.
        assert!(
            pl.pre_enqueue(&PodInfo::test("ml", "solo").build())
                .is_success()
        );
        let mut basic = gang("free", 1);
        basic.policy = GroupPolicy::Basic;
        groups.write().upsert(basic);
        assert!(pl.pre_enqueue(&pod("x", "free")).is_success());
    }

    #[test]
    fn without_the_api_the_pod_says_why_it_waits() {
        let groups = Arc::new(PodGroupManager::new());
        groups.write().set_served(GroupApi::Workload, false);
        let pl = GangScheduling::new(Arc::clone(&groups));
        unresolvable(
            &pl.pre_enqueue(&pod("a", "train")),
            "pod group \"train\" cannot be found: this cluster does not serve podgroups.scheduling.k8s.io (turn the API on, or remove the pod's group)",
        );
    }

    #[test]
    fn coscheduling_pods_wait_with_scheduler_plugins_messages() {
        let groups = Arc::new(PodGroupManager::new());
        let pl = GangScheduling::new(Arc::clone(&groups));
        let p = PodInfo::test("ml", "worker-0")
            .label("scheduling.x-k8s.io/pod-group", "tf")
            .build();
        groups.write().add_pod(&p);
        unresolvable(&pl.pre_enqueue(&p), "PodGroup not found");
        groups.write().upsert(PodGroupInfo::new(
            PodGroupKey::new(GroupApi::Coscheduling, "ml", "tf"),
            GroupPolicy::Gang { min_count: 3 },
        ));
        unresolvable(
            &pl.pre_enqueue(&p),
            "pre-filter pod worker-0 cannot find enough sibling pods, current pods number: 1, minMember of group: 3",
        );
    }

    #[test]
    fn the_plain_in_tree_plugin_keeps_every_group_pod_out() {
        let fw_plugin = (crate::plugins::in_tree_factories()
            .iter()
            .find(|(n, _)| *n == GANG_SCHEDULING)
            .expect("registered")
            .1)(None)
        .unwrap();
        let pre = Arc::clone(&fw_plugin).points().pre_enqueue.unwrap();
        assert!(!pre.pre_enqueue(&pod("a", "train")).is_success());
    }

    #[test]
    fn hints_queue_only_for_the_pods_own_group() {
        let pl = GangScheduling::new(Arc::new(PodGroupManager::new()));
        let a = pod("a", "train");
        let event = ClusterEvent::new(EventResource::UnscheduledPod, ActionType::ADD);
        let sibling = pod("b", "train");
        let stranger = pod("z", "other");
        let hint = |objects: EventObjects<'_>| pl.queueing_hint(&a, &event, &objects);
        assert_eq!(
            hint(EventObjects::Pod {
                old: None,
                new: Some(&sibling)
            }),
            QueueingHint::Queue
        );
        assert_eq!(
            hint(EventObjects::Pod {
                old: None,
                new: Some(&stranger)
            }),
            QueueingHint::QueueSkip
        );
        let (g3, g2, other) = (gang("train", 3), gang("train", 2), gang("other", 1));
        assert_eq!(
            hint(EventObjects::PodGroup {
                old: None,
                new: &g3
            }),
            QueueingHint::Queue
        );
        assert_eq!(
            hint(EventObjects::PodGroup {
                old: None,
                new: &other
            }),
            QueueingHint::QueueSkip
        );
        // minCount lowered helps; raised does not.
        assert_eq!(
            hint(EventObjects::PodGroup {
                old: Some(&g3),
                new: &g2
            }),
            QueueingHint::Queue
        );
        assert_eq!(
            hint(EventObjects::PodGroup {
                old: Some(&g2),
                new: &g3
            }),
            QueueingHint::QueueSkip
        );
        // A pod without a group is never moved by this plugin.
        let solo = PodInfo::test("ml", "solo").build();
        let objects = EventObjects::Pod {
            old: None,
            new: Some(&sibling),
        };
        assert_eq!(
            pl.queueing_hint(&solo, &event, &objects),
            QueueingHint::QueueSkip
        );
        // Nothing to judge by: queue, as every hint must.
        assert_eq!(hint(EventObjects::None), QueueingHint::Queue);
    }

    /// With the CompositePodGroup gate on, a pod of any group of the same tree may complete
    /// the tree's quorum; gate off, only the pod's own group counts.
    #[test]
    fn in_a_tree_hints_queue_for_pods_of_sibling_groups() {
        use crate::types::composite_pod_group::{CompositeKey, CompositePodGroupInfo};
        let groups = Arc::new(PodGroupManager::new());
        let pl = GangScheduling::new(Arc::clone(&groups));
        groups.write().upsert_composite(CompositePodGroupInfo::new(
            CompositeKey::new("ml", "job"),
            None,
            Some(2),
        ));
        for name in ["a", "b"] {
            let mut g = gang(name, 1);
            g.parent = Some("job".into());
            groups.write().upsert(g);
        }
        groups.write().upsert(gang("c", 1));
        let event = ClusterEvent::new(EventResource::UnscheduledPod, ActionType::ADD);
        let mine = pod("a0", "a");
        let hint = |other: &PodInfo| {
            let objects = EventObjects::Pod {
                old: None,
                new: Some(other),
            };
            pl.queueing_hint(&mine, &event, &objects)
        };
        assert_eq!(hint(&pod("b0", "b")), QueueingHint::QueueSkip, "gate off");
        groups.write().set_composite_enabled(true);
        assert_eq!(hint(&pod("b0", "b")), QueueingHint::Queue);
        assert_eq!(hint(&pod("c0", "c")), QueueingHint::QueueSkip);
        // And the gate waits for the tree: a has its pod, b has none yet.
        groups.write().add_pod(&mine);
        unresolvable(
            &pl.pre_enqueue(&mine),
            "waiting for composite pod group \"job\" tree to meet quorum",
        );
        groups.write().add_pod(&pod("b0", "b"));
        assert!(pl.pre_enqueue(&mine).is_success());
    }

    #[test]
    fn min_count_is_checked_as_pods_are_tried() {
        assert_eq!(min_count_feasible(3, 0, 3), Ok(false));
        assert_eq!(min_count_feasible(3, 3, 0), Ok(true));
        assert_eq!(min_count_feasible(3, 2, 5), Ok(false));
        assert_eq!(
            min_count_feasible(3, 1, 1),
            Err("minCount (3) cannot be satisfied: 1 scheduled, 1 remaining".to_string())
        );
    }
}
