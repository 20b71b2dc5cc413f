//! The incremental cluster cache fed by watch events, and the per-cycle snapshot.
//!
//! The cache owns one `Arc<NodeInfo>` per node and mutates it with `Arc::make_mut`: while a
//! snapshot still shares a node the first change copies it once, otherwise it is edited in
//! place. Taking a snapshot then only swaps the `Arc`s of nodes whose generation is newer than
//! the snapshot, found through a generation-ordered index instead of walking every node.

// The file layout (cache/cache.rs) was agreed with the other crates' authors.
#[allow(clippy::module_inception)]
mod cache;
mod node_tree;
mod snapshot;
pub mod workload_selectors;

pub use cache::{Cache, CacheDump, CacheError, SnapshotUpdate};
pub use node_tree::{zone_key, zone_key_of};
pub use snapshot::{ImageSpread, Snapshot};
pub use workload_selectors::{WorkloadEntry, WorkloadSelector, WorkloadSelectors};
