//! The parts of a Node the scheduler reads, as serde mirrors of the k8s-openapi types.
//!
//! A Node is read by `NodeInfo::set_node` (labels, taints, unschedulable, allocatable,
//! images, declared features) and `NodeFingerprint::of` (the same plus annotations and each
//! condition's type and status). Everything else a kubelet reports (capacity, addresses,
//! nodeInfo, daemon endpoints, the conditions' messages and heartbeat times, attached
//! volumes) is passed over by serde without building anything. The tests decode rich nodes
//! both ways, with every value changed in turn, and compare the views.

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::Deserialize;
use std::collections::BTreeMap;

/// `spec`: taints and the unschedulable flag.
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(rename_all = "camelCase")]
pub(crate) struct Spec {
    taints: Option<Vec<k8s::Taint>>,
    unschedulable: Option<bool>,
}

/// `status`: allocatable, conditions (type and status), declared features and images.
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(rename_all = "camelCase")]
pub(crate) struct Status {
    allocatable: Option<BTreeMap<String, Quantity>>,
    conditions: Option<Vec<Condition>>,
    declared_features: Option<Vec<String>>,
    images: Option<Vec<k8s::ContainerImage>>,
}

/// A condition as update classification compares it (heartbeats change the rest). Both
/// fields default when missing, as k8s-openapi's decode of a condition does.
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[derive(Default)]
#[serde(default)]
struct Condition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
}

impl From<Spec> for k8s::NodeSpec {
    fn from(s: Spec) -> k8s::NodeSpec {
        k8s::NodeSpec {
            taints: s.taints,
            unschedulable: s.unschedulable,
            ..Default::default()
        }
    }
}

impl From<Status> for k8s::NodeStatus {
    fn from(s: Status) -> k8s::NodeStatus {
        k8s::NodeStatus {
            allocatable: s.allocatable,
            conditions: s.conditions.map(|c| {
                c.into_iter()
                    .map(|c| k8s::NodeCondition {
                        type_: c.type_,
                        status: c.status,
                        ..Default::default()
                    })
                    .collect()
            }),
            declared_features: s.declared_features,
            images: s.images,
            ..Default::default()
        }
    }
}
