//! The TLS accept loop's limits (`controller::conn`) over real TLS on 127.0.0.1: unfinished
//! request heads, stalled bodies and idle keep-alive connections are closed after their
//! (shortened) timeouts, and connections over the cap are closed at once. Also the secure
//! port of `controller::run` with its limits, and its `/configz`.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::routing::{get, post};
use controller::conn::ServeLimits;
use controller::tls;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_rustls::client::TlsStream;

async fn connect(addr: SocketAddr) -> std::io::Result<TlsStream<TcpStream>> {
    let provider = tls::provider();
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(tls::NoVerify(provider)))
        .with_no_client_auth();
    let tcp = TcpStream::connect(addr).await?;
    tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
}

/// Reads until the server closes the connection (EOF or an error); everything read.
/// Panics if that takes more than 10 s.
async fn read_until_closed(tls: &mut TlsStream<TcpStream>) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match tls.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .expect("the server closes the connection");
    got
}

/// Long enough never to matter in a test.
const LONG: Duration = Duration::from_secs(600);

fn limits() -> ServeLimits {
    ServeLimits {
        handshake_timeout: LONG,
        header_timeout: LONG,
        body_timeout: LONG,
        idle_timeout: LONG,
        max_connections: 100,
    }
}

/// `/ok` answers GET, `/echo` reads the whole body.
async fn start(limits: ServeLimits) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cert = tls::self_signed(&["localhost".to_string()]).unwrap();
    let cfg = Arc::new(tls::server_config(Arc::new(cert)).unwrap());
    let app = Router::new()
        .route("/ok", get(|| async { "ok" }))
        .route("/echo", post(|b: Bytes| async move { b.len().to_string() }));
    tokio::spawn(tls::serve_with(
        listener,
        cfg,
        app,
        limits,
        std::future::pending(),
    ));
    addr
}

const GET_OK: &[u8] = b"GET /ok HTTP/1.1\r\nHost: localhost\r\n\r\n";
const GET_OK_CLOSE: &[u8] = b"GET /ok HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";

