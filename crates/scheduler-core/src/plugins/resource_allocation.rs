//! Shared resource scorer behind NodeResourcesFit and NodeResourcesBalancedAllocation
//! (upstream `noderesources/resource_allocation.go` plus the per-strategy scorers in
//! `least_allocated.go`, `most_allocated.go`, `requested_to_capacity_ratio.go`,
//! `balanced_allocation.go` and `helper/shape_score.go`).
//!
//! Everything that depends only on the configuration (resource kinds, weights, the scaled
//! shape) is resolved once when the plugin is built; everything that depends only on the
//! pod is computed once per cycle in PreScore ([`ResourceAllocationScorer::pod_requests`]);
//! [`ResourceAllocationScorer::score`] then runs per node without allocating.

use crate::config::{ResourceSpec, UtilizationShapePoint};
use crate::framework::{FeasibleNodes, FeasibleSummaries, MAX_NODE_SCORE, Status};

use crate::types::{
    NodeInfo, NodeSummary, PodInfo, RESOURCE_CPU, RESOURCE_EPHEMERAL_STORAGE, RESOURCE_MEMORY,
    RESOURCE_PODS, ResourceName, is_scalar_resource_name,
};

/// What the scorer reads of a node: each resource's allocatable and requested amounts.
pub trait ScoredNode {
    /// (allocatable, requested, non-zero requested) milli-CPU.
    fn cpu(&self) -> (i64, i64, i64);
    /// (allocatable, requested, non-zero requested) memory.
    fn memory(&self) -> (i64, i64, i64);
    /// (allocatable, requested) ephemeral storage.
    fn ephemeral_storage(&self) -> (i64, i64);
    /// (allocatable, requested) of a scalar resource.
    fn scalar(&self, name: &str) -> (i64, i64);
}

impl ScoredNode for NodeInfo {
    fn cpu(&self) -> (i64, i64, i64) {
        (
            self.allocatable.milli_cpu,
            self.requested.milli_cpu,
            self.non_zero_requested.milli_cpu,
        )
    }
    fn memory(&self) -> (i64, i64, i64) {
        (
            self.allocatable.memory,
            self.requested.memory,
            self.non_zero_requested.memory,
        )
    }
    fn ephemeral_storage(&self) -> (i64, i64) {
        (
            self.allocatable.ephemeral_storage,
            self.requested.ephemeral_storage,
        )
    }
    fn scalar(&self, name: &str) -> (i64, i64) {
        match self.allocatable.scalar_value(name) {
            0 => (0, 0),
            alloc => (alloc, self.requested.scalar_value(name)),
        }
    }
}

/// Scalar resources are not in a summary: the scorer reads summaries only when it scores
/// none ([`ResourceAllocationScorer::reads_scalars`]), and never calls `scalar` then.
impl ScoredNode for NodeSummary {
    fn cpu(&self) -> (i64, i64, i64) {
        (
            self.allocatable_milli_cpu,
            self.requested_milli_cpu,
            self.non_zero_milli_cpu,
        )
    }
    fn memory(&self) -> (i64, i64, i64) {
        (
            self.allocatable_memory,
            self.requested_memory,
            self.non_zero_memory,
        )
    }
    fn ephemeral_storage(&self) -> (i64, i64) {
        (
            self.allocatable_ephemeral_storage,
            self.requested_ephemeral_storage,
        )
    }
    fn scalar(&self, _name: &str) -> (i64, i64) {
        (0, 0)
    }
}

/// Highest score a `requestedToCapacityRatio` shape point may give (upstream
/// `MaxCustomPriorityScore`); shape scores are scaled by `MAX_NODE_SCORE / this`.
pub const MAX_CUSTOM_PRIORITY_SCORE: i64 = 10;

/// Utilization, in percent, at which a resource counts as full.
pub const MAX_UTILIZATION: i64 = 100;

/// Error returned by Score when the plugin was configured without resources.
pub const RESOURCES_NOT_FOUND: &str = "resources not found";

/// How one configured resource is read from pods and nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Cpu,
    Memory,
    EphemeralStorage,
    /// Tracked in `Resource::scalar` (extended resources, hugepages, ...).
    Scalar(ResourceName),
    /// `pods`: pods may (oddly) request it, but nodes never list it as a scalar.
    Pods,
    /// Any other name: upstream's node view never carries it, so it is never scored.
    Untracked,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct ScoredResource {
    kind: Kind,
    weight: i64,
}

