//! Claims made from ResourceClaimTemplates, as kube-controller-manager's resourceclaim
//! controller makes them: for places with no such controller (`bench` in memory,
//! `simulate` for pods whose status does not name their claim yet).

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::resource::v1 as dra;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

/// The annotation upstream's controller puts on a generated claim: the pod's claim entry.
pub const POD_CLAIM_NAME_ANNOTATION: &str = "resource.kubernetes.io/pod-claim-name";

/// Why no claim could be made for a pod's `spec.resourceClaims` entry.
pub fn template_not_found(namespace: &str, template: &str) -> String {
    format!("resourceclaimtemplate.resource.k8s.io \"{namespace}/{template}\" not found")
}

/// The claim for `entry` of `pod` from `template`: named `<pod>-<entry>-<suffix>` (the
/// controller's generateName plus a suffix), controlled by the pod, with the template's
/// labels, annotations and spec. The caller records the name in the pod's
/// `status.resourceClaimStatuses` (see [`name_generated_claim`]).
pub fn claim_from_template(
    pod: &k8s::Pod,
    entry: &str,
    template: &dra::ResourceClaimTemplate,
    suffix: &str,
) -> dra::ResourceClaim {
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let spec = template.spec.as_ref();
    let meta = spec.and_then(|s| s.metadata.as_ref());
    let mut annotations = meta.and_then(|m| m.annotations.clone());
    annotations
        .get_or_insert_default()
        .insert(POD_CLAIM_NAME_ANNOTATION.into(), entry.into());
    dra::ResourceClaim {
        metadata: meta::ObjectMeta {
            name: Some(format!("{pod_name}-{entry}-{suffix}")),
            namespace: pod.metadata.namespace.clone(),
            uid: Some(format!("uid-claim-{pod_name}-{entry}-{suffix}")),
            resource_version: Some("1".into()),
            labels: meta.and_then(|m| m.labels.clone()),
            annotations,
            owner_references: Some(vec![meta::OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: pod_name,
                uid: pod.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..Default::default()
        },
        spec: spec.and_then(|s| s.spec.clone()),
        status: None,
    }
}

/// The claim for `entry` of a Workload API PodGroup from `template`, as kube-controller-manager
/// makes it (DRAWorkloadResourceClaims): named `<group>-<entry>-<suffix>`, controlled by the
/// PodGroup, with the template's labels, annotations and spec. The caller records the name
/// in the group's `status.resourceClaimStatuses`.
pub fn claim_for_pod_group(
    group: &crate::types::pod_group::PodGroupInfo,
    entry: &str,
    template: &dra::ResourceClaimTemplate,
    suffix: &str,
) -> dra::ResourceClaim {
    let name = &group.key.name;
    let spec = template.spec.as_ref();
    let meta = spec.and_then(|s| s.metadata.as_ref());
    let mut annotations = meta.and_then(|m| m.annotations.clone());
    annotations
        .get_or_insert_default()
        .insert(POD_CLAIM_NAME_ANNOTATION.into(), entry.into());
    let api_version = match group.api_version.as_str() {
        "" => format!("{}/v1beta1", super::POD_GROUP_API_GROUP),
        v => v.to_string(),
    };
    dra::ResourceClaim {
        metadata: meta::ObjectMeta {
            name: Some(format!("{name}-{entry}-{suffix}")),
            namespace: Some(group.key.namespace.clone()),
            uid: Some(format!("uid-claim-{name}-{entry}-{suffix}")),
            resource_version: Some("1".into()),
            labels: meta.and_then(|m| m.labels.clone()),
            annotations,
            owner_references: Some(vec![meta::OwnerReference {
                api_version,
                kind: "PodGroup".into(),
                name: name.clone(),
                uid: group.uid.clone(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..Default::default()
        },
        spec: spec.and_then(|s| s.spec.clone()),
        status: None,
    }
}

/// Records in the pod's status which claim was made for its `entry`.
pub fn name_generated_claim(pod: &mut k8s::Pod, entry: &str, claim: &str) {
    let statuses = pod
        .status
        .get_or_insert_default()
        .resource_claim_statuses
        .get_or_insert_default();
    statuses.retain(|s| s.name != entry);
    statuses.push(k8s::PodResourceClaimStatus {
        name: entry.into(),
        resource_claim_name: Some(claim.into()),
    });
}

/// The `spec.resourceClaims` entries of a pod that come from a template but that its status
/// does not name a claim for yet: (entry, template).
pub fn ungenerated_claims(pod: &k8s::Pod) -> Vec<(String, String)> {
    let named = |entry: &str| {
        pod.status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.as_ref())
            .is_some_and(|st| st.iter().any(|s| s.name == entry))
    };
    pod.spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| c.resource_claim_name.as_ref().is_none_or(|n| n.is_empty()))
        .filter_map(|c| {
            let t = c.resource_claim_template_name.as_ref()?;
            (!t.is_empty() && !named(&c.name)).then(|| (c.name.clone(), t.clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::dra::{PodClaimSource, ResourceClaimInfo, pod_claims};

    fn template() -> dra::ResourceClaimTemplate {
        let mut t = dra::ResourceClaimTemplate::default();
        t.metadata.name = Some("gpu".into());
        t.metadata.namespace = Some("ns".into());
        let spec = t.spec.get_or_insert_default();
        spec.metadata = Some(meta::ObjectMeta {
            labels: Some([("team".to_string(), "ml".to_string())].into()),
            ..Default::default()
        });
        spec.spec.get_or_insert_default().devices = Some(dra::DeviceClaim {
            requests: Some(vec![dra::DeviceRequest {
                name: "req-0".into(),
                exactly: Some(dra::ExactDeviceRequest {
                    device_class_name: "gpu.example.com".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        });
        t
    }

    fn pod_with_template() -> k8s::Pod {
        let mut p = k8s::Pod::default();
        p.metadata.name = Some("train".into());
        p.metadata.namespace = Some("ns".into());
        p.metadata.uid = Some("uid-train".into());
        p.spec.get_or_insert_default().resource_claims = Some(vec![
            k8s::PodResourceClaim {
                name: "gpu".into(),
                resource_claim_template_name: Some("gpu".into()),
                ..Default::default()
            },
            k8s::PodResourceClaim {
                name: "shared".into(),
                resource_claim_name: Some("shared-claim".into()),
                ..Default::default()
            },
        ]);
        p
    }

    #[test]
    fn generated_claim_is_owned_by_the_pod_and_named_in_its_status() {
        let mut pod = pod_with_template();
        assert_eq!(
            ungenerated_claims(&pod),
            vec![("gpu".to_string(), "gpu".to_string())]
        );
        assert_eq!(pod_claims(&pod)[0].source, PodClaimSource::NotCreatedYet);

        let claim = claim_from_template(&pod, "gpu", &template(), "x1");
        assert_eq!(claim.metadata.name.as_deref(), Some("train-gpu-x1"));
        assert_eq!(claim.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(
            claim.metadata.annotations.as_ref().unwrap()[POD_CLAIM_NAME_ANNOTATION],
            "gpu"
        );
        assert_eq!(claim.metadata.labels.as_ref().unwrap()["team"], "ml");
        let view = ResourceClaimInfo::from_claim(&claim);
        assert_eq!(view.owner_pod_uid.as_deref(), Some("uid-train"));
        assert_eq!(view.requests.len(), 1);

        name_generated_claim(&mut pod, "gpu", "train-gpu-x1");
        assert!(ungenerated_claims(&pod).is_empty());
        assert_eq!(
            pod_claims(&pod)[0].source,
            PodClaimSource::Generated(Some("train-gpu-x1".into()))
        );
        // Naming again replaces the entry rather than adding a second.
        name_generated_claim(&mut pod, "gpu", "train-gpu-x2");
        let st = pod
            .status
            .as_ref()
            .unwrap()
            .resource_claim_statuses
            .as_ref();
        assert_eq!(st.unwrap().len(), 1);
    }

    #[test]
    fn missing_template_message_names_namespace_and_template() {
        assert_eq!(
            template_not_found("ns", "gpu"),
            "resourceclaimtemplate.resource.k8s.io \"ns/gpu\" not found"
        );
    }
}
