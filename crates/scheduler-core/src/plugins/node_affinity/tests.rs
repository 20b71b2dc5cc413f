//! NodeAffinity's unit tests: Filter and Score against upstream's cases, and addedAffinity.

use super::*;
use crate::framework::Code;
use crate::plugins::helper::testing::values;

fn req(key: &str, op: &str, values: &[&str]) -> k8s::NodeSelectorRequirement {
    k8s::NodeSelectorRequirement {
        key: key.into(),
        operator: op.into(),
        values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
    }
}

fn name_in(node: &str) -> k8s::NodeSelectorRequirement {
    req(FIELD_METADATA_NAME, "In", &[node])
}

fn term(
    exprs: Vec<k8s::NodeSelectorRequirement>,
    fields: Vec<k8s::NodeSelectorRequirement>,
) -> k8s::NodeSelectorTerm {
    k8s::NodeSelectorTerm {
        match_expressions: Some(exprs),
        match_fields: Some(fields),
    }
}

fn exprs(reqs: Vec<k8s::NodeSelectorRequirement>) -> k8s::NodeSelectorTerm {
    term(reqs, vec![])
}

fn fields(reqs: Vec<k8s::NodeSelectorRequirement>) -> k8s::NodeSelectorTerm {
    term(vec![], reqs)
}

fn required(terms: Vec<k8s::NodeSelectorTerm>) -> k8s::NodeAffinity {
    k8s::NodeAffinity {
        required_during_scheduling_ignored_during_execution: Some(k8s::NodeSelector {
            node_selector_terms: terms,
        }),
        ..Default::default()
    }
}

fn preferred(terms: Vec<(i32, k8s::NodeSelectorTerm)>) -> k8s::NodeAffinity {
    k8s::NodeAffinity {
        preferred_during_scheduling_ignored_during_execution: Some(
            terms
                .into_iter()
                .map(|(weight, preference)| k8s::PreferredSchedulingTerm { weight, preference })
                .collect(),
        ),
        ..Default::default()
    }
}

fn pod_with(na: k8s::NodeAffinity) -> PodInfo {
    PodInfo::test("ns", "p")
        .affinity(k8s::Affinity {
            node_affinity: Some(na),
            ..Default::default()
        })
        .build()
}

fn selector_pod(pairs: &[(&str, &str)]) -> PodInfo {
    pairs
        .iter()
        .fold(PodInfo::test("ns", "p"), |b, (k, v)| b.node_selector(k, v))
        .build()
}

fn node(name: &str, labels: &[(&str, &str)]) -> NodeInfo {
    labels
        .iter()
        .fold(NodeInfo::test(name), |b, (k, v)| b.label(k, v))
        .build()
}

fn plugin(added: Option<k8s::NodeAffinity>) -> NodeAffinity {
    NodeAffinity::new(&NodeAffinityArgs {
        added_affinity: added,
    })
    .unwrap()
}

#[derive(Debug, PartialEq)]
enum Pre {
    Skip,
    AllNodes,
    Nodes(Vec<String>),
    Conflict,
}

fn names(n: &[&str]) -> Vec<String> {
    n.iter().map(|s| s.to_string()).collect()
}

struct Case {
    name: &'static str,
    pod: PodInfo,
    node: NodeInfo,
    added: Option<k8s::NodeAffinity>,
    pre: Pre,
    /// `None`: the node fits; `Some(reason)`: UnschedulableAndUnresolvable with it.
    filter: Option<&'static str>,
}

fn case(name: &'static str, pod: PodInfo, node: NodeInfo, pre: Pre) -> Case {
    Case {
        name,
        pod,
        node,
        added: None,
        pre,
        filter: None,
    }
}

impl Case {
    fn rejects(mut self, reason: &'static str) -> Self {
        self.filter = Some(reason);
        self
    }
    fn added(mut self, a: k8s::NodeAffinity) -> Self {
        self.added = Some(a);
        self
    }
}

