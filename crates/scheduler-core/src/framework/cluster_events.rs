//! Cluster events and which plugins care about them (upstream: `framework/types.go`,
//! `framework/events.go`). The scheduling queue uses them to decide which unschedulable
//! pods an informer event may help.

use std::collections::BTreeSet;
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::ops::{BitAnd, BitOr, BitOrAssign};

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::api::storage::v1 as storage;

use crate::types::PodInfo;
use crate::types::quantity::parse_k8s_quantity;

/// The kind of object an event is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventResource {
    /// Any pod: as a registration it matches both [`AssignedPod`](Self::AssignedPod) and
    /// [`UnscheduledPod`](Self::UnscheduledPod) events.
    Pod,
    /// A pod bound to a node (incoming events only).
    AssignedPod,
    /// A pod not bound yet (incoming events only).
    UnscheduledPod,
    Node,
    RuntimeClass,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    CSINode,
    CSIDriver,
    CSIStorageCapacity,
    VolumeAttachment,
    PodDisruptionBudget,
    Namespace,
    Service,
    ResourceClaim,
    ResourceSlice,
    DeviceClass,
    /// ferrosched's SchedulingPolicy objects, or which of them a service account may use
    /// (fired by the controller; upstream has no such resource).
    SchedulingPolicy,
    /// PodGroups of either API (`types::pod_group`).
    PodGroup,
    /// Every resource.
    WildCard,
}

impl EventResource {
    /// Whether a registration for `self` covers an incoming event about `incoming`.
    pub fn matches(self, incoming: EventResource) -> bool {
        self == EventResource::WildCard
            || self == incoming
            || (self == EventResource::Pod
                && matches!(
                    incoming,
                    EventResource::AssignedPod | EventResource::UnscheduledPod
                ))
    }
}

/// What happened to the object: a bit set, so a registration can name several actions.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ActionType(u32);

impl ActionType {
    pub const NONE: ActionType = ActionType(0);
    pub const ADD: ActionType = ActionType(1 << 0);
    pub const DELETE: ActionType = ActionType(1 << 1);
    pub const UPDATE_NODE_ALLOCATABLE: ActionType = ActionType(1 << 2);
    pub const UPDATE_NODE_LABEL: ActionType = ActionType(1 << 3);
    /// Taints changed, or `spec.unschedulable` (which acts as a taint) changed.
    pub const UPDATE_NODE_TAINT: ActionType = ActionType(1 << 4);
    pub const UPDATE_NODE_CONDITION: ActionType = ActionType(1 << 5);
    pub const UPDATE_NODE_ANNOTATION: ActionType = ActionType(1 << 6);
    pub const UPDATE_POD_LABEL: ActionType = ActionType(1 << 7);
    /// A request of the pod was lowered or removed.
    pub const UPDATE_POD_SCALE_DOWN: ActionType = ActionType(1 << 8);
    pub const UPDATE_POD_TOLERATION: ActionType = ActionType(1 << 9);
    /// The last scheduling gate was removed.
    pub const UPDATE_POD_SCHEDULING_GATES_ELIMINATED: ActionType = ActionType(1 << 10);
    pub const UPDATE_POD_GENERATED_RESOURCE_CLAIM: ActionType = ActionType(1 << 11);
    /// An update none of the specific kinds above describes (other objects' updates, or a
    /// pod change nothing but a general `Update` registration cares about).
    pub const UPDATE_OTHER: ActionType = ActionType(1 << 12);
    /// `status.declaredFeatures` changed (NodeDeclaredFeatures, 1.35+).
    pub const UPDATE_NODE_DECLARED_FEATURE: ActionType = ActionType(1 << 13);
    /// Any kind of update.
    pub const UPDATE: ActionType = ActionType(
        Self::UPDATE_NODE_ALLOCATABLE.0
            | Self::UPDATE_NODE_LABEL.0
            | Self::UPDATE_NODE_TAINT.0
            | Self::UPDATE_NODE_CONDITION.0
            | Self::UPDATE_NODE_ANNOTATION.0
            | Self::UPDATE_NODE_DECLARED_FEATURE.0
            | Self::UPDATE_POD_LABEL.0
            | Self::UPDATE_POD_SCALE_DOWN.0
            | Self::UPDATE_POD_TOLERATION.0
            | Self::UPDATE_POD_SCHEDULING_GATES_ELIMINATED.0
            | Self::UPDATE_POD_GENERATED_RESOURCE_CLAIM.0
            | Self::UPDATE_OTHER.0,
    );
    pub const ALL: ActionType = ActionType(Self::ADD.0 | Self::DELETE.0 | Self::UPDATE.0);