/// One complete GET on `tls`, keep-alive: the response's bytes (`ok` body, so the end of
/// the response is its last two bytes).
async fn get_ok(tls: &mut TlsStream<TcpStream>) -> String {
    tls.write_all(GET_OK).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.ends_with(b"\r\n\r\nok") {
        let n = tls.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8(got).unwrap()
}

#[tokio::test]
async fn an_unfinished_request_head_is_closed_after_the_header_timeout() {
    let header = Duration::from_millis(400);
    let addr = start(ServeLimits {
        header_timeout: header,
        ..limits()
    })
    .await;
    // Idle after the handshake.
    let mut idle = connect(addr).await.unwrap();
    let t = Instant::now();
    read_until_closed(&mut idle).await;
    assert!(t.elapsed() >= header.mul_f64(0.9), "{:?}", t.elapsed());

    // A byte at a time, each well within the timeout: the head as a whole is bounded.
    let mut slow = connect(addr).await.unwrap();
    let t = Instant::now();
    let trickle = async {
        for b in GET_OK.iter().take(GET_OK.len() - 2) {
            if slow.write_all(&[*b]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), trickle)
        .await
        .unwrap();
    read_until_closed(&mut slow).await;
    assert!(t.elapsed() >= header.mul_f64(0.9), "{:?}", t.elapsed());
    // The server still answers.
    let mut fine = connect(addr).await.unwrap();
    assert!(get_ok(&mut fine).await.starts_with("HTTP/1.1 200"));
}

#[tokio::test]
async fn a_body_that_does_not_arrive_is_given_up_after_the_body_timeout() {
    let body = Duration::from_millis(400);
    let addr = start(ServeLimits {
        body_timeout: body,
        ..limits()
    })
    .await;
    let mut tls = connect(addr).await.unwrap();
    tls.write_all(b"POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000000\r\n\r\nx")
        .await
        .unwrap();
    let t = Instant::now();
    read_until_closed(&mut tls).await;
    assert!(t.elapsed() >= body.mul_f64(0.9), "{:?}", t.elapsed());
    // A body that does arrive is read (the handler's answer is its length).
    let mut tls = connect(addr).await.unwrap();
    tls.write_all(b"POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc")
        .await
        .unwrap();
    let got = String::from_utf8(read_until_closed(&mut tls).await).unwrap();
    assert!(
        got.starts_with("HTTP/1.1 200") && got.ends_with("\r\n\r\n3"),
        "{got}"
    );
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let idle = Duration::from_millis(400);
    let addr = start(ServeLimits {
        idle_timeout: idle,
        ..limits()
    })
    .await;
    let mut tls = connect(addr).await.unwrap();
    // Two requests on one connection, the second after a pause shorter than the timeout.
    assert!(get_ok(&mut tls).await.starts_with("HTTP/1.1 200"));
    tokio::time::sleep(idle / 4).await;
    assert!(get_ok(&mut tls).await.starts_with("HTTP/1.1 200"));
    let t = Instant::now();
    assert_eq!(read_until_closed(&mut tls).await, b"");
    assert!(t.elapsed() >= idle.mul_f64(0.9), "{:?}", t.elapsed());
}

#[tokio::test]
async fn connections_over_the_cap_are_closed_at_once_and_slots_come_back() {
    let addr = start(ServeLimits {
        max_connections: 2,
        ..limits()
    })
    .await;
    let mut a = connect(addr).await.unwrap();
    let b = connect(addr).await.unwrap();
    assert!(get_ok(&mut a).await.starts_with("HTTP/1.1 200"));
    // The third is closed before or right after its handshake; it is never answered.
    for _ in 0..3 {
        if let Ok(mut c) = connect(addr).await {
            let _ = c.write_all(GET_OK).await;
            assert_eq!(read_until_closed(&mut c).await, b"");
        }
    }
    // A closed connection frees its slot.
    drop(b);
    support::wait_for_async("a slot to come back", || async {
        match connect(addr).await {
            Ok(mut c) => {
                c.write_all(GET_OK_CLOSE).await.is_ok()
                    && read_until_closed(&mut c).await.starts_with(b"HTTP/1.1 200")
            }
            Err(_) => false,
        }
    })
    .await;
    drop(a);
}

/// `controller::run`'s secure port is served with `health_limits`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_secure_port_of_run_closes_unfinished_requests() {
    let server = fake_apiserver::FakeApiServer::start().await;
    let loaded = scheduler_core::config::load_str(
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
",
        "test.yaml",
    )
    .unwrap();
    let client = controller::client(Some(&server.kubeconfig()))
        .await
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cert = tls::self_signed(&["localhost".to_string()]).unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let header = Duration::from_millis(400);
    let task = tokio::spawn(controller::run(controller::RunOptions {
        health: Some(listener),
        health_tls: Some(Arc::new(tls::server_config(Arc::new(cert)).unwrap())),
        health_limits: ServeLimits {
            header_timeout: header,
            ..ServeLimits::secure_port()
        },
        ..controller::RunOptions::new(
            client,
            loaded,
            Box::pin(async move {
                let _ = rx.await;
            }),
        )
    }));
    let mut tls = connect(addr).await.unwrap();
    tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let t = Instant::now();
    read_until_closed(&mut tls).await;
    assert!(t.elapsed() >= header.mul_f64(0.9), "{:?}", t.elapsed());
    let mut tls = connect(addr).await.unwrap();
    tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let got = String::from_utf8(read_until_closed(&mut tls).await).unwrap();
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    support::stop_controller(tx, task).await;
}

/// `/configz` serves the effective config (flags applied, defaulted), the document
/// `config print -o json` prints, under `componentconfig`, to authorized users only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configz_serves_the_defaulted_config_behind_authorization() {
    let server = fake_apiserver::FakeApiServer::start().await;
    server.add_token("alice-token", "alice", &["system:authenticated"]);
    server.add_token("bob-token", "bob", &["system:authenticated"]);
    server.grant(fake_apiserver::Grant::non_resource(
        "alice", "get", "/configz",
    ));
    let mut loaded = scheduler_core::config::load_str(
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
percentageOfNodesToScore: 30
profiles:
- schedulerName: default-scheduler
- schedulerName: second
",
        "test.yaml",
    )
    .unwrap();
    // As `run` does: the flags are applied to the loaded config before it is served.
    loaded.config.client_connection.qps = 77.0;
    let expected = serde_json::json!({
        "componentconfig": scheduler_core::config::to_json(&loaded.config)
    });
    let client = controller::client(Some(&server.kubeconfig()))
        .await
        .unwrap();
    let auth = controller::auth::DelegatedAuth::new(
        Some(client.clone()),
        Some(client.clone()),
        controller::auth::DEFAULT_ALWAYS_ALLOW_PATHS
            .map(String::from)
            .to_vec(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(controller::run(controller::RunOptions {
        health: Some(listener),
        health_auth: Some(Arc::new(auth)),
        ..controller::RunOptions::new(
            client,
            loaded,
            Box::pin(async move {
                let _ = rx.await;
            }),
        )
    }));
    let (status, body) = support::http_get_as(addr, "/configz", Some("alice-token")).await;
    assert!(status.contains("200"), "{status} {body}");
    let got: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(got, expected);
    let cfg = &got["componentconfig"];
    assert_eq!(cfg["kind"], "KubeSchedulerConfiguration");
    assert_eq!(cfg["percentageOfNodesToScore"], 30);
    assert_eq!(cfg["clientConnection"]["qps"], 77.0);
    assert_eq!(cfg["profiles"][1]["schedulerName"], "second");
    // Defaulted: the fields the file left out are there.
    assert_eq!(cfg["podMaxBackoffSeconds"], 10);
    let (status, _) = support::http_get_as(addr, "/configz", None).await;
    assert!(status.contains("403"), "{status}");
    let (status, _) = support::http_get_as(addr, "/configz", Some("bob-token")).await;
    assert!(status.contains("403"), "{status}");
    let (status, _) = support::http_get_as(addr, "/configz", Some("nobody")).await;
    assert!(status.contains("401"), "{status}");
    support::stop_controller(tx, task).await;
}

#[test]
fn the_defaults_are_upstreams_secure_serving() {
    let d = ServeLimits::default();
    assert_eq!(d.header_timeout, Duration::from_secs(32));
    assert_eq!(d.handshake_timeout, Duration::from_secs(32));
    assert_eq!(d.idle_timeout, Duration::from_secs(90));
    assert_eq!(d.body_timeout, Duration::from_secs(30));
    assert_eq!(d.max_connections, 1024);
    assert_eq!(ServeLimits::secure_port().max_connections, 128);
}