fn filter_cases() -> Vec<Case> {
    use Pre::*;
    let foo_bar = &[("foo", "bar")][..];
    vec![
        case(
            "nodeSelector: missing label",
            selector_pod(&[("foo", "bar")]),
            node("n", &[]),
            AllNodes,
        )
        .rejects(ERR_REASON_POD),
        case(
            "nodeSelector: same labels",
            selector_pod(&[("foo", "bar")]),
            node("n", foo_bar),
            AllNodes,
        ),
        case(
            "nodeSelector: node labels are a superset",
            selector_pod(&[("foo", "bar")]),
            node("n", &[("foo", "bar"), ("baz", "blah")]),
            AllNodes,
        ),
        case(
            "nodeSelector: node labels are a subset",
            selector_pod(&[("foo", "bar"), ("baz", "blah")]),
            node("n", foo_bar),
            AllNodes,
        )
        .rejects(ERR_REASON_POD),
        case(
            "In matches",
            pod_with(required(vec![exprs(vec![req(
                "foo",
                "In",
                &["bar", "value2"],
            )])])),
            node("n", foo_bar),
            AllNodes,
        ),
        case(
            "In does not match",
            pod_with(required(vec![exprs(vec![req(
                "foo",
                "In",
                &["value1", "value2"],
            )])])),
            node("n", foo_bar),
            AllNodes,
        )
        .rejects(ERR_REASON_POD),
        case(
            "NotIn matches",
            pod_with(required(vec![exprs(vec![req(
                "mem-type",
                "NotIn",
                &["DDR", "DDR2"],
            )])])),
            node("n", &[("mem-type", "DDR3")]),
            AllNodes,
        ),
        case(
            "NotIn does not match",
            pod_with(required(vec![exprs(vec![req(
                "mem-type",
                "NotIn",
                &["DDR", "DDR3"],
            )])])),
            node("n", &[("mem-type", "DDR3")]),
            AllNodes,
        )
        .rejects(ERR_REASON_POD),
        case(
            "Exists matches",
            pod_with(required(vec![exprs(vec![req("GPU", "Exists", &[])])])),
            node("n", &[("GPU", "NVIDIA-GRID-K1")]),
            AllNodes,
        ),
        case(
            "DoesNotExist rejects a node with the label",
            pod_with(required(vec![exprs(vec![req("GPU", "DoesNotExist", &[])])])),
            node("n", &[("GPU", "NVIDIA-GRID-K1")]),
            AllNodes,
        )
        .rejects(ERR_REASON_POD),
        case(
            "DoesNotExist matches a node without the label",
            pod_with(required(vec![exprs(vec![req("GPU", "DoesNotExist", &[])])])),
            node("n", foo_bar),
            AllNodes,
        ),
        case(
            "Gt matches (leading zeros parse as integers)",
            pod_with(required(vec![exprs(vec![req(
                "kernel-version",
                "Gt",
                &["0204"],
            )])])),
            node("n", &[("kernel-version", "0206")]),
            AllNodes,
        ),
        case(
            "Gt does not match an equal value",
            pod_with(required(vec![exprs(vec![req(
                "kernel-version",
                "Gt",
                &["0206"],
            )])])),
            node("n", &[("kernel-version", "0206")]),
            AllNodes,
        )
        .rejects(ERR_REASON_POD),
        case(
            "Lt matches",
            pod_with(required(vec![exprs(vec![req("cores", "Lt", &["8"])])])),
            node("n", &[("cores", "4")]),
            AllNodes,
        ),
        case(
            "Lt with a non-numeric node label does not match",
            pod_with(required(vec![exprs(vec![req("cores", "Lt", &["8"])])])),
            node("n", &[("cores", "four")]),
            AllNodes,
        )
        .rejects(ERR_REASON_POD),
        case(
            "empty matchExpressions match no node",
            pod_with(required(vec![exprs(vec![])])),
            node("n", foo_bar),
            AllNodes,
        )
        .rejects(ERR_REASON_POD),
        case(
            "no affinity at all: skipped",
            PodInfo::test("ns", "p").build(),
            node("n", foo_bar),
            Skip,
        ),
        case(
            "node affinity without required terms: skipped",
            pod_with(k8s::NodeAffinity::default()),
            node("n", foo_bar),
            Skip,
        ),
        case(
            "required selector with no terms matches no node",
            pod_with(required(vec![])),
            node("n", foo_bar),
            AllNodes,
        )
        .rejects(ERR_REASON_POD),
        case(
            "expressions in a term are ANDed: match",
            pod_with(required(vec![exprs(vec![
                req("GPU", "Exists", &[]),
                req("GPU", "NotIn", &["AMD", "INTER"]),
            ])])),
            node("n", &[("GPU", "NVIDIA-GRID-K1")]),
            AllNodes,
        ),
        case(
            "expressions in a term are ANDed: no match",
            pod_with(required(vec![exprs(vec![
                req("GPU", "Exists", &[]),
                req("GPU", "In", &["AMD", "INTER"]),
            ])])),
            node("n", &[("GPU", "NVIDIA-GRID-K1")]),
            AllNodes,
        )
        .rejects(ERR_REASON_POD),
        case(
            "terms are ORed",
            pod_with(required(vec![
                exprs(vec![req("foo", "In", &["bar", "value2"])]),
                exprs(vec![req("diffkey", "In", &["wrong", "value2"])]),
            ])),
            node("n", foo_bar),
            AllNodes,
        ),
        case(
            "nodeSelector and affinity both satisfied",
            PodInfo::test("ns", "p")
                .node_selector("foo", "bar")
                .affinity(k8s::Affinity {
                    node_affinity: Some(required(vec![exprs(vec![req("foo", "Exists", &[])])])),
                    ..Default::default()
                })
                .build(),
            node("n", foo_bar),
            AllNodes,
        ),
        case(
            "affinity satisfied but nodeSelector not",
            PodInfo::test("ns", "p")
                .node_selector("foo", "bar")
                .affinity(k8s::Affinity {
                    node_affinity: Some(required(vec![exprs(vec![req("foo", "Exists", &[])])])),
                    ..Default::default()
                })
                .build(),
            node("n", &[("foo", "barrrrrr")]),
            AllNodes,
        )
        .rejects(ERR_REASON_POD),
        case(
            "matchFields In matches the node",
            pod_with(required(vec![fields(vec![name_in("node1")])])),
            node("node1", &[]),
            Nodes(names(&["node1"])),
        ),
        case(
            "matchFields In does not match the node",
            pod_with(required(vec![fields(vec![name_in("node1")])])),
            node("node2", &[]),
            Nodes(names(&["node1"])),
        )
        .rejects(ERR_REASON_POD),
        case(
            "matchFields NotIn excludes the node but does not narrow",
            pod_with(required(vec![fields(vec![req(
                FIELD_METADATA_NAME,
                "NotIn",
                &["node1"],
            )])])),
            node("node1", &[]),
            AllNodes,
        )
        .rejects(ERR_REASON_POD),
        case(
            "two terms: conflicting matchFields, but matchExpressions match",
            pod_with(required(vec![
                fields(vec![name_in("node1"), name_in("node2")]),
                exprs(vec![req("foo", "In", &["bar"])]),
            ])),
            node("node2", foo_bar),
            AllNodes,
        ),
        case(
            "one term: matchFields does not match, matchExpressions do",
            pod_with(required(vec![term(
                vec![req("foo", "In", &["bar"])],
                vec![name_in("node1")],
            )])),
            node("node2", foo_bar),
            Nodes(names(&["node1"])),
        )
        .rejects(ERR_REASON_POD),
        case(
            "one term: matchFields and matchExpressions both match",
            pod_with(required(vec![term(
                vec![req("foo", "In", &["bar"])],
                vec![name_in("node1")],
            )])),
            node("node1", foo_bar),
            Nodes(names(&["node1"])),
        ),
        case(
            "two terms: neither matches",
            pod_with(required(vec![
                fields(vec![name_in("node1")]),
                exprs(vec![req("foo", "In", &["not-match-to-bar"])]),
            ])),
            node("node2", foo_bar),
            AllNodes,
        )
        .rejects(ERR_REASON_POD),
        case(
            "two terms naming nodes: union",
            pod_with(required(vec![
                fields(vec![name_in("node1")]),
                fields(vec![name_in("node2")]),
            ])),
            node("node2", &[]),
            Nodes(names(&["node1", "node2"])),
        ),
        case(
            "conflicting matchFields in the only term",
            pod_with(required(vec![fields(vec![
                name_in("node1"),
                name_in("node2"),
            ])])),
            node("node2", foo_bar),
            Conflict,
        )
        .rejects(ERR_REASON_POD),
        case(
            "matches added affinity and pod's affinity",
            pod_with(required(vec![exprs(vec![req("zone", "In", &["foo"])])])),
            node("node2", &[("zone", "foo")]),
            AllNodes,
        )
        .added(required(vec![fields(vec![name_in("node2")])])),
        case(
            "matches added affinity but not pod's affinity",
            pod_with(required(vec![exprs(vec![req("zone", "In", &["bar"])])])),
            node("node2", &[("zone", "foo")]),
            AllNodes,
        )
        .added(required(vec![fields(vec![name_in("node2")])]))
        .rejects(ERR_REASON_POD),
        case(
            "doesn't match added affinity: enforced first, pod without affinity",
            PodInfo::test("ns", "p").build(),
            node("node2", &[("zone", "foo")]),
            AllNodes,
        )
        .added(required(vec![exprs(vec![req("zone", "In", &["bar"])])]))
        .rejects(ERR_REASON_ENFORCED),
        case(
            "added affinity is checked before the pod's own rules",
            selector_pod(&[("other", "x")]),
            node("node2", &[("zone", "foo")]),
            AllNodes,
        )
        .added(required(vec![exprs(vec![req("zone", "In", &["bar"])])]))
        .rejects(ERR_REASON_ENFORCED),
        case(
            "preferred-only added affinity does not disable the skip",
            PodInfo::test("ns", "p").build(),
            node("n", &[]),
            Skip,
        )
        .added(preferred(vec![(
            3,
            exprs(vec![req("zone", "Exists", &[])]),
        )])),
    ]
}

