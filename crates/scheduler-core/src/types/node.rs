//! Per-node aggregated scheduling state (upstream `framework.NodeInfo`).

use rustc_hash::FxHashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::core::v1 as k8s;

use super::images::ImageSizes;
use super::labels::Labels;
use super::pod::{DEFAULT_BIND_ALL_HOST_IP, HostPort, PodInfo, PodKey, Protocol};
use super::resource::{CpuMemory, Resource};
use super::taint::{Taint, Taints};

static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Process-wide monotonic generation, so a node deleted and re-created under the same name
/// never reuses a generation an older snapshot has seen.
pub fn next_generation() -> u64 {
    GENERATION.fetch_add(1, Ordering::Relaxed) + 1
}

/// Host ports in use on a node, by (protocol, port) then host IP.
///
/// Same conflict rule as upstream `HostPortInfo`; entries are reference-counted so that
/// removing one of two pods using the same ip/port keeps the port reserved (upstream's plain
/// set would free it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostPortInfo {
    // Fx: no per-map random state (16 bytes a map, in every NodeInfo).
    ports: FxHashMap<(Protocol, i32), FxHashMap<String, u32>>,
}

impl HostPortInfo {
    pub fn add(&mut self, hp: &HostPort) {
        if hp.port <= 0 {
            return;
        }
        let ips = self
            .ports
            .entry((hp.protocol.clone(), hp.port))
            .or_default();
        *ips.entry(hp.host_ip.clone()).or_insert(0) += 1;
    }

    pub fn remove(&mut self, hp: &HostPort) {
        let key = (hp.protocol.clone(), hp.port);
        if let Some(ips) = self.ports.get_mut(&key) {
            if let Some(n) = ips.get_mut(&hp.host_ip) {
                *n -= 1;
                if *n == 0 {
                    ips.remove(&hp.host_ip);
                }
            }
            if ips.is_empty() {
                self.ports.remove(&key);
            }
        }
    }

    /// `0.0.0.0` conflicts with every IP on the same protocol and port; any other IP conflicts
    /// with itself and with `0.0.0.0`.
    pub fn conflicts(&self, hp: &HostPort) -> bool {
        if hp.port <= 0 {
            return false;
        }
        let Some(ips) = self.ports.get(&(hp.protocol.clone(), hp.port)) else {
            return false;
        };
        if hp.host_ip == DEFAULT_BIND_ALL_HOST_IP {
            !ips.is_empty()
        } else {
            ips.contains_key(DEFAULT_BIND_ALL_HOST_IP) || ips.contains_key(&hp.host_ip)
        }
    }

    /// Number of distinct (ip, protocol, port) entries.
    pub fn len(&self) -> usize {
        self.ports.values().map(|ips| ips.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.ports.is_empty()
    }
}

/// The parts of a [`NodeInfo`] most nodes leave empty, kept out of line.
#[derive(Debug, Clone, Default)]
pub(crate) struct NodeExtras {
    pods_with_affinity: Vec<Arc<PodInfo>>,
    pods_with_required_anti_affinity: Vec<Arc<PodInfo>>,
    used_ports: HostPortInfo,
    /// `namespace/claim` -> number of pods here using it.
    pvc_ref_counts: FxHashMap<String, u32>,
}

impl NodeExtras {
    fn is_empty(&self) -> bool {
        self.pods_with_affinity.is_empty()
            && self.pods_with_required_anti_affinity.is_empty()
            && self.used_ports.is_empty()
            && self.pvc_ref_counts.is_empty()
    }
}

static NO_EXTRAS: std::sync::LazyLock<NodeExtras> = std::sync::LazyLock::new(NodeExtras::default);

/// `repr(C)` keeps the fields in this order: the ones Filter and Score read for every node
/// (cordon flag, taints, labels, pod count, allocatable, requested, images) come first, so
/// visiting a node touches its first four cache lines instead of six or seven spread over
/// the whole struct. Against a real API server the other processes evict the nodes between
/// two pods, and those first reads were a fifth of the scheduler's CPU (see
/// `benches/reports/2026-11-26-real-apiserver.md`).
#[derive(Debug, Clone, Default)]
#[repr(C)]
pub struct NodeInfo {
    pub unschedulable: bool,
    /// Whether the Node object has been seen; false while only pods reference this name.
    /// (The object itself is not kept: everything scheduling needs is extracted here, and
    /// 5,000 full Node objects would dominate the scheduler's memory.)
    pub node_known: bool,
    pub taints: Taints,
    pub labels: Labels,
    pub pods: Vec<Arc<PodInfo>>,
    pub allocatable: Resource,
    /// Sum of the pods' requests (the pod count is `pods.len()`, not kept here).
    pub requested: Resource,
    /// Sum of the pods' non-zero requests; only cpu and memory.
    pub non_zero_requested: CpuMemory,
    /// Every image name in `status.images` -> its size in bytes.
    pub images: ImageSizes,
    pub name: String,
    /// Pods with affinity terms, host ports and claims in use: `None` on the many nodes
    /// that have none of them (8 bytes instead of 144 in each of 50,000 NodeInfos).
    pub(crate) extras: Option<Box<NodeExtras>>,
    /// `status.declaredFeatures` (NodeDeclaredFeatures, 1.35+; empty on older kubelets).
    pub declared_features: Vec<String>,
    /// Bumped on every change; the snapshot copies only nodes newer than itself.
    pub generation: u64,
}

impl NodeInfo {
    /// An empty placeholder for a node name that pods reference before the Node is seen.
    pub fn new(name: &str) -> Self {
        NodeInfo {
            name: name.to_string(),
            generation: next_generation(),
            ..Default::default()
        }
    }

