//! Informers: one `kube::runtime::watcher` per kind, each keeping a view of the last object
//! seen per key ([`Handler::View`]: compact for pods and nodes), feeding
//! [`crate::state::State`].
//!
//! A (re)list arrives as `Init`, `InitApply`..., `InitDone`. Listed objects are applied as
//! they arrive; at `InitDone` every kept object the list no longer has is deleted, so
//! deletions missed while the watch was down (expired resourceVersion) are not lost. The
//! watcher itself relists on `410 Gone` and retries with backoff on errors.
//!
//! Optional kinds (CSIDriver, CSIStorageCapacity) tolerate a server that does not serve
//! them: a 404 on the first list is logged once, the informer counts as synced with no
//! objects, and it stops, so readiness does not wait for an API that will never answer.

use std::collections::{HashMap, HashSet};
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service,
};
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{
    CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment,
};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use scheduler_core::cache::{WorkloadEntry, workloads};
use scheduler_core::framework::NodeFingerprint;
use scheduler_core::types::PodInfo;
use serde::de::DeserializeOwned;

use crate::state::{Shared, State};

/// How many informers [`spawn_all`] starts; the scheduler waits for all of them to sync.
pub(crate) const INFORMER_COUNT: usize = 12 + WORKLOAD_INFORMER_COUNT;

/// How one kind's add/update/delete events change the state, and what the informer keeps
/// of each object between events.
pub(crate) trait Handler<K>: Send + Sync + 'static {
    /// Kept per object to compare the next event with (and for deletes). Pods and Nodes
    /// keep compact views, not the objects: full objects would dominate the scheduler's
    /// memory (a Pod deserializes to kilobytes; a real Node carries its images list).
    type View: Send + 'static;
    /// Applies an added or changed object; returns what to keep of it.
    fn apply(
        &self,
        shared: &Shared,
        st: &mut State,
        old: Option<&Self::View>,
        new: K,
    ) -> Self::View;
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

/// Observes one handled event (from `start`, the wait for the state lock included).
fn observe<K, H: Handler<K>>(
    shared: &Shared,
    handler: &H,
    kind: &str,
    start: Instant,
    old: Option<&H::View>,
    new: Option<&H::View>,
) {
    if let Some(event) = handler.event_label(kind, old, new) {
        shared.metrics.event_handled(event, start.elapsed());
    }
}

/// A handler that keeps whole objects: for the small, rarely changing kinds.
struct Fns<K> {
    apply: fn(&mut State, Option<&K>, &K),
    delete: fn(&mut State, &K),
}

impl<K: Send + Sync + 'static> Handler<K> for Fns<K> {
    type View = K;
    fn apply(&self, _: &Shared, st: &mut State, old: Option<&K>, new: K) -> K {
        (self.apply)(st, old, &new);
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
struct Pods;

impl Handler<Pod> for Pods {
    type View = Arc<PodInfo>;
    fn apply(
        &self,
        shared: &Shared,
        st: &mut State,
        old: Option<&Arc<PodInfo>>,
        new: Pod,
    ) -> Arc<PodInfo> {
        st.on_pod(&shared.profiles, old, &new)
    }
    fn delete(&self, _: &Shared, st: &mut State, old: &Arc<PodInfo>) {
        st.on_pod_delete(old.key());
    }
    fn view(&self, obj: Pod) -> Arc<PodInfo> {
        Arc::new(PodInfo::from_pod(&obj))
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
struct Nodes;

impl Handler<Node> for Nodes {
    type View = (String, NodeFingerprint);
    fn apply(
        &self,
        _: &Shared,
        st: &mut State,
        old: Option<&(String, NodeFingerprint)>,
        new: Node,
    ) -> (String, NodeFingerprint) {
        let fp = NodeFingerprint::of(&new);
        st.on_node(old.map(|(_, f)| f), &new, &fp);
        (new.name_any(), fp)
    }
    fn delete(&self, _: &Shared, st: &mut State, old: &(String, NodeFingerprint)) {
        st.on_node_delete(&old.0);
    }
    fn view(&self, obj: Node) -> (String, NodeFingerprint) {
        (obj.name_any(), NodeFingerprint::of(&obj))
    }
}

fn key_of<K: Resource>(o: &K) -> String {
    match o.meta().namespace.as_deref() {
        Some(ns) => format!("{ns}/{}", o.name_any()),
        None => o.name_any(),
    }
}

/// Like upstream's pod informer: terminal pods are not watched at all (a pod that turns
/// terminal arrives as a delete).
pub(crate) const POD_FIELD_SELECTOR: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// Whether a kind must be served, or may be missing from the server (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Presence {
    Required,
    Optional,
}

/// The server does not serve the kind at all (as opposed to a transient failure).
fn is_missing_api(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s)) => s.is_not_found(),
        _ => false,
    }
}

