//! Informers: one `kube::runtime::watcher` per kind, each keeping a view of the last object
//! seen per key ([`Handler::View`]: compact for pods and nodes), feeding
//! [`crate::state::State`].
//!
//! A (re)list arrives as `Init`, `InitApply`..., `InitDone`. Listed objects are applied as
//! they arrive; at `InitDone` every kept object the list no longer has is deleted, so
//! deletions missed while the watch was down (expired resourceVersion) are not lost. The
//! watcher itself relists on `410 Gone` and retries with backoff on errors.
//!
//! Optional kinds (CSIDriver, CSIStorageCapacity, ResourceClaim, ResourceSlice, DeviceClass,
//! DeviceTaintRule, PodGroup) tolerate a server that does not serve
//! them: a 404 on the first list is logged once, the informer counts as synced with no
//! objects, and it stops, so readiness does not wait for an API that will never answer.
//!
//! `watch` runs one informer, `handlers` says what each kind's events do to the state;
//! this module starts them all. Informers only write to the shared state (briefly, per
//! event) and never write to the API server.

mod handlers;
mod lean;
pub(crate) mod pod_groups;
mod proto;
mod raw;
mod taint_rules;
mod watch;

pub use proto::bench_support;

use std::fmt::Debug;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service,
};
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::storage::v1::{
    CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment,
};
use kube::runtime::watcher;
use kube::{Api, Client, Resource};
use scheduler_core::cache::workload_selectors;
use serde::de::DeserializeOwned;

use crate::client::discovery::PodGroupVersions;
use crate::state::{Shared, State};
use handlers::{Fns, Handler, Nodes, Pods, Workloads};
use lean::Lean;
use raw::{Raw, RawNodes, RawPods};

use crate::extender::objects::ApiObjects;
use watch::{Presence, run_informer, run_informer_with};

/// Like upstream's pod informer: terminal pods are not watched at all (a pod that turns
/// terminal arrives as a delete).
pub(crate) const POD_FIELD_SELECTOR: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// Objects per page of an initial list (kube's and client-go's default is 500). Each page
/// is decoded whole before its objects are applied, and pods from a real API server are
/// large (admission adds a projected service-account volume): at 500 the pages in flight
/// were ~9 of the ~21 MB heap peak at 5,000 nodes (heaptrack, real kube-apiserver).
pub(crate) const LIST_PAGE_SIZE: u32 = 100;

/// How many informers [`spawn_all`] starts; the scheduler waits for all of them to sync.
pub(crate) const INFORMER_COUNT: usize = 19 + WORKLOAD_INFORMER_COUNT;

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
        watcher::Config::default()
            .any_semantic()
            .page_size(LIST_PAGE_SIZE),
        presence,
        Arc::clone(shared),
        handler,
    ))
}

/// The pod informer: protobuf list and watch where the server speaks it (see [`proto`]),
/// terminal pods filtered out by the server.
///
/// With extenders, pending pods' objects are kept for them and sent whole, so that informer
/// stays on kube's JSON watcher and keeps each pod's raw JSON (`Raw<Lean<Pod>>`); the
/// protobuf decode builds only the fields the scheduler reads and could not give an extender
/// the object the API server served.
fn spawn_pods(
    client: &Client,
    accept: &str,
    shared: &Arc<Shared>,
    objects: Option<&Arc<ApiObjects>>,
) -> tokio::task::JoinHandle<()> {
    match objects {
        None => {
            let events = proto::source::events(proto::source::Source {
                client: client.clone(),
                accept: accept.to_string(),
                path: "/api/v1/pods",
                page_size: LIST_PAGE_SIZE,
                field_selector: Some(POD_FIELD_SELECTOR),
                decode: proto::pod::pod,
            });
            tokio::spawn(watch::run_events(
                futures::StreamExt::map(events, Ok),
                Presence::Required,
                Arc::clone(shared),
                Pods,
            ))
        }
        Some(o) => tokio::spawn(run_informer(
            Api::<Raw<Lean<Pod>>>::all(client.clone()),
            watcher::Config::default()
                .any_semantic()
                .page_size(LIST_PAGE_SIZE)
                .fields(POD_FIELD_SELECTOR),
            Arc::clone(shared),
            RawPods(Arc::clone(o)),
        )),
    }
}

