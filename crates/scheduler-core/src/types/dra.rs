//! Compact views of the DRA objects (resource.k8s.io/v1) DynamicResources will read: built
//! once per object change, like the volume views. Only what allocation needs is kept.
//!
//! The cache holds them ([`DraObjects`], `Snapshot::dra`); no plugin reads them yet (issue 17,
//! step 2: the allocator).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::resource::v1 as dra;

use super::node_selector::NodeSelector;

/// `allocationMode` of an `exactly` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllocationMode {
    /// `ExactCount` (the default): this many devices (`count`, default 1).
    ExactCount(i64),
    /// `All`: every matching device in the pools the pod can use.
    All,
    /// A mode this version does not know: such a request cannot be allocated.
    Unknown(String),
}

/// One entry of `spec.devices.requests`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimRequest {
    Exactly {
        name: String,
        device_class_name: String,
        mode: AllocationMode,
        /// CEL selectors of the request: not evaluated yet, so the request cannot be
        /// allocated (never ignored).
        cel_selectors: usize,
        admin_access: bool,
    },
    /// `firstAvailable` (prioritized list): not supported yet.
    FirstAvailable { name: String },
}

impl ClaimRequest {
    pub fn name(&self) -> &str {
        match self {
            ClaimRequest::Exactly { name, .. } | ClaimRequest::FirstAvailable { name } => name,
        }
    }
}

/// A device an allocation handed out.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeviceId {
    pub driver: String,
    pub pool: String,
    pub device: String,
}

/// `status.allocation` of a claim.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimAllocation {
    /// (request name, device) for each result.
    pub devices: Vec<(String, DeviceId)>,
    /// Where the devices are reachable; None means every node.
    pub node_selector: Option<NodeSelector>,
}

/// Scheduling view of one ResourceClaim.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceClaimInfo {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// For the resourceVersion precondition of the status write.
    pub resource_version: String,
    pub requests: Vec<ClaimRequest>,
    /// `spec.devices.constraints` is set (matchAttribute): not supported yet.
    pub has_constraints: bool,
    pub allocation: Option<ClaimAllocation>,
    /// UIDs in `status.reservedFor` (at most 256 by API validation).
    pub reserved_for: Vec<String>,
    pub deleting: bool,
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
        let status = c.status.as_ref();
        let allocation = status
            .and_then(|s| s.allocation.as_ref())
            .map(|a| ClaimAllocation {
                devices: a
                    .devices
                    .as_ref()
                    .and_then(|d| d.results.as_ref())
                    .into_iter()
                    .flatten()
                    .map(|r| {
                        let id = DeviceId {
                            driver: r.driver.clone(),
                            pool: r.pool.clone(),
                            device: r.device.clone(),
                        };
                        (r.request.clone(), id)
                    })
                    .collect(),
                node_selector: a.node_selector.as_ref().map(NodeSelector::from_k8s),
            });
        ResourceClaimInfo {
            namespace: c.metadata.namespace.clone().unwrap_or_default(),
            name: c.metadata.name.clone().unwrap_or_default(),
            uid: c.metadata.uid.clone().unwrap_or_default(),
            resource_version: c.metadata.resource_version.clone().unwrap_or_default(),
            requests,
            has_constraints: devices
                .and_then(|d| d.constraints.as_ref())
                .is_some_and(|c| !c.is_empty()),
            allocation,
            reserved_for: status
                .and_then(|s| s.reserved_for.as_ref())
                .into_iter()
                .flatten()
                .map(|r| r.uid.clone())
                .collect(),
            deleting: c.metadata.deletion_timestamp.is_some(),
        }
    }

    pub fn is_reserved_for(&self, pod_uid: &str) -> bool {
        self.reserved_for.iter().any(|u| u == pod_uid)
    }
}

fn request_view(r: &dra::DeviceRequest) -> ClaimRequest {
    let Some(e) = &r.exactly else {
        return ClaimRequest::FirstAvailable {
            name: r.name.clone(),
        };
    };
    let mode = match e.allocation_mode.as_deref() {
        None | Some("") | Some("ExactCount") => AllocationMode::ExactCount(e.count.unwrap_or(1)),
        Some("All") => AllocationMode::All,
        Some(other) => AllocationMode::Unknown(other.to_string()),
    };
    ClaimRequest::Exactly {
        name: r.name.clone(),
        device_class_name: e.device_class_name.clone(),
        mode,
        cel_selectors: e.selectors.as_ref().map_or(0, Vec::len),
        admin_access: e.admin_access.unwrap_or(false),
    }
}

