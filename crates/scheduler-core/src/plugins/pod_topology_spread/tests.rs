//! PodTopologySpread's unit tests, after upstream's filtering and scoring test tables.

use super::filtering::{CriticalPaths, PreFilterState};
use super::scoring::PreScoreState;
use super::*;
use crate::cache::WorkloadSelectors;
use crate::cache::workload_selectors::service_entry;
use crate::framework::{
    Code, CycleState, FilterPlugin, NodeScore, PreFilterPlugin, PreScorePlugin, ScorePlugin, Status,
};
use crate::plugins::catalog;
use crate::types::{NodeInfo, PodBuilder, TaintEffect};
use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use rustc_hash::{FxHashMap, FxHashSet};

const NS: &str = "default";
const HOST: &str = LABEL_HOSTNAME;

/// `labelSelector` requiring `key` to exist (upstream tests' fooSelector/barSelector).
fn exists(key: &str) -> Option<meta::LabelSelector> {
    Some(meta::LabelSelector {
        match_expressions: Some(vec![meta::LabelSelectorRequirement {
            key: key.into(),
            operator: "Exists".into(),
            values: None,
        }]),
        ..Default::default()
    })
}

fn tsc(
    max_skew: i32,
    key: &str,
    when: &str,
    selector: Option<meta::LabelSelector>,
) -> k8s::TopologySpreadConstraint {
    k8s::TopologySpreadConstraint {
        max_skew,
        topology_key: key.into(),
        when_unsatisfiable: when.into(),
        label_selector: selector,
        ..Default::default()
    }
}

fn soft(max_skew: i32, key: &str, selector: &str) -> k8s::TopologySpreadConstraint {
    tsc(max_skew, key, "ScheduleAnyway", exists(selector))
}

fn hard(max_skew: i32, key: &str, selector: &str) -> k8s::TopologySpreadConstraint {
    tsc(max_skew, key, "DoNotSchedule", exists(selector))
}

trait WithSpread {
    fn spread(self, c: k8s::TopologySpreadConstraint) -> Self;
}

impl WithSpread for PodBuilder {
    fn spread(self, c: k8s::TopologySpreadConstraint) -> Self {
        self.edit(|p| {
            p.spec
                .as_mut()
                .unwrap()
                .topology_spread_constraints
                .get_or_insert_with(Vec::new)
                .push(c)
        })
    }
}

fn incoming() -> PodBuilder {
    PodInfo::test(NS, "p").label("foo", "")
}

/// A node named `name` with `labels`; `pods` are (name, labels) of pods bound there.
fn node(name: &str, labels: &[(&str, &str)]) -> NodeInfo {
    let mut b = NodeInfo::test(name);
    for (k, v) in labels {
        b = b.label(k, v);
    }
    b.build()
}

fn host(name: &str) -> NodeInfo {
    node(name, &[(HOST, name)])
}

fn zoned(name: &str, zone: &str) -> NodeInfo {
    node(name, &[("zone", zone), (HOST, name)])
}

fn with_pods(mut n: NodeInfo, pods: &[&[&str]]) -> NodeInfo {
    for (i, labels) in pods.iter().enumerate() {
        let mut b = PodInfo::test(NS, &format!("{}-{i}", n.name)).node(&n.name);
        for l in *labels {
            b = b.label(l, "");
        }
        n.add_pod(Arc::new(b.build()));
    }
    n
}

/// `n` pods labelled `foo` on the node.
fn foo_pods(n: NodeInfo, count: usize) -> NodeInfo {
    with_pods(n, &vec![&["foo"][..]; count])
}

fn plugin(args: Option<PodTopologySpreadArgs>) -> PodTopologySpread {
    PodTopologySpread::new(&args.unwrap_or(PodTopologySpreadArgs {
        default_constraints: Vec::new(),
        defaulting_type: PodTopologySpreadConstraintsDefaulting::System,
    }))
}

fn list_args(constraints: Vec<k8s::TopologySpreadConstraint>) -> PodTopologySpreadArgs {
    PodTopologySpreadArgs {
        default_constraints: constraints,
        defaulting_type: PodTopologySpreadConstraintsDefaulting::List,
    }
}

/// PreScore over `feasible` (names in the snapshot), then Score and NormalizeScore.
fn scores(
    pl: &PodTopologySpread,
    pod: &PodInfo,
    snap: &Snapshot,
    feasible: &[&str],
) -> Vec<(String, i64)> {
    let nodes: Vec<Arc<NodeInfo>> = feasible
        .iter()
        .map(|n| Arc::clone(snap.get(n).unwrap()))
        .collect();
    let mut state = CycleState::new();
    let s = pl.pre_score(&mut state, pod, (&nodes).into(), snap);
    assert!(s.is_success(), "{s}");
    let mut out: Vec<NodeScore> = nodes
        .iter()
        .map(|n| NodeScore {
            name: &n.name,
            score: pl.score(&state, pod, n).unwrap(),
        })
        .collect();
    assert!(pl.normalize_scores(&state, pod, &mut out).is_success());
    out.into_iter()
        .map(|s| (s.name.to_string(), s.score))
        .collect()
}

