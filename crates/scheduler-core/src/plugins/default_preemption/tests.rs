//! DefaultPreemption scenarios, modelled on upstream's `default_preemption_test.go` cases and
//! rewritten with ferrosched's builders. Resource fitting uses a small stand-in for
//! NodeResourcesFit (cpu, memory and pod count) so these tests do not depend on that plugin.

use std::collections::HashMap;
use std::sync::Arc;

use super::*;
use crate::cache::Snapshot;
use crate::config::ExpandedProfile;
use crate::framework::{
    Code, ExtensionPoint, FilterPlugin, NodeToStatus, NominatedPods, PreFilterPlugin,
    PreFilterResult, PreScorePlugin, Registry, ScorePlugin,
};
use crate::plugins::names;
use crate::schedule_one::{Decision, SchedulingAlgorithm, schedule_one};
use crate::types::{PdbInfo, PodKey};

// ---------------------------------------------------------------------------------------
// Fake plugins
// ---------------------------------------------------------------------------------------

/// Stand-in for NodeResourcesFit: pod count, cpu and memory, with upstream's reasons. It
/// implements every point the catalog lists so default profiles can use it.
pub(crate) struct FakeFit;

impl Plugin for FakeFit {
    fn name(&self) -> &'static str {
        names::NODE_RESOURCES_FIT
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => pre_filter, filter, pre_score, score)
    }
}

impl PreFilterPlugin for FakeFit {
    fn pre_filter(
        &self,
        _: &mut CycleState,
        _: &PodInfo,
        _: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        (None, Status::success())
    }
}

impl FilterPlugin for FakeFit {
    fn filter(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let mut reasons = Vec::new();
        if node.pods.len() as i64 + 1 > node.allocatable.allowed_pod_number {
            reasons.push("Too many pods".to_string());
        }
        let (want, free) = (&pod.requests, |a: i64, r: i64| a - r);
        if want.milli_cpu > 0
            && free(node.allocatable.milli_cpu, node.requested.milli_cpu) < want.milli_cpu
        {
            reasons.push("Insufficient cpu".to_string());
        }
        if want.memory > 0 && free(node.allocatable.memory, node.requested.memory) < want.memory {
            reasons.push("Insufficient memory".to_string());
        }
        if reasons.is_empty() {
            Status::success()
        } else {
            Status::with_reasons(Code::Unschedulable, reasons)
        }
    }
}

impl PreScorePlugin for FakeFit {
    fn pre_score(
        &self,
        _: &mut CycleState,
        _: &PodInfo,
        _: crate::framework::FeasibleNodes<'_>,
        _: &Snapshot,
    ) -> Status {
        Status::success()
    }
}

impl ScorePlugin for FakeFit {
    fn score(&self, _: &CycleState, _: &PodInfo, _: &NodeInfo) -> Result<i64, Status> {
        Ok(0)
    }
}

/// PreFilter whose AddPod/RemovePod fail on nodes labelled `error=true`.
struct ErrOnLabel;

impl Plugin for ErrOnLabel {
    fn name(&self) -> &'static str {
        "ErrOnLabel"
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => pre_filter)
    }
}

impl PreFilterPlugin for ErrOnLabel {
    fn pre_filter(
        &self,
        _: &mut CycleState,
        _: &PodInfo,
        _: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        (None, Status::success())
    }
    fn has_extensions(&self) -> bool {
        true
    }
    fn add_pod(
        &self,
        _: &mut CycleState,
        pod: &PodInfo,
        _: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        if node.labels.get("error").map(String::as_str) == Some("true") {
            return Status::error(format!("failed to add pod: {}", pod.name()));
        }
        Status::success()
    }
    fn remove_pod(
        &self,
        _: &mut CycleState,
        pod: &PodInfo,
        _: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        if node.labels.get("error").map(String::as_str) == Some("true") {
            return Status::error(format!("failed to remove pod: {}", pod.name()));
        }
        Status::success()
    }
}

/// Pods labelled `quiet` refuse nodes running a pod labelled `heavy`. The count lives only in
/// the cycle state, so preemption works only if it updates the state through RemovePod.
struct QuietNeighbours;

#[derive(Clone, Debug, Default)]
struct HeavyPods(HashMap<String, usize>);

impl Plugin for QuietNeighbours {
    fn name(&self) -> &'static str {
        "QuietNeighbours"
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => pre_filter, filter)
    }
}

fn is_heavy(p: &PodInfo) -> bool {
    p.labels.contains_key("heavy")
}

impl PreFilterPlugin for QuietNeighbours {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        _: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status) {
        let mut counts = HashMap::new();
        for n in snapshot.node_infos() {
            counts.insert(
                n.name.clone(),
                n.pods.iter().filter(|p| is_heavy(p)).count(),
            );
        }
        state.write(HeavyPods(counts));
        (None, Status::success())
    }
    fn has_extensions(&self) -> bool {
        true
    }
    fn add_pod(
        &self,
        state: &mut CycleState,
        _: &PodInfo,
        p: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        if is_heavy(p) {
            let s = state.read_mut::<HeavyPods>().expect("written in PreFilter");
            *s.0.entry(node.name.clone()).or_default() += 1;
        }
        Status::success()
    }
    fn remove_pod(
        &self,
        state: &mut CycleState,
        _: &PodInfo,
        p: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        if is_heavy(p) {
            let s = state.read_mut::<HeavyPods>().expect("written in PreFilter");
            *s.0.entry(node.name.clone()).or_default() -= 1;
        }
        Status::success()
    }
}

