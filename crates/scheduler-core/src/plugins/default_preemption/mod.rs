//! DefaultPreemption: when no node fits, look for a node where evicting lower-priority pods
//! makes room, pick the cheapest such node, and nominate the pod there (upstream:
//! `plugins/defaultpreemption` plus the generic evaluator in `framework/preemption`).
//!
//! This file holds the plugin-specific rules: who may preempt, which pods are victims on one
//! node (all lower-priority pods removed, then put back one by one while the pod still fits),
//! PodDisruptionBudget accounting and how many candidate nodes to look for. The evaluator
//! (candidate search in parallel, node choice, result) is in [`evaluator`].

use std::cmp::Ordering as CmpOrdering;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use crate::config::{DefaultPreemptionArgs, PluginArgs};
use crate::framework::{
    CycleState, Framework, Plugin, PluginPoints, PostFilterContext, PostFilterPlugin,
    PostFilterResult, Status,
};
use crate::plugin_points;
use crate::pod_group_manager::PodGroupManager;
use crate::types::{NodeInfo, PdbInfo, PodInfo, PodKey};

use super::names::DEFAULT_PREEMPTION;

mod evaluator;
#[cfg(test)]
pub(crate) mod tests;

pub use evaluator::Candidate;

/// Status of a node without any pod of lower priority than the preemptor.
pub const NO_VICTIMS_MSG: &str = "No preemption victims found for incoming pod";
/// Status of every node that was not a preemption candidate at all.
pub const NOT_HELPFUL_MSG: &str = "Preemption is not helpful for scheduling";
pub const NOT_ELIGIBLE_NEVER_MSG: &str = "not eligible due to preemptionPolicy=Never.";
pub const NOT_ELIGIBLE_TERMINATING_MSG: &str =
    "not eligible due to a terminating pod on the nominated node.";

/// Upstream's defaults (`minCandidateNodesPercentage`, `minCandidateNodesAbsolute`).
const DEFAULT_ARGS: DefaultPreemptionArgs = DefaultPreemptionArgs {
    min_candidate_nodes_percentage: 10,
    min_candidate_nodes_absolute: 100,
};

/// Seed of the candidate-offset generator when none is given; any fixed value keeps a
/// simulation reproducible.
const DEFAULT_OFFSET_SEED: u64 = 0x9E37_79B9_7F4A_7C15;

/// Where the candidate search starts among the potential nodes. Upstream draws it at random
/// so that repeated preemptions spread over the cluster.
#[derive(Debug)]
enum Offsets {
    /// Behind a lock because the plugin is shared across threads; taken once per preemption.
    Seeded(Mutex<fastrand::Rng>),
    Fixed(usize),
}

impl Offsets {
    fn seeded(seed: u64) -> Self {
        Offsets::Seeded(Mutex::new(fastrand::Rng::with_seed(seed)))
    }

    fn next(&self, n: usize) -> usize {
        match self {
            Offsets::Fixed(k) => k % n,
            // A panic elsewhere cannot leave the generator's state invalid.
            Offsets::Seeded(rng) => rng
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .usize(..n),
        }
    }
}

pub struct DefaultPreemption {
    args: DefaultPreemptionArgs,
    offsets: Offsets,
    /// The PodGroups, when the caller keeps them ([`register`]): a victim in a group whose
    /// `disruptionMode` is `all` takes its whole group with it ([`DisruptionUnits`]).
    groups: Option<Arc<PodGroupManager>>,
}

impl std::fmt::Debug for DefaultPreemption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DefaultPreemption")
            .field("args", &self.args)
            .finish_non_exhaustive()
    }
}

/// Makes the registry's DefaultPreemption read `groups` (as GangScheduling does), so a
/// single pod's preemption evicts `disruptionMode: all` groups whole.
pub fn register(registry: &mut crate::framework::Registry, groups: Arc<PodGroupManager>) {
    registry.register_shared(
        DEFAULT_PREEMPTION,
        Arc::new(move |args| {
            let plugin = DefaultPreemption::from_args(args)?.with_groups(Arc::clone(&groups));
            Ok(Arc::new(plugin) as Arc<dyn Plugin>)
        }),
    );
}

/// The registry factory: `None` means the defaulted args.
pub fn factory(args: Option<&PluginArgs>) -> Result<Arc<dyn Plugin>, String> {
    Ok(Arc::new(DefaultPreemption::from_args(args)?))
}

impl DefaultPreemption {
    /// From the profile's args (`None`: the defaults).
    pub fn from_args(args: Option<&PluginArgs>) -> Result<Self, String> {
        let args = match args {
            None => DEFAULT_ARGS,
            Some(PluginArgs::DefaultPreemption(a)) => a.clone(),
            Some(other) => {
                return Err(format!(
                    "got args of type {}, want DefaultPreemptionArgs",
                    other.kind()
                ));
            }
        };
        DefaultPreemption::new(args)
    }

