//! A node's images (`status.images`): every name with its size, for ImageLocality.
//!
//! Kubelets report tens of images with two or three names each, and the same names recur on
//! every node. A `HashMap<String, i64>` per node held each name again (~150 bytes an entry);
//! here names are interned [`Sym`]s in one sorted boxed slice (16 bytes an entry).

use std::fmt;

use k8s_openapi::api::core::v1 as k8s;

use super::symbol::Sym;

#[derive(Clone, Default, PartialEq, Eq)]
pub struct ImageSizes(Box<[(Sym, i64)]>);

impl ImageSizes {
    /// Every name in `status.images` with its image's size; when a name is listed twice the
    /// first listing wins.
    pub fn from_node(node: &k8s::Node) -> Self {
        let mut v: Vec<(Sym, i64)> = Vec::new();
        let images = node
            .status
            .as_ref()
            .and_then(|s| s.images.as_ref())
            .into_iter()
            .flatten();
        for img in images {
            for name in img.names.iter().flatten() {
                v.push((Sym::new(name), img.size_bytes.unwrap_or(0)));
            }
        }
        // Stable, so among equal names the first listed comes first and is kept.
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v.dedup_by(|later, first| later.0 == first.0);
        ImageSizes(v.into_boxed_slice())
    }

    fn position(&self, name: &str) -> Option<usize> {
        self.0.binary_search_by(|(n, _)| n.as_str().cmp(name)).ok()
    }

    /// Size in bytes of the image reported under `name`.
    pub fn get(&self, name: &str) -> Option<&i64> {
        self.position(name).map(|i| &self.0[i].1)
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.position(name).is_some()
    }

    /// Names in order.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.0.iter().map(|(n, _)| n.as_string())
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn clear(&mut self) {
        self.0 = Box::default();
    }
}

impl fmt::Debug for ImageSizes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(n, s)| (n.as_str(), s)))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(images: &[(&[&str], i64)]) -> k8s::Node {
        k8s::Node {
            status: Some(k8s::NodeStatus {
                images: Some(
                    images
                        .iter()
                        .map(|(names, size)| k8s::ContainerImage {
                            names: Some(names.iter().map(|n| n.to_string()).collect()),
                            size_bytes: Some(*size),
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn every_name_maps_to_its_size_and_the_first_listing_wins() {
        let imgs = ImageSizes::from_node(&node(&[
            (&["nginx:latest", "nginx@sha256:1"], 100),
            (&["pause:3.10"], 5),
            (&["nginx:latest"], 999),
        ]));
        assert_eq!(imgs.get("nginx:latest"), Some(&100));
        assert_eq!(imgs.get("nginx@sha256:1"), Some(&100));
        assert_eq!(imgs.get("pause:3.10"), Some(&5));
        assert_eq!(imgs.get("busybox:latest"), None);
        assert!(imgs.contains_key("pause:3.10"));
        assert_eq!(imgs.len(), 3);
        assert!(imgs.keys().map(String::as_str).eq([
            "nginx:latest",
            "nginx@sha256:1",
            "pause:3.10"
        ]));
        let mut c = imgs.clone();
        c.clear();
        assert!(c.is_empty());
        assert!(ImageSizes::from_node(&k8s::Node::default()).is_empty());
    }

    #[test]
    fn names_shared_between_nodes_are_one_string() {
        let a = ImageSizes::from_node(&node(&[(&["registry.k8s.io/pause:3.10"], 1)]));
        let b = ImageSizes::from_node(&node(&[(&["registry.k8s.io/pause:3.10"], 1)]));
        assert!(a.0[0].0.same(&b.0[0].0));
        assert_eq!(a, b);
    }
}
