//! The plugin framework: extension points, statuses, cycle state and per-profile frameworks.

mod cycle_state;
mod diagnosis;
mod extension_point;
mod interface;
mod nominator;
mod profile;
mod queued;
mod registry;
mod runtime;
mod status;

pub use cycle_state::{CycleState, StateData};
pub use diagnosis::{Diagnosis, FitError, NodeToStatus};
pub use extension_point::ExtensionPoint;
pub use interface::*;
pub use nominator::NominatedPods;
pub use profile::{DEFAULT_SCHEDULER_NAME, ProfileRegistry};
pub use queued::QueuedPodInfo;
pub use registry::{PluginFactory, Registry};
pub use runtime::{Framework, FrameworkError, MAX_PERMIT_TIMEOUT, NodePluginScores, ScoreTable};
pub use status::{Code, Reason, Status};

#[cfg(test)]
mod tests;
