//! Why a gang is pending: the pod group cycle explained. A pod of a gang is never tried
//! alone; the group cycle ([`crate::schedule_group`]) tries every waiting pod of the group
//! in turn and keeps all or nothing. When asked (a [`GroupRecord`] passed to
//! [`schedule_group_recorded`](crate::schedule_group::schedule_group_recorded)), that same
//! cycle records which member fitted where, which did not and why, the quorum's verdict and,
//! for a topology-constrained group, every domain it evaluated. Without a recorder nothing
//! is recorded.
//!
//! The section serializes as the `group` field of an [`Explanation`] (schema
//! `ferrosched.io/explain/v1`, documented in `docs/explain.md`).

use std::collections::HashMap;

use serde::Serialize;

use super::{Explanation, Outcome};
use crate::framework::{Framework, Status};
use crate::plugins::names::{COSCHEDULING, GANG_SCHEDULING};
use crate::pod_group_manager::PodGroups;
use crate::schedule_group::GroupOutcome;
use crate::schedule_one::Decision;
use crate::types::PodInfo;
use crate::types::pod_group::{GroupApi, GroupPolicy, PodGroupInfo, PodGroupKey};

/// The group a pod belongs to and what its group cycle decided (or why there was none).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupExplanation {
    /// `namespace/name` of the PodGroup.
    pub pod_group: String,
    /// The API resource the group lives in: `podgroups.scheduling.k8s.io` (Workload API) or
    /// `podgroups.scheduling.x-k8s.io` (scheduler-plugins' Coscheduling).
    pub api: String,
    /// The PodGroup's `apiVersion`, when the object was read with one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `gang` or `basic`; absent when the PodGroup was not found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<GroupPolicyName>,
    /// The quorum (`gang.minCount`, Coscheduling's `minMember`; 1 for `basic`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_count: Option<u32>,
    /// `schedulingConstraints.topology[0].key`: the group lands in one domain of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology_key: Option<String>,
    pub pods: GroupPods,
    pub outcome: GroupResult,
    /// The group's reason: upstream's text (`minCount (3) cannot be satisfied: ...`, `0/2
    /// placements are available, ...`, PreEnqueue's message when waiting), or why its pods
    /// are scheduled one by one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Every pod the cycle had, in the order tried (queue order).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<GroupMember>,
    /// Every topology domain evaluated, by name (topology-constrained groups).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub domains: Vec<GroupDomain>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum GroupPolicyName {
    Gang,
    Basic,
}

/// How many of the group's pods there are, and where.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupPods {
    /// Pods the cycle tried (the popped pod and its waiting siblings); 0 when none ran.
    pub queued: usize,
    /// Pods already placed (bound, or assumed while binding) before the cycle: they count
    /// toward the quorum.
    pub scheduled: usize,
    /// Every pod naming the group, placed or not (what PreEnqueue counts).
    pub total: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum GroupResult {
    /// The quorum was met: the placed members are bound.
    Placed,
    /// The quorum could not be met: nothing was kept.
    Unschedulable,
    /// A plugin failed with an error: nothing was kept.
    Error,
    /// Kept out of the queue by GangScheduling's (or Coscheduling's) PreEnqueue: no cycle ran.
    Waiting,
    /// No group cycle: the group is `basic`, or the profile does not run gangs; the pod is
    /// scheduled on its own.
    PodByPod,
}

/// One pod of the group in the cycle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupMember {
    /// `namespace/name`.
    pub pod: String,
    pub result: MemberResult,
    /// Where it was placed, or would have been (`fitted`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The FailedScheduling message the pod gets (absent for `placed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum MemberResult {
    /// Fitted, and the group was placed: bound to `node`.
    Placed,
    /// Fitted on `node`, but the group was not placed: undone.
    Fitted,
    /// No node fits it (its own `0/N nodes are available: ...`).
    Unschedulable,
    /// Not tried: the cycle stopped first (the quorum could no longer be met, or an error).
    NotTried,
    /// A plugin failed with an error.
    Error,
}