fn run_pre_filter(pl: &NodeAffinity, pod: &PodInfo) -> (Pre, Status) {
    let mut state = CycleState::new();
    let (result, status) = pl.pre_filter(&mut state, pod, &Snapshot::new());
    let pre = if status.is_skip() {
        Pre::Skip
    } else if status.code() == Code::UnschedulableAndUnresolvable
        && status.reasons() == [ERR_REASON_CONFLICT]
    {
        Pre::Conflict
    } else {
        assert!(status.is_success(), "{status}");
        match result {
            None => Pre::AllNodes,
            Some(r) => Pre::Nodes(r.node_names.unwrap().into_iter().collect()),
        }
    };
    (pre, status)
}

#[test]
fn filter_table() {
    for c in filter_cases() {
        let pl = plugin(c.added.clone());
        let (pre, _) = run_pre_filter(&pl, &c.pod);
        assert_eq!(pre, c.pre, "{}: PreFilter", c.name);
        // Filter runs even when PreFilter skipped or rejected: it must stand on its own.
        let s = pl.filter(&CycleState::new(), &c.pod, &c.node);
        match c.filter {
            None => assert!(s.is_success(), "{}: {s}", c.name),
            Some(reason) => {
                assert_eq!(s.code(), Code::UnschedulableAndUnresolvable, "{}", c.name);
                assert_eq!(s.reasons(), [reason], "{}", c.name);
            }
        }
    }
}

