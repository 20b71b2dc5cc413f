use std::collections::BTreeSet;

use k8s_openapi::api::resource::v1 as dra;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;
use crate::types::PodInfo;

fn class(name: &str, extended: Option<&str>, created_secs: i64) -> dra::DeviceClass {
    let mut c = dra::DeviceClass::default();
    c.metadata.name = Some(name.into());
    c.metadata.creation_timestamp = Some(Time(
        k8s_openapi::jiff::Timestamp::from_second(created_secs).unwrap(),
    ));
    c.spec.get_or_insert_default().extended_resource_name = extended.map(str::to_string);
    c
}

fn resolved(o: &DraObjects, name: &str) -> Option<String> {
    o.class_for_extended_resource(name).map(|c| c.name.clone())
}

#[test]
fn names_dra_may_back() {
    for (name, want) in [
        ("example.com/gpu", true),
        ("deviceclass.resource.kubernetes.io/gpu", true),
        ("cpu", false),
        ("hugepages-2Mi", false),
        ("kubernetes.io/whatever", false),
    ] {
        assert_eq!(is_dra_extended_resource_name(name), want, "{name}");
    }
}

#[test]
fn the_class_backing_a_resource_name() {
    let mut o = DraObjects::default();
    o.update_class(&class("plain", None, 10));
    assert_eq!(
        resolved(&o, "deviceclass.resource.kubernetes.io/plain").as_deref(),
        Some("plain"),
        "every class backs its implicit name"
    );
    assert_eq!(
        resolved(&o, "deviceclass.resource.kubernetes.io/other"),
        None
    );
    assert_eq!(resolved(&o, "example.com/gpu"), None, "no class names it");

    o.update_class(&class("old", Some("example.com/gpu"), 10));
    assert_eq!(resolved(&o, "example.com/gpu").as_deref(), Some("old"));
    o.update_class(&class("new", Some("example.com/gpu"), 20));
    assert_eq!(
        resolved(&o, "example.com/gpu").as_deref(),
        Some("new"),
        "the newest class wins"
    );
    o.update_class(&class("a-same-age", Some("example.com/gpu"), 20));
    assert_eq!(
        resolved(&o, "example.com/gpu").as_deref(),
        Some("a-same-age"),
        "same age: the lower name wins"
    );
    o.remove_class("a-same-age");
    o.remove_class("new");
    assert_eq!(
        resolved(&o, "example.com/gpu").as_deref(),
        Some("old"),
        "deleting the winner promotes the next class"
    );
    // An explicit name does not take the implicit one away.
    assert_eq!(
        resolved(&o, "deviceclass.resource.kubernetes.io/old").as_deref(),
        Some("old")
    );
}

