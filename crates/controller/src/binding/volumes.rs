//! VolumeBinding's PreBind, carried out by the controller (upstream `BindPodVolumes` in
//! `volumebinding/binder.go`). scheduler-core's VolumeBinding decides in Filter/Reserve and
//! makes no API calls; the scheduling loop assumes the decision in the cache
//! (`Cache::assume_pod_volumes`) and the binding cycle calls [`bind_pod_volumes`] before it
//! POSTs the pod's Binding:
//!
//! 1. each chosen volume gets `spec.claimRef` = its claim (namespace, name, uid), and each
//!    claim to provision gets `volume.kubernetes.io/selected-node: <node>`: JSON merge
//!    patches carrying the `metadata.resourceVersion` the informer last saw, so a volume or
//!    claim changed since the decision is refused with 409 (upstream sends an Update with the
//!    cached object, same effect);
//! 2. the cache is polled (every [`POLL_PERIOD`], up to `bindTimeoutSeconds`) until every
//!    claim is fully bound (`spec.volumeName` set and `pv.kubernetes.io/bind-completed`), as
//!    the PV controller / external provisioner report through the informers. Like upstream's
//!    `checkBindings` it fails early when the pod is gone, a volume's claimRef was dropped,
//!    the selected-node annotation was removed or changed (provisioning failed), or a
//!    chosen or provisioned volume's node affinity no longer matches the node's labels
//!    (checked as the CSI volume where the node migrated the in-tree plugin), and ignores
//!    informer copies older than its own patches. On shutdown the wait is given up at once
//!    (`context canceled`), so a 600 s `bindTimeoutSeconds` cannot hold the process.
//!
//! Error texts are upstream's, so `FailedScheduling` events read the same.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Api;
use kube::api::{Patch, PatchParams};
use scheduler_core::config::{KubeSchedulerConfiguration, PluginArgs};
use scheduler_core::plugins::names::VOLUME_BINDING;
use scheduler_core::types::PodKey;
use scheduler_core::types::volume::{ANN_SELECTED_NODE, PodVolumes, claim_key};
use serde_json::json;

use crate::binding::conditions::CONTEXT_CANCELED;
use crate::client::retry::ApiClient;
use crate::state::{Shared, State};

/// How often the binding cycle re-checks the claims (upstream polls every second; this is a
/// read of the local cache, so it may be shorter).
pub(crate) const POLL_PERIOD: Duration = Duration::from_millis(200);
/// Upstream's default `bindTimeoutSeconds`, for a profile without VolumeBinding args.
pub(crate) const DEFAULT_BIND_TIMEOUT: Duration = Duration::from_secs(600);
/// Upstream's prefix for a failed PreBind plugin.
pub(crate) const PREBIND_PREFIX: &str = "running PreBind plugin \"VolumeBinding\": ";

/// `bindTimeoutSeconds` of VolumeBinding per profile (schedulerName).
pub(crate) fn bind_timeouts(cfg: &KubeSchedulerConfiguration) -> HashMap<String, Duration> {
    cfg.profiles
        .iter()
        .map(|p| {
            let timeout = match p.args(VOLUME_BINDING) {
                Some(PluginArgs::VolumeBinding(a)) => {
                    Duration::from_secs(u64::try_from(a.bind_timeout_seconds).unwrap_or(0))
                }
                _ => DEFAULT_BIND_TIMEOUT,
            };
            (p.scheduler_name.clone(), timeout)
        })
        .collect()
}

/// Key of a claim's or volume's last informer resourceVersion in [`State::volume_versions`].
pub(crate) fn pvc_version_key(namespace: &str, name: &str) -> String {
    format!("pvc:{}", claim_key(namespace, name))
}
pub(crate) fn pv_version_key(name: &str) -> String {
    format!("pv:{name}")
}

fn rv_of(rv: Option<&String>) -> u64 {
    rv.and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// The message of an API error (the Status `message`), else the error itself.
fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        e => e.to_string(),
    }
}

