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
    /// Coscheduling's `spec.minResources`: what the cluster must have free, summed over its
    /// nodes, before any of the group's pods is tried (by name; `None` when not set).
    pub min_resources: Option<BTreeMap<String, Quantity>>,
    /// Coscheduling's `status` as last seen (written by `ferrosched run` or by
    /// scheduler-plugins' controller); empty for the Workload API.
    pub coscheduling_status: CoschedulingStatus,
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
            min_resources: None,
            coscheduling_status: CoschedulingStatus::default(),
        }
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
            GroupApi::Workload => match raw.spec.scheduling_policy {
                Some(RawPolicy {
                    gang: Some(g),
                    basic: None,
                }) => match g.min_count {
                    Some(n) if n >= 1 && n <= i64::from(i32::MAX) => GroupPolicy::Gang {
                        min_count: n as u32,
                    },
                    n => {
                        return Err(format!(
                            "spec.schedulingPolicy.gang.minCount: Invalid value: {}: must be greater than or equal to 1",
                            n.map_or("null".to_string(), |n| n.to_string())
                        ));
                    }
                },
                Some(RawPolicy {
                    gang: None,
                    basic: Some(_),
                }) => GroupPolicy::Basic,
                Some(RawPolicy {
                    gang: Some(_),
                    basic: Some(_),
                }) => {
                    return Err("spec.schedulingPolicy: Invalid value: must specify exactly one of basic and gang, not both".to_string());
                }
                _ => {
                    return Err(
                        "spec.schedulingPolicy: Required value: must specify exactly one of basic and gang"
                            .to_string(),
                    );
                }
            },
            // scheduler-plugins: a group of minMember <= 1 gates nothing, but its pods
            // still count as a group (one pod is its own quorum).
            GroupApi::Coscheduling => GroupPolicy::Gang {
                min_count: raw.spec.min_member.unwrap_or(0).max(0) as u32,
            },
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
            min_resources,
            coscheduling_status: CoschedulingStatus {
                phase: raw.status.phase.unwrap_or_default(),
                occupied_by: raw.status.occupied_by.unwrap_or_default(),
                running: raw.status.running.unwrap_or(0),
                succeeded: raw.status.succeeded.unwrap_or(0),
                failed: raw.status.failed.unwrap_or(0),
                schedule_start_time: raw.status.schedule_start_time.map(|t| nanos(&t)),
            },
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

fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    generation: Option<i64>,
    creation_timestamp: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawStatus {
    #[serde(default, deserialize_with = "null_as_default")]
    conditions: Vec<RawCondition>,
    /// Coscheduling.
    phase: Option<String>,
    occupied_by: Option<String>,
    running: Option<i32>,
    succeeded: Option<i32>,
    failed: Option<i32>,
    schedule_start_time: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
}

/// A time as Unix nanoseconds (saturating).
fn nanos(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> i64 {
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
    /// Coscheduling.
    min_member: Option<i64>,
    #[serde(default, deserialize_with = "null_as_default")]
    min_resources: Option<BTreeMap<String, serde_json::Value>>,
}

#[derive(Deserialize)]
struct RawConstraints {
    #[serde(default)]
    topology: Vec<RawTopology>,
}

#[derive(Deserialize)]
struct RawTopology {
    key: Option<String>,
}

#[derive(Deserialize, Default)]
struct RawPolicy {
    basic: Option<serde_json::Value>,
    gang: Option<RawGang>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawGang {
    min_count: Option<i64>,
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
