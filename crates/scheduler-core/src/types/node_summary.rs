//! NodeSummary: the few numbers and flags of a [`NodeInfo`] that Filter and Score read for
//! every node they visit, copied out so a snapshot can keep them in one contiguous array in
//! node order ([`Snapshot::summaries`](crate::cache::Snapshot::summaries)).
//!
//! At 50,000 nodes a cycle visits 2,500 of them, a different 2,500 each time (the start
//! index rotates), and the time went into the first reads of each node's own allocation:
//! four cache lines behind an `Arc`, scattered over the heap (more so with a million bound
//! pods allocated between them). Read from this array the same checks are a sequential scan
//! the hardware prefetches. A plugin answers from a summary only when the summary alone
//! decides (see [`FilterPlugin::passes`](crate::framework::FilterPlugin::passes)); anything
//! else, rejections and their messages included, still reads the `NodeInfo`.

use super::node::NodeInfo;

/// Built by [`NodeSummary::of`] whenever the snapshot takes a changed node. Scalar
/// resources (extended resources, hugepages) are not in it: a check on them reads the node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeSummary {
    pub allocatable_milli_cpu: i64,
    pub allocatable_memory: i64,
    pub allocatable_ephemeral_storage: i64,
    pub allowed_pod_number: i64,
    pub requested_milli_cpu: i64,
    pub requested_memory: i64,
    pub requested_ephemeral_storage: i64,
    /// Sum of the pods' non-zero requests (cpu and memory only).
    pub non_zero_milli_cpu: i64,
    pub non_zero_memory: i64,
    /// Pods on the node (bound and assumed).
    pub pods: u32,
    pub unschedulable: bool,
    /// The node has at least one taint.
    pub has_taints: bool,
    /// The node reports at least one image.
    pub has_images: bool,
}

impl NodeSummary {
    pub fn of(node: &NodeInfo) -> Self {
        let (a, r, nz) = (&node.allocatable, &node.requested, &node.non_zero_requested);
        NodeSummary {
            allocatable_milli_cpu: a.milli_cpu,
            allocatable_memory: a.memory,
            allocatable_ephemeral_storage: a.ephemeral_storage,
            allowed_pod_number: a.allowed_pod_number,
            requested_milli_cpu: r.milli_cpu,
            requested_memory: r.memory,
            requested_ephemeral_storage: r.ephemeral_storage,
            non_zero_milli_cpu: nz.milli_cpu,
            non_zero_memory: nz.memory,
            pods: u32::try_from(node.pods.len()).unwrap_or(u32::MAX),
            unschedulable: node.unschedulable,
            has_taints: !node.taints.is_empty(),
            has_images: !node.images.is_empty(),
        }
    }

    /// Pods on the node, as [`NodeInfo::pods`]`.len()` counts them.
    pub fn pod_count(&self) -> i64 {
        i64::from(self.pods)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::PodInfo;
    use std::sync::Arc;

    #[test]
    fn a_summary_copies_what_filter_and_score_read() {
        let mut node = NodeInfo::test("n")
            .cpu("4")
            .memory("8Gi")
            .pods(110)
            .taint("k", "v", "NoSchedule")
            .image("img:1", 1 << 20)
            .unschedulable()
            .build();
        node.add_pod(Arc::new(
            PodInfo::test("ns", "p").cpu("250m").memory("1Gi").build(),
        ));
        let s = NodeSummary::of(&node);
        assert_eq!(
            (
                s.allocatable_milli_cpu,
                s.allocatable_memory,
                s.allowed_pod_number
            ),
            (4000, 8 << 30, 110)
        );
        assert_eq!((s.requested_milli_cpu, s.requested_memory), (250, 1 << 30));
        assert_eq!(
            (s.non_zero_milli_cpu, s.non_zero_memory),
            (
                node.non_zero_requested.milli_cpu,
                node.non_zero_requested.memory
            )
        );
        assert_eq!(s.pod_count(), 1);
        assert!(s.unschedulable && s.has_taints && s.has_images);

        let bare = NodeSummary::of(&NodeInfo::test("m").build());
        assert!(!bare.unschedulable && !bare.has_taints && !bare.has_images);
        assert_eq!(bare.pod_count(), 0);
    }
}
