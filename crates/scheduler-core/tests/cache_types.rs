//! Conversion of API objects into scheduling views: pod requests, non-zero defaults, ports,
//! images, and NodeInfo bookkeeping.

use std::sync::Arc;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use scheduler_core::types::*;

const MI: i64 = 1 << 20;

fn cpu_mem(p: &PodInfo) -> (i64, i64) {
    (p.requests.milli_cpu, p.requests.memory)
}

fn non_zero(p: &PodInfo) -> (i64, i64) {
    (p.non_zero_requests.milli_cpu, p.non_zero_requests.memory)
}

#[test]
fn containers_are_summed() {
    let p = PodInfo::test("ns", "p")
        .cpu("500m")
        .memory("1Gi")
        .container(&[("cpu", "250m"), ("memory", "1Gi")])
        .build();
    assert_eq!(cpu_mem(&p), (750, 2 << 30));
}

#[test]
fn init_container_larger_than_containers_wins() {
    let p = PodInfo::test("ns", "p")
        .cpu("1")
        .container(&[("cpu", "2")])
        .init_container(&[("cpu", "4"), ("memory", "1Mi")])
        .init_container(&[("cpu", "1")])
        .build();
    // max(1 + 2, 4) for cpu; memory comes only from the init container.
    assert_eq!(cpu_mem(&p), (4000, MI));
}

#[test]
fn sidecar_before_regular_init_container_raises_it() {
    let p = PodInfo::test("ns", "p")
        .cpu("1")
        .sidecar(&[("cpu", "1")])
        .init_container(&[("cpu", "2")])
        .build();
    // Running: container 1 + sidecar 1 = 2. Init phase: init 2 beside sidecar 1 = 3.
    assert_eq!(p.requests.milli_cpu, 3000);
}

#[test]
fn sidecar_after_regular_init_container_does_not_raise_it() {
    let p = PodInfo::test("ns", "p")
        .cpu("1")
        .init_container(&[("cpu", "2")])
        .sidecar(&[("cpu", "1")])
        .build();
    // Running: 1 + 1 = 2; init container alone: 2.
    assert_eq!(p.requests.milli_cpu, 2000);
}

#[test]
fn mixed_sidecars_and_init_containers() {
    let p = PodInfo::test("ns", "p")
        .cpu("1")
        .init_container(&[("cpu", "5")])
        .sidecar(&[("cpu", "1")])
        .init_container(&[("cpu", "3")])
        .sidecar(&[("cpu", "2")])
        .build();
    // Running: 1 + 1 + 2 = 4. Init peaks: 5, 1, 3+1=4, 3 -> 5.
    assert_eq!(p.requests.milli_cpu, 5000);
    let q = PodInfo::test("ns", "q")
        .cpu("1")
        .sidecar(&[("cpu", "3")])
        .init_container(&[("cpu", "2")])
        .build();
    // Running: 4; init peak 2+3 = 5.
    assert_eq!(q.requests.milli_cpu, 5000);
}

#[test]
fn overhead_is_added_after_the_max() {
    let p = PodInfo::test("ns", "p")
        .cpu("1")
        .init_container(&[("cpu", "2")])
        .overhead("cpu", "500m")
        .overhead("memory", "10Mi")
        .build();
    assert_eq!(cpu_mem(&p), (2500, 10 * MI));
    assert!(p.has_overhead);
    // Non-zero: max(100m-or-1, 2) + overhead; memory 200Mi default + 10Mi.
    assert_eq!(non_zero(&p), (2500, 210 * MI));
}

#[test]
fn limits_only_are_used_as_requests() {
    let p = PodInfo::test("ns", "p")
        .limit("cpu", "2")
        .limit("memory", "1Gi")
        .request("memory", "512Mi")
        .build();
    assert_eq!(cpu_mem(&p), (2000, 512 * MI));
    assert_eq!(non_zero(&p), (2000, 512 * MI));
}

#[test]
fn extended_resources_and_hugepages() {
    let p = PodInfo::test("ns", "p")
        .request("nvidia.com/gpu", "1")
        .request("hugepages-2Mi", "4Mi")
        .request("ephemeral-storage", "1Gi")
        .init_container(&[("nvidia.com/gpu", "2")])
        .build();
    assert_eq!(p.requests.get("nvidia.com/gpu"), 2);
    assert_eq!(p.requests.get("hugepages-2Mi"), 4 * MI);
    assert_eq!(p.requests.ephemeral_storage, 1 << 30);
}

