//! The metrics the common dashboards and alerts read (kubernetes-mixin's scheduler
//! dashboard and rules, and the rest of kube-scheduler's `pkg/scheduler/metrics`), scraped
//! from `controller::run`'s secure port (HTTPS, a bearer token authorized for `/metrics`)
//! after a few pods were scheduled, one preempted and one left unschedulable. Each name
//! must be there with upstream's type and label names, and each histogram with upstream's
//! bucket bounds. The table is the one docs/controller.md lists.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use controller::conn::ServeLimits;
use controller::tls;
use fake_apiserver::{FakeApiServer, Grant};
use rustls::pki_types::ServerName;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// `ExponentialBuckets(start, factor, count)` as Prometheus' Go client computes them.
fn exp(start: f64, factor: f64, count: usize) -> Vec<f64> {
    (0..count).map(|i| start * factor.powi(i as i32)).collect()
}

struct Expected {
    /// As PromQL sees it (counters with `_total`).
    name: &'static str,
    kind: &'static str,
    labels: &'static [&'static str],
    buckets: Option<Vec<f64>>,
    /// Whether this test's scenario must have produced a sample.
    sampled: bool,
}

fn expected() -> Vec<Expected> {
    let e = |name, kind, labels, buckets, sampled| Expected {
        name,
        kind,
        labels,
        buckets,
        sampled,
    };
    vec![
        // Read by kubernetes-mixin's dashboard, rules and alerts.
        e(
            "scheduler_schedule_attempts_total",
            "counter",
            &["result", "profile"],
            None,
            true,
        ),
        e(
            "scheduler_scheduling_attempt_duration_seconds",
            "histogram",
            &["result", "profile"],
            Some(exp(0.001, 2.0, 15)),
            true,
        ),
        e(
            "scheduler_scheduling_algorithm_duration_seconds",
            "histogram",
            &[],
            Some(exp(0.001, 2.0, 15)),
            true,
        ),
        e(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "histogram",
            &["attempts"],
            Some(exp(0.01, 2.0, 20)),
            true,
        ),
        e("scheduler_pending_pods", "gauge", &["queue"], None, true),
        e(
            "rest_client_requests_total",
            "counter",
            &["code", "method", "host"],
            None,
            true,
        ),
        e(
            "rest_client_request_duration_seconds",
            "histogram",
            &["verb", "host"],
            Some(vec![
                0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
            ]),
            true,
        ),
        e("process_cpu_seconds_total", "counter", &[], None, true),
        e("process_resident_memory_bytes", "gauge", &[], None, true),
        e("process_virtual_memory_bytes", "gauge", &[], None, true),
        e("process_start_time_seconds", "gauge", &[], None, true),
        e("process_open_fds", "gauge", &[], None, true),
        e("process_max_fds", "gauge", &[], None, true),
        // The rest of kube-scheduler's own metrics.
        e(
            "scheduler_pod_scheduling_attempts",
            "histogram",
            &[],
            Some(exp(1.0, 2.0, 5)),
            true,
        ),
        e(
            "scheduler_preemption_attempts_total",
            "counter",
            &[],
            None,
            true,
        ),
        e(
            "scheduler_preemption_victims",
            "histogram",
            &[],
            Some(exp(1.0, 2.0, 7)),
            true,
        ),
        e(
            "scheduler_preemption_goroutines_duration_seconds",
            "histogram",
            &["result"],
            Some(exp(0.01, 2.0, 20)),
            true,
        ),
        e(
            "scheduler_preemption_goroutines_execution_total",
            "counter",
            &["result"],
            None,
            true,
        ),
        e(
            "scheduler_framework_extension_point_duration_seconds",
            "histogram",
            &["extension_point", "status", "profile"],
            Some(exp(0.0001, 2.0, 12)),
            true,
        ),
        e(
            "scheduler_plugin_execution_duration_seconds",
            "histogram",
            &["plugin", "extension_point", "status"],
            Some(exp(0.00001, 1.5, 20)),
            true,
        ),
        e(
            "scheduler_queue_incoming_pods_total",
            "counter",
            &["queue", "event"],
            None,
            true,
        ),
        e(
            "scheduler_unschedulable_pods",
            "gauge",
            &["plugin", "profile"],
            None,
            true,
        ),
        e(
            "scheduler_event_handling_duration_seconds",
            "histogram",
            &["event"],
            Some(exp(0.0001, 2.0, 12)),
            true,
        ),
        e("scheduler_goroutines", "gauge", &["operation"], None, true),
        e(
            "scheduler_scheduler_cache_size",
            "gauge",
            &["type"],
            None,
            true,
        ),
        e(
            "scheduler_batch_attempts_total",
            "counter",
            &["profile", "result"],
            None,
            false,
        ),
        e(
            "scheduler_batch_cache_flushed_total",
            "counter",
            &["profile", "reason"],
            None,
            false,
        ),
        // client-go's, with leader election (on here).
        e(
            "leader_election_master_status",
            "gauge",
            &["name"],
            None,
            true,
        ),
    ]
}

