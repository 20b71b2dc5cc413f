//! Builders for tests: they assemble real API objects and convert them with `from_pod` /
//! `from_node`, so tests exercise the same conversion as production.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::node::NodeInfo;
use super::pod::PodInfo;

fn q(s: &str) -> K8sQuantity {
    K8sQuantity(s.to_string())
}

fn requirements(requests: &[(&str, &str)]) -> Option<k8s::ResourceRequirements> {
    if requests.is_empty() {
        return None;
    }
    Some(k8s::ResourceRequirements {
        requests: Some(
            requests
                .iter()
                .map(|(k, v)| (k.to_string(), q(v)))
                .collect(),
        ),
        ..Default::default()
    })
}

fn opt(s: &str) -> Option<String> {
    if s.is_empty() {
        None
    } else {
        Some(s.to_string())
    }
}

/// Builds a `k8s::Pod`; the first container is the "main" one that `cpu`, `memory`,
/// `request`, `limit` and `host_port` edit.
#[derive(Debug, Clone, Default)]
pub struct PodBuilder {
    pod: k8s::Pod,
}

impl PodInfo {
    pub fn test(namespace: &str, name: &str) -> PodBuilder {
        PodBuilder::new(namespace, name)
    }
}

impl PodBuilder {
    pub fn new(namespace: &str, name: &str) -> Self {
        let mut pod = k8s::Pod {
            metadata: ObjectMeta {
                namespace: Some(namespace.to_string()),
                name: Some(name.to_string()),
                uid: Some(format!("uid-{namespace}-{name}")),
                ..Default::default()
            },
            spec: Some(k8s::PodSpec::default()),
            status: None,
        };
        pod.spec.as_mut().unwrap().containers = Vec::new();
        PodBuilder { pod }
    }

    fn spec(&mut self) -> &mut k8s::PodSpec {
        self.pod.spec.get_or_insert_with(Default::default)
    }

    fn main(&mut self) -> &mut k8s::Container {
        let spec = self.spec();
        if spec.containers.is_empty() {
            spec.containers.push(k8s::Container {
                name: "c0".into(),
                ..Default::default()
            });
        }
        &mut spec.containers[0]
    }

    fn main_list(&mut self, limits: bool) -> &mut BTreeMap<String, K8sQuantity> {
        let res = self.main().resources.get_or_insert_with(Default::default);
        let list = if limits {
            &mut res.limits
        } else {
            &mut res.requests
        };
        list.get_or_insert_with(Default::default)
    }

