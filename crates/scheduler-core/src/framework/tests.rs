//! Framework wiring and the scheduling cycle, exercised with small fake plugins.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::cache::Snapshot;
use crate::config::ExpandedProfile;
use crate::plugin_points;
use crate::plugins::names;
use crate::schedule_one::{Decision, SchedulingAlgorithm, schedule_one};
use crate::types::{NodeInfo, PodInfo};

fn node(name: &str, labels: &[(&str, &str)]) -> NodeInfo {
    labels
        .iter()
        .fold(NodeInfo::test(name), |b, (k, v)| b.label(k, v))
        .build()
}

fn pod(name: &str) -> PodInfo {
    PodInfo::test("default", name)
        .uid(&format!("uid-{name}"))
        .build()
}

fn snapshot(nodes: Vec<NodeInfo>) -> Snapshot {
    Snapshot::from_node_infos(nodes)
}

/// Filter: the node needs label `gpu`.
struct NeedsGpu;
impl Plugin for NeedsGpu {
    fn name(&self) -> &'static str {
        "NeedsGpu"
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => filter)
    }
}
impl FilterPlugin for NeedsGpu {
    fn filter(&self, _: &CycleState, _: &PodInfo, node: &NodeInfo) -> Status {
        if node.labels.contains_key("gpu") {
            Status::success()
        } else {
            Status::unschedulable("node(s) had no gpu")
        }
    }
}

/// Filter: nodes labelled `broken` are unresolvable.
struct NotBroken;
impl Plugin for NotBroken {
    fn name(&self) -> &'static str {
        "NotBroken"
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => filter)
    }
}
impl FilterPlugin for NotBroken {
    fn filter(&self, _: &CycleState, _: &PodInfo, node: &NodeInfo) -> Status {
        if node.labels.contains_key("broken") {
            Status::unresolvable("node(s) were broken")
        } else {
            Status::success()
        }
    }
}

/// Score: the node's `score` label; PreScore skips pods labelled `noscore`.
struct LabelScore;
impl Plugin for LabelScore {
    fn name(&self) -> &'static str {
        "LabelScore"
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => pre_score, score)
    }
}
impl PreScorePlugin for LabelScore {
    fn pre_score(
        &self,
        _: &mut CycleState,
        pod: &PodInfo,
        _: FeasibleNodes<'_>,
        _: &Snapshot,
    ) -> Status {
        if pod.labels.contains_key("noscore") {
            Status::skip()
        } else {
            Status::success()
        }
    }
}
impl ScorePlugin for LabelScore {
    fn score(&self, _: &CycleState, _: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        Ok(node
            .labels
            .get("score")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0))
    }
}

/// Score that always says 10 out of 100 after normalising raw 1 -> 10.
struct Tenth;
impl Plugin for Tenth {
    fn name(&self) -> &'static str {
        "Tenth"
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => score)
    }
}
impl ScorePlugin for Tenth {
    fn score(&self, _: &CycleState, _: &PodInfo, _: &NodeInfo) -> Result<i64, Status> {
        Ok(1)
    }
    fn has_score_extensions(&self) -> bool {
        true
    }

    fn normalize_scores(&self, _: &CycleState, _: &PodInfo, scores: &mut [NodeScore]) -> Status {
        scores.iter_mut().for_each(|s| s.score *= 10);
        Status::success()
    }
}

/// PreFilter: pods labelled `only=<node>` can only go there; pods labelled `skipme` skip
/// this plugin, whose Filter rejects everything (so running it would be visible).
struct Narrow;
impl Plugin for Narrow {
    fn name(&self) -> &'static str {
        "Narrow"
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => pre_filter, filter)
    }
}
impl PreFilterPlugin for Narrow {
    fn pre_filter(
        &self,
        _: &mut CycleState,
        pod: &PodInfo,
        _: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        if pod.labels.contains_key("skipme") {
            return (None, Status::skip());
        }
        match pod.labels.get("only") {
            Some(n) => (Some(PreFilterResult::nodes([n.clone()])), Status::success()),
            None => (None, Status::success()),
        }
    }
}
impl FilterPlugin for Narrow {
    fn filter(&self, _: &CycleState, pod: &PodInfo, _: &NodeInfo) -> Status {
        if pod.labels.contains_key("skipme") {
            Status::unschedulable("Narrow filter ran although PreFilter skipped")
        } else {
            Status::success()
        }
    }
}

