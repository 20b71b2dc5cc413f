//! [`DraObjects`]: claims, slices and classes shared copy-on-write between the cache and its
//! snapshots, the devices allocated so far (counted once per claim change, so no cycle walks
//! every claim), and the claims the scheduler assumed (allocated or reserved in memory while
//! the status write is in flight).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::resource::v1 as dra;

use super::{
    ClaimAllocation, ConsumerRef, DeviceClassInfo, DeviceId, ResourceClaimInfo, ResourceSliceInfo,
};
use crate::types::pod_group::{GroupApi, PodGroupInfo};

/// Each map is shared copy-on-write between the cache and its snapshots (like
/// [`crate::types::volume::VolumeObjects`]).
#[derive(Debug, Clone, Default)]
pub struct DraObjects {
    /// Keyed by `namespace/name`; an assumed claim replaces the informer's copy here.
    pub(crate) claims: Arc<HashMap<String, Arc<ResourceClaimInfo>>>,
    /// Sorted by name, so allocation walks devices in the same order every time. The
    /// DeviceTaintRules' taints are applied (`taint_rules.rs`).
    pub(crate) slices: Arc<BTreeMap<String, Arc<ResourceSliceInfo>>>,
    /// The slices as published, before the DeviceTaintRules.
    pub(crate) raw_slices: Arc<BTreeMap<String, Arc<ResourceSliceInfo>>>,
    pub(crate) taint_rules: Arc<BTreeMap<String, Arc<super::taint_rules::DeviceTaintRuleInfo>>>,
    pub(crate) classes: Arc<HashMap<String, Arc<DeviceClassInfo>>>,
    /// Devices held by some claim's allocation (admin access excluded), with how many claims
    /// hold each (more than one only if the API let two allocations overlap).
    pub(crate) allocated: Arc<HashMap<DeviceId, u32>>,
    /// Devices allowing multiple allocations with shares held by claims (allocation results
    /// with a `shareID`): what the shares consume, summed per capacity.
    pub(crate) shared: Arc<HashMap<DeviceId, SharedUse>>,
    /// Assumed claims -> the informer's latest copy and how far the write got.
    pub(crate) assumed: Arc<HashMap<String, Assumed>>,
    /// DRADeviceBindingConditions turned off: devices with binding conditions are never
    /// allocated and nothing waits for them (upstream's default is on since 1.36).
    pub(crate) binding_conditions_off: bool,
    /// Workload API PodGroups with `spec.resourceClaims`, by `namespace/name`: their pods'
    /// matching claims are the group's (DRAWorkloadResourceClaims).
    pub(crate) pod_groups: Arc<HashMap<String, Arc<PodGroupInfo>>>,
    /// DRAWorkloadResourceClaims turned off: every claim is the pod's own, and a claim
    /// reserved for a PodGroup does not count as reserved for its pods. On unless turned
    /// off: a dump or a cluster whose PodGroups carry `spec.resourceClaims` has the gate on
    /// in its API server; `ferrosched run` follows `--feature-gates` (upstream's default:
    /// off).
    pub(crate) workload_claims_off: bool,
    /// DRADeviceCompatibilityGroups turned off (upstream: alpha, off by default in 1.37):
    /// devices declaring `compatibilityGroups` are never allocated, nor devices joining a
    /// counter set on which a held device declares them. On unless turned off, as for the
    /// PodGroup claims above: `ferrosched run` follows `--feature-gates`.
    pub(crate) compatibility_groups_off: bool,
}

/// The shares of one device allowing multiple allocations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SharedUse {
    pub shares: u32,
    /// Capacity name -> nano-units consumed by all shares.
    pub consumed: BTreeMap<String, i128>,
}

/// An assumed claim (upstream's in-flight allocations plus its assume cache).
#[derive(Debug, Clone)]
pub(crate) struct Assumed {
    /// The informer's latest copy (None: it had none), restored if the write fails.
    original: Option<Arc<ResourceClaimInfo>>,
    /// None while the write is in flight: informer copies do not end the assumption then
    /// (they predate the write, e.g. the finalizer step). Some(rv) once written: a copy at
    /// least that new does.
    written_rv: Option<u64>,
    /// How many decisions assumed writes to this claim (more than one: members of a PodGroup
    /// sharing the group's claim, upstream's "sharers" of a pending allocation). Forgetting
    /// one restores the informer's copy only when it was the last.
    sharers: u32,
}

