//! Scenarios of upstream's filtering_test.go and scoring_test.go, rewritten, plus the
//! incremental add/remove path.

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

use super::*;
use crate::framework::Code;

const ZONE: &str = "zone";
const HOST: &str = "kubernetes.io/hostname";
const REGION: &str = "region";

// ---- builders ----

fn selector(kv: &[(&str, &str)]) -> meta::LabelSelector {
    meta::LabelSelector {
        match_labels: Some(
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        match_expressions: None,
    }
}

/// A term selecting pods labelled `kv` in the owning pod's namespace.
fn term(topology: &str, kv: &[(&str, &str)]) -> k8s::PodAffinityTerm {
    k8s::PodAffinityTerm {
        label_selector: Some(selector(kv)),
        topology_key: topology.to_string(),
        ..Default::default()
    }
}

fn weighted(weight: i32, t: k8s::PodAffinityTerm) -> k8s::WeightedPodAffinityTerm {
    k8s::WeightedPodAffinityTerm {
        weight,
        pod_affinity_term: t,
    }
}

#[derive(Default)]
struct Aff {
    required: Vec<k8s::PodAffinityTerm>,
    required_anti: Vec<k8s::PodAffinityTerm>,
    preferred: Vec<k8s::WeightedPodAffinityTerm>,
    preferred_anti: Vec<k8s::WeightedPodAffinityTerm>,
}

impl Aff {
    fn build(self) -> k8s::Affinity {
        fn some<T>(v: Vec<T>) -> Option<Vec<T>> {
            if v.is_empty() { None } else { Some(v) }
        }
        let pod_affinity =
            (!self.required.is_empty() || !self.preferred.is_empty()).then(|| k8s::PodAffinity {
                required_during_scheduling_ignored_during_execution: some(self.required),
                preferred_during_scheduling_ignored_during_execution: some(self.preferred),
            });
        let pod_anti_affinity = (!self.required_anti.is_empty() || !self.preferred_anti.is_empty())
            .then(|| k8s::PodAntiAffinity {
                required_during_scheduling_ignored_during_execution: some(self.required_anti),
                preferred_during_scheduling_ignored_during_execution: some(self.preferred_anti),
            });
        k8s::Affinity {
            pod_affinity,
            pod_anti_affinity,
            node_affinity: None,
        }
    }
}

fn required(terms: Vec<k8s::PodAffinityTerm>) -> k8s::Affinity {
    Aff {
        required: terms,
        ..Default::default()
    }
    .build()
}

fn required_anti(terms: Vec<k8s::PodAffinityTerm>) -> k8s::Affinity {
    Aff {
        required_anti: terms,
        ..Default::default()
    }
    .build()
}

fn pod(name: &str, labels: &[(&str, &str)]) -> crate::types::PodBuilder {
    labels
        .iter()
        .fold(PodInfo::test("default", name), |b, (k, v)| b.label(k, v))
}

/// A node with labels and pods (the pods get bound to it).
fn node(name: &str, labels: &[(&str, &str)], pods: Vec<crate::types::PodBuilder>) -> NodeInfo {
    let mut n = labels
        .iter()
        .fold(NodeInfo::test(name), |b, (k, v)| b.label(k, v))
        .build();
    for p in pods {
        n.add_pod(Arc::new(p.node(name).build()));
    }
    n
}

fn plugin() -> InterPodAffinity {
    InterPodAffinity::new(&InterPodAffinityArgs {
        hard_pod_affinity_weight: 1,
        ignore_preferred_terms_of_existing_pods: false,
    })
    .unwrap()
}

/// Runs PreFilter then Filter on every node; a skipped PreFilter means every node passes.
fn filter_all(pl: &InterPodAffinity, pod: &PodInfo, snapshot: &Snapshot) -> Vec<Status> {
    let mut state = CycleState::new();
    let (r, s) = pl.pre_filter(&mut state, pod, snapshot);
    assert!(r.is_none());
    if s.is_skip() {
        return snapshot
            .node_infos()
            .iter()
            .map(|_| Status::success())
            .collect();
    }
    assert!(s.is_success(), "{s}");
    snapshot
        .node_infos()
        .iter()
        .map(|n| pl.filter(&state, pod, n))
        .collect()
}

fn ok() -> Status {
    Status::success()
}
fn affinity_fail() -> Status {
    Status::unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH)
}
fn anti_fail() -> Status {
    Status::unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH)
}
fn existing_fail() -> Status {
    Status::unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH)
}

// ---- PreFilter skip and errors ----

#[test]
fn pre_filter_skips_when_nobody_has_required_terms() {
    let snap = Snapshot::from_node_infos(vec![node(
        "n1",
        &[(ZONE, "z1")],
        vec![
            pod("other", &[("app", "web")]).affinity(
                Aff {
                    preferred_anti: vec![weighted(5, term(ZONE, &[("app", "web")]))],
                    ..Default::default()
                }
                .build(),
            ),
        ],
    )]);
    let p = pod("p", &[("app", "web")]).build();
    let (_, s) = plugin().pre_filter(&mut CycleState::new(), &p, &snap);
    assert!(s.is_skip(), "{s}");
}

