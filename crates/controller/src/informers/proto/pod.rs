//! A Pod from protobuf, as [`super::super::lean`] decodes one from JSON: exactly the fields
//! `lean/pod.rs` keeps (the same volume mount and volume filtering, the same defaults), with
//! every other field (env, probes, security contexts, container states...) skipped unread.
//!
//! Field numbers: k8s.io/api core/v1 `generated.proto`, checked against kubernetes/api at
//! commit 10b39a39 (July 2026, after v1.37's fields: schedulingGroup 43, restartPolicyRules,
//! pod-level resources 40, status allocatedResources 19 and resources 20); LabelSelector from
//! apimachinery meta/v1 `generated.proto` (v1.28, unchanged since).
//!
//! Empty values: Go writes every non-pointer field, zero or not, where JSON omits the
//! `omitempty` ones; those become `None` here. Pointer fields (`priority`, `hostUsers`,
//! `preemptionPolicy`, `tolerationSeconds`, `minDomains`, ...) are written only when set and
//! are kept as they come, zero included, as JSON does.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use super::meta::{non_empty, object_meta, quantity_entry, time};
use super::wire::{Fields, Result, Value, string_pair};
use crate::informers::lean::Lean;

/// Decodes a `v1.Pod` message.
pub(crate) fn pod(b: &[u8]) -> Result<Lean<k8s::Pod>> {
    let mut p = k8s::Pod::default();
    for f in Fields::new(b) {
        match f? {
            (1, v) => p.metadata = object_meta(v.bytes("metadata")?)?,
            (2, v) => p.spec = Some(spec(v.bytes("spec")?)?),
            (3, v) => p.status = Some(status(v.bytes("status")?)?),
            _ => {}
        }
    }
    Ok(Lean(p))
}

/// `Some(list)` unless empty (JSON omits empty lists).
fn some<T>(v: Vec<T>) -> Option<Vec<T>> {
    (!v.is_empty()).then_some(v)
}

fn some_map<V>(m: BTreeMap<String, V>) -> Option<BTreeMap<String, V>> {
    (!m.is_empty()).then_some(m)
}

/// An item of a filtered list (volumes, volume mounts): the JSON decode keeps the list,
/// possibly empty, once the pod has one, and only the items something reads.
fn keep<T>(list: &mut Option<Vec<T>>, item: Option<T>) {
    let list = list.get_or_insert_with(Vec::new);
    list.extend(item);
}

/// A non-pointer bool: JSON omits false.
fn flag(v: Value<'_>, field: &str) -> Result<Option<bool>> {
    Ok(Some(v.bool(field)?).filter(|&b| b))
}

/// A non-pointer int32: JSON omits zero.
fn nonzero(v: Value<'_>, field: &str) -> Result<Option<i32>> {
    Ok(Some(v.int32(field)?).filter(|&n| n != 0))
}

fn quantities(into: &mut BTreeMap<String, Quantity>, v: Value<'_>, field: &str) -> Result<()> {
    let (k, q) = quantity_entry(v.bytes(field)?, field)?;
    into.insert(k, q);
    Ok(())
}