    pub fn bits(self) -> u32 {
        self.0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether the two sets share an action.
    pub fn intersects(self, other: ActionType) -> bool {
        self.0 & other.0 != 0
    }

    pub fn contains(self, other: ActionType) -> bool {
        self.0 & other.0 == other.0
    }

    const NAMES: [(ActionType, &'static str); 14] = [
        (Self::ADD, "Add"),
        (Self::DELETE, "Delete"),
        (Self::UPDATE_NODE_ALLOCATABLE, "UpdateNodeAllocatable"),
        (Self::UPDATE_NODE_LABEL, "UpdateNodeLabel"),
        (Self::UPDATE_NODE_TAINT, "UpdateNodeTaint"),
        (Self::UPDATE_NODE_CONDITION, "UpdateNodeCondition"),
        (Self::UPDATE_NODE_ANNOTATION, "UpdateNodeAnnotation"),
        (
            Self::UPDATE_NODE_DECLARED_FEATURE,
            "UpdateNodeDeclaredFeature",
        ),
        (Self::UPDATE_POD_LABEL, "UpdatePodLabel"),
        (Self::UPDATE_POD_SCALE_DOWN, "UpdatePodScaleDown"),
        (Self::UPDATE_POD_TOLERATION, "UpdatePodToleration"),
        (
            Self::UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
            "UpdatePodSchedulingGatesEliminated",
        ),
        (
            Self::UPDATE_POD_GENERATED_RESOURCE_CLAIM,
            "UpdatePodGeneratedResourceClaim",
        ),
        (Self::UPDATE_OTHER, "Update"),
    ];
}

impl BitOr for ActionType {
    type Output = ActionType;
    fn bitor(self, rhs: ActionType) -> ActionType {
        ActionType(self.0 | rhs.0)
    }
}

impl BitOrAssign for ActionType {
    fn bitor_assign(&mut self, rhs: ActionType) {
        self.0 |= rhs.0;
    }
}

impl BitAnd for ActionType {
    type Output = ActionType;
    fn bitand(self, rhs: ActionType) -> ActionType {
        ActionType(self.0 & rhs.0)
    }
}

impl fmt::Debug for ActionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for ActionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ActionType::ALL => return f.write_str("All"),
            ActionType::UPDATE => return f.write_str("Update"),
            ActionType::NONE => return f.write_str("None"),
            _ => {}
        }
        let mut first = true;
        for (a, name) in ActionType::NAMES {
            if self.intersects(a) {
                if !first {
                    f.write_str("|")?;
                }
                first = false;
                f.write_str(name)?;
            }
        }
        Ok(())
    }
}

/// Something that happened in the cluster, or a registration for such events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClusterEvent {
    pub resource: EventResource,
    pub action: ActionType,
}

impl ClusterEvent {
    pub const fn new(resource: EventResource, action: ActionType) -> Self {
        ClusterEvent { resource, action }
    }

    /// Pods that waited in the unschedulable pool longer than the limit (a wildcard: moves
    /// every pod, whatever rejected it).
    pub const UNSCHEDULABLE_TIMEOUT: ClusterEvent =
        ClusterEvent::new(EventResource::WildCard, ActionType::ALL);

