//! `simulate`'s DRA part: claims made from templates as the resourceclaim controller makes
//! them, the devices a placed pod gets, and the DRA objects a pod needs that the dump lacks.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1 as dra;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;

use super::ClusterObjects;
use crate::cache::Cache;
use crate::framework::CycleState;
use crate::plugins::dynamic_resources::{decided_claim_writes, resolved_claims};
use crate::types::PodInfo;
use crate::types::dra::ClaimAllocation;
use crate::types::dra::extended::SPECIAL_CLAIM_NAME;
use crate::types::dra::template as dra_template;
use crate::types::dra::{DraObjects, PodClaimSource};
use crate::types::pod_group::GroupClaimSource;

/// One device a scheduled pod gets through a ResourceClaim.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodDevice {
    /// `namespace/name` of the claim.
    pub claim: String,
    /// The claim's request (`request/subrequest` for `firstAvailable`).
    pub request: String,
    pub driver: String,
    pub pool: String,
    pub device: String,
    /// The claim was allocated before (a shared claim): the pod joins its devices.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub shared: bool,
    /// A share of a device allowing multiple allocations (consumable capacity): its id
    /// and what it consumes per capacity.
    #[serde(rename = "shareID", skip_serializing_if = "Option::is_none")]
    pub share_id: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub consumed_capacity: BTreeMap<String, String>,
}

/// The `shareID` and `consumedCapacity` of the allocation's `i`th result.
fn share(a: &dra::AllocationResult, i: usize) -> (Option<String>, BTreeMap<String, String>) {
    let r = a
        .devices
        .as_ref()
        .and_then(|d| d.results.as_ref())
        .and_then(|r| r.get(i));
    (
        r.and_then(|r| r.share_id.clone()),
        r.and_then(|r| r.consumed_capacity.as_ref())
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.0.clone()))
            .collect(),
    )
}

impl std::fmt::Display for PodDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}/{}/{}",
            self.claim, self.request, self.driver, self.pool, self.device
        )?;
        if self.shared {
            write!(f, " (shared)")?;
        }
        if !self.consumed_capacity.is_empty() {
            let c: Vec<String> = self
                .consumed_capacity
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            write!(f, " (share: {})", c.join(", "))?;
        }
        Ok(())
    }
}

/// What kube-controller-manager's resourceclaim controller would have done for a pending
/// pod: a claim for each template entry its status does not name yet, when the dump holds
/// the template (otherwise the pod stays waiting, and the template is reported missing).
pub(super) fn generate_claims(pod: &mut Pod, objects: &ClusterObjects, cache: &mut Cache) {
    if pod.spec.as_ref().is_some_and(|s| s.node_name.is_some()) {
        return;
    }
    let ns = pod
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    // An entry matching the pod's PodGroup's is the group's claim, made for the group
    // ([`generate_group_claims`]), not for the pod.
    let group = pod
        .spec
        .as_ref()
        .and_then(|s| s.scheduling_group.as_ref())
        .and_then(|g| g.pod_group_name.clone())
        .and_then(|g| cache.dra().pod_group(&ns, &g).cloned())
        .filter(|_| cache.dra().workload_claims());
    for (entry, template) in dra_template::ungenerated_claims(pod) {
        if group
            .as_ref()
            .is_some_and(|g| g.matching_claim(&entry, None, Some(&template)).is_some())
        {
            continue;
        }
        let Some(t) = find(&objects.resource_claim_templates, &ns, &template, |t| {
            &t.metadata
        }) else {
            continue;
        };
        let mut claim = dra_template::claim_from_template(pod, &entry, t, "sim");
        claim.metadata.namespace = Some(ns.clone());
        let name = claim.metadata.name.clone().unwrap_or_default();
        cache.dra_mut().update_claim(&claim);
        dra_template::name_generated_claim(pod, &entry, &name);
    }
}

/// What kube-controller-manager's resourceclaim controller would have done for the dump's
/// PodGroups (DRAWorkloadResourceClaims): a claim, owned by the group, for each template entry
/// its status does not name yet, when the dump holds the template; the group's status (as the
/// cache holds it) then names it.
pub(super) fn generate_group_claims(objects: &ClusterObjects, cache: &mut Cache) {
    for g in &objects.pod_groups {
        let Some(mut view) = cache
            .dra()
            .pod_group(&g.key.namespace, &g.key.name)
            .map(|v| (**v).clone())
        else {
            continue;
        };
        let mut changed = false;
        for c in &g.resource_claims {
            let GroupClaimSource::Template(template) = &c.source else {
                continue;
            };
            if view.claim_statuses.contains_key(&c.name) {
                continue;
            }
            let Some(t) = find(
                &objects.resource_claim_templates,
                &g.key.namespace,
                template,
                |t| &t.metadata,
            ) else {
                continue;
            };
            let claim = dra_template::claim_for_pod_group(g, &c.name, t, "sim");
            let name = claim.metadata.name.clone().unwrap_or_default();
            cache.dra_mut().update_claim(&claim);
            view.claim_statuses.insert(c.name.clone(), Some(name));
            changed = true;
        }
        if changed {
            cache.dra_mut().update_pod_group(&view);
        }
    }
}

