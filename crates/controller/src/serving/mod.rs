//! HTTPS serving: certificates and the TLS accept loop (`tls`, also used by the
//! SchedulingPolicy webhook), the secure port's TLS flags (`tls_options`), and `run`'s
//! `/healthz`, `/livez`, `/readyz`, `/metrics`, `/configz`, `/flagz` and `/statusz`
//! (`health`, `metrics`, `configz`, `componentz`) behind delegated authentication and
//! authorization (`auth`, client certificates read by `x509`). Reads the shared state for
//! readiness and metrics; never writes to it; asks the API server only for reviews and,
//! at start and every 10 s after, the authentication ConfigMap.

pub mod auth;
pub mod componentz;
pub mod configz;
pub mod conn;
pub mod explain;
pub(crate) mod health;
pub(crate) mod metrics;
pub(crate) mod process;
pub mod tls;
pub mod tls_options;
pub mod x509;
