//! VolumeBinding (upstream `volumebinding`): claims the pod uses must be bound to volumes the
//! node can reach, or be bindable there (WaitForFirstConsumer): matched to an available
//! volume whose node affinity admits the node, or provisionable on it (StorageClass
//! `allowedTopologies`).
//!
//! Reserve records the decision for the chosen node in the cycle state. PreBind makes no API
//! calls in ferrosched: it succeeds, and the controller reads the decision with
//! [`decided_bindings`] and carries it out (bind each volume to its claim; annotate each claim
//! to provision with `volume.kubernetes.io/selected-node`; wait for the claims to be bound
//! within `bindTimeoutSeconds`), before POSTing the pod's Binding.
//!
//! Dynamic provisioning checks storage capacity as upstream does: when the class's
//! provisioner has a CSIDriver with `storageCapacity: true`, some CSIStorageCapacity of the
//! class whose `nodeTopology` selects the node must hold the claim's request (its
//! `maximumVolumeSize` if set, else `capacity`), or the node fails with "node(s) did not have
//! enough free storage".
//!
//! Score (StorageCapacityScoring, default since 1.37) rates a node by the utilisation its
//! volumes would reach, through `shape`: the volumes to bind there if any, else the claims to
//! provision, against the CSIStorageCapacity that admitted each.
//!
//! A bound in-tree volume (EBS, GCE PD, Cinder, ...) on a node whose CSINode lists its
//! plugin as migrated is checked with the node affinity its CSI driver's volume would have
//! ([`csi_translation`]), as upstream's binder does.

use crate::framework::Signing;
use crate::plugins::helper::sign;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use crate::cache::Snapshot;
use crate::config::PluginArgs;
use crate::framework::FeasibleNodes;
use crate::framework::{
    ActionType, ClusterEvent, CycleState, EventObjects, EventResource, FilterPlugin,
    MAX_NODE_SCORE, Plugin, PluginPoints, PreBindPlugin, PreFilterPlugin, PreFilterResult,
    PreScorePlugin, QueueingHint, ReservePlugin, ScorePlugin, Status,
};
use crate::plugin_points;
use crate::types::volume::{NOT_SUPPORTED_PROVISIONER, claim_key};
use crate::types::{NodeInfo, PodInfo, PodVolumes, PvInfo, PvcInfo, StaticBinding, VolumeObjects};

use super::names::VOLUME_BINDING;
use super::node_volume_limits::ephemeral_owner_error;
use super::resource_allocation::{ShapePoint, broken_linear};
use super::volume_restrictions::pvc_not_found;

pub const ERR_REASON_BIND_CONFLICT: &str =
    "node(s) didn't find available persistent volumes to bind";
pub const ERR_REASON_NODE_CONFLICT: &str = "node(s) had volume node affinity conflict";
pub const ERR_REASON_NOT_ENOUGH_SPACE: &str = "node(s) did not have enough free storage";
pub const ERR_REASON_PV_NOT_EXIST: &str =
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";
pub const ERR_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";

/// Upstream's utilisation range for the capacity shape.
const MAX_UTILIZATION: i64 = 100;
/// Shape scores are given on 0..=10 and scaled to 0..=MAX_NODE_SCORE.
const MAX_CUSTOM_PRIORITY_SCORE: i64 = 10;

pub struct VolumeBinding {
    /// Capacity-scoring shape; `None` (no shape configured) disables PreScore/Score.
    shape: Option<Vec<ShapePoint>>,
}

impl VolumeBinding {
    pub fn new(args: Option<&PluginArgs>) -> Result<Self, String> {
        let shape = match args {
            Some(PluginArgs::VolumeBinding(a)) if !a.shape.is_empty() => Some(
                a.shape
                    .iter()
                    .map(|p| ShapePoint {
                        utilization: i64::from(p.utilization),
                        score: i64::from(p.score) * (MAX_NODE_SCORE / MAX_CUSTOM_PRIORITY_SCORE),
                    })
                    .collect(),
            ),
            Some(PluginArgs::VolumeBinding(_)) | None => None,
            Some(other) => {
                return Err(format!(
                    "want args to be of type VolumeBindingArgs, got {}",
                    other.kind()
                ));
            }
        };
        Ok(VolumeBinding { shape })
    }

