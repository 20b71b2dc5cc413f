//! Label selectors of the workloads that default topology spreading derives a pod's selector
//! from: Services, ReplicationControllers, ReplicaSets and StatefulSets, per namespace.
//!
//! Only the selectors are kept. Each namespace is its own `Arc`, so a change copies one
//! namespace's entries (and the outer map of `Arc`s) while snapshots share the rest.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{ReplicationController, Service};

use crate::types::{LabelRequirement, LabelSelector, PodInfo, WorkloadKind};

/// One workload's selector, in the form its kind's API uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkloadSelector {
    /// `spec.selector` of a Service or ReplicationController (a plain label map).
    Map(BTreeMap<String, String>),
    /// `spec.selector` of a ReplicaSet or StatefulSet, compiled.
    Selector(LabelSelector),
    /// No selector: a Service without one selects no pods; a controller without one adds
    /// nothing to the default selector.
    None,
}

/// What a watch event on a workload becomes: `Cache::upsert_workload_selector` arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadEntry {
    pub kind: WorkloadKind,
    pub namespace: String,
    pub name: String,
    pub selector: WorkloadSelector,
}

fn entry(
    kind: WorkloadKind,
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    selector: WorkloadSelector,
) -> WorkloadEntry {
    WorkloadEntry {
        kind,
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        selector,
    }
}

fn map_selector(m: Option<&BTreeMap<String, String>>) -> WorkloadSelector {
    m.map_or(WorkloadSelector::None, |m| WorkloadSelector::Map(m.clone()))
}

fn label_selector(
    s: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
) -> WorkloadSelector {
    // A selector that does not compile adds nothing, as upstream ignores the error.
    match LabelSelector::from_k8s(s) {
        Ok(LabelSelector::Requirements(r)) => {
            WorkloadSelector::Selector(LabelSelector::Requirements(r))
        }
        Ok(LabelSelector::Nothing) | Err(_) => WorkloadSelector::None,
    }
}

pub fn service_entry(svc: &Service) -> WorkloadEntry {
    let sel = map_selector(svc.spec.as_ref().and_then(|s| s.selector.as_ref()));
    entry(WorkloadKind::Service, &svc.metadata, sel)
}

pub fn replication_controller_entry(rc: &ReplicationController) -> WorkloadEntry {
    let sel = map_selector(rc.spec.as_ref().and_then(|s| s.selector.as_ref()));
    entry(WorkloadKind::ReplicationController, &rc.metadata, sel)
}

pub fn replica_set_entry(rs: &ReplicaSet) -> WorkloadEntry {
    let sel = label_selector(Some(&rs.spec.selector));
    entry(WorkloadKind::ReplicaSet, &rs.metadata, sel)
}

pub fn stateful_set_entry(ss: &StatefulSet) -> WorkloadEntry {
    let sel = label_selector(Some(&ss.spec.selector));
    entry(WorkloadKind::StatefulSet, &ss.metadata, sel)
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct NamespaceWorkloads {
    /// Ordered by name so the merged selector never depends on hash order.
    services: BTreeMap<String, WorkloadSelector>,
    controllers: HashMap<(WorkloadKind, String), WorkloadSelector>,
}

impl NamespaceWorkloads {
    fn is_empty(&self) -> bool {
        self.services.is_empty() && self.controllers.is_empty()
    }
}

/// Workload selectors by namespace; shared between the cache and its snapshots.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkloadSelectors {
    namespaces: HashMap<String, Arc<NamespaceWorkloads>>,
}

impl WorkloadSelectors {
    pub fn new() -> Self {
        Self::default()
    }

    /// Builder for tests and tools.
    pub fn with(mut self, e: WorkloadEntry) -> Self {
        self.upsert(e.kind, &e.namespace, &e.name, e.selector);
        self
    }

    /// Returns true when something changed.
    pub fn upsert(
        &mut self,
        kind: WorkloadKind,
        namespace: &str,
        name: &str,
        selector: WorkloadSelector,
    ) -> bool {
        let current = self.get(kind, namespace, name);
        if current == Some(&selector) {
            return false;
        }
        let ns = Arc::make_mut(self.namespaces.entry(namespace.to_string()).or_default());
        match kind {
            WorkloadKind::Service => {
                ns.services.insert(name.to_string(), selector);
            }
            _ => {
                ns.controllers.insert((kind, name.to_string()), selector);
            }
        }
        true
    }

    /// Returns true when the workload was known.
    pub fn remove(&mut self, kind: WorkloadKind, namespace: &str, name: &str) -> bool {
        if self.get(kind, namespace, name).is_none() {
            return false;
        }
        let Some(arc) = self.namespaces.get_mut(namespace) else {
            return false;
        };
        let ns = Arc::make_mut(arc);
        match kind {
            WorkloadKind::Service => {
                ns.services.remove(name);
            }
            _ => {
                ns.controllers.remove(&(kind, name.to_string()));
            }
        }
        if ns.is_empty() {
            self.namespaces.remove(namespace);
        }
        true
    }

