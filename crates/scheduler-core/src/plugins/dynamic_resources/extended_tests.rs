use std::sync::Arc;

use k8s_openapi::api::resource::v1 as dra;

use super::super::CANNOT_ALLOCATE_ALL_CLAIMS;
use super::super::allocator::tests::{claim, gpu_class, gpus, local, req};
use super::*;
use crate::cache::Snapshot;
use crate::framework::Framework;
use crate::plugins::node_resources_fit::INSUFFICIENT_PREFIX;
use crate::schedule_one::Decision;
use crate::types::dra::extended::{RESOURCE_DEVICE_CLASS_PREFIX, SPECIAL_CLAIM_NAME};
use crate::types::dra::{ConsumerRef, DeviceId};

const GPU: &str = "example.com/gpu";

/// Class `gpu` (the allocator tests' driver), naming `example.com/gpu` when `explicit`.
fn objects(explicit: bool, devices_on_n1: usize) -> DraObjects {
    let mut class: dra::DeviceClass = gpu_class();
    if explicit {
        class.spec.get_or_insert_default().extended_resource_name = Some(GPU.into());
    }
    let mut o = DraObjects::default();
    o.update_class(&class);
    o.update_slice(&local("n1", gpus(devices_on_n1)));
    o
}

/// n1 advertises no GPUs (its devices are in a ResourceSlice); n2, if present, advertises
/// four through a device plugin.
fn snapshot(served: bool, with_n2: bool, o: DraObjects) -> Snapshot {
    let mut nodes = vec![NodeInfo::test("n1").pods(10).build()];
    if with_n2 {
        nodes.push(NodeInfo::test("n2").pods(10).allocatable(GPU, "4").build());
    }
    let mut s = Snapshot::from_node_infos(nodes).with_dra_api_served(served);
    s.dra = o;
    s
}

fn framework(without_dra: bool) -> Framework {
    super::super::tests::framework(without_dra.then_some(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
         profiles:\n- schedulerName: no-dra\n  plugins:\n    multiPoint:\n      disabled:\n      - name: DynamicResources\n",
    ))
}

use super::super::tests::run;

fn outcome(d: Decision) -> String {
    match d {
        Decision::Bind { node, .. } => format!("bound to {node}"),
        // The preemption attempt's own sentence is not what these tests are about.
        Decision::Unschedulable { message, .. } => {
            message.split(" preemption:").next().unwrap().to_string()
        }
        other => panic!("{other:?}"),
    }
}

fn gpu_pod(resource: &str, n: &str) -> PodInfo {
    PodInfo::test("ns", "p").request(resource, n).build()
}

