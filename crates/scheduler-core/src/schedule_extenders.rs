//! One pod's scheduling cycle cut around its extenders' filter and prioritize calls, so
//! that the caller can make those calls elsewhere while it schedules other pods (the
//! controller does, off its scheduling loop). Pure: each step is a function of the
//! framework, the snapshot it is given and what the previous step returned.
//!
//! ```text
//!            begin(pod, snapshot₁)
//!   PreFilter, Filter ──► Step::Decided(decision)     no interested extender, or no node
//!            │                                         passed Filter (PostFilter ran)
//!            ▼
//!   Step::Call(ExtenderCalls)  ── the caller runs ExtenderCalls::call (blocking; anywhere)
//!            │                    the extenders' filter calls in order, then, if more than
//!            ▼                    one node is left, their prioritize calls
//!   resume(ExtenderAnswer, snapshot₂)
//!   PreFilter again on snapshot₂; no node left: PostFilter; else PreScore, Score plus the
//!   answered extender scores, select; the chosen node re-checked with Filter on snapshot₂;
//!   Reserve, Permit, PreBind, Bind ──► Step::Decided(decision)
//!            │ the chosen node no longer fits, or the nominated node tried alone was
//!            ▼ filtered out by an extender
//!   begin again (another Step::Call)
//! ```
//!
//! The pod's decision combines filters and scores exactly as [`schedule_one`] does (which
//! calls the extenders in the cycle): plugin Filter, then each interested extender's filter
//! narrowing the nodes in config order, plugin scores plus each extender's scores times its
//! weight, scaled to the plugin range. What differs is only which snapshot each half sees:
//! Score and the final checks run against the snapshot of the moment the answer came back,
//! so pods placed meanwhile are counted; a chosen node they filled is never assumed.
//!
//! [`schedule_one`]: crate::schedule_one::schedule_one

use std::sync::Arc;

use crate::cache::Snapshot;
use crate::explain::Record;
use crate::framework::{
    CycleState, Diagnosis, Extender, ExtensionPoint, FeasibleSet, Framework, HostPriority,
    NominatedPods, Status, call_extender_priorities, calls_extenders,
    find_nodes_that_pass_extenders,
};
use crate::schedule_one::{
    Decision, Extenders, Filtered, SchedulingAlgorithm, effective_pod, not_scheduled,
    reserve_and_bind, schedule_one, schedule_one_recorded, unfit,
};
use crate::types::{NodeInfo, PodInfo};

/// Where a cut cycle stands.
#[derive(Debug)]
pub enum Step {
    /// Decided, as [`schedule_one`] would have (`Bind`, `Unschedulable` or `Error`).
    Decided(Decision),
    /// The extenders must be called: run [`ExtenderCalls::call`], then [`resume`].
    Call(ExtenderCalls),
}

/// The extender calls a cycle waits for, with what it needs to go on.
pub struct ExtenderCalls {
    /// The pod as popped, for a cycle started again.
    pod: Arc<PodInfo>,
    /// The pod the plugins and extenders see (RuntimeClass overhead included).
    effective: Arc<PodInfo>,
    extenders: Vec<Arc<dyn Extender>>,
    /// The nodes that passed Filter (kept: the calls outlive the cycle's snapshot).
    feasible: Vec<Arc<NodeInfo>>,
    /// The diagnosis of the nodes that did not (its `feasible` is left empty).
    filtered: Filtered,
}

impl std::fmt::Debug for ExtenderCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtenderCalls")
            .field("pod", self.pod.key())
            .field("nodes", &self.feasible.len())
            .field("first", &self.filtered.first)
            .finish_non_exhaustive()
    }
}

/// What the extenders answered, for [`resume`].
pub struct ExtenderAnswer {
    pod: Arc<PodInfo>,
    effective: Arc<PodInfo>,
    /// The nodes every filter call kept, or the error that fails the attempt.
    passed: Result<Vec<Arc<NodeInfo>>, Status>,
    diagnosis: Diagnosis,
    num_all_nodes: usize,
    first: bool,
    /// Each extender's prioritize answer (see `call_extender_priorities`); empty when no
    /// prioritize call was made (at most one node passed).
    priorities: Vec<Option<Vec<HostPriority>>>,
}

