//! NodeSummary: the few numbers and flags of a [`NodeInfo`] that Filter and Score read for
//! every node they visit, copied out so a snapshot can keep them in one contiguous array in
//! node order ([`Snapshot::summaries`](crate::cache::Snapshot::summaries)).
//!
//! At 50,000 nodes a cycle visits 2,500 of them, a different 2,500 each time (the start
//! index rotates), and the time went into the first reads of each node's own allocation:
//! four cache lines behind an `Arc`, scattered over the heap (more so with a million bound
//! pods allocated between them). Read from this array the same checks are a sequential scan
//! the hardware prefetches. A plugin answers from a summary only when the summary alone
//! decides (see [`SummaryRule`] and
//! [`FilterPlugin::summary_rule`](crate::framework::FilterPlugin::summary_rule)); anything
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

/// What a node's summary must show for a Filter plugin to pass the node, decided once per
/// cycle from the pod ([`FilterPlugin::summary_rule`](crate::framework::FilterPlugin::summary_rule)).
/// The framework joins the active plugins' rules into one and checks it per node inline
/// (no call per plugin); a node it does not admit goes through the plugins' `filter` as
/// before, so rejections and their reasons are unchanged. A rule may only admit nodes the
/// plugin passes; it may refuse more (those are filtered the slow way).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SummaryRule {
    /// The node must not be cordoned.
    pub schedulable: bool,
    /// The node must have no taints.
    pub untainted: bool,
    /// The node must have a free pod slot and room for these requests.
    pub room: Option<Room>,
}

/// Requests a node must have room for (besides one pod slot): each positive request at
/// most the node's allocatable minus its requested amount (NodeResourcesFit's check).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Room {
    pub milli_cpu: i64,
    pub memory: i64,
    pub ephemeral_storage: i64,
}

impl Room {
    /// Whether `node` has a free pod slot and room for every positive request.
    #[inline(always)]
    pub fn fits(&self, node: &NodeSummary) -> bool {
        let fits = |requested: i64, allocatable: i64, used: i64| {
            requested <= 0 || requested <= allocatable.wrapping_sub(used)
        };
        // One more pod fits: pods + 1 <= allowed.
        node.pod_count() < node.allowed_pod_number
            && fits(
                self.milli_cpu,
                node.allocatable_milli_cpu,
                node.requested_milli_cpu,
            )
            && fits(self.memory, node.allocatable_memory, node.requested_memory)
            && fits(
                self.ephemeral_storage,
                node.allocatable_ephemeral_storage,
                node.requested_ephemeral_storage,
            )
    }
}

impl SummaryRule {
    /// Admits every node.
    pub const ANY: SummaryRule = SummaryRule {
        schedulable: false,
        untainted: false,
        room: None,
    };

    /// Both rules at once; `None` when they ask for room for different requests (the
    /// framework then checks each plugin's rule on its own).
    pub fn and(self, other: SummaryRule) -> Option<SummaryRule> {
        let room = match (self.room, other.room) {
            (Some(a), Some(b)) if a != b => return None,
            (a, b) => a.or(b),
        };
        Some(SummaryRule {
            schedulable: self.schedulable || other.schedulable,
            untainted: self.untainted || other.untainted,
            room,
        })
    }

    /// Whether the rule admits the node with this summary.
    #[inline(always)]
    pub fn admits(&self, node: &NodeSummary) -> bool {
        (!self.schedulable || !node.unschedulable)
            && (!self.untainted || !node.has_taints)
            && self.room.is_none_or(|r| r.fits(node))
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

    #[test]
    fn a_rule_admits_only_what_each_of_its_parts_allows() {
        let room = |milli_cpu, memory, ephemeral_storage| SummaryRule {
            room: Some(Room {
                milli_cpu,
                memory,
                ephemeral_storage,
            }),
            ..SummaryRule::ANY
        };
        let mut node = NodeInfo::test("n").cpu("1").memory("1Gi").pods(2).build();
        let s = NodeSummary::of(&node);
        assert!(room(1000, 1 << 30, 0).admits(&s));
        assert!(!room(1001, 0, 0).admits(&s));
        assert!(!room(0, (1 << 30) + 1, 0).admits(&s));
        // No ephemeral storage on the node: only a pod asking for none fits.
        assert!(!room(0, 0, 1).admits(&s));
        assert!(room(0, 0, 0).admits(&s) && room(-5, 0, 0).admits(&s));
        // Used amounts count, and the pod slots too.
        node.add_pod(Arc::new(PodInfo::test("ns", "a").cpu("600m").build()));
        let s = NodeSummary::of(&node);
        assert!(room(400, 0, 0).admits(&s) && !room(401, 0, 0).admits(&s));
        node.add_pod(Arc::new(PodInfo::test("ns", "b").build()));
        assert!(!room(0, 0, 0).admits(&NodeSummary::of(&node)));

        let cordoned = NodeSummary::of(&NodeInfo::test("c").unschedulable().build());
        let tainted = NodeSummary::of(&NodeInfo::test("t").taint("k", "v", "NoSchedule").build());
        let schedulable = SummaryRule {
            schedulable: true,
            ..SummaryRule::ANY
        };
        let untainted = SummaryRule {
            untainted: true,
            ..SummaryRule::ANY
        };
        assert!(SummaryRule::ANY.admits(&cordoned) && SummaryRule::ANY.admits(&tainted));
        assert!(!schedulable.admits(&cordoned) && schedulable.admits(&tainted));
        assert!(untainted.admits(&cordoned) && !untainted.admits(&tainted));
        let both = schedulable.and(untainted).expect("joins");
        assert!(!both.admits(&cordoned) && !both.admits(&tainted));
        // Two different room checks do not join into one.
        assert_eq!(room(1, 0, 0).and(room(2, 0, 0)), None);
        assert_eq!(
            room(1, 0, 0).and(both),
            Some(SummaryRule {
                room: room(1, 0, 0).room,
                ..both
            })
        );
    }
}
