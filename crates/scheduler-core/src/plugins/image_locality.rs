//! ImageLocality: prefer nodes that already hold the pod's images, weighting each image by
//! how widely it has spread so pods do not pile onto the few nodes that pulled a big image
//! first.
//!
//! Upstream reads the per-image node counts through the framework handle. Here the Score
//! point only gets one node, so the framework records an [`ImageSpread`] (the snapshot's
//! shared image table and node total, one `Arc` clone per cycle) in the cycle state before
//! scoring; the plugin keeps implementing Score only, as the catalog says.

use crate::framework::Signing;
use crate::plugins::helper::sign;
use std::sync::Arc;

use crate::cache::ImageSpread;
use crate::framework::{
    CycleState, FeasibleNodes, FeasibleSummaries, MAX_NODE_SCORE, Plugin, PluginPoints,
    ScorePlugin, Status,
};
use crate::plugin_points;
use crate::types::{NodeInfo, PodInfo};

use super::names::IMAGE_LOCALITY;

const MB: i64 = 1024 * 1024;
/// Below this sum of scaled image sizes every node scores 0.
pub const MIN_THRESHOLD: i64 = 23 * MB;
/// Per container: at or above `MAX_CONTAINER_THRESHOLD * containers` a node scores 100.
pub const MAX_CONTAINER_THRESHOLD: i64 = 1000 * MB;

pub struct ImageLocality;

impl Plugin for ImageLocality {
    /// Signature for opportunistic batching (upstream `SignPod`).
    fn sign_pod(&self, pod: &PodInfo) -> Option<Signing> {
        sign::with(vec![(
            "v1.Pod.Spec.CanonicalImageNames()",
            format!("{:?} {}", pod.images, pod.num_containers),
        )])
    }
    fn name(&self) -> &'static str {
        IMAGE_LOCALITY
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => score)
    }
}

/// An image's size scaled by the fraction of nodes that have it, truncated like upstream's
/// float-to-int conversion.
fn scaled_image_score(size: i64, num_nodes: usize, total_nodes: usize) -> i64 {
    if total_nodes == 0 {
        return 0;
    }
    let spread = num_nodes as f64 / total_nodes as f64;
    (size as f64 * spread) as i64
}

/// Sum of the scaled sizes of the pod's images (init containers included) present on `node`.
pub fn sum_image_scores(pod: &PodInfo, node: &NodeInfo, spread: &ImageSpread) -> i64 {
    pod.images
        .iter()
        .filter_map(|image| {
            let size = *node.images.get(image)?;
            Some(scaled_image_score(
                size,
                spread.num_nodes(image),
                spread.total_nodes(),
            ))
        })
        .sum()
}

/// Maps the summed image scores linearly onto `0..=MAX_NODE_SCORE` between the thresholds.
pub fn calculate_priority(sum_scores: i64, num_containers: usize) -> i64 {
    let max_threshold = MAX_CONTAINER_THRESHOLD * num_containers as i64;
    let clamped = if sum_scores < MIN_THRESHOLD {
        MIN_THRESHOLD
    } else if sum_scores > max_threshold {
        max_threshold
    } else {
        sum_scores
    };
    MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) / (max_threshold - MIN_THRESHOLD)
}

fn image_spread(state: &CycleState) -> Result<&ImageSpread, Status> {
    state.read::<ImageSpread>().ok_or_else(|| {
        Status::error(format!(
            "{IMAGE_LOCALITY}: image spread of the snapshot missing from the cycle state"
        ))
    })
}

fn node_score(pod: &PodInfo, node: &NodeInfo, spread: &ImageSpread) -> i64 {
    calculate_priority(sum_image_scores(pod, node, spread), pod.num_containers)
}