/// One candidate topology domain of a topology-constrained group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupDomain {
    /// `key=value`.
    pub domain: String,
    /// Nodes in the domain.
    pub nodes: usize,
    /// Members that fitted in it when it was evaluated.
    pub placed: usize,
    pub result: DomainResult,
    /// The group's placed pods are already in this domain: it is the only candidate.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub pinned: bool,
    /// Each PlacementScore plugin's normalized score times its weight (feasible domains).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scores: Vec<PlacementPluginScore>,
    /// Their sum, what the choice compared (feasible domains).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<i64>,
    /// Why it was not chosen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One PlacementScore plugin's part of a domain's score.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementPluginScore {
    pub plugin: String,
    /// Normalized (0-100) times the plugin's weight.
    pub score: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum DomainResult {
    /// Feasible, with the best score: the group is placed here.
    Chosen,
    /// Feasible, with a lower score (or tied, and later by name).
    Feasible,
    /// The quorum could not be met inside it.
    Rejected,
    /// Evaluating it failed with an error (the cycle stopped there).
    Error,
}

/// What happened to one member in one evaluation.
#[derive(Clone, Debug)]
pub(crate) enum Trial {
    Fit(String),
    Unfit(String),
    Error(String),
}

impl Trial {
    pub(crate) fn of(d: &Decision) -> Self {
        match d {
            Decision::Bind { node, .. } => Trial::Fit(node.clone()),
            Decision::Unschedulable { message, .. } => Trial::Unfit(message.clone()),
            Decision::Error { message } => Trial::Error(message.clone()),
        }
    }
}

/// One run of the default algorithm (the whole group, or the group in one domain).
#[derive(Clone, Debug, Default)]
struct Evaluation {
    trials: Vec<(String, Trial)>,
    explained: HashMap<String, Explanation>,
    /// Why the quorum was not met.
    reason: Option<String>,
}

/// How a domain's evaluation ended.
#[derive(Clone, Debug)]
pub(crate) enum DomainEval {
    /// The quorum was met; the PlacementScore plugins' raw scores, in plugin order.
    Feasible {
        raw: Vec<i64>,
    },
    Rejected,
    Error,
}

#[derive(Debug)]
struct DomainTrial {
    domain: String,
    nodes: usize,
    eval: Evaluation,
    result: DomainEval,
}

/// What one group cycle records for its explanation: each member's trial (and, for the pods
/// asked about, the explanation of its own cycle, rendered against the snapshot it ran on),
/// each evaluated domain, and the quorum's verdict. Pass one to
/// [`schedule_group_recorded`](crate::schedule_group::schedule_group_recorded), then call
/// [`explanations`](Self::explanations) with the outcome.
pub struct GroupRecord<'a> {
    wants: &'a dyn Fn(&str) -> bool,
    /// Every pod naming the group (PreEnqueue's count), when the caller knows it.
    pub total: Option<usize>,
    scheduled_before: usize,
    /// The members, in the order tried.
    order: Vec<String>,
    num_all_nodes: usize,
    current: Evaluation,
    /// The evaluation the outcome comes from.
    last: Evaluation,
    domains: Vec<DomainTrial>,
    pinned: bool,
    chosen: Option<String>,
}

impl std::fmt::Debug for GroupRecord<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupRecord")
            .field("order", &self.order)
            .finish_non_exhaustive()
    }
}

impl<'a> GroupRecord<'a> {
    /// A recorder that explains the members `wants` selects (by `namespace/name`) in full;
    /// every member gets its line in the group section.
    pub fn new(wants: &'a dyn Fn(&str) -> bool) -> Self {
        GroupRecord {
            wants,
            total: None,
            scheduled_before: 0,
            order: Vec::new(),
            num_all_nodes: 0,
            current: Evaluation::default(),
            last: Evaluation::default(),
            domains: Vec::new(),
            pinned: false,
            chosen: None,
        }
    }

