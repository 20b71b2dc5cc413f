//! Partitionable devices, after upstream's allocator cases for shared counters, in our own
//! words: one GPU with 8Gi of memory offered whole or as two 4Gi halves.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::resource::v1 as dra;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;

use super::super::tests::{
    DRIVER, Nodes, claim, count, device, gpu_class, objects, picked, req, slice,
};
use super::super::{AllocError, Allocator};
use crate::plugins::dynamic_resources::device_index::DeviceIndex;
use crate::types::dra::{DeviceId, DraObjects};

fn counters(pairs: &[(&str, &str)]) -> BTreeMap<String, dra::Counter> {
    pairs
        .iter()
        .map(|(k, v)| {
            (
                k.to_string(),
                dra::Counter {
                    value: K8sQuantity(v.to_string()),
                },
            )
        })
        .collect()
}

fn consuming(name: &str, pairs: &[(&str, &str)]) -> dra::Device {
    let mut d = device(name, &[]);
    d.consumes_counters = Some(vec![dra::DeviceCounterConsumption {
        counter_set: "gpu-0".into(),
        counters: counters(pairs),
        compatibility_groups: None,
    }]);
    d
}

/// The whole GPU first, then its halves.
fn partitioned() -> Vec<dra::Device> {
    vec![
        consuming("gpu-0", &[("memory", "8Gi")]),
        consuming("gpu-0-half-0", &[("memory", "4Gi")]),
        consuming("gpu-0-half-1", &[("memory", "4Gi")]),
    ]
}

fn counter_set(pairs: &[(&str, &str)]) -> Vec<dra::CounterSet> {
    vec![dra::CounterSet {
        name: "gpu-0".into(),
        counters: counters(pairs),
    }]
}

/// One node-local slice holding the counter set and the devices.
fn pool(devices: Vec<dra::Device>, set: &[(&str, &str)]) -> dra::ResourceSlice {
    let mut s = slice("n1-gpus", "n1", 1, 1, Nodes::Node("n1"), devices);
    s.spec.shared_counters = Some(counter_set(set));
    s
}

/// Allocates the claims (by name) on n1; devices per claim, or None.
fn run(
    o: &DraObjects,
    claims: &[&str],
    freed: &[&str],
) -> Result<Option<Vec<Vec<String>>>, AllocError> {
    run_with(Arc::new(DeviceIndex::build(o)), o, claims, freed)
}

/// [`run`] over a given device index (as the plugin shares one across pods).
fn run_with(
    index: Arc<DeviceIndex>,
    o: &DraObjects,
    claims: &[&str],
    freed: &[&str],
) -> Result<Option<Vec<Vec<String>>>, AllocError> {
    let claims = claims
        .iter()
        .map(|c| o.claim("ns", c).unwrap().clone())
        .collect();
    let mut a = Allocator::with_index(index, o, claims);
    a.free_devices(freed.iter().map(|d| DeviceId {
        driver: DRIVER.into(),
        pool: "n1".into(),
        device: d.to_string(),
    }));
    let labels: BTreeMap<String, String> = BTreeMap::new();
    a.allocate("n1", &labels)
        .map(|r| r.map(|results| picked(&results, |r| r.device.clone())))
}

fn want(v: &[&[&str]]) -> Result<Option<Vec<Vec<String>>>, AllocError> {
    Ok(Some(
        v.iter()
            .map(|c| c.iter().map(|s| s.to_string()).collect())
            .collect(),
    ))
}

