//! Workload-aware preemption (upstream: `framework/preemption/podgrouppreemption.go`): when
//! a gang does not fit, find the fewest and least important pods whose eviction lets the
//! whole gang fit, across the cluster, or evict nothing.
//!
//! * **Victim units.** Every bound pod of lower priority than the gang is a candidate. A
//!   pod's priority is its PodGroup's `spec.priority` when it has one. The pods of a group
//!   whose `disruptionMode` is `all` form one unit, evicted together or not at all (with the
//!   CompositePodGroup gate, the pods of the highest ancestor CompositePodGroup in `all`
//!   mode do); any other pod is a unit of its own.
//! * **Search.** Every candidate unit is removed from the cache and the gang tried with the
//!   pod group cycle. If it still does not fit, nothing is evicted. Otherwise units are put
//!   back, most important first, and a unit stays (is reprieved) when the gang still fits
//!   with at least as many of its pods placed as the best so far. What is left are the
//!   victims, and the gang's placement in that last try gives its pods' nominated nodes.
//!   Upstream tries every unit in turn; [`reprieve`] reaches the same victims by galloping
//!   over the runs of units that fit back, in O(victims x log n) gang cycles, capped at
//!   [`MAX_REPRIEVE_TRIALS`].
//! * **Pending preemption.** While a gang's nominated nodes still hold pods being evicted
//!   for it, nothing new is evicted: the gang waits for them.
//!
//! Everything is tried against the caller's cache and put back before returning, so the
//! caller holds it (the controller: its state lock) for the whole search. Units whose
//! eviction would break a PodDisruptionBudget are reprieved first, as upstream's. Not done
//! yet: groups with a topology constraint are not preempted for (as upstream's 1.36).

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use crate::cache::{Cache, Snapshot};
use crate::framework::{Framework, NominatedPods, QueuedPodInfo};
use crate::plugins::default_preemption::filter_pods_with_pdb_violation;
use crate::pod_group_manager::PodGroups;
use crate::pod_group_tree::{self, TreeNode};
use crate::schedule_group::{GroupOutcome, PlacedMember, schedule_group, undo_placed};
use crate::schedule_one::SchedulingAlgorithm;
use crate::schedule_tree::schedule_tree;
use crate::types::composite_pod_group::CompositeKey;
use crate::types::pod_group::{PodGroupInfo, PodGroupKey};
use crate::types::{PdbInfo, PodInfo, PodKey};

/// What preemption decided for a gang that did not fit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupPreemption {
    /// Evict `victims`; the gang's pods are then nominated to their nodes.
    Preempt {
        victims: Vec<PodKey>,
        nominations: Vec<(PodKey, String)>,
        message: String,
    },
    /// Pods evicted for the gang earlier are still terminating on its nominated nodes.
    Waiting { message: String },
    /// No eviction of lower-priority pods lets the gang fit.
    NotHelpful { message: String },
}

/// At most this many gang cycles are spent putting victims back (see [`reprieve`]).
pub const MAX_REPRIEVE_TRIALS: usize = 2048;

pub const ONGOING_PREEMPTION: &str = "ongoing preemption on nominated nodes";
pub const TOPOLOGY_NOT_SUPPORTED: &str =
    "workload aware preemption is not supported for pod groups with scheduling constraints";

/// One candidate: a pod, or a whole `disruptionMode: all` group.
struct Unit {
    pods: Vec<Arc<PodInfo>>,
    priority: i32,
    /// A CompositePodGroup's subtree (2) ranks above a PodGroup (1), which ranks above a
    /// single pod (0) of equal priority.
    rank: u8,
    /// Earliest start among its pods (older is more important).
    start: i64,
    name: String,
}

