//! Queue scenarios after upstream's `scheduling_queue_test.go`, rewritten against a fake clock.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1 as k8s;

use super::*;
use crate::framework::EventObjects;
use crate::framework::{ActionType, Diagnosis, EventResource, ProfileRegistry, Registry};
use crate::plugins::names;
use crate::types::{NodeInfo, PodInfo};

fn registry() -> Arc<ProfileRegistry> {
    let loaded = crate::config::from_flags(None, None).unwrap();
    Arc::new(ProfileRegistry::new(&loaded.profiles, &Registry::in_tree()).unwrap())
}

fn queue_with(config: QueueConfig) -> (SchedulingQueue, FakeClock) {
    let clock = FakeClock::new();
    clock.set(Duration::from_secs(1000));
    let q = SchedulingQueue::new(config, Arc::new(clock.clone()), registry());
    (q, clock)
}

fn queue() -> (SchedulingQueue, FakeClock) {
    queue_with(QueueConfig::default())
}

fn pod(name: &str, priority: i32) -> Arc<PodInfo> {
    Arc::new(PodInfo::test("ns", name).priority(priority).build())
}

fn gated(name: &str, gates: &[&str]) -> Arc<PodInfo> {
    let gates: Vec<k8s::PodSchedulingGate> = gates
        .iter()
        .map(|g| k8s::PodSchedulingGate {
            name: g.to_string(),
        })
        .collect();
    Arc::new(
        PodInfo::test("ns", name)
            .edit(|p| p.spec.as_mut().unwrap().scheduling_gates = Some(gates))
            .build(),
    )
}

fn key(name: &str) -> PodKey {
    PodKey::new("ns", name)
}

