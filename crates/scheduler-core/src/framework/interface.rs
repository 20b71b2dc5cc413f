//! One small trait per extension point (upstream: `framework/interface.go`). A plugin
//! implements [`Plugin`] plus the point traits it needs, and lists them in
//! [`Plugin::points`] with the [`plugin_points!`](crate::plugin_points) macro.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use super::{CycleState, FeasibleNodes, FeasibleSummaries, Framework, QueuedPodInfo, Status};
use crate::cache::Snapshot;
use crate::types::{NodeInfo, PodInfo, PodKey, SummaryRule};

/// Highest score a Score plugin may return after normalisation (upstream `MaxNodeScore`).
pub const MAX_NODE_SCORE: i64 = 100;
pub const MIN_NODE_SCORE: i64 = 0;
/// Upper bound on the sum of weighted scores (upstream `MaxTotalScore`).
pub const MAX_TOTAL_SCORE: i64 = i64::MAX;

pub trait Plugin: Send + Sync + 'static {
    fn name(&self) -> &'static str;

    /// The extension points this plugin implements, as trait objects. The framework asks
    /// once, when it is built, so the hot path calls the point traits directly.
    fn points(self: Arc<Self>) -> PluginPoints;

    /// Cluster events that may make a pod this plugin rejected schedulable (upstream
    /// `EnqueueExtensions::EventsToRegister`). The queue moves such a pod out of the
    /// unschedulable pool only on a matching event. Default: none, so a pod rejected by the
    /// plugin waits for the periodic flush (plugins that never reject need nothing).
    fn events_to_register(&self) -> Vec<super::ClusterEvent> {
        Vec::new()
    }

    /// Whether `event` may make `pod`, which this plugin rejected, schedulable (upstream's
    /// per-event `QueueingHintFn`). Only asked for events the plugin registered. Default:
    /// `Queue`, and every hint must answer `Queue` for [`super::EventObjects::None`].
    fn queueing_hint(
        &self,
        _pod: &PodInfo,
        _event: &super::ClusterEvent,
        _objects: &super::EventObjects<'_>,
    ) -> super::QueueingHint {
        super::QueueingHint::Queue
    }

    /// This plugin's part of `pod`'s scheduling signature, for opportunistic batching
    /// (upstream `SignPlugin.SignPod`). Default `None`: the plugin cannot sign, which turns
    /// batching off for every profile that runs it at PreFilter, Filter, PreScore or Score.
    fn sign_pod(&self, _pod: &PodInfo) -> Option<super::Signing> {
        None
    }
}

/// Trait objects for every point a plugin implements; `None` where it does not.
#[derive(Default)]
pub struct PluginPoints {
    pub pre_enqueue: Option<Arc<dyn PreEnqueuePlugin>>,
    pub queue_sort: Option<Arc<dyn QueueSortPlugin>>,
    pub pre_filter: Option<Arc<dyn PreFilterPlugin>>,
    pub filter: Option<Arc<dyn FilterPlugin>>,
    pub post_filter: Option<Arc<dyn PostFilterPlugin>>,
    pub pre_score: Option<Arc<dyn PreScorePlugin>>,
    pub score: Option<Arc<dyn ScorePlugin>>,
    pub reserve: Option<Arc<dyn ReservePlugin>>,
    pub permit: Option<Arc<dyn PermitPlugin>>,
    pub pre_bind: Option<Arc<dyn PreBindPlugin>>,
    pub bind: Option<Arc<dyn BindPlugin>>,
    pub post_bind: Option<Arc<dyn PostBindPlugin>>,
    /// ferrosched's group point (no upstream extension point: see [`PodGroupPlugin`]).
    pub pod_group: Option<Arc<dyn PodGroupPlugin>>,
    pub placement_generate: Option<Arc<dyn super::PlacementGeneratePlugin>>,
    pub placement_score: Option<Arc<dyn super::PlacementScorePlugin>>,
}

