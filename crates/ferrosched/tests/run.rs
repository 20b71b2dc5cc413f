//! `ferrosched run` as a process: config errors exit 1 before any network call; against the
//! fake API server it schedules, and SIGTERM stops it with exit 0.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use fake_apiserver::FakeApiServer;
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_ferrosched");

#[test]
fn a_bad_config_exits_1_before_touching_the_cluster() {
    let dir = std::env::temp_dir().join(format!("ferrosched-run-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("bad.yaml");
    std::fs::write(
        &config,
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles: [{schedulerName: x, plugins: {filter: {enabled: [{name: Nope}]}}}]\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["run", "--secure-port", "0", "--config"])
        .arg(&config)
        .args(["--kubeconfig", "/nonexistent/kubeconfig"])
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("FilterPlugin \"Nope\" does not exist"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("kubeconfig"),
        "no client was built: {stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_then_stops_cleanly_on_sigterm() {
    let server = FakeApiServer::start().await;
    server.apply(
        "nodes",
        &json!({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"}}}),
    );
    server.apply(
        "pods",
        &json!({"metadata": {"name": "p", "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "i"}]}}),
    );
    server.add_token("scraper", "prometheus", &[]);
    server.grant(fake_apiserver::Grant::non_resource(
        "prometheus",
        "get",
        "/metrics",
    ));
    let port = free_port();
    let mut child = Command::new(BIN)
        .args(["run", "--bind-address", "127.0.0.1", "--secure-port"])
        .arg(port.to_string())
        .arg("--kubeconfig")
        .arg(server.kubeconfig())
        .arg("--authentication-kubeconfig")
        .arg(server.kubeconfig())
        .arg("--authorization-kubeconfig")
        .arg(server.kubeconfig())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.node_of("default", "p").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("pod not bound");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The health port speaks HTTPS (self-signed), as kube-scheduler's does.
    let (status, body) = https_get(port, "/readyz").await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    // /metrics is delegated to the API server, as kube-scheduler's.
    let (status, body) = https_get(port, "/metrics").await;
    assert_eq!(status, 403, "{body}");
    let (status, _) = https_get_as(port, "/metrics", Some("not-a-token")).await;
    assert_eq!(status, 401);
    let (status, metrics) = https_get_as(port, "/metrics", Some("scraper")).await;
    assert_eq!(status, 200);
    assert!(
        metrics.contains("scheduler_schedule_attempts_total{result=\"scheduled\",profile=\"default-scheduler\"} 1"),
        "{metrics}"
    );
    use rustix::process::{Pid, Signal, kill_process};
    kill_process(Pid::from_child(&child), Signal::TERM).expect("SIGTERM");
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("did not stop after SIGTERM");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.success(), "{status:?}");
    assert_eq!(server.bindings(), vec![("default/p".into(), "n1".into())]);
}

/// kube-scheduler's hardened flags are accepted; `--logging-format=json` writes one JSON
/// object per line; `/configz` serves what `config print -o json` prints.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_compat_flags_and_configz() {
    let server = FakeApiServer::start().await;
    server.apply(
        "nodes",
        &json!({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"}}}),
    );
    server.apply(
        "pods",
        &json!({"metadata": {"name": "p", "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "i"}]}}),
    );
    server.add_token("reader", "config-reader", &[]);
    server.grant(fake_apiserver::Grant::non_resource(
        "config-reader",
        "get",
        "/configz",
    ));
    let port = free_port();
    let mut child = Command::new(BIN)
        .args(["run", "--bind-address", "127.0.0.1", "--secure-port"])
        .arg(port.to_string())
        .arg("--kubeconfig")
        .arg(server.kubeconfig())
        .arg("--authentication-kubeconfig")
        .arg(server.kubeconfig())
        .arg("--authorization-kubeconfig")
        .arg(server.kubeconfig())
        .args([
            "--logging-format=json",
            "--log-flush-frequency=5s",
            "--profiling=false",
            "--contention-profiling=false",
            "-v=4",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read as it comes, so a full pipe never blocks the scheduler.
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut err, &mut s).unwrap();
        s
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.node_of("default", "p").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("pod not bound");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, body) = https_get_as(port, "/configz", Some("reader")).await;
    assert_eq!(status, 200, "{body}");
    let configz: serde_json::Value = serde_json::from_str(&body).unwrap();
    let printed = Command::new(BIN)
        .args(["config", "print", "-o", "json"])
        .output()
        .unwrap();
    assert!(printed.status.success());
    let printed: serde_json::Value = serde_json::from_slice(&printed.stdout).unwrap();
    assert_eq!(configz, json!({ "componentconfig": printed }));
    let (status, _) = https_get(port, "/configz").await;
    assert_eq!(status, 403);
    use rustix::process::{Pid, Signal, kill_process};
    kill_process(Pid::from_child(&child), Signal::TERM).expect("SIGTERM");
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let stderr = reader.join().unwrap();
    let lines: Vec<serde_json::Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(lines.len() > 3, "{stderr}");
    for l in &lines {
        assert!(l["ts"].is_f64(), "{l}");
        assert!(l["msg"].is_string(), "{l}");
        assert!(l["caller"].as_str().unwrap().contains(".rs:"), "{l}");
        assert!(l["v"].is_u64() || l.get("v").is_none(), "{l}");
    }
    // -v=4 shows debug lines, at v 4.
    assert!(lines.iter().any(|l| l["v"] == 4), "{stderr}");
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// One HTTP/1.1 GET over TLS: (status, body).
async fn https_get(port: u16, path: &str) -> (u16, String) {
    https_get_as(port, path, None).await
}

/// GET with `Authorization: Bearer <token>` when given.
async fn https_get_as(port: u16, path: &str, token: Option<&str>) -> (u16, String) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(controller::tls::NoVerify(provider)))
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{auth}Connection: close\r\n\r\n");
    tls.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let _ = tls.read_to_end(&mut raw).await;
    let text = String::from_utf8_lossy(&raw).to_string();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    // axum answers small bodies with Content-Length, never chunked here.
    assert!(!head.to_ascii_lowercase().contains("chunked"), "{head}");
    (status, body.to_string())
}

#[test]
fn a_bad_serving_certificate_exits_1_before_touching_the_cluster() {
    let out = Command::new(BIN)
        .args([
            "run",
            "--tls-cert-file",
            "/nonexistent/tls.crt",
            "--tls-private-key-file",
            "/nonexistent/tls.key",
            "--kubeconfig",
            "/nonexistent/kubeconfig",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/nonexistent/tls.crt"), "{stderr}");
    assert!(
        !stderr.contains("kubeconfig"),
        "no client was built: {stderr}"
    );

    // A certificate without its key is a usage error.
    let out = Command::new(BIN)
        .args(["run", "--tls-cert-file", "/nonexistent/tls.crt"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--tls-private-key-file"), "{stderr}");
}
