//! SchedulingPolicy (ferrosched's own, PreEnqueue, off by default): keeps a pod out of the
//! active queue while it violates the merged SchedulingPolicies its service account may
//! `use`. Deny-all-but: a pod whose service account may use no policy is evaluated against
//! the empty policy, which allows nothing (not even the default scheduler), so it stays
//! out. Defaulting is the future webhook's job; this plugin only checks.
//!
//! The policies and "which may this pod use" are injected ([`PolicyStore`],
//! [`UsablePolicies`]); `ferrosched run` fills them from a SchedulingPolicy watch and
//! SubjectAccessReviews (asynchronously: a service account not resolved yet keeps its pods
//! out with [`RESOLVING`], and the controller fires [`EventResource::SchedulingPolicy`] when
//! it is, or when a policy changes). Built from the in-tree factory (simulate, bench) the
//! store is empty and no policy is usable, so the plugin keeps every pod out.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use crate::framework::{ActionType, ClusterEvent, Code, EventResource};
use crate::framework::{Plugin, PluginPoints, PreEnqueuePlugin, Status};
use crate::plugin_points;
use crate::policy::{self, PodFields, SchedulingPolicy};
use crate::types::PodInfo;

use super::names::SCHEDULING_POLICY;

/// The reason a pod is kept out while its service account's rights are being looked up.
pub const RESOLVING: &str =
    "waiting for the SchedulingPolicies the pod's service account may use to be resolved";

/// Which SchedulingPolicies a pod's service account may `use` (RBAC), by name; `None` while
/// that is not known yet (the pod stays out until it is).
pub trait UsablePolicies: Send + Sync {
    fn usable_policies(&self, pod: &PodInfo) -> Option<Vec<String>>;
}

/// No policy is usable by anyone.
pub struct NoUsablePolicies;

impl UsablePolicies for NoUsablePolicies {
    fn usable_policies(&self, _: &PodInfo) -> Option<Vec<String>> {
        Some(Vec::new())
    }
}

impl<F: Fn(&PodInfo) -> Option<Vec<String>> + Send + Sync> UsablePolicies for F {
    fn usable_policies(&self, pod: &PodInfo) -> Option<Vec<String>> {
        self(pod)
    }
}

/// The SchedulingPolicy objects by name, shared with whoever keeps them current.
#[derive(Default)]
pub struct PolicyStore {
    policies: RwLock<BTreeMap<String, SchedulingPolicy>>,
}

impl PolicyStore {
    pub fn upsert(&self, p: SchedulingPolicy) {
        let name = p.name().to_string();
        self.policies.write().expect("policy store").insert(name, p);
    }
    pub fn remove(&self, name: &str) {
        self.policies.write().expect("policy store").remove(name);
    }
    /// Replaces every policy at once (after a full list of the objects).
    pub fn replace_all(&self, ps: impl IntoIterator<Item = SchedulingPolicy>) {
        let all = ps.into_iter().map(|p| (p.name().to_string(), p)).collect();
        *self.policies.write().expect("policy store") = all;
    }
    /// The names of every policy, in order.
    pub fn names(&self) -> Vec<String> {
        self.policies
            .read()
            .expect("policy store")
            .keys()
            .cloned()
            .collect()
    }
    /// The merge of the named policies (unknown names ignored).
    pub fn effective(&self, usable: &[String]) -> policy::PolicySpec {
        policy::effective_policy(&self.policies.read().expect("policy store"), usable)
    }
}

pub struct SchedulingPolicyPlugin {
    store: Arc<PolicyStore>,
    usable: Arc<dyn UsablePolicies>,
}

impl SchedulingPolicyPlugin {
    pub fn new(store: Arc<PolicyStore>, usable: Arc<dyn UsablePolicies>) -> Self {
        SchedulingPolicyPlugin { store, usable }
    }
}

impl Default for SchedulingPolicyPlugin {
    fn default() -> Self {
        Self::new(Arc::default(), Arc::new(NoUsablePolicies))
    }
}

impl Plugin for SchedulingPolicyPlugin {
    fn name(&self) -> &'static str {
        SCHEDULING_POLICY
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => pre_enqueue)
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        // Pod updates (tolerations, labels, ...) can fix a violation; so can a policy change
        // or a service account's usable policies being resolved (fired by the controller).
        vec![
            ClusterEvent::new(EventResource::Pod, ActionType::UPDATE),
            ClusterEvent::new(EventResource::SchedulingPolicy, ActionType::ALL),
        ]
    }
}