    /// A cycle starts: `scheduled` pods placed before, `members` in the order tried.
    pub(crate) fn begin<'p>(
        &mut self,
        scheduled: usize,
        members: impl Iterator<Item = &'p PodInfo>,
        num_all_nodes: usize,
    ) {
        self.scheduled_before = scheduled;
        self.order = members.map(|p| p.key().to_string()).collect();
        self.num_all_nodes = num_all_nodes;
        self.current = Evaluation::default();
        self.last = Evaluation::default();
        self.domains.clear();
        self.pinned = false;
        self.chosen = None;
    }

    /// Whether `pod`'s own cycle is explained in full.
    pub(crate) fn wants(&self, pod: &PodInfo) -> bool {
        (self.wants)(&pod.key().to_string())
    }

    pub(crate) fn begin_evaluation(&mut self) {
        self.current = Evaluation::default();
    }

    /// What happened to `pod`; a second trial of the same pod (its placement could not be
    /// assumed) replaces the first.
    pub(crate) fn trial(&mut self, pod: &PodInfo, trial: Trial) {
        let key = pod.key().to_string();
        match self.current.trials.last_mut() {
            Some((k, t)) if *k == key => *t = trial,
            _ => self.current.trials.push((key, trial)),
        }
    }

    pub(crate) fn explained(&mut self, pod: &PodInfo, e: Explanation) {
        self.current.explained.insert(pod.key().to_string(), e);
    }

    /// The evaluation ends; `reason` when the quorum was not met.
    pub(crate) fn end_evaluation(&mut self, reason: Option<String>) {
        self.current.reason = reason;
        self.last = std::mem::take(&mut self.current);
    }

    /// The group's placed pods pin the domain.
    pub(crate) fn pinned(&mut self) {
        self.pinned = true;
    }

    /// The last evaluation was of domain `key=value` (`nodes` nodes), ending as `result`.
    pub(crate) fn domain_evaluated(&mut self, domain: String, nodes: usize, result: DomainEval) {
        self.domains.push(DomainTrial {
            domain,
            nodes,
            eval: std::mem::take(&mut self.last),
            result,
        });
    }

    /// The domain kept; its final evaluation is recorded next.
    pub(crate) fn chosen(&mut self, domain: String) {
        self.chosen = Some(domain);
    }

    /// The outcome is a domain's evaluation: the first one's when no domain was feasible
    /// (upstream's "first placement status"), the last one's when it failed with an error.
    pub(crate) fn outcome_of_domain(&mut self, first: bool) {
        let d = if first {
            self.domains.first()
        } else {
            self.domains.last()
        };
        if let Some(d) = d {
            self.last = d.eval.clone();
        }
    }

    /// The group section for `group`'s cycle that ended with `outcome`.
    pub fn section(
        &self,
        fw: &Framework,
        group: &PodGroupInfo,
        outcome: &GroupOutcome,
    ) -> GroupExplanation {
        let pods = GroupPods {
            queued: self.order.len(),
            scheduled: self.scheduled_before,
            total: self
                .total
                .unwrap_or(self.scheduled_before + self.order.len()),
        };
        let (result, message) = match outcome {
            GroupOutcome::Placed { .. } => (GroupResult::Placed, None),
            GroupOutcome::Unschedulable { reason, error, .. } => (
                if *error {
                    GroupResult::Error
                } else {
                    GroupResult::Unschedulable
                },
                Some(reason.clone()),
            ),
        };
        let mut s = section(&group.key, Some(group), pods, result, message);
        s.members = self.members(outcome);
        s.domains = self.domains(fw, group);
        s
    }

    /// Every member's line, in the order tried.
    fn members(&self, outcome: &GroupOutcome) -> Vec<GroupMember> {
        let (placed, waiting): (HashMap<String, &str>, HashMap<String, &str>) = match outcome {
            GroupOutcome::Placed { placed, waiting } => (
                placed
                    .iter()
                    .map(|p| (p.pod.key().to_string(), p.node.as_str()))
                    .collect(),
                waiting
                    .iter()
                    .map(|w| (w.queued.pod.key().to_string(), w.message.as_str()))
                    .collect(),
            ),
            GroupOutcome::Unschedulable { waiting, .. } => (
                HashMap::new(),
                waiting
                    .iter()
                    .map(|w| (w.queued.pod.key().to_string(), w.message.as_str()))
                    .collect(),
            ),
        };
        let trials: HashMap<&str, &Trial> = self
            .last
            .trials
            .iter()
            .map(|(k, t)| (k.as_str(), t))
            .collect();
        self.order
            .iter()
            .map(|pod| {
                let message = waiting.get(pod).map(|m| m.to_string());
                let (result, node) = match (placed.get(pod), trials.get(pod.as_str())) {
                    (Some(node), _) => (MemberResult::Placed, Some(node.to_string())),
                    (None, Some(Trial::Fit(node))) => (MemberResult::Fitted, Some(node.clone())),
                    (None, Some(Trial::Unfit(_))) => (MemberResult::Unschedulable, None),
                    (None, Some(Trial::Error(_))) => (MemberResult::Error, None),
                    (None, None) => (MemberResult::NotTried, None),
                };
                let message = match (message, trials.get(pod.as_str())) {
                    (Some(m), _) => Some(m),
                    (None, Some(Trial::Unfit(m) | Trial::Error(m))) => Some(m.clone()),
                    _ => None,
                };
                GroupMember {
                    pod: pod.clone(),
                    result,
                    node,
                    message,
                }
            })
            .collect()
    }

    /// Every evaluated domain, scored as the choice scored them.
    fn domains(&self, fw: &Framework, group: &PodGroupInfo) -> Vec<GroupDomain> {
        let key = group.topology_key.as_deref().unwrap_or("");
        let feasible: Vec<(&str, Vec<i64>)> = self
            .domains
            .iter()
            .filter_map(|d| match &d.result {
                DomainEval::Feasible { raw } => Some((d.domain.as_str(), raw.clone())),
                _ => None,
            })
            .collect();
        let raws: Vec<Vec<i64>> = feasible.iter().map(|(_, r)| r.clone()).collect();
        let weighed = fw.weigh_placements(&raws).unwrap_or_default();
        let score_of = |d: &str| {
            let i = feasible.iter().position(|(name, _)| *name == d)?;
            let parts = weighed
                .plugins
                .iter()
                .zip(weighed.weighted.get(i)?)
                .map(|(p, s)| PlacementPluginScore {
                    plugin: p.to_string(),
                    score: *s,
                })
                .collect::<Vec<_>>();
            Some((parts, *weighed.totals.get(i)?))
        };
        let chosen = self.chosen.as_deref();
        let chosen_score = chosen.and_then(score_of).map(|s| s.1);
        self.domains
            .iter()
            .map(|d| {
                let scored = score_of(&d.domain);
                let placed = d
                    .eval
                    .trials
                    .iter()
                    .filter(|(_, t)| matches!(t, Trial::Fit(_)))
                    .count();
                let (result, reason) = match &d.result {
                    DomainEval::Feasible { .. } if chosen == Some(d.domain.as_str()) => {
                        (DomainResult::Chosen, None)
                    }
                    DomainEval::Feasible { .. } => {
                        let mine = scored.as_ref().map_or(0, |s| s.1);
                        let best = chosen_score.unwrap_or(0);
                        let other = format!("{key}={}", chosen.unwrap_or("?"));
                        let why = if mine < best {
                            format!("score {mine} is lower than {other}'s {best}")
                        } else {
                            format!("score {mine} ties with {other}, which was evaluated first")
                        };
                        (DomainResult::Feasible, Some(why))
                    }
                    DomainEval::Rejected => (DomainResult::Rejected, d.eval.reason.clone()),
                    DomainEval::Error => (DomainResult::Error, d.eval.reason.clone()),
                };
                GroupDomain {
                    domain: format!("{key}={}", d.domain),
                    nodes: d.nodes,
                    placed,
                    result,
                    pinned: self.pinned,
                    score: scored.as_ref().map(|s| s.1),
                    scores: scored.map(|s| s.0).unwrap_or_default(),
                    reason,
                }
            })
            .collect()
    }

    /// The explanations of the members `wants` selected, in the order tried, each with the
    /// group section: its own cycle's nodes, scores and selection as the cycle the outcome
    /// comes from ran them, and the outcome the group gave it (a member that fitted is
    /// unschedulable with the gang's message when the gang was not placed). A member the
    /// cycle never tried has no per-node details.
    pub fn explanations(
        &mut self,
        fw: &Framework,
        group: &PodGroupInfo,
        outcome: &GroupOutcome,
    ) -> Vec<Explanation> {
        let section = self.section(fw, group, outcome);
        let mut out = Vec::new();
        for m in &section.members {
            if !(self.wants)(&m.pod) {
                continue;
            }
            let mut e = self.last.explained.remove(&m.pod).unwrap_or_else(|| {
                let mut e = Explanation::new(&m.pod, fw.profile_name());
                e.num_all_nodes = self.num_all_nodes;
                e.filter_plugins = fw.filter_plugin_names();
                e
            });
            match m.result {
                MemberResult::Placed => {
                    e.outcome = Outcome::Scheduled;
                    e.node.clone_from(&m.node);
                    e.message = None;
                }
                MemberResult::Fitted | MemberResult::Unschedulable | MemberResult::NotTried => {
                    e.outcome = if section.outcome == GroupResult::Error
                        && m.result == MemberResult::NotTried
                    {
                        Outcome::Error
                    } else {
                        Outcome::Unschedulable
                    };
                    e.node = None;
                    e.message.clone_from(&m.message);
                }
                MemberResult::Error => {
                    e.outcome = Outcome::Error;
                    e.node = None;
                    e.message.clone_from(&m.message);
                }
            }
            e.group = Some(section.clone());
            out.push(e);
        }
        out
    }
}

