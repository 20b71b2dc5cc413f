//! The pod groups the scheduler knows and their members (upstream:
//! `backend/podgroupmanager`): fed by the PodGroup and pod informers (or a dump), read by
//! GangScheduling's PreEnqueue and by the pod group cycle.
//!
//! ```text
//!   PodGroup objects ──► groups: PodGroupKey -> Arc<PodGroupInfo>
//!   pods naming a group ──► members: PodGroupKey -> { PodKey -> assigned? }
//! ```
//!
//! Members are tracked whether or not their group exists yet, so a group created after its
//! pods is complete at once. Shared as `Arc<PodGroupManager>` with the plugin (the queue runs
//! PreEnqueue without a cycle), hence the lock inside; writers are the informer handlers and
//! `simulate`, each holding the scheduler's state lock anyway.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::types::composite_pod_group::{CompositeKey, CompositePodGroupInfo};
use crate::types::pod_group::{GroupApi, PodGroupInfo, PodGroupKey};
use crate::types::{PodInfo, PodKey};

#[derive(Default)]
pub struct PodGroupManager {
    inner: RwLock<PodGroups>,
}

impl PodGroupManager {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn read(&self) -> RwLockReadGuard<'_, PodGroups> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn write(&self) -> RwLockWriteGuard<'_, PodGroups> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// The groups and their members. Every API counts as served until told otherwise (a dump
/// either holds a group or does not; the controller asks discovery).
#[derive(Default)]
pub struct PodGroups {
    not_served: BTreeSet<GroupApi>,
    groups: HashMap<PodGroupKey, Arc<PodGroupInfo>>,
    members: HashMap<PodGroupKey, BTreeMap<PodKey, bool>>,
    /// Coscheduling groups whose status may be due for a change (the group or one of its
    /// pods changed), once someone keeps their status ([`Self::track_status`]).
    status_dirty: Option<BTreeSet<PodGroupKey>>,
    /// The CompositePodGroup gate: off, parents are ignored and every group is its own root
    /// (see `pod_group_tree`).
    composite_enabled: bool,
    composites: HashMap<CompositeKey, Arc<CompositePodGroupInfo>>,
}

impl PodGroups {
    /// Whether the cluster serves `api` (discovery). A pod naming a group of an API the
    /// cluster does not serve can never see its group, and says so.
    pub fn set_served(&mut self, api: GroupApi, served: bool) {
        if served {
            self.not_served.remove(&api);
        } else {
            self.not_served.insert(api);
        }
    }

    pub fn is_served(&self, api: GroupApi) -> bool {
        !self.not_served.contains(&api)
    }

    /// From now on, note which Coscheduling groups changed or saw a pod change, for
    /// [`Self::take_status_dirty`] (`ferrosched run`'s status writer).
    pub fn track_status(&mut self) {
        self.status_dirty.get_or_insert_with(BTreeSet::new);
    }

    /// The Coscheduling groups noted since the last call, in order.
    pub fn take_status_dirty(&mut self) -> Vec<PodGroupKey> {
        self.status_dirty
            .as_mut()
            .map(|d| std::mem::take(d).into_iter().collect())
            .unwrap_or_default()
    }

    /// Notes `key` again (a status write failed and is to be retried).
    pub fn mark_status_dirty(&mut self, key: &PodGroupKey) {
        if key.api == GroupApi::Coscheduling
            && let Some(d) = &mut self.status_dirty
            && !d.contains(key)
        {
            d.insert(key.clone());
        }
    }

    /// Adds or replaces a group; returns the previous view.
    pub fn upsert(&mut self, info: PodGroupInfo) -> Option<Arc<PodGroupInfo>> {
        self.mark_status_dirty(&info.key);
        self.groups.insert(info.key.clone(), Arc::new(info))
    }

    pub fn remove(&mut self, key: &PodGroupKey) -> Option<Arc<PodGroupInfo>> {
        self.groups.remove(key)
    }

    /// Replaces every group of `api` (after a full list).
    pub fn replace_all(&mut self, api: GroupApi, infos: impl IntoIterator<Item = PodGroupInfo>) {
        self.groups.retain(|k, _| k.api != api);
        for i in infos {
            self.upsert(i);
        }
    }

    pub fn get(&self, key: &PodGroupKey) -> Option<&Arc<PodGroupInfo>> {
        self.groups.get(key)
    }

    /// Records a pod of a group (added, updated or bound); pods without a group are ignored.
    pub fn add_pod(&mut self, pod: &PodInfo) {
        if let Some(key) = pod.pod_group.as_deref() {
            self.mark_status_dirty(key);
            self.members
                .entry(key.clone())
                .or_default()
                .insert(pod.key().clone(), pod.node_name.is_some());
        }
    }

    /// Forgets a pod (deleted, or finished).
    pub fn remove_pod(&mut self, pod: &PodInfo) {
        let Some(key) = pod.pod_group.as_deref() else {
            return;
        };
        self.mark_status_dirty(key);
        if let Some(m) = self.members.get_mut(key) {
            m.remove(pod.key());
            if m.is_empty() {
                self.members.remove(key);
            }
        }
    }

    /// Turns the CompositePodGroup gate on or off (off by default, as upstream's alpha).
    pub fn set_composite_enabled(&mut self, on: bool) {
        self.composite_enabled = on;
    }

