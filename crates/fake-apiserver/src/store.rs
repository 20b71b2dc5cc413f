//! The store: every resource the server knows ([`RESOURCES`]), the objects themselves (JSON
//! keyed by collection, namespace and name), the one global resourceVersion every write
//! bumps, the watch log and broadcast every write is appended to, and the test-side state
//! (bindings, events, request log, grants, faults) kept beside them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::watch::WatchEvent;
use crate::{Fault, Grant, RequestRecord};

/// (collection, namespace, name); cluster-scoped objects have an empty namespace.
pub(crate) type Key = (String, String, String);

/// A resource the server knows: its collection name (the URL's plural), API group and
/// version, kind, and whether it lives in namespaces.
#[derive(Clone, Copy, Debug)]
pub struct Resource {
    /// The store's key for its objects; the resource name too, unless `plural` differs
    /// (two API groups serving the same resource name).
    pub collection: &'static str,
    /// The resource name in paths and discovery (`podgroups`).
    pub plural: &'static str,
    /// "" for the core group (`/api/v1`).
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
}

const fn res(
    collection: &'static str,
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    namespaced: bool,
) -> Resource {
    Resource {
        collection,
        plural: collection,
        group,
        version,
        kind,
        namespaced,
    }
}

/// Every resource served. Events (events.k8s.io/v1) are served too, by their own handlers.
pub const RESOURCES: &[Resource] = &[
    res("pods", "", "v1", "Pod", true),
    res("nodes", "", "v1", "Node", false),
    res("namespaces", "", "v1", "Namespace", false),
    res("services", "", "v1", "Service", true),
    res("configmaps", "", "v1", "ConfigMap", true),
    res(
        "replicationcontrollers",
        "",
        "v1",
        "ReplicationController",
        true,
    ),
    res(
        "persistentvolumeclaims",
        "",
        "v1",
        "PersistentVolumeClaim",
        true,
    ),
    res("persistentvolumes", "", "v1", "PersistentVolume", false),
    res("replicasets", "apps", "v1", "ReplicaSet", true),
    res("statefulsets", "apps", "v1", "StatefulSet", true),
    res("runtimeclasses", "node.k8s.io", "v1", "RuntimeClass", false),
    res(
        "priorityclasses",
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        false,
    ),
    res(
        "poddisruptionbudgets",
        "policy",
        "v1",
        "PodDisruptionBudget",
        true,
    ),
    res("leases", "coordination.k8s.io", "v1", "Lease", true),
    res("serviceaccounts", "", "v1", "ServiceAccount", true),
    res(
        "mutatingwebhookconfigurations",
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        false,
    ),
    res(
        "validatingwebhookconfigurations",
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        false,
    ),
    res(
        "storageclasses",
        "storage.k8s.io",
        "v1",
        "StorageClass",
        false,
    ),
    res("csinodes", "storage.k8s.io", "v1", "CSINode", false),
    res("csidrivers", "storage.k8s.io", "v1", "CSIDriver", false),
    res(
        "csistoragecapacities",
        "storage.k8s.io",
        "v1",
        "CSIStorageCapacity",
        true,
    ),
    res(
        "volumeattachments",
        "storage.k8s.io",
        "v1",
        "VolumeAttachment",
        false,
    ),
    res(
        "resourceclaims",
        "resource.k8s.io",
        "v1",
        "ResourceClaim",
        true,
    ),
    res(
        "resourceclaimtemplates",
        "resource.k8s.io",
        "v1",
        "ResourceClaimTemplate",
        true,
    ),
    res(
        "resourceslices",
        "resource.k8s.io",
        "v1",
        "ResourceSlice",
        false,
    ),
    res(
        "deviceclasses",
        "resource.k8s.io",
        "v1",
        "DeviceClass",
        false,
    ),
    res(
        "devicetaintrules",
        "resource.k8s.io",
        "v1",
        "DeviceTaintRule",
        false,
    ),
    res(
        "schedulingpolicies",
        "scheduling.ferrosched.io",
        "v1alpha1",
        "SchedulingPolicy",
        false,
    ),
    // The Workload API's PodGroup (scheduling.k8s.io/v1beta1, 1.37; validated and defaulted
    // as upstream's registry does, `handlers/pod_groups.rs`) and scheduler-plugins' CRD.
    res(
        "podgroups",
        "scheduling.k8s.io",
        "v1beta1",
        "PodGroup",
        true,
    ),
    // CompositePodGroups (1.37 alpha; `handlers/composite_pod_groups.rs`).
    res(
        "compositepodgroups",
        "scheduling.k8s.io",
        "v1alpha3",
        "CompositePodGroup",
        true,
    ),
    Resource {
        collection: COSCHEDULING_POD_GROUPS,
        plural: "podgroups",
        group: "scheduling.x-k8s.io",
        version: "v1alpha1",
        kind: "PodGroup",
        namespaced: true,
    },
];

/// The store key of scheduler-plugins' PodGroups (`scheduling.x-k8s.io/v1alpha1`).
pub const COSCHEDULING_POD_GROUPS: &str = "podgroups.scheduling.x-k8s.io";