/// The scoring formula, chosen by the plugin's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Strategy {
    LeastAllocated,
    MostAllocated,
    /// Shape points with scores already scaled to `0..=MAX_NODE_SCORE`.
    RequestedToCapacityRatio(Vec<ShapePoint>),
    /// NodeResourcesBalancedAllocation's standard-deviation score (weights unused).
    Balanced,
}

/// One point of a piecewise-linear scoring function (upstream `FunctionShapePoint`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShapePoint {
    pub utilization: i64,
    pub score: i64,
}

impl Strategy {
    /// RequestedToCapacityRatio with the configured shape, whose scores (0..=10) are scaled
    /// to the framework's score range.
    pub fn requested_to_capacity_ratio(shape: &[UtilizationShapePoint]) -> Result<Self, String> {
        if shape.is_empty() {
            return Err("requestedToCapacityRatio needs at least one shape point".to_string());
        }
        let factor = MAX_NODE_SCORE / MAX_CUSTOM_PRIORITY_SCORE;
        Ok(Strategy::RequestedToCapacityRatio(
            shape
                .iter()
                .map(|p| ShapePoint {
                    utilization: i64::from(p.utilization),
                    score: i64::from(p.score) * factor,
                })
                .collect(),
        ))
    }
}

/// Scores a node from the pod's requests and the node's allocatable and requested amounts of
/// the configured resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceAllocationScorer {
    resources: Vec<ScoredResource>,
    /// `true`: cpu and memory use the real requests (BalancedAllocation); `false`: the
    /// non-zero requests, where a container without a request counts 100m / 200Mi (Fit).
    use_requested: bool,
    strategy: Strategy,
}

impl ResourceAllocationScorer {
    pub fn new(resources: &[ResourceSpec], use_requested: bool, strategy: Strategy) -> Self {
        let resources = resources
            .iter()
            .map(|r| ScoredResource {
                kind: match r.name.as_str() {
                    RESOURCE_CPU => Kind::Cpu,
                    RESOURCE_MEMORY => Kind::Memory,
                    RESOURCE_EPHEMERAL_STORAGE => Kind::EphemeralStorage,
                    RESOURCE_PODS => Kind::Pods,
                    n if is_scalar_resource_name(n) => Kind::Scalar(ResourceName::from(n)),
                    _ => Kind::Untracked,
                },
                weight: r.weight,
            })
            .collect();
        ResourceAllocationScorer {
            resources,
            use_requested,
            strategy,
        }
    }

    pub fn strategy(&self) -> &Strategy {
        &self.strategy
    }

    /// How many resources it scores (the length of [`Self::pod_requests`]).
    pub fn pod_requests_len(&self) -> usize {
        self.resources.len()
    }

    /// The pod's request of each configured resource, in configuration order (upstream
    /// `calculatePodResourceRequestList`). Computed once per cycle.
    pub fn pod_requests(&self, pod: &PodInfo) -> Vec<i64> {
        self.resources
            .iter()
            .map(|r| match &r.kind {
                Kind::Cpu if self.use_requested => pod.requests.milli_cpu,
                Kind::Cpu => pod.non_zero_requests.milli_cpu,
                Kind::Memory if self.use_requested => pod.requests.memory,
                Kind::Memory => pod.non_zero_requests.memory,
                Kind::EphemeralStorage => pod.requests.ephemeral_storage,
                Kind::Scalar(name) => pod.requests.scalar_value(name),
                Kind::Pods => pod.requests.allowed_pod_number,
                Kind::Untracked => 0,
            })
            .collect()
    }

    /// Upstream `isBestEffortPod`: the pod requests none of the configured resources.
    pub fn is_best_effort(pod_requests: &[i64]) -> bool {
        pod_requests.iter().all(|&r| r == 0)
    }

