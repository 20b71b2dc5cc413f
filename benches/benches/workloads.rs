//! scheduler_perf-like workloads on 5,000 nodes, the cases that must stay fast: time per scheduled pod
//! with pod anti-affinity, pod affinity, topology spreading and preemption, plus the basic
//! workload for reference. The cluster keeps growing across iterations, as in scheduler_perf
//! where measured pods accumulate.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
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

criterion_group!(benches, bench);
criterion_main!(benches);
