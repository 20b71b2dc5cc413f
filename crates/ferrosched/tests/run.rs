//! `ferrosched run` as a process: config errors exit 1 before any network call; against the
//! fake API server it schedules, and SIGTERM stops it with exit 0.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
    let mut child = Command::new(BIN)
        .args(["run", "--secure-port", "0", "--kubeconfig"])
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
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
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