    /// (allocatable, requested-including-the-pod) of resource `r` on `node`; an allocatable
    /// of 0 means "leave this resource out of the score" (upstream
    /// `calculateResourceAllocatableRequest`).
    #[inline]
    fn allocatable_requested<N: ScoredNode + ?Sized>(
        &self,
        r: &ScoredResource,
        pod_request: i64,
        node: &N,
    ) -> (i64, i64) {
        let pick = |(alloc, requested, non_zero): (i64, i64, i64)| {
            let used = if self.use_requested {
                requested
            } else {
                non_zero
            };
            (alloc, used.wrapping_add(pod_request))
        };
        match &r.kind {
            Kind::Cpu => pick(node.cpu()),
            Kind::Memory => pick(node.memory()),
            // Ephemeral storage has no non-zero default: always the real requests.
            Kind::EphemeralStorage => {
                let (alloc, requested) = node.ephemeral_storage();
                (alloc, requested.wrapping_add(pod_request))
            }
            // A scalar resource the pod does not request is not scored at all, so nodes
            // with and without it compare equally.
            Kind::Scalar(_) if pod_request == 0 => (0, 0),
            Kind::Scalar(name) => match node.scalar(name) {
                (0, _) => (0, 0),
                (alloc, requested) => (alloc, requested.wrapping_add(pod_request)),
            },
            Kind::Pods | Kind::Untracked => (0, 0),
        }
    }