/// Runs one informer until the task is aborted.
pub(crate) async fn run_informer<K, H>(
    api: Api<K>,
    config: watcher::Config,
    shared: Arc<Shared>,
    handler: H,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    H: Handler<K>,
    K::DynamicType: Default,
{
    run_informer_with(api, config, Presence::Required, shared, handler).await
}

/// [`run_informer`] for a kind that may be [`Presence::Optional`].
pub(crate) async fn run_informer_with<K, H>(
    api: Api<K>,
    config: watcher::Config,
    presence: Presence,
    shared: Arc<Shared>,
    handler: H,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    H: Handler<K>,
    K::DynamicType: Default,
{
    let kind = K::kind(&Default::default()).to_string();
    let mut store: HashMap<String, H::View> = HashMap::new();
    // Keys seen by the (re)list in progress. Listed objects are applied as they arrive;
    // at InitDone every kept object the list did not have is deleted, so deletions missed
    // while the watch was down (expired resourceVersion) are not lost.
    let mut listed: Option<HashSet<String>> = None;
    let mut synced = false;
    let stream = watcher(api, config).default_backoff();
    futures::pin_mut!(stream);
    while let Some(item) = stream.next().await {
        let event = match item {
            Ok(e) => e,
            Err(e) if presence == Presence::Optional && !synced && is_missing_api(&e) => {
                tracing::warn!(
                    %kind,
                    error = %e,
                    "the API server does not serve this kind; continuing without it"
                );
                shared.lock().synced += 1;
                shared.notify();
                return;
            }
            Err(e) => {
                tracing::warn!(%kind, error = %e, "watch failed; retrying");
                continue;
            }
        };
        match event {
            watcher::Event::Init => listed = Some(HashSet::new()),
            watcher::Event::InitApply(o) => {
                let k = key_of(&o);
                let start = Instant::now();
                let view = handler.apply(&shared, &mut shared.lock(), store.get(&k), o);
                observe(&shared, &handler, &kind, start, store.get(&k), Some(&view));
                store.insert(k.clone(), view);
                listed.get_or_insert_default().insert(k);
            }
            watcher::Event::InitDone => {
                let listed = listed.take().unwrap_or_default();
                {
                    let mut st = shared.lock();
                    store.retain(|k, old| {
                        let keep = listed.contains(k);
                        if !keep {
                            let start = Instant::now();
                            handler.delete(&shared, &mut st, old);
                            observe(&shared, &handler, &kind, start, Some(old), None);
                        }
                        keep
                    });
                    if !synced {
                        synced = true;
                        st.synced += 1;
                    }
                }
                tracing::debug!(%kind, objects = store.len(), "informer synced");
                shared.notify();
            }
            watcher::Event::Apply(o) => {
                let k = key_of(&o);
                let start = Instant::now();
                let view = handler.apply(&shared, &mut shared.lock(), store.get(&k), o);
                observe(&shared, &handler, &kind, start, store.get(&k), Some(&view));
                store.insert(k, view);
                shared.notify();
            }
            watcher::Event::Delete(o) => {
                let k = key_of(&o);
                let old = match store.remove(&k) {
                    Some(v) => v,
                    None => handler.view(o),
                };
                let start = Instant::now();
                handler.delete(&shared, &mut shared.lock(), &old);
                observe(&shared, &handler, &kind, start, Some(&old), None);
                shared.notify();
            }
        }
    }
}

/// One informer over every `K` in the cluster.
fn spawn<K, H>(
    client: &Client,
    shared: &Arc<Shared>,
    presence: Presence,
    handler: H,
) -> tokio::task::JoinHandle<()>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    H: Handler<K>,
    K::DynamicType: Default,
{
    tokio::spawn(run_informer_with(
        Api::<K>::all(client.clone()),
        watcher::Config::default().any_semantic(),
        presence,
        Arc::clone(shared),
        handler,
    ))
}

/// A whole-object handler from the state's add/update and delete functions.
fn fns<K>(apply: fn(&mut State, Option<&K>, &K), delete: fn(&mut State, &K)) -> Fns<K> {
    Fns { apply, delete }
}

/// Starts the informers the scheduler needs: twelve (the storage ones feed the volume
/// plugins and the binding cycle's wait for claims to be bound) plus the workload ones.
pub(crate) fn spawn_all(client: &Client, shared: &Arc<Shared>) -> Vec<tokio::task::JoinHandle<()>> {
    // CSIDriver and CSIStorageCapacity are optional: VolumeBinding's capacity check works
    // without them on servers that lack the APIs.
    let (req, opt) = (Presence::Required, Presence::Optional);
    let mut informers = vec![
        tokio::spawn(run_informer(
            Api::<Pod>::all(client.clone()),
            watcher::Config::default()
                .any_semantic()
                .fields(POD_FIELD_SELECTOR),
            Arc::clone(shared),
            Pods,
        )),
        spawn(client, shared, req, Nodes),
        spawn(
            client,
            shared,
            req,
            fns::<RuntimeClass>(State::on_runtime_class, State::on_runtime_class_delete),
        ),
        spawn(
            client,
            shared,
            req,
            fns::<PodDisruptionBudget>(State::on_pdb, State::on_pdb_delete),
        ),
        spawn(
            client,
            shared,
            req,
            fns::<Namespace>(State::on_namespace, State::on_namespace_delete),
        ),
        spawn(
            client,
            shared,
            req,
            fns::<PersistentVolumeClaim>(State::on_pvc, State::on_pvc_delete),
        ),
        spawn(
            client,
            shared,
            req,
            fns::<PersistentVolume>(State::on_pv, State::on_pv_delete),
        ),
        spawn(
            client,
            shared,
            req,
            fns::<StorageClass>(State::on_storage_class, State::on_storage_class_delete),
        ),
        spawn(
            client,
            shared,
            req,
            fns::<CSINode>(State::on_csi_node, State::on_csi_node_delete),
        ),
        // NodeVolumeLimits counts volumes still attached to a node.
        spawn(
            client,
            shared,
            req,
            fns::<VolumeAttachment>(
                State::on_volume_attachment,
                State::on_volume_attachment_delete,
            ),
        ),
        // VolumeBinding's storage-capacity check; GA since 1.24, optional for older or
        // trimmed-down servers.
        spawn(
            client,
            shared,
            opt,
            fns::<CSIDriver>(State::on_csi_driver, State::on_csi_driver_delete),
        ),
        spawn(
            client,
            shared,
            opt,
            fns::<CSIStorageCapacity>(
                State::on_storage_capacity,
                State::on_storage_capacity_delete,
            ),
        ),
    ];
    informers.extend(spawn_workloads(client, shared));
    informers
}

/// Services, ReplicationControllers, ReplicaSets and StatefulSets, as upstream's
/// PodTopologySpread listers: only their selectors are kept (`Cache` workload selectors),
/// from which the system default constraints take a pod's selector.
pub(crate) const WORKLOAD_INFORMER_COUNT: usize = 4;

/// Turns one workload kind's objects into cache workload-selector entries.
struct Workloads<K> {
    entry: fn(&K) -> WorkloadEntry,
}

impl<K: Send + Sync + 'static> Handler<K> for Workloads<K> {
    type View = WorkloadEntry;
    fn apply(
        &self,
        _: &Shared,
        st: &mut State,
        _old: Option<&WorkloadEntry>,
        new: K,
    ) -> WorkloadEntry {
        let entry = (self.entry)(&new);
        st.on_workload(entry.clone());
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

fn spawn_workloads(client: &Client, shared: &Arc<Shared>) -> Vec<tokio::task::JoinHandle<()>> {
    let required = Presence::Required;
    vec![
        spawn::<Service, _>(
            client,
            shared,
            required,
            Workloads {
                entry: workloads::service_entry,
            },
        ),
        spawn::<ReplicationController, _>(
            client,
            shared,
            required,
            Workloads {
                entry: workloads::replication_controller_entry,
            },
        ),
        spawn::<ReplicaSet, _>(
            client,
            shared,
            required,
            Workloads {
                entry: workloads::replica_set_entry,
            },
        ),
        spawn::<StatefulSet, _>(
            client,
            shared,
            required,
            Workloads {
                entry: workloads::stateful_set_entry,
            },
        ),
    ]
}