    pub fn factory(args: Option<&PluginArgs>) -> Result<Arc<dyn crate::framework::Plugin>, String> {
        Ok(Arc::new(Self::new(args)?))
    }
}

impl Plugin for VolumeBinding {
    /// Signature for opportunistic batching (upstream `SignPod`).
    fn sign_pod(&self, pod: &PodInfo) -> Option<Signing> {
        sign::with(vec![sign::volumes(pod)])
    }
    fn name(&self) -> &'static str {
        VOLUME_BINDING
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => pre_filter, filter, reserve, pre_bind, pre_score, score)
    }
    /// Upstream's registrations: a claim bound or created, a volume added, a class, CSINode
    /// or CSIDriver appearing or changing, new free storage reported, or a node
    /// relabelled/retainted may let a rejected pod fit.
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        let add_update = ActionType::ADD | ActionType::UPDATE;
        vec![
            ClusterEvent::new(EventResource::StorageClass, add_update),
            ClusterEvent::new(EventResource::PersistentVolumeClaim, add_update),
            ClusterEvent::new(EventResource::PersistentVolume, add_update),
            // With hints, upstream drops UpdateNodeTaint (a taint never changes its answer).
            ClusterEvent::new(
                EventResource::Node,
                ActionType::ADD | ActionType::UPDATE_NODE_LABEL,
            ),
            ClusterEvent::new(EventResource::CSINode, add_update),
            ClusterEvent::new(EventResource::CSIDriver, ActionType::UPDATE),
            ClusterEvent::new(EventResource::CSIStorageCapacity, add_update),
        ]
    }

    /// Upstream's hints: a claim the pod uses, a new class or changed allowed topologies, a
    /// CSINode's migrated plugins, a driver no longer asking for capacity checks, or more
    /// capacity reported. Volumes and nodes always queue.
    fn queueing_hint(
        &self,
        pod: &PodInfo,
        _event: &ClusterEvent,
        objects: &EventObjects<'_>,
    ) -> QueueingHint {
        hints::hint(pod, objects)
    }
}

/// The decision Reserve recorded for the chosen node.
#[derive(Clone, Debug)]
struct Reserved {
    volumes: PodVolumes,
}

