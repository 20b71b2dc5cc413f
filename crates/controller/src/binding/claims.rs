//! DynamicResources' PreBind, carried out by the controller (upstream `bindClaim`).
//! scheduler-core decides in Filter/Reserve and makes no API calls; the scheduling loop
//! assumes the decision in the cache (`DraObjects::assume_claim_writes`) and the binding
//! cycle calls [`write_claims`] before it POSTs the pod's Binding. For each claim, in order:
//!
//! 1. when the scheduler allocated it and the claim lacks it, the delete-protection
//!    finalizer (a merge patch of `metadata.finalizers`);
//! 2. `status.allocation` (if the scheduler allocated it) and the whole new
//!    `status.reservedFor`, a merge patch of the status subresource.
//!
//! The claim for a pod's DRA-backed extended resources does not exist yet ([`create_one`]):
//! it is created (owned by the pod, with the finalizer), its status written, then the pod's
//! `status.extendedResourceClaimStatus` names it; undoing deletes it.
//!
//! Every patch carries the resourceVersion the scheduler read (then the one the previous
//! patch returned), so a claim changed meanwhile (deallocated, reserved by someone else) is
//! refused with 409 and nothing is handed out twice. When a later step fails (another
//! claim, or the Binding itself), [`undo_claims`] takes back what was written: the
//! allocation the scheduler made and the pod's reservedFor entry.
//!
//! DynamicResources' PostFilter (a pod fits nowhere because a claim is allocated for nodes it
//! cannot use, and nobody else holds the claim) is carried out by [`deallocate`]: the
//! claim's `status.allocation` and `status.reservedFor` are removed, again with the
//! resourceVersion the scheduler read as precondition. When PostFilter instead found the
//! claim of the pod's extended resources an earlier attempt left behind (a crash before the
//! binding), [`delete_left_over`] deletes it: its finalizers removed (resourceVersion
//! precondition), then the object (uid precondition).

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use scheduler_core::types::dra::extended::ExtendedClaimCreate;
use scheduler_core::types::dra::{CLAIM_FINALIZER, ClaimDeallocation, ClaimStatusWrite};
use serde_json::json;

use crate::client::retry::ApiClient;

/// Upstream's prefix for a failed PreBind plugin.
pub(crate) const PREBIND_PREFIX: &str = "running PreBind plugin \"DynamicResources\": ";

/// A claim status this binding cycle wrote, for [`undo_claims`].
#[derive(Debug, Clone)]
pub(crate) struct Written {
    pub(crate) write: ClaimStatusWrite,
    /// What the status write returned.
    pub(crate) resource_version: String,
    /// The name the API server gave a claim this cycle created (extended resources).
    pub(crate) created: Option<String>,
}

fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        e => e.to_string(),
    }
}

/// Carries out the writes in order. On failure the claims written so far are undone and the
/// error is the FailedScheduling message (upstream's wording, with the PreBind prefix).
///
/// `stamp`: device binding conditions are on, so each new allocation gets its
/// `allocationTimestamp` (the start of `bindingTimeout`), as upstream's PreBind sets it.
pub(crate) async fn write_claims(
    client: &ApiClient,
    writes: &[ClaimStatusWrite],
    stamp: bool,
) -> Result<Vec<Written>, String> {
    let mut done = Vec::new();
    for w in writes {
        let stamped;
        let w = match &w.allocation {
            Some(a) if stamp && a.allocation_timestamp.is_none() => {
                let mut c = w.clone();
                if let Some(a) = &mut c.allocation {
                    a.allocation_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
                }
                stamped = c;
                &stamped
            }
            _ => w,
        };
        let result = match &w.create {
            Some(c) => create_one(client, w, c)
                .await
                .map(|(name, rv)| (rv, Some(name))),
            None => write_one(client, w).await.map(|rv| (rv, None)),
        };
        match result {
            Ok((rv, created)) => done.push(Written {
                write: w.clone(),
                resource_version: rv,
                created,
            }),
            Err(e) => {
                undo_claims(client, &done).await;
                return Err(format!("{PREBIND_PREFIX}{e}"));
            }
        }
    }
    Ok(done)
}

