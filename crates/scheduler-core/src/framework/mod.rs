//! The plugin framework: extension points, statuses, cycle state and per-profile frameworks.

mod batch;
mod cluster_events;
mod cycle_state;
mod diagnosis;
mod extender;
mod extension_point;
mod feasible;
mod interface;
mod nominator;
mod placement;
mod profile;
mod queued;
mod registry;
mod runtime;
mod status;
mod timing;

pub use batch::{
    BatchStats, HINT_NOT_USED, HINT_USED, MAX_BATCH_AGE, NO_HINT, OpportunisticBatch, PodSignature,
    SignFragment, Signing, flush as batch_flush,
};
pub use cluster_events::{
    ActionType, ClusterEvent, EventObjects, EventResource, NodeFingerprint, PluginEvents,
    QueueingHint, node_info_update_actions, node_update_actions, node_update_events,
    pod_update_actions, pod_update_events,
};
pub use cycle_state::{CycleState, StateData};
pub use diagnosis::{Diagnosis, FitError, NodeToStatus};
pub use extender::{
    Extender, ExtenderFilterResult, ExtenderVictims, HostPriority, MAX_EXTENDER_PRIORITY,
    MAX_NODE_SCORE, PreemptionAnswer, add_extender_priorities, add_extender_scores, binder_for,
    call_extender_priorities, call_extenders_for_preemption, calls_extenders,
    find_nodes_that_pass_extenders, is_interested,
};
pub use extension_point::ExtensionPoint;
pub use feasible::{FeasibleIter, FeasibleNodes, FeasibleSet, FeasibleSummaries, SummaryIter};
pub use interface::*;
pub use nominator::NominatedPods;
pub use placement::{
    Placement, PlacementAssignment, PlacementGeneratePlugin, PlacementRequest,
    PlacementScorePlugin, PlacementScores, adaptive_placement_percentage,
};
pub use profile::{DEFAULT_SCHEDULER_NAME, ProfileRegistry};
pub use queued::QueuedPodInfo;
pub use registry::{PluginFactory, Registry};
pub use runtime::{
    Framework, FrameworkError, MAX_PERMIT_TIMEOUT, NodePluginScores, ScoreDetail, ScoreTable,
    SummaryFilter,
};
pub use status::{Code, Reason, Status};
pub use timing::{CycleTimings, PluginTimer, PluginTiming, PointTiming};

#[cfg(test)]
mod tests;