#[derive(Default, Debug)]
struct ByNode {
    volumes: HashMap<String, PodVolumes>,
    /// Per node, the claims to provision that a CSIStorageCapacity vouched for:
    /// `(class, requested, that object's capacity)`, for capacity scoring.
    provisions: HashMap<String, Vec<ProvisionCapacity>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct ProvisionCapacity {
    class: String,
    requested: i64,
    capacity: i64,
}

#[derive(Debug, Default)]
struct StateData {
    objects: VolumeObjects,
    bound_claims: Vec<Arc<PvcInfo>>,
    /// Unbound WaitForFirstConsumer claims, in pod order.
    claims_to_bind: Vec<Arc<PvcInfo>>,
    /// Class -> its volumes, for the claims to bind.
    class_pvs: HashMap<String, Vec<Arc<PvInfo>>>,
    /// Filter runs in parallel over nodes, so its per-node results go behind a lock.
    by_node: Mutex<ByNode>,
    reserved: Option<Reserved>,
}

impl Clone for StateData {
    fn clone(&self) -> Self {
        let by_node = self.by_node.lock().unwrap_or_else(|e| e.into_inner());
        StateData {
            objects: self.objects.clone(),
            bound_claims: self.bound_claims.clone(),
            claims_to_bind: self.claims_to_bind.clone(),
            class_pvs: self.class_pvs.clone(),
            by_node: Mutex::new(ByNode {
                volumes: by_node.volumes.clone(),
                provisions: by_node.provisions.clone(),
            }),
            reserved: self.reserved.clone(),
        }
    }
}

/// The bindings and provisionings Reserve decided for the pod's node, for the controller to
/// carry out before binding the pod. `None` when there is nothing to do: the pod uses no
/// claims, or all of them were already bound.
pub fn decided_bindings(state: &CycleState) -> Option<&PodVolumes> {
    state
        .read::<StateData>()
        .and_then(|s| s.reserved.as_ref())
        .map(|r| &r.volumes)
        .filter(|v| !v.is_empty())
}

fn missing_state() -> Status {
    Status::error("reading VolumeBinding state: not found")
}

/// Upstream `podHasPVCs`: every claim must exist, not be lost or deleting, and an ephemeral
/// claim must belong to the pod.
fn check_claims(pod: &PodInfo, objects: &VolumeObjects) -> Result<Vec<Arc<PvcInfo>>, Status> {
    let mut out = Vec::new();
    for claim in &pod.volumes.claims {
        let Some(pvc) = objects.pvc(pod.namespace(), &claim.name) else {
            return Err(Status::unresolvable(if claim.ephemeral {
                format!(
                    "waiting for ephemeral volume controller to create the persistentvolumeclaim {:?}",
                    claim.name
                )
            } else {
                pvc_not_found(&claim.name)
            }));
        };
        if pvc.phase == "Lost" {
            return Err(Status::unresolvable(format!(
                "persistentvolumeclaim {:?} bound to non-existent persistentvolume {:?}",
                pvc.name,
                pvc.volume_name.as_deref().unwrap_or_default()
            )));
        }
        if pvc.deleting {
            return Err(Status::unresolvable(format!(
                "persistentvolumeclaim {:?} is being deleted",
                pvc.name
            )));
        }
        if claim.ephemeral && pvc.controller_uid.as_deref() != Some(pod.uid.as_str()) {
            return Err(Status::unresolvable(ephemeral_owner_error(
                pod,
                &claim.name,
            )));
        }
        // Like upstream, a claim mounted twice is looked at twice.
        out.push(pvc.clone());
    }
    Ok(out)
}

impl PreFilterPlugin for VolumeBinding {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        if pod.volumes.claims.is_empty() {
            state.write(StateData::default());
            return (None, Status::skip());
        }
        let objects = snapshot.volumes().clone();
        let claims = match check_claims(pod, &objects) {
            Ok(c) => c,
            Err(s) => return (None, s),
        };
        let mut bound_claims = Vec::new();
        let mut claims_to_bind = Vec::new();
        let mut immediate = 0;
        for pvc in claims {
            if pvc.volume_name.is_some() && pvc.bind_completed {
                bound_claims.push(pvc);
                continue;
            }
            // A class that is not found (or no class) means immediate binding.
            let delayed = objects
                .storage_class(&pvc.storage_class)
                .is_some_and(|c| c.wait_for_first_consumer());
            if delayed && pvc.volume_name.is_none() {
                claims_to_bind.push(pvc);
            } else {
                immediate += 1;
            }
        }
        if immediate > 0 {
            return (None, Status::unresolvable(ERR_UNBOUND_IMMEDIATE));
        }

        let mut eligible: Option<BTreeSet<String>> = None;
        for pvc in &bound_claims {
            let Some(pv) = pvc.volume_name.as_deref().and_then(|n| objects.pv(n)) else {
                continue;
            };
            let names = pv.local_node_names();
            if names.is_empty() {
                continue;
            }
            let names: BTreeSet<String> = names.into_iter().collect();
            eligible = Some(match eligible {
                None => names,
                Some(prev) => prev.intersection(&names).cloned().collect(),
            });
        }

        let mut class_pvs: HashMap<String, Vec<Arc<PvInfo>>> = HashMap::new();
        for pvc in &claims_to_bind {
            class_pvs
                .entry(pvc.storage_class.clone())
                .or_insert_with(|| {
                    objects
                        .pvs()
                        .filter(|pv| pv.storage_class == pvc.storage_class)
                        .cloned()
                        .collect()
                });
        }
        state.write(StateData {
            objects,
            bound_claims,
            claims_to_bind,
            class_pvs,
            by_node: Mutex::default(),
            reserved: None,
        });
        (eligible.map(PreFilterResult::nodes), Status::success())
    }
}