impl ExtenderCalls {
    /// The pod whose cycle waits.
    pub fn pod(&self) -> &Arc<PodInfo> {
        &self.pod
    }

    /// Makes the calls through the [`Extender`] trait, which blocks on each: upstream's
    /// `findNodesThatPassExtenders`, then, when more than one node is left, the
    /// prioritize calls of every interested extender.
    pub fn call(self) -> ExtenderAnswer {
        let ExtenderCalls {
            pod,
            effective,
            extenders,
            feasible,
            filtered,
        } = self;
        let mut diagnosis = filtered.diagnosis;
        let passed =
            find_nodes_that_pass_extenders(&extenders, &effective, feasible, &mut diagnosis);
        let priorities = match &passed {
            Ok(nodes) if nodes.len() > 1 => call_extender_priorities(&extenders, &effective, nodes),
            _ => Vec::new(),
        };
        ExtenderAnswer {
            pod,
            effective,
            passed,
            diagnosis,
            num_all_nodes: filtered.num_all_nodes,
            first: filtered.first,
            priorities,
        }
    }
}

impl ExtenderAnswer {
    /// The pod whose cycle waits.
    pub fn pod(&self) -> &Arc<PodInfo> {
        &self.pod
    }
}

/// Whether `pod`'s cycle in `fw` calls an extender's filter or prioritize, so that
/// [`begin`] may return [`Step::Call`].
pub fn needs_extender_calls(fw: &Framework, pod: &PodInfo) -> bool {
    calls_extenders(fw.extenders(), pod)
}

/// Starts `pod`'s cycle on `snapshot`: decided at once when no extender is called (the
/// cycle of [`schedule_one`]) or no node passes Filter; otherwise the extender calls to
/// make. With `rec`, the attempt is recorded into it (reset first) as
/// [`schedule_one_recorded`] does; give the same record to [`resume`], and render it
/// against the snapshot of the step that decided.
pub fn begin(
    fw: &Framework,
    alg: &mut SchedulingAlgorithm,
    pod: &Arc<PodInfo>,
    snapshot: &Snapshot,
    nominated: &NominatedPods,
    rec: Option<&mut Record>,
) -> Step {
    begin_from(fw, alg, pod, snapshot, nominated, rec, true)
}

fn begin_from(
    fw: &Framework,
    alg: &mut SchedulingAlgorithm,
    pod: &Arc<PodInfo>,
    snapshot: &Snapshot,
    nominated: &NominatedPods,
    mut rec: Option<&mut Record>,
    try_first: bool,
) -> Step {
    if !needs_extender_calls(fw, pod) {
        return Step::Decided(match rec {
            Some(r) => schedule_one_recorded(fw, alg, pod, snapshot, nominated, r),
            None => schedule_one(fw, alg, pod, snapshot, nominated),
        });
    }
    if let Some(r) = rec.as_deref_mut() {
        r.reset();
    }
    let effective = effective_pod(fw, pod, snapshot).unwrap_or_else(|| Arc::clone(pod));
    let mut state = CycleState::new();
    state.set_plugin_timer(alg.begin_cycle(fw));
    let deferred = Extenders::Deferred { try_first };
    match alg.filter_stage(
        fw,
        &mut state,
        &effective,
        snapshot,
        nominated,
        rec.as_deref_mut(),
        deferred,
    ) {
        Ok((mut filtered, _batch)) => {
            // The calls outlive this snapshot: keep the nodes, not positions in it.
            let feasible = std::mem::take(&mut filtered.feasible).into_nodes(snapshot);
            Step::Call(ExtenderCalls {
                pod: Arc::clone(pod),
                effective,
                extenders: fw.extenders().to_vec(),
                feasible,
                filtered,
            })
        }
        Err(e) => Step::Decided(not_scheduled(
            fw, alg, &state, &effective, snapshot, nominated, rec, true, e,
        )),
    }
}