    pub fn from_node(node: &k8s::Node) -> Self {
        let mut n = NodeInfo::new(node.metadata.name.as_deref().unwrap_or_default());
        n.set_node(node);
        n
    }

    /// Replaces the node object, keeping pods and their aggregates.
    pub fn set_node_arc(&mut self, node: Arc<k8s::Node>) {
        self.set_node(&node);
    }

    pub fn set_node(&mut self, node: &k8s::Node) {
        self.name = node.metadata.name.clone().unwrap_or_default();
        self.labels = Labels::from(node.metadata.labels.as_ref());
        let spec = node.spec.as_ref();
        self.taints = spec
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .map(Taint::from_k8s)
            .collect();
        self.unschedulable = spec.and_then(|s| s.unschedulable).unwrap_or(false);
        let status = node.status.as_ref();
        self.allocatable = status
            .and_then(|s| s.allocatable.as_ref())
            .map(Resource::from_resource_list)
            .unwrap_or_default();
        self.images = ImageSizes::from_node(node);
        self.declared_features = status
            .and_then(|s| s.declared_features.clone())
            .unwrap_or_default();
        self.node_known = true;
        self.generation = next_generation();
    }

    /// Forgets the node object but keeps the pods (upstream `RemoveNode`).
    pub fn remove_node(&mut self) {
        self.node_known = false;
        self.images.clear();
        self.declared_features.clear();
        self.generation = next_generation();
    }

    pub fn add_pod(&mut self, pod: Arc<PodInfo>) {
        self.update(&pod, 1);
        if pod.has_pod_affinity {
            self.extras_mut().pods_with_affinity.push(pod.clone());
        }
        if pod.has_required_pod_anti_affinity {
            self.extras_mut()
                .pods_with_required_anti_affinity
                .push(pod.clone());
        }
        self.pods.push(pod);
    }

    fn extras(&self) -> &NodeExtras {
        self.extras.as_deref().unwrap_or(&NO_EXTRAS)
    }

    fn extras_mut(&mut self) -> &mut NodeExtras {
        self.extras.get_or_insert_with(Box::default)
    }

    /// Frees the extras once the last pod needing them is gone.
    fn drop_empty_extras(&mut self) {
        if self.extras.as_deref().is_some_and(NodeExtras::is_empty) {
            self.extras = None;
        }
    }

    /// Pods here with pod affinity terms (required or preferred).
    pub fn pods_with_affinity(&self) -> &[Arc<PodInfo>] {
        &self.extras().pods_with_affinity
    }

    /// Pods here with required pod anti-affinity terms.
    pub fn pods_with_required_anti_affinity(&self) -> &[Arc<PodInfo>] {
        &self.extras().pods_with_required_anti_affinity
    }

    /// Host ports the pods here use.
    pub fn used_ports(&self) -> &HostPortInfo {
        &self.extras().used_ports
    }