/// Most important first: higher priority, groups before single pods, larger groups, older,
/// then by name.
fn more_important(a: &Unit, b: &Unit) -> Ordering {
    b.priority
        .cmp(&a.priority)
        .then(b.rank.cmp(&a.rank))
        .then(b.pods.len().cmp(&a.pods.len()))
        .then(a.start.cmp(&b.start))
        .then(a.name.cmp(&b.name))
}

/// The gang's preemption priority: its group's (a tree's root's), else its pods' highest.
fn gang_priority(group: Option<i32>, members: &[QueuedPodInfo]) -> i32 {
    group.unwrap_or_else(|| members.iter().map(|m| m.pod.priority).max().unwrap_or(0))
}

/// Runs workload-aware preemption for `group`, whose `members` just failed a group cycle.
#[allow(clippy::too_many_arguments)]
pub fn preempt_for_group(
    fw: &Framework,
    alg: &mut SchedulingAlgorithm,
    group: &PodGroupInfo,
    scheduled: &[String],
    members: &[QueuedPodInfo],
    groups: &PodGroups,
    cache: &mut Cache,
    snapshot: &mut Snapshot,
    nominated: &NominatedPods,
) -> GroupPreemption {
    if group.topology_key.is_some() {
        return not_helpful(TOPOLOGY_NOT_SUPPORTED);
    }
    cache.update_snapshot(snapshot);
    // A group its plugins reject before any member is tried (scheduler-plugins: an
    // unresolvable PreFilter rejection) is not preempted for.
    if let Err((_, r)) = fw.run_pre_filter_group(group, snapshot, scheduled.len()) {
        return not_helpful(&r.message);
    }
    let priority = gang_priority(group.priority, members);
    let own = |k: &PodGroupKey| *k == group.key;
    let target = Target::Group { group, scheduled };
    let ctx = (cache, snapshot, nominated);
    preempt(fw, alg, target, members, priority, groups, &own, ctx)
}

/// Runs workload-aware preemption for the tree of groups under `root` (CompositePodGroup
/// gate; upstream preempts for the root only), whose `members` just failed its cycle: the
/// victims must let the whole tree meet its root's quorum. Trees with a topology constraint
/// at any level are not preempted for, as single groups with one.
#[allow(clippy::too_many_arguments)]
pub fn preempt_for_tree(
    fw: &Framework,
    alg: &mut SchedulingAlgorithm,
    root: &CompositeKey,
    members: &[QueuedPodInfo],
    groups: &PodGroups,
    cache: &mut Cache,
    snapshot: &mut Snapshot,
    nominated: &NominatedPods,
) -> GroupPreemption {
    let node = TreeNode::Composite(root.clone());
    let leaves: HashSet<PodGroupKey> = pod_group_tree::leaves(groups, &node).into_iter().collect();
    let topology = pod_group_tree::composites_under(groups, root)
        .iter()
        .any(|c| {
            groups
                .composite(c)
                .is_some_and(|c| c.topology_key.is_some())
        })
        || leaves
            .iter()
            .any(|l| groups.get(l).is_some_and(|g| g.topology_key.is_some()));
    if topology {
        return not_helpful(TOPOLOGY_NOT_SUPPORTED);
    }
    cache.update_snapshot(snapshot);
    let root_priority = groups.composite(root).and_then(|c| c.priority);
    let priority = gang_priority(root_priority, members);
    let own = |k: &PodGroupKey| leaves.contains(k);
    let target = Target::Tree { groups, root };
    let ctx = (cache, snapshot, nominated);
    preempt(fw, alg, target, members, priority, groups, &own, ctx)
}

fn not_helpful(message: &str) -> GroupPreemption {
    GroupPreemption::NotHelpful {
        message: message.to_string(),
    }
}