    pub fn uid(mut self, uid: &str) -> Self {
        self.pod.metadata.uid = Some(uid.to_string());
        self
    }
    pub fn cpu(self, qty: &str) -> Self {
        self.request("cpu", qty)
    }
    pub fn memory(self, qty: &str) -> Self {
        self.request("memory", qty)
    }
    pub fn request(mut self, name: &str, qty: &str) -> Self {
        self.main_list(false).insert(name.to_string(), q(qty));
        self
    }
    pub fn limit(mut self, name: &str, qty: &str) -> Self {
        self.main_list(true).insert(name.to_string(), q(qty));
        self
    }
    /// Adds another regular container with these requests.
    pub fn container(mut self, requests: &[(&str, &str)]) -> Self {
        self.main();
        let spec = self.spec();
        let name = format!("c{}", spec.containers.len());
        spec.containers.push(k8s::Container {
            name,
            resources: requirements(requests),
            ..Default::default()
        });
        self
    }
    fn push_init(mut self, requests: &[(&str, &str)], sidecar: bool) -> Self {
        let inits = self.spec().init_containers.get_or_insert_with(Vec::new);
        let name = format!("init{}", inits.len());
        inits.push(k8s::Container {
            name,
            resources: requirements(requests),
            restart_policy: sidecar.then(|| "Always".to_string()),
            ..Default::default()
        });
        self
    }
    pub fn init_container(self, requests: &[(&str, &str)]) -> Self {
        self.push_init(requests, false)
    }
    /// A restartable init container (sidecar).
    pub fn sidecar(self, requests: &[(&str, &str)]) -> Self {
        self.push_init(requests, true)
    }
    pub fn overhead(mut self, name: &str, qty: &str) -> Self {
        self.spec()
            .overhead
            .get_or_insert_with(Default::default)
            .insert(name.to_string(), q(qty));
        self
    }
    pub fn priority(mut self, p: i32) -> Self {
        self.spec().priority = Some(p);
        self
    }
    pub fn node(mut self, name: &str) -> Self {
        self.spec().node_name = Some(name.to_string());
        self
    }
    pub fn nominated_node(mut self, name: &str) -> Self {
        self.pod
            .status
            .get_or_insert_with(Default::default)
            .nominated_node_name = Some(name.to_string());
        self
    }
    /// `status.startTime`, in whole seconds since the epoch.
    pub fn start_time(mut self, secs: i64) -> Self {
        let t = k8s_openapi::jiff::Timestamp::from_second(secs).expect("valid test timestamp");
        self.pod
            .status
            .get_or_insert_with(Default::default)
            .start_time = Some(Time(t));
        self
    }
    /// Being deleted after scheduler preemption picked it as a victim.
    pub fn terminating_by_preemption(mut self) -> Self {
        self.pod.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        self.pod
            .status
            .get_or_insert_with(Default::default)
            .conditions
            .get_or_insert_with(Vec::new)
            .push(k8s::PodCondition {
                type_: "DisruptionTarget".into(),
                status: "True".into(),
                reason: Some("PreemptionByScheduler".into()),
                ..Default::default()
            });
        self
    }
    /// `spec.preemptionPolicy: Never`.
    pub fn preemption_never(mut self) -> Self {
        self.spec().preemption_policy = Some("Never".into());
        self
    }
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.pod
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(k.to_string(), v.to_string());
        self
    }
    pub fn node_selector(mut self, k: &str, v: &str) -> Self {
        self.spec()
            .node_selector
            .get_or_insert_with(Default::default)
            .insert(k.to_string(), v.to_string());
        self
    }
    /// Empty strings leave the field unset.
    pub fn toleration(mut self, key: &str, operator: &str, value: &str, effect: &str) -> Self {
        self.spec()
            .tolerations
            .get_or_insert_with(Vec::new)
            .push(k8s::Toleration {
                key: opt(key),
                operator: opt(operator),
                value: opt(value),
                effect: opt(effect),
                toleration_seconds: None,
            });
        self
    }
    pub fn host_port(mut self, port: i32, protocol: &str, host_ip: &str) -> Self {
        let c = self.main();
        c.ports
            .get_or_insert_with(Vec::new)
            .push(k8s::ContainerPort {
                container_port: port,
                host_port: Some(port),
                protocol: opt(protocol),
                host_ip: opt(host_ip),
                name: None,
            });
        self
    }
    /// Sets the main container's image, or adds a container if it already has one.
    pub fn image(mut self, image: &str) -> Self {
        let spec = self.spec();
        match spec.containers.first_mut() {
            Some(c) if c.image.is_none() => c.image = Some(image.to_string()),
            None => spec.containers.push(k8s::Container {
                name: "c0".into(),
                image: Some(image.to_string()),
                ..Default::default()
            }),
            Some(_) => {
                let name = format!("c{}", spec.containers.len());
                spec.containers.push(k8s::Container {
                    name,
                    image: Some(image.to_string()),
                    ..Default::default()
                });
            }
        }
        self
    }
    pub fn runtime_class(mut self, name: &str) -> Self {
        self.spec().runtime_class_name = Some(name.to_string());
        self
    }
    pub fn scheduler_name(mut self, name: &str) -> Self {
        self.spec().scheduler_name = Some(name.to_string());
        self
    }
    pub fn pvc(mut self, claim: &str) -> Self {
        let vols = self.spec().volumes.get_or_insert_with(Vec::new);
        vols.push(k8s::Volume {
            name: format!("v{}", vols.len()),
            persistent_volume_claim: Some(k8s::PersistentVolumeClaimVolumeSource {
                claim_name: claim.to_string(),
                read_only: None,
            }),
            ..Default::default()
        });
        self
    }
    pub fn affinity(mut self, affinity: k8s::Affinity) -> Self {
        self.spec().affinity = Some(affinity);
        self
    }
    /// Direct access for anything the helpers do not cover.
    pub fn edit(mut self, f: impl FnOnce(&mut k8s::Pod)) -> Self {
        f(&mut self.pod);
        self
    }

    /// The API object; a real pod always has a container, so an empty one is added if needed.
    pub fn build_pod(mut self) -> k8s::Pod {
        self.main();
        self.pod
    }

    pub fn build(self) -> PodInfo {
        PodInfo::from_pod(&self.build_pod())
    }
}

#[derive(Debug, Clone, Default)]
pub struct NodeBuilder {
    node: k8s::Node,
}