impl ScorePlugin for ImageLocality {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        Ok(node_score(pod, node, image_spread(state)?))
    }

    fn score_nodes(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: FeasibleNodes<'_>,
        out: &mut [i64],
    ) -> Result<(), Status> {
        let spread = image_spread(state)?;
        for (slot, node) in out.iter_mut().zip(nodes) {
            *slot = node_score(pod, node, spread);
        }
        Ok(())
    }

    /// A node that reports no image holds none of the pod's: it scores as an empty sum,
    /// without being read.
    fn score_summarized(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: FeasibleNodes<'_>,
        summaries: FeasibleSummaries<'_>,
        out: &mut [i64],
    ) -> Result<(), Status> {
        let spread = image_spread(state)?;
        let imageless = calculate_priority(0, pod.num_containers);
        for ((slot, node), summary) in out.iter_mut().zip(nodes).zip(summaries) {
            *slot = if summary.has_images {
                node_score(pod, node, spread)
            } else {
                imageless
            };
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::Snapshot;
    use crate::framework::Code;

    const GB: i64 = 1024 * MB;

    /// Upstream's test images: 40/300/20 MB on node1, 250/10 MB and a 2 GB one on node2.
    fn upstream_nodes() -> Vec<NodeInfo> {
        vec![
            NodeInfo::test("node1")
                .image("gcr.io/40:latest", 40 * MB)
                .image("gcr.io/300:latest", 300 * MB)
                .image("gcr.io/20:latest", 20 * MB)
                .build(),
            NodeInfo::test("node2")
                .image("gcr.io/250:latest", 250 * MB)
                .image("gcr.io/10:latest", 10 * MB)
                .build(),
            NodeInfo::test("node3")
                .image("gcr.io/2000:latest", 2000 * MB)
                .image("gcr.io/10:latest", 10 * MB)
                .build(),
        ]
    }

    fn pod(images: &[&str]) -> PodInfo {
        images
            .iter()
            .fold(PodInfo::test("ns", "p"), |b, i| b.image(i))
            .build()
    }

    fn scores(pod: &PodInfo, nodes: Vec<NodeInfo>) -> Vec<i64> {
        let snap = Snapshot::from_node_infos(nodes);
        let mut state = CycleState::new();
        state.write(snap.image_spread());
        snap.node_infos()
            .iter()
            .map(|n| ImageLocality.score(&state, pod, n).unwrap())
            .collect()
    }

    #[test]
    fn scores_like_upstream() {
        // (name, images, want scores for node1..node3)
        let cases: Vec<(&str, Vec<&str>, Vec<i64>)> = vec![
            (
                // node1: 40MB * 1/3 = 13.3MB; node2: 250MB * 1/3 = 83.3MB -> (83.3-23)/(2000-23)
                "two images, one on each of two nodes",
                vec!["gcr.io/40", "gcr.io/250"],
                vec![0, 3, 0],
            ),
            (
                // node1: (40 + 300) / 3 = 113.3MB -> 100 * (113.3-23) / (2000-23) = 4
                "two images both on node1",
                vec!["gcr.io/40", "gcr.io/300"],
                vec![4, 0, 0],
            ),
            (
                // node3: 2000MB/3 = 666.7MB, one container: (666.7-23)/(1000-23) = 65
                "a big image, clamped by one container's threshold",
                vec!["gcr.io/2000"],
                vec![0, 0, 65],
            ),
            (
                // 10MB on two of three nodes: 6.7MB is below the minimum.
                "small image below the minimum",
                vec!["gcr.io/10"],
                vec![0, 0, 0],
            ),
            (
                // 300MB / 3 = 100MB, one container: (100-23)/(1000-23) = 7
                "tag defaults to latest",
                vec!["gcr.io/300"],
                vec![7, 0, 0],
            ),
            (
                "other tag does not match",
                vec!["gcr.io/300:v1"],
                vec![0, 0, 0],
            ),
        ];
        for (name, images, want) in cases {
            assert_eq!(scores(&pod(&images), upstream_nodes()), want, "{name}");
        }
    }

    #[test]
    fn spread_scales_the_size() {
        // The same 3 GB image on 1, 2, 5 and 10 of 10 nodes: the more it has spread, the more
        // it counts on the nodes that have it.
        for (on, want) in [(1usize, 29i64), (2, 60), (5, 100), (10, 100)] {
            let nodes: Vec<NodeInfo> = (0..10)
                .map(|i| {
                    let b = NodeInfo::test(&format!("n{i}"));
                    if i < on {
                        b.image("big:latest", 3 * GB).build()
                    } else {
                        b.build()
                    }
                })
                .collect();
            let got = scores(&pod(&["big"]), nodes);
            assert_eq!(got[0], want, "on {on} nodes");
            assert_eq!(got[9], if on == 10 { want } else { 0 }, "on {on} nodes");
        }
    }

    #[test]
    fn more_containers_raise_the_ceiling() {
        // 1.5 GB everywhere: one container saturates, two containers (one image missing) do not.
        let nodes = || {
            vec![
                NodeInfo::test("a").image("big:latest", 1536 * MB).build(),
                NodeInfo::test("b").image("big:latest", 1536 * MB).build(),
            ]
        };
        assert_eq!(scores(&pod(&["big"]), nodes()), vec![100, 100]);
        // (1536 - 23) * 100 / (2000 - 23) = 76
        assert_eq!(scores(&pod(&["big", "absent"]), nodes()), vec![76, 76]);
        // Init container images count too, and so does the init container itself.
        let with_init = PodInfo::test("ns", "p")
            .image("absent")
            .edit(|p| {
                p.spec.as_mut().unwrap().init_containers =
                    Some(vec![k8s_openapi::api::core::v1::Container {
                        name: "init".into(),
                        image: Some("big".into()),
                        ..Default::default()
                    }])
            })
            .build();
        assert_eq!(with_init.num_containers, 2);
        assert_eq!(scores(&with_init, nodes()), vec![76, 76]);
    }

    #[test]
    fn priority_mapping() {
        assert_eq!(calculate_priority(0, 1), 0);
        assert_eq!(calculate_priority(MIN_THRESHOLD, 1), 0);
        assert_eq!(calculate_priority(MAX_CONTAINER_THRESHOLD, 1), 100);
        assert_eq!(calculate_priority(10 * GB, 1), 100);
        assert_eq!(
            calculate_priority(500 * MB, 1),
            100 * (477 * MB) / (977 * MB)
        );
        assert_eq!(
            calculate_priority(500 * MB, 2),
            100 * (477 * MB) / (1977 * MB)
        );
        // No containers at all (never valid in the API) must not divide by zero.
        assert_eq!(calculate_priority(0, 0), 0);
    }

    #[test]
    fn missing_spread_is_an_error() {
        let node = NodeInfo::test("n").build();
        let err = ImageLocality
            .score(&CycleState::new(), &pod(&["x"]), &node)
            .unwrap_err();
        assert_eq!(err.code(), Code::Error);
    }
}