#[test]
fn dra_backed_extended_resources_through_a_whole_cycle() {
    let implicit = format!("{RESOURCE_DEVICE_CLASS_PREFIX}gpu");
    let insufficient = format!("0/1 nodes are available: 1 {INSUFFICIENT_PREFIX}{GPU}.");
    // (case, pod, class names the resource, DRA served, with n2, without DynamicResources, want)
    let cases: Vec<(&str, PodInfo, bool, bool, bool, bool, String)> = vec![
        (
            "a node advertising the resource (device plugin) still fits where DRA has too few",
            gpu_pod(GPU, "3"),
            true,
            true,
            true,
            false,
            "bound to n2".into(),
        ),
        (
            "devices through DRA",
            gpu_pod(GPU, "2"),
            true,
            true,
            false,
            false,
            "bound to n1".into(),
        ),
        (
            "the implicit name of the class",
            gpu_pod(&implicit, "1"),
            false,
            true,
            false,
            false,
            "bound to n1".into(),
        ),
        (
            "more than the node's devices",
            gpu_pod(GPU, "3"),
            true,
            true,
            false,
            false,
            format!("0/1 nodes are available: 1 {CANNOT_ALLOCATE_ALL_CLAIMS}."),
        ),
        (
            "no class names the resource: NodeResourcesFit decides",
            gpu_pod(GPU, "1"),
            false,
            true,
            false,
            false,
            insufficient.clone(),
        ),
        (
            "resource.k8s.io not served: NodeResourcesFit decides",
            gpu_pod(GPU, "1"),
            true,
            false,
            false,
            false,
            insufficient.clone(),
        ),
        (
            "a profile without DynamicResources: NodeResourcesFit decides",
            gpu_pod(GPU, "1"),
            true,
            true,
            false,
            true,
            insufficient.clone(),
        ),
    ];
    for (name, pod, explicit, served, with_n2, without_dra, want) in cases {
        let snap = snapshot(served, with_n2, objects(explicit, 2));
        let got = outcome(run(&framework(without_dra), &pod, &snap));
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn reserve_decides_the_claim_to_create() {
    let pod_on_n1 = PodInfo::test("ns", "p")
        .uid("uid-p")
        .request(GPU, "2")
        .build();
    let snap_n1 = snapshot(true, false, objects(true, 2));
    let fw = framework(false);
    let writes = match run(&fw, &pod_on_n1, &snap_n1) {
        Decision::Bind { node, state, .. } => {
            assert_eq!(node, "n1");
            super::super::decided_claim_writes(&state).unwrap().to_vec()
        }
        other => panic!("{other:?}"),
    };
    let [w] = &writes[..] else {
        panic!("{writes:?}")
    };
    let create = w.create.as_ref().expect("the claim is created");
    assert_eq!(w.namespace, "ns");
    assert_eq!(w.name, format!("{SPECIAL_CLAIM_NAME}uid-p"));
    assert_eq!(w.reserved_for, vec![ConsumerRef::pod("p", "uid-p")]);
    let results: Vec<(String, String)> = w
        .allocation
        .as_ref()
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
        .map(|r| (r.request.clone(), r.device.clone()))
        .collect();
    assert_eq!(
        results,
        [
            ("container-0-request-0".to_string(), "gpu-0".to_string()),
            ("container-0-request-0".to_string(), "gpu-1".to_string()),
        ]
    );
    let obj = create.claim("ns");
    assert_eq!(
        obj.metadata.generate_name.as_deref(),
        Some("p-extended-resources-")
    );
    let owner = &obj.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("Pod", "uid-p", Some(true))
    );
    assert_eq!(
        obj.metadata.annotations.as_ref().unwrap()
            [crate::types::dra::extended::EXTENDED_RESOURCE_CLAIM_ANNOTATION],
        "true"
    );
    let req = &obj
        .spec
        .as_ref()
        .unwrap()
        .devices
        .as_ref()
        .unwrap()
        .requests
        .as_ref()
        .unwrap()[0];
    let exactly = req.exactly.as_ref().unwrap();
    assert_eq!(
        (
            req.name.as_str(),
            exactly.device_class_name.as_str(),
            exactly.count
        ),
        ("container-0-request-0", "gpu", Some(2))
    );
    let status = create.pod_status("p-extended-resources-abcde");
    assert_eq!(status.resource_claim_name, "p-extended-resources-abcde");
    assert_eq!(status.request_mappings.len(), 1);
    assert_eq!(status.request_mappings[0].container_name, "c0");
    assert_eq!(status.request_mappings[0].resource_name, GPU);
    assert_eq!(
        status.request_mappings[0].request_name,
        "container-0-request-0"
    );

    // Assumed in the cache, the claim's devices are taken until the write lands.
    let mut o = objects(true, 2);
    o.assume_claim_writes(&writes);
    assert!(o.device_allocated(&DeviceId {
        driver: super::super::allocator::tests::DRIVER.into(),
        pool: "n1".into(),
        device: "gpu-1".into(),
    }));
    let snap_taken = snapshot(true, false, o.clone());
    let other = PodInfo::test("ns", "q")
        .uid("uid-q")
        .request(GPU, "1")
        .build();
    assert_eq!(
        outcome(run(&fw, &other, &snap_taken)),
        format!("0/1 nodes are available: 1 {CANNOT_ALLOCATE_ALL_CLAIMS}.")
    );
    // Created as a real claim: the assumption moves there; a failed binding forgets it.
    o.confirm_created_claim("ns", &w.name, "p-extended-resources-abcde", "7");
    assert!(o.claim("ns", &w.name).is_none());
    assert!(o.is_assumed("ns", "p-extended-resources-abcde"));
    assert_eq!(
        o.claim("ns", "p-extended-resources-abcde")
            .unwrap()
            .resource_version,
        "7"
    );
    let mut o2 = objects(true, 2);
    o2.assume_claim_writes(&writes);
    o2.forget_claim_writes(&writes);
    assert!(o2.allocated_devices().is_empty());
}

#[test]
fn the_node_claim_is_allocated_with_the_pods_other_claims() {
    let mut o = objects(true, 3);
    o.update_claim(&claim("mine", vec![req("r", "gpu")]));
    let pod = PodInfo::test("ns", "p")
        .request(GPU, "2")
        .edit(|p| {
            p.spec.as_mut().unwrap().resource_claims =
                Some(vec![k8s_openapi::api::core::v1::PodResourceClaim {
                    name: "mine".into(),
                    resource_claim_name: Some("mine".into()),
                    ..Default::default()
                }])
        })
        .build();
    let snap = snapshot(true, true, o);
    let ext = ExtendedState::new(&pod, snap.dra()).expect("a class backs the resource");
    let pending = vec![snap.dra().claim("ns", "mine").unwrap().clone()];
    let n1 = snap.get("n1").unwrap();
    let n2 = snap.get("n2").unwrap();
    let index = IndexCache::default();
    assert!(
        ext.node_claim(&pod, n2, snap.dra(), &index, &pending)
            .unwrap()
            .is_none(),
        "n2 advertises the resource: no claim for it there"
    );
    let nc = ext
        .node_claim(&pod, n1, snap.dra(), &index, &pending)
        .unwrap()
        .expect("n1 needs DRA");
    let names: Vec<&str> = nc
        .allocator
        .claims()
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["mine", SPECIAL_CLAIM_NAME]);
    assert_eq!(
        nc.mappings
            .iter()
            .map(|m| (m.container_name.as_str(), m.request_name.as_str()))
            .collect::<Vec<_>>(),
        [("c0", "container-0-request-0")]
    );
    let results = nc.allocator.allocate("n1", &n1.labels).unwrap().unwrap();
    let devices: Vec<Vec<(String, String)>> = results
        .iter()
        .map(|r| {
            r.devices
                .as_ref()
                .and_then(|d| d.results.as_ref())
                .into_iter()
                .flatten()
                .map(|d| (d.request.clone(), d.device.clone()))
                .collect()
        })
        .collect();
    assert_eq!(
        devices,
        vec![
            vec![("r".to_string(), "gpu-0".to_string())],
            vec![
                ("container-0-request-0".to_string(), "gpu-1".to_string()),
                ("container-0-request-0".to_string(), "gpu-2".to_string()),
            ],
        ],
        "the pod's claim and the extended resources never share a device"
    );
    // The same set of resources reuses the allocator.
    let again = ext
        .node_claim(&pod, n1, snap.dra(), &index, &pending)
        .unwrap()
        .unwrap();
    assert!(Arc::ptr_eq(&again.allocator, &nc.allocator));
}

