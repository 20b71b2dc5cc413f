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
