//! Compact scheduling views of API objects, built once per object change.
//!
//! Plugins read these instead of the k8s-openapi types: quantities are parsed, selectors
//! compiled and pod requests aggregated up front, so a scheduling cycle does no parsing.

pub mod composite_pod_group;
pub mod declared_features;
pub mod dra;
pub mod images;
mod interner;
pub mod label_selector;
pub mod labels;
pub mod node;
pub mod node_selector;
pub mod node_summary;
pub mod pdb;
pub mod pod;
pub mod pod_affinity;
pub mod pod_group;
pub mod quantity;
pub mod rare;
pub mod resource;
pub mod runtime_class;
pub mod symbol;
pub mod taint;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod topology_spread;
pub mod volume;

pub use label_selector::LabelSelector;
pub use labels::{LabelSet, Labels};
pub use node::{HostPortInfo, NodeInfo, next_generation};
pub use node_selector::{
    FieldRequirement, LabelOperator, LabelRequirement, NodeSelector, NodeSelectorTerm,
    PreferredSchedulingTerm,
};
pub use node_summary::{NodeSummary, Room, SummaryRule};
pub use pdb::PdbInfo;
pub use pod::{
    DEFAULT_BIND_ALL_HOST_IP, DEFAULT_SCHEDULER_NAME, HostPort, PodInfo, PodKey, Protocol,
    normalized_image_name,
};
pub use pod_affinity::{AffinityTerm, PodAffinityTerms, WeightedAffinityTerm};
pub use quantity::{Quantity, QuantityError, parse_k8s_quantity, parse_quantity};
pub use resource::{
    CpuMemory, DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, RESOURCE_CPU,
    RESOURCE_EPHEMERAL_STORAGE, RESOURCE_MEMORY, RESOURCE_PODS, Resource, ResourceName,
    is_extended_resource_name, is_scalar_resource_name,
};
pub use runtime_class::RuntimeClassInfo;
pub use symbol::Sym;
pub use taint::{
    Taint, TaintEffect, Taints, Toleration, TolerationOperator, find_untolerated_taint,
    tolerations_tolerate_taint,
};
#[cfg(any(test, feature = "testing"))]
pub use testing::{NodeBuilder, PodBuilder};
pub use topology_spread::{
    NodeInclusionPolicy, PodSpreadInfo, SpreadConstraint, SpreadController, WhenUnsatisfiable,
    WorkloadKind,
};
pub use volume::{
    ClaimRef, CsiDriverInfo, CsiNodeInfo, CsiStorageCapacityInfo, DiskVolume, InTreeVolume,
    PodClaim, PodVolumeSources, PodVolumes, PvInfo, PvcInfo, StaticBinding, StorageClassInfo,
    VolumeAttachmentInfo, VolumeBindingMode, VolumeObjects,
};
