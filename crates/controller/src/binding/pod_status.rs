//! Pod status patches (strategic merge on `pods/{name}/status`; conditions merge by type):
//! the PodScheduled=False condition after a failed attempt, `status.nominatedNodeName`
//! after preemption, and the DisruptionTarget condition on preemption victims.
//! The pod's API status only; a plugin's verdict is scheduler-core's `framework::Status`.

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Map, Value, json};

use crate::binding::podref::PodRef;
use crate::client::retry::{ApiClient, status_code};

pub(crate) const REASON_UNSCHEDULABLE: &str = "Unschedulable";
pub(crate) const REASON_SCHEDULER_ERROR: &str = "SchedulerError";

/// What a failed attempt does to `status.nominatedNodeName`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Nomination {
    Keep,
    Set(String),
    Clear,
}

impl From<scheduler_core::outcome::Nominating> for Nomination {
    fn from(n: scheduler_core::outcome::Nominating) -> Self {
        use scheduler_core::outcome::Nominating;
        match n {
            Nominating::Keep => Nomination::Keep,
            Nominating::Set(node) => Nomination::Set(node),
            Nominating::Clear => Nomination::Clear,
        }
    }
}

fn now() -> Value {
    serde_json::to_value(Time(Timestamp::now())).expect("time serializes")
}

/// The strategic-merge patch for a failed attempt, or `None` when the pod already carries
/// exactly this condition and nomination (upstream skips the no-op update too).
pub(crate) fn failure_patch(
    reason: &str,
    message: &str,
    current: Option<&PodCondition>,
    nomination: &Nomination,
) -> Option<Value> {
    let unchanged = current.is_some_and(|c| {
        c.status == "False"
            && c.reason.as_deref() == Some(reason)
            && c.message.as_deref() == Some(message)
    });
    if unchanged && *nomination == Nomination::Keep {
        return None;
    }
    let mut status = Map::new();
    if !unchanged {
        let mut cond = json!({
            "type": "PodScheduled",
            "status": "False",
            "reason": reason,
            "message": message,
        });
        // lastTransitionTime changes only when the status does.
        if current.is_none_or(|c| c.status != "False") {
            cond["lastTransitionTime"] = now();
        }
        status.insert("conditions".into(), Value::Array(vec![cond]));
    }
    match nomination {
        Nomination::Keep => {}
        Nomination::Set(n) => {
            status.insert("nominatedNodeName".into(), Value::String(n.clone()));
        }
        Nomination::Clear => {
            status.insert("nominatedNodeName".into(), Value::Null);
        }
    }
    Some(json!({ "status": status }))
}

async fn patch_status(client: &ApiClient, pod: &PodRef, patch: &Value) -> Result<(), kube::Error> {
    let api: Api<Pod> = Api::namespaced(client.client.clone(), &pod.namespace);
    let pp = PatchParams::default();
    let patch = Patch::Strategic(patch);
    let result = client
        .call("patch pod status", || {
            api.patch_status(&pod.name, &pp, &patch)
        })
        .await;
    match result {
        Ok(_) => Ok(()),
        // The pod is gone: nothing to report on.
        Err(e) if status_code(&e) == Some(404) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Merges `annotations` into the pod's metadata (a JSON merge patch: other annotations stay).
/// A pod gone meanwhile needs none; other failures are logged, as they change no decision.
pub(crate) async fn annotate(
    client: &ApiClient,
    pod: &PodRef,
    annotations: &std::collections::BTreeMap<String, String>,
) {
    let api: Api<Pod> = Api::namespaced(client.client.clone(), &pod.namespace);
    let patch = Patch::Merge(serde_json::json!({"metadata": {"annotations": annotations}}));
    let pp = PatchParams::default();
    let result = client
        .call("annotate pod", || api.patch(&pod.name, &pp, &patch))
        .await;
    match result {
        Ok(_) => {}
        Err(e) if status_code(&e) == Some(404) => {}
        Err(e) => tracing::warn!(%pod, error = %e, "could not write the explanation annotations"),
    }
}

pub(crate) async fn report_failure(
    client: &ApiClient,
    pod: &PodRef,
    reason: &str,
    message: &str,
    current: Option<&PodCondition>,
    nomination: &Nomination,
) {
    if let Some(patch) = failure_patch(reason, message, current, nomination)
        && let Err(e) = patch_status(client, pod, &patch).await
    {
        tracing::warn!(%pod, error = %e, "could not update PodScheduled condition");
    }
}

/// NominatedNodeNameForExpectation (upstream beta, on since 1.35): before a binding cycle
/// that has PreBind work (volumes to bind, claims to allocate), the pod is nominated to the
/// chosen node so autoscalers see where it is going. A failure is logged, not fatal.
pub(crate) async fn set_nomination(client: &ApiClient, pod: &PodRef, node: &str) {
    let patch = json!({"status": {"nominatedNodeName": node}});
    if let Err(e) = patch_status(client, pod, &patch).await {
        tracing::warn!(%pod, %node, error = %e, "could not set nominatedNodeName before PreBind");
    }
}

/// Returns false when the patch failed (a pod already gone counts as cleared).
pub(crate) async fn clear_nomination(client: &ApiClient, pod: &PodRef) -> bool {
    let patch = json!({"status": {"nominatedNodeName": null}});
    match patch_status(client, pod, &patch).await {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(%pod, error = %e, "could not clear nominatedNodeName");
            false
        }
    }
}

/// What became of one preemption victim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VictimOutcome {
    /// Marked and deleted by this call: worth a Preempted event.
    Preempted,
    /// Already gone (or replaced by another pod of the same name): nothing to do.
    Gone,
    /// An API call failed: the preemption did not complete.
    Failed,
}