impl NodeInfo {
    pub fn test(name: &str) -> NodeBuilder {
        NodeBuilder::new(name)
    }
}

impl NodeBuilder {
    pub fn new(name: &str) -> Self {
        NodeBuilder {
            node: k8s::Node {
                metadata: ObjectMeta {
                    name: Some(name.to_string()),
                    ..Default::default()
                },
                spec: Some(Default::default()),
                status: Some(Default::default()),
            },
        }
    }
    fn status(&mut self) -> &mut k8s::NodeStatus {
        self.node.status.get_or_insert_with(Default::default)
    }
    fn spec(&mut self) -> &mut k8s::NodeSpec {
        self.node.spec.get_or_insert_with(Default::default)
    }
    pub fn allocatable(mut self, name: &str, qty: &str) -> Self {
        self.status()
            .allocatable
            .get_or_insert_with(Default::default)
            .insert(name.to_string(), q(qty));
        self
    }
    pub fn cpu(self, qty: &str) -> Self {
        self.allocatable("cpu", qty)
    }
    pub fn memory(self, qty: &str) -> Self {
        self.allocatable("memory", qty)
    }
    pub fn pods(self, n: i64) -> Self {
        self.allocatable("pods", &n.to_string())
    }
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.node
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(k.to_string(), v.to_string());
        self
    }
    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        self.spec()
            .taints
            .get_or_insert_with(Vec::new)
            .push(k8s::Taint {
                key: key.to_string(),
                value: opt(value),
                effect: effect.to_string(),
                time_added: None,
            });
        self
    }
    pub fn unschedulable(mut self) -> Self {
        self.spec().unschedulable = Some(true);
        self
    }
    pub fn image(mut self, name: &str, size: i64) -> Self {
        self.status()
            .images
            .get_or_insert_with(Vec::new)
            .push(k8s::ContainerImage {
                names: Some(vec![name.to_string()]),
                size_bytes: Some(size),
            });
        self
    }
    pub fn edit(mut self, f: impl FnOnce(&mut k8s::Node)) -> Self {
        f(&mut self.node);
        self
    }
    pub fn build_node(self) -> k8s::Node {
        self.node
    }
    pub fn build(self) -> NodeInfo {
        NodeInfo::from_node(&self.node)
    }
}

/// Builders for PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes,
/// CSIDrivers and CSIStorageCapacities.
pub mod volumes {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1 as k8s;
    use k8s_openapi::api::storage::v1 as storage;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::q;
    use crate::types::volume::{
        ANN_BIND_COMPLETED, ANN_MIGRATED_PLUGINS, ANN_SELECTED_NODE, CsiDriverInfo, CsiNodeInfo,
        CsiStorageCapacityInfo, PvInfo, PvcInfo, StorageClassInfo, VolumeObjects,
    };

    pub struct PvcBuilder(pub k8s::PersistentVolumeClaim);

    /// A Pending claim with no class, no modes and no request.
    pub fn pvc(namespace: &str, name: &str) -> PvcBuilder {
        PvcBuilder(k8s::PersistentVolumeClaim {
            metadata: ObjectMeta {
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                uid: Some(format!("uid-{namespace}-{name}")),
                ..Default::default()
            },
            spec: Some(Default::default()),
            status: Some(k8s::PersistentVolumeClaimStatus {
                phase: Some("Pending".into()),
                ..Default::default()
            }),
        })
    }

    impl PvcBuilder {
        fn spec(&mut self) -> &mut k8s::PersistentVolumeClaimSpec {
            self.0.spec.get_or_insert_with(Default::default)
        }
        fn annotate(&mut self, k: &str, v: &str) {
            self.0
                .metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(k.into(), v.into());
        }
        pub fn mode(mut self, mode: &str) -> Self {
            self.spec()
                .access_modes
                .get_or_insert_with(Vec::new)
                .push(mode.into());
            self
        }
        pub fn class(mut self, class: &str) -> Self {
            self.spec().storage_class_name = Some(class.into());
            self
        }
        pub fn request(mut self, qty: &str) -> Self {
            self.spec().resources = Some(k8s::VolumeResourceRequirements {
                requests: Some([("storage".to_string(), q(qty))].into_iter().collect()),
                ..Default::default()
            });
            self
        }
        /// Fully bound to `pv` (volumeName, bind-completed, phase Bound).
        pub fn bound(mut self, pv: &str) -> Self {
            self.spec().volume_name = Some(pv.into());
            self.annotate(ANN_BIND_COMPLETED, "yes");
            self.0.status.get_or_insert_with(Default::default).phase = Some("Bound".into());
            self
        }
        /// `spec.volumeName` set by the user, not yet bound by the controller.
        pub fn prebound(mut self, pv: &str) -> Self {
            self.spec().volume_name = Some(pv.into());
            self
        }
        pub fn selected_node(mut self, node: &str) -> Self {
            self.annotate(ANN_SELECTED_NODE, node);
            self
        }
        pub fn api(self) -> k8s::PersistentVolumeClaim {
            self.0
        }
        pub fn build(self) -> PvcInfo {
            PvcInfo::from_pvc(&self.0)
        }
    }

