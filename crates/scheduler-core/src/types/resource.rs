//! Aggregated resource amounts (upstream `framework.Resource`).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;

use super::quantity::{Quantity, parse_quantity};
use crate::k8s_names::is_qualified_name;

/// Interned resource name, cheap to clone into every pod and node.
pub type ResourceName = Arc<str>;

pub const RESOURCE_CPU: &str = "cpu";
pub const RESOURCE_MEMORY: &str = "memory";
pub const RESOURCE_EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub const RESOURCE_PODS: &str = "pods";
pub const HUGEPAGES_PREFIX: &str = "hugepages-";
pub const ATTACHABLE_VOLUMES_PREFIX: &str = "attachable-volumes-";

/// Scheduler default for a container whose cpu request is unset (upstream `DefaultMilliCPURequest`).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// Scheduler default for a container whose memory request is unset: 200Mi.
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// Whether `name` is tracked in [`Resource::scalar`]: extended resources (`vendor/name`),
/// hugepages, attachable volumes and `kubernetes.io/`-prefixed native ones, as upstream's
/// `IsScalarResourceName`.
pub fn is_scalar_resource_name(name: &str) -> bool {
    name.starts_with(HUGEPAGES_PREFIX)
        || name.starts_with(ATTACHABLE_VOLUMES_PREFIX)
        || name.contains("kubernetes.io/")
        || is_extended_resource_name(name)
}

/// Upstream `IsExtendedResourceName`: a non-native, prefixed name that is also a valid quota
/// key once `requests.` is put in front.
pub fn is_extended_resource_name(name: &str) -> bool {
    if !name.contains('/') || name.contains("kubernetes.io/") || name.starts_with("requests.") {
        return false;
    }
    is_qualified_name(&format!("requests.{name}"))
}

/// Milli-CPU and memory only: what the non-zero request sums hold (upstream's
/// `NonZeroRequested` never counts anything else), in 16 bytes instead of a whole
/// [`Resource`] in every node and pod.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct CpuMemory {
    pub milli_cpu: i64,
    pub memory: i64,
}

impl CpuMemory {
    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0 && self.memory == 0
    }

    pub fn saturating_add(&mut self, other: &CpuMemory) {
        self.milli_cpu = self.milli_cpu.saturating_add(other.milli_cpu);
        self.memory = self.memory.saturating_add(other.memory);
    }
}

/// `repr(C)`: the scalars Filter compares for every node come first, so they sit in
/// [`NodeInfo`](crate::types::NodeInfo)'s first cache lines.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct Resource {
    pub milli_cpu: i64,
    pub memory: i64,
    pub ephemeral_storage: i64,
    pub allowed_pod_number: i64,
    /// Sorted by name; few entries, so a Vec beats a map.
    pub scalar: Vec<(ResourceName, i64)>,
}

impl Resource {
    pub fn new() -> Self {
        Self::default()
    }

    /// Upstream `NewResource`: cpu in milli, everything else via `Value()`; unknown non-scalar
    /// names are ignored and malformed quantities skipped (see [`Self::try_from_resource_list`]).
    pub fn from_resource_list(list: &BTreeMap<String, K8sQuantity>) -> Self {
        Self::try_from_resource_list(list).0
    }

    /// Like [`Self::from_resource_list`] but also returns one message per malformed quantity.
    pub fn try_from_resource_list(list: &BTreeMap<String, K8sQuantity>) -> (Self, Vec<String>) {
        let mut r = Resource::default();
        let mut problems = Vec::new();
        for (name, q) in list {
            match parse_quantity(&q.0) {
                Ok(q) => r.add_quantity(name, q),
                Err(e) => problems.push(format!("invalid quantity {:?} for {name}: {e}", q.0)),
            }
        }
        (r, problems)
    }

