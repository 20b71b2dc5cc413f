//! Pods from protobuf against bodies captured from a real kube-apiserver v1.28.7: two rich
//! pods (made from `lean/testdata/rich-pod.json` with the fields 1.28 accepts; one pending
//! and gated, one bound), listed at resourceVersion 0 and watched once as protobuf and once
//! as JSON (`testdata/pod-*`; the watch has a bind, a create, a status change and
//! bookmarks). Each protobuf decode must give exactly the pod the lean JSON decode gives,
//! and so the same scheduler views. Then the fake API server's encoding of a pod with
//! every field of v1.37 (`lean/testdata/rich-pod.json`), through the informer's source.

use k8s_openapi::api::core::v1::Pod;
use kube::core::{ObjectList, WatchEvent};
use scheduler_core::types::PodInfo;

use super::wire::encode::Msg;
use super::*;
use crate::informers::lean::Lean;
use crate::state::{is_terminal, scheduled_condition};

const LIST_PB: &[u8] = include_bytes!("testdata/pod-list.pb");
const LIST_JSON: &str = include_str!("testdata/pod-list.json");
const WATCH_PB: &[u8] = include_bytes!("testdata/pod-watch.pb");
const WATCH_JSON: &str = include_str!("testdata/pod-watch.json");
const RICH_POD: &str = include_str!("../lean/testdata/rich-pod.json");

fn pod(b: &[u8]) -> wire::Result<Lean<Pod>> {
    super::pod::pod(b)
}

/// The paths where two pods differ, for a readable failure.
fn differences(a: &Pod, b: &Pod) -> Vec<String> {
    fn walk(a: &serde_json::Value, b: &serde_json::Value, path: String, out: &mut Vec<String>) {
        use serde_json::Value::{Array, Object};
        match (a, b) {
            (Object(x), Object(y)) => {
                for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                    let null = serde_json::Value::Null;
                    let (va, vb) = (x.get(k).unwrap_or(&null), y.get(k).unwrap_or(&null));
                    walk(va, vb, format!("{path}.{k}"), out);
                }
            }
            (Array(x), Array(y)) if x.len() == y.len() => {
                for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                    walk(va, vb, format!("{path}[{i}]"), out);
                }
            }
            _ if a != b => out.push(format!("{path}: {a} != {b}")),
            _ => {}
        }
    }
    let mut out = Vec::new();
    let (a, b) = (
        serde_json::to_value(a).unwrap(),
        serde_json::to_value(b).unwrap(),
    );
    walk(&a, &b, String::new(), &mut out);
    out
}

/// Everything the informer's consumers derive from a pod.
fn views(p: &Pod) -> String {
    format!(
        "{:#?}\nterminal: {}\nscheduled: {:?}",
        PodInfo::from_pod(p),
        is_terminal(p),
        scheduled_condition(p)
    )
}

