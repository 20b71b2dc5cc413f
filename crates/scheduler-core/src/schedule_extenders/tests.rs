//! The cut cycle against `schedule_one`'s: same decisions, the re-check against a newer
//! snapshot, the nominated node tried alone first, errors.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use super::*;
use crate::config::{self, load_str};
use crate::framework::{
    ExtenderFilterResult, ExtenderVictims, PreemptionAnswer, ProfileRegistry, Registry,
};

/// Rejects `reject`, scores `scores` (0 elsewhere), or fails with `fail`; notes the nodes
/// each filter call was given.
#[derive(Debug, Default)]
struct Fake {
    cfg: config::Extender,
    reject: BTreeSet<String>,
    scores: BTreeMap<String, i64>,
    fail: Option<String>,
    seen: Mutex<Vec<Vec<String>>>,
}

impl Fake {
    fn new() -> Self {
        Fake {
            cfg: config::Extender {
                url_prefix: "http://fake".into(),
                filter_verb: "filter".into(),
                prioritize_verb: "prioritize".into(),
                weight: 3,
                ..Default::default()
            },
            ..Default::default()
        }
    }
}

impl Extender for Fake {
    fn config(&self) -> &config::Extender {
        &self.cfg
    }
    fn name(&self) -> &'static str {
        "http://fake"
    }
    fn filter(&self, _: &PodInfo, nodes: &[Arc<NodeInfo>]) -> Result<ExtenderFilterResult, String> {
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
                .filter(|n| !self.reject.contains(&n.name))
                .map(|n| n.name.clone())
                .collect(),
            failed: self
                .reject
                .iter()
                .map(|n| (n.clone(), "the extender says no".to_string()))
                .collect(),
            ..Default::default()
        })
    }
    fn prioritize(
        &self,
        _: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> Result<Vec<HostPriority>, String> {
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
        _: &BTreeMap<String, ExtenderVictims>,
    ) -> Result<PreemptionAnswer, String> {
        Ok(BTreeMap::new())
    }
}

fn registry(ext: Arc<dyn Extender>) -> ProfileRegistry {
    let text = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";
    let loaded = load_str(text, "t").expect("config");
    let mut r = ProfileRegistry::new(&loaded.profiles, &Registry::in_tree()).expect("builds");
    r.set_extenders(&[ext]);
    r
}

fn node(name: &str) -> NodeInfo {
    NodeInfo::test(name)
        .cpu("4")
        .memory("8Gi")
        .pods(110)
        .build()
}

fn snapshot(nodes: Vec<NodeInfo>) -> Snapshot {
    Snapshot::from_node_infos(nodes)
}

fn pod() -> Arc<PodInfo> {
    Arc::new(
        PodInfo::test("default", "p")
            .uid("uid-p")
            .cpu("100m")
            .build(),
    )
}

/// begin, call, resume until decided, all on `snap`.
fn run_cut(fw: &Framework, pod: &Arc<PodInfo>, snap: &Snapshot) -> Decision {
    let mut alg = SchedulingAlgorithm::new(100, 7);
    let mut step = begin(fw, &mut alg, pod, snap, &Default::default(), None);
    loop {
        match step {
            Step::Decided(d) => return d,
            Step::Call(c) => {
                step = resume(fw, &mut alg, c.call(), snap, &Default::default(), None);
            }
        }
    }
}

fn bound_to(d: &Decision) -> &str {
    match d {
        Decision::Bind { node, .. } => node,
        d => panic!("{d:?}"),
    }
}

#[test]
fn the_cut_cycle_decides_as_schedule_one() {
    let mut f = Fake::new();
    f.reject.insert("n1".into());
    f.scores.insert("n3".into(), 10);
    let reg = registry(Arc::new(f));
    let fw = reg.for_scheduler_name("").unwrap();
    let snap = snapshot((1..=4).map(|i| node(&format!("n{i}"))).collect());
    let cut = run_cut(fw, &pod(), &snap);
    let mut alg = SchedulingAlgorithm::new(100, 7);
    let whole = schedule_one(fw, &mut alg, &pod(), &snap, &Default::default());
    assert_eq!(bound_to(&cut), "n3");
    assert_eq!(bound_to(&whole), "n3");
    // The extender's column, weighted as in the whole cycle: 10 * 3 * 10.
    let (Decision::Bind { result: a, .. }, Decision::Bind { result: b, .. }) = (&cut, &whole)
    else {
        unreachable!()
    };
    assert_eq!(a.breakdown(&snap, "n3"), b.breakdown(&snap, "n3"));
    assert!(a.scores.plugins.contains(&"http://fake"));
    assert_eq!(a.feasible_nodes, 3);
}

#[test]
fn every_node_filtered_out_gives_schedule_ones_message() {
    let mut f = Fake::new();
    f.reject.extend(["n1".to_string(), "n2".to_string()]);
    let reg = registry(Arc::new(f));
    let fw = reg.for_scheduler_name("").unwrap();
    let snap = snapshot(vec![node("n1"), node("n2")]);
    let message = |d: Decision| match d {
        Decision::Unschedulable { message, .. } => message,
        d => panic!("{d:?}"),
    };
    let mut alg = SchedulingAlgorithm::new(100, 7);
    let whole = schedule_one(fw, &mut alg, &pod(), &snap, &Default::default());
    let cut = message(run_cut(fw, &pod(), &snap));
    assert!(
        cut.starts_with("0/2 nodes are available: 2 the extender says no."),
        "{cut}"
    );
    assert_eq!(cut, message(whole));
}