fn rejected_by(plugins: &[&'static str]) -> Diagnosis {
    Diagnosis {
        unschedulable_plugins: plugins.iter().copied().collect(),
        ..Diagnosis::default()
    }
}

fn ev(resource: EventResource, action: ActionType) -> ClusterEvent {
    ClusterEvent::new(resource, action)
}

/// Pops `name` (which must be next) and fails it with `plugins` (none: an error).
fn fail(q: &mut SchedulingQueue, name: &str, plugins: &[&'static str]) -> QueueKind {
    let info = q.pop().expect("a pod to pop");
    assert_eq!(info.pod.key(), &key(name));
    let cycle = q.scheduling_cycle();
    let d = rejected_by(plugins);
    let diag = if plugins.is_empty() { None } else { Some(&d) };
    q.add_unschedulable_if_not_present(info, diag, cycle)
        .unwrap()
}

fn pop_names(q: &mut SchedulingQueue) -> Vec<String> {
    let mut out = Vec::new();
    while let Some(i) = q.pop() {
        out.push(i.pod.name().to_string());
        q.done(&i.pod);
    }
    out
}

#[test]
fn pops_by_priority_then_first_in_first_out() {
    let (mut q, clock) = queue();
    q.add(pod("low-1", 0));
    q.add(pod("high-1", 10));
    clock.advance(Duration::from_millis(1));
    q.add(pod("low-2", 0));
    q.add(pod("high-2", 10));
    // Same timestamp, same priority: insertion order decides.
    q.add(pod("low-3", 0));
    assert_eq!(
        q.pending_pods(),
        PendingCounts {
            active: 5,
            ..PendingCounts::default()
        }
    );
    assert_eq!(
        pop_names(&mut q),
        ["high-1", "high-2", "low-1", "low-2", "low-3"]
    );
    assert!(q.pop().is_none());
}

#[test]
fn backoff_doubles_per_attempt_and_is_capped() {
    let cfg = QueueConfig::default();
    let got: Vec<u64> = (0..7).map(|a| cfg.backoff_duration(a).as_secs()).collect();
    assert_eq!(got, [0, 1, 2, 4, 8, 10, 10]);
    let big = QueueConfig {
        initial_backoff: Duration::from_secs(1),
        max_backoff: Duration::from_secs(60),
        ..cfg
    };
    assert_eq!(big.backoff_duration(40), Duration::from_secs(60));
}

#[test]
fn failed_pod_waits_out_its_backoff_in_backoff_queue() {
    let (mut q, clock) = queue_with(QueueConfig {
        pop_from_backoff: false,
        ..QueueConfig::default()
    });
    q.add(pod("p", 0));
    for (attempt, secs) in [(1u32, 1u64), (2, 2), (3, 4), (4, 8), (5, 10), (6, 10)] {
        // An error (no rejecting plugin) always goes through backoff.
        assert_eq!(
            fail(&mut q, "p", &[]),
            QueueKind::Backoff,
            "attempt {attempt}"
        );
        assert!(q.pop().is_none(), "backoffQ is not popped when disabled");
        clock.advance(Duration::from_secs(secs) - Duration::from_nanos(1));
        assert_eq!(q.flush_backoff_completed(), 0, "attempt {attempt}");
        assert_eq!(q.queue_of(&key("p")), Some(QueueKind::Backoff));
        clock.advance(Duration::from_nanos(1));
        assert_eq!(q.flush_backoff_completed(), 1, "attempt {attempt}");
        assert_eq!(q.queue_of(&key("p")), Some(QueueKind::Active));
        assert_eq!(q.get(&key("p")).unwrap().attempts, attempt);
    }
}

/// Fails `name` with NodeResourcesFit, then a node add (registered by it) arrives while it is
/// still backing off: it waits in the backoffQ of rejected pods.
fn reject_into_backoff(q: &mut SchedulingQueue, name: &str) {
    assert_eq!(
        fail(q, name, &[names::NODE_RESOURCES_FIT]),
        QueueKind::Unschedulable
    );
    q.move_all_to_active_or_backoff(ev(EventResource::Node, ActionType::ADD), None);
    assert_eq!(q.queue_of(&key(name)), Some(QueueKind::Backoff));
    assert!(!q.in_error_backoff(&key(name)));
}

#[test]
fn empty_active_queue_pops_a_rejected_pod_from_backoff_queue() {
    let (mut q, _clock) = queue();
    q.add(pod("p", 0));
    reject_into_backoff(&mut q, "p");
    // activeQ first: a new pod goes before the backing-off one.
    q.add(pod("new", 0));
    assert_eq!(pop_names(&mut q), ["new", "p"]);
    assert_eq!(q.pending_pods(), PendingCounts::default());
}

/// Upstream's podErrorBackoffQ: a pod whose attempt hit an error (e.g. a failed binding)
/// waits out its whole backoff even when activeQ is empty, at every attempt.
#[test]
fn errored_pod_is_never_popped_before_its_backoff_expires() {
    let (mut q, clock) = queue();
    assert!(
        q.config().pop_from_backoff,
        "the default pops from backoffQ"
    );
    q.add(pod("p", 0));
    for (attempt, secs) in [(1u32, 1u64), (2, 2), (3, 4), (4, 8), (5, 10)] {
        assert_eq!(
            fail(&mut q, "p", &[]),
            QueueKind::Backoff,
            "attempt {attempt}"
        );
        assert!(q.in_error_backoff(&key("p")));
        assert!(q.pop().is_none(), "attempt {attempt}: popped early");
        clock.advance(Duration::from_secs(secs) - Duration::from_nanos(1));
        assert_eq!(q.flush_backoff_completed(), 0, "attempt {attempt}");
        assert!(q.pop().is_none(), "attempt {attempt}: popped early");
        clock.advance(Duration::from_nanos(1));
        assert_eq!(q.flush_backoff_completed(), 1, "attempt {attempt}");
        assert_eq!(q.queue_of(&key("p")), Some(QueueKind::Active));
    }
}

#[test]
fn pop_takes_the_rejected_pod_and_leaves_the_errored_one() {
    let (mut q, clock) = queue();
    q.add(pod("err", 10));
    q.add(pod("rej", 0));
    assert_eq!(fail(&mut q, "err", &[]), QueueKind::Backoff);
    reject_into_backoff(&mut q, "rej");
    assert_eq!(q.pending_pods().backoff, 2);
    let popped = q.pop().expect("the rejected pod");
    assert_eq!(popped.pod.name(), "rej");
    q.done(&popped.pod);
    assert!(q.pop().is_none());
    // An update keeps the errored pod in the error backoffQ.
    let newer = Arc::new(
        PodInfo::test("ns", "err")
            .priority(10)
            .label("x", "y")
            .build(),
    );
    assert_eq!(q.update(None, newer), Some(QueueKind::Backoff));
    assert!(q.in_error_backoff(&key("err")));
    assert!(q.pop().is_none());
    clock.advance(Duration::from_secs(1));
    assert_eq!(q.flush_backoff_completed(), 1);
    assert_eq!(pop_names(&mut q), ["err"]);
}

#[test]
fn rejected_pod_moves_only_on_an_event_its_plugins_registered() {
    let (mut q, clock) = queue();
    q.add(pod("fit", 0));
    assert_eq!(
        fail(&mut q, "fit", &[names::NODE_RESOURCES_FIT]),
        QueueKind::Unschedulable
    );
    let unrelated = [
        ev(EventResource::PodDisruptionBudget, ActionType::ADD),
        ev(EventResource::Node, ActionType::UPDATE_NODE_LABEL),
        ev(EventResource::Node, ActionType::UPDATE_NODE_TAINT),
        ev(EventResource::AssignedPod, ActionType::ADD),
        ev(EventResource::AssignedPod, ActionType::UPDATE_POD_LABEL),
    ];
    for e in unrelated {
        assert_eq!(q.move_all_to_active_or_backoff(e, None), 0, "{}", e.label());
        assert_eq!(q.queue_of(&key("fit")), Some(QueueKind::Unschedulable));
    }
    // Node add: still backing off (1s after the failure), so backoffQ.
    assert_eq!(
        q.move_all_to_active_or_backoff(ev(EventResource::Node, ActionType::ADD), None),
        1
    );
    assert_eq!(q.queue_of(&key("fit")), Some(QueueKind::Backoff));

    // Once backed off, a matching event sends it straight to activeQ.
    let popped = q.pop().unwrap();
    q.done(&popped.pod);
    q.add(pod("fit2", 0));
    assert_eq!(
        fail(&mut q, "fit2", &[names::NODE_RESOURCES_FIT]),
        QueueKind::Unschedulable
    );
    clock.advance(Duration::from_secs(2));
    let delete = ev(EventResource::AssignedPod, ActionType::DELETE);
    assert_eq!(q.move_all_to_active_or_backoff(delete, None), 1);
    assert_eq!(q.queue_of(&key("fit2")), Some(QueueKind::Active));
}

/// Queueing hints (GA 1.34): a node too small for the pod, or a pod leaving that was never
/// bound, leaves the pod NodeResourcesFit rejected where it is; a node that fits moves it.
#[test]
fn queueing_hints_skip_events_that_cannot_help() {
    let (mut q, _clock) = queue();
    q.add(Arc::new(PodInfo::test("ns", "big").cpu("3").build()));
    assert_eq!(
        fail(&mut q, "big", &[names::NODE_RESOURCES_FIT]),
        QueueKind::Unschedulable
    );
    let add = ev(EventResource::Node, ActionType::ADD);
    let small = NodeInfo::test("small")
        .cpu("2")
        .memory("8Gi")
        .pods(110)
        .build();
    let objects = EventObjects::Node {
        old: None,
        new: &small,
    };
    assert_eq!(q.move_all_with_objects(add, &objects, None), 0);
    assert_eq!(q.queue_of(&key("big")), Some(QueueKind::Unschedulable));

    let never_bound = PodInfo::test("ns", "other").cpu("4").build();
    let gone = EventObjects::Pod {
        old: Some(&never_bound),
        new: None,
    };
    let delete = ev(EventResource::AssignedPod, ActionType::DELETE);
    assert_eq!(q.move_all_with_objects(delete, &gone, None), 0);

    let large = NodeInfo::test("large")
        .cpu("4")
        .memory("8Gi")
        .pods(110)
        .build();
    let objects = EventObjects::Node {
        old: None,
        new: &large,
    };
    assert_eq!(q.move_all_with_objects(add, &objects, None), 1);
    assert_ne!(q.queue_of(&key("big")), Some(QueueKind::Unschedulable));
}

#[test]
fn missing_runtime_class_waits_for_runtime_class_events() {
    let (mut q, _clock) = queue();
    q.add(pod("kata", 0));
    assert_eq!(
        fail(&mut q, "kata", &[names::RUNTIME_CLASS]),
        QueueKind::Unschedulable
    );
    let taint = ev(EventResource::Node, ActionType::UPDATE_NODE_TAINT);
    assert_eq!(q.move_all_to_active_or_backoff(taint, None), 0);
    let added = ev(EventResource::RuntimeClass, ActionType::ADD);
    assert_eq!(q.move_all_to_active_or_backoff(added, None), 1);
    assert_eq!(q.queue_of(&key("kata")), Some(QueueKind::Backoff));
}

#[test]
fn pre_check_limits_which_pods_move() {
    let (mut q, _clock) = queue();
    q.add(pod("a", 0));
    q.add(pod("b", 0));
    fail(&mut q, "a", &[names::NODE_RESOURCES_FIT]);
    fail(&mut q, "b", &[names::NODE_RESOURCES_FIT]);
    let only_b = |p: &PodInfo| p.name() == "b";
    let node_add = ev(EventResource::Node, ActionType::ADD);
    assert_eq!(q.move_all_to_active_or_backoff(node_add, Some(&only_b)), 1);
    assert_eq!(q.queue_of(&key("a")), Some(QueueKind::Unschedulable));
    assert_eq!(q.queue_of(&key("b")), Some(QueueKind::Backoff));
}

#[test]
fn pending_plugin_event_skips_backoff() {
    let (mut q, _clock) = queue();
    q.add(pod("p", 0));
    let info = q.pop().unwrap();
    let cycle = q.scheduling_cycle();
    let d = Diagnosis {
        pending_plugins: BTreeSet::from([names::NODE_RESOURCES_FIT]),
        ..Diagnosis::default()
    };
    assert_eq!(
        q.add_unschedulable_if_not_present(info, Some(&d), cycle),
        Ok(QueueKind::Unschedulable)
    );
    q.move_all_to_active_or_backoff(ev(EventResource::Node, ActionType::ADD), None);
    assert_eq!(q.queue_of(&key("p")), Some(QueueKind::Active));
}

#[test]
fn left_over_unschedulable_pods_are_flushed_after_five_minutes() {
    let (mut q, clock) = queue();
    q.add(pod("p", 0));
    fail(&mut q, "p", &[names::NODE_AFFINITY]);
    clock.advance(DEFAULT_MAX_IN_UNSCHEDULABLE_PODS);
    assert_eq!(q.flush_unschedulable_left_over(), 0);
    clock.advance(Duration::from_nanos(1));
    assert_eq!(q.flush_unschedulable_left_over(), 1);
    // Long past its 1s backoff: straight to activeQ.
    assert_eq!(q.queue_of(&key("p")), Some(QueueKind::Active));
}

#[test]
fn gated_pod_waits_until_every_gate_is_removed() {
    let (mut q, clock) = queue();
    let two = gated("g", &["a", "b"]);
    assert_eq!(q.add(Arc::clone(&two)), Some(QueueKind::Gated));
    assert_eq!(
        q.pending_pods(),
        PendingCounts {
            gated: 1,
            ..PendingCounts::default()
        }
    );
    assert!(q.pop().is_none());
    assert_eq!(
        q.get(&key("g")).unwrap().gating_plugin,
        Some(names::SCHEDULING_GATES)
    );

    // Cluster events and the periodic flush do not release it.
    q.move_all_to_active_or_backoff(ev(EventResource::Node, ActionType::ADD), None);
    clock.advance(Duration::from_secs(600));
    q.flush_unschedulable_left_over();
    assert_eq!(q.queue_of(&key("g")), Some(QueueKind::Gated));

    let one = gated("g", &["b"]);
    assert_eq!(
        q.update(Some(&two), Arc::clone(&one)),
        Some(QueueKind::Gated)
    );
    let none = gated("g", &[]);
    assert_eq!(q.update(Some(&one), none), Some(QueueKind::Active));
    let popped = q.pop().unwrap();
    assert_eq!(popped.attempts, 1);
    assert!(!popped.gated());
}

#[test]
fn move_request_during_the_attempt_sends_the_pod_to_backoff() {
    let (mut q, _clock) = queue();
    q.add(pod("raced", 0));
    q.add(pod("quiet", 0));
    q.add(pod("other", 0));

    // An event before the pod is popped does not count for it.
    q.move_all_to_active_or_backoff(ev(EventResource::Node, ActionType::ADD), None);

    let raced = q.pop().unwrap();
    let raced_cycle = q.scheduling_cycle();
    let quiet = q.pop().unwrap();
    let quiet_cycle = q.scheduling_cycle();
    // While both are in flight: an allocatable change (NodeResourcesFit cares, NodeAffinity
    // does not), then a PDB change (nobody cares).
    let allocatable = ev(EventResource::Node, ActionType::UPDATE_NODE_ALLOCATABLE);
    q.move_all_to_active_or_backoff(allocatable, None);
    q.move_all_to_active_or_backoff(
        ev(EventResource::PodDisruptionBudget, ActionType::ADD),
        None,
    );

    let fit = rejected_by(&[names::NODE_RESOURCES_FIT]);
    assert_eq!(
        q.add_unschedulable_if_not_present(raced, Some(&fit), raced_cycle),
        Ok(QueueKind::Backoff)
    );
    let affinity = rejected_by(&[names::NODE_AFFINITY]);
    assert_eq!(
        q.add_unschedulable_if_not_present(quiet, Some(&affinity), quiet_cycle),
        Ok(QueueKind::Unschedulable)
    );
    assert!(
        q.in_flight_events.is_empty(),
        "events dropped when nothing is in flight"
    );

    // The third pod, popped after the events, is not affected by them.
    let other = q.pop().unwrap();
    let cycle = q.scheduling_cycle();
    assert_eq!(
        q.add_unschedulable_if_not_present(other, Some(&fit), cycle),
        Ok(QueueKind::Unschedulable)
    );
}

#[test]
fn update_replaces_the_entry_in_active_and_backoff_queues() {
    let (mut q, _clock) = queue();
    let old = pod("a", 0);
    q.add(Arc::clone(&old));
    q.add(pod("b", 0));
    let new = Arc::new(PodInfo::test("ns", "a").label("x", "y").build());
    assert_eq!(
        q.update(Some(&old), Arc::clone(&new)),
        Some(QueueKind::Active)
    );
    let got = q.get(&key("a")).unwrap();
    assert_eq!(got.pod.labels.get("x").map(String::as_str), Some("y"));
    // Position kept: "a" was first and still is.
    let a = q.pop().unwrap();
    assert_eq!(a.pod.name(), "a");
    q.done(&a.pod);
    q.add(Arc::clone(&new));
    // Put "a" in backoffQ via an error, then update it there.
    let first = q.pop().unwrap();
    let first_name = first.pod.name().to_string();
    let cycle = q.scheduling_cycle();
    q.add_unschedulable_if_not_present(first, None, cycle)
        .unwrap();
    let k = key(&first_name);
    assert_eq!(q.queue_of(&k), Some(QueueKind::Backoff));
    let newer = Arc::new(PodInfo::test("ns", &first_name).label("x", "z").build());
    assert_eq!(q.update(None, newer), Some(QueueKind::Backoff));
    assert_eq!(q.get(&k).unwrap().attempts, 1);
    assert_eq!(q.get(&k).unwrap().pod.labels["x"], "z");
}

#[test]
fn update_of_an_unschedulable_pod_moves_it_only_if_it_may_help() {
    let (mut q, clock) = queue();
    let old = pod("t", 0);
    q.add(Arc::clone(&old));
    fail(&mut q, "t", &[names::TAINT_TOLERATION]);
    clock.advance(Duration::from_secs(5));
    let labelled = Arc::new(PodInfo::test("ns", "t").label("a", "b").build());
    assert_eq!(
        q.update(Some(&old), Arc::clone(&labelled)),
        Some(QueueKind::Unschedulable)
    );
    assert_eq!(q.get(&key("t")).unwrap().pod.labels["a"], "b");
    let tolerating = Arc::new(
        PodInfo::test("ns", "t")
            .label("a", "b")
            .toleration("k", "Exists", "", "NoSchedule")
            .build(),
    );
    assert_eq!(
        q.update(Some(&labelled), tolerating),
        Some(QueueKind::Active)
    );
}

#[test]
fn delete_removes_from_every_queue_and_drops_in_flight_pods() {
    let (mut q, _clock) = queue();
    for n in ["act", "back", "uns", "fly"] {
        q.add(pod(n, 0));
    }
    q.add(gated("gate", &["x"]));
    // An error sends "act" to backoffQ, a rejection sends "back" to the pool.
    fail(&mut q, "act", &[]);
    assert_eq!(q.queue_of(&key("act")), Some(QueueKind::Backoff));
    fail(&mut q, "back", &[names::NODE_AFFINITY]);
    assert_eq!(q.queue_of(&key("back")), Some(QueueKind::Unschedulable));
    let uns = q.pop().unwrap();
    assert_eq!(uns.pod.name(), "uns");
    assert!(q.delete(&key("act")));
    assert!(q.delete(&key("back")));
    assert!(q.delete(&key("gate")));
    assert!(!q.delete(&key("uns")), "in flight, not waiting");
    let cycle = q.scheduling_cycle();
    assert_eq!(
        q.add_unschedulable_if_not_present(uns, None, cycle),
        Err(QueueError::Deleted(key("uns")))
    );
    assert!(!q.is_in_flight(&key("uns")));
    assert!(q.delete(&key("fly")));
    assert_eq!(q.pending_pods(), PendingCounts::default());
}

#[test]
fn update_while_in_flight_is_requeued_in_its_latest_version() {
    let (mut q, _clock) = queue();
    let old = pod("p", 0);
    q.add(Arc::clone(&old));
    let info = q.pop().unwrap();
    let cycle = q.scheduling_cycle();
    let tolerating = Arc::new(
        PodInfo::test("ns", "p")
            .toleration("k", "Exists", "", "NoSchedule")
            .build(),
    );
    assert_eq!(q.update(Some(&old), Arc::clone(&tolerating)), None);
    assert_eq!(
        q.queue_of(&key("p")),
        None,
        "no second copy while in flight"
    );
    // The attempt (on the old version) failed on a taint; the update may fix that.
    let d = rejected_by(&[names::TAINT_TOLERATION]);
    assert_eq!(
        q.add_unschedulable_if_not_present(info, Some(&d), cycle),
        Ok(QueueKind::Backoff)
    );
    assert_eq!(q.get(&key("p")).unwrap().pod.tolerations.len(), 1);
}

#[test]
fn pod_update_in_flight_does_not_requeue_other_pods() {
    let (mut q, _clock) = queue();
    let a = pod("a", 0);
    q.add(Arc::clone(&a));
    q.add(pod("b", 0));
    let ia = q.pop().unwrap();
    let ca = q.scheduling_cycle();
    let ib = q.pop().unwrap();
    let cb = q.scheduling_cycle();
    let relabelled = Arc::new(PodInfo::test("ns", "a").label("l", "v").build());
    q.update(Some(&a), relabelled);
    let d = rejected_by(&[names::INTER_POD_AFFINITY]);
    assert_eq!(
        q.add_unschedulable_if_not_present(ib, Some(&d), cb),
        Ok(QueueKind::Unschedulable)
    );
    assert_eq!(
        q.add_unschedulable_if_not_present(ia, Some(&d), ca),
        Ok(QueueKind::Backoff)
    );
}

#[test]
fn add_unschedulable_refuses_a_pod_already_waiting() {
    let (mut q, _clock) = queue();
    q.add(pod("p", 0));
    let stray = QueuedPodInfo::new(pod("p", 0), 0);
    assert_eq!(
        q.add_unschedulable_if_not_present(stray, None, 0),
        Err(QueueError::AlreadyPresent(key("p"), QueueKind::Active))
    );
    assert_eq!(q.pending_pods().active, 1);
}

#[test]
fn add_of_a_pod_in_flight_does_not_duplicate_it() {
    let (mut q, _clock) = queue();
    q.add(pod("p", 0));
    let info = q.pop().unwrap();
    let cycle = q.scheduling_cycle();
    assert_eq!(q.add(pod("p", 5)), None);
    assert_eq!(q.queue_of(&key("p")), None);
    // The error requeues the newest version.
    q.add_unschedulable_if_not_present(info, None, cycle)
        .unwrap();
    assert_eq!(q.get(&key("p")).unwrap().pod.priority, 5);
}

#[test]
fn nominator_follows_adds_updates_and_deletes() {
    let (mut q, clock) = queue();
    let p = Arc::new(PodInfo::test("ns", "p").nominated_node("n1").build());
    q.add(Arc::clone(&p));
    assert_eq!(q.nominated_pods().node_of(&key("p")), Some("n1"));
    // Preemption nominates in memory; an update that carries no nomination keeps it.
    let plain = pod("p", 0);
    q.add_nominated(&plain, Some("n2"));
    let relabelled = Arc::new(PodInfo::test("ns", "p").label("a", "b").build());
    q.update(Some(&plain), Arc::clone(&relabelled));
    assert_eq!(q.nominated_pods().node_of(&key("p")), Some("n2"));
    assert_eq!(q.nominated_pods().for_node("n2")[0].labels["a"], "b");
    // Clearing the pod's nominatedNodeName drops it.
    q.update(Some(&p), relabelled);
    assert_eq!(q.nominated_pods().node_of(&key("p")), None);
    q.add_nominated(&p, None);
    assert_eq!(q.nominated_pods().node_of(&key("p")), Some("n1"));
    q.delete(&key("p"));
    assert!(q.nominated_pods().is_empty());

    // A nomination made by preemption survives the pod's moves between sub-queues.
    q.add(pod("v", 0));
    let info = q.pop().unwrap();
    let cycle = q.scheduling_cycle();
    let fit = rejected_by(&[names::NODE_RESOURCES_FIT]);
    q.add_unschedulable_if_not_present(info, Some(&fit), cycle)
        .unwrap();
    q.add_nominated(&pod("v", 0), Some("n3"));
    clock.advance(Duration::from_secs(10));
    q.move_all_to_active_or_backoff(ev(EventResource::Node, ActionType::ADD), None);
    assert_eq!(q.queue_of(&key("v")), Some(QueueKind::Active));
    assert_eq!(q.nominated_pods().node_of(&key("v")), Some("n3"));
}

#[test]
fn queue_can_move_between_threads() {
    fn send<T: Send>() {}
    send::<SchedulingQueue>();
}

#[test]
fn default_profile_registers_upstream_events() {
    let reg = registry();
    let events = reg.plugin_events("").unwrap();
    let node = |a| ev(EventResource::Node, a);
    let pod_ev = |a| ev(EventResource::Pod, a);
    let of = |p: &str| events.of_plugin(p);
    assert_eq!(
        of(names::NODE_RESOURCES_FIT),
        [
            pod_ev(ActionType::DELETE | ActionType::UPDATE_POD_SCALE_DOWN),
            node(ActionType::ADD | ActionType::UPDATE_NODE_ALLOCATABLE),
            ev(
                EventResource::DeviceClass,
                ActionType::ADD | ActionType::UPDATE
            )
        ]
    );
    assert_eq!(
        of(names::NODE_AFFINITY),
        [node(ActionType::ADD | ActionType::UPDATE_NODE_LABEL)]
    );
    assert_eq!(
        of(names::SCHEDULING_GATES),
        [pod_ev(ActionType::UPDATE_POD_SCHEDULING_GATES_ELIMINATED)]
    );
    assert!(of(names::RUNTIME_CLASS).contains(&ev(
        EventResource::RuntimeClass,
        ActionType::ADD | ActionType::UPDATE
    )));
    // Score-only plugins never reject, so they register nothing.
    assert!(of(names::IMAGE_LOCALITY).is_empty());
    assert!(of(names::NODE_RESOURCES_BALANCED_ALLOCATION).is_empty());
    assert!(!reg.event_of_interest(&ev(EventResource::PodDisruptionBudget, ActionType::ALL)));
    assert!(reg.event_of_interest(&ClusterEvent::UNSCHEDULABLE_TIMEOUT));
}

fn check_invariants(q: &SchedulingQueue, live: &BTreeMap<String, Arc<PodInfo>>) {
    // The per-plugin counts are exactly those of the waiting pods.
    let mut recount = QueueCounters::default();
    let waiting = q
        .active
        .iter()
        .chain(q.backoff.iter())
        .chain(q.error_backoff.iter());
    for info in waiting.map(|e| &e.info).chain(q.unschedulable.values()) {
        recount.rejectors(info, 1);
    }
    let nonzero = |c: &QueueCounters| -> Vec<(String, &'static str, i64)> {
        c.unschedulable
            .iter()
            .flat_map(|(p, m)| m.iter().map(move |(pl, n)| (p.clone(), *pl, *n)))
            .filter(|(_, _, n)| *n != 0)
            .collect()
    };
    assert_eq!(nonzero(q.counters()), nonzero(&recount));
    let mut seen: BTreeMap<PodKey, &str> = BTreeMap::new();
    let mut note = |k: &PodKey, where_: &'static str| {
        if let Some(prev) = seen.insert(k.clone(), where_) {
            panic!("{k} is in {prev} and {where_}");
        }
    };
    for e in q.active.iter() {
        note(e.info.pod.key(), "activeQ");
    }
    for e in q.backoff.iter() {
        note(e.info.pod.key(), "backoffQ");
    }
    for e in q.error_backoff.iter() {
        note(e.info.pod.key(), "error backoffQ");
        assert!(
            e.info.rejector_plugins().is_empty(),
            "a rejected pod in error backoffQ"
        );
    }
    for k in q.unschedulable.keys() {
        note(k, "unschedulable");
    }
    for ((k, uid), f) in &q.in_flight {
        assert_eq!(
            !f.deleted,
            q.in_flight_by_key.get(k) == Some(uid),
            "in-flight index of {k}"
        );
        if !f.deleted {
            note(k, "in flight");
        }
    }
    let expected: BTreeSet<PodKey> = live.keys().map(|n| key(n)).collect();
    let actual: BTreeSet<PodKey> = seen.keys().cloned().collect();
    assert_eq!(actual, expected, "pods lost or resurrected");
    let c = q.pending_pods();
    assert_eq!(
        c.active + c.backoff + c.unschedulable + c.gated,
        q.pending_pods_list().len()
    );
}

#[test]
fn randomized_operations_never_duplicate_or_lose_pods() {
    for seed in [1u64, 7, 42, 0xdead_beef, 2026] {
        let (mut q, clock) = queue();
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut live: BTreeMap<String, Arc<PodInfo>> = BTreeMap::new();
        let mut in_flight: Vec<(QueuedPodInfo, u64)> = Vec::new();
        let plugins = [
            names::NODE_RESOURCES_FIT,
            names::NODE_AFFINITY,
            names::TAINT_TOLERATION,
            names::RUNTIME_CLASS,
            names::INTER_POD_AFFINITY,
        ];
        let events = [
            ev(EventResource::Node, ActionType::ADD),
            ev(EventResource::Node, ActionType::UPDATE_NODE_TAINT),
            ev(EventResource::AssignedPod, ActionType::DELETE),
            ev(EventResource::RuntimeClass, ActionType::ADD),
            ev(EventResource::PodDisruptionBudget, ActionType::ADD),
        ];
        let mut uid = 0u64;
        for step in 0..3000 {
            let name = format!("p{}", rng.u64(..40));
            match rng.u64(..10) {
                0 | 1 => {
                    if let std::collections::btree_map::Entry::Vacant(slot) = live.entry(name) {
                        let name = slot.key().clone();
                        let p = if rng.u64(..5) == 0 {
                            gated(&name, &["g"])
                        } else {
                            pod(&name, i32::try_from(rng.u64(..3)).unwrap())
                        };
                        // Each incarnation of a name is another pod.
                        uid += 1;
                        let mut p = (*p).clone();
                        p.uid = format!("uid-{uid}");
                        let p = Arc::new(p);
                        q.add(Arc::clone(&p));
                        slot.insert(p);
                    }
                }
                2 => {
                    if let Some(old) = live.get(&name).cloned() {
                        let mut new = PodInfo::test("ns", &name)
                            .priority(old.priority)
                            .label("step", &step.to_string())
                            .build();
                        new.uid = old.uid.clone();
                        let new = Arc::new(new);
                        q.update(Some(&old), Arc::clone(&new));
                        live.insert(name, new);
                    }
                }
                3 => {
                    if live.remove(&name).is_some() {
                        q.delete(&key(&name));
                    }
                }
                4 | 5 => {
                    if let Some(info) = q.pop() {
                        let cycle = q.scheduling_cycle();
                        in_flight.push((info, cycle));
                    }
                }
                6 => {
                    if !in_flight.is_empty() {
                        let i = usize::try_from(rng.u64(..in_flight.len() as u64)).unwrap();
                        let (info, cycle) = in_flight.swap_remove(i);
                        let k = info.pod.key().clone();
                        match rng.u64(..3) {
                            0 => {
                                // Bound: the pod leaves the pending set, unless this was
                                // an attempt of an incarnation deleted meanwhile.
                                q.done(&info.pod);
                                if live.get(&k.name).is_some_and(|p| p.uid == info.pod.uid) {
                                    q.delete(&k);
                                    live.remove(k.name.as_str());
                                }
                            }
                            1 => {
                                let _ = q.add_unschedulable_if_not_present(info, None, cycle);
                            }
                            _ => {
                                let p = plugins[usize::try_from(rng.u64(..5)).unwrap()];
                                let d = rejected_by(&[p]);
                                let _ = q.add_unschedulable_if_not_present(info, Some(&d), cycle);
                            }
                        }
                    }
                }
                7 => {
                    let e = events[usize::try_from(rng.u64(..5)).unwrap()];
                    q.move_all_to_active_or_backoff(e, None);
                }
                8 => {
                    clock.advance(Duration::from_millis(rng.u64(..20_000)));
                    q.flush_backoff_completed();
                }
                _ => {
                    clock.advance(Duration::from_secs(rng.u64(..120)));
                    q.flush_unschedulable_left_over();
                }
            }
            check_invariants(&q, &live);
        }
    }
}

/// `scheduler_queue_incoming_pods_total`'s counts, labelled as upstream writes them.
fn incoming(q: &SchedulingQueue) -> BTreeMap<(QueueKind, String), u64> {
    q.counters()
        .incoming
        .iter()
        .map(|((kind, event), n)| ((*kind, event.label()), *n))
        .collect()
}

#[test]
fn incoming_pods_are_counted_by_queue_and_event() {
    let (mut q, clock) = queue();
    q.add(pod("a", 0));
    q.add(pod("b", 0));
    q.add(gated("g", &["x"]));
    fail(&mut q, "a", &[names::NODE_RESOURCES_FIT]);
    fail(&mut q, "b", &[]);
    // Events that cannot help a leave it in the pool, uncounted.
    q.move_all_to_active_or_backoff(ev(EventResource::RuntimeClass, ActionType::ADD), None);
    q.update(Some(&pod("a", 0)), pod("a", 0));
    q.move_all_to_active_or_backoff(ev(EventResource::Node, ActionType::ADD), None);
    clock.advance(Duration::from_secs(2));
    assert_eq!(q.flush_backoff_completed(), 2);
    clock.advance(Duration::from_secs(600));
    assert_eq!(q.flush_unschedulable_left_over(), 0, "gated stays");

    let want: BTreeMap<(QueueKind, String), u64> = [
        ((QueueKind::Active, "UnschedulablePodAdd"), 2),
        ((QueueKind::Unschedulable, "UnschedulablePodAdd"), 1),
        ((QueueKind::Unschedulable, "ScheduleAttemptFailure"), 1),
        ((QueueKind::Backoff, "ScheduleAttemptFailure"), 1),
        ((QueueKind::Backoff, "NodeAdd"), 1),
        ((QueueKind::Active, "BackoffComplete"), 2),
    ]
    .into_iter()
    .map(|((k, e), n)| ((k, e.to_string()), n))
    .collect();
    assert_eq!(incoming(&q), want);

    // A pod update that may help moves it, labelled with the update's event.
    q.add(pod("t", 0));
    let (old, new) = (
        pod("t", 0),
        Arc::new(PodInfo::test("ns", "t").label("a", "b").build()),
    );
    fail(&mut q, "a", &[names::NODE_AFFINITY]);
    fail(&mut q, "b", &[names::NODE_AFFINITY]);
    fail(&mut q, "t", &[names::TAINT_TOLERATION]);
    assert_eq!(
        q.update(Some(&old), Arc::clone(&new)),
        Some(QueueKind::Unschedulable)
    );
    assert_eq!(
        incoming(&q)[&(QueueKind::Unschedulable, "ScheduleAttemptFailure".into())],
        4
    );
    let tolerating = Arc::new(
        PodInfo::test("ns", "t")
            .label("a", "b")
            .toleration("k", "Exists", "", "NoSchedule")
            .build(),
    );
    clock.advance(Duration::from_secs(60));
    assert_eq!(q.update(Some(&new), tolerating), Some(QueueKind::Active));
    assert_eq!(
        incoming(&q)[&(
            QueueKind::Active,
            "UnschedulablePodUpdatePodToleration".into()
        )],
        1
    );
}

/// `scheduler_unschedulable_pods` for the default profile: plugin -> pods.
fn reasons(q: &SchedulingQueue) -> BTreeMap<&'static str, i64> {
    q.counters()
        .unschedulable
        .get(crate::framework::DEFAULT_SCHEDULER_NAME)
        .cloned()
        .unwrap_or_default()
}