#[test]
fn sub_milli_requests_sum_before_rounding() {
    let p = PodInfo::test("ns", "p")
        .cpu("0.5m")
        .container(&[("cpu", "0.5m")])
        .build();
    assert_eq!(p.requests.milli_cpu, 1);
}

#[test]
fn non_zero_defaults_only_when_unset() {
    let none = PodInfo::test("ns", "p").build();
    assert_eq!(cpu_mem(&none), (0, 0));
    assert_eq!(
        non_zero(&none),
        (DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST)
    );

    let two = PodInfo::test("ns", "p").container(&[]).build();
    assert_eq!(non_zero(&two), (200, 400 * MI));

    let explicit_zero = PodInfo::test("ns", "p").cpu("0").build();
    assert_eq!(non_zero(&explicit_zero), (0, 200 * MI));

    let partial = PodInfo::test("ns", "p")
        .cpu("300m")
        .container(&[("memory", "1Gi")])
        .build();
    assert_eq!(non_zero(&partial), (400, 200 * MI + (1 << 30)));

    // Defaults apply per container, also to sidecars and init containers.
    let sidecar = PodInfo::test("ns", "p").sidecar(&[]).build();
    assert_eq!(non_zero(&sidecar), (200, 400 * MI));
    let init = PodInfo::test("ns", "p").init_container(&[]).build();
    assert_eq!(non_zero(&init), (100, 200 * MI));
    let big_init = PodInfo::test("ns", "p")
        .init_container(&[("cpu", "1")])
        .build();
    assert_eq!(non_zero(&big_init), (1000, 200 * MI));
}

#[test]
fn pod_level_requests_override_containers() {
    let p = PodInfo::test("ns", "p")
        .cpu("1")
        .edit(|pod| {
            pod.spec.as_mut().unwrap().resources = Some(k8s::ResourceRequirements {
                requests: Some([("cpu".to_string(), K8sQuantity("3".into()))].into()),
                ..Default::default()
            })
        })
        .build();
    assert_eq!(p.requests.milli_cpu, 3000);
    // Memory set at neither level gets the default; cpu is taken from the pod level.
    assert_eq!(non_zero(&p), (3000, 200 * MI));
}

#[test]
fn resized_pod_counts_allocated_resources() {
    let p = PodInfo::test("ns", "p")
        .cpu("1")
        .edit(|pod| {
            pod.status = Some(k8s::PodStatus {
                container_statuses: Some(vec![k8s::ContainerStatus {
                    name: "c0".into(),
                    allocated_resources: Some(
                        [("cpu".to_string(), K8sQuantity("2".into()))].into(),
                    ),
                    ..Default::default()
                }]),
                ..Default::default()
            })
        })
        .build();
    assert_eq!(p.requests.milli_cpu, 2000);
}

fn cpu(v: &str) -> std::collections::BTreeMap<String, K8sQuantity> {
    [("cpu".to_string(), K8sQuantity(v.into()))].into()
}

fn resize_pending(reason: &str) -> k8s::PodCondition {
    k8s::PodCondition {
        type_: "PodResizePending".into(),
        status: "True".into(),
        reason: Some(reason.into()),
        ..Default::default()
    }
}

/// A pod requesting `spec_cpu` in its one container, with `pod_cpu` at pod level if given,
/// and the status `status`.
fn resized(spec_cpu: &str, pod_cpu: Option<&str>, status: k8s::PodStatus) -> PodInfo {
    PodInfo::test("ns", "p")
        .cpu(spec_cpu)
        .edit(|pod| {
            if let Some(c) = pod_cpu {
                pod.spec.as_mut().unwrap().resources = Some(k8s::ResourceRequirements {
                    requests: Some(cpu(c)),
                    ..Default::default()
                });
            }
            pod.status = Some(status);
        })
        .build()
}

