//! Trees of groups (upstream's `workloadForest`, CompositePodGroup gate): a PodGroup may name
//! a CompositePodGroup as its parent, which may name another, up to a root. The root is what
//! is scheduled: one cycle for every waiting pod of every PodGroup under it, and a tree's
//! pods wait until the whole tree meets its quorum.
//!
//! With the gate off (the default, as upstream's alpha) parents are ignored: every PodGroup
//! is its own root and CompositePodGroups are not read.

use std::collections::HashSet;

use crate::pod_group_manager::PodGroups;
use crate::types::composite_pod_group::CompositeKey;
use crate::types::pod_group::{GroupApi, GroupPolicy, PodGroupInfo, PodGroupKey};

/// A node of a tree.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TreeNode {
    Group(PodGroupKey),
    Composite(CompositeKey),
}

/// Why a group's root cannot be found; the text is upstream's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootError {
    /// An ancestor named as parent does not exist (yet).
    Missing(CompositeKey),
    /// The parents loop back.
    Cycle(CompositeKey),
}

impl std::fmt::Display for RootError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RootError::Missing(k) => write!(
                f,
                "failed to build hierarchy snapshot: composite pod group object not found in state for {k}"
            ),
            RootError::Cycle(k) => write!(
                f,
                "failed to build hierarchy snapshot: cycle detected in composite pod group hierarchy when getting root info: {k}"
            ),
        }
    }
}

/// The group's parent, when the gate is on and it names one (Workload API groups only).
pub fn parent_of(groups: &PodGroups, group: &PodGroupInfo) -> Option<CompositeKey> {
    if !groups.composite_enabled() || group.key.api != GroupApi::Workload {
        return None;
    }
    group
        .parent
        .as_deref()
        .map(|p| CompositeKey::new(&group.key.namespace, p))
}

/// The root CompositePodGroup above `group`; `Ok(None)` when the group is its own root.
pub fn root_of(
    groups: &PodGroups,
    group: &PodGroupInfo,
) -> Result<Option<CompositeKey>, RootError> {
    let Some(mut key) = parent_of(groups, group) else {
        return Ok(None);
    };
    let mut seen = HashSet::new();
    loop {
        if !seen.insert(key.clone()) {
            return Err(RootError::Cycle(key));
        }
        let Some(c) = groups.composite(&key) else {
            return Err(RootError::Missing(key));
        };
        match &c.parent {
            None => return Ok(Some(key)),
            Some(p) => key = CompositeKey::new(&key.namespace, p),
        }
    }
}

/// Whether two groups are in one tree (never with the gate off).
pub fn same_root(groups: &PodGroups, a: &PodGroupKey, b: &PodGroupKey) -> bool {
    let root = |k: &PodGroupKey| {
        groups
            .get(k)
            .and_then(|g| root_of(groups, g).ok().flatten())
    };
    groups.composite_enabled() && root(a).is_some_and(|r| root(b) == Some(r))
}

/// The children of `parent` that exist, oldest first (upstream orders them by creation
/// time), then by name; PodGroups and CompositePodGroups side by side.
pub fn children(groups: &PodGroups, parent: &CompositeKey) -> Vec<TreeNode> {
    let mut out: Vec<(Option<i64>, String, TreeNode)> = Vec::new();
    for g in groups.groups() {
        if g.key.namespace == parent.namespace
            && g.key.api == GroupApi::Workload
            && g.parent.as_deref() == Some(parent.name.as_str())
        {
            out.push((
                g.creation_timestamp,
                g.key.name.clone(),
                TreeNode::Group(g.key.clone()),
            ));
        }
    }
    for c in groups.composites() {
        if c.key.namespace == parent.namespace && c.parent.as_deref() == Some(parent.name.as_str())
        {
            out.push((
                c.creation_timestamp,
                c.key.name.clone(),
                TreeNode::Composite(c.key.clone()),
            ));
        }
    }
    // Unknown creation times last.
    out.sort_by(|a, b| (a.0.is_none(), a.0, &a.1).cmp(&(b.0.is_none(), b.0, &b.1)));
    out.into_iter().map(|(_, _, n)| n).collect()
}

/// The PodGroups under `node` (itself, for a PodGroup), depth first in child order. A
/// CompositePodGroup met twice (a cycle below the root) is not entered again.
pub fn leaves(groups: &PodGroups, node: &TreeNode) -> Vec<PodGroupKey> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    collect_leaves(groups, node, &mut seen, &mut out);
    out
}

fn collect_leaves(
    groups: &PodGroups,
    node: &TreeNode,
    seen: &mut HashSet<CompositeKey>,
    out: &mut Vec<PodGroupKey>,
) {
    match node {
        TreeNode::Group(k) => out.push(k.clone()),
        TreeNode::Composite(k) => {
            if seen.insert(k.clone()) {
                for c in children(groups, k) {
                    collect_leaves(groups, &c, seen, out);
                }
            }
        }
    }
}

