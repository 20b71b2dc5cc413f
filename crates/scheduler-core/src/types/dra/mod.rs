//! Compact views of the DRA objects (resource.k8s.io/v1) DynamicResources reads: built once
//! per object change, like the volume views. Only what allocation needs is kept; CEL
//! selectors are compiled here ([`cel`]), and each device's CEL value is built here, so the
//! allocator never re-reads API objects.
//!
//! The cache holds them ([`DraObjects`], `Snapshot::dra`), with the claims the scheduler has
//! allocated or reserved but whose status write is still in flight (assumed claims).

pub mod binding;
pub mod capacity;
pub mod cel;
mod cel_budget;
mod cel_estimate;
pub mod extended;
mod objects;
pub mod taint_rules;
pub mod template;

use super::labels::LabelSet;
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::resource::v1 as dra;

use self::cel::{AttrValue, CelSelector, device_value};
use super::Quantity;
use super::node_selector::NodeSelector;
use super::quantity::parse_quantity;

pub use objects::{ClaimDeallocation, ClaimStatusWrite, DraObjects, GroupWrite, SharedUse};

/// The finalizer the scheduler puts on a claim it allocates (upstream `resourceapi.Finalizer`).
pub const CLAIM_FINALIZER: &str = "resource.kubernetes.io/delete-protection";
/// The API group of Workload API PodGroups, as a claim consumer or a claim's owner.
pub const POD_GROUP_API_GROUP: &str = "scheduling.k8s.io";
/// Upstream `ResourceClaimReservedForMaxSize`.
pub const RESERVED_FOR_MAX_SIZE: usize = 256;
/// Upstream `AllocationResultsMaxSize`: devices one claim may get.
pub const ALLOCATION_RESULTS_MAX_SIZE: usize = 32;

/// `allocationMode` of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllocationMode {
    /// `ExactCount` (the default): this many devices (`count`, default 1).
    ExactCount(i64),
    /// `All`: every matching device in the pools the node can use.
    All,
    /// A mode this version does not know: such a request cannot be allocated.
    Unknown(String),
}

/// An `exactly` request or one `firstAvailable` subrequest.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestSpec {
    pub name: String,
    pub device_class_name: String,
    pub mode: AllocationMode,
    pub selectors: Vec<CelSelector>,
    pub admin_access: bool,
    /// Device taints the request tolerates (copied into its allocation results).
    pub tolerations: Vec<dra::DeviceToleration>,
    /// `capacity.requests` (consumable capacity): what each device must still have; None
    /// when unset.
    pub capacity: Option<BTreeMap<String, capacity::Amount>>,
    /// A request field this version does not implement yet (derived attributes), or a
    /// capacity request that does not parse: such a request is an allocation error, never
    /// allocated ignoring it.
    pub unsupported: Option<&'static str>,
}

impl RequestSpec {
    fn new(
        name: &str,
        class: &str,
        mode: Option<&str>,
        count: Option<i64>,
        selectors: Option<&Vec<dra::DeviceSelector>>,
        admin_access: bool,
    ) -> Self {
        let mode = match mode {
            None | Some("") | Some("ExactCount") => AllocationMode::ExactCount(count.unwrap_or(1)),
            Some("All") => AllocationMode::All,
            Some(other) => AllocationMode::Unknown(other.to_string()),
        };
        RequestSpec {
            name: name.to_string(),
            device_class_name: class.to_string(),
            mode,
            selectors: compile_selectors(selectors),
            admin_access,
            tolerations: Vec::new(),
            capacity: None,
            unsupported: None,
        }
    }

    fn with(
        mut self,
        tolerations: Option<&Vec<dra::DeviceToleration>>,
        capacity: Option<&dra::CapacityRequirements>,
        derived: Option<&Vec<dra::DeviceDerivedAttribute>>,
    ) -> Self {
        self.tolerations = tolerations.cloned().unwrap_or_default();
        let requests = capacity.map(|c| {
            c.requests
                .iter()
                .flatten()
                .map(|(k, v)| capacity::Amount::parse(v).map(|a| (k.clone(), a)))
                .collect::<Option<BTreeMap<_, _>>>()
        });
        self.unsupported = if derived.is_some_and(|d| !d.is_empty()) {
            Some("uses derived attributes, which ferrosched does not support yet")
        } else if requests.as_ref().is_some_and(Option::is_none) {
            Some("capacity.requests: a quantity does not parse")
        } else {
            None
        };
        self.capacity = requests.flatten();
        self
    }
}