#[test]
fn unschedulable_pods_per_plugin_follow_pods_in_and_out() {
    let (mut q, clock) = queue();
    q.add(pod("a", 0));
    q.add(pod("b", 0));
    q.add(gated("g", &["x"]));
    assert_eq!(reasons(&q), BTreeMap::from([(names::SCHEDULING_GATES, 1)]));
    fail(
        &mut q,
        "a",
        &[names::NODE_RESOURCES_FIT, names::NODE_AFFINITY],
    );
    fail(&mut q, "b", &[names::NODE_RESOURCES_FIT]);
    let want = BTreeMap::from([
        (names::NODE_AFFINITY, 1),
        (names::NODE_RESOURCES_FIT, 2),
        (names::SCHEDULING_GATES, 1),
    ]);
    assert_eq!(reasons(&q), want);
    // Updates that keep pods where they are, and a re-add, change nothing.
    q.update(Some(&pod("b", 0)), pod("b", 0));
    q.update(Some(&gated("g", &["x"])), gated("g", &["x", "y"]));
    assert_eq!(reasons(&q), want);

    // Moved to backoffQ by a node add, they still count until popped (as upstream).
    q.move_all_to_active_or_backoff(ev(EventResource::Node, ActionType::ADD), None);
    assert_eq!(q.queue_of(&key("a")), Some(QueueKind::Backoff));
    assert_eq!(reasons(&q), want);
    assert!(q.delete(&key("a")));
    clock.advance(Duration::from_secs(2));
    q.flush_backoff_completed();
    assert_eq!(reasons(&q)[names::NODE_RESOURCES_FIT], 1);
    let b = q.pop().unwrap();
    assert_eq!(reasons(&q)[names::NODE_RESOURCES_FIT], 0);
    // Rejected again, then deleted while waiting.
    let cycle = q.scheduling_cycle();
    q.add_unschedulable_if_not_present(b, Some(&rejected_by(&[names::TAINT_TOLERATION])), cycle)
        .unwrap();
    assert_eq!(reasons(&q)[names::TAINT_TOLERATION], 1);
    assert!(q.delete(&key("b")));
    // The gate lifted: the pod leaves the pool.
    assert_eq!(
        q.update(Some(&gated("g", &["x", "y"])), gated("g", &[])),
        Some(QueueKind::Active)
    );
    assert!(reasons(&q).values().all(|n| *n == 0), "{:?}", reasons(&q));
    assert_eq!(reasons(&q).len(), 4);
}

