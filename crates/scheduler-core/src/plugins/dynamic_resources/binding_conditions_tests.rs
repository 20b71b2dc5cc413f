//! Device binding conditions: the allocator's results and pool order, the claim status
//! readings, Filter/PostFilter on failed or timed-out claims, and Reserve's wait decision
//! (after upstream's allocator and plugin test cases, in our own words).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::resource::v1 as dra;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use super::super::allocator::tests::{
    DRIVER, Nodes, claim, count, device, gpu_class, local, objects, only_node, req, slice,
};
use super::super::tests::{framework, run, snapshot_with, with_claims};
use super::super::{DEALLOCATION_COMPLETED, NOT_AVAILABLE_ON_NODE};
use super::*;
use crate::plugins::dynamic_resources::allocator::Allocator;
use crate::schedule_one::Decision;
use crate::types::dra::binding::{
    BindingReadiness, ClaimBinding, DEVICE_BINDING_TIMEOUT, claim_binding_failed,
    claim_binding_timeout,
};

/// A device that needs attaching: condition `attached`, failure condition `failed`.
fn fabric(name: &str, binds_to_node: bool) -> dra::Device {
    let mut d = device(name, &[]);
    d.binding_conditions = Some(vec!["attached".into()]);
    d.binding_failure_conditions = Some(vec!["failed".into()]);
    d.binds_to_node = binds_to_node.then_some(true);
    d
}

/// Allocates the named claims on `node` (zone `a`): the allocation results.
fn allocate(o: &DraObjects, claims: &[&str], node: &str) -> Option<Vec<dra::AllocationResult>> {
    let claims = claims
        .iter()
        .map(|c| o.claim("ns", c).unwrap().clone())
        .collect();
    let labels: BTreeMap<String, String> = [("zone".to_string(), "a".to_string())].into();
    Allocator::new(o, claims).allocate(node, &labels).unwrap()
}

fn results(a: &dra::AllocationResult) -> &[dra::DeviceRequestAllocationResult] {
    a.devices.as_ref().unwrap().results.as_deref().unwrap()
}

#[test]
fn results_carry_the_devices_binding_conditions() {
    let o = objects(
        vec![slice(
            "fabric",
            "fabric",
            1,
            1,
            Nodes::Zone("a"),
            vec![fabric("gpu-0", false)],
        )],
        vec![gpu_class()],
        &[claim("c", vec![req("r", "gpu")])],
    );
    let got = allocate(&o, &["c"], "n1").unwrap();
    let r = &results(&got[0])[0];
    assert_eq!(r.device, "gpu-0");
    assert_eq!(r.binding_conditions, Some(vec!["attached".to_string()]));
    assert_eq!(
        r.binding_failure_conditions,
        Some(vec!["failed".to_string()])
    );
    // Without bindsToNode the slice's selector (zone a) stays the allocation's.
    let sel = got[0].node_selector.as_ref().unwrap();
    let expr = sel.node_selector_terms[0]
        .match_expressions
        .as_ref()
        .unwrap();
    assert_eq!(expr[0].key, "zone");
}

#[test]
fn binds_to_node_pins_the_allocation_to_the_chosen_node() {
    let mut plain = device("plain", &[]);
    plain.binds_to_node = Some(true);
    let o = objects(
        vec![slice(
            "fabric",
            "fabric",
            1,
            1,
            Nodes::Zone("a"),
            vec![fabric("gpu-0", true), plain],
        )],
        vec![gpu_class()],
        &[
            claim("one", vec![req("r", "gpu")]),
            claim("two", vec![count(req("r", "gpu"), 2)]),
        ],
    );
    for node in ["n1", "n7"] {
        let got = allocate(&o, &["one"], node).unwrap();
        assert_eq!(got[0].node_selector, Some(only_node(node)), "{node}");
    }
    // bindsToNode without binding conditions pins the allocation just the same, and such
    // a result carries no conditions.
    let got = allocate(&o, &["two"], "n2").unwrap();
    assert_eq!(got[0].node_selector, Some(only_node("n2")));
    let plain = results(&got[0])
        .iter()
        .find(|r| r.device == "plain")
        .unwrap();
    assert_eq!(plain.binding_conditions, None);
}

