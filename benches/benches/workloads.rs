//! scheduler_perf-like workloads on 5,000 nodes, the cases that must stay fast: time per scheduled pod
//! with pod anti-affinity, pod affinity, topology spreading and preemption, plus the basic
//! workload for reference. The cluster keeps growing across iterations, as in scheduler_perf
//! where measured pods accumulate.
//!
//! `workload_scheduling_5000_nodes`: time per gang (one pod group cycle, all its pods placed
//! and bound) for upstream's `podgroup/` workloads, by gang size; criterion's throughput is
//! in pods.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use scheduler_core::bench_workloads::{self, Runner};
use scheduler_core::types::PodInfo;

const NODES: usize = 5_000;
/// Enough measured pods for criterion's warm-up and samples at these speeds.
const POOL: usize = 12_000;

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("workloads_5000_nodes");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    for name in [
        "SchedulingBasic",
        "PodAntiAffinity",
        "PodAffinity",
        "TopologySpreading",
        "PreemptionBasic",
    ] {
        let w = bench_workloads::build(name, NODES, 1_000, POOL).expect("known workload");
        let mut runner = Runner::new(&w);
        for p in &w.init_pods {
            runner.schedule(&Arc::new(PodInfo::from_pod(p)));
        }
        let pods: Vec<Arc<PodInfo>> = w
            .measured_pods
            .iter()
            .map(|p| Arc::new(PodInfo::from_pod(p)))
            .collect();
        let mut next = 0usize;
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    let pod = &pods[next % pods.len()];
                    next += 1;
                    std::hint::black_box(runner.schedule(pod));
                }
                start.elapsed()
            })
        });
    }
    group.finish();
}

/// (workload, gang size, gangs): enough gangs for criterion's warm-up and samples at these
/// speeds (at least 55 iterations for the slowest), within the cluster's room (5,000 nodes
/// take 200,000 such pods).
const GANGS: [(&str, usize, usize); 3] = [
    ("GangScheduling", 100, 1_000),
    ("GangScheduling", 1_000, 120),
    ("TopologyAwareScheduling", 4, 3_000),
];

fn bench_groups(c: &mut Criterion) {
    let mut group = c.benchmark_group("workload_scheduling_5000_nodes");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for (name, size, gangs) in GANGS {
        let w = bench_workloads::build_group(name, NODES, 0, size * gangs, Some(size))
            .expect("known workload");
        let mut runner = Runner::new(&w);
        let pods = bench_workloads::views(&w.measured_pods);
        drop(w);
        runner.admit(&pods);
        // The workload lists each gang's pods together.
        let mut next = pods.chunks(size);
        group.throughput(Throughput::Elements(size as u64));
        group.bench_function(BenchmarkId::new(name, size), |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    let gang = next.next().expect("more gangs: raise GANGS' count");
                    let placed = runner.schedule_queue(gang, |_, _| {});
                    assert_eq!(placed, size, "every gang fits");
                }
                start.elapsed()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench, bench_groups);
criterion_main!(benches);
