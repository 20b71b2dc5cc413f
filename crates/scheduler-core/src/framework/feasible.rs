//! The nodes that passed Filter, as PreScore and Score see them: positions in the
//! snapshot's node list, so a cycle neither clones nor drops a node's `Arc` per feasible
//! node (at 50,000 nodes, 2,500 of each per pod were a seventh of the cycle).

use std::sync::Arc;

use crate::cache::Snapshot;
use crate::types::{NodeInfo, NodeSummary};

/// A read-only list of nodes for PreScore and Score plugins: iterate it (or index it) to get
/// each `&NodeInfo`, in the order the framework scores them. Cheap to copy.
///
/// Built by the framework from the snapshot and the feasible nodes' positions in it; a
/// plugin test builds one from a slice of nodes with `FeasibleNodes::from(&nodes[..])`.
#[derive(Clone, Copy)]
pub struct FeasibleNodes<'a> {
    all: &'a [Arc<NodeInfo>],
    /// `None`: every node of `all`, in order.
    positions: Option<&'a [usize]>,
}

impl<'a> FeasibleNodes<'a> {
    /// The nodes of `all` at `positions`, in the order of `positions`. A position past the
    /// end of `all` is a bug in the caller: reading it panics.
    pub fn at(all: &'a [Arc<NodeInfo>], positions: &'a [usize]) -> Self {
        debug_assert!(
            positions.iter().all(|&p| p < all.len()),
            "feasible node position past the end of the node list ({} nodes)",
            all.len()
        );
        FeasibleNodes {
            all,
            positions: Some(positions),
        }
    }

    pub fn len(&self) -> usize {
        self.positions.map_or(self.all.len(), <[usize]>::len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `i`-th node, if there is one.
    pub fn get(&self, i: usize) -> Option<&'a NodeInfo> {
        self.get_arc(i).map(|n| &**n)
    }

    fn get_arc(&self, i: usize) -> Option<&'a Arc<NodeInfo>> {
        match self.positions {
            None => self.all.get(i),
            Some(p) => p.get(i).map(|&j| &self.all[j]),
        }
    }

    /// The nodes in order.
    pub fn iter(&self) -> FeasibleIter<'a> {
        FeasibleIter {
            nodes: *self,
            next: 0,
            end: self.len(),
        }
    }

    /// The nodes `start..end` of this list, as a list (for splitting work into runs).
    /// Panics when the range is out of bounds.
    pub fn range(&self, start: usize, end: usize) -> FeasibleNodes<'a> {
        match self.positions {
            None => FeasibleNodes {
                all: &self.all[start..end],
                positions: None,
            },
            Some(p) => FeasibleNodes {
                all: self.all,
                positions: Some(&p[start..end]),
            },
        }
    }

    /// The nodes' `Arc`s, cloned: for what must outlive the cycle's snapshot.
    pub fn to_vec(&self) -> Vec<Arc<NodeInfo>> {
        (0..self.len())
            .filter_map(|i| self.get_arc(i).cloned())
            .collect()
    }
}

impl Default for FeasibleNodes<'_> {
    /// No nodes.
    fn default() -> Self {
        FeasibleNodes {
            all: &[],
            positions: None,
        }
    }
}

impl<'a> From<&'a [Arc<NodeInfo>]> for FeasibleNodes<'a> {
    fn from(all: &'a [Arc<NodeInfo>]) -> Self {
        FeasibleNodes {
            all,
            positions: None,
        }
    }
}

impl<'a> From<&'a Vec<Arc<NodeInfo>>> for FeasibleNodes<'a> {
    fn from(all: &'a Vec<Arc<NodeInfo>>) -> Self {
        FeasibleNodes::from(all.as_slice())
    }
}

impl std::ops::Index<usize> for FeasibleNodes<'_> {
    type Output = NodeInfo;

    fn index(&self, i: usize) -> &NodeInfo {
        match self.get(i) {
            Some(n) => n,
            None => panic!("feasible node {i} of {}", self.len()),
        }
    }
}

impl std::fmt::Debug for FeasibleNodes<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.iter().map(|n| n.name.as_str()))
            .finish()
    }
}

impl<'a> IntoIterator for FeasibleNodes<'a> {
    type Item = &'a NodeInfo;
    type IntoIter = FeasibleIter<'a>;

    fn into_iter(self) -> FeasibleIter<'a> {
        self.iter()
    }
}

impl<'a> IntoIterator for &FeasibleNodes<'a> {
    type Item = &'a NodeInfo;
    type IntoIter = FeasibleIter<'a>;

    fn into_iter(self) -> FeasibleIter<'a> {
        self.iter()
    }
}

