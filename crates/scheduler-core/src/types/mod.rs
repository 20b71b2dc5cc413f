//! TEMPORARY stub: replaced by the real views (branch `cache`).

use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodKey {
    pub namespace: String,
    pub name: String,
}

impl PodKey {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        PodKey {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl std::fmt::Display for PodKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[derive(Clone, Debug, Default)]
pub struct PodInfo {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub scheduler_name: String,
    pub priority: i32,
    pub node_name: Option<String>,
    pub nominated_node_name: Option<String>,
    pub scheduling_gates: Vec<String>,
}

impl PodInfo {
    pub fn key(&self) -> PodKey {
        PodKey::new(self.namespace.clone(), self.name.clone())
    }
}

#[derive(Clone, Debug, Default)]
pub struct NodeInfo {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub pods: Vec<Arc<PodInfo>>,
}

impl NodeInfo {
    pub fn add_pod(&mut self, pod: Arc<PodInfo>) {
        self.pods.push(pod);
    }
}
