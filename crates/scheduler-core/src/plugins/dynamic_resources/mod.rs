//! DynamicResources (DRA, resource.k8s.io/v1, upstream `dynamicresources`): a pod's
//! `spec.resourceClaims` must be allocated and reserved for the pod before it is bound.
//!
//! - PreEnqueue: a claim from a ResourceClaimTemplate that the pod's status does not name yet
//!   keeps the pod waiting (the pod update naming it retries it).
//! - PreFilter: every claim must exist, not be deleting, belong to the pod (template claims),
//!   not be reserved by 256 others, not be mid-allocation by another pod; every class a
//!   request names must exist. Claims not allocated yet get an [`allocator::Allocator`].
//! - Filter: an allocated claim's node selector must admit the node; the allocator must find
//!   devices on the node for all unallocated claims (kept per node for Reserve).
//! - Reserve records, for the chosen node, the claim status writes: `status.allocation` for
//!   claims the scheduler allocated and the pod appended to `status.reservedFor`, each with
//!   the claim's resourceVersion as precondition. PreBind makes no API call: the controller
//!   reads [`decided_claim_writes`] and carries them out before the Binding; the cache
//!   assumes them meanwhile (`DraObjects::assume_claim_writes`), so no other pod gets the
//!   same devices.
//! - PostFilter (no node fits): a claim allocated for nodes Filter found unsuitable and
//!   reserved for nobody else is picked for deallocation ([`decided_deallocation`]); the
//!   controller clears its `status.allocation` and `status.reservedFor` (resourceVersion
//!   precondition), and the claim update retries the pod. Upstream picks one such claim at
//!   random; we take the first in `spec.resourceClaims` order. Runs before DefaultPreemption,
//!   whose nomination it leaves alone.
//! - Preemption: a victim's claims reserved only for it free their devices in the attempt.
//! - PodGroup claims (DRAWorkloadResourceClaims, [`DraObjects::workload_claims`]): a pod's
//!   entry matching an entry of its Workload API PodGroup's `spec.resourceClaims` (same name,
//!   same claim or template) is the group's claim: a template's claim is the one the group's
//!   `status.resourceClaimStatuses` names (missing: the pod waits for kube-controller-manager
//!   to make it), owned by the PodGroup. It is reserved for the PodGroup, one
//!   `reservedFor` entry for all of its pods, and a claim reserved for a pod's PodGroup counts
//!   as reserved for the pod. In a group cycle the first member allocates it and the cache
//!   assumes the allocation with the group's reservation; the next members reuse that
//!   allocation (its node selector still filters their nodes) and their decisions share
//!   the write ([`GroupWrite`]), which the controller carries out once.
//!
//! Without the plugin in the pod's profile the framework rejects such a pod itself (see
//! [`disabled_in_profile`]). Partitionable devices (shared counters) are the allocator's
//! (`counters.rs`, the pools' counter sets kept in the shared device index); extended
//! resources backed by DRA are [`extended`]'s (decided in Filter, the claim not written
//! yet). Score prefers nodes where earlier `firstAvailable` subrequests are satisfied;
//! Filter's search per node stops at `filterTimeout`. DeviceTaintRules reach the allocator
//! as taints in the slices (`types/dra/taint_rules.rs`). Device binding conditions are
//! [`binding_conditions`]'s (Filter's check of allocated claims, Reserve's wait decision;
//! the controller waits). Consumable capacity (devices with `allowMultipleAllocations`
//! handing out shares, `types/dra/capacity.rs`) and counter compatibility groups are the
//! allocator's; the cache sums the shares' consumption per device (`DraObjects::shared`).
//! A victim of preemption frees its whole devices and its shares in the attempt.

pub mod allocator;
pub mod binding_conditions;
mod device_index;
pub mod extended;
pub mod extended_score;
mod hints;

use crate::framework::Signing;
use crate::plugins::helper::{default_normalize_score, default_normalize_values, sign};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::config::PluginArgs;

use k8s_openapi::api::resource::v1 as dra;

use crate::cache::Snapshot;
use crate::framework::FeasibleNodes;
use crate::framework::{
    ActionType, ClusterEvent, Code, CycleState, EventResource, FilterPlugin, MAX_NODE_SCORE,
    NodeScore, Plugin, PluginPoints, PostFilterContext, PostFilterPlugin, PostFilterResult,
    PreBindPlugin, PreEnqueuePlugin, PreFilterPlugin, PreFilterResult, ReservePlugin, ScorePlugin,
    Status,
};
use crate::plugin_points;
use crate::types::dra::cel::Deadline;
use crate::types::dra::{
    CLAIM_FINALIZER, ClaimDeallocation, ClaimRequest, ClaimStatusWrite, ConsumerRef, DeviceId,
    DraObjects, GroupWrite, PodClaimSource, ResourceClaimInfo,
};
use crate::types::pod_group::{GroupApi, GroupClaimSource, PodGroupInfo};
use crate::types::{NodeInfo, PodInfo};