#[test]
fn invalid_required_terms_are_explained_not_fatal() {
    let pl = plugin(None);
    let bad = req("foo", "NotIn", &["invalid value: ___@#$%^"]);
    // The only term is invalid: no node matches, and the reason says why.
    let pod = pod_with(required(vec![exprs(vec![bad.clone()])]));
    assert!(!pod.problems.is_empty());
    let (pre, _) = run_pre_filter(&pl, &pod);
    assert_eq!(pre, Pre::AllNodes);
    let s = pl.filter(&CycleState::new(), &pod, &node("n", &[("foo", "bar")]));
    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
    let msg = s.message();
    assert!(msg.starts_with(ERR_REASON_POD), "{msg}");
    assert!(msg.contains(INVALID_TERMS_NOTE), "{msg}");
    assert!(msg.contains("invalid label value"), "{msg}");
    // A valid term next to the invalid one still matches, as upstream's lazy selector.
    let pod = pod_with(required(vec![
        exprs(vec![bad]),
        exprs(vec![req("foo", "Exists", &[])]),
    ]));
    assert!(
        pl.filter(&CycleState::new(), &pod, &node("n", &[("foo", "bar")]))
            .is_success()
    );
    // Gt with a non-integer operand is invalid too.
    let pod = pod_with(required(vec![exprs(vec![req("v", "Gt", &["abc"])])]));
    let s = pl.filter(&CycleState::new(), &pod, &node("n", &[("v", "5")]));
    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
    assert!(
        s.message().contains("must be an integer"),
        "{}",
        s.message()
    );
}