fn spec(b: &[u8]) -> Result<k8s::PodSpec> {
    let mut s = k8s::PodSpec::default();
    let mut volumes = None;
    let (mut init, mut containers, mut ephemeral) = (vec![], vec![], vec![]);
    let (mut tolerations, mut spread, mut gates, mut claims) = (vec![], vec![], vec![], vec![]);
    let (mut node_selector, mut overhead) = (BTreeMap::new(), BTreeMap::new());
    for f in Fields::new(b) {
        match f? {
            (1, v) => keep(&mut volumes, volume(v.bytes("spec.volumes")?)?),
            (2, v) => containers.push(container(v.bytes("spec.containers")?)?),
            (7, v) => {
                let (k, x) = string_pair(v.bytes("spec.nodeSelector")?, "spec.nodeSelector")?;
                node_selector.insert(k, x);
            }
            (8, v) => s.service_account_name = non_empty(v, "spec.serviceAccountName")?,
            (10, v) => s.node_name = non_empty(v, "spec.nodeName")?,
            (11, v) => s.host_network = flag(v, "spec.hostNetwork")?,
            (18, v) => s.affinity = Some(affinity(v.bytes("spec.affinity")?)?),
            (19, v) => s.scheduler_name = non_empty(v, "spec.schedulerName")?,
            (20, v) => init.push(container(v.bytes("spec.initContainers")?)?),
            (22, v) => tolerations.push(toleration(v.bytes("spec.tolerations")?)?),
            (24, v) => s.priority_class_name = non_empty(v, "spec.priorityClassName")?,
            (25, v) => s.priority = Some(v.int32("spec.priority")?),
            (29, v) => s.runtime_class_name = Some(v.string("spec.runtimeClassName")?),
            (31, v) => s.preemption_policy = Some(v.string("spec.preemptionPolicy")?),
            (32, v) => quantities(&mut overhead, v, "spec.overhead")?,
            (33, v) => spread.push(spread_constraint(
                v.bytes("spec.topologySpreadConstraints")?,
            )?),
            (34, v) => ephemeral.push(ephemeral_container(v.bytes("spec.ephemeralContainers")?)?),
            (37, v) => s.host_users = Some(v.bool("spec.hostUsers")?),
            (38, v) => gates.push(k8s::PodSchedulingGate {
                name: name_of(
                    v.bytes("spec.schedulingGates")?,
                    "spec.schedulingGates.name",
                )?,
            }),
            (39, v) => claims.push(pod_resource_claim(v.bytes("spec.resourceClaims")?)?),
            (40, v) => s.resources = Some(resources(v.bytes("spec.resources")?, "spec.resources")?),
            (43, v) => {
                let mut g = k8s::PodSchedulingGroup::default();
                for f in Fields::new(v.bytes("spec.schedulingGroup")?) {
                    if let (1, x) = f? {
                        g.pod_group_name = non_empty(x, "spec.schedulingGroup.podGroupName")?;
                    }
                }
                s.scheduling_group = Some(g);
            }
            _ => {}
        }
    }
    s.volumes = volumes;
    s.init_containers = some(init);
    s.containers = containers;
    s.ephemeral_containers = some(ephemeral);
    s.tolerations = some(tolerations);
    s.topology_spread_constraints = some(spread);
    s.scheduling_gates = some(gates);
    s.resource_claims = some(claims);
    s.node_selector = some_map(node_selector);
    s.overhead = some_map(overhead);
    Ok(s)
}

/// Field 1 of a message as a string (a name).
fn name_of(b: &[u8], field: &str) -> Result<String> {
    let mut name = String::new();
    for f in Fields::new(b) {
        if let (1, v) = f? {
            name = v.string(field)?;
        }
    }
    Ok(name)
}

fn container(b: &[u8]) -> Result<k8s::Container> {
    let mut c = k8s::Container::default();
    let (mut ports, mut rules, mut mounts) = (vec![], vec![], None);
    for f in Fields::new(b) {
        match f? {
            (1, v) => c.name = v.string("container.name")?,
            (2, v) => c.image = non_empty(v, "container.image")?,
            (6, v) => ports.push(container_port(v.bytes("container.ports")?)?),
            (8, v) => {
                c.resources = Some(resources(
                    v.bytes("container.resources")?,
                    "container.resources",
                )?)
            }
            (9, v) => keep(&mut mounts, mount(v.bytes("container.volumeMounts")?)?),
            (24, v) => c.restart_policy = Some(v.string("container.restartPolicy")?),
            (25, v) => rules.push(restart_rule(v.bytes("container.restartPolicyRules")?)?),
            _ => {}
        }
    }
    c.ports = some(ports);
    c.restart_policy_rules = some(rules);
    c.volume_mounts = mounts;
    Ok(c)
}

/// Of an ephemeral container, its name and bind mounts (in EphemeralContainerCommon, field 1).
fn ephemeral_container(b: &[u8]) -> Result<k8s::EphemeralContainer> {
    let mut c = k8s::EphemeralContainer::default();
    let mut mounts = None;
    for f in Fields::new(b) {
        if let (1, v) = f? {
            for g in Fields::new(v.bytes("ephemeralContainers.common")?) {
                match g? {
                    (1, x) => c.name = x.string("ephemeralContainers.name")?,
                    (9, x) => keep(
                        &mut mounts,
                        mount(x.bytes("ephemeralContainers.volumeMounts")?)?,
                    ),
                    _ => {}
                }
            }
        }
    }
    c.volume_mounts = mounts;
    Ok(c)
}