#[test]
fn pre_filter_does_not_skip_when_existing_anti_affinity_matches() {
    let snap = Snapshot::from_node_infos(vec![node(
        "n1",
        &[(ZONE, "z1")],
        vec![pod("other", &[]).affinity(required_anti(vec![term(ZONE, &[("app", "web")])]))],
    )]);
    let p = pod("p", &[("app", "web")]).build();
    let (_, s) = plugin().pre_filter(&mut CycleState::new(), &p, &snap);
    assert!(s.is_success(), "{s}");
    // An existing term that does not select the pod leaves nothing to check.
    let q = pod("q", &[("app", "db")]).build();
    let (_, s) = plugin().pre_filter(&mut CycleState::new(), &q, &snap);
    assert!(s.is_skip(), "{s}");
}

#[test]
fn a_pod_with_an_invalid_selector_is_unresolvable_at_pre_filter() {
    let bad = k8s::PodAffinityTerm {
        label_selector: Some(meta::LabelSelector {
            match_expressions: Some(vec![meta::LabelSelectorRequirement {
                key: "app".into(),
                operator: "Exists".into(),
                values: Some(vec!["x".into()]),
            }]),
            ..Default::default()
        }),
        topology_key: ZONE.into(),
        ..Default::default()
    };
    let p = pod("p", &[]).affinity(required(vec![bad])).build();
    let snap = Snapshot::from_node_infos(vec![node("n1", &[(ZONE, "z1")], vec![])]);
    let (_, s) = plugin().pre_filter(&mut CycleState::new(), &p, &snap);
    assert_eq!(s.code(), Code::UnschedulableAndUnresolvable);
    assert!(
        s.message()
            .starts_with("parsing pod: requiredAffinityTerms[0]"),
        "{s}"
    );
}

#[test]
fn filter_without_pre_filter_state_is_an_error() {
    let p = pod("p", &[]).build();
    let s = plugin().filter(&CycleState::new(), &p, &node("n", &[], vec![]));
    assert_eq!(s.code(), Code::Error);
}

// ---- required affinity ----

#[test]
fn affinity_is_satisfied_by_a_matching_pod_in_the_same_topology() {
    let snap = Snapshot::from_node_infos(vec![
        node(
            "n1",
            &[(REGION, "r1"), (ZONE, "z1")],
            vec![pod("scan", &[("service", "securityscan")])],
        ),
        node("n2", &[(REGION, "r1"), (ZONE, "z2")], vec![]),
        node("n3", &[(REGION, "r2"), (ZONE, "z3")], vec![]),
    ]);
    let p = pod("p", &[])
        .affinity(required(vec![term(REGION, &[("service", "securityscan")])]))
        .build();
    assert_eq!(
        filter_all(&plugin(), &p, &snap),
        vec![ok(), ok(), affinity_fail()]
    );
    let by_zone = pod("p", &[])
        .affinity(required(vec![term(ZONE, &[("service", "securityscan")])]))
        .build();
    assert_eq!(
        filter_all(&plugin(), &by_zone, &snap),
        vec![ok(), affinity_fail(), affinity_fail()]
    );
}

#[test]
fn affinity_with_set_based_selectors() {
    let t = k8s::PodAffinityTerm {
        label_selector: Some(meta::LabelSelector {
            match_expressions: Some(vec![
                meta::LabelSelectorRequirement {
                    key: "service".into(),
                    operator: "In".into(),
                    values: Some(vec!["securityscan".into(), "value2".into()]),
                },
                meta::LabelSelectorRequirement {
                    key: "tier".into(),
                    operator: "NotIn".into(),
                    values: Some(vec!["canary".into()]),
                },
            ]),
            ..Default::default()
        }),
        topology_key: REGION.into(),
        ..Default::default()
    };
    let p = pod("p", &[]).affinity(required(vec![t])).build();
    let snap = |labels: &[(&str, &str)]| {
        Snapshot::from_node_infos(vec![node("n1", &[(REGION, "r1")], vec![pod("e", labels)])])
    };
    assert_eq!(
        filter_all(&plugin(), &p, &snap(&[("service", "value2")])),
        vec![ok()]
    );
    assert_eq!(
        filter_all(
            &plugin(),
            &p,
            &snap(&[("service", "value2"), ("tier", "canary")])
        ),
        vec![affinity_fail()]
    );
}

