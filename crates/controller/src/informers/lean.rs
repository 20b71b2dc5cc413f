//! What the pod and node informers decode: the object without `metadata.managedFields`.
//!
//! A real API server attaches managedFields to every object it stores and so to every watch
//! event and list item: one entry per writer, each a tree of `f:`/`k:` keys as long as the
//! fields it owns. Decoded, that tree is hundreds of small allocations per event that no
//! scheduler reads. [`Lean<K>`] skips it while parsing (serde passes over the key without
//! building anything) and keeps every other field, so the views built from it are the ones
//! a full decode gives (see the tests).

use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus, Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;

/// A `K` as the informers decode it: everything but `metadata.managedFields`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Lean<K>(pub(crate) K);

/// A kind made of metadata, spec and status, as Pod and Node are.
pub(crate) trait SpecAndStatus: Sized {
    type Spec: for<'de> Deserialize<'de>;
    type Status: for<'de> Deserialize<'de>;
    fn assemble(
        metadata: ObjectMeta,
        spec: Option<Self::Spec>,
        status: Option<Self::Status>,
    ) -> Self;
}

impl SpecAndStatus for Pod {
    type Spec = PodSpec;
    type Status = PodStatus;
    fn assemble(metadata: ObjectMeta, spec: Option<PodSpec>, status: Option<PodStatus>) -> Pod {
        Pod {
            metadata,
            spec,
            status,
        }
    }
}

impl SpecAndStatus for Node {
    type Spec = NodeSpec;
    type Status = NodeStatus;
    fn assemble(metadata: ObjectMeta, spec: Option<NodeSpec>, status: Option<NodeStatus>) -> Node {
        Node {
            metadata,
            spec,
            status,
        }
    }
}

/// ObjectMeta field for field, but for `managedFields` (ignored as an unknown key).
#[derive(Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct LeanMeta {
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    self_link: Option<String>,
    uid: Option<String>,
}

impl From<LeanMeta> for ObjectMeta {
    fn from(m: LeanMeta) -> ObjectMeta {
        ObjectMeta {
            annotations: m.annotations,
            creation_timestamp: m.creation_timestamp,
            deletion_grace_period_seconds: m.deletion_grace_period_seconds,
            deletion_timestamp: m.deletion_timestamp,
            finalizers: m.finalizers,
            generate_name: m.generate_name,
            generation: m.generation,
            labels: m.labels,
            managed_fields: None,
            name: m.name,
            namespace: m.namespace,
            owner_references: m.owner_references,
            resource_version: m.resource_version,
            self_link: m.self_link,
            uid: m.uid,
        }
    }
}

#[derive(Deserialize)]
#[serde(bound = "S: Deserialize<'de>, T: Deserialize<'de>")]
struct Parts<S, T> {
    #[serde(default)]
    metadata: Option<LeanMeta>,
    #[serde(default)]
    spec: Option<S>,
    #[serde(default)]
    status: Option<T>,
}

impl<'de, K: SpecAndStatus> Deserialize<'de> for Lean<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let p = Parts::<K::Spec, K::Status>::deserialize(d)?;
        Ok(Lean(K::assemble(
            p.metadata.unwrap_or_default().into(),
            p.spec,
            p.status,
        )))
    }
}

impl<K: k8s_openapi::Resource> k8s_openapi::Resource for Lean<K> {
    const API_VERSION: &'static str = K::API_VERSION;
    const GROUP: &'static str = K::GROUP;
    const KIND: &'static str = K::KIND;
    const VERSION: &'static str = K::VERSION;
    const URL_PATH_SEGMENT: &'static str = K::URL_PATH_SEGMENT;
    type Scope = K::Scope;
}

impl<K: k8s_openapi::Metadata<Ty = ObjectMeta>> k8s_openapi::Metadata for Lean<K> {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        self.0.metadata()
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        self.0.metadata_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scheduler_core::framework::NodeFingerprint;
    use scheduler_core::types::PodInfo;
    use serde_json::json;