    pub fn is_wildcard(&self) -> bool {
        self.resource == EventResource::WildCard && self.action == ActionType::ALL
    }

    /// Whether this registration covers `incoming`. An incoming wildcard is matched only by
    /// a wildcard registration (the queue moves every pod on it anyway).
    pub fn matches(&self, incoming: &ClusterEvent) -> bool {
        self.is_wildcard()
            || (self.resource.matches(incoming.resource) && self.action.intersects(incoming.action))
    }

    /// Metric/log label, e.g. `NodeAdd`, `AssignedPodDelete`, `UnschedulableTimeout`.
    pub fn label(&self) -> String {
        match self.resource {
            _ if self.is_wildcard() => "UnschedulableTimeout".into(),
            // Upstream's resource name for pods not bound yet.
            EventResource::UnscheduledPod => format!("UnschedulablePod{}", self.action),
            r => format!("{r:?}{}", self.action),
        }
    }
}

/// Which plugins registered which events, for one profile (upstream's queueing hint map
/// with every hint answering "Queue": a registered, matching event is enough to requeue).
#[derive(Clone, Debug, Default)]
pub struct PluginEvents {
    entries: Vec<(ClusterEvent, &'static str)>,
}

impl PluginEvents {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn register(
        &mut self,
        plugin: &'static str,
        events: impl IntoIterator<Item = ClusterEvent>,
    ) {
        for e in events {
            if !self.entries.contains(&(e, plugin)) {
                self.entries.push((e, plugin));
            }
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&ClusterEvent, &'static str)> {
        self.entries.iter().map(|(e, p)| (e, *p))
    }

    /// The plugins (among `among`) that registered an event matching `event`.
    pub fn interested<'a>(
        &'a self,
        event: &'a ClusterEvent,
        among: &'a BTreeSet<&'static str>,
    ) -> impl Iterator<Item = &'static str> + 'a {
        self.entries
            .iter()
            .filter(move |(e, p)| among.contains(p) && e.matches(event))
            .map(|(_, p)| *p)
    }

    /// Events registered by `plugin`.
    pub fn of_plugin(&self, plugin: &str) -> Vec<ClusterEvent> {
        self.entries
            .iter()
            .filter(|(_, p)| *p == plugin)
            .map(|(e, _)| *e)
            .collect()
    }
}

/// A plugin's answer to "can this event make the pod I rejected schedulable?" (upstream
/// `QueueingHint`, GA in 1.34).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueingHint {
    Queue,
    QueueSkip,
}

/// The objects an event is about, for queueing hints. `None` when the caller has none at
/// hand (recorded in-flight events, tests): every hint then answers `Queue`.
#[derive(Clone, Copy, Debug, Default)]
pub enum EventObjects<'a> {
    #[default]
    None,
    /// A node added (`old: None`) or updated; `old` is only given when its view is known.
    Node {
        old: Option<&'a crate::types::NodeInfo>,
        new: &'a crate::types::NodeInfo,
    },
    /// A pod added (`old: None`), updated, or deleted (`new: None`).
    Pod {
        old: Option<&'a PodInfo>,
        new: Option<&'a PodInfo>,
    },
    /// A PersistentVolumeClaim added or updated.
    Pvc { new: &'a k8s::PersistentVolumeClaim },
    /// A PersistentVolume added (`old: None`) or updated.
    Pv {
        old: Option<&'a k8s::PersistentVolume>,
        new: &'a k8s::PersistentVolume,
    },
    /// A ResourceClaim added (`old: None`) or updated, with the claims as the cache holds
    /// them after the event (DynamicResources resolves the pod's claims there).
    ResourceClaim {
        old: Option<&'a k8s_openapi::api::resource::v1::ResourceClaim>,
        new: &'a k8s_openapi::api::resource::v1::ResourceClaim,
        claims: &'a crate::types::dra::DraObjects,
    },
    /// A VolumeAttachment deleted. `claim` is the `(namespace, name)` of the claim bound to
    /// its PersistentVolume (from the volume's claimRef) when the cache knows it.
    VolumeAttachmentGone {
        va: &'a crate::types::VolumeAttachmentInfo,
        claim: Option<(&'a str, &'a str)>,
    },
    /// A StorageClass added (`old: None`) or updated.
    StorageClass {
        old: Option<&'a storage::StorageClass>,
        new: &'a storage::StorageClass,
    },
    /// A CSINode added (`old: None`) or updated.
    CsiNode {
        old: Option<&'a storage::CSINode>,
        new: &'a storage::CSINode,
    },
    /// A CSIDriver added (`old: None`) or updated.
    CsiDriver {
        old: Option<&'a storage::CSIDriver>,
        new: &'a storage::CSIDriver,
    },
    /// A CSIStorageCapacity added (`old: None`) or updated.
    StorageCapacity {
        old: Option<&'a storage::CSIStorageCapacity>,
        new: &'a storage::CSIStorageCapacity,
    },
    /// A PodGroup added (`old: None`) or updated.
    PodGroup {
        old: Option<&'a crate::types::pod_group::PodGroupInfo>,
        new: &'a crate::types::pod_group::PodGroupInfo,
    },
}