/// Carries out `decided` for the assumed pod `key` on `node` and waits until every claim is
/// bound. `Err` is the FailedScheduling message (upstream's wording, with the PreBind
/// prefix); the caller rolls back (`forget_pod_volumes`, unreserve, forget, requeue).
pub(crate) async fn bind_pod_volumes(
    client: &ApiClient,
    shared: &Shared,
    key: &PodKey,
    node: &str,
    decided: &PodVolumes,
    timeout: Duration,
    mut closing: tokio::sync::watch::Receiver<bool>,
) -> Result<(), String> {
    let patched = bind_api_update(client, shared, node, decided)
        .await
        .map_err(|e| format!("{PREBIND_PREFIX}{e}"))?;
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match check_bindings(&shared.lock(), key, node, decided, &patched) {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) => return Err(format!("{PREBIND_PREFIX}binding volumes: {e}")),
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "{PREBIND_PREFIX}binding volumes: context deadline exceeded"
            ));
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL_PERIOD) => {}
            // Shutting down: give up, as upstream's PreBind when its context is cancelled.
            // What was written stays (the PV controller may still bind the claims); the
            // next leader sees it and retries the pod.
            Ok(_) = closing.wait_for(|c| *c) => {
                return Err(format!("{PREBIND_PREFIX}binding volumes: {CONTEXT_CANCELED}"));
            }
        }
    }
}

/// The API writes (upstream `bindAPIUpdate`). Returns the resourceVersion each write
/// produced, keyed like [`State::volume_versions`].
async fn bind_api_update(
    client: &ApiClient,
    shared: &Shared,
    node: &str,
    decided: &PodVolumes,
) -> Result<HashMap<String, u64>, String> {
    let pv_api: Api<PersistentVolume> = Api::all(client.client.clone());
    let pp = PatchParams::default();
    let mut patched = HashMap::new();
    for b in &decided.static_bindings {
        let (rv, uid) = {
            let st = shared.lock();
            (
                st.volume_versions.get(&pv_version_key(&b.pv)).copied(),
                st.cache
                    .volumes()
                    .pvc(&b.pvc_namespace, &b.pvc_name)
                    .map(|c| c.uid.clone())
                    .unwrap_or_default(),
            )
        };
        let mut patch = json!({"spec": {"claimRef": {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "namespace": b.pvc_namespace, "name": b.pvc_name, "uid": uid,
        }}});
        if let Some(rv) = rv {
            patch["metadata"] = json!({"resourceVersion": rv.to_string()});
        }
        let merge = Patch::Merge(&patch);
        tracing::debug!(pv = %b.pv, pvc = %claim_key(&b.pvc_namespace, &b.pvc_name), "binding volume to claim");
        let pv = client
            .call("bind-pv", || pv_api.patch(&b.pv, &pp, &merge))
            .await
            .map_err(|e| api_message(&e))?;
        patched.insert(
            pv_version_key(&b.pv),
            rv_of(pv.metadata.resource_version.as_ref()),
        );
    }
    for (ns, name) in &decided.dynamic_provisions {
        let api: Api<PersistentVolumeClaim> = Api::namespaced(client.client.clone(), ns);
        let rv = shared
            .lock()
            .volume_versions
            .get(&pvc_version_key(ns, name))
            .copied();
        let mut patch = json!({"metadata": {"annotations": {ANN_SELECTED_NODE: node}}});
        if let Some(rv) = rv {
            patch["metadata"]["resourceVersion"] = json!(rv.to_string());
        }
        let merge = Patch::Merge(&patch);
        tracing::debug!(pvc = %claim_key(ns, name), %node, "selecting node for provisioning");
        let pvc = client
            .call("select-node", || api.patch(name, &pp, &merge))
            .await
            .map_err(|e| api_message(&e))?;
        patched.insert(
            pvc_version_key(ns, name),
            rv_of(pvc.metadata.resource_version.as_ref()),
        );
    }
    Ok(patched)
}