    /// A pod as a real API server sends it: server-set fields, two managedFields entries,
    /// and every scheduling-relevant part of the spec and status.
    fn served_pod() -> serde_json::Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "web-1", "namespace": "shop", "uid": "u-1", "resourceVersion": "42",
                "generateName": "web-", "generation": 1,
                "creationTimestamp": "2026-11-24T10:00:00Z",
                "labels": {"app": "web", "tier": "front"},
                "annotations": {"note": "x"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "web", "uid": "rs-1", "controller": true}],
                "finalizers": ["example.com/keep"],
                "managedFields": [
                    {"manager": "kube-controller-manager", "operation": "Update",
                     "apiVersion": "v1", "time": "2026-11-24T10:00:00Z",
                     "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels":
                        {".": {}, "f:app": {}, "f:tier": {}}}, "f:spec": {"f:containers":
                        {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}}}}}},
                    {"manager": "kube-scheduler", "operation": "Update", "apiVersion": "v1",
                     "subresource": "status", "time": "2026-11-24T10:00:01Z",
                     "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:conditions":
                        {"k:{\"type\":\"PodScheduled\"}": {".": {}, "f:status": {}}}}}}
                ]
            },
            "spec": {
                "schedulerName": "ferrosched", "priority": 1000, "priorityClassName": "high",
                "preemptionPolicy": "PreemptLowerPriority", "runtimeClassName": "gvisor",
                "overhead": {"cpu": "250m"},
                "nodeSelector": {"disk": "ssd"},
                "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                    "effect": "NoExecute", "tolerationSeconds": 300}],
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "web"}},
                     "topologyKey": "kubernetes.io/hostname"}]}},
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "web"}}}],
                "initContainers": [{"name": "side", "image": "proxy:1", "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
                "containers": [{"name": "app", "image": "nginx:1.27",
                    "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}],
                    "resources": {"requests": {"cpu": "500m", "memory": "1Gi"},
                                  "limits": {"memory": "2Gi"}}}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-web-1"}}],
                "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}],
                "schedulingGates": [{"name": "example.com/wait"}],
                "dnsPolicy": "ClusterFirst", "restartPolicy": "Always"
            },
            "status": {
                "phase": "Pending", "nominatedNodeName": "n-3", "qosClass": "Burstable",
                "conditions": [{"type": "PodScheduled", "status": "False",
                    "reason": "Unschedulable", "message": "0/3 nodes are available"}]
            }
        })
    }

    #[test]
    fn a_lean_pod_is_the_full_pod_without_managed_fields() {
        let text = serde_json::to_vec(&served_pod()).unwrap();
        let full: Pod = serde_json::from_slice(&text).unwrap();
        let Lean(lean): Lean<Pod> = serde_json::from_slice(&text).unwrap();
        assert_eq!(full.metadata.managed_fields.as_ref().map(Vec::len), Some(2));
        assert_eq!(lean.metadata.managed_fields, None);
        let mut expected = full.clone();
        expected.metadata.managed_fields = None;
        assert_eq!(lean, expected);
        assert_eq!(
            format!("{:?}", PodInfo::from_pod(&lean)),
            format!("{:?}", PodInfo::from_pod(&full))
        );
    }

    #[test]
    fn a_lean_node_keeps_everything_scheduling_reads() {
        let node = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n-1", "uid": "n", "resourceVersion": "7",
                "labels": {"kubernetes.io/hostname": "n-1", "topology.kubernetes.io/zone": "a"},
                "managedFields": [{"manager": "kubelet", "operation": "Update",
                    "apiVersion": "v1", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:status": {"f:allocatable": {"f:cpu": {}}}}}]},
            "spec": {"unschedulable": true, "taints": [{"key": "gpu", "value": "true",
                "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"},
                "images": [{"names": ["nginx:1.27"], "sizeBytes": 70000000}],
                "conditions": [{"type": "Ready", "status": "True"}]}
        });
        let text = serde_json::to_vec(&node).unwrap();
        let full: Node = serde_json::from_slice(&text).unwrap();
        let Lean(lean): Lean<Node> = serde_json::from_slice(&text).unwrap();
        let mut expected = full.clone();
        expected.metadata.managed_fields = None;
        assert_eq!(lean, expected);
        assert_eq!(NodeFingerprint::of(&lean), NodeFingerprint::of(&full));
    }

    #[test]
    fn an_item_without_metadata_or_spec_decodes_to_defaults() {
        let Lean(pod): Lean<Pod> = serde_json::from_value(json!({"status": null})).unwrap();
        assert_eq!(pod, Pod::default());
    }

    #[test]
    fn a_malformed_field_is_still_an_error() {
        let err = serde_json::from_value::<Lean<Pod>>(json!({"metadata": {"labels": 3}}))
            .unwrap_err()
            .to_string();
        assert!(err.contains("map"), "{err}");
    }
}