#[test]
fn pools_without_binding_conditions_are_tried_first() {
    // Pool "a-fabric" sorts before "b-local" by name, but needs attaching.
    let o = objects(
        vec![
            slice(
                "a-fabric",
                "a-fabric",
                1,
                1,
                Nodes::All,
                vec![fabric("fab-0", true)],
            ),
            slice(
                "b-local",
                "b-local",
                1,
                1,
                Nodes::Node("n1"),
                vec![device("loc-0", &[])],
            ),
        ],
        vec![gpu_class()],
        &[
            claim("one", vec![req("r", "gpu")]),
            claim("two", vec![count(req("r", "gpu"), 2)]),
        ],
    );
    let got = allocate(&o, &["one"], "n1").unwrap();
    assert_eq!(results(&got[0])[0].device, "loc-0");
    // Another node sees only the fabric pool and gets its device.
    let got = allocate(&o, &["one"], "n2").unwrap();
    assert_eq!(results(&got[0])[0].device, "fab-0");
    // Two devices: the local one first, then the fabric one.
    let got = allocate(&o, &["two"], "n1").unwrap();
    let picked: Vec<&str> = results(&got[0]).iter().map(|r| r.device.as_str()).collect();
    assert_eq!(picked, ["loc-0", "fab-0"]);
}

#[test]
fn within_a_pool_slices_without_binding_conditions_come_first() {
    // One pool of two slices: "a" (sorted first) holds the device needing attaching.
    let o = objects(
        vec![
            slice("a", "mixed", 1, 2, Nodes::All, vec![fabric("fab-0", false)]),
            slice("b", "mixed", 1, 2, Nodes::All, vec![device("plain-0", &[])]),
        ],
        vec![gpu_class()],
        &[claim("one", vec![req("r", "gpu")])],
    );
    let got = allocate(&o, &["one"], "n1").unwrap();
    assert_eq!(results(&got[0])[0].device, "plain-0");
}

#[test]
fn without_the_feature_devices_with_binding_conditions_are_never_allocated() {
    let mut o = objects(
        vec![local(
            "n1",
            vec![fabric("fab-0", false), device("plain", &[])],
        )],
        vec![gpu_class()],
        &[
            claim("one", vec![req("r", "gpu")]),
            claim("two", vec![count(req("r", "gpu"), 2)]),
        ],
    );
    assert!(allocate(&o, &["two"], "n1").is_some());
    o.set_binding_conditions(false);
    let got = allocate(&o, &["one"], "n1").unwrap();
    assert_eq!(results(&got[0])[0].device, "plain");
    assert_eq!(results(&got[0])[0].binding_conditions, None);
    assert_eq!(allocate(&o, &["two"], "n1"), None);
}

fn condition(type_: &str, status: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: "Fabric".into(),
        message: format!("{type_} is {status}"),
        last_transition_time: Time(Timestamp::UNIX_EPOCH),
        observed_generation: None,
    }
}

fn device_status(device: &str, conditions: Vec<Condition>) -> dra::AllocatedDeviceStatus {
    dra::AllocatedDeviceStatus {
        driver: DRIVER.into(),
        pool: "fabric".into(),
        device: device.into(),
        conditions: Some(conditions),
        ..Default::default()
    }
}

/// Claim `name` allocated `devices` of pool "fabric" (each needing `attached`, failing
/// with `failed`), at `at` seconds since the epoch, with the devices' `status`.
fn allocated(
    name: &str,
    devices: &[&str],
    at: Option<i64>,
    status: Vec<dra::AllocatedDeviceStatus>,
) -> dra::ResourceClaim {
    let mut c = claim(name, vec![req("r", "gpu")]);
    c.metadata.resource_version = Some("42".into());
    let results = devices
        .iter()
        .map(|d| dra::DeviceRequestAllocationResult {
            request: "r".into(),
            driver: DRIVER.into(),
            pool: "fabric".into(),
            device: d.to_string(),
            binding_conditions: Some(vec!["attached".into()]),
            binding_failure_conditions: Some(vec!["failed".into()]),
            ..Default::default()
        })
        .collect();
    c.status = Some(dra::ResourceClaimStatus {
        allocation: Some(dra::AllocationResult {
            devices: Some(dra::DeviceAllocationResult {
                results: Some(results),
                config: None,
            }),
            allocation_timestamp: at.map(|s| Time(Timestamp::from_second(s).unwrap())),
            node_selector: None,
        }),
        devices: Some(status).filter(|s| !s.is_empty()),
        reserved_for: None,
    });
    c
}

