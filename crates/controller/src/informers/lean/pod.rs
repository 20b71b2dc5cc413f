//! The parts of a Pod the scheduler reads, as serde mirrors of the k8s-openapi types.
//!
//! A served pod is mostly fields no scheduler reads: each container's env, command, probes,
//! security context and volume mounts, the projected service-account token volume admission
//! adds to every pod, the status's container states. These structs name only what a
//! consumer reads (`PodInfo::from_pod` and what it calls, and the controller's
//! `is_terminal` / `scheduled_condition`); serde passes over every other key without
//! building anything. They are the one list of kept fields: the tests check it against a
//! list of paths and prove, by changing every field of rich pods one at a time, that the
//! views built from a lean pod are those a full decode gives.
//!
//! A consumer that starts reading another pod field needs it here, in the tests' `KEPT`
//! list, and set in `testdata/rich-pod.json` (which sets every PodSpec field, read or not,
//! so the variant test fails on a newly read field the structs skip).
//!
//! Each struct converts into its k8s-openapi type with the skipped fields at their
//! defaults, so the consumers stay unchanged. Two lists are also filtered: volume mounts
//! without `bindMountOptions` and volumes without a source the volume plugins look at are
//! dropped, as nothing reads them.

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::Deserialize;
use serde::de::{Deserializer, SeqAccess, Visitor};
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

type Resources = BTreeMap<String, Quantity>;

/// `spec`: what `PodInfo::from_pod` reads of it.
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(rename_all = "camelCase")]
pub(crate) struct Spec {
    affinity: Option<k8s::Affinity>,
    containers: Option<Vec<Container>>,
    /// Only their bind mounts (NodeDeclaredFeatures).
    ephemeral_containers: Option<Vec<EphemeralContainer>>,
    host_network: Option<bool>,
    host_users: Option<bool>,
    init_containers: Option<Vec<Container>>,
    node_name: Option<String>,
    node_selector: Option<BTreeMap<String, String>>,
    overhead: Option<Resources>,
    preemption_policy: Option<String>,
    priority: Option<i32>,
    priority_class_name: Option<String>,
    resource_claims: Option<Vec<k8s::PodResourceClaim>>,
    resources: Option<k8s::ResourceRequirements>,
    runtime_class_name: Option<String>,
    scheduler_name: Option<String>,
    scheduling_gates: Option<Vec<k8s::PodSchedulingGate>>,
    /// The pod's PodGroup: a gang's pods must never be scheduled alone.
    scheduling_group: Option<k8s::PodSchedulingGroup>,
    service_account_name: Option<String>,
    tolerations: Option<Vec<k8s::Toleration>>,
    topology_spread_constraints: Option<Vec<k8s::TopologySpreadConstraint>>,
    volumes: Option<Filtered<Volume>>,
}

/// A container or init container: requests, host ports, image, sidecar-ness.
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(rename_all = "camelCase")]
struct Container {
    name: Option<String>,
    image: Option<String>,
    ports: Option<Vec<k8s::ContainerPort>>,
    resources: Option<k8s::ResourceRequirements>,
    restart_policy: Option<String>,
    restart_policy_rules: Option<Vec<k8s::ContainerRestartRule>>,
    volume_mounts: Option<Filtered<Mount>>,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(rename_all = "camelCase")]
struct EphemeralContainer {
    name: Option<String>,
    volume_mounts: Option<Filtered<Mount>>,
}

/// A volume mount: only whether it sets bind mount options is read.
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(rename_all = "camelCase")]
struct Mount {
    bind_mount_options: Option<Vec<String>>,
}

/// A volume: the sources the volume plugins look at (claims and in-tree disks).
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(rename_all = "camelCase")]
struct Volume {
    name: Option<String>,
    aws_elastic_block_store: Option<k8s::AWSElasticBlockStoreVolumeSource>,
    azure_disk: Option<k8s::AzureDiskVolumeSource>,
    cinder: Option<k8s::CinderVolumeSource>,
    ephemeral: Option<k8s::EphemeralVolumeSource>,
    gce_persistent_disk: Option<k8s::GCEPersistentDiskVolumeSource>,
    iscsi: Option<k8s::ISCSIVolumeSource>,
    persistent_volume_claim: Option<k8s::PersistentVolumeClaimVolumeSource>,
    portworx_volume: Option<k8s::PortworxVolumeSource>,
    rbd: Option<k8s::RBDVolumeSource>,
}

/// `status`: phase, conditions, nomination, start time, claims and resize state.
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(rename_all = "camelCase")]
pub(crate) struct Status {
    allocated_resources: Option<Resources>,
    conditions: Option<Vec<k8s::PodCondition>>,
    container_statuses: Option<Vec<ContainerStatus>>,
    init_container_statuses: Option<Vec<ContainerStatus>>,
    nominated_node_name: Option<String>,
    phase: Option<String>,
    resource_claim_statuses: Option<Vec<k8s::PodResourceClaimStatus>>,
    resources: Option<k8s::ResourceRequirements>,
    start_time: Option<Time>,
}

/// A container's status: what an in-place resize allocated and actuated.
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(rename_all = "camelCase")]
struct ContainerStatus {
    name: Option<String>,
    allocated_resources: Option<Resources>,
    resources: Option<k8s::ResourceRequirements>,
}

