//! The HTTP stack under the kube client: HTTP/2 when the server offers it (ALPN), one TLS
//! connection multiplexing every watch and write, as client-go does. kube's own stack speaks
//! only HTTP/1.1, so each request in flight needs a connection of its own: during a burst of
//! bindings and events that is dozens of TLS handshakes and buffers, measured as a few
//! percent of the scheduler's CPU and several MiB of its peak memory against a real
//! kube-apiserver. Plain `http://` servers (the fake API server) get HTTP/1.1, and so does
//! every server when `DISABLE_HTTP2` is set to a non-empty value, as in client-go.

use std::time::Duration;

use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::ConfigExt;
use tower::{BoxError, ServiceBuilder};

use super::Error;

/// HTTP/2 health pings on a quiet connection, so a dead connection under the watches is
/// noticed (client-go: ReadIdleTimeout 30 s, PingTimeout 15 s).
const PING_INTERVAL: Duration = Duration::from_secs(30);
const PING_TIMEOUT: Duration = Duration::from_secs(15);

/// A kube client for `config` over HTTP/2 where the server offers it. Authentication,
/// the base URI and extra headers come from kube's own layers; there is no retry layer
/// here (the controller's writes retry in `client::retry`, after `Retry-After` is honoured
/// by `client::retry_after`; watches restart in kube's watcher).
pub(super) fn client(config: kube::Config) -> Result<kube::Client, Error> {
    let tls = config.rustls_client_config()?;
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(
        config.connect_timeout.unwrap_or(super::CONNECT_TIMEOUT),
    ));
    http.set_nodelay(true);
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1();
    let https = if http2_disabled() {
        https.wrap_connector(http)
    } else {
        https.enable_http2().wrap_connector(http)
    };
    let hyper = HyperClient::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .http2_keep_alive_interval(PING_INTERVAL)
        .http2_keep_alive_timeout(PING_TIMEOUT)
        .build(https);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .layer(super::retry_after::RetryAfterLayer)
        .layer(super::metrics::RestClientMetricsLayer)
        .map_err(BoxError::from)
        .service(hyper);
    Ok(kube::Client::new(service, config.default_namespace))
}

/// client-go's switch: `DISABLE_HTTP2` set to anything non-empty.
fn http2_disabled() -> bool {
    std::env::var_os("DISABLE_HTTP2").is_some_and(|v| !v.is_empty())
}