use self::allocator::{AllocError, Allocator};
use super::names::DYNAMIC_RESOURCES;

/// The API server does not serve resource.k8s.io/v1 (clusters before 1.34, or DRA off).
pub const API_NOT_SERVED: &str = "pod has resource claims but the API server does not serve \
     resource.k8s.io/v1 (DRA); ferrosched cannot allocate devices on this cluster";
/// Filter: the allocator found no devices on the node for all claims.
pub const CANNOT_ALLOCATE_ALL_CLAIMS: &str = "cannot allocate all claims";
/// Filter: an allocated claim's devices are not reachable from the node.
pub const NOT_AVAILABLE_ON_NODE: &str = "resourceclaim not available on the node";
/// Filter: the search for devices on one node ran past `filterTimeout`.
pub const FILTER_TIMED_OUT: &str = "timed out trying to allocate devices";
/// PreFilter: the claim is allocated and reserved for 256 other consumers already.
pub const CLAIM_IN_USE: &str = "resourceclaim in use";
/// PostFilter: a claim allocated for unsuitable nodes is to be deallocated.
pub const DEALLOCATION_COMPLETED: &str = "deallocation of ResourceClaim completed";
/// PostFilter: no allocated claim the pod could not use may be deallocated.
pub const STILL_NOT_SCHEDULABLE: &str = "still not schedulable";
/// PostFilter: the attempt found no claims of the pod (PreFilter rejected it or none exist).
pub const NO_NEW_CLAIMS_TO_DEALLOCATE: &str = "no new claims to deallocate";

/// The message when the pod's profile does not run DynamicResources.
pub fn disabled_in_profile(profile: &str) -> String {
    format!(
        "pod has resource claims but the DynamicResources plugin is disabled in profile \
         {profile:?}; enable it or use a profile that runs it"
    )
}

/// PreEnqueue: the template's claim is not named in the pod's status yet.
pub fn claim_not_created_yet(pod: &PodInfo) -> String {
    format!(
        "pod \"{}/{}\": ResourceClaim not created yet",
        pod.namespace(),
        pod.name()
    )
}

/// A `spec.resourceClaims` entry with neither a claim nor a template.
pub fn claim_reference_unsupported(pod: &PodInfo) -> String {
    format!(
        "pod \"{}/{}\": resource claim reference not supported",
        pod.namespace(),
        pod.name()
    )
}

pub fn claim_not_found(name: &str) -> String {
    format!("resourceclaim.resource.k8s.io {name:?} not found")
}

pub fn claim_being_deleted(name: &str) -> String {
    format!("resourceclaim {name:?} is being deleted")
}

pub fn claim_not_for_pod(claim: &ResourceClaimInfo, pod: &PodInfo) -> String {
    format!(
        "ResourceClaim {}/{} was not created for pod {}/{} (pod is not owner)",
        claim.namespace,
        claim.name,
        pod.namespace(),
        pod.name()
    )
}

/// A pod's own template claim owned neither by it nor by its PodGroup (PodGroup claims on).
pub fn claim_not_for_pod_or_group(claim: &ResourceClaimInfo, pod: &PodInfo, group: &str) -> String {
    format!(
        "ResourceClaim {}/{} was not created for Pod {}/{} (neither Pod nor PodGroup {group} is the owner)",
        claim.namespace,
        claim.name,
        pod.namespace(),
        pod.name()
    )
}

/// The claim a PodGroup's status names for its template entry is not the group's.
pub fn claim_not_for_pod_group(claim: &ResourceClaimInfo, group: &PodGroupInfo) -> String {
    format!(
        "ResourceClaim {}/{} was not created for PodGroup {}/{} (PodGroup is not owner)",
        claim.namespace, claim.name, group.key.namespace, group.key.name
    )
}

/// The pod's entry matches its PodGroup's template entry, but the group's status does not
/// name the claim kube-controller-manager makes for it yet.
pub fn group_claim_not_created_yet(group: &PodGroupInfo) -> String {
    format!(
        "PodGroup {}/{}: ResourceClaim not created yet",
        group.key.namespace, group.key.name
    )
}

pub fn claim_allocation_in_flight(claim: &ResourceClaimInfo) -> String {
    format!(
        "resource claim {}/{} is in the process of being allocated",
        claim.namespace, claim.name
    )
}

pub fn device_class_missing(request: &str, class: &str) -> String {
    format!("request {request}: device class {class} does not exist")
}

pub fn unknown_request_type(claim: &ResourceClaimInfo, request: &str) -> String {
    format!(
        "resource claim {}/{}, request {request}: unknown request type",
        claim.namespace, claim.name
    )
}

