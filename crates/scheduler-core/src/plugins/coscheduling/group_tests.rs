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

/// A clock tests move by hand, in seconds.
struct Clock(Arc<std::sync::atomic::AtomicI64>);

impl Clock {
    fn new() -> (Clock, super::WallClock) {
        let t = Arc::new(std::sync::atomic::AtomicI64::new(1_000 * 1_000_000_000));
        let read = Arc::clone(&t);
        (
            Clock(t),
            Arc::new(move || read.load(std::sync::atomic::Ordering::SeqCst)),
        )
    }
    fn advance(&self, seconds: i64) {
        self.0
            .fetch_add(seconds * 1_000_000_000, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A profile running Coscheduling with `args`, on `groups`, reading time from `now`.
fn timed_framework(groups: &Arc<PodGroupManager>, now: super::WallClock, args: &str) -> Framework {
    let mut registry = Registry::in_tree();
    crate::plugins::register_group_plugins(&mut registry, Arc::clone(groups));
    super::register_with_clock(&mut registry, Arc::clone(groups), now);
    framework_with(&registry, args)
}

/// The group and its members as the informers would know them.
fn known(groups: &PodGroupManager, group: &PodGroupInfo, members: &[QueuedPodInfo]) {
    let mut g = groups.write();
    g.upsert(group.clone());
    for m in members {
        g.add_pod(&m.pod);
    }
}

/// One real cycle (the plugins are told how it ended), as the controller runs it.
fn real_cycle(
    fw: &Framework,
    groups: &PodGroupManager,
    group: &PodGroupInfo,
    members: Vec<QueuedPodInfo>,
    cache: &mut Cache,
) -> GroupOutcome {
    let out = cycle(fw, group, members, cache);
    crate::schedule_group::cycle_done(fw, groups, group, 0, &out);
    out
}

#[test]
fn a_failed_group_is_backed_off_for_pod_group_backoff_seconds() {
    let groups = Arc::new(PodGroupManager::new());
    let (clock, now) = Clock::new();
    let fw = timed_framework(&groups, now, "podGroupBackoffSeconds: 30");
    let group = tf_group(2, &[]);
    let members = || vec![worker("w0", "3"), worker("w1", "3")];
    known(&groups, &group, &members());
    // One 4-cpu node: the second worker does not fit.
    let mut cache = cluster(&[("n1", "4")]);
    let out = real_cycle(&fw, &groups, &group, members(), &mut cache);
    assert!(matches!(out, GroupOutcome::Unschedulable { .. }));

    // Room arrives, but the group failed 10 s ago: its pods are turned away untried, and
    // wait for the events of what refused them (and Coscheduling's).
    cache.add_node(
        &NodeInfo::test("n2")
            .cpu("4")
            .memory("8Gi")
            .pods(110)
            .build_node(),
    );
    clock.advance(10);
    let out = real_cycle(&fw, &groups, &group, members(), &mut cache);
    let GroupOutcome::Unschedulable {
        reason, waiting, ..
    } = &out
    else {
        panic!("backed off: {out:?}");
    };
    assert_eq!(reason, "podGroup ml/tf failed recently");
    assert_eq!(
        messages(&out),
        vec!["0/2 nodes are available: podGroup ml/tf failed recently.".to_string(); 2]
    );
    let plugins = &waiting[0].diagnosis.as_ref().unwrap().unschedulable_plugins;
    assert!(plugins.contains("Coscheduling"), "{plugins:?}");
    assert!(plugins.contains("NodeResourcesFit"), "{plugins:?}");

    // Being turned away does not extend the back-off: 30 s after the failure, it is tried.
    clock.advance(21);
    let out = real_cycle(&fw, &groups, &group, members(), &mut cache);
    assert!(matches!(out, GroupOutcome::Placed { .. }), "{out:?}");
}

#[test]
fn without_pod_group_backoff_seconds_a_failed_group_is_retried_at_once() {
    let groups = Arc::new(PodGroupManager::new());
    let (_clock, now) = Clock::new();
    let fw = timed_framework(&groups, now, "");
    let group = tf_group(2, &[]);
    let members = || vec![worker("w0", "3"), worker("w1", "3")];
    known(&groups, &group, &members());
    let mut cache = cluster(&[("n1", "4")]);
    let out = real_cycle(&fw, &groups, &group, members(), &mut cache);
    assert!(matches!(out, GroupOutcome::Unschedulable { .. }));
    cache.add_node(
        &NodeInfo::test("n2")
            .cpu("4")
            .memory("8Gi")
            .pods(110)
            .build_node(),
    );
    let out = real_cycle(&fw, &groups, &group, members(), &mut cache);
    assert!(matches!(out, GroupOutcome::Placed { .. }), "{out:?}");
}

/// The plugin's own bookkeeping, told directly how cycles ended.
fn plugin(args: &str, now: super::WallClock, groups: &Arc<PodGroupManager>) -> super::Coscheduling {
    let loaded = crate::config::load_str(&config(args), "test.yaml").unwrap();
    let args = loaded.profiles[0].plugin_args["Coscheduling"].clone();
    super::Coscheduling::with_clock(Arc::clone(groups), args.as_ref(), now).unwrap()
}

fn failed(scheduled_before: usize, all_pods: usize) -> crate::framework::GroupCycleDone {
    crate::framework::GroupCycleDone {
        placed: false,
        error: false,
        scheduled_before,
        all_pods,
        unschedulable_plugins: Default::default(),
    }
}

#[test]
fn only_a_group_far_from_its_quorum_with_all_its_pods_is_backed_off() {
    use crate::framework::PodGroupPlugin;
    let groups = Arc::new(PodGroupManager::new());
    let (_clock, now) = Clock::new();
    let pl = plugin("podGroupBackoffSeconds: 60", now, &groups);
    let group = tf_group(10, &[]);
    groups.write().upsert(group.clone());
    let snapshot = Snapshot::new();
    let backed_off = |pl: &super::Coscheduling| pl.pre_filter_group(&group, &snapshot, 0).is_err();
    // Fewer pods than minMember (some deleted since): scheduler-plugins does not back off.
    pl.group_done(&group, &failed(0, 9));
    assert!(!backed_off(&pl));
    // 9 of 10 already placed: 10% missing is within podGroupRejectPercentage (10).
    pl.group_done(&group, &failed(9, 10));
    assert!(!backed_off(&pl));
    // An error is not a rejection.
    let mut error = failed(0, 10);
    error.error = true;
    pl.group_done(&group, &error);
    assert!(!backed_off(&pl));
    // 8 of 10: 20% missing.
    pl.group_done(&group, &failed(8, 10));
    assert!(backed_off(&pl));

    // podGroupRejectPercentage: 100 never rejects a group.
    let (_clock, now) = Clock::new();
    let lenient = plugin(
        "podGroupBackoffSeconds: 60, podGroupRejectPercentage: 100",
        now,
        &groups,
    );
    lenient.group_done(&group, &failed(0, 10));
    assert!(!backed_off(&lenient));
}

#[test]
fn a_group_that_failed_queues_behind_groups_created_before_its_failure() {
    use crate::framework::{PodGroupPlugin, QueueSortPlugin};
    let groups = Arc::new(PodGroupManager::new());
    let (clock, now) = Clock::new();
    let pl = plugin("", now, &groups);
    let mut old = tf_group(1, &[]);
    old.creation_timestamp = Some(100 * 1_000_000_000);
    let mut new = PodGroupInfo::new(
        PodGroupKey::new(GroupApi::Coscheduling, "ml", "new"),
        GroupPolicy::Gang { min_count: 1 },
    );
    new.creation_timestamp = Some(200 * 1_000_000_000);
    groups.write().upsert(old.clone());
    groups.write().upsert(new.clone());
    let of_old = worker("w0", "1");
    let of_new = QueuedPodInfo::new(
        Arc::new(
            PodInfo::test("ml", "a")
                .label("scheduling.x-k8s.io/pod-group", "new")
                .build(),
        ),
        0,
    );
    assert!(pl.less(&of_old, &of_new));
    // The old group fails now (t = 1000 s): it sorts as if created now.
    pl.group_done(&old, &failed(0, 1));
    assert!(pl.less(&of_new, &of_old));
    // Placed at last: back to its creation time.
    clock.advance(5);
    let mut placed = failed(0, 1);
    placed.placed = true;
    pl.group_done(&old, &placed);
    assert!(pl.less(&of_old, &of_new));
}

#[test]
fn a_passed_min_resources_check_holds_for_permit_waiting_time_seconds() {
    let groups = Arc::new(PodGroupManager::new());
    let (clock, now) = Clock::new();
    let fw = timed_framework(&groups, now, "permitWaitingTimeSeconds: 10");
    let group = tf_group(1, &[("cpu", "6")]);
    known(&groups, &group, &[worker("w0", "1"), worker("w1", "1")]);
    // 7 cpu free: the check passes; w0 goes to the emptier n1.
    let mut cache = cluster(&[("n1", "4"), ("n2", "3")]);
    let out = real_cycle(&fw, &groups, &group, vec![worker("w0", "1")], &mut cache);
    let GroupOutcome::Placed { placed, .. } = &out else {
        panic!("{out:?}");
    };
    assert_eq!(placed[0].node, "n1");
    // n2 goes away: n1's 4 cpu are free as far as the group goes (w0 is its own).
    cache.remove_node("n2").unwrap();
    clock.advance(5);
    let out = real_cycle(&fw, &groups, &group, vec![worker("w1", "1")], &mut cache);
    assert!(
        matches!(out, GroupOutcome::Placed { .. }),
        "checked 5 s ago: {out:?}"
    );
    // 11 s after the check, it is made again.
    clock.advance(6);
    let out = real_cycle(&fw, &groups, &group, vec![worker("w2", "1")], &mut cache);
    assert_eq!(
        messages(&out),
        ["0/1 nodes are available: resource gap: map[cpu:2]."]
    );
}