/// What of a Node its update classification looks at, as hashes: the informer keeps this
/// (a few words) per node instead of the whole Node object, which on real clusters carries
/// kilobytes of images, conditions and managed fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct NodeFingerprint {
    unschedulable: bool,
    taints: u64,
    /// Semantic: `1` and `1000m` hash alike.
    allocatable: u64,
    labels: u64,
    /// Type and status only: heartbeats change the timestamps all the time.
    conditions: u64,
    annotations: u64,
    /// In order: upstream compares the lists with `slices.Equal`.
    declared_features: u64,
    /// `status.images` (names and sizes, for ImageLocality). Not an event upstream, so
    /// [`NodeFingerprint::actions_to`] ignores it; [`NodeFingerprint::keeps_view`] does not.
    images: u64,
}

fn hash_of(v: impl Hash) -> u64 {
    // One seed for the process: fingerprints are compared within one process only.
    static SEED: std::sync::LazyLock<foldhash::quality::RandomState> =
        std::sync::LazyLock::new(Default::default);
    SEED.hash_one(v)
}

impl NodeFingerprint {
    pub fn of(n: &k8s::Node) -> Self {
        let spec = n.spec.as_ref();
        let status = n.status.as_ref();
        let taints: Vec<_> = spec
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .map(|t| {
                (
                    &t.key,
                    &t.value,
                    &t.effect,
                    t.time_added.as_ref().map(|t| t.0.as_second()),
                )
            })
            .collect();
        let allocatable: Vec<(&String, Result<i128, &str>)> = status
            .and_then(|s| s.allocatable.as_ref())
            .into_iter()
            .flatten()
            .map(|(k, q)| {
                let v = parse_k8s_quantity(q)
                    .map(|x| i128::from(x.milli_value()))
                    .map_err(|_| q.0.as_str());
                (k, v)
            })
            .collect();
        let conditions: BTreeSet<(&str, &str)> = status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .map(|c| (c.type_.as_str(), c.status.as_str()))
            .collect();
        NodeFingerprint {
            unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
            taints: hash_of(taints),
            allocatable: hash_of(allocatable),
            labels: hash_of(n.metadata.labels.iter().flatten().collect::<Vec<_>>()),
            conditions: hash_of(conditions),
            annotations: hash_of(n.metadata.annotations.iter().flatten().collect::<Vec<_>>()),
            declared_features: hash_of(status.and_then(|s| s.declared_features.as_ref())),
            images: hash_of(status.and_then(|s| s.images.as_ref()).map(|images| {
                images
                    .iter()
                    .map(|i| (&i.names, i.size_bytes))
                    .collect::<Vec<_>>()
            })),
        }
    }