/// Upstream `FindMatchingVolume` on the scheduler path: the volume pre-bound to the claim if
/// there is one (and it fits the node), else the smallest available volume of the claim's
/// class that satisfies size, mode, selector, attributes class, node affinity and access modes.
fn find_matching_volume<'a>(
    pvc: &PvcInfo,
    pvs: &'a [Arc<PvInfo>],
    node: &NodeInfo,
    excluded: &BTreeSet<&str>,
) -> Result<Option<&'a Arc<PvInfo>>, Status> {
    let selector = match &pvc.selector {
        Some(Err(e)) => {
            return Err(Status::error(format!(
                "error creating internal label selector for claim: {}: {e}",
                pvc.key()
            )));
        }
        Some(Ok(s)) => Some(s),
        None => None,
    };
    let mut smallest: Option<&Arc<PvInfo>> = None;
    for pv in pvs {
        if excluded.contains(pv.name.as_str()) {
            continue;
        }
        let bound_to_claim = pv.is_bound_to(pvc);
        if pv.claim_ref.is_some() && !bound_to_claim {
            continue;
        }
        if pv.capacity < pvc.requested_storage || pv.block_mode != pvc.block_mode || pv.deleting {
            continue;
        }
        let affinity_ok = pv.node_affinity_matches(&node.labels);
        if bound_to_claim {
            return Ok(affinity_ok.then_some(pv));
        }
        if pv.phase != "Available"
            || selector.is_some_and(|s| !s.matches(&pv.labels))
            || pv.storage_class != pvc.storage_class
            || pv.attributes_class != pvc.attributes_class
            || !affinity_ok
            || !pvc.access_modes.iter().all(|m| pv.access_modes.contains(m))
        {
            continue;
        }
        if smallest.is_none_or(|s| s.capacity > pv.capacity) {
            smallest = Some(pv);
        }
    }
    Ok(smallest)
}

