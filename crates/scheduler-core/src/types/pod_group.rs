//! Pod groups: which group a pod belongs to, and the compact view of a PodGroup object.
//!
//! Two APIs name groups of pods that must be scheduled together:
//!
//! * **Workload** (upstream, `scheduling.k8s.io` `v1beta1` since 1.37, `v1alpha2` in 1.36):
//!   the pod names its group in `spec.schedulingGroup.podGroupName`; the PodGroup's
//!   `spec.schedulingPolicy` is `basic: {}` or `gang: {minCount: N}`.
//! * **Coscheduling** (kubernetes-sigs/scheduler-plugins, `scheduling.x-k8s.io/v1alpha1`, what
//!   Kubeflow's training operator creates): the pod carries the label
//!   `scheduling.x-k8s.io/pod-group: NAME`; the PodGroup's `spec.minMember` is its quorum.
//!
//! Both are read from the object's JSON through one small serde mirror, so the informers
//! keep only this view, never the object.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1 as k8s;
use serde::Deserialize;

use super::quantity::{Quantity, parse_quantity};

/// scheduler-plugins' label naming a pod's coscheduling PodGroup.
pub const COSCHEDULING_POD_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";

/// Which API a group lives in. Equal names in the two APIs are different groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GroupApi {
    /// `scheduling.k8s.io` PodGroup (Workload API).
    Workload,
    /// `scheduling.x-k8s.io/v1alpha1` PodGroup (scheduler-plugins' Coscheduling).
    Coscheduling,
}

impl GroupApi {
    /// The API group and resource, as a user would look them up.
    pub fn resource(self) -> &'static str {
        match self {
            GroupApi::Workload => "podgroups.scheduling.k8s.io",
            GroupApi::Coscheduling => "podgroups.scheduling.x-k8s.io",
        }
    }
}

/// A group's identity: its API, namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodGroupKey {
    pub api: GroupApi,
    pub namespace: String,
    pub name: String,
}

impl PodGroupKey {
    pub fn new(api: GroupApi, namespace: &str, name: &str) -> Self {
        PodGroupKey {
            api,
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }
}

impl fmt::Display for PodGroupKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The group a pod names, if any: `spec.schedulingGroup.podGroupName` first (the API field
/// wins over a label), else scheduler-plugins' label. An empty name names no group.
pub fn pod_group_of(pod: &k8s::Pod) -> Option<PodGroupKey> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let from_spec = pod
        .spec
        .as_ref()
        .and_then(|s| s.scheduling_group.as_ref())
        .and_then(|g| g.pod_group_name.as_deref())
        .filter(|n| !n.is_empty());
    if let Some(name) = from_spec {
        return Some(PodGroupKey::new(GroupApi::Workload, namespace, name));
    }
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(COSCHEDULING_POD_GROUP_LABEL))
        .filter(|n| !n.is_empty())
        .map(|name| PodGroupKey::new(GroupApi::Coscheduling, namespace, name))
}

/// How a group's pods are scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupPolicy {
    /// Pod by pod, as if there were no group (`schedulingPolicy.basic`).
    Basic,
    /// All or nothing: no pod is bound unless `min_count` of the group's pods can be
    /// (`schedulingPolicy.gang.minCount`; Coscheduling's `minMember`).
    Gang { min_count: u32 },
}