    /// Whether an update from `old` (what the informer kept of the node; `None`: the node
    /// is new) to this fingerprint leaves everything the scheduler keeps of the node as it
    /// is: then the update (a kubelet's heartbeat: only condition timestamps and the
    /// resourceVersion change) is dropped before the scheduler's lock, the cache's view, the
    /// snapshot and the queue see it. Annotations and condition statuses count although the
    /// cache keeps neither: they fire queue events.
    pub fn keeps_view(&self, old: Option<&NodeFingerprint>) -> bool {
        old == Some(self)
    }

    /// The scheduling-relevant actions between this (older) fingerprint and `new` (upstream
    /// `NodeSchedulingPropertiesChange`); empty when nothing the scheduler looks at changed.
    pub fn actions_to(&self, new: &NodeFingerprint) -> ActionType {
        let mut a = ActionType::NONE;
        if self.unschedulable != new.unschedulable || self.taints != new.taints {
            a |= ActionType::UPDATE_NODE_TAINT;
        }
        if self.allocatable != new.allocatable {
            a |= ActionType::UPDATE_NODE_ALLOCATABLE;
        }
        if self.labels != new.labels {
            a |= ActionType::UPDATE_NODE_LABEL;
        }
        if self.conditions != new.conditions {
            a |= ActionType::UPDATE_NODE_CONDITION;
        }
        if self.annotations != new.annotations {
            a |= ActionType::UPDATE_NODE_ANNOTATION;
        }
        if self.declared_features != new.declared_features {
            a |= ActionType::UPDATE_NODE_DECLARED_FEATURE;
        }
        a
    }

    /// The events for the update, one per changed property (empty: fire nothing).
    pub fn events_to(&self, new: &NodeFingerprint) -> Vec<ClusterEvent> {
        split(EventResource::Node, self.actions_to(new))
    }
}

/// Classifies a Node update into the scheduling-relevant actions it carries (upstream
/// `NodeSchedulingPropertiesChange`). Empty when nothing the scheduler looks at changed
/// (e.g. only heartbeat times), in which case no event should be fired.
pub fn node_update_actions(old: &k8s::Node, new: &k8s::Node) -> ActionType {
    NodeFingerprint::of(old).actions_to(&NodeFingerprint::of(new))
}

/// The events for a Node update, one per changed property (empty: fire nothing).
pub fn node_update_events(old: &k8s::Node, new: &k8s::Node) -> Vec<ClusterEvent> {
    split(EventResource::Node, node_update_actions(old, new))
}

/// Same classification on the scheduler's compact node view: labels, taints,
/// unschedulable and allocatable (conditions and annotations are not kept there).
pub fn node_info_update_actions(
    old: &crate::types::NodeInfo,
    new: &crate::types::NodeInfo,
) -> ActionType {
    let mut a = ActionType::NONE;
    if old.unschedulable != new.unschedulable || old.taints != new.taints {
        a |= ActionType::UPDATE_NODE_TAINT;
    }
    if old.allocatable != new.allocatable {
        a |= ActionType::UPDATE_NODE_ALLOCATABLE;
    }
    if old.labels != new.labels {
        a |= ActionType::UPDATE_NODE_LABEL;
    }
    if old.declared_features != new.declared_features {
        a |= ActionType::UPDATE_NODE_DECLARED_FEATURE;
    }
    a
}

fn split(resource: EventResource, actions: ActionType) -> Vec<ClusterEvent> {
    ActionType::NAMES
        .iter()
        .filter(|(a, _)| actions.intersects(*a))
        .map(|(a, _)| ClusterEvent::new(resource, *a))
        .collect()
}