    /// Adds one named quantity with upstream's per-resource rounding.
    pub fn add_quantity(&mut self, name: &str, q: Quantity) {
        match name {
            RESOURCE_CPU => self.milli_cpu = self.milli_cpu.saturating_add(q.milli_value()),
            RESOURCE_MEMORY => self.memory = self.memory.saturating_add(q.value()),
            RESOURCE_PODS => {
                self.allowed_pod_number = self.allowed_pod_number.saturating_add(q.value())
            }
            RESOURCE_EPHEMERAL_STORAGE => {
                self.ephemeral_storage = self.ephemeral_storage.saturating_add(q.value())
            }
            _ if is_scalar_resource_name(name) => self.add_scalar(name, q.value()),
            _ => {}
        }
    }

    pub fn add(&mut self, other: &Resource) {
        self.milli_cpu += other.milli_cpu;
        self.memory += other.memory;
        self.ephemeral_storage += other.ephemeral_storage;
        self.allowed_pod_number += other.allowed_pod_number;
        for (name, v) in &other.scalar {
            self.add_scalar_named(name, *v);
        }
    }

    /// [`Self::add`] that saturates: for sums over many nodes (a dump may give one node 8Ei).
    pub fn saturating_add(&mut self, other: &Resource) {
        self.milli_cpu = self.milli_cpu.saturating_add(other.milli_cpu);
        self.memory = self.memory.saturating_add(other.memory);
        self.ephemeral_storage = self
            .ephemeral_storage
            .saturating_add(other.ephemeral_storage);
        self.allowed_pod_number = self
            .allowed_pod_number
            .saturating_add(other.allowed_pod_number);
        for (name, v) in &other.scalar {
            match self.scalar.binary_search_by(|(n, _)| n.cmp(name)) {
                Ok(i) => self.scalar[i].1 = self.scalar[i].1.saturating_add(*v),
                Err(i) => self.scalar.insert(i, (name.clone(), *v)),
            }
        }
    }

    pub fn sub(&mut self, other: &Resource) {
        self.milli_cpu -= other.milli_cpu;
        self.memory -= other.memory;
        self.ephemeral_storage -= other.ephemeral_storage;
        self.allowed_pod_number -= other.allowed_pod_number;
        for (name, v) in &other.scalar {
            self.add_scalar_named(name, -*v);
        }
    }

