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
//! Not done yet: creating that claim in the API server (PreBind), writing the pod's
//! `status.extendedResourceClaimStatus`, and deleting a stale claim from an earlier attempt.
//! So a node where DRA would have to provide the devices is rejected with
//! [`EXTENDED_CLAIM_NOT_WRITTEN`] after the allocator found them, never bound without them;
//! nodes that advertise the resource (device plugins) are used as before.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use crate::framework::{CycleState, Status};
use crate::types::dra::extended::{
    RequestMapping, is_dra_extended_resource_name, requests_and_mappings, special_claim,
};
use crate::types::dra::{DraObjects, ResourceClaimInfo};
use crate::types::{NodeInfo, PodInfo};

use super::allocator::{AllocError, Allocator};

/// Filter: the pod asks for an extended resource the node neither advertises nor has a
/// DeviceClass for (upstream's "cannot fit resource").
pub const CANNOT_FIT_RESOURCE: &str = "cannot fit resource";
/// Filter: devices for the pod's DRA-backed extended resources were found on the node, but
/// ferrosched does not create the claim that would hold them yet, so it does not bind there.
pub const EXTENDED_CLAIM_NOT_WRITTEN: &str = "extended resources backed by DRA need a \
     ResourceClaim ferrosched cannot create yet (request the devices with a ResourceClaim, \
     or advertise the resource with a device plugin)";

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
    allocators: Mutex<HashMap<Vec<String>, (Arc<Allocator>, Arc<Vec<RequestMapping>>)>>,
}

/// One node's claim for the pod's extended resources.
pub(crate) struct NodeClaim {
    /// The pod's claims to allocate followed by the extended resource claim.
    pub(crate) allocator: Arc<Allocator>,
    #[allow(dead_code)] // written into the pod's status once the claim is created
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
            })
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
    pub(crate) fn node_claim(
        &self,
        pod: &PodInfo,
        node: &NodeInfo,
        objects: &DraObjects,
        claims: &[Arc<ResourceClaimInfo>],
    ) -> Result<Option<NodeClaim>, Status> {
        let needed = self.needed_on(node)?;
        if needed.is_empty() {
            return Ok(None);
        }
        let mut cache = self.allocators.lock().unwrap_or_else(|e| e.into_inner());
        let (allocator, mappings) = cache
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
                all.push(Arc::new(special_claim(pod.namespace(), &requests)));
                (Arc::new(Allocator::new(objects, all)), Arc::new(mappings))
            })
            .clone();
        Ok(Some(NodeClaim {
            allocator,
            mappings,
        }))
    }
}

/// Filter's extended resource part: Some(status) decides the node (DRA would have to provide
/// devices there), None leaves it to the rest of Filter.
pub(crate) fn filter(
    ext: &ExtendedState,
    pod: &PodInfo,
    node: &NodeInfo,
    objects: &DraObjects,
    pending: &[Arc<ResourceClaimInfo>],
) -> Option<Status> {
    let nc = match ext.node_claim(pod, node, objects, pending) {
        Ok(Some(nc)) => nc,
        Ok(None) => return None,
        Err(s) => return Some(s),
    };
    Some(match nc.allocator.allocate(&node.name, &node.labels) {
        Ok(Some(_)) => Status::unresolvable(EXTENDED_CLAIM_NOT_WRITTEN),
        Ok(None) => Status::unresolvable(super::CANNOT_ALLOCATE_ALL_CLAIMS),
        Err(AllocError::Fatal(m)) => Status::error(m),
        Err(AllocError::Node(m)) => Status::unresolvable(m),
    })
}

#[cfg(test)]
#[path = "extended_tests.rs"]
mod tests;
