//! What each informer does with its kind's events: the [`Handler`] per kind (pods and
//! nodes keep compact views, small kinds whole objects, workload kinds only selectors) and
//! the [`State`] method it calls. No watching here (that is `watch`), no API calls.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
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
    fn delete(&self, shared: &Shared, st: &mut State, old: &Self::View);
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
    fn delete(&self, _: &Shared, st: &mut State, old: &K) {
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
    fn delete(&self, _: &Shared, st: &mut State, old: &Arc<PodInfo>) {
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

/// Nodes: the informer keeps the name and a fingerprint of what update classification
/// compares; the cache keeps what scheduling needs.
pub(super) struct Nodes;

impl Handler<Lean<Node>> for Nodes {
    type View = (String, NodeFingerprint);
    fn apply(
        &self,
        shared: &Shared,
        old: Option<&(String, NodeFingerprint)>,
        Lean(new): Lean<Node>,
    ) -> (String, NodeFingerprint) {
        let fp = NodeFingerprint::of(&new);
        let name = new.name_any();
        shared.lock().on_node(old.map(|(_, f)| f), new, &fp);
        (name, fp)
    }
    fn delete(&self, _: &Shared, st: &mut State, old: &(String, NodeFingerprint)) {
        st.on_node_delete(&old.0);
    }
    fn view(&self, Lean(obj): Lean<Node>) -> (String, NodeFingerprint) {
        (obj.name_any(), NodeFingerprint::of(&obj))
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
    fn delete(&self, _: &Shared, st: &mut State, old: &WorkloadEntry) {
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