fn affinity1() -> k8s::NodeAffinity {
    preferred(vec![(2, exprs(vec![req("foo", "In", &["bar"])]))])
}

fn affinity2() -> k8s::NodeAffinity {
    preferred(vec![
        (2, exprs(vec![req("foo", "In", &["bar"])])),
        (4, exprs(vec![req("key", "In", &["value"])])),
        (
            5,
            exprs(vec![
                req("foo", "In", &["bar"]),
                req("key", "In", &["value"]),
                req("az", "In", &["az1"]),
            ]),
        ),
    ])
}

const L1: &[(&str, &str)] = &[("foo", "bar")];
const L2: &[(&str, &str)] = &[("key", "value")];
const L3: &[(&str, &str)] = &[("az", "az1")];
const L4: &[(&str, &str)] = &[("abc", "az11"), ("def", "az22")];
const L5: &[(&str, &str)] = &[("foo", "bar"), ("key", "value"), ("az", "az1")];

/// Runs PreScore (unless `skip_pre_score`), Score and NormalizeScore; `None` when
/// PreScore says Skip.
fn score_all(
    pl: &NodeAffinity,
    pod: &PodInfo,
    nodes: &[NodeInfo],
    skip_pre_score: bool,
) -> Option<Vec<i64>> {
    let state = CycleState::new();
    if !skip_pre_score {
        let arcs: Vec<Arc<NodeInfo>> = nodes.iter().cloned().map(Arc::new).collect();
        let mut st = CycleState::new();
        let s = pl.pre_score(&mut st, pod, (&arcs).into(), &Snapshot::new());
        if s.is_skip() {
            return None;
        }
        assert!(s.is_success(), "{s}");
    }
    let mut scores: Vec<NodeScore> = nodes
        .iter()
        .map(|n| NodeScore {
            name: &n.name,
            score: pl.score(&state, pod, n).unwrap(),
        })
        .collect();
    assert!(pl.normalize_scores(&state, pod, &mut scores).is_success());
    Some(values(&scores))
}

