//! Extended resources backed by DRA (`DeviceClass.spec.extendedResourceName`, GA in 1.37,
//! upstream `extendeddynamicresources.go`): a container asking for `example.com/gpu: 2` on a
//! node whose allocatable has no `example.com/gpu` gets two devices of the class that names
//! the resource, through one scheduler-made claim for the whole pod.
//!
//! This module holds the pure parts: which class a resource name maps to, the per-container
//! requests kept in [`PodInfo`](crate::types::PodInfo), and the claim requests plus the
//! container -> request mappings the pod's `status.extendedResourceClaimStatus` would get.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::resource::v1 as dra;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::{
    AllocationMode, ClaimRequest, DeviceClassInfo, DraObjects, RequestSpec, ResourceClaimInfo,
};
use crate::types::quantity::parse_k8s_quantity;
use crate::types::rare::RareEmpty;
use crate::types::resource::is_extended_resource_name;

/// Every class also backs `deviceclass.resource.kubernetes.io/<class name>` (upstream
/// `ResourceDeviceClassPrefix`).
pub const RESOURCE_DEVICE_CLASS_PREFIX: &str = "deviceclass.resource.kubernetes.io/";
/// Marks the claim made for a pod's extended resources (upstream
/// `ExtendedResourceClaimAnnotation`).
pub const EXTENDED_RESOURCE_CLAIM_ANNOTATION: &str =
    "resource.kubernetes.io/extended-resource-claim";
/// The name of that claim while it exists only in the scheduler's memory; not a valid object
/// name, so it never collides with a real claim (upstream `specialClaimInMemName`).
pub const SPECIAL_CLAIM_NAME: &str = "<extended-resources>";

/// Upstream `IsDRAExtendedResourceName`: an extended resource name, or a class's implicit one.
pub fn is_dra_extended_resource_name(name: &str) -> bool {
    is_extended_resource_name(name) || name.starts_with(RESOURCE_DEVICE_CLASS_PREFIX)
}

/// One container's request for a resource DRA might back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerExtendedRequest {
    /// Index in init containers followed by regular containers.
    pub container_index: usize,
    pub container_name: String,
    pub resource: String,
    /// Position of the resource among all the container's request names, sorted.
    pub resource_index: usize,
    /// Whole devices wanted (a non-integer quantity is not a device count and is left out).
    pub count: i64,
    /// A regular container or a sidecar; false: an init container that runs to completion
    /// first and can reuse the devices of the containers after it.
    pub long_lived: bool,
}

/// A pod's [`ContainerExtendedRequest`]s, in container order (empty for most pods).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtendedRequests(pub Vec<ContainerExtendedRequest>);

impl RareEmpty for ExtendedRequests {
    fn empty() -> &'static Self {
        static EMPTY: ExtendedRequests = ExtendedRequests(Vec::new());
        &EMPTY
    }
    fn is_empty_value(&self) -> bool {
        self.0.is_empty()
    }
}

impl ExtendedRequests {
    /// Built once per pod change. Zero, malformed and non-integer quantities are skipped
    /// (the malformed ones are reported by the pod's request parsing).
    pub fn from_spec(spec: &k8s::PodSpec) -> Self {
        let init = spec.init_containers.as_deref().unwrap_or_default();
        let all = init
            .iter()
            .map(|c| (c, c.restart_policy.as_deref() == Some("Always")))
            .chain(spec.containers.iter().map(|c| (c, true)));
        let mut out = Vec::new();
        for (i, (c, long_lived)) in all.enumerate() {
            let Some(reqs) = c.resources.as_ref().and_then(|r| r.requests.as_ref()) else {
                continue;
            };
            // BTreeMap keys are sorted already: the index is the key's position.
            for (ridx, (name, q)) in reqs.iter().enumerate() {
                if !is_dra_extended_resource_name(name) {
                    continue;
                }
                let Ok(q) = parse_k8s_quantity(q) else {
                    continue;
                };
                let milli = q.milli_value();
                if milli <= 0 || milli % 1000 != 0 {
                    continue;
                }
                out.push(ContainerExtendedRequest {
                    container_index: i,
                    container_name: c.name.clone(),
                    resource: name.clone(),
                    resource_index: ridx,
                    count: milli / 1000,
                    long_lived,
                });
            }
        }
        ExtendedRequests(out)
    }