/// Marks a victim with DisruptionTarget (reason PreemptionByScheduler), then deletes it. As
/// upstream, a failed mark stops there (the victim is not deleted unannounced).
pub(crate) async fn preempt_victim(
    client: &ApiClient,
    victim: &PodRef,
    scheduler_name: &str,
) -> VictimOutcome {
    let patch = json!({"status": {"conditions": [{
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": format!("{scheduler_name}: preempting to accommodate a higher priority pod"),
        "lastTransitionTime": now(),
    }]}});
    let api: Api<Pod> = Api::namespaced(client.client.clone(), &victim.namespace);
    let pp = PatchParams::default();
    let patch = Patch::Strategic(&patch);
    let marked = client
        .call("patch pod status", || {
            api.patch_status(&victim.name, &pp, &patch)
        })
        .await;
    match marked {
        Ok(_) => {}
        Err(e) if status_code(&e) == Some(404) => return VictimOutcome::Gone,
        Err(e) => {
            tracing::warn!(pod = %victim, error = %e, "could not add DisruptionTarget condition");
            return VictimOutcome::Failed;
        }
    }
    let dp = kube::api::DeleteParams {
        preconditions: (!victim.uid.is_empty()).then(|| kube::api::Preconditions {
            uid: Some(victim.uid.clone()),
            resource_version: None,
        }),
        ..Default::default()
    };
    match client
        .call("delete victim", || api.delete(&victim.name, &dp))
        .await
    {
        Ok(_) => VictimOutcome::Preempted,
        Err(e) if matches!(status_code(&e), Some(404 | 409)) => VictimOutcome::Gone,
        Err(e) => {
            tracing::warn!(pod = %victim, error = %e, "could not delete preemption victim");
            VictimOutcome::Failed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(status: &str, reason: &str, message: &str) -> PodCondition {
        PodCondition {
            type_: "PodScheduled".into(),
            status: status.into(),
            reason: Some(reason.into()),
            message: Some(message.into()),
            ..Default::default()
        }
    }

    #[test]
    fn an_unchanged_failure_needs_no_patch() {
        let c = cond("False", REASON_UNSCHEDULABLE, "0/1 nodes are available");
        assert!(
            failure_patch(
                REASON_UNSCHEDULABLE,
                "0/1 nodes are available",
                Some(&c),
                &Nomination::Keep
            )
            .is_none()
        );
        let p = failure_patch(
            REASON_UNSCHEDULABLE,
            "0/1 nodes are available",
            Some(&c),
            &Nomination::Set("n1".into()),
        )
        .unwrap();
        assert_eq!(p, json!({"status": {"nominatedNodeName": "n1"}}));
    }

    #[test]
    fn a_new_failure_sets_the_condition_with_a_transition_time() {
        let p = failure_patch(REASON_UNSCHEDULABLE, "m", None, &Nomination::Clear).unwrap();
        let c = &p["status"]["conditions"][0];
        assert_eq!(c["status"], "False");
        assert_eq!(c["reason"], "Unschedulable");
        assert!(c["lastTransitionTime"].is_string());
        assert!(p["status"]["nominatedNodeName"].is_null());
        // Same status, new message: the transition time stays.
        let old = cond("False", REASON_UNSCHEDULABLE, "old");
        let p = failure_patch(REASON_UNSCHEDULABLE, "m", Some(&old), &Nomination::Keep).unwrap();
        assert!(
            p["status"]["conditions"][0]
                .get("lastTransitionTime")
                .is_none()
        );
    }
}