/// A volume mount with bind mount options (only they are read); None for any other.
fn mount(b: &[u8]) -> Result<Option<k8s::VolumeMount>> {
    let mut options = vec![];
    for f in Fields::new(b) {
        if let (8, v) = f? {
            options.push(v.string("volumeMounts.bindMountOptions")?);
        }
    }
    Ok((!options.is_empty()).then(|| k8s::VolumeMount {
        bind_mount_options: Some(options),
        ..Default::default()
    }))
}

fn container_port(b: &[u8]) -> Result<k8s::ContainerPort> {
    let mut p = k8s::ContainerPort::default();
    for f in Fields::new(b) {
        match f? {
            (1, v) => p.name = non_empty(v, "ports.name")?,
            (2, v) => p.host_port = nonzero(v, "ports.hostPort")?,
            (3, v) => p.container_port = v.int32("ports.containerPort")?,
            (4, v) => p.protocol = non_empty(v, "ports.protocol")?,
            (5, v) => p.host_ip = non_empty(v, "ports.hostIP")?,
            _ => {}
        }
    }
    Ok(p)
}

fn restart_rule(b: &[u8]) -> Result<k8s::ContainerRestartRule> {
    let mut r = k8s::ContainerRestartRule::default();
    for f in Fields::new(b) {
        match f? {
            (1, v) => r.action = v.string("restartPolicyRules.action")?,
            (2, v) => {
                let mut e = k8s::ContainerRestartRuleOnExitCodes::default();
                let mut values = vec![];
                for g in Fields::new(v.bytes("restartPolicyRules.exitCodes")?) {
                    match g? {
                        (1, x) => e.operator = x.string("exitCodes.operator")?,
                        // Packed (one length-delimited run of varints) or one per field.
                        (2, Value::Bytes(packed)) => {
                            for n in Fields::packed_varints(packed) {
                                values.push(n? as i64 as i32);
                            }
                        }
                        (2, x) => values.push(x.int32("exitCodes.values")?),
                        _ => {}
                    }
                }
                e.values = some(values);
                r.exit_codes = Some(e);
            }
            _ => {}
        }
    }
    Ok(r)
}

fn resources(b: &[u8], field: &str) -> Result<k8s::ResourceRequirements> {
    let (mut limits, mut requests, mut claims) = (BTreeMap::new(), BTreeMap::new(), vec![]);
    for f in Fields::new(b) {
        match f? {
            (1, v) => quantities(&mut limits, v, field)?,
            (2, v) => quantities(&mut requests, v, field)?,
            (3, v) => {
                let mut c = k8s::ResourceClaim::default();
                for g in Fields::new(v.bytes(field)?) {
                    match g? {
                        (1, x) => c.name = x.string(field)?,
                        (2, x) => c.request = non_empty(x, field)?,
                        _ => {}
                    }
                }
                claims.push(c);
            }
            _ => {}
        }
    }
    Ok(k8s::ResourceRequirements {
        limits: some_map(limits),
        requests: some_map(requests),
        claims: some(claims),
    })
}

fn pod_resource_claim(b: &[u8]) -> Result<k8s::PodResourceClaim> {
    let mut c = k8s::PodResourceClaim::default();
    for f in Fields::new(b) {
        match f? {
            (1, v) => c.name = v.string("resourceClaims.name")?,
            (3, v) => c.resource_claim_name = Some(v.string("resourceClaims.resourceClaimName")?),
            (4, v) => {
                c.resource_claim_template_name =
                    Some(v.string("resourceClaims.resourceClaimTemplateName")?)
            }
            _ => {}
        }
    }
    Ok(c)
}

fn toleration(b: &[u8]) -> Result<k8s::Toleration> {
    let mut t = k8s::Toleration::default();
    for f in Fields::new(b) {
        match f? {
            (1, v) => t.key = non_empty(v, "tolerations.key")?,
            (2, v) => t.operator = non_empty(v, "tolerations.operator")?,
            (3, v) => t.value = non_empty(v, "tolerations.value")?,
            (4, v) => t.effect = non_empty(v, "tolerations.effect")?,
            (5, v) => t.toleration_seconds = Some(v.int64("tolerations.tolerationSeconds")?),
            _ => {}
        }
    }
    Ok(t)
}

