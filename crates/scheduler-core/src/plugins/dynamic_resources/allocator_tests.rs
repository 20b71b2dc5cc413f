//! The allocator's cases, after upstream's allocator test table, in our own words.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::resource::v1 as dra;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;

use super::*;

pub(crate) const DRIVER: &str = "gpu.example.com";

pub(crate) enum Nodes<'a> {
    Node(&'a str),
    All,
    Zone(&'a str),
    PerDevice,
}

pub(crate) fn device(name: &str, attrs: &[(&str, dra::DeviceAttribute)]) -> dra::Device {
    dra::Device {
        name: name.into(),
        attributes: Some(
            attrs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        ),
        capacity: Some(
            [(
                "memory".to_string(),
                dra::DeviceCapacity {
                    value: K8sQuantity("40Gi".into()),
                    ..Default::default()
                },
            )]
            .into(),
        ),
        ..Default::default()
    }
}

pub(crate) fn s(v: &str) -> dra::DeviceAttribute {
    dra::DeviceAttribute {
        string: Some(v.into()),
        ..Default::default()
    }
}

pub(crate) fn i(v: i64) -> dra::DeviceAttribute {
    dra::DeviceAttribute {
        int: Some(v),
        ..Default::default()
    }
}

pub(crate) fn zone_selector(zone: &str) -> k8s::NodeSelector {
    k8s::NodeSelector {
        node_selector_terms: vec![k8s::NodeSelectorTerm {
            match_expressions: Some(vec![k8s::NodeSelectorRequirement {
                key: "zone".into(),
                operator: "In".into(),
                values: Some(vec![zone.into()]),
            }]),
            ..Default::default()
        }],
    }
}

pub(crate) fn slice(
    name: &str,
    pool: &str,
    generation: i64,
    count: i64,
    nodes: Nodes<'_>,
    devices: Vec<dra::Device>,
) -> dra::ResourceSlice {
    let mut sl = dra::ResourceSlice::default();
    sl.metadata.name = Some(name.into());
    sl.spec.driver = DRIVER.into();
    sl.spec.pool = dra::ResourcePool {
        name: pool.into(),
        generation,
        resource_slice_count: count,
    };
    match nodes {
        Nodes::Node(n) => sl.spec.node_name = Some(n.into()),
        Nodes::All => sl.spec.all_nodes = Some(true),
        Nodes::Zone(z) => sl.spec.node_selector = Some(zone_selector(z)),
        Nodes::PerDevice => sl.spec.per_device_node_selection = Some(true),
    }
    sl.spec.devices = Some(devices);
    sl
}

/// A node-local slice of one complete pool named after the node.
pub(crate) fn local(node: &str, devices: Vec<dra::Device>) -> dra::ResourceSlice {
    slice(
        &format!("{node}-gpus"),
        node,
        1,
        1,
        Nodes::Node(node),
        devices,
    )
}

pub(crate) fn class(name: &str, selectors: &[&str]) -> dra::DeviceClass {
    let mut c = dra::DeviceClass::default();
    c.metadata.name = Some(name.into());
    c.spec.get_or_insert_default().selectors = Some(cel_selectors(selectors));
    c
}

fn cel_selectors(exprs: &[&str]) -> Vec<dra::DeviceSelector> {
    exprs
        .iter()
        .map(|e| dra::DeviceSelector {
            cel: Some(dra::CELDeviceSelector {
                expression: e.to_string(),
            }),
        })
        .collect()
}

pub(crate) fn req(name: &str, class: &str) -> dra::DeviceRequest {
    dra::DeviceRequest {
        name: name.into(),
        exactly: Some(dra::ExactDeviceRequest {
            device_class_name: class.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub(crate) fn count(mut r: dra::DeviceRequest, n: i64) -> dra::DeviceRequest {
    r.exactly.as_mut().unwrap().count = Some(n);
    r
}

fn all(mut r: dra::DeviceRequest) -> dra::DeviceRequest {
    r.exactly.as_mut().unwrap().allocation_mode = Some("All".into());
    r
}

fn selecting(mut r: dra::DeviceRequest, exprs: &[&str]) -> dra::DeviceRequest {
    r.exactly.as_mut().unwrap().selectors = Some(cel_selectors(exprs));
    r
}

/// A node selector matching only `node` (by `metadata.name`), as allocations for one node
/// carry.
pub(crate) fn only_node(node: &str) -> k8s::NodeSelector {
    k8s::NodeSelector {
        node_selector_terms: vec![k8s::NodeSelectorTerm {
            match_fields: Some(vec![k8s::NodeSelectorRequirement {
                key: "metadata.name".into(),
                operator: "In".into(),
                values: Some(vec![node.into()]),
            }]),
            ..Default::default()
        }],
    }
}

pub(crate) fn claim(name: &str, requests: Vec<dra::DeviceRequest>) -> dra::ResourceClaim {
    let mut c = dra::ResourceClaim::default();
    c.metadata.namespace = Some("ns".into());
    c.metadata.name = Some(name.into());
    c.metadata.uid = Some(format!("uid-{name}"));
    c.metadata.resource_version = Some("1".into());
    c.spec.get_or_insert_default().devices = Some(dra::DeviceClaim {
        requests: Some(requests),
        ..Default::default()
    });
    c
}

fn constrained(
    mut c: dra::ResourceClaim,
    requests: &[&str],
    attr: Option<&str>,
) -> dra::ResourceClaim {
    let d = c.spec.as_mut().unwrap().devices.as_mut().unwrap();
    d.constraints
        .get_or_insert_default()
        .push(dra::DeviceConstraint {
            requests: Some(requests.iter().map(|r| r.to_string()).collect()),
            match_attribute: attr.map(Into::into),
            ..Default::default()
        });
    c
}

pub(crate) fn objects(
    slices: Vec<dra::ResourceSlice>,
    classes: Vec<dra::DeviceClass>,
    claims: &[dra::ResourceClaim],
) -> DraObjects {
    let mut o = DraObjects::default();
    for s in &slices {
        o.update_slice(s);
    }
    for c in &classes {
        o.update_class(c);
    }
    for c in claims {
        o.update_claim(c);
    }
    o
}

type Got = Result<Option<Vec<Vec<String>>>, AllocError>;

/// Allocates `claims` (by name, from `o`) on `node` (zone label `a`); results as
/// "request=device" per claim.
fn run_on(o: &DraObjects, claims: &[&str], node: &str) -> Got {
    let claims = claims
        .iter()
        .map(|c| o.claim("ns", c).unwrap().clone())
        .collect();
    let labels: BTreeMap<String, String> = [("zone".to_string(), "a".to_string())].into();
    let a = Allocator::new(o, claims);
    a.allocate(node, &labels)
        .map(|r| r.map(|results| picked(&results, |r| format!("{}={}", r.request, r.device))))
}

/// The devices of each claim's allocation, as `show` names them (shared with the counter
/// tests).
pub(crate) fn picked(
    results: &[dra::AllocationResult],
    show: impl Fn(&dra::DeviceRequestAllocationResult) -> String,
) -> Vec<Vec<String>> {
    results
        .iter()
        .map(|a| {
            a.devices
                .as_ref()
                .and_then(|d| d.results.as_ref())
                .into_iter()
                .flatten()
                .map(&show)
                .collect()
        })
        .collect()
}

fn got(v: &[&[&str]]) -> Got {
    Ok(Some(
        v.iter()
            .map(|c| c.iter().map(|s| s.to_string()).collect())
            .collect(),
    ))
}

pub(crate) fn gpus(n: usize) -> Vec<dra::Device> {
    (0..n).map(|k| device(&format!("gpu-{k}"), &[])).collect()
}

pub(crate) fn gpu_class() -> dra::DeviceClass {
    class("gpu", &[&format!("device.driver == {DRIVER:?}")])
}

fn fatal(r: Got) -> String {
    match r {
        Err(AllocError::Fatal(m)) => m,
        other => panic!("want a fatal error, got {other:?}"),
    }
}

#[test]
fn counts_and_nodes() {
    // (case, devices on n1, request count, node, want)
    let cases: Vec<(&str, usize, i64, &str, Got)> = vec![
        ("one device", 1, 1, "n1", got(&[&["r=gpu-0"]])),
        ("two of two", 2, 2, "n1", got(&[&["r=gpu-0", "r=gpu-1"]])),
        ("two of one: none", 1, 2, "n1", Ok(None)),
        (
            "another node's devices are not reachable",
            2,
            1,
            "n2",
            Ok(None),
        ),
        ("no devices", 0, 1, "n1", Ok(None)),
    ];
    for (name, n, c, node, want) in cases {
        let o = objects(
            vec![local("n1", gpus(n))],
            vec![gpu_class()],
            &[claim("c", vec![count(req("r", "gpu"), c)])],
        );
        assert_eq!(run_on(&o, &["c"], node), want, "{name}");
    }
}

#[test]
fn class_and_request_selectors() {
    let devices = vec![
        device("gpu-0", &[("model", s("t4")), ("cores", i(40))]),
        device("gpu-1", &[("model", s("a100")), ("cores", i(108))]),
        device("gpu-2", &[("model", s("a100")), ("cores", i(54))]),
    ];
    let a100 = class(
        "a100",
        &[
            &format!("device.driver == {DRIVER:?}"),
            &format!(r#"device.attributes[{DRIVER:?}].model == "a100""#),
        ],
    );
    let big = |r| {
        selecting(
            r,
            &[&format!(r#"device.attributes[{DRIVER:?}].cores > 100"#)],
        )
    };
    let mem = |r| {
        selecting(
            r,
            &[&format!(
                r#"device.capacity[{DRIVER:?}].memory.compareTo(quantity("32Gi")) >= 0"#
            )],
        )
    };
    let o = objects(
        vec![local("n1", devices)],
        vec![a100, gpu_class()],
        &[
            claim("class-only", vec![count(req("r", "a100"), 2)]),
            claim("both", vec![big(req("r", "a100"))]),
            claim("too-many", vec![count(big(req("r", "a100")), 2)]),
            claim("capacity", vec![count(mem(req("r", "gpu")), 3)]),
        ],
    );
    assert_eq!(
        run_on(&o, &["class-only"], "n1"),
        got(&[&["r=gpu-1", "r=gpu-2"]])
    );
    assert_eq!(run_on(&o, &["both"], "n1"), got(&[&["r=gpu-1"]]));
    assert_eq!(run_on(&o, &["too-many"], "n1"), Ok(None));
    assert_eq!(
        run_on(&o, &["capacity"], "n1"),
        got(&[&["r=gpu-0", "r=gpu-1", "r=gpu-2"]])
    );
}

#[test]
fn all_mode() {
    let devices = vec![
        device("gpu-0", &[("model", s("a100"))]),
        device("gpu-1", &[("model", s("t4"))]),
        device("gpu-2", &[("model", s("a100"))]),
    ];
    let a100 = |r| {
        selecting(
            r,
            &[&format!(r#"device.attributes[{DRIVER:?}].model == "a100""#)],
        )
    };
    let none = |r| selecting(r, &["false"]);
    let o = objects(
        vec![local("n1", devices)],
        vec![gpu_class()],
        &[
            claim("all", vec![all(req("r", "gpu"))]),
            claim("all-a100", vec![all(a100(req("r", "gpu")))]),
            claim("all-none", vec![all(none(req("r", "gpu")))]),
            claim("one", vec![req("r", "gpu")]),
        ],
    );
    assert_eq!(
        run_on(&o, &["all"], "n1"),
        got(&[&["r=gpu-0", "r=gpu-1", "r=gpu-2"]])
    );
    assert_eq!(
        run_on(&o, &["all-a100"], "n1"),
        got(&[&["r=gpu-0", "r=gpu-2"]])
    );
    assert_eq!(
        run_on(&o, &["all-none"], "n1"),
        Ok(None),
        "All needs at least one"
    );
    // All devices of the node, then one more for another claim: impossible.
    assert_eq!(run_on(&o, &["all", "one"], "n1"), Ok(None));
    // The first claim backtracks off the devices All needs.
    assert_eq!(
        run_on(&o, &["one", "all-a100"], "n1"),
        got(&[&["r=gpu-1"], &["r=gpu-0", "r=gpu-2"]])
    );

    // A pool still being published: All refuses to guess.
    let o = objects(
        vec![slice("n1-a", "n1", 1, 2, Nodes::Node("n1"), gpus(2))],
        vec![gpu_class()],
        &[claim("all", vec![all(req("r", "gpu"))])],
    );
    assert_eq!(
        fatal(run_on(&o, &["all"], "n1")),
        "claim ns/all, request r: asks for all devices, but resource pool gpu.example.com/n1 is currently being updated"
    );
}

#[test]
fn pools_and_generations() {
    // Generation 1 is outdated once generation 2 exists; only gpu-new is there.
    let o = objects(
        vec![
            slice(
                "old",
                "n1",
                1,
                1,
                Nodes::Node("n1"),
                vec![device("gpu-old", &[])],
            ),
            slice(
                "new",
                "n1",
                2,
                1,
                Nodes::Node("n1"),
                vec![device("gpu-new", &[])],
            ),
        ],
        vec![gpu_class()],
        &[
            claim("one", vec![req("r", "gpu")]),
            claim("two", vec![count(req("r", "gpu"), 2)]),
        ],
    );
    assert_eq!(run_on(&o, &["one"], "n1"), got(&[&["r=gpu-new"]]));
    assert_eq!(run_on(&o, &["two"], "n1"), Ok(None));

    // An incomplete pool (1 of 2 slices) is skipped; a complete one is used.
    let o = objects(
        vec![
            slice(
                "a-1",
                "a",
                1,
                2,
                Nodes::Node("n1"),
                vec![device("a-0", &[])],
            ),
            slice(
                "b-1",
                "b",
                1,
                1,
                Nodes::Node("n1"),
                vec![device("b-0", &[])],
            ),
        ],
        vec![gpu_class()],
        &[claim("one", vec![req("r", "gpu")])],
    );
    assert_eq!(run_on(&o, &["one"], "n1"), got(&[&["r=b-0"]]));

    // The same device name twice in a pool: the pool is invalid, and said so when nothing else fits.
    let o = objects(
        vec![
            slice(
                "a-1",
                "a",
                1,
                2,
                Nodes::Node("n1"),
                vec![device("gpu-0", &[])],
            ),
            slice(
                "a-2",
                "a",
                1,
                2,
                Nodes::Node("n1"),
                vec![device("gpu-0", &[])],
            ),
        ],
        vec![gpu_class()],
        &[claim("one", vec![req("r", "gpu")])],
    );
    assert_eq!(
        run_on(&o, &["one"], "n1"),
        Err(AllocError::Node(
            "invalid resource pools were encountered: pool gpu.example.com/a: duplicate device name gpu-0"
                .into()
        ))
    );
}

#[test]
fn node_scopes_and_the_allocation_node_selector() {
    let mut per_device = vec![device("pd-0", &[]), device("pd-1", &[])];
    per_device[0].node_name = Some("n1".into());
    per_device[1].all_nodes = Some(true);
    let o = objects(
        vec![
            slice(
                "zonal",
                "zonal",
                1,
                1,
                Nodes::Zone("a"),
                vec![device("z-0", &[])],
            ),
            slice(
                "global",
                "global",
                1,
                1,
                Nodes::All,
                vec![device("g-0", &[])],
            ),
            slice("pd", "pd", 1, 1, Nodes::PerDevice, per_device),
        ],
        vec![gpu_class()],
        &[claim("c", vec![count(req("r", "gpu"), 4)])],
    );
    // Zone a (our test node's label): every device reachable from n1.
    let claims = vec![o.claim("ns", "c").unwrap().clone()];
    let labels: BTreeMap<String, String> = [("zone".to_string(), "a".to_string())].into();
    let a = Allocator::new(&o, claims);
    let r = a.allocate("n1", &labels).unwrap().unwrap();
    let names: Vec<_> = r[0]
        .devices
        .as_ref()
        .unwrap()
        .results
        .as_ref()
        .unwrap()
        .iter()
        .map(|d| d.device.clone())
        .collect();
    assert_eq!(names, vec!["g-0", "pd-0", "pd-1", "z-0"]);
    // pd-0 is local to n1: the allocation is pinned to n1.
    let sel = r[0].node_selector.as_ref().unwrap();
    assert_eq!(
        sel.node_selector_terms[0].match_fields.as_ref().unwrap()[0].values,
        Some(vec!["n1".to_string()])
    );
    // n2 outside the zone reaches only the allNodes devices.
    assert_eq!(a.allocate("n2", &BTreeMap::new()), Ok(None));

    // Zonal plus global: the zone's selector; global only: no selector.
    let o = objects(
        vec![
            slice(
                "zonal",
                "zonal",
                1,
                1,
                Nodes::Zone("a"),
                vec![device("z-0", &[])],
            ),
            slice(
                "global",
                "global",
                1,
                1,
                Nodes::All,
                vec![device("g-0", &[])],
            ),
        ],
        vec![gpu_class()],
        &[
            claim("two", vec![count(req("r", "gpu"), 2)]),
            claim("one", vec![req("r", "gpu")]),
        ],
    );
    let alloc = |c: &str| {
        Allocator::new(&o, vec![o.claim("ns", c).unwrap().clone()])
            .allocate("n1", &labels)
            .unwrap()
            .unwrap()
            .remove(0)
    };
    assert_eq!(alloc("two").node_selector, Some(zone_selector("a")));
    assert_eq!(alloc("one").node_selector, None, "g-0 first: every node");
}

#[test]
fn devices_taken_in_flight_or_by_admin_access() {
    let mut taken = claim("taken", vec![req("r", "gpu")]);
    taken.status = Some(dra::ResourceClaimStatus {
        allocation: Some(dra::AllocationResult {
            devices: Some(dra::DeviceAllocationResult {
                results: Some(vec![dra::DeviceRequestAllocationResult {
                    request: "r".into(),
                    driver: DRIVER.into(),
                    pool: "n1".into(),
                    device: "gpu-0".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
    let mut admin = req("r", "gpu");
    admin.exactly.as_mut().unwrap().admin_access = Some(true);
    let o = objects(
        vec![local("n1", gpus(2))],
        vec![gpu_class()],
        &[
            taken,
            claim("one", vec![req("r", "gpu")]),
            claim("two", vec![count(req("r", "gpu"), 2)]),
            claim("admin", vec![count(admin, 2)]),
        ],
    );
    assert_eq!(run_on(&o, &["one"], "n1"), got(&[&["r=gpu-1"]]));
    assert_eq!(run_on(&o, &["two"], "n1"), Ok(None));
    assert_eq!(
        run_on(&o, &["admin"], "n1"),
        got(&[&["r=gpu-0", "r=gpu-1"]])
    );
    // Two claims of one pod never share a device.
    assert_eq!(run_on(&o, &["one", "one"], "n1"), Ok(None));
    // Preemption: the taken claim's devices freed for this attempt.
    let mut a = Allocator::new(&o, vec![o.claim("ns", "two").unwrap().clone()]);
    let id = DeviceId {
        driver: DRIVER.into(),
        pool: "n1".into(),
        device: "gpu-0".into(),
    };
    a.free_devices([id.clone()]);
    assert!(a.allocate("n1", &BTreeMap::new()).unwrap().is_some());
    a.unfree_devices([id]);
    assert_eq!(a.allocate("n1", &BTreeMap::new()), Ok(None));
}

#[test]
fn match_attribute_constraints() {
    let devices = vec![
        device("gpu-0", &[("numa", i(0))]),
        device("gpu-1", &[("numa", i(1))]),
        device("gpu-2", &[("numa", i(1))]),
        device("gpu-3", &[]),
    ];
    let numa = format!("{DRIVER}/numa");
    let o = objects(
        vec![local("n1", devices)],
        vec![gpu_class()],
        &[
            // gpu-0 first, no second numa-0 device: backtrack to gpu-1 + gpu-2.
            constrained(
                claim("pair", vec![count(req("r", "gpu"), 2)]),
                &[],
                Some(&numa),
            ),
            constrained(
                claim("split", vec![req("a", "gpu"), req("b", "gpu")]),
                &["a", "b"],
                Some(&numa),
            ),
            constrained(
                claim("three", vec![count(req("r", "gpu"), 3)]),
                &[],
                Some(&numa),
            ),
            // Only request b is constrained: a takes gpu-0, b is free to take anything.
            constrained(
                claim("partial", vec![req("a", "gpu"), req("b", "gpu")]),
                &["b"],
                Some(&numa),
            ),
            constrained(claim("unknown", vec![req("r", "gpu")]), &[], None),
            constrained(
                claim("other-domain", vec![req("r", "gpu")]),
                &[],
                Some("numa.example.com/node"),
            ),
        ],
    );
    assert_eq!(run_on(&o, &["pair"], "n1"), got(&[&["r=gpu-1", "r=gpu-2"]]));
    assert_eq!(
        run_on(&o, &["split"], "n1"),
        got(&[&["a=gpu-1", "b=gpu-2"]])
    );
    assert_eq!(run_on(&o, &["three"], "n1"), Ok(None));
    assert_eq!(
        run_on(&o, &["partial"], "n1"),
        got(&[&["a=gpu-0", "b=gpu-1"]])
    );
    assert_eq!(
        run_on(&o, &["other-domain"], "n1"),
        Ok(None),
        "no such attribute"
    );
    assert_eq!(
        fatal(run_on(&o, &["unknown"], "n1")),
        "claim ns/unknown, constraint #0: empty constraint (unsupported constraint type?)"
    );
}

#[test]
fn first_available() {
    let devices = vec![device("gpu-0", &[("model", s("t4"))])];
    let sub = |name: &str, model: &str, n: i64| dra::DeviceSubRequest {
        name: name.into(),
        device_class_name: "gpu".into(),
        count: Some(n),
        selectors: Some(cel_selectors(&[&format!(
            r#"device.attributes[{DRIVER:?}].model == {model:?}"#
        )])),
        ..Default::default()
    };
    let prioritized = |subs: Vec<dra::DeviceSubRequest>| dra::DeviceRequest {
        name: "r".into(),
        first_available: Some(subs),
        ..Default::default()
    };
    let mut with_cfg = claim(
        "t4-fallback",
        vec![prioritized(vec![
            sub("a100", "a100", 1),
            sub("t4", "t4", 1),
        ])],
    );
    with_cfg
        .spec
        .as_mut()
        .unwrap()
        .devices
        .as_mut()
        .unwrap()
        .config = Some(vec![dra::DeviceClaimConfiguration {
        requests: Some(vec!["r/t4".into()]),
        opaque: Some(dra::OpaqueDeviceConfiguration {
            driver: DRIVER.into(),
            parameters: k8s_openapi::apimachinery::pkg::runtime::RawExtension(
                serde_json::json!({"sharing": "time-slicing"}),
            ),
        }),
    }]);
    let mut cls = gpu_class();
    cls.spec.as_mut().unwrap().config = Some(vec![dra::DeviceClassConfiguration {
        opaque: Some(dra::OpaqueDeviceConfiguration {
            driver: DRIVER.into(),
            parameters: k8s_openapi::apimachinery::pkg::runtime::RawExtension(
                serde_json::json!({"mode": "default"}),
            ),
        }),
    }]);
    let o = objects(
        vec![local("n1", devices)],
        vec![cls],
        &[
            with_cfg,
            claim(
                "t4-first",
                vec![prioritized(vec![
                    sub("t4", "t4", 1),
                    sub("a100", "a100", 1),
                ])],
            ),
            claim(
                "none",
                vec![prioritized(vec![
                    sub("a100", "a100", 1),
                    sub("two", "t4", 2),
                ])],
            ),
        ],
    );
    assert_eq!(run_on(&o, &["t4-fallback"], "n1"), got(&[&["r/t4=gpu-0"]]));
    assert_eq!(run_on(&o, &["t4-first"], "n1"), got(&[&["r/t4=gpu-0"]]));
    assert_eq!(run_on(&o, &["none"], "n1"), Ok(None));

    // Configs: the class's (for the chosen subrequest; all requests -> no list), then the claim's.
    let a = Allocator::new(&o, vec![o.claim("ns", "t4-fallback").unwrap().clone()]);
    let r = a.allocate("n1", &BTreeMap::new()).unwrap().unwrap();
    let cfg = r[0].devices.as_ref().unwrap().config.as_ref().unwrap();
    assert_eq!(cfg.len(), 2);
    assert_eq!(
        (cfg[0].source.as_str(), &cfg[0].requests),
        ("FromClass", &None)
    );
    assert_eq!(cfg[1].source, "FromClaim");
    assert_eq!(cfg[1].requests, None, "r/t4 is the claim's only request");
}

#[test]
fn errors_name_the_claim_class_and_expression() {
    // Over the cost limit by the compile-time estimate: 100^3 iterations.
    let l = format!("[{}]", vec!["1"; 100].join(","));
    let too_complex = format!("{l}.all(a, {l}.all(b, {l}.all(c, true)))");
    let o = objects(
        vec![local("n1", gpus(1))],
        vec![
            class("broken", &["device.driver =="]),
            class("too-complex", &[&too_complex]),
            class(
                "bad-runtime",
                &[r#"device.attributes["gpu.example.com"].model == "x""#],
            ),
            gpu_class(),
        ],
        &[
            claim("broken-class", vec![req("r", "broken")]),
            claim("runtime-class", vec![req("r", "bad-runtime")]),
            claim("broken-claim", vec![selecting(req("r", "gpu"), &["1 +"])]),
            claim("too-complex-class", vec![req("r", "too-complex")]),
            claim(
                "too-complex-claim",
                vec![selecting(req("r", "gpu"), &["true", &too_complex])],
            ),
            claim(
                "not-bool",
                vec![selecting(req("r", "gpu"), &["device.driver"])],
            ),
            claim("no-class", vec![req("r", "missing")]),
            claim(
                "mode",
                vec![{
                    let mut r = req("r", "gpu");
                    r.exactly.as_mut().unwrap().allocation_mode = Some("Most".into());
                    r
                }],
            ),
            claim("huge", vec![count(req("r", "gpu"), 33)]),
            claim("negative", vec![count(req("r", "gpu"), -1)]),
            claim(
                "no-cel",
                vec![{
                    let mut r = req("r", "gpu");
                    r.exactly.as_mut().unwrap().selectors =
                        Some(vec![dra::DeviceSelector { cel: None }]);
                    r
                }],
            ),
            claim(
                "derived",
                vec![{
                    let mut r = req("r", "gpu");
                    r.exactly.as_mut().unwrap().derived_attributes =
                        Some(vec![dra::DeviceDerivedAttribute {
                            name: "numa".into(),
                            expression: "1".into(),
                        }]);
                    r
                }],
            ),
        ],
    );
    let m = fatal(run_on(&o, &["broken-class"], "n1"));
    assert!(
        m.starts_with("class broken: selector #0: CEL compile error: "),
        "{m}"
    );
    let m = fatal(run_on(&o, &["runtime-class"], "n1"));
    assert!(
        m.starts_with(
            "class bad-runtime: selector #0 on device gpu.example.com/n1/gpu-0: CEL runtime error: no such key: model"
        ),
        "{m}"
    );
    let m = fatal(run_on(&o, &["broken-claim"], "n1"));
    assert!(
        m.starts_with("claim ns/broken-claim: selector #0: CEL compile error: "),
        "{m}"
    );
    let m = fatal(run_on(&o, &["too-complex-class"], "n1"));
    assert!(
        m.starts_with(
            "class too-complex: selector #0: CEL compile error: too complex, exceeds cost limit (estimated worst-case cost "
        ),
        "{m}"
    );
    let m = fatal(run_on(&o, &["too-complex-claim"], "n1"));
    assert!(
        m.starts_with(
            "claim ns/too-complex-claim: selector #1: CEL compile error: too complex, exceeds cost limit"
        ),
        "{m}"
    );
    let m = fatal(run_on(&o, &["not-bool"], "n1"));
    assert!(m.contains("must evaluate to a bool"), "{m}");
    assert_eq!(
        fatal(run_on(&o, &["no-class"], "n1")),
        "claim ns/no-class, request r: could not retrieve device class missing: deviceclass.resource.k8s.io \"missing\" not found"
    );
    assert_eq!(
        fatal(run_on(&o, &["mode"], "n1")),
        "claim ns/mode, request r: unsupported count mode Most"
    );
    assert_eq!(
        fatal(run_on(&o, &["huge"], "n1")),
        "claim ns/huge: number of requested devices 33 exceeds the claim limit of 32"
    );
    assert_eq!(
        fatal(run_on(&o, &["negative"], "n1")),
        "claim ns/negative, request r: exact count -1 is invalid"
    );
    assert_eq!(
        fatal(run_on(&o, &["no-cel"], "n1")),
        "claim ns/no-cel, request r, selector #0: CEL expression empty (unsupported selector type?)"
    );
    assert_eq!(
        fatal(run_on(&o, &["derived"], "n1")),
        "claim ns/derived, request r: uses derived attributes, which ferrosched does not support yet"
    );
}

#[test]
fn devices_ferrosched_cannot_read_are_never_allocated() {
    let mut bad = device("bad-capacity", &[]);
    bad.capacity
        .as_mut()
        .unwrap()
        .get_mut("memory")
        .unwrap()
        .value = K8sQuantity("lots".into());
    let o = objects(
        vec![local("n1", vec![bad, device("plain", &[])])],
        vec![gpu_class()],
        &[
            claim("one", vec![req("r", "gpu")]),
            claim("two", vec![count(req("r", "gpu"), 2)]),
        ],
    );
    assert_eq!(run_on(&o, &["one"], "n1"), got(&[&["r=plain"]]));
    assert_eq!(run_on(&o, &["two"], "n1"), Ok(None));
}

#[test]
fn device_taints_and_request_tolerations() {
    let taint = |effect: &str| dra::DeviceTaint {
        key: "maintenance".into(),
        value: Some("firmware".into()),
        effect: effect.into(),
        ..Default::default()
    };
    let mut no_schedule = device("gpu-0", &[]);
    no_schedule.taints = Some(vec![taint("NoSchedule")]);
    let mut no_execute = device("gpu-1", &[]);
    no_execute.taints = Some(vec![taint("NoExecute")]);
    let mut informational = device("gpu-2", &[]);
    informational.taints = Some(vec![taint("None")]);
    let tolerating = |name: &str, t: dra::DeviceToleration, n: i64| {
        let mut r = count(req("r", "gpu"), n);
        r.exactly.as_mut().unwrap().tolerations = Some(vec![t]);
        claim(name, vec![r])
    };
    let exists = dra::DeviceToleration {
        key: Some("maintenance".into()),
        operator: Some("Exists".into()),
        ..Default::default()
    };
    let equal_other = dra::DeviceToleration {
        key: Some("maintenance".into()),
        value: Some("other".into()),
        ..Default::default()
    };
    let only_no_schedule = dra::DeviceToleration {
        operator: Some("Exists".into()),
        effect: Some("NoSchedule".into()),
        ..Default::default()
    };
    let o = objects(
        vec![local("n1", vec![no_schedule, no_execute, informational])],
        vec![gpu_class()],
        &[
            claim("plain", vec![count(req("r", "gpu"), 2)]),
            tolerating("exists", exists.clone(), 3),
            tolerating("wrong-value", equal_other, 2),
            tolerating("no-schedule-only", only_no_schedule, 2),
        ],
    );
    // Without a toleration only the device whose taint has no blocking effect is usable.
    assert_eq!(run_on(&o, &["plain"], "n1"), Ok(None));
    assert_eq!(
        run_on(&o, &["exists"], "n1"),
        got(&[&["r=gpu-0", "r=gpu-1", "r=gpu-2"]])
    );
    assert_eq!(run_on(&o, &["wrong-value"], "n1"), Ok(None));
    assert_eq!(
        run_on(&o, &["no-schedule-only"], "n1"),
        got(&[&["r=gpu-0", "r=gpu-2"]])
    );
    // The request's tolerations go into each result.
    let a = Allocator::new(&o, vec![o.claim("ns", "exists").unwrap().clone()]);
    let r = a.allocate("n1", &BTreeMap::new()).unwrap().unwrap();
    let results = r[0].devices.as_ref().unwrap().results.as_ref().unwrap();
    assert_eq!(results[0].tolerations, Some(vec![exists]));
}

/// The search asks whether its time is up before each step and stops with TimedOut when it
/// is, whatever it found so far; a limit never reached changes nothing.
#[test]
fn allocation_stops_when_the_time_is_up() {
    use std::cell::Cell;
    let o = objects(
        vec![local("n1", gpus(4))],
        vec![gpu_class()],
        &[claim("c", vec![count(req("r", "gpu"), 3)])],
    );
    let claims = vec![o.claim("ns", "c").unwrap().clone()];
    let a = Allocator::new(&o, claims);
    let labels: BTreeMap<String, String> = BTreeMap::new();
    for after in [0, 1, 3] {
        let checks = Cell::new(0);
        let expired = || {
            checks.set(checks.get() + 1);
            checks.get() > after
        };
        assert_eq!(
            a.allocate_until("n1", &labels, &expired),
            Err(AllocError::TimedOut),
            "{after}"
        );
    }
    let got = a.allocate_until("n1", &labels, &|| false).unwrap().unwrap();
    assert_eq!(
        got[0]
            .devices
            .as_ref()
            .unwrap()
            .results
            .as_ref()
            .unwrap()
            .len(),
        3
    );
}