    /// The configured scalar resources the pod requests (by [`Self::pod_requests`]).
    pub fn requested_scalars<'a>(
        &'a self,
        pod_requests: &'a [i64],
    ) -> impl Iterator<Item = &'a ResourceName> + 'a {
        self.resources
            .iter()
            .zip(pod_requests)
            .filter_map(|(r, &q)| match &r.kind {
                Kind::Scalar(name) if q != 0 => Some(name),
                _ => None,
            })
    }

    /// Whether scoring reads a scalar resource of the node: one the pod requests among the
    /// configured ones. Otherwise a node's [`NodeSummary`] has all the scorer reads.
    pub fn reads_scalars(&self, pod_requests: &[i64]) -> bool {
        self.resources
            .iter()
            .zip(pod_requests)
            .any(|(r, &q)| matches!(r.kind, Kind::Scalar(_)) && q != 0)
    }

    /// [`score_nodes`](Self::score_nodes) of `nodes`, reading their `summaries` (same
    /// order) instead when nothing scalar is scored.
    pub fn score_summarized(
        &self,
        pod_requests: &[i64],
        nodes: FeasibleNodes<'_>,
        summaries: FeasibleSummaries<'_>,
        out: &mut [i64],
    ) -> Result<(), Status> {
        if self.reads_scalars(pod_requests) {
            self.score_nodes(pod_requests, nodes.iter(), out)
        } else {
            self.score_summaries(pod_requests, summaries, out)
        }
    }

    /// [`score_nodes`](Self::score_nodes) of `summaries` (nothing scalar scored), with the
    /// resources resolved once for the run: each scored resource becomes its position in
    /// a summary's (cpu, memory, ephemeral storage) amounts, so a node is scored from a
    /// fixed-size array, without matching resource kinds per node.
    fn score_summaries(
        &self,
        pod_requests: &[i64],
        summaries: FeasibleSummaries<'_>,
        out: &mut [i64],
    ) -> Result<(), Status> {
        if self.resources.is_empty() {
            return Err(Status::error(RESOURCES_NOT_FOUND));
        }
        // (position, weight, the pod's request); scalar resources are not requested here
        // (so not scored), and pods or untracked names are never scored.
        let plan: Vec<(usize, i64, i64)> = (self.resources.iter().zip(pod_requests))
            .filter_map(|(r, &q)| {
                let at = match r.kind {
                    Kind::Cpu => 0,
                    Kind::Memory => 1,
                    Kind::EphemeralStorage => 2,
                    Kind::Scalar(_) | Kind::Pods | Kind::Untracked => return None,
                };
                Some((at, r.weight, q))
            })
            .collect();
        match *plan.as_slice() {
            [] => self.score_planned([], summaries, out),
            [a] => self.score_planned([a], summaries, out),
            [a, b] => self.score_planned([a, b], summaries, out),
            [a, b, c] => self.score_planned([a, b, c], summaries, out),
            _ => return self.score_nodes(pod_requests, summaries, out),
        }
        Ok(())
    }

    fn score_planned<const N: usize>(
        &self,
        plan: [(usize, i64, i64); N],
        summaries: FeasibleSummaries<'_>,
        out: &mut [i64],
    ) {
        let use_requested = self.use_requested;
        let present = move |s: &NodeSummary| {
            let alloc = [
                s.allocatable_milli_cpu,
                s.allocatable_memory,
                s.allocatable_ephemeral_storage,
            ];
            // Ephemeral storage has no non-zero default: always the real requests.
            let used = if use_requested {
                [
                    s.requested_milli_cpu,
                    s.requested_memory,
                    s.requested_ephemeral_storage,
                ]
            } else {
                [
                    s.non_zero_milli_cpu,
                    s.non_zero_memory,
                    s.requested_ephemeral_storage,
                ]
            };
            plan.map(|(at, w, q)| (w, used[at].wrapping_add(q), alloc[at]))
                .into_iter()
                .filter(|&(_, _, alloc)| alloc != 0)
        };
        self.fill_strategy(out.iter_mut().zip(summaries), present);
    }

    /// Scores `node` for a pod whose [`pod_requests`](Self::pod_requests) are given.
    pub fn score(&self, pod_requests: &[i64], node: &NodeInfo) -> Result<i64, Status> {
        let mut out = [0];
        self.score_nodes(pod_requests, [node], &mut out)?;
        Ok(out[0])
    }

    /// [`score`](Self::score) of each of `nodes` into `out`, the strategy chosen once.
    /// `N` is [`NodeInfo`], or [`NodeSummary`] when [`Self::reads_scalars`] is false.
    pub fn score_nodes<'a, N: ScoredNode + 'a>(
        &self,
        pod_requests: &[i64],
        nodes: impl IntoIterator<Item = &'a N>,
        out: &mut [i64],
    ) -> Result<(), Status> {
        if self.resources.is_empty() {
            return Err(Status::error(RESOURCES_NOT_FOUND));
        }
        // (weight, requested, allocatable) of every resource the node has; an iterator, so
        // scoring never allocates and Balanced can walk it twice.
        let present = |node: &'a N| {
            self.resources
                .iter()
                .zip(pod_requests)
                .filter_map(move |(r, &pod_request)| {
                    let (alloc, req) = self.allocatable_requested(r, pod_request, node);
                    (alloc != 0).then_some((r.weight, req, alloc))
                })
        };
        self.fill_strategy(out.iter_mut().zip(nodes), present);
        Ok(())
    }

    /// Writes each node's score by the strategy into its slot, from `present(node)`: the
    /// (weight, requested, allocatable) of every scored resource the node has (the strategy
    /// is matched once per call, not once per node).
    fn fill_strategy<'s, 'a, N: 'a, I>(
        &self,
        nodes: impl Iterator<Item = (&'s mut i64, &'a N)>,
        present: impl Fn(&'a N) -> I,
    ) where
        I: Iterator<Item = (i64, i64, i64)>,
    {
        match &self.strategy {
            Strategy::LeastAllocated => fill(nodes, |node| {
                weighted_floor(
                    present(node).map(|(w, req, alloc)| (w, least_requested_score(req, alloc))),
                )
            }),
            Strategy::MostAllocated => fill(nodes, |node| {
                weighted_floor(
                    present(node).map(|(w, req, alloc)| (w, most_requested_score(req, alloc))),
                )
            }),
            Strategy::RequestedToCapacityRatio(shape) => fill(nodes, |node| {
                let (mut sum, mut weights) = (0i64, 0i64);
                for (w, req, alloc) in present(node) {
                    let s = utilization_score(shape, req, alloc);
                    // Resources scoring 0 do not count, not even in the weight sum.
                    if s > 0 {
                        sum = sum.wrapping_add(s.wrapping_mul(w));
                        weights = weights.wrapping_add(w);
                    }
                }
                if weights == 0 {
                    0
                } else {
                    (sum as f64 / weights as f64).round() as i64
                }
            }),
            Strategy::Balanced => fill(nodes, |node| {
                balanced_score(|| present(node).map(|(_, req, alloc)| (req, alloc)))
            }),
        }
    }
}

/// Per extended resource backed by DRA: node name -> (devices, allocated devices).
pub type DraDevices = Vec<(ResourceName, std::collections::HashMap<String, (i64, i64)>)>;

