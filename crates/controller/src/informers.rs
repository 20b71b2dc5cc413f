//! Informers: one `kube::runtime::watcher` per kind, each keeping its own store of the last
//! object seen per key, feeding [`crate::state::State`].
//!
//! A (re)list arrives as `Init`, `InitApply`..., `InitDone`. The listed objects are buffered
//! and applied at `InitDone` together with a delete for every stored object the list no
//! longer has, so deletions missed while the watch was down (expired resourceVersion) are not
//! lost. The watcher itself relists on `410 Gone` and retries with backoff on errors.
//!
//! Optional kinds (CSIDriver, CSIStorageCapacity) tolerate a server that does not serve
//! them: a 404 on the first list is logged once, the informer counts as synced with no
//! objects, and it stops, so readiness does not wait for an API that will never answer.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;

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
use serde::de::DeserializeOwned;

use crate::state::{Shared, State};

/// How many informers [`spawn_all`] starts; the scheduler waits for all of them to sync.
pub const INFORMER_COUNT: usize = 12 + WORKLOAD_INFORMER_COUNT;

/// How one kind's add/update/delete events change the state.
pub trait Handler<K>: Send + Sync + 'static {
    fn apply(&self, shared: &Shared, st: &mut State, old: Option<&K>, new: &K);
    fn delete(&self, shared: &Shared, st: &mut State, old: &K);
}

struct Fns<K> {
    apply: fn(&Shared, &mut State, Option<&K>, &K),
    delete: fn(&Shared, &mut State, &K),
}

impl<K: Send + Sync + 'static> Handler<K> for Fns<K> {
    fn apply(&self, shared: &Shared, st: &mut State, old: Option<&K>, new: &K) {
        (self.apply)(shared, st, old, new)
    }
    fn delete(&self, shared: &Shared, st: &mut State, old: &K) {
        (self.delete)(shared, st, old)
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
pub const POD_FIELD_SELECTOR: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// Whether a kind must be served, or may be missing from the server (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Presence {
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
pub async fn run_informer<K, H>(
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
pub async fn run_informer_with<K, H>(
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
    let mut store: HashMap<String, K> = HashMap::new();
    let mut buffer: Option<HashMap<String, K>> = None;
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
            watcher::Event::Init => buffer = Some(HashMap::new()),
            watcher::Event::InitApply(o) => {
                buffer.get_or_insert_default().insert(key_of(&o), o);
            }
            watcher::Event::InitDone => {
                let listed = buffer.take().unwrap_or_default();
                {
                    let mut st = shared.lock();
                    for (k, old) in &store {
                        if !listed.contains_key(k) {
                            handler.delete(&shared, &mut st, old);
                        }
                    }
                    for (k, new) in &listed {
                        handler.apply(&shared, &mut st, store.get(k), new);
                    }
                    if !synced {
                        synced = true;
                        st.synced += 1;
                    }
                }
                store = listed;
                tracing::debug!(%kind, objects = store.len(), "informer synced");
                shared.notify();
            }
            watcher::Event::Apply(o) => {
                let k = key_of(&o);
                handler.apply(&shared, &mut shared.lock(), store.get(&k), &o);
                store.insert(k, o);
                shared.notify();
            }
            watcher::Event::Delete(o) => {
                let k = key_of(&o);
                let old = store.remove(&k).unwrap_or(o);
                handler.delete(&shared, &mut shared.lock(), &old);
                shared.notify();
            }
        }
    }
}

