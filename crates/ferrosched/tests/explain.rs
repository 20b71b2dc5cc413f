//! `ferrosched explain NAMESPACE/POD` against the fake API server: the same explanation as
//! `simulate --explain`, and nothing but reads.

use fake_apiserver::FakeApiServer;
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_ferrosched");

fn node(name: &str, cpu: &str) -> serde_json::Value {
    json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
           "status": {"allocatable": {"cpu": cpu, "memory": "4Gi", "pods": "10"}}})
}

fn pod(name: &str, cpu: &str, node: Option<&str>) -> serde_json::Value {
    let mut spec = json!({"containers": [{"name": "c", "image": "i",
        "resources": {"requests": {"cpu": cpu}}}]});
    if let Some(n) = node {
        spec["nodeName"] = json!(n);
    }
    json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

async fn explain(server: &FakeApiServer, args: &[&str]) -> std::process::Output {
    // A file per call: the tests run in parallel, and one must never read another's file
    // while it is being written.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("ferrosched-explain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join(format!("config-{call}.yaml"));
    std::fs::write(
        &cfg,
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
    )
    .unwrap();
    let mut cmd = std::process::Command::new(BIN);
    cmd.arg("explain")
        .args(args)
        .arg("--kubeconfig")
        .arg(server.kubeconfig())
        .arg("--config")
        .arg(&cfg);
    // The server runs on this runtime: wait for the child off its threads.
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explains_a_pending_and_a_bound_pod_reading_only() {
    let server = FakeApiServer::start().await;
    server.apply("nodes", &node("small", "1"));
    server.apply("nodes", &node("big", "4"));
    server.apply("pods", &pod("running", "500m", Some("small")));
    server.apply("pods", &pod("huge", "8", None));
    server.apply("pods", &pod("fits", "1", None));

    let o = explain(&server, &["default/huge", "-o", "json"]).await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "ferrosched.io/explain/v1");
    assert_eq!(v["outcome"], "unschedulable");
    assert_eq!(
        v["message"],
        "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.."
    );
    assert_eq!(v["nodes"].as_array().unwrap().len(), 2);
    assert_eq!(
        v["hints"][0]["text"],
        "the pod asks for more cpu than 2 nodes have allocatable in total"
    );

    let o = explain(&server, &["default/fits"]).await;
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        table.starts_with("default/fits (profile default-scheduler): scheduled on big\n"),
        "{table}"
    );
    assert!(table.contains("Chosen: big"), "{table}");

    // A bound pod: its placement as of now, with a note that the cluster may have changed.
    let o = explain(&server, &["default/running"]).await;
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(
            "default/running is already bound to small; this explains a placement as of now"
        ),
        "{err}"
    );

    let o = explain(&server, &["default/nope"]).await;
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("error: pod default/nope not found"));

    // Nothing was written: only lists.
    let verbs: std::collections::BTreeSet<String> =
        server.requests().into_iter().map(|r| r.verb).collect();
    assert_eq!(verbs.into_iter().collect::<Vec<_>>(), vec!["list"]);
    // ... and every one of them is allowed by the read-only role in manifests/explain/.
    let rbac = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../manifests/explain/rbac.yaml"
    ))
    .unwrap();
    let role: serde_json::Value = serde_saphyr::from_multiple::<serde_json::Value>(&rbac)
        .unwrap()
        .into_iter()
        .find(|d| d["kind"] == "ClusterRole")
        .unwrap();
    for r in server.requests() {
        let allowed = role["rules"].as_array().unwrap().iter().any(|rule| {
            let has = |field: &str, v: &str| {
                rule[field]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|x| x.as_str() == Some(v))
            };
            has("apiGroups", &r.group) && has("resources", &r.resource) && has("verbs", &r.verb)
        });
        assert!(allowed, "not allowed by ferrosched-explain: {r:?}");
    }
    assert!(server.bindings().is_empty());
    assert!(server.events().is_empty());
}

async fn explain_without_config(server: &FakeApiServer, args: &[&str]) -> std::process::Output {
    let mut cmd = std::process::Command::new(BIN);
    cmd.arg("explain")
        .args(args)
        .arg("--kubeconfig")
        .arg(server.kubeconfig());
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

/// Without --config, the config the running scheduler uses, from its ConfigMap; a missing
/// ConfigMap or key is named with both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_the_config_from_the_schedulers_config_map() {
    let server = FakeApiServer::start().await;
    server.apply("nodes", &node("small", "1"));
    server.apply("nodes", &node("big", "4"));
    let mut p = pod("batch", "2", None);
    p["spec"]["schedulerName"] = json!("from-map");
    server.apply("pods", &p);
    server.apply(
        "configmaps",
        &json!({
            "metadata": {"name": "ferrosched-config", "namespace": "kube-system"},
            "data": {"config.yaml": "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: from-map\n"},
        }),
    );

    // The default --config-map: kube-system/ferrosched-config, key config.yaml.
    let o = explain_without_config(&server, &["default/batch", "-o", "json"]).await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["profile"], "from-map");
    assert_eq!(v["node"], "big");

    let o = explain_without_config(
        &server,
        &[
            "default/batch",
            "--config-map",
            "kube-system/nope:config.yaml",
        ],
    )
    .await;
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("ConfigMap kube-system/nope not found, so there is no key \"config.yaml\""),
        "{err}"
    );

    let o = explain_without_config(
        &server,
        &[
            "default/batch",
            "--config-map",
            "kube-system/ferrosched-config:scheduler.yaml",
        ],
    )
    .await;
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(
            "ConfigMap kube-system/ferrosched-config has no key \"scheduler.yaml\" (its keys: config.yaml)"
        ),
        "{err}"
    );

    // Reads only: the ConfigMap is a get, allowed by the Role in manifests/explain/.
    let gets: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.verb == "get")
        .collect();
    assert!(gets.iter().all(|r| r.resource == "configmaps"), "{gets:?}");
    assert!(
        server
            .requests()
            .iter()
            .all(|r| r.verb == "get" || r.verb == "list"),
        "{:?}",
        server.requests()
    );
}

