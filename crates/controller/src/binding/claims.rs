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
//! A PodGroup's claim (DRAWorkloadResourceClaims, [`ClaimStatusWrite::group`]) is written by
//! whichever member's binding comes first: its write appends the PodGroup to
//! `status.reservedFor` once. The others' writes make sure of it ([`write_group`]): refused
//! with 409 because the claim changed, they take the claim as the informer reports it next
//! and are done when it carries the allocation and the PodGroup, or add what is missing; an
//! allocation of other devices fails the binding. Undoing a group write takes the PodGroup's entry (and the allocation
//! it wrote) back only when no other member of the group is placed.
//!
//! DynamicResources' PostFilter (a pod fits nowhere because a claim is allocated for nodes it
//! cannot use, and nobody else holds the claim) is carried out by [`deallocate`]: the
//! claim's `status.allocation` and `status.reservedFor` are removed, again with the
//! resourceVersion the scheduler read as precondition. When PostFilter instead found the
//! claim of the pod's extended resources an earlier attempt left behind (a crash before the
//! binding), [`delete_left_over`] deletes it: its finalizers removed (resourceVersion
//! precondition), then the object (uid precondition).

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::AllocationResult;
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use scheduler_core::plugins::dynamic_resources::{claim_being_deleted, claim_not_found};
use scheduler_core::types::dra::extended::ExtendedClaimCreate;
use scheduler_core::types::dra::{
    CLAIM_FINALIZER, ClaimDeallocation, ClaimStatusWrite, ConsumerRef, ResourceClaimInfo,
};
use serde_json::json;

use crate::client::retry::ApiClient;
use crate::state::Shared;

/// Upstream's prefix for a failed PreBind plugin.
pub(crate) const PREBIND_PREFIX: &str = "running PreBind plugin \"DynamicResources\": ";

/// A claim status this binding cycle wrote, for [`undo_claims`].
#[derive(Debug, Clone)]
pub(crate) struct Written {
    /// What was written (for a PodGroup's claim, what this cycle added to the claim as it
    /// found it).
    pub(crate) write: ClaimStatusWrite,
    /// What the status write returned (or the claim's, when nothing was written).
    pub(crate) resource_version: String,
    /// The name the API server gave a claim this cycle created (extended resources).
    pub(crate) created: Option<String>,
    /// A PodGroup's claim another member's binding had already written: nothing to undo.
    pub(crate) unchanged: bool,
}

/// Why a claim write failed: the message, and whether the claim changed since it was read
/// (409).
struct WriteError {
    message: String,
    conflict: bool,
    /// The resourceVersion the refused request carried.
    resource_version: String,
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
/// `keep_group`: whether another member of the pod's PodGroup is placed (asked only when
/// undoing; see [`undo_claims`]).
pub(crate) async fn write_claims(
    client: &ApiClient,
    shared: &Shared,
    writes: &[ClaimStatusWrite],
    stamp: bool,
    keep_group: &(dyn Fn() -> bool + Sync),
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
        let result = match (&w.create, &w.group) {
            (Some(c), _) => create_one(client, w, c).await.map(|(name, rv)| Written {
                write: w.clone(),
                resource_version: rv,
                created: Some(name),
                unchanged: false,
            }),
            (None, Some(g)) => write_group(client, shared, w, &g.consumer).await,
            (None, None) => write_one(client, w)
                .await
                .map(|rv| Written {
                    write: w.clone(),
                    resource_version: rv,
                    created: None,
                    unchanged: false,
                })
                .map_err(|e| e.message),
        };
        match result {
            Ok(written) => done.push(written),
            Err(e) => {
                undo_claims(client, &done, keep_group()).await;
                return Err(format!("{PREBIND_PREFIX}{e}"));
            }
        }
    }
    Ok(done)
}

/// Whether two allocations hand out the same devices for the same nodes (the timestamp a
/// binding stamps aside).
fn same_allocation(a: &AllocationResult, b: &AllocationResult) -> bool {
    a.devices == b.devices && a.node_selector == b.node_selector
}

/// How long a PodGroup claim's write waits for the informer to report the claim as it is
/// after a 409, before the binding fails.
const GROUP_WRITE_WAIT: Duration = Duration::from_secs(5);
/// How often the informer's copy is read meanwhile (a read of the local cache).
const GROUP_WRITE_POLL: Duration = Duration::from_millis(20);