/// The search shared by groups and trees; `own`: the preemptor's PodGroups, whose pods are
/// never victims.
#[allow(clippy::too_many_arguments)]
fn preempt(
    fw: &Framework,
    alg: &mut SchedulingAlgorithm,
    target: Target<'_>,
    members: &[QueuedPodInfo],
    priority: i32,
    groups: &PodGroups,
    own: &dyn Fn(&PodGroupKey) -> bool,
    (cache, snapshot, nominated): (&mut Cache, &mut Snapshot, &NominatedPods),
) -> GroupPreemption {
    if members.iter().any(|m| m.pod.preemption_policy_never) {
        return not_helpful("not eligible due to preemptionPolicy=Never.");
    }
    // Victims evicted for this gang earlier are still going: wait for them.
    let pending = members.iter().any(|m| {
        m.pod
            .nominated_node_name
            .as_deref()
            .and_then(|n| snapshot.get(n))
            .is_some_and(|n| n.pods.iter().any(|p| p.terminating_by_preemption))
    });
    if pending {
        return GroupPreemption::Waiting {
            message: ONGOING_PREEMPTION.to_string(),
        };
    }
    let mut units = candidate_units(own, priority, groups, cache, snapshot);
    if units.is_empty() {
        return not_helpful("no lower-priority pods to preempt");
    }
    units.sort_by(more_important);
    let units = budget_violators_first(units, snapshot.pdbs());

    let mut trial = Trial {
        fw,
        alg,
        target,
        members,
        cache,
        snapshot,
        nominated,
        last_nodes: HashSet::new(),
        independent: independent_members(members),
    };
    for u in &units {
        trial.remove(u);
    }
    let Some(best) = trial.placed() else {
        for u in &units {
            trial.restore(u);
        }
        return not_helpful("preemption cannot make the pod group fit");
    };
    let victims = reprieve(&mut trial, &units, best);
    // The gang's placement with exactly the victims gone: its nominated nodes.
    let nominations = trial.placement();
    for &i in &victims {
        trial.restore(&units[i]);
    }
    let victims: Vec<PodKey> = victims
        .iter()
        .flat_map(|&i| units[i].pods.iter().map(|p| p.key().clone()))
        .collect();
    GroupPreemption::Preempt {
        message: format!(
            "found a placement for podgroup, preempting {} victims",
            victims.len()
        ),
        victims,
        nominations,
    }
}

/// Upstream's reprieve pass, with every unit out of the cache on entry: units go back most
/// important first, and a unit stays only if the gang still fits with at least `best` pods
/// placed (the most seen so far); the others are the victims (indices into `units`). On
/// return the reprieved units are back and the victims still out.
///
/// Upstream runs one gang cycle per unit. Putting pods back only makes the gang harder to
/// place, so the units reprieved before the next victim are the longest run that fits back
/// together; it is found by galloping (1, 2, 4, ... units, then bisecting the last step),
/// which gives the same victims in O(victims x log gap) cycles. Units that cannot touch the
/// gang's last placement are put back without a cycle ([`Trial::still_fits_with`]). The search runs under the
/// caller's lock, so after [`MAX_REPRIEVE_TRIALS`] cycles the units not yet tried stay
/// victims.
fn reprieve(trial: &mut Trial<'_>, units: &[Unit], mut best: usize) -> Vec<usize> {
    let mut victims = Vec::new();
    let mut trials = 0;
    let mut next = 0;
    while next < units.len() {
        if trials >= MAX_REPRIEVE_TRIALS {
            victims.extend(next..units.len());
            break;
        }
        // Does units[next..next + len] fit back on top of what is reprieved already?
        let mut fits_back = |len: usize| {
            let run = &units[next..next + len];
            if trial.still_fits_with(run) {
                return true;
            }
            trials += 1;
            run.iter().for_each(|u| trial.restore(u));
            let ok = match trial.placed() {
                Some(n) if n >= best => {
                    best = n;
                    true
                }
                _ => false,
            };
            run.iter().for_each(|u| trial.remove(u));
            ok
        };
        // Gallop: `fits` units are known to fit back, `fails` are not.
        let left = units.len() - next;
        let (mut fits, mut fails) = (0, left + 1);
        let mut step = 1;
        while fits < left {
            let len = step.min(left);
            if !fits_back(len) {
                fails = len;
                break;
            }
            fits = len;
            step *= 2;
        }
        while fails - fits > 1 {
            let mid = (fits + fails) / 2;
            if fits_back(mid) {
                fits = mid;
            } else {
                fails = mid;
            }
        }
        units[next..next + fits]
            .iter()
            .for_each(|u| trial.restore(u));
        next += fits;
        if next < units.len() {
            victims.push(next);
            next += 1;
        }
    }
    victims
}