// ---- asynchronous preemption (upstream's preemption-in-progress PreEnqueue check) ----

fn victim_deleted() -> ClusterEvent {
    ev(EventResource::AssignedPod, ActionType::DELETE)
}

/// Pops `name` and fails it as preemption does: nominated, victims being deleted.
fn fail_preempting(q: &mut SchedulingQueue, name: &str) -> QueueKind {
    let info = q.pop().expect("a pod to pop");
    assert_eq!(info.pod.key(), &key(name));
    q.preemption_started(&info.pod);
    let cycle = q.scheduling_cycle();
    let d = rejected_by(&[names::NODE_RESOURCES_FIT]);
    q.add_unschedulable_if_not_present(info, Some(&d), cycle)
        .unwrap()
}

#[test]
fn a_preemptor_is_not_retried_while_its_victims_are_deleted() {
    let (mut q, clock) = queue();
    let p = pod("preemptor", 100);
    q.add(Arc::clone(&p));
    assert_eq!(
        fail_preempting(&mut q, "preemptor"),
        QueueKind::Unschedulable
    );
    assert!(q.is_preempting(&p.uid));
    // A victim's deletion would help NodeResourcesFit, but the preemption is not over:
    // DefaultPreemption's PreEnqueue keeps the pod gated.
    q.move_all_to_active_or_backoff(victim_deleted(), None);
    assert_eq!(q.queue_of(&key("preemptor")), Some(QueueKind::Gated));
    assert_eq!(
        q.get(&key("preemptor")).unwrap().gating_plugin,
        Some(names::DEFAULT_PREEMPTION)
    );
    clock.advance(Duration::from_secs(30));
    q.flush_backoff_completed();
    assert!(q.pop().is_none());
    // Meanwhile other pods are scheduled.
    q.add(pod("other", 0));
    assert_eq!(pop_names(&mut q), ["other"]);
    // The deletions are done: the move the event asked for happens now.
    assert_eq!(
        q.preemption_finished(&key("preemptor"), &p.uid, true),
        Some(QueueKind::Active)
    );
    assert!(!q.is_preempting(&p.uid));
    assert_eq!(pop_names(&mut q), ["preemptor"]);
}