pub struct DynamicResources {
    /// The device index of the latest snapshot's slices, shared by the pods' allocators.
    index: device_index::IndexCache,
    /// `DynamicResourcesArgs.filterTimeout`: how long Filter may search one node (None: no
    /// limit, upstream's `0s`).
    filter_timeout: Option<Duration>,
    /// The clock the time limit is measured with (a fake one in tests).
    now: fn() -> Instant,
    /// `DynamicResourcesArgs.bindingTimeout`: how long after its allocation a claim may
    /// wait for its devices' binding conditions.
    binding_timeout: Duration,
    /// The wall clock allocation timestamps are compared with (a fake one in tests).
    wall: fn() -> SystemTime,
}

impl Default for DynamicResources {
    /// Upstream's defaults: a 10s limit per node.
    fn default() -> Self {
        DynamicResources {
            index: Default::default(),
            filter_timeout: Some(crate::config::DEFAULT_DRA_FILTER_TIMEOUT),
            now: Instant::now,
            binding_timeout: crate::config::DEFAULT_DRA_BINDING_TIMEOUT,
            wall: SystemTime::now,
        }
    }
}

impl DynamicResources {
    pub fn factory(args: Option<&PluginArgs>) -> Result<Arc<dyn Plugin>, String> {
        Ok(Arc::new(Self::from_args(args)))
    }

    /// Reads `filterTimeout` (`0s`: no limit); no args: upstream's default.
    pub fn from_args(args: Option<&PluginArgs>) -> Self {
        let mut p = DynamicResources::default();
        if let Some(PluginArgs::DynamicResources(a)) = args {
            p.filter_timeout = Some(a.filter_timeout).filter(|t| !t.is_zero());
            p.binding_timeout = a.binding_timeout;
        }
        p
    }

    #[cfg(test)]
    fn with_timeout(filter_timeout: Option<Duration>, now: fn() -> Instant) -> Self {
        DynamicResources {
            filter_timeout,
            now,
            ..Default::default()
        }
    }
}

impl Plugin for DynamicResources {
    /// Signature for opportunistic batching (upstream `SignPod`).
    fn sign_pod(&self, pod: &PodInfo) -> Option<Signing> {
        if pod.resource_claims.is_empty() {
            sign::with(Vec::new())
        } else {
            Some(Signing::Unsignable(
                "pods with resource claims are not signable",
            ))
        }
    }
    fn name(&self) -> &'static str {
        DYNAMIC_RESOURCES
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => pre_enqueue, pre_filter, filter, post_filter, score, reserve, pre_bind)
    }
    /// Upstream's registrations: a node appearing or relabelled, a claim created, changed
    /// (allocated, deallocated, reserved) or deleted (its devices are free; the claim of
    /// the pod's extended resources left by an earlier attempt is gone), the pod's status
    /// naming its generated claim, a class or a slice created or changed.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        let add_update = ActionType::ADD | ActionType::UPDATE;
        vec![
            ClusterEvent::new(
                EventResource::Node,
                ActionType::ADD
                    | ActionType::UPDATE_NODE_LABEL
                    | ActionType::UPDATE_NODE_TAINT
                    | ActionType::UPDATE_NODE_ALLOCATABLE,
            ),
            ClusterEvent::new(
                EventResource::ResourceClaim,
                add_update | ActionType::DELETE,
            ),
            ClusterEvent::new(
                EventResource::UnscheduledPod,
                ActionType::UPDATE_POD_GENERATED_RESOURCE_CLAIM,
            ),
            ClusterEvent::new(EventResource::DeviceClass, add_update),
            ClusterEvent::new(EventResource::ResourceSlice, add_update),
            // kube-controller-manager naming the claim it made for the group's template.
            ClusterEvent::new(EventResource::PodGroup, add_update),
        ]
    }

    fn queueing_hint(
        &self,
        pod: &PodInfo,
        _event: &ClusterEvent,
        objects: &crate::framework::EventObjects<'_>,
    ) -> crate::framework::QueueingHint {
        hints::hint(pod, objects)
    }
}

impl PreEnqueuePlugin for DynamicResources {
    /// A template entry the pod's status does not name yet keeps the pod waiting, unless the
    /// pod names a Workload API PodGroup: the entry may be the group's claim, whose name
    /// comes from the group's status, which PreFilter reads.
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        let in_workload_group = pod
            .pod_group
            .as_deref()
            .is_some_and(|g| g.api == GroupApi::Workload);
        for c in &pod.resource_claims {
            match c.source {
                PodClaimSource::NotCreatedYet if !in_workload_group => {
                    return Status::unresolvable(claim_not_created_yet(pod));
                }
                PodClaimSource::Unsupported => {
                    return Status::unresolvable(claim_reference_unsupported(pod));
                }
                _ => {}
            }
        }
        Status::success()
    }
}