static UNRESERVED: AtomicUsize = AtomicUsize::new(0);

/// Reserve that fails for pods labelled `noreserve` and counts unreserve calls.
struct Reserver;
impl Plugin for Reserver {
    fn name(&self) -> &'static str {
        "Reserver"
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => reserve)
    }
}
impl ReservePlugin for Reserver {
    fn reserve(&self, _: &mut CycleState, pod: &PodInfo, _: &str) -> Status {
        if pod.labels.contains_key("noreserve") {
            Status::unschedulable("reservation refused")
        } else {
            Status::success()
        }
    }
    fn unreserve(&self, _: &mut CycleState, _: &PodInfo, _: &str) {
        UNRESERVED.fetch_add(1, Ordering::SeqCst);
    }
}

fn registry() -> Registry {
    let mut r = Registry::in_tree();
    r.register("NeedsGpu", |_| Ok(Arc::new(NeedsGpu)));
    r.register("NotBroken", |_| Ok(Arc::new(NotBroken)));
    r.register("LabelScore", |_| Ok(Arc::new(LabelScore)));
    r.register("Tenth", |_| Ok(Arc::new(Tenth)));
    r.register("Narrow", |_| Ok(Arc::new(Narrow)));
    r.register("Reserver", |_| Ok(Arc::new(Reserver)));
    r
}

fn spec(points: &[(ExtensionPoint, &[&str])], weights: &[(&str, i32)]) -> ExpandedProfile {
    let mut s = ExpandedProfile {
        scheduler_name: "test".into(),
        ..ExpandedProfile::default()
    };
    s.points
        .insert(ExtensionPoint::QueueSort, vec![names::PRIORITY_SORT.into()]);
    s.points
        .insert(ExtensionPoint::Bind, vec![names::DEFAULT_BINDER.into()]);
    for (p, ns) in points {
        s.points
            .insert(*p, ns.iter().map(|n| n.to_string()).collect());
    }
    s.score_weights = weights.iter().map(|(n, w)| (n.to_string(), *w)).collect();
    s
}

use ExtensionPoint::{Filter, PreFilter, PreScore, Reserve, Score};

#[test]
fn wiring_rejects_unknown_and_misplaced_plugins() {
    let r = registry();
    let e = Framework::new(&spec(&[(Filter, &["Nope"])], &[]), &r).unwrap_err();
    assert_eq!(e.message, "plugin \"Nope\" does not exist");
    let e = Framework::new(&spec(&[(Score, &["NeedsGpu"])], &[]), &r).unwrap_err();
    assert_eq!(
        e.message,
        "plugin \"NeedsGpu\" does not extend Score plugin"
    );

    let mut no_bind = spec(&[], &[]);
    no_bind.points.remove(&ExtensionPoint::Bind);
    let e = Framework::new(&no_bind, &r).unwrap_err();
    assert!(
        e.message.starts_with("at least one bind plugin is needed"),
        "{}",
        e.message
    );

    let mut two_sorts = spec(&[], &[]);
    two_sorts.points.insert(ExtensionPoint::QueueSort, vec![]);
    let e = Framework::new(&two_sorts, &r).unwrap_err();
    assert!(
        e.message.starts_with("only one queue sort plugin required"),
        "{}",
        e.message
    );
}

