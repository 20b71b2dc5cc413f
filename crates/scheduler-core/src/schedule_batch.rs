//! The scheduling cycle's side of opportunistic batching (upstream `GetNodeHint` and
//! `StoreScheduleResults` as `schedulePod` calls them); the rules are in
//! [`framework::OpportunisticBatch`](crate::framework::OpportunisticBatch).

use std::sync::Arc;

use crate::cache::Snapshot;
use crate::framework::{BatchStats, CycleState, FeasibleNodes, Framework, PodSignature};
use crate::schedule_one::SchedulingAlgorithm;
use crate::types::{NodeInfo, PodInfo};

/// What one attempt carries from filtering to the choice.
#[derive(Debug, Default)]
pub(crate) struct AttemptBatch {
    attempt: u64,
    signature: Option<PodSignature>,
    hint: Option<String>,
}

impl SchedulingAlgorithm {
    /// Opportunistic batching (on by default, as upstream since 1.35).
    pub fn set_opportunistic_batching(&mut self, on: bool) {
        self.batching = on;
    }

    /// Hints given, used and lists dropped so far.
    pub fn batch_stats(&self) -> &BatchStats {
        &self.batch.stats
    }

    /// The counts since the last call (for metrics: the controller adds them after each
    /// attempt, labelled with the attempt's profile).
    pub fn take_batch_stats(&mut self) -> BatchStats {
        std::mem::take(&mut self.batch.stats)
    }

    /// Starts an attempt; the pod is signed when batching is on and `signable` (explained
    /// attempts are not batched, so their explanation covers every node).
    pub(crate) fn begin_batch(
        &mut self,
        fw: &Framework,
        pod: &PodInfo,
        signable: bool,
    ) -> AttemptBatch {
        let attempt = self.batch.begin_attempt();
        let signature = (self.batching && signable)
            .then(|| fw.sign_pod(pod))
            .flatten();
        AttemptBatch {
            attempt,
            signature,
            hint: None,
        }
    }

    /// After PreFilter: the hinted node, if the kept list applies to this pod.
    pub(crate) fn batch_hint(
        &mut self,
        fw: &Framework,
        state: &CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        b: &mut AttemptBatch,
    ) -> Option<Arc<NodeInfo>> {
        if !self.batching {
            return None;
        }
        let rejects = |name: &str| {
            snapshot
                .get(name)
                .map(|n| fw.run_filter(state, pod, n).is_rejected())
        };
        b.hint = self
            .batch
            .node_hint(fw.profile_name(), b.attempt, b.signature.as_ref(), rejects);
        b.hint.as_deref().and_then(|n| snapshot.get(n).cloned())
    }

