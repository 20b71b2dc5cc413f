//! The client-side rate limit of the controller's writes (`clientConnection.qps`/`burst`):
//! a token bucket like client-go's. Only waits; retrying is `retry`'s job.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

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
