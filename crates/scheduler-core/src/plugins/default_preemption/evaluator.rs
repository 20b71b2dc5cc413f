//! The preemption evaluator (upstream `framework/preemption`): eligibility, the candidate
//! search over the nodes filtering found Unschedulable, the choice of one candidate, and the
//! result the caller acts on.
//!
//! The dry run evaluates nodes in parallel, in batches, starting at a random offset. Results
//! are consumed in node order and the search stops exactly where a sequential search would,
//! so the outcome does not depend on thread timing. Only nodes that hold at least one
//! lower-priority pod are copied and dry-run.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rayon::prelude::*;

use super::{
    DefaultPreemption, DisruptionUnits, NO_VICTIMS_MSG, NOT_HELPFUL_MSG, NodeVictims,
    earliest_start_of_top_victims, may_preempt, pod_eligible_to_preempt_others,
    select_victims_on_node,
};
use crate::cache::Snapshot;
use crate::explain::{Preemption, PreemptionNode, PreemptionOutcome, Victim};
use crate::framework::{
    Code, CycleState, Diagnosis, FitError, Framework, NodeToStatus, NominatedPods,
    PostFilterContext, PostFilterResult, Status,
};
use crate::types::{NodeInfo, PdbInfo, PodInfo};

/// A node where the preemptor fits once `victims` are gone.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub node: String,
    /// Most important first.
    pub victims: Vec<Arc<PodInfo>>,
    pub num_pdb_violations: usize,
}

/// What the dry run found.
#[derive(Debug, Default)]
pub(crate) struct DryRun {
    /// Candidates that break no budget first, then the others; each group in search order.
    pub candidates: Vec<Candidate>,
    /// Why each evaluated node is not a candidate.
    pub statuses: NodeToStatus,
    /// Internal errors (plugins failing), in search order.
    pub errors: Vec<String>,
    /// Nodes copied and evaluated with victims removed.
    pub dry_runs: usize,
}

/// The outcome of looking at one potential node.
enum NodeOutcome {
    Candidate(NodeVictims),
    Rejected(Status),
}

impl DefaultPreemption {
    /// Upstream `Evaluator.Preempt`, without the "preemption: " prefix.
    pub(super) fn preempt(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        ctx: &PostFilterContext<'_>,
    ) -> (Option<PostFilterResult>, Status) {
        // 1) Is the pod allowed to preempt?
        let nominated_node = pod.nominated_node_name.as_deref();
        let nominated_unresolvable = nominated_node
            .is_some_and(|n| code_of(ctx.statuses, n) == Code::UnschedulableAndUnresolvable);
        let nominated_info = nominated_node
            .and_then(|n| ctx.snapshot.get(n))
            .map(|n| &**n);
        if let Err(msg) =
            pod_eligible_to_preempt_others(pod, nominated_info, nominated_unresolvable)
        {
            if let Some(rec) = ctx.explain {
                lock(rec).not_eligible = Some(msg.to_string());
            }
            return (None, Status::unschedulable(msg));
        }

        // 2) Candidates.
        let num_all_nodes = ctx.snapshot.num_nodes();
        if num_all_nodes == 0 {
            return (None, Status::error("no nodes available"));
        }
        let dry = self.find_candidates(ctx.framework, state, pod, ctx);
        if let Some(rec) = ctx.explain {
            explain_dry_run(&mut lock(rec), ctx, &dry);
        }
        if dry.candidates.is_empty() {
            if !dry.errors.is_empty() {
                return (None, Status::error(aggregate(&dry.errors)));
            }
            let mut statuses = dry.statuses;
            statuses.set_absent(Status::unresolvable(NOT_HELPFUL_MSG));
            let fit = FitError {
                pod: pod.key().clone(),
                num_all_nodes,
                diagnosis: Diagnosis {
                    node_to_status: statuses,
                    ..Diagnosis::default()
                },
            };
            // A result without a node clears the pod's nomination.
            return (
                Some(PostFilterResult::default()),
                Status::unschedulable(fit.to_string()),
            );
        }

        // 3) Extenders that support preemption may veto nodes or shrink their victims.
        let mut candidates = dry.candidates;
        let extenders = ctx.framework.extenders();
        if !extenders.is_empty() {
            match extenders_on_candidates(extenders, pod, candidates) {
                Ok(c) => candidates = c,
                Err(s) => return (None, s),
            }
            if candidates.is_empty() {
                return (None, Status::unschedulable(NO_CANDIDATE_MSG));
            }
        }
        // 4) Pick one.
        let best = select_candidate(candidates);

        // 5) Lower-priority pods nominated to that node may not fit any more: let them retry.
        let nominations_to_clear = ctx
            .nominated
            .for_node(&best.node)
            .iter()
            .filter(|p| p.priority < pod.priority)
            .map(|p| p.key().clone())
            .collect();
        let result = PostFilterResult {
            nominated_node_name: Some(best.node),
            victims: best.victims.iter().map(|p| p.key().clone()).collect(),
            nominations_to_clear,
        };
        (Some(result), Status::success())
    }

