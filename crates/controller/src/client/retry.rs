//! The client the controller writes with: every request waits for the client-side rate
//! limit (`clientConnection.qps`/`burst`, a token bucket like client-go's), and transient
//! errors (429, 5xx, connection failures) are retried with exponential backoff. Anything
//! else (404, 409, 422, ...) is returned at once for the caller to judge.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// Tries per request, the first included.
pub const ATTEMPTS: u32 = 5;
const FIRST_DELAY: Duration = Duration::from_millis(100);
const MAX_DELAY: Duration = Duration::from_secs(2);

pub(crate) fn is_transient(e: &kube::Error) -> bool {
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

/// A token bucket: `burst` requests at once, refilled at `qps` per second. Callers over the
/// limit reserve a future token and sleep until it is due, so they are served in order.
#[derive(Debug)]
pub(crate) struct RateLimiter {
    qps: f64,
    burst: f64,
    bucket: Mutex<(f64, Instant)>,
}

impl RateLimiter {
    /// `qps <= 0` disables the limit (client-go: a negative qps means no limit).
    pub(crate) fn new(qps: f32, burst: i32) -> Self {
        let burst = f64::from(burst.max(1));
        RateLimiter {
            qps: f64::from(qps),
            burst,
            bucket: Mutex::new((burst, Instant::now())),
        }
    }

    pub(crate) async fn acquire(&self) {
        if self.qps <= 0.0 {
            return;
        }
        let wait = {
            let mut b = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            let refill = now.duration_since(b.1).as_secs_f64() * self.qps;
            b.0 = (b.0 + refill).min(self.burst);
            b.1 = now;
            b.0 -= 1.0;
            (b.0 < 0.0).then(|| Duration::from_secs_f64(-b.0 / self.qps))
        };
        if let Some(w) = wait {
            tokio::time::sleep(w).await;
        }
    }
}

/// A kube client plus the rate limit all of the controller's writes share.
#[derive(Clone)]
pub(crate) struct ApiClient {
    pub(crate) client: kube::Client,
    pub(crate) limiter: Arc<RateLimiter>,
}

impl ApiClient {
    pub(crate) fn new(client: kube::Client, qps: f32, burst: i32) -> Self {
        ApiClient {
            client,
            limiter: Arc::new(RateLimiter::new(qps, burst)),
        }
    }

    /// Runs one request, rate limited, retrying transient failures.
    pub(crate) async fn call<T, F, Fut>(&self, what: &str, f: F) -> Result<T, kube::Error>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, kube::Error>>,
    {
        with_retry(&self.limiter, what, f).await
    }
}

async fn with_retry<T, F, Fut>(
    limiter: &RateLimiter,
    what: &str,
    mut f: F,
) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut delay = FIRST_DELAY;
    let mut attempt = 1;
    loop {
        limiter.acquire().await;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_bucket_allows_a_burst_then_qps() {
        let l = RateLimiter::new(10.0, 3);
        let t0 = Instant::now();
        for _ in 0..3 {
            l.acquire().await;
        }
        assert_eq!(t0.elapsed(), Duration::ZERO, "burst is free");
        for _ in 0..5 {
            l.acquire().await;
        }
        let e = t0.elapsed().as_secs_f64();
        assert!((0.49..0.52).contains(&e), "{e}");
    }
}
