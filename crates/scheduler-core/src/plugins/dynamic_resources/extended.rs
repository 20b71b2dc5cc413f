//! DynamicResources' side of extended resources backed by DRA (upstream
//! `extendeddynamicresources.go`; the pure parts are in [`crate::types::dra::extended`]).
//!
//! - PreFilter: the pod asks for an extended resource some DeviceClass backs
//!   ([`ExtendedState::new`]); the framework marked the cycle ([`mark_handled`]) so
//!   NodeResourcesFit does not check such a resource on nodes without allocatable for it.
//! - Filter: per node, the resources the node does not advertise (allocatable 0) must come
//!   from DRA: one claim for the pod, with a request per container (upstream's request names
//!   and mappings), allocated together with the pod's other claims ([`ExtendedState::node_claim`]).
//!
//! - Reserve: the chosen node's claim becomes a [`ClaimStatusWrite`] with `create` set; the
//!   controller creates the claim, writes its allocation and reservation, and the pod's
//!   `status.extendedResourceClaimStatus`, before the Binding (`binding/claims.rs`).
//!
//! A claim an earlier attempt created and left behind (the controller deletes the claim of
//! a failed binding, so only a crash in between leaves one): as upstream, PreFilter finds
//! it (annotated, controlled by the pod), Filter refuses every node with
//! [`CANNOT_SCHEDULE_EXTENDED_CLAIM`] (its allocation may be stale), and PostFilter decides
//! its deletion ([`DELETION_COMPLETED`]); the deletion retries the pod, which then gets a
//! new claim.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use crate::framework::{CycleState, Status};
use k8s_openapi::api::resource::v1 as dra;

use crate::types::dra::extended::{
    ExtendedClaimCreate, ExtendedDeviceRequest, RequestMapping, SPECIAL_CLAIM_NAME,
    is_dra_extended_resource_name, requests_and_mappings, special_claim,
};
use crate::types::dra::{
    ClaimDeallocation, ClaimStatusWrite, ConsumerRef, DraObjects, ResourceClaimInfo,
};
use crate::types::{NodeInfo, PodInfo};

use super::allocator::Allocator;
use super::device_index::IndexCache;

/// Filter: the pod asks for an extended resource the node neither advertises nor has a
/// DeviceClass for (upstream's "cannot fit resource").
pub const CANNOT_FIT_RESOURCE: &str = "cannot fit resource";
/// Filter: the pod's extended resource claim from an earlier attempt still exists.
pub const CANNOT_SCHEDULE_EXTENDED_CLAIM: &str = "cannot schedule extended resource claim";
/// PostFilter: that claim is to be deleted.
pub const DELETION_COMPLETED: &str = "deletion of ResourceClaim completed";
/// Set by the framework when the pod's profile runs DynamicResources.
#[derive(Debug, Clone)]
struct Handled;

/// Marks the cycle: DynamicResources runs in this profile and takes DRA-backed extended
/// resources off NodeResourcesFit's hands.
pub(crate) fn mark_handled(state: &mut CycleState) {
    state.write(Handled);
}

/// Whether NodeResourcesFit may leave DRA-backed extended resources to DynamicResources.
pub fn dra_handles_extended_resources(state: &CycleState) -> bool {
    state.read::<Handled>().is_some()
}

/// What PreFilter found about the pod's extended resources.
#[derive(Debug)]
pub(crate) struct ExtendedState {
    /// Every DRA-style extended resource the pod asks for, with the class backing it.
    resources: Vec<(String, Option<String>)>,
    /// Allocators per set of resources DRA must provide (nodes differ in what they
    /// advertise, so the claim differs), with the claim's mappings.
    allocators: Mutex<HashMap<Vec<String>, NodeClaim>>,
    /// Filter's result per node: the claim's requests, mappings and allocation.
    by_node: Mutex<HashMap<String, (NodeClaim, dra::AllocationResult)>>,
    /// The pod's extended resource claim an earlier attempt created (upstream
    /// `findExtendedResourceClaim`).
    pub(crate) left_over: Option<Arc<ResourceClaimInfo>>,
    /// PostFilter decided to delete `left_over`.
    delete: Mutex<Option<ClaimDeallocation>>,
}

/// One node's claim for the pod's extended resources.
#[derive(Debug, Clone)]
pub(crate) struct NodeClaim {
    /// The pod's claims to allocate followed by the extended resource claim.
    pub(crate) allocator: Arc<Allocator>,
    pub(crate) requests: Arc<Vec<ExtendedDeviceRequest>>,
    pub(crate) mappings: Arc<Vec<RequestMapping>>,
}

impl ExtendedState {
    /// None when no class backs any extended resource the pod asks for (upstream
    /// `hasDeviceClassMappedExtendedResource`).
    pub(crate) fn new(pod: &PodInfo, objects: &DraObjects) -> Option<Self> {
        let resources: Vec<(String, Option<String>)> = pod
            .requests
            .scalar
            .iter()
            .filter(|(n, q)| *q != 0 && is_dra_extended_resource_name(n))
            .map(|(n, _)| {
                let class = objects
                    .class_for_extended_resource(n)
                    .map(|c| c.name.clone());
                (n.to_string(), class)
            })
            .collect();
        resources
            .iter()
            .any(|(_, c)| c.is_some())
            .then(|| ExtendedState {
                resources,
                allocators: Mutex::default(),
                by_node: Mutex::default(),
                left_over: left_over_claim(pod, objects),
                delete: Mutex::default(),
            })
    }

