//! One scheduling cycle with the default profile on 5,000 nodes holding 30,000 pods:
//! snapshot update, PreFilter, Filter (until enough feasible nodes), PreScore, Score,
//! selection, Reserve/Permit/Bind decision, then assume in the cache. The pod is forgotten
//! afterwards so every iteration sees the same cluster.

use criterion::{Criterion, criterion_group, criterion_main};
use ferrosched_benches::{cluster, pending_pod};
use scheduler_core::cache::Snapshot;
use scheduler_core::config;
use scheduler_core::framework::{NominatedPods, ProfileRegistry, Registry};
use scheduler_core::schedule_one::{Decision, SchedulingAlgorithm, schedule_one};

fn bench(c: &mut Criterion) {
    let loaded = config::from_flags(None, None).expect("default config");
    let profiles = ProfileRegistry::new(&loaded.profiles, &Registry::in_tree()).expect("builds");
    let fw = profiles.for_scheduler_name("").expect("default profile");
    let mut group = c.benchmark_group("scheduling_cycle");
    for (nodes, pods) in [(500, 3_000), (5_000, 30_000)] {
        let mut cache = cluster(nodes, pods);
        let mut snapshot = Snapshot::new();
        cache.update_snapshot(&mut snapshot);
        let nominated = NominatedPods::new();
        // `_metrics`: what `ferrosched run` does, extension points timed every cycle and
        // plugins on one cycle in ten (`SchedulingAlgorithm::set_record_metrics`).
        for (name, metrics) in [
            ("default_profile", false),
            ("default_profile_metrics", true),
        ] {
            let mut alg = SchedulingAlgorithm::new(0, 1);
            alg.set_record_metrics(metrics);
            let mut i = 0usize;
            group.bench_function(format!("{name}/{nodes}_nodes_{pods}_pods"), |b| {
                b.iter(|| {
                    i += 1;
                    let pod = pending_pod(i);
                    cache.update_snapshot(&mut snapshot);
                    let decision = schedule_one(fw, &mut alg, &pod, &snapshot, &nominated);
                    std::hint::black_box(alg.take_cycle_timings());
                    match decision {
                        Decision::Bind { node, pod, .. } => {
                            let key = pod.key().clone();
                            cache.assume_pod(pod, &node).expect("assume");
                            cache.forget_pod(&key).expect("forget");
                        }
                        other => panic!("pod did not fit: {other:?}"),
                    }
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
