//! Heap bytes the cache and snapshot hold per node and per pod, counted by a global
//! allocator (this test binary's own). The bounds catch a regression in the compact views'
//! layout; the figures are printed with `--nocapture` (docs/architecture.md, "Memory layout").

use std::alloc::System;
use std::sync::Arc;

use scheduler_core::bench_workloads;
use scheduler_core::cache::{Cache, Snapshot};
use scheduler_core::types::{NodeInfo, PodInfo};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Bytes live now, as far as this process's allocations go.
fn live() -> isize {
    let s = GLOBAL.stats();
    s.bytes_allocated as isize - s.bytes_deallocated as isize
}

const NODES: usize = 5000;
const PODS: usize = 3000;

/// (bytes per node in the cache, bytes per node added by a snapshot, bytes per bound pod).
fn measure() -> (isize, isize, isize) {
    let mut cache = Cache::new();
    let mut snapshot = Snapshot::new();
    // Warm the interners and the allocator-visible statics once.
    {
        let mut c = Cache::new();
        c.add_node(&bench_workloads::node(0));
        let mut s = Snapshot::new();
        c.update_snapshot(&mut s);
    }
    let before_nodes = live();
    for i in 0..NODES {
        cache.add_node(&bench_workloads::node(i));
    }
    let after_nodes = live();
    cache.update_snapshot(&mut snapshot);
    let after_snapshot = live();
    for i in 0..PODS {
        let mut p = bench_workloads::pod("default", &format!("pod-{i}"), &[("app", "bench")]);
        p.spec.as_mut().unwrap().node_name = Some(format!("node-{}", i % NODES));
        cache
            .add_pod(Arc::new(PodInfo::from_pod(&p)))
            .expect("pod added");
    }
    cache.update_snapshot(&mut snapshot);
    let after_pods = live();
    let per_node = (after_nodes - before_nodes) / NODES as isize;
    let per_node_snapshot = (after_snapshot - after_nodes) / NODES as isize;
    let per_pod = (after_pods - after_snapshot) / PODS as isize;
    drop((cache, snapshot));
    (per_node, per_node_snapshot, per_pod)
}

#[test]
fn heap_bytes_per_node_and_per_pod_stay_small() {
    let (per_node, per_node_snapshot, per_pod) = measure();
    println!(
        "heap per node {per_node} B (+{per_node_snapshot} B in the snapshot), per bound pod {per_pod} B; \
         size_of NodeInfo {} B, PodInfo {} B",
        std::mem::size_of::<NodeInfo>(),
        std::mem::size_of::<PodInfo>()
    );
    assert!(per_node > 0 && per_pod > 0, "the counter sees the cache");
    // Measured 597 / 103 / 995 bytes (749 / 158 / 1,035 before pod affinity lists, host
    // ports and claim counts moved out of line and the non-zero sums shrank to cpu and
    // memory; 1,323 / 78 / 1,893 with BTreeMap labels and every pod part inline); the
    // bounds leave a little room, not a second copy of anything.
    // The snapshot's 103 B per node: an 8 B handle, a 4 B position in the name index
    // (and the table's slack), and the node's 80 B NodeSummary (what Filter and Score
    // read, kept in one array for them).
    assert!(per_node <= 680, "heap per node {per_node} B");
    assert!(
        per_node_snapshot <= 130,
        "snapshot heap per node {per_node_snapshot} B: it shares the cache's NodeInfos"
    );
    assert!(per_pod <= 1_100, "heap per bound pod {per_pod} B");
    assert!(std::mem::size_of::<NodeInfo>() <= 272);
    assert!(std::mem::size_of::<PodInfo>() <= 696);
}