fn rv(s: &str) -> u64 {
    s.parse().unwrap_or(0)
}

/// What the scheduler decided to write into one claim's status (PreBind), for the controller
/// to carry out and the cache to assume meanwhile.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimStatusWrite {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// The precondition: the write fails if the claim changed since the scheduler read it.
    pub resource_version: String,
    /// Set when the scheduler allocated the claim (it had none).
    pub allocation: Option<dra::AllocationResult>,
    /// The whole new `status.reservedFor` (the old entries plus the pod, or plus its
    /// PodGroup for a group claim).
    pub reserved_for: Vec<ConsumerRef>,
    /// Set for a claim of the pod's PodGroup (DRAWorkloadResourceClaims).
    pub group: Option<GroupWrite>,
    /// The claim lacks the delete-protection finalizer, which an allocation needs first.
    pub add_finalizer: bool,
    /// The claim's finalizers as read (the finalizer is appended to these).
    pub finalizers: Vec<String>,
    /// The claim of the pod's DRA-backed extended resources, which does not exist yet: the
    /// controller creates it first (`name` is a placeholder until then).
    pub create: Option<Box<super::extended::ExtendedClaimCreate>>,
}

/// A claim status write for a PodGroup's claim. Members of the group share the write: the
/// controller makes sure the claim carries the allocation and the group's entry, writing them
/// only if another member's binding has not already, and takes them back on failure only when
/// no other member is placed.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupWrite {
    /// The PodGroup, which `reserved_for` holds instead of the pod.
    pub consumer: ConsumerRef,
    /// Another member's decision allocated or reserved the claim (its write may still be in
    /// flight): this one only makes sure that write is done.
    pub shared: bool,
}

/// DynamicResources' PostFilter decision: remove this claim's allocation (and its
/// reservation, for nobody or only this pod) so that a later attempt can allocate it where
/// the pod fits. The controller writes it with the resourceVersion as precondition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimDeallocation {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub resource_version: String,
    /// Delete the claim instead (the claim of the pod's extended resources an earlier
    /// attempt created, upstream's PostFilter): its finalizer removed, then the object,
    /// with the resourceVersion and uid as preconditions.
    pub delete: bool,
}

impl ClaimStatusWrite {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

fn count(
    allocated: &mut HashMap<DeviceId, u32>,
    shared: &mut HashMap<DeviceId, SharedUse>,
    a: Option<&ClaimAllocation>,
    add: bool,
) {
    for d in a.into_iter().flat_map(|a| &a.devices) {
        if d.share_id.is_some() {
            let sign = if add { 1 } else { -1 };
            let u = shared.entry(d.id.clone()).or_default();
            for (name, n) in &d.consumed {
                *u.consumed.entry(name.clone()).or_default() += sign * n;
            }
            if add {
                u.shares += 1;
            } else {
                u.shares = u.shares.saturating_sub(1);
                if u.shares == 0 {
                    shared.remove(&d.id);
                }
            }
            continue;
        }
        if d.admin_access {
            continue;
        }
        if add {
            *allocated.entry(d.id.clone()).or_default() += 1;
        } else if let Some(n) = allocated.get_mut(&d.id) {
            *n -= 1;
            if *n == 0 {
                allocated.remove(&d.id);
            }
        }
    }
}

impl DraObjects {
    /// Whether device binding conditions are honoured (the DRADeviceBindingConditions
    /// feature gate; on unless turned off).
    pub fn binding_conditions(&self) -> bool {
        !self.binding_conditions_off
    }

    pub fn set_binding_conditions(&mut self, on: bool) {
        self.binding_conditions_off = !on;
    }

    /// Whether `consumesCounters[].compatibilityGroups` are enforced (the
    /// DRADeviceCompatibilityGroups feature gate).
    pub fn compatibility_groups(&self) -> bool {
        !self.compatibility_groups_off
    }

    pub fn set_compatibility_groups(&mut self, on: bool) {
        self.compatibility_groups_off = !on;
    }

    /// Whether PodGroup claims are honoured (the DRAWorkloadResourceClaims feature gate).
    pub fn workload_claims(&self) -> bool {
        !self.workload_claims_off
    }

