//! The devices of the current ResourceSlices, indexed once per slice change and shared by
//! every pod's allocation: pools (newest generation, complete, valid), node-local slices by
//! node, the other slices, each device's id, each pool's shared counters and the devices
//! consuming them (partitionable devices; what is left of them depends on the attempt, see
//! `counters.rs`), and the results of device-class selectors per device (a class's
//! selectors give the same answer for a device until the class or the slice changes, so
//! they are evaluated once, not once per pod).
//!
//! Before this index each pod rebuilt the pools and cloned every device id in PreFilter and
//! evaluated the class selector on each candidate device in Filter: most of a DRA pod's
//! attempt (docs/plugins.md, "DynamicResources", the bench figures).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use crate::types::dra::{DeviceClassInfo, DeviceId, DeviceNodes, DraObjects, ResourceSliceInfo};

use super::allocator::counters::PoolCounters;

#[derive(Debug, Clone)]
pub(super) struct Pool {
    pub driver: String,
    pub name: String,
    pub incomplete: bool,
    /// Why the pool is invalid (duplicate device names); never used then.
    pub invalid: Option<String>,
}

impl Pool {
    pub fn id(&self) -> String {
        format!("{}/{}", self.driver, self.name)
    }
}

/// One slice of a pool's newest generation.
#[derive(Debug)]
pub(super) struct IndexedSlice {
    pub pool: usize,
    pub slice: Arc<ResourceSliceInfo>,
    /// The slice's devices' ids, in device order.
    pub ids: Vec<DeviceId>,
    /// The index-wide number of the slice's first device (class results are kept by it).
    pub first: usize,
}

/// A class's selector results, one per device of the index: unknown, no or yes.
#[derive(Debug)]
pub(super) struct ClassMatches {
    class: Arc<DeviceClassInfo>,
    results: Vec<AtomicU8>,
}

const UNKNOWN: u8 = 0;
const NO: u8 = 1;
const YES: u8 = 2;

impl ClassMatches {
    pub fn get(&self, device: usize) -> Option<bool> {
        match self.results.get(device)?.load(Ordering::Relaxed) {
            NO => Some(false),
            YES => Some(true),
            _ => None,
        }
    }

    pub fn set(&self, device: usize, matches: bool) {
        if let Some(r) = self.results.get(device) {
            r.store(if matches { YES } else { NO }, Ordering::Relaxed);
        }
    }
}

#[derive(Debug)]
pub(super) struct DeviceIndex {
    /// The slice map this index was built from (kept, so a pointer comparison says whether
    /// the snapshot's slices are still these).
    source: Arc<BTreeMap<String, Arc<ResourceSliceInfo>>>,
    pub pools: Vec<Pool>,
    /// Node-local slices by node name, sorted by pool then slice name.
    pub local: HashMap<String, Vec<IndexedSlice>>,
    /// Slices with a node selector, `allNodes` or per-device node selection.
    pub shared: Vec<IndexedSlice>,
    /// Per pool index: its counter sets and their consumers, for pools with devices
    /// consuming counters (from every slice of the newest generation, wherever the sets
    /// are published).
    pub counters: HashMap<usize, PoolCounters>,
    devices: usize,
    classes: Mutex<HashMap<String, Arc<ClassMatches>>>,
}

