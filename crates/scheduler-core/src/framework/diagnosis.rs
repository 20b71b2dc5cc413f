//! Why a pod did not fit, node by node, and upstream's aggregated message
//! ("0/15 nodes are available: 6 node(s) didn't match ..., 9 Insufficient nvidia.com/gpu.").

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, OnceLock};

use super::{Code, Status};
use crate::types::{NodeInfo, PodKey};

/// A rejected node: the snapshot's node itself (recording it costs a reference count, not a
/// string copy) or just a name.
#[derive(Clone, Debug)]
enum NodeRef {
    Node(Arc<NodeInfo>),
    Name(String),
}

impl NodeRef {
    fn name(&self) -> &str {
        match self {
            NodeRef::Node(n) => &n.name,
            NodeRef::Name(n) => n,
        }
    }
}

/// Statuses of the nodes that were filtered out, plus one status that stands for every node
/// not listed (used when PreFilter rejected the pod for all nodes at once).
///
/// Filtering records thousands of rejections per cycle, so they go into a vector; the
/// by-name index is only built when something looks a node up (preemption).
#[derive(Clone, Debug, Default)]
pub struct NodeToStatus {
    explicit: Vec<(NodeRef, Status)>,
    absent: Option<Status>,
    index: OnceLock<HashMap<String, usize>>,
}

impl NodeToStatus {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records (or replaces) the status of the node named `node`.
    pub fn set(&mut self, node: impl Into<String>, status: Status) {
        self.insert(NodeRef::Name(node.into()), status);
    }

    /// Records the status of a snapshot node without copying its name.
    pub fn set_node(&mut self, node: &Arc<NodeInfo>, status: Status) {
        self.insert(NodeRef::Node(Arc::clone(node)), status);
    }

    /// A node is recorded once per cycle; recording it again replaces its status.
    fn insert(&mut self, node: NodeRef, status: Status) {
        if let Some(&i) = self.index.get().and_then(|ix| ix.get(node.name())) {
            self.explicit[i].1 = status;
            return;
        }
        self.index = OnceLock::new();
        self.explicit.push((node, status));
    }

    /// The status every node not set explicitly has.
    pub fn set_absent(&mut self, status: Status) {
        self.absent = Some(status);
    }

    pub fn get(&self, node: &str) -> Option<&Status> {
        let index = self.index.get_or_init(|| {
            self.explicit
                .iter()
                .enumerate()
                .map(|(i, (n, _))| (n.name().to_string(), i))
                .collect()
        });
        index
            .get(node)
            .map(|&i| &self.explicit[i].1)
            .or(self.absent.as_ref())
    }

    pub fn len(&self) -> usize {
        self.explicit.len()
    }

    pub fn is_empty(&self) -> bool {
        self.explicit.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Status)> {
        self.explicit.iter().map(|(n, s)| (n.name(), s))
    }

    pub fn absent(&self) -> Option<&Status> {
        self.absent.as_ref()
    }
}

/// Everything learnt while failing to place a pod.
#[derive(Clone, Debug, Default)]
pub struct Diagnosis {
    pub node_to_status: NodeToStatus,
    /// Plugins that returned Unschedulable/Unresolvable: only cluster events they care about
    /// can make the pod schedulable (the queue uses this).
    pub unschedulable_plugins: BTreeSet<&'static str>,
    /// Plugins that returned Pending.
    pub pending_plugins: BTreeSet<&'static str>,
    /// Set when a PreFilter plugin rejected the pod for every node.
    pub pre_filter_msg: Option<String>,
    /// Set by PostFilter (preemption), e.g. "preemption: 0/3 nodes are available: ...".
    pub post_filter_msg: Option<String>,
}

impl Diagnosis {
    /// Records a rejected snapshot node and the plugin that rejected it.
    pub fn record_node(&mut self, node: &Arc<NodeInfo>, status: Status) {
        self.note_plugin(&status);
        self.node_to_status.set_node(node, status);
    }

    fn note_plugin(&mut self, status: &Status) {
        if let Some(p) = status.plugin() {
            if status.code() == Code::Pending {
                self.pending_plugins.insert(p);
            } else {
                self.unschedulable_plugins.insert(p);
            }
        }
    }

    /// Records a rejected node by name and the plugin that rejected it.
    pub fn record(&mut self, node: &str, status: Status) {
        self.note_plugin(&status);
        self.node_to_status.set(node, status);
    }
}

/// No node fits the pod. Its Display is the FailedScheduling message users see.
#[derive(Clone, Debug)]
pub struct FitError {
    pub pod: PodKey,
    pub num_all_nodes: usize,
    pub diagnosis: Diagnosis,
}

