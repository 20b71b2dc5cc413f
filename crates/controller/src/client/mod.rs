//! API plumbing: building a client from a kubeconfig, the rate-limited, retrying client the
//! controller writes with, and the crate's error type. Knows nothing of scheduling: no
//! state, queue or cache here.

pub(crate) mod discovery;
mod error;
pub(crate) mod rate_limit;
pub(crate) mod retry;

use std::path::Path;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

pub use error::{Error, Result};
pub use retry::{ATTEMPTS, status_code};

/// Builds a client from a kubeconfig file, or (without one) the way kubectl does:
/// `$KUBECONFIG`, `~/.kube/config`, then the in-cluster service account.
pub async fn client(kubeconfig: Option<&Path>) -> Result<Client> {
    let config = match kubeconfig {
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
    Ok(Client::try_from(config)?)
}