impl FilterPlugin for QuietNeighbours {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let heavy = state
            .read::<HeavyPods>()
            .and_then(|s| s.0.get(&node.name).copied())
            .unwrap_or(0);
        if pod.labels.contains_key("quiet") && heavy > 0 {
            Status::unschedulable("node(s) had a heavy neighbour")
        } else {
            Status::success()
        }
    }
}

pub(crate) fn registry() -> Registry {
    let mut r = Registry::in_tree();
    r.register(names::NODE_RESOURCES_FIT, |_| Ok(Arc::new(FakeFit)));
    r.register("ErrOnLabel", |_| Ok(Arc::new(ErrOnLabel)));
    r.register("QuietNeighbours", |_| Ok(Arc::new(QuietNeighbours)));
    r
}

// ---------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------

const HIGH: i32 = 1000;

fn framework(pre_filter: &[&str], filter: &[&str], args: DefaultPreemptionArgs) -> Framework {
    let mut s = ExpandedProfile {
        scheduler_name: "test".into(),
        ..ExpandedProfile::default()
    };
    let list = |v: &[&str]| v.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    s.points
        .insert(ExtensionPoint::QueueSort, list(&[names::PRIORITY_SORT]));
    s.points
        .insert(ExtensionPoint::Bind, list(&[names::DEFAULT_BINDER]));
    s.points.insert(ExtensionPoint::PreFilter, list(pre_filter));
    s.points.insert(ExtensionPoint::Filter, list(filter));
    s.points.insert(
        ExtensionPoint::PostFilter,
        list(&[names::DEFAULT_PREEMPTION]),
    );
    s.plugin_args.insert(
        names::DEFAULT_PREEMPTION.into(),
        Some(PluginArgs::DefaultPreemption(args)),
    );
    Framework::new(&s, &registry()).expect("test framework")
}

fn fit_framework() -> Framework {
    framework(
        &[names::NODE_RESOURCES_FIT],
        &[names::NODE_RESOURCES_FIT],
        DEFAULT_ARGS,
    )
}

fn plugin() -> DefaultPreemption {
    DefaultPreemption::new(DEFAULT_ARGS)
        .unwrap()
        .with_fixed_offset(0)
}

/// A node for one 1-cpu pod or several smaller ones.
fn node(name: &str) -> crate::types::NodeBuilder {
    NodeInfo::test(name).cpu("1").memory("1Gi").pods(10)
}

fn running(name: &str, node: &str, priority: i32, cpu: &str) -> crate::types::PodBuilder {
    PodInfo::test("default", name)
        .node(node)
        .priority(priority)
        .cpu(cpu)
}

fn pending(name: &str, priority: i32, cpu: &str) -> PodInfo {
    PodInfo::test("default", name)
        .priority(priority)
        .cpu(cpu)
        .build()
}

