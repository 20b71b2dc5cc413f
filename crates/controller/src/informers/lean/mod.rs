//! What the pod and node informers decode: of each object only what the scheduler reads,
//! and never `metadata.managedFields`.
//!
//! A real API server attaches managedFields to every object it stores and so to every watch
//! event and list item: one entry per writer, each a tree of `f:`/`k:` keys as long as the
//! fields it owns. Decoded, that tree is hundreds of small allocations per event that no
//! scheduler reads. [`Lean<K>`] skips it while parsing (serde passes over the key without
//! building anything). Of a Pod it also skips every spec and status field no consumer reads
//! (see [`pod`]), and of a Node the status a kubelet reports beyond what scheduling reads
//! (see [`node`]). The views built from a lean object are the ones a full decode gives (see
//! the tests).

mod node;
mod pod;

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
    type Spec = pod::Spec;
    type Status = pod::Status;
    fn assemble(metadata: ObjectMeta, spec: Option<pod::Spec>, status: Option<pod::Status>) -> Pod {
        Pod {
            metadata,
            spec: spec.map(PodSpec::from),
            status: status.map(PodStatus::from),
        }
    }
}

impl SpecAndStatus for Node {
    type Spec = node::Spec;
    type Status = node::Status;
    fn assemble(
        metadata: ObjectMeta,
        spec: Option<node::Spec>,
        status: Option<node::Status>,
    ) -> Node {
        Node {
            metadata,
            spec: spec.map(NodeSpec::from),
            status: status.map(NodeStatus::from),
        }
    }
}

/// ObjectMeta field for field, but for `managedFields` (ignored as an unknown key).
#[derive(Default, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
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
mod tests;
