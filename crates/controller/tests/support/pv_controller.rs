//! A test-only stand-in for kube-controller-manager's PV controller plus an external
//! provisioner, so the end-to-end tests are honest about who does what: the scheduler only
//! sets a volume's claimRef or a claim's `volume.kubernetes.io/selected-node`; this completes
//! the binding (and provisions a volume on the selected node), writing straight to the fake
//! API server's store (not through its request log).
#![allow(dead_code)]

use serde_json::{Value, json};

use fake_apiserver::FakeApiServer;

pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

/// Binds claim and volume to each other: both Bound, the claim's volumeName and
/// bind-completed annotation set (what the PV controller's `bindClaimToVolume` does).
pub fn bind(server: &FakeApiServer, mut pvc: Value, mut pv: Value) {
    pv["spec"]["claimRef"] = json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "namespace": pvc["metadata"]["namespace"], "name": pvc["metadata"]["name"],
        "uid": pvc["metadata"]["uid"],
    });
    pv["status"] = json!({"phase": "Bound"});
    server.apply("persistentvolumes", &pv);
    pvc["spec"]["volumeName"] = pv["metadata"]["name"].clone();
    pvc["metadata"]["annotations"][ANN_BIND_COMPLETED] = json!("yes");
    pvc["status"] = json!({"phase": "Bound", "accessModes": pvc["spec"]["accessModes"],
                           "capacity": pv["spec"]["capacity"]});
    server.apply("persistentvolumeclaims", &pvc);
}

/// One reconcile pass over every unbound claim. Returns how many claims it bound.
pub fn reconcile(server: &FakeApiServer) -> usize {
    let pvs = server.list("persistentvolumes");
    let classes = server.list("storageclasses");
    let mut bound = 0;
    for pvc in server.list("persistentvolumeclaims") {
        if !s(&pvc["spec"]["volumeName"]).is_empty() {
            continue;
        }
        let uid = s(&pvc["metadata"]["uid"]);
        // The scheduler chose this volume (static binding): complete it.
        if let Some(pv) = pvs
            .iter()
            .find(|pv| s(&pv["spec"]["claimRef"]["uid"]) == uid)
        {
            bind(server, pvc.clone(), pv.clone());
            bound += 1;
            continue;
        }
        // The scheduler chose a node: provision a volume there (the external provisioner).
        let node = s(&pvc["metadata"]["annotations"][ANN_SELECTED_NODE]);
        let class = s(&pvc["spec"]["storageClassName"]);
        let provisioner = classes
            .iter()
            .find(|c| s(&c["metadata"]["name"]) == class)
            .map(|c| s(&c["provisioner"]).to_string())
            .unwrap_or_default();
        if node.is_empty() || provisioner.is_empty() || provisioner == NO_PROVISIONER {
            continue;
        }
        let pv = json!({
            "metadata": {"name": format!("pvc-{uid}"),
                         "annotations": {"pv.kubernetes.io/provisioned-by": provisioner}},
            "spec": {
                "capacity": {"storage": pvc["spec"]["resources"]["requests"]["storage"]},
                "accessModes": pvc["spec"]["accessModes"],
                "storageClassName": class,
                "persistentVolumeReclaimPolicy": "Delete",
                "csi": {"driver": provisioner, "volumeHandle": format!("vol-{uid}")},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}},
            },
        });
        bind(server, pvc, pv);
        bound += 1;
    }
    bound
}