/// Upstream `FindPodVolumes` for one node: the reasons it does not fit, or what to bind and
/// provision there.
type FoundVolumes = (PodVolumes, Vec<ProvisionCapacity>, Vec<&'static str>);

fn find_pod_volumes(s: &StateData, node: &NodeInfo) -> Result<FoundVolumes, Status> {
    let mut out = PodVolumes::default();
    let mut provisions = Vec::new();
    let mut bound_satisfied = true;
    let mut bound_pvs_found = true;
    let mut unbound_satisfied = true;
    let mut sufficient_storage = true;
    let reasons = |bound_satisfied: bool,
                   unbound_satisfied: bool,
                   sufficient_storage: bool,
                   bound_pvs_found: bool| {
        let mut r = Vec::new();
        if !bound_satisfied {
            r.push(ERR_REASON_NODE_CONFLICT);
        }
        if !unbound_satisfied {
            r.push(ERR_REASON_BIND_CONFLICT);
        }
        if !sufficient_storage {
            r.push(ERR_REASON_NOT_ENOUGH_SPACE);
        }
        if !bound_pvs_found {
            r.push(ERR_REASON_PV_NOT_EXIST);
        }
        r
    };

    let csi_node = s.objects.csi_node(&node.name).map(Arc::as_ref);
    for pvc in &s.bound_claims {
        let pv_name = pvc.volume_name.as_deref().unwrap_or_default();
        let Some(pv) = s.objects.pv(pv_name) else {
            bound_pvs_found = false;
            break;
        };
        // A migrated in-tree volume is checked as its CSI driver's (csi_translation.rs).
        match pv.node_affinity_matches_on(&node.labels, csi_node) {
            Ok(true) => {}
            Ok(false) => {
                bound_satisfied = false;
                break;
            }
            Err(e) => return Err(Status::error(e)),
        }
    }

    if !s.claims_to_bind.is_empty() {
        let mut to_provision: Vec<&Arc<PvcInfo>> = Vec::new();
        let mut to_match: Vec<&Arc<PvcInfo>> = Vec::new();
        for pvc in &s.claims_to_bind {
            match &pvc.selected_node {
                Some(n) if *n != node.name => {
                    return Ok((
                        out,
                        Vec::new(),
                        reasons(bound_satisfied, false, true, bound_pvs_found),
                    ));
                }
                Some(_) => to_provision.push(pvc),
                None => to_match.push(pvc),
            }
        }
        // Smallest request first, so each claim gets the smallest volume that fits.
        to_match.sort_by_key(|c| c.requested_storage);
        let mut chosen: BTreeSet<&str> = BTreeSet::new();
        for pvc in to_match {
            let pvs = s
                .class_pvs
                .get(&pvc.storage_class)
                .map(Vec::as_slice)
                .unwrap_or_default();
            match find_matching_volume(pvc, pvs, node, &chosen)? {
                Some(pv) => {
                    chosen.insert(pv.name.as_str());
                    out.static_bindings.push(StaticBinding {
                        pv: pv.name.clone(),
                        pvc_namespace: pvc.namespace.clone(),
                        pvc_name: pvc.name.clone(),
                        storage_class: pv.storage_class.clone(),
                        requested: pvc.requested_storage,
                        capacity: pv.capacity,
                    });
                }
                None => {
                    unbound_satisfied = false;
                    to_provision.push(pvc);
                }
            }
        }
        if !to_provision.is_empty() {
            unbound_satisfied = true;
            for pvc in to_provision {
                if pvc.storage_class.is_empty() {
                    return Err(Status::error(format!("no class for claim {:?}", pvc.key())));
                }
                let Some(class) = s.objects.storage_class(&pvc.storage_class) else {
                    return Err(Status::error(format!(
                        "failed to find storage class {:?}",
                        pvc.storage_class
                    )));
                };
                if class.provisioner.is_empty()
                    || class.provisioner == NOT_SUPPORTED_PROVISIONER
                    || !class.allows_node(&node.labels)
                {
                    unbound_satisfied = false;
                    out.dynamic_provisions.clear();
                    break;
                }
                let Some(found) =
                    has_enough_capacity(&s.objects, &class.provisioner, pvc, &class.name, node)
                else {
                    // Provisionable here, only not with this much storage.
                    sufficient_storage = false;
                    out.dynamic_provisions.clear();
                    provisions.clear();
                    break;
                };
                if let Some(capacity) = found {
                    provisions.push(ProvisionCapacity {
                        class: class.name.clone(),
                        requested: pvc.requested_storage,
                        capacity,
                    });
                }
                out.dynamic_provisions
                    .push((pvc.namespace.clone(), pvc.name.clone()));
            }
        }
    }
    Ok((
        out,
        provisions,
        reasons(
            bound_satisfied,
            unbound_satisfied,
            sufficient_storage,
            bound_pvs_found,
        ),
    ))
}

/// Upstream `hasEnoughCapacity`: only claims with a storage request whose provisioner is a
/// CSIDriver opting into capacity tracking are checked; a CSIStorageCapacity of the class
/// that the node can reach must be large enough. `None` when none is; otherwise the first
/// fitting object's `capacity` (`Some(None)` when nothing was checked, or the object reports
/// only `maximumVolumeSize`), which capacity scoring uses.
fn has_enough_capacity(
    objects: &VolumeObjects,
    provisioner: &str,
    pvc: &PvcInfo,
    class: &str,
    node: &NodeInfo,
) -> Option<Option<i64>> {
    if !pvc.has_storage_request {
        return Some(None);
    }
    // No CSIDriver object: not a CSI driver, or one that does not report capacity.
    if !objects
        .csi_driver(provisioner)
        .is_some_and(|d| d.storage_capacity)
    {
        return Some(None);
    }
    objects
        .storage_capacities()
        .find(|c| {
            c.storage_class == class
                && c.fits(pvc.requested_storage)
                && c.node_has_access(&node.labels)
        })
        .map(|c| c.capacity)
}

impl FilterPlugin for VolumeBinding {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(s) = state.read::<StateData>() else {
            return missing_state();
        };
        let (volumes, provisions, reasons) = match find_pod_volumes(s, node) {
            Ok(r) => r,
            Err(e) => return e,
        };
        if !reasons.is_empty() {
            return Status::with_reasons(
                crate::framework::Code::UnschedulableAndUnresolvable,
                reasons,
            );
        }
        let mut by_node = s.by_node.lock().unwrap_or_else(|e| e.into_inner());
        by_node.volumes.insert(node.name.clone(), volumes);
        by_node.provisions.insert(node.name.clone(), provisions);
        Status::success()
    }
}

