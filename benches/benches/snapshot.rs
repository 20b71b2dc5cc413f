//! The per-cycle cost of keeping the snapshot current on 5,000 nodes / 30,000 pods: one
//! pod assumed and the snapshot updated, then forgotten and updated again (two one-node
//! changes). Also the full rebuild that happens when a node is added or removed.

use criterion::{Criterion, criterion_group, criterion_main};
use ferrosched_benches::{cluster, pending_pod};
use scheduler_core::cache::Snapshot;

fn bench(c: &mut Criterion) {
    let mut cache = cluster(5_000, 30_000);
    let mut snapshot = Snapshot::new();
    cache.update_snapshot(&mut snapshot);
    let mut i = 0usize;
    c.bench_function(
        "snapshot/assume_update_forget_update/5000_nodes_30000_pods",
        |b| {
            b.iter(|| {
                i += 1;
                let pod = pending_pod(i);
                let key = pod.key().clone();
                cache
                    .assume_pod(pod, &format!("node-{}", (i * 7) % 5_000))
                    .expect("assume");
                cache.update_snapshot(&mut snapshot);
                cache.forget_pod(&key).expect("forget");
                cache.update_snapshot(&mut snapshot);
            })
        },
    );
    c.bench_function("snapshot/full_rebuild/5000_nodes_30000_pods", |b| {
        b.iter(|| {
            let mut s = Snapshot::new();
            cache.update_snapshot(&mut s);
            s
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
