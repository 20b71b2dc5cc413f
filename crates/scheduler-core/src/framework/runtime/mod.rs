//! A framework per profile: the ordered plugins of every extension point and the functions
//! that run them (upstream: `framework/runtime/framework.go`). Building one from a profile
//! is in `wiring`.

mod wiring;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::interface::*;
use super::{
    Code, CycleState, ExtensionPoint, FeasibleNodes, FeasibleSummaries, PluginEvents, PluginTimer,
    QueuedPodInfo, Status,
};
use crate::cache::Snapshot;
use crate::types::{NodeInfo, NodeSummary, PodInfo, SummaryRule};

pub use wiring::FrameworkError;

pub(super) struct Named<T: ?Sized> {
    pub(super) name: &'static str,
    pub(super) plugin: Arc<T>,
}

impl<T: ?Sized> Clone for Named<T> {
    fn clone(&self) -> Self {
        Named {
            name: self.name,
            plugin: Arc::clone(&self.plugin),
        }
    }
}

/// A Score plugin and its weight.
type WeightedScore = (Named<dyn ScorePlugin>, i64);

/// The plugins of one profile, ready to run.
pub struct Framework {
    profile_name: String,
    percentage_of_nodes_to_score: Option<i32>,
    pre_enqueue: Vec<Named<dyn PreEnqueuePlugin>>,
    queue_sort: Named<dyn QueueSortPlugin>,
    pre_filter: Vec<Named<dyn PreFilterPlugin>>,
    filter: Vec<Named<dyn FilterPlugin>>,
    post_filter: Vec<Named<dyn PostFilterPlugin>>,
    pre_score: Vec<Named<dyn PreScorePlugin>>,
    score: Vec<WeightedScore>,
    reserve: Vec<Named<dyn ReservePlugin>>,
    permit: Vec<Named<dyn PermitPlugin>>,
    pre_bind: Vec<Named<dyn PreBindPlugin>>,
    bind: Vec<Named<dyn BindPlugin>>,
    post_bind: Vec<Named<dyn PostBindPlugin>>,
    /// Group plugins (see [`PodGroupPlugin`]): those enabled at PreFilter that have the point.
    pod_group: Vec<Named<dyn PodGroupPlugin>>,
    pub(super) placement_generate: Vec<Named<dyn super::PlacementGeneratePlugin>>,
    /// PlacementScore plugins with their weights.
    pub(super) placement_score: Vec<(Named<dyn super::PlacementScorePlugin>, i64)>,
    pub(super) percentage_of_placements_to_score: Option<i32>,
    not_built: Vec<String>,
    /// For each PreFilter plugin, its position among the Filter plugins (Skip disables it).
    pre_filter_to_filter: Vec<Option<usize>>,
    /// For each PreScore plugin, its position among the Score plugins (Skip disables it).
    pre_score_to_score: Vec<Option<usize>>,
    /// Whether the RuntimeClass plugin runs, so pods are resolved against their class.
    resolves_runtime_class: bool,
    /// Cluster events registered by the plugins that can reject a pod.
    events: PluginEvents,
    /// Those plugins, asked for queueing hints.
    rejecting: Vec<Named<dyn Plugin>>,
    /// The PreFilter, Filter, PreScore and Score plugins, once each: who signs a pod.
    signers: Vec<Named<dyn Plugin>>,
    /// The signer that last refused a pod, asked first next time: a profile's pods are
    /// mostly refused by the same plugin (default spreading, say), and signing the rest
    /// first would be wasted.
    last_refusal: AtomicUsize,
    /// The scheduler's extenders (shared by every profile, as upstream's), in config order.
    extenders: Vec<Arc<dyn super::extender::Extender>>,
}

impl fmt::Debug for Framework {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Framework")
            .field("profile", &self.profile_name)
            .finish_non_exhaustive()
    }
}

fn names<T: ?Sized>(v: &[Named<T>]) -> Vec<&'static str> {
    v.iter().map(|n| n.name).collect()
}

impl Framework {
    /// A timer for one sampled cycle of this profile (see [`PluginTimer`]).
    pub fn plugin_timer(&self, node_loops: bool) -> PluginTimer {
        PluginTimer::new(
            names(&self.filter),
            self.score.iter().map(|(p, _)| p.name).collect(),
            node_loops,
        )
    }

