//! PodGroups: one informer per API (the Workload API's served version, chosen by discovery,
//! and scheduler-plugins' `scheduling.x-k8s.io/v1alpha1`), each keeping only the view
//! GangScheduling and the pod group cycle read (`types::pod_group::PodGroupInfo`).
//!
//! An API the server does not serve is still given its informer (of its newest version):
//! the first list answers 404, the optional informer counts as synced with no objects, and
//! the informer count stays fixed. Discovery has already marked the API not served, so
//! pods naming such groups wait and say why.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use scheduler_core::framework::{ActionType, ClusterEvent, EventObjects, EventResource};
use scheduler_core::types::composite_pod_group::{CompositeKey, CompositePodGroupInfo};
use scheduler_core::types::pod_group::{GroupApi, PodGroupInfo};
use serde::Deserialize;

use super::handlers::Handler;
use super::watch::Presence;
use super::{fns, spawn};
use crate::client::discovery::PodGroupVersions;
use crate::state::{Shared, State};

/// A PodGroup of one API version as the informer decodes it: metadata, spec and status (the
/// scheduler reads back the condition it writes).
macro_rules! pod_group_kind {
    ($ty:ident, $group:literal, $version:literal, $api:expr) => {
        #[derive(Clone, Debug, Deserialize)]
        pub(crate) struct $ty {
            metadata: ObjectMeta,
            #[serde(default)]
            spec: serde_json::Value,
            #[serde(default)]
            status: serde_json::Value,
        }

        impl k8s_openapi::Resource for $ty {
            const API_VERSION: &'static str = concat!($group, "/", $version);
            const GROUP: &'static str = $group;
            const KIND: &'static str = "PodGroup";
            const VERSION: &'static str = $version;
            const URL_PATH_SEGMENT: &'static str = "podgroups";
            type Scope = k8s_openapi::NamespaceResourceScope;
        }

        impl k8s_openapi::Metadata for $ty {
            type Ty = ObjectMeta;
            fn metadata(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn metadata_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }

        impl PodGroupObject for $ty {
            const API: GroupApi = $api;
            fn parts(&self) -> (&ObjectMeta, &serde_json::Value, &serde_json::Value) {
                (&self.metadata, &self.spec, &self.status)
            }
        }
    };
}

pod_group_kind!(
    WorkloadV1beta1,
    "scheduling.k8s.io",
    "v1beta1",
    GroupApi::Workload
);
pod_group_kind!(
    WorkloadV1alpha2,
    "scheduling.k8s.io",
    "v1alpha2",
    GroupApi::Workload
);
pod_group_kind!(
    CoschedulingV1alpha1,
    "scheduling.x-k8s.io",
    "v1alpha1",
    GroupApi::Coscheduling
);

pub(crate) trait PodGroupObject: k8s_openapi::Resource + Send + Sync + 'static {
    const API: GroupApi;
    fn parts(&self) -> (&ObjectMeta, &serde_json::Value, &serde_json::Value);

    /// The view, or why the object cannot be read (it is then treated as absent, so its
    /// pods wait rather than run as if it had no quorum).
    fn view(&self) -> Result<PodGroupInfo, String> {
        let (metadata, spec, status) = self.parts();
        // creationTimestamp orders Coscheduling's groups in the queue.
        let value = serde_json::json!({
            "apiVersion": Self::API_VERSION,
            "metadata": {"name": metadata.name, "namespace": metadata.namespace,
                         "uid": metadata.uid, "generation": metadata.generation,
                         "creationTimestamp": metadata.creation_timestamp},
            "spec": spec,
            "status": status,
        });
        PodGroupInfo::from_json(Self::API, &value)
    }
}

/// Keeps `Option<Arc<PodGroupInfo>>` per object: `None` for an object whose view could not
/// be built.
pub(super) struct PodGroups;

impl<K: PodGroupObject> Handler<K> for PodGroups {
    type View = Option<Arc<PodGroupInfo>>;
    fn apply(&self, shared: &Shared, old: Option<&Self::View>, new: K) -> Self::View {
        let view = checked_view(&new);
        let mut st = shared.lock();
        let old = old.and_then(Option::as_ref);
        match &view {
            Some(v) => st.on_pod_group(old.map(|o| &**o), v),
            None => {
                if let Some(o) = old {
                    st.on_pod_group_delete(o);
                }
            }
        }
        view
    }
    fn delete(&self, _: &Shared, st: &mut State, _: &str, old: &Self::View) {
        if let Some(o) = old {
            st.on_pod_group_delete(o);
        }
    }
    fn view(&self, obj: K) -> Self::View {
        checked_view(&obj)
    }
}

fn checked_view<K: PodGroupObject>(obj: &K) -> Option<Arc<PodGroupInfo>> {
    match obj.view() {
        Ok(v) => Some(Arc::new(v)),
        Err(e) => {
            let (m, _, _) = obj.parts();
            tracing::warn!(
                podgroup = %format!("{}/{}", m.namespace.as_deref().unwrap_or(""), m.name.as_deref().unwrap_or("")),
                api = K::API.resource(),
                error = %e,
                "PodGroup cannot be read; its pods wait as if it did not exist"
            );
            None
        }
    }
}