/// The node informer: protobuf list and watch where the server speaks it (see [`proto`]).
fn spawn_nodes(client: &Client, accept: &str, shared: &Arc<Shared>) -> tokio::task::JoinHandle<()> {
    let events = proto::source::events(proto::source::Source {
        client: client.clone(),
        accept: accept.to_string(),
        path: "/api/v1/nodes",
        page_size: LIST_PAGE_SIZE,
        field_selector: None,
        decode: proto::node::node,
    });
    tokio::spawn(watch::run_events(
        futures::StreamExt::map(events, Ok),
        Presence::Required,
        Arc::clone(shared),
        Nodes,
    ))
}

/// The Accept header of the pod and node informers' requests, from `clientConnection` as client-go
/// builds it: `acceptContentTypes` when set, else `contentType` (protobuf by default). With
/// protobuf first, JSON is accepted too, so a server (or kind) without protobuf still
/// answers; the answer is decoded by its Content-Type either way.
pub(crate) fn accept_header(cc: &scheduler_core::config::ClientConnectionConfiguration) -> String {
    if !cc.accept_content_types.is_empty() {
        cc.accept_content_types.clone()
    } else if cc.content_type.is_empty() || cc.content_type.starts_with(proto::PROTOBUF) {
        proto::ACCEPT.to_string()
    } else {
        cc.content_type.clone()
    }
}

/// A whole-object handler from the state's add/update and delete functions.
fn fns<K>(apply: fn(&mut State, Option<&K>, &K), delete: fn(&mut State, &K)) -> Fns<K> {
    Fns { apply, delete }
}

/// Starts the informers the scheduler needs: eighteen (the storage ones feed the volume
/// plugins and the binding cycle's wait for claims to be bound, the DRA ones
/// DynamicResources, the PodGroup ones GangScheduling) plus the workload ones.
/// `taint_rules` and `pod_groups`: the versions the server serves (discovery).
pub(crate) fn spawn_all(
    client: &Client,
    accept: &str,
    shared: &Arc<Shared>,
    taint_rules: Option<&str>,
    pod_groups: &PodGroupVersions,
    objects: Option<&Arc<ApiObjects>>,
) -> Vec<tokio::task::JoinHandle<()>> {
    // CSIDriver and CSIStorageCapacity are optional: VolumeBinding's capacity check works
    // without them on servers that lack the APIs.
    let (req, opt) = (Presence::Required, Presence::Optional);
    let mut informers = vec![
        spawn_pods(client, accept, shared, objects),
        match objects.filter(|o| o.keeps_nodes()) {
            None => spawn_nodes(client, accept, shared),
            Some(o) => spawn::<Raw<Lean<Node>>, _>(client, shared, req, RawNodes(Arc::clone(o))),
        },
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
        // DRA (resource.k8s.io/v1, 1.34+): claim events retry pods DynamicResources
        // refused; optional, as servers before 1.34 do not serve it.
        spawn(
            client,
            shared,
            opt,
            fns::<ResourceClaim>(State::on_resource_claim, State::on_resource_claim_delete),
        ),
        // The devices DynamicResources allocates from, and the classes requests name.
        spawn(
            client,
            shared,
            opt,
            fns::<ResourceSlice>(State::on_resource_slice, State::on_resource_slice_delete),
        ),
        spawn(
            client,
            shared,
            opt,
            fns::<DeviceClass>(State::on_device_class, State::on_device_class_delete),
        ),
        // Taints on devices from DeviceTaintRules, as if the slices carried them.
        taint_rules::spawn_taint_rules(client, shared, taint_rules),
    ];
    informers.extend(pod_groups::spawn_pod_groups(client, shared, pod_groups));
    informers.extend(spawn_workloads(client, shared));
    informers
}

/// Services, ReplicationControllers, ReplicaSets and StatefulSets, as upstream's
/// PodTopologySpread listers: only their selectors are kept (`Cache` workload selectors),
/// from which the system default constraints take a pod's selector.
pub(crate) const WORKLOAD_INFORMER_COUNT: usize = 4;

fn spawn_workloads(client: &Client, shared: &Arc<Shared>) -> Vec<tokio::task::JoinHandle<()>> {
    let required = Presence::Required;
    vec![
        spawn::<Service, _>(
            client,
            shared,
            required,
            Workloads {
                entry: workload_selectors::service_entry,
            },
        ),
        spawn::<ReplicationController, _>(
            client,
            shared,
            required,
            Workloads {
                entry: workload_selectors::replication_controller_entry,
            },
        ),
        spawn::<ReplicaSet, _>(
            client,
            shared,
            required,
            Workloads {
                entry: workload_selectors::replica_set_entry,
            },
        ),
        spawn::<StatefulSet, _>(
            client,
            shared,
            required,
            Workloads {
                entry: workload_selectors::stateful_set_entry,
            },
        ),
    ]
}