/// A node whose extended resources backed by DRA count as allocatable: for a resource the
/// node does not advertise, the devices of its DeviceClass the node reaches, and those of
/// them allocated as requested (see `dynamic_resources::extended_score`).
pub struct WithDraDevices<'a> {
    pub node: &'a NodeInfo,
    /// Resource -> node name -> (devices, allocated devices).
    pub devices: &'a DraDevices,
}

impl ScoredNode for WithDraDevices<'_> {
    fn cpu(&self) -> (i64, i64, i64) {
        self.node.cpu()
    }
    fn memory(&self) -> (i64, i64, i64) {
        self.node.memory()
    }
    fn ephemeral_storage(&self) -> (i64, i64) {
        self.node.ephemeral_storage()
    }
    fn scalar(&self, name: &str) -> (i64, i64) {
        let own = self.node.scalar(name);
        if own.0 != 0 {
            return own;
        }
        self.devices
            .iter()
            .find(|(r, _)| &**r == name)
            .and_then(|(_, by_node)| by_node.get(&self.node.name))
            .copied()
            .unwrap_or(own)
    }
}

/// Writes `score` of each node into its slot (a loop per strategy, so the strategy is
/// matched once per call, not once per node).
fn fill<'s, 'a, N: 'a>(
    slots: impl Iterator<Item = (&'s mut i64, &'a N)>,
    score: impl Fn(&'a N) -> i64,
) {
    for (slot, node) in slots {
        *slot = score(node);
    }
}

/// Σ(score·weight) / Σweight with integer division; 0 when nothing was scored.
fn weighted_floor(scores: impl Iterator<Item = (i64, i64)>) -> i64 {
    let (mut sum, mut weights) = (0i64, 0i64);
    for (w, s) in scores {
        sum = sum.wrapping_add(s.wrapping_mul(w));
        weights = weights.wrapping_add(w);
    }
    if weights == 0 { 0 } else { sum / weights }
}

/// Share of the resource left free, on `0..=MAX_NODE_SCORE`; 0 when over-committed.
pub fn least_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    capacity
        .wrapping_sub(requested)
        .wrapping_mul(MAX_NODE_SCORE)
        / capacity
}

/// Share of the resource in use, on `0..=MAX_NODE_SCORE`; over-commitment (possible because
/// of the non-zero defaults) counts as full.
pub fn most_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 {
        return 0;
    }
    requested.min(capacity).wrapping_mul(MAX_NODE_SCORE) / capacity
}

/// The shape's value at this resource's utilization percentage (full when over-committed).
fn utilization_score(shape: &[ShapePoint], requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return broken_linear(shape, MAX_UTILIZATION);
    }
    broken_linear(shape, requested.wrapping_mul(MAX_UTILIZATION) / capacity)
}

/// Piecewise-linear function through `shape` (sorted by utilization), constant before the
/// first and after the last point, interpolated with integer arithmetic (truncating towards
/// zero) in between (upstream `BuildBrokenLinearFunction`).
pub fn broken_linear(shape: &[ShapePoint], p: i64) -> i64 {
    for (i, pt) in shape.iter().enumerate() {
        if p <= pt.utilization {
            if i == 0 {
                return pt.score;
            }
            let prev = shape[i - 1];
            return prev.score
                + (pt.score - prev.score) * (p - prev.utilization)
                    / (pt.utilization - prev.utilization);
        }
    }
    shape.last().map_or(0, |pt| pt.score)
}

