//! The scheduler's condition on a Workload API PodGroup (`PodGroupInitiallyScheduled` in
//! `v1beta1`, `PodGroupScheduled` in 1.36's `v1alpha2`), written after a pod group cycle as
//! upstream's `updatePodGroupCondition` does: a strategic-merge patch of the status
//! subresource (conditions merge by type), with `observedGeneration`. Whether anything is
//! written at all is decided on the scheduling thread (`schedule_group::scheduled_condition`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{Patch, PatchParams};
use scheduler_core::types::pod_group::{
    GroupCondition, INITIALLY_SCHEDULED_CONDITIONS, PodGroupKey,
};
use serde_json::{Value, json};

use crate::client::retry::{ApiClient, status_code};
use crate::informers::pod_groups::{WorkloadV1alpha2, WorkloadV1beta1};

/// One condition to write on one group.
#[derive(Debug)]
pub(crate) struct ConditionWrite {
    pub(crate) group: PodGroupKey,
    /// The served Workload API version (`v1beta1` or `v1alpha2`).
    pub(crate) version: &'static str,
    pub(crate) generation: i64,
    pub(crate) condition: GroupCondition,
    /// Whether the status differs from the condition's last one (or there was none): only
    /// then does `lastTransitionTime` move.
    pub(crate) transition: bool,
}

/// The patch: the condition of the version's type.
pub(crate) fn condition_patch(w: &ConditionWrite) -> Value {
    let type_ = if w.version == "v1alpha2" {
        INITIALLY_SCHEDULED_CONDITIONS[1]
    } else {
        INITIALLY_SCHEDULED_CONDITIONS[0]
    };
    let mut c = json!({
        "type": type_,
        "status": if w.condition.status { "True" } else { "False" },
        "reason": w.condition.reason,
        "message": w.condition.message,
        "observedGeneration": w.generation,
    });
    if w.transition {
        c["lastTransitionTime"] =
            serde_json::to_value(Time(Timestamp::now())).expect("time serializes");
    }
    json!({"status": {"conditions": [c]}})
}

/// Writes it; a group deleted meanwhile needs nothing, other failures are logged (the next
/// cycle writes again, as it reads the condition back from the informer).
pub(crate) async fn write(client: &ApiClient, w: &ConditionWrite) {
    let patch = condition_patch(w);
    let pp = PatchParams::default();
    let patch = Patch::Strategic(&patch);
    let (ns, name) = (&w.group.namespace, &w.group.name);
    let result = if w.version == "v1alpha2" {
        let api: Api<WorkloadV1alpha2> = Api::namespaced(client.client.clone(), ns);
        client
            .call("patch podgroup status", || {
                api.patch_status(name, &pp, &patch)
            })
            .await
            .map(|_| ())
    } else {
        let api: Api<WorkloadV1beta1> = Api::namespaced(client.client.clone(), ns);
        client
            .call("patch podgroup status", || {
                api.patch_status(name, &pp, &patch)
            })
            .await
            .map(|_| ())
    };
    match result {
        Ok(()) => {}
        Err(e) if status_code(&e) == Some(404) => {}
        Err(e) => {
            tracing::warn!(group = %w.group, error = %e, "could not update the PodGroup's condition")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scheduler_core::types::pod_group::GroupApi;

    #[test]
    fn the_patch_names_the_versions_condition_and_moves_the_time_on_transitions_only() {
        let mut w = ConditionWrite {
            group: PodGroupKey::new(GroupApi::Workload, "ml", "train"),
            version: "v1beta1",
            generation: 2,
            condition: GroupCondition {
                status: false,
                reason: "Unschedulable".into(),
                message: "minCount (3) cannot be satisfied: 1 scheduled, 0 remaining".into(),
            },
            transition: false,
        };
        let p = condition_patch(&w);
        let c = &p["status"]["conditions"][0];
        assert_eq!(c["type"], "PodGroupInitiallyScheduled");
        assert_eq!(c["status"], "False");
        assert_eq!(c["observedGeneration"], 2);
        assert!(c.get("lastTransitionTime").is_none());
        w.version = "v1alpha2";
        w.transition = true;
        let p = condition_patch(&w);
        assert_eq!(p["status"]["conditions"][0]["type"], "PodGroupScheduled");
        assert!(p["status"]["conditions"][0]["lastTransitionTime"].is_string());
    }
}
