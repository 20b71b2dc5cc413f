//! DynamicResources (DRA, resource.k8s.io/v1): a pod's `spec.resourceClaims` must be
//! allocated and reserved for the pod before it is bound.
//!
//! Safety floor only, for now: ferrosched does not allocate devices yet, so every pod with
//! resource claims is rejected at PreFilter (UnschedulableAndUnresolvable) with a message
//! saying why. Binding such a pod without its devices would start it on a node that cannot
//! run it. When the profile does not run this plugin at all, the framework rejects the pod
//! itself (see [`disabled_in_profile`]).

use std::sync::Arc;

use crate::cache::Snapshot;
use crate::framework::{
    ActionType, ClusterEvent, CycleState, EventResource, Plugin, PluginPoints, PreFilterPlugin,
    PreFilterResult, Status,
};
use crate::plugin_points;
use crate::types::PodInfo;

use super::names::DYNAMIC_RESOURCES;

/// The API server does not serve resource.k8s.io/v1 (clusters before 1.34, or DRA off).
pub const API_NOT_SERVED: &str = "pod has resource claims but the API server does not serve \
     resource.k8s.io/v1 (DRA); ferrosched cannot allocate devices on this cluster";

/// The cluster serves DRA but ferrosched's allocator is not there yet.
pub const ALLOCATION_NOT_SUPPORTED: &str = "pod has resource claims but ferrosched does not \
     allocate DRA devices yet; schedule this pod with kube-scheduler";

/// The message when the pod's profile does not run DynamicResources.
pub fn disabled_in_profile(profile: &str) -> String {
    format!(
        "pod has resource claims but the DynamicResources plugin is disabled in profile \
         {profile:?}; enable it or use a profile that runs it"
    )
}

pub struct DynamicResources;

impl Plugin for DynamicResources {
    fn name(&self) -> &'static str {
        DYNAMIC_RESOURCES
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => pre_filter)
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        // As upstream: a claim appearing or being allocated, new devices, or a class change
        // may let the pod through.
        vec![
            ClusterEvent::new(
                EventResource::ResourceClaim,
                ActionType::ADD | ActionType::UPDATE,
            ),
            ClusterEvent::new(
                EventResource::ResourceSlice,
                ActionType::ADD | ActionType::UPDATE,
            ),
            ClusterEvent::new(
                EventResource::DeviceClass,
                ActionType::ADD | ActionType::UPDATE,
            ),
        ]
    }
}

impl PreFilterPlugin for DynamicResources {
    fn pre_filter(
        &self,
        _state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        if pod.resource_claims.is_empty() {
            return (None, Status::skip());
        }
        let msg = if snapshot.dra_api_served() {
            ALLOCATION_NOT_SUPPORTED
        } else {
            API_NOT_SERVED
        };
        (None, Status::unresolvable(msg))
    }
}

#[cfg(test)]
mod tests;