#[test]
fn listed_pods_decode_from_protobuf_exactly_as_from_json() {
    let json: ObjectList<Lean<Pod>> = serde_json::from_str(LIST_JSON).unwrap();
    assert_eq!(json.items.len(), 2);
    for chunk in [5, 333, 4096, LIST_PB.len()] {
        let (items, resource_version, next) = source::decode_list(LIST_PB, chunk, pod).unwrap();
        for (p, j) in items.iter().zip(&json.items) {
            assert_eq!(
                differences(&p.0, &j.0),
                Vec::<String>::new(),
                "chunk {chunk}"
            );
        }
        assert_eq!(items, json.items, "chunk {chunk}");
        assert_eq!(Some(resource_version), json.metadata.resource_version);
        assert_eq!(next, None);
    }
    let (items, ..) = source::decode_list(LIST_PB, 4096, pod).unwrap();
    for (p, j) in items.iter().zip(&json.items) {
        assert_eq!(views(&p.0), views(&j.0));
    }
    // The decode kept what the scheduler reads, not just empty values on both sides.
    let p = &items[0].0;
    let spec = p.spec.as_ref().unwrap();
    let tolerations = spec.tolerations.as_ref().unwrap();
    assert_eq!(tolerations[0].toleration_seconds, Some(300));
    assert_eq!(tolerations[1].value.as_deref(), Some("web"));
    assert_eq!(tolerations[1].toleration_seconds, None);
    let spread = spec.topology_spread_constraints.as_ref().unwrap();
    assert_eq!(spread[0].min_domains, Some(2));
    assert_eq!(spread[0].node_taints_policy.as_deref(), Some("Ignore"));
    assert_eq!(spread[1].min_domains, None);
    assert_eq!(spread[1].max_skew, 3);
    // Of fourteen volumes, the nine with a source the volume plugins read are kept.
    let volumes = spec.volumes.as_ref().unwrap();
    assert_eq!(volumes.len(), 9);
    assert!(
        volumes
            .iter()
            .all(|v| v.projected.is_none() && v.secret.is_none())
    );
    let template = volumes
        .iter()
        .find_map(|v| v.ephemeral.as_ref())
        .and_then(|e| e.volume_claim_template.as_ref())
        .unwrap();
    assert!(template.spec.resources.as_ref().unwrap().requests.is_some());
    let affinity = spec.affinity.as_ref().unwrap();
    let node_affinity = affinity.node_affinity.as_ref().unwrap();
    let preferred = node_affinity
        .preferred_during_scheduling_ignored_during_execution
        .as_ref()
        .unwrap();
    assert!(preferred[1].preference.match_fields.is_some());
    assert!(affinity.pod_anti_affinity.is_some());
    assert!(spec.scheduling_gates.is_some());
    assert!(spec.priority.is_some() && spec.overhead.is_some());
    let c = &spec.containers[0];
    assert!(c.ports.is_some() && c.resources.as_ref().unwrap().requests.is_some());
    // Env and probes were skipped, and the mounts (none has bind mount options) dropped.
    assert!(c.env.is_none() && c.liveness_probe.is_none());
    assert_eq!(c.volume_mounts, Some(vec![]));
    let status = p.status.as_ref().unwrap();
    assert!(status.conditions.is_some() && status.start_time.is_some());
    assert!(status.pod_ip.is_none() && status.qos_class.is_none());
    assert_eq!(
        items[1].0.spec.as_ref().unwrap().node_name.as_deref(),
        Some("node-3")
    );
}

/// The captured JSON watch: (type, object, resourceVersion).
fn json_events() -> Vec<(&'static str, Option<Lean<Pod>>, String)> {
    WATCH_JSON
        .lines()
        .map(|l| {
            let e: WatchEvent<Lean<Pod>> = serde_json::from_str(l).unwrap();
            let with_rv = |t, o: Lean<Pod>| {
                let rv = o.0.metadata.resource_version.clone().unwrap();
                (t, Some(o), rv)
            };
            match e {
                WatchEvent::Added(o) => with_rv("ADDED", o),
                WatchEvent::Modified(o) => with_rv("MODIFIED", o),
                WatchEvent::Deleted(o) => with_rv("DELETED", o),
                WatchEvent::Bookmark(b) => ("BOOKMARK", None, b.metadata.resource_version),
                WatchEvent::Error(e) => panic!("an error in the capture: {e:?}"),
            }
        })
        .collect()
}

fn decode_stream(bytes: &[u8], chunk: usize) -> Vec<Event<Lean<Pod>>> {
    let mut frames = Frames::default();
    let mut out = Vec::new();
    for c in bytes.chunks(chunk) {
        frames.push(c);
        while let Some(f) = frames.next_frame().unwrap() {
            out.push(watch_event(f, pod).unwrap());
        }
    }
    out
}