/// The devices the pod's claims hold now that it is placed: those the scheduler just
/// allocated, and those of shared claims allocated before.
pub(super) fn pod_devices(pod: &PodInfo, state: &CycleState, dra: &DraObjects) -> Vec<PodDevice> {
    let allocated_now: Vec<String> = decided_claim_writes(state)
        .into_iter()
        .flatten()
        .filter(|w| w.allocation.is_some() && !w.group.as_ref().is_some_and(|g| g.shared))
        .map(|w| w.key())
        .collect();
    let mut out = Vec::new();
    for claim in resolved_claims(pod, dra) {
        let key = claim.key();
        let shared = !allocated_now.contains(&key);
        for a in claim.allocation.iter() {
            for (i, d) in a.devices.iter().enumerate() {
                let (share_id, consumed_capacity) = share(&a.raw, i);
                out.push(PodDevice {
                    claim: key.clone(),
                    request: d.request.clone(),
                    driver: d.id.driver.clone(),
                    pool: d.id.pool.clone(),
                    device: d.id.device.clone(),
                    shared,
                    share_id,
                    consumed_capacity,
                });
            }
        }
    }
    // The claim the scheduler would create for DRA-backed extended resources.
    for w in decided_claim_writes(state).into_iter().flatten() {
        let (Some(_), Some(a)) = (&w.create, &w.allocation) else {
            continue;
        };
        for (i, d) in ClaimAllocation::from_result(a)
            .devices
            .into_iter()
            .enumerate()
        {
            let (share_id, consumed_capacity) = share(a, i);
            out.push(PodDevice {
                claim: format!("{}/{SPECIAL_CLAIM_NAME}", w.namespace),
                request: d.request,
                driver: d.id.driver,
                pool: d.id.pool,
                device: d.id.device,
                shared: false,
                share_id,
                consumed_capacity,
            });
        }
    }
    out
}

/// The claims, templates and classes the pod needs that the dump lacks.
pub(super) fn missing_from_dump(pod: &PodInfo, objects: &ClusterObjects, out: &mut Vec<String>) {
    let ns = pod.namespace();
    let mut specs = Vec::new();
    for c in &pod.resource_claims {
        match &c.source {
            PodClaimSource::Claim(n) | PodClaimSource::Generated(Some(n)) => {
                match find(&objects.resource_claims, ns, n, |o| &o.metadata) {
                    Some(claim) => specs.extend(claim.spec.clone()),
                    None => out.push(format!("ResourceClaim {ns}/{n} (dump resourceclaims)")),
                }
            }
            // simulate makes the claim when the dump holds the template.
            PodClaimSource::NotCreatedYet => {
                let Some(t) = pod_claim_template(objects, pod, &c.name) else {
                    continue;
                };
                match find(&objects.resource_claim_templates, ns, &t, |o| &o.metadata) {
                    Some(template) => {
                        specs.extend(template.spec.as_ref().and_then(|s| s.spec.clone()))
                    }
                    None => out.push(format!(
                        "ResourceClaimTemplate {ns}/{t} (dump resourceclaimtemplates)"
                    )),
                }
            }
            _ => {}
        }
    }
    let mut classes: Vec<&str> = specs
        .iter()
        .filter_map(|s| s.devices.as_ref()?.requests.as_ref())
        .flatten()
        .flat_map(|r| {
            let exact = r.exactly.iter().map(|e| e.device_class_name.as_str());
            let subs = r.first_available.iter().flatten();
            exact.chain(subs.map(|s| s.device_class_name.as_str()))
        })
        .collect();
    classes.sort();
    classes.dedup();
    for class in classes {
        if !objects
            .device_classes
            .iter()
            .any(|c| c.metadata.name.as_deref() == Some(class))
        {
            out.push(format!("DeviceClass {class} (dump deviceclasses)"));
        }
    }
}

/// The namespaced object `namespace/name` of a list.
fn find<'a, T>(
    list: &'a [T],
    namespace: &str,
    name: &str,
    meta: impl Fn(&T) -> &ObjectMeta,
) -> Option<&'a T> {
    list.iter().find(|o| {
        let m = meta(o);
        m.name.as_deref() == Some(name) && m.namespace.as_deref().unwrap_or("default") == namespace
    })
}