    pub fn set_workload_claims(&mut self, on: bool) {
        self.workload_claims_off = !on;
    }

    /// A PodGroup added or changed: kept when it is a Workload API group with claims.
    pub fn update_pod_group(&mut self, g: &PodGroupInfo) {
        let key = format!("{}/{}", g.key.namespace, g.key.name);
        if g.key.api == GroupApi::Workload && !g.resource_claims.is_empty() {
            Arc::make_mut(&mut self.pod_groups).insert(key, Arc::new(g.clone()));
        } else if self.pod_groups.contains_key(&key) {
            Arc::make_mut(&mut self.pod_groups).remove(&key);
        }
    }

    /// A PodGroup deleted.
    pub fn remove_pod_group(&mut self, g: &PodGroupInfo) {
        if g.key.api != GroupApi::Workload {
            return;
        }
        let key = format!("{}/{}", g.key.namespace, g.key.name);
        if self.pod_groups.contains_key(&key) {
            Arc::make_mut(&mut self.pod_groups).remove(&key);
        }
    }

    /// The Workload API PodGroup `namespace/name`, if it has claims.
    pub fn pod_group(&self, namespace: &str, name: &str) -> Option<&Arc<PodGroupInfo>> {
        self.pod_groups.get(&format!("{namespace}/{name}"))
    }

