//! The loop's parts against the controller state, without an API server: what the failure
//! handler and the binding hand-off do with a pod of its own and with a gang's members.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::{Node, Pod};
use scheduler_core::cache::Snapshot;
use scheduler_core::explain::Record;
use scheduler_core::framework::{CycleState, NodeFingerprint, QueuedPodInfo};
use scheduler_core::outcome::Placement;
use scheduler_core::queue::{PendingCounts, QueueCounters};
use scheduler_core::schedule_one::SchedulingAlgorithm;
use scheduler_core::types::pod_group::{GroupApi, GroupPolicy, PodGroupInfo, PodGroupKey};
use serde_json::json;
use tokio::sync::mpsc::{Receiver, channel};

use super::{Attempt, SchedulingLoop, handle_binding_failure};
use crate::binding::executor::Action;
use crate::binding::pod_status::{self as status, Nomination};
use crate::serving::explain::ExplainOptions;
use crate::state::tests::default_profile_state;

const PROFILE: &str = "default-scheduler";

/// A loop over the default profile, and the executor's end of its action channel.
fn scheduling_loop() -> (SchedulingLoop, Receiver<Action>) {
    let (shared, _, _) = default_profile_state();
    let (tx, rx) = channel(64);
    let lp = SchedulingLoop {
        shared: Arc::new(shared),
        alg: SchedulingAlgorithm::new(0, 1),
        actions: tx,
        explain: ExplainOptions::default(),
        record: Record::new(),
        pod_group_version: None,
        waiting: super::Waiting::new(None),
    };
    (lp, rx)
}

fn node(name: &str, cpu: &str) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    }))
    .unwrap()
}

/// A pod asking for `cpu`, of the PodGroup `group` if given, nominated to `nominated`.
fn pod(name: &str, cpu: &str, group: Option<&str>, nominated: Option<&str>) -> Pod {
    let mut p = json!({
        "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"cpu": cpu}}}]},
    });
    if let Some(g) = group {
        p["spec"]["schedulingGroup"] = json!({"podGroupName": g});
    }
    if let Some(n) = nominated {
        p["status"] = json!({"nominatedNodeName": n});
    }
    serde_json::from_value(p).unwrap()
}

fn attempt(cycle: u64) -> Attempt {
    Attempt {
        scheduler_name: PROFILE.into(),
        cycle,
        started: Instant::now(),
    }
}

/// Adds the nodes and pods, then pops the first pod: (it, its cycle).
fn pop(lp: &SchedulingLoop, nodes: &[Node], pods: &[Pod]) -> (QueuedPodInfo, u64) {
    let mut st = lp.shared.lock();
    for n in nodes {
        st.on_node(None, n.clone(), &NodeFingerprint::of(n));
    }
    for p in pods {
        st.on_pod(&lp.shared.profiles, None, p);
    }
    let q = st.queue.pop().expect("a pod to schedule");
    (q, st.queue.scheduling_cycle())
}

fn sent(rx: &mut Receiver<Action>) -> Vec<Action> {
    std::iter::from_fn(|| rx.try_recv().ok()).collect()
}