impl PreScorePlugin for VolumeBinding {
    /// Skips only without a shape. The shape is always set after defaulting (upstream's
    /// StorageCapacityScoring, on since 1.37), and then upstream never skips: nodes without
    /// static bindings score the claims to provision through the CSIStorageCapacity that
    /// vouched for them.
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _nodes: FeasibleNodes<'_>,
        _snapshot: &Snapshot,
    ) -> Status {
        // Without claims every node scores 0 (upstream looks each node up and finds
        // nothing); skipping gives the same totals without a lock per node.
        if self.shape.is_none() || pod.volumes.claims.is_empty() {
            return Status::skip();
        }
        if state.read::<StateData>().is_none() {
            return missing_state();
        }
        Status::success()
    }
}

impl ScorePlugin for VolumeBinding {
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let Some(shape) = &self.shape else {
            return Ok(0);
        };
        let Some(s) = state.read::<StateData>() else {
            return Err(missing_state());
        };
        let by_node = s.by_node.lock().unwrap_or_else(|e| e.into_inner());
        let Some(volumes) = by_node.volumes.get(&node.name) else {
            return Ok(0);
        };
        // Class -> (requested, capacity): of the volumes to bind there if any, else of the
        // claims to provision there (upstream never mixes the two).
        let mut classes: HashMap<&str, (i64, i64)> = HashMap::new();
        if volumes.static_bindings.is_empty() {
            for p in by_node.provisions.get(&node.name).into_iter().flatten() {
                let e = classes.entry(p.class.as_str()).or_default();
                e.0 += p.requested;
                e.1 += p.capacity;
            }
        }
        for b in &volumes.static_bindings {
            let e = classes.entry(b.storage_class.as_str()).or_default();
            e.0 += b.requested;
            e.1 += b.capacity;
        }
        if classes.is_empty() {
            return Ok(0);
        }
        let total: i64 = classes
            .values()
            .map(|&(requested, capacity)| {
                if capacity == 0 || requested > capacity {
                    broken_linear(shape, MAX_UTILIZATION)
                } else {
                    broken_linear(shape, requested * MAX_UTILIZATION / capacity)
                }
            })
            .sum();
        Ok((total as f64 / classes.len() as f64).round() as i64)
    }
}

impl ReservePlugin for VolumeBinding {
    fn reserve(&self, state: &mut CycleState, _pod: &PodInfo, node: &str) -> Status {
        let Some(s) = state.read_mut::<StateData>() else {
            return missing_state();
        };
        let volumes = s
            .by_node
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .volumes
            .get(node)
            .cloned()
            .unwrap_or_default();
        s.reserved = Some(Reserved { volumes });
        Status::success()
    }

    fn unreserve(&self, state: &mut CycleState, _pod: &PodInfo, _node: &str) {
        if let Some(s) = state.read_mut::<StateData>() {
            s.reserved = None;
        }
    }
}

impl PreBindPlugin for VolumeBinding {
    /// Succeeds: the API calls are the controller's (see [`decided_bindings`]).
    fn pre_bind(&self, state: &CycleState, _pod: &PodInfo, _node: &str) -> Status {
        if state.read::<StateData>().is_none() {
            return missing_state();
        }
        Status::success()
    }
}

/// `namespace/name` of every claim the decision touches (for logs and tests).
pub fn decided_claims(v: &PodVolumes) -> Vec<String> {
    v.static_bindings
        .iter()
        .map(|b| claim_key(&b.pvc_namespace, &b.pvc_name))
        .chain(v.dynamic_provisions.iter().map(|(ns, n)| claim_key(ns, n)))
        .collect()
}

pub mod csi_translation;
mod hints;
#[cfg(test)]
mod tests;