impl PluginPoints {
    /// The points that are set, for checking against the catalog.
    pub fn implemented(&self) -> Vec<super::ExtensionPoint> {
        use super::ExtensionPoint::*;
        let mut v = Vec::new();
        let flags = [
            (self.pre_enqueue.is_some(), PreEnqueue),
            (self.queue_sort.is_some(), QueueSort),
            (self.pre_filter.is_some(), PreFilter),
            (self.filter.is_some(), Filter),
            (self.post_filter.is_some(), PostFilter),
            (self.pre_score.is_some(), PreScore),
            (self.score.is_some(), Score),
            (self.reserve.is_some(), Reserve),
            (self.permit.is_some(), Permit),
            (self.pre_bind.is_some(), PreBind),
            (self.bind.is_some(), Bind),
            (self.post_bind.is_some(), PostBind),
            (self.placement_generate.is_some(), PlacementGenerate),
            (self.placement_score.is_some(), PlacementScore),
        ];
        for (set, p) in flags {
            if set {
                v.push(p);
            }
        }
        v
    }
}

/// Builds a [`PluginPoints`] from `self: Arc<Self>` and the point fields it implements:
/// `plugin_points!(self => pre_filter, filter, score)`.
#[macro_export]
macro_rules! plugin_points {
    ($this:ident => $($point:ident),+ $(,)?) => {{
        let mut points = $crate::framework::PluginPoints::default();
        $( points.$point = Some($this.clone()); )+
        points
    }};
}

/// A group's rejection by a [`PodGroupPlugin`] before any of its members is tried.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupRejection {
    /// Why, as the plugin words it (the members' messages wrap it as a PreFilter
    /// rejection: `0/N nodes are available: <message>.`).
    pub message: String,
    /// Besides the rejecting plugin, plugins whose cluster events may help the group (the
    /// queue retries its members on those too).
    pub wait_for: BTreeSet<&'static str>,
}

impl GroupRejection {
    pub fn new(message: impl Into<String>) -> Self {
        GroupRejection {
            message: message.into(),
            wait_for: BTreeSet::new(),
        }
    }
}

/// What a group cycle came to, for [`PodGroupPlugin::group_done`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupCycleDone {
    /// The quorum was met and members were placed.
    pub placed: bool,
    /// The cycle failed with an error (not a rejection).
    pub error: bool,
    /// The group's pods already placed (bound or assumed) before the cycle.
    pub scheduled_before: usize,
    /// Every pod of the group the scheduler knows, placed or not.
    pub all_pods: usize,
    /// The plugins whose events may help a group that was not placed.
    pub unschedulable_plugins: BTreeSet<&'static str>,
}

/// Looks at a pod group as a whole, around ferrosched's pod group cycle (upstream has no
/// such point: scheduler-plugins' Coscheduling does the same from its per-pod PreFilter,
/// PostFilter and Permit). Wired for plugins enabled at PreFilter that implement it.
pub trait PodGroupPlugin: Plugin {
    /// Before the group's cycle tries any member (pure: explanations and preemption's
    /// trials ask too). An `Err` rejects the whole group and no member is tried.
    fn pre_filter_group(
        &self,
        group: &crate::types::pod_group::PodGroupInfo,
        snapshot: &Snapshot,
        scheduled_before: usize,
    ) -> Result<(), GroupRejection>;

    /// After a group cycle that really happened (not an explanation, not a preemption
    /// trial), whatever its outcome: the plugin's memory of the group (back-off, ...).
    fn group_done(&self, group: &crate::types::pod_group::PodGroupInfo, done: &GroupCycleDone);
}

/// Decides whether a pod may enter the active queue at all (e.g. scheduling gates).
pub trait PreEnqueuePlugin: Plugin {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status;
}

/// Orders the active queue; exactly one per profile and the same in every profile.
pub trait QueueSortPlugin: Plugin {
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool;
}

/// Nodes a PreFilter plugin already knows are the only candidates (e.g. `metadata.name`
/// in required node affinity). `None` means all nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PreFilterResult {
    pub node_names: Option<BTreeSet<String>>,
}