/// The scheduling view of one PodGroup object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodGroupInfo {
    pub key: PodGroupKey,
    /// The object's `apiVersion` as read (`scheduling.k8s.io/v1beta1`, ...); empty when not
    /// known (a test's or a bench's group). Explanations name it.
    pub api_version: String,
    pub uid: String,
    pub policy: GroupPolicy,
    /// `schedulingConstraints.topology[0].key` (the API allows one): every pod of the group
    /// lands in one domain of this node label.
    pub topology_key: Option<String>,
    /// `metadata.generation`, for the condition's `observedGeneration`.
    pub generation: i64,
    /// `metadata.creationTimestamp`, Unix nanoseconds (Coscheduling's queue order).
    pub creation_timestamp: Option<i64>,
    /// `spec.priority` (set by admission from `priorityClassName`): the group's priority in
    /// preemption, over its pods' own.
    pub priority: Option<i32>,
    /// `spec.disruptionMode` is `all`: preemption evicts the group's pods together or none.
    pub disrupt_all: bool,
    /// The scheduler's condition on the group as last seen (Workload API:
    /// `PodGroupInitiallyScheduled`, `PodGroupScheduled` in v1alpha2), so an unchanged one
    /// is not written again and a True one never turns False.
    pub scheduled_condition: Option<GroupCondition>,
    /// `spec.resourceClaims` (Workload API, DRAWorkloadResourceClaims): claims reserved for
    /// the group as a whole and shared by the pods whose own entry matches one of these.
    pub resource_claims: Vec<GroupClaim>,
    /// `status.resourceClaimStatuses`: for a template entry, the claim kube-controller-manager
    /// made for the group (`None`: no claim was needed), by entry name.
    pub claim_statuses: BTreeMap<String, Option<String>>,
    /// Coscheduling's `spec.minResources`: what the cluster must have free, summed over its
    /// nodes, before any of the group's pods is tried (by name; `None` when not set).
    pub min_resources: Option<BTreeMap<String, Quantity>>,
    /// Coscheduling's `status` as last seen (written by `ferrosched run` or by
    /// scheduler-plugins' controller); empty for the Workload API.
    pub coscheduling_status: CoschedulingStatus,
    /// `spec.parentCompositePodGroupName` (v1alpha3/v1beta1, CompositePodGroup gate): the
    /// CompositePodGroup of the same namespace this group is a child of.
    pub parent: Option<String>,
}

/// Upstream `MaxPodGroupResourceClaims`: at most this many `spec.resourceClaims` (and
/// `status.resourceClaimStatuses`) entries.
pub const MAX_POD_GROUP_RESOURCE_CLAIMS: usize = 4;

/// One `spec.resourceClaims` entry of a PodGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupClaim {
    /// Unique in the group; a pod's `spec.resourceClaims` entry of the same name and the
    /// same source is the group's claim.
    pub name: String,
    pub source: GroupClaimSource,
}

/// Where a group's claim comes from (exactly one is set, as the API server validates).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupClaimSource {
    /// `resourceClaimName`: an existing claim.
    Claim(String),
    /// `resourceClaimTemplateName`: kube-controller-manager makes one claim for the group
    /// and names it in `status.resourceClaimStatuses`.
    Template(String),
}

/// A PodGroup's claim list (`null`: none), or why it is not one; too many entries is an
/// error but the entries are still checked.
fn claim_list<'a>(
    path: &str,
    value: &'a serde_json::Value,
    errors: &mut Vec<String>,
) -> Option<&'a Vec<serde_json::Value>> {
    let items = match value {
        serde_json::Value::Null => return None,
        serde_json::Value::Array(a) => a,
        other => {
            errors.push(format!("{path}: Invalid value: {other}: must be a list"));
            return None;
        }
    };
    if items.len() > MAX_POD_GROUP_RESOURCE_CLAIMS {
        errors.push(format!(
            "{path}: Too many: {}: must have at most {MAX_POD_GROUP_RESOURCE_CLAIMS} items",
            items.len()
        ));
    }
    Some(items)
}

/// The field errors of a PodGroup's `spec.resourceClaims` (`null`: none), worded as the API
/// server words them: at most 4 entries, each named by a unique DNS label, each with exactly
/// one of `resourceClaimName` and `resourceClaimTemplateName` (a DNS subdomain).
pub fn resource_claims_errors(claims: &serde_json::Value) -> Vec<String> {
    let path = "spec.resourceClaims";
    let mut errors = Vec::new();
    let Some(items) = claim_list(path, claims, &mut errors) else {
        return errors;
    };
    let mut seen: Vec<&str> = Vec::new();
    for (i, c) in items.iter().enumerate() {
        let at = format!("{path}[{i}]");
        match c["name"].as_str().filter(|n| !n.is_empty()) {
            None => errors.push(format!("{at}.name: Required value")),
            Some(n) => {
                for m in crate::k8s_names::dns1123_label_errors(n) {
                    errors.push(format!("{at}.name: Invalid value: {n:?}: {m}"));
                }
                if seen.contains(&n) {
                    errors.push(format!("{at}.name: Duplicate value: {n:?}"));
                }
                seen.push(n);
            }
        }
        let set: Vec<(&str, &str)> = ["resourceClaimName", "resourceClaimTemplateName"]
            .into_iter()
            .filter_map(|f| c[f].as_str().map(|v| (f, v)))
            .collect();
        match set.as_slice() {
            [] => errors.push(format!(
                "{at}: Required value: must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"
            )),
            [(field, value)] => {
                for m in crate::k8s_names::dns1123_subdomain_errors(value) {
                    errors.push(format!("{at}.{field}: Invalid value: {value:?}: {m}"));
                }
            }
            _ => errors.push(format!(
                "{at}: Invalid value: \"{{resourceClaimName, resourceClaimTemplateName}}\": must specify exactly one of: `resourceClaimName`, `resourceClaimTemplateName`"
            )),
        }
    }
    errors
}

