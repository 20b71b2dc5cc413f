//! Start-up from lists at 50,000 nodes: the cache filled from the initial node and bound-pod
//! lists (views built, as the informers do) and the first snapshot taken. The API objects
//! are made before timing. Peak memory and the 1,000,000-pod case are `ferrosched bench
//! --bound-pods` figures (benches/reports/2026-11-27-scale-50k-in-memory.md).

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use k8s_openapi::api::core::v1 as core;
use scheduler_core::bench_workloads::{self, Runner};

const NODES: usize = 50_000;
const BOUND_PODS: usize = 100_000;

fn bench(c: &mut Criterion) {
    let w = bench_workloads::build("SchedulingBasic", NODES, 0, 0).expect("known workload");
    let pods: Vec<core::Pod> = (0..BOUND_PODS)
        .map(|i| bench_workloads::bound_pod(i, &format!("node-{}", i % NODES)))
        .collect();
    let mut group = c.benchmark_group("startup_from_lists");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(10));
    group.bench_function("50000_nodes_100000_bound_pods", |b| {
        // Dropping 150,000 views is not start-up: outside the timing.
        b.iter_with_large_drop(|| {
            let mut r = Runner::without_nodes(&w);
            r.load_nodes(&w.nodes);
            r.load_bound_pods(&pods);
            r.cache.update_snapshot(&mut r.snapshot);
            r
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