/// A PodGroup claim's write ([`ClaimStatusWrite::group`]): as [`write_one`], and when the
/// claim changed since the scheduler read it (another member's binding wrote it, most
/// likely), the claim as the informer reports it next (newer than the refused version):
/// nothing to do if it has the allocation and the PodGroup; else add what is missing, with
/// that resourceVersion as precondition. (The informer rather than a GET: no grant beyond
/// what every claim write needs.)
async fn write_group(
    client: &ApiClient,
    shared: &Shared,
    w: &ClaimStatusWrite,
    group: &ConsumerRef,
) -> Result<Written, String> {
    let mut refused = match write_one(client, w).await {
        Ok(rv) => {
            return Ok(Written {
                write: w.clone(),
                resource_version: rv,
                created: None,
                unchanged: false,
            });
        }
        Err(e) if e.conflict => e,
        Err(e) => return Err(e.message),
    };
    let deadline = tokio::time::Instant::now() + GROUP_WRITE_WAIT;
    loop {
        let newer = |c: &ResourceClaimInfo| {
            c.resource_version.parse::<u64>().unwrap_or(0)
                > refused.resource_version.parse::<u64>().unwrap_or(0)
        };
        let reported = shared
            .lock()
            .cache
            .dra()
            .reported_claim(&w.namespace, &w.name);
        let live = match reported {
            None => return Err(claim_not_found(&w.name)),
            Some(c) if newer(&c) => c,
            Some(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(GROUP_WRITE_POLL).await;
                continue;
            }
            Some(_) => return Err(refused.message),
        };
        if !w.uid.is_empty() && live.uid != w.uid {
            return Err(claim_not_found(&w.name));
        }
        if live.deleting {
            return Err(claim_being_deleted(&w.name));
        }
        let has_group = live
            .reserved_for
            .iter()
            .any(|r| r.uid == group.uid || r.is_pod_group(&group.name));
        let allocation = match (live.allocation.as_ref().map(|a| &a.raw), &w.allocation) {
            (Some(live), Some(ours)) if !same_allocation(live, ours) => {
                return Err(format!(
                    "claim {}/{} got allocated elsewhere in the meantime",
                    w.namespace, w.name
                ));
            }
            (Some(_), _) if has_group => {
                return Ok(Written {
                    write: w.clone(),
                    resource_version: live.resource_version.clone(),
                    created: None,
                    unchanged: true,
                });
            }
            (Some(_), _) => None,
            (None, Some(ours)) => Some(ours.clone()),
            (None, None) => {
                return Err(format!(
                    "claim {}/{} got deallocated in the meantime",
                    w.namespace, w.name
                ));
            }
        };
        let mut reserved_for = live.reserved_for.clone();
        if !has_group {
            reserved_for.push(group.clone());
        }
        let again = ClaimStatusWrite {
            resource_version: live.resource_version.clone(),
            add_finalizer: allocation.is_some()
                && !live.finalizers.iter().any(|f| f == CLAIM_FINALIZER),
            finalizers: live.finalizers.clone(),
            allocation,
            reserved_for,
            ..w.clone()
        };
        match write_one(client, &again).await {
            Ok(rv) => {
                return Ok(Written {
                    write: again,
                    resource_version: rv,
                    created: None,
                    unchanged: false,
                });
            }
            Err(e) if e.conflict && tokio::time::Instant::now() < deadline => refused = e,
            Err(e) => return Err(e.message),
        }
    }
}

async fn write_one(client: &ApiClient, w: &ClaimStatusWrite) -> Result<String, WriteError> {
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
            .map_err(|e| WriteError {
                conflict: crate::client::status_code(&e) == Some(409),
                resource_version: rv.clone(),
                message: format!(
                    "add finalizer to claim {}/{}: {}",
                    w.namespace,
                    w.name,
                    api_message(&e)
                ),
            })?;
        rv = c.metadata.resource_version.unwrap_or_default();
    }
    let reserved: Vec<_> = w.reserved_for.iter().map(|r| r.to_k8s()).collect();
    let mut status = json!({"reservedFor": reserved});
    if let Some(a) = &w.allocation {
        status["allocation"] = serde_json::to_value(a).map_err(|e| WriteError {
            message: e.to_string(),
            conflict: false,
            resource_version: rv.clone(),
        })?;
    }
    let patch = json!({"metadata": {"resourceVersion": rv}, "status": status});
    let c = api
        .patch_status(&w.name, &pp, &Patch::Merge(&patch))
        .await
        .map_err(|e| WriteError {
            conflict: crate::client::status_code(&e) == Some(409),
            resource_version: rv.clone(),
            message: format!(
                "{what} claim {}/{}: {}",
                w.namespace,
                w.name,
                api_message(&e)
            ),
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
/// the allocation). A PodGroup's claim stays as it is when `keep_group` (another member of
/// the group is placed: upstream unreserves a group's claim only for its last scheduled
/// member), and when this binding found it written already. Best effort: a claim changed
/// since (409) is left as it is, logged.
pub(crate) async fn undo_claims(client: &ApiClient, written: &[Written], keep_group: bool) {
    for d in written.iter().rev() {
        let w = &d.write;
        if let Some(name) = &d.created {
            delete_created(client, &w.namespace, name).await;
            continue;
        }
        if d.unchanged || (keep_group && w.group.is_some()) {
            continue;
        }
        let api: Api<ResourceClaim> = Api::namespaced(client.client.clone(), &w.namespace);
        let before: Vec<_> = match &w.group {
            // The PodGroup's entry, wherever it is.
            Some(g) => w
                .reserved_for
                .iter()
                .filter(|r| r.uid != g.consumer.uid)
                .map(|r| r.to_k8s())
                .collect(),
            None => w
                .reserved_for
                .iter()
                .take(w.reserved_for.len().saturating_sub(1))
                .map(|r| r.to_k8s())
                .collect(),
        };
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