/// Upstream's reprieve order: the units whose eviction would break a PodDisruptionBudget
/// first (a unit breaks one when any of its pods does, budgets spent pod by pod in
/// importance order), so they are spared when possible; each part keeps its order.
fn budget_violators_first(units: Vec<Unit>, pdbs: &[Arc<PdbInfo>]) -> Vec<Unit> {
    if pdbs.is_empty() {
        return units;
    }
    let pods: Vec<Arc<PodInfo>> = units.iter().flat_map(|u| u.pods.iter().cloned()).collect();
    let (violating, _) = filter_pods_with_pdb_violation(pods, pdbs);
    let violating: HashSet<&PodKey> = violating.iter().map(|p| p.key()).collect();
    let (mut first, rest): (Vec<Unit>, Vec<Unit>) = units
        .into_iter()
        .partition(|u| u.pods.iter().any(|p| violating.contains(p.key())));
    first.extend(rest);
    first
}

/// Bound, lower-priority pods as units; pods of the preemptor's own groups never.
fn candidate_units(
    own: &dyn Fn(&PodGroupKey) -> bool,
    priority: i32,
    groups: &PodGroups,
    cache: &Cache,
    snapshot: &Snapshot,
) -> Vec<Unit> {
    let mut singles = Vec::new();
    let mut whole: BTreeMap<TreeNode, Unit> = BTreeMap::new();
    for node in snapshot.node_infos() {
        for p in &node.pods {
            if p.is_terminating || cache.is_assumed(p.key()) {
                continue;
            }
            if p.pod_group.as_deref().is_some_and(own) {
                continue;
            }
            let g = p.pod_group.as_deref().and_then(|k| groups.get(k));
            let pod_priority = g.and_then(|g| g.priority).unwrap_or(p.priority);
            if pod_priority >= priority {
                continue;
            }
            let start = p.start_time.or(p.creation_timestamp).unwrap_or(0);
            match g.and_then(|g| disruption_unit(groups, g)) {
                Some(unit) => {
                    let u = whole.entry(unit.clone()).or_insert_with(|| Unit {
                        pods: Vec::new(),
                        priority: pod_priority,
                        rank: if matches!(unit, TreeNode::Composite(_)) {
                            2
                        } else {
                            1
                        },
                        start,
                        name: match &unit {
                            TreeNode::Group(k) => k.to_string(),
                            TreeNode::Composite(k) => k.to_string(),
                        },
                    });
                    u.start = u.start.min(start);
                    u.pods.push(Arc::clone(p));
                }
                None => singles.push(Unit {
                    pods: vec![Arc::clone(p)],
                    priority: pod_priority,
                    rank: 0,
                    start,
                    name: p.key().to_string(),
                }),
            }
        }
    }
    // A whole unit with a pod already terminating or still binding is left alone: it
    // cannot be evicted as a unit now.
    whole.retain(|unit, _| {
        !pod_group_tree::leaves(groups, unit).iter().any(|leaf| {
            groups.members(leaf).any(|(m, _)| {
                cache.is_assumed(m) || cache.get_pod(m).is_some_and(|p| p.is_terminating)
            })
        })
    });
    singles.extend(whole.into_values());
    singles
}