/// `scheduler_schedule_attempts_total` for `result`, as /metrics shows it.
fn attempts(lp: &SchedulingLoop, result: &str) -> u64 {
    let text = lp.shared.metrics.render(
        PendingCounts::default(),
        &QueueCounters::default(),
        crate::serving::metrics::CacheSizes::default(),
    );
    let series =
        format!("scheduler_schedule_attempts_total{{result=\"{result}\",profile=\"{PROFILE}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .map_or(0, |n| n.parse().unwrap())
}

/// Upstream's failure handler reports a pod that cannot be assumed as a scheduler error,
/// as the pod group cycle always did for a member: FailedScheduling, PodScheduled=False.
#[test]
fn a_pod_that_cannot_be_assumed_is_reported_as_a_scheduler_error() {
    let (lp, mut rx) = scheduling_loop();
    let (q, cycle) = pop(&lp, &[node("n1", "4")], &[pod("p", "1", None, None)]);
    let key = q.pod.key().clone();
    // Its binding raced with this cycle: the cache holds it already.
    lp.shared
        .lock()
        .cache
        .assume_pod(Arc::clone(&q.pod), "n1")
        .unwrap();
    let placement = Placement {
        node: "n1".into(),
        pod: Arc::clone(&q.pod),
        state: CycleState::new(),
    };
    let fw = lp.shared.profiles.for_scheduler_name(PROFILE).unwrap();
    lp.bind_pod(fw, q, placement, &attempt(cycle));

    let actions = sent(&mut rx);
    let [
        Action::Failure {
            reason, message, ..
        },
    ] = actions.as_slice()
    else {
        panic!("one failure report, no binding: {actions:?}");
    };
    assert_eq!(*reason, status::REASON_SCHEDULER_ERROR);
    assert!(message.contains("already in the cache"), "{message}");
    assert!(lp.shared.lock().queue.get(&key).is_some(), "requeued");
    assert_eq!(attempts(&lp, "error"), 1);
}

/// The Workload API gang `train` of `min_count`, served and known to the state.
fn gang(lp: &SchedulingLoop, min_count: u32) -> PodGroupInfo {
    let key = PodGroupKey::new(GroupApi::Workload, "ml", "train");
    let group = PodGroupInfo::new(key, GroupPolicy::Gang { min_count });
    let mut st = lp.shared.lock();
    st.groups.write().set_served(GroupApi::Workload, true);
    st.on_pod_group(None, &group);
    group
}

/// A gang's member deleted while its group was tried is counted like any failed attempt
/// (as upstream, and as a single pod always was), though nobody hears of it.
#[test]
fn a_gang_member_deleted_meanwhile_is_counted_but_not_reported() {
    let (mut lp, mut rx) = scheduling_loop();
    let group = gang(&lp, 2);
    let pods = [
        pod("w0", "2", Some("train"), None),
        pod("w1", "2", Some("train"), None),
    ];
    let (q, cycle) = pop(&lp, &[node("small", "1")], &pods);
    let gone = Arc::clone(&q.pod);
    lp.shared.lock().on_pod_delete(&gone);

    let profiles = Arc::clone(&lp.shared.profiles);
    let fw = profiles.for_scheduler_name(PROFILE).unwrap();
    lp.schedule_gang(fw, q, &group, &attempt(cycle), &mut Snapshot::new());

    let actions = sent(&mut rx);
    let reported: Vec<&str> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Failure { pod, .. } => Some(pod.name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reported.len(), 1, "{actions:?}");
    assert_ne!(
        reported[0],
        gone.name(),
        "the deleted member is not reported"
    );
    assert_eq!(attempts(&lp, "unschedulable"), 2);
}

/// A pod whose failure clears its nomination leaves the nominator, and its report clears
/// `status.nominatedNodeName`.
#[test]
fn a_cleared_nomination_leaves_the_nominator_and_the_status() {
    let (lp, mut rx) = scheduling_loop();
    let (q, cycle) = pop(&lp, &[node("n1", "1")], &[pod("p", "2", None, Some("n1"))]);
    let key = q.pod.key().clone();
    assert_eq!(
        lp.shared.lock().queue.nominated_pods().node_of(&key),
        Some("n1")
    );
    let failure = scheduler_core::outcome::Failure::unschedulable("no room".into(), None)
        .with_nominating(scheduler_core::outcome::Nominating::Clear);
    lp.fail_pod(q, failure, None, None, &attempt(cycle));

    assert_eq!(lp.shared.lock().queue.nominated_pods().node_of(&key), None);
    let actions = sent(&mut rx);
    let [Action::Failure { nomination, .. }] = actions.as_slice() else {
        panic!("one failure report: {actions:?}");
    };
    assert_eq!(*nomination, Nomination::Clear);
}

/// A gang that does not fit, for which preemption finds nothing to evict, loses its
/// members' nominations, as a single pod whose preemption finds no node does (and as
/// upstream's pod group cycle does); members kept them before.
#[test]
fn a_gang_whose_preemption_finds_no_room_loses_its_nominations() {
    let (mut lp, mut rx) = scheduling_loop();
    let group = gang(&lp, 2);
    // w0 last, so it completes the quorum and enters activeQ with its nomination.
    let pods = [
        pod("w1", "2", Some("train"), None),
        pod("w0", "2", Some("train"), Some("small")),
    ];
    let (q, cycle) = pop(&lp, &[node("small", "1")], &pods);
    let w0 = scheduler_core::types::PodKey::new("ml", "w0");
    assert_eq!(
        lp.shared.lock().queue.nominated_pods().node_of(&w0),
        Some("small")
    );
    let profiles = Arc::clone(&lp.shared.profiles);
    let fw = profiles.for_scheduler_name(PROFILE).unwrap();
    lp.schedule_gang(fw, q, &group, &attempt(cycle), &mut Snapshot::new());

    assert_eq!(lp.shared.lock().queue.nominated_pods().node_of(&w0), None);
    let mut nominations: Vec<(String, Nomination)> = sent(&mut rx)
        .into_iter()
        .filter_map(|a| match a {
            Action::Failure {
                pod, nomination, ..
            } => Some((pod.name, nomination)),
            _ => None,
        })
        .collect();
    nominations.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        nominations,
        [
            ("w0".to_string(), Nomination::Clear),
            ("w1".to_string(), Nomination::Keep)
        ]
    );
}

