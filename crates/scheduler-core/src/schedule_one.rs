//! One scheduling attempt for one pod (upstream: `schedule_one.go`): filter the nodes,
//! score the feasible ones, pick the best, reserve and permit, and decide how to bind.
//! Pure: the caller owns the cache, the queue and the API.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use rayon::prelude::*;

use crate::cache::{Cache, CacheError, Snapshot};
use crate::explain::{Explanation, Preemption, Record};
use crate::framework::{
    BindAction, Code, CycleState, CycleTimings, Diagnosis, ExtensionPoint, FeasibleNodes,
    FeasibleSet, FeasibleSummaries, FitError, Framework, HostPriority, NodePluginScores,
    NominatedPods, OpportunisticBatch, PluginTimer, PointTiming, PostFilterContext,
    PostFilterResult, ScoreDetail, ScoreTable, Status,
};
use crate::schedule_batch::AttemptBatch;
use crate::types::{NodeInfo, NodeSummary, PodInfo};

/// Upstream's floor on how many feasible nodes to look for before stopping.
pub const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
/// Upstream's floor on the adaptive percentage.
pub const MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND: i64 = 5;
/// The FailedScheduling message when the cluster has no nodes at all.
pub const NO_NODES_AVAILABLE_MSG: &str = "no nodes available to schedule pods";
/// Below this many nodes, filtering and scoring on one thread beats the cost of fanning out.
const PARALLEL_THRESHOLD: usize = 256;

/// Whether to fan filtering and scoring out over rayon's pool. Measured on 2 cores
/// (`ferrosched bench`, SchedulingBasic on 5,000 nodes): one thread took 96 us per pod, two
/// threads 168 us, because a filter costs well under a microsecond and waking threads costs
/// more. With more cores the split pays for itself on large clusters.
fn parallel(nodes: usize) -> bool {
    nodes >= PARALLEL_THRESHOLD && rayon::current_num_threads() > 2
}

/// How many feasible nodes to find before scoring (`percentageOfNodesToScore`; 0 = adaptive:
/// 50% minus 1% per 125 nodes, never below 5%, and never fewer than 100 nodes).
pub fn num_feasible_nodes_to_find(percentage: i32, num_all_nodes: usize) -> usize {
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND {
        return num_all_nodes;
    }
    let mut pct = i64::from(percentage);
    if pct == 0 {
        pct = (50 - num_all_nodes as i64 / 125).max(MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND);
    }
    let n = (num_all_nodes as i64 * pct / 100) as usize;
    n.max(MIN_FEASIBLE_NODES_TO_FIND)
}

/// `nodes[j]` for each `j` of `positions`, cloned. An `Arc` clone is a locked increment
/// of the count at the start of the node's allocation, and a locked instruction waits for
/// its cache line: with the nodes' own memory left unread by Filter (summaries), cloning
/// them one by one waited on one cache miss after the other (a fifth of a cycle at 50,000
/// nodes). The counts are read first, plain loads the processor overlaps, so the clones
/// find their lines in cache.
fn clone_nodes_at(nodes: &[Arc<NodeInfo>], positions: &[usize]) -> Vec<Arc<NodeInfo>> {
    let counts: usize = positions
        .iter()
        .map(|&j| Arc::strong_count(&nodes[j]))
        .fold(0, usize::wrapping_add);
    std::hint::black_box(counts);
    positions.iter().map(|&j| Arc::clone(&nodes[j])).collect()
}

/// Breaks score ties; seeded so tests and `simulate` runs are reproducible.
#[derive(Clone, Debug)]
pub struct TieBreaker(fastrand::Rng);

impl TieBreaker {
    pub fn new(seed: u64) -> Self {
        TieBreaker(fastrand::Rng::with_seed(seed))
    }

    /// Uniform in `0..n` (n > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.0.u64(..n)
    }
}

/// The scheduler's state that survives between attempts.
#[derive(Clone, Debug)]
pub struct SchedulingAlgorithm {
    /// Global `percentageOfNodesToScore`; a profile's own value wins.
    pub percentage_of_nodes_to_score: i32,
    next_start_node_index: usize,
    tie_breaker: TieBreaker,
    /// Time extension points (and sample plugins) for metrics; off unless asked for.
    record_metrics: bool,
    /// Cycles run while recording, for sampling plugin durations.
    cycles: u64,
    timings: CycleTimings,
    /// The plugin timer of the current cycle, when it is sampled.
    plugin_timer: Option<Arc<PluginTimer>>,
    pub(crate) batching: bool,
    pub(crate) batch: OpportunisticBatch,
    /// Orders the kept list's ties; apart from `tie_breaker`, so batching leaves the
    /// unbatched choices' random draws as they were.
    pub(crate) batch_order: TieBreaker,
    /// The topology domain a pod group cycle evaluates (upstream's assumed placement): only
    /// nodes whose label `.0` has value `.1` are candidates. `None` outside such cycles.
    placement: Option<(String, String)>,
    /// The placement's nodes, found on its first cycle: (the snapshot's node count, their
    /// positions in it). Finding them is a label lookup on every node of the cluster, which
    /// cost more than the cycle on the domain's nodes when done for each member.
    placement_nodes: Option<(usize, Vec<usize>)>,
    /// Placements of the CompositePodGroups above the group being evaluated (outermost
    /// first): every one of them holds too.
    outer: Vec<(String, String)>,
    /// A handed-back result's score table and feasible positions ([`recycle`]), whose
    /// vectors the next cycle fills instead of allocating its own.
    ///
    /// [`recycle`]: Self::recycle
    spare_scores: ScoreTable,
    spare_positions: Vec<usize>,
}

/// Plugin durations are sampled on one cycle in this many (upstream samples 10% of cycles).
pub const PLUGIN_METRICS_SAMPLE_EVERY: u64 = 10;
/// Filter and Score plugins (timed on every node) only on one cycle in this many: timing
/// each per-node call is as expensive as the calls (see `framework::timing`).
pub const NODE_PLUGIN_METRICS_SAMPLE_EVERY: u64 = 100;