#[test]
fn a_pod_watch_decodes_from_protobuf_exactly_as_from_json_whatever_the_chunking() {
    let want = json_events();
    let kinds: Vec<&str> = want.iter().map(|e| e.0).collect();
    assert!(
        kinds.starts_with(&["MODIFIED", "ADDED", "MODIFIED"]),
        "the capture: {kinds:?}"
    );
    for chunk in [1, 7, 100, 4096, WATCH_PB.len()] {
        let got = decode_stream(WATCH_PB, chunk);
        assert_eq!(got.len(), want.len(), "chunk {chunk}");
        for (g, (kind, obj, rv)) in got.into_iter().zip(&want) {
            let (k, o) = match g {
                Event::Added(o) => ("ADDED", o),
                Event::Modified(o) => ("MODIFIED", o),
                Event::Deleted(o) => ("DELETED", o),
                Event::Bookmark(v) => {
                    assert_eq!((*kind, &v), ("BOOKMARK", rv), "chunk {chunk}");
                    continue;
                }
                Event::Error(..) => panic!("chunk {chunk}: an error event"),
            };
            assert_eq!(k, *kind, "chunk {chunk}");
            let j = obj.as_ref().unwrap();
            let diff = differences(&o.0, &j.0);
            assert!(diff.is_empty(), "chunk {chunk}: {kind} {rv}: {diff:#?}");
            assert_eq!(&o, j, "chunk {chunk}: {kind} {rv}");
            assert_eq!(views(&o.0), views(&j.0));
        }
    }
    // The first event is the bind: the pod now has a node.
    let Event::Modified(bound) = &decode_stream(WATCH_PB, 4096)[0] else {
        panic!("the first event is a change")
    };
    assert_eq!(
        bound.0.spec.as_ref().unwrap().node_name.as_deref(),
        Some("node-3")
    );
}