fn readiness(c: &dra::ResourceClaim) -> Option<BindingReadiness> {
    ClaimBinding::of(c).map(|b| b.readiness)
}

#[test]
fn claim_readiness_follows_the_device_status_conditions() {
    use BindingReadiness::*;
    let failed = Failed(claim_binding_failed("c", "Fabric", "failed is True"));
    let cases: Vec<(&str, dra::ResourceClaim, Option<BindingReadiness>)> = vec![
        ("not allocated", claim("c", vec![req("r", "gpu")]), None),
        (
            "no status for the device",
            allocated("c", &["d0"], None, vec![]),
            Some(Pending),
        ),
        (
            "condition True",
            allocated(
                "c",
                &["d0"],
                None,
                vec![device_status("d0", vec![condition("attached", "True")])],
            ),
            Some(Ready),
        ),
        (
            "condition False",
            allocated(
                "c",
                &["d0"],
                None,
                vec![device_status("d0", vec![condition("attached", "False")])],
            ),
            Some(Pending),
        ),
        (
            "failure condition True wins over a True binding condition",
            allocated(
                "c",
                &["d0"],
                None,
                vec![device_status(
                    "d0",
                    vec![condition("attached", "True"), condition("failed", "True")],
                )],
            ),
            Some(failed.clone()),
        ),
        (
            "failure condition False is no failure",
            allocated(
                "c",
                &["d0"],
                None,
                vec![device_status(
                    "d0",
                    vec![condition("attached", "True"), condition("failed", "False")],
                )],
            ),
            Some(Ready),
        ),
        (
            "one of two devices not ready",
            allocated(
                "c",
                &["d0", "d1"],
                None,
                vec![device_status("d0", vec![condition("attached", "True")])],
            ),
            Some(Pending),
        ),
        (
            "a pending device before a failed one: pending, as upstream stops at the first",
            allocated(
                "c",
                &["d0", "d1"],
                None,
                vec![device_status("d1", vec![condition("failed", "True")])],
            ),
            Some(Pending),
        ),
        (
            "status of another device does not count",
            allocated(
                "c",
                &["d0"],
                None,
                vec![device_status("d9", vec![condition("attached", "True")])],
            ),
            Some(Pending),
        ),
    ];
    for (name, c, want) in cases {
        assert_eq!(readiness(&c), want, "{name}");
    }
    // A device without binding conditions needs nothing.
    let mut plain = allocated("c", &["d0"], None, vec![]);
    let r = &mut plain.status.as_mut().unwrap().allocation.as_mut().unwrap();
    r.devices.as_mut().unwrap().results.as_mut().unwrap()[0].binding_conditions = None;
    assert_eq!(readiness(&plain), None);
}

#[test]
fn messages_are_upstreams() {
    assert_eq!(
        claim_binding_failed("gpu-claim", "AttachFailed", "no \"slot\" free"),
        r#"claim gpu-claim binding failed: reason=AttachFailed, message="no \"slot\" free""#
    );
    assert_eq!(
        claim_binding_timeout("gpu-claim"),
        "claim gpu-claim binding timeout"
    );
    assert_eq!(DEVICE_BINDING_TIMEOUT, "device binding timeout");
    assert_eq!(
        waiting_for_binding_conditions("n1"),
        "waiting for binding conditions for device on node n1"
    );
}