impl State {
    /// A PodGroup added or changed: GangScheduling's hints decide which waiting pods move.
    pub(crate) fn on_pod_group(&mut self, old: Option<&PodGroupInfo>, new: &PodGroupInfo) {
        self.groups.write().upsert(new.clone());
        // Before the hints run: DynamicResources resolves the group's claims from the cache.
        self.cache.dra_mut().update_pod_group(new);
        let action = if old.is_some() {
            ActionType::UPDATE
        } else {
            ActionType::ADD
        };
        let objects = EventObjects::PodGroup { old, new };
        let event = ClusterEvent::new(EventResource::PodGroup, action);
        self.queue.move_all_with_objects(event, &objects, None);
    }

    /// A PodGroup deleted: its pods no longer pass PreEnqueue (upstream registers no event
    /// for it; pods already queued are held back when popped).
    pub(crate) fn on_pod_group_delete(&mut self, old: &PodGroupInfo) {
        self.groups.write().remove(&old.key);
        self.cache.dra_mut().remove_pod_group(old);
    }
}

/// A CompositePodGroup (`scheduling.k8s.io/v1alpha3`, the only version that has it).
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct CompositeV1alpha3 {
    metadata: ObjectMeta,
    #[serde(default)]
    spec: serde_json::Value,
}

impl k8s_openapi::Resource for CompositeV1alpha3 {
    const API_VERSION: &'static str = "scheduling.k8s.io/v1alpha3";
    const GROUP: &'static str = "scheduling.k8s.io";
    const KIND: &'static str = "CompositePodGroup";
    const VERSION: &'static str = "v1alpha3";
    const URL_PATH_SEGMENT: &'static str = "compositepodgroups";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for CompositeV1alpha3 {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl CompositeV1alpha3 {
    fn view(&self) -> Option<CompositePodGroupInfo> {
        let m = &self.metadata;
        let value = serde_json::json!({
            "metadata": {"name": m.name, "namespace": m.namespace, "uid": m.uid,
                         "creationTimestamp": m.creation_timestamp},
            "spec": self.spec,
        });
        CompositePodGroupInfo::from_json(&value)
            .inspect_err(|e| {
                tracing::warn!(
                    compositepodgroup = %format!("{}/{}", m.namespace.as_deref().unwrap_or(""), m.name.as_deref().unwrap_or("")),
                    error = %e,
                    "CompositePodGroup cannot be read; the pods of its tree wait as if it did not exist"
                )
            })
            .ok()
    }
}

impl State {
    /// A CompositePodGroup added or changed: a tree may have its quorum now (upstream
    /// registers CompositePodGroup/Add; every gang's pods are asked).
    pub(crate) fn on_composite_pod_group(
        &mut self,
        _old: Option<&CompositeV1alpha3>,
        new: &CompositeV1alpha3,
    ) {
        let Some(view) = new.view() else {
            return self.on_composite_pod_group_delete(new);
        };
        self.groups.write().upsert_composite(view);
        self.fire(EventResource::PodGroup, ActionType::ADD);
    }

    /// A CompositePodGroup deleted: the pods of its tree no longer pass PreEnqueue.
    pub(crate) fn on_composite_pod_group_delete(&mut self, old: &CompositeV1alpha3) {
        let m = &old.metadata;
        let key = CompositeKey::new(
            m.namespace.as_deref().unwrap_or_default(),
            m.name.as_deref().unwrap_or_default(),
        );
        self.groups.write().remove_composite(&key);
    }
}