#[test]
fn a_resource_neither_advertised_nor_backed_does_not_fit() {
    let o = objects(true, 2);
    let pod = PodInfo::test("ns", "p")
        .request(GPU, "1")
        .request("example.com/fpga", "1")
        .build();
    let snap = snapshot(true, true, o);
    let ext = ExtendedState::new(&pod, snap.dra()).unwrap();
    let s = ext
        .node_claim(
            &pod,
            snap.get("n1").unwrap(),
            snap.dra(),
            &IndexCache::default(),
            &[],
        )
        .unwrap_err();
    assert_eq!(s.code(), crate::framework::Code::Unschedulable);
    assert_eq!(s.message(), CANNOT_FIT_RESOURCE);
    assert!(
        ExtendedState::new(
            &PodInfo::test("ns", "q")
                .request("example.com/fpga", "1")
                .build(),
            snap.dra()
        )
        .is_none(),
        "no class backs anything the pod asks for"
    );
}

#[test]
fn node_resources_fit_waits_for_device_classes_too() {
    // A pod NodeResourcesFit rejected for `example.com/gpu` is retried when a class starts
    // naming it, as upstream registers with DRAExtendedResource.
    use crate::framework::{ActionType, EventResource, Plugin};
    let fit = crate::plugins::node_resources_fit::NodeResourcesFit::new(None).unwrap();
    assert!(fit.events_to_register().iter().any(|e| {
        e.resource == EventResource::DeviceClass && e.action.contains(ActionType::ADD)
    }));
}

/// Upstream's PreFilter/Filter/PostFilter for the claim an earlier attempt created and left
/// (a crash between creating it and binding): found by its annotation and controlling pod,
/// every node refused, its deletion decided; a claim of another pod, or one not annotated,
/// is not the pod's.
#[test]
fn a_claim_left_by_an_earlier_attempt_is_deleted_first() {
    use crate::types::dra::ClaimDeallocation;
    use crate::types::dra::extended::EXTENDED_RESOURCE_CLAIM_ANNOTATION;
    let left = |owner_uid: &str, annotated: bool| {
        let mut c = claim(
            "p-extended-resources-x7k2q",
            vec![req("container-0-request-0", "gpu")],
        );
        c.metadata.uid = Some("claim-uid".into());
        c.metadata.resource_version = Some("41".into());
        if annotated {
            c.metadata.annotations = Some(
                [(
                    EXTENDED_RESOURCE_CLAIM_ANNOTATION.to_string(),
                    "true".to_string(),
                )]
                .into(),
            );
        }
        c.metadata.owner_references = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: "p".into(),
                uid: owner_uid.into(),
                controller: Some(true),
                ..Default::default()
            },
        ]);
        c.status = Some(dra::ResourceClaimStatus {
            allocation: Some(dra::AllocationResult::default()),
            ..Default::default()
        });
        c
    };
    let pod = PodInfo::test("ns", "p")
        .uid("uid-p")
        .request(GPU, "1")
        .build();
    let fw = framework(false);

    let mut o = objects(true, 2);
    o.update_claim(&left("uid-p", true));
    match run(&fw, &pod, &snapshot(true, false, o)) {
        Decision::Unschedulable {
            message,
            deallocate,
            ..
        } => {
            assert!(
                message.starts_with(&format!(
                    "0/1 nodes are available: 1 {CANNOT_SCHEDULE_EXTENDED_CLAIM}. \
                     {DELETION_COMPLETED}, preemption: "
                )),
                "{message}"
            );
            assert_eq!(
                deallocate,
                Some(ClaimDeallocation {
                    namespace: "ns".into(),
                    name: "p-extended-resources-x7k2q".into(),
                    uid: "claim-uid".into(),
                    resource_version: "41".into(),
                    delete: true,
                })
            );
        }
        other => panic!("{other:?}"),
    }

    // Not the pod's: another pod's claim, or one without the annotation.
    for (case, c) in [
        ("another pod's", left("uid-other", true)),
        ("not annotated", left("uid-p", false)),
    ] {
        let mut o = objects(true, 2);
        o.update_claim(&c);
        assert_eq!(
            outcome(run(&fw, &pod, &snapshot(true, false, o))),
            "bound to n1",
            "{case}"
        );
    }
}