/// Scheduling view of one DeviceClass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceClassInfo {
    pub name: String,
    /// CEL selectors of the class: not evaluated yet (see [`ClaimRequest`]).
    pub cel_selectors: usize,
}

impl DeviceClassInfo {
    pub fn from_class(c: &dra::DeviceClass) -> Self {
        DeviceClassInfo {
            name: c.metadata.name.clone().unwrap_or_default(),
            cel_selectors: c
                .spec
                .as_ref()
                .and_then(|s| s.selectors.as_ref())
                .map_or(0, Vec::len),
        }
    }
}

/// Which nodes a slice's (or a device's) devices are reachable from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceNodes {
    Node(String),
    Selector(NodeSelector),
    AllNodes,
    /// `perDeviceNodeSelection`: each device says it.
    PerDevice,
    /// None of the above set (invalid): usable nowhere.
    Nowhere,
}

impl DeviceNodes {
    fn of(
        node_name: Option<&String>,
        node_selector: Option<&k8s_openapi::api::core::v1::NodeSelector>,
        all_nodes: Option<bool>,
        per_device: Option<bool>,
    ) -> Self {
        if let Some(n) = node_name.filter(|n| !n.is_empty()) {
            DeviceNodes::Node(n.clone())
        } else if let Some(s) = node_selector {
            DeviceNodes::Selector(NodeSelector::from_k8s(s))
        } else if all_nodes == Some(true) {
            DeviceNodes::AllNodes
        } else if per_device == Some(true) {
            DeviceNodes::PerDevice
        } else {
            DeviceNodes::Nowhere
        }
    }

    /// Whether a node (name, labels) can reach the devices.
    pub fn reaches(&self, node_name: &str, labels: &BTreeMap<String, String>) -> bool {
        match self {
            DeviceNodes::Node(n) => n == node_name,
            DeviceNodes::Selector(s) => s.matches(node_name, labels),
            DeviceNodes::AllNodes => true,
            DeviceNodes::PerDevice | DeviceNodes::Nowhere => false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceDevice {
    pub name: String,
    /// Set only in slices with `perDeviceNodeSelection`.
    pub nodes: Option<DeviceNodes>,
}

/// Scheduling view of one ResourceSlice.
#[derive(Debug, Clone, PartialEq, Eq)]
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
            nodes,
            devices: spec
                .devices
                .iter()
                .flatten()
                .map(|d| SliceDevice {
                    name: d.name.clone(),
                    nodes: per_device.then(|| {
                        DeviceNodes::of(
                            d.node_name.as_ref(),
                            d.node_selector.as_ref(),
                            d.all_nodes,
                            None,
                        )
                    }),
                })
                .collect(),
        }
    }
}

/// Claims, slices and classes, each map shared copy-on-write between the cache and its
/// snapshots (like [`super::volume::VolumeObjects`]).
#[derive(Debug, Clone, Default)]
pub struct DraObjects {
    /// Keyed by `namespace/name`.
    pub(crate) claims: Arc<HashMap<String, Arc<ResourceClaimInfo>>>,
    /// Sorted by name, so allocation walks devices in the same order every time.
    pub(crate) slices: Arc<BTreeMap<String, Arc<ResourceSliceInfo>>>,
    pub(crate) classes: Arc<HashMap<String, Arc<DeviceClassInfo>>>,
}

impl DraObjects {
    pub fn claim(&self, namespace: &str, name: &str) -> Option<&Arc<ResourceClaimInfo>> {
        self.claims.get(&format!("{namespace}/{name}"))
    }

    pub fn slices(&self) -> impl Iterator<Item = &Arc<ResourceSliceInfo>> {
        self.slices.values()
    }

    pub fn class(&self, name: &str) -> Option<&Arc<DeviceClassInfo>> {
        self.classes.get(name)
    }

    pub fn update_claim(&mut self, c: &dra::ResourceClaim) {
        let v = ResourceClaimInfo::from_claim(c);
        let key = format!("{}/{}", v.namespace, v.name);
        Arc::make_mut(&mut self.claims).insert(key, Arc::new(v));
    }

