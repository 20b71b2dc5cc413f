//! Protobuf decoding against bodies captured from a real kube-apiserver v1.28.7: the same
//! node listed and watched once as protobuf and once as JSON (`testdata/rich-*`; a node
//! with labels, annotations, an owner, a finalizer, taints with and without a value and a
//! time, allocatable, conditions, images, addresses and nodeInfo; the watch has a status
//! change, the delete that set its deletionTimestamp, and a bookmark). Each protobuf decode
//! must give exactly what the lean JSON decode gives.

use k8s_openapi::api::core::v1::Node;
use kube::core::{ObjectList, WatchEvent};

use super::wire::encode::Msg;
use super::*;
use crate::informers::lean::Lean;

const LIST_PB: &[u8] = include_bytes!("testdata/rich-list.pb");
const LIST_JSON: &str = include_str!("testdata/rich-list.json");
const WATCH_PB: &[u8] = include_bytes!("testdata/rich-watch.pb");
const WATCH_JSON: &str = include_str!("testdata/rich-watch.json");

fn node(b: &[u8]) -> wire::Result<Lean<Node>> {
    super::node::node(b)
}

#[test]
fn a_listed_node_decodes_from_protobuf_exactly_as_from_json() {
    let (items, resource_version, continue_token) =
        source::decode_list(LIST_PB, 4096, node).unwrap();
    let json: ObjectList<Lean<Node>> = serde_json::from_str(LIST_JSON).unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items, json.items);
    assert_eq!(Some(resource_version), json.metadata.resource_version);
    assert_eq!(continue_token, None);
    // The decode kept what the scheduler reads (not just empty values on both sides).
    let n = &items[0].0;
    let spec = n.spec.as_ref().unwrap();
    assert_eq!(spec.unschedulable, Some(true));
    let taints = spec.taints.as_ref().unwrap();
    assert_eq!(taints[0].value.as_deref(), Some("gpu"));
    assert_eq!(taints[1].value, None);
    assert!(taints[1].time_added.is_some());
    let status = n.status.as_ref().unwrap();
    assert_eq!(status.allocatable.as_ref().unwrap()["cpu"].0, "7800m");
    assert_eq!(
        status.images.as_ref().unwrap()[0].size_bytes,
        Some(123456789)
    );
    assert_eq!(status.conditions.as_ref().unwrap()[0].type_, "Ready");
    let meta = &n.metadata;
    assert_eq!(
        meta.owner_references.as_ref().unwrap()[0].controller,
        Some(true)
    );
    assert_eq!(
        meta.owner_references.as_ref().unwrap()[0].block_owner_deletion,
        Some(false)
    );
    assert_eq!(meta.labels.as_ref().unwrap()["gpu"], "true");
    assert!(meta.generate_name.is_none() && meta.managed_fields.is_none());
}

fn json_events() -> Vec<(String, Option<Lean<Node>>, String)> {
    WATCH_JSON
        .lines()
        .map(
            |l| match serde_json::from_str::<WatchEvent<Lean<Node>>>(l).unwrap() {
                WatchEvent::Modified(o) => {
                    let rv = o.0.metadata.resource_version.clone().unwrap();
                    ("MODIFIED".into(), Some(o), rv)
                }
                WatchEvent::Bookmark(b) => ("BOOKMARK".into(), None, b.metadata.resource_version),
                other => panic!("unexpected event in the capture: {other:?}"),
            },
        )
        .collect()
}

/// Decodes a whole protobuf watch stream fed in chunks of `chunk` bytes.
fn decode_stream(bytes: &[u8], chunk: usize) -> Vec<Event<Lean<Node>>> {
    let mut frames = Frames::default();
    let mut out = Vec::new();
    for c in bytes.chunks(chunk) {
        frames.push(c);
        while let Some(f) = frames.next_frame().unwrap() {
            out.push(watch_event(f, node).unwrap());
        }
    }
    out
}

