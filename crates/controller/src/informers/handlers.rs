//! What each informer does with its kind's events: the [`Handler`] per kind (pods and
//! nodes keep compact views, small kinds whole objects, workload kinds only selectors) and
//! the [`State`] method it calls. No watching here (that is `watch`), no API calls.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use scheduler_core::cache::WorkloadEntry;
use scheduler_core::framework::NodeFingerprint;
use scheduler_core::types::PodInfo;

use super::lean::Lean;
use crate::state::{Shared, State};

/// How one kind's add/update/delete events change the state, and what the informer keeps
/// of each object between events.
pub(crate) trait Handler<K>: Send + Sync + 'static {
    /// Kept per object to compare the next event with (and for deletes). Pods and Nodes
    /// keep compact views, not the objects: full objects would dominate the scheduler's
    /// memory (a Pod deserializes to kilobytes; a real Node carries its images list).
    type View: Send + 'static;
    /// Applies an added or changed object; returns what to keep of it. Takes the state
    /// lock itself, so views can be built before it (the scheduling loop waits on it).
    fn apply(&self, shared: &Shared, old: Option<&Self::View>, new: K) -> Self::View;
    /// Applies a delete; `key` is the object's (`namespace/name`, or the name).
    fn delete(&self, shared: &Shared, st: &mut State, key: &str, old: &Self::View);
    /// The view of an object deleted before this informer kept anything of it.
    fn view(&self, obj: K) -> Self::View;
    /// The `event` label of `scheduler_event_handling_duration_seconds` for an add (`old`
    /// is `None`), update or delete (`new` is `None`): upstream's `<Resource><Action>`.
    /// `None`: not timed (upstream has no handler for the kind).
    fn event_label(
        &self,
        kind: &str,
        old: Option<&Self::View>,
        new: Option<&Self::View>,
    ) -> Option<String> {
        let action = match (old, new) {
            (_, None) => "Delete",
            (None, Some(_)) => "Add",
            (Some(_), Some(_)) => "Update",
        };
        Some(format!("{kind}{action}"))
    }
}

/// A handler that keeps whole objects: for the small, rarely changing kinds.
pub(super) struct Fns<K> {
    pub(super) apply: fn(&mut State, Option<&K>, &K),
    pub(super) delete: fn(&mut State, &K),
}

impl<K: Send + Sync + 'static> Handler<K> for Fns<K> {
    type View = K;
    fn apply(&self, shared: &Shared, old: Option<&K>, new: K) -> K {
        (self.apply)(&mut shared.lock(), old, &new);
        new
    }
    fn delete(&self, _: &Shared, st: &mut State, _: &str, old: &K) {
        (self.delete)(st, old)
    }
    fn view(&self, obj: K) -> K {
        obj
    }
}

/// Pods: the informer keeps the PodInfo (shared with the cache or the queue).
pub(super) struct Pods;

impl Handler<Lean<Pod>> for Pods {
    type View = Arc<PodInfo>;
    fn apply(&self, shared: &Shared, old: Option<&Arc<PodInfo>>, new: Lean<Pod>) -> Arc<PodInfo> {
        let info = Arc::new(PodInfo::from_pod(&new.0));
        shared
            .lock()
            .apply_pod(&shared.profiles, old, &new.0, &info);
        info
    }
    fn delete(&self, _: &Shared, st: &mut State, _: &str, old: &Arc<PodInfo>) {
        st.on_pod_delete(old);
    }
    fn view(&self, obj: Lean<Pod>) -> Arc<PodInfo> {
        Arc::new(PodInfo::from_pod(&obj.0))
    }
    /// As upstream's pod handlers: `AssignedPod*` for bound pods (a binding is an add to
    /// the cache), `UnschedulablePod*` for the others.
    fn event_label(
        &self,
        _: &str,
        old: Option<&Arc<PodInfo>>,
        new: Option<&Arc<PodInfo>>,
    ) -> Option<String> {
        let assigned = |p: &Arc<PodInfo>| p.node_name.is_some();
        let (assigned, action) = match (old, new) {
            (_, None) => (old.is_some_and(assigned), "Delete"),
            (Some(o), Some(n)) if assigned(o) == assigned(n) => (assigned(n), "Update"),
            (_, Some(n)) => (assigned(n), "Add"),
        };
        let resource = if assigned {
            "AssignedPod"
        } else {
            "UnschedulablePod"
        };
        Some(format!("{resource}{action}"))
    }
}

