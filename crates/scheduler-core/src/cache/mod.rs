//! TEMPORARY stub: replaced by the real cache (branch `cache`).

use std::collections::HashMap;
use std::sync::Arc;

use crate::types::NodeInfo;

#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    nodes: Vec<Arc<NodeInfo>>,
    index: HashMap<String, usize>,
}

impl Snapshot {
    pub fn from_nodes(nodes: Vec<NodeInfo>) -> Self {
        let nodes: Vec<Arc<NodeInfo>> = nodes.into_iter().map(Arc::new).collect();
        let index = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.clone(), i))
            .collect();
        Snapshot { nodes, index }
    }
    pub fn node_infos(&self) -> &[Arc<NodeInfo>] {
        &self.nodes
    }
    pub fn get(&self, name: &str) -> Option<&Arc<NodeInfo>> {
        self.index.get(name).map(|&i| &self.nodes[i])
    }
    pub fn num_nodes(&self) -> usize {
        self.nodes.len()
    }
}
