//! Honours `Retry-After` below kube's response parsing, where the header is still visible:
//! a 429 or 5xx response carrying one is handed back only after that many seconds (capped
//! at [`MAX_RETRY_AFTER`]), so [`super::retry`]'s next attempt never comes earlier than
//! the server asked. kube turns the response into an `Error::Api` without its headers, and
//! the API server's own throttling (priority and fairness) answers 429 with the header and
//! a plain-text body, so the header is the only place the delay is found.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::{Response, StatusCode, header};

/// A longer `Retry-After` is cut to this, so one answer cannot stall a write for long.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, Default)]
pub(crate) struct RetryAfterLayer;

impl<S> tower::Layer<S> for RetryAfterLayer {
    type Service = RetryAfter<S>;
    fn layer(&self, inner: S) -> RetryAfter<S> {
        RetryAfter { inner }
    }
}

#[derive(Clone)]
pub(crate) struct RetryAfter<S> {
    inner: S,
}

/// The delay a response asks for: 429 or 5xx with `Retry-After: <seconds>` (the API server
/// never sends the HTTP-date form).
pub(crate) fn delay_of(status: StatusCode, headers: &hyper::HeaderMap) -> Option<Duration> {
    if status != StatusCode::TOO_MANY_REQUESTS && !status.is_server_error() {
        return None;
    }
    let secs: u64 = headers
        .get(header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(secs).min(MAX_RETRY_AFTER))
}

impl<S, Req, B> tower::Service<Req> for RetryAfter<S>
where
    S: tower::Service<Req, Response = Response<B>>,
    S::Future: Send + 'static,
    B: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = Response<B>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<B>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let fut = self.inner.call(req);
        Box::pin(async move {
            let res = fut.await?;
            if let Some(d) = delay_of(res.status(), res.headers()) {
                tracing::debug!(status = res.status().as_u16(), delay = ?d, "server asked to retry after");
                tokio::time::sleep(d).await;
            }
            Ok(res)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(v: &str) -> hyper::HeaderMap {
        let mut h = hyper::HeaderMap::new();
        h.insert(header::RETRY_AFTER, v.parse().unwrap());
        h
    }

    #[test]
    fn only_throttling_and_server_errors_with_seconds_delay() {
        let s = Duration::from_secs;
        assert_eq!(
            delay_of(StatusCode::TOO_MANY_REQUESTS, &headers("2")),
            Some(s(2))
        );
        assert_eq!(
            delay_of(StatusCode::SERVICE_UNAVAILABLE, &headers("1")),
            Some(s(1))
        );
        assert_eq!(
            delay_of(StatusCode::TOO_MANY_REQUESTS, &headers("3600")),
            Some(MAX_RETRY_AFTER)
        );
        assert_eq!(delay_of(StatusCode::CONFLICT, &headers("2")), None);
        assert_eq!(delay_of(StatusCode::OK, &headers("2")), None);
        assert_eq!(
            delay_of(StatusCode::TOO_MANY_REQUESTS, &headers("soon")),
            None
        );
        assert_eq!(
            delay_of(StatusCode::TOO_MANY_REQUESTS, &hyper::HeaderMap::new()),
            None
        );
    }
}