impl DeviceIndex {
    pub fn build(objects: &DraObjects) -> Self {
        // Newest generation per pool, and how many of its slices exist cluster-wide.
        let mut newest: BTreeMap<(&str, &str), (i64, i64, i64)> = BTreeMap::new();
        for s in objects.slices() {
            let e = newest
                .entry((s.driver.as_str(), s.pool.as_str()))
                .or_insert((s.pool_generation, 0, s.pool_slice_count));
            if s.pool_generation > e.0 {
                *e = (s.pool_generation, 0, s.pool_slice_count);
            }
            if s.pool_generation == e.0 {
                e.1 += 1;
            }
        }
        let mut pools = Vec::new();
        let mut index = HashMap::new();
        for ((driver, name), (_, seen, want)) in &newest {
            index.insert((*driver, *name), pools.len());
            pools.push(Pool {
                driver: driver.to_string(),
                name: name.to_string(),
                incomplete: seen != want,
                invalid: None,
            });
        }
        let mut names: Vec<HashSet<&str>> = vec![HashSet::new(); pools.len()];
        let mut local: HashMap<String, Vec<IndexedSlice>> = HashMap::new();
        let mut shared = Vec::new();
        let mut devices = 0;
        let mut current: Vec<Vec<&ResourceSliceInfo>> = vec![Vec::new(); pools.len()];
        for s in objects.slices() {
            let key = (s.driver.as_str(), s.pool.as_str());
            let i = index[&key];
            if s.pool_generation != newest[&key].0 {
                continue; // outdated
            }
            current[i].push(s);
            for d in &s.devices {
                if !names[i].insert(d.name.as_str()) && pools[i].invalid.is_none() {
                    pools[i].invalid = Some(format!("duplicate device name {}", d.name));
                }
            }
            let entry = IndexedSlice {
                pool: i,
                slice: s.clone(),
                ids: s
                    .devices
                    .iter()
                    .map(|d| DeviceId {
                        driver: s.driver.clone(),
                        pool: s.pool.clone(),
                        device: d.name.clone(),
                    })
                    .collect(),
                first: devices,
            };
            devices += s.devices.len();
            match &s.nodes {
                DeviceNodes::Node(n) => local.entry(n.clone()).or_default().push(entry),
                DeviceNodes::Nowhere => {}
                _ => shared.push(entry),
            }
        }
        let order = |a: &IndexedSlice, b: &IndexedSlice| {
            (a.pool, &a.slice.name).cmp(&(b.pool, &b.slice.name))
        };
        for v in local.values_mut() {
            v.sort_by(order);
        }
        shared.sort_by(order);
        let counters = current
            .into_iter()
            .enumerate()
            .filter_map(|(i, s)| PoolCounters::of(s).map(|c| (i, c)))
            .collect();
        DeviceIndex {
            source: objects.slices.clone(),
            pools,
            local,
            shared,
            counters,
            devices,
            classes: Mutex::default(),
        }
    }

    /// The class's selector results for this index's devices (fresh when the class changed).
    pub fn class_matches(&self, class: &Arc<DeviceClassInfo>) -> Arc<ClassMatches> {
        let mut classes = self.classes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = classes.get(&class.name)
            && Arc::ptr_eq(&m.class, class)
        {
            return m.clone();
        }
        let m = Arc::new(ClassMatches {
            class: class.clone(),
            results: (0..self.devices).map(|_| AtomicU8::new(UNKNOWN)).collect(),
        });
        classes.insert(class.name.clone(), m.clone());
        m
    }
}

/// The index of the snapshot's slices, rebuilt only when they changed.
#[derive(Debug, Default)]
pub(super) struct IndexCache {
    current: Mutex<Option<Arc<DeviceIndex>>>,
}

impl IndexCache {
    pub fn get(&self, objects: &DraObjects) -> Arc<DeviceIndex> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = current.as_ref()
            && Arc::ptr_eq(&i.source, &objects.slices)
        {
            return i.clone();
        }
        let i = Arc::new(DeviceIndex::build(objects));
        *current = Some(i.clone());
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench_workloads::{dra_device_class, dra_node_slice};

    fn objects(nodes: usize) -> DraObjects {
        let mut o = DraObjects::default();
        o.update_class(&dra_device_class());
        for i in 0..nodes {
            o.update_slice(&dra_node_slice(i));
        }
        o
    }

    /// The index is kept while the slices are the same map and rebuilt when one changes;
    /// class results are kept per class view, so a class update starts them afresh.
    #[test]
    fn rebuilt_on_slice_change_class_results_reset_on_class_change() {
        let cache = IndexCache::default();
        let mut o = objects(2);
        let a = cache.get(&o);
        assert!(Arc::ptr_eq(&a, &cache.get(&o.clone())));
        assert_eq!(a.local.len(), 2);
        assert_eq!(
            a.local["node-0"][0].ids.len(),
            a.local["node-0"][0].slice.devices.len()
        );

        let class = o.classes.values().next().unwrap().clone();
        let m = a.class_matches(&class);
        assert_eq!(m.get(3), None);
        m.set(3, true);
        assert_eq!(a.class_matches(&class).get(3), Some(true));
        // The same class object again: the same results. A new view of it: fresh ones.
        o.update_class(&dra_device_class());
        let class2 = o.classes.values().next().unwrap().clone();
        assert!(!Arc::ptr_eq(&class, &class2));
        assert_eq!(a.class_matches(&class2).get(3), None);

        o.update_slice(&dra_node_slice(2));
        let b = cache.get(&o);
        assert!(!Arc::ptr_eq(&a, &b));
        assert_eq!(b.local.len(), 3);
    }
}