#[test]
fn unmatched_affinity_is_unresolvable_unless_the_pod_starts_the_group() {
    let nodes = || {
        vec![
            node("n1", &[(ZONE, "z1")], vec![pod("e", &[("app", "other")])]),
            node("n2", &[], vec![]),
        ]
    };
    let snap = Snapshot::from_node_infos(nodes());
    // Does not match its own term: stays pending.
    let stranger = pod("p", &[("app", "x")])
        .affinity(required(vec![term(ZONE, &[("app", "web")])]))
        .build();
    assert_eq!(
        filter_all(&plugin(), &stranger, &snap),
        vec![affinity_fail(), affinity_fail()]
    );
    // Matches its own term and nobody else does: the first of the group is allowed, but
    // only on nodes that have the topology key.
    let first = pod("p", &[("app", "web")])
        .affinity(required(vec![term(ZONE, &[("app", "web")])]))
        .build();
    assert_eq!(
        filter_all(&plugin(), &first, &snap),
        vec![ok(), affinity_fail()]
    );
}

#[test]
fn the_first_pod_exception_does_not_apply_once_a_group_exists_elsewhere() {
    let snap = Snapshot::from_node_infos(vec![
        node("n1", &[(ZONE, "z1")], vec![pod("e", &[("app", "web")])]),
        node("n2", &[(ZONE, "z2")], vec![]),
    ]);
    let p = pod("p", &[("app", "web")])
        .affinity(required(vec![term(ZONE, &[("app", "web")])]))
        .build();
    assert_eq!(
        filter_all(&plugin(), &p, &snap),
        vec![ok(), affinity_fail()]
    );
}

#[test]
fn the_first_pod_exception_needs_the_pod_to_match_all_its_terms() {
    let snap = Snapshot::from_node_infos(vec![node("n1", &[(ZONE, "z1")], vec![])]);
    let p = pod("p", &[("app", "web")])
        .affinity(required(vec![
            term(ZONE, &[("app", "web")]),
            term(ZONE, &[("tier", "db")]),
        ]))
        .build();
    assert_eq!(filter_all(&plugin(), &p, &snap), vec![affinity_fail()]);
}

#[test]
fn affinity_terms_are_anded_and_one_pod_must_match_them_all() {
    let terms = vec![
        term(ZONE, &[("app", "web")]),
        term(HOST, &[("tier", "front")]),
    ];
    let p = pod("p", &[]).affinity(required(terms)).build();
    // Two pods on the node, each matching one term: not enough.
    let split = Snapshot::from_node_infos(vec![node(
        "n1",
        &[(ZONE, "z1"), (HOST, "n1")],
        vec![pod("a", &[("app", "web")]), pod("b", &[("tier", "front")])],
    )]);
    assert_eq!(filter_all(&plugin(), &p, &split), vec![affinity_fail()]);
    // One pod matching both terms: every term's topology of that pod qualifies.
    let both = Snapshot::from_node_infos(vec![
        node(
            "n1",
            &[(ZONE, "z1"), (HOST, "n1")],
            vec![pod("a", &[("app", "web"), ("tier", "front")])],
        ),
        node("n2", &[(ZONE, "z1"), (HOST, "n2")], vec![]),
    ]);
    assert_eq!(
        filter_all(&plugin(), &p, &both),
        vec![ok(), affinity_fail()],
        "n2 shares the zone but not the hostname"
    );
}

// ---- required anti-affinity ----

#[test]
fn anti_affinity_rejects_the_topology_of_matching_pods() {
    let snap = Snapshot::from_node_infos(vec![
        node("n1", &[(ZONE, "z1")], vec![pod("e", &[("app", "web")])]),
        node("n2", &[(ZONE, "z1")], vec![]),
        node("n3", &[(ZONE, "z2")], vec![]),
        node("n4", &[], vec![]),
    ]);
    let p = pod("p", &[])
        .affinity(required_anti(vec![term(ZONE, &[("app", "web")])]))
        .build();
    assert_eq!(
        filter_all(&plugin(), &p, &snap),
        vec![anti_fail(), anti_fail(), ok(), ok()],
        "a node without the topology key is not constrained"
    );
    let by_host = pod("p", &[])
        .affinity(required_anti(vec![term(HOST, &[("app", "web")])]))
        .build();
    let snap = Snapshot::from_node_infos(vec![
        node(
            "n1",
            &[(ZONE, "z1"), (HOST, "n1")],
            vec![pod("e", &[("app", "web")])],
        ),
        node("n2", &[(ZONE, "z1"), (HOST, "n2")], vec![]),
    ]);
    assert_eq!(
        filter_all(&plugin(), &by_host, &snap),
        vec![anti_fail(), ok()]
    );
}

#[test]
fn anti_affinity_terms_each_reject_on_their_own() {
    let p = pod("p", &[])
        .affinity(required_anti(vec![
            term(ZONE, &[("app", "web")]),
            term(HOST, &[("app", "db")]),
        ]))
        .build();
    let snap = Snapshot::from_node_infos(vec![
        node(
            "n1",
            &[(ZONE, "z1"), (HOST, "n1")],
            vec![pod("db", &[("app", "db")])],
        ),
        node("n2", &[(ZONE, "z1"), (HOST, "n2")], vec![]),
        node(
            "n3",
            &[(ZONE, "z2"), (HOST, "n3")],
            vec![pod("web", &[("app", "web")])],
        ),
    ]);
    assert_eq!(
        filter_all(&plugin(), &p, &snap),
        vec![anti_fail(), ok(), anti_fail()]
    );
}