    /// The resource names asked for, sorted, without repeats.
    pub fn resources(&self) -> BTreeSet<&str> {
        self.0.iter().map(|r| r.resource.as_str()).collect()
    }
}

impl DraObjects {
    /// The class backing an extended resource name (upstream `DeviceClassResolver`): the
    /// implicit `deviceclass.resource.kubernetes.io/<class>`, or the class whose
    /// `extendedResourceName` it is; when several name it, the newest wins, then the lower
    /// name.
    pub fn class_for_extended_resource(&self, name: &str) -> Option<&Arc<DeviceClassInfo>> {
        if let Some(class) = name.strip_prefix(RESOURCE_DEVICE_CLASS_PREFIX) {
            return self.class(class);
        }
        self.classes
            .values()
            .filter(|c| c.extended_resource_name.as_deref() == Some(name))
            .min_by(|a, b| b.created.cmp(&a.created).then_with(|| a.name.cmp(&b.name)))
    }
}

/// Which container's request for a resource a claim request serves (upstream
/// `ContainerExtendedResourceRequest`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestMapping {
    pub container_name: String,
    pub resource_name: String,
    pub request_name: String,
}

/// A request of the claim: `container-<i>-request-<j>` for `count` devices of `class`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtendedDeviceRequest {
    pub name: String,
    pub class: String,
    pub count: i64,
}

fn request_name(r: &ContainerExtendedRequest) -> String {
    format!(
        "container-{}-request-{}",
        r.container_index, r.resource_index
    )
}

/// Upstream `createRequestsAndMappings`: the claim's requests (sorted by name) and the
/// mappings, for the resources `needed` on a node (those DRA provides there). Long-lived
/// containers each get their own request; an init container that runs to completion first
/// reuses the requests of the long-lived containers after it and asks only for the rest;
/// of those init containers only the largest request is kept, and all of them map to it.
pub fn requests_and_mappings(
    pod: &ExtendedRequests,
    needed: &BTreeSet<&str>,
    class_of: impl Fn(&str) -> Option<String>,
) -> (Vec<ExtendedDeviceRequest>, Vec<RequestMapping>) {
    let mut requests = Vec::new();
    let mut mappings = Vec::new();
    for resource in needed {
        let Some(class) = class_of(resource) else {
            continue;
        };
        let of_resource: Vec<&ContainerExtendedRequest> =
            pod.0.iter().filter(|r| r.resource == *resource).collect();
        let mapping = |r: &ContainerExtendedRequest, request_name: String| RequestMapping {
            container_name: r.container_name.clone(),
            resource_name: r.resource.clone(),
            request_name,
        };
        // Long-lived containers' requests by container index (reusable by earlier inits).
        let long: BTreeMap<usize, ExtendedDeviceRequest> = of_resource
            .iter()
            .filter(|r| r.long_lived)
            .map(|r| {
                (
                    r.container_index,
                    ExtendedDeviceRequest {
                        name: request_name(r),
                        class: class.clone(),
                        count: r.count,
                    },
                )
            })
            .collect();
        let long_mappings: Vec<RequestMapping> = of_resource
            .iter()
            .filter(|r| r.long_lived)
            .map(|r| mapping(r, request_name(r)))
            .collect();
        let mut short_mappings = Vec::new();
        let mut short_names = BTreeSet::new();
        let mut max_short: Option<ExtendedDeviceRequest> = None;
        for r in of_resource.iter().filter(|r| !r.long_lived) {
            let mut sum = 0;
            let mut covered = false;
            for reusable in long.range(r.container_index..).map(|(_, q)| q) {
                sum += reusable.count;
                short_mappings.push(mapping(r, reusable.name.clone()));
                if sum >= r.count {
                    covered = true;
                    break;
                }
            }
            if covered {
                continue;
            }
            let own = ExtendedDeviceRequest {
                name: request_name(r),
                class: class.clone(),
                count: r.count - sum,
            };
            short_mappings.push(mapping(r, own.name.clone()));
            short_names.insert(own.name.clone());
            if max_short.as_ref().is_none_or(|m| m.count < own.count) {
                max_short = Some(own);
            }
        }
        if let Some(max) = &max_short
            && short_names.len() > 1
        {
            for m in &mut short_mappings {
                if short_names.contains(&m.request_name) {
                    m.request_name = max.name.clone();
                }
            }
        }
        requests.extend(max_short);
        requests.extend(long.into_values());
        mappings.extend(long_mappings);
        mappings.extend(short_mappings);
    }
    requests.sort_by(|a, b| a.name.cmp(&b.name));
    (requests, mappings)
}