fn want(v: &[(&str, i64)]) -> Vec<(String, i64)> {
    v.iter().map(|(n, s)| (n.to_string(), *s)).collect()
}

fn all_names(snap: &Snapshot) -> Vec<String> {
    snap.node_infos().iter().map(|n| n.name.clone()).collect()
}

fn score_all(pl: &PodTopologySpread, pod: &PodInfo, snap: &Snapshot) -> Vec<(String, i64)> {
    let names = all_names(snap);
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    scores(pl, pod, snap, &refs)
}

#[test]
fn points_match_the_catalog() {
    let pl: Arc<dyn Plugin> = PodTopologySpread::factory(None).unwrap();
    let spec = catalog::lookup(pl.name()).unwrap();
    assert_eq!(Arc::clone(&pl).points().implemented(), spec.points);
    let wrong = PluginArgs::NodeAffinity(Default::default());
    assert!(
        PodTopologySpread::factory(Some(&wrong))
            .err()
            .unwrap()
            .contains("PodTopologySpreadArgs")
    );
}

// ---- scoring, upstream's TestPodTopologySpreadScore scenarios ----

#[test]
fn score_hostname_no_existing_pods_all_max() {
    let pod = incoming().spread(soft(1, HOST, "foo")).build();
    let snap = Snapshot::from_node_infos([host("a"), host("b")]);
    assert_eq!(
        score_all(&plugin(None), &pod, &snap),
        want(&[("a", 100), ("b", 100)])
    );
}

#[test]
fn score_single_candidate_is_max() {
    let pod = incoming().spread(soft(1, HOST, "foo")).build();
    let snap = Snapshot::from_node_infos([foo_pods(host("a"), 2), foo_pods(host("b"), 1)]);
    assert_eq!(
        scores(&plugin(None), &pod, &snap, &["a"]),
        want(&[("a", 100)])
    );
}

#[test]
fn score_hostname_equal_counts_all_max() {
    let pod = incoming().spread(soft(1, HOST, "foo")).build();
    let snap = Snapshot::from_node_infos([foo_pods(host("a"), 1), foo_pods(host("b"), 1)]);
    assert_eq!(
        score_all(&plugin(None), &pod, &snap),
        want(&[("a", 100), ("b", 100)])
    );
}

fn spread_2_1_0_3() -> Snapshot {
    Snapshot::from_node_infos([
        foo_pods(host("a"), 2),
        foo_pods(host("b"), 1),
        host("c"),
        foo_pods(host("d"), 3),
    ])
}

#[test]
fn score_hostname_four_candidates_max_skew_1_and_2() {
    let snap = spread_2_1_0_3();
    let pod = incoming().spread(soft(1, HOST, "foo")).build();
    assert_eq!(
        score_all(&plugin(None), &pod, &snap),
        want(&[("a", 20), ("b", 60), ("c", 100), ("d", 0)])
    );
    let pod = incoming().spread(soft(2, HOST, "foo")).build();
    assert_eq!(
        score_all(&plugin(None), &pod, &snap),
        want(&[("a", 33), ("b", 66), ("c", 100), ("d", 16)])
    );
}

#[test]
fn score_null_selector_counts_nothing() {
    let pod = incoming()
        .spread(tsc(1, HOST, "ScheduleAnyway", None))
        .build();
    assert_eq!(
        score_all(&plugin(None), &pod, &spread_2_1_0_3()),
        want(&[("a", 100), ("b", 100), ("c", 100), ("d", 100)])
    );
}

fn spread_4_3_2_1() -> Vec<NodeInfo> {
    vec![
        foo_pods(host("a"), 4),
        foo_pods(host("b"), 3),
        foo_pods(host("c"), 2),
        foo_pods(host("d"), 1),
    ]
}

#[test]
fn score_hostname_max_skew_3() {
    let pod = incoming().spread(soft(3, HOST, "foo")).build();
    let snap = Snapshot::from_node_infos(spread_4_3_2_1());
    assert_eq!(
        score_all(&plugin(None), &pod, &snap),
        want(&[("a", 44), ("b", 66), ("c", 77), ("d", 100)])
    );
}