    /// Records the choice: `scored` with their `totals` (empty with one feasible node).
    pub(crate) fn batch_store(
        &mut self,
        fw: &Framework,
        b: AttemptBatch,
        chosen: usize,
        feasible: FeasibleNodes<'_>,
        totals: &[i64],
    ) {
        if !self.batching {
            return;
        }
        // The rest in upstream's order: by total, ties at random; worst first. Built only
        // when it can be kept: an unsigned pod's list is dropped, and a used hint keeps the
        // old list (sorting ~500 names per attempt cost a third of an unbatchable attempt).
        let chosen_name = feasible[chosen].name.as_str();
        let keepable = b.signature.is_some() && b.hint.as_deref() != Some(chosen_name);
        let others = (keepable && feasible.len() > 1).then(|| {
            let mut rest: Vec<(i64, u64, &str)> = feasible
                .iter()
                .zip(totals)
                .enumerate()
                .filter(|(i, _)| *i != chosen)
                .map(|(_, (n, t))| (*t, self.batch_order.below(u64::MAX), n.name.as_str()))
                .collect();
            rest.sort_unstable();
            rest.into_iter().map(|(_, _, n)| n.to_string()).collect()
        });
        self.batch.store(
            fw.profile_name(),
            b.attempt,
            b.signature,
            b.hint.as_deref(),
            &feasible[chosen].name,
            others,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench_workloads::{identical_pod, node};
    use crate::cache::Cache;
    use crate::config;
    use crate::framework::{NominatedPods, ProfileRegistry, Registry};
    use crate::schedule_one::{Decision, assume_decision, schedule_one};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    use crate::bench_workloads::BATCHABLE_CONFIG as NO_DEFAULT_SPREAD;

    fn registry(text: &str) -> ProfileRegistry {
        let cfg = config::load_str(text, "test").expect("valid");
        ProfileRegistry::new(&cfg.profiles, &Registry::in_tree()).expect("builds")
    }

    /// A generated cluster: node sizes vary with `seed` (4 to 9 CPUs, so some take two
    /// identical pods and the node just chosen is not always full).
    fn cluster(seed: u64, nodes: usize) -> Cache {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut cache = Cache::new();
        for i in 0..nodes {
            let mut n = node(i);
            let cpu = Quantity(rng.u32(4..10).to_string());
            let mem = Quantity(format!("{}Gi", rng.u32(2..64)));
            let status = n.status.as_mut().expect("status");
            for list in [&mut status.allocatable, &mut status.capacity] {
                let list = list.as_mut().expect("set");
                list.insert("cpu".into(), cpu.clone());
                list.insert("memory".into(), mem.clone());
            }
            cache.add_node(&n);
        }
        cache
    }

    /// Over generated clusters of identical pods, every batched choice has the best total
    /// score the unbatched path finds on the same cluster at that moment (the same node
    /// unless scores tie), and batching did take hints.
    #[test]
    fn batched_choices_score_as_unbatched_ones() {
        let profiles = registry(NO_DEFAULT_SPREAD);
        let fw = profiles
            .for_scheduler_name("default-scheduler")
            .expect("profile");
        let nominated = NominatedPods::new();
        let mut hints = 0;
        for seed in 0..6 {
            let mut cache = cluster(seed, 60);
            let mut batched = SchedulingAlgorithm::new(0, seed);
            let mut plain = SchedulingAlgorithm::new(0, seed);
            plain.set_opportunistic_batching(false);
            let mut snapshot = Snapshot::new();
            for i in 0..90 {
                let pod = Arc::new(PodInfo::from_pod(&identical_pod(i)));
                cache.update_snapshot(&mut snapshot);
                let mut state = CycleState::new();
                let reference = plain.schedule_pod(fw, &mut state, &pod, &snapshot, &nominated);
                let d = schedule_one(fw, &mut batched, &pod, &snapshot, &nominated);
                match (d, reference) {
                    (
                        Decision::Bind {
                            node, pod, state, ..
                        },
                        Ok(r),
                    ) => {
                        if r.feasible_nodes > 1 {
                            let total = |name: &str| {
                                let i = r.scored(&snapshot).iter().position(|n| n.name == name);
                                i.map(|i| r.scores.totals[i])
                            };
                            let best = r.scores.totals.iter().max().copied();
                            assert_eq!(total(&node), best, "seed {seed} pod {i}");
                        } else {
                            assert_eq!(node, r.suggested_host, "seed {seed} pod {i}");
                        }
                        assume_decision(&mut cache, pod, &node, &state).expect("assume");
                    }
                    (Decision::Unschedulable { .. }, Err(_)) => {}
                    (d, r) => panic!("seed {seed} pod {i}: batched {d:?}, unbatched {r:?}"),
                }
            }
            hints += batched.batch_stats().hints_used();
        }
        assert!(hints > 100, "batching never applied: {hints} hints");
    }

    /// Pods with inter-pod affinity, spread constraints, DRA claims or malformed input are
    /// never signed; identical plain pods sign alike; the default profile (system default
    /// spreading) signs none.
    #[test]
    fn what_signs() {
        let profiles = registry(NO_DEFAULT_SPREAD);
        let fw = profiles
            .for_scheduler_name("default-scheduler")
            .expect("profile");
        let a = PodInfo::from_pod(&identical_pod(1));
        let b = PodInfo::from_pod(&identical_pod(2));
        assert!(fw.sign_pod(&a).is_some());
        assert_eq!(fw.sign_pod(&a), fw.sign_pod(&b));
        let bigger = PodInfo::test("batch", "p")
            .cpu("4")
            .label("app", "batch")
            .build();
        assert_ne!(fw.sign_pod(&a), fw.sign_pod(&bigger));
        let term = k8s_openapi::api::core::v1::PodAffinityTerm {
            topology_key: "zone".into(),
            ..Default::default()
        };
        let affine = PodInfo::test("batch", "p")
            .affinity(k8s_openapi::api::core::v1::Affinity {
                pod_anti_affinity: Some(k8s_openapi::api::core::v1::PodAntiAffinity {
                    required_during_scheduling_ignored_during_execution: Some(vec![term]),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .build();
        assert_eq!(fw.sign_pod(&affine), None);
        let spread = PodInfo::test("batch", "p")
            .edit(|p| {
                p.spec.get_or_insert_default().topology_spread_constraints =
                    Some(vec![Default::default()])
            })
            .build();
        assert_eq!(fw.sign_pod(&spread), None);
        let claims = PodInfo::test("batch", "p")
            .edit(|p| {
                p.spec.get_or_insert_default().resource_claims =
                    Some(vec![k8s_openapi::api::core::v1::PodResourceClaim {
                        name: "gpu".into(),
                        resource_claim_name: Some("gpu-claim".into()),
                        ..Default::default()
                    }])
            })
            .build();
        assert_eq!(fw.sign_pod(&claims), None);
        // Refusals reorder who signs first (the last refuser is asked first); a signable
        // pod's signature does not change with that order.
        let signed = fw.sign_pod(&a);
        for refused in [&spread, &affine, &claims, &spread] {
            assert_eq!(fw.sign_pod(refused), None);
            assert_eq!(fw.sign_pod(&a), signed);
            assert_eq!(fw.sign_pod(&b), signed);
        }
        let mut broken = a.clone();
        broken.problems.push("bad quantity".into());
        assert_eq!(fw.sign_pod(&broken), None);
        // The default profile spreads by default: nothing is signable.
        let cfg = config::from_flags(None, None).expect("default");
        let defaults = ProfileRegistry::new(&cfg.profiles, &Registry::in_tree()).expect("b");
        let fw = defaults.for_scheduler_name("default-scheduler").expect("p");
        assert_eq!(fw.sign_pod(&a), None);
    }
}