/// Nodes: the informer keeps a fingerprint of what update classification compares (the
/// name is the store's key); the cache keeps what scheduling needs.
pub(super) struct Nodes;

impl Handler<Lean<Node>> for Nodes {
    type View = NodeFingerprint;
    fn apply(
        &self,
        shared: &Shared,
        old: Option<&NodeFingerprint>,
        Lean(new): Lean<Node>,
    ) -> NodeFingerprint {
        let fp = NodeFingerprint::of(&new);
        // Heartbeats end here: no lock, no view rebuilt, no snapshot generation bumped.
        if !fp.keeps_view(old) {
            shared.lock().on_node(old, new, &fp);
        }
        fp
    }
    fn delete(&self, _: &Shared, st: &mut State, name: &str, _: &NodeFingerprint) {
        st.on_node_delete(name);
    }
    fn view(&self, Lean(obj): Lean<Node>) -> NodeFingerprint {
        NodeFingerprint::of(&obj)
    }
}

/// Turns one workload kind's objects into cache workload-selector entries.
pub(super) struct Workloads<K> {
    pub(super) entry: fn(&K) -> WorkloadEntry,
}

impl<K: Send + Sync + 'static> Handler<K> for Workloads<K> {
    type View = WorkloadEntry;
    fn apply(&self, shared: &Shared, _old: Option<&WorkloadEntry>, new: K) -> WorkloadEntry {
        let entry = (self.entry)(&new);
        shared.lock().on_workload(entry.clone());
        entry
    }
    fn delete(&self, _: &Shared, st: &mut State, _: &str, old: &WorkloadEntry) {
        st.on_workload_delete(old);
    }
    fn view(&self, obj: K) -> WorkloadEntry {
        (self.entry)(&obj)
    }
    fn event_label(
        &self,
        _: &str,
        _: Option<&WorkloadEntry>,
        _: Option<&WorkloadEntry>,
    ) -> Option<String> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::tests::{default_profile_state, park_rejected};
    use scheduler_core::cache::Snapshot;
    use scheduler_core::queue::QueueKind;
    use scheduler_core::types::PodKey;
    use serde_json::{Value, json};

    /// A node as a kubelet reports it (the informer's lean decode keeps the conditions'
    /// times out, so they are left in here to show they are ignored either way).
    fn kubelet_node(heartbeat: &str, edit: impl FnOnce(&mut Value)) -> Lean<Node> {
        let cond = |t: &str, s: &str| {
            json!({"type": t, "status": s, "lastHeartbeatTime": heartbeat,
                "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "KubeletReady"})
        };
        let mut v = json!({
            "metadata": {"name": "n1", "resourceVersion": heartbeat,
                "labels": {"kubernetes.io/hostname": "n1"}},
            "spec": {},
            "status": {
                "allocatable": {"cpu": "1", "memory": "8Gi", "pods": "110"},
                "conditions": [cond("Ready", "True"), cond("MemoryPressure", "False"),
                    cond("DiskPressure", "False"), cond("PIDPressure", "False")],
                "images": [{"names": ["registry.k8s.io/pause:3.10"], "sizeBytes": 320000}],
            },
        });
        edit(&mut v);
        Lean(serde_json::from_value(v).unwrap())
    }

    /// A pending pod NodeResourcesFit rejects (3 CPUs on a 1-CPU node), parked.
    fn parked_pod(
        shared: &Shared,
        profiles: &scheduler_core::framework::ProfileRegistry,
    ) -> PodKey {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "huge", "namespace": "default", "uid": "u1"},
            "spec": {"containers": [{"name": "c", "image": "i",
                "resources": {"requests": {"cpu": "3"}}}]},
        }))
        .unwrap();
        let mut st = shared.lock();
        st.on_pod(profiles, None, &pod);
        park_rejected(&mut st, profiles, "NodeResourcesFit");
        PodKey::of(&pod)
    }

    /// A heartbeat (new condition times and resourceVersion, nothing else) leaves the
    /// cache's node entry (the same `Arc`, the same generation), the snapshot and the
    /// queue exactly as they were.
    #[test]
    fn a_heartbeat_touches_neither_cache_nor_snapshot_nor_queue() {
        let (shared, profiles, _clock) = default_profile_state();
        let first = kubelet_node("2026-01-01T00:00:00Z", |_| {});
        let mut view = Nodes.apply(&shared, None, first);
        let key = parked_pod(&shared, &profiles);
        let mut snapshot = Snapshot::new();
        let (entry, generation) = {
            let st = shared.lock();
            st.cache.update_snapshot(&mut snapshot);
            let n = st.cache.node_info("n1").unwrap();
            (Arc::clone(n), n.generation)
        };
        for t in ["2026-01-01T00:00:10Z", "2026-01-01T00:00:20Z"] {
            view = Nodes.apply(&shared, Some(&view), kubelet_node(t, |_| {}));
        }
        let st = shared.lock();
        let now = st.cache.node_info("n1").unwrap();
        assert!(Arc::ptr_eq(now, &entry), "the node's view was rebuilt");
        assert_eq!(now.generation, generation);
        let update = st.cache.update_snapshot(&mut snapshot);
        assert_eq!(update.changed_nodes, 0);
        assert_eq!(st.queue.queue_of(&key), Some(QueueKind::Unschedulable));
    }

    /// Every change the scheduler reads still lands in the cache (and bumps the node's
    /// generation, so the next snapshot copies it), heartbeat or not.
    #[test]
    fn real_node_changes_still_land() {
        type Edit = fn(&mut Value);
        type Landed = fn(&scheduler_core::types::NodeInfo) -> bool;
        let changes: [(&str, Edit, Landed); 6] = [
            (
                "allocatable",
                |v| v["status"]["allocatable"]["cpu"] = json!("8"),
                |n| n.allocatable.milli_cpu == 8000,
            ),
            (
                "taint",
                |v| {
                    v["spec"]["taints"] = json!([{"key": "k", "effect": "NoSchedule"}]);
                },
                |n| n.taints.len() == 1,
            ),
            (
                "label",
                |v| v["metadata"]["labels"]["pool"] = json!("gpu"),
                |n| n.labels.get("pool").map(String::as_str) == Some("gpu"),
            ),
            (
                "unschedulable",
                |v| v["spec"]["unschedulable"] = json!(true),
                |n| n.unschedulable,
            ),
            (
                "Ready condition status",
                |v| v["status"]["conditions"][0]["status"] = json!("False"),
                |_| true,
            ),
            (
                "images",
                |v| {
                    v["status"]["images"][0]["names"] = json!(["registry.k8s.io/pause:3.11"]);
                },
                |n| n.images.get("registry.k8s.io/pause:3.11").is_some(),
            ),
        ];
        for (what, edit, landed) in changes {
            let (shared, _profiles, _clock) = default_profile_state();
            let view = Nodes.apply(&shared, None, kubelet_node("2026-01-01T00:00:00Z", |_| {}));
            let before = shared.lock().cache.node_info("n1").unwrap().generation;
            Nodes.apply(
                &shared,
                Some(&view),
                kubelet_node("2026-01-01T00:00:10Z", edit),
            );
            let st = shared.lock();
            let n = st.cache.node_info("n1").unwrap();
            assert!(n.generation > before, "{what}: not applied");
            assert!(landed(n), "{what}: not in the cache's view");
        }
    }

    /// A change the pending pod can use (more CPU) still moves it out of the unschedulable
    /// pods, a heartbeat before it did not.
    #[test]
    fn an_allocatable_change_after_heartbeats_moves_the_pod() {
        let (shared, profiles, _clock) = default_profile_state();
        let mut view = Nodes.apply(&shared, None, kubelet_node("2026-01-01T00:00:00Z", |_| {}));
        let key = parked_pod(&shared, &profiles);
        view = Nodes.apply(
            &shared,
            Some(&view),
            kubelet_node("2026-01-01T00:00:10Z", |_| {}),
        );
        assert_eq!(
            shared.lock().queue.queue_of(&key),
            Some(QueueKind::Unschedulable)
        );
        let bigger = |v: &mut Value| v["status"]["allocatable"]["cpu"] = json!("8");
        Nodes.apply(
            &shared,
            Some(&view),
            kubelet_node("2026-01-01T00:00:20Z", bigger),
        );
        assert_ne!(
            shared.lock().queue.queue_of(&key),
            Some(QueueKind::Unschedulable)
        );
    }
}