    pub fn remove_claim(&mut self, namespace: &str, name: &str) -> bool {
        let key = format!("{namespace}/{name}");
        self.claims.contains_key(&key) && Arc::make_mut(&mut self.claims).remove(&key).is_some()
    }

    pub fn update_slice(&mut self, s: &dra::ResourceSlice) {
        let v = ResourceSliceInfo::from_slice(s);
        Arc::make_mut(&mut self.slices).insert(v.name.clone(), Arc::new(v));
    }

    pub fn remove_slice(&mut self, name: &str) -> bool {
        self.slices.contains_key(name) && Arc::make_mut(&mut self.slices).remove(name).is_some()
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
        if !Arc::ptr_eq(&self.classes, &other.classes) {
            self.classes = other.classes.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1 as k8s;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn exact(
        name: &str,
        class: &str,
        mode: Option<&str>,
        count: Option<i64>,
    ) -> dra::DeviceRequest {
        dra::DeviceRequest {
            name: name.into(),
            exactly: Some(dra::ExactDeviceRequest {
                device_class_name: class.into(),
                allocation_mode: mode.map(Into::into),
                count,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn claim_requests_and_allocation() {
        let mut c = dra::ResourceClaim {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some("gpu".into()),
                uid: Some("u1".into()),
                resource_version: Some("7".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let mut with_sel = exact("e", "gpu.example.com", None, None);
        with_sel.exactly.as_mut().unwrap().selectors = Some(vec![dra::DeviceSelector {
            cel: Some(dra::CELDeviceSelector {
                expression: "true".into(),
            }),
        }]);
        c.spec.get_or_insert_default().devices = Some(dra::DeviceClaim {
            requests: Some(vec![
                exact("a", "gpu.example.com", None, None),
                exact("b", "gpu.example.com", Some("ExactCount"), Some(2)),
                exact("c", "nic.example.com", Some("All"), None),
                exact("d", "gpu.example.com", Some("Sometimes"), None),
                with_sel,
                dra::DeviceRequest {
                    name: "f".into(),
                    first_available: Some(vec![]),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        });
        let v = ResourceClaimInfo::from_claim(&c);
        assert_eq!((v.namespace.as_str(), v.name.as_str()), ("ns", "gpu"));
        assert_eq!(v.resource_version, "7");
        let modes: Vec<_> = v
            .requests
            .iter()
            .map(|r| match r {
                ClaimRequest::Exactly {
                    mode,
                    cel_selectors,
                    ..
                } => (r.name().to_string(), Some(mode.clone()), *cel_selectors),
                ClaimRequest::FirstAvailable { .. } => (r.name().to_string(), None, 0),
            })
            .collect();
        assert_eq!(
            modes,
            vec![
                ("a".into(), Some(AllocationMode::ExactCount(1)), 0),
                ("b".into(), Some(AllocationMode::ExactCount(2)), 0),
                ("c".into(), Some(AllocationMode::All), 0),
                (
                    "d".into(),
                    Some(AllocationMode::Unknown("Sometimes".into())),
                    0
                ),
                ("e".into(), Some(AllocationMode::ExactCount(1)), 1),
                ("f".into(), None, 0),
            ]
        );
        assert!(v.allocation.is_none());
        assert!(!v.is_reserved_for("pod-1"));

        c.status = Some(dra::ResourceClaimStatus {
            allocation: Some(dra::AllocationResult {
                devices: Some(dra::DeviceAllocationResult {
                    results: Some(vec![dra::DeviceRequestAllocationResult {
                        request: "a".into(),
                        driver: "gpu.example.com".into(),
                        pool: "node-1".into(),
                        device: "gpu-0".into(),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            reserved_for: Some(vec![dra::ResourceClaimConsumerReference {
                resource: "pods".into(),
                name: "p".into(),
                uid: "pod-1".into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
        let v = ResourceClaimInfo::from_claim(&c);
        let a = v.allocation.as_ref().unwrap();
        assert_eq!(a.devices[0].0, "a");
        assert_eq!(a.devices[0].1.device, "gpu-0");
        assert!(a.node_selector.is_none(), "no selector: every node");
        assert!(v.is_reserved_for("pod-1"));
    }

    #[test]
    fn slice_node_scope() {
        let slice = |f: &dyn Fn(&mut dra::ResourceSliceSpec)| {
            let mut s = dra::ResourceSlice::default();
            s.spec.driver = "gpu.example.com".into();
            s.spec.pool = dra::ResourcePool {
                name: "p".into(),
                generation: 3,
                resource_slice_count: 2,
            };
            s.spec.devices = Some(vec![dra::Device {
                name: "gpu-0".into(),
                node_name: Some("n2".into()),
                ..Default::default()
            }]);
            f(&mut s.spec);
            ResourceSliceInfo::from_slice(&s)
        };
        let labels: BTreeMap<String, String> = [("zone".to_string(), "a".to_string())].into();
        let local = slice(&|s| s.node_name = Some("n1".into()));
        assert_eq!((local.pool_generation, local.pool_slice_count), (3, 2));
        assert!(local.nodes.reaches("n1", &labels));
        assert!(!local.nodes.reaches("n2", &labels));
        assert_eq!(local.devices[0].nodes, None, "slice-level scope");

        let zonal = slice(&|s| {
            s.node_selector = Some(k8s::NodeSelector {
                node_selector_terms: vec![k8s::NodeSelectorTerm {
                    match_expressions: Some(vec![k8s::NodeSelectorRequirement {
                        key: "zone".into(),
                        operator: "In".into(),
                        values: Some(vec!["a".into()]),
                    }]),
                    ..Default::default()
                }],
            })
        });
        assert!(zonal.nodes.reaches("any", &labels));
        assert!(!zonal.nodes.reaches("any", &BTreeMap::new()));

        let all = slice(&|s| s.all_nodes = Some(true));
        assert!(all.nodes.reaches("any", &BTreeMap::new()));

        let per_device = slice(&|s| s.per_device_node_selection = Some(true));
        assert_eq!(per_device.nodes, DeviceNodes::PerDevice);
        assert!(!per_device.nodes.reaches("n2", &labels));
        let d = per_device.devices[0].nodes.as_ref().unwrap();
        assert!(d.reaches("n2", &labels) && !d.reaches("n1", &labels));

        let nowhere = slice(&|_| {});
        assert_eq!(nowhere.nodes, DeviceNodes::Nowhere);
    }

    #[test]
    fn class_counts_cel_selectors() {
        let mut c = dra::DeviceClass::default();
        c.metadata.name = Some("gpu.example.com".into());
        assert_eq!(DeviceClassInfo::from_class(&c).cel_selectors, 0);
        c.spec.get_or_insert_default().selectors = Some(vec![dra::DeviceSelector { cel: None }; 2]);
        assert_eq!(DeviceClassInfo::from_class(&c).cel_selectors, 2);
    }

    #[test]
    fn objects_are_shared_until_they_change() {
        let mut cache = DraObjects::default();
        let mut c = dra::ResourceClaim::default();
        c.metadata.namespace = Some("ns".into());
        c.metadata.name = Some("gpu".into());
        cache.update_claim(&c);
        let mut snap = DraObjects::default();
        snap.sync_from(&cache);
        assert!(Arc::ptr_eq(&snap.claims, &cache.claims));
        assert!(snap.claim("ns", "gpu").is_some());
        assert!(snap.claim("other", "gpu").is_none());

        // A change in the cache does not touch the snapshot taken before it.
        assert!(cache.remove_claim("ns", "gpu"));
        assert!(!cache.remove_claim("ns", "gpu"), "already gone");
        assert!(snap.claim("ns", "gpu").is_some());
        snap.sync_from(&cache);
        assert!(snap.claim("ns", "gpu").is_none());

        let mut s = dra::ResourceSlice::default();
        s.metadata.name = Some("n1-gpus".into());
        cache.update_slice(&s);
        let mut cls = dra::DeviceClass::default();
        cls.metadata.name = Some("gpu.example.com".into());
        cache.update_class(&cls);
        snap.sync_from(&cache);
        assert_eq!(snap.slices().count(), 1);
        assert!(snap.class("gpu.example.com").is_some());
        assert!(cache.remove_slice("n1-gpus") && cache.remove_class("gpu.example.com"));
        snap.sync_from(&cache);
        assert_eq!(snap.slices().count(), 0);
        assert!(snap.class("gpu.example.com").is_none());
    }
}