fn spread_constraint(b: &[u8]) -> Result<k8s::TopologySpreadConstraint> {
    let mut c = k8s::TopologySpreadConstraint::default();
    let mut keys = vec![];
    for f in Fields::new(b) {
        match f? {
            (1, v) => c.max_skew = v.int32("topologySpreadConstraints.maxSkew")?,
            (2, v) => c.topology_key = v.string("topologySpreadConstraints.topologyKey")?,
            (3, v) => {
                c.when_unsatisfiable = v.string("topologySpreadConstraints.whenUnsatisfiable")?
            }
            (4, v) => {
                c.label_selector = Some(label_selector(
                    v.bytes("topologySpreadConstraints.labelSelector")?,
                )?)
            }
            (5, v) => c.min_domains = Some(v.int32("topologySpreadConstraints.minDomains")?),
            (6, v) => {
                c.node_affinity_policy =
                    Some(v.string("topologySpreadConstraints.nodeAffinityPolicy")?)
            }
            (7, v) => {
                c.node_taints_policy = Some(v.string("topologySpreadConstraints.nodeTaintsPolicy")?)
            }
            (8, v) => keys.push(v.string("topologySpreadConstraints.matchLabelKeys")?),
            _ => {}
        }
    }
    c.match_label_keys = some(keys);
    Ok(c)
}

fn label_selector(b: &[u8]) -> Result<LabelSelector> {
    let (mut labels, mut exprs) = (BTreeMap::new(), vec![]);
    for f in Fields::new(b) {
        match f? {
            (1, v) => {
                let (k, x) = string_pair(v.bytes("matchLabels")?, "matchLabels")?;
                labels.insert(k, x);
            }
            (2, v) => {
                let mut r = LabelSelectorRequirement::default();
                let mut values = vec![];
                for g in Fields::new(v.bytes("matchExpressions")?) {
                    match g? {
                        (1, x) => r.key = x.string("matchExpressions.key")?,
                        (2, x) => r.operator = x.string("matchExpressions.operator")?,
                        (3, x) => values.push(x.string("matchExpressions.values")?),
                        _ => {}
                    }
                }
                r.values = some(values);
                exprs.push(r);
            }
            _ => {}
        }
    }
    Ok(LabelSelector {
        match_labels: some_map(labels),
        match_expressions: some(exprs),
    })
}

fn affinity(b: &[u8]) -> Result<k8s::Affinity> {
    let mut a = k8s::Affinity::default();
    for f in Fields::new(b) {
        match f? {
            (1, v) => {
                let mut n = k8s::NodeAffinity::default();
                let mut preferred = vec![];
                for g in Fields::new(v.bytes("nodeAffinity")?) {
                    match g? {
                        (1, x) => {
                            let mut terms = vec![];
                            for h in Fields::new(x.bytes("nodeAffinity.required")?) {
                                if let (1, t) = h? {
                                    terms.push(node_selector_term(t.bytes("nodeSelectorTerms")?)?);
                                }
                            }
                            n.required_during_scheduling_ignored_during_execution =
                                Some(k8s::NodeSelector {
                                    node_selector_terms: terms,
                                });
                        }
                        (2, x) => {
                            let mut p = k8s::PreferredSchedulingTerm::default();
                            for h in Fields::new(x.bytes("nodeAffinity.preferred")?) {
                                match h? {
                                    (1, w) => p.weight = w.int32("preferred.weight")?,
                                    (2, t) => {
                                        p.preference =
                                            node_selector_term(t.bytes("preferred.preference")?)?
                                    }
                                    _ => {}
                                }
                            }
                            preferred.push(p);
                        }
                        _ => {}
                    }
                }
                n.preferred_during_scheduling_ignored_during_execution = some(preferred);
                a.node_affinity = Some(n);
            }
            (2, v) => {
                let (required, preferred) = pod_affinity(v.bytes("podAffinity")?)?;
                a.pod_affinity = Some(k8s::PodAffinity {
                    required_during_scheduling_ignored_during_execution: required,
                    preferred_during_scheduling_ignored_during_execution: preferred,
                });
            }
            (3, v) => {
                let (required, preferred) = pod_affinity(v.bytes("podAntiAffinity")?)?;
                a.pod_anti_affinity = Some(k8s::PodAntiAffinity {
                    required_during_scheduling_ignored_during_execution: required,
                    preferred_during_scheduling_ignored_during_execution: preferred,
                });
            }
            _ => {}
        }
    }
    Ok(a)
}