/// Upstream `checkBindings` over the informer-fed cache: `Ok(true)` when every claim is
/// fully bound, `Ok(false)` to keep waiting, `Err` when binding must be retried.
pub(crate) fn check_bindings(
    st: &State,
    key: &PodKey,
    node: &str,
    decided: &PodVolumes,
    patched: &HashMap<String, u64>,
) -> Result<bool, String> {
    if st.cache.get_pod(key).is_none() {
        return Err(format!(
            "pod does not exist any more: pods {:?} not found",
            key.name
        ));
    }
    let vols = st.cache.volumes();
    let node_info = st
        .cache
        .node_info(node)
        .filter(|n| n.has_node())
        .ok_or_else(|| format!("failed to get node {node:?}: node {node:?} not found"))?;
    let csi_node = vols.csi_node(node).map(|n| n.as_ref());
    // Upstream re-checks each volume's node affinity (translated to CSI where the node
    // migrated the plugin) while waiting: a node relabelled meanwhile fails the binding.
    let matches = |pv: &scheduler_core::types::PvInfo| {
        pv.node_affinity_matches_on(&node_info.labels, csi_node)
    };
    let mismatch = |pv: &scheduler_core::types::PvInfo| {
        format!(
            "pv {:?} node affinity doesn't match node {node:?}: no matching NodeSelectorTerms",
            pv.name
        )
    };
    // An informer copy older than our own write: wait for ours to arrive.
    let stale = |k: String| {
        patched
            .get(&k)
            .is_some_and(|&want| st.volume_versions.get(&k).copied().unwrap_or(0) < want)
    };
    let fully_bound = |ns: &str, name: &str| {
        vols.pvc(ns, name)
            .is_some_and(|c| c.volume_name.is_some() && c.bind_completed)
    };
    for b in &decided.static_bindings {
        let Some(pv) = vols.pv(&b.pv) else {
            return Err(format!(
                "failed to check binding: PersistentVolume {:?} not found",
                b.pv
            ));
        };
        if vols.pvc(&b.pvc_namespace, &b.pvc_name).is_none() {
            return Err(format!(
                "failed to check binding: PersistentVolumeClaim {:?} not found",
                claim_key(&b.pvc_namespace, &b.pvc_name)
            ));
        }
        if stale(pv_version_key(&b.pv)) {
            return Ok(false);
        }
        match matches(pv) {
            Ok(true) => {}
            Ok(false) => return Err(mismatch(pv)),
            Err(e) => return Err(format!("failed to translate pv to csi: {e}")),
        }
        if pv.claim_ref.as_ref().is_none_or(|c| c.uid.is_empty()) {
            return Err(format!("ClaimRef got reset for pv {:?}", b.pv));
        }
        if !fully_bound(&b.pvc_namespace, &b.pvc_name) {
            return Ok(false);
        }
    }
    for (ns, name) in &decided.dynamic_provisions {
        let Some(pvc) = vols.pvc(ns, name) else {
            return Err(format!(
                "failed to check provisioning pvc: PersistentVolumeClaim {:?} not found",
                claim_key(ns, name)
            ));
        };
        if stale(pvc_version_key(ns, name)) {
            return Ok(false);
        }
        if pvc.selected_node.as_deref() != Some(node) {
            // The provisioner removes the annotation to ask for a new decision.
            return Err(format!("provisioning failed for PVC {name:?}"));
        }
        if let Some(pv_name) = &pvc.volume_name {
            // Not in the informer yet (or deleted, and the claim will be unbound): wait.
            let Some(pv) = vols.pv(pv_name) else {
                return Ok(false);
            };
            if !matches(pv)? {
                return Err(mismatch(pv));
            }
        }
        if !fully_bound(ns, name) {
            return Ok(false);
        }
    }
    Ok(true)
}
