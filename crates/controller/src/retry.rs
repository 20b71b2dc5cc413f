//! Retries for transient API errors (429, 5xx, connection failures) with exponential
//! backoff. Anything else (404, 409, 422, ...) is returned at once for the caller to judge.

use std::future::Future;
use std::time::Duration;

const ATTEMPTS: u32 = 5;
const FIRST_DELAY: Duration = Duration::from_millis(100);
const MAX_DELAY: Duration = Duration::from_secs(2);

pub fn is_transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 429 || s.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

/// The HTTP status of an API error, if it is one.
pub fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

pub async fn with_retry<T, F, Fut>(what: &str, mut f: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut delay = FIRST_DELAY;
    let mut attempt = 1;
    loop {
        match f().await {
            Ok(v) => return Ok(v),
            Err(e) if attempt < ATTEMPTS && is_transient(&e) => {
                tracing::debug!(what, attempt, error = %e, "transient API error; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(MAX_DELAY);
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}
