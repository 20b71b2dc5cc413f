//! Extenders in the cycle, with an in-memory fake: upstream's extender cases (filter, scores
//! weighted into the plugin range, ignorable failures, interest by managed resource,
//! preemption's veto and shrink) in ferrosched's terms.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::cache::Snapshot;
use crate::config::{self, load_str};
use crate::framework::{ProfileRegistry, Registry};
use crate::schedule_one::{Decision, SchedulingAlgorithm, schedule_one};

/// What the fake answers: nodes it rejects (unresolvable ones too), scores, or an error.
#[derive(Debug, Default)]
struct Fake {
    cfg: config::Extender,
    name: &'static str,
    reject: BTreeMap<String, String>,
    unresolvable: BTreeMap<String, String>,
    scores: BTreeMap<String, i64>,
    fail: Option<String>,
    /// Preemption: nodes vetoed, and the victims kept per node (by UID; absent = all).
    veto: BTreeSet<String>,
    keep: BTreeMap<String, Vec<String>>,
    calls: AtomicUsize,
    seen: Mutex<Vec<Vec<String>>>,
}

impl Fake {
    fn new(name: &'static str) -> Self {
        Fake {
            cfg: config::Extender {
                url_prefix: format!("http://{name}"),
                filter_verb: "filter".into(),
                prioritize_verb: "prioritize".into(),
                preempt_verb: "preempt".into(),
                weight: 1,
                ..Default::default()
            },
            name,
            ..Default::default()
        }
    }
    fn arc(self) -> Arc<dyn Extender> {
        Arc::new(self)
    }
}

impl Extender for Fake {
    fn config(&self) -> &config::Extender {
        &self.cfg
    }
    fn name(&self) -> &'static str {
        self.name
    }
    fn filter(&self, _: &PodInfo, nodes: &[Arc<NodeInfo>]) -> Result<ExtenderFilterResult, String> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.seen
            .lock()
            .unwrap()
            .push(nodes.iter().map(|n| n.name.clone()).collect());
        if let Some(e) = &self.fail {
            return Err(e.clone());
        }
        Ok(ExtenderFilterResult {
            node_names: nodes
                .iter()
                .filter(|n| !self.reject.contains_key(&n.name))
                .filter(|n| !self.unresolvable.contains_key(&n.name))
                .map(|n| n.name.clone())
                .collect(),
            failed: self.reject.clone(),
            failed_and_unresolvable: self.unresolvable.clone(),
        })
    }
    fn prioritize(
        &self,
        _: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> Result<Vec<HostPriority>, String> {
        if let Some(e) = &self.fail {
            return Err(e.clone());
        }
        Ok(nodes
            .iter()
            .map(|n| HostPriority {
                host: n.name.clone(),
                score: self.scores.get(&n.name).copied().unwrap_or(0),
            })
            .collect())
    }
    fn process_preemption(
        &self,
        _: &PodInfo,
        victims: &BTreeMap<String, ExtenderVictims>,
    ) -> Result<PreemptionAnswer, String> {
        if let Some(e) = &self.fail {
            return Err(e.clone());
        }
        Ok(victims
            .iter()
            .filter(|(n, _)| !self.veto.contains(*n))
            .map(|(n, v)| {
                let uids = self
                    .keep
                    .get(n)
                    .cloned()
                    .unwrap_or_else(|| v.pods.iter().map(|p| p.uid.clone()).collect());
                (n.clone(), (uids, v.num_pdb_violations))
            })
            .collect())
    }
}

fn nodes(n: usize) -> Vec<NodeInfo> {
    (1..=n)
        .map(|i| {
            NodeInfo::test(&format!("n{i}"))
                .cpu("4")
                .memory("8Gi")
                .pods(110)
                .build()
        })
        .collect()
}

fn registry(yaml: &str, extenders: &[Arc<dyn Extender>]) -> ProfileRegistry {
    let text = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n{yaml}"
    );
    let loaded = load_str(&text, "t").expect("config");
    let mut r = ProfileRegistry::new(&loaded.profiles, &Registry::in_tree()).expect("builds");
    r.set_extenders(extenders);
    r
}

fn run(extenders: &[Arc<dyn Extender>], pod: PodInfo, n: usize) -> Decision {
    let reg = registry("", extenders);
    let fw = reg.for_scheduler_name("").unwrap();
    let snap = Snapshot::from_node_infos(nodes(n));
    let mut alg = SchedulingAlgorithm::new(0, 7);
    schedule_one(fw, &mut alg, &Arc::new(pod), &snap, &Default::default())
}