/// The PodGroup informers: the Workload API's served version (or `v1beta1`, which answers
/// 404, when none is), scheduler-plugins' CRD, and CompositePodGroups when their gate is on
/// (off, a stand-in that counts as synced at once, so the informer count stays fixed).
pub(super) fn spawn_pod_groups(
    client: &Client,
    shared: &Arc<Shared>,
    versions: &PodGroupVersions,
) -> Vec<tokio::task::JoinHandle<()>> {
    let opt = Presence::Optional;
    let workload = match versions.workload {
        Some("v1alpha2") => spawn::<WorkloadV1alpha2, _>(client, shared, opt, PodGroups),
        _ => spawn::<WorkloadV1beta1, _>(client, shared, opt, PodGroups),
    };
    let composite_gate = shared.lock().groups.read().composite_enabled();
    let composite = if composite_gate {
        spawn(
            client,
            shared,
            opt,
            fns::<CompositeV1alpha3>(
                State::on_composite_pod_group,
                State::on_composite_pod_group_delete,
            ),
        )
    } else {
        let shared = Arc::clone(shared);
        tokio::spawn(async move {
            shared.lock().synced += 1;
            shared.notify();
        })
    };
    vec![
        workload,
        spawn::<CoschedulingV1alpha1, _>(client, shared, opt, PodGroups),
        composite,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use scheduler_core::plugins::gang_scheduling::WAITING_FOR_MIN_COUNT;
    use scheduler_core::queue::QueueKind;
    use scheduler_core::types::PodKey;
    use serde_json::json;

    use crate::state::tests::default_profile_state;

    fn member(name: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ml", "uid": name},
            "spec": {"schedulingGroup": {"podGroupName": "train"},
                     "containers": [{"name": "c"}]}
        }))
        .unwrap()
    }

    fn group(min_count: i32) -> WorkloadV1beta1 {
        serde_json::from_value(json!({
            "metadata": {"name": "train", "namespace": "ml", "uid": "g"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}
        }))
        .unwrap()
    }

    /// The gang's pods wait for their group, then for their quorum, and are let into the
    /// active queue when the last member arrives, or when minCount is lowered.
    #[test]
    fn group_and_member_events_move_a_gang_into_the_active_queue() {
        let (shared, profiles, _clock) = default_profile_state();
        let mut st = shared.lock();
        let (a, b) = (member("a"), member("b"));
        st.on_pod(&profiles, None, &a);
        let key_a = PodKey::new("ml", "a");
        assert_eq!(st.queue.queue_of(&key_a), Some(QueueKind::Gated));

        st.on_pod_group(None, &group(3).view().unwrap());
        assert_eq!(st.queue.queue_of(&key_a), Some(QueueKind::Gated));
        st.on_pod(&profiles, None, &b);
        assert_eq!(st.queue.queue_of(&key_a), Some(QueueKind::Gated));
        assert_eq!(
            st.queue.queue_of(&PodKey::new("ml", "b")),
            Some(QueueKind::Gated)
        );
        let gated = st.queue.get(&key_a).unwrap();
        assert_eq!(gated.gating_plugin, Some("GangScheduling"));
        let _ = WAITING_FOR_MIN_COUNT;

        // minCount lowered to 2: both pods have their quorum.
        let (g3, g2) = (group(3).view().unwrap(), group(2).view().unwrap());
        st.on_pod_group(Some(&g3), &g2);
        assert_eq!(st.queue.queue_of(&key_a), Some(QueueKind::Active));
        assert_eq!(
            st.queue.queue_of(&PodKey::new("ml", "b")),
            Some(QueueKind::Active)
        );

        // With minCount 3 again, the third member finds its quorum at once.
        st.on_pod_group(Some(&g2), &g3);
        let c = member("c");
        st.on_pod(&profiles, None, &c);
        assert_eq!(
            st.queue.queue_of(&PodKey::new("ml", "c")),
            Some(QueueKind::Active)
        );

        // Deleting members forgets them: the group's count is back to what is left.
        let info_c = scheduler_core::types::PodInfo::from_pod(&c);
        st.on_pod_delete(&info_c);
        assert_eq!(st.groups.read().all_pods_count(&g3.key), 2);
    }

    #[test]
    fn an_unreadable_group_counts_as_absent() {
        let bad: WorkloadV1beta1 = serde_json::from_value(json!({
            "metadata": {"name": "train", "namespace": "ml"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 0}}}
        }))
        .unwrap();
        assert!(checked_view(&bad).is_none());
    }

    /// The view carries what the object says beyond its spec: the version listed and the
    /// creation time Coscheduling orders groups by.
    #[test]
    fn the_view_keeps_the_api_version_and_creation_time() {
        let g: CoschedulingV1alpha1 = serde_json::from_value(json!({
            "metadata": {"name": "tf", "namespace": "ml",
                         "creationTimestamp": "2026-01-02T03:04:05Z"},
            "spec": {"minMember": 2}
        }))
        .unwrap();
        let v = g.view().unwrap();
        assert_eq!(v.api_version, "scheduling.x-k8s.io/v1alpha1");
        assert_eq!(v.creation_timestamp, Some(1_767_323_045_000_000_000));
    }

    /// The view reads the group's claims and the claims kube-controller-manager made for
    /// them (DRAWorkloadResourceClaims), in either Workload API version.
    #[test]
    fn the_view_keeps_the_group_claims_and_their_statuses() {
        let obj = json!({
            "metadata": {"name": "train", "namespace": "ml", "uid": "g"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}},
                     "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "gpu"}]},
            "status": {"resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": "train-gpus-x"}]}
        });
        let beta: WorkloadV1beta1 = serde_json::from_value(obj.clone()).unwrap();
        let alpha: WorkloadV1alpha2 = serde_json::from_value(obj).unwrap();
        for v in [beta.view().unwrap(), alpha.view().unwrap()] {
            assert_eq!(v.resource_claims.len(), 1);
            assert_eq!(
                v.claim_statuses.get("gpus"),
                Some(&Some("train-gpus-x".to_string()))
            );
        }
    }
}