/// Classifies a Pod update into the actions it carries (upstream
/// `PodSchedulingPropertiesChange`): label change, request scale-down, last scheduling gate
/// removed, toleration added. Nothing specific yields [`ActionType::UPDATE_OTHER`], which
/// only general `Update` registrations match.
pub fn pod_update_actions(old: &PodInfo, new: &PodInfo) -> ActionType {
    let mut a = ActionType::NONE;
    if old.labels != new.labels {
        a |= ActionType::UPDATE_POD_LABEL;
    }
    if is_scale_down(&old.requests, &new.requests) {
        a |= ActionType::UPDATE_POD_SCALE_DOWN;
    }
    if new.scheduling_gates.is_empty() && !old.scheduling_gates.is_empty() {
        a |= ActionType::UPDATE_POD_SCHEDULING_GATES_ELIMINATED;
    }
    // Tolerations can only be added (API validation), so a length change is enough.
    if old.tolerations.len() != new.tolerations.len() {
        a |= ActionType::UPDATE_POD_TOLERATION;
    }
    if old.resource_claims != new.resource_claims {
        a |= ActionType::UPDATE_POD_GENERATED_RESOURCE_CLAIM;
    }
    if a.is_empty() {
        a = ActionType::UPDATE_OTHER;
    }
    a
}

/// The events for a Pod update; the resource is AssignedPod or UnscheduledPod depending on
/// whether the new pod has a node.
pub fn pod_update_events(old: &PodInfo, new: &PodInfo) -> Vec<ClusterEvent> {
    let resource = if new.node_name.as_deref().is_some_and(|n| !n.is_empty()) {
        EventResource::AssignedPod
    } else {
        EventResource::UnscheduledPod
    };
    split(resource, pod_update_actions(old, new))
}

