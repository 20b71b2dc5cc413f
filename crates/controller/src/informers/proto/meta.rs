//! apimachinery's messages: ObjectMeta (as [`super::super::lean`] keeps it, without
//! managedFields), Time, Quantity maps, ListMeta, and the `runtime.Unknown` envelope.
//!
//! Go's protobuf encoding writes every non-pointer field, empty or not, where its JSON
//! encoding omits empty ones (`omitempty`). Decoded here, an empty string, a zero
//! number, an empty list and a zero time become `None`, so a protobuf object and the JSON
//! of the same object give the same k8s-openapi value (the tests compare both encodings of
//! objects captured from a kube-apiserver).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

use super::wire::{Fields, Result, Value, WireError, string_pair};

/// The four bytes that open every protobuf body kube-apiserver sends.
pub(crate) const MAGIC: &[u8] = b"k8s\0";

/// The object inside a `runtime.Unknown` envelope (after the magic): its kind and raw bytes.
pub(crate) fn unwrap_envelope(body: &[u8]) -> Result<(String, &[u8])> {
    let inner = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| WireError("no k8s protobuf magic".into()))?;
    let (mut kind, mut raw): (String, &[u8]) = (String::new(), &[]);
    for f in Fields::new(inner) {
        match f? {
            (1, v) => {
                for t in Fields::new(v.bytes("typeMeta")?) {
                    if let (2, k) = t? {
                        kind = k.string("typeMeta.kind")?;
                    }
                }
            }
            (2, v) => raw = v.bytes("raw")?,
            (3, v) if !v.bytes("contentEncoding")?.is_empty() => {
                return Err(WireError(format!(
                    "content encoding {:?} is not supported",
                    v.string("contentEncoding")?
                )));
            }
            _ => {}
        }
    }
    Ok((kind, raw))
}

/// `Some(s)` unless empty (the JSON encoding omits empty strings).
pub(crate) fn non_empty(v: Value<'_>, field: &str) -> Result<Option<String>> {
    let s = v.string(field)?;
    Ok((!s.is_empty()).then_some(s))
}

/// A `metav1.Time`: whole seconds (the API's resolution; Go's decoder drops nanoseconds
/// too). An empty message is the zero time, which JSON writes as `null`.
pub(crate) fn time(v: Value<'_>, field: &str) -> Result<Option<Time>> {
    let b = v.bytes(field)?;
    if b.is_empty() {
        return Ok(None);
    }
    let mut seconds = 0i64;
    for f in Fields::new(b) {
        if let (1, s) = f? {
            seconds = s.int64(field)?;
        }
    }
    k8s_openapi::jiff::Timestamp::from_second(seconds)
        .map(|t| Some(Time(t)))
        .map_err(|e| WireError(format!("{field}: {e}")))
}

/// A `map<string, Quantity>` entry.
pub(crate) fn quantity_entry(b: &[u8], field: &str) -> Result<(String, Quantity)> {
    let (mut k, mut q) = (String::new(), String::new());
    for f in Fields::new(b) {
        match f? {
            (1, v) => k = v.string(field)?,
            (2, v) => {
                for g in Fields::new(v.bytes(field)?) {
                    if let (1, s) = g? {
                        q = s.string(field)?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok((k, Quantity(q)))
}

fn owner_reference(b: &[u8]) -> Result<OwnerReference> {
    let mut o = OwnerReference::default();
    for f in Fields::new(b) {
        match f? {
            (1, v) => o.kind = v.string("ownerReferences.kind")?,
            (3, v) => o.name = v.string("ownerReferences.name")?,
            (4, v) => o.uid = v.string("ownerReferences.uid")?,
            (5, v) => o.api_version = v.string("ownerReferences.apiVersion")?,
            (6, v) => o.controller = Some(v.bool("ownerReferences.controller")?),
            (7, v) => o.block_owner_deletion = Some(v.bool("ownerReferences.blockOwnerDeletion")?),
            _ => {}
        }
    }
    Ok(o)
}

/// ObjectMeta without managedFields (field 17 is passed over unread).
pub(crate) fn object_meta(b: &[u8]) -> Result<ObjectMeta> {
    let mut m = ObjectMeta::default();
    let mut labels = BTreeMap::new();
    let mut annotations = BTreeMap::new();
    let mut owners = Vec::new();
    let mut finalizers = Vec::new();
    for f in Fields::new(b) {
        match f? {
            (1, v) => m.name = non_empty(v, "metadata.name")?,
            (2, v) => m.generate_name = non_empty(v, "metadata.generateName")?,
            (3, v) => m.namespace = non_empty(v, "metadata.namespace")?,
            (4, v) => m.self_link = non_empty(v, "metadata.selfLink")?,
            (5, v) => m.uid = non_empty(v, "metadata.uid")?,
            (6, v) => m.resource_version = non_empty(v, "metadata.resourceVersion")?,
            (7, v) => m.generation = Some(v.int64("metadata.generation")?).filter(|&g| g != 0),
            (8, v) => m.creation_timestamp = time(v, "metadata.creationTimestamp")?,
            (9, v) => m.deletion_timestamp = time(v, "metadata.deletionTimestamp")?,
            (10, v) => {
                m.deletion_grace_period_seconds =
                    Some(v.int64("metadata.deletionGracePeriodSeconds")?)
            }
            (11, v) => {
                let (k, x) = string_pair(v.bytes("metadata.labels")?, "metadata.labels")?;
                labels.insert(k, x);
            }
            (12, v) => {
                let (k, x) = string_pair(v.bytes("metadata.annotations")?, "metadata.annotations")?;
                annotations.insert(k, x);
            }
            (13, v) => owners.push(owner_reference(v.bytes("metadata.ownerReferences")?)?),
            (14, v) => finalizers.push(v.string("metadata.finalizers")?),
            _ => {}
        }
    }
    m.labels = (!labels.is_empty()).then_some(labels);
    m.annotations = (!annotations.is_empty()).then_some(annotations);
    m.owner_references = (!owners.is_empty()).then_some(owners);
    m.finalizers = (!finalizers.is_empty()).then_some(finalizers);
    Ok(m)
}

/// A list's `resourceVersion` and `continue` token (ListMeta fields 2 and 3).
pub(crate) fn list_meta(b: &[u8]) -> Result<(String, Option<String>)> {
    let (mut rv, mut cont) = (String::new(), None);
    for f in Fields::new(b) {
        match f? {
            (2, v) => rv = v.string("metadata.resourceVersion")?,
            (3, v) => cont = non_empty(v, "metadata.continue")?,
            _ => {}
        }
    }
    Ok((rv, cont))
}

/// A `Status` (an ERROR watch event's object): its code, reason and message.
pub(crate) fn status(b: &[u8]) -> Result<(i32, String, String)> {
    let (mut code, mut reason, mut message) = (0, String::new(), String::new());
    for f in Fields::new(b) {
        match f? {
            (3, v) => message = v.string("message")?,
            (4, v) => reason = v.string("reason")?,
            (6, v) => code = v.int32("code")?,
            _ => {}
        }
    }
    Ok((code, reason, message))
}
