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