/// A group section without members: who the group is and what it decided.
fn section(
    key: &PodGroupKey,
    info: Option<&PodGroupInfo>,
    pods: GroupPods,
    outcome: GroupResult,
    message: Option<String>,
) -> GroupExplanation {
    GroupExplanation {
        pod_group: key.to_string(),
        api: key.api.resource().to_string(),
        api_version: info
            .map(|g| g.api_version.clone())
            .filter(|v| !v.is_empty()),
        policy: info.map(|g| match g.policy {
            GroupPolicy::Gang { .. } => GroupPolicyName::Gang,
            GroupPolicy::Basic => GroupPolicyName::Basic,
        }),
        min_count: info.map(PodGroupInfo::min_count),
        topology_key: info.and_then(|g| g.topology_key.clone()),
        pods,
        outcome,
        message,
        members: Vec::new(),
        domains: Vec::new(),
    }
}

/// The group's pods as PreEnqueue counts them: none queued, those bound, all.
fn counted(groups: &PodGroups, key: &PodGroupKey) -> GroupPods {
    GroupPods {
        queued: 0,
        scheduled: groups.members(key).filter(|(_, bound)| *bound).count(),
        total: groups.all_pods_count(key),
    }
}

/// The explanation of `pod`, a pod of a group kept out of the queue by GangScheduling's
/// (or Coscheduling's) PreEnqueue with `gate`: no cycle ran, so no node is named. `None`
/// when another plugin (say, SchedulingGates) keeps it out, or the pod names no group.
pub fn waiting(
    fw: &Framework,
    pod: &PodInfo,
    groups: &PodGroups,
    gate: &Status,
    num_all_nodes: usize,
) -> Option<Explanation> {
    let key = pod.pod_group.as_deref()?;
    if !matches!(gate.plugin(), Some(GANG_SCHEDULING | COSCHEDULING)) {
        return None;
    }
    let message = gate.message();
    let message = message.as_str();
    let mut e = Explanation::new(&pod.key().to_string(), fw.profile_name());
    e.outcome = Outcome::Unschedulable;
    e.message = Some(message.to_string());
    e.num_all_nodes = num_all_nodes;
    e.filter_plugins = fw.filter_plugin_names();
    e.group = Some(section(
        key,
        groups.get(key).map(|g| &**g),
        counted(groups, key),
        GroupResult::Waiting,
        Some(message.to_string()),
    ));
    Some(e)
}

/// The group section of `pod`, a pod of a group scheduled on its own (a `basic` group, or a
/// profile that does not run gangs); `None` for a pod without a group.
pub fn pod_by_pod(fw: &Framework, pod: &PodInfo, groups: &PodGroups) -> Option<GroupExplanation> {
    let key = pod.pod_group.as_deref()?;
    let info = groups.get(key).map(|g| &**g);
    let why = match info.map(|g| g.policy) {
        Some(GroupPolicy::Basic) => {
            "basic policy: the group's pods are scheduled one by one".to_string()
        }
        _ => {
            let plugin = match key.api {
                GroupApi::Workload => GANG_SCHEDULING,
                GroupApi::Coscheduling => "GangScheduling or Coscheduling",
            };
            format!(
                "profile {} does not enable {plugin} at PreEnqueue: the group's pods are scheduled one by one, not all or nothing",
                fw.profile_name()
            )
        }
    };
    Some(section(
        key,
        info,
        counted(groups, key),
        GroupResult::PodByPod,
        Some(why),
    ))
}
