//! HTTPS serving: certificates and the TLS accept loop (`tls`, also used by the
//! SchedulingPolicy webhook), and `run`'s `/healthz`, `/livez`, `/readyz` and `/metrics`
//! (`health`, `metrics`). Reads the shared state for readiness and metrics; never writes
//! to it or to the API server.

pub mod auth;
pub mod conn;
pub mod explain;
pub(crate) mod health;
pub(crate) mod metrics;
pub mod tls;
