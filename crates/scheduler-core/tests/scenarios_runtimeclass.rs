//! Scenarios from the RuntimeClass scheduling KEP, through the default profile.

use std::sync::Arc;

use scheduler_core::cache::{Cache, Snapshot};
use scheduler_core::config;
use scheduler_core::framework::{NominatedPods, ProfileRegistry, Registry};
use scheduler_core::schedule_one::{Decision, SchedulingAlgorithm, schedule_one};
use scheduler_core::simulate::load_str;
use scheduler_core::types::PodInfo;

const CLUSTER: &str = r#"
apiVersion: v1
kind: Node
metadata: {name: linux-1, labels: {kubernetes.io/os: linux}}
status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: linux-2, labels: {kubernetes.io/os: linux, disk: ssd}}
status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: windows-1, labels: {kubernetes.io/os: windows, disk: ssd}}
spec:
  taints: [{key: os, value: windows, effect: NoSchedule}]
status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: windows-2019}
handler: windows
scheduling:
  nodeSelector: {kubernetes.io/os: windows}
  tolerations: [{key: os, operator: Equal, value: windows, effect: NoSchedule}]
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: linux}
handler: runc
scheduling:
  nodeSelector: {kubernetes.io/os: linux}
"#;

const SANDBOX: &str = r#"
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: sandboxed}
handler: kata
overhead: {podFixed: {cpu: "1"}}
scheduling:
  nodeSelector: {kubernetes.io/os: linux}
"#;

struct Env {
    cache: Cache,
    profiles: ProfileRegistry,
    alg: SchedulingAlgorithm,
}

impl Env {
    fn new() -> Env {
        let objs = load_str(CLUSTER, "cluster.yaml").unwrap();
        let mut cache = Cache::new();
        objs.nodes.iter().for_each(|n| cache.add_node(n));
        objs.runtime_classes
            .iter()
            .for_each(|rc| cache.add_runtime_class(rc));
        let loaded = config::from_flags(None, None).unwrap();
        let profiles = ProfileRegistry::new(&loaded.profiles, &Registry::in_tree()).unwrap();
        Env {
            cache,
            profiles,
            alg: SchedulingAlgorithm::new(0, 3),
        }
    }

    fn schedule(&mut self, pod: PodInfo) -> Decision {
        let mut snap = Snapshot::new();
        self.cache.update_snapshot(&mut snap);
        let fw = self.profiles.for_scheduler_name("").unwrap();
        let d = schedule_one(
            fw,
            &mut self.alg,
            &Arc::new(pod),
            &snap,
            &NominatedPods::new(),
        );
        if let Decision::Bind { node, pod, .. } = &d {
            self.cache.assume_pod(Arc::clone(pod), node).unwrap();
        }
        d
    }
}

fn node_of(d: &Decision) -> &str {
    match d {
        Decision::Bind { node, .. } => node,
        other => panic!("expected a placement, got {other:?}"),
    }
}

fn message_of(d: &Decision) -> &str {
    match d {
        Decision::Unschedulable { message, .. } => message,
        other => panic!("expected unschedulable, got {other:?}"),
    }
}

#[test]
fn windows_pods_reach_tainted_windows_nodes_only_through_their_runtime_class() {
    let mut env = Env::new();
    // The RuntimeClass supplies both the selector and the toleration.
    let d = env.schedule(
        PodInfo::test("ns", "iis")
            .cpu("1")
            .runtime_class("windows-2019")
            .build(),
    );
    assert_eq!(node_of(&d), "windows-1");
    // Without the class, the taint keeps a pod off the Windows node.
    for i in 0..6 {
        let d = env.schedule(PodInfo::test("ns", &format!("web-{i}")).cpu("100m").build());
        assert!(node_of(&d).starts_with("linux-"), "web-{i}");
    }
    // The linux class keeps a pod off Windows even if it tolerated the taint.
    let d = env.schedule(
        PodInfo::test("ns", "tolerant")
            .cpu("100m")
            .runtime_class("linux")
            .toleration("os", "Exists", "", "NoSchedule")
            .build(),
    );
    assert!(node_of(&d).starts_with("linux-"));
}

#[test]
fn a_windows_pod_that_does_not_fit_says_why_per_node() {
    let mut env = Env::new();
    let d = env.schedule(
        PodInfo::test("ns", "big")
            .cpu("8")
            .runtime_class("windows-2019")
            .build(),
    );
    assert!(
        message_of(&d).starts_with(
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match RuntimeClass."
        ),
        "{}",
        message_of(&d)
    );
}

#[test]
fn a_missing_runtime_class_is_retried_once_it_is_created() {
    let mut env = Env::new();
    let pod = PodInfo::test("ns", "kata")
        .cpu("1")
        .runtime_class("sandboxed")
        .build();
    let d = env.schedule(pod.clone());
    assert!(
        message_of(&d)
            .starts_with("0/3 nodes are available: runtimeclass \"sandboxed\" not found."),
        "{}",
        message_of(&d)
    );

    // The admin creates the class; the next attempt uses it, overhead included.
    for rc in load_str(SANDBOX, "rc.yaml").unwrap().runtime_classes {
        env.cache.add_runtime_class(&rc);
    }
    let d = env.schedule(pod);
    let node = node_of(&d).to_string();
    assert!(node.starts_with("linux-"));
    assert_eq!(
        env.cache.node_info(&node).unwrap().requested.milli_cpu,
        2000,
        "1 CPU request + 1 CPU overhead"
    );
}

#[test]
fn runtime_class_composes_with_the_pods_own_node_selector() {
    // disk=ssd matches linux-2 and windows-1; the class narrows it to one of them.
    let mut env = Env::new();
    for i in 0..3 {
        let pod = PodInfo::test("ns", &format!("linux-ssd-{i}"))
            .cpu("100m")
            .runtime_class("linux")
            .node_selector("disk", "ssd");
        assert_eq!(node_of(&env.schedule(pod.build())), "linux-2");
    }
    let pod = PodInfo::test("ns", "windows-ssd")
        .cpu("100m")
        .runtime_class("windows-2019")
        .node_selector("disk", "ssd");
    assert_eq!(node_of(&env.schedule(pod.build())), "windows-1");
}