impl SchedulingAlgorithm {
    pub fn new(percentage_of_nodes_to_score: i32, seed: u64) -> Self {
        SchedulingAlgorithm {
            percentage_of_nodes_to_score,
            next_start_node_index: 0,
            tie_breaker: TieBreaker::new(seed),
            batching: true,
            batch: OpportunisticBatch::default(),
            batch_order: TieBreaker::new(seed.wrapping_add(1)),
            record_metrics: false,
            cycles: 0,
            timings: CycleTimings::default(),
            plugin_timer: None,
            placement: None,
            placement_nodes: None,
            outer: Vec::new(),
            spare_scores: ScoreTable::default(),
            spare_positions: Vec::new(),
        }
    }

    /// Hands a result back once read: the next cycle reuses its vectors (score table,
    /// feasible positions), so a cycle allocates no buffers of the size of the feasible
    /// nodes. Optional; decisions are the same either way.
    pub fn recycle(&mut self, result: ScheduleResult) {
        self.spare_scores = result.scores;
        if let FeasibleSet::Positions(p) = result.scored_nodes {
            self.spare_positions = p;
        }
    }

    /// Adds a CompositePodGroup's placement under which the following cycles (and any inner
    /// placement) run, until [`pop_outer`](Self::pop_outer).
    /// A random order of `n` placements (upstream shuffles them when only some are
    /// evaluated, so which ones is not the generator's order).
    pub(crate) fn shuffled(&mut self, n: usize) -> Vec<usize> {
        let mut order: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = self.tie_breaker.below(i as u64 + 1) as usize;
            order.swap(i, j);
        }
        order
    }

    pub(crate) fn push_outer(&mut self, placement: (String, String)) {
        self.outer.push(placement);
        self.placement_nodes = None;
    }

    pub(crate) fn pop_outer(&mut self) {
        self.outer.pop();
        self.placement_nodes = None;
    }

    /// Whether `node` is inside every outer placement.
    pub(crate) fn in_outer(&self, node: &NodeInfo) -> bool {
        self.outer
            .iter()
            .all(|(k, v)| node.labels.get(k.as_str()).is_some_and(|l| l.as_str() == v))
    }

    /// Restricts the following cycles to the nodes whose label `.0` has value `.1` (a pod
    /// group cycle evaluating a placement), or lifts the restriction. The caller holds the
    /// cache while a placement is set, so the cluster's nodes (not their pods) stay as they
    /// are: the placement's nodes are found once, on its first cycle.
    pub(crate) fn set_placement(&mut self, placement: Option<(String, String)>) {
        self.placement = placement;
        self.placement_nodes = None;
    }

    /// [`set_placement`](Self::set_placement) with the placement's nodes already known: their
    /// `positions` in `snapshot`.
    pub(crate) fn set_placement_nodes(
        &mut self,
        placement: (String, String),
        snapshot: &Snapshot,
        positions: Vec<usize>,
    ) {
        self.placement = Some(placement);
        self.placement_nodes = Some((snapshot.node_infos().len(), positions));
    }

    /// The placement's nodes' positions in `snapshot`, when known for a snapshot of its size.
    fn placement_positions(&self, snapshot: &Snapshot) -> Option<&[usize]> {
        self.placement_nodes
            .as_ref()
            .filter(|(n, _)| *n == snapshot.node_infos().len())
            .map(|(_, p)| p.as_slice())
    }

    /// Finds the placement's nodes in `snapshot` unless known.
    fn find_placement_nodes(&mut self, snapshot: &Snapshot) {
        if self.placement.is_none() || self.placement_positions(snapshot).is_some() {
            return;
        }
        let positions = (snapshot.node_infos().iter().enumerate())
            .filter(|(_, n)| self.in_placement(n))
            .map(|(i, _)| i)
            .collect();
        self.placement_nodes = Some((snapshot.node_infos().len(), positions));
    }

    /// The nodes a cycle may choose from: every node, or those of the placement.
    pub(crate) fn candidates<'s>(
        &self,
        snapshot: &'s Snapshot,
    ) -> std::borrow::Cow<'s, [Arc<NodeInfo>]> {
        let all = snapshot.node_infos();
        match (&self.placement, self.placement_positions(snapshot)) {
            (None, _) if self.outer.is_empty() => std::borrow::Cow::Borrowed(all),
            (Some(_), Some(positions)) => {
                std::borrow::Cow::Owned(positions.iter().map(|&i| Arc::clone(&all[i])).collect())
            }
            _ => std::borrow::Cow::Owned(
                all.iter()
                    .filter(|n| self.in_placement(n))
                    .cloned()
                    .collect(),
            ),
        }
    }

    fn in_placement(&self, node: &NodeInfo) -> bool {
        self.placement
            .as_ref()
            .is_none_or(|(k, v)| node.labels.get(k.as_str()).is_some_and(|l| l.as_str() == v))
            && self.in_outer(node)
    }

    /// Times each cycle's extension points, and every plugin call on one cycle in
    /// [`PLUGIN_METRICS_SAMPLE_EVERY`] (the first included; Filter and Score plugins on one in
    /// [`NODE_PLUGIN_METRICS_SAMPLE_EVERY`]); read them with
    /// [`take_cycle_timings`](Self::take_cycle_timings) after each [`schedule_one`]. Off by
    /// default, as callers without metrics (simulate, bench) need none.
    pub fn set_record_metrics(&mut self, on: bool) {
        self.record_metrics = on;
    }

    /// What the last cycle measured (empty when not recording). Bind is not among the
    /// points: its cost is the caller's API call.
    pub fn take_cycle_timings(&mut self) -> CycleTimings {
        let mut t = std::mem::take(&mut self.timings);
        if let Some(timer) = self.plugin_timer.take() {
            t.plugins = timer.finish();
        }
        t
    }

    /// Starts a cycle's measurements; returns the plugin timer when the cycle is sampled.
    pub(crate) fn begin_cycle(&mut self, fw: &Framework) -> Option<Arc<PluginTimer>> {
        self.timings = CycleTimings::default();
        self.plugin_timer = None;
        if !self.record_metrics {
            return None;
        }
        self.cycles += 1;
        let n = self.cycles - 1;
        if n.is_multiple_of(PLUGIN_METRICS_SAMPLE_EVERY) {
            let node_loops = n.is_multiple_of(NODE_PLUGIN_METRICS_SAMPLE_EVERY);
            self.plugin_timer = Some(Arc::new(fw.plugin_timer(node_loops)));
        }
        self.plugin_timer.clone()
    }

    pub(crate) fn point_start(&self) -> Option<Instant> {
        self.record_metrics.then(Instant::now)
    }

    pub(crate) fn point_done(&mut self, point: ExtensionPoint, code: Code, start: Option<Instant>) {
        if let Some(start) = start {
            self.timings.points.push(PointTiming {
                point,
                code,
                took: start.elapsed(),
            });
        }
    }

    /// Where the next attempt starts scanning nodes, so every node gets its turn.
    pub fn next_start_node_index(&self) -> usize {
        self.next_start_node_index
    }
}

