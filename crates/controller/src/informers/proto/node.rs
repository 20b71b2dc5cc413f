//! A Node from protobuf, as [`super::super::lean`] decodes one from JSON: metadata (no
//! managedFields), `spec.taints` and `spec.unschedulable`, and of the status allocatable,
//! the conditions' type and status, declared features and images. Everything else a kubelet
//! reports (capacity, addresses, nodeInfo, the conditions' times and messages, attached
//! volumes) is skipped unread.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as k8s;

use super::meta::{non_empty, object_meta, quantity_entry, time};
use super::wire::{Fields, Result};
use crate::informers::lean::Lean;

/// Decodes a `v1.Node` message.
pub(crate) fn node(b: &[u8]) -> Result<Lean<k8s::Node>> {
    let mut n = k8s::Node::default();
    for f in Fields::new(b) {
        match f? {
            (1, v) => n.metadata = object_meta(v.bytes("metadata")?)?,
            (2, v) => n.spec = Some(spec(v.bytes("spec")?)?),
            (3, v) => n.status = Some(status(v.bytes("status")?)?),
            _ => {}
        }
    }
    Ok(Lean(n))
}

fn spec(b: &[u8]) -> Result<k8s::NodeSpec> {
    let mut s = k8s::NodeSpec::default();
    let mut taints = Vec::new();
    for f in Fields::new(b) {
        match f? {
            (4, v) => s.unschedulable = Some(v.bool("spec.unschedulable")?).filter(|&u| u),
            (5, v) => taints.push(taint(v.bytes("spec.taints")?)?),
            _ => {}
        }
    }
    s.taints = (!taints.is_empty()).then_some(taints);
    Ok(s)
}

fn taint(b: &[u8]) -> Result<k8s::Taint> {
    let mut t = k8s::Taint::default();
    for f in Fields::new(b) {
        match f? {
            (1, v) => t.key = v.string("taint.key")?,
            (2, v) => t.value = non_empty(v, "taint.value")?,
            (3, v) => t.effect = v.string("taint.effect")?,
            (4, v) => t.time_added = time(v, "taint.timeAdded")?,
            _ => {}
        }
    }
    Ok(t)
}

fn status(b: &[u8]) -> Result<k8s::NodeStatus> {
    let mut s = k8s::NodeStatus::default();
    let mut allocatable = BTreeMap::new();
    let (mut conditions, mut images, mut features) = (Vec::new(), Vec::new(), Vec::new());
    for f in Fields::new(b) {
        match f? {
            (2, v) => {
                let (k, q) = quantity_entry(v.bytes("status.allocatable")?, "status.allocatable")?;
                allocatable.insert(k, q);
            }
            (4, v) => conditions.push(condition(v.bytes("status.conditions")?)?),
            (8, v) => images.push(image(v.bytes("status.images")?)?),
            (14, v) => features.push(v.string("status.declaredFeatures")?),
            _ => {}
        }
    }
    s.allocatable = (!allocatable.is_empty()).then_some(allocatable);
    s.conditions = (!conditions.is_empty()).then_some(conditions);
    s.images = (!images.is_empty()).then_some(images);
    s.declared_features = (!features.is_empty()).then_some(features);
    Ok(s)
}

/// Type and status only, as the lean JSON decode keeps them.
fn condition(b: &[u8]) -> Result<k8s::NodeCondition> {
    let mut c = k8s::NodeCondition::default();
    for f in Fields::new(b) {
        match f? {
            (1, v) => c.type_ = v.string("condition.type")?,
            (2, v) => c.status = v.string("condition.status")?,
            _ => {}
        }
    }
    Ok(c)
}

fn image(b: &[u8]) -> Result<k8s::ContainerImage> {
    let mut names = Vec::new();
    let mut size = 0;
    for f in Fields::new(b) {
        match f? {
            (1, v) => names.push(v.string("image.names")?),
            (2, v) => size = v.int64("image.sizeBytes")?,
            _ => {}
        }
    }
    Ok(k8s::ContainerImage {
        names: (!names.is_empty()).then_some(names),
        size_bytes: (size != 0).then_some(size),
    })
}
