//! Consumable capacity, after upstream's allocator cases for devices allowing multiple
//! allocations, in our own words: NICs with 10G of bandwidth handed out in shares.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1 as dra;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;

use super::tests::{DRIVER, claim, count, device, gpu_class, local, objects};
use super::{AllocError, Allocator};
use crate::types::dra::{DeviceId, DraObjects};

fn q(s: &str) -> K8sQuantity {
    K8sQuantity(s.into())
}

/// A device allowing multiple allocations with one capacity, `bandwidth`.
fn nic(name: &str, value: &str, policy: Option<dra::CapacityRequestPolicy>) -> dra::Device {
    let mut d = device(name, &[]);
    d.allow_multiple_allocations = Some(true);
    d.capacity = Some(
        [(
            "bandwidth".to_string(),
            dra::DeviceCapacity {
                value: q(value),
                request_policy: policy,
            },
        )]
        .into(),
    );
    d
}

fn range(
    default: &str,
    min: &str,
    max: Option<&str>,
    step: Option<&str>,
) -> dra::CapacityRequestPolicy {
    dra::CapacityRequestPolicy {
        default: Some(q(default)),
        valid_range: Some(dra::CapacityRequestPolicyRange {
            min: q(min),
            max: max.map(q),
            step: step.map(q),
        }),
        valid_values: None,
    }
}

/// A request for one device of class `gpu` asking for `bandwidth` (None: no amount).
fn wants(name: &str, bandwidth: Option<&str>) -> dra::DeviceRequest {
    let mut r = super::tests::req(name, "gpu");
    if let Some(b) = bandwidth {
        r.exactly.as_mut().unwrap().capacity = Some(dra::CapacityRequirements {
            requests: Some([("bandwidth".to_string(), q(b))].into()),
        });
    }
    r
}

type Results = Result<Option<Vec<dra::AllocationResult>>, AllocError>;

fn allocate(o: &DraObjects, claims: &[&str]) -> Results {
    let claims = claims
        .iter()
        .map(|c| o.claim("ns", c).unwrap().clone())
        .collect();
    let labels: BTreeMap<String, String> = BTreeMap::new();
    Allocator::new(o, claims).allocate("n1", &labels)
}

fn devices(a: &dra::AllocationResult) -> Vec<&dra::DeviceRequestAllocationResult> {
    a.devices
        .as_ref()
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
        .collect()
}

/// "device:consumed bandwidth" per result of one claim.
fn shares(r: &Results) -> Vec<String> {
    let Ok(Some(all)) = r else {
        panic!("want an allocation, got {r:?}");
    };
    all.iter()
        .flat_map(devices)
        .map(|d| {
            let b = d
                .consumed_capacity
                .as_ref()
                .and_then(|c| c.get("bandwidth"))
                .map_or("-".to_string(), |q| q.0.clone());
            format!("{}:{b}", d.device)
        })
        .collect()
}

/// Allocates the claim on n1 and stores the allocation in its status (as the controller's
/// write would), so later claims see it.
fn allocate_and_store(o: &mut DraObjects, c: &dra::ResourceClaim) -> Vec<String> {
    o.update_claim(c);
    let name = c.metadata.name.clone().unwrap();
    let got = allocate(o, &[&name]);
    let s = shares(&got);
    let mut c = c.clone();
    c.metadata.resource_version = Some("2".into());
    c.status = Some(dra::ResourceClaimStatus {
        allocation: Some(got.unwrap().unwrap().remove(0)),
        ..Default::default()
    });
    o.update_claim(&c);
    s
}