impl FitError {
    /// Reason -> number of nodes, across all filtered nodes (upstream's histogram).
    pub fn reason_histogram(&self) -> BTreeMap<String, usize> {
        let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
        let statuses = &self.diagnosis.node_to_status;
        for (_, s) in statuses.iter() {
            for r in s.reasons() {
                *reasons.entry(r.to_string()).or_default() += 1;
            }
        }
        if statuses.len() < self.num_all_nodes
            && let Some(absent) = statuses.absent()
        {
            for r in absent.reasons() {
                *reasons.entry(r.to_string()).or_default() += self.num_all_nodes - statuses.len();
            }
        }
        reasons
    }
}

impl fmt::Display for FitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0/{} nodes are available:", self.num_all_nodes)?;
        if let Some(msg) = &self.diagnosis.pre_filter_msg {
            write!(f, " {msg}.")?;
        } else {
            // Upstream sorts "<count> <reason>" as strings, so "10 x" sorts before "9 y".
            let mut parts: Vec<String> = self
                .reason_histogram()
                .into_iter()
                .map(|(r, n)| format!("{n} {r}"))
                .collect();
            parts.sort();
            if !parts.is_empty() {
                write!(f, " {}.", parts.join(", "))?;
            }
        }
        if let Some(msg) = &self.diagnosis.post_filter_msg {
            write!(f, " {msg}.")?;
        }
        Ok(())
    }
}

impl std::error::Error for FitError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn fit_error(num: usize, statuses: &[(&str, Status)]) -> FitError {
        let mut d = Diagnosis::default();
        for (n, s) in statuses {
            d.record(n, s.clone());
        }
        FitError {
            pod: PodKey::new("default", "p"),
            num_all_nodes: num,
            diagnosis: d,
        }
    }

    #[test]
    fn message_counts_reasons_and_sorts_them_as_strings() {
        let affinity = Status::unresolvable("node(s) didn't match Pod's node affinity/selector")
            .with_plugin("NodeAffinity");
        let gpu =
            Status::unschedulable("Insufficient nvidia.com/gpu").with_plugin("NodeResourcesFit");
        let mut statuses = Vec::new();
        for i in 0..6 {
            statuses.push((format!("cpu-{i}"), affinity.clone()));
        }
        for i in 0..9 {
            statuses.push((format!("gpu-{i}"), gpu.clone()));
        }
        let refs: Vec<(&str, Status)> = statuses
            .iter()
            .map(|(n, s)| (n.as_str(), s.clone()))
            .collect();
        let e = fit_error(15, &refs);
        assert_eq!(
            e.to_string(),
            "0/15 nodes are available: 6 node(s) didn't match Pod's node affinity/selector, 9 Insufficient nvidia.com/gpu."
        );
        assert_eq!(
            e.diagnosis
                .unschedulable_plugins
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            vec!["NodeAffinity", "NodeResourcesFit"]
        );
    }

    #[test]
    fn counts_sort_lexicographically_like_upstream() {
        let a = Status::unschedulable("Insufficient cpu");
        let b = Status::unschedulable("node(s) had untolerated taint {x: y}");
        let mut v: Vec<(String, Status)> = (0..10).map(|i| (format!("a{i}"), a.clone())).collect();
        v.extend((0..2).map(|i| (format!("b{i}"), b.clone())));
        let refs: Vec<(&str, Status)> = v.iter().map(|(n, s)| (n.as_str(), s.clone())).collect();
        assert_eq!(
            fit_error(12, &refs).to_string(),
            "0/12 nodes are available: 10 Insufficient cpu, 2 node(s) had untolerated taint {x: y}."
        );
    }

    #[test]
    fn a_node_with_several_reasons_counts_each() {
        let s = Status::with_reasons(
            Code::Unschedulable,
            vec!["Insufficient cpu", "Insufficient memory"],
        );
        assert_eq!(
            fit_error(1, &[("n1", s)]).to_string(),
            "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory."
        );
    }

    #[test]
    fn pre_filter_rejection_is_reported_once_and_post_filter_appended() {
        let mut d = Diagnosis {
            pre_filter_msg: Some("runtimeclass \"kata\" not found".into()),
            ..Diagnosis::default()
        };
        d.node_to_status
            .set_absent(Status::unresolvable("runtimeclass \"kata\" not found"));
        d.post_filter_msg = Some("preemption: not eligible due to preemptionPolicy=Never".into());
        let e = FitError {
            pod: PodKey::new("ns", "p"),
            num_all_nodes: 4,
            diagnosis: d,
        };
        assert_eq!(
            e.to_string(),
            "0/4 nodes are available: runtimeclass \"kata\" not found. preemption: not eligible due to preemptionPolicy=Never."
        );
        assert_eq!(
            e.reason_histogram().get("runtimeclass \"kata\" not found"),
            Some(&4)
        );
    }
}