fn compile_selectors(s: Option<&Vec<dra::DeviceSelector>>) -> Vec<CelSelector> {
    s.into_iter()
        .flatten()
        .map(|s| match &s.cel {
            Some(c) => CelSelector::compile(&c.expression),
            None => CelSelector::missing(),
        })
        .collect()
}

/// One entry of `spec.devices.requests`.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimRequest {
    Exactly(RequestSpec),
    /// `firstAvailable`: the first subrequest that can be allocated wins.
    FirstAvailable {
        name: String,
        subrequests: Vec<RequestSpec>,
    },
    /// Neither set: a request type this version does not know.
    Unknown {
        name: String,
    },
}

impl ClaimRequest {
    pub fn name(&self) -> &str {
        match self {
            ClaimRequest::Exactly(r) => &r.name,
            ClaimRequest::FirstAvailable { name, .. } | ClaimRequest::Unknown { name } => name,
        }
    }
}

/// One entry of `spec.devices.constraints`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimConstraint {
    /// Empty: every request.
    pub requests: Vec<String>,
    /// Fully qualified attribute name; None: a constraint type this version does not know.
    pub match_attribute: Option<String>,
}

/// A device an allocation handed out.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeviceId {
    pub driver: String,
    pub pool: String,
    pub device: String,
}

impl std::fmt::Display for DeviceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.device)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocatedDevice {
    /// `request` or `request/subrequest`.
    pub request: String,
    pub id: DeviceId,
    /// Admin access does not take the device away from others.
    pub admin_access: bool,
    /// `shareID`: one share of a device allowing multiple allocations, which takes only
    /// `consumed` of its capacity (nano-units per capacity name).
    pub share_id: Option<String>,
    pub consumed: Vec<(String, i128)>,
}

/// `status.allocation` of a claim.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClaimAllocation {
    pub devices: Vec<AllocatedDevice>,
    /// Where the devices are reachable; None means every node.
    pub node_selector: Option<NodeSelector>,
    /// As written, for the claim status write.
    pub raw: dra::AllocationResult,
}

impl ClaimAllocation {
    pub fn from_result(a: &dra::AllocationResult) -> Self {
        ClaimAllocation {
            devices: a
                .devices
                .as_ref()
                .and_then(|d| d.results.as_ref())
                .into_iter()
                .flatten()
                .map(|r| AllocatedDevice {
                    request: r.request.clone(),
                    id: DeviceId {
                        driver: r.driver.clone(),
                        pool: r.pool.clone(),
                        device: r.device.clone(),
                    },
                    admin_access: r.admin_access == Some(true),
                    share_id: r.share_id.clone().filter(|s| !s.is_empty()),
                    consumed: r
                        .consumed_capacity
                        .iter()
                        .flatten()
                        .filter_map(|(k, v)| {
                            parse_quantity(&v.0).ok().map(|q| (k.clone(), q.nanos()))
                        })
                        .collect(),
                })
                .collect(),
            node_selector: a.node_selector.as_ref().map(NodeSelector::from_k8s),
            raw: a.clone(),
        }
    }
}

/// One `status.reservedFor` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerRef {
    pub api_group: Option<String>,
    pub resource: String,
    pub name: String,
    pub uid: String,
}

impl ConsumerRef {
    pub fn pod(name: &str, uid: &str) -> Self {
        ConsumerRef {
            api_group: None,
            resource: "pods".into(),
            name: name.into(),
            uid: uid.into(),
        }
    }

    /// A PodGroup as consumer (DRAWorkloadResourceClaims): one entry for all of its pods.
    pub fn pod_group(name: &str, uid: &str) -> Self {
        ConsumerRef {
            api_group: Some(POD_GROUP_API_GROUP.into()),
            resource: "podgroups".into(),
            name: name.into(),
            uid: uid.into(),
        }
    }