    pub struct PvBuilder(pub k8s::PersistentVolume);

    /// An Available volume of `capacity` in `class`.
    pub fn pv(name: &str, class: &str, capacity: &str) -> PvBuilder {
        PvBuilder(k8s::PersistentVolume {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(k8s::PersistentVolumeSpec {
                storage_class_name: Some(class.into()).filter(|c: &String| !c.is_empty()),
                capacity: Some([("storage".to_string(), q(capacity))].into_iter().collect()),
                ..Default::default()
            }),
            status: Some(k8s::PersistentVolumeStatus {
                phase: Some("Available".into()),
                ..Default::default()
            }),
        })
    }

    impl PvBuilder {
        fn spec(&mut self) -> &mut k8s::PersistentVolumeSpec {
            self.0.spec.get_or_insert_with(Default::default)
        }
        pub fn mode(mut self, mode: &str) -> Self {
            self.spec()
                .access_modes
                .get_or_insert_with(Vec::new)
                .push(mode.into());
            self
        }
        pub fn label(mut self, k: &str, v: &str) -> Self {
            self.0
                .metadata
                .labels
                .get_or_insert_with(BTreeMap::new)
                .insert(k.into(), v.into());
            self
        }
        /// Required node affinity `key In values` (one term).
        pub fn node_affinity(mut self, key: &str, values: &[&str]) -> Self {
            self.spec().node_affinity = Some(k8s::VolumeNodeAffinity {
                required: Some(k8s::NodeSelector {
                    node_selector_terms: vec![k8s::NodeSelectorTerm {
                        match_expressions: Some(vec![k8s::NodeSelectorRequirement {
                            key: key.into(),
                            operator: "In".into(),
                            values: Some(values.iter().map(|v| v.to_string()).collect()),
                        }]),
                        ..Default::default()
                    }],
                }),
            });
            self
        }
        /// Local volume on one node (hostname affinity).
        pub fn local_on(self, node: &str) -> Self {
            self.node_affinity("kubernetes.io/hostname", &[node])
        }
        pub fn claim(mut self, namespace: &str, name: &str) -> Self {
            self.spec().claim_ref = Some(k8s::ObjectReference {
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                ..Default::default()
            });
            self.0.status.get_or_insert_with(Default::default).phase = Some("Bound".into());
            self
        }
        /// An in-tree AWS EBS source.
        pub fn aws_ebs(mut self, volume_id: &str) -> Self {
            self.spec().aws_elastic_block_store = Some(k8s::AWSElasticBlockStoreVolumeSource {
                volume_id: volume_id.into(),
                ..Default::default()
            });
            self
        }
        /// An in-tree GCE PD source.
        pub fn gce_pd(mut self, pd_name: &str) -> Self {
            self.spec().gce_persistent_disk = Some(k8s::GCEPersistentDiskVolumeSource {
                pd_name: pd_name.into(),
                ..Default::default()
            });
            self
        }
        pub fn csi(mut self, driver: &str, handle: &str) -> Self {
            self.spec().csi = Some(k8s::CSIPersistentVolumeSource {
                driver: driver.into(),
                volume_handle: handle.into(),
                ..Default::default()
            });
            self
        }
        pub fn api(self) -> k8s::PersistentVolume {
            self.0
        }
        pub fn build(self) -> PvInfo {
            PvInfo::from_pv(&self.0)
        }
    }

