//! Scoring of extended resources backed by DRA (upstream 1.37: NodeResourcesFit's scoring
//! strategies see such a resource on a node without it in `status.allocatable`): the
//! node's allocatable is the number of devices of the resource's DeviceClass the node
//! reaches, its requested amount the number of those devices allocated (held whole or
//! shared) plus the pod's request. NodeResourcesFit asks here in PreScore, once per pod and
//! resource, for the nodes being scored.

use std::collections::HashMap;

use crate::framework::FeasibleNodes;
use crate::types::dra::{DeviceNodes, DraObjects};

use super::device_index::DeviceIndex;

/// Node name -> (devices of the class the node reaches, how many of them are allocated),
/// for the extended resource `resource`; None when no DeviceClass backs it.
pub fn extended_resource_devices(
    objects: &DraObjects,
    resource: &str,
    nodes: FeasibleNodes<'_>,
) -> Option<HashMap<String, (i64, i64)>> {
    let class = objects.class_for_extended_resource(resource)?.clone();
    let index = DeviceIndex::build(objects);
    let matches = index.class_matches(&class);
    let mut out = HashMap::with_capacity(nodes.len());
    for node in nodes {
        let (mut total, mut used) = (0i64, 0i64);
        let slices =
            index
                .local
                .get(&node.name)
                .into_iter()
                .flatten()
                .chain(index.shared.iter().filter(|e| match &e.slice.nodes {
                    DeviceNodes::PerDevice => true,
                    n => n.reaches(&node.name, &node.labels),
                }));
        for e in slices {
            let pool = &index.pools[e.pool];
            if pool.incomplete || pool.invalid.is_some() {
                continue;
            }
            for (i, d) in e.slice.devices.iter().enumerate() {
                if d.unsupported.is_some()
                    || d.nodes
                        .as_ref()
                        .is_some_and(|n| !n.reaches(&node.name, &node.labels))
                {
                    continue;
                }
                let ordinal = e.first + i;
                let ok = match matches.get(ordinal) {
                    Some(ok) => ok,
                    None => {
                        // A selector failing on the device counts as not matching.
                        let ok = class
                            .selectors
                            .iter()
                            .all(|s| matches!(s.matches_within(&d.cel, None), Ok(true)));
                        matches.set(ordinal, ok);
                        ok
                    }
                };
                if !ok {
                    continue;
                }
                total += 1;
                let id = &e.ids[i];
                if objects.device_allocated(id) || objects.shared_devices().contains_key(id) {
                    used += 1;
                }
            }
        }
        out.insert(node.name.clone(), (total, used));
    }
    Some(out)
}