    /// Whether this entry is the Workload API PodGroup `name` (matched by name, as upstream
    /// does: a pod does not know its group's uid).
    pub fn is_pod_group(&self, name: &str) -> bool {
        self.api_group.as_deref() == Some(POD_GROUP_API_GROUP)
            && self.resource == "podgroups"
            && self.name == name
    }

    pub fn to_k8s(&self) -> dra::ResourceClaimConsumerReference {
        dra::ResourceClaimConsumerReference {
            api_group: self.api_group.clone(),
            resource: self.resource.clone(),
            name: self.name.clone(),
            uid: self.uid.clone(),
        }
    }
}

/// Scheduling view of one ResourceClaim.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResourceClaimInfo {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// For the resourceVersion precondition of the status write.
    pub resource_version: String,
    pub requests: Vec<ClaimRequest>,
    pub constraints: Vec<ClaimConstraint>,
    /// `spec.devices.config`, copied into the allocation result.
    pub config: Vec<dra::DeviceClaimConfiguration>,
    pub allocation: Option<ClaimAllocation>,
    /// `status.reservedFor` (at most 256 by API validation).
    pub reserved_for: Vec<ConsumerRef>,
    /// UID of the pod controlling this claim (claims made from a template).
    pub owner_pod_uid: Option<String>,
    /// Name of the Workload API PodGroup controlling this claim (claims kube-controller-manager
    /// made from a PodGroup's template, DRAWorkloadResourceClaims).
    pub owner_pod_group: Option<String>,
    pub finalizers: Vec<String>,
    pub deleting: bool,
    /// Annotated as the claim of a pod's DRA-backed extended resources
    /// ([`extended::EXTENDED_RESOURCE_CLAIM_ANNOTATION`] is `"true"`).
    pub for_extended_resources: bool,
    /// Set when the allocation hands out a device with binding conditions: where they
    /// stand according to `status.devices`.
    pub binding: Option<Box<binding::ClaimBinding>>,
}

impl ResourceClaimInfo {
    pub fn from_claim(c: &dra::ResourceClaim) -> Self {
        let devices = c.spec.as_ref().and_then(|s| s.devices.as_ref());
        let requests = devices
            .and_then(|d| d.requests.as_ref())
            .into_iter()
            .flatten()
            .map(request_view)
            .collect();
        let constraints = devices
            .and_then(|d| d.constraints.as_ref())
            .into_iter()
            .flatten()
            .map(|k| ClaimConstraint {
                requests: k.requests.clone().unwrap_or_default(),
                match_attribute: k.match_attribute.clone().filter(|a| !a.is_empty()),
            })
            .collect();
        let status = c.status.as_ref();
        let owner_pod_uid = c
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true) && o.kind == "Pod" && o.api_version == "v1")
            .map(|o| o.uid.clone());
        // Any served version of scheduling.k8s.io (upstream ignores the version).
        let owner_pod_group = c
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| {
                o.controller == Some(true)
                    && o.kind == "PodGroup"
                    && o.api_version
                        .strip_prefix(POD_GROUP_API_GROUP)
                        .is_some_and(|v| v.starts_with('/'))
            })
            .map(|o| o.name.clone());
        ResourceClaimInfo {
            namespace: c.metadata.namespace.clone().unwrap_or_default(),
            name: c.metadata.name.clone().unwrap_or_default(),
            uid: c.metadata.uid.clone().unwrap_or_default(),
            resource_version: c.metadata.resource_version.clone().unwrap_or_default(),
            requests,
            constraints,
            config: devices.and_then(|d| d.config.clone()).unwrap_or_default(),
            allocation: status
                .and_then(|s| s.allocation.as_ref())
                .map(ClaimAllocation::from_result),
            reserved_for: status
                .and_then(|s| s.reserved_for.as_ref())
                .into_iter()
                .flatten()
                .map(|r| ConsumerRef {
                    api_group: r.api_group.clone().filter(|g| !g.is_empty()),
                    resource: r.resource.clone(),
                    name: r.name.clone(),
                    uid: r.uid.clone(),
                })
                .collect(),
            owner_pod_uid,
            owner_pod_group,
            finalizers: c.metadata.finalizers.clone().unwrap_or_default(),
            deleting: c.metadata.deletion_timestamp.is_some(),
            for_extended_resources: c.metadata.annotations.as_ref().is_some_and(|a| {
                a.get(extended::EXTENDED_RESOURCE_CLAIM_ANNOTATION)
                    .is_some_and(|v| v == "true")
            }),
            binding: binding::ClaimBinding::of(c).map(Box::new),
        }
    }

    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    pub fn is_reserved_for(&self, pod_uid: &str) -> bool {
        self.reserved_for.iter().any(|r| r.uid == pod_uid)
    }

    /// Whether the Workload API PodGroup `name` is among the consumers.
    pub fn is_reserved_for_pod_group(&self, name: &str) -> bool {
        self.reserved_for.iter().any(|r| r.is_pod_group(name))
    }

    /// Another consumer fits in `reservedFor` (upstream `CanBeReserved`).
    pub fn can_be_reserved(&self) -> bool {
        self.reserved_for.len() < RESERVED_FOR_MAX_SIZE
    }
}