    pub fn composite_enabled(&self) -> bool {
        self.composite_enabled
    }

    pub fn upsert_composite(
        &mut self,
        info: CompositePodGroupInfo,
    ) -> Option<Arc<CompositePodGroupInfo>> {
        self.composites.insert(info.key.clone(), Arc::new(info))
    }

    pub fn remove_composite(&mut self, key: &CompositeKey) -> Option<Arc<CompositePodGroupInfo>> {
        self.composites.remove(key)
    }

    /// Replaces every CompositePodGroup (after a full list).
    pub fn replace_all_composites(
        &mut self,
        infos: impl IntoIterator<Item = CompositePodGroupInfo>,
    ) {
        self.composites.clear();
        for i in infos {
            self.upsert_composite(i);
        }
    }

    pub fn composite(&self, key: &CompositeKey) -> Option<&Arc<CompositePodGroupInfo>> {
        self.composites.get(key)
    }

    pub fn groups(&self) -> impl Iterator<Item = &Arc<PodGroupInfo>> {
        self.groups.values()
    }

    pub fn composites(&self) -> impl Iterator<Item = &Arc<CompositePodGroupInfo>> {
        self.composites.values()
    }

    /// Every pod of the group the scheduler knows, bound or not (upstream `AllPodsCount`).
    pub fn all_pods_count(&self, key: &PodGroupKey) -> usize {
        self.members.get(key).map_or(0, BTreeMap::len)
    }

    /// The group's pods, each with whether it is bound to a node.
    pub fn members(&self, key: &PodGroupKey) -> impl Iterator<Item = (&PodKey, bool)> {
        self.members
            .get(key)
            .into_iter()
            .flat_map(|m| m.iter().map(|(k, a)| (k, *a)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::pod_group::GroupPolicy;

    fn member(name: &str, group: &str, node: Option<&str>) -> PodInfo {
        let mut b = PodInfo::test("ml", name).edit(|p| {
            p.spec.as_mut().unwrap().scheduling_group =
                Some(k8s_openapi::api::core::v1::PodSchedulingGroup {
                    pod_group_name: Some(group.to_string()),
                })
        });
        if let Some(n) = node {
            b = b.node(n);
        }
        b.build()
    }

    #[test]
    fn members_are_counted_before_and_after_their_group_exists() {
        let key = PodGroupKey::new(GroupApi::Workload, "ml", "train");
        let mut g = PodGroups::default();
        g.add_pod(&member("a", "train", None));
        g.add_pod(&member("b", "train", Some("n1")));
        g.add_pod(&member("c", "other", None));
        g.add_pod(&PodInfo::test("ml", "loner").build());
        assert_eq!(g.all_pods_count(&key), 2);
        assert!(g.get(&key).is_none());

        g.upsert(PodGroupInfo::new(
            key.clone(),
            GroupPolicy::Gang { min_count: 2 },
        ));
        assert_eq!(g.get(&key).unwrap().min_count(), 2);
        let bound: Vec<_> = g.members(&key).filter(|(_, a)| *a).collect();
        assert_eq!(bound.len(), 1);

        // Re-adding a pod (an update) does not count it twice; removing forgets it.
        g.add_pod(&member("a", "train", Some("n2")));
        assert_eq!(g.all_pods_count(&key), 2);
        g.remove_pod(&member("a", "train", None));
        g.remove_pod(&member("b", "train", None));
        assert_eq!(g.all_pods_count(&key), 0);
        assert!(
            !g.members.contains_key(&key),
            "empty member sets are dropped"
        );

        g.replace_all(GroupApi::Workload, []);
        assert!(g.get(&key).is_none());
    }

    #[test]
    fn coscheduling_groups_are_noted_for_their_status_once_tracked() {
        let mut g = PodGroups::default();
        let tf = PodGroupKey::new(GroupApi::Coscheduling, "ml", "tf");
        let labelled = |name: &str| {
            PodInfo::test("ml", name)
                .label("scheduling.x-k8s.io/pod-group", "tf")
                .build()
        };
        g.add_pod(&labelled("a"));
        assert!(
            g.take_status_dirty().is_empty(),
            "not tracked: nothing noted"
        );
        g.track_status();
        g.add_pod(&labelled("a"));
        g.add_pod(&member("w", "train", None));
        assert_eq!(
            g.take_status_dirty(),
            std::slice::from_ref(&tf),
            "Workload API groups are not"
        );
        assert!(g.take_status_dirty().is_empty());
        g.remove_pod(&labelled("a"));
        g.upsert(PodGroupInfo::new(
            tf.clone(),
            GroupPolicy::Gang { min_count: 1 },
        ));
        assert_eq!(g.take_status_dirty(), [tf]);
    }

    #[test]
    fn apis_are_served_until_told_otherwise() {
        let mut g = PodGroups::default();
        assert!(g.is_served(GroupApi::Workload));
        g.set_served(GroupApi::Workload, false);
        assert!(!g.is_served(GroupApi::Workload));
        assert!(g.is_served(GroupApi::Coscheduling));
        g.set_served(GroupApi::Workload, true);
        assert!(g.is_served(GroupApi::Workload));
    }
}