#[test]
fn claims_share_a_device_until_its_capacity_is_used_up() {
    let mut o = objects(
        vec![local(
            "n1",
            vec![nic("nic-0", "10G", None), nic("nic-1", "10G", None)],
        )],
        vec![gpu_class()],
        &[],
    );
    let a = claim("a", vec![wants("r", Some("4G"))]);
    let b = claim("b", vec![wants("r", Some("6G"))]);
    let c = claim("c", vec![wants("r", Some("1G"))]);
    assert_eq!(allocate_and_store(&mut o, &a), ["nic-0:4G"]);
    assert_eq!(
        allocate_and_store(&mut o, &b),
        ["nic-0:6G"],
        "4G + 6G fit 10G"
    );
    assert_eq!(
        allocate_and_store(&mut o, &c),
        ["nic-1:1G"],
        "nic-0 is full"
    );
    let nic0 = DeviceId {
        driver: DRIVER.into(),
        pool: "n1".into(),
        device: "nic-0".into(),
    };
    let used = &o.shared_devices()[&nic0];
    assert_eq!(used.shares, 2);
    assert_eq!(used.consumed["bandwidth"], 10_000_000_000 * 1_000_000_000);
    assert!(
        !o.device_allocated(&nic0),
        "shares do not take the device whole"
    );

    // Deleting a claim gives its share back.
    o.remove_claim("ns", "b");
    assert_eq!(o.shared_devices()[&nic0].shares, 1);
    let d = claim("d", vec![wants("r", Some("5G"))]);
    assert_eq!(allocate_and_store(&mut o, &d), ["nic-0:5G"]);
}

#[test]
fn one_claim_may_take_several_shares_of_one_device() {
    let o = objects(
        vec![local("n1", vec![nic("nic-0", "10G", None)])],
        vec![gpu_class()],
        &[
            claim("two", vec![count(wants("r", Some("5G")), 2)]),
            claim("three", vec![count(wants("r", Some("5G")), 3)]),
            claim(
                "mixed",
                vec![wants("small", Some("3G")), wants("big", Some("7G"))],
            ),
        ],
    );
    let two = allocate(&o, &["two"]);
    assert_eq!(shares(&two), ["nic-0:5G", "nic-0:5G"]);
    let ids: Vec<String> = devices(&two.unwrap().unwrap()[0])
        .iter()
        .map(|d| d.share_id.clone().expect("a share has an id"))
        .collect();
    assert_ne!(ids[0], ids[1], "each share has its own id");
    for id in &ids {
        let parts: Vec<usize> = id.split('-').map(str::len).collect();
        assert_eq!(parts, [8, 4, 4, 4, 12], "UUID-shaped: {id}");
    }
    assert_eq!(allocate(&o, &["three"]), Ok(None), "15G > 10G");
    assert_eq!(shares(&allocate(&o, &["mixed"])), ["nic-0:3G", "nic-0:7G"]);
}

#[test]
fn without_an_amount_a_share_takes_the_default_or_everything() {
    let o = objects(
        vec![local(
            "n1",
            vec![
                nic("plain", "10G", None),
                nic("policy", "10G", Some(range("2G", "1G", None, None))),
            ],
        )],
        vec![gpu_class()],
        &[
            claim("two", vec![count(wants("r", None), 2)]),
            claim("six", vec![count(wants("r", None), 6)]),
        ],
    );
    // The first share takes all of "plain"; the second gets 2G of "policy".
    assert_eq!(shares(&allocate(&o, &["two"])), ["plain:10G", "policy:2G"]);
    // 10G + 5 x 2G.
    assert_eq!(
        shares(&allocate(&o, &["six"])).len(),
        6,
        "five defaults fit next to the whole device"
    );
}

#[test]
fn request_policy_rounds_amounts_up_or_refuses_them() {
    let policy = range("10G", "10G", Some("50G"), Some("5G"));
    let o = objects(
        vec![local("n1", vec![nic("nic-0", "100G", Some(policy))])],
        vec![gpu_class()],
        &[
            claim("below-min", vec![wants("r", Some("3G"))]),
            claim("off-step", vec![wants("r", Some("12G"))]),
            claim("on-step", vec![wants("r", Some("20G"))]),
            claim("above-max", vec![wants("r", Some("51G"))]),
            claim(
                "unknown-capacity",
                vec![{
                    let mut r = wants("r", None);
                    r.exactly.as_mut().unwrap().capacity = Some(dra::CapacityRequirements {
                        requests: Some([("latency".to_string(), q("1"))].into()),
                    });
                    r
                }],
            ),
        ],
    );
    assert_eq!(shares(&allocate(&o, &["below-min"])), ["nic-0:10G"]);
    assert_eq!(shares(&allocate(&o, &["off-step"])), ["nic-0:15G"]);
    assert_eq!(shares(&allocate(&o, &["on-step"])), ["nic-0:20G"]);
    assert_eq!(allocate(&o, &["above-max"]), Ok(None));
    assert_eq!(allocate(&o, &["unknown-capacity"]), Ok(None));
}

