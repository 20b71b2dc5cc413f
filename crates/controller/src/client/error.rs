//! The controller's one error type.

use scheduler_core::framework::FrameworkError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A profile's framework could not be built from the (already validated) config.
    #[error("building profile {}: {}", .0.profile, .0.message)]
    Framework(FrameworkError),
    /// The kubeconfig could not be read or did not describe a usable cluster.
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
    /// The client could not be created or the API server refused a request we cannot retry.
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// The health endpoint could not listen.
    #[error("health endpoint: {0}")]
    Listen(String),
    /// Another instance took the leader lease, or it could not be renewed in time.
    #[error("leader election lost")]
    LeaderLost,
    /// The webhook's serving certificate or key could not be loaded.
    #[error("serving certificate: {0}")]
    Certificate(String),
    /// An admission response could not be built.
    #[error("admission response: {0}")]
    Admission(String),

    /// Too much asked of the API server at once; try again later (the webhook answers 503).
    #[error("{0}")]
    Overloaded(String),
    /// The scheduling thread panicked or could not be started.
    #[error("scheduling thread: {0}")]
    Thread(String),
    /// A run option contradicts the config.
    #[error("{0}")]
    Config(String),
}

impl From<FrameworkError> for Error {
    fn from(e: FrameworkError) -> Self {
        Error::Framework(e)
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