/// The resource of a collection name (panics on an unknown one: a test bug).
pub fn resource(collection: &str) -> &'static Resource {
    RESOURCES
        .iter()
        .find(|r| r.collection == collection)
        .unwrap_or_else(|| panic!("the fake API server does not serve {collection:?}"))
}

impl Resource {
    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// Everything the server holds, behind one mutex.
#[derive(Default)]
pub(crate) struct Store {
    pub(crate) objects: BTreeMap<Key, Value>,
    pub(crate) rv: u64,
    pub(crate) log: Vec<WatchEvent>,
    pub(crate) bindings: Vec<(String, String)>,
    pub(crate) events: Vec<Value>,
    pub(crate) next_uid: u64,
    /// Watches starting before this resourceVersion get `410 Expired`.
    pub(crate) compacted: u64,
    /// Pods whose next binding loses a race: another scheduler binds them to the given
    /// node first, and ours gets 409.
    pub(crate) steal: BTreeMap<String, String>,
    /// How many of the next Binding requests fail with 503.
    pub(crate) failing_bindings: usize,
    /// LIST requests served per collection.
    pub(crate) lists: BTreeMap<String, usize>,
    /// Every request received, in order.
    pub(crate) requests: Vec<RequestRecord>,
    /// Requests received per HTTP version (`HTTP/1.1`, `HTTP/2.0`).
    pub(crate) http_versions: BTreeMap<String, usize>,
    /// Lists and watches answered in protobuf, per collection.
    pub(crate) protobuf_served: BTreeMap<String, usize>,
    /// TCP connections accepted (HTTPS servers only; see `tls`).
    pub(crate) connections: usize,
    /// Collections answered with 404, as by a server without that API.
    pub(crate) disabled: std::collections::BTreeSet<&'static str>,
    /// What SubjectAccessReviews allow.
    pub(crate) grants: Vec<Grant>,
    /// Bearer tokens TokenReviews accept: token -> (username, groups).
    pub(crate) tokens: BTreeMap<String, (String, Vec<String>)>,
    /// Pods a Binding was POSTed for although they were already bound.
    pub(crate) double_bindings: Vec<String>,
    /// Injected faults and how many more requests each fails.
    pub(crate) faults: Vec<(Fault, usize)>,
    /// Between [`FakeApiServer::go_down`](crate::FakeApiServer::go_down) and
    /// [`FakeApiServer::come_back`](crate::FakeApiServer::come_back).
    pub(crate) down: bool,
}

/// The state the handlers share: the store, the watch broadcast, and the locks.
pub(crate) struct Inner {
    pub(crate) store: Mutex<Store>,
    pub(crate) tx: broadcast::Sender<WatchEvent>,
    /// Bumped to end every open watch stream.
    pub(crate) generation: tokio::sync::watch::Sender<u64>,
    /// Serialises check-then-write requests (create, replace, patch, delete, binding).
    pub(crate) write_lock: Mutex<()>,
    /// Which admission plugins are on.
    pub(crate) admission: crate::admission::Admission,
}

pub(crate) type Shared = Arc<Inner>;

impl Inner {
    /// Stores `object`, stamping resourceVersion (and uid/creationTimestamp on create),
    /// and emits the watch event.
    pub(crate) fn put(&self, collection: &str, mut object: Value) -> Value {
        let mut st = self.store.lock().unwrap();
        let ns = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let name = object["metadata"]["name"]
            .as_str()
            .expect("objects have names")
            .to_string();
        let key = (collection.to_string(), ns, name);
        let r = resource(collection);
        object["apiVersion"] = json!(r.api_version());
        object["kind"] = json!(r.kind);
        let existed = st.objects.contains_key(&key);
        if !existed {
            if object["metadata"]["uid"].is_null() {
                st.next_uid += 1;
                object["metadata"]["uid"] = json!(format!("uid-{}", st.next_uid));
            }
            if object["metadata"]["creationTimestamp"].is_null() {
                object["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
            }
        }
        st.rv += 1;
        let rv = st.rv;
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        let old = st.objects.insert(key, object.clone());
        let ev = WatchEvent {
            rv,
            collection: collection.to_string(),
            type_: if existed { "MODIFIED" } else { "ADDED" },
            object: object.clone(),
            old,
        };
        st.log.push(ev.clone());
        let _ = self.tx.send(ev);
        object
    }

    pub(crate) fn remove(&self, collection: &str, ns: &str, name: &str) -> Option<Value> {
        let mut st = self.store.lock().unwrap();
        let key = (collection.to_string(), ns.to_string(), name.to_string());
        let mut object = st.objects.remove(&key)?;
        st.rv += 1;
        let rv = st.rv;
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        let ev = WatchEvent {
            rv,
            collection: collection.to_string(),
            type_: "DELETED",
            object: object.clone(),
            old: None,
        };
        st.log.push(ev.clone());
        let _ = self.tx.send(ev);
        Some(object)
    }

    pub(crate) fn get(&self, collection: &str, ns: &str, name: &str) -> Option<Value> {
        let st = self.store.lock().unwrap();
        st.objects
            .get(&(collection.to_string(), ns.to_string(), name.to_string()))
            .cloned()
    }
}
