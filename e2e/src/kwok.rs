//! What the fake nodes' side would do, as far as scheduling needs it (kwok plays the kubelet
//! the same way). One pass every 100 ms, through the API only:
//!
//! - **kubelet**: a pod of the run with a deletionTimestamp is force-deleted
//!   (gracePeriodSeconds 0). No kubelet confirms a graceful deletion on a fake node, so a
//!   preemption victim would otherwise stay Terminating and hold its node forever. (The
//!   fake API server deletes at once; this does nothing there.)
//! - **external provisioner** (for the run's StorageClasses, provisioner
//!   `e2e.ferrosched.io/<id>`): a claim with `volume.kubernetes.io/selected-node` gets a PV
//!   on that node (nodeAffinity on its hostname) with a claimRef to the claim, as CSI
//!   external-provisioners do.
//! - **PV controller**, fake target only (kube-controller-manager does it on a cluster):
//!   a new volume without a claimRef becomes Available; a PV whose claimRef names an unbound
//!   claim binds the two (claim's volumeName and `pv.kubernetes.io/bind-completed`, both
//!   Bound), as its `bindClaimToVolume` does. This covers the scheduler's static bindings
//!   too (it sets the claimRef).

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::{ANN_BIND_COMPLETED, ANN_SELECTED_NODE, E2E_LABEL, RUN_LABEL, Target};

pub struct Kwok {
    pub client: Client,
    pub target: Target,
    pub id: String,
    pub ns: String,
    pub provisioner: String,
}

/// Runs passes until aborted; errors (e.g. a conflict with the scheduler's own write) are
/// logged and retried next pass.
pub async fn run(k: Kwok) {
    loop {
        if let Err(e) = k.pass().await {
            tracing::debug!("kwok pass: {e}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

impl Kwok {
    fn selector(&self) -> ListParams {
        ListParams::default().labels(&format!("{RUN_LABEL}={}", self.id))
    }

    async fn pass(&self) -> kube::Result<()> {
        self.finish_deletions().await?;
        self.provision().await?;
        if self.target == Target::Fake {
            self.bind_claims().await?;
        }
        Ok(())
    }

    async fn finish_deletions(&self) -> kube::Result<()> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        for p in pods.list(&self.selector()).await? {
            if p.metadata.deletion_timestamp.is_none() {
                continue;
            }
            let dp = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: p.metadata.uid.clone(),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match pods.delete(&p.name_any(), &dp).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    async fn provision(&self) -> kube::Result<()> {
        let classes: Vec<String> = Api::<StorageClass>::all(self.client.clone())
            .list(&self.selector())
            .await?
            .into_iter()
            .filter(|c| c.provisioner == self.provisioner)
            .map(|c| c.name_any())
            .collect();
        if classes.is_empty() {
            return Ok(());
        }
        let pvs: Api<PersistentVolume> = Api::all(self.client.clone());
        let existing: Vec<String> = pvs
            .list(&self.selector())
            .await?
            .into_iter()
            .map(|pv| pv.name_any())
            .collect();
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &self.ns);
        for c in claims.list(&self.selector()).await? {
            let spec = c.spec.clone().unwrap_or_default();
            let Some(node) = c.annotations().get(ANN_SELECTED_NODE) else {
                continue;
            };
            let uid = c.metadata.uid.clone().unwrap_or_default();
            let name = format!("pvc-{uid}");
            if spec.volume_name.is_some()
                || !classes.contains(&spec.storage_class_name.clone().unwrap_or_default())
                || existing.contains(&name)
            {
                continue;
            }
            let size = spec
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get("storage"))
                .cloned();
            let pv = json!({
                "apiVersion": "v1", "kind": "PersistentVolume",
                "metadata": {"name": name,
                             "labels": {RUN_LABEL: self.id, E2E_LABEL: "true"},
                             "annotations": {"pv.kubernetes.io/provisioned-by": self.provisioner}},
                "spec": {
                    "capacity": {"storage": size},
                    "accessModes": spec.access_modes,
                    "storageClassName": spec.storage_class_name,
                    "persistentVolumeReclaimPolicy": "Retain",
                    "volumeMode": spec.volume_mode.unwrap_or_else(|| "Filesystem".into()),
                    "csi": {"driver": self.provisioner.replace('/', "."), "volumeHandle": format!("vol-{uid}")},
                    "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                 "namespace": self.ns, "name": c.name_any(), "uid": uid},
                    "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}},
                },
            });
            let pv: PersistentVolume = serde_json::from_value(pv).expect("a PersistentVolume");
            match pvs.create(&PostParams::default(), &pv).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    async fn bind_claims(&self) -> kube::Result<()> {
        let pvs: Api<PersistentVolume> = Api::all(self.client.clone());
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &self.ns);
        let pp = PatchParams::default();
        let phase = |s: Option<&str>| s.unwrap_or("").to_string();
        for pv in pvs.list(&self.selector()).await? {
            let spec = pv.spec.clone().unwrap_or_default();
            let pv_phase = phase(pv.status.as_ref().and_then(|s| s.phase.as_deref()));
            let Some(claim_ref) = spec.claim_ref.as_ref() else {
                // A new, unclaimed volume becomes Available: only those are matched to claims.
                if pv_phase != "Available" {
                    pvs.patch_status(
                        &pv.name_any(),
                        &pp,
                        &Patch::Merge(json!({"status": {"phase": "Available"}})),
                    )
                    .await?;
                }
                continue;
            };
            if claim_ref.namespace.as_deref() != Some(self.ns.as_str()) {
                continue;
            }
            let Some(claim_name) = claim_ref.name.as_deref() else {
                continue;
            };
            let Some(claim) = claims.get_opt(claim_name).await? else {
                continue;
            };
            if claim.metadata.uid != claim_ref.uid {
                continue;
            }
            if pv_phase != "Bound" {
                pvs.patch_status(
                    &pv.name_any(),
                    &pp,
                    &Patch::Merge(json!({"status": {"phase": "Bound"}})),
                )
                .await?;
            }
            let claim_spec = claim.spec.clone().unwrap_or_default();
            if claim_spec.volume_name.is_none() {
                claims
                    .patch(
                        claim_name,
                        &pp,
                        &Patch::Merge(json!({
                            "metadata": {"annotations": {ANN_BIND_COMPLETED: "yes"}},
                            "spec": {"volumeName": pv.name_any()},
                        })),
                    )
                    .await?;
            }
            if phase(claim.status.as_ref().and_then(|s| s.phase.as_deref())) != "Bound" {
                claims
                    .patch_status(
                        claim_name,
                        &pp,
                        &Patch::Merge(json!({"status": {
                            "phase": "Bound",
                            "accessModes": spec.access_modes,
                            "capacity": spec.capacity,
                        }})),
                    )
                    .await?;
            }
        }
        Ok(())
    }
}