fn is_scale_down(old: &crate::types::Resource, new: &crate::types::Resource) -> bool {
    if old.milli_cpu > new.milli_cpu
        || old.memory > new.memory
        || old.ephemeral_storage > new.ephemeral_storage
    {
        return true;
    }
    old.scalar
        .iter()
        .any(|(name, v)| *v > new.scalar_value(name.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_registration_matches_assigned_and_unscheduled_pods() {
        let reg = ClusterEvent::new(EventResource::Pod, ActionType::DELETE);
        assert!(reg.matches(&ClusterEvent::new(
            EventResource::AssignedPod,
            ActionType::DELETE
        )));
        assert!(reg.matches(&ClusterEvent::new(
            EventResource::UnscheduledPod,
            ActionType::DELETE
        )));
        assert!(!reg.matches(&ClusterEvent::new(
            EventResource::AssignedPod,
            ActionType::ADD
        )));
        assert!(!reg.matches(&ClusterEvent::new(EventResource::Node, ActionType::DELETE)));
        // A specific registration does not match an incoming wildcard; only a wildcard does.
        assert!(!reg.matches(&ClusterEvent::UNSCHEDULABLE_TIMEOUT));
        assert!(ClusterEvent::UNSCHEDULABLE_TIMEOUT.matches(&reg));
    }

    #[test]
    fn general_update_registration_matches_specific_updates_but_not_vice_versa() {
        let general = ClusterEvent::new(EventResource::Pod, ActionType::UPDATE);
        let label = ClusterEvent::new(EventResource::UnscheduledPod, ActionType::UPDATE_POD_LABEL);
        let other = ClusterEvent::new(EventResource::UnscheduledPod, ActionType::UPDATE_OTHER);
        assert!(general.matches(&label));
        assert!(general.matches(&other));
        let label_reg = ClusterEvent::new(EventResource::Pod, ActionType::UPDATE_POD_LABEL);
        assert!(!label_reg.matches(&other));
    }

    fn node(f: impl FnOnce(&mut k8s::Node)) -> k8s::Node {
        let mut n = crate::types::NodeInfo::test("n")
            .cpu("4")
            .label("zone", "a")
            .build_node();
        f(&mut n);
        n
    }

    #[test]
    fn node_update_is_classified_per_property() {
        let old = node(|_| {});
        let same_cpu = node(|n| {
            let alloc = n.status.as_mut().unwrap().allocatable.as_mut().unwrap();
            alloc.insert(
                "cpu".into(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity("4000m".into()),
            );
        });
        assert_eq!(node_update_actions(&old, &same_cpu), ActionType::NONE);
        let heartbeat = node(|n| {
            n.status.as_mut().unwrap().conditions = Some(vec![k8s::NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            }]);
        });
        let heartbeat2 = node(|n| {
            n.status.as_mut().unwrap().conditions = Some(vec![k8s::NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                message: Some("kubelet is posting ready status".into()),
                ..Default::default()
            }]);
        });
        assert_eq!(
            node_update_actions(&heartbeat, &heartbeat2),
            ActionType::NONE
        );
        assert_eq!(
            node_update_actions(&old, &heartbeat),
            ActionType::UPDATE_NODE_CONDITION
        );
        let cordoned = node(|n| n.spec.get_or_insert_default().unschedulable = Some(true));
        assert_eq!(
            node_update_actions(&old, &cordoned),
            ActionType::UPDATE_NODE_TAINT
        );
        let relabelled_bigger = node(|n| {
            n.metadata
                .labels
                .get_or_insert_default()
                .insert("zone".into(), "b".into());
            let alloc = n.status.as_mut().unwrap().allocatable.as_mut().unwrap();
            alloc.insert(
                "cpu".into(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity("8".into()),
            );
        });
        assert_eq!(
            node_update_events(&old, &relabelled_bigger),
            [
                ClusterEvent::new(EventResource::Node, ActionType::UPDATE_NODE_ALLOCATABLE),
                ClusterEvent::new(EventResource::Node, ActionType::UPDATE_NODE_LABEL),
            ]
        );
        let a = crate::types::NodeInfo::from_node(&old);
        let b = crate::types::NodeInfo::from_node(&relabelled_bigger);
        assert_eq!(
            node_info_update_actions(&a, &b),
            ActionType::UPDATE_NODE_ALLOCATABLE | ActionType::UPDATE_NODE_LABEL
        );
    }

    #[test]
    fn pod_update_is_classified_per_property() {
        let base = PodInfo::test("ns", "p").cpu("500m").build();
        let other = PodInfo::test("ns", "p").cpu("500m").image("x").build();
        assert_eq!(
            pod_update_events(&base, &other),
            [ClusterEvent::new(
                EventResource::UnscheduledPod,
                ActionType::UPDATE_OTHER
            )]
        );
        let smaller = PodInfo::test("ns", "p")
            .cpu("250m")
            .label("a", "b")
            .node("n1")
            .build();
        assert_eq!(
            pod_update_events(&base, &smaller),
            [
                ClusterEvent::new(EventResource::AssignedPod, ActionType::UPDATE_POD_LABEL),
                ClusterEvent::new(
                    EventResource::AssignedPod,
                    ActionType::UPDATE_POD_SCALE_DOWN
                ),
            ]
        );
        let bigger = PodInfo::test("ns", "p").cpu("1").build();
        assert_eq!(pod_update_actions(&base, &bigger), ActionType::UPDATE_OTHER);
        let tolerating = PodInfo::test("ns", "p")
            .cpu("500m")
            .toleration("k", "Exists", "", "NoSchedule")
            .build();
        assert_eq!(
            pod_update_actions(&base, &tolerating),
            ActionType::UPDATE_POD_TOLERATION
        );
    }

    #[test]
    fn labels_read_like_upstream() {
        assert_eq!(
            ClusterEvent::new(EventResource::Node, ActionType::ADD).label(),
            "NodeAdd"
        );
        assert_eq!(
            ClusterEvent::new(EventResource::Node, ActionType::UPDATE_NODE_TAINT).label(),
            "NodeUpdateNodeTaint"
        );
        assert_eq!(
            ClusterEvent::new(EventResource::UnscheduledPod, ActionType::ADD).label(),
            "UnschedulablePodAdd"
        );
        assert_eq!(
            ClusterEvent::UNSCHEDULABLE_TIMEOUT.label(),
            "UnschedulableTimeout"
        );
    }
}