type PodAffinityTerms = (
    Option<Vec<k8s::PodAffinityTerm>>,
    Option<Vec<k8s::WeightedPodAffinityTerm>>,
);

/// PodAffinity and PodAntiAffinity share their layout: required terms (1), weighted (2).
fn pod_affinity(b: &[u8]) -> Result<PodAffinityTerms> {
    let (mut required, mut preferred) = (vec![], vec![]);
    for f in Fields::new(b) {
        match f? {
            (1, v) => required.push(pod_affinity_term(v.bytes("podAffinity.required")?)?),
            (2, v) => {
                let mut w = k8s::WeightedPodAffinityTerm::default();
                for g in Fields::new(v.bytes("podAffinity.preferred")?) {
                    match g? {
                        (1, x) => w.weight = x.int32("preferred.weight")?,
                        (2, x) => {
                            w.pod_affinity_term =
                                pod_affinity_term(x.bytes("preferred.podAffinityTerm")?)?
                        }
                        _ => {}
                    }
                }
                preferred.push(w);
            }
            _ => {}
        }
    }
    Ok((some(required), some(preferred)))
}

fn pod_affinity_term(b: &[u8]) -> Result<k8s::PodAffinityTerm> {
    let mut t = k8s::PodAffinityTerm::default();
    let (mut namespaces, mut keys, mut mismatch) = (vec![], vec![], vec![]);
    for f in Fields::new(b) {
        match f? {
            (1, v) => t.label_selector = Some(label_selector(v.bytes("labelSelector")?)?),
            (2, v) => namespaces.push(v.string("namespaces")?),
            (3, v) => t.topology_key = v.string("topologyKey")?,
            (4, v) => t.namespace_selector = Some(label_selector(v.bytes("namespaceSelector")?)?),
            (5, v) => keys.push(v.string("matchLabelKeys")?),
            (6, v) => mismatch.push(v.string("mismatchLabelKeys")?),
            _ => {}
        }
    }
    t.namespaces = some(namespaces);
    t.match_label_keys = some(keys);
    t.mismatch_label_keys = some(mismatch);
    Ok(t)
}

fn node_selector_term(b: &[u8]) -> Result<k8s::NodeSelectorTerm> {
    let (mut exprs, mut fields) = (vec![], vec![]);
    for f in Fields::new(b) {
        match f? {
            (1, v) => exprs.push(node_selector_requirement(v.bytes("matchExpressions")?)?),
            (2, v) => fields.push(node_selector_requirement(v.bytes("matchFields")?)?),
            _ => {}
        }
    }
    Ok(k8s::NodeSelectorTerm {
        match_expressions: some(exprs),
        match_fields: some(fields),
    })
}

fn node_selector_requirement(b: &[u8]) -> Result<k8s::NodeSelectorRequirement> {
    let mut r = k8s::NodeSelectorRequirement::default();
    let mut values = vec![];
    for f in Fields::new(b) {
        match f? {
            (1, v) => r.key = v.string("nodeSelectorRequirement.key")?,
            (2, v) => r.operator = v.string("nodeSelectorRequirement.operator")?,
            (3, v) => values.push(v.string("nodeSelectorRequirement.values")?),
            _ => {}
        }
    }
    r.values = some(values);
    Ok(r)
}

/// A volume with a source the volume plugins read; None for any other (as the JSON decode
/// drops them).
fn volume(b: &[u8]) -> Result<Option<k8s::Volume>> {
    let mut vol = k8s::Volume::default();
    let mut kept = false;
    for f in Fields::new(b) {
        match f? {
            (1, v) => vol.name = v.string("volumes.name")?,
            (2, v) => {
                for g in Fields::new(v.bytes("volumes.source")?) {
                    let (n, x) = g?;
                    let src = || x.bytes("volumes.source");
                    match n {
                        3 => vol.gce_persistent_disk = Some(gce(src()?)?),
                        4 => vol.aws_elastic_block_store = Some(aws(src()?)?),
                        8 => vol.iscsi = Some(iscsi(src()?)?),
                        10 => vol.persistent_volume_claim = Some(pvc_source(src()?)?),
                        11 => vol.rbd = Some(rbd(src()?)?),
                        13 => vol.cinder = Some(cinder(src()?)?),
                        22 => vol.azure_disk = Some(azure_disk(src()?)?),
                        24 => vol.portworx_volume = Some(portworx(src()?)?),
                        29 => vol.ephemeral = Some(ephemeral(src()?)?),
                        _ => continue,
                    }
                    kept = true;
                }
            }
            _ => {}
        }
    }
    Ok(kept.then_some(vol))
}