#[test]
fn a_watch_stream_decodes_from_protobuf_exactly_as_from_json_whatever_the_chunking() {
    let want = json_events();
    assert_eq!(want.len(), 3, "two changes and a bookmark were captured");
    for chunk in [1, 3, 7, 100, 4096, WATCH_PB.len()] {
        let got = decode_stream(WATCH_PB, chunk);
        assert_eq!(got.len(), want.len(), "chunk {chunk}");
        for (g, (kind, obj, rv)) in got.into_iter().zip(&want) {
            match g {
                Event::Modified(o) => {
                    assert_eq!(kind, "MODIFIED");
                    assert_eq!(Some(&o), obj.as_ref());
                }
                Event::Bookmark(v) => {
                    assert_eq!(kind, "BOOKMARK");
                    assert_eq!(&v, rv);
                }
                other => panic!("chunk {chunk}: unexpected {other:?}"),
            }
        }
    }
    // The second change is the delete of a node with a finalizer.
    let Event::Modified(o) = &decode_stream(WATCH_PB, 4096)[1] else {
        panic!()
    };
    assert!(o.0.metadata.deletion_timestamp.is_some());
    assert_eq!(o.0.metadata.deletion_grace_period_seconds, Some(0));
}

/// `k8s\0` + Unknown{ typeMeta, raw }.
fn envelope(kind: &str, raw: Msg) -> Vec<u8> {
    let mut out = meta::MAGIC.to_vec();
    let unknown = Msg::default()
        .msg(1, Msg::default().str(1, "v1").str(2, kind))
        .msg(2, raw);
    out.extend_from_slice(&unknown.0);
    out
}