fn request_view(r: &dra::DeviceRequest) -> ClaimRequest {
    if let Some(e) = &r.exactly {
        return ClaimRequest::Exactly(
            RequestSpec::new(
                &r.name,
                &e.device_class_name,
                e.allocation_mode.as_deref(),
                e.count,
                e.selectors.as_ref(),
                e.admin_access.unwrap_or(false),
            )
            .with(
                e.tolerations.as_ref(),
                e.capacity.as_ref(),
                e.derived_attributes.as_ref(),
            ),
        );
    }
    match &r.first_available {
        Some(subs) if !subs.is_empty() => ClaimRequest::FirstAvailable {
            name: r.name.clone(),
            subrequests: subs
                .iter()
                .map(|s| {
                    RequestSpec::new(
                        &s.name,
                        &s.device_class_name,
                        s.allocation_mode.as_deref(),
                        s.count,
                        s.selectors.as_ref(),
                        false,
                    )
                    .with(
                        s.tolerations.as_ref(),
                        s.capacity.as_ref(),
                        s.derived_attributes.as_ref(),
                    )
                })
                .collect(),
        },
        _ => ClaimRequest::Unknown {
            name: r.name.clone(),
        },
    }
}

/// Scheduling view of one DeviceClass.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeviceClassInfo {
    pub name: String,
    pub selectors: Vec<CelSelector>,
    /// `spec.config`, copied into allocation results of requests using the class.
    pub config: Vec<dra::DeviceClassConfiguration>,
    /// `spec.extendedResourceName`: pods asking for this extended resource get devices of
    /// this class where no node advertises it ([`extended`]).
    pub extended_resource_name: Option<String>,
    /// Creation time (Unix nanoseconds): the newest class naming a resource wins.
    pub created: i64,
}

impl DeviceClassInfo {
    pub fn from_class(c: &dra::DeviceClass) -> Self {
        let spec = c.spec.as_ref();
        DeviceClassInfo {
            name: c.metadata.name.clone().unwrap_or_default(),
            selectors: compile_selectors(spec.and_then(|s| s.selectors.as_ref())),
            config: spec.and_then(|s| s.config.clone()).unwrap_or_default(),
            extended_resource_name: spec
                .and_then(|s| s.extended_resource_name.clone())
                .filter(|n| !n.is_empty()),
            created: c
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| {
                    t.0.as_nanosecond()
                        .clamp(i64::MIN as i128, i64::MAX as i128) as i64
                })
                .unwrap_or(0),
        }
    }
}

/// Which nodes a slice's (or a device's) devices are reachable from.
#[derive(Debug, Clone, PartialEq)]
pub enum DeviceNodes {
    Node(String),
    /// Compiled, and as written (it goes into the allocation's node selector).
    Selector(NodeSelector, k8s::NodeSelector),
    AllNodes,
    /// `perDeviceNodeSelection`: each device says it.
    PerDevice,
    /// None of the above set (invalid or a future field): usable nowhere.
    Nowhere,
}