fn gce(b: &[u8]) -> Result<k8s::GCEPersistentDiskVolumeSource> {
    let mut s = k8s::GCEPersistentDiskVolumeSource::default();
    for f in Fields::new(b) {
        match f? {
            (1, v) => s.pd_name = v.string("gcePersistentDisk.pdName")?,
            (2, v) => s.fs_type = non_empty(v, "gcePersistentDisk.fsType")?,
            (3, v) => s.partition = nonzero(v, "gcePersistentDisk.partition")?,
            (4, v) => s.read_only = flag(v, "gcePersistentDisk.readOnly")?,
            _ => {}
        }
    }
    Ok(s)
}

fn aws(b: &[u8]) -> Result<k8s::AWSElasticBlockStoreVolumeSource> {
    let mut s = k8s::AWSElasticBlockStoreVolumeSource::default();
    for f in Fields::new(b) {
        match f? {
            (1, v) => s.volume_id = v.string("awsElasticBlockStore.volumeID")?,
            (2, v) => s.fs_type = non_empty(v, "awsElasticBlockStore.fsType")?,
            (3, v) => s.partition = nonzero(v, "awsElasticBlockStore.partition")?,
            (4, v) => s.read_only = flag(v, "awsElasticBlockStore.readOnly")?,
            _ => {}
        }
    }
    Ok(s)
}

fn secret_ref(v: Value<'_>, field: &str) -> Result<Option<k8s::LocalObjectReference>> {
    Ok(Some(k8s::LocalObjectReference {
        name: name_of(v.bytes(field)?, field)?,
    }))
}

fn iscsi(b: &[u8]) -> Result<k8s::ISCSIVolumeSource> {
    let mut s = k8s::ISCSIVolumeSource::default();
    let mut portals = vec![];
    for f in Fields::new(b) {
        match f? {
            (1, v) => s.target_portal = v.string("iscsi.targetPortal")?,
            (2, v) => s.iqn = v.string("iscsi.iqn")?,
            (3, v) => s.lun = v.int32("iscsi.lun")?,
            (4, v) => s.iscsi_interface = non_empty(v, "iscsi.iscsiInterface")?,
            (5, v) => s.fs_type = non_empty(v, "iscsi.fsType")?,
            (6, v) => s.read_only = flag(v, "iscsi.readOnly")?,
            (7, v) => portals.push(v.string("iscsi.portals")?),
            (8, v) => s.chap_auth_discovery = flag(v, "iscsi.chapAuthDiscovery")?,
            (10, v) => s.secret_ref = secret_ref(v, "iscsi.secretRef")?,
            (11, v) => s.chap_auth_session = flag(v, "iscsi.chapAuthSession")?,
            (12, v) => s.initiator_name = Some(v.string("iscsi.initiatorName")?),
            _ => {}
        }
    }
    s.portals = some(portals);
    Ok(s)
}

fn pvc_source(b: &[u8]) -> Result<k8s::PersistentVolumeClaimVolumeSource> {
    let mut s = k8s::PersistentVolumeClaimVolumeSource::default();
    for f in Fields::new(b) {
        match f? {
            (1, v) => s.claim_name = v.string("persistentVolumeClaim.claimName")?,
            (2, v) => s.read_only = flag(v, "persistentVolumeClaim.readOnly")?,
            _ => {}
        }
    }
    Ok(s)
}

fn rbd(b: &[u8]) -> Result<k8s::RBDVolumeSource> {
    let mut s = k8s::RBDVolumeSource::default();
    for f in Fields::new(b) {
        match f? {
            (1, v) => s.monitors.push(v.string("rbd.monitors")?),
            (2, v) => s.image = v.string("rbd.image")?,
            (3, v) => s.fs_type = non_empty(v, "rbd.fsType")?,
            (4, v) => s.pool = non_empty(v, "rbd.pool")?,
            (5, v) => s.user = non_empty(v, "rbd.user")?,
            (6, v) => s.keyring = non_empty(v, "rbd.keyring")?,
            (7, v) => s.secret_ref = secret_ref(v, "rbd.secretRef")?,
            (8, v) => s.read_only = flag(v, "rbd.readOnly")?,
            _ => {}
        }
    }
    Ok(s)
}