async fn write_one(client: &ApiClient, w: &ClaimStatusWrite) -> Result<String, String> {
    let api: Api<ResourceClaim> = Api::namespaced(client.client.clone(), &w.namespace);
    let pp = PatchParams::default();
    let what = if w.allocation.is_some() {
        "add allocation and reservation to"
    } else {
        "add reservation to"
    };
    let mut rv = w.resource_version.clone();
    if w.add_finalizer {
        let mut finalizers = w.finalizers.clone();
        finalizers.push(CLAIM_FINALIZER.to_string());
        let patch = json!({"metadata": {"resourceVersion": rv, "finalizers": finalizers}});
        let c = api
            .patch(&w.name, &pp, &Patch::Merge(&patch))
            .await
            .map_err(|e| {
                format!(
                    "add finalizer to claim {}/{}: {}",
                    w.namespace,
                    w.name,
                    api_message(&e)
                )
            })?;
        rv = c.metadata.resource_version.unwrap_or_default();
    }
    let reserved: Vec<_> = w.reserved_for.iter().map(|r| r.to_k8s()).collect();
    let mut status = json!({"reservedFor": reserved});
    if let Some(a) = &w.allocation {
        status["allocation"] = serde_json::to_value(a).map_err(|e| e.to_string())?;
    }
    let patch = json!({"metadata": {"resourceVersion": rv}, "status": status});
    let c = api
        .patch_status(&w.name, &pp, &Patch::Merge(&patch))
        .await
        .map_err(|e| {
            format!(
                "{what} claim {}/{}: {}",
                w.namespace,
                w.name,
                api_message(&e)
            )
        })?;
    Ok(c.metadata.resource_version.unwrap_or_default())
}

/// Creates the claim of the pod's extended resources, writes its allocation and
/// reservation, then the pod's `status.extendedResourceClaimStatus` (upstream's PreBind for
/// them). A failure after the create deletes the claim again. Returns its name and the
/// status write's resourceVersion.
async fn create_one(
    client: &ApiClient,
    w: &ClaimStatusWrite,
    c: &ExtendedClaimCreate,
) -> Result<(String, String), String> {
    let api: Api<ResourceClaim> = Api::namespaced(client.client.clone(), &w.namespace);
    let created = api
        .create(&PostParams::default(), &c.claim(&w.namespace))
        .await
        .map_err(|e| {
            format!(
                "create claim for extended resources {}/: {}",
                w.namespace,
                api_message(&e)
            )
        })?;
    let name = created.metadata.name.clone().unwrap_or_default();
    let rv = created
        .metadata
        .resource_version
        .clone()
        .unwrap_or_default();
    let written = async {
        let reserved: Vec<_> = w.reserved_for.iter().map(|r| r.to_k8s()).collect();
        let mut status = json!({"reservedFor": reserved});
        if let Some(a) = &w.allocation {
            status["allocation"] = serde_json::to_value(a).map_err(|e| e.to_string())?;
        }
        let patch = json!({"metadata": {"resourceVersion": rv}, "status": status});
        let claim = api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| {
                format!(
                    "add allocation and reservation to claim {}/{name}: {}",
                    w.namespace,
                    api_message(&e)
                )
            })?;
        let pods: Api<Pod> = Api::namespaced(client.client.clone(), &w.namespace);
        let patch = json!({"status": {"extendedResourceClaimStatus": c.pod_status(&name)}});
        pods.patch_status(&c.pod_name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| {
                format!(
                    "update pod {}/{} ExtendedResourceClaimStatus: {}",
                    w.namespace,
                    c.pod_name,
                    api_message(&e)
                )
            })?;
        Ok::<_, String>(claim.metadata.resource_version.unwrap_or_default())
    }
    .await;
    match written {
        Ok(rv) => Ok((name, rv)),
        Err(e) => {
            delete_created(client, &w.namespace, &name).await;
            Err(e)
        }
    }
}

/// Deletes a claim this binding cycle created: the finalizer first (nothing else removes
/// it), then the object. Best effort, logged.
async fn delete_created(client: &ApiClient, namespace: &str, name: &str) {
    let api: Api<ResourceClaim> = Api::namespaced(client.client.clone(), namespace);
    let patch = json!({"metadata": {"finalizers": null}});
    let result = match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => api.delete(name, &DeleteParams::default()).await.map(|_| ()),
        Err(e) => Err(e),
    };
    if let Err(e) = result {
        tracing::warn!(
            claim = %format!("{namespace}/{name}"),
            error = %api_message(&e),
            "could not delete the extended resource claim of a failed binding"
        );
    }
}

