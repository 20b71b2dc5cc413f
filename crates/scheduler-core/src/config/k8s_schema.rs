//! Embedded Kubernetes core types inside plugin args (NodeAffinityArgs.addedAffinity,
//! PodTopologySpreadArgs.defaultConstraints): checked field by field against a small schema
//! for strict unknown-field and type errors with positions, then deserialized into the
//! k8s-openapi type.

use serde::de::DeserializeOwned;

use super::messages as msg;
use super::spans::{Report, child, index};
use super::yaml_tree::{Node, Value};

#[derive(Debug, Clone, Copy)]
pub(crate) enum Shape {
    Obj(&'static [(&'static str, Shape)]),
    List(&'static Shape),
    Str,
    Int,
    /// Not checked here (e.g. a labelSelector, which validation forbids anyway).
    Any,
}

const REQUIREMENT: Shape = Shape::Obj(&[
    ("key", Shape::Str),
    ("operator", Shape::Str),
    ("values", Shape::List(&Shape::Str)),
]);

const TERM: Shape = Shape::Obj(&[
    ("matchExpressions", Shape::List(&REQUIREMENT)),
    ("matchFields", Shape::List(&REQUIREMENT)),
]);

pub(crate) const NODE_AFFINITY: Shape = Shape::Obj(&[
    (
        "requiredDuringSchedulingIgnoredDuringExecution",
        Shape::Obj(&[("nodeSelectorTerms", Shape::List(&TERM))]),
    ),
    (
        "preferredDuringSchedulingIgnoredDuringExecution",
        Shape::List(&Shape::Obj(&[("weight", Shape::Int), ("preference", TERM)])),
    ),
]);

pub(crate) const TOPOLOGY_SPREAD_CONSTRAINT: Shape = Shape::Obj(&[
    ("maxSkew", Shape::Int),
    ("topologyKey", Shape::Str),
    ("whenUnsatisfiable", Shape::Str),
    ("labelSelector", Shape::Any),
    ("minDomains", Shape::Int),
    ("nodeAffinityPolicy", Shape::Str),
    ("nodeTaintsPolicy", Shape::Str),
    ("matchLabelKeys", Shape::List(&Shape::Str)),
]);

/// Checks `node` against `shape`; returns false if anything was reported.
pub(crate) fn check(r: &mut Report, node: &Node, path: &str, shape: Shape) -> bool {
    let before = r.errors.len();
    walk(r, node, path, shape);
    r.errors.len() == before
}

fn walk(r: &mut Report, node: &Node, path: &str, shape: Shape) {
    r.spans.record(path, node.pos);
    if node.is_null() {
        return;
    }
    match shape {
        Shape::Any => {}
        Shape::Str => {
            r.string(node, path);
        }
        Shape::Int => {
            r.int32(node, path);
        }
        Shape::List(item) => {
            if let Some(items) = r.list(node, path) {
                for (i, n) in items.iter().enumerate() {
                    walk(r, n, &index(path, i), *item);
                }
            }
        }
        Shape::Obj(fields) => {
            let names: Vec<&str> = fields.iter().map(|(n, _)| *n).collect();
            if let Some(o) = r.object(node, path, &names) {
                for (name, s) in fields {
                    if let Some(n) = o.get(name) {
                        walk(r, n, &child(path, name), *s);
                    }
                }
            }
        }
    }
}

/// Deserializes a checked subtree into a k8s-openapi type; errors name the subtree.
pub(crate) fn convert<T: DeserializeOwned>(
    r: &mut Report,
    node: &Node,
    path: &str,
    type_name: &str,
) -> Option<T> {
    match serde_json::from_value::<T>(node.to_json()) {
        Ok(v) => Some(v),
        Err(e) => {
            r.error(path, msg::invalid_embedded(type_name, &e.to_string()));
            None
        }
    }
}

/// True if the node is a non-empty mapping or list (a present but empty value is "unset").
pub(crate) fn is_non_empty(node: &Node) -> bool {
    match &node.value {
        Value::Map(e) => !e.is_empty(),
        Value::Seq(i) => !i.is_empty(),
        Value::Null => false,
        _ => true,
    }
}
