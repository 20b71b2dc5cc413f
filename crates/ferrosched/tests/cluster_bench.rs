//! `ferrosched bench --kubeconfig` as a process against the fake API server: it creates the
//! run's nodes and pods, its scheduler child binds every measured pod exactly once, the
//! JSON report is sane, and cleanup leaves nothing behind.

use std::collections::BTreeMap;
use std::process::Command;

use fake_apiserver::FakeApiServer;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_ferrosched");

/// Runs `ferrosched bench --kubeconfig KUBECONFIG ARGS...` (`args` split at spaces),
/// expects success and returns its JSON report.
async fn bench_json(kubeconfig: std::path::PathBuf, args: &str) -> Value {
    let args: Vec<String> = args.split_whitespace().map(str::to_string).collect();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(BIN)
            .args(["bench", "--kubeconfig"])
            .arg(&kubeconfig)
            .args(&args)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{stderr}", out.status);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn benches_against_an_api_server_and_cleans_up() {
    let server = FakeApiServer::start().await;
    let kubeconfig = server.kubeconfig();
    let report = bench_json(
        kubeconfig,
        "--workload SchedulingBasic --nodes 20 --init-pods 20 --pods 50 --json --stall-timeout 20",
    )
    .await;
    let r = &report.as_array().expect("one result per workload")[0];
    assert_eq!(r["workload"], "SchedulingBasic");
    assert_eq!(r["nodes"], 20);
    assert_eq!(r["initScheduled"], 20);
    assert_eq!(
        (r["scheduled"].as_u64(), r["measuredPods"].as_u64()),
        (Some(50), Some(50))
    );
    assert_eq!(r["complete"], true);
    for field in [
        "podsPerSecond",
        "cpuSeconds",
        "peakRssMib",
        "createPodsPerSecond",
    ] {
        assert!(r[field].as_f64().is_some_and(|v| v > 0.0), "{field}: {r}");
    }
    assert!(r["throughput"]["average"].as_f64().unwrap() > 0.0, "{r}");
    assert!(r["throughput"]["samples"].as_u64().unwrap() >= 1, "{r}");

    // Every pod of the run was bound exactly once, to one of the run's nodes.
    let ns = r["namespace"].as_str().unwrap();
    let run = r["runId"].as_str().unwrap();
    let mut per_pod: BTreeMap<String, usize> = BTreeMap::new();
    for (pod, node) in server.bindings() {
        let (pod_ns, name) = pod.split_once('/').unwrap();
        assert_eq!(pod_ns, ns);
        assert!(
            node.starts_with(&format!("ferrosched-bench-{run}-node-")),
            "{node}"
        );
        *per_pod.entry(name.to_string()).or_default() += 1;
    }
    assert!(per_pod.values().all(|&n| n == 1), "{per_pod:?}");
    let measured = per_pod
        .keys()
        .filter(|n| n.starts_with("measured-"))
        .count();
    let init = per_pod.keys().filter(|n| n.starts_with("init-")).count();
    assert_eq!((init, measured), (20, 50));

    // Cleanup removed everything the run created.
    for collection in ["pods", "nodes", "namespaces", "priorityclasses"] {
        assert_eq!(server.list(collection), Vec::<Value>::new(), "{collection}");
    }
}

#[test]
fn a_missing_kube_scheduler_binary_is_refused_before_touching_the_cluster() {
    // The kubeconfig points nowhere: the check must come before any API call.
    let out = Command::new(BIN)
        .args(["bench", "--kubeconfig", "/nonexistent/kubeconfig"])
        .args(["--kube-scheduler", "/nonexistent/kube-scheduler"])
        .args(["--workload", "SchedulingBasic", "--nodes", "5"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--kube-scheduler /nonexistent/kube-scheduler: no such file"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_first_and_the_binding_ceiling_bind_every_pod_once() {
    let server = FakeApiServer::start().await;
    let kubeconfig = server.kubeconfig();
    let report = bench_json(
        kubeconfig,
        "--workload SchedulingBasic --nodes 10 --init-pods 10 --pods 30 -o json --stall-timeout 20 --pods-first --binding-ceiling",
    )
    .await;
    let rows = report.as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["scheduler"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ferrosched", "binding-ceiling"]);
    for r in rows {
        assert_eq!(r["complete"], true, "{r}");
        assert_eq!(r["podsFirst"], true, "{r}");
        assert_eq!(
            (r["initScheduled"].as_u64(), r["scheduled"].as_u64()),
            (Some(10), Some(30))
        );
        assert!(r["podsPerSecond"].as_f64().unwrap() > 0.0, "{r}");
        // Each run's pods were bound once each, to that run's nodes.
        let ns = r["namespace"].as_str().unwrap();
        let run = r["runId"].as_str().unwrap();
        let mut per_pod: BTreeMap<String, usize> = BTreeMap::new();
        for (pod, node) in server.bindings() {
            let Some(name) = pod.strip_prefix(&format!("{ns}/")) else {
                continue;
            };
            assert!(
                node.starts_with(&format!("ferrosched-bench-{run}-node-")),
                "{node}"
            );
            *per_pod.entry(name.to_string()).or_default() += 1;
        }
        assert_eq!(per_pod.len(), 40, "{per_pod:?}");
        assert!(per_pod.values().all(|&n| n == 1), "{per_pod:?}");
    }
    // The scheduler that bound the measured pods was a second process, measured whole;
    // the ceiling has no process to measure.
    assert!(rows[0]["cpuSeconds"].as_f64().unwrap() > 0.0);
    assert!(rows[0]["peakRssMib"].as_f64().unwrap() > 0.0);
    assert_eq!(rows[1]["cpuSeconds"].as_f64(), Some(0.0));
}

/// The identical-pods workloads run against an API server too, batching on and off (the
/// child gets `--feature-gates=OpportunisticBatching=false` for the second): one pod per
/// node, every pod bound once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_pods_run_against_an_api_server_with_and_without_batching() {
    let server = FakeApiServer::start().await;
    let kubeconfig = server.kubeconfig();
    let report = bench_json(
        kubeconfig,
        "--workload IdenticalPods --workload IdenticalPodsWithoutBatching --nodes 30 --init-pods 5 --pods 20 -o json --stall-timeout 20",
    )
    .await;
    let rows = report.as_array().expect("one result per workload");
    let names: Vec<&str> = rows.iter().filter_map(|r| r["workload"].as_str()).collect();
    assert_eq!(names, ["IdenticalPods", "IdenticalPodsWithoutBatching"]);
    for r in rows {
        assert_eq!(r["complete"], true, "{r}");
        assert_eq!(
            (r["initScheduled"].as_u64(), r["scheduled"].as_u64()),
            (Some(5), Some(20))
        );
    }
    // 3 of a node's 4 CPUs each: never two pods of a run on one node.
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    for (_, node) in server.bindings() {
        *per_node.entry(node).or_default() += 1;
    }
    assert_eq!(per_node.values().sum::<usize>(), 50, "{per_node:?}");
    assert!(per_node.values().all(|&n| n == 1), "{per_node:?}");
}