impl DeviceNodes {
    fn of(
        node_name: Option<&String>,
        node_selector: Option<&k8s::NodeSelector>,
        all_nodes: Option<bool>,
        per_device: Option<bool>,
    ) -> Self {
        if let Some(n) = node_name.filter(|n| !n.is_empty()) {
            DeviceNodes::Node(n.clone())
        } else if let Some(s) = node_selector {
            DeviceNodes::Selector(NodeSelector::from_k8s(s), s.clone())
        } else if all_nodes == Some(true) {
            DeviceNodes::AllNodes
        } else if per_device == Some(true) {
            DeviceNodes::PerDevice
        } else {
            DeviceNodes::Nowhere
        }
    }

    /// Whether a node (name, labels) can reach the devices.
    pub fn reaches<L: LabelSet + ?Sized>(&self, node_name: &str, labels: &L) -> bool {
        match self {
            DeviceNodes::Node(n) => n == node_name,
            DeviceNodes::Selector(s, _) => s.matches_labels(node_name, labels),
            DeviceNodes::AllNodes => true,
            DeviceNodes::PerDevice | DeviceNodes::Nowhere => false,
        }
    }
}

/// A device taint that matters for allocation (upstream: effects other than NoSchedule and
/// NoExecute are ignored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceTaintView {
    pub key: String,
    pub value: String,
    pub effect: String,
}

impl DeviceTaintView {
    /// Upstream `ToleratesTaint` for devices: effect (empty: any), then operator `Exists`
    /// (empty key: any key) or `Equal` (the default: same key and value).
    pub fn tolerated_by(&self, t: &dra::DeviceToleration) -> bool {
        if t.effect
            .as_deref()
            .is_some_and(|e| !e.is_empty() && e != self.effect)
        {
            return false;
        }
        let key = t.key.as_deref().unwrap_or_default();
        match t.operator.as_deref().unwrap_or("Equal") {
            "Exists" => key.is_empty() || key == self.key,
            "Equal" | "" => key == self.key && t.value.as_deref().unwrap_or_default() == self.value,
            _ => false,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct SliceDevice {
    pub name: String,
    /// Set only in slices with `perDeviceNodeSelection`.
    pub nodes: Option<DeviceNodes>,
    /// By the name as published (`name` or `domain/name`).
    pub attributes: BTreeMap<String, AttrValue>,
    /// Taints with an effect that keeps the device from being allocated (NoSchedule,
    /// NoExecute) unless a request tolerates them.
    pub taints: Vec<DeviceTaintView>,
    /// Why this version never allocates the device (a quantity that does not parse);
    /// None: usable.
    pub unsupported: Option<&'static str>,
    /// `allowMultipleAllocations`: each allocation is a share consuming part of `capacity`.
    pub allow_multiple: bool,
    /// `capacity`, with the request policies (consumable capacity).
    pub capacity: BTreeMap<String, capacity::CapacityView>,
    /// `bindingConditions`, `bindingFailureConditions` and `bindsToNode` (device binding
    /// conditions); None for the usual device without them.
    pub binding: Option<Box<DeviceBinding>>,
    /// `consumesCounters`: what the device takes from its pool's shared counter sets
    /// (partitionable devices).
    pub consumes: Vec<CounterConsumption>,
    /// The `device` variable CEL selectors see.
    pub cel: ::cel::Value,
}

/// A device's binding conditions (see [`binding`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeviceBinding {
    pub conditions: Vec<String>,
    pub failure_conditions: Vec<String>,
    /// The allocation's node selector becomes the node it was allocated for.
    pub binds_to_node: bool,
}

impl SliceDevice {
    /// Whether the device has binding conditions (without the feature it is never
    /// allocated, as upstream's allocator skips it).
    pub fn has_binding_conditions(&self) -> bool {
        self.binding
            .as_ref()
            .is_some_and(|b| !b.conditions.is_empty())
    }

    /// Whether any `consumesCounters` entry names compatibility groups.
    pub fn declares_groups(&self) -> bool {
        self.consumes.iter().any(|c| !c.groups.is_empty())
    }

    pub fn binds_to_node(&self) -> bool {
        self.binding.as_ref().is_some_and(|b| b.binds_to_node)
    }
}

/// Scheduling view of one ResourceSlice.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceSliceInfo {
    pub name: String,
    pub driver: String,
    pub pool: String,
    /// Only slices of a pool's newest generation are used.
    pub pool_generation: i64,
    /// How many slices the pool has; a pool with fewer seen is incomplete and not used.
    pub pool_slice_count: i64,
    pub nodes: DeviceNodes,
    pub devices: Vec<SliceDevice>,
    /// `sharedCounters`: counter sets the pool's devices consume from (by set name, then
    /// counter name; amounts in nano-units).
    pub shared_counters: Vec<(String, Vec<(String, i128)>)>,
}

/// One `consumesCounters` entry of a device (amounts in nano-units).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterConsumption {
    pub counter_set: String,
    pub counters: Vec<(String, i128)>,
    /// `compatibilityGroups`: devices on the same counter set are allocated together only
    /// when all of theirs share a group (none: only with others having none).
    pub groups: Vec<String>,
}