    /// `pod`'s scheduling signature (upstream `SignPod`): the scheduler name plus every
    /// PreFilter, Filter, PreScore and Score plugin's fragments; `None` when one of them
    /// cannot sign it.
    pub fn sign_pod(&self, pod: &PodInfo) -> Option<super::PodSignature> {
        // Malformed input: its handling is not something to share between pods.
        if !pod.problems.is_empty() {
            return None;
        }
        let first = self.last_refusal.load(Ordering::Relaxed);
        let order = self.signers.get(first).into_iter().chain(
            self.signers
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != first)
                .map(|(_, s)| s),
        );
        let mut out = std::collections::BTreeMap::new();
        out.insert("SchedulerName", pod.scheduler_name.clone());
        for (i, signer) in order.enumerate() {
            match signer.plugin.sign_pod(pod) {
                Some(super::Signing::Fragments(f)) => out.extend(f),
                None | Some(super::Signing::Unsignable(_)) => {
                    if i > 0 {
                        let at = self.signers.iter().position(|s| s.name == signer.name);
                        self.last_refusal.store(at.unwrap_or(0), Ordering::Relaxed);
                    }
                    return None;
                }
            }
        }
        Some(super::PodSignature(out))
    }

    pub fn profile_name(&self) -> &str {
        &self.profile_name
    }

    pub fn percentage_of_nodes_to_score(&self) -> Option<i32> {
        self.percentage_of_nodes_to_score
    }

    /// Plugins named by the profile that ferrosched does not implement yet (skipped).
    pub fn not_built(&self) -> &[String] {
        &self.not_built
    }

    /// Plugin -> cluster events, for the scheduling queue (upstream's queueing hint map).
    /// `plugin`'s queueing hint for `event` about `pod` (`Queue` for plugins not built).
    pub fn queueing_hint(
        &self,
        plugin: &str,
        pod: &PodInfo,
        event: &super::ClusterEvent,
        objects: &super::EventObjects<'_>,
    ) -> super::QueueingHint {
        self.rejecting
            .iter()
            .find(|n| n.name == plugin)
            .map_or(super::QueueingHint::Queue, |n| {
                n.plugin.queueing_hint(pod, event, objects)
            })
    }

    pub fn events_to_register(&self) -> &PluginEvents {
        &self.events
    }

    pub fn resolves_runtime_class(&self) -> bool {
        self.resolves_runtime_class
    }

    /// The Filter plugins, in the order they run.
    /// The Filter plugins in call order, then the extenders with a filter verb (which run
    /// after them): the names a node's rejection may carry.
    pub fn filter_plugin_names(&self) -> Vec<String> {
        self.filter
            .iter()
            .map(|p| p.name.to_string())
            .chain(
                self.extenders
                    .iter()
                    .filter(|e| !e.config().filter_verb.is_empty())
                    .map(|e| e.name().to_string()),
            )
            .collect()
    }

    pub fn has_filter_plugins(&self) -> bool {
        !self.filter.is_empty()
    }

    /// Gives the framework the scheduler's extenders (see [`ProfileRegistry::set_extenders`](super::ProfileRegistry::set_extenders)).
    pub fn set_extenders(&mut self, extenders: Vec<Arc<dyn super::extender::Extender>>) {
        self.extenders = extenders;
    }

    pub fn extenders(&self) -> &[Arc<dyn super::extender::Extender>] {
        &self.extenders
    }

    pub fn has_score_plugins(&self) -> bool {
        !self.score.is_empty()
    }

    pub fn has_post_filter_plugins(&self) -> bool {
        !self.post_filter.is_empty()
    }

    /// Plugin names per point, as wired, for `config print`-style summaries and tests.
    pub fn list_plugins(&self) -> BTreeMap<ExtensionPoint, Vec<(&'static str, Option<i64>)>> {
        let plain = |v: Vec<&'static str>| v.into_iter().map(|n| (n, None)).collect::<Vec<_>>();
        let mut m = BTreeMap::new();
        m.insert(ExtensionPoint::PreEnqueue, plain(names(&self.pre_enqueue)));
        m.insert(ExtensionPoint::QueueSort, plain(vec![self.queue_sort.name]));
        m.insert(ExtensionPoint::PreFilter, plain(names(&self.pre_filter)));
        m.insert(ExtensionPoint::Filter, plain(names(&self.filter)));
        m.insert(ExtensionPoint::PostFilter, plain(names(&self.post_filter)));
        m.insert(ExtensionPoint::PreScore, plain(names(&self.pre_score)));
        m.insert(
            ExtensionPoint::Score,
            self.score.iter().map(|(p, w)| (p.name, Some(*w))).collect(),
        );
        m.insert(ExtensionPoint::Reserve, plain(names(&self.reserve)));
        m.insert(ExtensionPoint::Permit, plain(names(&self.permit)));
        m.insert(ExtensionPoint::PreBind, plain(names(&self.pre_bind)));
        m.insert(ExtensionPoint::Bind, plain(names(&self.bind)));
        m.insert(ExtensionPoint::PostBind, plain(names(&self.post_bind)));
        m.retain(|_, v| !v.is_empty());
        m
    }

    /// Whether the profile runs the named plugin at PreEnqueue.
    pub fn has_pre_enqueue_plugin(&self, name: &str) -> bool {
        self.pre_enqueue.iter().any(|p| p.name == name)
    }

    /// Runs every PreEnqueue plugin; the first that does not succeed keeps the pod out.
    pub fn run_pre_enqueue(&self, pod: &PodInfo) -> Status {
        for p in &self.pre_enqueue {
            let s = p.plugin.pre_enqueue(pod);
            if !s.is_success() {
                return s.with_plugin(p.name);
            }
        }
        Status::success()
    }

    /// Whether any plugin looks at pod groups as a whole.
    pub fn has_pod_group_plugins(&self) -> bool {
        !self.pod_group.is_empty()
    }

    /// Runs every group plugin's check before a group's cycle; the first rejection stops
    /// it, with the rejecting plugin's name.
    pub fn run_pre_filter_group(
        &self,
        group: &crate::types::pod_group::PodGroupInfo,
        snapshot: &Snapshot,
        scheduled_before: usize,
    ) -> Result<(), (&'static str, GroupRejection)> {
        for p in &self.pod_group {
            p.plugin
                .pre_filter_group(group, snapshot, scheduled_before)
                .map_err(|r| (p.name, r))?;
        }
        Ok(())
    }

    /// Tells every group plugin how a real group cycle ended.
    pub fn run_group_done(
        &self,
        group: &crate::types::pod_group::PodGroupInfo,
        done: &GroupCycleDone,
    ) {
        for p in &self.pod_group {
            p.plugin.group_done(group, done);
        }
    }

    pub fn queue_sort_less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        self.queue_sort.plugin.less(a, b)
    }

    pub fn queue_sort_name(&self) -> &'static str {
        self.queue_sort.name
    }

    /// Runs PreFilter plugins in order. A rejection stops the cycle for every node; Skip
    /// disables that plugin's Filter; node-set results are intersected. Also returns the
    /// plugins that narrowed the node set.
    pub fn run_pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status, Vec<&'static str>) {
        // Safety floor: without DynamicResources nothing allocates the pod's claims, and
        // binding it anyway would start it without its devices.
        if !pod.resource_claims.is_empty()
            && !self
                .pre_filter
                .iter()
                .any(|p| p.name == crate::plugins::names::DYNAMIC_RESOURCES)
        {
            let s = Status::unresolvable(crate::plugins::dynamic_resources::disabled_in_profile(
                &self.profile_name,
            ));
            return (
                None,
                s.with_plugin(crate::plugins::names::DYNAMIC_RESOURCES),
                Vec::new(),
            );
        }
        // NodeResourcesFit leaves DRA-backed extended resources to DynamicResources only when
        // this profile runs it; otherwise they are checked against allocatable as before.
        if pod.extended_requests.is_set()
            && self
                .pre_filter
                .iter()
                .any(|p| p.name == crate::plugins::names::DYNAMIC_RESOURCES)
        {
            crate::plugins::dynamic_resources::extended::mark_handled(state);
        }
        let mut result: Option<PreFilterResult> = None;
        let mut narrowing: Vec<&'static str> = Vec::new();
        for (i, p) in self.pre_filter.iter().enumerate() {
            let start = state.plugin_start();
            let (r, s) = p.plugin.pre_filter(state, pod, snapshot);
            state.plugin_done(p.name, ExtensionPoint::PreFilter, s.code(), start);
            if s.is_skip() {
                state.skip_pre_filter_plugin(i);
                if let Some(f) = self.pre_filter_to_filter[i] {
                    state.skip_filter_plugin(f);
                }
                continue;
            }
            if !s.is_success() {
                if s.is_rejected() {
                    return (None, s.with_plugin(p.name), narrowing);
                }
                let e = Status::error(format!(
                    "running PreFilter plugin {:?}: {}",
                    p.name,
                    s.message()
                ));
                return (None, e.with_plugin(p.name), narrowing);
            }
            let Some(r) = r else { continue };
            if r.all_nodes() {
                continue;
            }
            narrowing.push(p.name);
            let merged = match result.take() {
                None => r,
                Some(prev) => prev.merge(r),
            };
            if merged.node_names.as_ref().is_some_and(|n| n.is_empty()) {
                let msg = if narrowing.len() == 1 {
                    format!("node(s) didn't satisfy plugin {}", narrowing[0])
                } else {
                    format!(
                        "node(s) didn't satisfy plugin(s) [{}] simultaneously",
                        narrowing.join(" ")
                    )
                };
                return (
                    Some(merged),
                    Status::unresolvable(msg).with_plugin(p.name),
                    narrowing,
                );
            }
            result = Some(merged);
        }
        (result, Status::success(), narrowing)
    }

    /// Runs the Filter plugins on one node; the first failure decides, tagged with its plugin.
    pub fn run_filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        self.run_filter_summarized(state, pod, node, None)
    }

    /// The active Filter plugins' [`FilterPlugin::summary_rule`]s for this cycle (after
    /// PreFilter). Empty on cycles sampled for per-plugin metrics, so every call is timed.
    pub fn summary_filter(&self, state: &CycleState, pod: &PodInfo) -> SummaryFilter {
        if state.times_node_plugins() {
            return SummaryFilter::default();
        }
        let mut each = vec![None; self.filter.len()];
        let mut all = Some(SummaryRule::ANY);
        for i in state.filters_to_run(self.filter.len()) {
            let rule = self.filter[i].plugin.summary_rule(state, pod);
            each[i] = rule;
            all = match (all, rule) {
                (Some(a), Some(r)) => a.and(r),
                _ => None,
            };
        }
        SummaryFilter { all, each }
    }

    /// [`run_filter`](Self::run_filter) given the node's summary and the cycle's
    /// [`SummaryFilter`] too (`summary` is `NodeSummary::of(node)`): a plugin whose rule
    /// admits the summary is not called. Same answers; only the node's own memory is read
    /// less.
    pub fn run_filter_summarized(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        summary: Option<(&NodeSummary, &SummaryFilter)>,
    ) -> Status {
        let timed = state.times_node_plugins();
        let summary = summary.filter(|_| !timed);
        for i in state.filters_to_run(self.filter.len()) {
            let p = &self.filter[i];
            if summary.is_some_and(|(sm, f)| f.plugin_admits(i, sm)) {
                continue;
            }
            let s = if timed {
                let start = state.node_plugin_start();
                let s = p.plugin.filter(state, pod, node);
                state.filter_done(i, s.code(), start);
                s
            } else {
                p.plugin.filter(state, pod, node)
            };
            if s.is_success() {
                continue;
            }
            if s.is_rejected() {
                return s.with_plugin(p.name);
            }
            return Status::error(format!(
                "running {:?} filter plugin: {}",
                p.name,
                s.message()
            ))
            .with_plugin(p.name);
        }
        Status::success()
    }

    /// Filters one node as upstream does when pods are nominated to it: first with the
    /// nominated pods of equal or higher priority added (they will land there), then
    /// without them (they may not). The node must pass both.
    pub fn run_filter_with_nominated_pods(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &Arc<NodeInfo>,
        nominated: &[Arc<PodInfo>],
    ) -> Status {
        let relevant: Vec<&Arc<PodInfo>> = nominated
            .iter()
            .filter(|n| n.priority >= pod.priority && n.uid != pod.uid)
            .collect();
        if relevant.is_empty() {
            return self.run_filter(state, pod, node);
        }
        let mut node_with = NodeInfo::clone(node);
        let mut state_with = state.clone();
        for n in relevant {
            node_with.add_pod(Arc::clone(n));
            let s = self.run_pre_filter_add_pod(&mut state_with, pod, n, &node_with);
            if !s.is_success() {
                return s;
            }
        }
        let s = self.run_filter(&state_with, pod, &node_with);
        if !s.is_success() {
            return s;
        }
        self.run_filter(state, pod, node)
    }

    /// Tells PreFilter plugins with extensions that `to_add` now runs on `node`.
    pub fn run_pre_filter_add_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        to_add: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        for (i, p) in self.pre_filter.iter().enumerate() {
            if !p.plugin.has_extensions() || state.pre_filter_skipped(i) {
                continue;
            }
            let s = p.plugin.add_pod(state, pod, to_add, node);
            if !s.is_success() {
                return Status::error(format!(
                    "running AddPod on PreFilter plugin {:?}: {}",
                    p.name,
                    s.message()
                ))
                .with_plugin(p.name);
            }
        }
        Status::success()
    }

    /// Tells PreFilter plugins with extensions that `to_remove` is gone from `node`.
    pub fn run_pre_filter_remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        to_remove: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        for (i, p) in self.pre_filter.iter().enumerate() {
            if !p.plugin.has_extensions() || state.pre_filter_skipped(i) {
                continue;
            }
            let s = p.plugin.remove_pod(state, pod, to_remove, node);
            if !s.is_success() {
                return Status::error(format!(
                    "running RemovePod on PreFilter plugin {:?}: {}",
                    p.name,
                    s.message()
                ))
                .with_plugin(p.name);
            }
        }
        Status::success()
    }

    /// Runs PostFilter plugins until one succeeds or declares the pod unresolvable. When all
    /// of them reject the pod, the last result any of them returned is kept (it may clear the
    /// pod's nomination).
    pub fn run_post_filter(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        ctx: &PostFilterContext<'_>,
    ) -> (Option<PostFilterResult>, Status) {
        let mut reasons = Vec::new();
        let mut rejector = None;
        let mut result = None;
        for p in &self.post_filter {
            let start = state.plugin_start();
            let (r, s) = p.plugin.post_filter(state, pod, ctx);
            state.plugin_done(p.name, ExtensionPoint::PostFilter, s.code(), start);
            match s.code() {
                Code::Success => return (r, s.with_plugin(p.name)),
                Code::UnschedulableAndUnresolvable => return (r, s.with_plugin(p.name)),
                Code::Unschedulable => {
                    if r.is_some() {
                        result = r;
                    }
                    reasons.extend(s.reasons().iter().cloned());
                    rejector.get_or_insert(p.name);
                }
                _ => return (None, s.with_plugin(p.name)),
            }
        }
        let status = Status::with_reasons(Code::Unschedulable, reasons);
        (
            result,
            match rejector {
                Some(name) => status.with_plugin(name),
                None => status,
            },
        )
    }

    pub fn run_pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: FeasibleNodes<'_>,
        snapshot: &Snapshot,
    ) -> Status {
        // Score plugins see one node at a time; cluster-wide image facts come from here.
        state.write(snapshot.image_spread());
        for (i, p) in self.pre_score.iter().enumerate() {
            let start = state.plugin_start();
            let s = p.plugin.pre_score(state, pod, nodes, snapshot);
            state.plugin_done(p.name, ExtensionPoint::PreScore, s.code(), start);
            if s.is_skip() {
                if let Some(j) = self.pre_score_to_score[i] {
                    state.skip_score_plugin(j);
                }
                continue;
            }
            if !s.is_success() {
                return Status::error(format!(
                    "running PreScore plugin {:?}: {}",
                    p.name,
                    s.message()
                ))
                .with_plugin(p.name);
            }
        }
        Status::success()
    }

    /// Scores every node with every active Score plugin in one pass over the nodes,
    /// normalises each plugin's scores and applies weights. `summaries`, when given, are the
    /// nodes' summaries in the same order ([`ScorePlugin::score_summarized`]).
    pub fn run_score(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: FeasibleNodes<'_>,
        summaries: Option<FeasibleSummaries<'_>>,
        parallel: bool,
        detail: Option<&mut ScoreDetail>,
    ) -> Result<ScoreTable, Status> {
        let fresh = ScoreTable::default();
        self.run_score_reusing(state, pod, nodes, summaries, parallel, detail, fresh)
    }

    /// [`run_score`](Self::run_score) into `reuse`'s vectors (an earlier cycle's table, its
    /// contents ignored): a cycle then allocates no score buffers, nor touches fresh pages.
    #[allow(clippy::too_many_arguments)]
    pub fn run_score_reusing(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: FeasibleNodes<'_>,
        summaries: Option<FeasibleSummaries<'_>>,
        parallel: bool,
        mut detail: Option<&mut ScoreDetail>,
        reuse: ScoreTable,
    ) -> Result<ScoreTable, Status> {
        use rayon::prelude::*;
        let ScoreTable {
            mut plugins,
            weighted: mut columns,
            mut totals,
        } = reuse;
        // (framework index, plugin and weight) of each Score plugin that runs this cycle.
        let active: Vec<(usize, &WeightedScore)> = self
            .score
            .iter()
            .enumerate()
            .filter(|(i, _)| !state.score_skipped(*i))
            .collect();
        let k = active.len();
        plugins.clear();
        plugins.extend(active.iter().map(|(_, (p, _))| p.name));
        let n = nodes.len();
        totals.clear();
        totals.resize(n, 0);
        columns.clear();
        if k == 0 || n == 0 {
            return Ok(ScoreTable {
                plugins,
                weighted: columns,
                totals,
            });
        }
        debug_assert!(summaries.is_none_or(|s| s.len() == n));
        // Plugin-major: column j holds the j-th active plugin's score of every node, so a
        // plugin scores a run of nodes in one call.
        columns.resize(n * k, 0);
        let timed = state.times_node_plugins();
        let score_run = |j: usize,
                         p: &Named<dyn ScorePlugin>,
                         nodes: FeasibleNodes<'_>,
                         summaries: Option<FeasibleSummaries<'_>>,
                         out: &mut [i64]| {
            let r = if timed {
                // A sampled cycle: time each call, as upstream's per-node metric counts them.
                out.iter_mut().zip(nodes).try_for_each(|(slot, node)| {
                    let start = state.node_plugin_start();
                    let scored = p.plugin.score(state, pod, node);
                    let code = scored.as_ref().map_or_else(|s| s.code(), |_| Code::Success);
                    state.score_done(j, code, start);
                    *slot = scored?;
                    Ok(())
                })
            } else if let Some(summaries) = summaries {
                p.plugin.score_summarized(state, pod, nodes, summaries, out)
            } else {
                p.plugin.score_nodes(state, pod, nodes, out)
            };
            r.map_err(|s: Status| {
                Status::error(format!(
                    "running Score plugin {:?}: {}",
                    p.name,
                    s.message()
                ))
                .with_plugin(p.name)
            })
        };
        for (column, &(j, (p, _))) in columns.chunks_mut(n).zip(&active) {
            if parallel {
                const RUN: usize = 32;
                column
                    .par_chunks_mut(RUN)
                    .enumerate()
                    .try_for_each(|(c, out)| {
                        let (from, to) = (c * RUN, c * RUN + out.len());
                        let sums = summaries.map(|s| s.range(from, to));
                        score_run(j, p, nodes.range(from, to), sums, out)
                    })?;
            } else {
                score_run(j, p, nodes, summaries, column)?;
            }
        }
        if let Some(d) = detail.as_deref_mut() {
            d.raw.clone_from(&columns);
            d.normalized.clear();
            d.normalized.resize(columns.len(), 0);
            d.weights.clear();
            d.weights.extend(active.iter().map(|(_, (_, w))| *w));
        }
        // Node names only for a normalization that reads them (each name is in its node's
        // memory): read once, on the first such plugin.
        let mut list: Vec<NodeScore<'_>> = Vec::new();
        for (j, (column, (_, (p, w)))) in columns.chunks_mut(n).zip(&active).enumerate() {
            if p.plugin.has_score_extensions() {
                let s = match p.plugin.normalize_score_values(state, pod, column) {
                    Some(s) => s,
                    None => {
                        if list.is_empty() {
                            list = (nodes.iter())
                                .map(|node| NodeScore {
                                    name: &node.name,
                                    score: 0,
                                })
                                .collect();
                        }
                        for (ns, &score) in list.iter_mut().zip(column.iter()) {
                            ns.score = score;
                        }
                        let s = p.plugin.normalize_scores(state, pod, &mut list);
                        for (slot, ns) in column.iter_mut().zip(&list) {
                            *slot = ns.score;
                        }
                        s
                    }
                };
                if !s.is_success() {
                    return Err(Status::error(format!(
                        "running Normalize on Score plugin {:?}: {}",
                        p.name,
                        s.message()
                    ))
                    .with_plugin(p.name));
                }
            }
            if let Some(d) = detail.as_deref_mut() {
                d.normalized[j * n..(j + 1) * n].copy_from_slice(column);
            }
            // Branch-free passes the compiler vectorizes: the column's range, then weights
            // and totals; the first score out of range is looked for only when there is one.
            let (lo, hi) = (column.iter())
                .fold((MIN_NODE_SCORE, MAX_NODE_SCORE), |(lo, hi), &s| {
                    (lo.min(s), hi.max(s))
                });
            if lo < MIN_NODE_SCORE || hi > MAX_NODE_SCORE {
                let range = MIN_NODE_SCORE..=MAX_NODE_SCORE;
                let bad = column
                    .iter()
                    .find(|s| !range.contains(s))
                    .copied()
                    .unwrap_or(lo);
                return Err(Status::error(format!(
                    "plugin {:?} returns an invalid score {}, it should in the range of [{}, {}] after normalizing",
                    p.name, bad, MIN_NODE_SCORE, MAX_NODE_SCORE
                ))
                .with_plugin(p.name));
            }
            let w = *w;
            for (slot, t) in column.iter_mut().zip(totals.iter_mut()) {
                *slot *= w;
                *t = t.saturating_add(*slot);
            }
        }
        let weighted = columns;
        Ok(ScoreTable {
            plugins,
            weighted,
            totals,
        })
    }

    /// Runs Reserve in order; on failure the caller must run [`Framework::run_unreserve`].
    pub fn run_reserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        for p in &self.reserve {
            let start = state.plugin_start();
            let s = p.plugin.reserve(state, pod, node);
            state.plugin_done(p.name, ExtensionPoint::Reserve, s.code(), start);
            if !s.is_success() {
                if s.is_rejected() {
                    return s.with_plugin(p.name);
                }
                return Status::error(format!(
                    "running Reserve plugin {:?}: {}",
                    p.name,
                    s.message()
                ))
                .with_plugin(p.name);
            }
        }
        Status::success()
    }

    /// Undoes Reserve in reverse order, as upstream does.
    pub fn run_unreserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) {
        for p in self.reserve.iter().rev() {
            p.plugin.unreserve(state, pod, node);
        }
    }

    /// Runs Permit plugins. Returns Wait with the shortest timeout when any plugin waits.
    pub fn run_permit(&self, state: &CycleState, pod: &PodInfo, node: &str) -> (Status, Duration) {
        let mut wait: Option<(Duration, &'static str)> = None;
        for p in &self.permit {
            let start = state.plugin_start();
            let (s, timeout) = p.plugin.permit(state, pod, node);
            state.plugin_done(p.name, ExtensionPoint::Permit, s.code(), start);
            match s.code() {
                Code::Success => {}
                Code::Wait => {
                    let t = timeout.min(MAX_PERMIT_TIMEOUT);
                    if wait.is_none_or(|(w, _)| t < w) {
                        wait = Some((t, p.name));
                    }
                }
                c if s.is_rejected() => {
                    let _ = c;
                    return (s.with_plugin(p.name), Duration::ZERO);
                }
                _ => {
                    return (
                        Status::error(format!(
                            "running Permit plugin {:?}: {}",
                            p.name,
                            s.message()
                        ))
                        .with_plugin(p.name),
                        Duration::ZERO,
                    );
                }
            }
        }
        match wait {
            Some((t, name)) => (Status::wait().with_plugin(name), t),
            None => (Status::success(), Duration::ZERO),
        }
    }

    pub fn run_pre_bind(&self, state: &CycleState, pod: &PodInfo, node: &str) -> Status {
        for p in &self.pre_bind {
            let start = state.plugin_start();
            let s = p.plugin.pre_bind(state, pod, node);
            state.plugin_done(p.name, ExtensionPoint::PreBind, s.code(), start);
            if !s.is_success() {
                if s.is_rejected() {
                    return s.with_plugin(p.name);
                }
                return Status::error(format!(
                    "running PreBind plugin {:?}: {}",
                    p.name,
                    s.message()
                ))
                .with_plugin(p.name);
            }
        }
        Status::success()
    }

    /// The first bind plugin that does not Skip decides how the pod is bound.
    pub fn run_bind(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        node: &str,
    ) -> Result<BindAction, Status> {
        for p in &self.bind {
            // Not timed: the Binding's API call, the real cost, is the controller's to measure.
            match p.plugin.bind(state, pod, node) {
                Ok(action) => return Ok(action),
                Err(s) if s.is_skip() => continue,
                Err(s) => {
                    return Err(Status::error(format!(
                        "running Bind plugin {:?}: {}",
                        p.name,
                        s.message()
                    ))
                    .with_plugin(p.name));
                }
            }
        }
        Err(Status::skip())
    }

    pub fn run_post_bind(&self, state: &CycleState, pod: &PodInfo, node: &str) {
        for p in &self.post_bind {
            p.plugin.post_bind(state, pod, node);
        }
    }
}