fn cinder(b: &[u8]) -> Result<k8s::CinderVolumeSource> {
    let mut s = k8s::CinderVolumeSource::default();
    for f in Fields::new(b) {
        match f? {
            (1, v) => s.volume_id = v.string("cinder.volumeID")?,
            (2, v) => s.fs_type = non_empty(v, "cinder.fsType")?,
            (3, v) => s.read_only = flag(v, "cinder.readOnly")?,
            (4, v) => s.secret_ref = secret_ref(v, "cinder.secretRef")?,
            _ => {}
        }
    }
    Ok(s)
}

fn azure_disk(b: &[u8]) -> Result<k8s::AzureDiskVolumeSource> {
    let mut s = k8s::AzureDiskVolumeSource::default();
    for f in Fields::new(b) {
        match f? {
            (1, v) => s.disk_name = v.string("azureDisk.diskName")?,
            (2, v) => s.disk_uri = v.string("azureDisk.diskURI")?,
            (3, v) => s.caching_mode = Some(v.string("azureDisk.cachingMode")?),
            (4, v) => s.fs_type = Some(v.string("azureDisk.fsType")?),
            (5, v) => s.read_only = Some(v.bool("azureDisk.readOnly")?),
            (6, v) => s.kind = Some(v.string("azureDisk.kind")?),
            _ => {}
        }
    }
    Ok(s)
}

fn portworx(b: &[u8]) -> Result<k8s::PortworxVolumeSource> {
    let mut s = k8s::PortworxVolumeSource::default();
    for f in Fields::new(b) {
        match f? {
            (1, v) => s.volume_id = v.string("portworxVolume.volumeID")?,
            (2, v) => s.fs_type = non_empty(v, "portworxVolume.fsType")?,
            (3, v) => s.read_only = flag(v, "portworxVolume.readOnly")?,
            _ => {}
        }
    }
    Ok(s)
}

fn ephemeral(b: &[u8]) -> Result<k8s::EphemeralVolumeSource> {
    let mut s = k8s::EphemeralVolumeSource::default();
    for f in Fields::new(b) {
        if let (1, v) = f? {
            let mut t = k8s::PersistentVolumeClaimTemplate::default();
            for g in Fields::new(v.bytes("ephemeral.volumeClaimTemplate")?) {
                match g? {
                    (1, x) => {
                        t.metadata = Some(object_meta(x.bytes("volumeClaimTemplate.metadata")?)?)
                    }
                    (2, x) => t.spec = claim_spec(x.bytes("volumeClaimTemplate.spec")?)?,
                    _ => {}
                }
            }
            s.volume_claim_template = Some(t);
        }
    }
    Ok(s)
}

fn claim_spec(b: &[u8]) -> Result<k8s::PersistentVolumeClaimSpec> {
    let mut s = k8s::PersistentVolumeClaimSpec::default();
    let mut modes = vec![];
    for f in Fields::new(b) {
        match f? {
            (1, v) => modes.push(v.string("claimSpec.accessModes")?),
            (2, v) => {
                let (mut limits, mut requests) = (BTreeMap::new(), BTreeMap::new());
                for g in Fields::new(v.bytes("claimSpec.resources")?) {
                    match g? {
                        (1, x) => quantities(&mut limits, x, "claimSpec.resources.limits")?,
                        (2, x) => quantities(&mut requests, x, "claimSpec.resources.requests")?,
                        _ => {}
                    }
                }
                s.resources = Some(k8s::VolumeResourceRequirements {
                    limits: some_map(limits),
                    requests: some_map(requests),
                });
            }
            (3, v) => s.volume_name = non_empty(v, "claimSpec.volumeName")?,
            (4, v) => s.selector = Some(label_selector(v.bytes("claimSpec.selector")?)?),
            (5, v) => s.storage_class_name = Some(v.string("claimSpec.storageClassName")?),
            (6, v) => s.volume_mode = Some(v.string("claimSpec.volumeMode")?),
            (7, v) => {
                let mut r = k8s::TypedLocalObjectReference::default();
                for g in Fields::new(v.bytes("claimSpec.dataSource")?) {
                    match g? {
                        (1, x) => r.api_group = Some(x.string("dataSource.apiGroup")?),
                        (2, x) => r.kind = x.string("dataSource.kind")?,
                        (3, x) => r.name = x.string("dataSource.name")?,
                        _ => {}
                    }
                }
                s.data_source = Some(r);
            }
            (8, v) => {
                let mut r = k8s::TypedObjectReference::default();
                for g in Fields::new(v.bytes("claimSpec.dataSourceRef")?) {
                    match g? {
                        (1, x) => r.api_group = Some(x.string("dataSourceRef.apiGroup")?),
                        (2, x) => r.kind = x.string("dataSourceRef.kind")?,
                        (3, x) => r.name = x.string("dataSourceRef.name")?,
                        (4, x) => r.namespace = Some(x.string("dataSourceRef.namespace")?),
                        _ => {}
                    }
                }
                s.data_source_ref = Some(r);
            }
            (9, v) => {
                s.volume_attributes_class_name =
                    Some(v.string("claimSpec.volumeAttributesClassName")?)
            }
            _ => {}
        }
    }
    s.access_modes = some(modes);
    Ok(s)
}