    /// Reads the PodGroups for victims' disruption modes.
    pub fn with_groups(mut self, groups: Arc<PodGroupManager>) -> Self {
        self.groups = Some(groups);
        self
    }

    /// The disruption units of the bound pods in `ctx`'s snapshot.
    pub(crate) fn disruption_units(&self, snapshot: &crate::cache::Snapshot) -> DisruptionUnits {
        match &self.groups {
            Some(g) => crate::group_preemption::disruption_units(&g.read(), snapshot),
            None => DisruptionUnits::default(),
        }
    }

    /// Validates the args as upstream's `New` does (config validation reports the same
    /// problems earlier, with positions).
    pub fn new(args: DefaultPreemptionArgs) -> Result<Self, String> {
        let (pct, abs) = (
            args.min_candidate_nodes_percentage,
            args.min_candidate_nodes_absolute,
        );
        if !(0..=100).contains(&pct) {
            return Err(format!(
                "minCandidateNodesPercentage: Invalid value: {pct}: not in valid range [0, 100]"
            ));
        }
        if abs < 0 {
            return Err(format!(
                "minCandidateNodesAbsolute: Invalid value: {abs}: not in valid range [0, inf)"
            ));
        }
        if pct == 0 && abs == 0 {
            return Err(
                "minCandidateNodesPercentage and minCandidateNodesAbsolute cannot both be zero"
                    .into(),
            );
        }
        Ok(DefaultPreemption {
            args,
            offsets: Offsets::seeded(DEFAULT_OFFSET_SEED),
            groups: None,
        })
    }

    /// Reseeds the random start of the candidate search.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.offsets = Offsets::seeded(seed);
        self
    }

    /// Always starts the candidate search at `offset` (modulo the number of potential nodes).
    pub fn with_fixed_offset(mut self, offset: usize) -> Self {
        self.offsets = Offsets::Fixed(offset);
        self
    }

    pub fn args(&self) -> &DefaultPreemptionArgs {
        &self.args
    }

    /// How many candidates the dry run must produce: the percentage of `num_nodes`, at least
    /// the absolute minimum, at most `num_nodes`.
    pub fn calculate_num_candidates(&self, num_nodes: usize) -> usize {
        let pct = usize::try_from(self.args.min_candidate_nodes_percentage).unwrap_or(0);
        let abs = usize::try_from(self.args.min_candidate_nodes_absolute).unwrap_or(0);
        (num_nodes * pct / 100).max(abs).min(num_nodes)
    }

    /// A random start in `0..num_nodes` and the number of candidates to look for.
    pub fn offset_and_num_candidates(&self, num_nodes: usize) -> (usize, usize) {
        if num_nodes == 0 {
            return (0, 0);
        }
        (
            self.offsets.next(num_nodes),
            self.calculate_num_candidates(num_nodes),
        )
    }
}

impl Plugin for DefaultPreemption {
    fn name(&self) -> &'static str {
        DEFAULT_PREEMPTION
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => post_filter)
    }
}

impl PostFilterPlugin for DefaultPreemption {
    fn post_filter(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        ctx: &PostFilterContext<'_>,
    ) -> (Option<PostFilterResult>, Status) {
        let (result, status) = self.preempt(state, pod, ctx);
        let msg = status.message();
        if msg.is_empty() {
            return (result, status);
        }
        (
            result,
            Status::new(status.code(), format!("preemption: {msg}")),
        )
    }
}

/// Whether `pod` may preempt at all. A pod already nominated somewhere waits while lower
/// priority pods there are still terminating because of an earlier preemption, unless the
/// nominated node has become unresolvable for it.
pub fn pod_eligible_to_preempt_others(
    pod: &PodInfo,
    nominated_node: Option<&NodeInfo>,
    nominated_node_unresolvable: bool,
) -> Result<(), &'static str> {
    if pod.preemption_policy_never {
        return Err(NOT_ELIGIBLE_NEVER_MSG);
    }
    if pod.nominated_node_name.is_none() || nominated_node_unresolvable {
        return Ok(());
    }
    let waiting = nominated_node.is_some_and(|node| {
        node.pods
            .iter()
            .any(|p| may_preempt(pod, p) && p.terminating_by_preemption)
    });
    if waiting {
        Err(NOT_ELIGIBLE_TERMINATING_MSG)
    } else {
        Ok(())
    }
}

/// Only pods of strictly lower priority can be victims.
fn may_preempt(preemptor: &PodInfo, victim: &PodInfo) -> bool {
    victim.priority < preemptor.priority
}

