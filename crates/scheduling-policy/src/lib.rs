//! SchedulingPolicy's API-server side: everything that feeds scheduler-core's pure policy
//! code (`scheduler_core::policy`: types, merge, evaluation, defaults; and the PreEnqueue
//! plugin `scheduler_core::plugins::scheduling_policy`) from a live cluster. See
//! `docs/scheduling-policy.md`.
//!
//! ```text
//!                 SchedulingPolicy objects            SubjectAccessReviews
//!                  (custom resource watch)         ("may SA x `use` policy p?")
//!                            |                                  |
//!                       [informer]                          [authz]
//!                   Policies (PolicyStore)           CachedAuthorizer(SarAuthorizer)
//!                       |          \                 /          |
//!                       |           \               /           |
//!                       |         usable policies of a pod's SA |
//!                       v                   |                   v
//!        `ferrosched webhook`               |          `ferrosched run`
//!            [webhook]                      |              [gate]
//!   /mutate: defaults as a JSON patch       |   PolicyGate: usable names per SA
//!   /validate: deny with every violation ---+   GatePlugin: the PreEnqueue plugin
//!                                               over it, reporting kept-out pods
//!                                               (a controller Extension)
//! ```
//!
//! Two processes, one model: the webhook stops a violating pod at admission; the gate is
//! the scheduler's defence in depth behind it (pods admitted while the webhook was down or
//! before a policy changed). Both merge the policies the pod's service account may use and
//! evaluate the pod against that merge with scheduler-core's code.
//!
//! Depends on `controller` (client, errors, TLS serving, the [`controller::Extension`]
//! hook); controller does not depend on this crate, the binary wires the two together.
//! Policy semantics belong in scheduler-core, not here.
#![forbid(unsafe_code)]

pub mod authz;
pub mod gate;
pub mod informer;
pub mod webhook;

use controller::Extension;
use scheduler_core::config::Loaded;
use scheduler_core::plugins::names::SCHEDULING_POLICY;

/// What `ferrosched run` adds to the controller for `loaded`: the gate when a profile
/// enables SchedulingPolicy (it is fed from the cluster only then), else nothing.
pub fn extensions(loaded: &Loaded) -> Vec<Box<dyn Extension>> {
    let enabled = loaded
        .profiles
        .iter()
        .any(|p| p.points.values().flatten().any(|n| n == SCHEDULING_POLICY));
    if enabled {
        vec![Box::new(gate::GateExtension::new())]
    } else {
        Vec::new()
    }
}