#[test]
fn valid_values_round_up_to_the_next_listed_amount() {
    let policy = dra::CapacityRequestPolicy {
        default: Some(q("1G")),
        valid_range: None,
        valid_values: Some(vec![q("1G"), q("4G"), q("8G")]),
    };
    let o = objects(
        vec![local("n1", vec![nic("nic-0", "10G", Some(policy))])],
        vec![gpu_class()],
        &[
            claim("three", vec![wants("r", Some("3G"))]),
            claim("nine", vec![wants("r", Some("9G"))]),
            claim("twice", vec![count(wants("r", Some("3G")), 3)]),
        ],
    );
    assert_eq!(shares(&allocate(&o, &["three"])), ["nic-0:4G"]);
    assert_eq!(allocate(&o, &["nine"]), Ok(None), "above every value");
    assert_eq!(allocate(&o, &["twice"]), Ok(None), "3 x 4G > 10G");
}

#[test]
fn devices_allocated_whole_are_filtered_by_capacity_requests() {
    // device() has 40Gi of memory and no allowMultipleAllocations.
    let ask = |name: &str, mem: &str| {
        let mut r = super::tests::req("r", "gpu");
        r.exactly.as_mut().unwrap().capacity = Some(dra::CapacityRequirements {
            requests: Some([("memory".to_string(), q(mem))].into()),
        });
        claim(name, vec![r])
    };
    let o = objects(
        vec![local("n1", vec![device("gpu-0", &[])])],
        vec![gpu_class()],
        &[ask("fits", "16Gi"), ask("too-big", "48Gi")],
    );
    let got = allocate(&o, &["fits"]);
    assert_eq!(
        shares(&got),
        ["gpu-0:-"],
        "no consumedCapacity for a whole device"
    );
    assert!(devices(&got.unwrap().unwrap()[0])[0].share_id.is_none());
    assert_eq!(allocate(&o, &["too-big"]), Ok(None));
}

#[test]
fn a_device_held_whole_is_not_shared() {
    let mut held = claim("held", vec![wants("r", None)]);
    held.status = Some(dra::ResourceClaimStatus {
        allocation: Some(dra::AllocationResult {
            devices: Some(dra::DeviceAllocationResult {
                results: Some(vec![dra::DeviceRequestAllocationResult {
                    request: "r".into(),
                    driver: DRIVER.into(),
                    pool: "n1".into(),
                    device: "nic-0".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
    let o = objects(
        vec![local("n1", vec![nic("nic-0", "10G", None)])],
        vec![gpu_class()],
        &[held, claim("new", vec![wants("r", Some("1G"))])],
    );
    assert_eq!(allocate(&o, &["new"]), Ok(None));
}

#[test]
fn preemption_gives_a_victims_share_back_in_the_attempt() {
    let mut o = objects(
        vec![local("n1", vec![nic("nic-0", "10G", None)])],
        vec![gpu_class()],
        &[],
    );
    let victim = claim("victim", vec![wants("r", Some("8G"))]);
    assert_eq!(allocate_and_store(&mut o, &victim), ["nic-0:8G"]);
    o.update_claim(&claim("new", vec![wants("r", Some("5G"))]));
    let nic0 = DeviceId {
        driver: DRIVER.into(),
        pool: "n1".into(),
        device: "nic-0".into(),
    };
    let labels: BTreeMap<String, String> = BTreeMap::new();
    let mut a = Allocator::new(&o, vec![o.claim("ns", "new").unwrap().clone()]);
    assert_eq!(a.allocate("n1", &labels), Ok(None), "8G + 5G > 10G");
    let share = vec![(
        nic0,
        vec![("bandwidth".to_string(), 8_000_000_000 * 1_000_000_000)],
    )];
    a.free_shares(share.clone());
    assert!(
        a.allocate("n1", &labels).unwrap().is_some(),
        "the victim's 8G freed"
    );
    a.unfree_shares(share);
    assert_eq!(a.allocate("n1", &labels), Ok(None), "added back");
}