/// The CompositePodGroups of the tree under `root`, itself first.
pub fn composites_under(groups: &PodGroups, root: &CompositeKey) -> Vec<CompositeKey> {
    let mut out = vec![root.clone()];
    let mut i = 0;
    while i < out.len() {
        for c in children(groups, &out[i]) {
            if let TreeNode::Composite(k) = c
                && !out.contains(&k)
            {
                out.push(k);
            }
        }
        i += 1;
    }
    out
}

/// Upstream's tree quorum: a PodGroup is ready when it has `minCount` pods (a basic one:
/// one); a CompositePodGroup when `minGroupCount` of its children are (a basic one: one).
pub fn ready(groups: &PodGroups, node: &TreeNode) -> bool {
    ready_in(groups, node, &mut HashSet::new())
}

fn ready_in(groups: &PodGroups, node: &TreeNode, seen: &mut HashSet<CompositeKey>) -> bool {
    match node {
        TreeNode::Group(k) => groups.get(k).is_some_and(|g| {
            let min = match g.policy {
                GroupPolicy::Basic => 1,
                GroupPolicy::Gang { min_count } => min_count.max(1),
            };
            groups.all_pods_count(k) >= min as usize
        }),
        TreeNode::Composite(k) => {
            let Some(c) = groups.composite(k) else {
                return false;
            };
            if !seen.insert(k.clone()) {
                return false;
            }
            let ready = children(groups, k)
                .iter()
                .filter(|child| ready_in(groups, child, seen))
                .count();
            ready >= c.quorum() as usize
        }
    }
}

/// Upstream's message for a tree short of its quorum (named by its root).
pub fn waiting_for_tree(root: &CompositeKey) -> String {
    format!(
        "waiting for composite pod group {:?} tree to meet quorum",
        root.name
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::PodInfo;
    use crate::types::composite_pod_group::CompositePodGroupInfo;

    fn leaf(name: &str, parent: Option<&str>, min_count: u32) -> PodGroupInfo {
        let mut g = PodGroupInfo::new(
            PodGroupKey::new(GroupApi::Workload, "ml", name),
            GroupPolicy::Gang { min_count },
        );
        g.parent = parent.map(str::to_string);
        g
    }

    fn pods(groups: &mut PodGroups, group: &str, n: usize) {
        for i in 0..n {
            groups.add_pod(
                &PodInfo::test("ml", &format!("{group}-{i}"))
                    .edit(|p| {
                        p.spec.as_mut().unwrap().scheduling_group =
                            Some(k8s_openapi::api::core::v1::PodSchedulingGroup {
                                pod_group_name: Some(group.to_string()),
                            })
                    })
                    .build(),
            );
        }
    }

    fn cpg(name: &str, parent: Option<&str>, min: Option<u32>) -> CompositePodGroupInfo {
        CompositePodGroupInfo::new(CompositeKey::new("ml", name), parent, min)
    }

    #[test]
    fn with_the_gate_off_every_group_is_its_own_root() {
        let mut g = PodGroups::default();
        g.upsert_composite(cpg("job", None, Some(2)));
        let a = leaf("a", Some("job"), 1);
        assert_eq!(root_of(&g, &a), Ok(None));
        g.set_composite_enabled(true);
        assert_eq!(root_of(&g, &a), Ok(Some(CompositeKey::new("ml", "job"))));
    }

    #[test]
    fn roots_are_found_through_every_level_and_gaps_and_loops_are_named() {
        let mut g = PodGroups::default();
        g.set_composite_enabled(true);
        g.upsert_composite(cpg("slice", Some("job"), Some(1)));
        let a = leaf("a", Some("slice"), 1);
        assert_eq!(
            root_of(&g, &a).unwrap_err().to_string(),
            "failed to build hierarchy snapshot: composite pod group object not found in state for ml/job"
        );
        g.upsert_composite(cpg("job", Some("slice"), Some(1)));
        assert!(matches!(root_of(&g, &a), Err(RootError::Cycle(_))));
        g.upsert_composite(cpg("job", None, Some(1)));
        assert_eq!(root_of(&g, &a), Ok(Some(CompositeKey::new("ml", "job"))));
    }

    #[test]
    fn a_tree_is_ready_when_enough_children_are() {
        let mut g = PodGroups::default();
        g.set_composite_enabled(true);
        g.upsert_composite(cpg("job", None, Some(2)));
        g.upsert_composite(cpg("s1", Some("job"), None));
        g.upsert(leaf("a", Some("s1"), 2));
        g.upsert(leaf("b", Some("job"), 1));
        let root = TreeNode::Composite(CompositeKey::new("ml", "job"));
        pods(&mut g, "a", 1);
        pods(&mut g, "b", 1);
        // b is ready, a (and so s1) is one pod short: one child of two.
        assert!(!ready(&g, &root));
        pods(&mut g, "a", 2);
        assert!(ready(&g, &root));
        assert_eq!(
            leaves(&g, &root),
            [
                PodGroupKey::new(GroupApi::Workload, "ml", "b"),
                PodGroupKey::new(GroupApi::Workload, "ml", "a"),
            ],
            "children by name when no creation time is known: b (a group) before s1"
        );
    }
}