/// The field errors of a PodGroup's `status.resourceClaimStatuses` (`null`: none): at most
/// 4 entries, each naming an entry of `spec.resourceClaims` once, the claim (if any) a DNS
/// subdomain.
pub fn claim_statuses_errors(
    spec_claims: &serde_json::Value,
    statuses: &serde_json::Value,
) -> Vec<String> {
    let path = "status.resourceClaimStatuses";
    let mut errors = Vec::new();
    let Some(items) = claim_list(path, statuses, &mut errors) else {
        return errors;
    };
    let in_spec = |n: &str| {
        spec_claims
            .as_array()
            .is_some_and(|a| a.iter().any(|c| c["name"].as_str() == Some(n)))
    };
    let mut seen: Vec<&str> = Vec::new();
    for (i, s) in items.iter().enumerate() {
        let at = format!("{path}[{i}]");
        match s["name"].as_str().filter(|n| !n.is_empty()) {
            None => errors.push(format!("{at}.name: Required value")),
            Some(n) => {
                if seen.contains(&n) {
                    errors.push(format!("{at}.name: Duplicate value: {n:?}"));
                } else if !in_spec(n) {
                    errors.push(format!(
                        "{at}.name: Invalid value: {n:?}: must match the name of an entry in `spec.resourceClaims`"
                    ));
                }
                seen.push(n);
            }
        }
        if let Some(v) = s["resourceClaimName"].as_str() {
            for m in crate::k8s_names::dns1123_subdomain_errors(v) {
                errors.push(format!("{at}.resourceClaimName: Invalid value: {v:?}: {m}"));
            }
        }
    }
    errors
}

/// `status` of a `scheduling.x-k8s.io/v1alpha1` PodGroup (scheduler-plugins' controller's;
/// see `plugins::coscheduling::status`). Empty strings and zeros are the absent fields
/// (scheduler-plugins omits them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CoschedulingStatus {
    /// `Pending`, `Scheduling`, `Running`, `Finished`, `Failed` (`Unknown` is in the API
    /// but never set); empty before the first reconcile.
    pub phase: String,
    pub occupied_by: String,
    pub running: i32,
    pub succeeded: i32,
    pub failed: i32,
    /// Unix nanoseconds. scheduler-plugins' controller reads it and never sets it.
    pub schedule_start_time: Option<i64>,
}

/// Condition types the scheduler writes on a Workload API PodGroup: 1.37's name, then
/// 1.36's (v1alpha2).
pub const INITIALLY_SCHEDULED_CONDITIONS: [&str; 2] =
    ["PodGroupInitiallyScheduled", "PodGroupScheduled"];

/// A PodGroup condition's status, reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupCondition {
    pub status: bool,
    pub reason: String,
    pub message: String,
}

impl PodGroupInfo {
    /// A group as a test or a bench makes it: no uid, generation 0, no condition.
    pub fn new(key: PodGroupKey, policy: GroupPolicy) -> Self {
        PodGroupInfo {
            key,
            api_version: String::new(),
            uid: String::new(),
            policy,
            topology_key: None,
            generation: 0,
            creation_timestamp: None,
            priority: None,
            disrupt_all: false,
            scheduled_condition: None,
            resource_claims: Vec::new(),
            claim_statuses: BTreeMap::new(),
            min_resources: None,
            coscheduling_status: CoschedulingStatus::default(),
            parent: None,
        }
    }

    /// The group's claim entry that a pod's `spec.resourceClaims` entry matches: same name
    /// and same source (a pod entry naming the same template or claim). `claim` is the pod
    /// entry's `resourceClaimName`, `template` its `resourceClaimTemplateName`.
    pub fn matching_claim(
        &self,
        name: &str,
        claim: Option<&str>,
        template: Option<&str>,
    ) -> Option<&GroupClaim> {
        self.resource_claims.iter().find(|g| {
            g.name == name
                && match &g.source {
                    GroupClaimSource::Claim(c) => claim == Some(c.as_str()) && template.is_none(),
                    GroupClaimSource::Template(t) => {
                        template == Some(t.as_str()) && claim.is_none()
                    }
                }
        })
    }