#[test]
fn a_gated_preemptor_keeps_the_plugins_of_its_attempt() {
    let (mut q, _clock) = queue();
    let p = pod("preemptor", 100);
    q.add(Arc::clone(&p));
    fail_preempting(&mut q, "preemptor");
    q.move_all_to_active_or_backoff(victim_deleted(), None);
    let info = q.get(&key("preemptor")).unwrap();
    assert_eq!(
        info.rejector_plugins(),
        BTreeSet::from([names::DEFAULT_PREEMPTION, names::NODE_RESOURCES_FIT])
    );
    // Once the preemption is over it goes where the event sent it: still backing off.
    q.preemption_finished(&key("preemptor"), &p.uid, true);
    assert_eq!(q.queue_of(&key("preemptor")), Some(QueueKind::Backoff));
}

#[test]
fn a_finished_preemption_leaves_a_pod_that_no_event_moved_waiting_for_one() {
    let (mut q, clock) = queue();
    let p = pod("preemptor", 100);
    q.add(Arc::clone(&p));
    fail_preempting(&mut q, "preemptor");
    assert_eq!(q.preemption_finished(&key("preemptor"), &p.uid, true), None);
    assert_eq!(
        q.queue_of(&key("preemptor")),
        Some(QueueKind::Unschedulable)
    );
    // The victims' deletion events arrive after the API calls returned.
    clock.advance(Duration::from_secs(30));
    q.move_all_to_active_or_backoff(victim_deleted(), None);
    assert_eq!(q.queue_of(&key("preemptor")), Some(QueueKind::Active));
    // Finishing twice, or for a pod the queue never saw preempting, changes nothing.
    assert_eq!(q.preemption_finished(&key("preemptor"), &p.uid, true), None);
}