    /// The claim as the informer last reported it: an assumed claim's original (None: the
    /// informer has none), else the cached copy.
    pub fn reported_claim(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaimInfo>> {
        let key = format!("{namespace}/{name}");
        match self.assumed.get(&key) {
            Some(a) => a.original.clone(),
            None => self.claims.get(&key).cloned(),
        }
    }

    /// Whether the claim is assumed with an allocation the informer's copy lacks (one a
    /// decision made and whose write may still be in flight).
    pub fn allocation_assumed(&self, namespace: &str, name: &str) -> bool {
        self.assumed
            .get(&format!("{namespace}/{name}"))
            .is_some_and(|a| a.original.as_ref().is_none_or(|o| o.allocation.is_none()))
    }

    pub fn claim(&self, namespace: &str, name: &str) -> Option<&Arc<ResourceClaimInfo>> {
        self.claims.get(&format!("{namespace}/{name}"))
    }

    pub fn slices(&self) -> impl Iterator<Item = &Arc<ResourceSliceInfo>> {
        self.slices.values()
    }

    pub fn class(&self, name: &str) -> Option<&Arc<DeviceClassInfo>> {
        self.classes.get(name)
    }

    /// Whether a claim's allocation or reservation is assumed (its write still in flight).
    pub fn is_assumed(&self, namespace: &str, name: &str) -> bool {
        self.assumed.contains_key(&format!("{namespace}/{name}"))
    }

    /// Whether some claim holds the device.
    pub fn device_allocated(&self, id: &DeviceId) -> bool {
        self.allocated.contains_key(id)
    }

    pub fn allocated_devices(&self) -> &HashMap<DeviceId, u32> {
        &self.allocated
    }

    /// Shares of devices allowing multiple allocations, with what they consume.
    pub fn shared_devices(&self) -> &HashMap<DeviceId, SharedUse> {
        &self.shared
    }

    fn put_claim(&mut self, key: String, v: Option<Arc<ResourceClaimInfo>>) {
        let old = match &v {
            Some(v) => Arc::make_mut(&mut self.claims).insert(key, v.clone()),
            None if self.claims.contains_key(&key) => Arc::make_mut(&mut self.claims).remove(&key),
            None => None,
        };
        let old_alloc = old.as_ref().and_then(|o| o.allocation.as_ref());
        let new_alloc = v.as_ref().and_then(|n| n.allocation.as_ref());
        if old_alloc != new_alloc {
            let allocated = Arc::make_mut(&mut self.allocated);
            // The shares' map is copied only when a share changes hands.
            let has_shares = |a: Option<&ClaimAllocation>| {
                a.is_some_and(|a| a.devices.iter().any(|d| d.share_id.is_some()))
            };
            let mut no_shares = HashMap::new();
            let shared = if has_shares(old_alloc) || has_shares(new_alloc) {
                Arc::make_mut(&mut self.shared)
            } else {
                &mut no_shares
            };
            count(allocated, shared, old_alloc, false);
            count(allocated, shared, new_alloc, true);
        }
    }

    /// An informer add/update. While a claim's write is in flight the assumed copy stays
    /// (the informer's is kept to restore on failure); once written, a copy at least as new
    /// as the write ends the assumption.
    pub fn update_claim(&mut self, c: &dra::ResourceClaim) {
        let v = Arc::new(ResourceClaimInfo::from_claim(c));
        let key = v.key();
        if let Some(written_rv) = self.assumed.get(&key).map(|a| a.written_rv) {
            let caught_up = written_rv.is_some_and(|w| rv(&v.resource_version) >= w);
            if !caught_up {
                if let Some(a) = Arc::make_mut(&mut self.assumed).get_mut(&key) {
                    a.original = Some(v);
                }
                return;
            }
            Arc::make_mut(&mut self.assumed).remove(&key);
        }
        self.put_claim(key, Some(v));
    }

    /// The write of an assumed claim landed at `resource_version`: the informer's copy of
    /// that version (or newer) replaces the assumed one.
    pub fn confirm_claim_write(&mut self, namespace: &str, name: &str, resource_version: &str) {
        let key = format!("{namespace}/{name}");
        let Some(a) = self.assumed.get(&key) else {
            return;
        };
        let written = rv(resource_version);
        if let Some(o) = a.original.clone()
            && rv(&o.resource_version) >= written
        {
            Arc::make_mut(&mut self.assumed).remove(&key);
            self.put_claim(key, Some(o));
            return;
        }
        if let Some(a) = Arc::make_mut(&mut self.assumed).get_mut(&key) {
            a.written_rv = Some(written);
        }
    }

    pub fn remove_claim(&mut self, namespace: &str, name: &str) -> bool {
        let key = format!("{namespace}/{name}");
        if self.assumed.contains_key(&key) {
            Arc::make_mut(&mut self.assumed).remove(&key);
        }
        let had = self.claims.contains_key(&key);
        self.put_claim(key, None);
        had
    }

    /// Records the status writes a scheduling decision will make, so the next cycles see the
    /// devices taken and the reservations made (upstream's in-flight allocations and assume
    /// cache) until the informer reports the claims again or [`Self::forget_claim_writes`].
    pub fn assume_claim_writes(&mut self, writes: &[ClaimStatusWrite]) {
        for w in writes {
            let key = w.key();
            if let Some(c) = &w.create {
                self.assume_created(key, w, c);
                continue;
            }
            let Some(cur) = self.claims.get(&key).cloned() else {
                continue;
            };
            match Arc::make_mut(&mut self.assumed).get_mut(&key) {
                Some(a) => a.sharers += 1,
                None => {
                    Arc::make_mut(&mut self.assumed).insert(
                        key.clone(),
                        Assumed {
                            original: Some(cur.clone()),
                            written_rv: None,
                            sharers: 1,
                        },
                    );
                }
            }
            let mut next = (*cur).clone();
            if let Some(a) = &w.allocation {
                next.allocation = Some(ClaimAllocation::from_result(a));
                // Nothing reported for the new allocation's devices yet.
                next.binding = super::binding::ClaimBinding::pending(a).map(Box::new);
            }
            next.reserved_for = w.reserved_for.clone();
            self.put_claim(key, Some(Arc::new(next)));
        }
    }

    /// A claim the scheduler will create (extended resources): held under its placeholder
    /// name, with nothing to restore, so its devices count as taken meanwhile.
    fn assume_created(
        &mut self,
        key: String,
        w: &ClaimStatusWrite,
        c: &super::extended::ExtendedClaimCreate,
    ) {
        let view = ResourceClaimInfo {
            namespace: w.namespace.clone(),
            name: w.name.clone(),
            allocation: w.allocation.as_ref().map(ClaimAllocation::from_result),
            binding: w
                .allocation
                .as_ref()
                .and_then(super::binding::ClaimBinding::pending)
                .map(Box::new),
            reserved_for: w.reserved_for.clone(),
            owner_pod_uid: Some(c.pod_uid.clone()),
            ..ResourceClaimInfo::default()
        };
        Arc::make_mut(&mut self.assumed).insert(
            key.clone(),
            Assumed {
                original: None,
                written_rv: None,
                sharers: 1,
            },
        );
        self.put_claim(key, Some(Arc::new(view)));
    }

    /// The claim assumed under `placeholder` was created as `name` and its status written
    /// at `resource_version`: the assumption moves to the real name, where the informer's
    /// copy at least that new ends it.
    pub fn confirm_created_claim(
        &mut self,
        namespace: &str,
        placeholder: &str,
        name: &str,
        resource_version: &str,
    ) {
        let pkey = format!("{namespace}/{placeholder}");
        let Some(view) = self.claims.get(&pkey).cloned() else {
            return;
        };
        if self.assumed.contains_key(&pkey) {
            Arc::make_mut(&mut self.assumed).remove(&pkey);
        }
        self.put_claim(pkey, None);
        let key = format!("{namespace}/{name}");
        let current = self.claims.get(&key).cloned();
        if current
            .as_ref()
            .is_some_and(|c| rv(&c.resource_version) >= rv(resource_version))
        {
            return; // the informer has it already
        }
        let mut next = (*view).clone();
        next.name = name.to_string();
        next.resource_version = resource_version.to_string();
        Arc::make_mut(&mut self.assumed).insert(
            key.clone(),
            Assumed {
                original: current,
                written_rv: Some(rv(resource_version)),
                sharers: 1,
            },
        );
        self.put_claim(key, Some(Arc::new(next)));
    }

    /// Undoes [`Self::assume_claim_writes`] after a failed binding: each claim still assumed
    /// goes back to the informer's copy, unless other decisions still share the assumption
    /// (members of a PodGroup sharing its claim).
    pub fn forget_claim_writes(&mut self, writes: &[ClaimStatusWrite]) {
        for w in writes {
            let key = w.key();
            let Some(a) = self.assumed.get(&key) else {
                continue;
            };
            if a.sharers > 1 {
                if let Some(a) = Arc::make_mut(&mut self.assumed).get_mut(&key) {
                    a.sharers -= 1;
                }
                continue;
            }
            let orig = Arc::make_mut(&mut self.assumed)
                .remove(&key)
                .and_then(|a| a.original);
            self.put_claim(key, orig);
        }
    }

    pub fn update_slice(&mut self, s: &dra::ResourceSlice) {
        self.put_slice(ResourceSliceInfo::from_slice(s));
    }

    pub fn remove_slice(&mut self, name: &str) -> bool {
        self.drop_slice(name)
    }

    pub fn update_class(&mut self, c: &dra::DeviceClass) {
        let v = DeviceClassInfo::from_class(c);
        Arc::make_mut(&mut self.classes).insert(v.name.clone(), Arc::new(v));
    }

    pub fn remove_class(&mut self, name: &str) -> bool {
        self.classes.contains_key(name) && Arc::make_mut(&mut self.classes).remove(name).is_some()
    }

    /// Takes `other`'s maps, sharing them (only pointers are copied).
    pub(crate) fn sync_from(&mut self, other: &DraObjects) {
        if !Arc::ptr_eq(&self.claims, &other.claims) {
            self.claims = other.claims.clone();
        }
        if !Arc::ptr_eq(&self.slices, &other.slices) {
            self.slices = other.slices.clone();
        }
        if !Arc::ptr_eq(&self.raw_slices, &other.raw_slices) {
            self.raw_slices = other.raw_slices.clone();
        }
        if !Arc::ptr_eq(&self.taint_rules, &other.taint_rules) {
            self.taint_rules = other.taint_rules.clone();
        }
        if !Arc::ptr_eq(&self.classes, &other.classes) {
            self.classes = other.classes.clone();
        }
        if !Arc::ptr_eq(&self.allocated, &other.allocated) {
            self.allocated = other.allocated.clone();
        }
        if !Arc::ptr_eq(&self.shared, &other.shared) {
            self.shared = other.shared.clone();
        }
        if !Arc::ptr_eq(&self.assumed, &other.assumed) {
            self.assumed = other.assumed.clone();
        }
        if !Arc::ptr_eq(&self.pod_groups, &other.pod_groups) {
            self.pod_groups = other.pod_groups.clone();
        }
        self.binding_conditions_off = other.binding_conditions_off;
        self.workload_claims_off = other.workload_claims_off;
        self.compatibility_groups_off = other.compatibility_groups_off;
    }
}