#[test]
fn catalog_plugins_not_built_yet_are_listed_not_fatal() {
    // Every catalog plugin is built now: a registry without SchedulingPolicy stands in for
    // one that lacks a catalog plugin.
    let mut r = Registry::new();
    for (name, f) in crate::plugins::in_tree_factories() {
        if *name != names::SCHEDULING_POLICY {
            r.register(*name, *f);
        }
    }
    r.register("NeedsGpu", |_| Ok(Arc::new(NeedsGpu)));
    let fw = Framework::new(
        &spec(&[(Filter, &[names::SCHEDULING_POLICY, "NeedsGpu"])], &[]),
        &r,
    )
    .unwrap();
    assert_eq!(fw.not_built(), &[names::SCHEDULING_POLICY.to_string()]);
    assert_eq!(fw.list_plugins()[&Filter], vec![("NeedsGpu", None)]);
}

#[test]
fn filters_explain_every_rejected_node() {
    let fw = Framework::new(
        &spec(&[(Filter, &["NotBroken", "NeedsGpu"])], &[]),
        &registry(),
    )
    .unwrap();
    let snap = snapshot(vec![
        node("a", &[]),
        node("b", &[("broken", "")]),
        node("c", &[("broken", ""), ("gpu", "")]),
        node("d", &[]),
    ]);
    let mut alg = SchedulingAlgorithm::new(0, 1);
    match schedule_one(
        &fw,
        &mut alg,
        &Arc::new(pod("p")),
        &snap,
        &NominatedPods::new(),
    ) {
        Decision::Unschedulable {
            message,
            diagnosis,
            resolvable,
            ..
        } => {
            assert_eq!(
                message,
                "0/4 nodes are available: 2 node(s) had no gpu, 2 node(s) were broken."
            );
            let d = diagnosis.unwrap();
            assert_eq!(
                d.node_to_status.get("c").unwrap().plugin(),
                Some("NotBroken")
            );
            assert_eq!(
                d.node_to_status.get("a").unwrap().plugin(),
                Some("NeedsGpu")
            );
            assert!(resolvable);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn only_unresolvable_rejections_mean_preemption_cannot_help() {
    let fw = Framework::new(&spec(&[(Filter, &["NotBroken"])], &[]), &registry()).unwrap();
    let snap = snapshot(vec![node("b", &[("broken", "")])]);
    let mut alg = SchedulingAlgorithm::new(0, 1);
    match schedule_one(
        &fw,
        &mut alg,
        &Arc::new(pod("p")),
        &snap,
        &NominatedPods::new(),
    ) {
        Decision::Unschedulable { resolvable, .. } => assert!(!resolvable),
        other => panic!("{other:?}"),
    }
}

#[test]
fn no_nodes_at_all() {
    let fw = Framework::new(&spec(&[], &[]), &registry()).unwrap();
    let mut alg = SchedulingAlgorithm::new(0, 1);
    match schedule_one(
        &fw,
        &mut alg,
        &Arc::new(pod("p")),
        &snapshot(vec![]),
        &NominatedPods::new(),
    ) {
        Decision::Unschedulable { message, .. } => {
            assert_eq!(message, "no nodes available to schedule pods")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn highest_weighted_score_wins_and_binds_with_a_binding() {
    let fw = Framework::new(
        &spec(
            &[
                (PreScore, &["LabelScore"]),
                (Score, &["LabelScore", "Tenth"]),
            ],
            &[("LabelScore", 2), ("Tenth", 1)],
        ),
        &registry(),
    )
    .unwrap();
    let snap = snapshot(vec![
        node("low", &[("score", "10")]),
        node("high", &[("score", "40")]),
        node("mid", &[("score", "30")]),
    ]);
    let mut alg = SchedulingAlgorithm::new(0, 1);
    match schedule_one(
        &fw,
        &mut alg,
        &Arc::new(pod("p")),
        &snap,
        &NominatedPods::new(),
    ) {
        Decision::Bind {
            node,
            action,
            result,
            ..
        } => {
            assert_eq!(node, "high");
            assert_eq!(
                action,
                BindAction::Binding {
                    pod: pod("p").key().clone(),
                    uid: "uid-p".into(),
                    node: "high".into()
                }
            );
            let high = result.breakdown(&snap, "high").unwrap();
            assert_eq!(high.scores, vec![("LabelScore", 80), ("Tenth", 10)]);
            assert_eq!(high.total, 90);
            assert_eq!(result.feasible_nodes, 3);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn pre_score_skip_drops_that_plugins_score() {
    let fw = Framework::new(
        &spec(
            &[
                (PreScore, &["LabelScore"]),
                (Score, &["LabelScore", "Tenth"]),
            ],
            &[],
        ),
        &registry(),
    )
    .unwrap();
    let snap = snapshot(vec![node("a", &[("score", "90")]), node("b", &[])]);
    let mut p = pod("p");
    p.labels.insert("noscore".into(), String::new());
    let mut alg = SchedulingAlgorithm::new(0, 1);
    let mut state = CycleState::new();
    let r = alg
        .schedule_pod(&fw, &mut state, &p, &snap, &NominatedPods::new())
        .unwrap();
    assert!(
        r.breakdowns(&snap)
            .iter()
            .all(|s| s.scores == vec![("Tenth", 10)]),
        "{:?}",
        r.scores
    );
}

#[test]
fn ties_are_broken_among_all_top_nodes() {
    let fw = Framework::new(&spec(&[(Score, &["Tenth"])], &[]), &registry()).unwrap();
    let snap = snapshot((0..4).map(|i| node(&format!("n{i}"), &[])).collect());
    let mut alg = SchedulingAlgorithm::new(0, 7);
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..200 {
        let mut state = CycleState::new();
        seen.insert(
            alg.schedule_pod(
                &fw,
                &mut state,
                &Arc::new(pod("p")),
                &snap,
                &NominatedPods::new(),
            )
            .unwrap()
            .suggested_host,
        );
    }
    assert_eq!(seen.len(), 4, "{seen:?}");
}

#[test]
fn pre_filter_skip_disables_the_filter_and_narrowing_limits_nodes() {
    let fw = Framework::new(
        &spec(&[(PreFilter, &["Narrow"]), (Filter, &["Narrow"])], &[]),
        &registry(),
    )
    .unwrap();
    let snap = snapshot(vec![node("a", &[]), node("b", &[]), node("c", &[])]);
    let mut alg = SchedulingAlgorithm::new(0, 1);

    let mut skip = pod("skip");
    skip.labels.insert("skipme".into(), String::new());
    assert!(matches!(
        schedule_one(&fw, &mut alg, &Arc::new(skip), &snap, &NominatedPods::new()),
        Decision::Bind { .. }
    ));

    let mut only = pod("only");
    only.labels.insert("only".into(), "b".into());
    for _ in 0..5 {
        match schedule_one(
            &fw,
            &mut alg,
            &Arc::new(only.clone()),
            &snap,
            &NominatedPods::new(),
        ) {
            Decision::Bind { node, .. } => assert_eq!(node, "b"),
            other => panic!("{other:?}"),
        }
    }

    only.labels.insert("only".into(), "zz".into());
    match schedule_one(
        &fw,
        &mut alg,
        &Arc::new(only.clone()),
        &snap,
        &NominatedPods::new(),
    ) {
        Decision::Unschedulable { message, .. } => {
            assert_eq!(
                message,
                "0/3 nodes are available: 3 node(s) didn't satisfy plugin(s) [Narrow]."
            )
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn start_index_rotates_so_every_node_gets_a_turn() {
    // 200 nodes, percentage 50 -> 100 feasible nodes needed per attempt.
    let fw = Framework::new(&spec(&[(Filter, &["NotBroken"])], &[]), &registry()).unwrap();
    let snap = snapshot((0..200).map(|i| node(&format!("n{i:03}"), &[])).collect());
    let mut alg = SchedulingAlgorithm::new(50, 1);
    let mut state = CycleState::new();
    let r = alg
        .schedule_pod(
            &fw,
            &mut state,
            &Arc::new(pod("p")),
            &snap,
            &NominatedPods::new(),
        )
        .unwrap();
    assert_eq!(r.feasible_nodes, 100);
    assert_eq!(alg.next_start_node_index(), 100);
    let mut state = CycleState::new();
    alg.schedule_pod(
        &fw,
        &mut state,
        &Arc::new(pod("p")),
        &snap,
        &NominatedPods::new(),
    )
    .unwrap();
    assert_eq!(alg.next_start_node_index(), 0);
}

/// Counts its calls; used by one test only, so the count is that test's.
struct CountedFilter;
static COUNTED_FILTER_CALLS: AtomicUsize = AtomicUsize::new(0);
impl Plugin for CountedFilter {
    fn name(&self) -> &'static str {
        "CountedFilter"
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => filter)
    }
}
impl FilterPlugin for CountedFilter {
    fn filter(&self, _: &CycleState, _: &PodInfo, node: &NodeInfo) -> Status {
        COUNTED_FILTER_CALLS.fetch_add(1, Ordering::SeqCst);
        match node.name.ends_with('7') {
            true => Status::unschedulable("ends in 7"),
            false => Status::success(),
        }
    }
}

#[test]
fn filtering_stops_once_enough_nodes_fit() {
    // 250 nodes (one thread below 256), percentage 40 -> 100 feasible nodes wanted; one
    // node in ten is rejected, so the 100th fit is the 111th node looked at.
    let mut reg = registry();
    reg.register("CountedFilter", |_| Ok(Arc::new(CountedFilter)));
    let fw = Framework::new(&spec(&[(Filter, &["CountedFilter"])], &[]), &reg).unwrap();
    let snap = snapshot((0..250).map(|i| node(&format!("n{i:03}"), &[])).collect());
    let mut alg = SchedulingAlgorithm::new(40, 1);
    let mut state = CycleState::new();
    let r = alg
        .schedule_pod(
            &fw,
            &mut state,
            &Arc::new(pod("p")),
            &snap,
            &NominatedPods::new(),
        )
        .unwrap();
    assert_eq!(r.feasible_nodes, 100);
    assert_eq!(r.evaluated_nodes, 111);
    assert_eq!(COUNTED_FILTER_CALLS.load(Ordering::SeqCst), 111);
    assert_eq!(alg.next_start_node_index(), 111);
}

#[test]
fn reserve_failure_unreserves_and_reports() {
    let fw = Framework::new(&spec(&[(Reserve, &["Reserver"])], &[]), &registry()).unwrap();
    let snap = snapshot(vec![node("a", &[])]);
    let mut p = pod("p");
    p.labels.insert("noreserve".into(), String::new());
    let before = UNRESERVED.load(Ordering::SeqCst);
    let mut alg = SchedulingAlgorithm::new(0, 1);
    match schedule_one(&fw, &mut alg, &Arc::new(p), &snap, &NominatedPods::new()) {
        Decision::Unschedulable { message, .. } => assert_eq!(message, "reservation refused"),
        other => panic!("{other:?}"),
    }
    assert!(UNRESERVED.load(Ordering::SeqCst) > before);
}

#[test]
fn profile_registry_routes_by_scheduler_name() {
    let mut a = spec(&[(Filter, &["NeedsGpu"])], &[]);
    a.scheduler_name = DEFAULT_SCHEDULER_NAME.into();
    let mut b = spec(&[], &[]);
    b.scheduler_name = "bin-packing".into();
    let reg = ProfileRegistry::new(&[a, b], &registry()).unwrap();
    assert_eq!(
        reg.for_scheduler_name("").unwrap().profile_name(),
        "default-scheduler"
    );
    assert_eq!(
        reg.for_scheduler_name("default-scheduler")
            .unwrap()
            .profile_name(),
        "default-scheduler"
    );
    assert_eq!(
        reg.for_scheduler_name("bin-packing")
            .unwrap()
            .profile_name(),
        "bin-packing"
    );
    assert!(reg.for_scheduler_name("other-scheduler").is_none());
    assert!(!reg.handles("kube-scheduler"));
}

/// With metrics on, every cycle reports its extension points; plugins are timed on the
/// first cycle and then one in `PLUGIN_METRICS_SAMPLE_EVERY`. Off (the default), nothing.
#[test]
fn cycle_timings_cover_each_point_and_sample_plugins() {
    use crate::schedule_one::PLUGIN_METRICS_SAMPLE_EVERY;
    let fw = Framework::new(
        &spec(
            &[
                (Filter, &["NeedsGpu"]),
                (PreScore, &["LabelScore"]),
                (Score, &["LabelScore", "Tenth"]),
                (Reserve, &["Reserver"]),
            ],
            &[("LabelScore", 1), ("Tenth", 1)],
        ),
        &registry(),
    )
    .unwrap();
    let snap = snapshot(vec![
        node("cpu", &[("score", "10")]),
        node("gpu-1", &[("gpu", "x"), ("score", "40")]),
        node("gpu-2", &[("gpu", "x"), ("score", "30")]),
    ]);
    let p = Arc::new(pod("p"));
    let mut alg = SchedulingAlgorithm::new(0, 1);
    let _ = schedule_one(&fw, &mut alg, &p, &snap, &NominatedPods::new());
    assert_eq!(
        alg.take_cycle_timings(),
        CycleTimings::default(),
        "off by default"
    );

    alg.set_record_metrics(true);
    let _ = schedule_one(&fw, &mut alg, &p, &snap, &NominatedPods::new());
    let t = alg.take_cycle_timings();
    let points: Vec<(ExtensionPoint, Code)> = t.points.iter().map(|p| (p.point, p.code)).collect();
    assert_eq!(
        points,
        [
            (PreFilter, Code::Success),
            (Filter, Code::Success),
            (PreScore, Code::Success),
            (Score, Code::Success),
            (Reserve, Code::Success),
            (ExtensionPoint::Permit, Code::Success),
            (ExtensionPoint::PreBind, Code::Success),
        ]
    );
    let plugins: Vec<(&str, ExtensionPoint, Code, u64)> = t
        .plugins
        .iter()
        .map(|p| (p.plugin, p.point, p.code, p.calls))
        .collect();
    assert_eq!(
        plugins,
        [
            ("LabelScore", PreScore, Code::Success, 1),
            ("Reserver", Reserve, Code::Success, 1),
            ("NeedsGpu", Filter, Code::Success, 2),
            ("NeedsGpu", Filter, Code::Unschedulable, 1),
            ("LabelScore", Score, Code::Success, 2),
            ("Tenth", Score, Code::Success, 2),
        ]
    );
    // The next cycles are not sampled until the next one in PLUGIN_METRICS_SAMPLE_EVERY.
    for _ in 1..PLUGIN_METRICS_SAMPLE_EVERY {
        let _ = schedule_one(&fw, &mut alg, &p, &snap, &NominatedPods::new());
        let t = alg.take_cycle_timings();
        assert_eq!(t.points.len(), 7);
        assert!(t.plugins.is_empty());
    }
    // Sampled again, but Filter and Score only on one cycle in NODE_PLUGIN_METRICS_SAMPLE_EVERY.
    let _ = schedule_one(&fw, &mut alg, &p, &snap, &NominatedPods::new());
    let points: Vec<ExtensionPoint> = alg
        .take_cycle_timings()
        .plugins
        .iter()
        .map(|p| p.point)
        .collect();
    assert_eq!(points, [PreScore, Reserve]);
}