#[test]
fn a_failed_preemption_activates_the_preemptor() {
    let (mut q, _clock) = queue();
    let p = pod("preemptor", 100);
    q.add(Arc::clone(&p));
    fail_preempting(&mut q, "preemptor");
    assert_eq!(
        q.preemption_finished(&key("preemptor"), &p.uid, false),
        Some(QueueKind::Active)
    );
    assert_eq!(pop_names(&mut q), ["preemptor"]);
    let incoming = q.counters().incoming.clone();
    assert_eq!(
        incoming.get(&(QueueKind::Active, IncomingEvent::ForceActivate)),
        Some(&1)
    );
    assert_eq!(IncomingEvent::ForceActivate.label(), "ForceActivate");
}

#[test]
fn an_event_during_the_attempt_does_not_let_the_preemptor_through() {
    let (mut q, clock) = queue();
    let p = pod("preemptor", 100);
    q.add(Arc::clone(&p));
    let info = q.pop().unwrap();
    let cycle = q.scheduling_cycle();
    // A victim-to-be went away while the pod was being scheduled.
    q.move_all_to_active_or_backoff(victim_deleted(), None);
    q.preemption_started(&info.pod);
    let d = rejected_by(&[names::NODE_RESOURCES_FIT]);
    let kind = q
        .add_unschedulable_if_not_present(info, Some(&d), cycle)
        .unwrap();
    assert_eq!(kind, QueueKind::Gated);
    clock.advance(Duration::from_secs(30));
    q.flush_backoff_completed();
    assert!(q.pop().is_none());
    // Deleting the pod forgets its preemption.
    assert!(q.delete(&key("preemptor")));
    assert!(!q.is_preempting(&p.uid));
}