#[test]
fn a_failing_extender_fails_the_attempt_with_its_error() {
    let mut f = Fake::new();
    f.fail = Some("Post \"http://fake/filter\": context deadline exceeded".into());
    let reg = registry(Arc::new(f));
    let fw = reg.for_scheduler_name("").unwrap();
    let snap = snapshot(vec![node("n1"), node("n2")]);
    match run_cut(fw, &pod(), &snap) {
        Decision::Error { message } => {
            assert_eq!(
                message,
                "Post \"http://fake/filter\": context deadline exceeded"
            )
        }
        d => panic!("{d:?}"),
    }
}

#[test]
fn a_pod_no_extender_wants_is_decided_at_once() {
    let mut f = Fake::new();
    f.cfg.managed_resources = vec![config::ExtenderManagedResource {
        name: "example.com/gpu".into(),
        ignored_by_scheduler: true,
    }];
    let reg = registry(Arc::new(f));
    let fw = reg.for_scheduler_name("").unwrap();
    let snap = snapshot(vec![node("n1")]);
    let mut alg = SchedulingAlgorithm::new(100, 7);
    match begin(fw, &mut alg, &pod(), &snap, &Default::default(), None) {
        Step::Decided(d) => assert_eq!(bound_to(&d), "n1"),
        Step::Call(c) => panic!("{c:?}"),
    }
}

#[test]
fn a_chosen_node_filled_meanwhile_is_not_assumed_the_cycle_starts_again() {
    let mut f = Fake::new();
    f.scores.insert("n2".into(), 10);
    let reg = registry(Arc::new(f));
    let fw = reg.for_scheduler_name("").unwrap();
    let before = snapshot(vec![node("n1"), node("n2")]);
    let mut alg = SchedulingAlgorithm::new(100, 7);
    let Step::Call(calls) = begin(fw, &mut alg, &pod(), &before, &Default::default(), None) else {
        panic!("no calls");
    };
    let answer = calls.call();
    // While the extender answered, n2 was cordoned.
    let after = snapshot(vec![
        node("n1"),
        NodeInfo::test("n2").cpu("4").unschedulable().build(),
    ]);
    let again = match resume(fw, &mut alg, answer, &after, &Default::default(), None) {
        Step::Call(c) => c,
        Step::Decided(d) => panic!("assumed on a node that no longer fits: {d:?}"),
    };
    match resume(
        fw,
        &mut alg,
        again.call(),
        &after,
        &Default::default(),
        None,
    ) {
        Step::Decided(d) => assert_eq!(bound_to(&d), "n1"),
        Step::Call(c) => panic!("{c:?}"),
    }
}

#[test]
fn a_nominated_node_the_extender_rejects_sends_every_node_next() {
    let f = Arc::new({
        let mut f = Fake::new();
        f.reject.insert("n2".into());
        f
    });
    let reg = registry(Arc::clone(&f) as Arc<dyn Extender>);
    let fw = reg.for_scheduler_name("").unwrap();
    let snap = snapshot(vec![node("n1"), node("n2"), node("n3")]);
    let p = Arc::new(
        PodInfo::test("default", "p")
            .uid("uid-p")
            .cpu("100m")
            .nominated_node("n2")
            .build(),
    );
    let d = run_cut(fw, &p, &snap);
    assert_ne!(bound_to(&d), "n2");
    let seen = f.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0], ["n2"]);
    assert_eq!(seen[1].len(), 3, "{seen:?}");
}

#[test]
fn a_recorded_cut_cycle_explains_as_the_whole_cycle() {
    let mut f = Fake::new();
    f.reject.insert("n1".into());
    f.scores.insert("n3".into(), 10);
    let reg = registry(Arc::new(f));
    let fw = reg.for_scheduler_name("").unwrap();
    let snap = snapshot((1..=4).map(|i| node(&format!("n{i}"))).collect());
    let (mut cut_rec, mut whole_rec) = (Record::new(), Record::new());
    let mut alg = SchedulingAlgorithm::new(100, 7);
    let mut step = begin(
        fw,
        &mut alg,
        &pod(),
        &snap,
        &Default::default(),
        Some(&mut cut_rec),
    );
    let cut = loop {
        match step {
            Step::Decided(d) => break d,
            Step::Call(c) => {
                let answer = c.call();
                step = resume(
                    fw,
                    &mut alg,
                    answer,
                    &snap,
                    &Default::default(),
                    Some(&mut cut_rec),
                );
            }
        }
    };
    let mut alg = SchedulingAlgorithm::new(100, 7);
    let whole = crate::schedule_one::schedule_one_recorded(
        fw,
        &mut alg,
        &pod(),
        &snap,
        &Default::default(),
        &mut whole_rec,
    );
    let cut_explained = cut_rec.render(fw, &pod(), &snap, &cut);
    let whole_explained = whole_rec.render(fw, &pod(), &snap, &whole);
    assert_eq!(
        serde_json::to_value(&cut_explained).unwrap(),
        serde_json::to_value(&whole_explained).unwrap()
    );
    let text = serde_json::to_string(&cut_explained).unwrap();
    assert!(text.contains("the extender says no"), "{text}");
}