/// The disruption units among the bound pods of `snapshot`, for a single pod's preemption
/// ([`DisruptionUnits`](crate::plugins::default_preemption::DisruptionUnits)). Nothing to
/// look at when no PodGroup or CompositePodGroup asks for `disruptionMode: all`.
pub fn disruption_units(
    groups: &PodGroups,
    snapshot: &Snapshot,
) -> crate::plugins::default_preemption::DisruptionUnits {
    let mut out = crate::plugins::default_preemption::DisruptionUnits::default();
    if !groups.groups().any(|g| g.disrupt_all) && !groups.composites().any(|c| c.disrupt_all) {
        return out;
    }
    // Each group's unit, found once per group (not per pod): its index and the group's
    // priority.
    let mut index: BTreeMap<TreeNode, usize> = BTreeMap::new();
    let mut unit_of_group: HashMap<&PodGroupKey, (usize, Option<i32>)> = HashMap::new();
    for g in groups.groups() {
        if let Some(unit) = disruption_unit(groups, g) {
            let next = index.len();
            let u = *index.entry(unit).or_insert(next);
            unit_of_group.insert(&g.key, (u, g.priority));
        }
    }
    // ((node, pod)s, highest priority, a pod terminating) per unit.
    type Found = (Vec<(Arc<str>, Arc<PodInfo>)>, i32, bool);
    let mut found: Vec<Found> = vec![(Vec::new(), i32::MIN, false); index.len()];
    for node in snapshot.node_infos() {
        let mut name: Option<Arc<str>> = None;
        for p in &node.pods {
            let Some(&(u, group_priority)) =
                p.pod_group.as_deref().and_then(|k| unit_of_group.get(k))
            else {
                continue;
            };
            let name = name.get_or_insert_with(|| Arc::from(node.name.as_str()));
            let f = &mut found[u];
            f.0.push((Arc::clone(name), Arc::clone(p)));
            f.1 = f.1.max(group_priority.unwrap_or(p.priority));
            f.2 |= p.is_terminating;
        }
    }
    for (pods, priority, terminating) in found {
        if !pods.is_empty() {
            out.add(pods, priority, terminating);
        }
    }
    out
}

/// What a pod of `group` is evicted with (upstream): the subtree of its highest ancestor
/// whose `disruptionMode` is `all` (a CompositePodGroup, with the gate on, or the PodGroup
/// itself); `None`: the pod goes alone.
fn disruption_unit(groups: &PodGroups, group: &PodGroupInfo) -> Option<TreeNode> {
    let mut unit = group
        .disrupt_all
        .then(|| TreeNode::Group(group.key.clone()));
    let mut parent = pod_group_tree::parent_of(groups, group);
    let mut seen = HashSet::new();
    while let Some(key) = parent {
        if !seen.insert(key.clone()) {
            break;
        }
        let Some(c) = groups.composite(&key) else {
            break;
        };
        if c.disrupt_all {
            unit = Some(TreeNode::Composite(key.clone()));
        }
        parent = c
            .parent
            .as_deref()
            .map(|p| CompositeKey::new(&key.namespace, p));
    }
    unit
}

/// The cache with some units removed, and the gang tried against it.
/// What is tried: a gang, or a tree of groups.
enum Target<'a> {
    Group {
        group: &'a PodGroupInfo,
        /// Nodes of the group's pods placed before.
        scheduled: &'a [String],
    },
    Tree {
        groups: &'a PodGroups,
        root: &'a CompositeKey,
    },
}

struct Trial<'a> {
    fw: &'a Framework,
    alg: &'a mut SchedulingAlgorithm,
    target: Target<'a>,
    members: &'a [QueuedPodInfo],
    cache: &'a mut Cache,
    snapshot: &'a mut Snapshot,
    nominated: &'a NominatedPods,
    /// The nodes of the last placement that fitted, while [`Self::independent`].
    last_nodes: HashSet<String>,
    /// Whether pods put back on other nodes cannot change whether that placement fits:
    /// see [`independent_members`].
    independent: bool,
}