    /// Filter: with a claim left by an earlier attempt no node fits until it is deleted.
    pub(crate) fn refuse_left_over(&self) -> Option<Status> {
        self.left_over
            .as_ref()
            .map(|_| Status::unschedulable(CANNOT_SCHEDULE_EXTENDED_CLAIM))
    }

    /// PostFilter: decides the deletion of the claim left by an earlier attempt, if any.
    pub(crate) fn delete_left_over(&self) -> Option<Status> {
        let c = self.left_over.as_ref()?;
        *self.delete.lock().unwrap_or_else(|e| e.into_inner()) = Some(ClaimDeallocation {
            namespace: c.namespace.clone(),
            name: c.name.clone(),
            uid: c.uid.clone(),
            resource_version: c.resource_version.clone(),
            delete: true,
        });
        Some(Status::unschedulable(DELETION_COMPLETED))
    }

    /// The deletion PostFilter decided.
    pub(crate) fn decided_deletion(&self) -> Option<ClaimDeallocation> {
        self.delete
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The resources DRA must provide on `node`: backed by a class and not advertised
    /// there. A resource neither advertised nor backed fails the node.
    fn needed_on(&self, node: &NodeInfo) -> Result<Vec<String>, Status> {
        let mut needed = Vec::new();
        for (name, class) in &self.resources {
            let advertised = node
                .allocatable
                .scalar
                .iter()
                .find(|(n, _)| **n == **name)
                .map(|(_, v)| *v);
            match (class, advertised) {
                (Some(_), None | Some(0)) => needed.push(name.clone()),
                (None, None) => return Err(Status::unschedulable(CANNOT_FIT_RESOURCE)),
                _ => {}
            }
        }
        Ok(needed)
    }

    /// The allocator for `node` when DRA must provide some of the pod's extended resources
    /// there (None: nothing to provide). `claims` are the pod's claims not allocated yet.
    pub(super) fn node_claim(
        &self,
        pod: &PodInfo,
        node: &NodeInfo,
        objects: &DraObjects,
        index: &IndexCache,
        claims: &[Arc<ResourceClaimInfo>],
    ) -> Result<Option<NodeClaim>, Status> {
        let needed = self.needed_on(node)?;
        if needed.is_empty() {
            return Ok(None);
        }
        let mut cache = self.allocators.lock().unwrap_or_else(|e| e.into_inner());
        let nc = cache
            .entry(needed.clone())
            .or_insert_with(|| {
                let set: BTreeSet<&str> = needed.iter().map(String::as_str).collect();
                let class_of = |r: &str| {
                    self.resources
                        .iter()
                        .find(|(n, _)| n == r)
                        .and_then(|(_, c)| c.clone())
                };
                let (requests, mappings) =
                    requests_and_mappings(&pod.extended_requests, &set, class_of);
                let mut all = claims.to_vec();
                let mut special = special_claim(pod.namespace(), &requests);
                // Keeps the share IDs of different pods' claims apart.
                special.owner_pod_uid = Some(pod.uid.clone());
                all.push(Arc::new(special));
                NodeClaim {
                    allocator: Arc::new(Allocator::with_index(index.get(objects), objects, all)),
                    requests: Arc::new(requests),
                    mappings: Arc::new(mappings),
                }
            })
            .clone();
        Ok(Some(nc))
    }

    /// Filter found the claim's devices on `node` (the last allocation result).
    pub(crate) fn record(&self, node: &str, nc: NodeClaim, result: dra::AllocationResult) {
        self.by_node
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(node.to_string(), (nc, result));
    }

    /// Reserve: the write creating the claim on the chosen node, if DRA provides some of
    /// the pod's extended resources there.
    pub(crate) fn reserve_write(&self, pod: &PodInfo, node: &str) -> Option<ClaimStatusWrite> {
        let by_node = self.by_node.lock().unwrap_or_else(|e| e.into_inner());
        let (nc, result) = by_node.get(node)?;
        Some(ClaimStatusWrite {
            namespace: pod.namespace().to_string(),
            name: placeholder_name(pod),
            uid: String::new(),
            resource_version: String::new(),
            allocation: Some(result.clone()),
            reserved_for: vec![ConsumerRef::pod(pod.name(), &pod.uid)],
            add_finalizer: false,
            finalizers: Vec::new(),
            group: None,
            create: Some(Box::new(ExtendedClaimCreate {
                pod_name: pod.name().to_string(),
                pod_uid: pod.uid.clone(),
                requests: nc.requests.to_vec(),
                mappings: nc.mappings.to_vec(),
            })),
        })
    }
}

/// The claim of the pod's extended resources that exists already: annotated, controlled by
/// the pod, and not the one this scheduler is creating right now (assumed under its
/// placeholder until the informer reports it).
fn left_over_claim(pod: &PodInfo, objects: &DraObjects) -> Option<Arc<ResourceClaimInfo>> {
    objects
        .claims
        .values()
        .filter(|c| c.namespace == pod.namespace() && c.for_extended_resources)
        .find(|c| c.owner_pod_uid.as_deref() == Some(pod.uid.as_str()))
        .cloned()
}

/// The key the claim is assumed under until it has a name: not a valid object name, and
/// one per pod.
pub fn placeholder_name(pod: &PodInfo) -> String {
    format!("{SPECIAL_CLAIM_NAME}{}", pod.uid)
}

#[cfg(test)]
#[path = "extended_tests.rs"]
mod tests;
