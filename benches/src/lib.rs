//! Shared setup for the criterion benchmarks: clusters of realistic size built in memory.
#![forbid(unsafe_code)]

use std::sync::Arc;

use scheduler_core::bench_workloads;
use scheduler_core::cache::Cache;
use scheduler_core::types::PodInfo;

/// `nodes` scheduler_perf-style nodes (4 CPU, 32Gi, 110 pods, 3 zones) holding `pods` bound
/// pods of 100m / 500Mi, spread round-robin.
pub fn cluster(nodes: usize, pods: usize) -> Cache {
    let mut cache = Cache::new();
    for i in 0..nodes {
        cache.add_node(&bench_workloads::node(i));
    }
    for i in 0..pods {
        let mut p = bench_workloads::pod("existing", &format!("p-{i}"), &[("app", "existing")]);
        p.spec.as_mut().expect("spec").node_name = Some(format!("node-{}", i % nodes));
        cache
            .add_pod(Arc::new(PodInfo::from_pod(&p)))
            .expect("unique pods");
    }
    cache
}

/// A pending pod like scheduler_perf's default one.
pub fn pending_pod(i: usize) -> Arc<PodInfo> {
    Arc::new(PodInfo::from_pod(&bench_workloads::pod(
        "bench",
        &format!("new-{i}"),
        &[],
    )))
}
