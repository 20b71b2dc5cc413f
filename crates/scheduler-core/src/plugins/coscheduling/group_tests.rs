//! Coscheduling around the pod group cycle: `minResources`, back-off, the queue penalty.

use std::sync::Arc;

use crate::cache::{Cache, Snapshot};
use crate::framework::{Framework, NominatedPods, QueuedPodInfo, Registry};
use crate::group_preemption::{GroupPreemption, preempt_for_group};
use crate::pod_group_manager::PodGroupManager;
use crate::schedule_group::{GroupOutcome, schedule_group};
use crate::schedule_one::SchedulingAlgorithm;
use crate::types::pod_group::{GroupApi, GroupPolicy, PodGroupInfo, PodGroupKey};
use crate::types::quantity::parse_quantity;
use crate::types::{NodeInfo, PodInfo};

/// scheduler-plugins' documented profile, with `args` as Coscheduling's args.
pub(super) fn config(args: &str) -> String {
    format!(
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: scheduler-plugins-scheduler
    plugins:
      multiPoint:
        enabled:
          - name: Coscheduling
        disabled:
          - name: PrioritySort
    pluginConfig:
      - name: Coscheduling
        args: {{{args}}}
"
    )
}

pub(super) fn framework_with(registry: &Registry, args: &str) -> Framework {
    let loaded = crate::config::load_str(&config(args), "test.yaml").unwrap();
    Framework::new(&loaded.profiles[0], registry).unwrap()
}

pub(super) fn framework(groups: &Arc<PodGroupManager>, args: &str) -> Framework {
    let mut registry = Registry::in_tree();
    crate::plugins::register_group_plugins(&mut registry, Arc::clone(groups));
    framework_with(&registry, args)
}

pub(super) fn tf_group(min_member: u32, min_resources: &[(&str, &str)]) -> PodGroupInfo {
    let mut g = PodGroupInfo::new(
        PodGroupKey::new(GroupApi::Coscheduling, "ml", "tf"),
        GroupPolicy::Gang {
            min_count: min_member,
        },
    );
    if !min_resources.is_empty() {
        g.min_resources = Some(
            min_resources
                .iter()
                .map(|(n, q)| (n.to_string(), parse_quantity(q).unwrap()))
                .collect(),
        );
    }
    g
}

pub(super) fn worker(name: &str, cpu: &str) -> QueuedPodInfo {
    let pod = PodInfo::test("ml", name)
        .request("cpu", cpu)
        .label("scheduling.x-k8s.io/pod-group", "tf")
        .build();
    QueuedPodInfo::new(Arc::new(pod), 0)
}

pub(super) fn cluster(nodes: &[(&str, &str)]) -> Cache {
    let mut cache = Cache::new();
    for (n, cpu) in nodes {
        cache.add_node(
            &NodeInfo::test(n)
                .cpu(cpu)
                .memory("8Gi")
                .pods(110)
                .build_node(),
        );
    }
    cache
}

pub(super) fn cycle(
    fw: &Framework,
    group: &PodGroupInfo,
    members: Vec<QueuedPodInfo>,
    cache: &mut Cache,
) -> GroupOutcome {
    schedule_group(
        fw,
        &mut SchedulingAlgorithm::new(0, 1),
        group,
        &[],
        members,
        cache,
        &mut Snapshot::new(),
        &NominatedPods::new(),
    )
}

pub(super) fn messages(out: &GroupOutcome) -> Vec<String> {
    match out {
        GroupOutcome::Placed { waiting, .. } | GroupOutcome::Unschedulable { waiting, .. } => {
            waiting.iter().map(|w| w.message.clone()).collect()
        }
    }
}