    pub fn storage_class_api(
        name: &str,
        provisioner: &str,
        wait_for_first_consumer: bool,
        allowed: &[(&str, &[&str])],
    ) -> storage::StorageClass {
        storage::StorageClass {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            provisioner: provisioner.into(),
            volume_binding_mode: Some(
                if wait_for_first_consumer {
                    "WaitForFirstConsumer"
                } else {
                    "Immediate"
                }
                .into(),
            ),
            allowed_topologies: (!allowed.is_empty()).then(|| {
                vec![k8s::TopologySelectorTerm {
                    match_label_expressions: Some(
                        allowed
                            .iter()
                            .map(|(k, vals)| k8s::TopologySelectorLabelRequirement {
                                key: k.to_string(),
                                values: vals.iter().map(|v| v.to_string()).collect(),
                            })
                            .collect(),
                    ),
                }]
            }),
            ..Default::default()
        }
    }

    /// A StorageClass; `allowed` is one allowedTopologies term.
    pub fn sc(
        name: &str,
        provisioner: &str,
        wait_for_first_consumer: bool,
        allowed: &[(&str, &[&str])],
    ) -> StorageClassInfo {
        StorageClassInfo::from_storage_class(&storage_class_api(
            name,
            provisioner,
            wait_for_first_consumer,
            allowed,
        ))
    }

    /// A CSINode with `(driver, attach limit)` pairs.
    pub fn csi_node(name: &str, drivers: &[(&str, Option<i32>)]) -> CsiNodeInfo {
        CsiNodeInfo::from_csi_node(&storage::CSINode {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: storage::CSINodeSpec {
                drivers: drivers
                    .iter()
                    .map(|(d, n)| storage::CSINodeDriver {
                        name: d.to_string(),
                        node_id: name.into(),
                        allocatable: n
                            .map(|count| storage::VolumeNodeResources { count: Some(count) }),
                        ..Default::default()
                    })
                    .collect(),
            },
            status: None,
        })
    }

    /// A CSINode whose in-tree `plugins` are migrated to CSI.
    pub fn csi_node_migrated(
        name: &str,
        drivers: &[(&str, Option<i32>)],
        plugins: &[&str],
    ) -> CsiNodeInfo {
        let mut n = csi_node(name, drivers);
        let mut api = storage::CSINode::default();
        api.metadata.annotations = Some(
            [(ANN_MIGRATED_PLUGINS.to_string(), plugins.join(","))]
                .into_iter()
                .collect(),
        );
        n.migrated_plugins = CsiNodeInfo::from_csi_node(&api).migrated_plugins;
        n
    }

    /// A CSIDriver; `storage_capacity` is `spec.storageCapacity` (`None`: unset).
    pub fn csi_driver(name: &str, storage_capacity: Option<bool>) -> CsiDriverInfo {
        CsiDriverInfo::from_csi_driver(&csi_driver_api(name, storage_capacity))
    }

    pub fn csi_driver_api(name: &str, storage_capacity: Option<bool>) -> storage::CSIDriver {
        storage::CSIDriver {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: storage::CSIDriverSpec {
                storage_capacity,
                ..Default::default()
            },
        }
    }

    /// A CSIStorageCapacity of `class` in namespace `kube-system` for nodes matching the
    /// `topology` labels (`None`: no nodeTopology at all).
    pub fn capacity_api(
        name: &str,
        class: &str,
        topology: Option<&[(&str, &str)]>,
        capacity: Option<&str>,
        maximum_volume_size: Option<&str>,
    ) -> storage::CSIStorageCapacity {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
        storage::CSIStorageCapacity {
            metadata: ObjectMeta {
                namespace: Some("kube-system".into()),
                name: Some(name.into()),
                ..Default::default()
            },
            storage_class_name: class.into(),
            node_topology: topology.map(|t| LabelSelector {
                match_labels: Some(
                    t.iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            }),
            capacity: capacity.map(q),
            maximum_volume_size: maximum_volume_size.map(q),
        }
    }

    pub fn capacity(
        name: &str,
        class: &str,
        topology: Option<&[(&str, &str)]>,
        capacity: Option<&str>,
        maximum_volume_size: Option<&str>,
    ) -> CsiStorageCapacityInfo {
        CsiStorageCapacityInfo::from_csi_storage_capacity(&capacity_api(
            name,
            class,
            topology,
            capacity,
            maximum_volume_size,
        ))
    }

    pub fn store(
        pvcs: Vec<PvcInfo>,
        pvs: Vec<PvInfo>,
        classes: Vec<StorageClassInfo>,
    ) -> VolumeObjects {
        let mut v = VolumeObjects::new();
        pvcs.into_iter().for_each(|c| {
            v.put_pvc(c);
        });
        pvs.into_iter().for_each(|p| {
            v.put_pv(p);
        });
        classes.into_iter().for_each(|c| {
            v.put_storage_class(c);
        });
        v
    }
}