/// The iterator of [`FeasibleNodes`].
#[derive(Clone)]
pub struct FeasibleIter<'a> {
    nodes: FeasibleNodes<'a>,
    next: usize,
    end: usize,
}

impl<'a> Iterator for FeasibleIter<'a> {
    type Item = &'a NodeInfo;

    fn next(&mut self) -> Option<&'a NodeInfo> {
        if self.next >= self.end {
            return None;
        }
        let n = self.nodes.get(self.next);
        self.next += 1;
        n
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.end - self.next;
        (left, Some(left))
    }
}

impl DoubleEndedIterator for FeasibleIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.next >= self.end {
            return None;
        }
        self.end -= 1;
        self.nodes.get(self.end)
    }
}

impl ExactSizeIterator for FeasibleIter<'_> {}

/// The feasible nodes' [`NodeSummary`]s, in the order of their [`FeasibleNodes`], for
/// [`ScorePlugin::score_summarized`](super::ScorePlugin::score_summarized): read in place
/// from the snapshot's summaries by position (no copy per cycle). Cheap to copy.
#[derive(Clone, Copy)]
pub struct FeasibleSummaries<'a> {
    all: &'a [NodeSummary],
    /// `None`: every summary of `all`, in order.
    positions: Option<&'a [usize]>,
}

impl<'a> FeasibleSummaries<'a> {
    /// The summaries of `all` at `positions`, in the order of `positions`.
    pub fn at(all: &'a [NodeSummary], positions: &'a [usize]) -> Self {
        debug_assert!(
            positions.iter().all(|&p| p < all.len()),
            "feasible node position past the end of the summaries ({} nodes)",
            all.len()
        );
        FeasibleSummaries {
            all,
            positions: Some(positions),
        }
    }

    pub fn len(&self) -> usize {
        self.positions.map_or(self.all.len(), <[usize]>::len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `i`-th summary, if there is one.
    pub fn get(&self, i: usize) -> Option<&'a NodeSummary> {
        match self.positions {
            None => self.all.get(i),
            Some(p) => p.get(i).map(|&j| &self.all[j]),
        }
    }

    /// The summaries in order.
    pub fn iter(&self) -> SummaryIter<'a> {
        match self.positions {
            None => SummaryIter::Whole(self.all.iter()),
            Some(p) => SummaryIter::Picked(self.all, p.iter()),
        }
    }

    /// The summaries `start..end` of this list. Panics when the range is out of bounds.
    pub fn range(&self, start: usize, end: usize) -> FeasibleSummaries<'a> {
        match self.positions {
            None => FeasibleSummaries {
                all: &self.all[start..end],
                positions: None,
            },
            Some(p) => FeasibleSummaries {
                all: self.all,
                positions: Some(&p[start..end]),
            },
        }
    }
}

impl<'a> IntoIterator for FeasibleSummaries<'a> {
    type Item = &'a NodeSummary;
    type IntoIter = SummaryIter<'a>;

    fn into_iter(self) -> SummaryIter<'a> {
        self.iter()
    }
}

impl std::fmt::Debug for FeasibleSummaries<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// The iterator of [`FeasibleSummaries`].
#[derive(Clone)]
pub enum SummaryIter<'a> {
    Whole(std::slice::Iter<'a, NodeSummary>),
    Picked(&'a [NodeSummary], std::slice::Iter<'a, usize>),
}

impl<'a> Iterator for SummaryIter<'a> {
    type Item = &'a NodeSummary;

    #[inline]
    fn next(&mut self) -> Option<&'a NodeSummary> {
        match self {
            SummaryIter::Whole(it) => it.next(),
            SummaryIter::Picked(all, it) => it.next().map(|&j| &all[j]),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            SummaryIter::Whole(it) => it.size_hint(),
            SummaryIter::Picked(_, it) => it.size_hint(),
        }
    }
}

impl ExactSizeIterator for SummaryIter<'_> {}

impl<'a> From<&'a [NodeSummary]> for FeasibleSummaries<'a> {
    fn from(all: &'a [NodeSummary]) -> Self {
        FeasibleSummaries {
            all,
            positions: None,
        }
    }
}

/// The feasible nodes a cycle keeps (and a [`ScheduleResult`](crate::ScheduleResult) hands
/// on): positions in the cycle's snapshot when Filter scanned the snapshot's own list, else
/// the nodes themselves (a placement's or a PreFilter's subset, or what extenders kept).
#[derive(Clone, Debug)]
pub enum FeasibleSet {
    /// Positions in `Snapshot::node_infos()` of the snapshot the cycle ran on.
    Positions(Vec<usize>),
    Nodes(Vec<Arc<NodeInfo>>),
}

impl Default for FeasibleSet {
    fn default() -> Self {
        FeasibleSet::Nodes(Vec::new())
    }
}

