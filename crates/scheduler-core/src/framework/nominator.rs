//! Pods nominated to nodes by preemption but not bound yet. Filters count them on their
//! nominated node so a lower-priority pod does not take the room preemption made.

use std::sync::Arc;

use crate::types::{PodInfo, PodKey};

#[derive(Clone, Debug, Default)]
pub struct NominatedPods {
    by_node: foldhash::HashMap<String, Vec<Arc<PodInfo>>>,
    node_of: foldhash::HashMap<PodKey, String>,
}

impl NominatedPods {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records (or moves) the nomination of `pod` to `node`.
    pub fn add(&mut self, pod: Arc<PodInfo>, node: &str) {
        let key = pod.key().clone();
        self.remove(&key);
        self.node_of.insert(key, node.to_string());
        self.by_node.entry(node.to_string()).or_default().push(pod);
    }

    pub fn remove(&mut self, pod: &PodKey) {
        if let Some(node) = self.node_of.remove(pod)
            && let Some(list) = self.by_node.get_mut(&node)
        {
            list.retain(|p| p.key() != pod);
            if list.is_empty() {
                self.by_node.remove(&node);
            }
        }
    }

    pub fn for_node(&self, node: &str) -> &[Arc<PodInfo>] {
        self.by_node.get(node).map(Vec::as_slice).unwrap_or(&[])
    }

    pub fn node_of(&self, pod: &PodKey) -> Option<&str> {
        self.node_of.get(pod).map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.node_of.is_empty()
    }
}