/// Go writes non-pointer fields even when empty or zero (JSON omits them) and pointer fields
/// only when set, zero included (JSON writes them).
#[test]
fn zero_values_are_absent_as_in_json_but_set_pointers_are_kept() {
    let quantity = |k: &str, v: &str| Msg::default().str(1, k).msg(2, Msg::default().str(1, v));
    let unbound_mount = Msg::default().str(1, "data").str(3, "/data");
    let bind_mount = Msg::default().str(1, "b").str(3, "/b").str(8, "rbind");
    let exit_codes_unpacked = Msg::default().str(1, "In").varint(2, 42).varint(2, 7);
    // Packed: one length-delimited run of varints.
    let exit_codes_packed = Msg::default().str(1, "NotIn").bytes(2, &[1, 0x80, 0x01]);
    let container = Msg::default()
        .str(1, "app")
        .str(2, "")
        .msg(
            6,
            Msg::default()
                .str(1, "")
                .varint(2, 0)
                .varint(3, 8080)
                .str(4, "TCP"),
        )
        .msg(8, Msg::default().msg(2, quantity("cpu", "100m")))
        .msg(9, unbound_mount)
        .msg(9, bind_mount)
        .msg(
            25,
            Msg::default().str(1, "Restart").msg(2, exit_codes_unpacked),
        )
        .msg(
            25,
            Msg::default().str(1, "Restart").msg(2, exit_codes_packed),
        );
    let spec = Msg::default()
        .msg(
            1,
            Msg::default()
                .str(1, "scratch")
                .msg(2, Msg::default().msg(2, Msg::default())),
        )
        .msg(
            1,
            Msg::default().str(1, "claim").msg(
                2,
                Msg::default().msg(10, Msg::default().str(1, "c").varint(2, 0)),
            ),
        )
        .msg(2, container)
        .str(10, "")
        .varint(11, 0)
        .str(19, "")
        .msg(
            22,
            Msg::default()
                .str(1, "")
                .str(2, "Exists")
                .str(3, "")
                .str(4, "")
                .varint(5, 0),
        )
        .varint(25, 0)
        .varint(37, 0)
        .msg(43, Msg::default().str(1, "gang"));
    let status = Msg::default()
        .str(1, "Pending")
        .msg(
            2,
            Msg::default()
                .str(1, "PodScheduled")
                .str(2, "False")
                .bytes(3, &[])
                .str(5, "")
                .varint(7, 0),
        )
        .str(11, "")
        .msg(19, quantity("cpu", "100m"));
    let whole = Msg::default()
        .msg(1, Msg::default().str(1, "p").str(3, "ns"))
        .msg(2, spec)
        .msg(3, status);
    let p = pod(&whole.0).unwrap().0;
    let s = p.spec.as_ref().unwrap();
    // Zero non-pointer fields: absent.
    assert_eq!((s.node_name.as_ref(), s.host_network), (None, None));
    assert_eq!(s.scheduler_name, None);
    let c = &s.containers[0];
    assert_eq!(c.image, None);
    let port = &c.ports.as_ref().unwrap()[0];
    assert_eq!((port.name.as_ref(), port.host_port), (None, None));
    assert_eq!(port.container_port, 8080);
    let t = &s.tolerations.as_ref().unwrap()[0];
    assert_eq!(
        (t.key.as_ref(), t.value.as_ref(), t.effect.as_ref()),
        (None, None, None)
    );
    // Set pointers, zero or not: present.
    assert_eq!(t.toleration_seconds, Some(0));
    assert_eq!((s.priority, s.host_users), (Some(0), Some(false)));
    assert_eq!(
        s.scheduling_group
            .as_ref()
            .unwrap()
            .pod_group_name
            .as_deref(),
        Some("gang")
    );
    // Only the bind mount and the claim volume are kept, as the JSON decode keeps them.
    let mounts = c.volume_mounts.as_ref().unwrap();
    assert_eq!(mounts.len(), 1);
    assert_eq!(
        mounts[0].bind_mount_options.as_deref(),
        Some(&["rbind".to_string()][..])
    );
    assert_eq!(mounts[0].name, "", "nothing but the options is kept");
    let volumes = s.volumes.as_ref().unwrap();
    assert_eq!(volumes.len(), 1);
    assert_eq!(volumes[0].name, "claim");
    assert_eq!(
        volumes[0]
            .persistent_volume_claim
            .as_ref()
            .unwrap()
            .read_only,
        None
    );
    let rules = c.restart_policy_rules.as_ref().unwrap();
    let codes = |i: usize| rules[i].exit_codes.as_ref().unwrap().values.clone();
    assert_eq!(codes(0), Some(vec![42, 7]));
    assert_eq!(codes(1), Some(vec![1, 128]));
    let st = p.status.as_ref().unwrap();
    assert_eq!(st.nominated_node_name, None);
    let cond = &st.conditions.as_ref().unwrap()[0];
    assert_eq!(
        (cond.last_probe_time.as_ref(), cond.reason.as_ref()),
        (None, None)
    );
    assert_eq!(cond.observed_generation, None);
    assert_eq!(st.allocated_resources.as_ref().unwrap()["cpu"].0, "100m");
}

#[test]
fn a_broken_pod_is_an_error_naming_the_field() {
    // `spec.priority` as a string instead of a varint.
    let bad = Msg::default().msg(2, Msg::default().str(25, "high"));
    let e = pod(&bad.0).unwrap_err();
    assert!(e.0.contains("spec.priority"), "{e}");
    let truncated = &LIST_PB[..LIST_PB.len() / 2];
    assert!(source::decode_list(truncated, 4096, pod).is_err());
}