/// A claim already allocated `device` (so it holds its counters).
fn holding(name: &str, device: &str) -> dra::ResourceClaim {
    let mut c = claim(name, vec![req("r", "gpu")]);
    c.status = Some(dra::ResourceClaimStatus {
        allocation: Some(dra::AllocationResult {
            devices: Some(dra::DeviceAllocationResult {
                results: Some(vec![dra::DeviceRequestAllocationResult {
                    request: "r".into(),
                    driver: DRIVER.into(),
                    pool: "n1".into(),
                    device: device.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
    c
}

#[test]
fn devices_share_their_pools_counters() {
    let one = claim("one", vec![req("r", "gpu")]);
    let two = claim("two", vec![count(req("r", "gpu"), 2)]);
    let three = claim("three", vec![count(req("r", "gpu"), 3)]);
    let other = claim("other", vec![req("r", "gpu")]);
    let o = |held: &[dra::ResourceClaim]| {
        let mut claims = vec![one.clone(), two.clone(), three.clone(), other.clone()];
        claims.extend_from_slice(held);
        objects(
            vec![pool(partitioned(), &[("memory", "8Gi")])],
            vec![gpu_class()],
            &claims,
        )
    };
    // (case, held by other claims, claims to allocate, freed by preemption, want)
    type Case<'a> = (
        &'a str,
        Vec<dra::ResourceClaim>,
        &'a [&'a str],
        &'a [&'a str],
        Result<Option<Vec<Vec<String>>>, AllocError>,
    );
    let cases: Vec<Case<'_>> = vec![
        (
            "the whole GPU fits",
            vec![],
            &["one"],
            &[],
            want(&[&["gpu-0"]]),
        ),
        (
            "two devices: the whole GPU leaves nothing, so both halves",
            vec![],
            &["two"],
            &[],
            want(&[&["gpu-0-half-0", "gpu-0-half-1"]]),
        ),
        (
            "three devices exceed the memory",
            vec![],
            &["three"],
            &[],
            Ok(None),
        ),
        (
            "two claims of the pod: no device is counted twice",
            vec![],
            &["one", "other"],
            &[],
            want(&[&["gpu-0-half-0"], &["gpu-0-half-1"]]),
        ),
        (
            "an allocated half leaves only the other half",
            vec![holding("held", "gpu-0-half-0")],
            &["one"],
            &[],
            want(&[&["gpu-0-half-1"]]),
        ),
        (
            "the allocated whole GPU leaves nothing",
            vec![holding("held", "gpu-0")],
            &["one"],
            &[],
            Ok(None),
        ),
        (
            "a victim's device frees its counters",
            vec![holding("held", "gpu-0")],
            &["two"],
            &["gpu-0"],
            want(&[&["gpu-0-half-0", "gpu-0-half-1"]]),
        ),
    ];
    for (name, held, claims, freed, w) in cases {
        assert_eq!(run(&o(&held), claims, freed), w, "{name}");
    }
}

#[test]
fn counters_published_in_their_own_slice() {
    // Since 1.35 a pool may carry its counter sets in a slice without devices.
    let mut counters_only = slice("a-counters", "n1", 1, 2, Nodes::Node("n1"), vec![]);
    counters_only.spec.node_name = None;
    counters_only.spec.devices = None;
    counters_only.spec.shared_counters = Some(counter_set(&[("memory", "8Gi")]));
    let devices = slice("b-devices", "n1", 1, 2, Nodes::Node("n1"), partitioned());
    let o = objects(
        vec![counters_only, devices.clone()],
        vec![gpu_class()],
        &[claim("two", vec![count(req("r", "gpu"), 2)])],
    );
    assert_eq!(
        run(&o, &["two"], &[]),
        want(&[&["gpu-0-half-0", "gpu-0-half-1"]])
    );
    // Without the counters slice the pool is incomplete and not used at all.
    let o = objects(
        vec![devices],
        vec![gpu_class()],
        &[claim("two", vec![count(req("r", "gpu"), 2)])],
    );
    assert_eq!(run(&o, &["two"], &[]), Ok(None));
}

#[test]
fn only_the_newest_generation_counts() {
    // Generation 1 offered 16Gi (and would win, its slice sorting last); generation 2, the
    // current one, offers 8Gi: the three devices (16Gi) no longer fit, two still do.
    let mut old = slice("z-old", "n1", 1, 1, Nodes::Node("n1"), partitioned());
    old.spec.shared_counters = Some(counter_set(&[("memory", "16Gi")]));
    let mut new = slice("a-new", "n1", 2, 1, Nodes::Node("n1"), partitioned());
    new.spec.shared_counters = Some(counter_set(&[("memory", "8Gi")]));
    let claims = [
        claim("two", vec![count(req("r", "gpu"), 2)]),
        claim("three", vec![count(req("r", "gpu"), 3)]),
    ];
    let o = objects(vec![old.clone(), new], vec![gpu_class()], &claims);
    assert_eq!(run(&o, &["three"], &[]), Ok(None));
    assert_eq!(
        run(&o, &["two"], &[]),
        want(&[&["gpu-0-half-0", "gpu-0-half-1"]])
    );
    // Alone, the old generation is the newest and its 16Gi count.
    let o = objects(vec![old], vec![gpu_class()], &claims);
    assert_eq!(
        run(&o, &["three"], &[]),
        want(&[&["gpu-0", "gpu-0-half-0", "gpu-0-half-1"]])
    );
}

#[test]
fn one_index_many_attempts_each_with_its_own_use() {
    // The counter sets live in the shared index; what allocated, freed and picked devices
    // use is per allocator and per call, so attempts never see each other's picks.
    let o = objects(
        vec![pool(partitioned(), &[("memory", "8Gi")])],
        vec![gpu_class()],
        &[
            claim("one", vec![req("r", "gpu")]),
            claim("two", vec![count(req("r", "gpu"), 2)]),
            holding("held", "gpu-0"),
        ],
    );
    let index = Arc::new(DeviceIndex::build(&o));
    assert_eq!(index.counters.len(), 1, "one pool consumes counters");
    let halves = want(&[&["gpu-0-half-0", "gpu-0-half-1"]]);
    // A victim's whole GPU frees the counters in that attempt only.
    assert_eq!(run_with(index.clone(), &o, &["two"], &["gpu-0"]), halves);
    assert_eq!(run_with(index.clone(), &o, &["two"], &[]), Ok(None));
    assert_eq!(run_with(index.clone(), &o, &["one"], &[]), Ok(None));
    // One allocator asked twice (two nodes' Filter calls) starts afresh each time.
    let mut a = Allocator::with_index(index, &o, vec![o.claim("ns", "two").unwrap().clone()]);
    a.free_devices([DeviceId {
        driver: DRIVER.into(),
        pool: "n1".into(),
        device: "gpu-0".into(),
    }]);
    let labels: BTreeMap<String, String> = BTreeMap::new();
    let first = a.allocate("n1", &labels).unwrap();
    assert!(first.is_some());
    assert_eq!(a.allocate("n1", &labels).unwrap(), first);
}

#[test]
fn every_counter_of_the_set_must_be_left() {
    let mut whole = consuming("gpu-0", &[("memory", "4Gi"), ("cores", "3")]);
    whole.name = "big-cores".into();
    let o = objects(
        vec![pool(
            vec![
                whole,
                consuming("small", &[("memory", "4Gi"), ("cores", "1")]),
                consuming("small-2", &[("memory", "4Gi"), ("cores", "1")]),
            ],
            &[("memory", "8Gi"), ("cores", "2")],
        )],
        vec![gpu_class()],
        &[
            claim("one", vec![req("r", "gpu")]),
            claim("two", vec![count(req("r", "gpu"), 2)]),
        ],
    );
    assert_eq!(run(&o, &["one"], &[]), want(&[&["small"]]), "3 cores > 2");
    assert_eq!(run(&o, &["two"], &[]), want(&[&["small", "small-2"]]));
}

#[test]
fn consumption_ferrosched_cannot_read_is_never_allocated() {
    let bad = consuming("bad-quantity", &[("memory", "lots")]);
    let o = objects(
        vec![pool(vec![bad], &[("memory", "8Gi")])],
        vec![gpu_class()],
        &[claim("one", vec![req("r", "gpu")])],
    );
    assert_eq!(run(&o, &["one"], &[]), Ok(None));
}

fn grouped(name: &str, groups: &[&str]) -> dra::Device {
    let mut d = consuming(name, &[("memory", "1Gi")]);
    d.consumes_counters.as_mut().unwrap()[0].compatibility_groups =
        Some(groups.iter().map(|g| g.to_string()).collect());
    d
}

#[test]
fn compatibility_groups_decide_which_devices_go_together() {
    // Plenty of counters: only the groups decide.
    let devices = vec![
        grouped("a", &["x"]),
        grouped("b", &["y"]),
        grouped("ab", &["x", "y"]),
        grouped("none", &[]),
        grouped("none-2", &[]),
    ];
    let by_name = |c: &str, names: &[&str]| {
        let mut r = req("r", "gpu");
        let list = names
            .iter()
            .map(|n| format!("{n:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        r.exactly.as_mut().unwrap().selectors = Some(vec![dra::DeviceSelector {
            cel: Some(dra::CELDeviceSelector {
                expression: format!("device.attributes[\"{DRIVER}\"].name in [{list}]"),
            }),
        }]);
        claim(c, vec![count(r, names.len() as i64)])
    };
    let mut devices = devices;
    for d in &mut devices {
        d.attributes = Some(
            [(
                "name".to_string(),
                dra::DeviceAttribute {
                    string: Some(d.name.clone()),
                    ..Default::default()
                },
            )]
            .into(),
        );
    }
    let o = objects(
        vec![pool(devices, &[("memory", "8Gi")])],
        vec![gpu_class()],
        &[
            by_name("x-and-xy", &["a", "ab"]),
            by_name("x-and-y", &["a", "b"]),
            by_name("three-share-none", &["a", "b", "ab"]),
            by_name("no-groups-together", &["none", "none-2"]),
            by_name("grouped-and-not", &["a", "none"]),
        ],
    );
    assert_eq!(run(&o, &["x-and-xy"], &[]), want(&[&["a", "ab"]]));
    assert_eq!(run(&o, &["x-and-y"], &[]), Ok(None), "no common group");
    assert_eq!(
        run(&o, &["three-share-none"], &[]),
        Ok(None),
        "x and y pairwise with xy, but nothing common to all three"
    );
    assert_eq!(
        run(&o, &["no-groups-together"], &[]),
        want(&[&["none", "none-2"]])
    );
    assert_eq!(run(&o, &["grouped-and-not"], &[]), Ok(None));
}

#[test]
fn allocated_devices_count_for_compatibility_groups() {
    let o = objects(
        vec![pool(
            vec![
                grouped("a", &["x"]),
                grouped("b", &["y"]),
                grouped("ab", &["x", "y"]),
            ],
            &[("memory", "8Gi")],
        )],
        vec![gpu_class()],
        &[holding("held", "a"), claim("one", vec![req("r", "gpu")])],
    );
    // "a" is held (group x): "b" cannot join it, "ab" can.
    assert_eq!(run(&o, &["one"], &[]), want(&[&["ab"]]));
    // Freed by preemption, "a" no longer constrains: the first device that fits wins.
    assert_eq!(run(&o, &["one"], &["a"]), want(&[&["a"]]));
}

#[test]
fn with_the_gate_off_grouped_devices_and_their_counter_sets_are_left_alone() {
    // The upstream skew rule (DRADeviceCompatibilityGroups off in the scheduler while the
    // API server keeps the field): what this scheduler may not enforce, it does not touch.
    let plain = || consuming("plain", &[("memory", "1Gi")]);
    let free = |on: bool| {
        let mut o = objects(
            vec![pool(
                vec![grouped("a", &["x"]), plain()],
                &[("memory", "8Gi")],
            )],
            vec![gpu_class()],
            &[claim("one", vec![req("r", "gpu")])],
        );
        o.set_compatibility_groups(on);
        run(&o, &["one"], &[])
    };
    assert_eq!(
        free(true),
        want(&[&["a"]]),
        "gate on: the first device fits"
    );
    assert_eq!(
        free(false),
        want(&[&["plain"]]),
        "gate off: never a grouped one"
    );

    // "a" (group x) is held: on, "ax" may join it; off, "ax" declares groups and "plain"
    // would join a counter set whose groups the scheduler cannot check.
    let held = |on: bool| {
        let mut o = objects(
            vec![pool(
                vec![grouped("a", &["x"]), grouped("ax", &["x"]), plain()],
                &[("memory", "8Gi")],
            )],
            vec![gpu_class()],
            &[holding("held", "a"), claim("one", vec![req("r", "gpu")])],
        );
        o.set_compatibility_groups(on);
        run(&o, &["one"], &[])
    };
    assert_eq!(held(true), want(&[&["ax"]]));
    assert_eq!(held(false), Ok(None));
}

#[test]
fn a_shared_device_takes_its_counters_once() {
    let mut nic = consuming("nic", &[("memory", "6Gi")]);
    nic.allow_multiple_allocations = Some(true);
    // Two shares of 1Gi of the device's 40Gi "memory" capacity (device() has it).
    let mut r = count(req("r", "gpu"), 2);
    r.exactly.as_mut().unwrap().capacity = Some(dra::CapacityRequirements {
        requests: Some([("memory".to_string(), K8sQuantity("1Gi".into()))].into()),
    });
    let o = objects(
        vec![pool(vec![nic], &[("memory", "8Gi")])],
        vec![gpu_class()],
        &[claim("small-shares", vec![r])],
    );
    // 6Gi of the set's 8Gi taken once, not twice.
    assert_eq!(run(&o, &["small-shares"], &[]), want(&[&["nic", "nic"]]));
}