fn pod() -> PodInfo {
    PodInfo::test("default", "p")
        .uid("uid-p")
        .cpu("100m")
        .build()
}

#[test]
fn filter_narrows_the_feasible_nodes() {
    let mut f = Fake::new("a");
    f.reject.insert("n1".into(), "n1 is full".into());
    f.reject.insert("n2".into(), "n2 is full".into());
    match run(&[f.arc()], pod(), 3) {
        Decision::Bind { node, .. } => assert_eq!(node, "n3"),
        d => panic!("{d:?}"),
    }
}

#[test]
fn filter_rejections_make_the_failed_scheduling_message() {
    let mut f = Fake::new("a");
    for n in ["n1", "n2"] {
        f.reject.insert(n.into(), "no free gpu".into());
    }
    f.unresolvable
        .insert("n3".into(), "gpu driver missing".into());
    // n3 in both: unresolvable wins, as upstream.
    f.reject.insert("n3".into(), "ignored".into());
    match run(&[f.arc()], pod(), 3) {
        Decision::Unschedulable {
            message,
            resolvable,
            ..
        } => {
            // Then DefaultPreemption's own verdict, as upstream's message has it.
            assert!(
                message.starts_with(
                    "0/3 nodes are available: 1 gpu driver missing, 2 no free gpu. preemption: "
                ),
                "{message}"
            );
            assert!(resolvable);
        }
        d => panic!("{d:?}"),
    }
}

#[test]
fn extenders_run_in_order_on_what_the_previous_left() {
    let mut a = Fake::new("a");
    a.reject.insert("n1".into(), "a says no".into());
    let b = Arc::new(Fake::new("b"));
    let exts: Vec<Arc<dyn Extender>> = vec![a.arc(), b.clone()];
    assert!(matches!(run(&exts, pod(), 3), Decision::Bind { .. }));
    assert_eq!(
        *b.seen.lock().unwrap(),
        vec![vec!["n2".to_string(), "n3".to_string()]]
    );
}

#[test]
fn failing_extender_fails_the_attempt_unless_ignorable() {
    let mut f = Fake::new("a");
    f.fail = Some("Post \"http://a/filter\": connection refused".into());
    match run(&[f.arc()], pod(), 3) {
        Decision::Error { message } => {
            assert_eq!(message, "Post \"http://a/filter\": connection refused")
        }
        d => panic!("{d:?}"),
    }
    let mut f = Fake::new("a");
    f.fail = Some("boom".into());
    f.cfg.ignorable = true;
    let mut g = Fake::new("g");
    g.reject.insert("n1".into(), "no".into());
    g.reject.insert("n2".into(), "no".into());
    match run(&[f.arc(), g.arc()], pod(), 3) {
        Decision::Bind { node, .. } => assert_eq!(node, "n3"),
        d => panic!("{d:?}"),
    }
}

#[test]
fn unknown_node_from_filter_is_an_error() {
    #[derive(Debug)]
    struct Liar(config::Extender);
    impl Extender for Liar {
        fn config(&self) -> &config::Extender {
            &self.0
        }
        fn name(&self) -> &'static str {
            "liar"
        }
        fn filter(&self, _: &PodInfo, _: &[Arc<NodeInfo>]) -> Result<ExtenderFilterResult, String> {
            Ok(ExtenderFilterResult {
                node_names: vec!["elsewhere".into()],
                ..Default::default()
            })
        }
        fn prioritize(
            &self,
            _: &PodInfo,
            _: &[Arc<NodeInfo>],
        ) -> Result<Vec<HostPriority>, String> {
            Ok(Vec::new())
        }
        fn process_preemption(
            &self,
            _: &PodInfo,
            _: &BTreeMap<String, ExtenderVictims>,
        ) -> Result<PreemptionAnswer, String> {
            Ok(BTreeMap::new())
        }
    }
    let l = Liar(Fake::new("l").cfg);
    match run(&[Arc::new(l)], pod(), 2) {
        Decision::Error { message } => {
            assert!(message.contains("not found in the input node list"))
        }
        d => panic!("{d:?}"),
    }
}