/// What one attempt knows about the pod's claims.
#[derive(Clone, Debug)]
struct StateData {
    objects: DraObjects,
    /// The pod's claims, in `spec.resourceClaims` order (entries needing no claim left out).
    claims: Vec<Arc<ResourceClaimInfo>>,
    /// Per claim: its PodGroup's claim, reserved for [`Self::group`].
    for_group: Vec<bool>,
    /// The pod's PodGroup as consumer, when it has claims (DRAWorkloadResourceClaims).
    group: Option<ConsumerRef>,
    /// For the claims not allocated yet; shared until preemption changes what is free.
    allocator: Option<Arc<Allocator>>,
    /// Filter's results per node, for Reserve (Filter runs in parallel).
    by_node: Arc<Mutex<HashMap<String, Vec<dra::AllocationResult>>>>,
    /// What Reserve decided for the chosen node.
    reserved: Option<Vec<ClaimStatusWrite>>,
    /// Indices (into `claims`) of allocated claims whose node selector refused a node on
    /// which the allocator succeeded (Filter, in parallel), for PostFilter.
    unavailable: Arc<Mutex<std::collections::BTreeSet<usize>>>,
    /// PostFilter's pick, for the controller.
    deallocate: Arc<Mutex<Option<ClaimDeallocation>>>,
    /// The pod asks for extended resources a DeviceClass backs.
    extended: Option<Arc<extended::ExtendedState>>,
    /// Reserve's decision: the binding cycle waits for these claims' binding conditions.
    binding_wait: Option<binding_conditions::BindingWait>,
}

/// The claim PostFilter decided to deallocate, for the controller to carry out (with its
/// resourceVersion as precondition) when the attempt failed.
pub fn decided_deallocation(state: &CycleState) -> Option<ClaimDeallocation> {
    state.read::<StateData>().and_then(|s| {
        s.deallocate
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .or_else(|| s.extended.as_ref()?.decided_deletion())
    })
}

/// The claim status writes Reserve decided for the pod's node, for the controller to carry
/// out (in order) before the Binding. None or empty: nothing to write (no claims, or every
/// claim already reserved for the pod).
pub fn decided_claim_writes(state: &CycleState) -> Option<&[ClaimStatusWrite]> {
    state
        .read::<StateData>()
        .and_then(|s| s.reserved.as_deref())
        .filter(|w| !w.is_empty())
}

fn missing_state() -> Status {
    Status::error("reading DynamicResources state: not found")
}

/// The name of the Workload API PodGroup the pod belongs to, when PodGroup claims are on:
/// a claim reserved for it counts as reserved for the pod (upstream `IsReservedForPod`).
fn workload_group_name<'a>(pod: &'a PodInfo, objects: &DraObjects) -> Option<&'a str> {
    pod.pod_group
        .as_deref()
        .filter(|g| g.api == GroupApi::Workload && objects.workload_claims())
        .map(|g| g.name.as_str())
}

/// Whether the claim is reserved for the pod, or for its PodGroup.
fn reserved_for_pod(c: &ResourceClaimInfo, pod: &PodInfo, group: Option<&str>) -> bool {
    c.is_reserved_for(&pod.uid) || group.is_some_and(|g| c.is_reserved_for_pod_group(g))
}

/// A pod's claims as PreFilter resolves them.
struct PodClaims {
    claims: Vec<Arc<ResourceClaimInfo>>,
    /// Per claim: the claim is its PodGroup's.
    for_group: Vec<bool>,
    /// The pod's PodGroup, when it has claims and PodGroup claims are on.
    group: Option<Arc<PodGroupInfo>>,
}

/// The claims a pod's entries resolve to now (its PodGroup's for matching entries); entries
/// that do not resolve are left out.
pub fn resolved_claims(pod: &PodInfo, objects: &DraObjects) -> Vec<Arc<ResourceClaimInfo>> {
    match pod_claims(pod, objects) {
        Ok(c) => c.claims,
        Err(_) => pod
            .resource_claims
            .iter()
            .filter_map(|c| match &c.source {
                PodClaimSource::Claim(n) | PodClaimSource::Generated(Some(n)) => {
                    objects.claim(pod.namespace(), n).cloned()
                }
                _ => None,
            })
            .collect(),
    }
}

/// Who must own a claim made from a template.
enum Owner {
    None,
    /// The pod (or, PodGroup claims on, its PodGroup: upstream `IsForPod`).
    Pod,
    /// The pod's PodGroup (a group template claim).
    Group,
}