impl ExtendedDeviceRequest {
    pub fn to_k8s(&self) -> dra::DeviceRequest {
        dra::DeviceRequest {
            name: self.name.clone(),
            exactly: Some(dra::ExactDeviceRequest {
                device_class_name: self.class.clone(),
                allocation_mode: Some("ExactCount".into()),
                count: Some(self.count),
                ..Default::default()
            }),
            ..Default::default()
        }
    }
}

/// What the controller needs to create the claim for a pod's extended resources (upstream
/// PreBind: `createExtendedResourceClaimInAPI`, then `patchPodExtendedResourceClaimStatus`).
#[derive(Debug, Clone, PartialEq)]
pub struct ExtendedClaimCreate {
    pub pod_name: String,
    pub pod_uid: String,
    pub requests: Vec<ExtendedDeviceRequest>,
    pub mappings: Vec<RequestMapping>,
}

impl ExtendedClaimCreate {
    /// The claim to POST: a generated name after the pod's, owned (controller) by the pod,
    /// annotated as the extended resource claim, with the delete-protection finalizer an
    /// allocation needs.
    pub fn claim(&self, namespace: &str) -> dra::ResourceClaim {
        let mut c = dra::ResourceClaim::default();
        c.metadata.namespace = Some(namespace.to_string());
        c.metadata.generate_name = Some(format!("{}-extended-resources-", self.pod_name));
        c.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: self.pod_name.clone(),
            uid: self.pod_uid.clone(),
            controller: Some(true),
            ..Default::default()
        }]);
        c.metadata.annotations = Some(
            [(
                EXTENDED_RESOURCE_CLAIM_ANNOTATION.to_string(),
                "true".to_string(),
            )]
            .into(),
        );
        c.metadata.finalizers = Some(vec![super::CLAIM_FINALIZER.to_string()]);
        c.spec = Some(dra::ResourceClaimSpec {
            devices: Some(dra::DeviceClaim {
                requests: Some(self.requests.iter().map(|r| r.to_k8s()).collect()),
                ..Default::default()
            }),
        });
        c
    }

    /// The pod's `status.extendedResourceClaimStatus` once the claim is named.
    pub fn pod_status(&self, claim_name: &str) -> k8s::PodExtendedResourceClaimStatus {
        k8s::PodExtendedResourceClaimStatus {
            resource_claim_name: claim_name.to_string(),
            request_mappings: self
                .mappings
                .iter()
                .map(|m| k8s::ContainerExtendedResourceRequest {
                    container_name: m.container_name.clone(),
                    resource_name: m.resource_name.clone(),
                    request_name: m.request_name.clone(),
                })
                .collect(),
        }
    }
}

/// The in-memory claim for one node's extended resource requests (upstream: a claim named
/// [`SPECIAL_CLAIM_NAME`], owned by the pod, allocated like any other claim).
pub fn special_claim(namespace: &str, requests: &[ExtendedDeviceRequest]) -> ResourceClaimInfo {
    ResourceClaimInfo {
        namespace: namespace.to_string(),
        name: SPECIAL_CLAIM_NAME.to_string(),
        requests: requests
            .iter()
            .map(|r| {
                ClaimRequest::Exactly(RequestSpec {
                    name: r.name.clone(),
                    device_class_name: r.class.clone(),
                    mode: AllocationMode::ExactCount(r.count),
                    selectors: Vec::new(),
                    admin_access: false,
                    tolerations: Vec::new(),
                    capacity: None,
                    unsupported: None,
                })
            })
            .collect(),
        ..ResourceClaimInfo::default()
    }
}

#[cfg(test)]
#[path = "extended_tests.rs"]
mod tests;