/// A successful placement decision.
#[derive(Clone, Debug, Default)]
pub struct ScheduleResult {
    pub suggested_host: String,
    /// Nodes the filters looked at (feasible + rejected).
    pub evaluated_nodes: usize,
    pub feasible_nodes: usize,
    /// The feasible nodes that were scored, and their scores (empty with one feasible node).
    /// Kept as positions in the cycle's snapshot when they can be: read them with
    /// [`scored`](Self::scored) and that snapshot.
    pub scored_nodes: FeasibleSet,
    pub scores: ScoreTable,
}

impl ScheduleResult {
    /// The scored nodes, in scoring order; `snapshot` is the one the cycle ran on.
    pub fn scored<'a>(&'a self, snapshot: &'a Snapshot) -> FeasibleNodes<'a> {
        self.scored_nodes.view(snapshot)
    }

    /// One scored node's per-plugin breakdown, for explanations and tests; `snapshot` is
    /// the one the cycle ran on.
    pub fn breakdown(&self, snapshot: &Snapshot, node: &str) -> Option<NodePluginScores> {
        let i = self.scored(snapshot).iter().position(|n| n.name == node)?;
        Some(self.scores.node(i, node))
    }

    /// Every scored node's breakdown, in scoring order (`snapshot` as for
    /// [`breakdown`](Self::breakdown)).
    pub fn breakdowns(&self, snapshot: &Snapshot) -> Vec<NodePluginScores> {
        self.scored(snapshot)
            .iter()
            .enumerate()
            .map(|(i, n)| self.scores.node(i, &n.name))
            .collect()
    }
}

/// Why `schedule_pod` found no node.
#[derive(Clone, Debug)]
pub enum ScheduleError {
    NoNodes,
    Unfit(Box<FitError>),
    /// A plugin failed (not a fit failure): retry with backoff.
    Internal(Status),
}

impl std::fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScheduleError::NoNodes => f.write_str(NO_NODES_AVAILABLE_MSG),
            ScheduleError::Unfit(e) => e.fmt(f),
            ScheduleError::Internal(s) => write!(f, "{}", s.message()),
        }
    }
}

/// What the caller should do with the pod after one attempt.
#[derive(Debug)]
pub enum Decision {
    /// Assume `pod` on `node` in the cache, then carry out `action` (the binding cycle).
    /// `pod` is the effective pod the plugins saw (RuntimeClass overhead included), which is
    /// what the cache must count.
    Bind {
        node: String,
        pod: Arc<PodInfo>,
        action: BindAction,
        result: ScheduleResult,
        state: CycleState,
    },
    /// No node fits. `message` is the FailedScheduling text; `nomination` comes from
    /// preemption: with a node, set nominatedNodeName, delete the victims and clear the
    /// listed lower-priority nominations; without one, clear the pod's nominatedNodeName.
    Unschedulable {
        message: String,
        /// Which plugins rejected the pod, for the queue; `None` when no plugin did (no
        /// nodes at all), which the queue treats like an error (backoff).
        diagnosis: Option<Diagnosis>,
        nomination: Option<PostFilterResult>,
        /// Whether PostFilter ran (no node passed Filter, in a profile with PostFilter
        /// plugins). Only then may the pod keep its nominatedNodeName (PostFilter returned no
        /// `nomination`); upstream clears it after every other failure: no nodes at all, no
        /// PostFilter plugins, a rejection at Reserve, Permit or PreBind.
        post_filter_ran: bool,
        /// DynamicResources' PostFilter: a claim whose allocation the controller removes
        /// (resourceVersion precondition) so that a later attempt can allocate it elsewhere.
        deallocate: Option<crate::types::dra::ClaimDeallocation>,
        /// False when only an external change can help (UnschedulableAndUnresolvable everywhere).
        resolvable: bool,
    },
    /// Internal error: requeue with backoff and report the message.
    Error { message: String },
}

impl SchedulingAlgorithm {
    /// Finds the best node for `pod` (upstream `schedulePod`).
    pub fn schedule_pod(
        &mut self,
        fw: &Framework,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        nominated: &NominatedPods,
    ) -> Result<ScheduleResult, ScheduleError> {
        self.schedule_pod_explained(fw, state, pod, snapshot, nominated, None)
    }

    /// [`schedule_pod`](Self::schedule_pod), recording the filter statuses, the scores and
    /// the selection into `rec` when given (compactly: see [`Record`]).
    pub fn schedule_pod_explained(
        &mut self,
        fw: &Framework,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        nominated: &NominatedPods,
        mut rec: Option<&mut Record>,
    ) -> Result<ScheduleResult, ScheduleError> {
        let (filtered, batch) = self.filter_stage(
            fw,
            state,
            pod,
            snapshot,
            nominated,
            rec.as_deref_mut(),
            Extenders::InCycle,
        )?;
        self.score_stage(fw, state, pod, snapshot, filtered, batch, rec, None)
    }

