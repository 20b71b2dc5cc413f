//! Timing probe for the snapshot design; ignored by default, run with
//! `cargo test --release -p scheduler-core --test cache_perf -- --ignored --nocapture`.

use std::sync::Arc;
use std::time::Instant;

use scheduler_core::cache::{Cache, Snapshot};
use scheduler_core::types::*;

fn realistic_node(i: usize) -> k8s_openapi::api::core::v1::Node {
    let mut b = NodeInfo::test(&format!("node-{i}"))
        .cpu("32")
        .memory("128Gi")
        .pods(110)
        .label("topology.kubernetes.io/zone", &format!("zone-{}", i % 3))
        .taint("dedicated", "batch", "PreferNoSchedule");
    for l in 0..15 {
        b = b.label(&format!("example.com/label-{l}"), "some-value");
    }
    for img in 0..50 {
        b = b.image(
            &format!(
                "registry.example.com/team/app-{}:v{}",
                (i + img) % 400,
                img % 3
            ),
            100 << 20,
        );
    }
    b.build_node()
}

#[test]
#[ignore]
fn snapshot_timings() {
    const NODES: usize = 5_000;
    const PODS: usize = 30_000;
    let mut c = Cache::new();
    let t = Instant::now();
    for i in 0..NODES {
        c.add_node(&realistic_node(i));
    }
    let pods: Vec<Arc<PodInfo>> = (0..PODS)
        .map(|i| {
            Arc::new(
                PodInfo::test("ns", &format!("p{i}"))
                    .cpu("250m")
                    .memory("512Mi")
                    .label("app", "x")
                    .node(&format!("node-{}", i % NODES))
                    .build(),
            )
        })
        .collect();
    for p in &pods {
        c.add_pod(p.clone()).unwrap();
    }
    println!("fill {NODES} nodes / {PODS} pods: {:?}", t.elapsed());

    let t = Instant::now();
    let mut s = Snapshot::new();
    c.update_snapshot(&mut s);
    println!("first snapshot: {:?}", t.elapsed());

    // A scheduling cycle: assume one pod, then refresh the snapshot.
    let rounds = 2_000;
    let t = Instant::now();
    for r in 0..rounds {
        let p = Arc::new(PodInfo::test("new", &format!("q{r}")).cpu("100m").build());
        c.assume_pod(p, &format!("node-{}", (r * 7) % NODES))
            .unwrap();
        let u = c.update_snapshot(&mut s);
        assert_eq!(u.changed_nodes, 1);
    }
    println!(
        "assume + update_snapshot (copy-on-write): {:?} per cycle",
        t.elapsed() / rounds as u32
    );

    // Alternative design: cache keeps plain NodeInfo, snapshot deep-clones changed nodes.
    let info: NodeInfo = (**c.node_info("node-1").unwrap()).clone();
    let t = Instant::now();
    for _ in 0..rounds {
        std::hint::black_box(Arc::new(info.clone()));
    }
    println!("one NodeInfo deep clone: {:?}", t.elapsed() / rounds as u32);

    let t = Instant::now();
    for _ in 0..20 {
        let mut s = Snapshot::new();
        c.update_snapshot(&mut s);
        std::hint::black_box(&s);
    }
    println!("full rebuild (node added/removed): {:?}", t.elapsed() / 20);
}