fn pdb(name: &str, app: &str, allowed: i32) -> PdbInfo {
    use k8s_openapi::api::policy::v1::{
        PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
    PdbInfo::from_pdb(&PodDisruptionBudget {
        metadata: meta::ObjectMeta {
            namespace: Some("default".into()),
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            selector: Some(meta::LabelSelector {
                match_labels: Some([("app".to_string(), app.to_string())].into()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        status: Some(PodDisruptionBudgetStatus {
            disruptions_allowed: Some(allowed),
            ..Default::default()
        }),
    })
}

/// Nodes with their pods placed by `spec.nodeName`.
fn cluster(nodes: Vec<crate::types::NodeBuilder>, pods: Vec<crate::types::PodBuilder>) -> Snapshot {
    let mut infos: Vec<NodeInfo> = nodes.into_iter().map(|b| b.build()).collect();
    for p in pods {
        let p = Arc::new(p.build());
        let n = p.node_name.clone().expect("running pods name their node");
        infos
            .iter_mut()
            .find(|i| i.name == n)
            .expect("pod on a known node")
            .add_pod(p);
    }
    Snapshot::from_node_infos(infos)
}

/// The statuses filtering would record, as `schedule_one` does.
fn filter_statuses(
    fw: &Framework,
    state: &CycleState,
    pod: &PodInfo,
    snap: &Snapshot,
    nominated: &NominatedPods,
) -> NodeToStatus {
    let mut out = NodeToStatus::new();
    for n in snap.node_infos() {
        let s = fw.run_filter_with_nominated_pods(state, pod, n, nominated.for_node(&n.name));
        assert!(
            !s.is_success(),
            "{} fits {} without preemption",
            pod.name(),
            n.name
        );
        out.set(n.name.clone(), s);
    }
    out
}

fn explicit(entries: &[(&str, Code)]) -> NodeToStatus {
    let mut out = NodeToStatus::new();
    for (n, c) in entries {
        out.set(*n, Status::with_reasons(*c, Vec::<String>::new()));
    }
    out
}

struct Run<'a> {
    fw: &'a Framework,
    snap: &'a Snapshot,
    nominated: NominatedPods,
    statuses: Option<NodeToStatus>,
}

impl<'a> Run<'a> {
    fn new(fw: &'a Framework, snap: &'a Snapshot) -> Self {
        Run {
            fw,
            snap,
            nominated: NominatedPods::new(),
            statuses: None,
        }
    }
    fn statuses(mut self, s: NodeToStatus) -> Self {
        self.statuses = Some(s);
        self
    }
    fn nominate(mut self, pod: PodInfo, node: &str) -> Self {
        self.nominated.add(Arc::new(pod), node);
        self
    }
    fn state(&self, pod: &PodInfo) -> CycleState {
        let mut state = CycleState::new();
        let (_, s, _) = self.fw.run_pre_filter(&mut state, pod, self.snap);
        assert!(s.is_success(), "{s}");
        state
    }
    fn post_filter(
        &self,
        pl: &DefaultPreemption,
        pod: &PodInfo,
    ) -> (Option<PostFilterResult>, Status) {
        let state = self.state(pod);
        let statuses = self
            .statuses
            .clone()
            .unwrap_or_else(|| filter_statuses(self.fw, &state, pod, self.snap, &self.nominated));
        let ctx = PostFilterContext {
            snapshot: self.snap,
            statuses: &statuses,
            nominated: &self.nominated,
            framework: self.fw,
            explain: None,
        };
        pl.post_filter(&state, pod, &ctx)
    }
    fn find_candidates(&self, pl: &DefaultPreemption, pod: &PodInfo) -> evaluator::DryRun {
        let state = self.state(pod);
        let statuses = self
            .statuses
            .clone()
            .unwrap_or_else(|| filter_statuses(self.fw, &state, pod, self.snap, &self.nominated));
        let ctx = PostFilterContext {
            snapshot: self.snap,
            statuses: &statuses,
            nominated: &self.nominated,
            framework: self.fw,
            explain: None,
        };
        pl.find_candidates(self.fw, &state, pod, &ctx)
    }
}

fn keys(names: &[&str]) -> Vec<PodKey> {
    names.iter().map(|n| PodKey::new("default", n)).collect()
}

fn nominated_to(node: &str, victims: &[&str]) -> PostFilterResult {
    PostFilterResult {
        nominated_node_name: Some(node.into()),
        victims: keys(victims),
        nominations_to_clear: Vec::new(),
    }
}

fn assert_unschedulable(got: (Option<PostFilterResult>, Status), msg: &str) {
    let (r, s) = got;
    assert_eq!(s.code(), Code::Unschedulable, "{s}");
    assert_eq!(s.message(), msg);
    assert_eq!(
        r,
        Some(PostFilterResult::default()),
        "the nomination is cleared"
    );
}

// ---------------------------------------------------------------------------------------
// Eligibility
// ---------------------------------------------------------------------------------------

#[test]
fn preemption_policy_never_is_not_eligible() {
    let fw = fit_framework();
    let snap = cluster(vec![node("n1")], vec![running("low", "n1", 0, "1")]);
    let pod = PodInfo::test("default", "p")
        .priority(HIGH)
        .cpu("500m")
        .preemption_never()
        .build();
    let (r, s) = Run::new(&fw, &snap).post_filter(&plugin(), &pod);
    assert_eq!(r, None, "an ineligible pod keeps its nomination");
    assert_eq!(s.code(), Code::Unschedulable);
    assert_eq!(
        s.message(),
        "preemption: not eligible due to preemptionPolicy=Never."
    );
}

#[test]
fn a_nominated_pod_waits_for_its_earlier_victims_to_terminate() {
    let fw = fit_framework();
    let snap = cluster(
        vec![node("n1")],
        vec![running("leaving", "n1", 0, "1").terminating_by_preemption()],
    );
    let pod = PodInfo::test("default", "p")
        .priority(HIGH)
        .cpu("500m")
        .nominated_node("n1")
        .build();
    let (r, s) = Run::new(&fw, &snap).post_filter(&plugin(), &pod);
    assert_eq!(r, None);
    assert_eq!(
        s.message(),
        "preemption: not eligible due to a terminating pod on the nominated node."
    );

    // Not nominated: it preempts again (the terminating pod is still a victim on paper).
    let fresh = pending("p", HIGH, "500m");
    let (r, s) = Run::new(&fw, &snap).post_filter(&plugin(), &fresh);
    assert!(s.is_success(), "{s}");
    assert_eq!(r, Some(nominated_to("n1", &["leaving"])));
}

#[test]
fn an_unresolvable_nominated_node_or_a_more_important_terminating_pod_does_not_block() {
    let fw = fit_framework();
    let snap = cluster(
        vec![node("n1"), node("n2")],
        vec![
            running("leaving", "n1", 0, "1").terminating_by_preemption(),
            running("low", "n2", 0, "1"),
        ],
    );
    let pod = PodInfo::test("default", "p")
        .priority(HIGH)
        .cpu("500m")
        .nominated_node("n1")
        .build();
    let statuses = explicit(&[
        ("n1", Code::UnschedulableAndUnresolvable),
        ("n2", Code::Unschedulable),
    ]);
    let (r, s) = Run::new(&fw, &snap)
        .statuses(statuses)
        .post_filter(&plugin(), &pod);
    assert!(s.is_success(), "{s}");
    assert_eq!(r, Some(nominated_to("n2", &["low"])));

    // A terminating pod that the preemptor could not have evicted does not count.
    let snap = cluster(
        vec![node("n1")],
        vec![running("vip", "n1", HIGH + 1, "1").terminating_by_preemption()],
    );
    assert_unschedulable(
        Run::new(&fw, &snap).post_filter(&plugin(), &pod),
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
    );
}

// ---------------------------------------------------------------------------------------
// Messages when preemption cannot help
// ---------------------------------------------------------------------------------------

#[test]
fn equal_priority_pods_are_not_victims() {
    let fw = fit_framework();
    let snap = cluster(vec![node("n1")], vec![running("peer", "n1", 5, "1")]);
    assert_unschedulable(
        Run::new(&fw, &snap).post_filter(&plugin(), &pending("p", 5, "500m")),
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
    );
}

#[test]
fn unresolvable_and_absent_nodes_are_never_candidates() {
    let fw = fit_framework();
    let snap = cluster(vec![node("n1")], vec![running("low", "n1", 0, "1")]);
    let pod = pending("p", HIGH, "500m");
    let not_helpful =
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.";
    assert_unschedulable(
        Run::new(&fw, &snap)
            .statuses(explicit(&[("n1", Code::UnschedulableAndUnresolvable)]))
            .post_filter(&plugin(), &pod),
        not_helpful,
    );
    // No status at all counts as unresolvable.
    assert_unschedulable(
        Run::new(&fw, &snap)
            .statuses(NodeToStatus::new())
            .post_filter(&plugin(), &pod),
        not_helpful,
    );
    // An absent status of Unschedulable (PreFilter rejected every node) does make them
    // candidates.
    let mut absent = NodeToStatus::new();
    absent.set_absent(Status::unschedulable("rejected by PreFilter"));
    let (r, s) = Run::new(&fw, &snap)
        .statuses(absent)
        .post_filter(&plugin(), &pod);
    assert!(s.is_success(), "{s}");
    assert_eq!(r, Some(nominated_to("n1", &["low"])));
}

#[test]
fn unresolvable_nodes_are_skipped_even_where_eviction_would_help() {
    let fw = fit_framework();
    let snap = cluster(
        vec![node("n1"), node("n2")],
        vec![
            running("cheap", "n1", 0, "1"),
            running("dear", "n2", 500, "1"),
        ],
    );
    let pod = pending("p", HIGH, "500m");
    let run = Run::new(&fw, &snap).statuses(explicit(&[
        ("n1", Code::UnschedulableAndUnresolvable),
        ("n2", Code::Unschedulable),
    ]));
    let dry = run.find_candidates(&plugin(), &pod);
    assert_eq!(dry.dry_runs, 1, "only n2 is dry-run");
    let (r, s) = run.post_filter(&plugin(), &pod);
    assert!(s.is_success(), "{s}");
    assert_eq!(r, Some(nominated_to("n2", &["dear"])));
}

#[test]
fn a_pod_too_big_even_for_an_emptied_node_reports_the_filter_reasons() {
    let fw = fit_framework();
    let snap = cluster(
        vec![node("n1"), node("n2")],
        vec![running("a", "n1", 0, "200m"), running("b", "n2", 0, "200m")],
    );
    assert_unschedulable(
        Run::new(&fw, &snap).post_filter(&plugin(), &pending("p", HIGH, "1500m")),
        "preemption: 0/2 nodes are available: 2 Insufficient cpu.",
    );
}

#[test]
fn mixed_reasons_are_counted_per_node() {
    let fw = fit_framework();
    let snap = cluster(
        vec![node("n1"), node("n2").cpu("500m"), node("n3")],
        vec![
            running("vip1", "n1", HIGH, "1"),
            running("low", "n2", 0, "100m"),
            running("vip3", "n3", HIGH, "1"),
        ],
    );
    assert_unschedulable(
        Run::new(&fw, &snap).post_filter(&plugin(), &pending("p", HIGH, "800m")),
        "preemption: 0/3 nodes are available: 1 Insufficient cpu, 2 No preemption victims found for incoming pod.",
    );

    // Two nodes too small, one explicitly unresolvable, one without a status.
    let snap = cluster(
        vec![
            node("n1").cpu("500m"),
            node("n2").cpu("500m"),
            node("n3").cpu("500m"),
            node("n4").cpu("500m"),
        ],
        vec![running("a", "n1", 0, "100m"), running("b", "n2", 0, "100m")],
    );
    let statuses = explicit(&[
        ("n1", Code::Unschedulable),
        ("n2", Code::Unschedulable),
        ("n4", Code::UnschedulableAndUnresolvable),
    ]);
    assert_unschedulable(
        Run::new(&fw, &snap)
            .statuses(statuses)
            .post_filter(&plugin(), &pending("p", HIGH, "800m")),
        "preemption: 0/4 nodes are available: 2 Insufficient cpu, 2 Preemption is not helpful for scheduling.",
    );
}

#[test]
fn plugin_errors_fail_preemption_only_when_no_node_works() {
    let fw = framework(
        &["ErrOnLabel", names::NODE_RESOURCES_FIT],
        &[names::NODE_RESOURCES_FIT],
        DEFAULT_ARGS,
    );
    let snap = cluster(
        vec![node("n1").label("error", "true")],
        vec![running("low", "n1", 0, "1")],
    );
    let (r, s) = Run::new(&fw, &snap).post_filter(&plugin(), &pending("p", HIGH, "500m"));
    assert_eq!(r, None);
    assert_eq!(s.code(), Code::Error);
    assert_eq!(
        s.message(),
        "preemption: running RemovePod on PreFilter plugin \"ErrOnLabel\": failed to remove pod: p"
    );

    let snap = cluster(
        vec![node("n1").label("error", "true"), node("n2")],
        vec![running("a", "n1", 0, "1"), running("b", "n2", 0, "1")],
    );
    let (r, s) = Run::new(&fw, &snap).post_filter(&plugin(), &pending("p", HIGH, "500m"));
    assert!(s.is_success(), "{s}");
    assert_eq!(r, Some(nominated_to("n2", &["b"])));
}

// ---------------------------------------------------------------------------------------
// Victims on one node
// ---------------------------------------------------------------------------------------

fn victims_on(
    fw: &Framework,
    snap: &Snapshot,
    pod: &PodInfo,
    node: &str,
    pdbs: &[Arc<PdbInfo>],
) -> Result<(Vec<String>, usize), Status> {
    let mut state = CycleState::new();
    let (_, s, _) = fw.run_pre_filter(&mut state, pod, snap);
    assert!(s.is_success());
    let original = snap.get(node).unwrap();
    let mut copy = Arc::new(NodeInfo::clone(original));
    let v = select_victims_on_node(
        fw,
        &mut state,
        pod,
        &mut copy,
        &[],
        pdbs,
        &super::DisruptionUnits::default(),
    )?;
    assert_eq!(
        original.pods.len(),
        snap.get(node).unwrap().pods.len(),
        "the snapshot's node is never touched"
    );
    Ok((
        v.pods.iter().map(|p| p.name().to_string()).collect(),
        v.num_pdb_violations,
    ))
}

#[test]
fn victims_are_reprieved_most_important_first() {
    let fw = fit_framework();
    // The preemptor needs 500m. Put back by importance: mid (20) fits, low (10) does not,
    // lowest (5) fits again. So the victim is `low`, though evicting `mid` plus `lowest`
    // would also have worked.
    let snap = cluster(
        vec![node("n1")],
        vec![
            running("low", "n1", 10, "500m"),
            running("mid", "n1", 20, "300m"),
            running("lowest", "n1", 5, "200m"),
            running("vip", "n1", HIGH + 1, "0"),
        ],
    );
    let pod = pending("p", HIGH, "500m");
    assert_eq!(
        victims_on(&fw, &snap, &pod, "n1", &[]).unwrap(),
        (vec!["low".to_string()], 0)
    );
}

#[test]
fn among_equal_priorities_the_older_pod_is_kept() {
    let fw = fit_framework();
    let snap = cluster(
        vec![node("n1")],
        vec![
            running("young", "n1", 10, "500m").start_time(2_000),
            running("old", "n1", 10, "500m").start_time(1_000),
        ],
    );
    assert_eq!(
        victims_on(&fw, &snap, &pending("p", HIGH, "500m"), "n1", &[]).unwrap(),
        (vec!["young".to_string()], 0)
    );
    // A pod that has not started yet counts as the youngest.
    let snap = cluster(
        vec![node("n1")],
        vec![
            running("unstarted", "n1", 10, "500m"),
            running("started", "n1", 10, "500m").start_time(5_000),
        ],
    );
    assert_eq!(
        victims_on(&fw, &snap, &pending("p", HIGH, "500m"), "n1", &[])
            .unwrap()
            .0,
        vec!["unstarted".to_string()]
    );
}

#[test]
fn budget_violating_pods_are_reprieved_first_and_counted_when_evicted() {
    let fw = fit_framework();
    let snap = cluster(
        vec![node("n1")],
        vec![
            running("guarded", "n1", 10, "500m").label("app", "guarded"),
            running("free", "n1", 20, "500m"),
        ],
    );
    let pod = pending("p", HIGH, "500m");
    // Without budgets the more important `free` stays and `guarded` goes.
    assert_eq!(
        victims_on(&fw, &snap, &pod, "n1", &[]).unwrap(),
        (vec!["guarded".to_string()], 0)
    );
    // With a budget that allows no disruption, `guarded` is put back first and stays.
    let budget = [Arc::new(pdb("guard", "guarded", 0))];
    assert_eq!(
        victims_on(&fw, &snap, &pod, "n1", &budget).unwrap(),
        (vec!["free".to_string()], 0)
    );
    // When both must go, the violation is counted and victims stay in importance order.
    let big = pending("p", HIGH, "1");
    assert_eq!(
        victims_on(&fw, &snap, &big, "n1", &budget).unwrap(),
        (vec!["free".to_string(), "guarded".to_string()], 1)
    );
}

#[test]
fn a_budget_is_spent_in_importance_order() {
    // One disruption allowed for two covered pods: the more important one spends it, the
    // other one violates. Both are evicted, so one violation counts.
    let fw = fit_framework();
    let snap = cluster(
        vec![node("n1")],
        vec![
            running("a", "n1", 20, "500m").label("app", "web"),
            running("b", "n1", 10, "500m").label("app", "web"),
        ],
    );
    let budget = [Arc::new(pdb("web", "web", 1))];
    let pod = pending("p", HIGH, "1");
    assert_eq!(
        victims_on(&fw, &snap, &pod, "n1", &budget).unwrap(),
        (vec!["a".to_string(), "b".to_string()], 1)
    );
    let (violating, rest) =
        filter_pods_with_pdb_violation(snap.get("n1").unwrap().pods.clone(), &budget);
    assert_eq!(violating.len(), 1);
    assert_eq!(rest.len(), 1);
}

#[test]
fn plugin_state_follows_removed_victims() {
    let fw = framework(
        &[names::NODE_RESOURCES_FIT, "QuietNeighbours"],
        &[names::NODE_RESOURCES_FIT, "QuietNeighbours"],
        DEFAULT_ARGS,
    );
    let snap = cluster(
        vec![node("n1"), node("n2")],
        vec![
            running("drummer", "n1", 0, "100m").label("heavy", ""),
            running("busy", "n1", 0, "100m"),
            running("vip-drummer", "n2", HIGH + 1, "100m").label("heavy", ""),
        ],
    );
    let pod = PodInfo::test("default", "p")
        .priority(HIGH)
        .cpu("100m")
        .label("quiet", "")
        .build();
    let (r, s) = Run::new(&fw, &snap).post_filter(&plugin(), &pod);
    assert!(s.is_success(), "{s}");
    // Only the heavy pod needs to go; `busy` is reprieved.
    assert_eq!(r, Some(nominated_to("n1", &["drummer"])));
}

// ---------------------------------------------------------------------------------------
// Choosing the node
// ---------------------------------------------------------------------------------------

fn victim(name: &str, priority: i32, start: Option<i64>) -> Arc<PodInfo> {
    let mut b = PodInfo::test("default", name).priority(priority);
    if let Some(t) = start {
        b = b.start_time(t);
    }
    Arc::new(b.build())
}

fn cand(node: &str, violations: usize, victims: Vec<Arc<PodInfo>>) -> Candidate {
    Candidate {
        node: node.into(),
        victims,
        num_pdb_violations: violations,
    }
}

fn pick(cands: Vec<Candidate>) -> String {
    evaluator::select_candidate(cands).node
}

#[test]
fn fewest_budget_violations_win_first() {
    assert_eq!(
        pick(vec![
            cand("a", 1, vec![victim("x", 1, None)]),
            cand("b", 0, vec![victim("y", 500, None), victim("z", 400, None)]),
        ]),
        "b"
    );
}

#[test]
fn then_the_lowest_highest_priority_victim() {
    assert_eq!(
        pick(vec![
            cand("a", 0, vec![victim("x", 30, None)]),
            cand("b", 0, vec![victim("y", 20, None), victim("z", 20, None)]),
        ]),
        "b"
    );
}

#[test]
fn then_the_smallest_priority_sum_with_negative_priorities_shifted() {
    assert_eq!(
        pick(vec![
            cand("a", 0, vec![victim("x", 10, None), victim("y", 10, None)]),
            cand("b", 0, vec![victim("z", 10, None), victim("w", 5, None)]),
        ]),
        "b"
    );
    // Unshifted, two victims at -10 would "sum" lower than one; shifted, one victim wins.
    assert_eq!(
        pick(vec![
            cand("a", 0, vec![victim("x", -10, None), victim("y", -10, None)]),
            cand("b", 0, vec![victim("z", -10, None)]),
        ]),
        "b"
    );
}

#[test]
fn then_the_fewest_victims() {
    // With priorities shifted, equal sums imply equal counts, so fewer victims already wins
    // on the sum; this pins the combined outcome.
    assert_eq!(
        pick(vec![
            cand("a", 0, vec![victim("x", 0, None), victim("y", 0, None)]),
            cand("b", 0, vec![victim("z", 0, None)]),
        ]),
        "b"
    );
}

#[test]
fn then_the_latest_start_among_the_highest_priority_victims() {
    assert_eq!(
        pick(vec![
            cand(
                "a",
                0,
                vec![victim("x", 10, Some(100)), victim("y", 5, Some(50))]
            ),
            cand(
                "b",
                0,
                vec![victim("z", 10, Some(200)), victim("w", 5, Some(10))]
            ),
        ]),
        "b",
        "only the priority-10 victims' start times count"
    );
    // A victim that never started counts as starting now: the latest.
    assert_eq!(
        pick(vec![
            cand("a", 0, vec![victim("x", 10, Some(100))]),
            cand("b", 0, vec![victim("y", 10, None)]),
        ]),
        "b"
    );
}

#[test]
fn a_complete_tie_goes_to_the_first_candidate() {
    let same = || vec![victim("x", 10, Some(100))];
    assert_eq!(
        pick(vec![
            cand("c", 0, same()),
            cand("a", 0, same()),
            cand("b", 0, same()),
        ]),
        "c"
    );
}

#[test]
fn the_node_with_the_lowest_priority_victims_is_nominated() {
    let fw = fit_framework();
    let snap = cluster(
        vec![node("n1"), node("n2")],
        vec![running("mid", "n1", 100, "1"), running("low", "n2", 0, "1")],
    );
    let (r, s) = Run::new(&fw, &snap).post_filter(&plugin(), &pending("p", 500, "500m"));
    assert!(s.is_success(), "{s}");
    assert_eq!(r, Some(nominated_to("n2", &["low"])));
}

#[test]
fn budget_protected_victims_are_avoided_when_another_node_works() {
    let fw = fit_framework();
    let pods = || {
        vec![
            running("guarded", "n1", 0, "1").label("app", "guarded"),
            running("plain", "n2", 50, "1"),
        ]
    };
    let pod = pending("p", HIGH, "500m");
    let snap = cluster(vec![node("n1"), node("n2")], pods());
    let (r, _) = Run::new(&fw, &snap).post_filter(&plugin(), &pod);
    assert_eq!(
        r,
        Some(nominated_to("n1", &["guarded"])),
        "lower priority wins without budgets"
    );

    let snap = cluster(vec![node("n1"), node("n2")], pods()).with_pdbs([pdb("g", "guarded", 0)]);
    let (r, s) = Run::new(&fw, &snap).post_filter(&plugin(), &pod);
    assert!(s.is_success(), "{s}");
    assert_eq!(r, Some(nominated_to("n2", &["plain"])));

    // With a disruption to spare the budget does not matter.
    let snap = cluster(vec![node("n1"), node("n2")], pods()).with_pdbs([pdb("g", "guarded", 1)]);
    let (r, _) = Run::new(&fw, &snap).post_filter(&plugin(), &pod);
    assert_eq!(r, Some(nominated_to("n1", &["guarded"])));
}

#[test]
fn nominated_pods_are_respected_and_lower_priority_ones_are_cleared() {
    let fw = fit_framework();
    let snap = cluster(
        vec![node("n1"), node("n2")],
        vec![running("a", "n1", 0, "500m"), running("b", "n2", 0, "500m")],
    );
    let pod = pending("p", 500, "600m");
    // A more important pod is already nominated to n1 with 500m: evicting `a` is not enough.
    let run = Run::new(&fw, &snap)
        .nominate(pending("vip", HIGH, "500m"), "n1")
        .nominate(pending("lesser", 100, "100m"), "n2")
        .nominate(pending("peer", 500, "100m"), "n2");
    let (r, s) = run.post_filter(&plugin(), &pod);
    assert!(s.is_success(), "{s}");
    let r = r.unwrap();
    assert_eq!(r.nominated_node_name.as_deref(), Some("n2"));
    assert_eq!(r.victims, keys(&["b"]));
    assert_eq!(
        r.nominations_to_clear,
        keys(&["lesser"]),
        "only strictly lower priority"
    );
}

// ---------------------------------------------------------------------------------------
// How many candidates
// ---------------------------------------------------------------------------------------

fn args(pct: i32, abs: i32) -> DefaultPreemptionArgs {
    DefaultPreemptionArgs {
        min_candidate_nodes_percentage: pct,
        min_candidate_nodes_absolute: abs,
    }
}

#[test]
fn number_of_candidates_follows_percentage_and_absolute_minimum() {
    let n = |pct, abs, nodes| {
        DefaultPreemption::new(args(pct, abs))
            .unwrap()
            .calculate_num_candidates(nodes)
    };
    assert_eq!(n(5, 0, 10), 0, "5% of 10 rounds down");
    assert_eq!(n(5, 1, 10), 1);
    assert_eq!(n(50, 0, 10), 5);
    assert_eq!(n(50, 10, 10), 10);
    assert_eq!(n(0, 100, 10), 10, "never more than the nodes");
    assert_eq!(n(10, 100, 5000), 500);
    assert_eq!(n(10, 100, 500), 100);
    assert!(DefaultPreemption::new(args(0, 0)).is_err());
    assert!(DefaultPreemption::new(args(101, 1)).is_err());
    assert!(DefaultPreemption::new(args(10, -1)).is_err());
}

#[test]
fn offsets_stay_in_range_and_depend_on_the_seed() {
    let a = DefaultPreemption::new(DEFAULT_ARGS).unwrap().with_seed(7);
    let b = DefaultPreemption::new(DEFAULT_ARGS).unwrap().with_seed(7);
    let seq = |p: &DefaultPreemption| {
        (0..50)
            .map(|_| p.offset_and_num_candidates(13).0)
            .collect::<Vec<_>>()
    };
    let (sa, sb) = (seq(&a), seq(&b));
    assert_eq!(sa, sb);
    assert!(sa.iter().all(|&o| o < 13));
    assert!(sa.iter().collect::<std::collections::BTreeSet<_>>().len() > 5);
    assert_eq!(plugin().offset_and_num_candidates(10).0, 0);
}

#[test]
fn the_search_starts_at_the_offset_and_stops_at_the_minimum() {
    let fw = fit_framework();
    let nodes = (0..10).map(|i| node(&format!("n{i}"))).collect();
    let pods = (0..10)
        .map(|i| running(&format!("p{i}"), &format!("n{i}"), 0, "1"))
        .collect();
    let snap = cluster(nodes, pods);
    let pl = DefaultPreemption::new(args(0, 2))
        .unwrap()
        .with_fixed_offset(3);
    let dry = Run::new(&fw, &snap).find_candidates(&pl, &pending("p", HIGH, "500m"));
    let found: Vec<&str> = dry.candidates.iter().map(|c| c.node.as_str()).collect();
    assert_eq!(found, ["n3", "n4"]);
    // Every potential node may be evaluated in the same parallel batch, but never more.
    assert!(dry.dry_runs <= 10);

    // Wrapping around the end of the list.
    let pl = DefaultPreemption::new(args(0, 3))
        .unwrap()
        .with_fixed_offset(8);
    let dry = Run::new(&fw, &snap).find_candidates(&pl, &pending("p", HIGH, "500m"));
    let found: Vec<&str> = dry.candidates.iter().map(|c| c.node.as_str()).collect();
    assert_eq!(found, ["n8", "n9", "n0"]);
}

#[test]
fn the_search_goes_on_until_a_budget_respecting_candidate_is_found() {
    let fw = fit_framework();
    let nodes = (0..6).map(|i| node(&format!("n{i}"))).collect();
    let pods = (0..6)
        .map(|i| {
            let p = running(&format!("p{i}"), &format!("n{i}"), 0, "1");
            if i < 3 { p.label("app", "guarded") } else { p }
        })
        .collect();
    let snap = cluster(nodes, pods).with_pdbs([pdb("g", "guarded", 0)]);
    let pl = DefaultPreemption::new(args(0, 2))
        .unwrap()
        .with_fixed_offset(0);
    let dry = Run::new(&fw, &snap).find_candidates(&pl, &pending("p", HIGH, "500m"));
    let found: Vec<(&str, usize)> = dry
        .candidates
        .iter()
        .map(|c| (c.node.as_str(), c.num_pdb_violations))
        .collect();
    // n0..n2 violate (only two kept), n3 respects budgets and ends the search; respecting
    // candidates come first.
    assert_eq!(found, [("n3", 0), ("n0", 1), ("n1", 1)]);
    let (r, _) = Run::new(&fw, &snap).post_filter(&pl, &pending("p", HIGH, "500m"));
    assert_eq!(r, Some(nominated_to("n3", &["p3"])));
}

#[test]
fn five_thousand_nodes_dry_run_only_what_is_needed() {
    let fw = fit_framework();
    // Even nodes hold only a more important pod (nothing to evict, never copied); odd nodes
    // hold one evictable pod each.
    let n = 5000;
    let nodes = (0..n).map(|i| node(&format!("n{i:04}"))).collect();
    let pods = (0..n)
        .map(|i| {
            let prio = if i % 2 == 0 { HIGH + 1 } else { i % 7 };
            running(&format!("p{i:04}"), &format!("n{i:04}"), prio, "1")
        })
        .collect();
    let snap = cluster(nodes, pods);
    let pod = pending("p", HIGH, "500m");
    let pl = plugin();
    let start = std::time::Instant::now();
    let dry = Run::new(&fw, &snap).find_candidates(&pl, &pod);
    let elapsed = start.elapsed();
    // 10% of 5000 = 500 candidates; reaching them takes ~1000 nodes, half of them copied.
    assert_eq!(dry.candidates.len(), 500);
    let slack = rayon::current_num_threads() * 4;
    assert!(
        dry.dry_runs <= 500 + slack,
        "{} nodes were copied and dry-run",
        dry.dry_runs
    );
    let (r, s) = Run::new(&fw, &snap).post_filter(&pl, &pod);
    assert!(s.is_success(), "{s}");
    let r = r.unwrap();
    assert_eq!(r.victims.len(), 1);
    eprintln!("dry run over 5000 nodes: {elapsed:?}");
}

// ---------------------------------------------------------------------------------------
// The full cycle
// ---------------------------------------------------------------------------------------

/// The scheduler model's seed scenario: three full nodes; one needs two evictions, one needs
/// only its cheapest pod gone, one holds only more important pods.
fn seed_cluster() -> Snapshot {
    cluster(
        vec![
            node("n1").cpu("2"),
            node("n2").cpu("2"),
            node("n3").cpu("2"),
        ],
        vec![
            running("batch-1", "n1", 10, "1"),
            running("batch-2", "n1", 10, "1"),
            running("scratch", "n2", 5, "1500m"),
            running("svc", "n2", 2000, "500m"),
            running("db", "n3", 2000, "2"),
        ],
    )
}

#[test]
fn seed_scenario_preempts_the_cheapest_set_on_exactly_one_node() {
    let fw = fit_framework();
    let snap = seed_cluster();
    let pod = Arc::new(pending("urgent", HIGH, "1500m"));
    let mut alg = SchedulingAlgorithm::new(0, 1);
    match schedule_one(&fw, &mut alg, &pod, &snap, &NominatedPods::new()) {
        Decision::Unschedulable {
            message,
            nomination,
            resolvable,
            ..
        } => {
            assert_eq!(message, "0/3 nodes are available: 3 Insufficient cpu.");
            assert!(resolvable);
            assert_eq!(nomination, Some(nominated_to("n2", &["scratch"])));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_failed_preemption_is_appended_to_the_fit_error() {
    let fw = fit_framework();
    let snap = seed_cluster();
    let pod = Arc::new(pending("huge", HIGH, "3"));
    let mut alg = SchedulingAlgorithm::new(0, 1);
    match schedule_one(&fw, &mut alg, &pod, &snap, &NominatedPods::new()) {
        Decision::Unschedulable {
            message,
            nomination,
            ..
        } => {
            assert_eq!(
                message,
                "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Insufficient cpu.."
            );
            assert_eq!(nomination, Some(PostFilterResult::default()));
        }
        other => panic!("{other:?}"),
    }
}