#[test]
fn affinity_and_anti_affinity_together() {
    let p = pod("p", &[])
        .affinity(
            Aff {
                required: vec![term(REGION, &[("service", "securityscan")])],
                required_anti: vec![term(ZONE, &[("service", "securityscan")])],
                ..Default::default()
            }
            .build(),
        )
        .build();
    let snap = Snapshot::from_node_infos(vec![
        node(
            "n1",
            &[(REGION, "r1"), (ZONE, "z1")],
            vec![pod("s", &[("service", "securityscan")])],
        ),
        node("n2", &[(REGION, "r1"), (ZONE, "z2")], vec![]),
        node("n3", &[(REGION, "r2"), (ZONE, "z3")], vec![]),
    ]);
    assert_eq!(
        filter_all(&plugin(), &p, &snap),
        vec![anti_fail(), ok(), affinity_fail()]
    );
}

#[test]
fn existing_pods_required_anti_affinity_is_enforced_symmetrically() {
    let guard =
        pod("guard", &[("app", "db")]).affinity(required_anti(vec![term(ZONE, &[("app", "web")])]));
    let snap = Snapshot::from_node_infos(vec![
        node("n1", &[(ZONE, "z1")], vec![guard]),
        node("n2", &[(ZONE, "z1")], vec![]),
        node("n3", &[(ZONE, "z2")], vec![]),
        node("n4", &[], vec![]),
    ]);
    let web = pod("p", &[("app", "web")]).build();
    assert_eq!(
        filter_all(&plugin(), &web, &snap),
        vec![existing_fail(), existing_fail(), ok(), ok()]
    );
    let other = pod("p", &[("app", "cache")]).build();
    assert_eq!(
        filter_all(&plugin(), &other, &snap),
        vec![ok(), ok(), ok(), ok()]
    );
}

#[test]
fn existing_anti_affinity_only_counts_in_the_existing_pods_namespaces() {
    let guard = PodInfo::test("team-a", "guard")
        .affinity(required_anti(vec![term(ZONE, &[("app", "web")])]));
    let snap = Snapshot::from_node_infos(vec![node("n1", &[(ZONE, "z1")], vec![guard])]);
    let same_ns = PodInfo::test("team-a", "p").label("app", "web").build();
    let other_ns = PodInfo::test("team-b", "p").label("app", "web").build();
    assert_eq!(
        filter_all(&plugin(), &same_ns, &snap),
        vec![existing_fail()]
    );
    assert_eq!(filter_all(&plugin(), &other_ns, &snap), vec![ok()]);
}

#[test]
fn the_pods_own_anti_affinity_is_reported_before_the_existing_pods() {
    let guard = pod("guard", &[("app", "web")])
        .affinity(required_anti(vec![term(ZONE, &[("app", "web")])]));
    let snap = Snapshot::from_node_infos(vec![node("n1", &[(ZONE, "z1")], vec![guard])]);
    let p = pod("p", &[("app", "web")])
        .affinity(required_anti(vec![term(ZONE, &[("app", "web")])]))
        .build();
    assert_eq!(filter_all(&plugin(), &p, &snap), vec![anti_fail()]);
}

// ---- namespaces ----

#[test]
fn listed_namespaces_replace_the_pods_own() {
    let t = k8s::PodAffinityTerm {
        namespaces: Some(vec!["other".into()]),
        ..term(ZONE, &[("app", "web")])
    };
    let p = pod("p", &[]).affinity(required_anti(vec![t])).build();
    let snap = Snapshot::from_node_infos(vec![
        node(
            "n1",
            &[(ZONE, "z1")],
            vec![pod("same-ns", &[("app", "web")])],
        ),
        node(
            "n2",
            &[(ZONE, "z2")],
            vec![PodInfo::test("other", "e").label("app", "web")],
        ),
    ]);
    assert_eq!(filter_all(&plugin(), &p, &snap), vec![ok(), anti_fail()]);
}