/// Items nothing reads are dropped while the list is parsed.
trait Kept {
    fn kept(&self) -> bool;
}

impl Kept for Mount {
    fn kept(&self) -> bool {
        self.bind_mount_options.is_some()
    }
}

impl Kept for Volume {
    fn kept(&self) -> bool {
        self.aws_elastic_block_store.is_some()
            || self.azure_disk.is_some()
            || self.cinder.is_some()
            || self.ephemeral.is_some()
            || self.gce_persistent_disk.is_some()
            || self.iscsi.is_some()
            || self.persistent_volume_claim.is_some()
            || self.portworx_volume.is_some()
            || self.rbd.is_some()
    }
}

/// A JSON list of which only the [`Kept`] items are stored.
#[cfg_attr(test, derive(serde::Serialize), serde(transparent))]
struct Filtered<T>(Vec<T>);

impl<'de, T: Deserialize<'de> + Kept> Deserialize<'de> for Filtered<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Items<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de> + Kept> Visitor<'de> for Items<T> {
            type Value = Filtered<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Filtered<T>, A::Error> {
                let mut out = Vec::new();
                while let Some(item) = seq.next_element::<T>()? {
                    if item.kept() {
                        out.push(item);
                    }
                }
                Ok(Filtered(out))
            }
        }
        d.deserialize_seq(Items(PhantomData))
    }
}

impl<T> Filtered<T> {
    fn kept_items<U: From<T>>(list: Option<Self>) -> Option<Vec<U>> {
        list.map(|Filtered(items)| items.into_iter().map(U::from).collect())
    }
}

fn convert<T, U: From<T>>(list: Option<Vec<T>>) -> Option<Vec<U>> {
    list.map(|items| items.into_iter().map(U::from).collect())
}

impl From<Spec> for k8s::PodSpec {
    fn from(s: Spec) -> k8s::PodSpec {
        k8s::PodSpec {
            affinity: s.affinity,
            containers: convert(s.containers).unwrap_or_default(),
            ephemeral_containers: convert(s.ephemeral_containers),
            host_network: s.host_network,
            host_users: s.host_users,
            init_containers: convert(s.init_containers),
            node_name: s.node_name,
            node_selector: s.node_selector,
            overhead: s.overhead,
            preemption_policy: s.preemption_policy,
            priority: s.priority,
            priority_class_name: s.priority_class_name,
            resource_claims: s.resource_claims,
            resources: s.resources,
            runtime_class_name: s.runtime_class_name,
            scheduler_name: s.scheduler_name,
            scheduling_gates: s.scheduling_gates,
            scheduling_group: s.scheduling_group,
            service_account_name: s.service_account_name,
            tolerations: s.tolerations,
            topology_spread_constraints: s.topology_spread_constraints,
            volumes: Filtered::kept_items(s.volumes),
            ..Default::default()
        }
    }
}

impl From<Container> for k8s::Container {
    fn from(c: Container) -> k8s::Container {
        k8s::Container {
            name: c.name.unwrap_or_default(),
            image: c.image,
            ports: c.ports,
            resources: c.resources,
            restart_policy: c.restart_policy,
            restart_policy_rules: c.restart_policy_rules,
            volume_mounts: Filtered::kept_items(c.volume_mounts),
            ..Default::default()
        }
    }
}

impl From<EphemeralContainer> for k8s::EphemeralContainer {
    fn from(c: EphemeralContainer) -> k8s::EphemeralContainer {
        k8s::EphemeralContainer {
            name: c.name.unwrap_or_default(),
            volume_mounts: Filtered::kept_items(c.volume_mounts),
            ..Default::default()
        }
    }
}

impl From<Mount> for k8s::VolumeMount {
    fn from(m: Mount) -> k8s::VolumeMount {
        k8s::VolumeMount {
            bind_mount_options: m.bind_mount_options,
            ..Default::default()
        }
    }
}

impl From<Volume> for k8s::Volume {
    fn from(v: Volume) -> k8s::Volume {
        k8s::Volume {
            name: v.name.unwrap_or_default(),
            aws_elastic_block_store: v.aws_elastic_block_store,
            azure_disk: v.azure_disk,
            cinder: v.cinder,
            ephemeral: v.ephemeral,
            gce_persistent_disk: v.gce_persistent_disk,
            iscsi: v.iscsi,
            persistent_volume_claim: v.persistent_volume_claim,
            portworx_volume: v.portworx_volume,
            rbd: v.rbd,
            ..Default::default()
        }
    }
}

impl From<Status> for k8s::PodStatus {
    fn from(s: Status) -> k8s::PodStatus {
        k8s::PodStatus {
            allocated_resources: s.allocated_resources,
            conditions: s.conditions,
            container_statuses: convert(s.container_statuses),
            init_container_statuses: convert(s.init_container_statuses),
            nominated_node_name: s.nominated_node_name,
            phase: s.phase,
            resource_claim_statuses: s.resource_claim_statuses,
            resources: s.resources,
            start_time: s.start_time,
            ..Default::default()
        }
    }
}

impl From<ContainerStatus> for k8s::ContainerStatus {
    fn from(s: ContainerStatus) -> k8s::ContainerStatus {
        k8s::ContainerStatus {
            name: s.name.unwrap_or_default(),
            allocated_resources: s.allocated_resources,
            resources: s.resources,
            ..Default::default()
        }
    }
}