    /// The first half of [`schedule_pod_explained`](Self::schedule_pod_explained):
    /// PreFilter and Filter (and the extenders' filter calls, unless deferred). An empty
    /// result is the `Unfit` error.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn filter_stage(
        &mut self,
        fw: &Framework,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        nominated: &NominatedPods,
        mut rec: Option<&mut Record>,
        extenders: Extenders,
    ) -> Result<(Filtered, AttemptBatch), ScheduleError> {
        self.find_placement_nodes(snapshot);
        if let Some(r) = rec.as_deref_mut() {
            r.scope.placement.clone_from(&self.placement);
        }
        let num_all_nodes = match self.placement {
            None => snapshot.num_nodes(),
            Some(_) => self.candidates(snapshot).len(),
        };
        if num_all_nodes == 0 {
            return Err(ScheduleError::NoNodes);
        }
        // A placement's choices must not be reused outside it: no batching inside one.
        // Nor with extenders: a reused choice would skip their filter and scores.
        let signable = rec.is_none() && self.placement.is_none() && fw.extenders().is_empty();
        let mut batch = self.begin_batch(fw, pod, signable);
        let (feasible, diagnosis, first) = self.find_nodes_that_fit(
            fw,
            state,
            pod,
            snapshot,
            nominated,
            rec.as_deref_mut().map(|r| &mut r.scope),
            &mut batch,
            extenders,
        )?;
        if feasible.is_empty() {
            if let Some(r) = rec {
                // The decision hands the diagnosis on; the record keeps its own copy.
                r.diagnosis = diagnosis.clone();
                r.filtered = true;
            }
            return Err(unfit(pod, num_all_nodes, diagnosis));
        }
        let filtered = Filtered {
            feasible,
            diagnosis,
            num_all_nodes,
            first,
        };
        Ok((filtered, batch))
    }

    /// The second half of [`schedule_pod_explained`](Self::schedule_pod_explained): the
    /// feasible nodes scored (plugins, then the extenders: called now, or their `answered`
    /// priorities) and the best one chosen. One feasible node is chosen unscored.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn score_stage(
        &mut self,
        fw: &Framework,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        filtered: Filtered,
        batch: AttemptBatch,
        mut rec: Option<&mut Record>,
        answered: Option<&[Option<Vec<HostPriority>>]>,
    ) -> Result<ScheduleResult, ScheduleError> {
        let Filtered {
            feasible,
            diagnosis,
            ..
        } = filtered;
        if feasible.is_empty() {
            return Err(ScheduleError::NoNodes);
        }
        let nodes = feasible.view(snapshot);
        // Read in place from the snapshot, when the nodes are positions in it.
        let summaries = feasible.summaries(snapshot);
        let evaluated_nodes = nodes.len() + diagnosis.node_to_status.len();
        if let Some(r) = rec.as_deref_mut() {
            r.diagnosis = diagnosis;
            r.feasible.extend(nodes.to_vec());
            r.filtered = true;
        }
        if nodes.len() == 1 {
            self.batch_store(fw, batch, 0, nodes, &[]);
            return Ok(ScheduleResult {
                suggested_host: nodes[0].name.clone(),
                evaluated_nodes,
                feasible_nodes: 1,
                scored_nodes: FeasibleSet::default(),
                scores: ScoreTable::default(),
            });
        }
        let scores = self.prioritize_nodes(
            fw,
            state,
            pod,
            nodes,
            summaries,
            snapshot,
            rec.as_deref_mut().map(|r| &mut r.detail),
            answered,
        )?;
        let chosen = self.select_host(&scores.totals);
        if let Some(r) = rec {
            r.table.clone_from(&scores);
            r.chosen = Some(chosen);
        }
        let host = nodes[chosen].name.clone();
        self.batch_store(fw, batch, chosen, nodes, &scores.totals);
        Ok(ScheduleResult {
            suggested_host: host,
            evaluated_nodes,
            feasible_nodes: nodes.len(),
            scored_nodes: feasible,
            scores,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn find_nodes_that_fit(
        &mut self,
        fw: &Framework,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        nominated: &NominatedPods,
        scope: Option<&mut crate::explain::FilterScope>,
        batch: &mut AttemptBatch,
        extenders: Extenders,
    ) -> Result<(FeasibleSet, Diagnosis, bool), ScheduleError> {
        let (call_extenders, try_first) = match extenders {
            Extenders::InCycle => (!fw.extenders().is_empty(), true),
            Extenders::Deferred { try_first } => (false, try_first),
        };
        let mut diagnosis = Diagnosis::default();
        let start = self.point_start();
        let (pre_result, status, narrowed_by) = fw.run_pre_filter(state, pod, snapshot);
        self.point_done(ExtensionPoint::PreFilter, status.code(), start);
        if !status.is_success() {
            if !status.is_rejected() {
                return Err(ScheduleError::Internal(status));
            }
            diagnosis.pre_filter_msg = Some(status.message());
            if let Some(p) = status.plugin() {
                diagnosis.unschedulable_plugins.insert(p);
            }
            diagnosis.node_to_status.set_absent(status);
            return Ok((FeasibleSet::default(), diagnosis, false));
        }

        let hinted = self.batch_hint(fw, state, pod, snapshot, batch);
        // A nominated node (set by an earlier preemption) is likely the only fit: try it
        // first; else the node batching hints at (upstream `evaluateNominatedNode`).
        let first = match pod.nominated_node_name.as_deref() {
            Some(nnn) => snapshot.get(nnn).cloned(),
            None => hinted,
        }
        .filter(|n| try_first && self.in_placement(n));
        if let Some(node) = first {
            let one = [node];
            let mut d = Diagnosis::default();
            let passed = self.find_nodes_that_pass_filters(
                fw, state, pod, &one, None, &mut d, nominated, false,
            )?;
            let mut feasible = clone_nodes_at(&one, &passed);
            if call_extenders {
                feasible = self.run_extender_filters(fw, pod, feasible, &mut d)?;
            }
            if !feasible.is_empty() {
                if let Some(scope) = scope
                    && pod.nominated_node_name.is_some()
                {
                    scope.nominated_fast_path = true;
                }
                return Ok((FeasibleSet::Nodes(feasible), diagnosis, true));
            }
        }

        let all = self.candidates(snapshot);
        // Summaries line up with the snapshot's nodes: only when every node is a candidate.
        let mut all_summaries = match &all {
            std::borrow::Cow::Borrowed(_) => Some(snapshot.summaries()),
            std::borrow::Cow::Owned(_) => None,
        };
        let narrowed: Vec<Arc<NodeInfo>>;
        let nodes: &[Arc<NodeInfo>] = match pre_result.and_then(|r| r.node_names) {
            None => &all,
            Some(names) => {
                narrowed = names
                    .iter()
                    .filter_map(|n| snapshot.get(n).cloned())
                    .filter(|n| self.in_placement(n))
                    .collect();
                if let Some(scope) = scope {
                    scope.narrowed = Some(names.iter().cloned().collect());
                }
                let mut plugins = narrowed_by.clone();
                plugins.sort_unstable();
                diagnosis
                    .node_to_status
                    .set_absent(Status::unresolvable(format!(
                        "node(s) didn't satisfy plugin(s) [{}]",
                        plugins.join(" ")
                    )));
                all_summaries = None;
                &narrowed
            }
        };
        // Positions in the snapshot's own list stay positions; a subset's nodes are kept.
        let in_snapshot = std::ptr::eq(nodes, snapshot.node_infos());
        let passed = self.find_nodes_that_pass_filters(
            fw,
            state,
            pod,
            nodes,
            all_summaries,
            &mut diagnosis,
            nominated,
            true,
        )?;
        let mut feasible = if in_snapshot {
            FeasibleSet::Positions(passed)
        } else {
            FeasibleSet::Nodes(clone_nodes_at(nodes, &passed))
        };
        if call_extenders {
            let kept = feasible.into_nodes(snapshot);
            let kept = self.run_extender_filters(fw, pod, kept, &mut diagnosis)?;
            feasible = FeasibleSet::Nodes(kept);
        }
        Ok((feasible, diagnosis, false))
    }

    /// The extenders' filter calls after Filter (upstream `findNodesThatPassExtenders`).
    fn run_extender_filters(
        &mut self,
        fw: &Framework,
        pod: &PodInfo,
        feasible: Vec<Arc<NodeInfo>>,
        diagnosis: &mut Diagnosis,
    ) -> Result<Vec<Arc<NodeInfo>>, ScheduleError> {
        crate::framework::find_nodes_that_pass_extenders(fw.extenders(), pod, feasible, diagnosis)
            .map_err(ScheduleError::Internal)
    }

    /// Runs the filters over `nodes` (timed as the Filter point, as upstream times its
    /// `findNodesThatPassFilters`). With `summaries` (the nodes' summaries, in their
    /// order), the filters read the summaries where they can.
    #[allow(clippy::too_many_arguments)]
    fn find_nodes_that_pass_filters(
        &mut self,
        fw: &Framework,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        summaries: Option<&[NodeSummary]>,
        diagnosis: &mut Diagnosis,
        nominated: &NominatedPods,
        advance_start: bool,
    ) -> Result<Vec<usize>, ScheduleError> {
        let start = self.point_start();
        let r = self.filter_nodes(
            fw,
            state,
            pod,
            nodes,
            summaries,
            diagnosis,
            nominated,
            advance_start,
        );
        let code = if r.is_ok() {
            Code::Success
        } else {
            Code::Error
        };
        self.point_done(ExtensionPoint::Filter, code, start);
        r
    }

    /// Runs the filters over `nodes` starting at the rotating index, in parallel, stopping
    /// once enough feasible nodes are found; returns the feasible nodes' positions in
    /// `nodes`, in the order visited. `summaries` as in
    /// [`find_nodes_that_pass_filters`](Self::find_nodes_that_pass_filters).
    #[allow(clippy::too_many_arguments)]
    fn filter_nodes(
        &mut self,
        fw: &Framework,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        summaries: Option<&[NodeSummary]>,
        diagnosis: &mut Diagnosis,
        nominated: &NominatedPods,
        advance_start: bool,
    ) -> Result<Vec<usize>, ScheduleError> {
        let n = nodes.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        let all_summaries = summaries;
        debug_assert!(all_summaries.is_none_or(|all| all.len() == n));
        let pct = fw
            .percentage_of_nodes_to_score()
            .unwrap_or(self.percentage_of_nodes_to_score);
        let to_find = num_feasible_nodes_to_find(pct, n);
        let start = self.next_start_node_index % n;
        // Position in `nodes` of the i-th node visited (no division per node).
        let at = |i: usize| {
            let j = start + i;
            if j >= n { j - n } else { j }
        };
        if !fw.has_filter_plugins() {
            let feasible = (0..to_find).map(at).collect();
            if advance_start {
                self.next_start_node_index = (start + to_find) % n;
            }
            return Ok(feasible);
        }

        // The plugins' rules on summaries, joined once: a node they admit passes without
        // a plugin call (or a read of the node).
        let rules = all_summaries.map(|_| fw.summary_filter(state, pod));
        let filter = |j: usize| {
            let node = &nodes[j];
            if !nominated.is_empty() {
                return fw.run_filter_with_nominated_pods(
                    state,
                    pod,
                    node,
                    nominated.for_node(&node.name),
                );
            }
            match (all_summaries, &rules) {
                (Some(all), Some(rules)) => {
                    if rules.admits(&all[j]) {
                        return Status::success();
                    }
                    fw.run_filter_summarized(state, pod, node, Some((&all[j], rules)))
                }
                _ => fw.run_filter(state, pod, node),
            }
        };
        // Positions of the feasible nodes (in a handed-back result's vector, if any).
        let mut passed = std::mem::take(&mut self.spare_positions);
        passed.clear();
        passed.reserve(to_find.min(n));
        // `None`: the node passed without a status (admitted by the summary rule).
        let mut keep = |j: usize, status: Option<Status>| {
            match status {
                Some(s) if s.code() == Code::Error => return Err(ScheduleError::Internal(s)),
                Some(s) if !s.is_success() => {
                    diagnosis.record_node(&nodes[j], s);
                    return Ok(());
                }
                _ => {}
            }
            passed.push(j);
            Ok(())
        };
        if parallel(n) {
            let found = AtomicUsize::new(0);
            let check = |i: usize| -> Option<(usize, Status)> {
                if found.load(Ordering::Relaxed) >= to_find {
                    return None;
                }
                let status = filter(at(i));
                // Claim a slot; past the quota the node is dropped as if never looked at.
                if status.is_success() && found.fetch_add(1, Ordering::Relaxed) >= to_find {
                    return None;
                }
                Some((i, status))
            };
            // rayon's collect keeps node order, so no sort is needed.
            let outcomes: Vec<(usize, Status)> = (0..n)
                .into_par_iter()
                .with_min_len(16)
                .filter_map(check)
                .collect();
            for (i, status) in outcomes {
                keep(at(i), Some(status))?;
            }
        } else {
            // One thread: stop at the quota rather than walking the rest of the nodes.
            // With no nominated pods, a node the joined summary rule admits is taken here,
            // with no call and no status: a scan of the summaries.
            let fast = match (all_summaries, &rules) {
                (Some(all), Some(rules)) if nominated.is_empty() => {
                    rules.joined().map(|rule| (all, rule))
                }
                _ => None,
            };
            let mut found = 0;
            for i in 0..n {
                if found >= to_find {
                    break;
                }
                let j = at(i);
                if let Some((all, rule)) = fast
                    && rule.admits(&all[j])
                {
                    found += 1;
                    keep(j, None)?;
                    continue;
                }
                let status = filter(j);
                found += usize::from(status.is_success());
                keep(j, Some(status))?;
            }
        }
        if advance_start {
            let processed = passed.len() + diagnosis.node_to_status.len();
            self.next_start_node_index = (start + processed) % n;
        }
        Ok(passed)
    }

    #[allow(clippy::too_many_arguments)]
    fn prioritize_nodes(
        &mut self,
        fw: &Framework,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: FeasibleNodes<'_>,
        summaries: Option<FeasibleSummaries<'_>>,
        snapshot: &Snapshot,
        mut detail: Option<&mut ScoreDetail>,
        answered: Option<&[Option<Vec<HostPriority>>]>,
    ) -> Result<ScoreTable, ScheduleError> {
        let extenders = fw.extenders();
        let add_extenders =
            |table: &mut ScoreTable, detail: Option<&mut ScoreDetail>| match answered {
                None => crate::framework::add_extender_scores(extenders, pod, nodes, table, detail),
                Some(a) => {
                    crate::framework::add_extender_priorities(extenders, a, nodes, table, detail)
                }
            };
        if !fw.has_score_plugins() {
            if extenders.is_empty() {
                return Ok(ScoreTable {
                    plugins: Vec::new(),
                    weighted: Vec::new(),
                    totals: vec![1; nodes.len()],
                });
            }
            let mut table = ScoreTable::default();
            add_extenders(&mut table, detail);
            return Ok(table);
        }
        let start = self.point_start();
        let s = fw.run_pre_score(state, pod, nodes, snapshot);
        self.point_done(ExtensionPoint::PreScore, s.code(), start);
        if !s.is_success() {
            return Err(ScheduleError::Internal(s));
        }
        let start = self.point_start();
        let scores = fw.run_score_reusing(
            state,
            pod,
            nodes,
            summaries,
            parallel(nodes.len()),
            detail.as_deref_mut(),
            std::mem::take(&mut self.spare_scores),
        );
        let code = scores.as_ref().map_or_else(|s| s.code(), |_| Code::Success);
        self.point_done(ExtensionPoint::Score, code, start);
        let mut table = scores.map_err(ScheduleError::Internal)?;
        if !extenders.is_empty() {
            add_extenders(&mut table, detail);
        }
        Ok(table)
    }

    /// The index of the highest total; ties are broken uniformly at random (reservoir sampling).
    fn select_host(&mut self, totals: &[i64]) -> usize {
        let mut best = 0usize;
        let mut ties = 1u64;
        for (i, &t) in totals.iter().enumerate().skip(1) {
            if t > totals[best] {
                best = i;
                ties = 1;
            } else if t == totals[best] {
                ties += 1;
                if self.tie_breaker.below(ties) == 0 {
                    best = i;
                }
            }
        }
        best
    }
}

/// One full scheduling cycle for `pod` with its profile's framework: schedule, or run
/// PostFilter (preemption) on failure; then Reserve, Permit, PreBind and Bind.
///
/// The caller assumes the pod in the cache on `Decision::Bind` before the next cycle, carries
/// out the action, and calls [`Framework::run_post_bind`] (or `run_unreserve` on failure).
pub fn schedule_one(
    fw: &Framework,
    alg: &mut SchedulingAlgorithm,
    pod: &Arc<PodInfo>,
    snapshot: &Snapshot,
    nominated: &NominatedPods,
) -> Decision {
    cycle(fw, alg, pod, snapshot, nominated, None, true)
}

/// [`schedule_one`] without PostFilter: a pod that fits nowhere preempts nothing (what
/// `simulate --pod-template` places, as cluster-capacity does).
pub(crate) fn schedule_one_without_preemption(
    fw: &Framework,
    alg: &mut SchedulingAlgorithm,
    pod: &Arc<PodInfo>,
    snapshot: &Snapshot,
    nominated: &NominatedPods,
) -> Decision {
    cycle(fw, alg, pod, snapshot, nominated, None, false)
}

/// [`schedule_one`] for one member of a pod group (upstream's pod group cycle evaluates each
/// pod without single-pod PostFilter: a gang preempts as a group or not at all).
pub(crate) fn schedule_group_member(
    fw: &Framework,
    alg: &mut SchedulingAlgorithm,
    pod: &Arc<PodInfo>,
    snapshot: &Snapshot,
    nominated: &NominatedPods,
) -> Decision {
    cycle(fw, alg, pod, snapshot, nominated, None, false)
}

/// [`schedule_group_member`], recording compactly into `rec` (reset first), as
/// [`schedule_one_recorded`] does.
pub(crate) fn schedule_group_member_recorded(
    fw: &Framework,
    alg: &mut SchedulingAlgorithm,
    pod: &Arc<PodInfo>,
    snapshot: &Snapshot,
    nominated: &NominatedPods,
    rec: &mut Record,
) -> Decision {
    rec.reset();
    cycle(fw, alg, pod, snapshot, nominated, Some(rec), false)
}

/// [`schedule_one`], explained: the same cycle, which also fills `explain` with every
/// node's verdict, the scores, the selection, preemption's per-node outcome and, for an
/// unschedulable pod, what would have to change. The decision is the one `schedule_one`
/// would have made.
pub fn schedule_one_explained(
    fw: &Framework,
    alg: &mut SchedulingAlgorithm,
    pod: &Arc<PodInfo>,
    snapshot: &Snapshot,
    nominated: &NominatedPods,
    explain: &mut Explanation,
) -> Decision {
    let mut rec = Record::new();
    let d = schedule_one_recorded(fw, alg, pod, snapshot, nominated, &mut rec);
    *explain = rec.render(fw, pod, snapshot, &d);
    d
}

/// [`schedule_one`], recording compactly into `rec` (reset first) what
/// [`Record::render`] needs to explain the decision later, against the same snapshot.
pub fn schedule_one_recorded(
    fw: &Framework,
    alg: &mut SchedulingAlgorithm,
    pod: &Arc<PodInfo>,
    snapshot: &Snapshot,
    nominated: &NominatedPods,
    rec: &mut Record,
) -> Decision {
    rec.reset();
    cycle(fw, alg, pod, snapshot, nominated, Some(rec), true)
}

fn cycle(
    fw: &Framework,
    alg: &mut SchedulingAlgorithm,
    pod: &Arc<PodInfo>,
    snapshot: &Snapshot,
    nominated: &NominatedPods,
    mut explain: Option<&mut Record>,
    post_filter: bool,
) -> Decision {
    let resolved = effective_pod(fw, pod, snapshot);
    let pod: &Arc<PodInfo> = resolved.as_ref().unwrap_or(pod);
    let mut state = CycleState::new();
    state.set_plugin_timer(alg.begin_cycle(fw));
    match alg.schedule_pod_explained(
        fw,
        &mut state,
        pod,
        snapshot,
        nominated,
        explain.as_deref_mut(),
    ) {
        Ok(result) => reserve_and_bind(fw, alg, state, pod, result),
        Err(e) => not_scheduled(
            fw,
            alg,
            &state,
            pod,
            snapshot,
            nominated,
            explain,
            post_filter,
            e,
        ),
    }
}

/// The pod the plugins see: with its RuntimeClass' overhead when the profile resolves it
/// (`None`: the pod itself).
pub(crate) fn effective_pod(
    fw: &Framework,
    pod: &Arc<PodInfo>,
    snapshot: &Snapshot,
) -> Option<Arc<PodInfo>> {
    if fw.resolves_runtime_class() {
        crate::plugins::runtime_class::resolve(pod, snapshot).map(Arc::new)
    } else {
        None
    }
}

/// What a cycle that found no node decides: no nodes at all, an error, or a pod that fits
/// nowhere, for which PostFilter (preemption) runs when `post_filter` allows and the
/// profile has PostFilter plugins.
#[allow(clippy::too_many_arguments)]
pub(crate) fn not_scheduled(
    fw: &Framework,
    alg: &mut SchedulingAlgorithm,
    state: &CycleState,
    pod: &Arc<PodInfo>,
    snapshot: &Snapshot,
    nominated: &NominatedPods,
    explain: Option<&mut Record>,
    post_filter: bool,
    error: ScheduleError,
) -> Decision {
    let mut fit = match error {
        ScheduleError::NoNodes => {
            return Decision::Unschedulable {
                message: NO_NODES_AVAILABLE_MSG.to_string(),
                diagnosis: None,
                nomination: None,
                post_filter_ran: false,
                deallocate: None,
                resolvable: false,
            };
        }
        ScheduleError::Internal(s) => {
            return Decision::Error {
                message: s.message(),
            };
        }
        ScheduleError::Unfit(fit) => fit,
    };
    let resolvable = fit
        .diagnosis
        .node_to_status
        .iter()
        .any(|(_, s)| s.code() == Code::Unschedulable)
        || fit
            .diagnosis
            .node_to_status
            .absent()
            .is_some_and(|s| s.code() == Code::Unschedulable);
    let mut nomination = None;
    let post_filter_ran = post_filter && fw.has_post_filter_plugins();
    if post_filter_ran {
        let rec = explain
            .as_ref()
            .map(|_| std::sync::Mutex::new(Preemption::default()));
        let ctx = PostFilterContext {
            snapshot,
            statuses: &fit.diagnosis.node_to_status,
            nominated,
            framework: fw,
            explain: rec.as_ref(),
        };
        let start = alg.point_start();
        let (r, s) = fw.run_post_filter(state, pod, &ctx);
        alg.point_done(ExtensionPoint::PostFilter, s.code(), start);
        let msg = s.message();
        if !msg.is_empty() {
            fit.diagnosis.post_filter_msg = Some(msg);
        }
        if let (Some(e), Some(rec)) = (explain, rec) {
            let mut p = rec.into_inner().unwrap_or_else(|e| e.into_inner());
            p.message.clone_from(&fit.diagnosis.post_filter_msg);
            p.nominated_node = r.as_ref().and_then(|r| r.nominated_node_name.clone());
            e.preemption = Some(p);
        }
        // Upstream hands on any result, whatever the status: a failed preemption
        // returns one that clears the pod's nomination.
        nomination = r;
    }
    Decision::Unschedulable {
        message: fit.to_string(),
        diagnosis: Some(fit.diagnosis),
        nomination,
        post_filter_ran,
        deallocate: crate::plugins::dynamic_resources::decided_deallocation(state),
        resolvable,
    }
}

/// The end of a cycle that chose a node: Reserve, Permit, PreBind, then the bind decision
/// (unreserving on any rejection).
pub(crate) fn reserve_and_bind(
    fw: &Framework,
    alg: &mut SchedulingAlgorithm,
    mut state: CycleState,
    pod: &Arc<PodInfo>,
    result: ScheduleResult,
) -> Decision {
    let node = result.suggested_host.clone();
    let start = alg.point_start();
    let s = fw.run_reserve(&mut state, pod, &node);
    alg.point_done(ExtensionPoint::Reserve, s.code(), start);
    if !s.is_success() {
        fw.run_unreserve(&mut state, pod, &node);
        return rejected_after_filter(s);
    }
    let start = alg.point_start();
    let (s, _timeout) = fw.run_permit(&state, pod, &node);
    alg.point_done(ExtensionPoint::Permit, s.code(), start);
    if !s.is_success() {
        fw.run_unreserve(&mut state, pod, &node);
        if s.code() == Code::Wait {
            return Decision::Error {
                message: format!(
                    "plugin {:?} asked the pod to wait at Permit; waiting pods are not supported yet",
                    s.plugin().unwrap_or("?")
                ),
            };
        }
        return rejected_after_filter(s);
    }
    let start = alg.point_start();
    let s = fw.run_pre_bind(&state, pod, &node);
    alg.point_done(ExtensionPoint::PreBind, s.code(), start);
    if !s.is_success() {
        fw.run_unreserve(&mut state, pod, &node);
        return rejected_after_filter(s);
    }
    match fw.run_bind(&state, pod, &node) {
        Ok(action) => Decision::Bind {
            node,
            pod: Arc::clone(pod),
            action,
            result,
            state,
        },
        Err(s) => {
            fw.run_unreserve(&mut state, pod, &node);
            let message = if s.is_skip() {
                "no bind plugin handled the pod".to_string()
            } else {
                s.message()
            };
            Decision::Error { message }
        }
    }
}

/// The `Unfit` error for a pod no node fits.
pub(crate) fn unfit(pod: &PodInfo, num_all_nodes: usize, diagnosis: Diagnosis) -> ScheduleError {
    ScheduleError::Unfit(Box::new(FitError {
        pod: pod.key().clone(),
        num_all_nodes,
        diagnosis,
    }))
}

/// Where a cycle makes the extenders' filter and prioritize calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Extenders {
    /// In the cycle, as upstream's `schedulePod`.
    InCycle,
    /// Not in the cycle: its caller makes them (`schedule_extenders`). `try_first`: try the
    /// nominated node alone first, as the cycle does.
    Deferred { try_first: bool },
}

/// What Filter left for the rest of the cycle.
pub(crate) struct Filtered {
    /// Positions in the cycle's snapshot, or the nodes (see [`FeasibleSet`]).
    pub(crate) feasible: FeasibleSet,
    pub(crate) diagnosis: Diagnosis,
    pub(crate) num_all_nodes: usize,
    /// `feasible` is the nominated node alone, tried first.
    pub(crate) first: bool,
}

/// Records a [`Decision::Bind`] in the cache before the next cycle, as every caller must:
/// the pod, assumed until its binding is confirmed, the volume bindings VolumeBinding
/// decided and the claim status writes DynamicResources decided, so later pods neither reuse
/// those volumes and devices nor move those claims.
pub fn assume_decision(
    cache: &mut Cache,
    pod: Arc<PodInfo>,
    node: &str,
    state: &CycleState,
) -> Result<(), CacheError> {
    cache.assume_pod(pod, node)?;
    if let Some(v) = crate::plugins::volume_binding::decided_bindings(state) {
        cache.assume_pod_volumes(v, node);
    }
    if let Some(w) = crate::plugins::dynamic_resources::decided_claim_writes(state) {
        cache.dra_mut().assume_claim_writes(w);
    }
    Ok(())
}

/// Undoes [`assume_decision`]: the pod, its volumes' and its claims' assumptions leave the
/// cache (a binding that failed, or a pod group that did not fit as a whole).
pub fn forget_decision(cache: &mut Cache, pod: &PodInfo, state: &CycleState) {
    if let Some(v) = crate::plugins::volume_binding::decided_bindings(state) {
        cache.forget_pod_volumes(v);
    }
    if let Some(w) = crate::plugins::dynamic_resources::decided_claim_writes(state) {
        cache.dra_mut().forget_claim_writes(w);
    }
    let _ = cache.forget_pod(pod.key());
}

fn rejected_after_filter(s: Status) -> Decision {
    if s.is_rejected() {
        // The rejecting Reserve/Permit plugin decides which events requeue the pod.
        let mut diagnosis = Diagnosis::default();
        if let Some(p) = s.plugin() {
            diagnosis.unschedulable_plugins.insert(p);
        }
        Decision::Unschedulable {
            message: s.message(),
            diagnosis: Some(diagnosis),
            nomination: None,
            post_filter_ran: false,
            deallocate: None,
            resolvable: s.code() == Code::Unschedulable,
        }
    } else {
        Decision::Error {
            message: s.message(),
        }
    }
}

#[cfg(test)]
#[path = "schedule_one_tests.rs"]
mod tests;