/// Takes back what [`write_claims`] wrote: the pod's reservedFor entry, and the allocation
/// when the scheduler made it (the finalizer stays; the claim's driver side removes it with
/// the allocation). Best effort: a claim changed since (409) is left as it is, logged.
pub(crate) async fn undo_claims(client: &ApiClient, written: &[Written]) {
    for d in written.iter().rev() {
        let w = &d.write;
        if let Some(name) = &d.created {
            delete_created(client, &w.namespace, name).await;
            continue;
        }
        let api: Api<ResourceClaim> = Api::namespaced(client.client.clone(), &w.namespace);
        let before: Vec<_> = w
            .reserved_for
            .iter()
            .take(w.reserved_for.len().saturating_sub(1))
            .map(|r| r.to_k8s())
            .collect();
        let mut status = json!({"reservedFor": if before.is_empty() { serde_json::Value::Null } else { json!(before) }});
        if w.allocation.is_some() {
            // The driver's per-device status goes with the allocation (the API refuses a
            // status for a device that is not allocated).
            status["allocation"] = serde_json::Value::Null;
            status["devices"] = serde_json::Value::Null;
        }
        let patch = json!({"metadata": {"resourceVersion": d.resource_version}, "status": status});
        if let Err(e) = api
            .patch_status(&w.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing::warn!(
                claim = %format!("{}/{}", w.namespace, w.name),
                error = %api_message(&e),
                "could not undo the claim's allocation/reservation after a failed binding"
            );
        }
    }
}

/// Removes the claim's allocation and reservation (upstream's PostFilter `UpdateStatus`).
/// A claim changed since the scheduler read it is refused (409) and left alone: the change
/// itself retries the pod. Errors are logged only; the pod is retried either way.
pub(crate) async fn deallocate(client: &ApiClient, d: &ClaimDeallocation) -> bool {
    if d.delete {
        return delete_left_over(client, d).await;
    }
    let api: Api<ResourceClaim> = Api::namespaced(client.client.clone(), &d.namespace);
    let patch = json!({
        "metadata": {"resourceVersion": d.resource_version},
        "status": {"allocation": null, "reservedFor": null, "devices": null},
    });
    match api
        .patch_status(&d.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {
            tracing::info!(claim = %format!("{}/{}", d.namespace, d.name), "deallocated ResourceClaim");
            true
        }
        Err(e) => {
            tracing::warn!(
                claim = %format!("{}/{}", d.namespace, d.name),
                error = %api_message(&e),
                "could not deallocate the ResourceClaim; the pod is retried"
            );
            false
        }
    }
}

/// Deletes the claim of a pod's extended resources left by an earlier attempt (upstream's
/// PostFilter `deleteClaim`). Created by the scheduler for a pod that was never bound, it
/// carries only the scheduler's finalizer, so all finalizers go. A claim already gone counts
/// as deleted; one changed since it was read (409) is left for the next attempt, which the
/// change itself triggers.
pub(crate) async fn delete_left_over(client: &ApiClient, d: &ClaimDeallocation) -> bool {
    let api: Api<ResourceClaim> = Api::namespaced(client.client.clone(), &d.namespace);
    let key = format!("{}/{}", d.namespace, d.name);
    let patch = json!({"metadata": {"resourceVersion": d.resource_version, "finalizers": null}});
    let params = DeleteParams {
        preconditions: (!d.uid.is_empty()).then(|| kube::api::Preconditions {
            uid: Some(d.uid.clone()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let result = match api
        .patch(&d.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => api.delete(&d.name, &params).await.map(|_| ()),
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => {
            tracing::info!(claim = %key, "deleted the extended resource claim left by an earlier attempt");
            true
        }
        Err(e) if crate::client::status_code(&e) == Some(404) => true,
        Err(e) => {
            tracing::warn!(
                claim = %key,
                error = %api_message(&e),
                "could not delete the extended resource claim left by an earlier attempt; the pod is retried"
            );
            false
        }
    }
}