/// One cycle's Filter rules on node summaries ([`Framework::summary_filter`]).
#[derive(Clone, Debug, Default)]
pub struct SummaryFilter {
    /// Every active plugin's rule joined: a node it admits passes Filter without a plugin
    /// call. `None` when a plugin has no rule (or the rules do not join).
    all: Option<SummaryRule>,
    /// Each Filter plugin's rule, by its position (`None`: none, or not active).
    each: Vec<Option<SummaryRule>>,
}

impl SummaryFilter {
    /// Whether every active Filter plugin passes the node with this summary.
    #[inline]
    pub fn admits(&self, summary: &NodeSummary) -> bool {
        self.all.is_some_and(|r| r.admits(summary))
    }

    /// The joined rule of every active plugin, when they all have one.
    pub fn joined(&self) -> Option<SummaryRule> {
        self.all
    }

    /// Whether the `i`-th Filter plugin passes the node with this summary.
    fn plugin_admits(&self, i: usize, summary: &NodeSummary) -> bool {
        self.each
            .get(i)
            .copied()
            .flatten()
            .is_some_and(|r| r.admits(summary))
    }
}

/// Upstream caps a Permit wait at 15 minutes.
pub const MAX_PERMIT_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// Weighted scores of one node, per plugin, and their sum.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodePluginScores {
    pub name: String,
    pub scores: Vec<(&'static str, i64)>,
    pub total: i64,
}