fn gpu_node(name: &str) -> serde_json::Value {
    json!({"metadata": {"name": name},
           "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"}}})
}

fn gang_member(name: &str, group: &str) -> serde_json::Value {
    json!({"metadata": {"name": name, "namespace": "ml"},
           "spec": {"schedulingGroup": {"podGroupName": group},
                    "containers": [{"name": "c", "image": "trainer",
                                    "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}})
}

fn pod_group(name: &str, min_count: u32) -> serde_json::Value {
    json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
           "metadata": {"name": name, "namespace": "ml"},
           "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}})
}

/// "Why is my gang pending?": a pod of a gang is explained by its group's cycle (which
/// members fit where, which did not, what minCount needed); one short of its quorum by
/// PreEnqueue's wait, as an explanation rather than an error. Still only lists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explains_a_pending_gang_by_its_group() {
    let server = FakeApiServer::start().await;
    server.apply("nodes", &gpu_node("gpu-0"));
    server.apply("nodes", &gpu_node("gpu-1"));
    server.apply("podgroups", &pod_group("train", 3));
    for i in 0..3 {
        server.apply("pods", &gang_member(&format!("train-{i}"), "train"));
    }
    server.apply("podgroups", &pod_group("short", 3));
    server.apply("pods", &gang_member("short-0", "short"));

    let o = explain(&server, &["ml/train-2", "-o", "json"]).await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let g = &v["group"];
    assert_eq!(g["podGroup"], "ml/train");
    assert_eq!(g["apiVersion"], "scheduling.k8s.io/v1beta1");
    assert_eq!(g["policy"], "gang");
    assert_eq!(g["minCount"], 3);
    assert_eq!(g["outcome"], "unschedulable");
    assert_eq!(
        g["message"],
        "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining"
    );
    let results: Vec<&str> = g["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["result"].as_str().unwrap())
        .collect();
    assert_eq!(results, ["fitted", "fitted", "unschedulable"]);
    assert_eq!(
        v["message"],
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    );

    let o = explain(&server, &["ml/train-0"]).await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table.starts_with(
            "Pod group ml/train (PodGroup scheduling.k8s.io/v1beta1, gang, minCount 3): unschedulable\n"
        ),
        "{table}"
    );
    assert!(table.contains("\nml/train-0 (profile default-scheduler): unschedulable\n  pod group \"train\": minCount (3) cannot be satisfied"), "{table}");

    let o = explain(&server, &["ml/short-0", "-o", "json"]).await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["group"]["outcome"], "waiting");
    assert_eq!(
        v["message"],
        "waiting for minCount pods from a gang to appear in scheduling queue"
    );

    let verbs: std::collections::BTreeSet<String> =
        server.requests().into_iter().map(|r| r.verb).collect();
    assert_eq!(verbs.into_iter().collect::<Vec<_>>(), vec!["list"]);
    assert!(server.bindings().is_empty());
}

/// `simulate --kubeconfig` reads a live cluster as `explain` does (lists only) and answers
/// the what-if questions on it: here how many copies of a 1-CPU pod still fit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulate_reads_a_live_cluster_without_writing() {
    let server = FakeApiServer::start().await;
    server.apply("namespaces", &json!({"metadata": {"name": "default"}}));
    server.apply("nodes", &node("n1", "3"));
    server.apply("nodes", &node("n2", "2"));
    server.apply("pods", &pod("running", "1", Some("n1")));
    server.apply("pods", &pod("pending", "1", None));
    let dir = std::env::temp_dir().join(format!("ferrosched-sim-live-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("config.yaml");
    std::fs::write(
        &cfg,
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
    )
    .unwrap();
    let template = dir.join("copy.yaml");
    std::fs::write(
        &template,
        serde_json::to_string(&json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "copy", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i",
                "resources": {"requests": {"cpu": "1"}}}]}}))
        .unwrap(),
    )
    .unwrap();
    let mut cmd = std::process::Command::new(BIN);
    cmd.arg("simulate")
        .arg("--kubeconfig")
        .arg(server.kubeconfig())
        .arg("--config")
        .arg(&cfg)
        .arg("--pod-template")
        .arg(&template)
        .args(["-o", "json"]);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // 5 CPUs, 1 running, 1 pending placed first: 3 copies fit.
    assert_eq!(v["placed"], 3, "{v}");
    let verbs: std::collections::BTreeSet<String> =
        server.requests().into_iter().map(|r| r.verb).collect();
    assert_eq!(verbs.into_iter().collect::<Vec<_>>(), vec!["list"]);
    assert_eq!(
        server.node_of("default", "pending"),
        None,
        "nothing was bound"
    );
    // A dump and a live cluster at once is refused.
    let o = std::process::Command::new(BIN)
        .args(["simulate", "--cluster", "x.yaml", "--kubeconfig", "y"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}
