use super::*;
use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn exact(name: &str, class: &str, mode: Option<&str>, count: Option<i64>) -> dra::DeviceRequest {
    dra::DeviceRequest {
        name: name.into(),
        exactly: Some(dra::ExactDeviceRequest {
            device_class_name: class.into(),
            allocation_mode: mode.map(Into::into),
            count,
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn claim_requests_and_allocation() {
    let mut c = dra::ResourceClaim {
        metadata: ObjectMeta {
            namespace: Some("ns".into()),
            name: Some("gpu".into()),
            uid: Some("u1".into()),
            resource_version: Some("7".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let mut with_sel = exact("e", "gpu.example.com", None, None);
    with_sel.exactly.as_mut().unwrap().selectors = Some(vec![dra::DeviceSelector {
        cel: Some(dra::CELDeviceSelector {
            expression: "true".into(),
        }),
    }]);
    c.spec.get_or_insert_default().devices = Some(dra::DeviceClaim {
        requests: Some(vec![
            exact("a", "gpu.example.com", None, None),
            exact("b", "gpu.example.com", Some("ExactCount"), Some(2)),
            exact("c", "nic.example.com", Some("All"), None),
            exact("d", "gpu.example.com", Some("Sometimes"), None),
            with_sel,
            dra::DeviceRequest {
                name: "f".into(),
                first_available: Some(vec![]),
                ..Default::default()
            },
        ]),
        ..Default::default()
    });
    let v = ResourceClaimInfo::from_claim(&c);
    assert_eq!((v.namespace.as_str(), v.name.as_str()), ("ns", "gpu"));
    assert_eq!(v.resource_version, "7");
    let modes: Vec<_> = v
        .requests
        .iter()
        .map(|r| match r {
            ClaimRequest::Exactly(s) => (
                r.name().to_string(),
                Some(s.mode.clone()),
                s.selectors.len(),
            ),
            _ => (r.name().to_string(), None, 0),
        })
        .collect();
    assert_eq!(
        modes,
        vec![
            ("a".into(), Some(AllocationMode::ExactCount(1)), 0),
            ("b".into(), Some(AllocationMode::ExactCount(2)), 0),
            ("c".into(), Some(AllocationMode::All), 0),
            (
                "d".into(),
                Some(AllocationMode::Unknown("Sometimes".into())),
                0
            ),
            ("e".into(), Some(AllocationMode::ExactCount(1)), 1),
            ("f".into(), None, 0),
        ]
    );
    assert!(
        matches!(v.requests[5], ClaimRequest::Unknown { .. }),
        "empty firstAvailable"
    );
    assert!(v.allocation.is_none());
    assert!(!v.is_reserved_for("pod-1"));

    c.status = Some(dra::ResourceClaimStatus {
        allocation: Some(dra::AllocationResult {
            devices: Some(dra::DeviceAllocationResult {
                results: Some(vec![dra::DeviceRequestAllocationResult {
                    request: "a".into(),
                    driver: "gpu.example.com".into(),
                    pool: "node-1".into(),
                    device: "gpu-0".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }),
        reserved_for: Some(vec![dra::ResourceClaimConsumerReference {
            resource: "pods".into(),
            name: "p".into(),
            uid: "pod-1".into(),
            ..Default::default()
        }]),
        ..Default::default()
    });
    let v = ResourceClaimInfo::from_claim(&c);
    let a = v.allocation.as_ref().unwrap();
    assert_eq!(a.devices[0].request, "a");
    assert_eq!(a.devices[0].id.device, "gpu-0");
    assert!(a.node_selector.is_none(), "no selector: every node");
    assert!(v.is_reserved_for("pod-1"));
}

#[test]
fn slice_node_scope() {
    let slice = |f: &dyn Fn(&mut dra::ResourceSliceSpec)| {
        let mut s = dra::ResourceSlice::default();
        s.spec.driver = "gpu.example.com".into();
        s.spec.pool = dra::ResourcePool {
            name: "p".into(),
            generation: 3,
            resource_slice_count: 2,
        };
        s.spec.devices = Some(vec![dra::Device {
            name: "gpu-0".into(),
            node_name: Some("n2".into()),
            ..Default::default()
        }]);
        f(&mut s.spec);
        ResourceSliceInfo::from_slice(&s)
    };
    let labels: BTreeMap<String, String> = [("zone".to_string(), "a".to_string())].into();
    let local = slice(&|s| s.node_name = Some("n1".into()));
    assert_eq!((local.pool_generation, local.pool_slice_count), (3, 2));
    assert!(local.nodes.reaches("n1", &labels));
    assert!(!local.nodes.reaches("n2", &labels));
    assert_eq!(local.devices[0].nodes, None, "slice-level scope");

    let zonal = slice(&|s| {
        s.node_selector = Some(k8s::NodeSelector {
            node_selector_terms: vec![k8s::NodeSelectorTerm {
                match_expressions: Some(vec![k8s::NodeSelectorRequirement {
                    key: "zone".into(),
                    operator: "In".into(),
                    values: Some(vec!["a".into()]),
                }]),
                ..Default::default()
            }],
        })
    });
    assert!(zonal.nodes.reaches("any", &labels));
    assert!(!zonal.nodes.reaches("any", &BTreeMap::new()));

    let all = slice(&|s| s.all_nodes = Some(true));
    assert!(all.nodes.reaches("any", &BTreeMap::new()));

    let per_device = slice(&|s| s.per_device_node_selection = Some(true));
    assert_eq!(per_device.nodes, DeviceNodes::PerDevice);
    assert!(!per_device.nodes.reaches("n2", &labels));
    let d = per_device.devices[0].nodes.as_ref().unwrap();
    assert!(d.reaches("n2", &labels) && !d.reaches("n1", &labels));

    let nowhere = slice(&|_| {});
    assert_eq!(nowhere.nodes, DeviceNodes::Nowhere);
}

#[test]
fn class_compiles_cel_selectors() {
    let mut c = dra::DeviceClass::default();
    c.metadata.name = Some("gpu.example.com".into());
    assert!(DeviceClassInfo::from_class(&c).selectors.is_empty());
    c.spec.get_or_insert_default().selectors = Some(vec![
        dra::DeviceSelector { cel: None },
        dra::DeviceSelector {
            cel: Some(dra::CELDeviceSelector {
                expression: "device.driver ==".into(),
            }),
        },
        dra::DeviceSelector {
            cel: Some(dra::CELDeviceSelector {
                expression: "true".into(),
            }),
        },
    ]);
    let v = DeviceClassInfo::from_class(&c);
    assert!(
        v.selectors[0]
            .compile_error()
            .unwrap()
            .contains("unsupported selector type")
    );
    assert!(v.selectors[1].compile_error().is_some());
    assert!(v.selectors[2].compile_error().is_none());
}

#[test]
fn objects_are_shared_until_they_change() {
    let mut cache = DraObjects::default();
    let mut c = dra::ResourceClaim::default();
    c.metadata.namespace = Some("ns".into());
    c.metadata.name = Some("gpu".into());
    cache.update_claim(&c);
    let mut snap = DraObjects::default();
    snap.sync_from(&cache);
    assert!(Arc::ptr_eq(&snap.claims, &cache.claims));
    assert!(snap.claim("ns", "gpu").is_some());
    assert!(snap.claim("other", "gpu").is_none());

    // A change in the cache does not touch the snapshot taken before it.
    assert!(cache.remove_claim("ns", "gpu"));
    assert!(!cache.remove_claim("ns", "gpu"), "already gone");
    assert!(snap.claim("ns", "gpu").is_some());
    snap.sync_from(&cache);
    assert!(snap.claim("ns", "gpu").is_none());

    let mut s = dra::ResourceSlice::default();
    s.metadata.name = Some("n1-gpus".into());
    cache.update_slice(&s);
    let mut cls = dra::DeviceClass::default();
    cls.metadata.name = Some("gpu.example.com".into());
    cache.update_class(&cls);
    snap.sync_from(&cache);
    assert_eq!(snap.slices().count(), 1);
    assert!(snap.class("gpu.example.com").is_some());
    assert!(cache.remove_slice("n1-gpus") && cache.remove_class("gpu.example.com"));
    snap.sync_from(&cache);
    assert_eq!(snap.slices().count(), 0);
    assert!(snap.class("gpu.example.com").is_none());
}

fn allocated_claim(name: &str, device: &str, admin: bool) -> dra::ResourceClaim {
    let mut c = dra::ResourceClaim::default();
    c.metadata.namespace = Some("ns".into());
    c.metadata.name = Some(name.into());
    c.metadata.resource_version = Some("1".into());
    c.status = Some(dra::ResourceClaimStatus {
        allocation: Some(dra::AllocationResult {
            devices: Some(dra::DeviceAllocationResult {
                results: Some(vec![dra::DeviceRequestAllocationResult {
                    request: "r".into(),
                    driver: "d".into(),
                    pool: "p".into(),
                    device: device.into(),
                    admin_access: admin.then_some(true),
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

fn id(device: &str) -> DeviceId {
    DeviceId {
        driver: "d".into(),
        pool: "p".into(),
        device: device.into(),
    }
}

#[test]
fn allocated_devices_follow_claim_changes() {
    let mut o = DraObjects::default();
    o.update_claim(&allocated_claim("a", "gpu-0", false));
    o.update_claim(&allocated_claim("b", "gpu-1", true));
    assert!(o.device_allocated(&id("gpu-0")));
    assert!(
        !o.device_allocated(&id("gpu-1")),
        "admin access does not hold the device"
    );
    // Deallocated: the device is free again.
    let mut c = allocated_claim("a", "gpu-0", false);
    c.status = None;
    o.update_claim(&c);
    assert!(!o.device_allocated(&id("gpu-0")));
    o.update_claim(&allocated_claim("a", "gpu-2", false));
    assert!(o.remove_claim("ns", "a"));
    assert!(o.allocated_devices().is_empty());
}

#[test]
fn assumed_writes_until_informer_or_forget() {
    let mut o = DraObjects::default();
    let mut c = dra::ResourceClaim::default();
    c.metadata.namespace = Some("ns".into());
    c.metadata.name = Some("gpu".into());
    c.metadata.resource_version = Some("1".into());
    o.update_claim(&c);
    let alloc = allocated_claim("gpu", "gpu-0", false)
        .status
        .unwrap()
        .allocation
        .unwrap();
    let w = ClaimStatusWrite {
        namespace: "ns".into(),
        name: "gpu".into(),
        uid: String::new(),
        resource_version: "1".into(),
        allocation: Some(alloc),
        reserved_for: vec![ConsumerRef::pod("p", "uid-p")],
        add_finalizer: true,
        finalizers: Vec::new(),
        group: None,
        create: None,
    };
    o.assume_claim_writes(std::slice::from_ref(&w));
    assert!(o.is_assumed("ns", "gpu"));
    assert!(
        o.device_allocated(&id("gpu-0")),
        "in flight: never handed out twice"
    );
    assert!(o.claim("ns", "gpu").unwrap().is_reserved_for("uid-p"));
    o.forget_claim_writes(std::slice::from_ref(&w));
    assert!(!o.is_assumed("ns", "gpu"));
    assert!(!o.device_allocated(&id("gpu-0")), "forgotten: free again");
    assert!(o.claim("ns", "gpu").unwrap().allocation.is_none());

    // While the write is in flight, informer copies (the finalizer step, say) do not end
    // the assumption: the device stays taken.
    o.assume_claim_writes(std::slice::from_ref(&w));
    c.metadata.resource_version = Some("2".into());
    c.metadata.finalizers = Some(vec![crate::types::dra::CLAIM_FINALIZER.into()]);
    o.update_claim(&c);
    assert!(o.is_assumed("ns", "gpu"));
    assert!(o.device_allocated(&id("gpu-0")));
    // Written at resourceVersion 3: copy 2 is older, copy 3 ends the assumption.
    o.confirm_claim_write("ns", "gpu", "3");
    assert!(o.is_assumed("ns", "gpu"));
    let mut written = allocated_claim("gpu", "gpu-0", false);
    written.metadata.resource_version = Some("3".into());
    o.update_claim(&written);
    assert!(!o.is_assumed("ns", "gpu"));
    assert!(o.device_allocated(&id("gpu-0")));
    o.forget_claim_writes(std::slice::from_ref(&w));
    assert!(
        o.device_allocated(&id("gpu-0")),
        "nothing to forget after the informer"
    );

    // A failed write restores the informer's latest copy (the finalizer one).
    o.update_claim(&c);
    o.assume_claim_writes(std::slice::from_ref(&w));
    c.metadata.resource_version = Some("4".into());
    o.update_claim(&c);
    o.forget_claim_writes(std::slice::from_ref(&w));
    assert!(!o.device_allocated(&id("gpu-0")));
    assert_eq!(o.claim("ns", "gpu").unwrap().resource_version, "4");
    // Confirmed after the informer already caught up: the assumption ends at once.
    o.assume_claim_writes(std::slice::from_ref(&w));
    written.metadata.resource_version = Some("5".into());
    o.update_claim(&written);
    assert!(o.is_assumed("ns", "gpu"), "in flight still");
    o.confirm_claim_write("ns", "gpu", "5");
    assert!(!o.is_assumed("ns", "gpu"));
    assert!(o.device_allocated(&id("gpu-0")));
}

#[test]
fn pod_claim_sources() {
    let mut pod = k8s::Pod::default();
    let entry = |name: &str, claim: Option<&str>, template: Option<&str>| k8s::PodResourceClaim {
        name: name.into(),
        resource_claim_name: claim.map(Into::into),
        resource_claim_template_name: template.map(Into::into),
    };
    pod.spec = Some(k8s::PodSpec {
        resource_claims: Some(vec![
            entry("a", Some("shared"), None),
            entry("b", None, Some("tmpl")),
            entry("c", None, Some("tmpl")),
            entry("d", None, None),
            entry("e", None, Some("tmpl")),
        ]),
        ..Default::default()
    });
    pod.status = Some(k8s::PodStatus {
        resource_claim_statuses: Some(vec![
            k8s::PodResourceClaimStatus {
                name: "b".into(),
                resource_claim_name: Some("p-b-x7k2".into()),
            },
            k8s::PodResourceClaimStatus {
                name: "e".into(),
                resource_claim_name: None,
            },
        ]),
        ..Default::default()
    });
    let got: Vec<_> = pod_claims(&pod).into_iter().map(|c| c.source).collect();
    assert_eq!(
        got,
        vec![
            PodClaimSource::Claim("shared".into()),
            PodClaimSource::Generated(Some("p-b-x7k2".into())),
            PodClaimSource::NotCreatedYet,
            PodClaimSource::Unsupported,
            PodClaimSource::Generated(None),
        ]
    );
}