    /// Upstream `findCandidates`: the nodes filtering found Unschedulable (not Unresolvable),
    /// searched from a random offset for the configured number of candidates.
    pub(crate) fn find_candidates(
        &self,
        fw: &Framework,
        state: &CycleState,
        pod: &PodInfo,
        ctx: &PostFilterContext<'_>,
    ) -> DryRun {
        let potential = nodes_with_code(ctx.statuses, ctx.snapshot, Code::Unschedulable);
        if potential.is_empty() {
            return DryRun::default();
        }
        let (offset, num_candidates) = self.offset_and_num_candidates(potential.len());
        let units = self.disruption_units(ctx.snapshot);
        dry_run_preemption(
            fw,
            state,
            pod,
            &potential,
            ctx.nominated,
            ctx.snapshot.pdbs(),
            &units,
            offset,
            num_candidates,
        )
    }
}

/// Upstream's message when extenders left no candidate.
pub const NO_CANDIDATE_MSG: &str = "no candidate node for preemption";

/// Upstream `callExtenders`: the candidates as the extenders leave them, in search order.
fn extenders_on_candidates(
    extenders: &[Arc<dyn crate::framework::Extender>],
    pod: &PodInfo,
    candidates: Vec<Candidate>,
) -> Result<Vec<Candidate>, Status> {
    let order: Vec<String> = candidates.iter().map(|c| c.node.clone()).collect();
    let map = candidates
        .into_iter()
        .map(|c| {
            let v = crate::framework::ExtenderVictims {
                pods: c.victims,
                num_pdb_violations: c.num_pdb_violations as i64,
            };
            (c.node, v)
        })
        .collect();
    let mut kept = crate::framework::call_extenders_for_preemption(extenders, pod, map)?;
    Ok(order
        .into_iter()
        .filter_map(|node| {
            let v = kept.remove(&node)?;
            Some(Candidate {
                node,
                victims: v.pods,
                num_pdb_violations: usize::try_from(v.num_pdb_violations).unwrap_or(0),
            })
        })
        .collect())
}

/// A node's filter status code; nodes without one count as unresolvable (upstream's default
/// absent status).
fn code_of(statuses: &NodeToStatus, node: &str) -> Code {
    statuses
        .get(node)
        .map_or(Code::UnschedulableAndUnresolvable, Status::code)
}

/// Nodes whose status has `code`, in snapshot order (upstream walks a map when only explicit
/// statuses match, so its order is arbitrary; the offset randomises the start anyway).
fn nodes_with_code<'a>(
    statuses: &NodeToStatus,
    snapshot: &'a Snapshot,
    code: Code,
) -> Vec<&'a Arc<NodeInfo>> {
    snapshot
        .node_infos()
        .iter()
        .filter(|n| code_of(statuses, &n.name) == code)
        .collect()
}