    /// Builds the view from the object's JSON (any served version of either API). Fields
    /// the view does not read are skipped without being built.
    pub fn from_json(api: GroupApi, value: &serde_json::Value) -> Result<Self, String> {
        let raw = RawPodGroup::deserialize(value).map_err(|e| e.to_string())?;
        let key = PodGroupKey::new(
            api,
            raw.metadata.namespace.as_deref().unwrap_or_default(),
            raw.metadata.name.as_deref().unwrap_or_default(),
        );
        let policy = match api {
            // As the API server validates it: exactly one of basic and gang, minCount >= 1.
            GroupApi::Workload => {
                let policy = raw.spec.scheduling_policy.unwrap_or_default();
                let gang = policy.gang.map(|g| g.min_count);
                match gang_count(policy.basic.is_some(), gang, "minCount")? {
                    Some(min_count) => GroupPolicy::Gang { min_count },
                    None => GroupPolicy::Basic,
                }
            }
            // scheduler-plugins: a group of minMember <= 1 gates nothing, but its pods
            // still count as a group (one pod is its own quorum).
            GroupApi::Coscheduling => GroupPolicy::Gang {
                min_count: raw.spec.min_member.unwrap_or(0).max(0) as u32,
            },
        };
        let (resource_claims, claim_statuses) = match api {
            GroupApi::Workload => {
                let mut errors = resource_claims_errors(&raw.spec.resource_claims);
                errors.extend(claim_statuses_errors(
                    &raw.spec.resource_claims,
                    &raw.status.resource_claim_statuses,
                ));
                if !errors.is_empty() {
                    return Err(errors.join(", "));
                }
                (
                    group_claims(&raw.spec.resource_claims),
                    claim_statuses(&raw.status.resource_claim_statuses),
                )
            }
            GroupApi::Coscheduling => (Vec::new(), BTreeMap::new()),
        };
        let min_resources = match raw.spec.min_resources {
            None => None,
            Some(list) => {
                let mut out = BTreeMap::new();
                for (name, q) in list {
                    // int-or-string, as the CRD's schema allows.
                    let q = match q {
                        serde_json::Value::String(s) => s,
                        other => other.to_string(),
                    };
                    let v = parse_quantity(&q).map_err(|e| {
                        format!("spec.minResources[{name}]: Invalid value: {q:?}: {e}")
                    })?;
                    out.insert(name, v);
                }
                Some(out)
            }
        };
        let scheduled_condition = raw
            .status
            .conditions
            .iter()
            .find(|c| INITIALLY_SCHEDULED_CONDITIONS.contains(&c.type_.as_str()))
            .map(|c| GroupCondition {
                status: c.status == "True",
                reason: c.reason.clone().unwrap_or_default(),
                message: c.message.clone().unwrap_or_default(),
            });
        Ok(PodGroupInfo {
            key,
            api_version: raw.api_version.unwrap_or_default(),
            uid: raw.metadata.uid.unwrap_or_default(),
            policy,
            topology_key: raw
                .spec
                .scheduling_constraints
                .and_then(|c| c.topology.into_iter().next())
                .and_then(|t| t.key)
                .filter(|k| !k.is_empty()),
            generation: raw.metadata.generation.unwrap_or(0),
            priority: raw.spec.priority,
            disrupt_all: match &raw.spec.disruption_mode {
                // v1beta1: a union, `{all: {}}` or `{single: {}}`; 1.36's v1alpha2: a string.
                Some(serde_json::Value::Object(m)) => m.contains_key("all"),
                Some(serde_json::Value::String(s)) => s == "PodGroup" || s == "All",
                _ => false,
            },
            creation_timestamp: raw.metadata.creation_timestamp.as_ref().map(nanos),
            scheduled_condition,
            resource_claims,
            claim_statuses,
            min_resources,
            coscheduling_status: CoschedulingStatus {
                phase: raw.status.phase.unwrap_or_default(),
                occupied_by: raw.status.occupied_by.unwrap_or_default(),
                running: raw.status.running.unwrap_or(0),
                succeeded: raw.status.succeeded.unwrap_or(0),
                failed: raw.status.failed.unwrap_or(0),
                schedule_start_time: raw.status.schedule_start_time.map(|t| nanos(&t)),
            },
            parent: raw
                .spec
                .parent_composite_pod_group_name
                .filter(|p| !p.is_empty()),
        })
    }

