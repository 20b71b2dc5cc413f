//! The only crate that talks to the API server. It feeds scheduler-core's cache and
//! scheduling queue from informers, runs the scheduling loop on its own thread and carries
//! out its decisions (bindings, status patches, events, preemption) asynchronously.
//!
//! Data flows one way: `informers` -> `state` (cache + queue) -> `scheduler_loop`
//! (`schedule_one`) -> `binding` (actions against the API server) -> informers.
//!
//! Modules by concern:
//! - `run`: wires everything together for [`run`];
//! - `state`, `informers`, `scheduler_loop`, `binding`: the scheduling runtime;
//! - `coscheduling_status`: the status of scheduler-plugins' PodGroups, as its controller's;
//! - `client`, `leader`: API plumbing (client, rate limit and retries, errors, the lease);
//! - `serving`: HTTPS (certificates, health and metrics endpoints);
//! - `extension`: the hook for plugins fed from the cluster by other crates
//!   (SchedulingPolicy lives in the `scheduling-policy` crate, which depends on this one).
//!
//! The public surface is what the binary, the tests and `scheduling-policy` use; everything
//! else is crate-private.
#![forbid(unsafe_code)]

mod binding;
pub mod client;
mod coscheduling_status;
pub mod extender;
mod extension;
mod informers;
mod leader;
mod run;
mod scheduler_loop;
mod serving;
mod state;

pub use binding::binder::Binder;
pub use binding::executor::{
    ACTIONS_QUEUED, MAX_ACTIONS_IN_FLIGHT, SCHEDULED_EVENT_WRITES, SCHEDULED_EVENTS_PENDING,
};
pub use binding::podref::PodRef;
pub use client::{Error, Result, client};
pub use extension::{Extension, FailureReporter, QueueEvents};
/// Internals `ferrosched-benches` measures; not an API.
#[doc(hidden)]
pub use informers::bench_support;
pub use run::{RunOptions, default_instance_id, run};
pub use serving::{auth, configz, conn, explain, tls, tls_options, x509};