/// Pods a single pod's preemption evicts together, as upstream's workload-aware preemption
/// does: the bound pods of a PodGroup whose `disruptionMode` is `all` (or of the
/// CompositePodGroup tree above it, when that one's is). Choosing any of them as a victim
/// evicts all of them, wherever they run; they are victims only when the unit's priority
/// (its PodGroups' `spec.priority`, else its pods') is below the preemptor's, and never
/// while one of them is already terminating. Built once per preemption attempt
/// ([`crate::group_preemption::disruption_units`]); empty when no group asks for it, and
/// then every pod is its own unit as before.
#[derive(Clone, Debug, Default)]
pub struct DisruptionUnits {
    unit_of: HashMap<PodKey, usize>,
    units: Vec<UnitPods>,
}

#[derive(Clone, Debug)]
struct UnitPods {
    /// (node, pod)
    pods: Vec<(Arc<str>, Arc<PodInfo>)>,
    priority: i32,
    terminating: bool,
}

impl DisruptionUnits {
    /// One unit: its bound pods with their nodes, its priority, and whether one of them is
    /// terminating.
    pub fn add(&mut self, pods: Vec<(Arc<str>, Arc<PodInfo>)>, priority: i32, terminating: bool) {
        let i = self.units.len();
        for (_, p) in &pods {
            self.unit_of.insert(p.key().clone(), i);
        }
        self.units.push(UnitPods {
            pods,
            priority,
            terminating,
        });
    }

    pub fn is_empty(&self) -> bool {
        self.units.is_empty()
    }

    fn unit(&self, pod: &PodInfo) -> Option<usize> {
        self.unit_of.get(pod.key()).copied()
    }

    /// Whether `victim` may be evicted for `preemptor`.
    fn may_preempt(&self, preemptor: &PodInfo, victim: &PodInfo) -> bool {
        match self.unit(victim).map(|u| &self.units[u]) {
            Some(u) => !u.terminating && u.priority < preemptor.priority,
            None => may_preempt(preemptor, victim),
        }
    }

    /// The pods of `victim`'s unit that are not on `node` (none for a pod alone).
    fn elsewhere(&self, victim: &PodInfo, node: &str) -> Vec<Arc<PodInfo>> {
        match self.unit(victim) {
            Some(u) => self.units[u]
                .pods
                .iter()
                .filter(|(n, _)| &**n != node)
                .map(|(_, p)| Arc::clone(p))
                .collect(),
            None => Vec::new(),
        }
    }
}

/// Start time for ordering; a pod that has not started counts as starting now, i.e. after
/// every recorded start (upstream reads the clock; a pure crate cannot).
fn start_or_now(p: &PodInfo) -> i64 {
    p.start_time.unwrap_or(i64::MAX)
}

/// Upstream `MoreImportantPod` as an ordering: higher priority first, then the pod that
/// started earlier.
pub fn importance_order(a: &PodInfo, b: &PodInfo) -> CmpOrdering {
    b.priority
        .cmp(&a.priority)
        .then_with(|| start_or_now(a).cmp(&start_or_now(b)))
}

/// The earliest start among the victims of the highest priority (victims sorted most
/// important first, so that priority is the first victim's).
pub fn earliest_start_of_top_victims(victims: &[Arc<PodInfo>]) -> Option<i64> {
    let top = victims.first()?.priority;
    victims
        .iter()
        .filter(|p| p.priority == top)
        .map(|p| start_or_now(p))
        .min()
}

/// Splits `pods` (order kept) into those whose eviction would push some budget below zero and
/// the rest, spending each matching budget once per pod as upstream does.
pub fn filter_pods_with_pdb_violation(
    pods: Vec<Arc<PodInfo>>,
    pdbs: &[Arc<PdbInfo>],
) -> (Vec<Arc<PodInfo>>, Vec<Arc<PodInfo>>) {
    let mut allowed: Vec<i32> = pdbs.iter().map(|p| p.disruptions_allowed).collect();
    let mut violating = Vec::new();
    let mut non_violating = Vec::new();
    for pod in pods {
        let mut violated = false;
        if !pod.labels.is_empty() {
            // Budgets are sorted by namespace: only that namespace's slice can match.
            let ns = pod.namespace();
            let from = pdbs.partition_point(|p| p.namespace.as_str() < ns);
            let to = pdbs.partition_point(|p| p.namespace.as_str() <= ns);
            for i in from..to {
                if pdbs[i].covers(&pod) {
                    allowed[i] -= 1;
                    violated |= allowed[i] < 0;
                }
            }
        }
        if violated {
            violating.push(pod);
        } else {
            non_violating.push(pod);
        }
    }
    (violating, non_violating)
}

/// Victims chosen on one node and how many of them break a budget.
#[derive(Clone, Debug)]
pub struct NodeVictims {
    /// Most important first.
    pub pods: Vec<Arc<PodInfo>>,
    pub num_pdb_violations: usize,
}