/// The template a pod's claim entry names, from the raw pod in the dump.
fn pod_claim_template(objects: &ClusterObjects, pod: &PodInfo, entry: &str) -> Option<String> {
    let raw = find(&objects.pods, pod.namespace(), pod.name(), |p| &p.metadata)?;
    raw.spec
        .as_ref()?
        .resource_claims
        .as_ref()?
        .iter()
        .find(|c| c.name == entry)?
        .resource_claim_template_name
        .clone()
}

#[cfg(test)]
mod tests {
    use super::super::{PodResult, Report, load_str, run};

    const NODES: &str = r#"
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}
status: {allocatable: {cpu: "8", memory: 16Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {kubernetes.io/hostname: n2}}
status: {allocatable: {cpu: "8", memory: 16Gi, pods: "110"}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n2-gpus}
spec:
  driver: gpu.example.com
  nodeName: n2
  pool: {name: n2, generation: 1, resourceSliceCount: 1}
  devices: [{name: gpu-0}, {name: gpu-1}]
"#;

    const CLASS: &str = r#"
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]
"#;

    const TEMPLATE: &str = r#"
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: ml}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: gpu}}]
"#;

    fn template_pod(name: &str) -> String {
        format!(
            "\n---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: ml}}\nspec:\n  resourceClaims: [{{name: gpu, resourceClaimTemplateName: one-gpu}}]\n  containers: [{{name: c, image: i}}]\n"
        )
    }

    fn simulate(yaml: &str) -> Report {
        let objects = load_str(yaml, "t.yaml").unwrap_or_else(|e| panic!("{e:?}"));
        let loaded = crate::config::from_flags(None, None).unwrap();
        run(&objects, &loaded, 1).unwrap()
    }

    fn outcome<'a>(r: &'a Report, pod: &str) -> &'a super::super::PodOutcome {
        r.outcomes.iter().find(|o| o.pod == pod).unwrap()
    }

    /// Two GPUs on n2: the first two template pods get one each, the third none.
    #[test]
    fn template_pods_get_distinct_devices_until_none_is_left() {
        let yaml = format!(
            "{NODES}{CLASS}{TEMPLATE}{}{}{}",
            template_pod("a"),
            template_pod("b"),
            template_pod("c")
        );
        let r = simulate(&yaml);
        let mut got = Vec::new();
        for p in ["ml/a", "ml/b"] {
            assert_eq!(r.node_of(p), Some("n2"), "{:?}", outcome(&r, p));
            let o = outcome(&r, p);
            assert_eq!(o.devices.len(), 1);
            got.push(o.devices[0].device.clone());
        }
        got.sort();
        assert_eq!(got, ["gpu-0", "gpu-1"]);
        match &outcome(&r, "ml/c").result {
            PodResult::Unschedulable { message } => assert!(
                message.starts_with("0/2 nodes are available: 2 cannot allocate all claims."),
                "{message}"
            ),
            other => panic!("{other:?}"),
        }
    }

    /// A DeviceTaintRule in the dump taints gpu-0 as `run` would: the first pod gets gpu-1,
    /// the second none.
    #[test]
    fn device_taint_rules_in_the_dump_keep_pods_off_tainted_devices() {
        let rule = "\n---\napiVersion: resource.k8s.io/v1\nkind: DeviceTaintRule\nmetadata: {name: maintenance}\nspec:\n  deviceSelector: {driver: gpu.example.com, device: gpu-0}\n  taint: {key: example.com/maintenance, effect: NoExecute}\n";
        let yaml = format!(
            "{NODES}{CLASS}{TEMPLATE}{rule}{}{}",
            template_pod("a"),
            template_pod("b")
        );
        let r = simulate(&yaml);
        assert_eq!(outcome(&r, "ml/a").devices[0].device, "gpu-1");
        match &outcome(&r, "ml/b").result {
            PodResult::Unschedulable { message } => assert!(
                message.starts_with("0/2 nodes are available: 2 cannot allocate all claims."),
                "{message}"
            ),
            other => panic!("{other:?}"),
        }
    }

    /// A pod asking for `example.com/gpu`, which a class names: the devices of the claim the
    /// scheduler would create are shown.
    #[test]
    fn dra_backed_extended_resources_show_their_devices() {
        let class = CLASS.replace(
            "spec:\n",
            "spec:\n  extendedResourceName: example.com/gpu\n",
        );
        let pod = "\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: x, namespace: ml}\nspec:\n  containers: [{name: c, image: i, resources: {requests: {example.com/gpu: \"2\"}}}]\n";
        let r = simulate(&format!("{NODES}{class}{pod}"));
        assert_eq!(r.node_of("ml/x"), Some("n2"), "{:?}", outcome(&r, "ml/x"));
        let got: Vec<(&str, &str, &str)> = outcome(&r, "ml/x")
            .devices
            .iter()
            .map(|d| (d.claim.as_str(), d.request.as_str(), d.device.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("ml/<extended-resources>", "container-0-request-0", "gpu-0"),
                ("ml/<extended-resources>", "container-0-request-0", "gpu-1"),
            ]
        );
    }

    /// Without the template the pod waits as upstream's (no claim is made) and the template
    /// is named as missing; without the class, the class is.
    #[test]
    fn missing_template_and_class_are_named() {
        let r = simulate(&format!("{NODES}{CLASS}{}", template_pod("a")));
        let o = outcome(&r, "ml/a");
        assert_eq!(
            o.result,
            PodResult::Gated {
                message: "pod \"ml/a\": ResourceClaim not created yet".into()
            }
        );
        assert_eq!(
            o.missing_from_dump,
            ["ResourceClaimTemplate ml/one-gpu (dump resourceclaimtemplates)"]
        );

        let r = simulate(&format!("{NODES}{TEMPLATE}{}", template_pod("a")));
        let o = outcome(&r, "ml/a");
        match &o.result {
            PodResult::Unschedulable { message } => assert!(
                message.contains("request gpu: device class gpu does not exist"),
                "{message}"
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            o.missing_from_dump,
            ["DeviceClass gpu (dump deviceclasses)"]
        );
    }

    /// A claim named by the pod but absent from the dump.
    #[test]
    fn missing_claim_is_named() {
        let pod = "\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: ml}\nspec:\n  resourceClaims: [{name: gpu, resourceClaimName: shared-gpu}]\n  containers: [{name: c, image: i}]\n";
        let r = simulate(&format!("{NODES}{CLASS}{pod}"));
        let o = outcome(&r, "ml/a");
        match &o.result {
            PodResult::Unschedulable { message } => assert!(
                message.contains("resourceclaim.resource.k8s.io \"shared-gpu\" not found"),
                "{message}"
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            o.missing_from_dump,
            ["ResourceClaim ml/shared-gpu (dump resourceclaims)"]
        );
    }

    /// A claim in the dump already allocated (gpu-0 on n2) and reserved for a bound pod: a
    /// second pod sharing it joins its device on n2; a template pod gets the other GPU.
    #[test]
    fn shared_allocated_claim_is_joined_and_its_device_not_reused() {
        let shared = r#"
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared-gpu, namespace: ml, uid: uid-shared, resourceVersion: "5"}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: gpu}}]
status:
  allocation:
    devices:
      results: [{request: gpu, driver: gpu.example.com, pool: n2, device: gpu-0}]
    nodeSelector:
      nodeSelectorTerms:
      - matchFields: [{key: metadata.name, operator: In, values: [n2]}]
  reservedFor: [{resource: pods, name: first, uid: uid-first}]