/// A gang's cycle takes its waiting siblings out of every sub-queue (but not gated ones),
/// each in flight in the popped pod's cycle, and requeues them like any failed attempt.
#[test]
fn a_gang_cycle_takes_its_waiting_siblings_out_of_every_sub_queue() {
    let (mut q, _clock) = queue();
    q.add(pod("backoff", 0));
    q.add(pod("parked", 0));
    // "backoff" fails with an error (backoffQ), "parked" is rejected (unschedulable pool).
    let info = q.pop().unwrap();
    assert_eq!(info.pod.name(), "backoff");
    let cycle = q.scheduling_cycle();
    q.add_unschedulable_if_not_present(info, None, cycle)
        .unwrap();
    assert_eq!(
        fail(&mut q, "parked", &[names::NODE_RESOURCES_FIT]),
        QueueKind::Unschedulable
    );
    assert_eq!(q.queue_of(&key("backoff")), Some(QueueKind::Backoff));
    q.add(pod("lead", 0));
    q.add(pod("active", 0));
    q.add(gated("gated", &["wait"]));

    let lead = q.pop().unwrap();
    let cycle = q.scheduling_cycle();
    let siblings = [
        key("active"),
        key("backoff"),
        key("parked"),
        key("gated"),
        key("gone"),
    ];
    let taken = q.pop_group_members(&siblings);
    let mut names: Vec<&str> = taken.iter().map(|t| t.pod.name()).collect();
    names.sort();
    assert_eq!(names, ["active", "backoff", "parked"]);
    assert_eq!(q.queue_of(&key("gated")), Some(QueueKind::Gated));
    for t in &taken {
        assert!(q.is_in_flight(t.pod.key()));
        assert_eq!(q.queue_of(t.pod.key()), None);
    }
    // Taking them again takes nothing: they are in flight.
    assert!(q.pop_group_members(&siblings).is_empty());
    // The whole group fails: every member is back, parked on the gang's rejectors.
    let d = rejected_by(&[names::GANG_SCHEDULING]);
    for t in taken.into_iter().chain([lead]) {
        let k = t.pod.key().clone();
        q.add_unschedulable_if_not_present(t, Some(&d), cycle)
            .unwrap();
        assert!(!q.is_in_flight(&k));
        assert!(q.queue_of(&k).is_some());
    }
}