/// Counter amounts as nano-units; None if one does not parse.
fn counter_amounts(c: &BTreeMap<String, dra::Counter>) -> Option<Vec<(String, i128)>> {
    c.iter()
        .map(|(k, v)| {
            parse_quantity(&v.value.0)
                .ok()
                .map(|q| (k.clone(), q.nanos()))
        })
        .collect()
}

fn attr_value(a: &dra::DeviceAttribute) -> Option<AttrValue> {
    if let Some(i) = a.int {
        Some(AttrValue::Int(i))
    } else if let Some(b) = a.bool {
        Some(AttrValue::Bool(b))
    } else if let Some(s) = &a.string {
        Some(AttrValue::String(s.clone()))
    } else {
        a.version.as_ref().map(|v| AttrValue::Version(v.clone()))
    }
}

fn device_binding(d: &dra::Device) -> Option<Box<DeviceBinding>> {
    let b = DeviceBinding {
        conditions: d.binding_conditions.clone().unwrap_or_default(),
        failure_conditions: d.binding_failure_conditions.clone().unwrap_or_default(),
        binds_to_node: d.binds_to_node == Some(true),
    };
    (b != DeviceBinding::default()).then(|| Box::new(b))
}

fn device_view(driver: &str, d: &dra::Device, per_device: bool) -> SliceDevice {
    let attributes: BTreeMap<String, AttrValue> = d
        .attributes
        .iter()
        .flatten()
        .filter_map(|(k, v)| attr_value(v).map(|v| (k.clone(), v)))
        .collect();
    // A capacity that does not parse is left out: a selector reading it fails loudly.
    let capacity: BTreeMap<String, Quantity> = d
        .capacity
        .iter()
        .flatten()
        .filter_map(|(k, v)| parse_quantity(&v.value.0).ok().map(|q| (k.clone(), q)))
        .collect();
    let taints = d
        .taints
        .iter()
        .flatten()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .map(|t| DeviceTaintView {
            key: t.key.clone(),
            value: t.value.clone().unwrap_or_default(),
            effect: t.effect.clone(),
        })
        .collect();
    let consumes: Option<Vec<CounterConsumption>> = d
        .consumes_counters
        .iter()
        .flatten()
        .map(|c| {
            counter_amounts(&c.counters).map(|counters| CounterConsumption {
                counter_set: c.counter_set.clone(),
                counters,
                groups: c.compatibility_groups.clone().unwrap_or_default(),
            })
        })
        .collect();
    let views = capacity::capacity_views(d.capacity.as_ref());
    let unsupported = if consumes.is_none() {
        Some("a consumed counter whose quantity does not parse")
    } else if views.is_none() {
        Some("a capacity whose quantity does not parse")
    } else {
        None
    };
    SliceDevice {
        name: d.name.clone(),
        nodes: per_device.then(|| {
            DeviceNodes::of(
                d.node_name.as_ref(),
                d.node_selector.as_ref(),
                d.all_nodes,
                None,
            )
        }),
        cel: device_value(driver, &attributes, &capacity),
        attributes,
        taints,
        unsupported,
        allow_multiple: d.allow_multiple_allocations == Some(true),
        capacity: views.unwrap_or_default(),
        binding: device_binding(d),
        consumes: consumes.unwrap_or_default(),
    }
}