---
apiVersion: v1
kind: Pod
metadata: {name: first, namespace: ml, uid: uid-first}
spec:
  nodeName: n2
  resourceClaims: [{name: gpu, resourceClaimName: shared-gpu}]
  containers: [{name: c, image: i}]
---
apiVersion: v1
kind: Pod
metadata: {name: second, namespace: ml, uid: uid-second}
spec:
  resourceClaims: [{name: gpu, resourceClaimName: shared-gpu}]
  containers: [{name: c, image: i}]
"#;
        let r = simulate(&format!(
            "{NODES}{CLASS}{TEMPLATE}{shared}{}",
            template_pod("t")
        ));
        assert_eq!(r.node_of("ml/second"), Some("n2"));
        let second = &outcome(&r, "ml/second").devices;
        assert_eq!(second.len(), 1);
        assert!(second[0].shared);
        assert_eq!(second[0].device, "gpu-0");
        assert_eq!(
            second[0].to_string(),
            "ml/shared-gpu gpu: gpu.example.com/n2/gpu-0 (shared)"
        );
        let t = &outcome(&r, "ml/t").devices;
        assert_eq!(t.len(), 1, "{:?}", outcome(&r, "ml/t"));
        assert_eq!(t[0].device, "gpu-1");
        assert!(!t[0].shared);
    }

    #[test]
    fn beta_dra_versions_are_refused_with_the_version_to_use() {
        let yaml =
            "apiVersion: resource.k8s.io/v1beta1\nkind: DeviceClass\nmetadata: {name: gpu}\n";
        let e = load_str(yaml, "t.yaml").unwrap_err();
        assert_eq!(
            e[0].message,
            "DeviceClass gpu: apiVersion \"resource.k8s.io/v1beta1\" is not supported; use resource.k8s.io/v1"
        );
    }
}