/// A claim holding `device` of `node`'s pool (allocated earlier).
fn holding(name: &str, node: &str, device: &str) -> dra::ResourceClaim {
    let mut c = claim(name, vec![req("r", "gpu")]);
    c.status = Some(dra::ResourceClaimStatus {
        allocation: Some(dra::AllocationResult {
            devices: Some(dra::DeviceAllocationResult {
                results: Some(vec![dra::DeviceRequestAllocationResult {
                    request: "r".into(),
                    driver: super::super::allocator::tests::DRIVER.into(),
                    pool: node.into(),
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
fn dra_backed_extended_resources_are_scored_by_their_devices() {
    // Neither node advertises the resource: n1 has four devices, two of them allocated;
    // n2 two free ones. With the pod's one, n1 would be 3/4 used, n2 1/2.
    let mut o = objects(true, 4);
    o.update_slice(&local("n2", gpus(2)));
    o.update_claim(&holding("a", "n1", "gpu-0"));
    o.update_claim(&holding("b", "n1", "gpu-1"));
    let mut s = Snapshot::from_node_infos(vec![
        NodeInfo::test("n1").pods(10).build(),
        NodeInfo::test("n2").pods(10).build(),
    ])
    .with_dra_api_served(true);
    s.dra = o;
    let strategy = |t: &str| {
        format!(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n\
             profiles:\n- schedulerName: default-scheduler\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: {t}\n        resources:\n        - name: {GPU}\n          weight: 1\n"
        )
    };
    let pod = gpu_pod(GPU, "1");
    let least = super::super::tests::framework(Some(&strategy("LeastAllocated")));
    assert_eq!(
        outcome(run(&least, &pod, &s)),
        "bound to n2",
        "1/2 used beats 3/4"
    );
    let most = super::super::tests::framework(Some(&strategy("MostAllocated")));
    assert_eq!(
        outcome(run(&most, &pod, &s)),
        "bound to n1",
        "3/4 used beats 1/2"
    );
}

#[test]
fn devices_counted_for_scoring_as_upstreams_allocatable_and_requested() {
    // Upstream's allocatable/requested cases for a DRA-backed resource, in our words: n1
    // reaches four devices of the class; gpu-0 is held whole and gpu-1 by one share of a
    // device allowing multiple allocations: each counts once as used. n2 has no slice.
    let mut o = objects(true, 4);
    o.update_claim(&holding("whole", "n1", "gpu-0"));
    let mut share = holding("share", "n1", "gpu-1");
    let results = share
        .status
        .as_mut()
        .and_then(|s| s.allocation.as_mut())
        .and_then(|a| a.devices.as_mut())
        .and_then(|d| d.results.as_mut())
        .unwrap();
    results[0].share_id = Some("4f7c1a52-0b6e-4c4e-9a54-2c3c7c1f0e11".into());
    o.update_claim(&share);
    let nodes = vec![
        Arc::new(NodeInfo::test("n1").build()),
        Arc::new(NodeInfo::test("n2").build()),
    ];
    let count = |resource: &str| {
        super::super::extended_score::extended_resource_devices(&o, resource, (&nodes).into())
    };
    let explicit = count(GPU).unwrap();
    assert_eq!(explicit["n1"], (4, 2));
    assert_eq!(explicit["n2"], (0, 0), "no devices: nothing to score with");
    // Every class also backs its implicit name.
    let implicit = count(&format!("{RESOURCE_DEVICE_CLASS_PREFIX}gpu")).unwrap();
    assert_eq!(implicit["n1"], (4, 2));
    assert!(count("example.com/fpga").is_none(), "no class backs it");
}