/// The claims of a pod as PreFilter resolves them (also used for preemption victims and
/// hints). An entry matching its PodGroup's is the group's claim: for a template, the one
/// the group's status names.
fn pod_claims(pod: &PodInfo, objects: &DraObjects) -> Result<PodClaims, String> {
    let group_name = workload_group_name(pod, objects);
    let group = group_name.and_then(|g| objects.pod_group(pod.namespace(), g));
    let mut out = PodClaims {
        claims: Vec::new(),
        for_group: Vec::new(),
        group: group.cloned(),
    };
    for c in &pod.resource_claims {
        let entry = group.and_then(|g| {
            g.matching_claim(&c.name, c.claim_name(), c.template.as_deref())
                .map(|e| (g, e))
        });
        let (name, owner) = match entry {
            Some((_, e)) if matches!(e.source, GroupClaimSource::Claim(_)) => {
                let GroupClaimSource::Claim(n) = &e.source else {
                    unreachable!()
                };
                (n, Owner::None)
            }
            Some((g, e)) => match g.claim_statuses.get(&e.name) {
                None => return Err(group_claim_not_created_yet(g)),
                Some(None) => continue,
                Some(Some(n)) => (n, Owner::Group),
            },
            None => match &c.source {
                PodClaimSource::Claim(n) => (n, Owner::None),
                PodClaimSource::Generated(Some(n)) => (n, Owner::Pod),
                PodClaimSource::Generated(None) => continue,
                PodClaimSource::NotCreatedYet => return Err(claim_not_created_yet(pod)),
                PodClaimSource::Unsupported => return Err(claim_reference_unsupported(pod)),
            },
        };
        let Some(claim) = objects.claim(pod.namespace(), name) else {
            return Err(claim_not_found(name));
        };
        if claim.deleting {
            return Err(claim_being_deleted(name));
        }
        match owner {
            Owner::None => {}
            Owner::Pod => {
                let by_pod = claim.owner_pod_uid.as_deref() == Some(pod.uid.as_str());
                match group_name {
                    _ if by_pod => {}
                    Some(g) if claim.owner_pod_group.as_deref() == Some(g) => {}
                    Some(g) => return Err(claim_not_for_pod_or_group(claim, pod, g)),
                    None => return Err(claim_not_for_pod(claim, pod)),
                }
            }
            Owner::Group => {
                let g = group.expect("a group entry matched");
                if claim.owner_pod_group.as_deref() != Some(g.key.name.as_str()) {
                    return Err(claim_not_for_pod_group(claim, g));
                }
            }
        }
        out.claims.push(claim.clone());
        out.for_group.push(entry.is_some());
    }
    Ok(out)
}

fn check_classes(claim: &ResourceClaimInfo, objects: &DraObjects) -> Result<(), Status> {
    let check = |request: &str, class: &str| {
        if class.is_empty() {
            return Err(Status::error(format!(
                "request {request}: unsupported request type"
            )));
        }
        if objects.class(class).is_none() {
            return Err(Status::unresolvable(device_class_missing(request, class)));
        }
        Ok(())
    };
    for r in &claim.requests {
        match r {
            ClaimRequest::Exactly(s) => check(&s.name, &s.device_class_name)?,
            ClaimRequest::FirstAvailable { name, subrequests } => {
                for s in subrequests {
                    check(&format!("{name}/{}", s.name), &s.device_class_name)?;
                }
            }
            ClaimRequest::Unknown { name } => {
                return Err(Status::unresolvable(unknown_request_type(claim, name)));
            }
        }
    }
    Ok(())
}

impl PreFilterPlugin for DynamicResources {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let ext = (pod.extended_requests.is_set()
            && snapshot.dra_api_served()
            && extended::dra_handles_extended_resources(state))
        .then(|| extended::ExtendedState::new(pod, snapshot.dra()))
        .flatten()
        .map(Arc::new);
        if pod.resource_claims.is_empty() && ext.is_none() {
            return (None, Status::skip());
        }
        if !snapshot.dra_api_served() {
            return (None, Status::unresolvable(API_NOT_SERVED));
        }
        let objects = snapshot.dra();
        let PodClaims {
            claims,
            for_group,
            group,
        } = match pod_claims(pod, objects) {
            Ok(c) => c,
            Err(m) => return (None, Status::unresolvable(m)),
        };
        if claims.is_empty() && ext.is_none() {
            return (None, Status::skip());
        }
        let group_name = workload_group_name(pod, objects);
        let mut to_allocate = Vec::new();
        for c in &claims {
            // A claim reserved for the pod's PodGroup is the pod's too: no entry of its own
            // is needed, so the 256 limit does not apply, and a group member's pending
            // allocation (assumed with the group's reservation) is reused.
            let mine = reserved_for_pod(c, pod, group_name);
            if c.allocation.is_some() && !c.can_be_reserved() && !mine {
                return (None, Status::unresolvable(CLAIM_IN_USE));
            }
            // Another pod's allocation or reservation of this claim is still being written:
            // wait for it (the claim update retries the pod).
            if objects.is_assumed(&c.namespace, &c.name) && !mine {
                return (None, Status::unresolvable(claim_allocation_in_flight(c)));
            }
            if c.allocation.is_none() {
                if let Err(s) = check_classes(c, objects) {
                    return (None, s);
                }
                to_allocate.push(c.clone());
            }
        }
        let allocator = (!to_allocate.is_empty()).then(|| {
            Arc::new(Allocator::with_index(
                self.index.get(objects),
                objects,
                to_allocate,
            ))
        });
        state.write(StateData {
            objects: objects.clone(),
            claims,
            for_group,
            group: group.map(|g| ConsumerRef::pod_group(&g.key.name, &g.uid)),
            allocator,
            by_node: Arc::default(),
            reserved: None,
            unavailable: Arc::default(),
            deallocate: Arc::default(),
            extended: ext,
            binding_wait: None,
        });
        (None, Status::success())
    }

    fn has_extensions(&self) -> bool {
        true
    }

    fn add_pod(
        &self,
        state: &mut CycleState,
        _pod: &PodInfo,
        to_add: &Arc<PodInfo>,
        _node: &NodeInfo,
    ) -> Status {
        let Some(s) = state.read_mut::<StateData>() else {
            return Status::success();
        };
        let (ids, shares) = victim_devices(to_add, &s.objects);
        if let (Some(a), false) = (&mut s.allocator, ids.is_empty() && shares.is_empty()) {
            let a = Arc::make_mut(a);
            a.unfree_devices(ids);
            a.unfree_shares(shares);
        }
        Status::success()
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        _pod: &PodInfo,
        to_remove: &Arc<PodInfo>,
        _node: &NodeInfo,
    ) -> Status {
        let Some(s) = state.read_mut::<StateData>() else {
            return Status::success();
        };
        let (ids, shares) = victim_devices(to_remove, &s.objects);
        if let (Some(a), false) = (&mut s.allocator, ids.is_empty() && shares.is_empty()) {
            let a = Arc::make_mut(a);
            a.free_devices(ids);
            a.free_shares(shares);
        }
        Status::success()
    }
}