/// The family name of a `# TYPE` line: OpenMetrics names a counter without `_total`.
fn family(name: &str, kind: &str) -> String {
    match kind {
        "counter" => name.trim_end_matches("_total").to_string(),
        _ => name.to_string(),
    }
}

/// Every sample line of `metric` (exactly that name): its labels.
fn samples(text: &str, metric: &str) -> Vec<BTreeMap<String, String>> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let rest = l.strip_prefix(metric)?;
            if rest.starts_with(' ') {
                return Some(BTreeMap::new());
            }
            let inner = rest.strip_prefix('{')?.split_once('}')?.0;
            Some(
                inner
                    .split("\",")
                    .filter(|kv| !kv.is_empty())
                    .filter_map(|kv| {
                        let (k, v) = kv.split_once("=\"")?;
                        Some((k.to_string(), v.trim_end_matches('"').to_string()))
                    })
                    .collect(),
            )
        })
        .collect()
}

async fn https_get(addr: std::net::SocketAddr, path: &str, token: &str) -> (u16, String) {
    let provider = tls::provider();
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(tls::NoVerify(provider)))
        .with_no_client_auth();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut s = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    s.write_all(
        format!("GET {path} HTTP/1.0\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n")
            .as_bytes(),
    )
    .await
    .unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    let out = String::from_utf8_lossy(&out).into_owned();
    let code = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (
        code,
        out.split("\r\n\r\n").nth(1).unwrap_or_default().to_string(),
    )
}

fn node(name: &str, cpu: &str) -> Value {
    json!({
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    })
}

