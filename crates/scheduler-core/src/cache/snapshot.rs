//! The read-only cluster view one scheduling cycle works on.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;
use std::sync::Arc;

use super::workload_selectors::WorkloadSelectors;
use crate::types::{
    CsiNodeInfo, NodeInfo, NodeSummary, PdbInfo, PvInfo, PvcInfo, RuntimeClassInfo,
    StorageClassInfo, VolumeObjects,
};

/// Node name -> position, holding only positions: the names are read from the nodes
/// themselves (a copy of every name here was ~3 MB at 50,000 nodes).
#[derive(Clone, Default)]
struct NameIndex {
    table: hashbrown::HashTable<u32>,
    hasher: foldhash::fast::RandomState,
}

impl std::fmt::Debug for NameIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NameIndex({} nodes)", self.table.len())
    }
}

impl NameIndex {
    fn new(nodes: &[Arc<NodeInfo>]) -> Self {
        let hasher = foldhash::fast::RandomState::default();
        let mut table = hashbrown::HashTable::with_capacity(nodes.len());
        for (i, n) in nodes.iter().enumerate() {
            let h = hasher.hash_one(n.name.as_str());
            // Positions fit u32: a cluster holds far fewer than 4 billion nodes.
            table.insert_unique(h, i as u32, |&j| {
                hasher.hash_one(nodes[j as usize].name.as_str())
            });
        }
        NameIndex { table, hasher }
    }

    fn get(&self, nodes: &[Arc<NodeInfo>], name: &str) -> Option<usize> {
        let h = self.hasher.hash_one(name);
        self.table
            .find(h, |&j| nodes[j as usize].name == name)
            .map(|&j| j as usize)
    }
}

/// Nodes in upstream's zone-interleaved order plus the lookups plugins need. Cloning is cheap
/// (all `Arc`s) but cycles normally reuse one snapshot updated by `Cache::update_snapshot`.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub(crate) node_infos: Vec<Arc<NodeInfo>>,
    /// `summaries[i]` is `NodeSummary::of(&node_infos[i])`: what Filter and Score read for
    /// every node, in one array (see [`NodeSummary`]). Only [`Self::set_node`] and
    /// [`Self::set_nodes`] write either list, so the two never disagree.
    summaries: Vec<NodeSummary>,
    /// Node name -> position in `node_infos`.
    index: NameIndex,
    pub(crate) with_affinity: Vec<usize>,
    pub(crate) with_required_anti_affinity: Vec<usize>,
    pub(crate) image_num_nodes: Arc<HashMap<String, usize>>,
    pub(crate) runtime_classes: Arc<HashMap<String, Arc<RuntimeClassInfo>>>,
    /// Namespace name -> its labels (namespaceSelector in pod affinity terms).
    pub(crate) namespaces: NamespaceLabels,
    /// Services/RCs/RSs/StatefulSets selectors for default topology spreading.
    pub(crate) workloads: Arc<WorkloadSelectors>,
    /// Shared with the cache; only replaced when a PDB changed.
    pub(crate) pdbs: Arc<Vec<Arc<PdbInfo>>>,
    /// PVCs, PVs, StorageClasses, CSINodes, CSIDrivers, CSIStorageCapacities: each map shared with the cache until it changes.
    pub(crate) volumes: VolumeObjects,
    /// Whether the API server serves resource.k8s.io/v1 (see `Cache::set_dra_api_served`).
    pub(crate) dra_api_served: bool,
    /// ResourceClaims, ResourceSlices, DeviceClasses: shared with the cache until they change.
    pub(crate) dra: crate::types::dra::DraObjects,
    pub(crate) generation: u64,
}

/// How far each image has spread over the snapshot's nodes: what upstream's ImageLocality
/// reads through the framework handle. The framework puts one in the [`CycleState`] before
/// scoring, since a Score plugin is only handed one node.
///
/// [`CycleState`]: crate::framework::CycleState
#[derive(Debug, Clone, Default)]
pub struct ImageSpread {
    image_num_nodes: Arc<HashMap<String, usize>>,
    total_nodes: usize,
}

impl ImageSpread {
    /// Nodes that report `image` in their status.
    pub fn num_nodes(&self, image: &str) -> usize {
        self.image_num_nodes.get(image).copied().unwrap_or(0)
    }