impl ResourceSliceInfo {
    pub fn from_slice(s: &dra::ResourceSlice) -> Self {
        let spec = &s.spec;
        let nodes = DeviceNodes::of(
            spec.node_name.as_ref(),
            spec.node_selector.as_ref(),
            spec.all_nodes,
            spec.per_device_node_selection,
        );
        let per_device = nodes == DeviceNodes::PerDevice;
        ResourceSliceInfo {
            name: s.metadata.name.clone().unwrap_or_default(),
            driver: spec.driver.clone(),
            pool: spec.pool.name.clone(),
            pool_generation: spec.pool.generation,
            pool_slice_count: spec.pool.resource_slice_count,
            devices: spec
                .devices
                .iter()
                .flatten()
                .map(|d| device_view(&spec.driver, d, per_device))
                .collect(),
            nodes,
            // A counter that does not parse counts as none: nothing consuming it fits.
            shared_counters: spec
                .shared_counters
                .iter()
                .flatten()
                .map(|set| {
                    let counters = set
                        .counters
                        .iter()
                        .map(|(k, v)| {
                            let n = parse_quantity(&v.value.0).map_or(0, |q| q.nanos());
                            (k.clone(), n)
                        })
                        .collect();
                    (set.name.clone(), counters)
                })
                .collect(),
        }
    }
}

/// Where a pod's `spec.resourceClaims` entry gets its claim from (upstream
/// `resourceclaim.Name`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodClaimSource {
    /// `resourceClaimName`.
    Claim(String),
    /// `resourceClaimTemplateName`, with the claim named in `status.resourceClaimStatuses`
    /// (None there: no claim was needed). The claim must be owned by the pod.
    Generated(Option<String>),
    /// `resourceClaimTemplateName` but no status entry yet.
    NotCreatedYet,
    /// Neither field set.
    Unsupported,
}

/// One `spec.resourceClaims` entry of a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodClaimRef {
    pub name: String,
    pub source: PodClaimSource,
    /// `resourceClaimTemplateName` when that is the source (to match the entry with its
    /// PodGroup's, see [`crate::types::pod_group::PodGroupInfo::matching_claim`]).
    pub template: Option<String>,
}

impl PodClaimRef {
    /// `resourceClaimName`, when that is the source.
    pub fn claim_name(&self) -> Option<&str> {
        match &self.source {
            PodClaimSource::Claim(n) => Some(n),
            _ => None,
        }
    }
}

/// The pod's claims, resolved against its status.
pub fn pod_claims(pod: &k8s::Pod) -> Vec<PodClaimRef> {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_ref());
    pod.spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref())
        .into_iter()
        .flatten()
        .map(|c| {
            let source = if let Some(n) = c.resource_claim_name.as_ref().filter(|n| !n.is_empty()) {
                PodClaimSource::Claim(n.clone())
            } else if c
                .resource_claim_template_name
                .as_ref()
                .is_some_and(|t| !t.is_empty())
            {
                match statuses.into_iter().flatten().find(|s| s.name == c.name) {
                    Some(s) => PodClaimSource::Generated(s.resource_claim_name.clone()),
                    None => PodClaimSource::NotCreatedYet,
                }
            } else {
                PodClaimSource::Unsupported
            };
            let template = match source {
                PodClaimSource::Generated(_) | PodClaimSource::NotCreatedYet => {
                    c.resource_claim_template_name.clone()
                }
                _ => None,
            };
            PodClaimRef {
                name: c.name.clone(),
                source,
                template,
            }
        })
        .collect()
}

/// Shared for cheap clones of the views the allocator hands around.
pub type ClaimRef = Arc<ResourceClaimInfo>;

#[cfg(test)]
mod tests;