/// Every feasible node's weighted score per active plugin, and the totals, in the order of
/// the nodes that were scored. Kept flat so scoring allocates per pod, not per node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScoreTable {
    pub plugins: Vec<&'static str>,
    /// Plugin-major: plugin j, node i at `j * totals.len() + i` (see [`ScoreTable::at`]).
    pub weighted: Vec<i64>,
    pub totals: Vec<i64>,
}

/// What [`Framework::run_score`] computed on the way to a [`ScoreTable`], kept only when
/// an explanation asks for it: raw and normalized scores (laid out like
/// [`ScoreTable::weighted`]) and each active plugin's weight.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScoreDetail {
    pub raw: Vec<i64>,
    pub normalized: Vec<i64>,
    pub weights: Vec<i64>,
}

impl ScoreTable {
    /// The `i`-th scored node's weighted score from the `j`-th plugin.
    pub fn at(&self, i: usize, j: usize) -> i64 {
        self.weighted[j * self.totals.len() + i]
    }

    /// The per-plugin breakdown of the `i`-th scored node.
    pub fn node(&self, i: usize, name: &str) -> NodePluginScores {
        NodePluginScores {
            name: name.to_string(),
            scores: self
                .plugins
                .iter()
                .enumerate()
                .map(|(j, p)| (*p, self.at(i, j)))
                .collect(),
            total: self.totals[i],
        }
    }
}