#[test]
fn namespace_selector_selects_namespaces_by_their_labels() {
    let t = k8s::PodAffinityTerm {
        namespace_selector: Some(selector(&[("team", "a")])),
        ..term(ZONE, &[("app", "web")])
    };
    let p = pod("p", &[]).affinity(required_anti(vec![t])).build();
    let nodes = || {
        vec![
            node(
                "n1",
                &[(ZONE, "z1")],
                vec![PodInfo::test("a1", "e").label("app", "web")],
            ),
            node(
                "n2",
                &[(ZONE, "z2")],
                vec![PodInfo::test("b1", "e").label("app", "web")],
            ),
            node("n3", &[(ZONE, "z3")], vec![pod("e", &[("app", "web")])]),
        ]
    };
    let snap = Snapshot::from_node_infos(nodes()).with_namespaces([
        ("a1", &[("team", "a")][..]),
        ("b1", &[("team", "b")][..]),
        ("default", &[][..]),
    ]);
    assert_eq!(
        filter_all(&plugin(), &p, &snap),
        vec![anti_fail(), ok(), ok()],
        "with a selector and no list, the pod's own namespace is not implied"
    );

    let everything = k8s::PodAffinityTerm {
        namespace_selector: Some(meta::LabelSelector::default()),
        ..term(ZONE, &[("app", "web")])
    };
    let p = pod("p", &[])
        .affinity(required_anti(vec![everything]))
        .build();
    assert_eq!(
        filter_all(&plugin(), &p, &Snapshot::from_node_infos(nodes())),
        vec![anti_fail(), anti_fail(), anti_fail()],
        "an empty selector covers every namespace, known or not"
    );

    let listed_and_selected = k8s::PodAffinityTerm {
        namespaces: Some(vec!["default".into()]),
        namespace_selector: Some(selector(&[("team", "b")])),
        ..term(ZONE, &[("app", "web")])
    };
    let p = pod("p", &[])
        .affinity(required_anti(vec![listed_and_selected]))
        .build();
    assert_eq!(
        filter_all(&plugin(), &p, &snap),
        vec![ok(), anti_fail(), anti_fail()],
        "listed namespaces and selected namespaces are ORed"
    );
}

#[test]
fn existing_pods_namespace_selector_is_matched_against_the_incoming_pods_namespace() {
    let guard =
        PodInfo::test("infra", "guard").affinity(required_anti(vec![k8s::PodAffinityTerm {
            namespace_selector: Some(selector(&[("tier", "untrusted")])),
            ..term(HOST, &[("app", "web")])
        }]));
    let snap = Snapshot::from_node_infos(vec![node("n1", &[(HOST, "n1")], vec![guard])])
        .with_namespaces([
            ("sandbox", &[("tier", "untrusted")][..]),
            ("prod", &[("tier", "trusted")][..]),
        ]);
    let untrusted = PodInfo::test("sandbox", "p").label("app", "web").build();
    let trusted = PodInfo::test("prod", "p").label("app", "web").build();
    let unknown = PodInfo::test("gone", "p").label("app", "web").build();
    assert_eq!(
        filter_all(&plugin(), &untrusted, &snap),
        vec![existing_fail()]
    );
    assert_eq!(filter_all(&plugin(), &trusted, &snap), vec![ok()]);
    assert_eq!(filter_all(&plugin(), &unknown, &snap), vec![ok()]);
}

#[test]
fn match_label_keys_limit_anti_affinity_to_the_same_revision() {
    let t = k8s::PodAffinityTerm {
        match_label_keys: Some(vec!["pod-template-hash".into()]),
        ..term(HOST, &[("app", "web")])
    };
    let replica = |name: &str, hash: &str| {
        pod(name, &[("app", "web"), ("pod-template-hash", hash)])
            .affinity(required_anti(vec![t.clone()]))
    };
    let snap = Snapshot::from_node_infos(vec![
        node("n1", &[(HOST, "n1")], vec![replica("old", "v1")]),
        node("n2", &[(HOST, "n2")], vec![replica("new", "v2")]),
    ]);
    let p = replica("p", "v2").build();
    assert_eq!(filter_all(&plugin(), &p, &snap), vec![ok(), anti_fail()]);

    let m = k8s::PodAffinityTerm {
        mismatch_label_keys: Some(vec!["tenant".into()]),
        ..term(HOST, &[])
    };
    let tenant = |name: &str, t: &str| pod(name, &[("tenant", t)]);
    let snap = Snapshot::from_node_infos(vec![
        node("n1", &[(HOST, "n1")], vec![tenant("mine", "a")]),
        node("n2", &[(HOST, "n2")], vec![tenant("theirs", "b")]),
    ]);
    let p = tenant("p", "a").affinity(required_anti(vec![m])).build();
    assert_eq!(
        filter_all(&plugin(), &p, &snap),
        vec![ok(), anti_fail()],
        "mismatchLabelKeys: avoid nodes running other tenants"
    );
}

// ---- PreFilter extensions ----

fn counts(state: &CycleState) -> (TopologyMap, TopologyMap, TopologyMap) {
    let s = state.read::<PreFilterState>().unwrap();
    (
        s.existing_anti_affinity.clone(),
        s.affinity.clone(),
        s.anti_affinity.clone(),
    )
}

