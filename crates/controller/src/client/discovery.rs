//! What optional APIs the server serves, asked once at startup.

use kube::Client;

/// The group version DynamicResources needs (GA in 1.34; earlier betas are not used).
pub const DRA_GROUP_VERSION: &str = "resource.k8s.io/v1";

/// Whether the server serves resource.k8s.io/v1 ResourceClaims. Any failure to tell counts
/// as "not served": pods with claims are then refused, never bound without devices.
pub async fn serves_dra(client: &Client) -> bool {
    match client.list_api_group_resources(DRA_GROUP_VERSION).await {
        Ok(list) => list.resources.iter().any(|r| r.name == "resourceclaims"),
        // Servers before 1.34 answer a plain-text 404 (no Status, so no reason).
        Err(e) if super::status_code(&e) == Some(404) => false,
        Err(e) => {
            tracing::warn!(error = %e, "discovery of {DRA_GROUP_VERSION} failed; treating DRA as not served");
            false
        }
    }
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
