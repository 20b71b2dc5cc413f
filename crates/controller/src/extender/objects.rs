//! The API objects extenders are sent, as the API server serves them (without
//! `metadata.managedFields`, which kube-scheduler's informers drop too): upstream's
//! `HTTPExtender` sends the whole `v1.Pod` and, unless `nodeCacheCapable`, whole `v1.Node`s,
//! while ferrosched's informers keep only compact views. This side store keeps the JSON
//! text beside them, and only what some extender is sent:
//!
//! * a pod's object while it is pending (not yet bound) and one of our profiles schedules
//!   it, when any extender is configured;
//! * every node's object, only when an extender without `nodeCacheCapable` is configured.
//!
//! Without extenders (or with only `nodeCacheCapable` ones for nodes) nothing is decoded
//! twice and nothing kept. The views stay the fallback (a pod or node the store has not
//! seen yet, e.g. in `simulate`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use scheduler_core::config;

/// The JSON of the objects extenders are sent, by pod UID and node name.
#[derive(Debug, Default)]
pub struct ApiObjects {
    pods: Mutex<HashMap<String, Arc<str>>>,
    /// `None`: every extender is `nodeCacheCapable` (sent node names only).
    nodes: Option<Mutex<HashMap<String, Arc<str>>>>,
}

impl ApiObjects {
    /// The store `extenders` need; `None` without extenders.
    pub fn for_extenders(extenders: &[config::Extender]) -> Option<Arc<ApiObjects>> {
        if extenders.is_empty() {
            return None;
        }
        let nodes = extenders
            .iter()
            .any(|e| !e.node_cache_capable)
            .then(|| Mutex::new(HashMap::new()));
        Some(Arc::new(ApiObjects {
            pods: Mutex::new(HashMap::new()),
            nodes,
        }))
    }

    /// Whether nodes' objects are kept.
    pub fn keeps_nodes(&self) -> bool {
        self.nodes.is_some()
    }

    /// A pod's object changed: kept while `pending`, dropped otherwise.
    pub fn pod_changed(&self, uid: &str, pending: bool, json: Arc<str>) {
        let mut pods = self.pods.lock().unwrap_or_else(|e| e.into_inner());
        if pending {
            pods.insert(uid.to_string(), json);
        } else {
            pods.remove(uid);
        }
    }

    pub fn pod_deleted(&self, uid: &str) {
        self.pods
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(uid);
    }

    pub fn node_changed(&self, name: &str, json: Arc<str>) {
        if let Some(nodes) = &self.nodes {
            let mut nodes = nodes.lock().unwrap_or_else(|e| e.into_inner());
            nodes.insert(name.to_string(), json);
        }
    }

    pub fn node_deleted(&self, name: &str) {
        if let Some(nodes) = &self.nodes {
            nodes.lock().unwrap_or_else(|e| e.into_inner()).remove(name);
        }
    }

    /// The pending pod's object, if kept.
    pub fn pod(&self, uid: &str) -> Option<Arc<str>> {
        self.pods
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(uid)
            .cloned()
    }

    /// The node's object, if kept.
    pub fn node(&self, name: &str) -> Option<Arc<str>> {
        let nodes = self.nodes.as_ref()?;
        nodes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    /// How many pods and nodes are kept (tests).
    pub fn counts(&self) -> (usize, usize) {
        let pods = self.pods.lock().unwrap_or_else(|e| e.into_inner()).len();
        let nodes = self
            .nodes
            .as_ref()
            .map_or(0, |n| n.lock().unwrap_or_else(|e| e.into_inner()).len());
        (pods, nodes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(cache_capable: bool) -> config::Extender {
        config::Extender {
            url_prefix: "http://e".into(),
            filter_verb: "filter".into(),
            node_cache_capable: cache_capable,
            ..Default::default()
        }
    }

    #[test]
    fn nothing_is_kept_without_extenders_and_no_nodes_for_cache_capable_ones() {
        assert!(ApiObjects::for_extenders(&[]).is_none());
        let o = ApiObjects::for_extenders(&[ext(true)]).unwrap();
        o.node_changed("n1", "{}".into());
        assert_eq!(o.counts(), (0, 0));
        assert!(o.node("n1").is_none());
        let o = ApiObjects::for_extenders(&[ext(true), ext(false)]).unwrap();
        o.node_changed("n1", "{\"n\":1}".into());
        assert_eq!(o.node("n1").as_deref(), Some("{\"n\":1}"));
        o.node_deleted("n1");
        assert_eq!(o.counts(), (0, 0));
    }

    #[test]
    fn a_pod_is_kept_only_while_pending() {
        let o = ApiObjects::for_extenders(&[ext(true)]).unwrap();
        o.pod_changed("u1", true, "{\"p\":1}".into());
        assert_eq!(o.pod("u1").as_deref(), Some("{\"p\":1}"));
        o.pod_changed("u1", false, "{\"p\":2}".into());
        assert!(o.pod("u1").is_none());
        o.pod_changed("u2", true, "{}".into());
        o.pod_deleted("u2");
        assert_eq!(o.counts(), (0, 0));
    }
}