impl FeasibleSet {
    pub fn len(&self) -> usize {
        match self {
            FeasibleSet::Positions(p) => p.len(),
            FeasibleSet::Nodes(n) => n.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The nodes, read from `snapshot` (the one the cycle ran on) when kept as positions.
    pub fn view<'a>(&'a self, snapshot: &'a Snapshot) -> FeasibleNodes<'a> {
        match self {
            FeasibleSet::Positions(p) => FeasibleNodes::at(snapshot.node_infos(), p),
            FeasibleSet::Nodes(n) => FeasibleNodes::from(n.as_slice()),
        }
    }

    /// The nodes' summaries, read from `snapshot` (the one the cycle ran on): only when
    /// kept as positions (a subset's nodes are scored from the nodes).
    pub fn summaries<'a>(&'a self, snapshot: &'a Snapshot) -> Option<FeasibleSummaries<'a>> {
        match self {
            FeasibleSet::Positions(p) => Some(FeasibleSummaries::at(snapshot.summaries(), p)),
            FeasibleSet::Nodes(_) => None,
        }
    }

    /// The nodes themselves (cloned `Arc`s when kept as positions).
    pub fn into_nodes(self, snapshot: &Snapshot) -> Vec<Arc<NodeInfo>> {
        match self {
            FeasibleSet::Positions(_) => self.view(snapshot).to_vec(),
            FeasibleSet::Nodes(n) => n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(names: &[&str]) -> Vec<Arc<NodeInfo>> {
        names.iter().map(|n| Arc::new(NodeInfo::new(n))).collect()
    }

    fn names<'a>(v: impl IntoIterator<Item = &'a NodeInfo>) -> Vec<&'a str> {
        v.into_iter().map(|n| n.name.as_str()).collect()
    }

    #[test]
    fn positions_pick_and_order_the_nodes() {
        let all = nodes(&["a", "b", "c", "d", "e"]);
        let picked = [3, 0, 4];
        let f = FeasibleNodes::at(&all, &picked);
        assert_eq!(f.len(), 3);
        assert_eq!(names(f), ["d", "a", "e"]);
        assert_eq!(f[1].name, "a");
        assert!(f.get(3).is_none());
        assert_eq!(names(f.iter().rev()), ["e", "a", "d"]);
        assert_eq!(names(f.range(1, 3)), ["a", "e"]);
        // Reading them clones nothing; `to_vec` clones the very nodes, in order.
        assert_eq!(Arc::strong_count(&all[3]), 1);
        let v = f.to_vec();
        assert_eq!(names(v.iter().map(|n| &**n)), ["d", "a", "e"]);
        assert!(Arc::ptr_eq(&v[0], &all[3]));
        assert_eq!(Arc::strong_count(&all[3]), 2);
    }

    #[test]
    fn summaries_line_up_with_the_nodes_they_were_kept_for() {
        let snapshot = Snapshot::from_node_infos((0..6).map(|i| {
            NodeInfo::test(&format!("n{i}"))
                .cpu(&format!("{}", i + 1))
                .build()
        }));
        let kept = FeasibleSet::Positions(vec![4, 1, 5]);
        let (nodes, sums) = (kept.view(&snapshot), kept.summaries(&snapshot).unwrap());
        assert_eq!(sums.len(), 3);
        for (i, (node, sum)) in nodes.iter().zip(sums).enumerate() {
            assert_eq!(*sum, NodeSummary::of(node), "{i}");
            assert_eq!(sums.get(i), Some(sum));
        }
        let cpus: Vec<i64> = sums
            .range(1, 3)
            .iter()
            .map(|s| s.allocatable_milli_cpu)
            .collect();
        let expected: Vec<i64> = [1, 5]
            .iter()
            .map(|&j| snapshot.node_infos()[j].allocatable.milli_cpu)
            .collect();
        assert_eq!(cpus, expected);
        // Nodes kept as nodes are scored from the nodes.
        let whole = FeasibleSet::Nodes(snapshot.node_infos().to_vec());
        assert!(whole.summaries(&snapshot).is_none());
        assert_eq!(whole.view(&snapshot).len(), 6);
    }

    #[test]
    fn a_slice_is_every_node_in_order() {
        let all = nodes(&["a", "b", "c"]);
        let f = FeasibleNodes::from(&all);
        assert_eq!(names(f), ["a", "b", "c"]);
        assert_eq!(names(f.range(2, 3)), ["c"]);
        assert!(f.range(1, 1).is_empty());
        assert_eq!(f.iter().len(), 3);
    }

    #[test]
    #[should_panic(expected = "past the end")]
    fn a_position_past_the_end_is_refused() {
        let all = nodes(&["a"]);
        let _ = FeasibleNodes::at(&all, &[1]);
    }
}