    /// The quorum: how many of the group's pods must be placeable (or already placed) before
    /// any of them is bound; 1 for a basic group.
    pub fn min_count(&self) -> u32 {
        match self.policy {
            GroupPolicy::Basic => 1,
            GroupPolicy::Gang { min_count } => min_count.max(1),
        }
    }

    /// The quorum as the object sets it (Coscheduling's `minMember` may be 0; a basic
    /// group's is 1), where [`Self::min_count`] is at least 1.
    pub fn min_count_as_set(&self) -> u32 {
        match self.policy {
            GroupPolicy::Basic => 1,
            GroupPolicy::Gang { min_count } => min_count,
        }
    }

    pub fn is_gang(&self) -> bool {
        matches!(self.policy, GroupPolicy::Gang { .. })
    }
}

/// `schedulingPolicy` as the API server validates it (PodGroups and CompositePodGroups):
/// exactly one of `basic` and `gang`, the gang's count (`field`) at least 1. `None` for
/// basic, the count for a gang.
pub(super) fn gang_count(
    basic: bool,
    gang: Option<Option<i64>>,
    field: &str,
) -> Result<Option<u32>, String> {
    match (basic, gang) {
        (false, Some(Some(n))) if n >= 1 && n <= i64::from(i32::MAX) => Ok(Some(n as u32)),
        (false, Some(n)) => Err(format!(
            "spec.schedulingPolicy.gang.{field}: Invalid value: {}: must be greater than or equal to 1",
            n.map_or("null".to_string(), |n| n.to_string())
        )),
        (true, None) => Ok(None),
        (true, Some(_)) => Err(
            "spec.schedulingPolicy: Invalid value: must specify exactly one of basic and gang, not both"
                .to_string(),
        ),
        (false, None) => Err(
            "spec.schedulingPolicy: Required value: must specify exactly one of basic and gang"
                .to_string(),
        ),
    }
}

/// `spec.resourceClaims`, already validated.
fn group_claims(v: &serde_json::Value) -> Vec<GroupClaim> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let name = c["name"].as_str()?.to_string();
            let source = match (
                c["resourceClaimName"].as_str(),
                c["resourceClaimTemplateName"].as_str(),
            ) {
                (Some(n), None) => GroupClaimSource::Claim(n.to_string()),
                (None, Some(t)) => GroupClaimSource::Template(t.to_string()),
                _ => return None,
            };
            Some(GroupClaim { name, source })
        })
        .collect()
}

/// `status.resourceClaimStatuses`, already validated.
fn claim_statuses(v: &serde_json::Value) -> BTreeMap<String, Option<String>> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| {
            let name = s["name"].as_str()?.to_string();
            let claim = s["resourceClaimName"]
                .as_str()
                .filter(|n| !n.is_empty())
                .map(str::to_string);
            Some((name, claim))
        })
        .collect()
}

/// Every level may be absent or `null` (an informer passes a missing status as null).
#[derive(Deserialize)]
struct RawPodGroup {
    #[serde(default, rename = "apiVersion")]
    api_version: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    metadata: RawMeta,
    #[serde(default, deserialize_with = "null_as_default")]
    spec: RawSpec,
    #[serde(default, deserialize_with = "null_as_default")]
    status: RawStatus,
}