#[test]
fn score_system_defaults_use_service_selector_and_tolerate_missing_zone() {
    // No zone labels anywhere: the system defaults still spread over hostnames.
    let pod = incoming().build();
    let svc = k8s::Service {
        metadata: meta::ObjectMeta {
            namespace: Some(NS.into()),
            name: Some("svc".into()),
            ..Default::default()
        },
        spec: Some(k8s::ServiceSpec {
            selector: Some([("foo".to_string(), String::new())].into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let snap = Snapshot::from_node_infos(spread_4_3_2_1())
        .with_workload_selectors(WorkloadSelectors::new().with(service_entry(&svc)));
    assert_eq!(
        score_all(&plugin(None), &pod, &snap),
        want(&[("a", 44), ("b", 66), ("c", 77), ("d", 100)])
    );
    // Without a Service or controller selecting the pod there is nothing to spread.
    let bare = Snapshot::from_node_infos(spread_4_3_2_1());
    let mut state = CycleState::new();
    let nodes = bare.node_infos().to_vec();
    assert!(
        plugin(None)
            .pre_score(&mut state, &pod, (&nodes).into(), &bare)
            .is_skip()
    );
}

/// 4/2/1 on candidates a, b, x and 3 on y, which failed filtering.
fn spread_4_2_1_and_3_filtered(b: NodeInfo) -> Snapshot {
    Snapshot::from_node_infos([
        foo_pods(host("a"), 4),
        foo_pods(b, 2),
        foo_pods(host("x"), 1),
        foo_pods(host("y"), 3),
    ])
}

#[test]
fn score_hostname_three_of_four_candidates() {
    let pod = incoming().spread(soft(1, HOST, "foo")).build();
    let snap = spread_4_2_1_and_3_filtered(host("b"));
    assert_eq!(
        scores(&plugin(None), &pod, &snap, &["a", "b", "x"]),
        want(&[("a", 33), ("b", 83), ("x", 100)])
    );
}

#[test]
fn score_node_missing_topology_key_is_ignored_and_scores_zero() {
    let pod = incoming().spread(soft(1, HOST, "foo")).build();
    let snap = spread_4_2_1_and_3_filtered(node("b", &[("n", "b")]));
    assert_eq!(
        scores(&plugin(None), &pod, &snap, &["a", "b", "x"]),
        want(&[("a", 16), ("b", 0), ("x", 100)])
    );
}

#[test]
fn score_zone_three_of_four_candidates() {
    let pod = incoming().spread(soft(1, "zone", "foo")).build();
    let snap = Snapshot::from_node_infos([
        foo_pods(zoned("a", "zone1"), 4),
        foo_pods(zoned("b", "zone1"), 2),
        foo_pods(zoned("x", "zone2"), 1),
        foo_pods(zoned("y", "zone2"), 3),
    ]);
    assert_eq!(
        scores(&plugin(None), &pod, &snap, &["a", "b", "x"]),
        want(&[("a", 75), ("b", 75), ("x", 100)])
    );
}

#[test]
fn score_zone_and_hostname_two_of_four_candidates() {
    let pod = incoming()
        .spread(soft(1, "zone", "foo"))
        .spread(soft(1, HOST, "foo"))
        .build();
    let snap = Snapshot::from_node_infos([
        foo_pods(zoned("a", "zone1"), 2),
        foo_pods(zoned("b", "zone1"), 1),
        foo_pods(zoned("x", "zone2"), 2),
        foo_pods(zoned("y", "zone2"), 4),
    ]);
    assert_eq!(
        scores(&plugin(None), &pod, &snap, &["a", "x"]),
        want(&[("a", 100), ("x", 63)])
    );
}

#[test]
fn score_two_zone_constraints_with_different_selectors() {
    let pod = incoming()
        .label("bar", "")
        .spread(soft(1, "zone", "foo"))
        .spread(soft(1, "zone", "bar"))
        .build();
    let z = |n: &str, zone: &str| node(n, &[("zone", zone)]);
    let snap = Snapshot::from_node_infos([
        with_pods(z("a", "zone1"), &[&["foo", "bar"], &["foo"]]),
        with_pods(z("b", "zone1"), &[&["foo", "bar"]]),
        z("x", "zone2"),
        with_pods(z("y", "zone2"), &[&["foo"], &["foo", "bar"], &["foo"]]),
    ]);
    assert_eq!(
        scores(&plugin(None), &pod, &snap, &["a", "x"]),
        want(&[("a", 85), ("x", 100)])
    );
}

fn zone_and_host_different_selectors(pods: [&[&[&str]]; 4]) -> Snapshot {
    let [a, b, x, y] = pods;
    Snapshot::from_node_infos([
        with_pods(zoned("a", "zone1"), a),
        with_pods(zoned("b", "zone1"), b),
        with_pods(zoned("x", "zone2"), x),
        with_pods(zoned("y", "zone2"), y),
    ])
}

#[test]
fn score_zone_and_hostname_with_different_selectors() {
    let pod = incoming()
        .label("bar", "")
        .spread(soft(1, "zone", "foo"))
        .spread(soft(1, HOST, "bar"))
        .build();
    let pl = plugin(None);
    let snap = zone_and_host_different_selectors([
        &[&["foo"]],
        &[&["foo", "bar"]],
        &[],
        &[&["foo"], &["bar"]],
    ]);
    assert_eq!(
        score_all(&pl, &pod, &snap),
        want(&[("a", 60), ("b", 20), ("x", 100), ("y", 60)])
    );
    assert_eq!(
        scores(&pl, &pod, &snap, &["a", "b", "x"]),
        want(&[("a", 50), ("b", 25), ("x", 100)])
    );
    let snap =
        zone_and_host_different_selectors([&[], &[&["bar"]], &[&["foo"]], &[&["foo", "bar"]]]);
    assert_eq!(
        score_all(&pl, &pod, &snap),
        want(&[("a", 100), ("b", 60), ("x", 40), ("y", 0)])
    );
}

#[test]
fn score_ignores_other_namespaces_and_terminating_pods() {
    let pod = incoming().spread(soft(1, HOST, "foo")).build();
    let mut a = foo_pods(host("a"), 1);
    a.add_pod(Arc::new(
        PodInfo::test("ns1", "other")
            .node("a")
            .label("foo", "")
            .build(),
    ));
    let snap = Snapshot::from_node_infos([a, foo_pods(host("b"), 2)]);
    assert_eq!(
        score_all(&plugin(None), &pod, &snap),
        want(&[("a", 100), ("b", 33)])
    );
    let mut a = host("a");
    a.add_pod(Arc::new(
        PodInfo::test(NS, "dying")
            .node("a")
            .label("foo", "")
            .edit(|p| {
                p.metadata.deletion_timestamp = Some(meta::Time(Default::default()));
            })
            .build(),
    ));
    let snap = Snapshot::from_node_infos([a, foo_pods(host("b"), 1)]);
    assert_eq!(
        score_all(&plugin(None), &pod, &snap),
        want(&[("a", 100), ("b", 0)])
    );
}

#[test]
fn pre_score_skips_without_soft_constraints_or_nodes() {
    let pl = plugin(None);
    let pod = incoming().spread(hard(1, "zone", "foo")).build();
    let snap = Snapshot::from_node_infos([zoned("a", "z1")]);
    let nodes = snap.node_infos().to_vec();
    assert!(
        pl.pre_score(&mut CycleState::new(), &pod, (&nodes).into(), &snap)
            .is_skip()
    );
    let soft_pod = incoming().spread(soft(1, "zone", "foo")).build();
    let empty = Snapshot::from_node_infos([]);
    assert!(
        pl.pre_score(
            &mut CycleState::new(),
            &soft_pod,
            Default::default(),
            &empty
        )
        .is_skip()
    );
}

#[test]
fn pre_score_state_weights_domains_of_feasible_nodes() {
    // Zone nodes a, b (zone1) and x (zone2) are feasible; weights are ln(domains + 2).
    let pod = incoming()
        .spread(soft(1, "zone", "foo"))
        .spread(soft(1, HOST, "foo"))
        .build();
    let snap = Snapshot::from_node_infos([
        foo_pods(zoned("a", "zone1"), 1),
        zoned("b", "zone1"),
        zoned("x", "zone2"),
        foo_pods(zoned("y", "zone3"), 5),
        foo_pods(node("nozone", &[(HOST, "nozone")]), 2),
    ]);
    let nodes: Vec<Arc<NodeInfo>> = ["a", "b", "x", "nozone"]
        .iter()
        .map(|n| Arc::clone(snap.get(n).unwrap()))
        .collect();
    let mut state = CycleState::new();
    assert!(
        plugin(None)
            .pre_score(&mut state, &pod, (&nodes).into(), &snap)
            .is_success()
    );
    let s = &state.read::<PreScoreState>().unwrap().0;
    assert_eq!(s.ignored, FxHashSet::from_iter(["nozone".to_string()]));
    assert_eq!(
        s.counts[0],
        FxHashMap::from_iter([("zone1".to_string(), 1), ("zone2".to_string(), 0)]),
        "zone3 has no feasible node"
    );
    assert!(s.counts[1].is_empty(), "hostname counts are taken in Score");
    assert_eq!(s.weights, vec![4f64.ln(), 5f64.ln()]);
}

#[test]
fn pre_score_honours_node_inclusion_policies() {
    let taint = |n: NodeInfo| {
        let mut n = n;
        n.taints = vec![crate::types::Taint::new("t", "", TaintEffect::NoSchedule)].into();
        n
    };
    let snap = Snapshot::from_node_infos([
        foo_pods(node("a", &[("zone", "zone1"), ("foo", "")]), 1),
        foo_pods(node("b", &[("zone", "zone1"), ("foo", "")]), 1),
        foo_pods(taint(node("x", &[("zone", "zone2")])), 3),
    ]);
    let count_in = |pod: &PodInfo| {
        let mut state = CycleState::new();
        let nodes = snap.node_infos().to_vec();
        assert!(
            plugin(None)
                .pre_score(&mut state, pod, (&nodes).into(), &snap)
                .is_success()
        );
        state.read::<PreScoreState>().unwrap().0.counts[0].clone()
    };
    let counts = |z1: i64, z2: i64| {
        FxHashMap::from_iter([("zone1".to_string(), z1), ("zone2".to_string(), z2)])
    };
    let mut c = soft(1, "zone", "foo");
    assert_eq!(
        count_in(&incoming().spread(c.clone()).build()),
        counts(2, 3)
    );
    // Honor (default) node affinity: x does not match the pod's nodeSelector.
    let selective = || incoming().node_selector("foo", "");
    assert_eq!(
        count_in(&selective().spread(c.clone()).build()),
        counts(2, 0)
    );
    c.node_affinity_policy = Some("Ignore".into());
    assert_eq!(
        count_in(&selective().spread(c.clone()).build()),
        counts(2, 3)
    );
    // Honor taints: x's NoSchedule taint is not tolerated.
    c.node_taints_policy = Some("Honor".into());
    assert_eq!(
        count_in(&incoming().spread(c.clone()).build()),
        counts(2, 0)
    );
    let tolerant = incoming().toleration("t", "Exists", "", "NoSchedule");
    assert_eq!(count_in(&tolerant.spread(c).build()), counts(2, 3));
}

// ---- filtering ----

/// A node's name and `None` when it fits, else the rejection's code and message.
type NodeVerdict = (String, Option<(Code, String)>);

/// Runs PreFilter then Filter on every node; returns the PreFilter status and, per node,
/// `None` for a fit or the rejection's code and message.
fn filter_all(
    pl: &PodTopologySpread,
    pod: &PodInfo,
    snap: &Snapshot,
) -> (Status, Vec<NodeVerdict>) {
    let mut state = CycleState::new();
    let (result, s) = pl.pre_filter(&mut state, pod, snap);
    assert!(result.is_none());
    if !s.is_success() {
        return (s, Vec::new());
    }
    let out = snap
        .node_infos()
        .iter()
        .map(|n| {
            let st = pl.filter(&state, pod, n);
            let v = (!st.is_success()).then(|| (st.code(), st.message()));
            (n.name.clone(), v)
        })
        .collect();
    (s, out)
}

/// Node names that pass.
fn fits(pl: &PodTopologySpread, pod: &PodInfo, snap: &Snapshot) -> Vec<String> {
    let (s, per_node) = filter_all(pl, pod, snap);
    assert!(s.is_success(), "{s}");
    per_node
        .into_iter()
        .filter(|(_, v)| v.is_none())
        .map(|(n, _)| n)
        .collect()
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// zone1 = {a, b}, zone2 = {x, y}, with `foo` pods per node.
fn zones(a: usize, b: usize, x: usize, y: usize) -> Vec<NodeInfo> {
    vec![
        foo_pods(zoned("a", "zone1"), a),
        foo_pods(zoned("b", "zone1"), b),
        foo_pods(zoned("x", "zone2"), x),
        foo_pods(zoned("y", "zone2"), y),
    ]
}

#[test]
fn filter_no_existing_pods_all_fit_whether_or_not_the_pod_matches() {
    let pl = plugin(None);
    let snap = Snapshot::from_node_infos(zones(0, 0, 0, 0));
    let pod = incoming().spread(hard(1, "zone", "foo")).build();
    assert_eq!(fits(&pl, &pod, &snap), names(&["a", "b", "x", "y"]));
    let other = incoming().spread(hard(1, "zone", "bar")).build();
    assert_eq!(fits(&pl, &other, &snap), names(&["a", "b", "x", "y"]));
}

#[test]
fn filter_zone_skew_rejects_the_fuller_zone_with_upstreams_reason() {
    let pl = plugin(None);
    let pod = incoming().spread(hard(1, "zone", "foo")).build();
    // zone1: 1, zone2: 2 -> only zone1 keeps the skew within 1.
    let snap = Snapshot::from_node_infos(zones(1, 0, 1, 1));
    let (_, per_node) = filter_all(&pl, &pod, &snap);
    assert_eq!(per_node[0], ("a".to_string(), None));
    assert_eq!(
        per_node[2].1,
        Some((
            Code::Unschedulable,
            ERR_REASON_CONSTRAINTS_NOT_MATCH.to_string()
        ))
    );
    assert_eq!(fits(&pl, &pod, &snap), names(&["a", "b"]));
    // maxSkew 2 tolerates it.
    let pod = incoming().spread(hard(2, "zone", "foo")).build();
    assert_eq!(fits(&pl, &pod, &snap), names(&["a", "b", "x", "y"]));
    // A pod that does not match its own selector does not add itself.
    let pod = PodInfo::test(NS, "p")
        .spread(hard(1, "zone", "foo"))
        .build();
    assert_eq!(fits(&pl, &pod, &snap), names(&["a", "b", "x", "y"]));
}

#[test]
fn filter_hostname_skew() {
    let pl = plugin(None);
    let snap = Snapshot::from_node_infos([
        foo_pods(host("a"), 3),
        foo_pods(host("b"), 1),
        host("c"),
        foo_pods(host("d"), 2),
    ]);
    let pod = incoming().spread(hard(1, HOST, "foo")).build();
    assert_eq!(fits(&pl, &pod, &snap), names(&["c"]));
    let pod = incoming().spread(hard(2, HOST, "foo")).build();
    assert_eq!(fits(&pl, &pod, &snap), names(&["b", "c"]));
}

#[test]
fn filter_ignores_pods_not_matching_other_namespaces_and_terminating() {
    let pl = plugin(None);
    let pod = incoming().spread(hard(1, "zone", "foo")).build();
    let mut x = with_pods(zoned("x", "zone2"), &[&["bar"], &["bar"]]);
    x.add_pod(Arc::new(
        PodInfo::test("elsewhere", "o")
            .node("x")
            .label("foo", "")
            .build(),
    ));
    x.add_pod(Arc::new(
        PodInfo::test(NS, "dying")
            .node("x")
            .label("foo", "")
            .edit(|p| p.metadata.deletion_timestamp = Some(meta::Time(Default::default())))
            .build(),
    ));
    let snap = Snapshot::from_node_infos([zoned("a", "zone1"), x]);
    assert_eq!(fits(&pl, &pod, &snap), names(&["a", "x"]));
}

#[test]
fn filter_multiple_constraints_must_all_hold() {
    let pl = plugin(None);
    // zone1 {a:2, b:0}, zone2 {x:1, y:0}
    let snap = Snapshot::from_node_infos(zones(2, 0, 1, 0));
    let zone_only = incoming().spread(hard(1, "zone", "foo")).build();
    assert_eq!(fits(&pl, &zone_only, &snap), names(&["x", "y"]));
    let host_only = incoming().spread(hard(1, HOST, "foo")).build();
    assert_eq!(fits(&pl, &host_only, &snap), names(&["b", "y"]));
    let both = incoming()
        .spread(hard(1, "zone", "foo"))
        .spread(hard(1, HOST, "foo"))
        .build();
    assert_eq!(fits(&pl, &both, &snap), names(&["y"]));
}

#[test]
fn filter_nodes_missing_the_topology_key_are_unresolvable_and_not_counted() {
    let pl = plugin(None);
    let pod = incoming().spread(hard(1, "zone", "foo")).build();
    let snap = Snapshot::from_node_infos([
        foo_pods(zoned("a", "zone1"), 1),
        zoned("x", "zone2"),
        foo_pods(host("nolabel"), 5),
    ]);
    let (_, per_node) = filter_all(&pl, &pod, &snap);
    // zone1 holds 1 pod, zone2 none: 1 + 1 - 0 > 1.
    assert_eq!(
        per_node[0].1,
        Some((
            Code::Unschedulable,
            ERR_REASON_CONSTRAINTS_NOT_MATCH.to_string()
        ))
    );
    assert_eq!(per_node[1].1, None);
    assert_eq!(
        per_node[2].1,
        Some((
            Code::UnschedulableAndUnresolvable,
            ERR_REASON_NODE_LABEL_NOT_MATCH.to_string()
        ))
    );
    // With a second key, nodes lacking either key are not counted at all.
    let both = incoming()
        .spread(hard(1, "zone", "foo"))
        .spread(hard(10, "rack", "foo"))
        .build();
    let snap = Snapshot::from_node_infos([
        foo_pods(node("a", &[("zone", "zone1"), ("rack", "r1")]), 0),
        foo_pods(node("b", &[("zone", "zone1")]), 3),
        node("x", &[("zone", "zone2"), ("rack", "r2")]),
    ]);
    assert_eq!(fits(&pl, &both, &snap), names(&["a", "x"]));
}

#[test]
fn filter_min_domains_treats_the_global_minimum_as_zero_until_enough_domains() {
    let pl = plugin(None);
    let snap = Snapshot::from_node_infos(zones(1, 0, 1, 0));
    let mut c = hard(1, "zone", "foo");
    assert_eq!(
        fits(&pl, &incoming().spread(c.clone()).build(), &snap),
        names(&["a", "b", "x", "y"])
    );
    c.min_domains = Some(3);
    assert!(fits(&pl, &incoming().spread(c.clone()).build(), &snap).is_empty());
    c.min_domains = Some(2);
    assert_eq!(
        fits(&pl, &incoming().spread(c.clone()).build(), &snap),
        names(&["a", "b", "x", "y"])
    );
    // maxSkew 2 with 3 domains required: 1 + 1 - 0 <= 2 everywhere.
    c.min_domains = Some(3);
    c.max_skew = 2;
    assert_eq!(
        fits(&pl, &incoming().spread(c).build(), &snap),
        names(&["a", "b", "x", "y"])
    );
}

#[test]
fn filter_node_affinity_policy() {
    let pl = plugin(None);
    // x is in zone2 and does not carry the label the pod's nodeSelector asks for.
    let snap = Snapshot::from_node_infos([
        foo_pods(node("a", &[("zone", "zone1"), ("foo", "")]), 2),
        node("b", &[("zone", "zone1"), ("foo", "")]),
        node("x", &[("zone", "zone2")]),
    ]);
    let mut c = hard(1, "zone", "foo");
    let pod = |c: &k8s::TopologySpreadConstraint| {
        incoming()
            .node_selector("foo", "")
            .spread(c.clone())
            .build()
    };
    // Honor: zone2 is not an eligible domain, the minimum is zone1's 2, so zone1 fits.
    // (x is left to NodeAffinity's own filter: here 0 + 1 - 2 passes.)
    assert_eq!(fits(&pl, &pod(&c), &snap), names(&["a", "b", "x"]));
    // Ignore: zone2 counts with 0, so zone1 is too full.
    c.node_affinity_policy = Some("Ignore".into());
    assert_eq!(fits(&pl, &pod(&c), &snap), names(&["x"]));
    // Required node affinity is honoured the same way.
    let affinity = k8s::Affinity {
        node_affinity: Some(k8s::NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(k8s::NodeSelector {
                node_selector_terms: vec![k8s::NodeSelectorTerm {
                    match_expressions: Some(vec![k8s::NodeSelectorRequirement {
                        key: "foo".into(),
                        operator: "Exists".into(),
                        values: None,
                    }]),
                    match_fields: None,
                }],
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let p = incoming()
        .affinity(affinity)
        .spread(hard(1, "zone", "foo"))
        .build();
    assert_eq!(fits(&pl, &p, &snap), names(&["a", "b", "x"]));
}

#[test]
fn filter_node_taints_policy() {
    let pl = plugin(None);
    let tainted = |n: NodeInfo, effect: TaintEffect| {
        let mut n = n;
        n.taints = vec![crate::types::Taint::new("t", "", effect)].into();
        n
    };
    let snap = |effect: TaintEffect| {
        Snapshot::from_node_infos([
            foo_pods(zoned("a", "zone1"), 2),
            tainted(zoned("x", "zone2"), effect),
        ])
    };
    let mut c = hard(1, "zone", "foo");
    // Ignore (default): the tainted zone counts with 0 pods.
    assert_eq!(
        fits(
            &pl,
            &incoming().spread(c.clone()).build(),
            &snap(TaintEffect::NoSchedule)
        ),
        names(&["x"])
    );
    c.node_taints_policy = Some("Honor".into());
    assert_eq!(
        fits(
            &pl,
            &incoming().spread(c.clone()).build(),
            &snap(TaintEffect::NoSchedule)
        ),
        names(&["a", "x"])
    );
    // PreferNoSchedule does not exclude a node; a toleration brings it back.
    assert_eq!(
        fits(
            &pl,
            &incoming().spread(c.clone()).build(),
            &snap(TaintEffect::PreferNoSchedule)
        ),
        names(&["x"])
    );
    let tolerant = incoming()
        .toleration("t", "Exists", "", "")
        .spread(c)
        .build();
    assert_eq!(
        fits(&pl, &tolerant, &snap(TaintEffect::NoExecute)),
        names(&["x"])
    );
}

#[test]
fn filter_match_label_keys_only_counts_the_same_revision() {
    let pl = plugin(None);
    let labelled = |n: NodeInfo, rev: &str, count: usize| {
        let mut n = n;
        for i in 0..count {
            n.add_pod(Arc::new(
                PodInfo::test(NS, &format!("{}-{rev}-{i}", n.name))
                    .node(&n.name)
                    .label("foo", "")
                    .label("rev", rev)
                    .build(),
            ));
        }
        n
    };
    let snap = Snapshot::from_node_infos([
        labelled(zoned("a", "zone1"), "v1", 2),
        labelled(zoned("x", "zone2"), "v2", 1),
    ]);
    let mut c = hard(1, "zone", "foo");
    let pod =
        |c: &k8s::TopologySpreadConstraint| incoming().label("rev", "v2").spread(c.clone()).build();
    // Every revision counts: zone1 2, zone2 1.
    assert_eq!(fits(&pl, &pod(&c), &snap), names(&["x"]));
    c.match_label_keys = Some(vec!["rev".into()]);
    // Only v2 pods count: zone1 0, zone2 1.
    assert_eq!(fits(&pl, &pod(&c), &snap), names(&["a"]));
    let pod_v1 = incoming().label("rev", "v1").spread(c).build();
    assert_eq!(fits(&pl, &pod_v1, &snap), names(&["x"]));
}

#[test]
fn filter_empty_selector_counts_no_existing_pods_like_upstream() {
    let pl = plugin(None);
    let snap = Snapshot::from_node_infos(zones(3, 0, 0, 0));
    let pod = incoming()
        .spread(tsc(1, "zone", "DoNotSchedule", Some(Default::default())))
        .build();
    assert_eq!(fits(&pl, &pod, &snap), names(&["a", "b", "x", "y"]));
}

#[test]
fn pre_filter_skips_errors_and_defaults() {
    let pl = plugin(None);
    let snap = Snapshot::from_node_infos(zones(1, 0, 0, 0));
    // Only soft constraints: nothing to filter.
    let soft_only = incoming().spread(soft(1, "zone", "foo")).build();
    assert!(filter_all(&pl, &soft_only, &snap).0.is_skip());
    // System defaults are all ScheduleAnyway.
    assert!(filter_all(&pl, &incoming().build(), &snap).0.is_skip());
    // An invalid selector on a hard constraint is an error, not a rejection.
    let bad = incoming()
        .spread(tsc(
            1,
            "zone",
            "DoNotSchedule",
            Some(meta::LabelSelector {
                match_expressions: Some(vec![meta::LabelSelectorRequirement {
                    key: "foo".into(),
                    operator: "In".into(),
                    values: Some(vec![]),
                }]),
                ..Default::default()
            }),
        ))
        .build();
    let s = filter_all(&pl, &bad, &snap).0;
    assert_eq!(s.code(), Code::Error);
    assert!(
        s.message().starts_with(
            "get constraints from pod: obtaining pod's hard topology spread constraints:"
        ),
        "{s}"
    );
    // Filter without PreFilter state is an error too.
    let st = pl.filter(&CycleState::new(), &bad, &snap.node_infos()[0]);
    assert_eq!(st.code(), Code::Error);
}

#[test]
fn list_defaults_apply_only_with_a_workload_selector_and_no_own_constraints() {
    let pl = plugin(Some(list_args(vec![tsc(1, "zone", "DoNotSchedule", None)])));
    let nodes = zones(1, 0, 0, 0);
    let pod = incoming().build();
    // No Service/controller selects the pod: no default constraints.
    let bare = Snapshot::from_node_infos(nodes.clone());
    assert!(filter_all(&pl, &pod, &bare).0.is_skip());
    let svc = k8s::Service {
        metadata: meta::ObjectMeta {
            namespace: Some(NS.into()),
            name: Some("svc".into()),
            ..Default::default()
        },
        spec: Some(k8s::ServiceSpec {
            selector: Some([("foo".to_string(), String::new())].into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let snap = Snapshot::from_node_infos(nodes)
        .with_workload_selectors(WorkloadSelectors::new().with(service_entry(&svc)));
    assert_eq!(fits(&pl, &pod, &snap), names(&["x", "y"]));
    // A pod with its own (soft) constraints gets no hard defaults.
    let own = incoming().spread(soft(1, "zone", "foo")).build();
    assert!(filter_all(&pl, &own, &snap).0.is_skip());
}

// ---- AddPod / RemovePod ----

fn pre_filtered(pl: &PodTopologySpread, pod: &PodInfo, snap: &Snapshot) -> CycleState {
    let mut state = CycleState::new();
    assert!(pl.pre_filter(&mut state, pod, snap).1.is_success());
    state
}

fn counts_of(state: &CycleState) -> Vec<FxHashMap<String, i64>> {
    let s = state.read::<PreFilterState>().unwrap();
    s.counts.iter().map(|c| (**c).clone()).collect()
}

#[test]
fn add_and_remove_pod_match_a_fresh_pre_filter() {
    let pl = plugin(None);
    let pod = incoming()
        .spread(hard(1, "zone", "foo"))
        .spread(hard(1, HOST, "foo"))
        .build();
    let nodes = zones(0, 0, 1, 1);
    let snap = Snapshot::from_node_infos(nodes.clone());
    let mut state = pre_filtered(&pl, &pod, &snap);
    let a = snap.get("a").unwrap().clone();
    assert_eq!(pl.filter(&state, &pod, &a).code(), Code::Success);

    // Nominate a matching pod onto a: same counts as if it were already there.
    let nominated = Arc::new(PodInfo::test(NS, "n").node("a").label("foo", "").build());
    let mut a_with = NodeInfo::clone(&a);
    a_with.add_pod(Arc::clone(&nominated));
    let mut copy = state.clone();
    assert!(
        pl.add_pod(&mut copy, &pod, &nominated, &a_with)
            .is_success()
    );
    let mut nodes_with = nodes.clone();
    nodes_with[0] = a_with.clone();
    let fresh = pre_filtered(&pl, &pod, &Snapshot::from_node_infos(nodes_with));
    assert_eq!(counts_of(&copy), counts_of(&fresh));
    assert_eq!(pl.filter(&copy, &pod, &a_with).code(), Code::Unschedulable);
    // The original state is untouched by the copy's update.
    assert_eq!(
        counts_of(&state),
        counts_of(&pre_filtered(&pl, &pod, &snap))
    );

    // Removing a victim from x lowers zone2 and x.
    let victim = Arc::clone(&snap.get("x").unwrap().pods[0]);
    let x = snap.get("x").unwrap().clone();
    assert!(pl.remove_pod(&mut state, &pod, &victim, &x).is_success());
    let mut nodes_without = nodes.clone();
    nodes_without[2] = zoned("x", "zone2");
    let fresh = pre_filtered(&pl, &pod, &Snapshot::from_node_infos(nodes_without));
    assert_eq!(counts_of(&state), counts_of(&fresh));
    let s = state.read::<PreFilterState>().unwrap();
    let f = fresh.read::<PreFilterState>().unwrap();
    for i in 0..2 {
        assert_eq!(s.paths[i].min(), f.paths[i].min(), "constraint {i}");
    }
}

#[test]
fn add_pod_ignores_other_namespaces_and_non_matching_pods() {
    let pl = plugin(None);
    let pod = incoming().spread(hard(1, "zone", "foo")).build();
    let snap = Snapshot::from_node_infos(zones(0, 0, 0, 0));
    let mut state = pre_filtered(&pl, &pod, &snap);
    let before = counts_of(&state);
    let a = snap.get("a").unwrap().clone();
    let other_ns = Arc::new(PodInfo::test("other", "o").label("foo", "").build());
    let no_match = Arc::new(PodInfo::test(NS, "m").label("bar", "").build());
    assert!(pl.add_pod(&mut state, &pod, &other_ns, &a).is_success());
    assert!(pl.add_pod(&mut state, &pod, &no_match, &a).is_success());
    assert_eq!(counts_of(&state), before);
    assert!(pl.has_extensions());
}

#[test]
fn critical_paths_track_the_two_smallest_counts() {
    let mut p = CriticalPaths::new();
    for (v, n) in [("a", 3), ("b", 1), ("c", 2), ("d", 5)] {
        p.update(v, n);
    }
    assert_eq!(p.0, [("b".to_string(), 1), ("c".to_string(), 2)]);
    p.update("b", 4);
    assert_eq!(p.0, [("c".to_string(), 2), ("b".to_string(), 4)]);
    p.update("a", 0);
    assert_eq!(p.min(), 0);
}