    /// How many pods here use the claim `namespace/claim`.
    pub fn pvc_ref_count(&self, key: &str) -> Option<u32> {
        self.extras
            .as_deref()
            .and_then(|e| e.pvc_ref_counts.get(key).copied())
    }

    /// Whether no pod here uses a claim.
    pub fn pvcs_unused(&self) -> bool {
        self.extras().pvc_ref_counts.is_empty()
    }

    /// Removes the pod with `key`, undoing exactly what [`Self::add_pod`] added. Like upstream
    /// the last pod takes the removed one's place.
    pub fn remove_pod(&mut self, key: &PodKey) -> Option<Arc<PodInfo>> {
        let idx = self.pods.iter().position(|p| p.key == *key)?;
        let pod = self.pods.swap_remove(idx);
        if let Some(e) = self.extras.as_deref_mut() {
            if let Some(i) = e.pods_with_affinity.iter().position(|p| p.key == *key) {
                e.pods_with_affinity.swap_remove(i);
            }
            if let Some(i) = e
                .pods_with_required_anti_affinity
                .iter()
                .position(|p| p.key == *key)
            {
                e.pods_with_required_anti_affinity.swap_remove(i);
            }
        }
        self.update(&pod, -1);
        Some(pod)
    }

    fn update(&mut self, pod: &PodInfo, sign: i64) {
        let r = &pod.requests;
        self.requested.milli_cpu += sign * r.milli_cpu;
        self.requested.memory += sign * r.memory;
        self.requested.ephemeral_storage += sign * r.ephemeral_storage;
        for (name, v) in &r.scalar {
            self.requested.add_scalar(name, sign * v);
        }
        self.non_zero_requested.milli_cpu += sign * pod.non_zero_requests.milli_cpu;
        self.non_zero_requested.memory += sign * pod.non_zero_requests.memory;
        for hp in &pod.host_ports {
            if sign > 0 {
                self.extras_mut().used_ports.add(hp);
            } else if let Some(e) = self.extras.as_deref_mut() {
                e.used_ports.remove(hp);
            }
        }
        for claim in &pod.pvc_names {
            let key = format!("{}/{}", pod.key.namespace, claim);
            if sign > 0 {
                *self.extras_mut().pvc_ref_counts.entry(key).or_insert(0) += 1;
            } else if let Some(e) = self.extras.as_deref_mut()
                && let Some(n) = e.pvc_ref_counts.get_mut(&key)
            {
                *n -= 1;
                if *n == 0 {
                    e.pvc_ref_counts.remove(&key);
                }
            }
        }
        self.drop_empty_extras();
        self.generation = next_generation();
    }

    pub fn get_pod(&self, key: &PodKey) -> Option<&Arc<PodInfo>> {
        self.pods.iter().find(|p| p.key == *key)
    }

