//! The SchedulingPolicy objects of the cluster, kept current by a watch, for the admission
//! webhook and the scheduler's SchedulingPolicy plugin.
//!
//! The custom resource is watched as a `DynamicObject` and decoded into scheduler-core's
//! [`SchedulingPolicy`] (scheduler-core knows no kube types, so it cannot implement
//! `kube::Resource`). An object that does not decode or validate is left out with a logged
//! error: being deny-all-but, a missing policy allows less, never more.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use scheduler_core::plugins::scheduling_policy::PolicyStore;
use scheduler_core::policy::{self, SchedulingPolicy};
use serde_json::Value;

/// The plural (URL) name of the custom resource.
pub const PLURAL: &str = "schedulingpolicies";

/// The watched resource.
pub fn api_resource() -> ApiResource {
    let version = policy::API_VERSION
        .rsplit('/')
        .next()
        .unwrap_or(policy::API_VERSION);
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(policy::GROUP, version, policy::KIND),
        PLURAL,
    )
}

/// The policies plus whether the first full list has arrived.
#[derive(Default)]
pub struct Policies {
    pub store: Arc<PolicyStore>,
    synced: AtomicBool,
}

impl Policies {
    /// Whether the first list has been applied; before that an empty store means "not
    /// known yet", not "no policy".
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// For tests and callers that load policies by other means.
    pub fn mark_synced(&self) {
        self.synced.store(true, Ordering::Release);
    }
}

/// Decodes a watched object and validates it; the errors name the policy and the field.
pub fn decode(obj: &DynamicObject) -> Result<SchedulingPolicy, Vec<String>> {
    let name = obj.name_any();
    let mut v = serde_json::to_value(obj).map_err(|e| vec![format!("{name}: {e}")])?;
    if let Value::Object(m) = &mut v {
        // List items may come without apiVersion/kind; `status` is not part of the type.
        m.entry("apiVersion")
            .or_insert_with(|| policy::API_VERSION.into());
        m.entry("kind").or_insert_with(|| policy::KIND.into());
        m.remove("status");
    }
    let p: SchedulingPolicy =
        serde_json::from_value(v).map_err(|e| vec![format!("{name}: {e}")])?;
    let errors = policy::validate(&p);
    if errors.is_empty() {
        Ok(p)
    } else {
        Err(errors.into_iter().map(|e| format!("{name}: {e}")).collect())
    }
}

fn log_invalid(errors: &[String]) {
    tracing::error!(
        errors = %errors.join("; "),
        "ignoring an invalid SchedulingPolicy (it grants nothing until fixed)"
    );
}

/// Watches SchedulingPolicies into `policies` until the task is aborted, calling
/// `on_change` after every change (and after each full list).
pub async fn watch(client: Client, policies: Arc<Policies>, on_change: impl Fn() + Send + Sync) {
    let api: Api<DynamicObject> = Api::all_with(client, &api_resource());
    let stream = watcher(api, watcher::Config::default().any_semantic()).default_backoff();
    futures::pin_mut!(stream);
    let mut listed: Option<Vec<SchedulingPolicy>> = None;
    while let Some(item) = stream.next().await {
        let event = match item {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(error = %e, "SchedulingPolicy watch failed; retrying");
                continue;
            }
        };
        match event {
            watcher::Event::Init => listed = Some(Vec::new()),
            watcher::Event::InitApply(o) => match decode(&o) {
                Ok(p) => listed.get_or_insert_default().push(p),
                Err(e) => log_invalid(&e),
            },
            watcher::Event::InitDone => {
                let all = listed.take().unwrap_or_default();
                tracing::debug!(policies = all.len(), "SchedulingPolicies listed");
                policies.store.replace_all(all);
                policies.mark_synced();
                on_change();
            }
            watcher::Event::Apply(o) => {
                match decode(&o) {
                    Ok(p) => policies.store.upsert(p),
                    Err(e) => {
                        // An update that breaks a policy withdraws it.
                        log_invalid(&e);
                        policies.store.remove(&o.name_any());
                    }
                }
                on_change();
            }
            watcher::Event::Delete(o) => {
                policies.store.remove(&o.name_any());
                on_change();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(v: Value) -> DynamicObject {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn decodes_a_watched_object_with_server_metadata() {
        let o = object(serde_json::json!({
            "apiVersion": "scheduling.ferrosched.io/v1alpha1",
            "kind": "SchedulingPolicy",
            "metadata": {"name": "restricted", "resourceVersion": "7", "uid": "u",
                         "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"allowed": {"schedulerNames": ["default-scheduler"]}}
        }));
        let p = decode(&o).unwrap();
        assert_eq!(p.name(), "restricted");
        assert_eq!(
            p.spec.allowed.scheduler_names,
            Some(vec!["default-scheduler".to_string()])
        );
    }

    #[test]
    fn invalid_policies_are_reported_by_name() {
        let o = object(serde_json::json!({
            "apiVersion": "scheduling.ferrosched.io/v1alpha1",
            "kind": "SchedulingPolicy",
            "metadata": {"name": "broken"},
            "spec": {"required": {"schedulerNames": []}}
        }));
        let errors = decode(&o).unwrap_err();
        assert!(errors[0].starts_with("broken: "), "{errors:?}");
        let o = object(serde_json::json!({
            "apiVersion": "scheduling.ferrosched.io/v1alpha1",
            "kind": "SchedulingPolicy",
            "metadata": {"name": "typo"},
            "spec": {"allowedAffinities": {}}
        }));
        assert!(decode(&o).unwrap_err()[0].starts_with("typo: "));
    }

    #[test]
    fn the_resource_is_the_crds() {
        let r = api_resource();
        assert_eq!(r.api_version, "scheduling.ferrosched.io/v1alpha1");
        assert_eq!(r.plural, "schedulingpolicies");
    }
}