    /// Nodes in the snapshot.
    pub fn total_nodes(&self) -> usize {
        self.total_nodes
    }
}
/// Namespace name -> labels, copy-on-write and shared between the cache and snapshots.
pub(crate) type NamespaceLabels = Arc<HashMap<String, Arc<BTreeMap<String, String>>>>;

impl Snapshot {
    pub fn new() -> Self {
        Self::default()
    }

    /// A snapshot of exactly these nodes, in this order, without a cache; for plugin tests
    /// and tools. Placeholder nodes (no Node object) are kept too.
    pub fn from_node_infos(nodes: impl IntoIterator<Item = NodeInfo>) -> Self {
        let node_infos: Vec<Arc<NodeInfo>> = nodes.into_iter().map(Arc::new).collect();
        let mut images: HashMap<String, usize> = HashMap::new();
        for n in &node_infos {
            for img in n.images.keys() {
                *images.entry(img.clone()).or_insert(0) += 1;
            }
        }
        let mut s = Snapshot {
            generation: node_infos.iter().map(|n| n.generation).max().unwrap_or(0),
            image_num_nodes: Arc::new(images),
            ..Default::default()
        };
        s.set_nodes(node_infos);
        s.rebuild_affinity_lists();
        s
    }

    /// Marks the API server as serving resource.k8s.io/v1 (DRA).
    pub fn with_dra_api_served(mut self, served: bool) -> Self {
        self.dra_api_served = served;
        self
    }

    /// Whether the API server serves resource.k8s.io/v1 (DRA).
    pub fn dra_api_served(&self) -> bool {
        self.dra_api_served
    }

    /// ResourceClaims, ResourceSlices and DeviceClasses.
    pub fn dra(&self) -> &crate::types::dra::DraObjects {
        &self.dra
    }

    /// Adds runtime classes to a snapshot built with [`Self::from_node_infos`].
    pub fn with_runtime_classes(
        mut self,
        classes: impl IntoIterator<Item = RuntimeClassInfo>,
    ) -> Self {
        self.runtime_classes = Arc::new(
            classes
                .into_iter()
                .map(|c| (c.name.clone(), Arc::new(c)))
                .collect(),
        );
        self
    }