/// A device share a victim's claim holds: the device and what the share consumes.
type Share = (DeviceId, Vec<(String, i128)>);

/// Devices of a pod's claims that only it uses (reserved for it alone, not admin access):
/// gone with the pod, since the claim gets deallocated once its last consumer is. Whole
/// devices, then shares of devices allowing multiple allocations.
fn victim_devices(pod: &PodInfo, objects: &DraObjects) -> (Vec<DeviceId>, Vec<Share>) {
    let Ok(PodClaims { claims, .. }) = pod_claims(pod, objects) else {
        return (Vec::new(), Vec::new());
    };
    // A claim reserved for the victim's PodGroup stays with the group's other pods.
    claims
        .iter()
        .filter(|c| c.reserved_for.iter().all(|r| r.uid == pod.uid))
        .filter_map(|c| c.allocation.as_ref())
        .flat_map(|a| &a.devices)
        .filter(|d| d.share_id.is_some() || !d.admin_access)
        .fold((Vec::new(), Vec::new()), |(mut ids, mut shares), d| {
            if d.share_id.is_some() {
                shares.push((d.id.clone(), d.consumed.clone()));
            } else {
                ids.push(d.id.clone());
            }
            (ids, shares)
        })
}

impl FilterPlugin for DynamicResources {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(s) = state.read::<StateData>() else {
            return missing_state();
        };
        // Where DRA provides the pod's extended resources, their claim is allocated with the
        // pod's other claims.
        let mut ext_claim = None;
        if let Some(e) = &s.extended {
            if let Some(st) = e.refuse_left_over() {
                return st;
            }
            let pending = s.allocator.as_ref().map(|a| a.claims()).unwrap_or_default();
            match e.node_claim(pod, node, &s.objects, &self.index, pending) {
                Ok(c) => ext_claim = c,
                Err(st) => return st,
            }
        }
        let mut allocations = None;
        if let Some(a) = ext_claim
            .as_ref()
            .map(|c| &c.allocator)
            .or(s.allocator.as_ref())
        {
            let got = match self.filter_timeout {
                None => a.allocate(&node.name, &node.labels),
                Some(limit) => {
                    let deadline = Deadline {
                        now: self.now,
                        at: (self.now)() + limit,
                    };
                    a.allocate_by(&node.name, &node.labels, deadline)
                }
            };
            match got {
                Ok(Some(r)) => allocations = Some(r),
                Ok(None) => return Status::unresolvable(CANNOT_ALLOCATE_ALL_CLAIMS),
                Err(AllocError::Fatal(m)) => return Status::error(m),
                Err(AllocError::Node(m)) => return Status::unresolvable(m),
                Err(AllocError::TimedOut) => return Status::unresolvable(FILTER_TIMED_OUT),
            }
        }
        let unavailable: Vec<usize> = s
            .claims
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                c.allocation
                    .as_ref()
                    .and_then(|a| a.node_selector.as_ref())
                    .is_some_and(|sel| !sel.matches_labels(&node.name, &node.labels))
                    || binding_conditions::unavailable(
                        c,
                        &s.objects,
                        self.binding_timeout,
                        (self.wall)(),
                    )
            })
            .map(|(i, _)| i)
            .collect();
        if !unavailable.is_empty() {
            s.unavailable
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(unavailable);
            return Status::unresolvable(NOT_AVAILABLE_ON_NODE);
        }
        if let Some(mut r) = allocations {
            // The extended resource claim came last: its result is not the pod's claims'.
            if let (Some(e), Some(c)) = (&s.extended, ext_claim)
                && let Some(last) = r.pop()
            {
                e.record(&node.name, c, last);
            }
            s.by_node
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(node.name.clone(), r);
        }
        Status::success()
    }
}