impl PreEnqueuePlugin for SchedulingPolicyPlugin {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        let Some(usable) = self.usable.usable_policies(pod) else {
            return Status::with_reasons(
                Code::UnschedulableAndUnresolvable,
                vec![RESOLVING.to_string()],
            );
        };
        let verdict = policy::evaluate(&PodFields::from_info(pod), &self.store.effective(&usable));
        if verdict.is_allowed() {
            return Status::success();
        }
        Status::with_reasons(Code::UnschedulableAndUnresolvable, verdict.violations)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1 as k8s;

    const RESTRICTED: &str = "apiVersion: scheduling.ferrosched.io/v1alpha1
kind: SchedulingPolicy
metadata:
  name: restricted
spec:
  allowed:
    schedulerNames: [default-scheduler]
";

    fn plugin(usable: &'static [&'static str]) -> SchedulingPolicyPlugin {
        let store = Arc::new(PolicyStore::default());
        for p in policy::parse(RESTRICTED).unwrap() {
            store.upsert(p);
        }
        SchedulingPolicyPlugin::new(
            store,
            Arc::new(move |_: &PodInfo| Some(usable.iter().map(|s| s.to_string()).collect())),
        )
    }

    #[test]
    fn allowed_pod_is_enqueued() {
        let pod = PodInfo::test("ns", "p").build();
        assert!(plugin(&["restricted"]).pre_enqueue(&pod).is_success());
    }

    #[test]
    fn violations_keep_the_pod_out_and_are_all_listed() {
        let pod = PodInfo::test("ns", "p")
            .edit(|p| {
                let s = p.spec.as_mut().unwrap();
                s.scheduler_name = Some("green-scheduler".into());
                s.node_selector = Some([("disk".to_string(), "ssd".to_string())].into());
                s.tolerations = Some(vec![k8s::Toleration {
                    key: Some("k".into()),
                    operator: Some("Exists".into()),
                    ..Default::default()
                }]);
            })
            .build();
        let s = plugin(&["restricted"]).pre_enqueue(&pod);
        assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(
            s.message(),
            "spec.schedulerName \"green-scheduler\" is not allowed; allowed: [\"default-scheduler\"], \
             spec.nodeSelector[disk] is not allowed, \
             spec.tolerations[0] (key \"k\" Exists, any effect) is not allowed"
        );
    }

    #[test]
    fn no_usable_policy_allows_nothing() {
        let pod = PodInfo::test("ns", "p").build();
        for p in [
            plugin(&[]),
            plugin(&["unknown"]),
            SchedulingPolicyPlugin::default(),
        ] {
            let s = p.pre_enqueue(&pod);
            assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
            assert_eq!(
                s.message(),
                "spec.schedulerName \"default-scheduler\" is not allowed; allowed: none"
            );
        }
    }

    #[test]
    fn unresolved_rights_keep_the_pod_out_until_resolved() {
        let pod = PodInfo::test("ns", "p").build();
        let p = SchedulingPolicyPlugin::new(Arc::default(), Arc::new(|_: &PodInfo| None));
        let s = p.pre_enqueue(&pod);
        assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
        assert_eq!(s.message(), RESOLVING);
        assert!(p.events_to_register().contains(&ClusterEvent::new(
            EventResource::SchedulingPolicy,
            ActionType::ALL
        )));
    }

    #[test]
    fn api_server_default_tolerations_are_not_evaluated() {
        let pod = PodInfo::test("ns", "p")
            .edit(|p| {
                p.spec.as_mut().unwrap().tolerations = Some(
                    [
                        "node.kubernetes.io/not-ready",
                        "node.kubernetes.io/unreachable",
                    ]
                    .map(|k| k8s::Toleration {
                        key: Some(k.into()),
                        operator: Some("Exists".into()),
                        effect: Some("NoExecute".into()),
                        toleration_seconds: Some(300),
                        ..Default::default()
                    })
                    .to_vec(),
                )
            })
            .build();
        assert!(plugin(&["restricted"]).pre_enqueue(&pod).is_success());
    }
}