/// Upstream `DryRunPreemption`. Stops once at least one budget-respecting candidate was found
/// and the candidates number at least `num_candidates`; each group holds at most
/// `num_candidates`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn dry_run_preemption(
    fw: &Framework,
    state: &CycleState,
    pod: &PodInfo,
    potential: &[&Arc<NodeInfo>],
    nominated: &NominatedPods,
    pdbs: &[Arc<PdbInfo>],
    units: &DisruptionUnits,
    offset: usize,
    num_candidates: usize,
) -> DryRun {
    let n = potential.len();
    let mut out = DryRun::default();
    let mut non_violating: Vec<Candidate> = Vec::new();
    let mut violating: Vec<Candidate> = Vec::new();
    // Enough work per batch to keep every thread busy without overshooting much.
    let min_batch = rayon::current_num_threads() * 4;
    let mut next = 0;
    'search: while next < n {
        let found = non_violating.len() + violating.len();
        let end = n.min(next + num_candidates.saturating_sub(found).max(min_batch));
        let outcomes: Vec<(usize, NodeOutcome, bool)> = (next..end)
            .into_par_iter()
            .map(|i| {
                let node = potential[(offset + i) % n];
                let (o, copied) = check_node(fw, state, pod, node, nominated, pdbs, units);
                (i, o, copied)
            })
            .collect();
        out.dry_runs += outcomes.iter().filter(|(_, _, copied)| *copied).count();
        for (i, outcome, _) in outcomes {
            let node = potential[(offset + i) % n];
            match outcome {
                NodeOutcome::Candidate(v) => {
                    let c = Candidate {
                        node: node.name.clone(),
                        victims: v.pods,
                        num_pdb_violations: v.num_pdb_violations,
                    };
                    let list = if c.num_pdb_violations == 0 {
                        &mut non_violating
                    } else {
                        &mut violating
                    };
                    if list.len() < num_candidates {
                        list.push(c);
                    }
                    if !non_violating.is_empty()
                        && non_violating.len() + violating.len() >= num_candidates
                    {
                        break 'search;
                    }
                }
                NodeOutcome::Rejected(status) => {
                    if status.code() == Code::Error {
                        out.errors.push(status.message());
                    }
                    out.statuses.set(node.name.clone(), status);
                }
            }
        }
        next = end;
    }
    non_violating.extend(violating);
    out.candidates = non_violating;
    out
}

/// Dry-runs one node on private copies; the bool says whether the node had to be copied.
fn check_node(
    fw: &Framework,
    state: &CycleState,
    pod: &PodInfo,
    node: &Arc<NodeInfo>,
    nominated: &NominatedPods,
    pdbs: &[Arc<PdbInfo>],
    units: &DisruptionUnits,
) -> (NodeOutcome, bool) {
    // Without a single lower-priority pod the node cannot change: no copy needed.
    if !node.pods.iter().any(|p| may_preempt(pod, p)) {
        return (
            NodeOutcome::Rejected(Status::unresolvable(NO_VICTIMS_MSG)),
            false,
        );
    }
    let mut node_copy = Arc::new(NodeInfo::clone(node));
    let mut state_copy = state.clone();
    let outcome = match select_victims_on_node(
        fw,
        &mut state_copy,
        pod,
        &mut node_copy,
        nominated.for_node(&node.name),
        pdbs,
        units,
    ) {
        Ok(v) if v.pods.is_empty() => NodeOutcome::Rejected(Status::error(format!(
            "expected at least one victim pod on node {:?}",
            node.name
        ))),
        Ok(v) => NodeOutcome::Candidate(v),
        Err(s) => NodeOutcome::Rejected(s),
    };
    (outcome, true)
}

/// Shifting every priority by 2^31 makes all terms positive, so a node with a few
/// negative-priority victims does not beat one with fewer of the same priority.
const SHIFT: i64 = i32::MAX as i64 + 1;

