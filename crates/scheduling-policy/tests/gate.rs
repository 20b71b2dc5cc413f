//! SchedulingPolicy's gate under the controller, against the in-process fake API server,
//! wired as `ferrosched run` wires it (the controller with this crate's extensions).

use std::time::{Duration, Instant};

use fake_apiserver::FakeApiServer;
use serde_json::{Value, json};

const CONFIG: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
";

fn node(name: &str, cpu: &str, labels: Value) -> Value {
    json!({
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    })
}

fn pod(name: &str, cpu: &str, extra_spec: Value) -> Value {
    let mut spec = json!({
        "containers": [{"name": "c", "image": "img", "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}}],
    });
    if let (Value::Object(s), Value::Object(e)) = (&mut spec, extra_spec) {
        s.extend(e);
    }
    json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

/// Polls `f` every 20 ms for at most 10 s.
async fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

struct Running {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<controller::Result<()>>,
}

impl Running {
    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(Duration::from_secs(10), &mut self.task)
            .await
            .expect("controller stops promptly")
            .expect("controller task")
            .expect("controller exits cleanly");
    }
}

async fn start_with(server: &FakeApiServer, config: &str, instance: &str) -> Running {
    let loaded = scheduler_core::config::load_str(config, "test.yaml").unwrap();
    let client = controller::client(Some(&server.kubeconfig()))
        .await
        .unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let extensions = scheduling_policy::extensions(&loaded);
    let task = tokio::spawn(controller::run(controller::RunOptions {
        instance_id: instance.into(),
        health: Some(listener),
        extensions,
        ..controller::RunOptions::new(
            client,
            loaded,
            Box::pin(async move {
                let _ = rx.await;
            }),
        )
    }));
    Running {
        stop: Some(tx),
        task,
    }
}

/// The SchedulingPolicy plugin fed from the cluster: policies from the watch, rights from
/// SubjectAccessReviews; a pod outside them stays out with a FailedScheduling event listing
/// the violation, and is scheduled once a policy its service account may use allows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduling_policy_keeps_pods_out_until_a_usable_policy_allows_them() {
    use fake_apiserver::Grant;
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "default"}}));
    server.apply("nodes", &node("n1", "4", json!({})));
    let policy = |name: &str, allowed: Value| {
        json!({"apiVersion": "scheduling.ferrosched.io/v1alpha1", "kind": "SchedulingPolicy",
               "metadata": {"name": name}, "spec": {"allowed": allowed}})
    };
    let use_policy = |subject: &str, name: &str| Grant {
        subject: subject.into(),
        namespace: None,
        verb: "use".into(),
        group: "scheduling.ferrosched.io".into(),
        resource: "schedulingpolicies".into(),
        name: Some(name.into()),
    };
    server.apply(
        "schedulingpolicies",
        &policy(
            "restricted",
            json!({"schedulerNames": ["default-scheduler"]}),
        ),
    );
    server.grant(use_policy("system:authenticated", "restricted"));
    let config = format!(
        "{CONFIG}profiles:
- schedulerName: default-scheduler
  plugins:
    preEnqueue:
      enabled: [{{name: SchedulingPolicy}}]
"
    );
    let running = start_with(&server, &config, "test-host").await;
    server.apply("pods", &pod("plain", "100m", json!({})));
    server.apply(
        "pods",
        &pod(
            "tolerant",
            "100m",
            json!({"tolerations": [{"key": "k", "operator": "Exists"}]}),
        ),
    );
    wait_for("the allowed pod bound", || {
        server.node_of("default", "plain").as_deref() == Some("n1")
    })
    .await;
    wait_for("the kept-out pod reported", || {
        server
            .events_for("default", "tolerant")
            .iter()
            .any(|e| e["reason"] == "FailedScheduling")
    })
    .await;
    let ev = server
        .events_for("default", "tolerant")
        .into_iter()
        .find(|e| e["reason"] == "FailedScheduling")
        .unwrap();
    assert_eq!(
        ev["note"],
        format!(
            "{}: spec.tolerations[0] (key \"k\" Exists, any effect) is not allowed",
            scheduling_policy::gate::KEPT_OUT
        )
    );
    assert_eq!(server.node_of("default", "tolerant"), None);

    // A policy allowing tolerations, usable by the pod's service account: scheduled.
    server.grant(use_policy(
        "system:serviceaccount:default:default",
        "tolerations",
    ));
    server.apply(
        "schedulingpolicies",
        &policy("tolerations", json!({"tolerations": []})),
    );
    wait_for("the pod bound once allowed", || {
        server.node_of("default", "tolerant").as_deref() == Some("n1")
    })
    .await;
    running.stop().await;
}
