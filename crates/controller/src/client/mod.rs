//! API plumbing: building a client from a kubeconfig, the rate-limited, retrying client the
//! controller writes with, and the crate's error type. Knows nothing of scheduling: no
//! state, queue or cache here.

pub(crate) mod discovery;
mod error;
mod http;
pub(crate) mod metrics;
pub(crate) mod rate_limit;
pub(crate) mod retry;
pub(crate) mod retry_after;

use std::path::Path;
use std::time::Duration;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

pub use error::{Error, Result};
pub use retry::{ATTEMPTS, REQUEST_TIMEOUT, status_code};
pub use retry_after::MAX_RETRY_AFTER;

/// Bound on establishing a connection to the API server.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Builds a client from a kubeconfig file, or (without one) the way kubectl does:
/// `$KUBECONFIG`, `~/.kube/config`, then the in-cluster service account.
///
/// Over HTTP/2 where the server offers it ([`http`]). kube's own retry layer is left out: [`retry`] is the only one, so a logical write is at
/// most [`ATTEMPTS`] requests; [`retry_after`] only delays a response that carries
/// `Retry-After`. No read timeout on the connection (it would cut idle watches; kube's
/// watcher has its own idle timeout): writes are bounded per attempt by
/// [`REQUEST_TIMEOUT`], lease requests by renewDeadline.
pub async fn client(kubeconfig: Option<&Path>) -> Result<Client> {
    let mut config = match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .map_err(|e| Error::Kubeconfig(format!("{}: {e}", path.display())))?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|e| Error::Kubeconfig(format!("{}: {e}", path.display())))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| Error::Kubeconfig(e.to_string()))?,
    };
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    http::client(config)
}