/// Goes on with the cycle `answer` belongs to, on `snapshot` (the current one, which may
/// be newer than the one [`begin`] saw). See the module doc for the steps.
pub fn resume(
    fw: &Framework,
    alg: &mut SchedulingAlgorithm,
    answer: ExtenderAnswer,
    snapshot: &Snapshot,
    nominated: &NominatedPods,
    mut rec: Option<&mut Record>,
) -> Step {
    let ExtenderAnswer {
        pod,
        effective,
        passed,
        diagnosis,
        num_all_nodes,
        first,
        priorities,
    } = answer;
    let passed = match passed {
        Ok(p) => p,
        Err(s) => {
            return Step::Decided(Decision::Error {
                message: s.message(),
            });
        }
    };
    if passed.is_empty() && first {
        // The nominated node alone did not pass the extenders: every node now, as the
        // cycle does.
        return begin_from(fw, alg, &pod, snapshot, nominated, rec, false);
    }
    let mut state = CycleState::new();
    state.set_plugin_timer(alg.begin_cycle(fw));
    let start = alg.point_start();
    let (pre_result, status, _) = fw.run_pre_filter(&mut state, &effective, snapshot);
    alg.point_done(ExtensionPoint::PreFilter, status.code(), start);
    if !status.is_success() {
        // The cluster changed under the pod: its cycle again, from the start.
        return begin(fw, alg, &pod, snapshot, nominated, rec);
    }
    if passed.is_empty() {
        if let Some(r) = rec.as_deref_mut() {
            r.diagnosis = diagnosis.clone();
            r.filtered = true;
        }
        let e = unfit(&effective, num_all_nodes, diagnosis);
        return Step::Decided(not_scheduled(
            fw, alg, &state, &effective, snapshot, nominated, rec, true, e,
        ));
    }
    // The answered nodes as the snapshot has them now; one deleted meanwhile is gone.
    let nodes: Vec<Arc<NodeInfo>> = passed
        .iter()
        .filter_map(|n| snapshot.get(&n.name).cloned())
        .collect();
    // The nodes were read anew from the newer snapshot: Score reads them, not summaries.
    let filtered = Filtered {
        feasible: FeasibleSet::Nodes(nodes),
        diagnosis,
        num_all_nodes,
        first,
    };
    let batch = alg.begin_batch(fw, &effective, false);
    let answered = (!priorities.is_empty()).then_some(priorities.as_slice());
    let result = match alg.score_stage(
        fw,
        &mut state,
        &effective,
        snapshot,
        filtered,
        batch,
        rec.as_deref_mut(),
        answered,
    ) {
        Ok(r) => r,
        // Every answered node was deleted meanwhile.
        Err(crate::schedule_one::ScheduleError::NoNodes) => {
            return begin(fw, alg, &pod, snapshot, nominated, rec);
        }
        Err(e) => {
            return Step::Decided(not_scheduled(
                fw, alg, &state, &effective, snapshot, nominated, rec, true, e,
            ));
        }
    };
    // Pods placed since Filter ran may have taken the chosen node: check it again.
    let node = snapshot.get(&result.suggested_host);
    let narrowed_out = pre_result
        .and_then(|r| r.node_names)
        .is_some_and(|names| !names.contains(&result.suggested_host));
    let fits = node.is_some_and(|node| {
        let s = if nominated.is_empty() {
            fw.run_filter(&state, &effective, node)
        } else {
            fw.run_filter_with_nominated_pods(
                &state,
                &effective,
                node,
                nominated.for_node(&node.name),
            )
        };
        s.is_success()
    });
    if narrowed_out || !fits {
        return begin(fw, alg, &pod, snapshot, nominated, rec);
    }
    Step::Decided(reserve_and_bind(fw, alg, state, &effective, result))
}

#[cfg(test)]
mod tests;