/// `(1 - std) * MAX_NODE_SCORE`, truncated, where `std` is the standard deviation of the
/// requested/allocatable fractions (each capped at 1). With two resources the deviation is
/// simply half their difference, as upstream computes it.
fn balanced_score<I: Iterator<Item = (i64, i64)>>(pairs: impl Fn() -> I) -> i64 {
    let fraction = |(req, alloc): (i64, i64)| (req as f64 / alloc as f64).min(1.0);
    let (mut count, mut total, mut first, mut second) = (0usize, 0.0f64, 0.0f64, 0.0f64);
    for f in pairs().map(fraction) {
        match count {
            0 => first = f,
            1 => second = f,
            _ => {}
        }
        total += f;
        count += 1;
    }
    let std = match count {
        0 | 1 => 0.0,
        2 => ((first - second) / 2.0).abs(),
        n => {
            let mean = total / n as f64;
            let mut sum = 0.0f64;
            for f in pairs().map(fraction) {
                sum += (f - mean) * (f - mean);
            }
            (sum / n as f64).sqrt()
        }
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(points: &[(i64, i64)]) -> Vec<ShapePoint> {
        points
            .iter()
            .map(|&(utilization, score)| ShapePoint { utilization, score })
            .collect()
    }

    #[test]
    fn broken_linear_function_like_upstream() {
        // (shape, [(p, expected)]), upstream's TestBrokenLinearFunction cases.
        type Case = (Vec<ShapePoint>, Vec<(i64, i64)>);
        let cases: Vec<Case> = vec![
            (
                shape(&[(10, 1), (90, 9)]),
                vec![
                    (-10, 1),
                    (0, 1),
                    (9, 1),
                    (10, 1),
                    (15, 1),
                    (19, 1),
                    (20, 2),
                    (89, 8),
                    (90, 9),
                    (99, 9),
                    (100, 9),
                    (110, 9),
                ],
            ),
            (
                shape(&[(0, 2), (40, 10), (100, 0)]),
                vec![
                    (-10, 2),
                    (0, 2),
                    (20, 6),
                    (30, 8),
                    (40, 10),
                    (70, 5),
                    (100, 0),
                    (110, 0),
                ],
            ),
            (
                shape(&[(0, 2), (40, 2), (100, 2)]),
                vec![
                    (-10, 2),
                    (0, 2),
                    (20, 2),
                    (40, 2),
                    (70, 2),
                    (100, 2),
                    (110, 2),
                ],
            ),
            // Decreasing segment: Go and Rust both truncate towards zero.
            (
                shape(&[(0, 100), (100, 0)]),
                vec![(1, 99), (75, 25), (99, 1)],
            ),
            (shape(&[(0, 0), (30, 100)]), vec![(1, 3), (29, 96)]),
            (shape(&[(0, 10), (3, 0)]), vec![(1, 7), (2, 4)]),
        ];
        for (i, (s, asserts)) in cases.iter().enumerate() {
            for &(p, want) in asserts {
                assert_eq!(broken_linear(s, p), want, "case {i}, p={p}");
            }
        }
    }

    #[test]
    fn shape_scores_are_scaled_to_max_node_score() {
        let s = Strategy::requested_to_capacity_ratio(&[
            UtilizationShapePoint {
                utilization: 0,
                score: 0,
            },
            UtilizationShapePoint {
                utilization: 100,
                score: 10,
            },
        ])
        .unwrap();
        assert_eq!(
            s,
            Strategy::RequestedToCapacityRatio(shape(&[(0, 0), (100, 100)]))
        );
        assert!(Strategy::requested_to_capacity_ratio(&[]).is_err());
    }

    #[test]
    fn per_resource_scores() {
        assert_eq!(least_requested_score(3000, 4000), 25);
        assert_eq!(least_requested_score(0, 4000), 100);
        assert_eq!(least_requested_score(5000, 4000), 0);
        assert_eq!(least_requested_score(1, 0), 0);
        assert_eq!(most_requested_score(3000, 4000), 75);
        assert_eq!(most_requested_score(5000, 4000), 100);
        assert_eq!(most_requested_score(1, 0), 0);
    }

    #[test]
    fn balanced_std_formula() {
        let two = [(3000, 4000), (5000, 10000)];
        assert_eq!(balanced_score(|| two.iter().copied()), 87);
        // Three fractions use the full standard deviation: 6/7, 1/8, 1/2 -> 70.
        let three = [(3000, 3500), (5000, 40000), (4, 8)];
        assert_eq!(balanced_score(|| three.iter().copied()), 70);
        // Over-committed fractions are capped at 1.
        let capped = [(8000, 4000), (2000, 4000)];
        assert_eq!(balanced_score(|| capped.iter().copied()), 75);
        let one = [(1, 4)];
        assert_eq!(balanced_score(|| one.iter().copied()), 100);
        assert_eq!(balanced_score(std::iter::empty), 100);
    }
}