    pub fn get(
        &self,
        kind: WorkloadKind,
        namespace: &str,
        name: &str,
    ) -> Option<&WorkloadSelector> {
        let ns = self.namespaces.get(namespace)?;
        match kind {
            WorkloadKind::Service => ns.services.get(name),
            _ => ns.controllers.get(&(kind, name.to_string())),
        }
    }

    pub fn len(&self) -> usize {
        self.namespaces
            .values()
            .map(|n| n.services.len() + n.controllers.len())
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.namespaces.is_empty()
    }

    /// Upstream `helper.DefaultSelector`: the label maps of the pod's namespace's Services
    /// that select it, merged, plus the selector of its controlling ReplicationController
    /// (merged as a map), ReplicaSet or StatefulSet (requirements appended). `None` when the
    /// result has no requirement at all: the pod then gets no default constraints.
    pub fn default_selector(&self, pod: &PodInfo) -> Option<LabelSelector> {
        let ns = self.namespaces.get(pod.namespace());
        let mut merged: BTreeMap<&str, &str> = BTreeMap::new();
        let mut extra: Vec<LabelRequirement> = Vec::new();
        if let Some(ns) = ns {
            for sel in ns.services.values() {
                if let WorkloadSelector::Map(m) = sel
                    && m.iter().all(|(k, v)| pod.labels.get(k) == Some(v))
                {
                    merged.extend(m.iter().map(|(k, v)| (k.as_str(), v.as_str())));
                }
            }
            if let Some(ctrl) = &pod.spread.controller
                && let Some(sel) = ns.controllers.get(&(ctrl.kind, ctrl.name.clone()))
            {
                match sel {
                    WorkloadSelector::Map(m) => {
                        merged.extend(m.iter().map(|(k, v)| (k.as_str(), v.as_str())));
                    }
                    WorkloadSelector::Selector(LabelSelector::Requirements(r)) => {
                        extra.extend(r.iter().cloned());
                    }
                    WorkloadSelector::Selector(LabelSelector::Nothing) | WorkloadSelector::None => {
                    }
                }
            }
        }
        if merged.is_empty() && extra.is_empty() {
            return None;
        }
        let mut sel = LabelSelector::Requirements(extra);
        for (k, v) in merged {
            sel.add_requirement(k, v, true);
        }
        Some(sel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::ReplicaSetSpec;
    use k8s_openapi::api::core::v1::ServiceSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

    fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn svc(ns: &str, name: &str, sel: Option<&[(&str, &str)]>) -> Service {
        Service {
            metadata: meta::ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                selector: sel.map(labels),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn rs(ns: &str, name: &str, expr: meta::LabelSelectorRequirement) -> ReplicaSet {
        ReplicaSet {
            metadata: meta::ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                ..Default::default()
            },
            spec: ReplicaSetSpec {
                selector: meta::LabelSelector {
                    match_expressions: Some(vec![expr]),
                    ..Default::default()
                },
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn owned_pod(kind: &str, api: &str, owner: &str, kv: &[(&str, &str)]) -> PodInfo {
        let mut b = PodInfo::test("ns", "p").edit(|p| {
            p.metadata.owner_references = Some(vec![meta::OwnerReference {
                api_version: api.into(),
                kind: kind.into(),
                name: owner.into(),
                controller: Some(true),
                ..Default::default()
            }]);
        });
        for (k, v) in kv {
            b = b.label(k, v);
        }
        b.build()
    }

    #[test]
    fn services_selecting_the_pod_are_merged() {
        let w = WorkloadSelectors::new()
            .with(service_entry(&svc("ns", "a", Some(&[("app", "web")]))))
            .with(service_entry(&svc("ns", "b", Some(&[("tier", "fe")]))))
            .with(service_entry(&svc("ns", "other", Some(&[("app", "db")]))))
            .with(service_entry(&svc("ns", "none", None)))
            .with(service_entry(&svc("elsewhere", "c", Some(&[("x", "y")]))));
        let pod = PodInfo::test("ns", "p")
            .label("app", "web")
            .label("tier", "fe")
            .label("x", "y")
            .build();
        let sel = w.default_selector(&pod).unwrap();
        assert!(sel.matches(&labels(&[("app", "web"), ("tier", "fe")])));
        assert!(
            !sel.matches(&labels(&[("app", "web")])),
            "both services count"
        );
        assert!(
            sel.matches(&labels(&[("app", "web"), ("tier", "fe"), ("x", "z")])),
            "other namespaces' services do not"
        );
        let lonely = PodInfo::test("ns", "q").label("app", "cache").build();
        assert_eq!(w.default_selector(&lonely), None);
    }

    #[test]
    fn empty_service_selector_matches_but_adds_nothing() {
        let w = WorkloadSelectors::new().with(service_entry(&svc("ns", "all", Some(&[]))));
        let pod = PodInfo::test("ns", "p").label("app", "web").build();
        assert_eq!(w.default_selector(&pod), None);
    }

    #[test]
    fn controllers_are_looked_up_by_owner_reference() {
        let expr = meta::LabelSelectorRequirement {
            key: "app".into(),
            operator: "In".into(),
            values: Some(vec!["web".into(), "web2".into()]),
        };
        let w = WorkloadSelectors::new()
            .with(replica_set_entry(&rs("ns", "web-1", expr.clone())))
            .with(service_entry(&svc("ns", "s", Some(&[("svc", "yes")]))));
        let pod = owned_pod(
            "ReplicaSet",
            "apps/v1",
            "web-1",
            &[("app", "web2"), ("svc", "yes")],
        );
        let sel = w.default_selector(&pod).unwrap();
        assert!(sel.matches(&labels(&[("app", "web"), ("svc", "yes")])));
        assert!(!sel.matches(&labels(&[("app", "web")])));
        assert!(!sel.matches(&labels(&[("app", "db"), ("svc", "yes")])));
        // A ReplicaSet that merely selects the pod but does not own it is ignored.
        let orphan = PodInfo::test("ns", "o").label("app", "web").build();
        assert_eq!(w.default_selector(&orphan), None);
        // Wrong group: not a ReplicaSet as far as defaulting goes.
        let wrong = owned_pod(
            "ReplicaSet",
            "extensions/v1beta1",
            "web-1",
            &[("app", "web")],
        );
        assert_eq!(w.default_selector(&wrong), None);
    }

    #[test]
    fn replication_controller_map_is_merged() {
        let rc = ReplicationController {
            metadata: meta::ObjectMeta {
                namespace: Some("ns".into()),
                name: Some("rc".into()),
                ..Default::default()
            },
            spec: Some(k8s_openapi::api::core::v1::ReplicationControllerSpec {
                selector: Some(labels(&[("rc", "1")])),
                ..Default::default()
            }),
            ..Default::default()
        };
        let w = WorkloadSelectors::new().with(replication_controller_entry(&rc));
        let pod = owned_pod("ReplicationController", "v1", "rc", &[("rc", "1")]);
        let sel = w.default_selector(&pod).unwrap();
        assert!(sel.matches(&labels(&[("rc", "1")])));
        assert!(!sel.matches(&labels(&[("rc", "2")])));
    }

    #[test]
    fn upsert_and_remove_report_changes_and_share_untouched_namespaces() {
        let mut w = WorkloadSelectors::new();
        let e = service_entry(&svc("a", "s", Some(&[("k", "v")])));
        assert!(w.upsert(e.kind, &e.namespace, &e.name, e.selector.clone()));
        assert!(!w.upsert(e.kind, &e.namespace, &e.name, e.selector.clone()));
        let f = service_entry(&svc("b", "s", Some(&[("k", "v")])));
        assert!(w.upsert(f.kind, &f.namespace, &f.name, f.selector));
        let copy = w.clone();
        assert!(w.upsert(e.kind, "a", "s2", WorkloadSelector::None));
        assert!(Arc::ptr_eq(&copy.namespaces["b"], &w.namespaces["b"]));
        assert!(!Arc::ptr_eq(&copy.namespaces["a"], &w.namespaces["a"]));
        assert_eq!(w.len(), 3);
        assert!(w.remove(WorkloadKind::Service, "b", "s"));
        assert!(!w.remove(WorkloadKind::Service, "b", "s"));
        assert!(!w.remove(WorkloadKind::ReplicaSet, "a", "s"));
        assert_eq!(w.len(), 2);
        assert_eq!(copy.len(), 2);
    }

    #[test]
    fn cache_feeds_snapshots_copy_on_write() {
        let mut cache = crate::cache::Cache::new();
        let e = service_entry(&svc("ns", "s", Some(&[("app", "web")])));
        cache.upsert_workload_selector(e.kind, &e.namespace, &e.name, e.selector.clone());
        let snap = cache.snapshot();
        let pod = PodInfo::test("ns", "p").label("app", "web").build();
        assert!(snap.workload_selectors().default_selector(&pod).is_some());
        // Later changes do not leak into an existing snapshot until it is updated.
        assert!(cache.remove_workload_selector(WorkloadKind::Service, "ns", "s"));
        assert!(!cache.remove_workload_selector(WorkloadKind::Service, "ns", "s"));
        assert!(snap.workload_selectors().default_selector(&pod).is_some());
        let mut snap2 = snap.clone();
        cache.update_snapshot(&mut snap2);
        assert!(snap2.workload_selectors().default_selector(&pod).is_none());
        assert!(cache.workload_selectors().is_empty());
    }
}