#[test]
fn a_claim_times_out_after_the_binding_timeout_from_its_allocation() {
    let at = 1_000_000;
    let b = ClaimBinding::of(&allocated("c", &["d0"], Some(at), vec![])).unwrap();
    let when = |s: i64| SystemTime::UNIX_EPOCH + Duration::from_secs(s as u64);
    let timeout = Duration::from_secs(600);
    assert!(!b.timed_out(timeout, when(at + 599)));
    assert!(!b.timed_out(timeout, when(at + 600)));
    assert!(b.timed_out(timeout, when(at + 601)));
    // Without a timestamp there is nothing to measure from.
    let b = ClaimBinding::of(&allocated("c", &["d0"], None, vec![])).unwrap();
    assert!(!b.timed_out(timeout, when(at + 10_000)));
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// The failed attempt's message and the claim PostFilter hands over for deallocation.
fn rejected(o: DraObjects) -> (String, Option<String>) {
    match run(
        &framework(None),
        &with_claims(&["c"]),
        &snapshot_with(true, o),
    ) {
        Decision::Unschedulable {
            message,
            deallocate,
            ..
        } => (message, deallocate.map(|d| d.name)),
        other => panic!("want Unschedulable: {other:?}"),
    }
}

fn cluster_with(c: &dra::ResourceClaim) -> DraObjects {
    objects(vec![], vec![gpu_class()], std::slice::from_ref(c))
}

#[test]
fn a_failed_or_timed_out_claim_is_unavailable_everywhere_and_deallocated() {
    let failed = allocated(
        "c",
        &["d0"],
        Some(now_secs()),
        vec![device_status("d0", vec![condition("failed", "True")])],
    );
    let timed_out = allocated("c", &["d0"], Some(now_secs() - 3600), vec![]);
    for (name, c) in [("failed", &failed), ("timed out", &timed_out)] {
        let (message, deallocate) = rejected(cluster_with(c));
        assert!(
            message.starts_with(&format!(
                "0/2 nodes are available: 2 {NOT_AVAILABLE_ON_NODE}."
            )),
            "{name}: {message}"
        );
        assert!(
            message.contains(DEALLOCATION_COMPLETED),
            "{name}: {message}"
        );
        assert_eq!(deallocate.as_deref(), Some("c"), "{name}");
    }
}

/// The binding wait Reserve decides when the pod of claim `c` is scheduled with `fw` on
/// `o` (the pod must be placed).
fn wait_decided(fw: &crate::framework::Framework, o: DraObjects) -> Option<BindingWait> {
    let d = run(fw, &with_claims(&["c"]), &snapshot_with(true, o));
    let Decision::Bind { state, .. } = d else {
        panic!("want Bind: {d:?}");
    };
    decided_binding_wait(&state).cloned()
}

#[test]
fn a_pending_or_ready_claim_within_the_timeout_stays_usable() {
    let pending = allocated("c", &["d0"], Some(now_secs()), vec![]);
    let ready = allocated(
        "c",
        &["d0"],
        Some(now_secs() - 3600),
        vec![device_status("d0", vec![condition("attached", "True")])],
    );
    for (name, c) in [("pending", &pending), ("ready", &ready)] {
        // The binding cycle still checks (and, if pending, waits for) the conditions.
        let wait = wait_decided(&framework(None), cluster_with(c)).unwrap();
        assert_eq!(wait.claims, [("ns".to_string(), "c".to_string())], "{name}");
    }
    // Without the feature, nothing is judged or waited for.
    let mut o = cluster_with(&allocated("c", &["d0"], Some(now_secs() - 3600), vec![]));
    o.set_binding_conditions(false);
    assert_eq!(wait_decided(&framework(None), o), None);
}

#[test]
fn reserve_decides_to_wait_for_new_allocations_with_binding_conditions() {
    let o = objects(
        vec![local("n1", vec![fabric("fab-0", false)])],
        vec![gpu_class()],
        &[
            claim("c", vec![req("r", "gpu")]),
            claim("d", vec![req("r", "gpu")]),
        ],
    );
    let d = run(
        &framework(None),
        &with_claims(&["c"]),
        &snapshot_with(true, o.clone()),
    );
    let Decision::Bind { state, node, .. } = d else {
        panic!("want Bind: {d:?}");
    };
    assert_eq!(node, "n1");
    let wait = decided_binding_wait(&state).unwrap();
    assert_eq!(wait.claims, [("ns".to_string(), "c".to_string())]);
    assert_eq!(wait.timeout, Duration::from_secs(600), "upstream's default");
    // The profile's bindingTimeout is the one waited for.
    let fw = framework(Some(
        "apiVersion: kubescheduler.config.k8s.io/v1\n\
         kind: KubeSchedulerConfiguration\n\
         profiles:\n\
         - schedulerName: default-scheduler\n  \
           pluginConfig:\n  \
           - name: DynamicResources\n    \
             args:\n      \
               bindingTimeout: 5s\n",
    ));
    assert_eq!(
        wait_decided(&fw, o.clone()).unwrap().timeout,
        Duration::from_secs(5)
    );
    // A device without binding conditions: nothing to wait for.
    let o = objects(
        vec![local("n1", vec![device("plain", &[])])],
        vec![gpu_class()],
        &[claim("c", vec![req("r", "gpu")])],
    );
    assert_eq!(wait_decided(&framework(None), o), None);
}