    /// Element-wise max. Like upstream `SetMaxResource`, the pod count is left alone.
    pub fn set_max(&mut self, other: &Resource) {
        self.milli_cpu = self.milli_cpu.max(other.milli_cpu);
        self.memory = self.memory.max(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(other.ephemeral_storage);
        for (name, v) in &other.scalar {
            let cur = self.scalar_value(name);
            self.set_scalar_named(name, cur.max(*v));
        }
    }

    /// Amount of `name`: cpu in milli-cores, `pods` as the pod count, others in units.
    pub fn get(&self, name: &str) -> i64 {
        match name {
            RESOURCE_CPU => self.milli_cpu,
            RESOURCE_MEMORY => self.memory,
            RESOURCE_EPHEMERAL_STORAGE => self.ephemeral_storage,
            RESOURCE_PODS => self.allowed_pod_number,
            _ => self.scalar_value(name),
        }
    }

    pub fn scalar_value(&self, name: &str) -> i64 {
        match self.scalar.binary_search_by(|(n, _)| (**n).cmp(name)) {
            Ok(i) => self.scalar[i].1,
            Err(_) => 0,
        }
    }

    pub fn add_scalar(&mut self, name: &str, v: i64) {
        match self.scalar.binary_search_by(|(n, _)| (**n).cmp(name)) {
            Ok(i) => self.scalar[i].1 += v,
            Err(i) => self.scalar.insert(i, (Arc::from(name), v)),
        }
    }

    pub fn set_scalar(&mut self, name: &str, v: i64) {
        match self.scalar.binary_search_by(|(n, _)| (**n).cmp(name)) {
            Ok(i) => self.scalar[i].1 = v,
            Err(i) => self.scalar.insert(i, (Arc::from(name), v)),
        }
    }

    // Same as the `&str` versions but reuse the existing Arc instead of allocating.
    fn add_scalar_named(&mut self, name: &ResourceName, v: i64) {
        match self.scalar.binary_search_by(|(n, _)| n.cmp(name)) {
            Ok(i) => self.scalar[i].1 += v,
            Err(i) => self.scalar.insert(i, (name.clone(), v)),
        }
    }

    fn set_scalar_named(&mut self, name: &ResourceName, v: i64) {
        match self.scalar.binary_search_by(|(n, _)| n.cmp(name)) {
            Ok(i) => self.scalar[i].1 = v,
            Err(i) => self.scalar.insert(i, (name.clone(), v)),
        }
    }

    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.allowed_pod_number == 0
            && self.scalar.iter().all(|(_, v)| *v == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[(&str, &str)]) -> BTreeMap<String, K8sQuantity> {
        items
            .iter()
            .map(|(k, v)| (k.to_string(), K8sQuantity(v.to_string())))
            .collect()
    }

    #[test]
    fn from_list_rounds_per_resource_and_filters_names() {
        let r = Resource::from_resource_list(&list(&[
            ("cpu", "1.5"),
            ("memory", "1.5Ki"),
            ("ephemeral-storage", "1k"),
            ("pods", "110"),
            ("nvidia.com/gpu", "2"),
            ("hugepages-2Mi", "4Mi"),
            ("attachable-volumes-aws-ebs", "39"),
            ("storage", "10Gi"),
            ("bogus", "1"),
        ]));
        assert_eq!(r.milli_cpu, 1500);
        assert_eq!(r.memory, 1536);
        assert_eq!(r.ephemeral_storage, 1000);
        assert_eq!(r.allowed_pod_number, 110);
        assert_eq!(r.get("nvidia.com/gpu"), 2);
        assert_eq!(r.get("hugepages-2Mi"), 4 << 20);
        assert_eq!(r.get("attachable-volumes-aws-ebs"), 39);
        assert_eq!(r.get("storage"), 0);
        assert_eq!(r.scalar.len(), 3);
        let names: Vec<&str> = r.scalar.iter().map(|(n, _)| &**n).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
    }

    #[test]
    fn bad_quantity_is_reported_not_fatal() {
        let (r, problems) =
            Resource::try_from_resource_list(&list(&[("cpu", "1x"), ("memory", "1")]));
        assert_eq!(r.memory, 1);
        assert_eq!(problems.len(), 1);
    }

    #[test]
    fn add_sub_max() {
        let mut a = Resource::from_resource_list(&list(&[("cpu", "1"), ("example.com/a", "1")]));
        let b = Resource::from_resource_list(&list(&[("cpu", "2"), ("example.com/b", "3")]));
        a.add(&b);
        assert_eq!(
            (a.milli_cpu, a.get("example.com/a"), a.get("example.com/b")),
            (3000, 1, 3)
        );
        a.sub(&b);
        assert_eq!((a.milli_cpu, a.get("example.com/b")), (1000, 0));
        assert!(!a.is_zero());
        a.set_max(&b);
        assert_eq!(
            (a.milli_cpu, a.get("example.com/a"), a.get("example.com/b")),
            (2000, 1, 3)
        );
        assert!(Resource::default().is_zero());
    }

    #[test]
    fn scalar_name_rules() {
        assert!(is_scalar_resource_name("nvidia.com/gpu"));
        assert!(is_scalar_resource_name("hugepages-1Gi"));
        assert!(is_scalar_resource_name("kubernetes.io/foo"));
        assert!(!is_scalar_resource_name("cpu"));
        assert!(!is_scalar_resource_name("requests.example.com/x"));
        assert!(!is_scalar_resource_name("example.com/bad name"));
    }
}
