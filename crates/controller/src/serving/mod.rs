//! HTTPS serving: certificates and the TLS accept loop (`tls`, also used by the
//! SchedulingPolicy webhook), and `run`'s `/healthz`, `/livez`, `/readyz`, `/metrics` and
//! `/configz`, `/flagz`, `/statusz` (`health`, `metrics`, `configz`, `componentz`). Reads the shared state for readiness and metrics; never writes
//! to it or to the API server.

pub mod auth;
pub mod componentz;
pub mod configz;
pub mod conn;
pub mod explain;
pub(crate) mod health;
pub(crate) mod metrics;
pub mod tls;
pub mod tls_options;
pub mod x509;