fn pod(name: &str, cpu: &str, extra: Value) -> Value {
    let mut spec = json!({
        "containers": [{"name": "c", "image": "img",
                        "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}],
    });
    if let (Value::Object(s), Value::Object(e)) = (&mut spec, extra) {
        s.extend(e);
    }
    json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboards_metrics_are_served_with_upstreams_labels_and_buckets() {
    let server = FakeApiServer::start().await;
    server.add_token("prom-token", "prometheus", &["system:authenticated"]);
    server.grant(Grant::non_resource("prometheus", "get", "/metrics"));
    server.apply("namespaces", &json!({"metadata": {"name": "default"}}));
    server.apply("nodes", &node("n1", "2"));
    server.apply("nodes", &node("n2", "1"));
    server.apply(
        "pods",
        &pod("victim", "1500m", json!({"nodeName": "n1", "priority": 0})),
    );
    for p in ["small-1", "small-2"] {
        server.apply("pods", &pod(p, "100m", json!({})));
    }
    server.apply("pods", &pod("huge", "64", json!({})));
    server.apply("pods", &pod("urgent", "1500m", json!({"priority": 1000})));

    let loaded = scheduler_core::config::load_str(
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: true}
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
",
        "test.yaml",
    )
    .unwrap();
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
    let cert = tls::self_signed(&["localhost".to_string()]).unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(controller::run(controller::RunOptions {
        health: Some(listener),
        health_tls: Some(Arc::new(tls::server_config(Arc::new(cert)).unwrap())),
        health_auth: Some(Arc::new(auth)),
        health_limits: ServeLimits::secure_port(),
        ..controller::RunOptions::new(
            client,
            loaded,
            Box::pin(async move {
                let _ = rx.await;
            }),
        )
    }));
    support::wait_for("the small pods and the preemptor bound", || {
        ["small-1", "small-2", "urgent"]
            .iter()
            .all(|p| server.node_of("default", p).is_some())
    })
    .await;
    support::wait_for("huge reported unschedulable", || {
        server
            .events_for("default", "huge")
            .iter()
            .any(|e| e["reason"] == "FailedScheduling")
    })
    .await;
    // The preemption goroutine is counted once its deletions returned.
    let mut text = String::new();
    for _ in 0..200 {
        let (code, body) = https_get(addr, "/metrics", "prom-token").await;
        assert_eq!(code, 200, "{body}");
        text = body;
        if text.contains("scheduler_preemption_goroutines_execution_total{result=\"success\"}") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    let mut problems = Vec::new();
    for want in expected() {
        let fam = family(want.name, want.kind);
        // A family nothing was recorded in is left out of the exposition entirely.
        if !want.sampled && !text.contains(&format!("# TYPE {fam} ")) {
            continue;
        }
        if !text.contains(&format!("# TYPE {fam} {}\n", want.kind)) {
            problems.push(format!("{}: no `# TYPE {fam} {}`", want.name, want.kind));
            continue;
        }
        let sample_name = if want.kind == "histogram" {
            format!("{}_count", want.name)
        } else {
            want.name.to_string()
        };
        let found = samples(&text, &sample_name);
        if found.is_empty() {
            if want.sampled {
                problems.push(format!("{}: no sample", want.name));
            }
            continue;
        }
        let wanted: BTreeSet<&str> = want.labels.iter().copied().collect();
        for labels in &found {
            let got: BTreeSet<&str> = labels.keys().map(String::as_str).collect();
            if got != wanted {
                problems.push(format!(
                    "{}: labels {got:?}, upstream's {wanted:?}",
                    want.name
                ));
            }
        }
        if let Some(bounds) = &want.buckets {
            // The bounds of the first series (every series of a family has the same).
            let first = found[0].clone();
            let les: Vec<f64> = samples(&text, &format!("{}_bucket", want.name))
                .into_iter()
                .filter(|l| {
                    l.iter()
                        .filter(|(k, _)| *k != "le")
                        .all(|(k, v)| first.get(k) == Some(v))
                })
                .filter_map(|l| l.get("le").cloned())
                .filter(|le| le != "+Inf")
                .map(|le| le.parse().unwrap())
                .collect();
            let same = les.len() == bounds.len()
                && les
                    .iter()
                    .zip(bounds)
                    .all(|(a, b)| (a - b).abs() <= 1e-9 * b.abs().max(1e-12));
            if !same {
                problems.push(format!(
                    "{}: buckets {les:?}, upstream's {bounds:?}",
                    want.name
                ));
            }
        }
    }
    // Real values, not placeholders.
    let value = |line_start: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(line_start))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(-1.0)
    };
    assert!(value("process_resident_memory_bytes ") > 1e6, "{text}");
    assert!(
        value("scheduler_scheduler_cache_size{type=\"nodes\"}") == 2.0,
        "{text}"
    );
    assert!(
        value("scheduler_pod_scheduling_attempts_count ") >= 3.0,
        "{text}"
    );
    assert!(
        value("scheduler_scheduling_algorithm_duration_seconds_count ") >= 3.0,
        "{text}"
    );
    assert!(
        samples(&text, "rest_client_requests_total")
            .iter()
            .any(|l| l["method"] == "POST" && l["code"] == "201"),
        "a Binding or an event was created: {text}"
    );
    assert!(problems.is_empty(), "{}\n{text}", problems.join("\n"));
    support::stop_controller(tx, task).await;
}