    /// Adds namespaces (name, labels) to a snapshot built with [`Self::from_node_infos`].
    pub fn with_namespaces<'a>(
        mut self,
        namespaces: impl IntoIterator<Item = (&'a str, &'a [(&'a str, &'a str)])>,
    ) -> Self {
        self.namespaces = Arc::new(
            namespaces
                .into_iter()
                .map(|(name, labels)| {
                    let labels = labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect();
                    (name.to_string(), Arc::new(labels))
                })
                .collect(),
        );
        self
    }

    /// Labels of a namespace the cache knows; `None` for unknown namespaces.
    pub fn namespace_labels(&self, name: &str) -> Option<&BTreeMap<String, String>> {
        self.namespaces.get(name).map(|l| &**l)
    }

    /// Same as [`Self::namespace_labels`], shared so plugins can keep it in their cycle state.
    pub fn namespace_labels_arc(&self, name: &str) -> Option<&Arc<BTreeMap<String, String>>> {
        self.namespaces.get(name)
    }

    /// Every known namespace with its labels, in no particular order.
    pub fn namespaces(&self) -> impl Iterator<Item = (&str, &BTreeMap<String, String>)> {
        self.namespaces.iter().map(|(n, l)| (n.as_str(), &**l))
    }

    /// Adds workload selectors to a snapshot built with [`Self::from_node_infos`].
    pub fn with_workload_selectors(mut self, workloads: WorkloadSelectors) -> Self {
        self.workloads = Arc::new(workloads);
        self
    }

    /// Selectors of Services, ReplicationControllers, ReplicaSets and StatefulSets.
    pub fn workload_selectors(&self) -> &WorkloadSelectors {
        &self.workloads
    }

    /// Adds PodDisruptionBudgets to a snapshot built with [`Self::from_node_infos`].
    pub fn with_pdbs(mut self, pdbs: impl IntoIterator<Item = PdbInfo>) -> Self {
        let mut list: Vec<Arc<PdbInfo>> = pdbs.into_iter().map(Arc::new).collect();
        list.sort_by(|a, b| a.key().cmp(&b.key()));
        self.pdbs = Arc::new(list);
        self
    }

    /// Every PodDisruptionBudget, sorted by namespace and name.
    pub fn pdbs(&self) -> &[Arc<PdbInfo>] {
        &self.pdbs
    }

    /// Adds storage objects to a snapshot built with [`Self::from_node_infos`].
    pub fn with_volumes(mut self, volumes: VolumeObjects) -> Self {
        self.volumes = volumes;
        self
    }

    /// Claims, volumes, storage classes, CSINodes, CSIDrivers and CSIStorageCapacities.
    pub fn volumes(&self) -> &VolumeObjects {
        &self.volumes
    }

    pub fn pvc(&self, namespace: &str, name: &str) -> Option<&Arc<PvcInfo>> {
        self.volumes.pvc(namespace, name)
    }

    pub fn pv(&self, name: &str) -> Option<&Arc<PvInfo>> {
        self.volumes.pv(name)
    }

    pub fn storage_class(&self, name: &str) -> Option<&Arc<StorageClassInfo>> {
        self.volumes.storage_class(name)
    }

    pub fn csi_node(&self, name: &str) -> Option<&Arc<CsiNodeInfo>> {
        self.volumes.csi_node(name)
    }

    pub fn node_infos(&self) -> &[Arc<NodeInfo>] {
        &self.node_infos
    }

    /// Each node's [`NodeSummary`], in the order of [`Self::node_infos`].
    pub fn summaries(&self) -> &[NodeSummary] {
        &self.summaries
    }

    /// Replaces the node at position `i` (same name) and its summary.
    pub(crate) fn set_node(&mut self, i: usize, node: Arc<NodeInfo>) {
        self.summaries[i] = NodeSummary::of(&node);
        self.node_infos[i] = node;
    }

    /// Replaces every node, in this order, with their summaries, and the name index.
    pub(crate) fn set_nodes(&mut self, nodes: Vec<Arc<NodeInfo>>) {
        self.summaries = nodes.iter().map(|n| NodeSummary::of(n)).collect();
        self.node_infos = nodes;
        self.reindex();
    }

    pub fn get(&self, name: &str) -> Option<&Arc<NodeInfo>> {
        self.position(name).map(|i| &self.node_infos[i])
    }

    /// The position of the node named `name` in [`Self::node_infos`].
    pub(crate) fn position(&self, name: &str) -> Option<usize> {
        self.index.get(&self.node_infos, name)
    }

    pub fn num_nodes(&self) -> usize {
        self.node_infos.len()
    }

    /// Nodes with at least one pod that has pod affinity or anti-affinity.
    pub fn have_pods_with_affinity(&self) -> impl Iterator<Item = &Arc<NodeInfo>> {
        self.with_affinity.iter().map(|&i| &self.node_infos[i])
    }

    /// Nodes with at least one pod that has required anti-affinity.
    pub fn have_pods_with_required_anti_affinity(&self) -> impl Iterator<Item = &Arc<NodeInfo>> {
        self.with_required_anti_affinity
            .iter()
            .map(|&i| &self.node_infos[i])
    }

    pub fn runtime_class(&self, name: &str) -> Option<&Arc<RuntimeClassInfo>> {
        self.runtime_classes.get(name)
    }

    /// Number of nodes in the snapshot's cache that report `image` (ImageLocality spread).
    pub fn image_num_nodes(&self, image: &str) -> usize {
        self.image_num_nodes.get(image).copied().unwrap_or(0)
    }

    /// The image counts and node total as a cheap, owned value (one `Arc` clone), for plugins
    /// that only see one node at a time.
    pub fn image_spread(&self) -> ImageSpread {
        ImageSpread {
            image_num_nodes: Arc::clone(&self.image_num_nodes),
            total_nodes: self.node_infos.len(),
        }
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    fn reindex(&mut self) {
        self.index = NameIndex::new(&self.node_infos);
    }

    pub(crate) fn rebuild_affinity_lists(&mut self) {
        let nodes = &self.node_infos;
        self.with_affinity = (0..nodes.len())
            .filter(|&i| !nodes[i].pods_with_affinity().is_empty())
            .collect();
        self.with_required_anti_affinity = (0..nodes.len())
            .filter(|&i| !nodes[i].pods_with_required_anti_affinity().is_empty())
            .collect();
    }
}