#[test]
fn min_resources_beyond_the_clusters_free_room_rejects_the_group_untried() {
    let groups = Arc::new(PodGroupManager::new());
    let fw = framework(&groups, "");
    // Two 4-cpu nodes: two 1-cpu workers would fit, but the group asks for 10 cpu.
    let mut cache = cluster(&[("n1", "4"), ("n2", "4")]);
    let group = tf_group(2, &[("cpu", "10")]);
    let out = cycle(
        &fw,
        &group,
        vec![worker("w0", "1"), worker("w1", "1")],
        &mut cache,
    );
    let GroupOutcome::Unschedulable {
        reason,
        error,
        waiting,
    } = &out
    else {
        panic!("the group must be rejected: {out:?}");
    };
    assert!(!error);
    assert_eq!(reason, "resource gap: map[cpu:2]");
    assert_eq!(
        messages(&out),
        vec!["0/2 nodes are available: resource gap: map[cpu:2].".to_string(); 2]
    );
    // Retried on Coscheduling's events, and on anything that frees or adds room.
    let d = waiting[0].diagnosis.as_ref().unwrap();
    assert!(d.unschedulable_plugins.contains("Coscheduling"));
    assert!(d.unschedulable_plugins.contains("NodeResourcesFit"));
    assert!(!waiting.iter().any(|w| cache.is_assumed(w.queued.pod.key())));

    // Within the cluster's room (summed over nodes), the group is placed.
    let group = tf_group(2, &[("cpu", "6")]);
    let out = cycle(
        &fw,
        &group,
        vec![worker("w0", "1"), worker("w1", "1")],
        &mut cache,
    );
    assert!(matches!(out, GroupOutcome::Placed { .. }), "{out:?}");
}

#[test]
fn min_member_pods_must_have_room_too() {
    let groups = Arc::new(PodGroupManager::new());
    let fw = framework(&groups, "");
    let mut cache = Cache::new();
    cache.add_node(
        &NodeInfo::test("n1")
            .cpu("64")
            .memory("8Gi")
            .pods(2)
            .build_node(),
    );
    let group = tf_group(3, &[("cpu", "1")]);
    let out = cycle(&fw, &group, vec![worker("w0", "1")], &mut cache);
    assert_eq!(
        messages(&out),
        ["0/1 nodes are available: resource gap: map[pods:1]."]
    );
}

#[test]
fn a_group_rejected_for_its_min_resources_preempts_nothing() {
    let groups = Arc::new(PodGroupManager::new());
    let fw = framework(&groups, "");
    // An 8-cpu node, 6 taken by a low-priority pod: evicting it would close the group's
    // 2-cpu gap, but scheduler-plugins never preempts for a group its PreFilter rejected.
    let mut cache = cluster(&[("n1", "8")]);
    cache
        .add_pod(Arc::new(
            PodInfo::test("ml", "low")
                .request("cpu", "6")
                .node("n1")
                .build(),
        ))
        .unwrap();
    let group = tf_group(1, &[("cpu", "4")]);
    let mut urgent = worker("w0", "1");
    Arc::make_mut(&mut urgent.pod).priority = 1000;
    let members = vec![urgent];
    let decision = preempt_for_group(
        &fw,
        &mut SchedulingAlgorithm::new(0, 1),
        &group,
        &[],
        &members,
        &groups.read(),
        &mut cache,
        &mut Snapshot::new(),
        &NominatedPods::new(),
    );
    assert_eq!(
        decision,
        GroupPreemption::NotHelpful {
            message: "resource gap: map[cpu:2]".into()
        }
    );
}

#[test]
fn workload_api_groups_are_not_coscheduling_s() {
    // Coscheduling looks only at its own API's groups, even where it is enabled.
    let groups = Arc::new(PodGroupManager::new());
    let fw = framework(&groups, "");
    let mut cache = cluster(&[("n1", "4")]);
    let mut group = tf_group(1, &[("cpu", "100")]);
    group.key.api = GroupApi::Workload;
    let out = cycle(&fw, &group, vec![worker("w0", "1")], &mut cache);
    assert!(matches!(out, GroupOutcome::Placed { .. }), "{out:?}");
}

#[test]
fn a_changed_min_resources_retries_the_groups_pods() {
    use crate::framework::{
        ActionType, ClusterEvent, EventObjects, EventResource, Plugin, QueueingHint,
    };
    let pl = super::Coscheduling::new(Arc::new(PodGroupManager::new()), None).unwrap();
    let pod = worker("w0", "1").pod;
    let event = ClusterEvent::new(EventResource::PodGroup, ActionType::UPDATE);
    let (old, new) = (tf_group(2, &[("cpu", "10")]), tf_group(2, &[("cpu", "6")]));
    let hint = |old: &PodGroupInfo, new: &PodGroupInfo| {
        pl.queueing_hint(
            &pod,
            &event,
            &EventObjects::PodGroup {
                old: Some(old),
                new,
            },
        )
    };
    assert_eq!(hint(&old, &new), QueueingHint::Queue);
    // Nothing that matters changed (a status write, say): skipped.
    assert_eq!(hint(&old, &old), QueueingHint::QueueSkip);
}