#[test]
fn add_pod_then_remove_pod_restores_the_state_and_filter_results() {
    let pl = plugin();
    let nodes = vec![
        node(
            "n1",
            &[(ZONE, "z1"), (HOST, "n1")],
            vec![pod("db", &[("app", "db")])],
        ),
        node("n2", &[(ZONE, "z1"), (HOST, "n2")], vec![]),
        node("n3", &[(ZONE, "z2"), (HOST, "n3")], vec![]),
    ];
    let snap = Snapshot::from_node_infos(nodes);
    let p = pod("p", &[("app", "web")])
        .affinity(
            Aff {
                required: vec![term(ZONE, &[("app", "db")])],
                required_anti: vec![term(HOST, &[("app", "web")])],
                ..Default::default()
            }
            .build(),
        )
        .build();
    let mut state = CycleState::new();
    assert!(pl.pre_filter(&mut state, &p, &snap).1.is_success());
    let before = counts(&state);
    let filter = |state: &CycleState| -> Vec<Status> {
        snap.node_infos()
            .iter()
            .map(|n| pl.filter(state, &p, n))
            .collect()
    };
    assert_eq!(filter(&state), vec![ok(), ok(), affinity_fail()]);

    // A web replica nominated to n2, a db pod to n3 and a guard with anti-affinity
    // against the pod on n1.
    let n2 = snap.get("n2").unwrap();
    let n3 = snap.get("n3").unwrap();
    let n1 = snap.get("n1").unwrap();
    let added = [
        (
            Arc::new(pod("web", &[("app", "web")]).node("n2").build()),
            n2,
        ),
        (
            Arc::new(pod("db2", &[("app", "db")]).node("n3").build()),
            n3,
        ),
        (
            Arc::new(
                pod("guard", &[])
                    .affinity(required_anti(vec![term(HOST, &[("app", "web")])]))
                    .node("n1")
                    .build(),
            ),
            n1,
        ),
    ];
    for (a, n) in &added {
        assert!(pl.add_pod(&mut state, &p, a, n).is_success());
    }
    assert_eq!(filter(&state), vec![existing_fail(), anti_fail(), ok()]);
    assert_ne!(counts(&state), before);
    for (a, n) in added.iter().rev() {
        assert!(pl.remove_pod(&mut state, &p, a, n).is_success());
    }
    assert_eq!(counts(&state), before);
    assert_eq!(filter(&state), vec![ok(), ok(), affinity_fail()]);

    // Removing the only pod PreFilter counted leaves no topology to join (and the pod is
    // not a db pod itself, so it cannot start the group).
    let db = Arc::clone(&n1.pods[0]);
    assert!(pl.remove_pod(&mut state, &p, &db, n1).is_success());
    assert_eq!(
        filter(&state),
        vec![affinity_fail(), affinity_fail(), affinity_fail()]
    );
    assert!(pl.add_pod(&mut state, &p, &db, n1).is_success());
    assert_eq!(counts(&state), before);
}

#[test]
fn add_pod_without_pre_filter_state_is_an_error() {
    let p = pod("p", &[]).build();
    let other = Arc::new(pod("o", &[]).build());
    let s = plugin().add_pod(&mut CycleState::new(), &p, &other, &node("n", &[], vec![]));
    assert_eq!(s.code(), Code::Error);
}

// ---- scoring ----

/// PreScore + Score + NormalizeScore over every node of the snapshot; `None` if skipped.
fn scores(pl: &InterPodAffinity, pod: &PodInfo, snapshot: &Snapshot) -> Option<Vec<i64>> {
    let mut state = CycleState::new();
    let s = pl.pre_score(&mut state, pod, snapshot.node_infos().into(), snapshot);
    if s.is_skip() {
        return None;
    }
    assert!(s.is_success(), "{s}");
    let mut out: Vec<NodeScore> = snapshot
        .node_infos()
        .iter()
        .map(|n| NodeScore {
            name: &n.name,
            score: pl.score(&state, pod, n).unwrap(),
        })
        .collect();
    assert!(pl.normalize_scores(&state, pod, &mut out).is_success());
    Some(out.into_iter().map(|s| s.score).collect())
}

fn raw_scores(pl: &InterPodAffinity, pod: &PodInfo, snapshot: &Snapshot) -> Vec<i64> {
    let mut state = CycleState::new();
    assert!(
        pl.pre_score(&mut state, pod, snapshot.node_infos().into(), snapshot)
            .is_success()
    );
    snapshot
        .node_infos()
        .iter()
        .map(|n| pl.score(&state, pod, n).unwrap())
        .collect()
}

fn region_nodes(pods1: Vec<crate::types::PodBuilder>) -> Snapshot {
    Snapshot::from_node_infos(vec![
        node("n1", &[(REGION, "china"), (HOST, "n1")], pods1),
        node("n2", &[(REGION, "india"), (HOST, "n2")], vec![]),
        node("n3", &[(REGION, "china"), (HOST, "n3")], vec![]),
        node("n4", &[], vec![]),
    ])
}

