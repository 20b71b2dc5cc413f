//! What decoding one watched pod costs the pod informer, as lean JSON and as protobuf: the
//! same watch events captured from a real kube-apiserver v1.28.7 in both encodings
//! (`crates/controller/src/informers/proto/testdata/pod-watch.*`: a bind, a create, a
//! status change of rich pods with managedFields). Per event: frame or line in, pod out.

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;

use controller::bench_support::{json_watch_pod, protobuf_frames, protobuf_watch_pod};

const WATCH_PB: &[u8] =
    include_bytes!("../../crates/controller/src/informers/proto/testdata/pod-watch.pb");
const WATCH_JSON: &str =
    include_str!("../../crates/controller/src/informers/proto/testdata/pod-watch.json");

fn bench(c: &mut Criterion) {
    let frames = protobuf_frames(WATCH_PB);
    let lines: Vec<&str> = WATCH_JSON.lines().collect();
    // The three pod events (the bookmarks that follow carry no pod).
    for (i, name) in [(0, "modified_bind"), (1, "added"), (2, "modified_status")] {
        let (frame, line) = (&frames[i], lines[i].as_bytes());
        assert_eq!(
            protobuf_watch_pod(frame),
            json_watch_pod(line),
            "both encodings give the same pod"
        );
        c.bench_function(&format!("pod_decode/{name}/json_lean"), |b| {
            b.iter(|| json_watch_pod(black_box(line)))
        });
        c.bench_function(&format!("pod_decode/{name}/protobuf"), |b| {
            b.iter(|| protobuf_watch_pod(black_box(frame)))
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