impl PreFilterResult {
    pub fn nodes(names: impl IntoIterator<Item = String>) -> Self {
        PreFilterResult {
            node_names: Some(names.into_iter().collect()),
        }
    }

    pub fn all_nodes(&self) -> bool {
        self.node_names.is_none()
    }

    /// Intersection, as upstream merges results from several PreFilter plugins.
    pub fn merge(self, other: PreFilterResult) -> PreFilterResult {
        match (self.node_names, other.node_names) {
            (None, n) | (n, None) => PreFilterResult { node_names: n },
            (Some(a), Some(b)) => PreFilterResult {
                node_names: Some(a.intersection(&b).cloned().collect()),
            },
        }
    }
}

/// Computes per-pod state once per cycle; may narrow the candidate nodes.
pub trait PreFilterPlugin: Plugin {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status);

    /// Whether [`add_pod`](Self::add_pod)/[`remove_pod`](Self::remove_pod) matter, so the
    /// framework can skip cloning state for plugins whose state does not depend on other pods.
    fn has_extensions(&self) -> bool {
        false
    }

    /// Updates this plugin's state as if `to_add` ran on `node` (nominated pods, preemption).
    fn add_pod(
        &self,
        _state: &mut CycleState,
        _pod: &PodInfo,
        _to_add: &Arc<PodInfo>,
        _node: &NodeInfo,
    ) -> Status {
        Status::success()
    }

    /// Updates this plugin's state as if `to_remove` were gone from `node` (preemption victims).
    fn remove_pod(
        &self,
        _state: &mut CycleState,
        _pod: &PodInfo,
        _to_remove: &Arc<PodInfo>,
        _node: &NodeInfo,
    ) -> Status {
        Status::success()
    }
}

/// Says whether one node can run the pod. Runs in parallel across nodes, so the state is shared.
pub trait FilterPlugin: Plugin {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status;

    /// What a node's [`NodeSummary`] must show for [`filter`](Self::filter) to pass it,
    /// for this pod (asked once per cycle, after PreFilter). The framework checks the
    /// joined rules of every active plugin inline and calls `filter` only on the nodes they
    /// do not admit, so rejections, with their reasons, always come from `filter`. A rule
    /// must never admit a node `filter` rejects. Default: `None`, no rule (`filter` runs
    /// on every node).
    fn summary_rule(&self, _state: &CycleState, _pod: &PodInfo) -> Option<SummaryRule> {
        None
    }
}

/// What a PostFilter plugin (preemption) decided: a node to nominate and pods to evict.
///
/// Returned with Success, `nominated_node_name` is set. Returned with Unschedulable (no
/// preemption candidate), `nominated_node_name: None` tells the caller to clear the pod's
/// nominatedNodeName (upstream's override with ""); no result at all leaves it unchanged.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PostFilterResult {
    pub nominated_node_name: Option<String>,
    pub victims: Vec<PodKey>,
    /// Lower-priority pods nominated to the chosen node: they may no longer fit there, so the
    /// caller clears their nominatedNodeName and retries them.
    pub nominations_to_clear: Vec<PodKey>,
}

/// What a PostFilter plugin may see: the snapshot, the per-node statuses from filtering,
/// the pods nominated to nodes and the framework itself, to re-run filters on hypothetical
/// node states.
pub struct PostFilterContext<'a> {
    pub snapshot: &'a Snapshot,
    pub statuses: &'a super::NodeToStatus,
    pub nominated: &'a super::NominatedPods,
    pub framework: &'a Framework,
    /// Set when the cycle is explained: PostFilter plugins describe what they tried here.
    pub explain: Option<&'a std::sync::Mutex<crate::explain::Preemption>>,
}

/// Runs only when no node fits: upstream's place for preemption.
pub trait PostFilterPlugin: Plugin {
    fn post_filter(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        ctx: &PostFilterContext<'_>,
    ) -> (Option<PostFilterResult>, Status);
}