#[test]
fn pre_score_skips_without_any_terms_or_nodes() {
    let snap = region_nodes(vec![pod("e", &[("app", "web")])]);
    let p = pod("p", &[("app", "web")]).build();
    assert_eq!(scores(&plugin(), &p, &snap), None);
    let with_pref = pod("p", &[])
        .affinity(
            Aff {
                preferred: vec![weighted(5, term(REGION, &[("app", "web")]))],
                ..Default::default()
            }
            .build(),
        )
        .build();
    let s = plugin().pre_score(
        &mut CycleState::new(),
        &with_pref,
        Default::default(),
        &snap,
    );
    assert!(s.is_skip());
}

#[test]
fn preferred_affinity_scores_the_matching_topology() {
    let snap = region_nodes(vec![pod("e", &[("security", "S1")])]);
    let p = pod("p", &[])
        .affinity(
            Aff {
                preferred: vec![weighted(5, term(REGION, &[("security", "S1")]))],
                ..Default::default()
            }
            .build(),
        )
        .build();
    assert_eq!(raw_scores(&plugin(), &p, &snap), vec![5, 0, 5, 0]);
    assert_eq!(scores(&plugin(), &p, &snap), Some(vec![100, 0, 100, 0]));
}

#[test]
fn preferred_anti_affinity_scores_the_other_topologies_higher() {
    let snap = region_nodes(vec![pod("e", &[("security", "S1")])]);
    let p = pod("p", &[])
        .affinity(
            Aff {
                preferred_anti: vec![weighted(5, term(REGION, &[("security", "S1")]))],
                ..Default::default()
            }
            .build(),
        )
        .build();
    assert_eq!(raw_scores(&plugin(), &p, &snap), vec![-5, 0, -5, 0]);
    assert_eq!(scores(&plugin(), &p, &snap), Some(vec![0, 100, 0, 100]));
}

#[test]
fn weights_add_up_across_terms_and_pods_and_normalise_by_min_and_max() {
    let snap = Snapshot::from_node_infos(vec![
        node(
            "n1",
            &[(REGION, "r1"), (ZONE, "z1")],
            vec![
                pod("a", &[("app", "web")]),
                pod("b", &[("app", "web"), ("tier", "db")]),
            ],
        ),
        node(
            "n2",
            &[(REGION, "r1"), (ZONE, "z2")],
            vec![pod("c", &[("tier", "db")])],
        ),
        node(
            "n3",
            &[(REGION, "r2"), (ZONE, "z3")],
            vec![pod("d", &[("tier", "db")])],
        ),
    ]);
    let p = pod("p", &[])
        .affinity(
            Aff {
                preferred: vec![
                    weighted(8, term(REGION, &[("app", "web")])),
                    weighted(2, term(ZONE, &[("tier", "db")])),
                ],
                preferred_anti: vec![weighted(3, term(ZONE, &[("tier", "db")]))],
                ..Default::default()
            }
            .build(),
        )
        .build();
    // region r1 has two web pods: +16 on n1 and n2; tier=db per zone: +2 -3 per pod.
    assert_eq!(raw_scores(&plugin(), &p, &snap), vec![15, 15, -1]);
    assert_eq!(scores(&plugin(), &p, &snap), Some(vec![100, 100, 0]));

    let mut three = vec![
        NodeScore {
            name: "a",
            score: -3,
        },
        NodeScore {
            name: "b",
            score: 0,
        },
        NodeScore {
            name: "c",
            score: 6,
        },
    ];
    let mut state = CycleState::new();
    assert!(
        plugin()
            .pre_score(&mut state, &p, snap.node_infos().into(), &snap)
            .is_success()
    );
    assert!(
        plugin()
            .normalize_scores(&state, &p, &mut three)
            .is_success()
    );
    // 100 * 3/9 = 33.33 truncated.
    assert_eq!(
        three.iter().map(|s| s.score).collect::<Vec<_>>(),
        vec![0, 33, 100]
    );
}

#[test]
fn equal_scores_normalise_to_zero() {
    let snap = Snapshot::from_node_infos(vec![
        node("n1", &[(REGION, "r1")], vec![pod("a", &[("app", "web")])]),
        node("n2", &[(REGION, "r1")], vec![]),
    ]);
    let p = pod("p", &[])
        .affinity(
            Aff {
                preferred: vec![weighted(7, term(REGION, &[("app", "web")]))],
                ..Default::default()
            }
            .build(),
        )
        .build();
    assert_eq!(raw_scores(&plugin(), &p, &snap), vec![7, 7]);
    assert_eq!(scores(&plugin(), &p, &snap), Some(vec![0, 0]));
}

