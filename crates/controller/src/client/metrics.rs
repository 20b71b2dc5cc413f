//! client-go's `rest_client_*` metrics for every request the API client sends: a tower layer
//! under kube's client, after the base URI is set, so each request is seen with its host.
//!
//! - `rest_client_requests_total{code,method,host}`: one per response (`code` the HTTP
//!   status), or `<error>` when no response came (connection refused, TLS failure).
//! - `rest_client_request_duration_seconds{verb,host}`: from sending to the response's
//!   headers (a watch is counted when its stream opens), client-go's buckets.
//!
//! Process-wide, as client-go's: every client built by [`super::client`] counts into the
//! same families, which each [`crate::serving::metrics::Metrics`] registry exposes.

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::Instant;

use hyper::{Request, Response};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;

type Labels = [(&'static str, String); 3];
type LatencyLabels = [(&'static str, String); 2];

/// client-go's latency buckets (seconds).
pub(crate) const LATENCY_BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

pub(crate) struct RestClientMetrics {
    pub(crate) requests: Family<Labels, Counter>,
    pub(crate) latency: Family<LatencyLabels, Histogram, fn() -> Histogram>,
}

/// The process's families, made on first use.
pub(crate) fn rest_client_metrics() -> &'static RestClientMetrics {
    static METRICS: OnceLock<RestClientMetrics> = OnceLock::new();
    METRICS.get_or_init(|| RestClientMetrics {
        requests: Family::default(),
        latency: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
    })
}

/// `host[:port]` of a request's URI, as Go's `url.URL.Host`.
fn host_of(uri: &hyper::Uri) -> String {
    uri.authority().map(|a| a.to_string()).unwrap_or_default()
}

fn record(method: &str, host: &str, code: Option<u16>, started: Instant) {
    let m = rest_client_metrics();
    let code = code.map_or_else(|| "<error>".to_string(), |c| c.to_string());
    m.requests
        .get_or_create(&[
            ("code", code),
            ("method", method.to_string()),
            ("host", host.to_string()),
        ])
        .inc();
    m.latency
        .get_or_create(&[("verb", method.to_string()), ("host", host.to_string())])
        .observe(started.elapsed().as_secs_f64());
}

#[derive(Clone, Copy, Default)]
pub(crate) struct RestClientMetricsLayer;

impl<S> tower::Layer<S> for RestClientMetricsLayer {
    type Service = RestClientMetricsService<S>;
    fn layer(&self, inner: S) -> RestClientMetricsService<S> {
        RestClientMetricsService { inner }
    }
}

#[derive(Clone)]
pub(crate) struct RestClientMetricsService<S> {
    inner: S,
}

impl<S, ReqB, B> tower::Service<Request<ReqB>> for RestClientMetricsService<S>
where
    S: tower::Service<Request<ReqB>, Response = Response<B>>,
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

    fn call(&mut self, req: Request<ReqB>) -> Self::Future {
        let method = req.method().as_str().to_string();
        let host = host_of(req.uri());
        let started = Instant::now();
        let fut = self.inner.call(req);
        Box::pin(async move {
            let res = fut.await;
            let code = res.as_ref().ok().map(|r| r.status().as_u16());
            record(&method, &host, code, started);
            res
        })
    }
}
