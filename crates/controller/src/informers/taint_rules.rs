//! DeviceTaintRules (DRA): the informer for the version the server serves (discovery picks
//! it: `v1` from 1.37, `v1beta2` in 1.36, `v1alpha3` in 1.35; none: no rules), and what a
//! rule event does to the state: the cache applies the rule's taint to the devices it
//! selects, and when some device's taints changed the pods waiting on devices are retried as
//! after a ResourceSlice update (upstream's tracker reports such a change as a slice
//! update; DynamicResources registers no DeviceTaintRule event of its own).

use std::sync::Arc;

use k8s_openapi::api::resource::{v1, v1alpha3, v1beta2};
use kube::Client;
use scheduler_core::framework::{ActionType, EventResource};
use scheduler_core::types::dra::taint_rules::DeviceTaintRuleInfo;

use super::watch::Presence;
use super::{fns, spawn};
use crate::state::{Shared, State};

/// A DeviceTaintRule of one served version.
pub(crate) trait TaintRuleObject {
    fn view(&self) -> DeviceTaintRuleInfo;
}

impl TaintRuleObject for v1::DeviceTaintRule {
    fn view(&self) -> DeviceTaintRuleInfo {
        DeviceTaintRuleInfo::from_v1(self)
    }
}

impl TaintRuleObject for v1beta2::DeviceTaintRule {
    fn view(&self) -> DeviceTaintRuleInfo {
        DeviceTaintRuleInfo::from_v1beta2(self)
    }
}

impl TaintRuleObject for v1alpha3::DeviceTaintRule {
    fn view(&self) -> DeviceTaintRuleInfo {
        DeviceTaintRuleInfo::from_v1alpha3(self)
    }
}

impl State {
    pub(crate) fn on_device_taint_rule<K: TaintRuleObject>(&mut self, _old: Option<&K>, r: &K) {
        if self.cache.dra_mut().update_taint_rule(r.view()) {
            self.fire(EventResource::ResourceSlice, ActionType::UPDATE);
        }
    }

    pub(crate) fn on_device_taint_rule_delete<K: TaintRuleObject>(&mut self, r: &K) {
        if self.cache.dra_mut().remove_taint_rule(&r.view().name) {
            self.fire(EventResource::ResourceSlice, ActionType::UPDATE);
        }
    }
}

/// The one DeviceTaintRule informer: of the served `version`, or of `v1` when none is
/// served (its first list then answers 404 and the optional informer counts as synced with
/// no rules, so the informer count stays the same).
pub(super) fn spawn_taint_rules(
    client: &Client,
    shared: &Arc<Shared>,
    version: Option<&str>,
) -> tokio::task::JoinHandle<()> {
    let opt = Presence::Optional;
    match version {
        Some("v1beta2") => spawn(
            client,
            shared,
            opt,
            fns::<v1beta2::DeviceTaintRule>(
                State::on_device_taint_rule,
                State::on_device_taint_rule_delete,
            ),
        ),
        Some("v1alpha3") => spawn(
            client,
            shared,
            opt,
            fns::<v1alpha3::DeviceTaintRule>(
                State::on_device_taint_rule,
                State::on_device_taint_rule_delete,
            ),
        ),
        _ => spawn(
            client,
            shared,
            opt,
            fns::<v1::DeviceTaintRule>(
                State::on_device_taint_rule,
                State::on_device_taint_rule_delete,
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Node, Pod};
    use k8s_openapi::api::resource::v1 as dra;
    use scheduler_core::framework::NodeFingerprint;
    use scheduler_core::queue::QueueKind;
    use scheduler_core::types::PodKey;
    use serde_json::json;

    use crate::state::tests::{default_profile_state, park_rejected};

    fn rule(device: &str) -> dra::DeviceTaintRule {
        serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
            "metadata": {"name": "maintenance"},
            "spec": {"deviceSelector": {"device": device},
                     "taint": {"key": "example.com/maintenance", "effect": "NoExecute"}}}))
        .unwrap()
    }

    /// A pod DynamicResources refused because its only device is tainted by a rule is
    /// retried when the rule stops tainting it (changed or deleted), not on a rule change
    /// that leaves every device's taints as they were.
    #[test]
    fn a_rule_change_that_changes_taints_retries_pods_waiting_on_devices() {
        let (shared, profiles, clock) = default_profile_state();
        let mut st = shared.lock();
        st.cache.set_dra_api_served(true);
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}))
        .unwrap();
        let fp = NodeFingerprint::of(&node);
        st.on_node(None, node, &fp);
        let class: dra::DeviceClass = serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": "gpu"}, "spec": {}}))
        .unwrap();
        st.on_device_class(None, &class);
        let slice: dra::ResourceSlice = serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": "n1-gpus"},
            "spec": {"driver": "gpu.example.com", "nodeName": "n1",
                     "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}}))
        .unwrap();
        st.on_resource_slice(None, &slice);
        let claim: dra::ResourceClaim = serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "default", "resourceVersion": "1"},
            "spec": {"devices": {"requests": [{"name": "r",
                "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}}]}}}))
        .unwrap();
        st.on_resource_claim(None, &claim);
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "default", "uid": "u1"},
            "spec": {"containers": [{"name": "c", "image": "i"}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}]}}))
        .unwrap();
        st.on_pod(&profiles, None, &pod);
        let key = PodKey::of(&pod);

        // The claim wants all devices; a rule on gpu-0 makes that impossible.
        st.on_device_taint_rule(None, &rule("gpu-0"));
        park_rejected(&mut st, &profiles, "DynamicResources");
        assert_eq!(st.queue.queue_of(&key), Some(QueueKind::Unschedulable));
        // The same rule again (a relist): no taint changed, the pod stays.
        st.on_device_taint_rule(Some(&rule("gpu-0")), &rule("gpu-0"));
        assert_eq!(st.queue.queue_of(&key), Some(QueueKind::Unschedulable));
        // Moved to gpu-1: the taints changed, so the pod is retried (and refused again).
        st.on_device_taint_rule(Some(&rule("gpu-0")), &rule("gpu-1"));
        assert_ne!(st.queue.queue_of(&key), Some(QueueKind::Unschedulable));
        clock.advance(std::time::Duration::from_secs(2));
        st.queue.flush_backoff_completed();
        park_rejected(&mut st, &profiles, "DynamicResources");
        assert_eq!(st.queue.queue_of(&key), Some(QueueKind::Unschedulable));
        // Deleted: retried.
        st.on_device_taint_rule_delete(&rule("gpu-1"));
        assert_ne!(st.queue.queue_of(&key), Some(QueueKind::Unschedulable));
    }
}