pub(super) fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawMeta {
    pub(super) name: Option<String>,
    pub(super) namespace: Option<String>,
    pub(super) uid: Option<String>,
    pub(super) generation: Option<i64>,
    pub(super) creation_timestamp: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawStatus {
    #[serde(default, deserialize_with = "null_as_default")]
    conditions: Vec<RawCondition>,
    /// Validated and read by hand (see [`claim_statuses_errors`]).
    #[serde(default)]
    resource_claim_statuses: serde_json::Value,
    /// Coscheduling.
    phase: Option<String>,
    occupied_by: Option<String>,
    running: Option<i32>,
    succeeded: Option<i32>,
    failed: Option<i32>,
    schedule_start_time: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
}

/// A time as Unix nanoseconds (saturating).
pub(super) fn nanos(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> i64 {
    let n = t.0.as_nanosecond();
    n.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

#[derive(Deserialize)]
struct RawCondition {
    #[serde(rename = "type")]
    type_: String,
    status: String,
    reason: Option<String>,
    message: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawSpec {
    scheduling_policy: Option<RawPolicy>,
    scheduling_constraints: Option<RawConstraints>,
    priority: Option<i32>,
    disruption_mode: Option<serde_json::Value>,
    /// Validated and read by hand (see [`resource_claims_errors`]).
    #[serde(default)]
    resource_claims: serde_json::Value,
    /// Coscheduling.
    min_member: Option<i64>,
    #[serde(default, deserialize_with = "null_as_default")]
    min_resources: Option<BTreeMap<String, serde_json::Value>>,
    parent_composite_pod_group_name: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct RawConstraints {
    #[serde(default)]
    pub(super) topology: Vec<RawTopology>,
}

#[derive(Deserialize)]
pub(super) struct RawTopology {
    pub(super) key: Option<String>,
}

#[derive(Deserialize, Default)]
pub(super) struct RawPolicy {
    pub(super) basic: Option<serde_json::Value>,
    pub(super) gang: Option<RawGang>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawGang {
    pub(super) min_count: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_spec_field_names_the_group_before_the_label() {
        let mut pod = k8s::Pod::default();
        pod.metadata.namespace = Some("ml".into());
        assert_eq!(pod_group_of(&pod), None);
        pod.metadata.labels = Some(
            [(COSCHEDULING_POD_GROUP_LABEL.to_string(), "cg".to_string())]
                .into_iter()
                .collect(),
        );
        assert_eq!(
            pod_group_of(&pod),
            Some(PodGroupKey::new(GroupApi::Coscheduling, "ml", "cg"))
        );
        pod.spec = Some(k8s::PodSpec {
            scheduling_group: Some(k8s::PodSchedulingGroup {
                pod_group_name: Some("pg".into()),
            }),
            ..Default::default()
        });
        assert_eq!(
            pod_group_of(&pod),
            Some(PodGroupKey::new(GroupApi::Workload, "ml", "pg"))
        );
        // An empty name names nothing; the label still does.
        pod.spec.as_mut().unwrap().scheduling_group = Some(k8s::PodSchedulingGroup {
            pod_group_name: Some(String::new()),
        });
        assert_eq!(pod_group_of(&pod).unwrap().api, GroupApi::Coscheduling);
    }

    #[test]
    fn group_claims_are_read_and_matched_by_name_and_source() {
        let g = json!({
            "metadata": {"name": "train", "namespace": "ml", "uid": "pg-uid"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}},
                     "resourceClaims": [
                         {"name": "shared", "resourceClaimName": "nvlink"},
                         {"name": "gpus", "resourceClaimTemplateName": "gpu-tmpl"},
                         {"name": "none", "resourceClaimTemplateName": "gpu-tmpl"}]},
            "status": {"resourceClaimStatuses": [
                {"name": "gpus", "resourceClaimName": "train-gpus-x7k2"},
                {"name": "none"}]}
        });
        let g = PodGroupInfo::from_json(GroupApi::Workload, &g).unwrap();
        assert_eq!(
            g.resource_claims[0],
            GroupClaim {
                name: "shared".into(),
                source: GroupClaimSource::Claim("nvlink".into())
            }
        );
        assert_eq!(
            g.claim_statuses.get("gpus"),
            Some(&Some("train-gpus-x7k2".to_string()))
        );
        assert_eq!(g.claim_statuses.get("none"), Some(&None));
        assert_eq!(g.claim_statuses.get("shared"), None);
        // Same name and same source: the group's claim; anything else is the pod's own.
        assert!(g.matching_claim("shared", Some("nvlink"), None).is_some());
        assert!(g.matching_claim("shared", Some("other"), None).is_none());
        assert!(g.matching_claim("gpus", None, Some("gpu-tmpl")).is_some());
        assert!(g.matching_claim("gpus", None, Some("other-tmpl")).is_none());
        assert!(g.matching_claim("gpus", Some("gpu-tmpl"), None).is_none());
        assert!(g.matching_claim("extra", Some("nvlink"), None).is_none());

        // Coscheduling has no such field: it is not read.
        let c = json!({"metadata": {"name": "tf"}, "spec": {"minMember": 2,
            "resourceClaims": [{"name": "x"}]}});
        let c = PodGroupInfo::from_json(GroupApi::Coscheduling, &c).unwrap();
        assert!(c.resource_claims.is_empty());
    }

    #[test]
    fn group_claims_are_validated_as_the_api_server_does() {
        let spec = |claims: serde_json::Value| resource_claims_errors(&claims);
        assert!(spec(serde_json::Value::Null).is_empty());
        let five: Vec<_> = (0..5)
            .map(|i| json!({"name": format!("c{i}"), "resourceClaimName": "x"}))
            .collect();
        assert_eq!(
            spec(json!(five)),
            ["spec.resourceClaims: Too many: 5: must have at most 4 items"]
        );
        assert_eq!(
            spec(json!([{"resourceClaimName": "x"}])),
            ["spec.resourceClaims[0].name: Required value"]
        );
        let bad_name = spec(json!([{"name": "Bad_Name", "resourceClaimName": "x"}]));
        assert_eq!(bad_name.len(), 1);
        assert!(
            bad_name[0].starts_with("spec.resourceClaims[0].name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 label"),
            "{bad_name:?}"
        );
        assert_eq!(
            spec(json!([{"name": "a", "resourceClaimName": "x"},
                         {"name": "a", "resourceClaimTemplateName": "t"}])),
            ["spec.resourceClaims[1].name: Duplicate value: \"a\""]
        );
        assert_eq!(
            spec(json!([{"name": "a"}])),
            [
                "spec.resourceClaims[0]: Required value: must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"
            ]
        );
        assert_eq!(
            spec(
                json!([{"name": "a", "resourceClaimName": "x", "resourceClaimTemplateName": "t"}])
            ),
            [
                "spec.resourceClaims[0]: Invalid value: \"{resourceClaimName, resourceClaimTemplateName}\": must specify exactly one of: `resourceClaimName`, `resourceClaimTemplateName`"
            ]
        );
        let bad_claim = spec(json!([{"name": "a", "resourceClaimName": "Not/A/Name"}]));
        assert!(
            bad_claim[0].starts_with("spec.resourceClaims[0].resourceClaimName: Invalid value"),
            "{bad_claim:?}"
        );

        let claims = json!([{"name": "gpus", "resourceClaimTemplateName": "t"}]);
        assert!(claim_statuses_errors(&claims, &json!([{"name": "gpus"}])).is_empty());
        assert_eq!(
            claim_statuses_errors(
                &claims,
                &json!([{"name": "other", "resourceClaimName": "c"}])
            ),
            [
                "status.resourceClaimStatuses[0].name: Invalid value: \"other\": must match the name of an entry in `spec.resourceClaims`"
            ]
        );
        assert_eq!(
            claim_statuses_errors(&claims, &json!([{"name": "gpus"}, {"name": "gpus"}])),
            ["status.resourceClaimStatuses[1].name: Duplicate value: \"gpus\""]
        );
        // The scheduler's view refuses what the API server refuses.
        let refused = PodGroupInfo::from_json(
            GroupApi::Workload,
            &json!({"spec": {"schedulingPolicy": {"basic": {}}, "resourceClaims": [{"name": "a"}]}}),
        )
        .unwrap_err();
        assert!(refused.contains("must specify one of"), "{refused}");
    }

    #[test]
    fn views_of_both_apis() {
        let gang = json!({
            "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "ml", "uid": "u1"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 3}},
                     "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/zone"}]}}
        });
        let g = PodGroupInfo::from_json(GroupApi::Workload, &gang).unwrap();
        assert_eq!(g.api_version, "scheduling.k8s.io/v1beta1");
        assert_eq!(
            g.topology_key.as_deref(),
            Some("topology.kubernetes.io/zone")
        );
        assert_eq!(g.key, PodGroupKey::new(GroupApi::Workload, "ml", "train"));
        assert_eq!(g.scheduled_condition, None);
        assert_eq!(g.policy, GroupPolicy::Gang { min_count: 3 });
        assert_eq!(g.min_count(), 3);

        let basic = json!({
            "metadata": {"name": "b", "namespace": "ml", "generation": 4},
            "spec": {"schedulingPolicy": {"basic": {}}},
            "status": {"conditions": [
                {"type": "Other", "status": "False"},
                {"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled"}
            ]}
        });
        let b = PodGroupInfo::from_json(GroupApi::Workload, &basic).unwrap();
        assert_eq!(b.policy, GroupPolicy::Basic);
        assert_eq!(b.api_version, "", "a list's item may carry no apiVersion");
        assert_eq!(b.min_count(), 1);
        assert_eq!(b.generation, 4);
        assert_eq!(
            b.scheduled_condition,
            Some(GroupCondition {
                status: true,
                reason: "Scheduled".into(),
                message: String::new()
            })
        );
        assert!(!b.is_gang());

        let cosched = json!({
            "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "tf", "namespace": "ml",
                         "creationTimestamp": "2026-01-02T03:04:05Z"},
            "spec": {"minMember": 4, "scheduleTimeoutSeconds": 10,
                     "minResources": {"cpu": "1500m", "nvidia.com/gpu": 2}}
        });
        let c = PodGroupInfo::from_json(GroupApi::Coscheduling, &cosched).unwrap();
        assert_eq!(c.policy, GroupPolicy::Gang { min_count: 4 });
        // minResources: quantities as strings or numbers (the CRD's int-or-string).
        let min = c.min_resources.as_ref().unwrap();
        assert_eq!(min["cpu"], Quantity::from_milli(1500));
        assert_eq!(min["nvidia.com/gpu"], Quantity::from_value(2));
        let bad = json!({"metadata": {"name": "tf"}, "spec": {"minResources": {"cpu": "lots"}}});
        assert!(
            PodGroupInfo::from_json(GroupApi::Coscheduling, &bad)
                .unwrap_err()
                .starts_with("spec.minResources[cpu]: Invalid value: \"lots\"")
        );
        // Coscheduling orders groups by it: it must be read from the object's camelCase key.
        assert_eq!(c.creation_timestamp, Some(1_767_323_045_000_000_000));
        assert_eq!(c.coscheduling_status, CoschedulingStatus::default());
        // The status scheduler-plugins' controller writes, read back.
        let with_status = json!({
            "metadata": {"name": "tf", "namespace": "ml"},
            "spec": {"minMember": 2},
            "status": {"phase": "Running", "occupiedBy": "ml/tf-job", "running": 2,
                       "failed": 1, "scheduleStartTime": "2026-01-02T03:04:06Z"}
        });
        let c = PodGroupInfo::from_json(GroupApi::Coscheduling, &with_status).unwrap();
        assert_eq!(
            c.coscheduling_status,
            CoschedulingStatus {
                phase: "Running".into(),
                occupied_by: "ml/tf-job".into(),
                running: 2,
                succeeded: 0,
                failed: 1,
                schedule_start_time: Some(1_767_323_046_000_000_000),
            }
        );

        // Absent or null levels are empty, as an informer hands them over.
        let bare = json!({"metadata": {"name": "n", "namespace": "ml"}, "status": null,
                          "spec": {"schedulingPolicy": {"basic": {}}, "schedulingConstraints": null}});
        let n = PodGroupInfo::from_json(GroupApi::Workload, &bare).unwrap();
        assert_eq!((n.scheduled_condition, n.topology_key), (None, None));
        assert_eq!((n.priority, n.disrupt_all), (None, false));
        let all = json!({"metadata": {"name": "a", "namespace": "ml"},
            "spec": {"schedulingPolicy": {"basic": {}}, "priority": 7, "disruptionMode": {"all": {}}}});
        let a = PodGroupInfo::from_json(GroupApi::Workload, &all).unwrap();
        assert_eq!((a.priority, a.disrupt_all), (Some(7), true));

        let bad = json!({"metadata": {"name": 5}});
        assert!(PodGroupInfo::from_json(GroupApi::Workload, &bad).is_err());
        // What the API server refuses is refused here too.
        let refused = |spec: serde_json::Value| {
            PodGroupInfo::from_json(GroupApi::Workload, &json!({"spec": spec})).unwrap_err()
        };
        assert_eq!(
            refused(json!({"schedulingPolicy": {"gang": {"minCount": 0}}})),
            "spec.schedulingPolicy.gang.minCount: Invalid value: 0: must be greater than or equal to 1"
        );
        assert!(refused(json!({})).starts_with("spec.schedulingPolicy: Required value"));
        assert!(
            refused(json!({"schedulingPolicy": {"basic": {}, "gang": {"minCount": 2}}}))
                .contains("not both")
        );
    }
}