#[test]
fn existing_pods_preferred_terms_score_symmetrically() {
    let likes_web = pod("likes", &[]).affinity(
        Aff {
            preferred: vec![weighted(5, term(REGION, &[("app", "web")]))],
            ..Default::default()
        }
        .build(),
    );
    let avoids_web = pod("avoids", &[]).affinity(
        Aff {
            preferred_anti: vec![weighted(4, term(HOST, &[("app", "web")]))],
            ..Default::default()
        }
        .build(),
    );
    let snap = Snapshot::from_node_infos(vec![
        node("n1", &[(REGION, "r1"), (HOST, "n1")], vec![likes_web]),
        node("n2", &[(REGION, "r1"), (HOST, "n2")], vec![avoids_web]),
        node("n3", &[(REGION, "r2"), (HOST, "n3")], vec![]),
    ]);
    let web = pod("p", &[("app", "web")]).build();
    assert_eq!(raw_scores(&plugin(), &web, &snap), vec![5, 1, 0]);
    assert_eq!(scores(&plugin(), &web, &snap), Some(vec![100, 20, 0]));
    // Not selected by the existing pods' terms: nothing to score.
    let db = pod("p", &[("app", "db")]).build();
    assert_eq!(scores(&plugin(), &db, &snap), None);

    let ignoring = InterPodAffinity::new(&InterPodAffinityArgs {
        hard_pod_affinity_weight: 1,
        ignore_preferred_terms_of_existing_pods: true,
    })
    .unwrap();
    assert_eq!(
        scores(&ignoring, &web, &snap),
        None,
        "ignorePreferredTermsOfExistingPods skips pods without preferred terms"
    );
    let web_with_pref = pod("p", &[("app", "web")])
        .affinity(
            Aff {
                preferred: vec![weighted(1, term(HOST, &[("nothing", "here")]))],
                ..Default::default()
            }
            .build(),
        )
        .build();
    assert_eq!(
        raw_scores(&ignoring, &web_with_pref, &snap),
        vec![5, 1, 0],
        "with its own preferred terms the pod still gets the existing pods' preferences"
    );
}

#[test]
fn existing_pods_required_affinity_scores_with_the_hard_weight() {
    let needs_web = pod("needs", &[]).affinity(required(vec![term(REGION, &[("app", "web")])]));
    let snap = Snapshot::from_node_infos(vec![
        node("n1", &[(REGION, "r1")], vec![needs_web]),
        node("n2", &[(REGION, "r1")], vec![]),
        node("n3", &[(REGION, "r2")], vec![]),
    ]);
    let web = pod("p", &[("app", "web")]).build();
    let weighted_pl = |w: i32| {
        InterPodAffinity::new(&InterPodAffinityArgs {
            hard_pod_affinity_weight: w,
            ignore_preferred_terms_of_existing_pods: false,
        })
        .unwrap()
    };
    assert_eq!(raw_scores(&weighted_pl(1), &web, &snap), vec![1, 1, 0]);
    assert_eq!(raw_scores(&weighted_pl(70), &web, &snap), vec![70, 70, 0]);
    assert_eq!(
        scores(&weighted_pl(70), &web, &snap),
        Some(vec![100, 100, 0])
    );
    assert_eq!(
        scores(&weighted_pl(0), &web, &snap),
        None,
        "weight 0 ignores existing pods' required affinity"
    );
}

#[test]
fn preferred_terms_respect_namespaces() {
    let snap = Snapshot::from_node_infos(vec![
        node(
            "n1",
            &[(REGION, "r1")],
            vec![PodInfo::test("a1", "e").label("app", "web")],
        ),
        node("n2", &[(REGION, "r2")], vec![pod("e", &[("app", "web")])]),
    ])
    .with_namespaces([("a1", &[("team", "a")][..])]);
    let by_selector = pod("p", &[])
        .affinity(
            Aff {
                preferred: vec![weighted(
                    3,
                    k8s::PodAffinityTerm {
                        namespace_selector: Some(selector(&[("team", "a")])),
                        ..term(REGION, &[("app", "web")])
                    },
                )],
                ..Default::default()
            }
            .build(),
        )
        .build();
    assert_eq!(raw_scores(&plugin(), &by_selector, &snap), vec![3, 0]);
    let own_namespace = pod("p", &[])
        .affinity(
            Aff {
                preferred: vec![weighted(3, term(REGION, &[("app", "web")]))],
                ..Default::default()
            }
            .build(),
        )
        .build();
    assert_eq!(raw_scores(&plugin(), &own_namespace, &snap), vec![0, 3]);
}

#[test]
fn args_are_validated_and_defaulted() {
    assert!(InterPodAffinity::factory(None).is_ok());
    let bad = PluginArgs::InterPodAffinity(InterPodAffinityArgs {
        hard_pod_affinity_weight: 101,
        ignore_preferred_terms_of_existing_pods: false,
    });
    let e = InterPodAffinity::factory(Some(&bad)).err().unwrap();
    assert!(e.contains("not in valid range [0-100]"), "{e}");
}

#[test]
fn label_hasher_spreads_similar_values() {
    use std::hash::BuildHasher;
    let b = BuildHasherDefault::<LabelHasher>::default();
    let hashes: HashSet<u64> = (0..1000)
        .map(|i| b.hash_one(format!("node-{i:05}")) & 0xfff)
        .collect();
    assert!(
        hashes.len() > 700,
        "{} distinct low-bit buckets",
        hashes.len()
    );
}