#[test]
fn container_requests_kept_per_container() {
    let pod = PodInfo::test("ns", "p")
        .init_container(&[("example.com/gpu", "1"), ("cpu", "1")])
        .sidecar(&[("example.com/gpu", "2")])
        .cpu("1")
        .request("example.com/gpu", "3")
        .request("example.com/zero", "0")
        .request("example.com/milli", "500m")
        .container(&[("memory", "1Gi")])
        .build();
    let got: Vec<(usize, &str, &str, usize, i64, bool)> = pod
        .extended_requests
        .0
        .iter()
        .map(|r| {
            (
                r.container_index,
                r.container_name.as_str(),
                r.resource.as_str(),
                r.resource_index,
                r.count,
                r.long_lived,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            // "cpu" sorts before "example.com/gpu" in init0's requests.
            (0, "init0", "example.com/gpu", 1, 1, false),
            (1, "init1", "example.com/gpu", 0, 2, true),
            // c0's keys: cpu, example.com/gpu, example.com/milli, example.com/zero.
            (2, "c0", "example.com/gpu", 1, 3, true),
        ]
    );
    assert!(
        !PodInfo::test("ns", "q")
            .cpu("1")
            .build()
            .extended_requests
            .is_set(),
        "most pods keep nothing"
    );
}

/// (request name, count) and (container, request name) of the claim for `needed`.
type Plan = (Vec<(String, i64)>, Vec<(String, String)>);

fn plan(pod: &PodInfo, needed: &[&str]) -> Plan {
    let set: BTreeSet<&str> = needed.iter().copied().collect();
    let (reqs, maps) = requests_and_mappings(&pod.extended_requests, &set, |r| {
        (r != "example.com/unbacked").then(|| "gpu".to_string())
    });
    assert!(reqs.iter().all(|r| r.class == "gpu"));
    (
        reqs.into_iter().map(|r| (r.name, r.count)).collect(),
        maps.into_iter()
            .map(|m| (m.container_name, m.request_name))
            .collect(),
    )
}

fn p(v: &[(&str, i64)], m: &[(&str, &str)]) -> Plan {
    (
        v.iter().map(|(n, c)| (n.to_string(), *c)).collect(),
        m.iter()
            .map(|(c, r)| (c.to_string(), r.to_string()))
            .collect(),
    )
}

#[test]
fn claim_requests_and_container_mappings() {
    const GPU: &str = "example.com/gpu";
    let cases: Vec<(&str, PodInfo, Plan)> = vec![
        (
            "one container: one request named after the container and the resource's index",
            PodInfo::test("ns", "p").cpu("1").request(GPU, "2").build(),
            p(
                &[("container-0-request-1", 2)],
                &[("c0", "container-0-request-1")],
            ),
        ),
        (
            "two containers: one request each",
            PodInfo::test("ns", "p")
                .request(GPU, "1")
                .container(&[(GPU, "2")])
                .build(),
            p(
                &[("container-0-request-0", 1), ("container-1-request-0", 2)],
                &[
                    ("c0", "container-0-request-0"),
                    ("c1", "container-1-request-0"),
                ],
            ),
        ),
        (
            "an init container reuses the devices of a later container",
            PodInfo::test("ns", "p")
                .init_container(&[(GPU, "1")])
                .request(GPU, "2")
                .build(),
            p(
                &[("container-1-request-0", 2)],
                &[
                    ("c0", "container-1-request-0"),
                    ("init0", "container-1-request-0"),
                ],
            ),
        ),
        (
            "an init container asks only for what the later containers lack",
            PodInfo::test("ns", "p")
                .init_container(&[(GPU, "3")])
                .request(GPU, "1")
                .build(),
            p(
                &[("container-0-request-0", 2), ("container-1-request-0", 1)],
                &[
                    ("c0", "container-1-request-0"),
                    ("init0", "container-1-request-0"),
                    ("init0", "container-0-request-0"),
                ],
            ),
        ),
        (
            "several init containers: only the largest request, all mapped to it",
            PodInfo::test("ns", "p")
                .init_container(&[(GPU, "2")])
                .init_container(&[(GPU, "3")])
                .cpu("1")
                .build(),
            p(
                &[("container-1-request-0", 3)],
                &[
                    ("init0", "container-1-request-0"),
                    ("init1", "container-1-request-0"),
                ],
            ),
        ),
        (
            "a sidecar before an init container is not reusable by it",
            PodInfo::test("ns", "p")
                .sidecar(&[(GPU, "1")])
                .init_container(&[(GPU, "1")])
                .cpu("1")
                .build(),
            p(
                &[("container-0-request-0", 1), ("container-1-request-0", 1)],
                &[
                    ("init0", "container-0-request-0"),
                    ("init1", "container-1-request-0"),
                ],
            ),
        ),
        (
            "request names sort as strings",
            {
                let mut b = PodInfo::test("ns", "p").request(GPU, "1");
                for _ in 0..10 {
                    b = b.container(&[(GPU, "1")]);
                }
                b.build()
            },
            {
                let mut names: Vec<String> = (0..11)
                    .map(|i| format!("container-{i}-request-0"))
                    .collect();
                let maps: Vec<(String, String)> = (0..11)
                    .map(|i| (format!("c{i}"), format!("container-{i}-request-0")))
                    .collect();
                names.sort();
                (names.into_iter().map(|n| (n, 1)).collect(), maps)
            },
        ),
        (
            "a resource DRA does not provide on the node is left out",
            PodInfo::test("ns", "p")
                .request(GPU, "1")
                .request("example.com/fpga", "1")
                .build(),
            p(
                &[("container-0-request-1", 1)],
                &[("c0", "container-0-request-1")],
            ),
        ),
    ];
    for (name, pod, want) in cases {
        assert_eq!(plan(&pod, &[GPU]), want, "{name}");
    }
    let pod = PodInfo::test("ns", "p")
        .request("example.com/unbacked", "1")
        .build();
    assert_eq!(
        plan(&pod, &["example.com/unbacked"]),
        p(&[], &[]),
        "no class: no request"
    );
}

#[test]
fn the_special_claim_asks_exact_counts_of_the_class() {
    let c = special_claim(
        "ns",
        &[ExtendedDeviceRequest {
            name: "container-0-request-0".into(),
            class: "gpu".into(),
            count: 2,
        }],
    );
    assert_eq!(c.name, SPECIAL_CLAIM_NAME);
    assert_eq!(c.namespace, "ns");
    match &c.requests[..] {
        [ClaimRequest::Exactly(r)] => {
            assert_eq!(r.name, "container-0-request-0");
            assert_eq!(r.device_class_name, "gpu");
            assert_eq!(r.mode, AllocationMode::ExactCount(2));
            assert!(r.selectors.is_empty() && !r.admin_access && r.unsupported.is_none());
        }
        other => panic!("{other:?}"),
    }
}