/// Starts the informers the scheduler needs: twelve (the storage ones feed the volume
/// plugins and the binding cycle's wait for claims to be bound) plus the workload ones.
pub fn spawn_all(client: &Client, shared: &Arc<Shared>) -> Vec<tokio::task::JoinHandle<()>> {
    let mut informers = vec![
        tokio::spawn(run_informer(
            Api::<Pod>::all(client.clone()),
            watcher::Config::default()
                .any_semantic()
                .fields(POD_FIELD_SELECTOR),
            Arc::clone(shared),
            Fns::<Pod> {
                apply: |sh, st, old, new| st.on_pod(&sh.profiles, old, new),
                delete: |_, st, old| st.on_pod_delete(old),
            },
        )),
        tokio::spawn(run_informer(
            Api::<Node>::all(client.clone()),
            watcher::Config::default().any_semantic(),
            Arc::clone(shared),
            Fns::<Node> {
                apply: |_, st, old, new| st.on_node(old, new),
                delete: |_, st, old| st.on_node_delete(old),
            },
        )),
        tokio::spawn(run_informer(
            Api::<RuntimeClass>::all(client.clone()),
            watcher::Config::default().any_semantic(),
            Arc::clone(shared),
            Fns::<RuntimeClass> {
                apply: |_, st, old, new| st.on_runtime_class(old, new),
                delete: |_, st, old| st.on_runtime_class_delete(old),
            },
        )),
        tokio::spawn(run_informer(
            Api::<PodDisruptionBudget>::all(client.clone()),
            watcher::Config::default().any_semantic(),
            Arc::clone(shared),
            Fns::<PodDisruptionBudget> {
                apply: |_, st, old, new| st.on_pdb(old, new),
                delete: |_, st, old| st.on_pdb_delete(old),
            },
        )),
        tokio::spawn(run_informer(
            Api::<Namespace>::all(client.clone()),
            watcher::Config::default().any_semantic(),
            Arc::clone(shared),
            Fns::<Namespace> {
                apply: |_, st, old, new| st.on_namespace(old, new),
                delete: |_, st, old| st.on_namespace_delete(old),
            },
        )),
        tokio::spawn(run_informer(
            Api::<PersistentVolumeClaim>::all(client.clone()),
            watcher::Config::default().any_semantic(),
            Arc::clone(shared),
            Fns::<PersistentVolumeClaim> {
                apply: |_, st, old, new| st.on_pvc(old, new),
                delete: |_, st, old| st.on_pvc_delete(old),
            },
        )),
        tokio::spawn(run_informer(
            Api::<PersistentVolume>::all(client.clone()),
            watcher::Config::default().any_semantic(),
            Arc::clone(shared),
            Fns::<PersistentVolume> {
                apply: |_, st, old, new| st.on_pv(old, new),
                delete: |_, st, old| st.on_pv_delete(old),
            },
        )),
        tokio::spawn(run_informer(
            Api::<StorageClass>::all(client.clone()),
            watcher::Config::default().any_semantic(),
            Arc::clone(shared),
            Fns::<StorageClass> {
                apply: |_, st, old, new| st.on_storage_class(old, new),
                delete: |_, st, old| st.on_storage_class_delete(old),
            },
        )),
        tokio::spawn(run_informer(
            Api::<CSINode>::all(client.clone()),
            watcher::Config::default().any_semantic(),
            Arc::clone(shared),
            Fns::<CSINode> {
                apply: |_, st, old, new| st.on_csi_node(old, new),
                delete: |_, st, old| st.on_csi_node_delete(old),
            },
        )),
        // NodeVolumeLimits counts volumes still attached to a node.
        tokio::spawn(run_informer(
            Api::<VolumeAttachment>::all(client.clone()),
            watcher::Config::default().any_semantic(),
            Arc::clone(shared),
            Fns::<VolumeAttachment> {
                apply: |_, st, old, new| st.on_volume_attachment(old, new),
                delete: |_, st, old| st.on_volume_attachment_delete(old),
            },
        )),
        // VolumeBinding's storage-capacity check; GA since 1.24, optional for older or
        // trimmed-down servers.
        tokio::spawn(run_informer_with(
            Api::<CSIDriver>::all(client.clone()),
            watcher::Config::default().any_semantic(),
            Presence::Optional,
            Arc::clone(shared),
            Fns::<CSIDriver> {
                apply: |_, st, old, new| st.on_csi_driver(old, new),
                delete: |_, st, old| st.on_csi_driver_delete(old),
            },
        )),
        tokio::spawn(run_informer_with(
            Api::<CSIStorageCapacity>::all(client.clone()),
            watcher::Config::default().any_semantic(),
            Presence::Optional,
            Arc::clone(shared),
            Fns::<CSIStorageCapacity> {
                apply: |_, st, old, new| st.on_storage_capacity(old, new),
                delete: |_, st, old| st.on_storage_capacity_delete(old),
            },
        )),
    ];
    informers.extend(spawn_workloads(client, shared));
    informers
}

/// Services, ReplicationControllers, ReplicaSets and StatefulSets, as upstream's
/// PodTopologySpread listers: only their selectors are kept (`Cache` workload selectors),
/// from which the system default constraints take a pod's selector.
pub const WORKLOAD_INFORMER_COUNT: usize = 4;

/// Turns one workload kind's objects into cache workload-selector entries.
struct Workloads<K> {
    entry: fn(&K) -> WorkloadEntry,
}

impl<K: Send + Sync + 'static> Handler<K> for Workloads<K> {
    fn apply(&self, _: &Shared, st: &mut State, _old: Option<&K>, new: &K) {
        st.on_workload((self.entry)(new));
    }
    fn delete(&self, _: &Shared, st: &mut State, old: &K) {
        st.on_workload_delete(&(self.entry)(old));
    }
}

fn spawn_workloads(client: &Client, shared: &Arc<Shared>) -> Vec<tokio::task::JoinHandle<()>> {
    fn one<K>(
        client: &Client,
        shared: &Arc<Shared>,
        entry: fn(&K) -> WorkloadEntry,
    ) -> tokio::task::JoinHandle<()>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Default,
    {
        tokio::spawn(run_informer(
            Api::<K>::all(client.clone()),
            watcher::Config::default().any_semantic(),
            Arc::clone(shared),
            Workloads { entry },
        ))
    }
    vec![
        one::<Service>(client, shared, workloads::service_entry),
        one::<ReplicationController>(client, shared, workloads::replication_controller_entry),
        one::<ReplicaSet>(client, shared, workloads::replica_set_entry),
        one::<StatefulSet>(client, shared, workloads::stateful_set_entry),
    ]
}