#[test]
fn preferred_terms_score_their_weights() {
    let nodes = |labels: [&[(&str, &str)]; 3]| -> Vec<NodeInfo> {
        labels
            .iter()
            .enumerate()
            .map(|(i, l)| node(&format!("node{}", i + 1), l))
            .collect()
    };
    // (name, pod affinity, added affinity, node labels, want; None = PreScore skips)
    type ScoreCase = (
        &'static str,
        Option<k8s::NodeAffinity>,
        Option<k8s::NodeAffinity>,
        [&'static [(&'static str, &'static str)]; 3],
        Option<Vec<i64>>,
    );
    let cases: Vec<ScoreCase> = vec![
        ("no node affinity: skipped", None, None, [L1, L2, L3], None),
        (
            "no node matches the preferred term",
            Some(affinity1()),
            None,
            [L4, L2, L3],
            Some(vec![0, 0, 0]),
        ),
        (
            "only node1 matches",
            Some(affinity1()),
            None,
            [L1, L2, L3],
            Some(vec![100, 0, 0]),
        ),
        (
            // raw 2, 11, 4 -> 18, 100, 36
            "different weights",
            Some(affinity2()),
            None,
            [L1, L5, L2],
            Some(vec![18, 100, 36]),
        ),
        (
            "added preferred affinity alone",
            None,
            Some(affinity1()),
            [L1, L2, L3],
            Some(vec![100, 0, 0]),
        ),
        (
            // raw 2, 3, 5 -> 40, 60, 100
            "added preferred affinity plus the pod's",
            Some(affinity1()),
            Some(preferred(vec![(
                3,
                exprs(vec![req("key", "In", &["value"])]),
            )])),
            [L1, L2, L5],
            Some(vec![40, 60, 100]),
        ),
        (
            "zero-weight and empty terms never count",
            Some(preferred(vec![
                (0, exprs(vec![req("foo", "In", &["bar"])])),
                (7, exprs(vec![])),
                (1, exprs(vec![req("key", "Exists", &[])])),
            ])),
            None,
            [L1, L2, L5],
            Some(vec![0, 100, 100]),
        ),
        (
            "preferred matchFields on the node name",
            Some(preferred(vec![(10, fields(vec![name_in("node3")]))])),
            None,
            [L1, L2, L3],
            Some(vec![0, 0, 100]),
        ),
    ];
    for (name, pod_aff, added, labels, want) in cases {
        let pl = plugin(added);
        let pod = match pod_aff {
            Some(a) => pod_with(a),
            None => PodInfo::test("ns", "p").build(),
        };
        assert_eq!(score_all(&pl, &pod, &nodes(labels), false), want, "{name}");
    }
    // Score works without PreScore (PreScore disabled in the profile).
    let pl = plugin(None);
    assert_eq!(
        score_all(&pl, &pod_with(affinity2()), &nodes([L1, L5, L2]), true),
        Some(vec![18, 100, 36])
    );
}

#[test]
fn invalid_preferred_terms_are_an_error() {
    let pl = plugin(None);
    let pod = pod_with(preferred(vec![(
        3,
        exprs(vec![req("foo", "Gt", &["not-a-number"])]),
    )]));
    let s = pl.pre_score(
        &mut CycleState::new(),
        &pod,
        Default::default(),
        &Snapshot::new(),
    );
    assert_eq!(s.code(), Code::Error);
    assert!(
        s.message().contains("must be an integer"),
        "{}",
        s.message()
    );
    let err = pl
        .score(&CycleState::new(), &pod, &node("n", &[]))
        .unwrap_err();
    assert_eq!(err.code(), Code::Error);
}

#[test]
fn invalid_added_affinity_fails_the_factory() {
    let bad = exprs(vec![req("foo", "Lt", &["x"])]);
    assert!(
        NodeAffinity::new(&NodeAffinityArgs {
            added_affinity: Some(required(vec![bad.clone()])),
        })
        .is_err_and(|e| e.contains("addedAffinity.requiredDuringScheduling"))
    );
    assert!(
        NodeAffinity::new(&NodeAffinityArgs {
            added_affinity: Some(preferred(vec![(1, bad.clone())])),
        })
        .is_err_and(|e| e.contains("addedAffinity.preferredDuringScheduling"))
    );
    // A zero-weight invalid term is never parsed, as upstream.
    assert!(
        NodeAffinity::new(&NodeAffinityArgs {
            added_affinity: Some(preferred(vec![(0, bad)])),
        })
        .is_ok()
    );
    let other = PluginArgs::NodeResourcesFit(Default::default());
    assert!(NodeAffinity::from_args(Some(&other)).is_err());
}

/// Upstream's `TestNodeAffinity_isSchedulableAfterNodeChange` cases.
#[test]
fn queueing_hint_on_node_changes() {
    use crate::framework::{ClusterEvent, EventObjects, QueueingHint::*};
    let pl = NodeAffinity::new(&NodeAffinityArgs::default()).unwrap();
    let pod = PodInfo::test("ns", "p")
        .node_selector("pool", "gpu")
        .build();
    let ev = ClusterEvent::new(
        crate::framework::EventResource::Node,
        crate::framework::ActionType::ADD,
    );
    let gpu = NodeInfo::test("a").label("pool", "gpu").build();
    let cpu = NodeInfo::test("a").label("pool", "cpu").build();
    let hint = |old, new| pl.queueing_hint(&pod, &ev, &EventObjects::Node { old, new });
    assert_eq!(hint(None, &gpu), Queue, "added node that matches");
    assert_eq!(
        hint(None, &cpu),
        QueueSkip,
        "added node that does not match"
    );
    assert_eq!(hint(Some(&cpu), &gpu), Queue, "relabelled to match");
    assert_eq!(hint(Some(&gpu), &gpu), QueueSkip, "matched already");
    assert_eq!(hint(Some(&gpu), &cpu), QueueSkip, "no longer matches");
    assert_eq!(pl.queueing_hint(&pod, &ev, &EventObjects::None), Queue);
}
