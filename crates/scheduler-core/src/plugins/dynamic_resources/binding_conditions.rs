//! DynamicResources and device binding conditions (upstream DRADeviceBindingConditions):
//!
//! * Filter: an allocated claim whose device reports a binding failure condition, or that
//!   was allocated longer than `bindingTimeout` ago without all its binding conditions
//!   holding, is unavailable on every node, so PostFilter deallocates it (when nobody else
//!   uses it) and a later attempt allocates anew.
//! * Reserve: when a claim of the pod (allocated now or before) hands out a device with
//!   binding conditions, the decision says so ([`decided_binding_wait`]): the controller's
//!   binding cycle, after writing the claims, waits until every condition is True, fails on
//!   a failure condition and gives up after `bindingTimeout`, before it binds the pod.
//!
//! * The allocator tries pools (and, within a pool, slices) without binding conditions
//!   first ([`binding_pools_last`]).
//!
//! The core only decides; the waiting (and its clock) is the controller's.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::resource::v1 as dra;

use crate::framework::CycleState;
use crate::types::dra::binding::{BindingReadiness, has_binding_conditions};
use crate::types::dra::{ClaimStatusWrite, DraObjects, ResourceClaimInfo};

use super::StateData;
use super::device_index::IndexedSlice;

/// Reason of the Normal event upstream records when PreBind starts waiting.
pub const REASON_BINDING_CONDITIONS_PENDING: &str = "BindingConditionsPending";

/// That event's note.
pub fn waiting_for_binding_conditions(node: &str) -> String {
    format!("waiting for binding conditions for device on node {node}")
}

/// What the binding cycle must wait for before the Binding (Reserve's decision).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingWait {
    /// The pod's claims (namespace, name) whose allocation has devices with binding
    /// conditions, in `spec.resourceClaims` order, then the claim for its DRA-backed
    /// extended resources (the placeholder name of its [`ClaimStatusWrite`]).
    pub claims: Vec<(String, String)>,
    /// `DynamicResourcesArgs.bindingTimeout` of the pod's profile.
    pub timeout: Duration,
}

/// The wait Reserve decided for the pod's node; None: bind without waiting.
pub fn decided_binding_wait(state: &CycleState) -> Option<&BindingWait> {
    state
        .read::<StateData>()
        .and_then(|s| s.binding_wait.as_ref())
}

/// Upstream's Filter check for an allocated claim: a binding failure condition is True, or
/// the binding conditions did not all hold within `timeout` of the allocation.
pub(super) fn unavailable(
    c: &ResourceClaimInfo,
    objects: &DraObjects,
    timeout: Duration,
    now: SystemTime,
) -> bool {
    if !objects.binding_conditions() || c.allocation.is_none() {
        return false;
    }
    let Some(b) = &c.binding else {
        return false;
    };
    match b.readiness {
        BindingReadiness::Failed(_) => true,
        BindingReadiness::Pending => b.timed_out(timeout, now),
        BindingReadiness::Ready => false,
    }
}

/// Reserve's part: the claims whose allocation (the new one in `writes`, else the one they
/// have) has devices with binding conditions, then a claim `writes` creates with such an
/// allocation. None when there are none or the feature is
/// off.
pub(super) fn wait_for(
    claims: &[Arc<ResourceClaimInfo>],
    writes: &[ClaimStatusWrite],
    objects: &DraObjects,
    timeout: Duration,
) -> Option<BindingWait> {
    if !objects.binding_conditions() {
        return None;
    }
    let allocation_of = |c: &ResourceClaimInfo| -> Option<dra::AllocationResult> {
        writes
            .iter()
            .find(|w| w.namespace == c.namespace && w.name == c.name)
            .and_then(|w| w.allocation.clone())
            .or_else(|| c.allocation.as_ref().map(|a| a.raw.clone()))
    };
    let mut claims: Vec<(String, String)> = claims
        .iter()
        .filter(|c| allocation_of(c).is_some_and(|a| has_binding_conditions(&a)))
        .map(|c| (c.namespace.clone(), c.name.clone()))
        .collect();
    // The claim of DRA-backed extended resources, under its placeholder name until the
    // controller creates it.
    claims.extend(
        writes
            .iter()
            .filter(|w| w.create.is_some())
            .filter(|w| w.allocation.as_ref().is_some_and(has_binding_conditions))
            .map(|w| (w.namespace.clone(), w.name.clone())),
    );
    (!claims.is_empty()).then_some(BindingWait { claims, timeout })
}

/// Upstream tries the pools without binding conditions before those with them (a device
/// that needs no attaching wins), each group in the usual pool order, and within a pool the
/// slices without them first. A slice (and its pool) has binding conditions when one of
/// its devices has some (whether or not the feature is on, as upstream's pool gathering).
pub(super) fn binding_pools_last(slices: &mut [&IndexedSlice]) {
    let has = |e: &IndexedSlice| e.slice.devices.iter().any(|d| d.has_binding_conditions());
    let with: HashSet<usize> = slices.iter().filter(|e| has(e)).map(|e| e.pool).collect();
    if !with.is_empty() {
        // Stable: within each group the order stays the pool order, then slice names.
        slices.sort_by_key(|e| (with.contains(&e.pool), e.pool, has(e)));
    }
}

#[cfg(test)]
#[path = "binding_conditions_tests.rs"]
mod tests;
