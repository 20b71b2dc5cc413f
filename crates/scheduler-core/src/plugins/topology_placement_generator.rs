//! TopologyPlacementGenerator (upstream `topologyaware/topology_placement.go`): a
//! topology-constrained PodGroup's candidate placements, one per value of its topology
//! label among the nodes the enclosing placement allows. Nodes without the label are in
//! none. When pods of the group are already placed, their shared domain is the only
//! candidate; pods spread over two domains, or on a node without the label, leave none.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::framework::{
    Placement, PlacementGeneratePlugin, PlacementRequest, Plugin, PluginPoints,
};
use crate::plugin_points;

use super::names::TOPOLOGY_PLACEMENT_GENERATOR;

pub struct TopologyPlacementGenerator;

impl Plugin for TopologyPlacementGenerator {
    fn name(&self) -> &'static str {
        TOPOLOGY_PLACEMENT_GENERATOR
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => placement_generate)
    }
}

impl PlacementGeneratePlugin for TopologyPlacementGenerator {
    /// Placements in label-value order (so ties between equal scores go to the first name).
    fn generate(&self, req: &PlacementRequest<'_>) -> Result<Vec<Placement>, String> {
        let pinned = pinned_domain(req)
            .map_err(|e| format!("cannot determine domain for already scheduled pods: {e}"))?;
        // Each domain's nodes, in one pass.
        let mut nodes_of: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, n) in req.snapshot.node_infos().iter().enumerate() {
            if !(req.parent)(n) {
                continue;
            }
            let Some(v) = n.labels.get(req.key) else {
                continue;
            };
            if pinned.as_deref().is_some_and(|p| p != v) {
                continue;
            }
            match nodes_of.get_mut(v.as_str()) {
                Some(p) => p.push(i),
                None => {
                    nodes_of.insert(v.as_str(), vec![i]);
                }
            }
        }
        Ok(nodes_of
            .into_iter()
            .map(|(value, nodes)| Placement {
                value: value.to_string(),
                nodes,
            })
            .collect())
    }
}

/// The domain the group's placed pods share, if any are placed.
fn pinned_domain(req: &PlacementRequest<'_>) -> Result<Option<String>, String> {
    let mut pinned: Option<String> = None;
    for node in req.scheduled_nodes {
        let value = req
            .snapshot
            .get(node)
            .and_then(|n| n.labels.get(req.key).map(|v| v.to_string()))
            .ok_or_else(|| format!("no topology domain found for a pod on node {node:?}"))?;
        match &pinned {
            None => pinned = Some(value),
            Some(p) if *p == value => {}
            Some(p) => {
                return Err(format!(
                    "more than 1 domain found for pod group: {p}, {value}"
                ));
            }
        }
    }
    Ok(pinned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::NodeInfo;

    fn snapshot(nodes: &[(&str, Option<&str>)]) -> crate::cache::Snapshot {
        crate::cache::Snapshot::from_node_infos(nodes.iter().map(|(name, zone)| {
            let b = NodeInfo::test(name).cpu("4");
            match zone {
                Some(z) => b.label("zone", z).build(),
                None => b.build(),
            }
        }))
    }

    fn generate(
        s: &crate::cache::Snapshot,
        scheduled: &[&str],
    ) -> Result<Vec<(String, Vec<String>)>, String> {
        let scheduled: Vec<String> = scheduled.iter().map(|s| s.to_string()).collect();
        let all = |_: &crate::types::NodeInfo| true;
        let req = PlacementRequest {
            key: "zone",
            scheduled_nodes: &scheduled,
            snapshot: s,
            parent: &all,
        };
        TopologyPlacementGenerator.generate(&req).map(|ps| {
            ps.into_iter()
                .map(|p| {
                    let mut names: Vec<String> = p
                        .nodes
                        .iter()
                        .map(|i| s.node_infos()[*i].name.clone())
                        .collect();
                    names.sort();
                    (p.value, names)
                })
                .collect()
        })
    }

    #[test]
    fn one_placement_per_domain_and_unlabelled_nodes_in_none() {
        let s = snapshot(&[
            ("a1", Some("a")),
            ("b1", Some("b")),
            ("a2", Some("a")),
            ("x", None),
        ]);
        assert_eq!(
            generate(&s, &[]).unwrap(),
            vec![
                ("a".to_string(), vec!["a1".to_string(), "a2".to_string()]),
                ("b".to_string(), vec!["b1".to_string()]),
            ]
        );
    }

    #[test]
    fn placed_pods_pin_their_domain_or_leave_none() {
        let s = snapshot(&[("a1", Some("a")), ("b1", Some("b")), ("x", None)]);
        assert_eq!(
            generate(&s, &["b1", "b1"]).unwrap(),
            vec![("b".to_string(), vec!["b1".to_string()])]
        );
        assert_eq!(
            generate(&s, &["a1", "b1"]).unwrap_err(),
            "cannot determine domain for already scheduled pods: more than 1 domain found for pod group: a, b"
        );
        assert!(
            generate(&s, &["x"])
                .unwrap_err()
                .contains("no topology domain found for a pod on node \"x\"")
        );
    }
}