/// Upstream `SelectVictimsOnNode`, on a private copy of the node and the cycle state: remove
/// every lower-priority pod; if the preemptor still does not fit, give up with the filter's
/// status. Otherwise put pods back, most important first (budget-violating ones before the
/// others so they are spared when possible), keeping each one that still leaves room. The
/// pods of one disruption unit go back together or not at all, and a unit that stays a
/// victim brings its pods on other nodes (see [`DisruptionUnits`]).
pub fn select_victims_on_node(
    fw: &Framework,
    state: &mut CycleState,
    pod: &PodInfo,
    node: &mut Arc<NodeInfo>,
    nominated: &[Arc<PodInfo>],
    pdbs: &[Arc<PdbInfo>],
    units: &DisruptionUnits,
) -> Result<NodeVictims, Status> {
    let mut potential: Vec<Arc<PodInfo>> = node
        .pods
        .iter()
        .filter(|p| units.may_preempt(pod, p))
        .cloned()
        .collect();
    for v in &potential {
        remove_from(fw, state, pod, node, v)?;
    }
    if potential.is_empty() {
        return Err(Status::unresolvable(NO_VICTIMS_MSG));
    }
    // Affinity of the preemptor to the victims themselves is not considered, as upstream.
    let s = fw.run_filter_with_nominated_pods(state, pod, node, nominated);
    if !s.is_success() {
        return Err(s);
    }
    potential.sort_by(|a, b| importance_order(a, b));
    let (violating, non_violating) = filter_pods_with_pdb_violation(potential, pdbs);
    let mixed = !violating.is_empty() && !non_violating.is_empty();
    let violating_keys: HashSet<PodKey> = violating.iter().map(|p| p.key().clone()).collect();
    // Each entry is put back whole: a pod alone, or a unit's pods on this node. A unit
    // breaks a budget when any of its pods does.
    let entries = |pods: Vec<Arc<PodInfo>>| -> Vec<Vec<Arc<PodInfo>>> {
        let mut out: Vec<Vec<Arc<PodInfo>>> = Vec::new();
        let mut at: HashMap<usize, usize> = HashMap::new();
        for p in pods {
            match units.unit(&p) {
                Some(u) => match at.get(&u) {
                    Some(&i) => out[i].push(p),
                    None => {
                        at.insert(u, out.len());
                        out.push(vec![p]);
                    }
                },
                None => out.push(vec![p]),
            }
        }
        out
    };
    let (mut first, mut rest) = (Vec::new(), Vec::new());
    for entry in entries(violating.into_iter().chain(non_violating).collect()) {
        if entry.iter().any(|p| violating_keys.contains(p.key())) {
            first.push(entry);
        } else {
            rest.push(entry);
        }
    }

    let mut victims = Vec::new();
    let mut num_pdb_violations = 0;
    let mut elsewhere = Vec::new();
    for entry in first.into_iter().chain(rest) {
        for p in &entry {
            add_to(fw, state, pod, node, p)?;
        }
        if fw
            .run_filter_with_nominated_pods(state, pod, node, nominated)
            .is_success()
        {
            continue;
        }
        for p in &entry {
            remove_from(fw, state, pod, node, p)?;
        }
        num_pdb_violations += entry
            .iter()
            .filter(|p| violating_keys.contains(p.key()))
            .count();
        elsewhere.extend(units.elsewhere(&entry[0], &node.name));
        victims.extend(entry);
    }
    if !elsewhere.is_empty() {
        let (broken, _) = filter_pods_with_pdb_violation(elsewhere.clone(), pdbs);
        num_pdb_violations += broken.len();
        victims.extend(elsewhere);
    }
    if mixed || !units.is_empty() {
        victims.sort_by(|a, b| importance_order(a, b));
    }
    Ok(NodeVictims {
        pods: victims,
        num_pdb_violations,
    })
}

fn remove_from(
    fw: &Framework,
    state: &mut CycleState,
    pod: &PodInfo,
    node: &mut Arc<NodeInfo>,
    victim: &Arc<PodInfo>,
) -> Result<(), Status> {
    Arc::make_mut(node).remove_pod(victim.key());
    let s = fw.run_pre_filter_remove_pod(state, pod, victim, node);
    if s.is_success() { Ok(()) } else { Err(s) }
}

fn add_to(
    fw: &Framework,
    state: &mut CycleState,
    pod: &PodInfo,
    node: &mut Arc<NodeInfo>,
    victim: &Arc<PodInfo>,
) -> Result<(), Status> {
    Arc::make_mut(node).add_pod(Arc::clone(victim));
    let s = fw.run_pre_filter_add_pod(state, pod, victim, node);
    if s.is_success() { Ok(()) } else { Err(s) }
}