/// The ordered criteria of [`select_candidate`]: higher is better; each with the words an
/// explanation uses when a candidate loses on it.
/// How a candidate scores on one criterion, and the words for losing on it.
type Criterion = (fn(&Candidate) -> i64, &'static str);

const CRITERIA: [Criterion; 5] = [
    (
        |c| -(c.num_pdb_violations as i64),
        "more PodDisruptionBudget violations",
    ),
    (
        |c| -i64::from(c.victims[0].priority),
        "a higher-priority top victim",
    ),
    (
        |c| {
            -c.victims
                .iter()
                .map(|p| i64::from(p.priority) + SHIFT)
                .sum::<i64>()
        },
        "a larger sum of victim priorities",
    ),
    (|c| -(c.victims.len() as i64), "more victims"),
    (
        |c| earliest_start_of_top_victims(&c.victims).unwrap_or(i64::MIN),
        "its top victims started earlier",
    ),
];

/// Why `c` lost to `best` in [`select_candidate`]: the first criterion on which they differ
/// (on every earlier one they tie, so that is where `c` left the pool).
pub fn why_not_chosen(c: &Candidate, best: &Candidate) -> String {
    for (score, words) in CRITERIA {
        let (a, b) = (score(c), score(best));
        if a != b {
            return format!("{words} than {}", best.node);
        }
    }
    format!(
        "equal to {} on every criterion, which came first in the search",
        best.node
    )
}

/// Upstream `SelectCandidate` with the default ordered criteria (`pickOneNodeForPreemption`):
/// fewest budget violations, then the lowest highest-priority victim, the smallest sum of
/// priorities, the fewest victims, the latest start among the highest-priority victims, and
/// finally the first candidate in search order.
pub fn select_candidate(mut candidates: Vec<Candidate>) -> Candidate {
    assert!(!candidates.is_empty(), "select_candidate needs a candidate");
    if candidates.len() == 1 {
        return candidates.swap_remove(0);
    }
    let mut pool: Vec<usize> = (0..candidates.len()).collect();
    for (score, _) in CRITERIA {
        let best = pool
            .iter()
            .map(|&i| score(&candidates[i]))
            .max()
            .expect("pool is never empty");
        pool.retain(|&i| score(&candidates[i]) == best);
        if pool.len() == 1 {
            break;
        }
    }
    candidates.swap_remove(pool[0])
}

/// Joins errors like upstream's aggregate: one error as is, several de-duplicated in brackets.
fn aggregate(errors: &[String]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for e in errors {
        if !seen.contains(&e.as_str()) {
            seen.push(e);
        }
    }
    if seen.len() == 1 {
        seen[0].to_string()
    } else {
        format!("[{}]", seen.join(", "))
    }
}

fn lock(m: &Mutex<Preemption>) -> MutexGuard<'_, Preemption> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Every node's part in the dry run, in snapshot order, and which candidate wins and why
/// the others lose.
fn explain_dry_run(rec: &mut Preemption, ctx: &PostFilterContext<'_>, dry: &DryRun) {
    let best = (!dry.candidates.is_empty()).then(|| select_candidate(dry.candidates.clone()));
    rec.nodes = ctx
        .snapshot
        .node_infos()
        .iter()
        .map(|n| {
            let status = ctx.statuses.get(&n.name);
            let outcome = if status.is_none_or(|s| s.code() != Code::Unschedulable) {
                PreemptionOutcome::NotHelpful {
                    reason: status
                        .map(Status::message)
                        .unwrap_or_else(|| NOT_HELPFUL_MSG.to_string()),
                }
            } else if let Some(c) = dry.candidates.iter().find(|c| c.node == n.name) {
                let chosen = best.as_ref().is_some_and(|b| b.node == c.node);
                PreemptionOutcome::Candidate {
                    victims: c
                        .victims
                        .iter()
                        .map(|v| Victim {
                            pod: v.key().to_string(),
                            priority: v.priority,
                        })
                        .collect(),
                    pdb_violations: c.num_pdb_violations,
                    chosen,
                    why_not_chosen: best
                        .as_ref()
                        .filter(|_| !chosen)
                        .map(|b| why_not_chosen(c, b)),
                }
            } else if let Some(s) = dry.statuses.get(&n.name) {
                PreemptionOutcome::NoCandidate {
                    reason: s.message(),
                }
            } else {
                PreemptionOutcome::NotTried
            };
            PreemptionNode {
                node: n.name.clone(),
                outcome,
            }
        })
        .collect();
}
