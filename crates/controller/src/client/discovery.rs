//! What optional APIs the server serves, asked once at startup.

use kube::Client;

/// The group version DynamicResources needs (GA in 1.34; earlier betas are not used).
pub const DRA_GROUP_VERSION: &str = "resource.k8s.io/v1";

/// Whether the server serves resource.k8s.io/v1 ResourceClaims. Any failure to tell counts
/// as "not served": pods with claims are then refused, never bound without devices.
pub async fn serves_dra(client: &Client) -> bool {
    serves(client, DRA_GROUP_VERSION, "resourceclaims").await
}

/// The versions of resource.k8s.io that may serve DeviceTaintRules, newest first (GA `v1`
/// in 1.37, `v1beta2` in 1.36 and `v1alpha3` in 1.35, both off by default there).
pub const TAINT_RULE_VERSIONS: [&str; 3] = ["v1", "v1beta2", "v1alpha3"];

/// The newest version of resource.k8s.io serving DeviceTaintRules; None when none does or
/// discovery fails (then no rules are applied, as upstream with DRADeviceTaintRules off).
pub async fn taint_rule_version(client: &Client) -> Option<&'static str> {
    for v in TAINT_RULE_VERSIONS {
        match client
            .list_api_group_resources(&format!("resource.k8s.io/{v}"))
            .await
        {
            Ok(list) if list.resources.iter().any(|r| r.name == "devicetaintrules") => {
                return Some(v);
            }
            Ok(_) => {}
            Err(e) if super::status_code(&e) == Some(404) => {}
            Err(e) => {
                tracing::warn!(error = %e, "discovery of resource.k8s.io/{v} failed; DeviceTaintRules of that version are not read");
            }
        }
    }
    None
}

/// The PodGroup versions the server serves, each API's newest (none: not served).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PodGroupVersions {
    /// `scheduling.k8s.io`: `v1beta1` (1.37) or `v1alpha2` (1.36), off by default upstream.
    pub workload: Option<&'static str>,
    /// `scheduling.x-k8s.io/v1alpha1`, scheduler-plugins' CRD.
    pub coscheduling: Option<&'static str>,
}

/// The Workload API's versions that serve PodGroups, newest first.
pub const WORKLOAD_POD_GROUP_VERSIONS: [&str; 2] = ["v1beta1", "v1alpha2"];
pub const WORKLOAD_GROUP: &str = "scheduling.k8s.io";
pub const COSCHEDULING_GROUP: &str = "scheduling.x-k8s.io";
pub const COSCHEDULING_VERSION: &str = "v1alpha1";

/// Which PodGroup APIs the server serves. A failure to tell counts as "not served": pods
/// naming such a group then wait and say so, never bound without their group.
pub async fn pod_group_versions(client: &Client) -> PodGroupVersions {
    let mut found = PodGroupVersions::default();
    for v in WORKLOAD_POD_GROUP_VERSIONS {
        if serves(client, &format!("{WORKLOAD_GROUP}/{v}"), "podgroups").await {
            found.workload = Some(v);
            break;
        }
    }
    let cosched = format!("{COSCHEDULING_GROUP}/{COSCHEDULING_VERSION}");
    if serves(client, &cosched, "podgroups").await {
        found.coscheduling = Some(COSCHEDULING_VERSION);
    }
    found
}

/// Whether `group_version` serves `resource`; any failure to tell counts as "no".
async fn serves(client: &Client, group_version: &str, resource: &str) -> bool {
    match client.list_api_group_resources(group_version).await {
        Ok(list) => list.resources.iter().any(|r| r.name == resource),
        // Servers without the group answer a plain-text 404 (no Status, so no reason).
        Err(e) if super::status_code(&e) == Some(404) => false,
        Err(e) => {
            tracing::warn!(error = %e, "discovery of {group_version} failed; treating its {resource} as not served");
            false
        }
    }
}
