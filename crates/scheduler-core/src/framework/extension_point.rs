//! The extension points of the scheduling framework, in the order a pod meets them.

use std::fmt;

/// One extension point. `multiPoint` is not one: it is config shorthand that expands
/// into every point a plugin implements (see `config::defaults`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ExtensionPoint {
    PreEnqueue,
    QueueSort,
    PreFilter,
    Filter,
    PostFilter,
    PreScore,
    Score,
    Reserve,
    Permit,
    PreBind,
    Bind,
    PostBind,
    /// PodGroup points (upstream's TopologyAwareWorkloadScheduling): candidate placements
    /// for a topology-constrained group, and their scores. Configured like the pod points;
    /// the group cycle calls them (see `framework::placement`).
    PlacementGenerate,
    PlacementScore,
}

impl ExtensionPoint {
    /// All points, in pipeline order.
    pub const ALL: [ExtensionPoint; 14] = [
        Self::PreEnqueue,
        Self::QueueSort,
        Self::PreFilter,
        Self::Filter,
        Self::PostFilter,
        Self::PreScore,
        Self::Score,
        Self::Reserve,
        Self::Permit,
        Self::PreBind,
        Self::Bind,
        Self::PostBind,
        Self::PlacementGenerate,
        Self::PlacementScore,
    ];

    /// The field name under `profiles[].plugins` in the component config.
    pub const fn config_field(self) -> &'static str {
        match self {
            Self::PreEnqueue => "preEnqueue",
            Self::QueueSort => "queueSort",
            Self::PreFilter => "preFilter",
            Self::Filter => "filter",
            Self::PostFilter => "postFilter",
            Self::PreScore => "preScore",
            Self::Score => "score",
            Self::Reserve => "reserve",
            Self::Permit => "permit",
            Self::PreBind => "preBind",
            Self::Bind => "bind",
            Self::PostBind => "postBind",
            Self::PlacementGenerate => "placementGenerate",
            Self::PlacementScore => "placementScore",
        }
    }

    /// Upstream's name for the point, as used in messages ("does not extend filter plugin").
    pub const fn display_name(self) -> &'static str {
        match self {
            Self::PreEnqueue => "PreEnqueue",
            Self::QueueSort => "QueueSort",
            Self::PreFilter => "PreFilter",
            Self::Filter => "Filter",
            Self::PostFilter => "PostFilter",
            Self::PreScore => "PreScore",
            Self::Score => "Score",
            Self::Reserve => "Reserve",
            Self::Permit => "Permit",
            Self::PreBind => "PreBind",
            Self::Bind => "Bind",
            Self::PostBind => "PostBind",
            Self::PlacementGenerate => "PlacementGenerate",
            Self::PlacementScore => "PlacementScore",
        }
    }

    pub fn from_config_field(field: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.config_field() == field)
    }
}

impl fmt::Display for ExtensionPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.display_name())
    }
}