/// `p`'s popped entry after its binding cycle failed: assumed on `n1`, then forgotten, as the
/// executor does before it hands the pod to the failure handler.
fn failed_binding(lp: &SchedulingLoop, pods: &[Pod]) -> (QueuedPodInfo, u64) {
    let (q, cycle) = pop(lp, &[node("n1", "4")], pods);
    let mut st = lp.shared.lock();
    st.cache.assume_pod(Arc::clone(&q.pod), "n1").unwrap();
    st.cache.forget_pod(q.pod.key()).unwrap();
    (q, cycle)
}

/// A failed binding goes through the failure handler as upstream's `handleBindingCycleError`
/// hands it to its FailureHandler: a scheduler error, requeued through backoff, nominated
/// nowhere, the pod's PodScheduled condition as the informer last saw it (so an unchanged
/// False keeps its lastTransitionTime).
#[test]
fn a_failed_binding_goes_through_the_failure_handler() {
    let (lp, _rx) = scheduling_loop();
    let mut p = pod("p", "1", None, Some("n1"));
    let seen = k8s_openapi::api::core::v1::PodCondition {
        type_: "PodScheduled".into(),
        status: "False".into(),
        reason: Some("Unschedulable".into()),
        message: Some("0/1 nodes are available".into()),
        ..Default::default()
    };
    p.status.as_mut().unwrap().conditions = Some(vec![seen.clone()]);
    let (q, cycle) = failed_binding(&lp, &[p]);
    let key = q.pod.key().clone();
    let mut st = lp.shared.lock();
    let handled = handle_binding_failure(
        &mut st,
        q,
        None,
        "binding rejected: boom".into(),
        &attempt(cycle),
    );
    assert_eq!(handled.result, crate::serving::metrics::RESULT_ERROR);
    let Some(Action::Failure {
        reason,
        message,
        condition,
        nomination,
        ..
    }) = handled.report
    else {
        panic!("a failure report");
    };
    assert_eq!(reason, status::REASON_SCHEDULER_ERROR);
    assert_eq!(message, "binding rejected: boom");
    assert_eq!(condition, Some(seen));
    assert_eq!(nomination, Nomination::Clear);
    assert_eq!(
        st.queue.queue_of(&key),
        Some(scheduler_core::queue::QueueKind::Backoff)
    );
    assert_eq!(st.queue.get(&key).unwrap().pod.nominated_node_name, None);
    assert_eq!(st.queue.nominated_pods().node_of(&key), None);
}

/// The nomination a binding cycle set before PreBind goes with the failure; a pod that was
/// nominated nowhere has no nomination to clear (upstream writes none).
#[test]
fn a_failed_binding_clears_the_nomination_it_set_before_prebind() {
    for (prebind, want) in [(Some("n1"), Nomination::Clear), (None, Nomination::Keep)] {
        let (lp, _rx) = scheduling_loop();
        let (q, cycle) = failed_binding(&lp, &[pod("p", "1", None, None)]);
        let mut st = lp.shared.lock();
        let handled = handle_binding_failure(&mut st, q, prebind, "boom".into(), &attempt(cycle));
        let Some(Action::Failure { nomination, .. }) = handled.report else {
            panic!("a failure report");
        };
        assert_eq!(nomination, want, "nominated before PreBind: {prebind:?}");
    }
}

/// A pod deleted while its binding was in flight is not reported, and the pods its
/// assumption kept out are moved (AssignedPod Delete), as before.
#[test]
fn a_failed_binding_of_a_deleted_pod_moves_the_others_and_reports_nothing() {
    let (lp, _rx) = scheduling_loop();
    let (q, cycle) = failed_binding(&lp, &[pod("p", "1", None, None)]);
    let mut st = lp.shared.lock();
    // Another pod was rejected by NodeResourcesFit meanwhile.
    st.on_pod(&lp.shared.profiles, None, &pod("big", "8", None, None));
    let big = st.queue.pop().unwrap();
    let big_key = big.pod.key().clone();
    let mut d = scheduler_core::framework::Diagnosis::default();
    d.unschedulable_plugins.insert("NodeResourcesFit");
    let big_cycle = st.queue.scheduling_cycle();
    st.queue
        .add_unschedulable_if_not_present(big, Some(&d), big_cycle)
        .unwrap();
    assert_eq!(
        st.queue.queue_of(&big_key),
        Some(scheduler_core::queue::QueueKind::Unschedulable)
    );
    st.on_pod_delete(&Arc::clone(&q.pod));
    let handled = handle_binding_failure(&mut st, q, None, "boom".into(), &attempt(cycle));
    assert!(handled.report.is_none());
    assert_ne!(
        st.queue.queue_of(&big_key),
        Some(scheduler_core::queue::QueueKind::Unschedulable)
    );
}