/// Upstream `FirstAvailableDeviceRequestMaxSize`: at most 8 subrequests per request.
const FIRST_AVAILABLE_MAX_SIZE: i64 = 8;

/// Upstream's score of a node: for each `firstAvailable` request, the earlier the
/// subrequest the allocation for this node picked, the more (8 for the first, 7 for the
/// second, ...). Claims allocated already count with their allocation; the others with the
/// allocation Filter found for the node, in order.
fn first_available_score(
    claims: &[Arc<ResourceClaimInfo>],
    found: &[dra::AllocationResult],
) -> Result<i64, String> {
    let total = found.len();
    let mut found = found.iter();
    let mut score = 0;
    for c in claims {
        let allocation = match &c.allocation {
            Some(a) => &a.raw,
            None => found.next().ok_or_else(|| {
                format!(
                    "number of allocations {total} is smaller than number of claims needing allocation"
                )
            })?,
        };
        let picked: Vec<&str> = allocation
            .devices
            .iter()
            .flat_map(|d| d.results.iter().flatten())
            .map(|r| r.request.as_str())
            .filter(|r| r.contains('/'))
            .collect();
        for r in &c.requests {
            if let ClaimRequest::FirstAvailable { name, subrequests } = r {
                for (i, sub) in subrequests.iter().enumerate() {
                    if picked.contains(&format!("{name}/{}", sub.name).as_str()) {
                        score += FIRST_AVAILABLE_MAX_SIZE - i as i64;
                    }
                }
            }
        }
    }
    Ok(score)
}

impl ScorePlugin for DynamicResources {
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let Some(s) = state.read::<StateData>() else {
            return Ok(0); // no claims
        };
        let by_node = s.by_node.lock().unwrap_or_else(|e| e.into_inner());
        let Some(found) = by_node.get(&node.name) else {
            return Ok(0);
        };
        first_available_score(&s.claims, found).map_err(Status::error)
    }

    /// A pod without claims scores 0 on every node: known without visiting them.
    fn score_nodes(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: FeasibleNodes<'_>,
        out: &mut [i64],
    ) -> Result<(), Status> {
        if state.read::<StateData>().is_none() {
            out.fill(0);
            return Ok(());
        }
        for (slot, node) in out.iter_mut().zip(nodes) {
            *slot = self.score(state, pod, node)?;
        }
        Ok(())
    }

    fn has_score_extensions(&self) -> bool {
        true
    }

    fn normalize_score_values(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        scores: &mut [i64],
    ) -> Option<Status> {
        default_normalize_values(MAX_NODE_SCORE, false, scores);
        Some(Status::success())
    }

    fn normalize_scores(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        scores: &mut [NodeScore<'_>],
    ) -> Status {
        default_normalize_score(MAX_NODE_SCORE, false, scores);
        Status::success()
    }
}

impl PostFilterPlugin for DynamicResources {
    /// Upstream's PostFilter: when an allocated claim kept the pod off some node and nobody
    /// else uses it, its allocation is dropped so the next attempt can allocate it anew.
    /// Never returns a result: DefaultPreemption's nomination stays its own.
    fn post_filter(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        _ctx: &PostFilterContext<'_>,
    ) -> (Option<PostFilterResult>, Status) {
        // The claim of the pod's extended resources an earlier attempt left: deleted when
        // no claim is to be deallocated (upstream checks it after its deallocation loop).
        let delete_left_over = || {
            state
                .read::<StateData>()
                .and_then(|s| s.extended.as_ref()?.delete_left_over())
        };
        if pod.resource_claims.is_empty() {
            if let Some(st) = delete_left_over() {
                return (None, st);
            }
            return (
                None,
                Status::with_reasons(Code::Unschedulable, Vec::<String>::new()),
            );
        }
        let Some(s) = state.read::<StateData>().filter(|s| !s.claims.is_empty()) else {
            let st = delete_left_over()
                .unwrap_or_else(|| Status::unschedulable(NO_NEW_CLAIMS_TO_DEALLOCATE));
            return (None, st);
        };
        let unavailable = s.unavailable.lock().unwrap_or_else(|e| e.into_inner());
        // A PodGroup's claim is the group's: never deallocated for one of its pods.
        let pick = unavailable.iter().map(|&i| &s.claims[i]).find(|c| {
            c.reserved_for.is_empty() || (c.reserved_for.len() == 1 && c.is_reserved_for(&pod.uid))
        });
        let Some(c) = pick else {
            drop(unavailable);
            let st =
                delete_left_over().unwrap_or_else(|| Status::unschedulable(STILL_NOT_SCHEDULABLE));
            return (None, st);
        };
        *s.deallocate.lock().unwrap_or_else(|e| e.into_inner()) = Some(ClaimDeallocation {
            delete: false,
            namespace: c.namespace.clone(),
            name: c.name.clone(),
            uid: c.uid.clone(),
            resource_version: c.resource_version.clone(),
        });
        (None, Status::unschedulable(DEALLOCATION_COMPLETED))
    }
}