fn status(b: &[u8]) -> Result<k8s::PodStatus> {
    let mut s = k8s::PodStatus::default();
    let (mut conditions, mut statuses, mut init_statuses, mut claims) =
        (vec![], vec![], vec![], vec![]);
    let mut allocated = BTreeMap::new();
    for f in Fields::new(b) {
        match f? {
            (1, v) => s.phase = non_empty(v, "status.phase")?,
            (2, v) => conditions.push(condition(v.bytes("status.conditions")?)?),
            (7, v) => s.start_time = time(v, "status.startTime")?,
            (8, v) => statuses.push(container_status(v.bytes("status.containerStatuses")?)?),
            (10, v) => {
                init_statuses.push(container_status(v.bytes("status.initContainerStatuses")?)?)
            }
            (11, v) => s.nominated_node_name = non_empty(v, "status.nominatedNodeName")?,
            (15, v) => {
                let mut c = k8s::PodResourceClaimStatus::default();
                for g in Fields::new(v.bytes("status.resourceClaimStatuses")?) {
                    match g? {
                        (1, x) => c.name = x.string("resourceClaimStatuses.name")?,
                        (2, x) => {
                            c.resource_claim_name =
                                Some(x.string("resourceClaimStatuses.resourceClaimName")?)
                        }
                        _ => {}
                    }
                }
                claims.push(c);
            }
            (19, v) => quantities(&mut allocated, v, "status.allocatedResources")?,
            (20, v) => {
                s.resources = Some(resources(v.bytes("status.resources")?, "status.resources")?)
            }
            _ => {}
        }
    }
    s.conditions = some(conditions);
    s.container_statuses = some(statuses);
    s.init_container_statuses = some(init_statuses);
    s.resource_claim_statuses = some(claims);
    s.allocated_resources = some_map(allocated);
    Ok(s)
}

fn condition(b: &[u8]) -> Result<k8s::PodCondition> {
    let mut c = k8s::PodCondition::default();
    for f in Fields::new(b) {
        match f? {
            (1, v) => c.type_ = v.string("conditions.type")?,
            (2, v) => c.status = v.string("conditions.status")?,
            (3, v) => c.last_probe_time = time(v, "conditions.lastProbeTime")?,
            (4, v) => c.last_transition_time = time(v, "conditions.lastTransitionTime")?,
            (5, v) => c.reason = non_empty(v, "conditions.reason")?,
            (6, v) => c.message = non_empty(v, "conditions.message")?,
            (7, v) => {
                c.observed_generation =
                    Some(v.int64("conditions.observedGeneration")?).filter(|&g| g != 0)
            }
            _ => {}
        }
    }
    Ok(c)
}

fn container_status(b: &[u8]) -> Result<k8s::ContainerStatus> {
    let mut s = k8s::ContainerStatus::default();
    let mut allocated = BTreeMap::new();
    for f in Fields::new(b) {
        match f? {
            (1, v) => s.name = v.string("containerStatuses.name")?,
            (10, v) => quantities(&mut allocated, v, "containerStatuses.allocatedResources")?,
            (11, v) => {
                s.resources = Some(resources(
                    v.bytes("containerStatuses.resources")?,
                    "containerStatuses.resources",
                )?)
            }
            _ => {}
        }
    }
    s.allocated_resources = some_map(allocated);
    Ok(s)
}