/// Computes per-pod state for scoring over the feasible nodes only.
pub trait PreScorePlugin: Plugin {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: FeasibleNodes<'_>,
        snapshot: &Snapshot,
    ) -> Status;
}

/// One node's score from one plugin, as NormalizeScore sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeScore<'a> {
    pub name: &'a str,
    pub score: i64,
}

/// Rates one feasible node; the framework normalises, weights and sums the ratings.
pub trait ScorePlugin: Plugin {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status>;

    /// [`score`](Self::score) of each of `nodes` into `out` (as long as `nodes`). The
    /// framework calls this on unsampled cycles; a plugin overrides it to look up its
    /// per-pod state once instead of once per node, and must give what `score` gives.
    fn score_nodes(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: FeasibleNodes<'_>,
        out: &mut [i64],
    ) -> Result<(), Status> {
        for (slot, node) in out.iter_mut().zip(nodes) {
            *slot = self.score(state, pod, node)?;
        }
        Ok(())
    }

    /// [`score_nodes`](Self::score_nodes) given each node's
    /// [`NodeSummary`](crate::types::NodeSummary) too (`summaries.get(i)` is `nodes[i]`'s). A plugin overrides it to read the summary, where it
    /// has what the plugin needs, instead of the node; it must give what `score_nodes`
    /// gives. Default: `score_nodes`.
    fn score_summarized(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: FeasibleNodes<'_>,
        _summaries: FeasibleSummaries<'_>,
        out: &mut [i64],
    ) -> Result<(), Status> {
        self.score_nodes(state, pod, nodes, out)
    }

    /// Whether the plugin normalizes its scores (upstream: its `ScoreExtensions` is not
    /// nil). The framework calls neither normalize method of a plugin that says no, and a
    /// plugin that overrides one must say yes. Default: no.
    fn has_score_extensions(&self) -> bool {
        false
    }

    /// [`normalize_scores`](Self::normalize_scores) on the raw scores alone (in node order,
    /// in place), for a plugin whose normalization reads no node name: the framework then
    /// need not read the nodes' names. `None` (default): call `normalize_scores`.
    fn normalize_score_values(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        _scores: &mut [i64],
    ) -> Option<Status> {
        None
    }

    /// Maps raw scores into `0..=MAX_NODE_SCORE` (only called when
    /// [`has_score_extensions`](Self::has_score_extensions)). Default: scores are already
    /// in range.
    fn normalize_scores(
        &self,
        _state: &CycleState,
        _pod: &PodInfo,
        _scores: &mut [NodeScore<'_>],
    ) -> Status {
        Status::success()
    }
}

/// Claims resources for the pod on the chosen node before binding; undone by `unreserve`.
pub trait ReservePlugin: Plugin {
    fn reserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status;
    fn unreserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str);
}

/// Approves, rejects or delays (Wait with a timeout) the binding.
pub trait PermitPlugin: Plugin {
    fn permit(&self, state: &CycleState, pod: &PodInfo, node: &str) -> (Status, Duration);
}

/// Prepares the binding (e.g. volume bindings) in the binding cycle.
pub trait PreBindPlugin: Plugin {
    fn pre_bind(&self, state: &CycleState, pod: &PodInfo, node: &str) -> Status;
}

/// What the controller must do to bind a pod: scheduler-core decides, the controller acts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BindAction {
    /// POST a `Binding` to `pods/{name}/binding`.
    Binding {
        pod: PodKey,
        uid: String,
        node: String,
    },
}

/// Binds the pod; returns Skip to let the next bind plugin handle it.
pub trait BindPlugin: Plugin {
    fn bind(&self, state: &CycleState, pod: &PodInfo, node: &str) -> Result<BindAction, Status>;
}

/// Informational, after a successful bind.
pub trait PostBindPlugin: Plugin {
    fn post_bind(&self, state: &CycleState, pod: &PodInfo, node: &str);
}