    pub fn has_node(&self) -> bool {
        self.node_known
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hp(port: i32, proto: &str, ip: &str) -> HostPort {
        HostPort::new(port, proto, ip)
    }

    #[test]
    fn the_fields_filter_and_score_read_share_the_first_four_cache_lines() {
        use std::mem::{offset_of, size_of};
        let end = |offset: usize, size: usize| offset + size;
        let hot = [
            end(offset_of!(NodeInfo, unschedulable), 1),
            end(offset_of!(NodeInfo, taints), size_of::<Taints>()),
            end(offset_of!(NodeInfo, labels), size_of::<Labels>()),
            end(offset_of!(NodeInfo, pods), size_of::<Vec<Arc<PodInfo>>>()),
            end(offset_of!(NodeInfo, allocatable), size_of::<Resource>()),
            end(offset_of!(NodeInfo, requested), size_of::<Resource>()),
            end(
                offset_of!(NodeInfo, non_zero_requested),
                size_of::<CpuMemory>(),
            ),
            end(offset_of!(NodeInfo, images), size_of::<ImageSizes>()),
        ];
        let last = hot.into_iter().max().unwrap();
        assert!(last <= 4 * 64, "hot fields end at byte {last}");
        // The cold fields follow them.
        assert!(offset_of!(NodeInfo, name) >= last);
        assert!(offset_of!(NodeInfo, generation) > last);
    }

    #[test]
    fn host_port_conflicts_like_upstream() {
        // (existing, candidate, conflicts)
        let cases: Vec<(Vec<HostPort>, HostPort, bool)> = vec![
            (
                vec![hp(80, "TCP", "127.0.0.1")],
                hp(80, "TCP", "127.0.0.1"),
                true,
            ),
            (
                vec![hp(80, "TCP", "127.0.0.1")],
                hp(80, "UDP", "127.0.0.1"),
                false,
            ),
            (
                vec![hp(80, "TCP", "127.0.0.1")],
                hp(81, "TCP", "127.0.0.1"),
                false,
            ),
            (
                vec![hp(80, "TCP", "127.0.0.1")],
                hp(80, "TCP", "127.0.0.2"),
                false,
            ),
            (
                vec![hp(80, "TCP", "127.0.0.1")],
                hp(80, "TCP", "0.0.0.0"),
                true,
            ),
            (vec![hp(80, "TCP", "127.0.0.1")], hp(80, "TCP", ""), true),
            (
                vec![hp(80, "TCP", "0.0.0.0")],
                hp(80, "TCP", "127.0.0.1"),
                true,
            ),
            (vec![hp(80, "TCP", "")], hp(80, "", "10.0.0.1"), true),
            (
                vec![hp(80, "TCP", "0.0.0.0")],
                hp(80, "UDP", "127.0.0.1"),
                false,
            ),
            (
                vec![hp(0, "TCP", "0.0.0.0")],
                hp(0, "TCP", "0.0.0.0"),
                false,
            ),
            (
                vec![hp(80, "SCTP", "127.0.0.1"), hp(443, "TCP", "127.0.0.1")],
                hp(443, "TCP", "0.0.0.0"),
                true,
            ),
        ];
        for (i, (existing, candidate, want)) in cases.into_iter().enumerate() {
            let mut info = HostPortInfo::default();
            existing.iter().for_each(|e| info.add(e));
            assert_eq!(info.conflicts(&candidate), want, "case {i}");
        }
    }

    #[test]
    fn host_port_add_remove_counts() {
        let mut info = HostPortInfo::default();
        info.add(&hp(80, "TCP", "127.0.0.1"));
        info.add(&hp(80, "TCP", "127.0.0.2"));
        info.add(&hp(80, "TCP", "127.0.0.1"));
        info.add(&hp(0, "TCP", "127.0.0.1"));
        assert_eq!(info.len(), 2);
        info.remove(&hp(80, "TCP", "127.0.0.1"));
        assert!(
            info.conflicts(&hp(80, "TCP", "127.0.0.1")),
            "still held by the second user"
        );
        info.remove(&hp(80, "TCP", "127.0.0.1"));
        assert!(!info.conflicts(&hp(80, "TCP", "127.0.0.1")));
        info.remove(&hp(80, "TCP", "127.0.0.2"));
        assert!(info.is_empty());
    }

    #[test]
    fn extras_exist_only_while_a_pod_needs_them() {
        let mut n = NodeInfo::new("n1");
        let plain = Arc::new(PodInfo::test("ns", "plain").host_port(0, "TCP", "").build());
        n.add_pod(plain);
        assert!(
            n.extras.is_none(),
            "a pod with nothing out of line allocates nothing"
        );
        let ported = Arc::new(
            PodInfo::test("ns", "ported")
                .host_port(80, "TCP", "")
                .build(),
        );
        let claimed = Arc::new(PodInfo::test("ns", "claimed").pvc("data").build());
        n.add_pod(ported);
        n.add_pod(claimed);
        assert!(n.used_ports().conflicts(&hp(80, "TCP", "10.0.0.1")));
        assert_eq!(n.pvc_ref_count("ns/data"), Some(1));
        n.remove_pod(&PodKey::new("ns", "ported"));
        assert!(n.extras.is_some(), "the claim still needs them");
        n.remove_pod(&PodKey::new("ns", "claimed"));
        assert!(
            n.extras.is_none(),
            "freed with the last pod that needed them"
        );
        assert!(n.used_ports().is_empty() && n.pvcs_unused());
    }

    #[test]
    fn generations_increase() {
        let a = next_generation();
        let b = next_generation();
        assert!(b > a);
    }
}