impl ReservePlugin for DynamicResources {
    fn reserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        let Some(s) = state.read_mut::<StateData>() else {
            return Status::success();
        };
        let mut allocations = match &s.allocator {
            None => Vec::new(),
            Some(_) => {
                let by_node = s.by_node.lock().unwrap_or_else(|e| e.into_inner());
                match by_node.get(node) {
                    Some(r) => r.clone(),
                    None => return Status::error("claim allocation not found for node"),
                }
            }
        }
        .into_iter();
        let mut writes = Vec::new();
        let group_name = s
            .group
            .as_ref()
            .map(|g| g.name.clone())
            .or_else(|| workload_group_name(pod, &s.objects).map(str::to_string));
        for (i, c) in s.claims.iter().enumerate() {
            let for_group = s.for_group[i].then(|| s.group.clone()).flatten();
            let allocation = if c.allocation.is_none() {
                match allocations.next() {
                    Some(a) => Some(a),
                    None => {
                        return Status::error(format!(
                            "internal error: no allocation for claim {}/{}",
                            c.namespace, c.name
                        ));
                    }
                }
            } else {
                None
            };
            if reserved_for_pod(c, pod, group_name.as_deref()) && allocation.is_none() {
                // The group's claim, allocated or reserved by another member whose write may
                // still be in flight: this member's binding shares that write (the
                // controller makes sure it is done before binding this pod too).
                if let Some(g) = for_group.filter(|_| s.objects.is_assumed(&c.namespace, &c.name)) {
                    let pending = s.objects.allocation_assumed(&c.namespace, &c.name);
                    let allocation = c
                        .allocation
                        .as_ref()
                        .filter(|_| pending)
                        .map(|a| a.raw.clone());
                    writes.push(ClaimStatusWrite {
                        namespace: c.namespace.clone(),
                        name: c.name.clone(),
                        uid: c.uid.clone(),
                        resource_version: c.resource_version.clone(),
                        add_finalizer: allocation.is_some()
                            && !c.finalizers.iter().any(|f| f == CLAIM_FINALIZER),
                        finalizers: c.finalizers.clone(),
                        allocation,
                        reserved_for: c.reserved_for.clone(),
                        group: Some(GroupWrite {
                            consumer: g,
                            shared: true,
                        }),
                        create: None,
                    });
                }
                continue;
            }
            let mut reserved_for = c.reserved_for.clone();
            reserved_for.push(match &for_group {
                Some(g) => g.clone(),
                None => ConsumerRef::pod(pod.name(), &pod.uid),
            });
            writes.push(ClaimStatusWrite {
                namespace: c.namespace.clone(),
                name: c.name.clone(),
                uid: c.uid.clone(),
                resource_version: c.resource_version.clone(),
                add_finalizer: allocation.is_some()
                    && !c.finalizers.iter().any(|f| f == CLAIM_FINALIZER),
                finalizers: c.finalizers.clone(),
                allocation,
                reserved_for,
                group: for_group.map(|consumer| GroupWrite {
                    consumer,
                    shared: false,
                }),
                create: None,
            });
        }
        writes.extend(s.extended.as_ref().and_then(|e| e.reserve_write(pod, node)));
        s.binding_wait =
            binding_conditions::wait_for(&s.claims, &writes, &s.objects, self.binding_timeout);
        s.reserved = Some(writes);
        Status::success()
    }

    fn unreserve(&self, state: &mut CycleState, _pod: &PodInfo, _node: &str) {
        if let Some(s) = state.read_mut::<StateData>() {
            s.reserved = None;
            s.binding_wait = None;
        }
    }
}

impl PreBindPlugin for DynamicResources {
    /// Succeeds: the claim status writes are the controller's (see [`decided_claim_writes`]).
    fn pre_bind(&self, _state: &CycleState, _pod: &PodInfo, _node: &str) -> Status {
        Status::success()
    }
}

#[cfg(test)]
mod group_claims_tests;
#[cfg(test)]
mod post_filter_tests;
#[cfg(test)]
mod taint_rules_tests;
#[cfg(test)]
mod tests;