/// Upstream's PodRequests cases for in-place resize (GA 1.35) and pod-level resize
/// (InPlacePodLevelResourcesVerticalScaling, on since 1.36), as the scheduler calls it.
#[test]
fn resize_cases_follow_upstream_pod_requests() {
    let container_status = |alloc: &str, actual: Option<&str>| k8s::ContainerStatus {
        name: "c0".into(),
        allocated_resources: Some(cpu(alloc)),
        resources: actual.map(|a| k8s::ResourceRequirements {
            requests: Some(cpu(a)),
            ..Default::default()
        }),
        ..Default::default()
    };
    let cases: Vec<(&str, PodInfo, i64)> = vec![
        (
            "resize pending (deferred): the larger desired request counts",
            resized(
                "4",
                None,
                k8s::PodStatus {
                    container_statuses: Some(vec![container_status("2", Some("2"))]),
                    conditions: Some(vec![resize_pending("Deferred")]),
                    ..Default::default()
                },
            ),
            4000,
        ),
        (
            "resize infeasible: only what the node allocated counts",
            resized(
                "4",
                None,
                k8s::PodStatus {
                    container_statuses: Some(vec![container_status("2", Some("2"))]),
                    conditions: Some(vec![resize_pending("Infeasible")]),
                    ..Default::default()
                },
            ),
            2000,
        ),
        (
            "shrinking resize in progress: the actuated request still counts",
            resized(
                "1",
                None,
                k8s::PodStatus {
                    container_statuses: Some(vec![container_status("1", Some("3"))]),
                    ..Default::default()
                },
            ),
            3000,
        ),
        (
            "pod-level status aggregates replace container statuses",
            resized(
                "1",
                None,
                k8s::PodStatus {
                    container_statuses: Some(vec![container_status("5", None)]),
                    allocated_resources: Some(cpu("3")),
                    resources: Some(k8s::ResourceRequirements {
                        requests: Some(cpu("2")),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            ),
            3000,
        ),
        (
            "pod-level request below the pod-level allocation",
            resized(
                "500m",
                Some("2"),
                k8s::PodStatus {
                    allocated_resources: Some(cpu("4")),
                    ..Default::default()
                },
            ),
            4000,
        ),
        (
            "pod-level resize infeasible: the pod-level spec is ignored",
            resized(
                "500m",
                Some("4"),
                k8s::PodStatus {
                    allocated_resources: Some(cpu("2")),
                    resources: Some(k8s::ResourceRequirements {
                        requests: Some(cpu("2")),
                        ..Default::default()
                    }),
                    conditions: Some(vec![resize_pending("Infeasible")]),
                    ..Default::default()
                },
            ),
            2000,
        ),
        (
            "a 1.28 server reports no resize fields: the spec counts",
            resized("1500m", Some("2"), k8s::PodStatus::default()),
            2000,
        ),
    ];
    for (name, pod, want) in cases {
        assert_eq!(pod.requests.milli_cpu, want, "{name}");
        assert!(pod.problems.is_empty(), "{name}: {:?}", pod.problems);
    }
}

/// Pod-level status includes the overhead; it is taken out before the max and added back
/// once, as upstream.
#[test]
fn pod_level_resize_counts_overhead_once() {
    let p = PodInfo::test("ns", "p")
        .cpu("500m")
        .overhead("cpu", "1")
        .edit(|pod| {
            pod.spec.as_mut().unwrap().resources = Some(k8s::ResourceRequirements {
                requests: Some(cpu("2")),
                ..Default::default()
            });
            pod.status = Some(k8s::PodStatus {
                allocated_resources: Some(cpu("4")),
                ..Default::default()
            });
        })
        .build();
    assert_eq!(p.requests.milli_cpu, 4000);
    assert_eq!(non_zero(&p).0, 4000);
}

#[test]
fn malformed_quantities_are_problems_not_panics() {
    let p = PodInfo::test("ns", "p")
        .cpu("lots")
        .memory("1Gi")
        .overhead("cpu", "1.2.3")
        .build();
    assert_eq!(p.requests.milli_cpu, 0);
    assert_eq!(p.requests.memory, 1 << 30);
    assert_eq!(p.problems.len(), 2, "{:?}", p.problems);
    assert!(p.problems[0].contains("lots"), "{:?}", p.problems);
}

#[test]
fn pod_fields() {
    let pod = PodInfo::test("ns", "p")
        .priority(7)
        .label("app", "web")
        .node_selector("disk", "ssd")
        .toleration("k", "Exists", "", "NoSchedule")
        .host_port(8080, "", "")
        .host_port(53, "UDP", "10.0.0.1")
        .image("nginx")
        .image("gcr.io/x/y:v1")
        .runtime_class("kata")
        .scheduler_name("")
        .nominated_node("n9")
        .pvc("data")
        .edit(|pod| {
            let spec = pod.spec.as_mut().unwrap();
            let port = |p: i32| k8s::ContainerPort {
                container_port: p,
                host_port: Some(p),
                ..Default::default()
            };
            spec.init_containers = Some(vec![
                k8s::Container {
                    name: "i".into(),
                    image: Some("busybox".into()),
                    ports: Some(vec![port(1)]),
                    ..Default::default()
                },
                k8s::Container {
                    name: "s".into(),
                    restart_policy: Some("Always".into()),
                    ports: Some(vec![
                        port(2),
                        k8s::ContainerPort {
                            container_port: 3,
                            ..Default::default()
                        },
                    ]),
                    ..Default::default()
                },
            ]);
            spec.preemption_policy = Some("Never".into());
            spec.scheduling_gates = Some(vec![k8s::PodSchedulingGate {
                name: "wait".into(),
            }]);
        })
        .build();
    assert_eq!(pod.key.to_string(), "ns/p");
    assert_eq!(pod.uid, "uid-ns-p");
    assert_eq!(pod.priority, 7);
    assert!(pod.preemption_policy_never);
    assert_eq!(pod.scheduler_name, "default-scheduler");
    assert_eq!(pod.labels.get("app").map(String::as_str), Some("web"));
    assert_eq!(
        pod.node_selector.get("disk").map(String::as_str),
        Some("ssd")
    );
    assert_eq!(
        pod.tolerations,
        vec![Toleration::exists("k", Some(TaintEffect::NoSchedule))]
    );
    // Sidecar ports first, then containers; regular init containers and hostPort 0 ignored.
    let ports: Vec<(i32, &str, &str)> = pod
        .host_ports
        .iter()
        .map(|h| (h.port, h.protocol.as_str(), h.host_ip.as_str()))
        .collect();
    assert_eq!(
        ports,
        vec![
            (2, "TCP", "0.0.0.0"),
            (8080, "TCP", "0.0.0.0"),
            (53, "UDP", "10.0.0.1")
        ]
    );
    assert_eq!(
        pod.images,
        vec!["busybox:latest", "nginx:latest", "gcr.io/x/y:v1"]
    );
    assert_eq!(pod.runtime_class_name.as_deref(), Some("kata"));
    assert_eq!(pod.nominated_node_name.as_deref(), Some("n9"));
    assert_eq!(pod.node_name, None);
    assert_eq!(pod.pvc_names, vec!["data"]);
    assert_eq!(pod.scheduling_gates, vec!["wait"]);
    assert!(!pod.is_terminating);
}

#[test]
fn required_node_affinity_is_compiled() {
    let affinity = k8s::Affinity {
        node_affinity: Some(k8s::NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(k8s::NodeSelector {
                node_selector_terms: vec![k8s::NodeSelectorTerm {
                    match_expressions: Some(vec![k8s::NodeSelectorRequirement {
                        key: "gen".into(),
                        operator: "Gt".into(),
                        values: Some(vec!["3".into()]),
                    }]),
                    match_fields: None,
                }],
            }),
            preferred_during_scheduling_ignored_during_execution: Some(vec![
                k8s::PreferredSchedulingTerm {
                    weight: 0,
                    preference: Default::default(),
                },
                k8s::PreferredSchedulingTerm {
                    weight: 5,
                    preference: k8s::NodeSelectorTerm {
                        match_expressions: Some(vec![k8s::NodeSelectorRequirement {
                            key: "gen".into(),
                            operator: "Lt".into(),
                            values: Some(vec!["x".into()]),
                        }]),
                        match_fields: None,
                    },
                },
            ]),
        }),
        ..Default::default()
    };
    let p = PodInfo::test("ns", "p").affinity(affinity).build();
    let sel = p.required_node_affinity.as_ref().unwrap();
    let labels = |v: &str| [("gen".to_string(), v.to_string())].into();
    assert!(sel.matches("n", &labels("4")));
    assert!(!sel.matches("n", &labels("3")));
    assert_eq!(
        p.preferred_node_affinity.len(),
        1,
        "zero-weight term dropped"
    );
    assert!(!p.preferred_node_affinity[0].term.is_valid());
    assert_eq!(p.problems.len(), 1, "{:?}", p.problems);
    assert!(p.affinity.is_some());
}

#[test]
fn runtime_class_helpers() {
    let p = PodInfo::test("ns", "p").cpu("1").build();
    let overhead = Resource {
        milli_cpu: 250,
        memory: 64 * MI,
        ..Default::default()
    };
    let with = p.with_overhead(&overhead);
    assert_eq!(cpu_mem(&with), (1250, 64 * MI));
    assert_eq!(non_zero(&with), (1250, 264 * MI));
    // Already carrying overhead: not counted twice.
    assert_eq!(cpu_mem(&with.with_overhead(&overhead)), (1250, 64 * MI));
    let t = Toleration::exists("sandbox", None);
    let tol = p.with_extra_tolerations(&[t.clone(), t.clone()]);
    assert_eq!(tol.tolerations, vec![t]);
}

#[test]
fn node_info_from_node() {
    let n = NodeInfo::test("n1")
        .cpu("4")
        .memory("16Gi")
        .pods(110)
        .allocatable("nvidia.com/gpu", "8")
        .label("zone", "a")
        .taint("dedicated", "gpu", "NoSchedule")
        .unschedulable()
        .image("nginx:latest", 100)
        .build();
    assert_eq!(n.name, "n1");
    assert_eq!(
        (
            n.allocatable.milli_cpu,
            n.allocatable.memory,
            n.allocatable.allowed_pod_number
        ),
        (4000, 16 << 30, 110)
    );
    assert_eq!(n.allocatable.get("nvidia.com/gpu"), 8);
    assert_eq!(
        n.taints,
        vec![Taint::new("dedicated", "gpu", TaintEffect::NoSchedule)]
    );
    assert!(n.unschedulable);
    assert_eq!(n.images.get("nginx:latest"), Some(&100));
    assert!(n.has_node());
}

#[test]
fn node_info_add_remove_pod_is_exact() {
    let mut n = NodeInfo::test("n1").cpu("4").build();
    let g0 = n.generation;
    let a = Arc::new(
        PodInfo::test("ns", "a")
            .cpu("500m")
            .memory("1Gi")
            .request("example.com/foo", "2")
            .host_port(80, "TCP", "")
            .pvc("c")
            .build(),
    );
    let b = Arc::new(
        PodInfo::test("ns", "b")
            .host_port(81, "UDP", "10.0.0.1")
            .pvc("c")
            .build(),
    );
    n.add_pod(a.clone());
    assert!(n.generation > g0);
    n.add_pod(b.clone());
    assert_eq!((n.requested.milli_cpu, n.requested.memory), (500, 1 << 30));
    assert_eq!(n.requested.get("example.com/foo"), 2);
    assert_eq!(n.requested.allowed_pod_number, 0);
    assert_eq!(
        (n.non_zero_requested.milli_cpu, n.non_zero_requested.memory),
        (600, (1 << 30) + 200 * MI)
    );
    assert!(
        n.used_ports()
            .conflicts(&HostPort::new(80, "TCP", "1.2.3.4"))
    );
    assert!(
        n.used_ports()
            .conflicts(&HostPort::new(81, "UDP", "0.0.0.0"))
    );
    assert_eq!(n.pvc_ref_count("ns/c"), Some(2));

    let g1 = n.generation;
    let removed = n.remove_pod(&PodKey::new("ns", "a")).unwrap();
    assert!(Arc::ptr_eq(&removed, &a));
    assert!(n.generation > g1);
    assert_eq!((n.requested.milli_cpu, n.requested.memory), (0, 0));
    assert_eq!(n.requested.get("example.com/foo"), 0);
    assert_eq!(
        (n.non_zero_requested.milli_cpu, n.non_zero_requested.memory),
        (100, 200 * MI)
    );
    assert!(!n.used_ports().conflicts(&HostPort::new(80, "TCP", "")));
    assert_eq!(n.pvc_ref_count("ns/c"), Some(1));
    assert!(n.remove_pod(&PodKey::new("ns", "a")).is_none());
    n.remove_pod(&PodKey::new("ns", "b")).unwrap();
    assert!(n.non_zero_requested.is_zero());
    assert!(n.used_ports().is_empty());
    assert!(n.pvcs_unused());
    assert!(n.pods.is_empty());
}

#[test]
fn node_info_tracks_pods_with_affinity() {
    let anti = k8s::Affinity {
        pod_anti_affinity: Some(k8s::PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![k8s::PodAffinityTerm {
                topology_key: "kubernetes.io/hostname".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut n = NodeInfo::test("n1").build();
    n.add_pod(Arc::new(PodInfo::test("ns", "a").affinity(anti).build()));
    n.add_pod(Arc::new(PodInfo::test("ns", "b").build()));
    assert_eq!(
        (
            n.pods_with_affinity().len(),
            n.pods_with_required_anti_affinity().len()
        ),
        (1, 1)
    );
    n.remove_pod(&PodKey::new("ns", "a"));
    assert_eq!(
        (
            n.pods_with_affinity().len(),
            n.pods_with_required_anti_affinity().len()
        ),
        (0, 0)
    );
}