/// The fake API server encodes every field of a v1.37 pod: served through the pod source,
/// the listed and the watched pod equal the lean JSON decode of the stored object, and the
/// field selector keeps a finished pod out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fakes_protobuf_pod_decodes_as_its_json() {
    use futures::StreamExt;
    use kube::runtime::watcher::Event as W;
    let server = fake_apiserver::FakeApiServer::start().await;
    let mut rich: serde_json::Value = serde_json::from_str(RICH_POD).unwrap();
    // The fixture sets `rbd.readOnly: false`, which a real server never serves: the field
    // is a plain bool, omitted from JSON when false (and in protobuf, false is absent).
    let volumes = rich["spec"]["volumes"].as_array_mut().unwrap();
    let rbd = volumes.iter_mut().find_map(|v| v.get_mut("rbd")).unwrap();
    assert_eq!(rbd["readOnly"], false);
    rbd.as_object_mut().unwrap().remove("readOnly");
    let stored = server.apply("pods", &rich);
    let mut done = rich.clone();
    done["metadata"]["name"] = "finished".into();
    done["status"]["phase"] = "Succeeded".into();
    server.apply("pods", &done);
    let client = crate::client::client(Some(&server.kubeconfig()))
        .await
        .unwrap();
    let events = source::events(source::Source {
        client,
        accept: ACCEPT.to_string(),
        path: "/api/v1/pods",
        page_size: 100,
        field_selector: Some(crate::informers::POD_FIELD_SELECTOR),
        decode: super::pod::pod,
    });
    futures::pin_mut!(events);
    let lean = |v: &serde_json::Value| serde_json::from_value::<Lean<Pod>>(v.clone()).unwrap();
    let mut listed = Vec::new();
    loop {
        match events.next().await.unwrap() {
            W::InitApply(p) => listed.push(p),
            W::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(server.protobuf_served("pods"), 1, "the list was protobuf");
    assert_eq!(listed.len(), 1, "only the running pod");
    let diff = differences(&listed[0].0, &lean(&stored).0);
    assert!(diff.is_empty(), "{diff:#?}");
    assert_eq!(listed, vec![lean(&stored)]);
    let spec = listed[0].0.spec.as_ref().unwrap();
    assert!(spec.scheduling_group.is_some() && spec.resources.is_some());
    let mut second = rich.clone();
    second["metadata"]["name"] = "second".into();
    let stored = server.apply("pods", &second);
    let e = tokio::time::timeout(std::time::Duration::from_secs(10), events.next())
        .await
        .expect("a watch event within 10 s")
        .unwrap();
    match e {
        W::Apply(p) => assert_eq!(p, lean(&stored)),
        other => panic!("{other:?}"),
    }
    assert!(server.protobuf_served("pods") >= 2, "a list and a watch");
}

/// Not a test: decodes the captured created pod (the watch's ADDED event) `PROTO_PROBE_N`
/// times (default 1,000) as `PROTO_PROBE` says (`json`: lean JSON from the watch line,
/// `protobuf`: from the watch frame; empty: nothing, the baseline to subtract), for
/// instruction counts. Run: `valgrind --tool=callgrind` on the release test binary with
/// `--ignored pod_decode_cost_probe` and the variables set. Timings are in
/// `benches/benches/pod_decode.rs`.
#[test]
#[ignore = "a measurement probe, run under valgrind"]
fn pod_decode_cost_probe() {
    use std::hint::black_box;
    let probe = std::env::var("PROTO_PROBE").unwrap_or_default();
    let rounds: usize = std::env::var("PROTO_PROBE_N").map_or(1000, |n| n.parse().unwrap());
    let frame = bench_support::protobuf_frames(WATCH_PB).swap_remove(1);
    let line = WATCH_JSON.lines().nth(1).unwrap().as_bytes();
    assert_eq!(
        bench_support::protobuf_watch_pod(&frame),
        bench_support::json_watch_pod(line)
    );
    for _ in 0..rounds {
        match probe.as_str() {
            "json" => {
                black_box(bench_support::json_watch_pod(black_box(line)));
            }
            "protobuf" => {
                black_box(bench_support::protobuf_watch_pod(black_box(&frame)));
            }
            "" => {}
            other => panic!("unknown PROTO_PROBE {other:?}"),
        }
    }
}