#[test]
fn scores_are_weighted_and_scaled_into_the_plugin_range() {
    let mut f = Fake::new("a");
    f.cfg.weight = 3;
    f.scores.insert("n2".into(), 10);
    f.scores.insert("n1".into(), 4);
    match run(&[f.arc()], pod(), 3) {
        Decision::Bind { node, result, .. } => {
            assert_eq!(node, "n2");
            // The snapshot `run` scheduled on, built again.
            let snap = Snapshot::from_node_infos(nodes(3));
            let col = |n: &str| {
                result
                    .breakdown(&snap, n)
                    .unwrap()
                    .scores
                    .iter()
                    .find(|(p, _)| *p == "a")
                    .map(|(_, s)| *s)
            };
            // score * weight * (100 / 10)
            assert_eq!(col("n2"), Some(300));
            assert_eq!(col("n1"), Some(120));
            assert_eq!(col("n3"), Some(0));
        }
        d => panic!("{d:?}"),
    }
}

#[test]
fn failing_prioritize_is_ignored() {
    let mut scored = Fake::new("a");
    scored.scores.insert("n3".into(), 10);
    let mut broken = Fake::new("b");
    broken.cfg.filter_verb.clear();
    broken.fail = Some("500".into());
    match run(&[broken.arc(), scored.arc()], pod(), 3) {
        Decision::Bind { node, .. } => assert_eq!(node, "n3"),
        d => panic!("{d:?}"),
    }
}

#[test]
fn managed_resources_decide_interest() {
    let mut f = Fake::new("gpu");
    f.cfg
        .managed_resources
        .push(config::ExtenderManagedResource {
            name: "example.com/gpu".into(),
            ignored_by_scheduler: false,
        });
    let plain = pod();
    let gpu = PodInfo::test("default", "g")
        .container(&[("example.com/gpu", "1")])
        .build();
    let init = PodInfo::test("default", "i")
        .init_container(&[("example.com/gpu", "1")])
        .build();
    assert!(!is_interested(&f.cfg, &plain));
    assert!(is_interested(&f.cfg, &gpu));
    assert!(is_interested(&f.cfg, &init));
    // No managed resources: every pod.
    assert!(is_interested(&Fake::new("x").cfg, &plain));
    let f = Arc::new(f);
    let exts: Vec<Arc<dyn Extender>> = vec![f.clone()];
    assert!(matches!(run(&exts, plain, 2), Decision::Bind { .. }));
    assert_eq!(f.calls.load(Ordering::Relaxed), 0);
}

#[test]
fn binder_is_the_interested_extender_with_a_bind_verb() {
    let mut b = Fake::new("b");
    b.cfg.bind_verb = "bind".into();
    b.cfg
        .managed_resources
        .push(config::ExtenderManagedResource {
            name: "example.com/gpu".into(),
            ignored_by_scheduler: false,
        });
    let exts = vec![Fake::new("a").arc(), b.arc()];
    let gpu = PodInfo::test("default", "g")
        .container(&[("example.com/gpu", "1")])
        .build();
    assert_eq!(binder_for(&exts, &gpu).map(|e| e.name()), Some("b"));
    assert!(binder_for(&exts, &pod()).is_none());
}

#[test]
fn ignored_by_scheduler_resources_are_left_to_the_extender() {
    let yaml = "extenders:\n- managedResources:\n  - name: example.com/gpu\n    ignoredByScheduler: true\n";
    let reg = registry(yaml, &[]);
    let fw = reg.for_scheduler_name("").unwrap();
    let snap = Snapshot::from_node_infos(nodes(1));
    let gpu = PodInfo::test("default", "g")
        .container(&[("example.com/gpu", "1")])
        .build();
    let mut alg = SchedulingAlgorithm::new(0, 7);
    assert!(matches!(
        schedule_one(
            fw,
            &mut alg,
            &Arc::new(gpu.clone()),
            &snap,
            &Default::default()
        ),
        Decision::Bind { .. }
    ));
    // Without the extender NodeResourcesFit refuses it.
    let reg = registry("", &[]);
    let fw = reg.for_scheduler_name("").unwrap();
    match schedule_one(fw, &mut alg, &Arc::new(gpu), &snap, &Default::default()) {
        Decision::Unschedulable { message, .. } => {
            assert!(
                message.contains("Insufficient example.com/gpu"),
                "{message}"
            )
        }
        d => panic!("{d:?}"),
    }
}

