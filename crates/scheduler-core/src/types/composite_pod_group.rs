//! The scheduling view of a CompositePodGroup (`scheduling.k8s.io/v1alpha3`, alpha in 1.37
//! behind the `CompositePodGroup` gate): an inner node of a tree of groups. Its children are
//! PodGroups and CompositePodGroups of the same namespace that name it as
//! `spec.parentCompositePodGroupName`; it owns no pods itself. Its quorum counts children:
//! `gang.minGroupCount` of them must be placeable (a basic one needs one).

use serde::Deserialize;

use super::pod_group::{RawConstraints, RawMeta, gang_count, nanos, null_as_default};

/// A CompositePodGroup's identity: namespace and name (the API has one version).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CompositeKey {
    pub namespace: String,
    pub name: String,
}

impl CompositeKey {
    pub fn new(namespace: &str, name: &str) -> Self {
        CompositeKey {
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }
}

impl std::fmt::Display for CompositeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompositePodGroupInfo {
    pub key: CompositeKey,
    pub uid: String,
    /// `spec.parentCompositePodGroupName`; `None` for a root.
    pub parent: Option<String>,
    /// `schedulingPolicy.gang.minGroupCount`; `None` for `basic` (one child is enough).
    pub min_group_count: Option<u32>,
    /// `schedulingConstraints.topology[0].key`.
    pub topology_key: Option<String>,
    /// `spec.priority` (admission fills it from `priorityClassName`).
    pub priority: Option<i32>,
    /// `disruptionMode: {all: {}}`: preemption takes the whole subtree's pods or none.
    pub disrupt_all: bool,
    pub creation_timestamp: Option<i64>,
}

impl CompositePodGroupInfo {
    /// A group as a test makes it: gang of `min_group_count`, or basic.
    pub fn new(key: CompositeKey, parent: Option<&str>, min_group_count: Option<u32>) -> Self {
        CompositePodGroupInfo {
            key,
            uid: String::new(),
            parent: parent.map(str::to_string),
            min_group_count,
            topology_key: None,
            priority: None,
            disrupt_all: false,
            creation_timestamp: None,
        }
    }

    /// How many children must be placeable: `minGroupCount`, or 1 for basic.
    pub fn quorum(&self) -> u32 {
        self.min_group_count.unwrap_or(1).max(1)
    }

    /// Builds the view from the object's JSON, checking what the API server validates of
    /// the fields the scheduler reads (the policy is exactly one of basic and gang, and
    /// `minGroupCount` is at least 1).
    pub fn from_json(value: &serde_json::Value) -> Result<Self, String> {
        let raw = RawComposite::deserialize(value).map_err(|e| e.to_string())?;
        let policy = raw.spec.scheduling_policy.unwrap_or_default();
        let gang = policy.gang.map(|g| g.min_group_count);
        let min_group_count = gang_count(policy.basic.is_some(), gang, "minGroupCount")?;
        Ok(CompositePodGroupInfo {
            key: CompositeKey::new(
                raw.metadata.namespace.as_deref().unwrap_or_default(),
                raw.metadata.name.as_deref().unwrap_or_default(),
            ),
            uid: raw.metadata.uid.unwrap_or_default(),
            parent: raw
                .spec
                .parent_composite_pod_group_name
                .filter(|p| !p.is_empty()),
            min_group_count,
            topology_key: raw
                .spec
                .scheduling_constraints
                .and_then(|c| c.topology.into_iter().next())
                .and_then(|t| t.key)
                .filter(|k| !k.is_empty()),
            priority: raw.spec.priority,
            disrupt_all: matches!(
                &raw.spec.disruption_mode,
                Some(serde_json::Value::Object(m)) if m.contains_key("all")
            ),
            creation_timestamp: raw.metadata.creation_timestamp.as_ref().map(nanos),
        })
    }
}

#[derive(Deserialize)]
struct RawComposite {
    #[serde(default, deserialize_with = "null_as_default")]
    metadata: RawMeta,
    #[serde(default, deserialize_with = "null_as_default")]
    spec: RawCompositeSpec,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawCompositeSpec {
    parent_composite_pod_group_name: Option<String>,
    scheduling_policy: Option<RawCompositePolicy>,
    scheduling_constraints: Option<RawConstraints>,
    priority: Option<i32>,
    disruption_mode: Option<serde_json::Value>,
}

#[derive(Deserialize, Default)]
struct RawCompositePolicy {
    basic: Option<serde_json::Value>,
    gang: Option<RawCompositeGang>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawCompositeGang {
    min_group_count: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_gang_of_groups_is_read_with_its_parent_and_quorum() {
        let cpg = CompositePodGroupInfo::from_json(&json!({
            "apiVersion": "scheduling.k8s.io/v1alpha3",
            "kind": "CompositePodGroup",
            "metadata": {"name": "slice-a", "namespace": "ml", "uid": "u1"},
            "spec": {
                "parentCompositePodGroupName": "job",
                "workloadRef": {"workloadName": "w", "templateName": "t"},
                "schedulingPolicy": {"gang": {"minGroupCount": 2}},
                "disruptionMode": {"all": {}},
                "priority": 7
            }
        }))
        .unwrap();
        assert_eq!(cpg.key, CompositeKey::new("ml", "slice-a"));
        assert_eq!(cpg.parent.as_deref(), Some("job"));
        assert_eq!(cpg.quorum(), 2);
        assert!(cpg.disrupt_all);
        assert_eq!(cpg.priority, Some(7));

        let basic = CompositePodGroupInfo::from_json(&json!({
            "metadata": {"name": "job", "namespace": "ml"},
            "spec": {"schedulingPolicy": {"basic": {}}}
        }))
        .unwrap();
        assert_eq!((&basic.parent, basic.min_group_count), (&None, None));
        assert_eq!(basic.quorum(), 1);
    }

    #[test]
    fn an_invalid_policy_is_refused_as_the_api_server_would() {
        let err = |spec: serde_json::Value| {
            CompositePodGroupInfo::from_json(&json!({"metadata": {"name": "x"}, "spec": spec}))
                .unwrap_err()
        };
        assert!(err(json!({})).contains("Required value"));
        assert!(
            err(json!({"schedulingPolicy": {"gang": {"minGroupCount": 0}}}))
                .contains("minGroupCount: Invalid value: 0")
        );
        assert!(
            err(json!({"schedulingPolicy": {"gang": {"minGroupCount": 1}, "basic": {}}}))
                .contains("not both")
        );
    }
}