#[test]
fn an_error_event_carries_its_status_code() {
    let status = Msg::default()
        .str(2, "Failure")
        .str(3, "too old resource version: 2 (50226)")
        .str(4, "Expired")
        .varint(6, 410);
    let event = Msg::default()
        .str(1, "ERROR")
        .msg(2, Msg(Vec::new()).bytes(1, &envelope("Status", status)));
    match watch_event(&event.0, node).unwrap() {
        Event::Error(code, reason, message) => {
            assert_eq!((code, reason.as_str()), (410, "Expired"));
            assert!(message.contains("too old"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_added_and_a_deleted_node_and_a_minimal_node() {
    let minimal = Msg::default()
        .msg(
            1,
            Msg::default()
                .str(1, "n1")
                .str(2, "")
                .varint(7, 0)
                .bytes(8, &[]),
        )
        .msg(2, Msg::default().varint(4, 0))
        .msg(3, Msg::default());
    let n = node(&minimal.0).unwrap().0;
    assert_eq!(n.metadata.name.as_deref(), Some("n1"));
    // Empty and zero values are absent, as in JSON.
    assert_eq!(n.metadata.generate_name, None);
    assert_eq!(n.metadata.generation, None);
    assert_eq!(n.metadata.creation_timestamp, None);
    assert_eq!(n.spec.as_ref().unwrap().unschedulable, None);
    assert_eq!(n.status.as_ref().unwrap().allocatable, None);
    for (t, want) in [("ADDED", "added"), ("DELETED", "deleted")] {
        let event = Msg::default().str(1, t).msg(
            2,
            Msg(Vec::new()).bytes(1, &envelope("Node", Msg(minimal.0.clone()))),
        );
        let got = match watch_event(&event.0, node).unwrap() {
            Event::Added(_) => "added",
            Event::Deleted(_) => "deleted",
            other => panic!("{other:?}"),
        };
        assert_eq!(got, want);
    }
}

#[test]
fn broken_bodies_are_errors_not_panics() {
    assert!(
        source::decode_list(b"{\"kind\":\"NodeList\"}", 4096, node).is_err(),
        "JSON is not protobuf"
    );
    let mut truncated = LIST_PB.to_vec();
    truncated.truncate(LIST_PB.len() - 10);
    assert!(source::decode_list(&truncated, 4096, node).is_err());
    let mut frames = Frames::default();
    frames.push(&[0xff, 0xff, 0xff, 0xff]);
    assert!(frames.next_frame().is_err(), "a 4 GiB frame");
    let gzip = envelope("Node", Msg::default());
    let mut with_encoding = gzip.clone();
    with_encoding.extend_from_slice(&Msg::default().str(3, "gzip").0);
    assert!(meta::unwrap_envelope(&gzip).is_ok());
    assert!(meta::unwrap_envelope(&with_encoding).is_err());
}

/// The source against the fake API server (which serves nodes in protobuf when asked):
/// `Init`, the listed nodes, `InitDone`, then the watch's changes in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_source_lists_then_watches_in_protobuf_and_in_json() {
    use futures::StreamExt;
    use kube::runtime::watcher::Event as W;
    let names = |e: &W<Lean<Node>>| match e {
        W::Init => "init".to_string(),
        W::InitDone => "done".to_string(),
        W::InitApply(n) => format!("list {}", n.0.metadata.name.as_deref().unwrap_or("")),
        W::Apply(n) => format!(
            "apply {} taints {}",
            n.0.metadata.name.as_deref().unwrap_or(""),
            n.0.spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .map_or(0, Vec::len)
        ),
        W::Delete(n) => format!("delete {}", n.0.metadata.name.as_deref().unwrap_or("")),
    };
    for (accept, protobuf) in [(ACCEPT, true), ("application/json", false)] {
        let server = fake_apiserver::FakeApiServer::start().await;
        let node = |name: &str, taints: serde_json::Value| {
            serde_json::json!({"metadata": {"name": name}, "spec": {"taints": taints},
                "status": {"allocatable": {"cpu": "1"}}})
        };
        server.apply("nodes", &node("a", serde_json::json!([])));
        server.apply("nodes", &node("b", serde_json::json!([])));
        let client = crate::client::client(Some(&server.kubeconfig()))
            .await
            .unwrap();
        let events = source::events(source::Source {
            client,
            accept: accept.to_string(),
            path: "/api/v1/nodes",
            page_size: 100,
            field_selector: None,
            decode: super::node::node,
        });
        futures::pin_mut!(events);
        let mut got = Vec::new();
        for _ in 0..4 {
            got.push(names(&events.next().await.unwrap()));
        }
        assert_eq!(got, ["init", "list a", "list b", "done"], "{accept}");
        server.apply(
            "nodes",
            &node(
                "c",
                serde_json::json!([{"key": "k", "effect": "NoSchedule"}]),
            ),
        );
        server.delete("nodes", "", "a");
        let mut got = Vec::new();
        for _ in 0..2 {
            let e = tokio::time::timeout(std::time::Duration::from_secs(10), events.next())
                .await
                .expect("a watch event within 10 s")
                .unwrap();
            got.push(names(&e));
        }
        assert_eq!(got, ["apply c taints 1", "delete a"], "{accept}");
        assert_eq!(server.protobuf_served("nodes") >= 2, protobuf, "{accept}");
    }
}

/// With protobuf accepted the first list reads the watch cache whole (resourceVersion 0);
/// as JSON it pages through etcd (a whole JSON list is not streamed), 100 nodes a page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_protobuf_list_is_read_whole_from_the_cache() {
    use futures::StreamExt;
    for (accept, lists) in [(ACCEPT, 1), ("application/json", 3)] {
        let server = fake_apiserver::FakeApiServer::start().await;
        for i in 0..250 {
            server.apply(
                "nodes",
                &serde_json::json!({"metadata": {"name": format!("n{i:03}")}}),
            );
        }
        let client = crate::client::client(Some(&server.kubeconfig()))
            .await
            .unwrap();
        let events = source::events(source::Source {
            client,
            accept: accept.to_string(),
            path: "/api/v1/nodes",
            page_size: 100,
            field_selector: None,
            decode: super::node::node,
        });
        futures::pin_mut!(events);
        let mut listed = 0;
        loop {
            match events.next().await.unwrap() {
                kube::runtime::watcher::Event::InitApply(_) => listed += 1,
                kube::runtime::watcher::Event::InitDone => break,
                _ => {}
            }
        }
        assert_eq!(listed, 250, "{accept}");
        let requests = server
            .requests()
            .iter()
            .filter(|r| r.verb == "list" && r.resource == "nodes")
            .count();
        assert_eq!(requests, lists, "{accept}");
    }
}