/// Whether a gang's new members only compete for their own nodes' room: identical (so
/// the cycle places as many as any placement would: each node holds a fixed number of
/// them, whatever the order), and with nothing that looks at other nodes' pods (pod
/// affinity or anti-affinity, hard topology spread, volumes, claims).
fn independent_members(members: &[QueuedPodInfo]) -> bool {
    let Some(first) = members.first().map(|m| &m.pod) else {
        return false;
    };
    members.iter().all(|m| {
        let p = &m.pod;
        !p.has_pod_affinity
            && !p.has_required_pod_anti_affinity
            && p.topology_spread_constraints
                .iter()
                .all(|c| c.when_unsatisfiable != "DoNotSchedule")
            && p.pvc_names.is_empty()
            && p.resource_claims.is_empty()
            && p.requests == first.requests
            && p.host_ports == first.host_ports
            && p.node_selector == first.node_selector
            && p.required_node_affinity == first.required_node_affinity
            && p.tolerations == first.tolerations
    })
}

impl Trial<'_> {
    /// Whether `run` put back certainly leaves the gang fitting as well as now, without a
    /// cycle: the gang's members are independent, the last placement that fitted uses none
    /// of the run's nodes, and no pod of the run repels others (required anti-affinity).
    fn still_fits_with(&self, run: &[Unit]) -> bool {
        self.independent
            && !self.last_nodes.is_empty()
            && run.iter().all(|u| {
                u.pods.iter().all(|p| {
                    !p.has_required_pod_anti_affinity
                        && p.node_name
                            .as_deref()
                            .is_some_and(|n| !self.last_nodes.contains(n))
                })
            })
    }

    fn remove(&mut self, u: &Unit) {
        for p in &u.pods {
            let _ = self.cache.remove_pod(p.key());
        }
    }

    fn restore(&mut self, u: &Unit) {
        for p in &u.pods {
            let _ = self.cache.add_pod(Arc::clone(p));
        }
    }

    /// How many members the gang places now (`None`: it does not fit); nothing is kept
    /// but where they went.
    fn placed(&mut self) -> Option<usize> {
        self.run().map(|placed| {
            let n = placed.len();
            self.last_nodes = placed.iter().map(|p| p.node.clone()).collect();
            self.undo(placed);
            n
        })
    }

    /// Where the gang's members go now; nothing is kept.
    fn placement(&mut self) -> Vec<(PodKey, String)> {
        let placed = self.run().unwrap_or_default();
        let out = placed
            .iter()
            .map(|p| (p.queued.pod.key().clone(), p.node.clone()))
            .collect();
        self.undo(placed);
        out
    }

    fn run(&mut self) -> Option<Vec<PlacedMember>> {
        match self.target {
            Target::Group { group, scheduled } => match schedule_group(
                self.fw,
                self.alg,
                group,
                scheduled,
                self.members.to_vec(),
                self.cache,
                self.snapshot,
                self.nominated,
            ) {
                GroupOutcome::Placed { placed, .. } => Some(placed),
                GroupOutcome::Unschedulable { .. } => None,
            },
            // The root met its quorum when some PodGroup of it is placed.
            Target::Tree { groups, root } => {
                let placed: Vec<PlacedMember> = schedule_tree(
                    self.fw,
                    self.alg,
                    groups,
                    root,
                    self.members.to_vec(),
                    self.cache,
                    self.snapshot,
                    self.nominated,
                )
                .into_iter()
                .flat_map(|leaf| match leaf.outcome {
                    GroupOutcome::Placed { placed, .. } => placed,
                    GroupOutcome::Unschedulable { .. } => Vec::new(),
                })
                .collect();
                (!placed.is_empty()).then_some(placed)
            }
        }
    }

    fn undo(&mut self, placed: Vec<PlacedMember>) {
        undo_placed(self.fw, self.cache, placed);
    }
}