fn victims() -> BTreeMap<String, ExtenderVictims> {
    let v = |uids: &[&str]| ExtenderVictims {
        pods: uids
            .iter()
            .map(|u| Arc::new(PodInfo::test("default", u).uid(u).build()))
            .collect(),
        num_pdb_violations: 0,
    };
    BTreeMap::from([
        ("n1".to_string(), v(&["a", "b"])),
        ("n2".to_string(), v(&["c"])),
    ])
}

#[test]
fn preemption_extender_vetoes_and_shrinks() {
    let mut f = Fake::new("p");
    f.veto.insert("n2".into());
    f.keep.insert("n1".into(), vec!["b".into()]);
    let out = call_extenders_for_preemption(&[f.arc()], &pod(), victims()).unwrap();
    assert_eq!(out.keys().collect::<Vec<_>>(), ["n1"]);
    assert_eq!(out["n1"].pods.len(), 1);
    assert_eq!(out["n1"].pods[0].uid, "b");
    // Without a preempt verb the extender is not asked.
    let mut f = Fake::new("p");
    f.cfg.preempt_verb.clear();
    f.veto.insert("n1".into());
    assert_eq!(
        call_extenders_for_preemption(&[f.arc()], &pod(), victims())
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn preemption_extender_keeping_a_node_without_victims() {
    let mut f = Fake::new("p");
    f.keep.insert("n1".into(), Vec::new());
    let e = call_extenders_for_preemption(&[f.arc()], &pod(), victims()).unwrap_err();
    assert_eq!(
        e.message(),
        "expected at least one victim pod on node \"n1\""
    );
    let mut f = Fake::new("p");
    f.cfg.ignorable = true;
    f.keep.insert("n1".into(), Vec::new());
    let out = call_extenders_for_preemption(&[f.arc()], &pod(), victims()).unwrap();
    assert_eq!(out.keys().collect::<Vec<_>>(), ["n2"]);
    let mut f = Fake::new("p");
    f.fail = Some("down".into());
    assert!(call_extenders_for_preemption(&[f.arc()], &pod(), victims()).is_err());
    let mut f = Fake::new("p");
    f.fail = Some("down".into());
    f.cfg.ignorable = true;
    assert_eq!(
        call_extenders_for_preemption(&[f.arc()], &pod(), victims())
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn preemption_through_default_preemption_respects_the_veto() {
    // One node full of a low-priority pod; the extender vetoes preempting there.
    let node = NodeInfo::test("n1")
        .cpu("1")
        .memory("1Gi")
        .pods(110)
        .build_node();
    let mut cache = crate::cache::Cache::new();
    cache.add_node(&node);
    let low = PodInfo::test("default", "low")
        .uid("low")
        .cpu("900m")
        .priority(0)
        .node("n1")
        .build();
    cache.add_pod(Arc::new(low)).unwrap();
    let mut snap = Snapshot::new();
    cache.update_snapshot(&mut snap);
    let high = PodInfo::test("default", "high")
        .uid("high")
        .cpu("500m")
        .priority(100)
        .build();
    let mut veto = Fake::new("p");
    veto.cfg.filter_verb.clear();
    veto.veto.insert("n1".into());
    let reg = registry("", &[veto.arc()]);
    let fw = reg.for_scheduler_name("").unwrap();
    let mut alg = SchedulingAlgorithm::new(0, 7);
    match schedule_one(
        fw,
        &mut alg,
        &Arc::new(high.clone()),
        &snap,
        &Default::default(),
    ) {
        Decision::Unschedulable {
            nomination,
            message,
            ..
        } => {
            assert!(nomination.is_none_or(|n| n.nominated_node_name.is_none()));
            assert!(
                message.contains("no candidate node for preemption"),
                "{message}"
            );
        }
        d => panic!("{d:?}"),
    }
    // The same without the veto preempts.
    let reg = registry("", &[Fake::new("p").arc()]);
    let fw = reg.for_scheduler_name("").unwrap();
    match schedule_one(fw, &mut alg, &Arc::new(high), &snap, &Default::default()) {
        Decision::Unschedulable { nomination, .. } => {
            let n = nomination.expect("preemption");
            assert_eq!(n.nominated_node_name.as_deref(), Some("n1"));
            assert_eq!(n.victims.len(), 1);
        }
        d => panic!("{d:?}"),
    }
}
